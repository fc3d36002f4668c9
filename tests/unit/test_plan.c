/*
 * The plan contract (include/shardfs/plan.h, docs/plan.md), checked over a
 * grid of settings against an order computed here from the PRNG alone.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "helpers.h"
#include "shardfs/mixture.h"
#include "shardfs/plan.h"
#include "shardfs/prng.h"

static void opts_init(struct sfs_plan_opts *o)
{
	struct sfs_options all;

	sfs_options_init(&all);
	*o = all.plan;
}

/* Global sample number of (shard, sample). */
static uint64_t gid(const struct sfs_index *idx, size_t shard, uint64_t s)
{
	uint64_t g = 0;
	size_t i;

	for (i = 0; i < shard; i++)
		g += idx->shards[i].nsamples;
	return g + s;
}

/*
 * The epoch order computed straight from the contract, independently of
 * plan.c: units, permutation, samples inside units.  Returns N gids.
 */
static uint64_t *reference_order(const struct sfs_index *idx,
				 const struct sfs_plan_opts *o, uint64_t *n)
{
	uint64_t *ushard = calloc(idx->nsamples + 1, sizeof(uint64_t));
	uint64_t *ufirst = calloc(idx->nsamples + 1, sizeof(uint64_t));
	uint64_t *ucount = calloc(idx->nsamples + 1, sizeof(uint64_t));
	uint64_t *perm, *out = malloc((idx->nsamples + 1) * sizeof(uint64_t));
	uint64_t nu = 0, u, k, pos = 0;
	struct sfs_prng r;
	size_t i;

	for (i = 0; i < idx->nshards; i++) {
		const struct sfs_shard *sh = &idx->shards[i];
		uint64_t b = o->block && sfs_shard_sliceable(sh) ? o->block :
								   sh->nsamples;

		for (k = 0; k < sh->nsamples; k += b) {
			ushard[nu] = i;
			ufirst[nu] = k;
			ucount[nu] = sh->nsamples - k < b ? sh->nsamples - k :
							    b;
			nu++;
		}
	}
	perm = malloc((nu + 1) * sizeof(uint64_t));
	for (u = 0; u < nu; u++)
		perm[u] = u;
	if (o->shuffle != SFS_SHUFFLE_NONE) {
		sfs_prng_init(&r, o->seed, o->epoch, 0);
		sfs_prng_shuffle(&r, perm, nu);
	}
	for (u = 0; u < nu; u++) {
		uint64_t un = perm[u], c = ucount[un];
		uint64_t *inner = malloc((c + 1) * sizeof(uint64_t));

		for (k = 0; k < c; k++)
			inner[k] = k;
		if (o->shuffle == SFS_SHUFFLE_SAMPLES &&
		    sfs_shard_sliceable(&idx->shards[ushard[un]])) {
			sfs_prng_init(&r, o->seed, o->epoch, un + 1);
			sfs_prng_shuffle(&r, inner, c);
		}
		for (k = 0; k < c; k++)
			out[pos++] =
				gid(idx, ushard[un], ufirst[un] + inner[k]);
		free(inner);
	}
	*n = pos;
	free(perm);
	free(ushard);
	free(ufirst);
	free(ucount);
	return out;
}

/* Every sample of every reader, in reader then file order. */
static uint64_t *flatten(const struct sfs_plan *p, const struct sfs_index *idx,
			 uint64_t *n, uint64_t *padding_seen)
{
	uint64_t *out =
		malloc((p->per_reader * p->nreaders + 1) * sizeof(uint64_t));
	uint64_t pos = 0, k;
	size_t t, f, r;

	*padding_seen = 0;
	for (t = 0; t < p->nreaders; t++) {
		const struct sfs_plan_reader *rd = &p->readers[t];
		uint64_t count = 0;

		for (f = 0; f < rd->nfiles; f++) {
			const struct sfs_plan_file *pf =
				&p->files[rd->file_at + f];
			const struct sfs_shard *sh = &idx->shards[pf->shard];
			uint64_t in_file = 0;

			if (pf->whole) {
				assert_int_equal(pf->nruns, 1);
				assert_int_equal(
					sfs_plan_file_runs(p, pf)->first, 0);
				assert_int_equal(
					sfs_plan_file_runs(p, pf)->count,
					sh->nsamples);
			}
			if (!sfs_shard_sliceable(sh))
				assert_true(pf->whole);
			for (r = 0; r < pf->nruns; r++) {
				const struct sfs_run *run =
					&sfs_plan_file_runs(p, pf)[r];

				for (k = 0; k < run->count; k++)
					out[pos++] = gid(idx, pf->shard,
							 run->first + k);
				in_file += run->count;
			}
			assert_int_equal(in_file, pf->nsamples);
			count += in_file;
			*padding_seen += pf->npadding;
		}
		assert_int_equal(count, p->per_reader);
	}
	*n = pos;
	return out;
}

/*
 * Position in the equalised order of sample j of reader t, as docs/plan.md
 * states it: contiguous ranges, or batches dealt in loader-step order.
 */
static uint64_t position(const struct sfs_plan_opts *o, uint64_t c, uint64_t t,
			 uint64_t j)
{
	uint64_t rank = t / o->workers, worker = t % o->workers, g;

	if (o->partition == SFS_PARTITION_CONTIGUOUS)
		return t * c + j;
	g = ((j / o->batch) * o->workers + worker) * o->world + rank;
	return g * o->batch + j % o->batch;
}

