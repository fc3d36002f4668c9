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
	const struct sfs_mix *m = sfs_mix_of(b->idx);
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
 * leave up to the streams before it unused; nothing grows them one by one.
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
	lo = SFS_PARTITION_POINT(i, lo + 1, hi, c->odds[i].k <= k) - 1;
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

	if ((hi - lo) / n >= PASSES_MAX) {
		const struct sfs_mix *m = sfs_mix_of(b->idx);

		return m ? sfs_errorf(
				   b->err, -EINVAL,
				   "%s: the epoch takes %llu samples of source \"%s\", which has %llu: more than %u passes over it; lower its weight or epoch_size",
				   m->file, (unsigned long long)(hi - lo),
				   m->sources[s].name, (unsigned long long)n,
				   PASSES_MAX) :
			   sfs_errorf(
				   b->err, -EINVAL,
				   "epoch_size=%llu is more than %u passes over the %llu samples of %s; use a smaller epoch_size",
				   (unsigned long long)(hi - lo), PASSES_MAX,
				   (unsigned long long)n, b->idx->source);
	}
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
 * Stratified: position after position, the source whose next sample j has
 * the smallest (2j + 1) / (2 a), ties to the earlier source, gives it; so
 * any stretch of the order holds each source in proportion to a, give or
 * take one sample.  That is the merge of every source's ticks, tick j of
 * source s at (2j + 1) / (2 a_s), ordered by value and then source; so
 * where a tick lands, and how many ticks of a source come before a
 * position, is arithmetic: the order is never laid out sample by sample
 * (nearly every sample would be a segment of its own), its readers find
 * their positions from the sources' streams (strat_* and the cursor).
 */

static uint64_t alloc_of(const struct builder *b, size_t s)
{
	return b->plan->sources[s].allocated;
}

/* Whether tick (s, i) comes before tick (t, k). */
static bool tick_before(const struct builder *b, size_t s, uint64_t i, size_t t,
			uint64_t k)
{
	unsigned __int128 x = ((unsigned __int128)i * 2 + 1) * alloc_of(b, t);
	unsigned __int128 y = ((unsigned __int128)k * 2 + 1) * alloc_of(b, s);

	return x < y || (x == y && s < t);
}

/* How many ticks of source t (t != s) come before tick (s, j): the odd
 * m = 2i + 1 with m a_s < (2j + 1) a_t, or <= when t is earlier. */
static uint64_t ticks_before(const struct builder *b, size_t t, size_t s,
			     uint64_t j)
{
	uint64_t at = alloc_of(b, t), as = alloc_of(b, s);
	unsigned __int128 x, m;

	if (!at)
		return 0;
	/* (2j + 1) a_t < 2 a_s a_t <= N^2 / 2: 128 bits hold it; 64 bits
	 * mostly do, and their division is several times faster */
	x = ((unsigned __int128)j * 2 + 1) * at;
	if (x >> 64 == 0)
		m = t < s ? (uint64_t)x / as : ((uint64_t)x - 1) / as;
	else
		m = t < s ? x / as : (x - 1) / as;
	m = (m + 1) / 2;
	return m < at ? (uint64_t)m : at;
}

/* The position of tick (s, j) in the stratified order. */
static uint64_t tick_position(const struct builder *b, size_t s, uint64_t j)
{
	uint64_t q = j;
	size_t t;

	for (t = 0; t < b->nsources; t++)
		if (t != s)
			q += ticks_before(b, t, s, j);
	return q;
}

/* Whether source s has taken j samples or fewer before position q:
 * tick j is at q or later (there is no tick a_s). */
static bool taken_by(const struct builder *b, size_t s, uint64_t j, uint64_t q)
{
	return j == alloc_of(b, s) || tick_position(b, s, j) >= q;
}

uint64_t sfs_plan_strat_taken(const struct builder *b, size_t s, uint64_t q)
{
	uint64_t a = alloc_of(b, s), N = b->plan->total, lo, hi, e, p, step;

	if (!a || q == 0)
		return 0;
	if (q >= N)
		return a;
	/* the answer is within a few of q a_s / N: gallop from there to a
	 * bracket [lo, hi] of it, then halve */
	e = (uint64_t)((unsigned __int128)q * a / N);
	if (taken_by(b, s, e, q)) {
		hi = e;
		lo = 0;
		for (step = 1; lo < hi; step *= 2) {
			p = hi - lo > step ? hi - step : lo;
			if (!taken_by(b, s, p, q)) {
				lo = p + 1;
				break;
			}
			hi = p;
		}
	} else {
		lo = e + 1;
		hi = a;
		for (step = 1; lo < hi; step *= 2) {
			p = hi - lo > step ? lo + step - 1 : hi;
			if (p == hi)
				break;
			if (taken_by(b, s, p, q)) {
				hi = p;
				break;
			}
			lo = p + 1;
		}
	}
	while (lo < hi) {
		p = lo + (hi - lo) / 2;
		if (taken_by(b, s, p, q))
			hi = p;
		else
			lo = p + 1;
	}
	return lo;
}

