/*
 * The plan's builder, shared by the files of the plan (plan.h): plan.c
 * holds the builder's helpers, 1. units, 3. resume and 4. equalise, the
 * per-source totals and the build that runs the steps; plan_order.c 2. the
 * epoch order (a mixture's allocation, streams and mixing);
 * plan_partition.c 5. partition and 6. files.  Not public: a plan's callers
 * see struct sfs_plan only.
 */
#ifndef SHARDFS_PLAN_I_H
#define SHARDFS_PLAN_I_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shardfs/error.h"
#include "shardfs/index.h"
#include "shardfs/plan.h"
#include "shardfs/pool.h"

/* an epoch repeats a source at most this often */
#define PASSES_MAX 65536u

/* One unit: samples [first, first + count) of a shard, unit number local
 * (from 0) of source src.  Computed from its number (unit_get): the plan
 * keeps no array of units. */
struct unit {
	size_t shard;
	uint64_t first;
	uint64_t count;
	uint64_t local;
	size_t src;
};

/* A shard with samples and the number of its first unit; the shards of
 * the sources in unit order. */
struct ushard {
	size_t shard;
	uint64_t unit;
};

/*
 * A piece of the epoch order: positions [first, first + count) of unit
 * number unit as its samples are ordered in pass pass0[src] + pass of its
 * source; its count is in the builder's cum.  32-bit numbers: make_units
 * refuses more than UINT32_MAX units, and an epoch reads a source at most
 * PASSES_MAX + 1 times.
 */
struct seg {
	uint32_t unit;
	uint32_t pass;
	uint64_t first;
};

struct builder {
	const struct sfs_index *idx;
	const struct sfs_plan_opts *o;
	struct sfs_plan *plan;
	size_t nsources;
	struct ushard *ushards; /* nushards + 1, the last {0, nunits} */
	size_t nushards;
	/* ushards[ulook[u / 64]] holds unit u / 64 * 64: unit_get scans on
	 * from there, instead of searching all shards */
	size_t *ulook;
	size_t *unit_lo; /* source s has units [unit_lo[s], unit_lo[s + 1]) */
	uint64_t *seed; /* per source */
	uint64_t *pass0; /* per source: the pass its first segment is in */
	struct seg *segs; /* the epoch order */
	size_t nsegs, segs_cap;
	/* samples before segs[i], cum[nsegs] = N; while order_epoch builds
	 * the order, the samples of segs[i] */
	uint64_t *cum;
	size_t cum_cap; /* at least segs_cap + 1 once there are segments */
	/* a stratified mixture's: source s's pieces are segs[seg_lo[s] ..
	 * seg_lo[s + 1]), in stream order, cum[i] the samples of its stream
	 * before piece i; the order is computed from them (sfs_plan_order_at).
	 * NULL: segs and cum are the order */
	size_t *seg_lo;
	uint64_t maxunit; /* the most samples a permuted unit has */
	struct out *outs; /* partition's groups of readers */
	size_t nouts;
	const uint32_t *ranks; /* the ranks whose readers get files */
	size_t nranks; /* 0: every rank */
	const atomic_bool *cancel; /* NULL: never */
	unsigned threads; /* for the pools: sfs_pool_cpus(), once; 0 until */
	struct sfs_error *err;
};
struct out; /* plan_partition.c: a group of readers' files and runs */

/* ---- the builder's helpers (plan.c) ---- */

/* Whether the build was asked to stop. */
bool sfs_plan_cancelled(const struct builder *b);

/* The threads the build's pools run: the CPUs it may use, read once. */
unsigned sfs_plan_threads(struct builder *b);

/* The items of p, on threads when there are several items and CPUs. */
void sfs_plan_run_items(struct builder *b, struct sfs_pool *p);

/* Source s holds the index's shards [*lo, *hi). */
void sfs_plan_source_shards(const struct builder *b, size_t s, size_t *lo,
			    size_t *hi);

/* ---- 1. units (plan.c) ---- */

/* Samples per unit of shard sh; its last unit may have fewer. */
uint64_t sfs_plan_unit_step(const struct builder *b,
			    const struct sfs_shard *sh);

/* The units of shard sh. */
uint64_t sfs_plan_shard_units(const struct builder *b,
			      const struct sfs_shard *sh);

/* Unit number u: its shard, samples, source and number in the source. */
void sfs_plan_unit_get(const struct builder *b, uint64_t u, struct unit *un);

/* ---- 2. epoch order (plan_order.c) ---- */

/* A mixture's allocation: the samples of each source in the epoch.
 * Returns 0, -ENOMEM or -EINVAL with a message in b->err. */
int sfs_plan_allocate(struct builder *b);

/* Steps 1 and 2: the epoch order as pieces of units (b->segs), and where
 * each begins (b->cum).  Returns 0, -ENOMEM, -ECANCELED or -EINVAL with a
 * message in b->err. */
int sfs_plan_order_epoch(struct builder *b);

/*
 * A reader's place in the epoch order, so that reading on where the last
 * piece ended costs no search: for a stratified order, the samples each
 * source gave before position g, and that positions g .. g + run are all
 * source s's.  One per thread.
 */
struct cursor {
	bool valid;
	uint64_t g;
	uint64_t *j; /* per source; NULL when the order is b->segs */
	size_t s;
	uint64_t run;
};

/* Set up c for b's order.  Returns 0 or -ENOMEM. */
int sfs_plan_cursor_init(const struct builder *b, struct cursor *c);

/* Free what c holds; c stays valid to free again. */
void sfs_plan_cursor_free(struct cursor *c);

/* The piece of the epoch order at position g (< N): *a its positions
 * before g, *len the positions from g on that continue it (at least 1).
 * c moves to g. */
const struct seg *sfs_plan_order_at(const struct builder *b, struct cursor *c,
				    uint64_t g, uint64_t *a, uint64_t *len);

/* A stratified order: source s's samples among its first q positions. */
uint64_t sfs_plan_strat_taken(const struct builder *b, size_t s, uint64_t q);

/* ---- 5. partition and 6. files (plan_partition.c) ---- */

/* Index into b->segs of the segment holding epoch position g. */
size_t sfs_plan_find_seg(const struct builder *b, uint64_t g);

/* Step 5: the files of the readers wanted, into b->plan.  Returns 0,
 * -ENOMEM, -ECANCELED or -EINVAL with a message in b->err. */
int sfs_plan_partition(struct builder *b);

/* Free b->outs, the groups of readers partition built. */
void sfs_plan_outs_free(struct builder *b);

#endif
