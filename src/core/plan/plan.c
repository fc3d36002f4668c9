/*
 * The plan (plan.h): its sections follow the numbered steps of the
 * contract in plan.h and docs/plan.md (1. units, 2. epoch order with a
 * mixture's allocation, streams and mixing, 3. resume, 4. equalise, 5.
 * partition, 6. files), each helper before its caller; sfs_plan_build_ranks
 * at the end runs them.  plan_json.c writes a plan as JSON.
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

/* an epoch repeats a source at most this often */
#define PASSES_MAX 65536u
/* slots of a stratified order between two looks at the cancel flag */
#define STRATIFY_STEP 65536

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
	uint64_t maxunit; /* the most samples a permuted unit has */
	struct out *outs; /* partition's groups of readers */
	size_t nouts;
	const uint32_t *ranks; /* the ranks whose readers get files */
	size_t nranks; /* 0: every rank */
	const atomic_bool *cancel; /* NULL: never */
	unsigned threads; /* for the pools: sfs_pool_cpus(), once; 0 until */
	struct sfs_error *err;
};

/* Whether the build was asked to stop. */
static bool cancelled(const struct builder *b)
{
	return b->cancel && atomic_load(b->cancel);
}

/* The threads the build's pools run: the CPUs it may use, read once. */
static unsigned threads(struct builder *b)
{
	if (!b->threads)
		b->threads = sfs_pool_cpus();
	return b->threads;
}

static void source_shards(const struct builder *b, size_t s, size_t *lo,
			  size_t *hi)
{
	const struct sfs_mix *m = b->idx->mix;

	*lo = m ? m->sources[s].shard_lo : 0;
	*hi = m ? m->sources[s].shard_hi : b->idx->nshards;
}

/* ---- 1. units ---- */

/* Samples per unit of shard sh; its last unit may have fewer. */
static uint64_t unit_step(const struct builder *b, const struct sfs_shard *sh)
{
	return b->o->block && sfs_shard_sliceable(sh) ? b->o->block :
							sh->nsamples;
}

static uint64_t shard_units(const struct builder *b, const struct sfs_shard *sh)
{
	return sh->nsamples ? (sh->nsamples - 1) / unit_step(b, sh) + 1 : 0;
}

