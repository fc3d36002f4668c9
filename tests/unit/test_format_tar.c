/* The tar driver on hand-made archives whose every offset is known. */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "shardfs/indexer.h"
#include "shardfs/slice.h"

#define LONG_DIR                                                            \
	"a-directory-name-that-is-long-enough-to-need-an-extension-header-" \
	"because-ustar-names-stop-at-100"

/* An archive with every kind of header a WebDataset shard may hold. */
struct fixture {
	struct buf tar;
	size_t prefix; /* end of the global header */
	size_t start[4]; /* first byte of samples a, b, c; end of c */
	unsigned char cls[512], jpg[100], json[7];
};

static void build(struct fixture *f)
{
	memset(f, 0, sizeof(*f));
	memset(f->cls, 'c', sizeof(f->cls));
	memset(f->jpg, 'j', sizeof(f->jpg));
	memcpy(f->json, "{\"a\":1}", 7);
	tar_pax(&f->tar, 'g', "comment", "made by the shardfs tests");
	f->prefix = f->tar.len;
	/* sample a: an empty member and one of exactly 512 bytes */
	f->start[0] = tar_member(&f->tar, "a.jpg", '0', NULL, 0);
	tar_member(&f->tar, "a.cls", '0', f->cls, sizeof(f->cls));
	/* sample b: a pax long name, then a GNU long name, same key */
	f->start[1] = tar_pax(&f->tar, 'x', "path", LONG_DIR "/b.jpg");
	tar_member(&f->tar, "b.jpg", '0', f->jpg, sizeof(f->jpg));
	tar_longname(&f->tar, LONG_DIR "/b.json");
	tar_member(&f->tar, "b.json", '0', f->json, sizeof(f->json));
	/* sample c: a directory, then a member in it */
	f->start[2] = tar_member(&f->tar, "c/", '5', NULL, 0);
	tar_member(&f->tar, "c/c.txt", '0', "x", 1);
	f->start[3] = f->tar.len;
	tar_end(&f->tar);
}

static void test_format_tar_bounds_exact(void **state)
{
	struct sfs_error err = { 0 };
	struct sfs_scan s;
	struct fixture f;
	char *dir = tmpdir_new(), *path;

	(void)state;
	build(&f);
	path = write_at(dir, "s.tar", f.tar.p, f.tar.len);
	assert_int_equal(scan_file(sfs_format_by_name("tar"), path, &s, &err),
			 0);
	assert_int_equal(s.nsamples, 3);
	assert_true(s.sliceable);
	assert_int_equal(s.prefix_len, f.prefix);
	assert_int_equal(s.prefix_len, 1024);
	assert_int_equal(s.bounds[0], f.start[0]);
	assert_int_equal(s.bounds[1], f.start[1]);
	assert_int_equal(s.bounds[2], f.start[2]);
	assert_int_equal(s.bounds[3], f.start[3]);
	free(s.bounds);
	free(path);
	buf_free(&f.tar);
	tmpdir_remove(dir);
}

/* Boundaries handed over a piece at a time (the indexer's spill): 70 000
 * samples of one empty member each, after a global pax header. */
static void test_format_tar_bounds_in_pieces(void **state)
{
	struct buf b = { 0 };
	char *dir = tmpdir_new(), *path, name[32];
	int i;

	(void)state;
	tar_pax(&b, 'g', "comment", "x");
	for (i = 0; i < 70000; i++) {
		snprintf(name, sizeof(name), "%06d.txt", i);
		tar_member(&b, name, '0', NULL, 0);
	}
	tar_end(&b);
	path = write_at(dir, "s.tar", b.p, b.len);
	assert_int_equal(expect_bounds_pieces(sfs_format_by_name("tar"), path),
			 1);
	free(path);
	buf_free(&b);
	tmpdir_remove(dir);
}

/* Read a tar from memory: names and data of every member, joined. */
static void list_tar(const struct buf *b, struct buf *names, struct buf *data)
{
	struct archive *a = archive_read_new();
	struct archive_entry *e;
	char chunk[4096];
	la_ssize_t n;
	int r;

	archive_read_support_format_tar(a);
	assert_int_equal(archive_read_open_memory(a, b->p, b->len), ARCHIVE_OK);
	while ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
		buf_put(names, archive_entry_pathname(e),
			strlen(archive_entry_pathname(e)));
		buf_put(names, "\n", 1);
		while ((n = archive_read_data(a, chunk, sizeof(chunk))) > 0)
			buf_put(data, chunk, (size_t)n);
		assert_true(n == 0);
	}
	assert_int_equal(r, ARCHIVE_EOF);
	buf_put(names, "", 1);
	archive_read_free(a);
}

