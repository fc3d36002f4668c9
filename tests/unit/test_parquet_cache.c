/*
 * The slices of Parquet shards a view keeps (slice.h, sfs_slice_cache):
 * laid out once when the view is built, served at open byte for byte as a
 * fresh layout would, never after the shard changed, within their bound;
 * and a shard's footer read once for all its slices.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers.h"
#include "shardfs/budget.h"
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

/* The view of idx (its source dir) under opts, with vo's other
 * options. */
static struct sfs_view *build_opts(const struct sfs_index *idx, const char *dir,
				   const char *opts, struct sfs_view_opts vo)
{
	struct sfs_error err = { 0 };
	struct sfs_view *v = NULL;

	vo.epochs = 1;
	vo.symlinks = true;
	vo.srcfd = open(dir, O_RDONLY | O_DIRECTORY);
	assert_true(vo.srcfd >= 0);
	sfs_options_init(&vo.options);
	assert_int_equal(sfs_options_parse(&vo.options, opts, &err), 0);
	assert_int_equal(sfs_view_build(idx, &vo, &v, &err), 0);
	sfs_options_clear(&vo.options);
	close(vo.srcfd);
	return v;
}

/* build_opts, its laid-out slices kept within cache_max and the pages
 * their cuts decode within pages_max (0: the defaults). */
static struct sfs_view *build_within(const struct sfs_index *idx,
				     const char *dir, const char *opts,
				     size_t cache_max, uint64_t pages_max)
{
	return build_opts(idx, dir, opts,
			  (struct sfs_view_opts){ .slice_cache_max = cache_max,
						  .slice_pages_max =
							  pages_max });
}

static struct sfs_view *build(const struct sfs_index *idx, const char *dir,
			      const char *opts, size_t cache_max)
{
	return build_within(idx, dir, opts, cache_max, 0);
}

/* What a view's cache noted of its file (sfs_view_opts.note). */
struct notes {
	atomic_int n;
	char last[1024];
};

static void note(void *arg, const char *msg)
{
	struct notes *nt = arg;

	atomic_fetch_add(&nt->n, 1);
	snprintf(nt->last, sizeof(nt->last), "%s", msg);
}

/* build, the slices past cache_max kept in a file of spill, its trouble
 * told to nt. */
static struct sfs_view *build_spill(const struct sfs_index *idx,
				    const char *dir, const char *opts,
				    size_t cache_max, const char *spill,
				    struct notes *nt)
{
	return build_opts(idx, dir, opts,
			  (struct sfs_view_opts){ .slice_cache_max = cache_max,
						  .slice_spill_dir = spill,
						  .note = note,
						  .note_arg = nt });
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

/*
 * The slices that do not fit in memory are kept in a file: an open after
 * the build reads them back, lays none out, and gives the bytes a fresh
 * layout gives; with room for some in memory, the rest go to the file.
 */
static void test_parquet_cache_spills_what_memory_cannot_keep(void **state)
{
	static const char *const opts[] = {
		"world=9,workers=1,shuffle=none",
		"world=2,workers=2,shuffle=samples,seed=3",
	};
	char *dir = tmpdir_new(), *spill = tmpdir_new();
	struct sfs_index *idx = source(dir, 2);
	struct sfs_slice_cache_stats st;
	struct notes nt = { 0 };
	struct sfs_view *v;
	size_t i, n, all;

	(void)state;
	for (i = 0; i < sizeof(opts) / sizeof(*opts); i++) {
		/* room for none in memory: every slice in the file */
		v = build_spill(idx, dir, opts[i], 1, spill, &nt);
		sfs_slice_cache_stats(v->slices, &st);
		assert_int_equal(st.kept, 0);
		assert_true(st.spilled > 0);
		assert_true(st.spilled_bytes > 0);
		assert_int_equal(st.laid_out, 0);
		n = check_all(v, dir);
		assert_int_equal(st.spilled, n);
		sfs_slice_cache_stats(v->slices, &st);
		assert_int_equal(st.laid_out, 0);
		/* a second open reads them back again, the same bytes */
		assert_int_equal(check_all(v, dir), n);
		sfs_slice_cache_stats(v->slices, &st);
		assert_int_equal(st.laid_out, 0);
		sfs_view_free(v);
	}

	/* room for about half in memory: the rest in the file */
	v = build(idx, dir, opts[0], 0);
	all = sfs_slice_cache_mem(v->slices);
	n = sfs_slice_cache_count(v->slices);
	sfs_view_free(v);
	v = build_spill(idx, dir, opts[0], all / 2, spill, &nt);
	sfs_slice_cache_stats(v->slices, &st);
	assert_true(st.kept > 0);
	assert_true(st.kept_mem <= all / 2);
	assert_true(st.spilled > 0);
	assert_int_equal(st.kept + st.spilled, n);
	assert_int_equal(check_all(v, dir), n);
	sfs_slice_cache_stats(v->slices, &st);
	assert_int_equal(st.laid_out, 0);
	sfs_view_free(v);

	/* without a file, as before: every slice past memory laid out */
	v = build(idx, dir, opts[0], 1);
	assert_int_equal(check_all(v, dir), n);
	sfs_slice_cache_stats(v->slices, &st);
	assert_int_equal(st.spilled, 0);
	assert_int_equal(st.laid_out, n);
	sfs_view_free(v);
	assert_int_equal(atomic_load(&nt.n), 0);
	sfs_index_free(idx);
	tmpdir_remove(dir);
	tmpdir_remove(spill);
}

/*
 * A full disk (a file size limit here): the slices written before it
 * stay, the others are laid out at open, the same bytes; told once.  A
 * directory where no file can be made: told, every slice laid out.
 */
static void test_parquet_cache_spill_runs_out_of_room(void **state)
{
	const char *opts = "world=9,workers=1,shuffle=none";
	char *dir = tmpdir_new(), *spill = tmpdir_new(), want[4200];
	struct sfs_index *idx = source(dir, 2);
	struct sfs_slice_cache_stats st;
	struct notes nt = { 0 };
	struct rlimit old, small;
	struct sfs_view *v;
	size_t n;

	(void)state;
	v = build_spill(idx, dir, opts, 1, spill, &nt);
	n = check_all(v, dir);
	sfs_slice_cache_stats(v->slices, &st);
	sfs_view_free(v);
	/* room for about half of the file */
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
	small = old;
	small.rlim_cur = (rlim_t)(st.spilled_bytes / 2);
	signal(SIGXFSZ, SIG_IGN);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &small), 0);
	v = build_spill(idx, dir, opts, 1, spill, &nt);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
	signal(SIGXFSZ, SIG_DFL);
	assert_int_equal(atomic_load(&nt.n), 1);
	snprintf(
		want, sizeof(want),
		"%s: cannot write the file of the laid-out slices that do not fit in memory (%s): the view's slices not kept are laid out again at each open (for Parquet's big pages, a decode each); set TMPDIR to a directory the daemon can write, with room",
		spill, strerror(EFBIG));
	assert_string_equal(nt.last, want);
	sfs_slice_cache_stats(v->slices, &st);
	assert_true(st.spilled > 0);
	assert_true(st.spilled < n);
	assert_int_equal(check_all(v, dir), n);
	sfs_slice_cache_stats(v->slices, &st);
	assert_int_equal(st.laid_out, n - st.spilled);
	sfs_view_free(v);

	/* no such directory */
	snprintf(want, sizeof(want), "%s/gone", spill);
	v = build_spill(idx, dir, opts, 1, want, &nt);
	assert_int_equal(atomic_load(&nt.n), 2);
	assert_non_null(strstr(
		nt.last,
		"/gone: cannot make the file of the laid-out slices that do not fit in memory (No such file or directory): the view's slices not kept are laid out again at each open (for Parquet's big pages, a decode each); set TMPDIR to a directory the daemon can write, with room"));
	assert_int_equal(check_all(v, dir), n);
	sfs_slice_cache_stats(v->slices, &st);
	assert_int_equal(st.spilled, 0);
	assert_int_equal(st.laid_out, n);
	sfs_view_free(v);
	sfs_index_free(idx);
	tmpdir_remove(dir);
	tmpdir_remove(spill);
}

