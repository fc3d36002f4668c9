/*
 * A window of a followed stream (window.h): samples [kN, (k+1)N) planned
 * like an epoch of their own, over an index of just those samples (the
 * shards they lie in, each cut to its part), and laid out for some
 * readers as the slices of their files, end to end, without the bytes
 * that end a slice (a tar's end-of-archive): those end the window file
 * and the stream, once.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardfs/index.h"
#include "shardfs/plan.h"
#include "shardfs/slice.h"
#include "shardfs/util.h"
#include "shardfs/view.h"
#include "shardfs/window.h"

void sfs_follow_windows(uint64_t total, uint64_t window, uint64_t start,
			bool ended, uint64_t *first, uint64_t *full, bool *last)
{
	uint64_t done = total / window;

	*first = start / window;
	*full = done > *first ? done - *first : 0;
	*last = ended && total % window && total > start &&
		total / window >= *first;
}

int sfs_follow_check_window(uint64_t window, const struct sfs_plan_opts *o,
			    struct sfs_error *err)
{
	uint64_t unit =
		(uint64_t)(o->world / o->replicas) * o->workers * o->batch;

	if (window && window % unit == 0)
		return 0;
	if (window < unit)
		return sfs_errorf(
			err, -EINVAL,
			"window=%llu is not a multiple of world/replicas x workers x batch = %llu: use window=%llu, or a multiple of it",
			(unsigned long long)window, (unsigned long long)unit,
			(unsigned long long)unit);
	return sfs_errorf(
		err, -EINVAL,
		"window=%llu is not a multiple of world/replicas x workers x batch = %llu: use window=%llu or window=%llu",
		(unsigned long long)window, (unsigned long long)unit,
		(unsigned long long)(window / unit * unit),
		(unsigned long long)((window / unit + 1) * unit));
}

void sfs_window_free(struct sfs_window *w)
{
	size_t i;

	if (!w)
		return;
	for (i = 0; i < w->nreaders; i++) {
		free(w->readers[i].bytes.extents);
		free(w->readers[i].runs);
	}
	free(w->readers);
	free(w);
}

size_t sfs_window_run_shard(const struct sfs_window *win,
			    const struct sfs_shard *shards,
			    const struct sfs_run *r)
{
	return SFS_PARTITION_POINT(i, win->first_shard, win->end_shard,
				   shards[i].first_sample <= r->first) -
	       1;
}

/*
 * The index a window is planned over: samples [lo, hi) of f's stream, in
 * its shards first .. end (copies of the stream's, their paths borrowed),
 * the first and last cut to the window and empty ones kept (the plan
 * skips them), so that shard j is the stream's first + j; the boundaries
 * f holds copied into its table.  Free it with window_index_free.
 */
static int window_index(struct sfs_follow *f, uint64_t lo, uint64_t hi,
			size_t *first, size_t *end, struct sfs_index *w,
			struct sfs_error *err)
{
	const struct sfs_index *idx = f->idx;
	size_t i, n, nb = 0;
	int rc;

