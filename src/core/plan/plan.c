/*
 * The plan (plan.h): its sections follow the numbered steps of the
 * contract in plan.h and docs/plan.md.  This file holds the builder's
 * helpers, 1. units, 3. resume and 4. equalise, the per-source totals and,
 * at the end, sfs_plan_build_ranks that runs the steps; 2. the epoch order
 * (a mixture's allocation, streams and mixing) is plan_order.c's, 5.
 * partition and 6. files plan_partition.c's, each helper before its caller;
 * plan_i.h is the builder they share.  plan_json.c writes a plan as JSON.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardfs/mixture.h"
#include "shardfs/plan.h"
#include "shardfs/pool.h"
#include "shardfs/prng.h"
#include "shardfs/util.h"

#include "plan_i.h"

/* Whether the build was asked to stop. */
bool sfs_plan_cancelled(const struct builder *b)
{
	return b->cancel && atomic_load(b->cancel);
}

/* The threads the build's pools run: the CPUs it may use, read once. */
unsigned sfs_plan_threads(struct builder *b)
{
	if (!b->threads)
		b->threads = sfs_pool_cpus();
	return b->threads;
}

void sfs_plan_source_shards(const struct builder *b, size_t s, size_t *lo,
			    size_t *hi)
{
	const struct sfs_mix *m = sfs_mix_of(b->idx);

	*lo = m ? m->sources[s].shard_lo : 0;
	*hi = m ? m->sources[s].shard_hi : b->idx->nshards;
}

/* The items of p, on threads when there are several items and CPUs. */
void sfs_plan_run_items(struct builder *b, struct sfs_pool *p)
{
	size_t i;

	p->threads = sfs_plan_threads(b);
	if (p->n > 1 && p->threads > 1)
		sfs_pool_run(p);
	else
		for (i = 0; i < p->n; i++)
			p->work(p, i, NULL);
}

/* ---- 1. units ---- */

uint64_t sfs_plan_unit_step(const struct builder *b, const struct sfs_shard *sh)
{
	return b->o->block && sfs_shard_sliceable(sh) ? b->o->block :
							sh->nsamples;
}

uint64_t sfs_plan_shard_units(const struct builder *b,
			      const struct sfs_shard *sh)
{
	return sh->nsamples ?
		       (sh->nsamples - 1) / sfs_plan_unit_step(b, sh) + 1 :
		       0;
}

static int make_units(struct builder *b)
{
	const struct sfs_index *idx = b->idx;
	uint64_t n = 0;
	size_t s, i, lo, hi, k = 0;

	for (i = 0; i < idx->nshards; i++)
		b->plan->nunits += sfs_plan_shard_units(b, &idx->shards[i]);
	b->ushards = malloc((idx->nshards + 1) * sizeof(*b->ushards));
	b->unit_lo = malloc((b->nsources + 1) * sizeof(*b->unit_lo));
	if (!b->ushards || !b->unit_lo)
		return -ENOMEM;
	for (s = 0; s < b->nsources; s++) {
		b->unit_lo[s] = n;
		sfs_plan_source_shards(b, s, &lo, &hi);
		for (i = lo; i < hi; i++) {
			const struct sfs_shard *sh = &idx->shards[i];

			if (!sh->nsamples)
				continue;
			b->plan->sources[s].samples += sh->nsamples;
			b->ushards[k++] = (struct ushard){ i, n };
			n += sfs_plan_shard_units(b, sh);
		}
	}
	b->unit_lo[s] = n;
	b->ushards[k] = (struct ushard){ 0, n };
	b->nushards = k;
	if (n > UINT32_MAX || b->plan->nunits > UINT32_MAX)
		return sfs_errorf(
			b->err, -EINVAL,
			"block=%llu cuts the %llu samples of %s into %llu units, more than the plan holds (%u); use a larger block",
			(unsigned long long)b->o->block,
			(unsigned long long)idx->nsamples, idx->source,
			(unsigned long long)(n > b->plan->nunits ?
						     n :
						     b->plan->nunits),
			UINT32_MAX);
	b->ulook = malloc((n / 64 + 1) * sizeof(*b->ulook));
	if (!b->ulook)
		return -ENOMEM;
	for (k = 0, i = 0; i * 64 < n; i++) {
		while (b->ushards[k + 1].unit <= i * 64)
			k++;
		b->ulook[i] = k;
	}
	return 0;
}