static void test_format_tar_slice_reads_back(void **state)
{
	const struct sfs_run runs[] = { { 2, 1 }, { 0, 1 } };
	struct sfs_indexer_opts o = { .jobs = 1, .hash = true };
	struct sfs_indexer_report rep;
	struct sfs_error err = { 0 };
	struct sfs_index *idx;
	struct sfs_slice *sl;
	struct buf got = { 0 }, want = { 0 }, names = { 0 }, data = { 0 };
	struct fixture f;
	char *dir = tmpdir_new(), *path;
	int fd;

	(void)state;
	build(&f);
	path = write_at(dir, "s.tar", f.tar.p, f.tar.len);
	o.source = dir;
	assert_int_equal(sfs_indexer_build(&o, NULL, &idx, &rep, &err), 0);
	assert_int_equal(idx->nshards, 1);
	assert_int_equal(sfs_slice_build(idx, &idx->shards[0], -1, runs, 2, &sl,
					 &err),
			 0);

	/* global header + sample c + sample a + end of archive */
	buf_put(&want, f.tar.p, f.prefix);
	buf_put(&want, f.tar.p + f.start[2], f.start[3] - f.start[2]);
	buf_put(&want, f.tar.p + f.start[0], f.start[1] - f.start[0]);
	buf_zero(&want, 1024);
	assert_int_equal(sl->size, want.len);
	got.p = malloc(sl->size);
	got.len = sl->size;
	fd = open(path, O_RDONLY);
	assert_int_equal(sfs_slice_pread(sl, fd, got.p, got.len, 0),
			 (ssize_t)got.len);
	assert_memory_equal(got.p, want.p, want.len);

	/* odd reads across extent boundaries give the same bytes */
	{
		unsigned char one[777];
		uint64_t pos;

		for (pos = 0; pos < sl->size; pos += 333) {
			ssize_t n =
				sfs_slice_pread(sl, fd, one, sizeof(one), pos);
			size_t expect = sl->size - pos < sizeof(one) ?
						(size_t)(sl->size - pos) :
						sizeof(one);

			assert_int_equal(n, (ssize_t)expect);
			assert_memory_equal(one, want.p + pos, expect);
		}
		assert_int_equal(sfs_slice_pread(sl, fd, one, 1, sl->size), 0);
	}
	close(fd);

	list_tar(&got, &names, &data);
	assert_string_equal((char *)names.p, "c/\nc/c.txt\na.jpg\na.cls\n");
	assert_int_equal(data.len, 1 + sizeof(f.cls));
	assert_memory_equal(data.p, "x", 1);
	assert_memory_equal(data.p + 1, f.cls, sizeof(f.cls));

	sfs_slice_free(sl);
	sfs_indexer_report_clear(&rep);
	sfs_index_free(idx);
	buf_free(&got);
	buf_free(&want);
	buf_free(&names);
	buf_free(&data);
	buf_free(&f.tar);
	free(path);
	tmpdir_remove(dir);
}

static void test_format_tar_slice_keeps_long_names(void **state)
{
	const struct sfs_run run = { 1, 1 };
	struct sfs_indexer_opts o = { .jobs = 1 };
	struct sfs_indexer_report rep;
	struct sfs_error err = { 0 };
	struct sfs_index *idx;
	struct sfs_slice *sl;
	struct buf got = { 0 }, names = { 0 }, data = { 0 };
	struct fixture f;
	char *dir = tmpdir_new(), *path;
	int fd;

	(void)state;
	build(&f);
	path = write_at(dir, "s.tar", f.tar.p, f.tar.len);
	o.source = dir;
	assert_int_equal(sfs_indexer_build(&o, NULL, &idx, &rep, &err), 0);
	assert_int_equal(sfs_slice_build(idx, &idx->shards[0], -1, &run, 1, &sl,
					 &err),
			 0);
	got.len = sl->size;
	got.p = malloc(got.len);
	fd = open(path, O_RDONLY);
	assert_int_equal(sfs_slice_pread(sl, fd, got.p, got.len, 0),
			 (ssize_t)got.len);
	close(fd);
	list_tar(&got, &names, &data);
	assert_string_equal((char *)names.p,
			    LONG_DIR "/b.jpg\n" LONG_DIR "/b.json\n");
	assert_int_equal(data.len, sizeof(f.jpg) + sizeof(f.json));
	assert_memory_equal(data.p, f.jpg, sizeof(f.jpg));
	assert_memory_equal(data.p + sizeof(f.jpg), f.json, sizeof(f.json));
	sfs_slice_free(sl);
	sfs_indexer_report_clear(&rep);
	sfs_index_free(idx);
	buf_free(&got);
	buf_free(&names);
	buf_free(&data);
	buf_free(&f.tar);
	free(path);
	tmpdir_remove(dir);
}