int sfs_plan_cursor_init(const struct builder *b, struct cursor *c)
{
	*c = (struct cursor){ 0 };
	if (!b->seg_lo)
		return 0;
	c->j = calloc(b->nsources + 1, sizeof(*c->j));
	return c->j ? 0 : -ENOMEM;
}

void sfs_plan_cursor_free(struct cursor *c)
{
	free(c->j);
	c->j = NULL;
}

/* Source s's piece holding its stream position j. */
static size_t strat_piece(const struct builder *b, size_t s, uint64_t j)
{
	return SFS_PARTITION_POINT(i, b->seg_lo[s] + 1, b->seg_lo[s + 1],
				   b->cum[i] <= j) -
	       1;
}

/*
 * j[t] = the samples of source t before position g.  Only the largest
 * source m is searched: from its first tick at or after g (position P),
 * every other source's count is one division, and the P - g ticks between
 * are taken back latest first; between two ticks of m there is at most
 * one of any other source, so that is fewer than S.
 */
static void seek(const struct builder *b, uint64_t *j, uint64_t g)
{
	size_t S = b->nsources, m = 0, t, late;
	uint64_t jm, P;

	for (t = 1; t < S; t++)
		if (alloc_of(b, t) > alloc_of(b, m))
			m = t;
	jm = sfs_plan_strat_taken(b, m, g);
	if (jm < alloc_of(b, m)) {
		P = tick_position(b, m, jm);
		for (t = 0; t < S; t++)
			j[t] = t == m ? jm : ticks_before(b, t, m, jm);
	} else {
		P = b->plan->total;
		for (t = 0; t < S; t++)
			j[t] = alloc_of(b, t);
	}
	for (; P > g; P--) {
		late = S;
		for (t = 0; t < S; t++)
			if (t != m && j[t] &&
			    (late == S ||
			     tick_before(b, late, j[late] - 1, t, j[t] - 1)))
				late = t;
		j[late]--;
	}
}

const struct seg *sfs_plan_order_at(const struct builder *b, struct cursor *c,
				    uint64_t g, uint64_t *a, uint64_t *len)
{
	size_t S = b->nsources, s = S, s2 = S, t, k;
	uint64_t as, end, run;
	unsigned __int128 y, m;

	if (!b->seg_lo) {
		k = sfs_plan_find_seg(b, g);
		*a = g - b->cum[k];
		*len = b->cum[k + 1] - g;
		return &b->segs[k];
	}
	/* positions c->g .. g - 1 are all source c->s's: step; else seek */
	if (c->valid && g >= c->g && g - c->g <= c->run) {
		c->j[c->s] += g - c->g;
	} else {
		seek(b, c->j, g);
	}
	/* the source at g: the earliest next tick; it runs on until the
	 * next tick of any other source */
	for (t = 0; t < S; t++) {
		if (c->j[t] >= alloc_of(b, t))
			continue;
		if (s == S || tick_before(b, t, c->j[t], s, c->j[s])) {
			s2 = s;
			s = t;
		} else if (s2 == S ||
			   tick_before(b, t, c->j[t], s2, c->j[s2])) {
			s2 = t;
		}
	}
	as = alloc_of(b, s);
	if (s2 == S) {
		run = as - c->j[s];
	} else {
		/* ticks i of s before tick (s2, j2): odd m = 2i + 1 with
		 * m a_s2 < (2 j2 + 1) a_s, or <= when s is earlier */
		y = ((unsigned __int128)c->j[s2] * 2 + 1) * as;
		m = s < s2 ? y / alloc_of(b, s2) : (y - 1) / alloc_of(b, s2);
		m = (m + 1) / 2;
		run = (m < as ? (uint64_t)m : as) - c->j[s];
	}
	c->valid = true;
	c->g = g;
	c->s = s;
	c->run = run;
	k = strat_piece(b, s, c->j[s]);
	end = k + 1 < b->seg_lo[s + 1] ? b->cum[k + 1] : as;
	*a = c->j[s] - b->cum[k];
	*len = end - c->j[s] < run ? end - c->j[s] : run;
	return &b->segs[k];
}

/* Steps 1 and 2: the epoch order as pieces of units, and where each
 * begins. */
int sfs_plan_order_epoch(struct builder *b)
{
	const struct sfs_mix *m = sfs_mix_of(b->idx);
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
		/* each source's pieces stay where its stream put them; their
		 * counts become positions in the source's stream */
		for (s = 0; s < S; s++) {
			for (i = seg_lo[s], sum = 0; i < seg_lo[s + 1]; i++) {
				uint64_t c = b->cum[i];

				b->cum[i] = sum;
				sum += c;
			}
		}
		b->seg_lo = seg_lo;
		return 0;
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