static int make_units(struct builder *b)
{
	const struct sfs_index *idx = b->idx;
	uint64_t n = 0;
	size_t s, i, lo, hi, k = 0;

	for (i = 0; i < idx->nshards; i++)
		b->plan->nunits += shard_units(b, &idx->shards[i]);
	b->ushards = malloc((idx->nshards + 1) * sizeof(*b->ushards));
	b->unit_lo = malloc((b->nsources + 1) * sizeof(*b->unit_lo));
	if (!b->ushards || !b->unit_lo)
		return -ENOMEM;
	for (s = 0; s < b->nsources; s++) {
		b->unit_lo[s] = n;
		source_shards(b, s, &lo, &hi);
		for (i = lo; i < hi; i++) {
			const struct sfs_shard *sh = &idx->shards[i];

			if (!sh->nsamples)
				continue;
			b->plan->sources[s].samples += sh->nsamples;
			b->ushards[k++] = (struct ushard){ i, n };
			n += shard_units(b, sh);
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
static void unit_get(const struct builder *b, uint64_t u, struct unit *un)
{
	size_t lo = b->ulook[u / 64], hi;
	const struct sfs_shard *sh;
	uint64_t step, left;

	while (b->ushards[lo + 1].unit <= u)
		lo++;
	un->shard = b->ushards[lo].shard;
	sh = &b->idx->shards[un->shard];
	step = unit_step(b, sh);
	un->first = (u - b->ushards[lo].unit) * step;
	left = sh->nsamples - un->first;
	un->count = left < step ? left : step;
	lo = 0;
	hi = b->nsources;
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (b->unit_lo[mid] <= u)
			lo = mid;
		else
			hi = mid;
	}
	un->src = lo;
	un->local = u - b->unit_lo[lo];
}

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
static int allocate(struct builder *b)
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

	source_shards(b, s, &lo, &hi);
	c->nodds = 0;
	c->odd = calloc(nu / 64 + 1, sizeof(*c->odd));
	c->odds = malloc((hi - lo + 1) * sizeof(*c->odds));
	if (!c->odd || !c->odds)
		return -ENOMEM;
	for (i = lo; i < hi; i++) {
		const struct sfs_shard *sh = &b->idx->shards[i];
		uint64_t n = shard_units(b, sh), last;

		if (!n)
			continue;
		last = sh->nsamples - (n - 1) * unit_step(b, sh);
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

/* The items of p, on threads when there are several items and CPUs. */
static void run_items(struct builder *b, struct sfs_pool *p)
{
	size_t i;

	p->threads = threads(b);
	if (p->n > 1 && p->threads > 1)
		sfs_pool_run(p);
	else
		for (i = 0; i < p->n; i++)
			p->work(p, i, NULL);
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
	run_items(b, &pool);
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
	run_items(b, &pool);
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

		if (cancelled(b)) {
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

		if (q % STRATIFY_STEP == 0 && cancelled(b)) {
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
static int order_epoch(struct builder *b)
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
	if (cancelled(b)) {
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

/* ---- 6. files: a reader's positions cut at unit boundaries ---- */

/* True when the samples of unit un are read in a shuffled order. */
static bool unit_permuted(const struct builder *b, const struct unit *un)
{
	return b->o->shuffle == SFS_SHUFFLE_SAMPLES && un->count > 1 &&
	       sfs_shard_sliceable(&b->idx->shards[un->shard]);
}

/*
 * Where partition puts the files and runs of readers lo .. hi - 1, in
 * reader order: one group of readers, on a thread of its own when there
 * are several; partition appends each group's to the plan's arrays.
 */
struct out {
	size_t lo, hi;
	uint32_t part; /* its number: the plan keeps its runs as runs[part] */
	struct sfs_plan_file *files;
	size_t nfiles, files_cap;
	struct sfs_run *runs;
	size_t nruns, runs_cap;
	uint64_t *perm; /* scratch: a unit's sample permutation */
	int rc;
	struct sfs_error err;
};

static int push_run(struct out *out, uint64_t first, uint64_t count)
{
	struct sfs_run *last = out->nruns > out->files[out->nfiles - 1].run_at ?
				       &out->runs[out->nruns - 1] :
				       NULL;

	if (last && last->first + last->count == first) {
		last->count += count;
		return 0;
	}
	if (SFS_GROW(out->runs, out->runs_cap, out->nruns + 1))
		return -ENOMEM;
	out->runs[out->nruns++] = (struct sfs_run){ first, count };
	out->files[out->nfiles - 1].nruns++;
	return 0;
}

static int cut_error(const struct builder *b, struct out *out,
		     const struct unit *un, uint64_t a, uint64_t len,
		     size_t reader)
{
	const struct sfs_shard *sh = &b->idx->shards[un->shard];
	uint32_t k = b->o->workers, rep = b->o->replicas;
	size_t rank = reader / k * rep;
	char who[64];

	/* a reader is read by the replicas of its group */
	if (rep > 1)
		snprintf(who, sizeof(who), "ranks %zu..%zu", rank,
			 rank + rep - 1);
	else
		snprintf(who, sizeof(who), "rank %zu", rank);
	return sfs_errorf(
		&out->err, -EINVAL,
		"%s cannot be sliced (a %s shard of %llu samples that is compressed or opaque), but %s worker %zu would read only samples %llu..%llu of it; use uncompressed shards, or choose world, workers, batch and start so that every reader's share ends on a shard boundary",
		sh->path, sh->format->name, (unsigned long long)sh->nsamples,
		who, reader % k, (unsigned long long)(un->first + a),
		(unsigned long long)(un->first + a + len - 1));
}

/* Add a file holding positions [a, a + len) of segment sg. */
static int add_file(const struct builder *b, struct out *out,
		    const struct seg *sg, uint64_t a, uint64_t len,
		    bool padding, size_t reader)
{
	const struct sfs_shard *sh;
	struct sfs_plan_file *f;
	struct unit u, *un = &u;
	bool whole_unit;
	struct sfs_prng rng;
	uint64_t i;

	unit_get(b, sg->unit, un);
	sh = &b->idx->shards[un->shard];
	a += sg->first;
	whole_unit = a == 0 && len == un->count;
	if (!sfs_shard_sliceable(sh) && !whole_unit)
		return cut_error(b, out, un, a, len, reader);
	if (SFS_GROW(out->files, out->files_cap, out->nfiles + 1))
		return -ENOMEM;
	f = &out->files[out->nfiles++];
	*f = (struct sfs_plan_file){
		.shard = un->shard,
		.nsamples = len,
		.npadding = padding ? len : 0,
		.part = out->part,
		.run_at = out->nruns,
	};
	if (!unit_permuted(b, un)) {
		f->whole = whole_unit && un->first == 0 &&
			   un->count == sh->nsamples;
		return push_run(out, un->first + a, len);
	}
	for (i = 0; i < un->count; i++)
		out->perm[i] = i;
	sfs_prng_init(&rng, b->seed[un->src], b->pass0[un->src] + sg->pass,
		      un->local + 1);
	sfs_prng_shuffle(&rng, out->perm, un->count);
	for (i = a; i < a + len; i++)
		if (push_run(out, un->first + out->perm[i], 1))
			return -ENOMEM;
	return 0;
}

/* ---- 5. partition: each reader's positions of the order ---- */

/* Index into b->segs of the segment holding epoch position g. */
static size_t find_seg(const struct builder *b, uint64_t g)
{
	size_t lo = 0, hi = b->nsegs;

	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (b->cum[mid] <= g)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* Reader t reads positions [q, end) of the equalised order next. */
static int read_positions(const struct builder *b, struct out *out, size_t t,
			  uint64_t q, uint64_t end)
{
	struct sfs_plan *plan = b->plan;
	struct sfs_plan_reader *r = &plan->readers[t];
	uint64_t n = plan->remaining;
	int rc;

	while (q < end) {
		uint64_t rpos = q % n, g = b->o->start + rpos;
		size_t i = find_seg(b, g);
		uint64_t a = g - b->cum[i], len = b->cum[i + 1] - g;

		if (cancelled(b))
			return -ECANCELED;
		if (len > end - q)
			len = end - q;
		if (len > n - rpos)
			len = n - rpos;
		rc = add_file(b, out, &b->segs[i], a, len, q >= n, t);
		if (rc)
			return rc;
		if (q >= n)
			r->npadding += len;
		q += len;
	}
	return 0;
}

/*
 * Interleaved: the equalised order is cut into batches; batch g is what
 * (replica group) rank g mod D reads at loader step s = g div D, from
 * worker s mod K (a DataLoader takes its workers' batches in turn), as that
 * worker's batch s div K, D = world / replicas.  So after S steps on every
 * rank the first S*D*batch samples of the order have been read, whatever
 * D and K are.  Batches of one reader that happen to be adjacent (D*K = 1)
 * stay one file.
 */
static int read_interleaved(const struct builder *b, struct out *out, size_t t)
{
	const struct sfs_plan_opts *o = b->o;
	uint64_t bs = o->batch, nbatches = b->plan->per_reader / bs, j;
	uint64_t group = t / o->workers, worker = t % o->workers;
	uint64_t groups = o->world / o->replicas;
	uint64_t from = 0, to = 0;
	int rc;

	for (j = 0; j < nbatches; j++) {
		uint64_t g = (j * o->workers + worker) * groups + group;

		if (g * bs != to) {
			rc = read_positions(b, out, t, from, to);
			if (rc)
				return rc;
			from = g * bs;
		}
		to = g * bs + bs;
	}
	return read_positions(b, out, t, from, to);
}

/* Whether reader t is read by one of the ranks asked for. */
static bool wanted(const struct builder *b, size_t t)
{
	size_t group = t / b->o->workers, k;

	for (k = 0; k < b->nranks; k++)
		if (b->ranks[k] / b->o->replicas == group)
			return true;
	return b->nranks == 0;
}

/* Pool item i: the readers of group i. */
static void partition_group(struct sfs_pool *p, size_t i, struct sfs_digest *d)
{
	const struct builder *b = p->arg;
	struct out *out = &b->outs[i];
	size_t t;

	(void)d;
	out->perm = malloc((b->maxunit + 1) * sizeof(*out->perm));
	if (!out->perm)
		out->rc = -ENOMEM;
	for (t = out->lo; t < out->hi && !out->rc; t++) {
		struct sfs_plan_reader *r = &b->plan->readers[t];

		r->file_at = out->nfiles;
		if (!wanted(b, t))
			continue;
		if (b->o->partition == SFS_PARTITION_INTERLEAVED)
			out->rc = read_interleaved(b, out, t);
		else
			out->rc = read_positions(
				b, out, t, (uint64_t)t * b->plan->per_reader,
				(uint64_t)(t + 1) * b->plan->per_reader);
		r->nfiles = out->nfiles - r->file_at;
	}
	free(out->perm);
	out->perm = NULL;
}

/* Append group out's files to the plan's (the first group's array becomes
 * the plan's, the others' are copied once and freed) and keep its runs as
 * they are, as part out->part, without the room doubling left. */
static int gather(struct builder *b, struct out *out)
{
	struct sfs_plan *plan = b->plan;
	struct sfs_plan_file *f;
	struct sfs_run *r;
	size_t i;

	if (out->nruns && (r = realloc(out->runs, out->nruns * sizeof(*r))))
		out->runs = r;
	plan->runs[out->part] = out->runs;
	plan->nruns += out->nruns;
	out->runs = NULL;
	for (i = out->lo; i < out->hi; i++)
		plan->readers[i].file_at += plan->nfiles;
	if (!plan->nfiles) {
		free(plan->files);
		plan->files = out->files;
		plan->nfiles = out->nfiles;
		out->files = NULL;
		return 0;
	}
	if (!out->nfiles)
		return 0;
	f = realloc(plan->files, (plan->nfiles + out->nfiles) * sizeof(*f));
	if (!f)
		return -ENOMEM;
	plan->files = f;
	memcpy(f + plan->nfiles, out->files, out->nfiles * sizeof(*f));
	plan->nfiles += out->nfiles;
	free(out->files);
	out->files = NULL;
	return 0;
}

/*
 * Step 5: the files of the readers wanted.  A plan for some ranks (a
 * daemon's, at an epoch switch) cuts them into one group per CPU, each
 * built on a thread of its own, its files appended in order and its runs
 * kept as a part of the plan's, where they were built; the plan of every
 * reader (shardfs-plan) is built by one thread, so that it is never held
 * twice.  Either way the files are the same.
 */
static int partition(struct builder *b)
{
	struct sfs_plan *plan = b->plan;
	struct sfs_pool pool = { .work = partition_group, .arg = b };
	size_t t, nwanted = 0, k = 1, g, seen;
	struct sfs_plan_file *f;
	int rc = 0;

	for (t = 0; t < plan->nreaders; t++)
		nwanted += wanted(b, t);
	if (b->nranks &&
	    (unsigned __int128)nwanted * plan->per_reader >= 1 << 16) {
		k = threads(b);
		k = k < nwanted ? k : nwanted;
	}
	b->outs = calloc(k, sizeof(*b->outs));
	plan->runs = calloc(k, sizeof(*plan->runs));
	if (!b->outs || !plan->runs)
		return -ENOMEM;
	b->nouts = k;
	plan->nparts = k;
	for (g = 0; g < k; g++)
		b->outs[g].part = (uint32_t)g;
	/* group g: the readers up to its share of the wanted ones */
	for (t = 0, g = 0, seen = 0; t < plan->nreaders; t++) {
		seen += wanted(b, t);
		if (g + 1 < k && seen > nwanted * (g + 1) / k) {
			b->outs[g++].hi = t;
			b->outs[g].lo = t;
		}
	}
	b->outs[g].hi = plan->nreaders;
	pool.n = k;
	run_items(b, &pool);
	for (g = 0; !rc && g < k; g++) {
		rc = b->outs[g].rc;
		if (rc && rc != -ECANCELED && b->err)
			*b->err = b->outs[g].err;
	}
	for (g = 0; !rc && g < k; g++)
		rc = gather(b, &b->outs[g]);
	if (rc)
		return rc;
	/* a view holds the plan for its epoch: give back the room doubling
	 * left (a shrinking realloc that fails leaves the block as it was) */
	if (plan->nfiles &&
	    (f = realloc(plan->files, plan->nfiles * sizeof(*f))))
		plan->files = f;
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
	for (i = find_seg(b, from); i < b->nsegs && b->cum[i] < to; i++) {
		uint64_t x = from > b->cum[i] ? from : b->cum[i];
		uint64_t y = to < b->cum[i + 1] ? to : b->cum[i + 1];
		struct sfs_plan_source *ps;
		struct unit un;

		unit_get(b, b->segs[i].unit, &un);
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

	b.nsources = idx->mix ? idx->mix->nsources : 1;
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
		rc = allocate(&b);
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
	rc = order_epoch(&b);
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
		uint64_t step = unit_step(&b, sh);
		uint64_t c = step < sh->nsamples ? step : sh->nsamples;

		if (sfs_shard_sliceable(sh) && c > b.maxunit)
			b.maxunit = c;
	}
	b.plan->readers = calloc(b.plan->nreaders, sizeof(*b.plan->readers));
	rc = b.plan->readers ? partition(&b) : -ENOMEM;
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
	for (s = 0; s < b.nouts; s++) {
		free(b.outs[s].files);
		free(b.outs[s].runs);
	}
	free(b.outs);
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
