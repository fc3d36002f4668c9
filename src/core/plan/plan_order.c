/*
 * The plan's step 2 (plan.h, docs/plan.md): the epoch order.  A mixture's
 * allocation, each source's stream of units and the mixing of the streams
 * into the order, as pieces of units (struct seg) for the steps of plan.c
 * and plan_partition.c.
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

/* slots of a stratified order between two looks at the cancel flag */
#define STRATIFY_STEP 65536

/* ---- 2. epoch order: a mixture's allocation (Mixtures' 0.) ---- */

/*
 * Largest remainder: split total in proportion to w[0..n), each share
 * floor(total * w / W), the rest one each to the largest remainders
 * (total * w mod W), ties to the earlier.  W > 0.
 */
static void apportion(uint64_t total, const uint64_t *w, size_t n,
		      uint64_t *out)
{
	unsigned __int128 W = 0;
	uint64_t given = 0;
	size_t i;

	for (i = 0; i < n; i++)
		W += w[i];
	for (i = 0; i < n; i++) {
		out[i] = (uint64_t)((unsigned __int128)total * w[i] / W);
		given += out[i];
	}
	for (; given < total; given++) {
		size_t best = n;
		unsigned __int128 br = 0;

		for (i = 0; i < n; i++) {
			unsigned __int128 r =
				(unsigned __int128)total * w[i] % W;

			/* a source that already had its extra one is skipped:
			 * its share is above floor now */
			if (out[i] !=
			    (uint64_t)((unsigned __int128)total * w[i] / W))
				continue;
			if (best == n || r > br) {
				best = i;
				br = r;
			}
		}
		out[best]++;
	}
}

/* Step 0 (docs/plan.md, Mixtures): every source's samples in the epoch. */
int sfs_plan_allocate(struct builder *b)
{
	const struct sfs_mix *m = b->idx->mix;
	struct sfs_plan *plan = b->plan;
	uint64_t *w = calloc(b->nsources + 1, sizeof(*w));
	uint64_t *a = calloc(b->nsources + 1, sizeof(*a));
	uint64_t size = 0, sum = 0;
	size_t s;
	int rc = 0;

	if (!w || !a) {
		rc = -ENOMEM;
		goto out;
	}
	for (s = 0; s < b->nsources; s++) {
		uint64_t n = plan->sources[s].samples;

		if (!m)
			w[s] = 1;
		else if (m->kind == SFS_MIX_PROPORTION)
			w[s] = m->sources[s].weight;
		else if (m->kind == SFS_MIX_REPEAT)
			w[s] = (uint64_t)(((unsigned __int128)n *
						   m->sources[s].weight +
					   SFS_MIX_SCALE / 2) /
					  SFS_MIX_SCALE);
		else
			w[s] = m->sources[s].weight;
		size += n;
		sum += w[s];
	}
	plan->total = b->o->epoch_size			  ? b->o->epoch_size :
		      m && m->epoch_size		  ? m->epoch_size :
		      !m || m->kind == SFS_MIX_PROPORTION ? size :
							    sum;
	if (sum == 0) {
		rc = sfs_errorf(
			b->err, -EINVAL,
			"%s: repeat takes 0 samples of every source; use larger factors",
			m->file);
		goto out;
	}
	apportion(plan->total, w, b->nsources, a);
	for (s = 0; s < b->nsources; s++) {
		plan->sources[s].allocated = a[s];
		if (a[s] && !plan->sources[s].samples) {
			rc = m ? sfs_errorf(
					 b->err, -EINVAL,
					 "%s: source \"%s\" (%s) has no samples, but the epoch takes %llu of it; index it again or remove it",
					 m->file, m->sources[s].name,
					 m->sources[s].path,
					 (unsigned long long)a[s]) :
				 sfs_errorf(
					 b->err, -EINVAL,
					 "the index of %s has no samples: nothing to serve",
					 b->idx->source);
			goto out;
		}
	}
out:
	free(w);
	free(a);
	return rc;
}

/* ---- 2. epoch order: streams and mixing (Mixtures' 1. and 2.) ---- */

/*
 * Room for n more segments (and cum's entry past them) in one allocation
 * of the exact size: a stream's size is known, and doubling (sfs_grow) would
 * leave up to the streams before it unused; stratify's pieces, one by one,
 * grow by push_seg.
 */