/*
 * The whole contract for one setting: every reader has c samples; sample j
 * of reader t is the epoch order's sample at position(t, j) from `start`,
 * wrapped for padding or cut for drop; c is a multiple of batch, ceil/floor
 * of n / T.
 */
static void check_plan(const struct sfs_index *idx,
		       const struct sfs_plan_opts *o)
{
	struct sfs_error err = { 0 };
	struct sfs_plan *p = NULL;
	uint64_t n_order, n_flat, pad_seen, T, n, c, q;
	uint64_t *order, *flat;
	char *j1, *j2;
	struct sfs_plan *again = NULL;

	assert_int_equal(sfs_plan_build(idx, o, &p, &err), 0);
	order = reference_order(idx, o, &n_order);
	assert_int_equal(n_order, idx->nsamples);
	T = (uint64_t)o->world * o->workers;
	n = idx->nsamples - o->start;
	assert_int_equal(p->nreaders, T);
	assert_int_equal(p->remaining, n);
	c = p->per_reader;
	assert_int_equal(c % o->batch, 0);
	if (o->remainder == SFS_REMAINDER_PAD) {
		assert_true(c * T >= n);
		assert_true(c * T - n < T * o->batch);
		assert_int_equal(p->padding, c * T - n);
		assert_int_equal(p->dropped, 0);
	} else {
		assert_true(c * T <= n);
		assert_true(n - c * T < T * o->batch);
		assert_int_equal(p->dropped, n - c * T);
		assert_int_equal(p->padding, 0);
	}
	flat = flatten(p, idx, &n_flat, &pad_seen);
	assert_int_equal(n_flat, c * T);
	assert_int_equal(pad_seen, p->padding);
	for (q = 0; q < n_flat; q++)
		assert_int_equal(
			flat[q],
			order[o->start + position(o, c, q / c, q % c) % n]);

	/* determinism: the same inputs give the same plan, byte for byte */
	assert_int_equal(sfs_plan_build(idx, o, &again, &err), 0);
	j1 = sfs_plan_json(p, idx);
	j2 = sfs_plan_json(again, idx);
	assert_string_equal(j1, j2);
	free(j1);
	free(j2);
	sfs_plan_free(again);
	free(order);
	free(flat);
	sfs_plan_free(p);
}

static void test_plan_grid(void **state)
{
	static const uint64_t sizes[][6] = {
		{ 1 },
		{ 7 },
		{ 10, 3, 25, 1, 8, 13 },
		{ 100, 100, 100 },
		{ 5, 5, 5, 5, 5, 5 },
	};
	static const size_t nsizes[] = { 1, 1, 6, 3, 6 };
	static const uint32_t worlds[] = { 1, 2, 3, 8 };
	static const uint32_t workers[] = { 1, 2, 4 };
	static const uint64_t batches[] = { 1, 4 };
	static const uint64_t blocks[] = { 0, 4 };
	/* every combination of: world, workers, batch, block, shuffle,
	 * remainder, partition, start */
	const size_t dims[] = { 4, 3, 2, 2, 3, 2, 2, 3 };
	size_t d, combo, ncombos = 1, i;
	struct sfs_plan_opts o;

	(void)state;
	for (i = 0; i < sizeof(dims) / sizeof(dims[0]); i++)
		ncombos *= dims[i];
	for (d = 0; d < 5; d++) {
		struct sfs_index *idx = mkindex(sizes[d], nsizes[d], NULL);
		uint64_t starts[] = { 0, idx->nsamples / 3, idx->nsamples - 1 };

		for (combo = 0; combo < ncombos; combo++) {
			size_t at[8], rest = combo;
			uint64_t T;

			for (i = 0; i < 8; i++) {
				at[i] = rest % dims[i];
				rest /= dims[i];
			}
			opts_init(&o);
			o.world = worlds[at[0]];
			o.workers = workers[at[1]];
			o.batch = batches[at[2]];
			o.block = blocks[at[3]];
			o.shuffle = (enum sfs_shuffle)at[4];
			o.remainder = (enum sfs_remainder)at[5];
			o.partition = (enum sfs_partition)at[6];
			o.start = starts[at[7]];
			o.epoch = at[7] + 3;
			o.seed = 99;
			T = (uint64_t)o.world * o.workers;
			if (o.remainder == SFS_REMAINDER_DROP &&
			    (idx->nsamples - o.start) / T / o.batch == 0)
				continue; /* refused: see test_plan_refusals */
			check_plan(idx, &o);
		}
		sfs_index_free(idx);
	}
}

static void test_plan_world_1024(void **state)
{
	uint64_t counts[50];
	struct sfs_index *idx;
	struct sfs_plan_opts o;
	size_t i;

	(void)state;
	for (i = 0; i < 50; i++)
		counts[i] = 10 + i % 7;
	idx = mkindex(counts, 50, NULL);
	opts_init(&o);
	o.world = 1024;
	o.workers = 2;
	check_plan(idx, &o); /* 632 samples for 2048 readers: pad */
	o.world = 16;
	o.workers = 8;
	o.remainder = SFS_REMAINDER_DROP;
	o.batch = 2;
	check_plan(idx, &o);
	sfs_index_free(idx);
}

