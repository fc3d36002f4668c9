#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers.h"

void buf_put(struct buf *b, const void *data, size_t n)
{
	if (b->len + n > b->cap) {
		b->cap = (b->len + n) * 2 + 64;
		b->p = realloc(b->p, b->cap);
		assert_non_null(b->p);
	}
	memcpy(b->p + b->len, data, n);
	b->len += n;
}

void buf_zero(struct buf *b, size_t n)
{
	static const unsigned char zeros[4096];

	while (n) {
		size_t k = n < sizeof(zeros) ? n : sizeof(zeros);

		buf_put(b, zeros, k);
		n -= k;
	}
}

void buf_free(struct buf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

size_t tar_member(struct buf *b, const char *name, char type, const void *data,
		  size_t size)
{
	unsigned char h[512] = { 0 };
	size_t at = b->len, i;
	unsigned sum = 0;

	strncpy((char *)h, name, 100);
	memcpy(h + 100, "0000644", 7);
	memcpy(h + 108, "0000000", 7);
	memcpy(h + 116, "0000000", 7);
	snprintf((char *)h + 124, 12, "%011zo", size);
	snprintf((char *)h + 136, 12, "%011o", 1700000000);
	memset(h + 148, ' ', 8);
	h[156] = (unsigned char)type;
	memcpy(h + 257, "ustar", 6);
	memcpy(h + 263, "00", 2);
	for (i = 0; i < 512; i++)
		sum += h[i];
	snprintf((char *)h + 148, 8, "%06o", sum);
	buf_put(b, h, 512);
	if (size)
		buf_put(b, data, size);
	buf_zero(b, (512 - size % 512) % 512);
	return at;
}

size_t tar_pax(struct buf *b, char type, const char *key, const char *value)
{
	char rec[1024];
	size_t body = strlen(key) + strlen(value) + 3, len = body + 1;

	/* The record's length counts its own digits. */
	while (len != body + (size_t)snprintf(NULL, 0, "%zu", len))
		len = body + (size_t)snprintf(NULL, 0, "%zu", len);
	snprintf(rec, sizeof(rec), "%zu %s=%s\n", len, key, value);
	assert_int_equal(strlen(rec), len);
	return tar_member(b, type == 'g' ? "pax_global_header" : "PaxHeader",
			  type, rec, len);
}

size_t tar_longname(struct buf *b, const char *name)
{
	return tar_member(b, "././@LongLink", 'L', name, strlen(name) + 1);
}

void tar_end(struct buf *b)
{
	buf_zero(b, 1024);
}

char *tmpdir_new(void)
{
	char *dir = strdup("/tmp/shardfs-test-XXXXXX");

	assert_non_null(dir);
	assert_non_null(mkdtemp(dir));
	return dir;
}

static int rm_one(const char *path, const struct stat *st, int flag,
		  struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

void tmpdir_remove(char *dir)
{
	if (!dir)
		return;
	chmod(dir, 0755);
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	free(dir);
}

char *write_at(const char *dir, const char *name, const void *data, size_t len)
{
	char path[PATH_MAX], *slash;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	for (slash = strchr(path + strlen(dir) + 1, '/'); slash;
	     slash = strchr(slash + 1, '/')) {
		*slash = '\0';
		mkdir(path, 0755);
		*slash = '/';
	}
	f = fopen(path, "wb");
	assert_non_null(f);
	if (len)
		assert_int_equal(fwrite(data, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
	return strdup(path);
}

int scan_file(const struct sfs_format_ops *ops, const char *path,
	      struct sfs_scan *out, struct sfs_error *err)
{
	struct sfs_scan_in in = { .path = path };
	struct stat st;
	int rc;

	in.fd = open(path, O_RDONLY);
	assert_true(in.fd >= 0);
	assert_int_equal(fstat(in.fd, &st), 0);
	in.size = (uint64_t)st.st_size;
	rc = sfs_format_scan(ops, &in, out, err);
	close(in.fd);
	return rc;
}

/* The pieces a scan hands over, joined. */
struct pieces {
	uint64_t *bounds;
	uint64_t n, npieces;
};

static int take_piece(void *arg, const uint64_t *bounds, uint64_t n)
{
	struct pieces *p = arg;

	assert_int_equal(n, 65536);
	p->bounds = realloc(p->bounds, (p->n + n) * sizeof(*p->bounds));
	assert_non_null(p->bounds);
	memcpy(p->bounds + p->n, bounds, n * sizeof(*bounds));
	p->n += n;
	p->npieces++;
	return 0;
}

uint64_t expect_bounds_pieces(const struct sfs_format_ops *ops,
			      const char *path)
{
	struct sfs_scan_in in = { .path = path, .bounds_fn = take_piece };
	struct pieces p = { 0 };
	struct sfs_error err = { 0 };
	struct sfs_scan whole, s;
	struct stat st;

	assert_int_equal(scan_file(ops, path, &whole, &err), 0);
	assert_true(whole.sliceable);
	assert_int_equal(whole.bounds_passed, 0);
	in.bounds_arg = &p;
	in.fd = open(path, O_RDONLY);
	assert_true(in.fd >= 0);
	assert_int_equal(fstat(in.fd, &st), 0);
	in.size = (uint64_t)st.st_size;
	assert_int_equal(sfs_format_scan(ops, &in, &s, &err), 0);
	close(in.fd);
	assert_int_equal(s.nsamples, whole.nsamples);
	assert_int_equal(s.bounds_passed, p.n);
	assert_true(p.n <= s.nsamples);
	assert_true(s.nsamples + 1 - p.n <= 65536);
	p.bounds = realloc(p.bounds, (s.nsamples + 1) * sizeof(*p.bounds));
	assert_non_null(p.bounds);
	memcpy(p.bounds + p.n, s.bounds,
	       (s.nsamples + 1 - p.n) * sizeof(*p.bounds));
	assert_memory_equal(p.bounds, whole.bounds,
			    (s.nsamples + 1) * sizeof(*p.bounds));
	free(p.bounds);
	free(s.bounds);
	free(whole.bounds);
	return p.npieces;
}

struct buf read_all(const char *path)
{
	struct buf b = { 0 };
	char chunk[65536];
	FILE *f = fopen(path, "rb");
	size_t n;

	assert_non_null(f);
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		buf_put(&b, chunk, n);
	fclose(f);
	return b;
}

/* An in-memory index: shard i has counts[i] samples, 10 bytes each. */
struct sfs_index *mkindex(const uint64_t *counts, size_t n, const bool *opaque)
{
	struct sfs_index *idx = calloc(1, sizeof(*idx));
	uint64_t nb = 0, i, k;

	idx->source = strdup("/src");
	idx->shards = calloc(n + 1, sizeof(*idx->shards));
	for (i = 0; i < n; i++)
		nb += opaque && opaque[i] ? 0 : counts[i] + 1;
	idx->bounds_heap = malloc((nb + 1) * sizeof(uint64_t));
	for (i = 0, nb = 0; i < n; i++) {
		struct sfs_shard *sh = &idx->shards[i];
		char name[32];

		snprintf(name, sizeof(name), "s%04llu.tar",
			 (unsigned long long)i);
		sh->path = strdup(name);
		sh->format = sfs_format_by_name("tar");
		sh->nsamples = counts[i];
		sh->first_sample = idx->nsamples;
		sh->size = counts[i] * 10;
		sh->bounds_at = SFS_NO_BOUNDS;
		idx->nsamples += counts[i];
		if (opaque && opaque[i])
			continue;
		sh->bounds_at = nb;
		for (k = 0; k <= counts[i]; k++)
			idx->bounds_heap[nb++] = k * 10;
	}
	idx->nshards = n;
	idx->bounds = idx->bounds_heap;
	idx->nbounds = nb;
	return idx;
}
