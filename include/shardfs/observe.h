/*
 * Observing mounted views as a loader reads them, for the auditor: every
 * worker directory of every view listed in name order, every file read
 * through its format driver (tar members, jsonl lines, TFRecord records,
 * files; a reader's Lance dataset by its manifest and deletion files),
 * every sample hashed and mapped back to the source sample with that
 * digest.  The views' own status (MNT/.shardfs/status) says what they
 * serve; the views must serve one source and index, one epoch each.
 */
#ifndef SHARDFS_OBSERVE_H
#define SHARDFS_OBSERVE_H

#include <stdbool.h>
#include <stddef.h>

#include "shardfs/audit.h"
#include "shardfs/error.h"
#include "shardfs/index.h"
#include "shardfs/pool.h"

struct sfs_observe_opts {
	unsigned jobs; /* threads, 0: one per CPU */
	size_t max_findings; /* messages kept per verdict */
	/* also hash a reader's dataset's data files served as files (not
	 * symlinks) against the source's (shardfs-check --verify) */
	bool verify;
	/* progress of each pass ("hashing source shards", "reading view
	 * files"), from the calling thread; NULL for none */
	void (*progress)(const char *what, const struct sfs_pool *p, bool final,
			 void *arg);
	void *arg;
};

/* What was seen. */
struct sfs_observation {
	struct sfs_index *idx; /* the index the views serve */
	struct sfs_audit audit; /* a mount per view, a reader per worker
				 * directory, every sample read */
	struct sfs_verdict found; /* findings made while reading: a stale
				   * index, a source shard or a view file that
				   * cannot be read */
};

/*
 * Observe the n views mounted at paths (borrowed).  Returns 0 and fills
 * *out (sfs_observation_clear frees it; judge out->audit with
 * sfs_audit_judge over out->idx, and add out->found), or -errno with a
 * message: a path that is not a view, views of different sources or
 * indexes, a view with epochs > 1, an index that cannot be loaded,
 * -ENOMEM.  *out is empty then.
 */
int sfs_observe_views(const char *const *paths, size_t n,
		      const struct sfs_observe_opts *o,
		      struct sfs_observation *out, struct sfs_error *err);

/* Whether the view at path serves a followed source (follow=1): its
 * status has a "follow" object. */
bool sfs_observe_is_follow(const char *path);

/*
 * Audit the n followed views mounted at paths (borrowed): every window
 * each lists, every reader's window file read and compared, sample by
 * sample, with the source samples the window's plan names; and, for a
 * complete stream, every stream file with its window files laid end to
 * end (docs/check.md).  Findings go into *v (max_findings kept; totals
 * over the windows audited).  Returns 0 (a verdict with no finding is a
 * pass), or -errno with a message: a status that is not a followed
 * view's, a source that cannot be followed, -ENOMEM.
 */
int sfs_observe_follow(const char *const *paths, size_t n,
		       const struct sfs_observe_opts *o, struct sfs_verdict *v,
		       struct sfs_error *err);

/* Free what an observation holds and empty it. */
void sfs_observation_clear(struct sfs_observation *ob);

#endif
