/*
 * The slices of Parquet shards a view keeps (slice.h, sfs_slice_cache):
 * laid out once when the view is built, served at open byte for byte as a
 * fresh layout would, never after the shard changed, within their bound;
 * and a shard's footer read once for all its slices.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers.h"
#include "shardfs/indexer.h"
#include "shardfs/parquet.h"
#include "shardfs/view.h"

/* A source of n shards shardfs-mkdata would write (rows in row groups of
 * 1..64 rows, pages of 16), indexed. */
static struct sfs_index *source(char *dir, size_t n)
{
	const struct sfs_format_ops *ops = sfs_format_by_name("parquet");
	unsigned char scratch[64 + 8];
	struct sfs_synth s = { .seed = 7,
			       .samples_lo = 300,
			       .samples_hi = 400,
			       .size_lo = 1,
			       .size_hi = 64,
			       .members_lo = 1,
			       .members_hi = 1,
			       .buf = scratch };
	struct sfs_indexer_opts o = { .source = dir, .jobs = 1 };
	struct sfs_indexer_report rep = { 0 };
	struct sfs_error err = { 0 };
	struct sfs_index *idx = NULL;
	char path[4096];
	size_t i;

	for (i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/p%zu.parquet", dir, i);
		assert_int_equal(ops->synthesize(&s, i, path, &err), 0);
	}
	assert_int_equal(sfs_indexer_build(&o, NULL, &idx, &rep, &err), 0);
	assert_int_equal(idx->nshards, n);
	return idx;
}

static struct sfs_view *build(const struct sfs_index *idx, const char *dir,
			      const char *opts, size_t cache_max)
{
	struct sfs_error err = { 0 };
	struct sfs_view_opts vo = { .epochs = 1,
				    .symlinks = true,
				    .slice_cache_max = cache_max };
	struct sfs_view *v = NULL;

	vo.srcfd = open(dir, O_RDONLY | O_DIRECTORY);
	assert_true(vo.srcfd >= 0);
	sfs_options_init(&vo.options);
	assert_int_equal(sfs_options_parse(&vo.options, opts, &err), 0);
	assert_int_equal(sfs_view_build(idx, &vo, &v, &err), 0);
	sfs_options_clear(&vo.options);
	close(vo.srcfd);
	return v;
}

static int open_shard(const char *dir, const struct sfs_shard *sh)
{
	char path[4096];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, sh->path);
	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	return fd;
}

/* All the bytes of s (read from fd). */
static unsigned char *slice_bytes(const struct sfs_slice *s, int fd)
{
	unsigned char *b = malloc(s->size + 1);

	assert_non_null(b);
	assert_int_equal(sfs_slice_pread(s, fd, b, s->size, 0),
			 (ssize_t)s->size);
	return b;
}

/*
 * Every slice node of v served through sfs_view_slice has the size the
 * build gave it and the bytes a fresh layout (sfs_slice_build) gives.
 * Returns how many slice nodes there are.
 */
static size_t check_all(const struct sfs_view *v, const char *dir)
{
	struct sfs_error err = { 0 };
	size_t slices = 0;
	uint32_t i;

	for (i = 0; i < v->nnodes; i++) {
		const struct sfs_view_node *n = &v->nodes[i];
		const struct sfs_plan_file *f;
		const struct sfs_shard *sh;
		struct sfs_slice *got, *want;
		unsigned char *a, *b;
		int fd;

		if (n->kind != SFS_NODE_FILE)
			continue;
		f = sfs_view_file(v, n);
		if (f->whole)
			continue;
		sh = &v->idx->shards[f->shard];
		fd = open_shard(dir, sh);
		assert_int_equal(sfs_view_slice(v, n, fd, &got, &err), 0);
		assert_int_equal(sfs_slice_build(v->idx, sh, fd,
						 sfs_plan_file_runs(
							 v->plans[n->plan], f),
						 f->nruns, &want, &err),
				 0);
		assert_int_equal(got->size, n->size);
		assert_int_equal(got->size, want->size);
		a = slice_bytes(got, fd);
		b = slice_bytes(want, fd);
		assert_memory_equal(a, b, got->size);
		free(a);
		free(b);
		sfs_slice_free(got);
		sfs_slice_free(want);
		close(fd);
		slices++;
	}
	return slices;
}