static void test_plan_order_ignores_world_and_workers(void **state)
{
	static const uint64_t counts[] = { 30, 20, 50, 10, 40 };
	struct sfs_index *idx = mkindex(counts, 5, NULL);
	struct sfs_error err = { 0 };
	struct sfs_plan *one, *many;
	struct sfs_plan_opts o;
	uint64_t n1, n2, pad, *a, *b;

	(void)state;
	opts_init(&o);
	o.shuffle = SFS_SHUFFLE_SAMPLES;
	o.block = 7;
	o.seed = 5;
	assert_int_equal(sfs_plan_build(idx, &o, &one, &err), 0);
	o.world = 3;
	o.workers = 5;
	o.remainder = SFS_REMAINDER_DROP;
	assert_int_equal(sfs_plan_build(idx, &o, &many, &err), 0);
	a = flatten(one, idx, &n1, &pad);
	b = flatten(many, idx, &n2, &pad);
	assert_int_equal(n1, 150);
	assert_int_equal(n2, 150);
	assert_memory_equal(a, b, n1 * sizeof(uint64_t));
	free(a);
	free(b);
	sfs_plan_free(one);
	sfs_plan_free(many);
	sfs_index_free(idx);
}

/* 24 shards of 9 000 to 9 851 samples: over 2^16 in all, so a plan of
 * some ranks cuts them in groups on several threads. */
enum { LARGE = 24 };

static void large_counts(uint64_t counts[LARGE])
{
	size_t i;

	for (i = 0; i < LARGE; i++)
		counts[i] = 9000 + 37 * i;
}

/* Reader t has the same files in plans x and y. */
static void assert_reader_equal(const struct sfs_plan *x,
				const struct sfs_plan *y, size_t t)
{
	const struct sfs_plan_reader *a = &x->readers[t], *b = &y->readers[t];
	size_t f;

	assert_int_equal(a->nfiles, b->nfiles);
	assert_int_equal(a->npadding, b->npadding);
	for (f = 0; f < a->nfiles; f++) {
		const struct sfs_plan_file *fa = &x->files[a->file_at + f];
		const struct sfs_plan_file *fb = &y->files[b->file_at + f];

		assert_int_equal(fa->shard, fb->shard);
		assert_int_equal(fa->nsamples, fb->nsamples);
		assert_int_equal(fa->npadding, fb->npadding);
		assert_int_equal(fa->whole, fb->whole);
		assert_int_equal(fa->nruns, fb->nruns);
		assert_memory_equal(sfs_plan_file_runs(x, fa),
				    sfs_plan_file_runs(y, fb),
				    fa->nruns * sizeof(struct sfs_run));
	}
}

/*
 * A plan of ranks 1 and 4 of world=6, replicas=2: their readers' files are
 * the whole plan's, every other reader has none, the totals are the whole
 * plan's.  Its runs are fewer, unless every reader is wanted.
 */
static void check_ranks(const uint64_t *counts, size_t n,
			const struct sfs_plan_opts *o)
{
	static const uint32_t ranks[] = { 1, 4 };
	struct sfs_index *idx = mkindex(counts, n, NULL);
	struct sfs_error err = { 0 };
	struct sfs_plan *all, *some;
	size_t t, f;

	assert_int_equal(sfs_plan_build(idx, o, &all, &err), 0);
	assert_int_equal(
		sfs_plan_build_ranks(idx, o, ranks, 2, NULL, &some, &err), 0);
	assert_int_equal(some->per_reader, all->per_reader);
	assert_int_equal(some->padding, all->padding);
	assert_int_equal(some->nreaders, all->nreaders);
	/* ranks 1 and 4 are groups 0 and 2: readers 0, 1, 4, 5 */
	for (t = 0; t < all->nreaders; t++) {
		if (t / o->workers == 1)
			assert_int_equal(some->readers[t].nfiles, 0);
		else
			assert_reader_equal(some, all, t);
	}
	assert_true(some->nruns < all->nruns);
	for (f = 0, t = 0; f < some->nfiles; f++)
		t += some->files[f].nruns;
	assert_int_equal(some->nruns, t);
	sfs_plan_free(all);
	sfs_plan_free(some);
	sfs_index_free(idx);
}

/* Small plans are built by one thread; a plan of some ranks with 2^16
 * samples or more to cut, in groups of readers on one thread per CPU
 * (where there are several): either way the same files. */
static void test_plan_ranks_are_the_whole_plans(void **state)
{
	static const uint64_t small[] = { 30, 20, 50, 10, 40, 33 };
	uint64_t large[LARGE];
	struct sfs_plan_opts o;

	(void)state;
	large_counts(large);
	opts_init(&o);
	o.shuffle = SFS_SHUFFLE_SAMPLES;
	o.block = 7;
	o.world = 6;
	o.workers = 2;
	o.replicas = 2;
	check_ranks(small, 6, &o);
	check_ranks(large, LARGE, &o);
	o.workers = 3;
	o.remainder = SFS_REMAINDER_PAD;
	o.partition = SFS_PARTITION_INTERLEAVED;
	o.batch = 5;
	check_ranks(large, LARGE, &o);
	o.shuffle = SFS_SHUFFLE_UNITS;
	o.block = 0;
	o.start = 1234;
	check_ranks(large, LARGE, &o);
}

/* A build asked to stop fails with -ECANCELED and leaves nothing (ASan);
 * one whose flag stays down is built. */
