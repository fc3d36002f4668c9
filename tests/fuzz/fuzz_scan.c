/*
 * libFuzzer harness: any bytes, scanned as a tar, jsonl and tfrecord shard.
 * A scan may refuse the bytes, never crash; when it accepts them its
 * boundaries must hold the index's invariants, the samples pass must find
 * as many samples, and a slice of every sample must read back in full.
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