static void test_parquet_cache_serves_what_a_layout_gives(void **state)
{
	char *dir = tmpdir_new();
	struct sfs_index *idx = source(dir, 2);
	struct sfs_view *v;
	size_t n;

	(void)state;
	/* 7 readers cut the 2 shards inside row groups; shuffle=samples
	 * makes slices of scattered rows */
	v = build(idx, dir, "world=7,workers=1,shuffle=none", 0);
	n = check_all(v, dir);
	assert_true(n >= 7);
	assert_int_equal(sfs_slice_cache_count(v->slices), n);
	assert_true(sfs_slice_cache_mem(v->slices) > 0);
	sfs_view_free(v);
	v = build(idx, dir, "world=2,workers=2,shuffle=samples,seed=3", 0);
	n = check_all(v, dir);
	assert_int_equal(sfs_slice_cache_count(v->slices), n);
	sfs_view_free(v);
	sfs_index_free(idx);
	tmpdir_remove(dir);
}

/* The first slice node of v that is not a whole shard. */
static const struct sfs_view_node *first_slice(const struct sfs_view *v)
{
	uint32_t i;

	for (i = 0; i < v->nnodes; i++)
		if (v->nodes[i].kind == SFS_NODE_FILE &&
		    !sfs_view_file(v, &v->nodes[i])->whole)
			return &v->nodes[i];
	fail();
	return NULL;
}

static void test_parquet_cache_never_serves_a_changed_shard(void **state)
{
	char *dir = tmpdir_new();
	struct sfs_index *idx = source(dir, 1);
	struct sfs_view *v =
		build(idx, dir, "world=3,workers=1,shuffle=none", 0);
	const struct sfs_view_node *n = first_slice(v);
	const struct sfs_shard *sh = &idx->shards[0];
	struct sfs_error err = { 0 };
	struct sfs_slice *s;
	struct stat st;
	char path[4096], copy[4096], msg[4200];
	struct buf b;
	int fd;

	(void)state;
	snprintf(path, sizeof(path), "%s/%s", dir, sh->path);
	snprintf(copy, sizeof(copy), "%s/copy", dir);
	b = read_all(path);
	assert_int_equal(stat(path, &st), 0);

	/* the shard put back (another inode), the same bytes, size and
	 * mtime: laid out again from it, the same bytes */
	free(write_at(dir, "copy", b.p, b.len));
	assert_int_equal(
		utimensat(AT_FDCWD, copy,
			  (struct timespec[2]){ st.st_atim, st.st_mtim }, 0),
		0);
	assert_int_equal(rename(copy, path), 0);
	assert_int_equal(check_all(v, dir) > 0, 1);

	/* one byte of the shard rewritten in place: a new mtime, refused */
	fd = open(path, O_WRONLY);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, "X", 1, 100), 1);
	close(fd);
	fd = open(path, O_RDONLY);
	assert_int_equal(sfs_view_slice(v, n, fd, &s, &err), -ESTALE);
	snprintf(
		msg, sizeof(msg),
		"%s: the shard changed since its slices were laid out; rebuild the index with shardfs-index",
		sh->path);
	assert_string_equal(err.msg, msg);
	close(fd);

	/* and grown, its mtime put back: its size tells */
	fd = open(path, O_WRONLY | O_APPEND);
	assert_int_equal(write(fd, "Y", 1), 1);
	assert_int_equal(
		futimens(fd, (struct timespec[2]){ st.st_atim, st.st_mtim }),
		0);
	close(fd);
	fd = open(path, O_RDONLY);
	memset(&err, 0, sizeof(err));
	assert_int_equal(sfs_view_slice(v, n, fd, &s, &err), -ESTALE);
	assert_string_equal(err.msg, msg);
	close(fd);

	buf_free(&b);
	sfs_view_free(v);
	sfs_index_free(idx);
	tmpdir_remove(dir);
}

static void test_parquet_cache_keeps_within_its_bound(void **state)
{
	char *dir = tmpdir_new();
	struct sfs_index *idx = source(dir, 2);
	struct sfs_view *v =
		build(idx, dir, "world=9,workers=1,shuffle=none", 0);
	size_t all = sfs_slice_cache_mem(v->slices), n;
	size_t nall = sfs_slice_cache_count(v->slices);

	(void)state;
	sfs_view_free(v);
	/* room for about half of them: some kept, the rest laid out again
	 * at open, every one the same bytes */
	v = build(idx, dir, "world=9,workers=1,shuffle=none", all / 2);
	assert_true(sfs_slice_cache_mem(v->slices) <= all / 2);
	assert_true(sfs_slice_cache_count(v->slices) > 0);
	assert_true(sfs_slice_cache_count(v->slices) < nall);
	n = check_all(v, dir);
	assert_int_equal(n, nall);
	sfs_view_free(v);
	/* room for none */
	v = build(idx, dir, "world=9,workers=1,shuffle=none", 1);
	assert_int_equal(sfs_slice_cache_mem(v->slices), 0);
	assert_int_equal(sfs_slice_cache_count(v->slices), 0);
	assert_int_equal(check_all(v, dir), nall);
	sfs_view_free(v);
	sfs_index_free(idx);
	tmpdir_remove(dir);
}