static void test_plan_cancelled(void **state)
{
	static const uint32_t ranks[] = { 1 };
	uint64_t counts[LARGE];
	struct sfs_error err = { 0 };
	struct sfs_plan *p = NULL;
	struct sfs_plan_opts o;
	struct sfs_index *idx;
	atomic_bool cancel;

	(void)state;
	large_counts(counts);
	idx = mkindex(counts, LARGE, NULL);
	opts_init(&o);
	o.shuffle = SFS_SHUFFLE_SAMPLES;
	o.block = 7;
	o.world = 4;
	atomic_init(&cancel, true);
	assert_int_equal(sfs_plan_build_ranks(idx, &o, ranks, 1, &cancel, &p,
					      &err),
			 -ECANCELED);
	assert_null(p);
	assert_string_equal(err.msg, "the plan's build was cancelled");
	atomic_store(&cancel, false);
	assert_int_equal(
		sfs_plan_build_ranks(idx, &o, ranks, 1, &cancel, &p, &err), 0);
	assert_true(p->readers[1].nfiles > 0);
	sfs_plan_free(p);
	sfs_index_free(idx);
}

/* Sources 0, 1, 2 of a mixture in proportion 3 : 2 : 1, each a third of
 * idx's shards (the plan reads no more of a mixture than this). */
static void mkmix(struct sfs_index *idx, enum sfs_mix_batching batching)
{
	struct sfs_mix *m = calloc(1, sizeof(*m));
	size_t s, i;

	assert_non_null(m);
	m->kind = SFS_MIX_PROPORTION;
	m->sampling = SFS_MIX_BALANCED;
	m->batching = batching;
	m->nsources = 3;
	m->sources = calloc(3, sizeof(*m->sources));
	assert_non_null(m->sources);
	for (s = 0; s < 3; s++) {
		struct sfs_mix_source *src = &m->sources[s];

		src->name = strdup(s == 0 ? "a" : s == 1 ? "b" : "c");
		src->path = strdup(src->name);
		src->weight = (3 - s) * SFS_MIX_SCALE;
		src->shard_lo = s * idx->nshards / 3;
		src->shard_hi = (s + 1) * idx->nshards / 3;
		for (i = src->shard_lo; i < src->shard_hi; i++)
			src->nsamples += idx->shards[i].nsamples;
	}
	sfs_mix_attach(idx, m);
}

struct canceller {
	atomic_bool *flag;
	long ns; /* raise it after this long */
};

static void *cancel_later(void *arg)
{
	const struct canceller *c = arg;
	struct timespec t = { c->ns / 1000000000L, c->ns % 1000000000L };

	nanosleep(&t, NULL);
	atomic_store(c->flag, true);
	return NULL;
}

static long ns_since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) * 1000000000L + t.tv_nsec - t0->tv_nsec;
}

/*
 * A cancel that lands at any moment of idx's build for rank 1 (a pass of
 * a source's order, the stratified order, the segments' shuffle, a
 * reader's files) gives the plan built without it, or -ECANCELED, its
 * message and nothing left (ASan): never another plan.  The moments are
 * spread over the time the build takes.
 */
static void check_cancels(struct sfs_index *idx, const struct sfs_plan_opts *o)
{
	enum { MOMENTS = 24 };
	static const uint32_t ranks[] = { 1 };
	struct sfs_error err = { 0 };
	struct sfs_plan *want, *p;
	struct timespec t0;
	atomic_bool cancel;
	long took;
	size_t k, t, done = 0;

	atomic_init(&cancel, false);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(sfs_plan_build_ranks(idx, o, ranks, 1, &cancel, &want,
					      &err),
			 0);
	took = ns_since(&t0);
	for (k = 0; k < MOMENTS; k++) {
		struct canceller c = { &cancel, took * (long)k / MOMENTS };
		pthread_t tid;
		int rc;

		atomic_store(&cancel, false);
		p = NULL;
		assert_int_equal(pthread_create(&tid, NULL, cancel_later, &c),
				 0);
		rc = sfs_plan_build_ranks(idx, o, ranks, 1, &cancel, &p, &err);
		pthread_join(tid, NULL);
		if (rc) {
			assert_int_equal(rc, -ECANCELED);
			assert_null(p);
			assert_string_equal(err.msg,
					    "the plan's build was cancelled");
			continue;
		}
		done++;
		assert_int_equal(p->per_reader, want->per_reader);
		assert_int_equal(p->nruns, want->nruns);
		for (t = 0; t < want->nreaders; t++)
			assert_reader_equal(p, want, t);
		sfs_plan_free(p);
	}
	printf("# %zu of %d builds cancelled, one every %ld us of the %ld us a build takes\n",
	       MOMENTS - done, MOMENTS, took / MOMENTS / 1000, took / 1000);
	sfs_plan_free(want);
}

static void test_plan_cancelled_at_any_moment(void **state)
{
	uint64_t counts[LARGE];
	struct sfs_plan_opts o;
	struct sfs_index *idx;

	(void)state;
	large_counts(counts);
	opts_init(&o);
	o.shuffle = SFS_SHUFFLE_SAMPLES;
	o.world = 4;
	o.workers = 2;
	/* one-sample units: 2^18 to order in 4 chunks, slots to stratify,
	 * segments to shuffle */
	o.block = 1;
	idx = mkindex(counts, LARGE, NULL);
	check_cancels(idx, &o);
	mkmix(idx, SFS_MIX_STRATIFIED);
	check_cancels(idx, &o);
	sfs_mix_of(idx)->batching = SFS_MIX_RANDOM;
	check_cancels(idx, &o);
	sfs_index_free(idx);
}

