/*
 * Mixtures: several indexed sources served as one, each with a weight.
 *
 * A mixture file is JSON (docs/plan.md, "Mixtures"):
 *   {"sources": [{"path": "/data/web", "proportion": 3},
 *                {"path": "/data/code", "proportion": 1, "name": "code",
 *                 "index": "/idx/code"}],
 *    "epoch_size": 200000, "sampling": "balanced", "batching": "random"}
 * Relative paths are relative to the mixture file's directory.  Every
 * source has exactly one weight, of the same kind for all: proportion (a
 * relative weight), repeat (a factor) or choose (samples per epoch).
 *
 * The loader (mixture_load.c, the last section) loads and joins the
 * sources' indexes.  Loading a mixture yields one index (struct sfs_index)
 * whose source is the deepest directory that holds every source and whose
 * shards are every source's shards, their paths relative to that
 * directory, sorted by path as in any index: a source's shards are
 * consecutive there (sources may not overlap).  The index owns the
 * mixture as its joiner (index.h: it knows no more of it than how to free
 * it), and the plan finds it there (sfs_mix_of); everything else treats
 * the index as any other.  A directory given where a source is accepted
 * is loaded as the one index it is, without a mixture.
 */
#ifndef SHARDFS_MIXTURE_H
#define SHARDFS_MIXTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shardfs/digest.h"
#include "shardfs/error.h"
#include "shardfs/index.h"

#define SFS_MIX_SOURCES_MAX 1024
/* proportion and repeat are read to 9 decimal places */
#define SFS_MIX_SCALE 1000000000ULL

enum sfs_mix_weight {
	SFS_MIX_PROPORTION, /* relative weights of epoch_size */
	SFS_MIX_REPEAT, /* samples = round(repeat * the source's samples) */
	SFS_MIX_CHOOSE, /* samples per epoch */
};

enum sfs_mix_sampling {
	SFS_MIX_BALANCED, /* each epoch continues where the last stopped */
	SFS_MIX_FIXED, /* each epoch takes the same samples */
};

enum sfs_mix_batching {
	SFS_MIX_RANDOM, /* the sources' pieces shuffled together */
	SFS_MIX_STRATIFIED, /* every stretch holds each source in proportion */
};

struct sfs_mix_source {
	char *name; /* [A-Za-z0-9._-], unique; default: the path's basename */
	char *path; /* absolute, resolved */
	char *index_dir; /* NULL: PATH/.shardfs */
	/* proportion or repeat times SFS_MIX_SCALE (rounded half up), or
	 * choose */
	uint64_t weight;
	size_t shard_lo, shard_hi; /* its shards in the mixture's index */
	size_t prefix_len; /* their paths there start with this many bytes
			    * of the source's directory ("web/") */
	uint64_t nsamples;
};

struct sfs_mix {
	struct sfs_index_joiner joiner; /* as the index that owns it sees it */
	char *file; /* as given */
	enum sfs_mix_weight kind;
	uint64_t epoch_size; /* 0: the default (docs/plan.md) */
	enum sfs_mix_sampling sampling;
	enum sfs_mix_batching batching;
	struct sfs_mix_source *sources;
	size_t nsources;
	/* SHA-256 of what the plan depends on: names, weights, epoch_size,
	 * sampling, batching and every source's shard paths and counts (not
	 * where the sources are), so ranks can compare mixtures */
	unsigned char digest[SFS_DIGEST_LEN];
};

/* The source (index into m->sources) that holds shard number shard. */
size_t sfs_mix_source_of(const struct sfs_mix *m, size_t shard);

void sfs_mix_free(struct sfs_mix *m);

/*
 * Hand m to idx (taken): idx frees it (sfs_index_free), and sfs_mix_of
 * finds it.  idx must have no joiner yet.
 */
void sfs_mix_attach(struct sfs_index *idx, struct sfs_mix *m);

/* The mixture idx owns (sfs_mix_attach), or NULL: the index of one source
 * directory. */
struct sfs_mix *sfs_mix_of(const struct sfs_index *idx);

/* Names of the enum values, for output. */
const char *sfs_mix_weight_name(enum sfs_mix_weight w);
const char *sfs_mix_sampling_name(enum sfs_mix_sampling s);
const char *sfs_mix_batching_name(enum sfs_mix_batching b);

/* ---- the loader (mixture_load.c) ---- */

/*
 * Load what path names: a directory is a source (its index from index_dir,
 * NULL: PATH/.shardfs, as sfs_index_load); a file is a mixture (index_dir
 * must then be NULL: each source names its own).  Returns 0 and a new
 * index in *out, or -EINVAL with a message naming the file, the field and
 * the fix (not JSON, unknown keys, a missing or unindexed source, weights
 * of different kinds, a weight <= 0, duplicate paths or names, overlapping
 * sources), -ENOENT, -EIO, -ENOMEM.
 */
int sfs_source_load(const char *path, const char *index_dir,
		    struct sfs_index **out, struct sfs_error *err);

#endif