static int reserve_segs(struct builder *b, size_t n)
{
	struct seg *ns;
	uint64_t *nc;
	size_t ncap;

	if (b->segs_cap - b->nsegs >= n)
		return 0;
	ncap = b->nsegs + n;
	ns = realloc(b->segs, ncap * sizeof(*ns));
	if (!ns)
		return -ENOMEM;
	b->segs = ns;
	b->segs_cap = ncap;
	nc = realloc(b->cum, (ncap + 1) * sizeof(*nc));
	if (!nc)
		return -ENOMEM;
	b->cum = nc;
	b->cum_cap = ncap + 1;
	return 0;
}

static int push_seg(struct builder *b, uint64_t unit, uint64_t pass,
		    uint64_t first, uint64_t count)
{
	if (SFS_GROW(b->segs, b->segs_cap, b->nsegs + 1) ||
	    SFS_GROW(b->cum, b->cum_cap, b->nsegs + 2))
		return -ENOMEM;
	b->segs[b->nsegs] =
		(struct seg){ (uint32_t)unit, (uint32_t)pass, first };
	b->cum[b->nsegs++] = count;
	return 0;
}

/* A unit whose count is not block: its number in its source, its count. */
struct odd {
	uint64_t k, count;
};

/*
 * The sample counts of the units of one source, a bit per unit where
 * stream's unit order is 4 bytes: unit k (canonical, from 0) has block
 * samples unless bit k of odd is set (a shard's short last block, a whole
 * shard); then its count is in odds, sorted by k.
 */
struct counts {
	uint64_t *odd;
	struct odd *odds;
	size_t nodds;
};

static int counts_make(const struct builder *b, size_t s, struct counts *c)
{
	uint64_t k = 0, nu = b->unit_lo[s + 1] - b->unit_lo[s];
	size_t lo, hi, i;

	sfs_plan_source_shards(b, s, &lo, &hi);
	c->nodds = 0;
	c->odd = calloc(nu / 64 + 1, sizeof(*c->odd));
	c->odds = malloc((hi - lo + 1) * sizeof(*c->odds));
	if (!c->odd || !c->odds)
		return -ENOMEM;
	for (i = lo; i < hi; i++) {
		const struct sfs_shard *sh = &b->idx->shards[i];
		uint64_t n = sfs_plan_shard_units(b, sh), last;

		if (!n)
			continue;
		last = sh->nsamples - (n - 1) * sfs_plan_unit_step(b, sh);
		k += n;
		if (last != b->o->block) {
			c->odd[(k - 1) / 64] |= 1ull << (k - 1) % 64;
			c->odds[c->nodds++] = (struct odd){ k - 1, last };
		}
	}
	return 0;
}

static uint64_t counts_get(const struct builder *b, const struct counts *c,
			   uint64_t k)
{
	size_t lo = 0, hi = c->nodds;

	if (!(c->odd[k / 64] >> k % 64 & 1))
		return b->o->block;
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (c->odds[mid].k <= k)
			lo = mid;
		else
			hi = mid;
	}
	return c->odds[lo].count;
}

/* Units of a pass's order per item of the pool that lays it out. */
#define LAYOUT_CHUNK 65536

/*
 * A pass of a source's stream laid out as segments, chunk by chunk of its
 * order: the samples of every chunk are summed, then (knowing where each
 * chunk begins) the units that overlap positions [from, to) of the pass
 * are written as segments, in order, unit first at segs[base] on.
 */
struct layout {
	struct builder *b;
	const uint32_t *order;
	const struct counts *cnt;
	size_t nu, ulo;
	uint32_t pass;
	uint64_t from, to;
	size_t nchunks;
	uint64_t *at; /* per chunk: its samples, then the pass's before it */
	size_t *nout; /* per chunk: the segments it wrote */
	size_t first, base;
};

static size_t chunk_end(const struct layout *l, size_t c)
{
	return (c + 1) * LAYOUT_CHUNK < l->nu ? (c + 1) * LAYOUT_CHUNK : l->nu;
}

static void layout_sum(struct sfs_pool *p, size_t c, struct sfs_digest *d)
{
	struct layout *l = p->arg;
	uint64_t sum = 0;
	size_t i;

	(void)d;
	for (i = c * LAYOUT_CHUNK; i < chunk_end(l, c); i++)
		sum += counts_get(l->b, l->cnt, l->order[i]);
	l->at[c] = sum;
}

static void layout_write(struct sfs_pool *p, size_t c, struct sfs_digest *d)
{
	struct layout *l = p->arg;
	struct builder *b = l->b;
	uint64_t at = l->at[c];
	size_t i;

	(void)d;
	l->nout[c] = 0;
	for (i = c * LAYOUT_CHUNK; i < chunk_end(l, c) && at < l->to; i++) {
		uint64_t n = counts_get(b, l->cnt, l->order[i]);
		uint64_t x = l->from > at ? l->from : at;
		uint64_t y = l->to < at + n ? l->to : at + n;

		if (x < y) {
			size_t k = l->base + (i - l->first);

			b->segs[k] =
				(struct seg){ (uint32_t)(l->ulo + l->order[i]),
					      l->pass, x - at };
			b->cum[k] = y - x;
			l->nout[c]++;
		}
		at += n;
	}
}

