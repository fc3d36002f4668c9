/* The line driver: exact boundaries, CRLF, a missing final newline. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "shardfs/indexer.h"
#include "shardfs/slice.h"

static void test_format_jsonl_bounds_crlf_and_blank(void **state)
{
	static const char text[] = "{\"a\":1}\r\n\n{\"b\":2}\n";
	struct sfs_error err = { 0 };
	struct sfs_scan s;
	char *dir = tmpdir_new(), *path;

	(void)state;
	path = write_at(dir, "x.jsonl", text, strlen(text));
	assert_int_equal(scan_file(sfs_format_by_name("jsonl"), path, &s, &err),
			 0);
	assert_int_equal(s.nsamples, 3);
	assert_true(s.sliceable);
	assert_false(s.newline_missing);
	assert_int_equal(s.bounds[0], 0);
	assert_int_equal(s.bounds[1], 9);
	assert_int_equal(s.bounds[2], 10);
	assert_int_equal(s.bounds[3], 18);
	free(s.bounds);
	free(path);
	tmpdir_remove(dir);
}

static int refuse_piece(void *arg, const uint64_t *bounds, uint64_t n)
{
	(void)arg;
	(void)bounds;
	(void)n;
	return -EIO;
}

/*
 * A scan asked to hand its boundaries over (the indexer's spill) does so a
 * piece at a time as it finds them, never holding a big shard's whole;
 * a piece refused fails the scan.
 */
static void test_format_jsonl_bounds_in_pieces(void **state)
{
	const struct sfs_format_ops *ops = sfs_format_by_name("jsonl");
	struct sfs_error err = { 0 };
	struct sfs_scan_in in = { .bounds_fn = refuse_piece };
	struct sfs_scan s;
	size_t n = 200000;
	char *dir = tmpdir_new(), *path, *text = malloc(2 * n + 1);
	size_t i;

	(void)state;
	assert_non_null(text);
	/* 333 334 lines of one and two bytes, the last without its newline */
	for (i = 0; i < n; i++)
		memcpy(text + 2 * i, i % 3 ? "\n\n" : "x\n", 2);
	text[2 * n] = 'y';
	path = write_at(dir, "x.jsonl", text, 2 * n + 1);
	assert_int_equal(expect_bounds_pieces(ops, path), 5);
	in.path = path;
	in.size = 2 * n + 1;
	in.fd = open(path, O_RDONLY);
	assert_true(in.fd >= 0);
	assert_int_not_equal(sfs_format_scan(ops, &in, &s, &err), 0);
	close(in.fd);
	free(s.bounds);
	free(text);
	free(path);
	tmpdir_remove(dir);
}

/* Index text as the only shard and read back the slice of runs. */
static void expect_slice(const char *text, const struct sfs_run *runs,
			 size_t nruns, const char *want)
{
	struct sfs_indexer_opts o = { .jobs = 1 };
	struct sfs_indexer_report rep;
	struct sfs_error err = { 0 };
	struct sfs_index *idx;
	struct sfs_slice *sl;
	char *dir = tmpdir_new(), *path, got[256];
	int fd;

	path = write_at(dir, "x.jsonl", text, strlen(text));
	o.source = dir;
	assert_int_equal(sfs_indexer_build(&o, NULL, &idx, &rep, &err), 0);
	assert_int_equal(sfs_slice_build(idx, &idx->shards[0], -1, runs, nruns,
					 &sl, &err),
			 0);
	assert_int_equal(sl->size, strlen(want));
	fd = open(path, O_RDONLY);
	assert_int_equal(sfs_slice_pread(sl, fd, got, sizeof(got), 0),
			 (ssize_t)strlen(want));
	close(fd);
	got[sl->size] = '\0';
	assert_string_equal(got, want);
	sfs_slice_free(sl);
	sfs_indexer_report_clear(&rep);
	sfs_index_free(idx);
	free(path);
	tmpdir_remove(dir);
}

static void test_format_jsonl_missing_final_newline(void **state)
{
	const struct sfs_run last_first[] = { { 2, 1 }, { 0, 1 } };
	const struct sfs_run all[] = { { 0, 3 } };
	const struct sfs_run head[] = { { 0, 2 } };

	(void)state;
	/* the last line gets its '\n' wherever it lands in the slice */
	expect_slice("one\r\ntwo\nthree", last_first, 2, "three\none\r\n");
	expect_slice("one\r\ntwo\nthree", all, 1, "one\r\ntwo\nthree\n");
	expect_slice("one\r\ntwo\nthree", head, 1, "one\r\ntwo\n");
	expect_slice("one\ntwo\n", head, 1, "one\ntwo\n");
}

static void test_format_jsonl_empty_file(void **state)
{
	struct sfs_error err = { 0 };
	struct sfs_scan s;
	char *dir = tmpdir_new(), *path, want[512];

	(void)state;
	path = write_at(dir, "x.jsonl", "", 0);
	assert_int_equal(scan_file(sfs_format_by_name("jsonl"), path, &s, &err),
			 -EINVAL);
	snprintf(
		want, sizeof(want),
		"%s: empty file at byte 0: a jsonl shard holds at least one sample",
		path);
	assert_string_equal(err.msg, want);
	free(path);
	tmpdir_remove(dir);
}

static void test_format_jsonl_detect(void **state)
{
	(void)state;
	assert_ptr_equal(sfs_format_detect("a/b.jsonl"),
			 sfs_format_by_name("jsonl"));
	assert_ptr_equal(sfs_format_detect("b.ndjson"),
			 sfs_format_by_name("jsonl"));
	assert_ptr_equal(sfs_format_detect("b.tfrecord"),
			 sfs_format_by_name("tfrecord"));
	assert_ptr_equal(sfs_format_detect("b.parquet"),
			 sfs_format_by_name("parquet"));
	assert_ptr_equal(sfs_format_detect("b.npy"),
			 sfs_format_by_name("opaque"));
	assert_null(sfs_format_detect("README.md"));
	assert_null(sfs_format_detect(".jsonl"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_format_jsonl_bounds_crlf_and_blank),
		cmocka_unit_test(test_format_jsonl_missing_final_newline),
		cmocka_unit_test(test_format_jsonl_empty_file),
		cmocka_unit_test(test_format_jsonl_bounds_in_pieces),
		cmocka_unit_test(test_format_jsonl_detect),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