/* A reader that cannot be served fails a plan of some ranks with the
 * whole plan's message, on one thread or several. */
static void test_plan_ranks_fail_as_the_whole_plan(void **state)
{
	static const uint32_t ranks[] = { 1, 4 };
	uint64_t counts[LARGE];
	bool opaque[LARGE] = { false };
	struct sfs_error err_all = { 0 }, err_some = { 0 };
	struct sfs_plan *p = NULL;
	struct sfs_plan_opts o;
	struct sfs_index *idx;

	(void)state;
	large_counts(counts);
	/* readers 4 and 5 (rank 4, the second group of two) cut it */
	opaque[20] = true;
	idx = mkindex(counts, LARGE, opaque);
	opts_init(&o);
	o.shuffle = SFS_SHUFFLE_NONE;
	o.world = 6;
	o.workers = 2;
	o.replicas = 2;
	assert_int_equal(sfs_plan_build(idx, &o, &p, &err_all), -EINVAL);
	assert_int_equal(sfs_plan_build_ranks(idx, &o, ranks, 2, NULL, &p,
					      &err_some),
			 -EINVAL);
	assert_non_null(strstr(
		err_all.msg,
		"s0020.tar cannot be sliced (a tar shard of 9740 samples that is compressed or opaque), but ranks 4..5 worker 0 would read only samples 0..1479 of it;"));
	assert_string_equal(err_some.msg, err_all.msg);
	sfs_index_free(idx);
}

static void test_plan_start_gives_the_suffix(void **state)
{
	static const uint64_t counts[] = { 30, 20, 50 };
	struct sfs_index *idx = mkindex(counts, 3, NULL);
	struct sfs_error err = { 0 };
	struct sfs_plan *full, *rest;
	struct sfs_plan_opts o;
	uint64_t n1, n2, pad, *a, *b;

	(void)state;
	opts_init(&o);
	o.epoch = 4;
	assert_int_equal(sfs_plan_build(idx, &o, &full, &err), 0);
	o.start = 37;
	o.world = 2;
	o.workers = 3;
	o.remainder = SFS_REMAINDER_DROP;
	assert_int_equal(sfs_plan_build(idx, &o, &rest, &err), 0);
	a = flatten(full, idx, &n1, &pad);
	b = flatten(rest, idx, &n2, &pad);
	assert_int_equal(rest->per_reader, 10);
	assert_int_equal(rest->dropped, 3);
	assert_int_equal(n2, 60);
	assert_memory_equal(a + 37, b, n2 * sizeof(uint64_t));
	free(a);
	free(b);
	sfs_plan_free(full);
	sfs_plan_free(rest);
	sfs_index_free(idx);
}

/*
 * Elastic resume with partition=interleaved: world=4 x workers=2 readers
 * stop after 5 loader steps; world=2 resumes with start = 5 steps x world
 * x batch.  What was read before (each worker's first batches, taken in
 * turn) and what is read after are the epoch, each sample once.
 */
static void test_plan_interleaved_resumes_elastically(void **state)
{
	static const uint64_t counts[] = { 60, 6, 33, 17, 41, 9, 25 };
	struct sfs_index *idx = mkindex(counts, 7, NULL);
	struct sfs_error err = { 0 };
	struct sfs_plan *before, *after;
	struct sfs_plan_opts o;
	uint64_t n1, n2, pad, *a, *b, *seen, steps = 5, s, q, nseen = 0;
	size_t r;

	(void)state;
	opts_init(&o);
	o.world = 4;
	o.workers = 2;
	o.batch = 3;
	o.block = 8;
	o.epoch = 2;
	o.partition = SFS_PARTITION_INTERLEAVED;
	assert_int_equal(sfs_plan_build(idx, &o, &before, &err), 0);
	a = flatten(before, idx, &n1, &pad);
	seen = calloc(idx->nsamples, sizeof(*seen));
	for (s = 0; s < steps; s++)
		for (r = 0; r < 4; r++) {
			/* rank r's step s: worker s % 2, its batch s / 2 */
			uint64_t t = r * 2 + s % 2, j = s / 2 * 3;

			for (q = 0; q < 3; q++, nseen++)
				seen[a[t * before->per_reader + j + q]]++;
		}
	o.world = 2;
	o.start = steps * 4 * 3;
	o.remainder = SFS_REMAINDER_DROP;
	assert_int_equal(sfs_plan_build(idx, &o, &after, &err), 0);
	b = flatten(after, idx, &n2, &pad);
	for (q = 0; q < n2; q++)
		seen[b[q]]++;
	assert_int_equal(nseen + n2 + after->dropped, idx->nsamples);
	for (q = 0, nseen = 0; q < idx->nsamples; q++) {
		assert_true(seen[q] <= 1);
		nseen += seen[q];
	}
	assert_int_equal(nseen, idx->nsamples - after->dropped);
	free(seen);
	free(a);
	free(b);
	sfs_plan_free(before);
	sfs_plan_free(after);
	sfs_index_free(idx);
}

/*
 * Found by fuzz_index: an opaque shard may claim any number of samples (the
 * index holds no boundaries for it).  With shuffle=samples the plan sized
 * its permutation scratch by that claim (2^40 samples: 8 TiB); only
 * sliceable units are permuted, so only they count.
 */
