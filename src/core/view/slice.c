/* A slice: the bytes of a reader's runs of one shard, as extents of the
 * shard and bytes the driver synthesized (include/shardfs/slice.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shardfs/format.h"

#include "shardfs/slice.h"
#include "shardfs/util.h"
#include "slice_i.h"

struct layout {
	struct sfs_slice *s;
	size_t cap;
	bool count_only; /* only add up the size */
};

static int add(struct layout *l, uint64_t src, uint64_t len, const void *mem,
	       bool owned)
{
	struct sfs_slice *s = l->s;

	if (!len || l->count_only) {
		s->size += len;
		if (owned)
			free((void *)mem);
		return 0;
	}
	/* Source ranges that touch merge into one extent. */
	if (!mem && s->nextents) {
		struct sfs_extent *last = &s->extents[s->nextents - 1];

		if (!last->mem && last->src + last->len == src) {
			last->len += len;
			s->size += len;
			return 0;
		}
	}
	if (SFS_GROW(s->extents, l->cap, s->nextents + 1)) {
		if (owned)
			free((void *)mem);
		return -ENOMEM;
	}
	s->extents[s->nextents++] = (struct sfs_extent){ .pos = s->size,
							 .len = len,
							 .src = src,
							 .mem = mem,
							 .owned = owned };
	s->size += len;
	return 0;
}

/* The sfs_extent_fn of a driver's lay_out. */
static int add_extent(void *arg, uint64_t src, uint64_t len, void *mem)
{
	return add(arg, src, len, mem, mem != NULL);
}

void sfs_slice_span(const struct sfs_run *runs, size_t nruns, uint64_t *first,
		    uint64_t *end)
{
	size_t i;

	*first = nruns ? UINT64_MAX : 0;
	*end = 0;
	for (i = 0; i < nruns; i++) {
		if (runs[i].first < *first)
			*first = runs[i].first;
		if (runs[i].first + runs[i].count > *end)
			*end = runs[i].first + runs[i].count;
	}
}

/*
 * The boundaries runs[0..nruns) need: b[0..*n) from boundary *lo of the
 * shard on, read with one sfs_bounds_buf_read through bb (NULL: directly)
 * into buf when it fits, else into *heap, which the caller frees.
 */
static int
read_runs_bounds(const struct sfs_index *idx, struct sfs_bounds_buf *bb,
		 const struct sfs_shard *sh, const struct sfs_run *runs,
		 size_t nruns, uint64_t *buf, size_t bufn, uint64_t **b,
		 uint64_t *lo, uint64_t **heap, struct sfs_error *err)
{
	uint64_t hi, n;

	sfs_slice_span(runs, nruns, lo, &hi);
	n = hi - *lo + 1;
	*b = buf;
	if (n > bufn) {
		*heap = malloc(n * sizeof(**heap));
		if (!*heap)
			return sfs_errorf(err, -ENOMEM, "out of memory");
		*b = *heap;
	}
	return sfs_bounds_buf_read(bb, idx, sh, *lo, n, *b, err);
}

/* Lay out into l; state: the driver's read_shard state of sh, or NULL;
 * bb: the boundaries' buffer, or NULL. */
static int lay_out(struct layout *l, const struct sfs_index *idx,
		   struct sfs_bounds_buf *bb, const struct sfs_shard *sh,
		   int fd, const void *state, const struct sfs_run *runs,
		   size_t nruns, struct sfs_error *err)
{
	const struct sfs_format_ops *ops = sh->format;
	uint64_t buf[256], *b, *heap = NULL, lo;
	const void *mem;
	size_t i, n;
	int rc;

	if (!sfs_shard_sliceable(sh))
		return sfs_errorf(
			err, -EINVAL,
			"%s: a %s shard of this kind cannot be sliced",
			sh->path, ops->name);
	for (i = 0; i < nruns; i++) {
		uint64_t a = runs[i].first, e = runs[i].first + runs[i].count;

		if (e < a || e > sh->nsamples)
			return sfs_errorf(
				err, -EINVAL,
				"%s: samples %llu..%llu are past the shard's %llu samples",
				sh->path, (unsigned long long)a,
				(unsigned long long)e,
				(unsigned long long)sh->nsamples);
	}
	if (state)
		return ops->lay_out_from(state, fd, sh, runs, nruns, add_extent,
					 l, err);
	if (ops->lay_out)
		return ops->lay_out(fd, sh, runs, nruns, add_extent, l, err);
	rc = read_runs_bounds(idx, bb, sh, runs, nruns, buf,
			      sizeof(buf) / sizeof(*buf), &b, &lo, &heap, err);
	if (rc) {
		free(heap);
		return rc;
	}
	rc = add(l, 0, sh->prefix_len, NULL, false);
	for (i = 0; !rc && i < nruns; i++) {
		uint64_t a = runs[i].first - lo, e = a + runs[i].count;

		rc = add(l, b[a], b[e] - b[a], NULL, false);
		if (!rc && ops->run_suffix &&
		    (n = ops->run_suffix(sh, runs[i].first + runs[i].count,
					 &mem)))
			rc = add(l, 0, n, mem, false);
	}
	if (!rc && ops->slice_suffix && (n = ops->slice_suffix(sh, &mem)))
		rc = add(l, 0, n, mem, false);
	free(heap);
	if (rc)
		return sfs_errorf(err, rc, "out of memory");
	return 0;
}

