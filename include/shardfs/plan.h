/*
 * The plan: for every reader (rank, worker) of an epoch, the ordered list
 * of files it reads.  A pure function of (index, options): no I/O, no
 * communication, the same on every node.  docs/plan.md is the contract:
 *
 * 1. Units: shards in index order (sorted by path), with samples, each cut
 *    into blocks of `block` samples when block > 0 and the shard can be
 *    sliced, else one unit per shard.
 * 2. Epoch order: units permuted by the PRNG keyed by (seed, epoch, 0);
 *    with shuffle=samples the samples of unit u (canonical number) are
 *    permuted by the PRNG keyed by (seed, epoch, u + 1).  Never by world or
 *    workers.
 * 3. Resume: the first `start` samples of that order are skipped.
 * 4. Equalise: n samples remain for T = world / replicas * workers
 *    readers (consecutive groups of `replicas` ranks share one); pad: c =
 *    ceil(n / T) rounded up to a multiple of batch, positions past n
 *    repeat the order from its start; drop: c = floor(n / T) rounded down
 *    to a multiple of batch, the tail left out.
 * 5. Partition: reader t = (rank / replicas) * workers + worker takes
 *    positions [t * c, (t + 1) * c); with partition=interleaved it takes
 *    batches dealt in loader-step order, so that S steps of every group
 *    read the first S * (world / replicas) * batch positions.
 * 6. Files: a new file at every unit boundary (and where padding wraps);
 *    a file that is exactly one whole shard in its own byte order is
 *    `whole` (a symlink in the view), any other a slice.
 */
#ifndef SHARDFS_PLAN_H
#define SHARDFS_PLAN_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shardfs/error.h"
#include "shardfs/index.h"
#include "shardfs/options.h"

struct sfs_plan_file {
	size_t shard; /* in idx->shards */
	bool whole; /* exactly the shard: a symlink */
	uint32_t part; /* its runs: plan->runs[part][run_at ...] */
	uint64_t nsamples;
	uint64_t npadding; /* samples of this file that are padding */
	size_t run_at; /* in plan->runs[part] */
	size_t nruns;
};

struct sfs_plan_reader {
	size_t file_at; /* its files: plan->files[file_at ...] */
	size_t nfiles;
	uint64_t npadding;
};

/* What an epoch takes of one source (of a mixture, or the only one). */
struct sfs_plan_source {
	uint64_t samples; /* in the source */
	uint64_t allocated; /* in the epoch */
	uint64_t skipped; /* of those, before start */
	uint64_t padding; /* repeated to pad */
	uint64_t dropped; /* left out by remainder=drop */
};

struct sfs_plan {
	struct sfs_plan_opts opts;
	uint64_t nunits;
	uint64_t total; /* samples in the epoch, N */
	uint64_t remaining; /* after start: n */
	uint64_t per_reader; /* c */
	uint64_t padding; /* pad: repeated samples over all readers */
	uint64_t dropped; /* drop: samples left out */
	size_t nreaders; /* world / replicas * workers */
	struct sfs_plan_reader *readers;
	struct sfs_plan_file *files;
	size_t nfiles;
	/* the files' runs: one array per part of the readers, each part
	 * built by a thread of its own and kept where it was built */
	struct sfs_run **runs;
	size_t nparts;
	size_t nruns; /* in all parts */
	struct sfs_plan_source *sources; /* the index's mixture order */
	size_t nsources;
};

/*
 * Compute the plan of idx (borrowed; the plan refers to its shards by
 * number) under o.  Returns 0 and a new plan in *out, or -EINVAL with a
 * message when the options cannot be served: no samples left
 * ("start=... leaves no samples"), drop leaving 0 per reader ("remainder=
 * drop leaves 0 samples per reader: 7 samples for world=4 x workers=2"),
 * or a reader's share that would cut a shard that cannot be sliced.
 * -ENOMEM.
 */
int sfs_plan_build(const struct sfs_index *idx, const struct sfs_plan_opts *o,
		   struct sfs_plan **out, struct sfs_error *err);

/*
 * As sfs_plan_build, but only the readers of ranks[0..nranks) (borrowed;
 * nranks 0: every rank) get their files; every other reader has none.  A
 * daemon that shows some ranks needs no more, and the files and runs of
 * the rest are most of a plan's memory.  Totals, padding, drop and the
 * per-source counts are the whole plan's.  Once *cancel (NULL: never) is
 * set the build stops at its next step (a pass of a source's order, 65536
 * slots of a stratified mixture, a file of a reader) and fails with
 * -ECANCELED.
 */
int sfs_plan_build_ranks(const struct sfs_index *idx,
			 const struct sfs_plan_opts *o, const uint32_t *ranks,
			 size_t nranks, const atomic_bool *cancel,
			 struct sfs_plan **out, struct sfs_error *err);

void sfs_plan_free(struct sfs_plan *plan);

/*
 * The plan as JSON text (docs/plan.md shows its shape): options, totals and
 * per reader its files with shard path, whole or slice, sample runs and
 * padding; readers without files (not asked for, sfs_plan_build_ranks)
 * are left out.  Returns a heap string (caller frees) or NULL without memory.
 */
char *sfs_plan_json(const struct sfs_plan *plan, const struct sfs_index *idx);

/* The runs of file f of plan p: f->nruns of them. */
static inline const struct sfs_run *
sfs_plan_file_runs(const struct sfs_plan *p, const struct sfs_plan_file *f)
{
	return p->runs[f->part] + f->run_at;
}

/* The reader number of (rank, worker): ranks of one replica group share
 * one. */
static inline size_t sfs_plan_reader_id(const struct sfs_plan *plan,
					uint32_t rank, uint32_t worker)
{
	return (size_t)(rank / plan->opts.replicas) * plan->opts.workers +
	       worker;
}

#endif
