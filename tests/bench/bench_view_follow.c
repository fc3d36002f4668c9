/*
 * bench_view_follow [windows [readers [live]]]: what a grow of a followed
 * source's view costs (sfs_view_follow, include/shardfs/view.h) after
 * many windows: a view of `windows` windows of `readers` readers (10 000
 * and 8), all but the last `live` of them consumed and deleted (hidden;
 * default none), grown by one window 21 times.  Prints the median time
 * of a grow and the heap one copy holds (mallinfo2), and the same for a
 * view of `live` windows only, none hidden: a grow that cost only what is
 * live would cost the same.  Windows are made in memory (two extents per
 * reader, as tests/unit/test_view_follow.c makes them).
 */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shardfs/view.h"
#include "shardfs/window.h"

#define RUNS 21

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static size_t heap(void)
{
	struct mallinfo2 m = mallinfo2();

	return m.uordblks + m.hblkhd;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Window k of nr readers: two extents of shard k each. */
static struct sfs_window *mkwindow(uint64_t k, size_t nr)
{
	struct sfs_window *w = calloc(1, sizeof(*w));
	size_t r;

	if (!w || !(w->readers = calloc(nr, sizeof(*w->readers))))
		abort();
	w->k = k;
	w->nreaders = nr;
	for (r = 0; r < nr; r++) {
		struct sfs_slice *s = &w->readers[r].bytes;

		s->extents = calloc(2, sizeof(*s->extents));
		if (!s->extents)
			abort();
		s->nextents = 2;
		s->extents[0] =
			(struct sfs_extent){ .len = 10, .file = (uint32_t)k };
		s->extents[1] = (struct sfs_extent){ .pos = 10,
						     .len = 5,
						     .file = (uint32_t)k };
		s->size = 15;
	}
	return w;
}

/* Build a view of n windows (first hidden of them), then grow it by one
 * window RUNS times; the median grow's seconds and one copy's heap. */
static void run(size_t n, size_t hidden, size_t nr,
		const struct sfs_view_reader *rd, double *secs, size_t *bytes)
{
	struct sfs_window **wins = malloc((n + RUNS) * sizeof(*wins));
	struct sfs_view_follow in = {
		.wins = wins, .readers = rd, .nreaders = nr, .ext = "tar"
	};
	struct sfs_view *v = NULL, *nv;
	struct sfs_error err;
	double t[RUNS];
	size_t i, before;

	if (!wins)
		abort();
	for (i = 0; i < n + RUNS; i++)
		wins[i] = mkwindow(i, nr);
	in.nwins = n;
	if (sfs_view_follow(NULL, &in, &v, &err))
		abort();
	in.hidden = hidden;
	*bytes = 0;
	for (i = 0; i < RUNS; i++) {
		in.nwins = n + i + 1;
		before = heap();
		t[i] = now();
		if (sfs_view_follow(v, &in, &nv, &err)) {
			fprintf(stderr, "%s\n", err.msg);
			abort();
		}
		t[i] = now() - t[i];
		*bytes = heap() - before;
		sfs_view_free(v);
		v = nv;
	}
	qsort(t, RUNS, sizeof(t[0]), cmp_double);
	*secs = t[RUNS / 2];
	sfs_view_free(v);
	for (i = 0; i < n + RUNS; i++)
		sfs_window_free(wins[i]);
	free(wins);
}

int main(int argc, char **argv)
{
	size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 10000;
	size_t nr = argc > 2 ? strtoul(argv[2], NULL, 10) : 8;
	size_t live = argc > 3 ? strtoul(argv[3], NULL, 10) : n;
	struct sfs_view_reader *rd = calloc(nr ? nr : 1, sizeof(*rd));
	double s;
	size_t b, r;

	if (!rd || !nr || live > n)
		return 2;
	for (r = 0; r < nr; r++)
		rd[r] = (struct sfs_view_reader){ 0, (uint32_t)r };
	run(n, n - live, nr, rd, &s, &b);
	printf("%zu windows x %zu readers, %zu live: a grow %.3f ms, a copy %zu bytes\n",
	       n, nr, live, s * 1e3, b);
	if (live < n) {
		run(live, 0, nr, rd, &s, &b);
		printf("%zu windows x %zu readers, all live: a grow %.3f ms, a copy %zu bytes\n",
		       live, nr, s * 1e3, b);
	}
	free(rd);
	return 0;
}