	*first = sfs_index_shard_at(idx, lo);
	for (i = *first; i < idx->nshards && idx->shards[i].first_sample < hi;
	     i++) {
		const struct sfs_shard *sh = &idx->shards[i];

		rc = sfs_follow_bounds(
			f, i, lo > sh->first_sample ? lo - sh->first_sample : 0,
			err);
		if (rc)
			return rc;
		nb += sh->nsamples + 1;
	}
	*end = i;
	/* a window's extents name their shard in 32 bits */
	if (*end > (size_t)UINT32_MAX + 1)
		return sfs_errorf(
			err, -EOVERFLOW,
			"%s/%s: shard %zu of the stream, past the %lu shards a window can read from: end the stream (%s) and follow a new source",
			f->source, idx->shards[*end - 1].path, *end - 1,
			(unsigned long)UINT32_MAX + 1, SFS_FOLLOW_END);
	n = *end - *first;
	w->shards = malloc((n ? n : 1) * sizeof(*w->shards));
	w->bounds_heap = malloc((nb ? nb : 1) * sizeof(uint64_t));
	if (!w->shards || !w->bounds_heap)
		return sfs_errorf(err, -ENOMEM, "out of memory");
	w->source = f->source;
	w->table_fd = w->blocks_fd = w->digests_fd = -1;
	for (nb = 0; w->nshards < n; w->nshards++) {
		const struct sfs_follow_held *h = &f->held[*first + w->nshards];
		struct sfs_shard *sh = &w->shards[w->nshards];
		uint64_t a, b;

		*sh = idx->shards[*first + w->nshards];
		a = lo > sh->first_sample ? lo - sh->first_sample : 0;
		b = hi - sh->first_sample < sh->nsamples ?
			    hi - sh->first_sample :
			    sh->nsamples;
		sh->newline_missing = sh->newline_missing && b == sh->nsamples;
		sh->nsamples = b - a;
		sh->first_sample = w->nsamples;
		sh->bounds_at = nb;
		memcpy(w->bounds_heap + nb, h->bounds + (a - h->from),
		       (b - a + 1) * sizeof(uint64_t));
		nb += b - a + 1;
		w->nsamples += b - a;
	}
	w->bounds = w->bounds_heap;
	w->nbounds = nb;
	return 0;
}

static void window_index_free(struct sfs_index *w)
{
	free(w->shards);
	free(w->bounds_heap);
}

/* Append slice s of stream shard shard to reader r's bytes, but its
 * last skip bytes (the slice's ending). */
static int append(struct sfs_window_reader *r, size_t *cap,
		  const struct sfs_slice *s, uint32_t shard, uint64_t skip)
{
	struct sfs_slice *b = &r->bytes;
	size_t i;

	for (i = 0; i < s->nextents; i++) {
		const struct sfs_extent *e = &s->extents[i];
		struct sfs_extent *last =
			b->nextents ? &b->extents[b->nextents - 1] : NULL;

		if (e->pos >= s->size - skip)
			break;
		if (last && !e->mem && !last->mem && last->file == shard &&
		    last->src + last->len == e->src) {
			last->len += e->len;
			b->size += e->len;
			continue;
		}
		if (SFS_GROW(b->extents, *cap, b->nextents + 1))
			return -ENOMEM;
		b->extents[b->nextents++] =
			(struct sfs_extent){ .pos = b->size,
					     .len = e->len,
					     .src = e->src,
					     .mem = e->mem,
					     .file = shard };
		b->size += e->len;
	}
	return 0;
}

/* The ranks of readers (plan reader numbers), sorted, each once. */
static uint32_t *ranks_of(const struct sfs_plan_opts *o, const size_t *readers,
			  size_t nreaders, size_t *n)
{
	uint32_t *r = malloc((nreaders ? nreaders : 1) * sizeof(*r));
	size_t i, j;

	if (!r)
		return NULL;
	*n = 0;
	for (i = 0; i < nreaders; i++) {
		uint32_t rank =
			(uint32_t)(readers[i] / o->workers) * o->replicas;

		for (j = 0; j < *n && r[j] != rank; j++)
			;
		if (j == *n)
			r[(*n)++] = rank;
	}
	for (i = 1; i < *n; i++)
		for (j = i; j > 0 && r[j - 1] > r[j]; j--) {
			uint32_t t = r[j];

			r[j] = r[j - 1];
			r[j - 1] = t;
		}
	return r;
}

/* Lay out reader's files of plan p of window win over its index w
 * (window_index; lo: the stream's number of its sample 0) into r, each
 * slice without its last skip bytes. */
static int lay_out(const struct sfs_window *win, const struct sfs_index *w,
		   uint64_t lo, const struct sfs_plan *p, size_t reader,
		   struct sfs_window_reader *r, uint64_t skip,
		   struct sfs_error *err)
{
	const struct sfs_plan_reader *pr = &p->readers[reader];
	size_t i, j, cap = 0, rcap = 0;
	int rc = 0;