/* Unit number u: its shard, samples, source and number in the source. */
void sfs_plan_unit_get(const struct builder *b, uint64_t u, struct unit *un)
{
	size_t lo = b->ulook[u / 64], hi;
	const struct sfs_shard *sh;
	uint64_t step, left;

	while (b->ushards[lo + 1].unit <= u)
		lo++;
	un->shard = b->ushards[lo].shard;
	sh = &b->idx->shards[un->shard];
	step = sfs_plan_unit_step(b, sh);
	un->first = (u - b->ushards[lo].unit) * step;
	left = sh->nsamples - un->first;
	un->count = left < step ? left : step;
	lo = 0;
	hi = b->nsources;
	lo = SFS_PARTITION_POINT(i, lo + 1, hi, b->unit_lo[i] <= u) - 1;
	un->src = lo;
	un->local = u - b->unit_lo[lo];
}

/* ---- 3. resume and 4. equalise ---- */

/* Steps 3 and 4: how many samples each reader gets. */
static int equalise(struct builder *b)
{
	const struct sfs_plan_opts *o = b->o;
	struct sfs_plan *plan = b->plan;
	uint64_t T = (uint64_t)(o->world / o->replicas) * o->workers, n, c;
	int rc = sfs_plan_opts_check(o, b->err);

	if (rc)
		return rc;
	if (plan->total == 0)
		return sfs_errorf(
			b->err, -EINVAL,
			"the index of %s has no samples: nothing to serve",
			b->idx->source);
	if (o->start >= plan->total)
		return sfs_errorf(
			b->err, -EINVAL,
			"start=%llu leaves no samples: the epoch has %llu; use start=0..%llu",
			(unsigned long long)o->start,
			(unsigned long long)plan->total,
			(unsigned long long)plan->total - 1);
	n = plan->total - o->start;
	if (o->remainder == SFS_REMAINDER_PAD) {
		c = n / T + (n % T != 0);
		c = (c / o->batch + (c % o->batch != 0)) * o->batch;
	} else {
		c = n / T;
		c -= c % o->batch;
		if (c == 0) {
			char batch[48] = "";

			if (o->batch > 1)
				snprintf(batch, sizeof(batch),
					 " in batches of %llu",
					 (unsigned long long)o->batch);
			if (o->replicas > 1)
				snprintf(batch + strlen(batch),
					 sizeof(batch) - strlen(batch),
					 " (replicas=%u: %llu groups)",
					 o->replicas,
					 (unsigned long long)(o->world /
							      o->replicas));
			return sfs_errorf(
				b->err, -EINVAL,
				"remainder=drop leaves 0 samples per reader: %llu samples for world=%u × workers=%u%s; use remainder=pad or fewer readers",
				(unsigned long long)n, o->world, o->workers,
				batch);
		}
	}
	if (c > UINT64_MAX / T)
		return sfs_errorf(b->err, -EINVAL,
				  "batch=%llu is too large for %llu readers",
				  (unsigned long long)o->batch,
				  (unsigned long long)T);
	plan->remaining = n;
	plan->per_reader = c;
	if (c * T >= n)
		plan->padding = c * T - n;
	else
		plan->dropped = n - c * T;
	plan->nreaders = (size_t)T;
	return 0;
}

/* ---- per source: what resume skips, equalise pads and drops ---- */

/* Add to field of plan->sources the samples of each source at epoch
 * positions [from, to). */
static void count_sources(struct builder *b, uint64_t from, uint64_t to,
			  size_t field)
{
	size_t i;

	if (from >= to)
		return;
	if (b->seg_lo) {
		for (i = 0; i < b->nsources; i++)
			*(uint64_t *)((char *)&b->plan->sources[i] + field) +=
				sfs_plan_strat_taken(b, i, to) -
				sfs_plan_strat_taken(b, i, from);
		return;
	}
	for (i = sfs_plan_find_seg(b, from); i < b->nsegs && b->cum[i] < to;
	     i++) {
		uint64_t x = from > b->cum[i] ? from : b->cum[i];
		uint64_t y = to < b->cum[i + 1] ? to : b->cum[i + 1];
		struct sfs_plan_source *ps;
		struct unit un;

		sfs_plan_unit_get(b, b->segs[i].unit, &un);
		ps = &b->plan->sources[un.src];

		*(uint64_t *)((char *)ps + field) += y - x;
	}
}

