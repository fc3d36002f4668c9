/* The TFRecord driver: framing, bounds, CRCs, and every malformed case. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "shardfs/crc32c.h"
#include "shardfs/indexer.h"

static void put_le(struct buf *b, uint64_t v, int n)
{
	unsigned char x[8];
	int i;

	for (i = 0; i < n; i++)
		x[i] = (unsigned char)(v >> (8 * i));
	buf_put(b, x, (size_t)n);
}

static void record(struct buf *b, const char *data)
{
	unsigned char len[8];
	size_t n = strlen(data);
	int i;

	for (i = 0; i < 8; i++)
		len[i] = (unsigned char)((uint64_t)n >> (8 * i));
	buf_put(b, len, 8);
	put_le(b, sfs_crc32c_masked(len, 8), 4);
	buf_put(b, data, n);
	put_le(b, sfs_crc32c_masked(data, n), 4);
}

static void test_format_tfrecord_crc32c_known_value(void **state)
{
	(void)state;
	/* RFC 3720's check value for "123456789" */
	assert_int_equal(sfs_crc32c(0, "123456789", 9), 0xE3069283);
}

static void test_format_tfrecord_bounds(void **state)
{
	struct sfs_error err = { 0 };
	struct buf b = { 0 };
	struct sfs_scan s;
	char *dir = tmpdir_new(), *path;

	(void)state;
	record(&b, "");
	record(&b, "hello");
	record(&b, "world!");
	path = write_at(dir, "x.tfrecord", b.p, b.len);
	assert_int_equal(
		scan_file(sfs_format_by_name("tfrecord"), path, &s, &err), 0);
	assert_int_equal(s.nsamples, 3);
	assert_int_equal(s.bounds[0], 0);
	assert_int_equal(s.bounds[1], 16);
	assert_int_equal(s.bounds[2], 37);
	assert_int_equal(s.bounds[3], 59);
	free(s.bounds);
	free(path);
	buf_free(&b);
	tmpdir_remove(dir);
}

/* Boundaries handed over a piece at a time (the indexer's spill). */
static void test_format_tfrecord_bounds_in_pieces(void **state)
{
	struct buf b = { 0 };
	char *dir = tmpdir_new(), *path;
	int i;

	(void)state;
	for (i = 0; i < 140000; i++)
		record(&b, i % 2 ? "" : "ab");
	path = write_at(dir, "x.tfrecord", b.p, b.len);
	assert_int_equal(
		expect_bounds_pieces(sfs_format_by_name("tfrecord"), path), 2);
	free(path);
	buf_free(&b);
	tmpdir_remove(dir);
}

static void expect_error(const struct buf *b, const char *fmt)
{
	struct sfs_error err = { 0 };
	struct sfs_scan s;
	char *dir = tmpdir_new(), *path, want[512];

	path = write_at(dir, "x.tfrecord", b->p, b->len);
	snprintf(want, sizeof(want), fmt, path);
	assert_int_equal(scan_file(sfs_format_by_name("tfrecord"), path, &s,
				   &err),
			 -EINVAL);
	assert_string_equal(err.msg, want);
	free(s.bounds);
	free(path);
	tmpdir_remove(dir);
}

static void test_format_tfrecord_length_past_eof(void **state)
{
	struct buf b = { 0 };
	unsigned char len[8] = { 0xff, 0xff, 0xff, 0, 0, 0, 0, 0 };

	(void)state;
	record(&b, "ok");
	buf_put(&b, len, 8);
	put_le(&b, sfs_crc32c_masked(len, 8), 4);
	buf_put(&b, "short", 5);
	expect_error(
		&b,
		"%s: TFRecord at byte 18 claims 16777215 data bytes, only 5 remain in the file");
	buf_free(&b);
}

static void test_format_tfrecord_truncated_header(void **state)
{
	struct buf b = { 0 };

	(void)state;
	record(&b, "ok");
	buf_put(&b, "abcdefgh", 8);
	expect_error(
		&b,
		"%s: truncated TFRecord header at byte 18: 8 bytes left, a header needs 12");
	buf_free(&b);
}

static void test_format_tfrecord_not_tfrecord(void **state)
{
	struct buf b = { 0 };

	(void)state;
	buf_put(&b, "{\"this\": \"is json\"}\n", 20);
	expect_error(
		&b,
		"%s: bad TFRecord length CRC at byte 0 (not a TFRecord file, or corrupted)");
	buf_free(&b);
}

static void test_format_tfrecord_verify_data_crc(void **state)
{
	struct sfs_indexer_opts o = { .jobs = 1 };
	struct sfs_indexer_report rep;
	struct sfs_error err = { 0 };
	struct sfs_index *idx;
	struct buf b = { 0 };
	char *dir = tmpdir_new(), *path, want[512];
	int fd;

	(void)state;
	record(&b, "hello");
	record(&b, "world");
	path = write_at(dir, "x.tfrecord", b.p, b.len);
	o.source = dir;
	assert_int_equal(sfs_indexer_build(&o, NULL, &idx, &rep, &err), 0);
	fd = open(path, O_RDONLY);
	assert_int_equal(
		sfs_format_by_name("tfrecord")
			->verify(fd, path, &idx->shards[0],
				 idx->bounds + idx->shards[0].bounds_at, &err),
		0);
	close(fd);
	/* flip one data byte of the second record, keep size and length */
	b.p[21 + 12] ^= 1;
	free(write_at(dir, "x.tfrecord", b.p, b.len));
	fd = open(path, O_RDONLY);
	assert_int_equal(
		sfs_format_by_name("tfrecord")
			->verify(fd, path, &idx->shards[0],
				 idx->bounds + idx->shards[0].bounds_at, &err),
		-EINVAL);
	close(fd);
	snprintf(want, sizeof(want),
		 "%s: bad TFRecord data CRC in record 1 at byte 21", path);
	assert_string_equal(err.msg, want);
	sfs_indexer_report_clear(&rep);
	sfs_index_free(idx);
	free(path);
	buf_free(&b);
	tmpdir_remove(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_format_tfrecord_crc32c_known_value),
		cmocka_unit_test(test_format_tfrecord_bounds),
		cmocka_unit_test(test_format_tfrecord_bounds_in_pieces),
		cmocka_unit_test(test_format_tfrecord_length_past_eof),
		cmocka_unit_test(test_format_tfrecord_truncated_header),
		cmocka_unit_test(test_format_tfrecord_not_tfrecord),
		cmocka_unit_test(test_format_tfrecord_verify_data_crc),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