/* A slice in the file is handed out only while its shard is as it was
 * laid out from: put back (another inode), laid out again; changed,
 * refused. */
static void
test_parquet_cache_spilled_never_serves_a_changed_shard(void **state)
{
	char *dir = tmpdir_new(), *spill = tmpdir_new();
	struct sfs_index *idx = source(dir, 1);
	struct notes nt = { 0 };
	struct sfs_view *v = build_spill(
		idx, dir, "world=3,workers=1,shuffle=none", 1, spill, &nt);
	const struct sfs_view_node *n = first_slice(v);
	const struct sfs_shard *sh = &idx->shards[0];
	struct sfs_slice_cache_stats st;
	struct sfs_error err = { 0 };
	struct sfs_slice *s;
	struct stat sb;
	char path[4096], copy[4096];
	struct buf b;
	size_t k;
	int fd;

	(void)state;
	snprintf(path, sizeof(path), "%s/%s", dir, sh->path);
	snprintf(copy, sizeof(copy), "%s/copy", dir);
	b = read_all(path);
	assert_int_equal(stat(path, &sb), 0);
	sfs_slice_cache_stats(v->slices, &st);
	assert_true(st.spilled > 0);
	free(write_at(dir, "copy", b.p, b.len));
	assert_int_equal(
		utimensat(AT_FDCWD, copy,
			  (struct timespec[2]){ sb.st_atim, sb.st_mtim }, 0),
		0);
	assert_int_equal(rename(copy, path), 0);
	k = check_all(v, dir);
	sfs_slice_cache_stats(v->slices, &st);
	assert_int_equal(st.laid_out, k);

	fd = open(path, O_WRONLY);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, "X", 1, 100), 1);
	close(fd);
	fd = open(path, O_RDONLY);
	assert_int_equal(sfs_view_slice(v, n, fd, &s, &err), -ESTALE);
	close(fd);
	buf_free(&b);
	sfs_view_free(v);
	sfs_index_free(idx);
	tmpdir_remove(dir);
	tmpdir_remove(spill);
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
	struct sfs_parquet_pages *ps = sfs_parquet_pages_new(NULL);
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

/* ---- one big page: a file written here, byte by byte ---- */

/* The Thrift compact protocol, as much as the file below needs. */
static void put_varint(struct buf *b, uint64_t v)
{
	unsigned char c;

	for (; v >= 0x80; v >>= 7) {
		c = (unsigned char)(v | 0x80);
		buf_put(b, &c, 1);
	}
	c = (unsigned char)v;
	buf_put(b, &c, 1);
}

/* A field header: id delta 1..15 from *last, type t. */
static void put_field(struct buf *b, int *last, int id, unsigned t)
{
	unsigned char c = (unsigned char)((unsigned)(id - *last) << 4 | t);

	assert_true(id > *last && id - *last <= 15);
	buf_put(b, &c, 1);
	*last = id;
}

