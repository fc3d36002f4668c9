/*
 * libFuzzer harness: any bytes, scanned as a tar, jsonl and tfrecord shard.
 * A scan may refuse the bytes, never crash; when it accepts them its
 * boundaries must hold the index's invariants, the samples pass must find
 * as many samples, a slice of every sample must read back in full, and the
 * boundaries handed over a piece at a time (the indexer's spill) must be
 * the same.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "shardfs/format.h"
#include "shardfs/index.h"
#include "shardfs/slice.h"

static int count(void *arg, uint64_t sample, const unsigned char d[32])
{
	(void)sample;
	(void)d;
	++*(uint64_t *)arg;
	return 0;
}

/* The boundaries a scan hands over, joined. */
struct pieces {
	uint64_t *bounds;
	uint64_t n;
};

static int take(void *arg, const uint64_t *bounds, uint64_t n)
{
	struct pieces *p = arg;
	uint64_t *b = realloc(p->bounds, (p->n + n) * sizeof(*b));

	if (!b)
		abort();
	memcpy(b + p->n, bounds, n * sizeof(*b));
	p->bounds = b;
	p->n += n;
	return 0;
}

/* The scan of fd again, its boundaries handed over: the same as whole's. */
static void check_pieces(const struct sfs_format_ops *ops, int fd, size_t size,
			 const struct sfs_scan *whole)
{
	struct pieces p = { 0 };
	struct sfs_scan_in in = { .fd = fd,
				  .path = "fuzz",
				  .size = size,
				  .bounds_fn = take,
				  .bounds_arg = &p };
	struct sfs_scan s;

	if (sfs_format_scan(ops, &in, &s, NULL) ||
	    s.nsamples != whole->nsamples || s.bounds_passed != p.n ||
	    (whole->sliceable &&
	     (p.n > s.nsamples + 1 ||
	      (p.n &&
	       memcmp(p.bounds, whole->bounds, p.n * sizeof(*p.bounds))) ||
	      memcmp(s.bounds, whole->bounds + p.n,
		     (s.nsamples + 1 - p.n) * sizeof(*p.bounds)))))
		abort();
	free(s.bounds);
	free(p.bounds);
}

static void check(const struct sfs_format_ops *ops, int fd, size_t size)
{
	struct sfs_scan_in in = { .fd = fd, .path = "fuzz", .size = size };
	struct sfs_scan s;
	uint64_t i, n = 0;

	if (sfs_format_scan(ops, &in, &s, NULL)) {
		free(s.bounds);
		return;
	}
	if (s.sliceable) {
		struct sfs_shard sh = { .path = "fuzz",
					.format = ops,
					.size = size,
					.nsamples = s.nsamples,
					.bounds_at = 0,
					.prefix_len = s.prefix_len,
					.newline_missing = s.newline_missing };
		struct sfs_index idx = { .bounds = s.bounds,
					 .nbounds = s.nsamples + 1 };
		struct sfs_run all = { 0, s.nsamples };
		struct sfs_slice *sl;

		if (s.bounds[0] < s.prefix_len || s.bounds[s.nsamples] > size)
			abort();
		for (i = 0; i < s.nsamples; i++)
			if (s.bounds[i] > s.bounds[i + 1])
				abort();
		if (!sfs_slice_build(&idx, &sh, fd, &all, 1, &sl, NULL)) {
			char *buf = malloc(sl->size + 1);

			if (sfs_slice_pread(sl, fd, buf, sl->size, 0) !=
			    (ssize_t)sl->size)
				abort();
			free(buf);
			sfs_slice_free(sl);
		}
	}
	if (!ops->samples(fd, "fuzz", count, &n, NULL) && n != s.nsamples)
		abort();
	check_pieces(ops, fd, size, &s);
	free(s.bounds);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int fd = memfd_create("fuzz", MFD_CLOEXEC);

	if (fd < 0)
		return 0;
	if (write(fd, data, size) == (ssize_t)size) {
		check(sfs_format_by_name("tar"), fd, size);
		check(sfs_format_by_name("jsonl"), fd, size);
		check(sfs_format_by_name("tfrecord"), fd, size);
	}
	close(fd);
	return 0;
}