/* Append the segments of one pass, its order laid out in l (room for
 * them reserved). */
static void lay_out_pass(struct layout *l)
{
	struct builder *b = l->b;
	struct sfs_pool pool = { .n = l->nchunks, .arg = l };
	uint64_t at = 0, n;
	size_t c;

	pool.work = layout_sum;
	sfs_plan_run_items(b, &pool);
	for (c = 0; c < l->nchunks; c++) {
		n = l->at[c];
		l->at[c] = at;
		at += n;
	}
	/* the first unit to end after from */
	for (c = 0; c + 1 < l->nchunks && l->at[c + 1] <= l->from; c++)
		;
	at = l->at[c];
	for (l->first = c * LAYOUT_CHUNK;
	     l->first < l->nu &&
	     at + (n = counts_get(b, l->cnt, l->order[l->first])) <= l->from;
	     l->first++)
		at += n;
	l->base = b->nsegs;
	pool.work = layout_write;
	sfs_plan_run_items(b, &pool);
	for (c = 0; c < l->nchunks; c++)
		b->nsegs += l->nout[c];
}

/*
 * Step 1 for source s: its stream is pass 0, pass 1, ... of its units,
 * pass p in the order of the PRNG keyed (seed of s, p mod 2^64, 0); the
 * epoch takes stream positions [lo, hi).
 */
static int stream(struct builder *b, size_t s, unsigned __int128 lo,
		  unsigned __int128 hi)
{
	size_t ulo = b->unit_lo[s], nu = b->unit_lo[s + 1] - ulo, i;
	uint64_t n = b->plan->sources[s].samples;
	unsigned __int128 p, p0 = lo / n, passes;
	struct counts cnt = { 0 };
	struct layout l = { .b = b, .cnt = &cnt, .nu = nu, .ulo = ulo };
	uint32_t *order;
	struct sfs_prng rng;
	int rc = 0;

	if ((hi - lo) / n >= PASSES_MAX)
		return b->idx->mix ?
			       sfs_errorf(
				       b->err, -EINVAL,
				       "%s: the epoch takes %llu samples of source \"%s\", which has %llu: more than %u passes over it; lower its weight or epoch_size",
				       b->idx->mix->file,
				       (unsigned long long)(hi - lo),
				       b->idx->mix->sources[s].name,
				       (unsigned long long)n, PASSES_MAX) :
			       sfs_errorf(
				       b->err, -EINVAL,
				       "epoch_size=%llu is more than %u passes over the %llu samples of %s; use a smaller epoch_size",
				       (unsigned long long)(hi - lo),
				       PASSES_MAX, (unsigned long long)n,
				       b->idx->source);
	/* a segment holds at least one sample and at most one unit's pass */
	passes = (hi - 1) / n - p0 + 1;
	order = malloc((nu + 1) * sizeof(*order));
	l.order = order;
	l.nchunks = (nu + LAYOUT_CHUNK - 1) / LAYOUT_CHUNK;
	l.at = malloc((l.nchunks + 1) * sizeof(*l.at));
	l.nout = malloc((l.nchunks + 1) * sizeof(*l.nout));
	rc = order && l.at && l.nout ? counts_make(b, s, &cnt) : -ENOMEM;
	if (!rc)
		rc = reserve_segs(b, hi - lo < passes * nu ?
					     (size_t)(hi - lo) :
					     (size_t)(passes * nu));
	b->pass0[s] = (uint64_t)p0;
	for (p = p0; p <= (hi - 1) / n && !rc; p++) {
		unsigned __int128 base = p * n;

		if (sfs_plan_cancelled(b)) {
			rc = -ECANCELED;
			break;
		}
		l.from = lo > base ? (uint64_t)(lo - base) : 0;
		l.to = hi - base < n ? (uint64_t)(hi - base) : n;
		l.pass = (uint32_t)(p - p0);
		for (i = 0; i < nu; i++)
			order[i] = (uint32_t)i;
		if (b->o->shuffle != SFS_SHUFFLE_NONE) {
			sfs_prng_init(&rng, b->seed[s], (uint64_t)p, 0);
			sfs_prng_shuffle32(&rng, order, nu);
		}
		lay_out_pass(&l);
	}
	free(l.at);
	free(l.nout);
	free(order);
	free(cnt.odd);
	free(cnt.odds);
	return rc;
}