static void test_plan_opaque_claims_do_not_size_buffers(void **state)
{
	static const uint64_t counts[] = { 1ULL << 40, 4 };
	static const bool opaque[] = { true, false };
	struct sfs_index *idx = mkindex(counts, 2, opaque);
	struct sfs_error err = { 0 };
	struct sfs_plan *p = NULL;
	struct sfs_plan_opts o;

	(void)state;
	opts_init(&o);
	o.shuffle = SFS_SHUFFLE_SAMPLES;
	assert_int_equal(sfs_plan_build(idx, &o, &p, &err), 0);
	assert_int_equal(p->per_reader, (1ULL << 40) + 4);
	assert_int_equal(p->readers[0].nfiles, 2);
	sfs_plan_free(p);
	sfs_index_free(idx);
}

static void test_plan_epochs_differ(void **state)
{
	static const uint64_t counts[] = { 5, 5, 5, 5, 5, 5, 5, 5, 5, 5 };
	struct sfs_index *idx = mkindex(counts, 10, NULL);
	struct sfs_error err = { 0 };
	struct sfs_plan *e0, *e1;
	struct sfs_plan_opts o;
	uint64_t n, pad, *a, *b;

	(void)state;
	opts_init(&o);
	assert_int_equal(sfs_plan_build(idx, &o, &e0, &err), 0);
	o.epoch = 1;
	assert_int_equal(sfs_plan_build(idx, &o, &e1, &err), 0);
	a = flatten(e0, idx, &n, &pad);
	b = flatten(e1, idx, &n, &pad);
	assert_memory_not_equal(a, b, n * sizeof(uint64_t));
	/* the documented vector: shards in the order 6 3 2 9 8 1 4 7 0 5 at
	 * seed 0, epoch 0, and 7 4 3 8 5 9 2 0 6 1 at epoch 1 */
	assert_int_equal(a[0], 30);
	assert_int_equal(a[5], 15);
	assert_int_equal(a[45], 25);
	assert_int_equal(b[0], 35);
	assert_int_equal(b[45], 5);
	free(a);
	free(b);
	sfs_plan_free(e0);
	sfs_plan_free(e1);
	sfs_index_free(idx);
}

static void test_plan_prng_test_vector(void **state)
{
	uint64_t a[10] = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9 };
	const uint64_t want[10] = { 2, 3, 7, 9, 0, 8, 5, 4, 1, 6 };
	uint32_t a32[10];
	struct sfs_prng r;
	size_t i;

	(void)state;
	sfs_prng_init(&r, 42, 7, 0);
	assert_int_equal(sfs_prng_next(&r), 0x240b0f4ab0d63016ULL);
	assert_int_equal(sfs_prng_next(&r), 0x482fa2938c0f55d4ULL);
	assert_int_equal(sfs_prng_next(&r), 0xe374763b39af17bcULL);
	sfs_prng_init(&r, 42, 7, 0);
	sfs_prng_shuffle(&r, a, 10);
	assert_memory_equal(a, want, sizeof(want));
	/* the 32-bit shuffle (the plan's unit order) draws the same */
	for (i = 0; i < 10; i++)
		a32[i] = (uint32_t)i;
	sfs_prng_init(&r, 42, 7, 0);
	sfs_prng_shuffle32(&r, a32, 10);
	for (i = 0; i < 10; i++)
		assert_int_equal(a32[i], want[i]);
}

/*
 * below(bound) is what docs/plan.md says, draw r until r >= (2^64 -
 * bound) mod bound, then r mod bound: checked draw for draw against that
 * text on one stream, for small bounds and for bounds that reject about
 * half the draws (2^63 + 1) or almost none (2^64 - 1).
 */
static void test_plan_prng_below_is_the_spec(void **state)
{
	static const uint64_t bounds[] = { 1,
					   2,
					   3,
					   100,
					   (1ULL << 32) + 1,
					   (1ULL << 63) + 1,
					   (1ULL << 63) + 12345,
					   UINT64_MAX };
	struct sfs_prng got, spec;
	size_t b, k, rejected = 0;

	(void)state;
	sfs_prng_init(&got, 5, 6, 7);
	spec = got;
	for (b = 0; b < sizeof(bounds) / sizeof(*bounds); b++)
		for (k = 0; k < 2000; k++) {
			uint64_t bound = bounds[b],
				 threshold = (0 - bound) % bound;
			uint64_t r = sfs_prng_next(&spec);

			while (r < threshold) {
				rejected++;
				r = sfs_prng_next(&spec);
			}
			assert_int_equal(sfs_prng_below(&got, bound),
					 r % bound);
		}
	assert_true(rejected > 1000);
	assert_int_equal(got.state, spec.state);
}

static void test_plan_whole_shards_are_whole(void **state)
{
	static const uint64_t counts[] = { 10, 10, 10, 10 };
	struct sfs_index *idx = mkindex(counts, 4, NULL);
	struct sfs_error err = { 0 };
	struct sfs_plan *p;
	struct sfs_plan_opts o;
	size_t i;

	(void)state;
	opts_init(&o);
	o.world = 2;
	o.workers = 2;
	assert_int_equal(sfs_plan_build(idx, &o, &p, &err), 0);
	assert_int_equal(p->nfiles, 4);
	for (i = 0; i < 4; i++)
		assert_true(p->files[i].whole);
	sfs_plan_free(p);
	o.workers = 3; /* 40 / 6: shards are cut, 2 samples padded */
	assert_int_equal(sfs_plan_build(idx, &o, &p, &err), 0);
	assert_int_equal(p->per_reader, 7);
	assert_int_equal(p->padding, 2);
	assert_int_equal(p->readers[5].npadding, 2);
	sfs_plan_free(p);
	sfs_index_free(idx);
}