/* What the epoch takes of each source, skips, pads and drops. */
static void source_totals(struct builder *b)
{
	struct sfs_plan *plan = b->plan;
	uint64_t P = b->o->start, n = plan->remaining;
	uint64_t served = plan->per_reader * plan->nreaders, wraps;
	size_t s;

	count_sources(b, 0, P, offsetof(struct sfs_plan_source, skipped));
	if (served < n) {
		count_sources(b, P + served, P + n,
			      offsetof(struct sfs_plan_source, dropped));
		return;
	}
	wraps = (served - n) / n;
	for (s = 0; s < b->nsources; s++)
		plan->sources[s].padding = wraps * (plan->sources[s].allocated -
						    plan->sources[s].skipped);
	count_sources(b, P, P + (served - n) % n,
		      offsetof(struct sfs_plan_source, padding));
}

/* ---- the build: the steps, in the order they depend on ---- */

int sfs_plan_build(const struct sfs_index *idx, const struct sfs_plan_opts *o,
		   struct sfs_plan **out, struct sfs_error *err)
{
	return sfs_plan_build_ranks(idx, o, NULL, 0, NULL, out, err);
}

int sfs_plan_build_ranks(const struct sfs_index *idx,
			 const struct sfs_plan_opts *o, const uint32_t *ranks,
			 size_t nranks, const atomic_bool *cancel,
			 struct sfs_plan **out, struct sfs_error *err)
{
	struct builder b = { .idx = idx,
			     .o = o,
			     .ranks = ranks,
			     .nranks = nranks,
			     .cancel = cancel,
			     .err = err };
	size_t s;
	int rc;

	b.nsources = sfs_mix_of(idx) ? sfs_mix_of(idx)->nsources : 1;
	b.plan = calloc(1, sizeof(*b.plan));
	b.seed = calloc(b.nsources + 1, sizeof(*b.seed));
	b.pass0 = calloc(b.nsources + 1, sizeof(*b.pass0));
	if (!b.plan || !b.seed || !b.pass0) {
		free(b.pass0);
		free(b.seed);
		free(b.plan);
		return sfs_errorf(err, -ENOMEM, "out of memory");
	}
	b.plan->opts = *o;
	b.plan->nsources = b.nsources;
	b.plan->sources = calloc(b.nsources, sizeof(*b.plan->sources));
	rc = b.plan->sources ? make_units(&b) : -ENOMEM;
	if (!rc)
		rc = sfs_plan_allocate(&b);
	if (!rc)
		rc = equalise(&b);
	if (rc == -ENOMEM)
		goto out_nomem;
	if (rc)
		goto out_free;
	/* one source keeps the seed, so that epoch_size equal to the
	 * source's size is the plan without it */
	for (s = 0; s < b.nsources; s++) {
		struct sfs_prng rng;

		sfs_prng_init(&rng, o->seed, s, UINT64_MAX);
		b.seed[s] = b.nsources == 1 ? o->seed : sfs_prng_next(&rng);
	}
	rc = sfs_plan_order_epoch(&b);
	if (rc == -ENOMEM)
		goto out_nomem;
	if (rc)
		goto out_free;
	source_totals(&b);
	/* only sliceable units are permuted: their counts are backed by the
	 * shard (a boundary table, a Parquet footer), an opaque shard's is
	 * just a number in the index */
	for (s = 0; o->shuffle == SFS_SHUFFLE_SAMPLES && s < idx->nshards;
	     s++) {
		const struct sfs_shard *sh = &idx->shards[s];
		uint64_t step = sfs_plan_unit_step(&b, sh);
		uint64_t c = step < sh->nsamples ? step : sh->nsamples;

		if (sfs_shard_sliceable(sh) && c > b.maxunit)
			b.maxunit = c;
	}
	b.plan->readers = calloc(b.plan->nreaders, sizeof(*b.plan->readers));
	rc = b.plan->readers ? sfs_plan_partition(&b) : -ENOMEM;
	if (rc == -ENOMEM)
		goto out_nomem;
	if (rc)
		goto out_free;
	*out = b.plan;
	b.plan = NULL;
	goto out_free;
out_nomem:
	rc = sfs_errorf(err, -ENOMEM, "out of memory building the plan");
out_free:
	if (rc == -ECANCELED)
		sfs_errorf(err, rc, "the plan's build was cancelled");
	free(b.ushards);
	free(b.ulook);
	free(b.unit_lo);
	free(b.seed);
	free(b.pass0);
	free(b.segs);
	free(b.cum);
	free(b.seg_lo);
	sfs_plan_outs_free(&b);
	sfs_plan_free(b.plan);
	return rc;
}

void sfs_plan_free(struct sfs_plan *plan)
{
	size_t s;

	if (!plan)
		return;
	free(plan->readers);
	free(plan->files);
	for (s = 0; plan->runs && s < plan->nparts; s++)
		free(plan->runs[s]);
	free(plan->runs);
	free(plan->sources);
	free(plan);
}