/* Scan bytes as s.tar and expect an error with exactly this message. */
static void expect_error(const void *bytes, size_t len, const char *fmt)
{
	struct sfs_error err = { 0 };
	struct sfs_scan s;
	char *dir = tmpdir_new(), *path, want[1024];

	path = write_at(dir, "s.tar", bytes, len);
	snprintf(want, sizeof(want), fmt, path);
	assert_int_equal(scan_file(sfs_format_by_name("tar"), path, &s, &err),
			 -EINVAL);
	assert_string_equal(err.msg, want);
	free(s.bounds);
	free(path);
	tmpdir_remove(dir);
}

static void test_format_tar_truncated_member(void **state)
{
	struct fixture f;

	(void)state;
	build(&f);
	/* cut inside b.json's data: its header is at start[2] - 1024 */
	expect_error(
		f.tar.p, f.start[2] - 100,
		"%s: truncated tar member \"" LONG_DIR
		"/b.json\" at byte 4608: its data needs 7 bytes up to byte 6656, the file has 6556");
	buf_free(&f.tar);
}

static void test_format_tar_truncated_header(void **state)
{
	struct fixture f;

	(void)state;
	build(&f);
	expect_error(
		f.tar.p, f.start[1] + 200,
		"%s: malformed tar header at byte 2560 (Truncated tar archive)");
	buf_free(&f.tar);
}

static void test_format_tar_not_a_tar(void **state)
{
	static const char text[] = "this is a text file named like a tar, "
				   "and it is long enough to be looked at\n";
	(void)state;
	expect_error(
		text, sizeof(text) - 1,
		"%s: not a tar archive at byte 0 (Unrecognized archive format)");
}

static void test_format_tar_empty_file(void **state)
{
	(void)state;
	expect_error(
		"", 0,
		"%s: empty file at byte 0: a tar shard holds at least one sample");
}

static void test_format_tar_bad_size_field(void **state)
{
	struct buf b = { 0 };

	(void)state;
	tar_member(&b, "a.jpg", '0', "abc", 3);
	memcpy(b.p + 124, "77777777777", 11);
	/* fix the checksum after the edit */
	{
		unsigned sum = 0;
		size_t i;

		memset(b.p + 148, ' ', 8);
		for (i = 0; i < 512; i++)
			sum += b.p[i];
		snprintf((char *)b.p + 148, 8, "%06o", sum);
	}
	tar_end(&b);
	expect_error(b.p, b.len,
		     "%s: tar member \"a.jpg\" at byte 0 has a bad size field");
	buf_free(&b);
}

/* Collects the digests a scan hands over. */
struct digests {
	unsigned char d[8][32];
	uint64_t n;
};

static int keep_digest(void *arg, uint64_t sample,
		       const unsigned char digest[32])
{
	struct digests *ds = arg;

	assert_int_equal(sample, ds->n);
	assert_true(ds->n < 8);
	memcpy(ds->d[ds->n++], digest, 32);
	return 0;
}

/*
 * Writes three samples (k1: two members, k2: 1 MiB of zeros, larger than
 * any compressed archive of it, k3: two members) through filter.
 */
static void write_tar(const char *path, int filter)
{
	struct archive *a = archive_write_new();
	struct archive_entry *e = archive_entry_new();
	const char *names[] = { "k1.jpg", "k1.cls", "k2.bin", "k3.jpg",
				"k3.cls" };
	char *big = calloc(1, 1 << 20);
	size_t i;

	assert_non_null(big);
	archive_write_set_format_pax_restricted(a);
	assert_int_equal(archive_write_add_filter(a, filter), ARCHIVE_OK);
	assert_int_equal(archive_write_open_filename(a, path), ARCHIVE_OK);
	for (i = 0; i < 5; i++) {
		size_t n = i == 2 ? 1 << 20 : 3;

		archive_entry_clear(e);
		archive_entry_set_pathname(e, names[i]);
		archive_entry_set_filetype(e, AE_IFREG);
		archive_entry_set_perm(e, 0644);
		archive_entry_set_size(e, (la_int64_t)n);
		assert_int_equal(archive_write_header(a, e), ARCHIVE_OK);
		assert_int_equal(archive_write_data(a, i == 2 ? big : "abc", n),
				 (la_ssize_t)n);
	}
	assert_int_equal(archive_write_close(a), ARCHIVE_OK);
	archive_write_free(a);
	archive_entry_free(e);
	free(big);
}