	r->padding = pr->npadding;
	for (i = 0; !rc && i < pr->nfiles; i++) {
		const struct sfs_plan_file *pf = &p->files[pr->file_at + i];
		const struct sfs_run *runs = sfs_plan_file_runs(p, pf);
		uint32_t shard = (uint32_t)(win->first_shard + pf->shard);
		struct sfs_slice *s;

		for (j = 0; j < pf->nruns; j++) {
			if (SFS_GROW(r->runs, rcap, r->nruns + 1))
				return sfs_errorf(err, -ENOMEM,
						  "out of memory");
			r->runs[r->nruns++] = (struct sfs_run){
				lo + w->shards[pf->shard].first_sample +
					runs[j].first,
				runs[j].count
			};
		}
		rc = sfs_slice_build(w, &w->shards[pf->shard], -1, runs,
				     pf->nruns, &s, err);
		if (rc)
			return rc;
		if (append(r, &cap, s, shard, skip))
			rc = sfs_errorf(err, -ENOMEM, "out of memory");
		r->samples += pf->nsamples;
		sfs_slice_free(s);
	}
	return rc;
}

int sfs_window_build(struct sfs_follow *f, const struct sfs_plan_opts *o,
		     uint64_t window, uint64_t k, bool last,
		     const size_t *readers, size_t nreaders,
		     struct sfs_window **out, struct sfs_error *err)
{
	uint64_t lo = k * window, hi = last ? f->idx->nsamples : lo + window;
	struct sfs_plan_opts po = *o;
	struct sfs_index w = { 0 };
	struct sfs_plan *p = NULL;
	struct sfs_window *win = NULL;
	uint32_t *ranks = NULL;
	size_t nranks = 0, i;
	int rc;

	if (hi > f->idx->nsamples || lo >= hi)
		return sfs_errorf(err, -EINVAL,
				  "window %llu is not in the stream yet",
				  (unsigned long long)k);
	po.epoch = k;
	po.epoch_size = 0;
	po.start = o->start > lo ? o->start - lo : 0;
	if (!last)
		po.remainder = SFS_REMAINDER_PAD;
	win = calloc(1, sizeof(*win));
	rc = win ? window_index(f, lo, hi, &win->first_shard, &win->end_shard,
				&w, err) :
		   sfs_errorf(err, -ENOMEM, "out of memory");
	if (rc)
		goto out;
	ranks = ranks_of(o, readers, nreaders, &nranks);
	if (!ranks) {
		rc = sfs_errorf(err, -ENOMEM, "out of memory");
		goto out;
	}
	rc = sfs_plan_build_ranks(&w, &po, ranks, nranks, NULL, &p, err);
	if (rc) {
		/* remainder=drop leaving no sample of the last window */
		if (last && o->remainder == SFS_REMAINDER_DROP && rc == -EINVAL)
			rc = -ENODATA;
		goto out;
	}
	win->k = k;
	win->per_reader = p->per_reader;
	win->padding = p->padding;
	win->dropped = p->dropped;
	win->last_sample = hi;
	if (f->format->slice_suffix && w.nshards)
		win->trailer_len =
			f->format->slice_suffix(&w.shards[0], &win->trailer);
	win->readers = calloc(nreaders ? nreaders : 1, sizeof(*win->readers));
	if (!win->readers) {
		rc = sfs_errorf(err, -ENOMEM, "out of memory");
		goto out;
	}
	win->nreaders = nreaders;
	for (i = 0; !rc && i < nreaders; i++)
		rc = lay_out(win, &w, lo, p, readers[i], &win->readers[i],
			     win->trailer_len, err);
out:
	sfs_plan_free(p);
	free(ranks);
	window_index_free(&w);
	if (rc) {
		sfs_window_free(win);
		return rc;
	}
	/* the windows are laid out in order: none needs what is before
	 * this one again */
	sfs_follow_release(f, lo);
	*out = win;
	return 0;
}

/* ---- extended attributes (docs/follow.md, "What readers see") ---- */

static int number(uint64_t v, char **out)
{
	return asprintf(out, "%" PRIu64, v) < 0 ? -ENOMEM : 0;
}

/* The runs of wr, adjacent ones joined: user.shardfs.range, into *out.
 * 0, -E2BIG or -ENOMEM. */