int slice_build_state(const struct sfs_index *idx, const struct sfs_shard *sh,
		      int fd, const void *state, const struct sfs_run *runs,
		      size_t nruns, struct sfs_slice **out,
		      struct sfs_error *err)
{
	struct layout l = { 0 };
	int rc;

	l.s = calloc(1, sizeof(*l.s));
	if (!l.s)
		return sfs_errorf(err, -ENOMEM, "out of memory");
	rc = lay_out(&l, idx, NULL, sh, fd, state, runs, nruns, err);
	if (rc) {
		sfs_slice_free(l.s);
		return rc;
	}
	*out = l.s;
	return 0;
}

int sfs_slice_build(const struct sfs_index *idx, const struct sfs_shard *sh,
		    int fd, const struct sfs_run *runs, size_t nruns,
		    struct sfs_slice **out, struct sfs_error *err)
{
	return slice_build_state(idx, sh, fd, NULL, runs, nruns, out, err);
}

int sfs_slice_size(const struct sfs_index *idx, struct sfs_bounds_buf *bb,
		   const struct sfs_shard *sh, int fd,
		   const struct sfs_run *runs, size_t nruns, uint64_t *size,
		   struct sfs_error *err)
{
	struct sfs_slice s = { 0 };
	struct layout l = { .s = &s, .count_only = true };
	int rc = lay_out(&l, idx, bb, sh, fd, NULL, runs, nruns, err);

	if (!rc)
		*size = s.size;
	return rc;
}

int sfs_slice_whole(uint64_t size, struct sfs_slice **out,
		    struct sfs_error *err)
{
	struct layout l = { 0 };

	l.s = calloc(1, sizeof(*l.s));
	if (!l.s || add(&l, 0, size, NULL, false)) {
		sfs_slice_free(l.s);
		return sfs_errorf(err, -ENOMEM, "out of memory");
	}
	*out = l.s;
	return 0;
}

int sfs_slice_mem(const void *mem, uint64_t len, struct sfs_slice **out,
		  struct sfs_error *err)
{
	struct layout l = { 0 };

	l.s = calloc(1, sizeof(*l.s));
	if (!l.s || add(&l, 0, len, mem, false)) {
		sfs_slice_free(l.s);
		return sfs_errorf(err, -ENOMEM, "out of memory");
	}
	*out = l.s;
	return 0;
}

void sfs_slice_free(struct sfs_slice *s)
{
	size_t i;

	if (!s)
		return;
	for (i = 0; !s->shared && i < s->nextents; i++)
		if (s->extents[i].owned)
			free((void *)s->extents[i].mem);
	free(s->extents);
	free(s);
}

size_t sfs_slice_find(const struct sfs_slice *s, uint64_t pos)
{
	return SFS_PARTITION_POINT(i, 1, s->nextents,
				   s->extents[i].pos <= pos) -
	       1;
}

ssize_t sfs_slice_pread(const struct sfs_slice *s, int fd, void *buf,
			size_t len, uint64_t pos)
{
	char *p = buf;
	size_t done = 0, i;

	if (pos >= s->size || !len)
		return 0;
	if (len > s->size - pos)
		len = (size_t)(s->size - pos);
	for (i = sfs_slice_find(s, pos); done < len; i++) {
		const struct sfs_extent *x = &s->extents[i];
		uint64_t in = pos + done - x->pos;
		size_t n = x->len - in < len - done ? (size_t)(x->len - in) :
						      len - done;

		if (x->mem) {
			memcpy(p + done, (const char *)x->mem + in, n);
			done += n;
			continue;
		}
		if (sfs_pread_full(fd, p + done, n, x->src + in) != (ssize_t)n)
			return -EIO; /* or the shard is shorter than indexed */
		done += n;
	}
	return (ssize_t)done;
}