static void scan_digests(const char *path, struct sfs_scan *s,
			 struct digests *ds)
{
	struct sfs_error err = { 0 };
	struct stat st;
	struct sfs_scan_in in = { .path = path,
				  .digest_fn = keep_digest,
				  .digest_arg = ds };

	memset(s, 0, sizeof(*s));
	memset(ds, 0, sizeof(*ds));
	in.fd = open(path, O_RDONLY);
	assert_true(in.fd >= 0);
	assert_int_equal(fstat(in.fd, &st), 0);
	in.size = (uint64_t)st.st_size;
	assert_int_equal(sfs_format_by_name("tar")->scan(&in, s, &err), 0);
	close(in.fd);
}

/*
 * Every compression libarchive writes and Debian's tools read: counted by
 * key as the plain tar, not sliceable, the same per-sample digests, even
 * though one member is larger than the whole compressed file.
 */
static void test_format_tar_compressed_counted(void **state)
{
	static const struct {
		const char *name;
		int filter;
	} kinds[] = { { "s.tar.gz", ARCHIVE_FILTER_GZIP },
		      { "s.tgz", ARCHIVE_FILTER_GZIP },
		      { "s.tar.bz2", ARCHIVE_FILTER_BZIP2 },
		      { "s.tar.xz", ARCHIVE_FILTER_XZ },
		      { "s.tar.zst", ARCHIVE_FILTER_ZSTD },
		      /* compressed content under a plain name */
		      { "gz-named.tar", ARCHIVE_FILTER_GZIP } };
	struct digests plain, got;
	struct sfs_scan s;
	struct stat st;
	char *dir = tmpdir_new(), path[512];
	size_t i;

	(void)state;
	snprintf(path, sizeof(path), "%s/plain.tar", dir);
	write_tar(path, ARCHIVE_FILTER_NONE);
	scan_digests(path, &s, &plain);
	assert_int_equal(s.nsamples, 3);
	assert_true(s.sliceable);
	assert_int_equal(plain.n, 3);
	free(s.bounds);
	for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, kinds[i].name);
		write_tar(path, kinds[i].filter);
		assert_int_equal(stat(path, &st), 0);
		assert_true(st.st_size < (1 << 20));
		assert_ptr_equal(sfs_format_detect(kinds[i].name),
				 sfs_format_by_name("tar"));
		scan_digests(path, &s, &got);
		assert_int_equal(s.nsamples, 3);
		assert_false(s.sliceable);
		assert_null(s.bounds);
		assert_int_equal(s.prefix_len, 0);
		assert_true(s.digested);
		assert_int_equal(got.n, 3);
		assert_memory_equal(got.d, plain.d, sizeof(got.d[0]) * 3);
	}
	tmpdir_remove(dir);
}

/* A cut compressed shard: libarchive's error, the decompressed offset. */
static void test_format_tar_compressed_truncated(void **state)
{
	struct sfs_error err = { 0 };
	struct sfs_scan s = { 0 };
	struct stat st;
	char *dir = tmpdir_new(), path[512];

	(void)state;
	snprintf(path, sizeof(path), "%s/s.tar.gz", dir);
	write_tar(path, ARCHIVE_FILTER_GZIP);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(truncate(path, st.st_size / 2), 0);
	assert_int_equal(scan_file(sfs_format_by_name("tar"), path, &s, &err),
			 -EINVAL);
	assert_non_null(strstr(err.msg, path));
	assert_non_null(
		strstr(err.msg,
		       ": truncated or corrupt compressed tar after member "));
	assert_non_null(strstr(err.msg, " of the decompressed stream ("));
	assert_int_equal(err.msg[strlen(err.msg) - 1], ')');
	free(s.bounds);
	tmpdir_remove(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_format_tar_bounds_exact),
		cmocka_unit_test(test_format_tar_bounds_in_pieces),
		cmocka_unit_test(test_format_tar_slice_reads_back),
		cmocka_unit_test(test_format_tar_slice_keeps_long_names),
		cmocka_unit_test(test_format_tar_truncated_member),
		cmocka_unit_test(test_format_tar_truncated_header),
		cmocka_unit_test(test_format_tar_not_a_tar),
		cmocka_unit_test(test_format_tar_empty_file),
		cmocka_unit_test(test_format_tar_bad_size_field),
		cmocka_unit_test(test_format_tar_compressed_counted),
		cmocka_unit_test(test_format_tar_compressed_truncated),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
