/*
 * Building and verifying an index: walk the source, scan every shard with
 * its format driver, hash it, in parallel.
 *
 * The walk skips names that start with '.' (and so the default index
 * directory) and anything that is not a regular file (symlinks included:
 * a shard is a file inside the source).  Files whose extension names no
 * format are ignored unless a format is forced.  A `files` dataset groups
 * consecutive files that share a key (path up to the first dot of the
 * basename) into one sample.
 */
#ifndef SHARDFS_INDEXER_H
#define SHARDFS_INDEXER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shardfs/error.h"
#include "shardfs/index.h"

struct sfs_indexer_progress {
	size_t done, total; /* shards */
	uint64_t bytes_done, bytes_total;
	uint64_t samples;
	double elapsed; /* seconds */
	bool final; /* the last call */
};

struct sfs_indexer_opts {
	const char *source;
	const struct sfs_format_ops *format; /* NULL: by file name */
	unsigned jobs; /* threads, 0: one per CPU */
	bool hash; /* compute SHA-256 */
	bool skip_bad; /* index the rest, report */
	uint64_t declared; /* opaque: samples per shard */
	/* a dataset (format.h, dataset: Lance) is indexed at this version,
	 * 0: its newest (shardfs-index --dataset-version) */
	uint64_t version;
	/* index only part `part` of `nparts` (0 < nparts): the shards at
	 * positions part, part + nparts, ... of the sorted list; nparts 0:
	 * every shard */
	uint32_t part, nparts;
	/* when set, the index directory the build spills its tables to
	 * (spill.h, created when missing): each shard's boundaries and
	 * digests leave memory as its scan finishes, and the index built
	 * holds them in idx->spill for sfs_index_save, which writes the
	 * same bytes as from memory; memory then grows with shards and
	 * jobs, not samples.  NULL: the tables are built in memory (an
	 * index to use, not only to save) */
	const char *spill_dir;
	/* Called from the calling thread about 4 times a second, and once
	 * at the end with final set; NULL for none. */
	void (*progress)(const struct sfs_indexer_progress *p, void *arg);
	void *arg;
};

/* What a build or a verify did, beyond its result. */
struct sfs_indexer_report {
	size_t scanned; /* shards read */
	size_t reused; /* shards taken from the previous index */
	size_t ignored; /* files with no known format, symlinks */
	size_t nproblems; /* skipped shards (build), mismatches (verify) */
	char **problems; /* one message each */
	size_t problems_cap;
};

/*
 * Build the index of o->source.  prev (borrowed, may be NULL) is an earlier
 * index of the same source: its entries whose path, size, mtime and format
 * are unchanged (and that have a hash when one is wanted) are reused
 * without reading the shard.  Returns 0 and a new index in *out.  A shard
 * that cannot be scanned fails the build with its message, unless
 * o->skip_bad, which leaves it out and lists it in rep->problems.  With
 * o->nparts the index is that part only (sfs_index_merge joins them).
 * With o->spill_dir the index's tables are in idx->spill (index.h): save
 * it and free it.  A failure to write the spill (disk full) fails the
 * build even with o->skip_bad: it is not the shard's fault.
 */
int sfs_indexer_build(const struct sfs_indexer_opts *o,
		      const struct sfs_index *prev, struct sfs_index **out,
		      struct sfs_indexer_report *rep, struct sfs_error *err);

/*
 * Re-read every shard of idx: size and mtime, a fresh scan that must give
 * the same boundaries, the driver's deep checks (TFRecord CRCs) and, when
 * the index has them, the SHA-256.  Every mismatch is one message in
 * rep->problems.  Returns 0 when the check ran (look at rep->nproblems),
 * or a negative errno when it could not.  o->source and o->format are
 * ignored.
 */
int sfs_indexer_verify(const struct sfs_indexer_opts *o,
		       const struct sfs_index *idx,
		       struct sfs_indexer_report *rep, struct sfs_error *err);

/* Free what a report holds.  NULL is a no-op. */
void sfs_indexer_report_clear(struct sfs_indexer_report *rep);

#endif