/* The second slice of a shard is laid out from the footer the first
 * read: a slice of whole row groups then reads nothing of the shard. */
static void test_parquet_cache_reads_a_footer_once(void **state)
{
	char *dir = tmpdir_new();
	struct sfs_index *idx = source(dir, 1);
	const struct sfs_shard *sh = &idx->shards[0];
	struct sfs_slice_cache *c;
	struct sfs_error err = { 0 };
	struct sfs_run run = { 0, sh->nsamples };
	uint64_t size, whole;
	int fd = open_shard(dir, sh);

	(void)state;
	assert_int_equal(sfs_slice_cache_new(idx, 0, &c), 0);
	assert_int_equal(
		sfs_slice_cache_size(c, sh, fd, 0, &run, 1, &whole, &err), 0);
	/* with no descriptor: the footer is the one read above */
	assert_int_equal(
		sfs_slice_cache_size(c, sh, -1, 1, &run, 1, &size, &err), 0);
	assert_int_equal(size, whole);
	/* (a slice laid out with no descriptor is not kept) */
	assert_int_equal(sfs_slice_cache_count(c), 1);
	/* once the build is over, the footer goes */
	sfs_slice_cache_end_build(c);
	assert_int_equal(sfs_slice_cache_size(c, sh, -1, 2, &run, 1, &size,
					      &err),
			 -EBADF);
	assert_int_equal(sfs_slice_cache_count(c), 1);
	sfs_slice_cache_free(c);
	close(fd);
	sfs_index_free(idx);
	tmpdir_remove(dir);
}

/* The bytes of a cut: each column's pieces in order, the shard's read
 * from fd. */
static struct buf cut_bytes(const struct sfs_parquet_cut *cut, int fd)
{
	struct buf b = { 0 };
	size_t c, k;

	for (c = 0; c < cut->ncolumns; c++)
		for (k = 0; k < cut->columns[c].npieces; k++) {
			const struct sfs_parquet_piece *p =
				&cut->columns[c].pieces[k];
			unsigned char *tmp = malloc(p->len + 1);

			assert_non_null(tmp);
			if (p->mem)
				memcpy(tmp, p->mem, p->len);
			else
				assert_int_equal(pread(fd, tmp, p->len,
						       (off_t)p->src),
						 (ssize_t)p->len);
			buf_put(&b, tmp, p->len);
			free(tmp);
		}
	return b;
}

/* Every row cut alone, rows in a scattered order (as shuffle=samples
 * cuts them), through one sfs_parquet_pages: the bytes of a cut without
 * it. */
static void test_parquet_cache_pages_cut_the_same_bytes(void **state)
{
	char *dir = tmpdir_new();
	struct sfs_index *idx = source(dir, 1);
	const struct sfs_shard *sh = &idx->shards[0];
	struct sfs_parquet_pages *ps = sfs_parquet_pages_new();
	struct sfs_parquet_meta *m;
	struct sfs_error err = { 0 };
	int fd = open_shard(dir, sh);
	uint64_t i, n = sh->nsamples;

	(void)state;
	assert_non_null(ps);
	assert_int_equal(
		sfs_parquet_footer_read(fd, sh->path, sh->size, &m, &err), 0);
	for (i = 0; i < n; i++) {
		/* 7919 is prime, n < 7919: every row once */
		uint64_t row = i * 7919 % n, g = 0, first = (uint64_t)row;
		struct sfs_parquet_cut *a, *b;
		struct buf x, y;

		while (first >= (uint64_t)m->row_groups[g].num_rows)
			first -= (uint64_t)m->row_groups[g++].num_rows;
		assert_int_equal(sfs_parquet_cut(fd, m, g, (int64_t)first, 1,
						 &a, &err),
				 0);
		assert_int_equal(sfs_parquet_cut_pages(fd, m, ps, g,
						       (int64_t)first, 1, &b,
						       &err),
				 0);
		x = cut_bytes(a, fd);
		y = cut_bytes(b, fd);
		assert_int_equal(x.len, y.len);
		assert_memory_equal(x.p, y.p, x.len);
		buf_free(&x);
		buf_free(&y);
		sfs_parquet_cut_free(a);
		sfs_parquet_cut_free(b);
	}
	sfs_parquet_pages_free(ps);
	sfs_parquet_meta_free(m);
	close(fd);
	sfs_index_free(idx);
	tmpdir_remove(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parquet_cache_serves_what_a_layout_gives),
		cmocka_unit_test(
			test_parquet_cache_never_serves_a_changed_shard),
		cmocka_unit_test(test_parquet_cache_keeps_within_its_bound),
		cmocka_unit_test(test_parquet_cache_reads_a_footer_once),
		cmocka_unit_test(test_parquet_cache_pages_cut_the_same_bytes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