static int window_range(const struct sfs_window_reader *wr, char **out)
{
	struct sfs_run *runs = calloc(wr->nruns ? wr->nruns : 1, sizeof(*runs));
	size_t i, n = 0;
	int rc;

	if (!runs)
		return -ENOMEM;
	for (i = 0; i < wr->nruns; i++) {
		if (n &&
		    runs[n - 1].first + runs[n - 1].count == wr->runs[i].first)
			runs[n - 1].count += wr->runs[i].count;
		else
			runs[n++] = wr->runs[i];
	}
	rc = sfs_view_xattr_range(runs, n, out);
	free(runs);
	return rc;
}

/* The shards wr's file of window win reads, their absolute paths one a
 * line in the stream's order: user.shardfs.source, into *out.  0, -E2BIG
 * or -ENOMEM. */
static int window_sources(const struct sfs_window *win,
			  const struct sfs_window_reader *wr,
			  const char *source, const struct sfs_shard *shards,
			  char **out)
{
	size_t n = win->end_shard - win->first_shard, i, len = 0, cap;
	bool *read = calloc(n ? n : 1, sizeof(*read));
	const char *path;
	char *s;

	if (!read)
		return -ENOMEM;
	for (i = 0; i < wr->nruns; i++)
		read[sfs_window_run_shard(win, shards, &wr->runs[i]) -
		     win->first_shard] = true;
	for (i = 0; i < n; i++)
		if (read[i])
			len += strlen(source) +
			       strlen(shards[i + win->first_shard].path) + 2;
	cap = len + 1;
	s = len <= SFS_XATTR_MAX ? malloc(cap) : NULL;
	for (i = 0, len = 0; s && i < n; i++) {
		path = shards[i + win->first_shard].path;
		if (read[i])
			len += (size_t)snprintf(s + len, cap - len, "%s%s/%s",
						len ? "\n" : "", source, path);
	}
	if (s && !len)
		s[0] = '\0';
	free(read);
	if (!s)
		return cap - 1 > SFS_XATTR_MAX ? -E2BIG : -ENOMEM;
	*out = s;
	return 0;
}

int sfs_window_xattr(const struct sfs_window *win, size_t reader,
		     const char *source, const struct sfs_shard *shards,
		     const char *name, char **out)
{
	const struct sfs_window_reader *wr = &win->readers[reader];

	if (!strcmp(name, SFS_XATTR_SOURCE))
		return window_sources(win, wr, source, shards, out);
	if (!strcmp(name, SFS_XATTR_SAMPLES))
		return number(wr->samples, out);
	if (!strcmp(name, SFS_XATTR_PADDING))
		return number(wr->padding, out);
	if (!strcmp(name, SFS_XATTR_RANGE))
		return window_range(wr, out);
	if (!strcmp(name, SFS_XATTR_EPOCH)) /* window k is planned as epoch k */
		return number(win->k, out);
	return -ENODATA;
}

int sfs_window_stream_xattr(struct sfs_window *const *wins, size_t nwins,
			    size_t reader, const char *source, const char *name,
			    char **out)
{
	uint64_t samples = 0, padding = 0;
	size_t i;

	if (!strcmp(name, SFS_XATTR_SOURCE)) {
		*out = strdup(source);
		return *out ? 0 : -ENOMEM;
	}
	for (i = 0; i < nwins; i++) {
		samples += wins[i]->readers[reader].samples;
		padding += wins[i]->readers[reader].padding;
	}
	if (!strcmp(name, SFS_XATTR_SAMPLES))
		return number(samples, out);
	if (!strcmp(name, SFS_XATTR_PADDING))
		return number(padding, out);
	return -ENODATA;
}

const char *sfs_window_xattr_names(bool stream, size_t *len)
{
	static const char window_names[] = SFS_XATTR_SOURCE
		"\0" SFS_XATTR_SAMPLES "\0" SFS_XATTR_RANGE
		"\0" SFS_XATTR_PADDING "\0" SFS_XATTR_EPOCH;
	static const char stream_names[] = SFS_XATTR_SOURCE
		"\0" SFS_XATTR_SAMPLES "\0" SFS_XATTR_PADDING;

	*len = stream ? sizeof(stream_names) : sizeof(window_names);
	return stream ? stream_names : window_names;
}
