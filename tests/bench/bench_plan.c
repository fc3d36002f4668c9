/*
 * bench_plan SRC INDEX_DIR [world workers [shuffle [block [rank]]]]: load the
 * index (SRC a directory, INDEX_DIR "-" for SRC/.shardfs; or SRC a mixture
 * file and INDEX_DIR "-"), report its memory per shard and per sample, and
 * time building one epoch's plan for every reader, or with rank only for
 * that rank's readers as a daemon does at an epoch switch (median of 11
 * runs after a warm-up), and the heap the plan holds.
 */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shardfs/index.h"
#include "shardfs/mixture.h"
#include "shardfs/options.h"
#include "shardfs/plan.h"

#define RUNS 11

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Bytes allocated: small chunks and mmap'd large ones. */
static size_t heap(void)
{
	struct mallinfo2 mi = mallinfo2();

	return mi.uordblks + mi.hblkhd;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	struct sfs_error err = { 0 };
	struct sfs_options opts;
	struct sfs_index *idx;
	struct sfs_plan *plan;
	uint32_t rank = 0;
	double t[RUNS], t0, load;
	size_t heap0, heap1, held = 0;
	int i;

	if (argc < 3) {
		fprintf(stderr,
			"usage: bench_plan SRC INDEX_DIR|- [world workers [shuffle [block [rank]]]]\n");
		return 2;
	}
	sfs_options_init(&opts);
	opts.plan.world = argc > 3 ? (uint32_t)atoi(argv[3]) : 64;
	opts.plan.workers = argc > 4 ? (uint32_t)atoi(argv[4]) : 8;
	if (argc > 7)
		rank = (uint32_t)atoi(argv[7]);
	if ((argc > 5 && sfs_options_set(&opts, "shuffle", argv[5], &err)) ||
	    (argc > 6 && sfs_options_set(&opts, "block", argv[6], &err))) {
		fprintf(stderr, "bench_plan: %s\n", err.msg);
		return 2;
	}
	heap0 = heap();
	t0 = now();
	if (sfs_source_load(argv[1], strcmp(argv[2], "-") ? argv[2] : NULL,
			    &idx, &err)) {
		fprintf(stderr, "bench_plan: %s\n", err.msg);
		return 2;
	}
	load = now() - t0;
	heap1 = heap();
	printf("index: %zu shards, %llu samples, loaded in %.1f ms\n",
	       idx->nshards, (unsigned long long)idx->nsamples, load * 1e3);
	printf("index memory: %.1f heap bytes per shard; the boundary table, %.1f bytes per sample, is read from disk where needed\n",
	       (double)(heap1 - heap0) / (double)idx->nshards,
	       (double)(idx->nbounds * sizeof(uint64_t)) /
		       (double)idx->nsamples);
	for (i = -1; i < RUNS; i++) {
		t0 = now();
		if (sfs_plan_build_ranks(idx, &opts.plan, &rank, argc > 7, NULL,
					 &plan, &err)) {
			fprintf(stderr, "bench_plan: %s\n", err.msg);
			return 2;
		}
		if (i >= 0)
			t[i] = now() - t0;
		held = heap() - heap1;
		sfs_plan_free(plan);
	}
	qsort(t, RUNS, sizeof(t[0]), cmp);
	printf("plan world=%u workers=%u shuffle=%s block=%llu%s: median %.2f ms (min %.2f, max %.2f) over %d runs; the plan holds %.1f MB\n",
	       opts.plan.world, opts.plan.workers,
	       sfs_shuffle_name(opts.plan.shuffle),
	       (unsigned long long)opts.plan.block,
	       argc > 7 ? ", one rank" : "", t[RUNS / 2] * 1e3, t[0] * 1e3,
	       t[RUNS - 1] * 1e3, RUNS, (double)held / 1e6);
	sfs_index_free(idx);
	return 0;
}