static void expect_refused(const struct sfs_index *idx,
			   const struct sfs_plan_opts *o, const char *want)
{
	struct sfs_error err = { 0 };
	struct sfs_plan *p = NULL;

	assert_int_equal(sfs_plan_build(idx, o, &p, &err), -EINVAL);
	assert_null(p);
	assert_string_equal(err.msg, want);
}

static void test_plan_refusals(void **state)
{
	static const uint64_t seven[] = { 7 };
	static const uint64_t ten[] = { 4, 6 };
	static const bool opaque[] = { true, false };
	struct sfs_index *idx = mkindex(seven, 1, NULL);
	struct sfs_index *none = mkindex(NULL, 0, NULL);
	struct sfs_index *mixed = mkindex(ten, 2, opaque);
	struct sfs_error err = { 0 };
	struct sfs_plan *p = NULL;
	struct sfs_plan_opts o;

	(void)state;
	opts_init(&o);
	o.world = 4;
	o.workers = 2;
	o.remainder = SFS_REMAINDER_DROP;
	expect_refused(
		idx, &o,
		"remainder=drop leaves 0 samples per reader: 7 samples for world=4 × workers=2; use remainder=pad or fewer readers");
	o.world = 1;
	o.batch = 8;
	expect_refused(
		idx, &o,
		"remainder=drop leaves 0 samples per reader: 7 samples for world=1 × workers=2 in batches of 8; use remainder=pad or fewer readers");
	opts_init(&o);
	o.start = 7;
	expect_refused(
		idx, &o,
		"start=7 leaves no samples: the epoch has 7; use start=0..6");
	opts_init(&o);
	expect_refused(none, &o,
		       "the index of /src has no samples: nothing to serve");
	/* the opaque shard of 4 cannot be cut for 3 readers of 4 each */
	o.workers = 3;
	o.shuffle = SFS_SHUFFLE_NONE;
	o.start = 1;
	expect_refused(
		mixed, &o,
		"s0000.tar cannot be sliced (a tar shard of 4 samples that is compressed or opaque), but rank 0 worker 0 would read only samples 1..3 of it; use uncompressed shards, or choose world, workers, batch and start so that every reader's share ends on a shard boundary");
	o.start = 0;
	o.workers = 1;
	check_plan(mixed, &o);
	/* the plan numbers units in 32 bits: a Parquet shard (sliceable by
	 * its footer, no boundary table here) of 2^32 + 1 samples in blocks
	 * of 1 is one unit too many */
	mixed->shards[0].format = sfs_format_by_name("parquet");
	mixed->shards[0].nsamples = (1ULL << 32) - 5;
	mixed->nsamples = (1ULL << 32) + 1;
	opts_init(&o);
	o.block = 1;
	expect_refused(
		mixed, &o,
		"block=1 cuts the 4294967297 samples of /src into 4294967297 units, more than the plan holds (4294967295); use a larger block");
	o.block = 1ULL << 31;
	assert_int_equal(sfs_plan_build(mixed, &o, &p, &err), 0);
	assert_int_equal(p->nunits, 3);
	assert_int_equal(p->nfiles, 3);
	sfs_plan_free(p);
	sfs_index_free(idx);
	sfs_index_free(none);
	sfs_index_free(mixed);
}

/*
 * A stratified mixture of S sources, source s the shards of counts
 * [first[s], first[s + 1]) and weight w[s] (0: none of it), epoch_size N:
 * with shuffle=none the epoch order is computed here from docs/plan.md
 * alone (the Sainte-Lague merge, slot by slot, of the sources' streams,
 * stream position p of source s its sample p mod n_s), and every reader's
 * samples and every source's skipped and padding counts must be its.
 */
