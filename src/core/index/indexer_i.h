/*
 * The walk of the indexer (indexer_walk.c), and the items it gives
 * sfs_indexer_build (indexer.c): one per shard, a file or the files of a
 * `files` sample.  Not public.
 */
#ifndef SHARDFS_INDEXER_I_H
#define SHARDFS_INDEXER_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shardfs/digest.h"
#include "shardfs/error.h"
#include "shardfs/format.h"
#include "shardfs/index.h"
#include "shardfs/indexer.h"
#include "shardfs/spill.h"

/* One shard to index: a file, or a group of files for `files`. */
struct item {
	char *path;
	uint64_t size; /* from the walk */
	int64_t mtime_ns;
	const struct sfs_format_ops *ops;
	struct sfs_member *members;
	size_t nmembers, members_cap;
	const struct sfs_shard *prev; /* reusable entry, or NULL */

	/* results, written by the one worker that takes the item */
	struct sfs_scan scan;
	unsigned char digest[SFS_DIGEST_LEN];
	bool hashed;
	unsigned char *sdig; /* SFS_DIGEST_LEN per sample not spilled yet */
	uint64_t nsdig; /* samples digested */
	uint64_t sdig_spilled; /* of those, the ones in the spill */
	size_t sdig_cap; /* bytes, while collect_digest fills sdig */
	struct sfs_spill *spill; /* where digests go as they come, or NULL */
	size_t rec; /* the item's record there */
	struct sfs_error *spill_err; /* why appending to it failed */
	bool spill_failed;
	int rc;
	char *msg;
	bool fatal; /* not the shard's fault (spilling): fails the build */
};

struct walk {
	struct item *items;
	size_t n, cap;
	size_t ignored;
};

/*
 * The shards of o->source (open as srcfd) into w: the regular files whose
 * format is known (o->format, or their extension), in path order, those
 * of a tree format with one key grouped into one item, only part o->part
 * of o->nparts when o->nparts.  Names starting with '.' are skipped, and
 * directories are opened as shards are (no symlink on the way).  Returns
 * 0, or a negative errno with a message in err; w holds what it found
 * either way (sfs_indexer_walk_clear).
 */
int sfs_indexer_walk(struct walk *w, int srcfd,
		     const struct sfs_indexer_opts *o, struct sfs_error *err);

/* Free what an item holds. */
void sfs_indexer_item_clear(struct item *it);

/* Free the items of w. */
void sfs_indexer_walk_clear(struct walk *w);

#endif