/*
 * Stratified: slot after slot, the source whose next sample j has the
 * smallest (2j + 1) / (2 a), ties to the earlier source, gives it; so any
 * stretch of the order holds each source in proportion to a, give or take
 * one sample.
 */
static int stratify(struct builder *b, const size_t *seg_lo)
{
	struct seg *from = b->segs;
	uint64_t *count = b->cum;
	size_t S = b->nsources, s, t;
	size_t *cur = calloc(S + 1, sizeof(*cur));
	uint64_t *j = calloc(S + 1, sizeof(*j)),
		 *off = calloc(S + 1, sizeof(*off));
	uint64_t q, N = b->plan->total;
	size_t last = SIZE_MAX;
	int rc = 0;

	b->segs = NULL;
	b->cum = NULL;
	b->nsegs = b->segs_cap = b->cum_cap = 0;
	if (!cur || !j || !off) {
		rc = -ENOMEM;
		goto out;
	}
	for (s = 0; s < S; s++)
		cur[s] = seg_lo[s];
	for (q = 0; q < N && !rc; q++) {
		size_t best = S;
		struct seg *sg, *prev;

		if (q % STRATIFY_STEP == 0 && sfs_plan_cancelled(b)) {
			rc = -ECANCELED;
			break;
		}
		for (t = 0; t < S; t++) {
			uint64_t at = b->plan->sources[t].allocated;

			if (j[t] >= at)
				continue;
			if (best == S ||
			    (unsigned __int128)(2 * j[t] + 1) *
					    b->plan->sources[best].allocated <
				    (unsigned __int128)(2 * j[best] + 1) * at)
				best = t;
		}
		sg = &from[cur[best]];
		prev = last == best ? &b->segs[b->nsegs - 1] : NULL;
		if (prev && prev->unit == sg->unit && prev->pass == sg->pass &&
		    prev->first + b->cum[b->nsegs - 1] == sg->first + off[best])
			b->cum[b->nsegs - 1]++;
		else
			rc = push_seg(b, sg->unit, sg->pass,
				      sg->first + off[best], 1);
		last = best;
		j[best]++;
		if (++off[best] == count[cur[best]]) {
			off[best] = 0;
			cur[best]++;
		}
	}
out:
	free(from);
	free(count);
	free(cur);
	free(j);
	free(off);
	return rc;
}

/* Steps 1 and 2: the epoch order as pieces of units, and where each
 * begins. */
int sfs_plan_order_epoch(struct builder *b)
{
	const struct sfs_mix *m = b->idx->mix;
	const struct sfs_plan_opts *o = b->o;
	size_t S = b->nsources, s, i;
	size_t *seg_lo = calloc(S + 1, sizeof(*seg_lo));
	struct sfs_prng rng;
	uint64_t sum = 0;
	int rc = 0;

	if (!seg_lo)
		return -ENOMEM;
	for (s = 0; s < S && !rc; s++) {
		uint64_t a = b->plan->sources[s].allocated;
		unsigned __int128 lo = 0;

		seg_lo[s] = b->nsegs;
		if (!m || m->sampling == SFS_MIX_BALANCED)
			lo = (unsigned __int128)o->epoch * a;
		if (a)
			rc = stream(b, s, lo, lo + a);
	}
	seg_lo[S] = b->nsegs;
	if (rc)
		goto out;
	if (sfs_plan_cancelled(b)) {
		rc = -ECANCELED;
	} else if (S > 1 && m->batching == SFS_MIX_STRATIFIED) {
		rc = stratify(b, seg_lo);
	} else if (S > 1 && o->shuffle != SFS_SHUFFLE_NONE) {
		/* Fisher-Yates of the segments in place: the same draws as
		 * permuting their numbers (docs/plan.md) and then gathering */
		sfs_prng_init(&rng, o->seed, o->epoch, UINT64_MAX - 1);
		for (i = b->nsegs; i > 1; i--) {
			uint64_t j = sfs_prng_below(&rng, i);
			struct seg t = b->segs[i - 1];
			uint64_t c = b->cum[i - 1];

			b->segs[i - 1] = b->segs[j];
			b->segs[j] = t;
			b->cum[i - 1] = b->cum[j];
			b->cum[j] = c;
		}
	}
	if (rc)
		goto out;
	/* counts to positions, in place: stream and stratify left room for
	 * cum[nsegs] */
	for (i = 0; i < b->nsegs; i++) {
		uint64_t c = b->cum[i];

		b->cum[i] = sum;
		sum += c;
	}
	b->cum[b->nsegs] = sum;
out:
	free(seg_lo);
	return rc;
}