static void check_stratified(const uint64_t *counts, const size_t *first,
			     const uint64_t *w, size_t S, uint64_t N)
{
	static const uint64_t epochs[] = { 0, 1, 3 }, blocks[] = { 0, 1, 3 };
	static const uint64_t batches[] = { 1, 5 };
	struct sfs_index *idx = mkindex(counts, first[S], NULL);
	struct sfs_mix *m = calloc(1, sizeof(*m));
	struct sfs_error err = { 0 };
	uint64_t n[8] = { 0 }, base[8] = { 0 }, a[8], j[8], skipped[8];
	uint64_t padding[8], *want, *got, ngot, pads, q, k;
	size_t s, t, e, bl, bt, st;

	assert_true(S <= 8);
	m->kind = SFS_MIX_PROPORTION;
	m->sampling = SFS_MIX_BALANCED;
	m->batching = SFS_MIX_STRATIFIED;
	m->epoch_size = N;
	m->nsources = S;
	m->sources = calloc(S, sizeof(*m->sources));
	for (s = 0; s < S; s++) {
		struct sfs_mix_source *src = &m->sources[s];
		char name[24];

		snprintf(name, sizeof(name), "m%zu", s);
		src->name = strdup(name);
		src->path = strdup(name);
		src->weight = w[s] * SFS_MIX_SCALE;
		src->shard_lo = first[s];
		src->shard_hi = first[s + 1];
		base[s] = gid(idx, first[s], 0);
		for (k = first[s]; k < first[s + 1]; k++)
			n[s] += counts[k];
		src->nsamples = n[s];
	}
	sfs_mix_attach(idx, m);
	want = malloc((N + 1) * sizeof(*want));
	for (e = 0; e < 3; e++)
		for (bl = 0; bl < 3; bl++)
			for (bt = 0; bt < 2; bt++)
				for (st = 0; st < 4; st++) {
					uint64_t starts[] = { 0, 1, N / 2,
							      N - 1 };
					struct sfs_plan_opts o;
					struct sfs_plan *p;

					if (starts[st] >= N)
						continue;
					opts_init(&o);
					o.shuffle = SFS_SHUFFLE_NONE;
					o.epoch = epochs[e];
					o.block = blocks[bl];
					o.batch = batches[bt];
					o.start = starts[st];
					if (sfs_plan_build(idx, &o, &p, &err))
						fail_msg("%s", err.msg);
					/* the order, from the allocation (step 0, not this test's) */
					for (s = 0; s < S; s++) {
						a[s] = p->sources[s].allocated;
						j[s] = skipped[s] = padding[s] =
							0;
					}
					for (q = 0; q < N; q++) {
						size_t best = S;

						for (t = 0; t < S; t++)
							if (j[t] < a[t] &&
							    (best == S ||
							     (2 * j[t] +
							      1) * a[best] <
								     (2 * j[best] +
								      1) * a[t]))
								best = t;
						assert_true(best < S);
						want[q] = base[best] +
							  (o.epoch * a[best] +
							   j[best]) %
								  n[best];
						j[best]++;
						if (q < o.start)
							skipped[best]++;
					}
					got = flatten(p, idx, &ngot, &pads);
					assert_int_equal(ngot, p->per_reader);
					assert_int_equal(
						p->per_reader % o.batch, 0);
					for (k = 0; k < ngot; k++) {
						uint64_t g = o.start +
							     k % (N - o.start);

						assert_int_equal(got[k],
								 want[g]);
						for (s = 0;
						     k >= N - o.start && s < S;
						     s++)
							if (want[g] >=
								    base[s] &&
							    want[g] <
								    base[s] +
									    n[s])
								padding[s]++;
					}
					for (s = 0; s < S; s++) {
						assert_int_equal(
							p->sources[s].skipped,
							skipped[s]);
						assert_int_equal(
							p->sources[s].padding,
							padding[s]);
						assert_int_equal(
							p->sources[s].dropped,
							0);
					}
					free(got);
					sfs_plan_free(p);
				}
	free(want);
	sfs_index_free(idx);
}

/* The stratified order computed without laying it out is the slot by slot
 * one: uneven sources, several passes, a source with no share, one
 * source, an epoch shorter than a batch. */
static void test_plan_stratified_is_the_merge(void **state)
{
	static const uint64_t counts[] = { 7, 5, 3, 11, 2, 1, 4, 6, 9, 1 };
	static const size_t five[] = { 0, 2, 3, 5, 6, 10 };
	static const size_t three[] = { 0, 3, 4, 10 };
	static const size_t two[] = { 0, 1, 10 };
	static const size_t one[] = { 0, 10 };
	static const uint64_t w5[] = { 7, 2, 5, 1, 3 },
			      w5z[] = { 7, 0, 5, 0, 3 };
	static const uint64_t w3[] = { 3, 2, 1 }, w3e[] = { 1, 1, 1 };
	static const uint64_t w2[] = { 1, 1000 }, w2b[] = { 5, 3 };
	static const uint64_t w1[] = { 1 };

	(void)state;
	check_stratified(counts, five, w5, 5, 49);
	check_stratified(counts, five, w5, 5, 200); /* passes over each */
	check_stratified(counts, five, w5z, 5, 37); /* two take nothing */
	check_stratified(counts, three, w3, 3, 49);
	check_stratified(counts, three, w3e, 3, 31); /* ties */
	check_stratified(counts, three, w3, 3, 3); /* shorter than a batch */
	check_stratified(counts, two, w2, 2, 10); /* 0 of the first */
	check_stratified(counts, two, w2b, 2, 2);
	check_stratified(counts, two, w2b, 2, 1);
	check_stratified(counts, one, w1, 1, 23);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plan_prng_test_vector),
		cmocka_unit_test(test_plan_prng_below_is_the_spec),
		cmocka_unit_test(test_plan_grid),
		cmocka_unit_test(test_plan_world_1024),
		cmocka_unit_test(test_plan_order_ignores_world_and_workers),
		cmocka_unit_test(test_plan_start_gives_the_suffix),
		cmocka_unit_test(test_plan_ranks_are_the_whole_plans),
		cmocka_unit_test(test_plan_ranks_fail_as_the_whole_plan),
		cmocka_unit_test(test_plan_cancelled),
		cmocka_unit_test(test_plan_cancelled_at_any_moment),
		cmocka_unit_test(test_plan_epochs_differ),
		cmocka_unit_test(test_plan_opaque_claims_do_not_size_buffers),
		cmocka_unit_test(test_plan_interleaved_resumes_elastically),
		cmocka_unit_test(test_plan_whole_shards_are_whole),
		cmocka_unit_test(test_plan_refusals),
		cmocka_unit_test(test_plan_stratified_is_the_merge),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