/* An i32 (t 5) or i64 (t 6) field, zigzag. */
static void put_int(struct buf *b, int *last, int id, unsigned t, int64_t v)
{
	put_field(b, last, id, t);
	put_varint(b, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

static void put_str(struct buf *b, const char *s)
{
	put_varint(b, strlen(s));
	buf_put(b, s, strlen(s));
}

static void put_stop(struct buf *b)
{
	buf_put(b, "", 1);
}

/* A list header of n < 15 elements of type t. */
static void put_list(struct buf *b, size_t n, unsigned t)
{
	unsigned char c = (unsigned char)(n << 4 | t);

	buf_put(b, &c, 1);
}

#define BIG_ROWS 3000000u

/*
 * dir/name: one required INT32 column "v" of rows rows, value i at row i,
 * in one row group of one PLAIN uncompressed page.  Of BIG_ROWS rows
 * (big_page_file): 12 MB that decode to 84 MB as the page reader counts
 * them (4 bytes a value and 24 an entry), more than the 64 MiB the
 * decoded pages of a cut were kept within when one slice's cuts alone
 * shared them.  Returns its path; *body: where the values begin (NULL:
 * not wanted).
 */
static char *page_file(const char *dir, const char *name, uint32_t rows,
		       off_t *body)
{
	struct buf f = { 0 }, h = { 0 }, m = { 0 };
	uint32_t i, len = rows * 4;
	unsigned char le[4];
	int last = 0, sub = 0, cc = 0, cm = 0;
	char *path;

	buf_put(&f, "PAR1", 4);
	put_int(&h, &last, 1, 5, 0); /* DATA_PAGE */
	put_int(&h, &last, 2, 5, len);
	put_int(&h, &last, 3, 5, len);
	put_field(&h, &last, 5, 12);
	put_int(&h, &sub, 1, 5, rows);
	put_int(&h, &sub, 2, 5, 0); /* PLAIN */
	put_int(&h, &sub, 3, 5, 3); /* RLE */
	put_int(&h, &sub, 4, 5, 3);
	put_stop(&h);
	put_stop(&h);
	buf_put(&f, h.p, h.len);
	if (body)
		*body = (off_t)f.len;
	for (i = 0; i < rows; i++) {
		le[0] = (unsigned char)i;
		le[1] = (unsigned char)(i >> 8);
		le[2] = (unsigned char)(i >> 16);
		le[3] = (unsigned char)(i >> 24);
		buf_put(&f, le, 4);
	}
	/* FileMetaData */
	last = 0;
	put_int(&m, &last, 1, 5, 1); /* version */
	put_field(&m, &last, 2, 9);
	put_list(&m, 2, 12);
	sub = 0;
	put_field(&m, &sub, 4, 8);
	put_str(&m, "schema");
	put_int(&m, &sub, 5, 5, 1); /* num_children */
	put_stop(&m);
	sub = 0;
	put_int(&m, &sub, 1, 5, 1); /* INT32 */
	put_int(&m, &sub, 3, 5, 0); /* REQUIRED */
	put_field(&m, &sub, 4, 8);
	put_str(&m, "v");
	put_stop(&m);
	put_int(&m, &last, 3, 6, rows);
	put_field(&m, &last, 4, 9);
	put_list(&m, 1, 12);
	sub = 0; /* RowGroup */
	put_field(&m, &sub, 1, 9);
	put_list(&m, 1, 12);
	put_int(&m, &cc, 2, 6, 4); /* ColumnChunk.file_offset */
	put_field(&m, &cc, 3, 12);
	put_int(&m, &cm, 1, 5, 1); /* ColumnMetaData: INT32 */
	put_field(&m, &cm, 2, 9);
	put_list(&m, 2, 5);
	put_varint(&m, 0); /* PLAIN */
	put_varint(&m, 6); /* RLE, zigzag */
	put_field(&m, &cm, 3, 9);
	put_list(&m, 1, 8);
	put_str(&m, "v");
	put_int(&m, &cm, 4, 5, 0); /* UNCOMPRESSED */
	put_int(&m, &cm, 5, 6, rows);
	put_int(&m, &cm, 6, 6, (int64_t)(h.len + len));
	put_int(&m, &cm, 7, 6, (int64_t)(h.len + len));
	put_int(&m, &cm, 9, 6, 4); /* data_page_offset */
	put_stop(&m); /* ColumnMetaData */
	put_stop(&m); /* ColumnChunk */
	put_int(&m, &sub, 2, 6, (int64_t)(h.len + len));
	put_int(&m, &sub, 3, 6, rows);
	put_stop(&m); /* RowGroup */
	put_stop(&m); /* FileMetaData */
	buf_put(&f, m.p, m.len);
	le[0] = (unsigned char)m.len;
	le[1] = (unsigned char)(m.len >> 8);
	le[2] = (unsigned char)(m.len >> 16);
	le[3] = (unsigned char)(m.len >> 24);
	buf_put(&f, le, 4);
	buf_put(&f, "PAR1", 4);
	path = write_at(dir, name, f.p, f.len);
	buf_free(&f);
	buf_free(&h);
	buf_free(&m);
	return path;
}

static char *big_page_file(const char *dir, off_t *body)
{
	return page_file(dir, "big.parquet", BIG_ROWS, body);
}

/* The bytes of rows [first, first + n) of the big page's file cut
 * alone, from its pristine copy at path. */
static struct buf big_cut_alone(const char *path,
				const struct sfs_parquet_meta *m, int64_t first,
				int64_t n)
{
	struct sfs_error err = { 0 };
	struct sfs_parquet_cut *cut;
	struct buf b;
	int fd = open(path, O_RDONLY);

	assert_true(fd >= 0);
	assert_int_equal(sfs_parquet_cut(fd, m, 0, first, n, &cut, &err), 0);
	b = cut_bytes(cut, fd);
	sfs_parquet_cut_free(cut);
	close(fd);
	return b;
}

/*
 * Cuts of one page bigger than 64 MiB decoded, through one
 * sfs_parquet_pages (as a view's build cuts one row group into blocks,
 * one slice after another): the page is decoded once.  The page's bytes
 * are overwritten after the first cut; the cuts that follow still give
 * the bytes of the page as it was decoded.  (When each cut decoded it
 * again, a view cutting an 850 000-row DuckDB row group into blocks of
 * 1000 took minutes to build.)
 */
static void test_parquet_cache_pages_decode_a_big_page_once(void **state)
{
	char *dir = tmpdir_new(), keep[4096], *path;
	struct sfs_parquet_pages *ps = sfs_parquet_pages_new(NULL);
	struct sfs_parquet_meta *m;
	struct sfs_error err = { 0 };
	struct stat st;
	static const int64_t firsts[] = { 0, 1500000, 2999000, 7 };
	unsigned char *junk = malloc(BIG_ROWS * 4);
	off_t body;
	size_t i;
	int fd;

	(void)state;
	path = big_page_file(dir, &body);
	snprintf(keep, sizeof(keep), "%s/keep.parquet", dir);
	{
		struct buf b = read_all(path);

		free(write_at(dir, "keep.parquet", b.p, b.len));
		buf_free(&b);
	}
	fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(sfs_parquet_footer_read(fd, path, (uint64_t)st.st_size,
						 &m, &err),
			 0);
	assert_non_null(junk);
	memset(junk, 0xa5, BIG_ROWS * 4);
	for (i = 0; i < sizeof(firsts) / sizeof(*firsts); i++) {
		struct sfs_parquet_cut *cut;
		struct buf got, want = big_cut_alone(keep, m, firsts[i], 1000);

		assert_int_equal(sfs_parquet_cut_pages(fd, m, ps, 0, firsts[i],
						       1000, &cut, &err),
				 0);
		got = cut_bytes(cut, fd);
		assert_int_equal(got.len, want.len);
		assert_memory_equal(got.p, want.p, got.len);
		assert_int_equal(sfs_parquet_pages_decoded(ps), 1);
		buf_free(&got);
		buf_free(&want);
		sfs_parquet_cut_free(cut);
		/* every value overwritten (the page header stays) */
		assert_int_equal(pwrite(fd, junk, BIG_ROWS * 4, body),
				 (ssize_t)BIG_ROWS * 4);
	}
	assert_true(sfs_parquet_pages_mem(ps) > (64u << 20));
	free(junk);
	sfs_parquet_pages_free(ps);
	sfs_parquet_meta_free(m);
	close(fd);
	free(path);
	tmpdir_remove(dir);
}

/* What each thread of the test below cuts. */
struct cutter {
	const char *path, *keep;
	const struct sfs_parquet_meta *m;
	struct sfs_parquet_pages *ps;
	int64_t first;
	int ok;
};

static void *cut_rows(void *arg)
{
	struct cutter *t = arg;
	struct sfs_error err = { 0 };
	int64_t j;
	int fd = open(t->path, O_RDONLY);

	for (j = 0; fd >= 0 && j < 8; j++) {
		struct sfs_parquet_cut *cut;
		int64_t first = t->first + j * 300007;
		struct buf got, want;

		if (sfs_parquet_cut_pages(fd, t->m, t->ps, 0, first, 999, &cut,
					  &err))
			break;
		got = cut_bytes(cut, fd);
		want = big_cut_alone(t->keep, t->m, first, 999);
		sfs_parquet_cut_free(cut);
		t->ok += got.len == want.len && !memcmp(got.p, want.p, got.len);
		buf_free(&got);
		buf_free(&want);
	}
	if (fd >= 0)
		close(fd);
	return NULL;
}

/* Cuts of the big page from three threads at once through one
 * sfs_parquet_pages (a view's build describes its slices on a pool of
 * threads): every cut's bytes as a cut alone gives them, the page decoded
 * once (a cut that needs it while another cuts it waits). */
static void test_parquet_cache_pages_shared_by_threads(void **state)
{
	char *dir = tmpdir_new(), *path = big_page_file(dir, NULL);
	struct sfs_parquet_pages *ps = sfs_parquet_pages_new(NULL);
	struct sfs_parquet_meta *m;
	struct sfs_error err = { 0 };
	struct cutter t[3];
	pthread_t th[3];
	struct stat st;
	size_t i;
	int fd = open(path, O_RDONLY);

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(sfs_parquet_footer_read(fd, path, (uint64_t)st.st_size,
						 &m, &err),
			 0);
	for (i = 0; i < 3; i++) {
		t[i] = (struct cutter){ .path = path,
					.keep = path,
					.m = m,
					.ps = ps,
					.first = (int64_t)i * 100003 };
		assert_int_equal(pthread_create(&th[i], NULL, cut_rows, &t[i]),
				 0);
	}
	for (i = 0; i < 3; i++) {
		assert_int_equal(pthread_join(th[i], NULL), 0);
		assert_int_equal(t[i].ok, 8);
	}
	assert_int_equal(sfs_parquet_pages_decoded(ps), 1);
	sfs_parquet_pages_free(ps);
	sfs_parquet_meta_free(m);
	close(fd);
	free(path);
	tmpdir_remove(dir);
}

/* ---- one bound for the pages of a whole build ---- */

#define SMALL_ROWS 200000u /* a page of 800 000 bytes, 5.6 MB decoded */

/*
 * The reads of a whole small page's values (the test's link wraps
 * sfs_pread_full): one each time a cut decodes it.  page_body: where the
 * values of page_file's files begin (-1: nothing counted).
 */
static atomic_uint page_reads;
static atomic_llong page_body = -1;

ssize_t __real_sfs_pread_full(int fd, void *buf, size_t len, uint64_t off);
ssize_t __wrap_sfs_pread_full(int fd, void *buf, size_t len, uint64_t off);
ssize_t __wrap_sfs_pread_full(int fd, void *buf, size_t len, uint64_t off)
{
	if (len == SMALL_ROWS * 4 && (long long)off == atomic_load(&page_body))
		atomic_fetch_add(&page_reads, 1);
	return __real_sfs_pread_full(fd, buf, len, off);
}

/* The decoded bytes the page of a file of SMALL_ROWS rows at path counts
 * once kept (as the page reader counts them). */
static uint64_t small_page_mem(const char *path)
{
	struct sfs_parquet_pages *ps = sfs_parquet_pages_new(NULL);
	struct sfs_parquet_meta *m;
	struct sfs_parquet_cut *cut;
	struct sfs_error err = { 0 };
	struct stat st;
	uint64_t mem;
	int fd = open(path, O_RDONLY);

	assert_true(fd >= 0);
	assert_non_null(ps);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(sfs_parquet_footer_read(fd, path, (uint64_t)st.st_size,
						 &m, &err),
			 0);
	assert_int_equal(sfs_parquet_cut_pages(fd, m, ps, 0, 5, 10, &cut, &err),
			 0);
	mem = sfs_parquet_pages_mem(ps);
	assert_true(mem > SMALL_ROWS * 4);
	sfs_parquet_cut_free(cut);
	sfs_parquet_pages_free(ps);
	sfs_parquet_meta_free(m);
	close(fd);
	return mem;
}

#define NSMALL 4

/* What each thread of the test below cuts: its own file, through its
 * own pages charged to one budget. */
struct small_cutter {
	char *path;
	struct sfs_parquet_meta *m;
	struct sfs_parquet_pages *ps;
	pthread_barrier_t *start;
	int ok;
};

static void *cut_small(void *arg)
{
	struct small_cutter *t = arg;
	struct sfs_error err = { 0 };
	int64_t j;
	int fd = open(t->path, O_RDONLY);

	pthread_barrier_wait(t->start);
	for (j = 0; fd >= 0 && j < 4; j++) {
		struct sfs_parquet_cut *a, *b;
		int64_t first = 1 + j * 49999;
		struct buf got, want;

		if (sfs_parquet_cut_pages(fd, t->m, t->ps, 0, first, 999, &a,
					  &err))
			break;
		if (sfs_parquet_cut(fd, t->m, 0, first, 999, &b, &err)) {
			sfs_parquet_cut_free(a);
			break;
		}
		got = cut_bytes(a, fd);
		want = cut_bytes(b, fd);
		t->ok += got.len == want.len && !memcmp(got.p, want.p, got.len);
		buf_free(&got);
		buf_free(&want);
		sfs_parquet_cut_free(a);
		sfs_parquet_cut_free(b);
	}
	if (fd >= 0)
		close(fd);
	return NULL;
}

/*
 * NSMALL threads cut NSMALL files of one big page each at once, each file
 * through its own pages (as a view's build lays out the slices of several
 * shards, each shard's state with its pages), all charged to one budget
 * of two and a half pages: the pages kept at once never pass it, and
 * every cut gives the bytes a cut alone gives.  (When each state had a
 * bound of its own, NSMALL threads kept NSMALL pages: NSMALL times it.)
 */
static void test_parquet_cache_pages_one_bound_for_threads(void **state)
{
	char *dir = tmpdir_new(), name[32];
	struct small_cutter t[NSMALL];
	struct sfs_error err = { 0 };
	struct sfs_budget b;
	pthread_barrier_t start;
	pthread_t th[NSMALL];
	uint64_t own, kept = 0;
	struct stat st;
	size_t i;

	(void)state;
	assert_int_equal(pthread_barrier_init(&start, NULL, NSMALL), 0);
	for (i = 0; i < NSMALL; i++) {
		int fd;

		snprintf(name, sizeof(name), "s%zu.parquet", i);
		t[i] = (struct small_cutter){
			.path = page_file(dir, name, SMALL_ROWS, NULL),
			.start = &start
		};
		fd = open(t[i].path, O_RDONLY);
		assert_true(fd >= 0);
		assert_int_equal(fstat(fd, &st), 0);
		assert_int_equal(sfs_parquet_footer_read(fd, t[i].path,
							 (uint64_t)st.st_size,
							 &t[i].m, &err),
				 0);
		close(fd);
	}
	own = small_page_mem(t[0].path);
	sfs_budget_init(&b, own * 5 / 2, NULL, NULL);
	for (i = 0; i < NSMALL; i++) {
		t[i].ps = sfs_parquet_pages_new(&b);
		assert_non_null(t[i].ps);
	}
	for (i = 0; i < NSMALL; i++)
		assert_int_equal(pthread_create(&th[i], NULL, cut_small, &t[i]),
				 0);
	for (i = 0; i < NSMALL; i++) {
		assert_int_equal(pthread_join(th[i], NULL), 0);
		assert_int_equal(t[i].ok, 4);
		kept += sfs_parquet_pages_mem(t[i].ps);
	}
	/* two pages kept at most, and at least one */
	assert_true(sfs_budget_peak(&b) <= own * 5 / 2);
	assert_true(sfs_budget_peak(&b) >= own);
	assert_int_equal(sfs_budget_used(&b), kept);
	for (i = 0; i < NSMALL; i++) {
		sfs_parquet_pages_free(t[i].ps);
		sfs_parquet_meta_free(t[i].m);
		free(t[i].path);
	}
	assert_int_equal(sfs_budget_used(&b), 0);
	pthread_barrier_destroy(&start);
	tmpdir_remove(dir);
}

/* What each thread of the test below lays out: slices of the shards of
 * idx, shard (first + j) % NSMALL at its j-th. */
struct slicer {
	struct sfs_slice_cache *c;
	const struct sfs_index *idx;
	const char *dir;
	pthread_barrier_t *start;
	size_t first;
	int ok;
};

#define SLICES_EACH 6

static void *lay_out_slices(void *arg)
{
	struct slicer *t = arg;
	size_t j;

	pthread_barrier_wait(t->start);
	for (j = 0; j < SLICES_EACH; j++) {
		const struct sfs_shard *sh =
			&t->idx->shards[(t->first + j) % NSMALL];
		struct sfs_error err = { 0 };
		struct sfs_run run = { 1000 + j * 31337, 1000 };
		uint64_t size;
		int fd = open_shard(t->dir, sh);

		t->ok += !sfs_slice_cache_size(t->c, sh, fd,
					       t->first * SLICES_EACH + j, &run,
					       1, &size, &err);
		close(fd);
	}
	return NULL;
}

/*
 * NSMALL threads lay out slices of NSMALL shards of one big page each
 * through one cache whose states may keep two and a half pages, each
 * thread going from shard to shard (so states are freed for others
 * while some are in use): the pages kept never pass the bound, all are
 * given back at the build's end, and every slice is the bytes a fresh
 * layout gives.
 */
static void test_parquet_cache_one_bound_for_a_build(void **state)
{
	char *dir = tmpdir_new(), name[32], path[4096];
	struct sfs_indexer_opts o = { .source = dir, .jobs = 1 };
	struct sfs_indexer_report rep = { 0 };
	struct sfs_error err = { 0 };
	struct sfs_index *idx = NULL;
	struct sfs_slice_cache *c;
	struct slicer t[NSMALL];
	pthread_barrier_t start;
	pthread_t th[NSMALL];
	uint64_t own;
	size_t i, j;

	(void)state;
	for (i = 0; i < NSMALL; i++) {
		snprintf(name, sizeof(name), "s%zu.parquet", i);
		free(page_file(dir, name, SMALL_ROWS, NULL));
	}
	assert_int_equal(sfs_indexer_build(&o, NULL, &idx, &rep, &err), 0);
	assert_int_equal(idx->nshards, NSMALL);
	snprintf(path, sizeof(path), "%s/s0.parquet", dir);
	own = small_page_mem(path);
	assert_int_equal(
		sfs_slice_cache_new_within(idx, 0, own * 5 / 2, NULL, &c), 0);
	assert_int_equal(pthread_barrier_init(&start, NULL, NSMALL), 0);
	for (i = 0; i < NSMALL; i++) {
		t[i] = (struct slicer){ .c = c,
					.idx = idx,
					.dir = dir,
					.start = &start,
					.first = i };
		assert_int_equal(
			pthread_create(&th[i], NULL, lay_out_slices, &t[i]), 0);
	}
	for (i = 0; i < NSMALL; i++) {
		assert_int_equal(pthread_join(th[i], NULL), 0);
		assert_int_equal(t[i].ok, SLICES_EACH);
	}
	assert_true(sfs_budget_peak(sfs_slice_cache_pages(c)) <= own * 5 / 2);
	assert_true(sfs_budget_peak(sfs_slice_cache_pages(c)) >= own);
	sfs_slice_cache_end_build(c);
	assert_int_equal(sfs_budget_used(sfs_slice_cache_pages(c)), 0);
	for (i = 0; i < NSMALL; i++)
		for (j = 0; j < SLICES_EACH; j++) {
			const struct sfs_shard *sh =
				&idx->shards[(i + j) % NSMALL];
			struct sfs_run run = { 1000 + j * 31337, 1000 };
			struct sfs_slice *got, *want;
			unsigned char *x, *y;
			int fd = open_shard(dir, sh);

			assert_int_equal(sfs_slice_cache_build(
						 c, sh, fd, i * SLICES_EACH + j,
						 &run, 1, &got, &err),
					 0);
			assert_int_equal(sfs_slice_build(idx, sh, fd, &run, 1,
							 &want, &err),
					 0);
			assert_int_equal(got->size, want->size);
			x = slice_bytes(got, fd);
			y = slice_bytes(want, fd);
			assert_memory_equal(x, y, got->size);
			free(x);
			free(y);
			sfs_slice_free(got);
			sfs_slice_free(want);
			close(fd);
		}
	pthread_barrier_destroy(&start);
	sfs_slice_cache_free(c);
	sfs_index_free(idx);
	tmpdir_remove(dir);
}

/* The slices the test below lays out: shard, first row (1000 rows). */
static const struct {
	unsigned shard;
	uint64_t first;
} alternate[] = { { 0, 1000 },	{ 1, 8919 },  { 0, 16838 }, { 1, 24757 },
		  { 0, 32676 }, { 1, 40595 }, { 0, 48514 }, { 1, 56433 },
		  { 2, 5 },	{ 1, 50000 }, { 0, 60000 } };

/* Slice key of shard sh cut at [first, first + 1000) through c. */
static void size_through(struct sfs_slice_cache *c, const char *dir,
			 const struct sfs_shard *sh, uint64_t key,
			 uint64_t first)
{
	struct sfs_error err = { 0 };
	struct sfs_run run = { first, 1000 };
	uint64_t size;
	int fd = open_shard(dir, sh);

	assert_int_equal(
		sfs_slice_cache_size(c, sh, fd, key, &run, 1, &size, &err), 0);
	close(fd);
}

/* Three files of one page of SMALL_ROWS rows, a b c, indexed; *body:
 * where their values begin. */
static struct sfs_index *three_pages(char *dir, off_t *body)
{
	struct sfs_indexer_opts o = { .source = dir, .jobs = 1 };
	struct sfs_indexer_report rep = { 0 };
	struct sfs_error err = { 0 };
	struct sfs_index *idx = NULL;

	free(page_file(dir, "a.parquet", SMALL_ROWS, body));
	free(page_file(dir, "b.parquet", SMALL_ROWS, NULL));
	free(page_file(dir, "c.parquet", SMALL_ROWS, NULL));
	assert_int_equal(sfs_indexer_build(&o, NULL, &idx, &rep, &err), 0);
	assert_int_equal(idx->nshards, 3);
	return idx;
}

/*
 * Three shards of one big page each, their slices laid out one shard
 * after another through a cache whose states may keep two pages: a and b
 * cut alternately decode their pages once each, although each state is
 * put back between its slices and the two pages fill the budget to
 * within less than the states' footers (when the states were trimmed
 * counting their pages, a state was freed at every put and its page
 * decoded again at each slice); c then finds no room and frees the idle
 * state used least recently (a), whose page is decoded again when it
 * comes back.  The pages never pass the bound, and every slice is the
 * bytes a fresh layout gives.
 */
static void test_parquet_cache_states_keep_pages_that_fit(void **state)
{
	char *dir = tmpdir_new(), path[4096];
	struct sfs_error err = { 0 };
	struct sfs_index *idx;
	struct sfs_slice_cache *c;
	const struct sfs_shard *sh[3];
	static const unsigned reads[] = { 1, 2, 2, 2, 2, 2, 2, 2, 3, 3, 4 };
	uint64_t own, bound;
	size_t i;
	off_t body;

	(void)state;
	idx = three_pages(dir, &body);
	for (i = 0; i < 3; i++) {
		sh[i] = &idx->shards[i];
		assert_int_equal(sh[i]->path[0], 'a' + (int)i);
	}
	snprintf(path, sizeof(path), "%s/a.parquet", dir);
	own = small_page_mem(path);
	/* two pages and less than a footer more */
	bound = 2 * own + 64;
	assert_int_equal(sfs_slice_cache_new_within(idx, 0, bound, NULL, &c),
			 0);
	atomic_store(&page_body, (long long)body);
	atomic_store(&page_reads, 0);
	for (i = 0; i < sizeof(alternate) / sizeof(*alternate); i++) {
		size_through(c, dir, sh[alternate[i].shard], i,
			     alternate[i].first);
		assert_int_equal(atomic_load(&page_reads), reads[i]);
	}
	atomic_store(&page_body, -1);
	assert_true(sfs_budget_peak(sfs_slice_cache_pages(c)) <= bound);
	assert_true(sfs_budget_peak(sfs_slice_cache_pages(c)) >= 2 * own);
	sfs_slice_cache_end_build(c);
	assert_int_equal(sfs_budget_used(sfs_slice_cache_pages(c)), 0);
	for (i = 0; i < sizeof(alternate) / sizeof(*alternate); i++) {
		const struct sfs_shard *s = sh[alternate[i].shard];
		struct sfs_run run = { alternate[i].first, 1000 };
		struct sfs_slice *got, *want;
		unsigned char *x, *y;
		int fd = open_shard(dir, s);

		assert_int_equal(sfs_slice_cache_build(c, s, fd, i, &run, 1,
						       &got, &err),
				 0);
		assert_int_equal(
			sfs_slice_build(idx, s, fd, &run, 1, &want, &err), 0);
		assert_int_equal(got->size, want->size);
		x = slice_bytes(got, fd);
		y = slice_bytes(want, fd);
		assert_memory_equal(x, y, got->size);
		free(x);
		free(y);
		sfs_slice_free(got);
		sfs_slice_free(want);
		close(fd);
	}
	sfs_slice_cache_free(c);
	sfs_index_free(idx);
	tmpdir_remove(dir);
}

/*
 * A view whose shuffled files move from shard to shard, over shards of
 * one big page each, with room for one shard's page: its build lays the
 * slices out in shard order, so each page is decoded once (in plan order
 * each move decoded a page again).  One CPU, so that no two threads hold
 * two shards' pages at once.
 */
static void test_parquet_cache_build_lays_out_in_shard_order(void **state)
{
	char *dir = tmpdir_new(), path[4096];
	struct sfs_index *idx;
	struct sfs_view *v;
	cpu_set_t all, one;
	uint64_t own;
	off_t body;

	(void)state;
	idx = three_pages(dir, &body);
	snprintf(path, sizeof(path), "%s/a.parquet", dir);
	own = small_page_mem(path);
	assert_int_equal(sched_getaffinity(0, sizeof(all), &all), 0);
	CPU_ZERO(&one);
	CPU_SET(sched_getcpu(), &one);
	assert_int_equal(sched_setaffinity(0, sizeof(one), &one), 0);
	atomic_store(&page_body, (long long)body);
	atomic_store(&page_reads, 0);
	v = build_within(idx, dir, "world=2,workers=2,block=20000,seed=3", 0,
			 own + 64);
	assert_int_equal(atomic_load(&page_reads), 3);
	atomic_store(&page_body, -1);
	assert_int_equal(sched_setaffinity(0, sizeof(all), &all), 0);
	assert_true(check_all(v, dir) > 6);
	sfs_view_free(v);
	sfs_index_free(idx);
	tmpdir_remove(dir);
}

/* What each thread of the test below builds: a view of idx under opts,
 * within mem. */
struct builder_thread {
	const struct sfs_index *idx;
	const char *dir, *opts;
	struct sfs_slice_mem *mem;
	pthread_barrier_t *start;
	struct sfs_view *v;
	int rc;
};

static void *build_view(void *arg)
{
	struct builder_thread *t = arg;
	struct sfs_error err = { 0 };
	struct sfs_view_opts vo = { .epochs = 1,
				    .symlinks = true,
				    .mem = t->mem };

	vo.srcfd = open(t->dir, O_RDONLY | O_DIRECTORY);
	sfs_options_init(&vo.options);
	t->rc = vo.srcfd < 0 || sfs_options_parse(&vo.options, t->opts, &err);
	pthread_barrier_wait(t->start);
	if (!t->rc)
		t->rc = sfs_view_build(t->idx, &vo, &t->v, &err);
	sfs_options_clear(&vo.options);
	if (vo.srcfd >= 0)
		close(vo.srcfd);
	return NULL;
}

/*
 * Two views built at once (a daemon's current epoch and the next, built
 * ahead) over three shards of one big page each, cut into blocks, within
 * one bound of two and a half pages for both builds' pages and both
 * views' kept slices (sfs_slice_mem): the pages and slices they hold
 * together never pass it, the pages are all given back when the builds
 * end (the views keep only their slices, within the slices' bound), and
 * every slice is the bytes a fresh layout gives.  (When each build had a
 * bound of its own, two builds kept twice it, and a daemon with two
 * views kept each one's slices beside.)
 */
static void test_parquet_cache_two_builds_one_bound(void **state)
{
	char *dir = tmpdir_new(), path[4096];
	struct builder_thread t[2];
	struct sfs_slice_mem mem;
	struct sfs_index *idx;
	pthread_barrier_t start;
	pthread_t th[2];
	uint64_t own, bound, slices_max = 200u << 10;
	size_t i;

	(void)state;
	idx = three_pages(dir, NULL);
	snprintf(path, sizeof(path), "%s/a.parquet", dir);
	own = small_page_mem(path);
	bound = own * 5 / 2;
	sfs_slice_mem_init(&mem, bound, slices_max);
	assert_int_equal(pthread_barrier_init(&start, NULL, 2), 0);
	for (i = 0; i < 2; i++) {
		t[i] = (struct builder_thread){
			.idx = idx,
			.dir = dir,
			.opts = i ? "world=2,workers=2,block=20000,epoch=1" :
				    "world=2,workers=2,block=20000",
			.mem = &mem,
			.start = &start
		};
		assert_int_equal(
			pthread_create(&th[i], NULL, build_view, &t[i]), 0);
	}
	for (i = 0; i < 2; i++) {
		assert_int_equal(pthread_join(th[i], NULL), 0);
		assert_int_equal(t[i].rc, 0);
	}
	assert_true(sfs_budget_peak(&mem.all) <= bound);
	/* the pages were charged to it, not only the slices */
	assert_true(sfs_budget_peak(&mem.all) >= own);
	/* the builds ended: their pages are given back */
	assert_int_equal(sfs_budget_used(&mem.all),
			 sfs_budget_used(&mem.slices));
	assert_int_equal(sfs_budget_used(&mem.slices),
			 sfs_slice_cache_mem(t[0].v->slices) +
				 sfs_slice_cache_mem(t[1].v->slices));
	assert_true(sfs_budget_used(&mem.slices) <= slices_max);
	for (i = 0; i < 2; i++) {
		assert_true(check_all(t[i].v, dir) >= 20);
		sfs_view_free(t[i].v);
	}
	assert_int_equal(sfs_budget_used(&mem.all), 0);
	pthread_barrier_destroy(&start);
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
		cmocka_unit_test(
			test_parquet_cache_spills_what_memory_cannot_keep),
		cmocka_unit_test(test_parquet_cache_spill_runs_out_of_room),
		cmocka_unit_test(
			test_parquet_cache_spilled_never_serves_a_changed_shard),
		cmocka_unit_test(test_parquet_cache_pages_cut_the_same_bytes),
		cmocka_unit_test(
			test_parquet_cache_pages_decode_a_big_page_once),
		cmocka_unit_test(test_parquet_cache_pages_shared_by_threads),
		cmocka_unit_test(
			test_parquet_cache_pages_one_bound_for_threads),
		cmocka_unit_test(test_parquet_cache_one_bound_for_a_build),
		cmocka_unit_test(test_parquet_cache_states_keep_pages_that_fit),
		cmocka_unit_test(
			test_parquet_cache_build_lays_out_in_shard_order),
		cmocka_unit_test(test_parquet_cache_two_builds_one_bound),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
