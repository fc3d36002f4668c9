/*
 * The description of a view's slices before its tree is built: each
 * slice's name (a hash of its runs) and size, on a pool of threads
 * (view.c builds the tree from them).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "shardfs/digest.h"
#include "shardfs/pool.h"
#include "shardfs/util.h"
#include "shardfs/view.h"

#include "view_i.h"

/* slices described per item of the pool, at most; fewer when there are
 * few, so that every thread has some (a Parquet slice cut inside row
 * groups takes tens of ms to size: three slices were one thread's) */
#define DESCRIBE_CHUNK 256
#define DESCRIBE_ITEMS_PER_THREAD 8

/*
 * The size of the slice of sh holding runs r[0 .. nruns), its boundaries
 * read through bb.  A driver that lays out slices itself reads the shard.
 */
static int slice_size(const struct sfs_view *v, struct sfs_bounds_buf *bb,
		      int srcfd, const struct sfs_shard *sh, uint64_t key,
		      const struct sfs_run *r, size_t nruns, uint64_t *size,
		      struct sfs_error *err)
{
	int fd, rc;

	if (!sh->format->lay_out)
		return sfs_slice_size(v->idx, bb, sh, -1, r, nruns, size, err);
	fd = sfs_view_open_shard(srcfd, sh, err);
	if (fd < 0)
		return fd;
	/* laid out once: kept for its open, the shard read once */
	rc = sfs_slice_cache_size(v->slices, sh, fd, key, r, nruns, size, err);
	close(fd);
	return rc;
}

/*
 * Every slice of a view is described before its tree is built, on a pool
 * of threads (one per CPU the process may use): the names hash 16 bytes
 * per run and the sizes read boundaries, and a switch waits for both.
 * Files are numbered plan after plan; an item of the pool is chunk of
 * them, in that order but for the slices whose driver lays them out
 * itself (Parquet), which come after the others in shard order: a
 * shard's state (its footer, the pages its cuts decoded: slice.h) then
 * serves all its slices at once, where plan order, shuffled, would move
 * from shard to shard and decode pages again that the build's bound on
 * them could not keep.  An item of those is of one shard, and while the
 * pages the build keeps are more than would fit again beside them (a
 * shard's row groups of big pages), a thread begins the items of a shard
 * only once those of the shards before are done: two threads on two such
 * shards would hold both shards' pages at once, or, the second not
 * fitting, free and decode them again in turn.  The failure of the
 * earliest file is the one told.
 */
struct describe {
	const struct sfs_view *v;
	const struct sfs_view_opts *o;
	struct slice_desc **desc;
	size_t total; /* files of every plan */
	/* the files laid out by their driver, shard << 32 | file, sorted;
	 * described after the others (NULL: in plan order with them) */
	uint64_t *laid;
	size_t nlaid;
	size_t chunk; /* files per item: 1 .. DESCRIBE_CHUNK */
	size_t nplain; /* items of the files in plan order, the first */
	/* the items of the laid-out files: item j is laid[at[j] ..
	 * at[j + 1]), of one shard, whose first item is first[j] */
	size_t nitems, *at, *first;
	bool *done; /* lock: per item, described */
	size_t done_below; /* lock: items 0 .. done_below all described */
	pthread_cond_t item_done; /* an item was described */
	pthread_mutex_t lock;
	atomic_size_t failed_at; /* SIZE_MAX while none failed */
	atomic_size_t described; /* files, for progress */
	int rc;
	struct sfs_error err;
};

static int describe_one(const struct sfs_view *v, int srcfd,
			struct sfs_digest *dg, struct sfs_bounds_buf *bb,
			uint32_t plan, size_t fi, uint64_t key,
			struct slice_desc *d, struct sfs_error *err)
{
	const struct sfs_plan *p = v->plans[plan];
	const struct sfs_plan_file *f = &p->files[fi];
	const struct sfs_run *r = sfs_plan_file_runs(p, f);
	int rc;

	if (f->whole || v->idx->shards[f->shard].format->dataset_view)
		return 0;
	rc = sfs_view_runs_name(dg, r, f->nruns, d->samples,
				sizeof(d->samples));
	if (rc)
		return sfs_errorf(err, rc, "out of memory");
	return slice_size(v, bb, srcfd, &v->idx->shards[f->shard], key, r,
			  f->nruns, &d->size, err);
}

/* The plan e and file fi of v numbered g (plan after plan). */
static void plan_file(const struct sfs_view *v, size_t g, uint32_t *e,
		      size_t *fi)
{
	for (*e = 0; g >= v->plans[*e]->nfiles; (*e)++)
		g -= v->plans[*e]->nfiles;
	*fi = g;
}

/* Whether file fi of plan e is a slice its shard's driver lays out. */
static bool laid_out(const struct sfs_view *v, uint32_t e, size_t fi)
{
	const struct sfs_plan_file *f = &v->plans[e]->files[fi];
	const struct sfs_format_ops *ops = v->idx->shards[f->shard].format;

	return !f->whole && ops->lay_out && !ops->dataset_view;
}

/* The items of d->laid: at most d->chunk files each, never two shards'.
 * 0 or -ENOMEM. */
static int laid_items(struct describe *d)
{
	size_t k, j = 0;

	d->at = malloc((d->nlaid + 1) * sizeof(*d->at));
	d->first = malloc(d->nlaid * sizeof(*d->first));
	d->done = calloc(d->nlaid, sizeof(*d->done));
	if (!d->at || !d->first || !d->done)
		return -ENOMEM;
	for (k = 0; k < d->nlaid; k++) {
		bool same = k && d->laid[k] >> 32 == d->laid[k - 1] >> 32;

		if (same && k - d->at[j - 1] < d->chunk)
			continue;
		d->at[j] = k;
		d->first[j] = same ? d->first[j - 1] : j;
		j++;
	}
	d->at[j] = d->nlaid;
	d->nitems = j;
	return 0;
}

/* The files laid out by their driver, shard << 32 | file, sorted into
 * d->laid, and their items; none when there are fewer than two or no
 * memory. */
static void describe_order(struct describe *d)
{
	size_t g, n = 0;
	uint32_t e;
	size_t fi;

	for (g = 0; g < d->total; g++) {
		plan_file(d->v, g, &e, &fi);
		n += laid_out(d->v, e, fi);
	}
	if (n < 2 || d->total > UINT32_MAX)
		return;
	d->laid = malloc(n * sizeof(*d->laid));
	if (!d->laid)
		return;
	for (g = 0; g < d->total; g++) {
		plan_file(d->v, g, &e, &fi);
		if (laid_out(d->v, e, fi))
			d->laid[d->nlaid++] =
				(uint64_t)d->v->plans[e]->files[fi].shard
					<< 32 |
				g;
	}
	qsort(d->laid, d->nlaid, sizeof(*d->laid), sfs_cmp_u64);
	if (laid_items(d)) {
		free(d->laid);
		d->laid = NULL;
		d->nlaid = 0;
	}
}

/*
 * Wait until the items of the shards before item j's are described,
 * while the pages the build keeps and cuts would not fit again beside
 * them (a shard of big pages; small ones are described side by side).
 */
static void wait_shards_before(struct describe *d, size_t j)
{
	struct sfs_budget *pages = sfs_slice_cache_pages(d->v->slices);

	pthread_mutex_lock(&d->lock);
	while (d->done_below < d->first[j] &&
	       sfs_budget_used(pages) + sfs_budget_held(pages) >
		       sfs_budget_room(pages))
		pthread_cond_wait(&d->item_done, &d->lock);
	pthread_mutex_unlock(&d->lock);
}

/* Item j of the laid-out files is described. */
static void laid_item_done(struct describe *d, size_t j)
{
	pthread_mutex_lock(&d->lock);
	d->done[j] = true;
	while (d->done_below < d->nitems && d->done[d->done_below])
		d->done_below++;
	pthread_cond_broadcast(&d->item_done);
	pthread_mutex_unlock(&d->lock);
}

static void describe_chunk(struct sfs_pool *p, size_t i, struct sfs_digest *dg)
{
	struct describe *d = p->arg;
	size_t k, end, g = 0, fi, j = i - d->nplain;
	struct sfs_bounds_buf *bb = NULL;
	struct sfs_error err;
	uint32_t e;
	int rc = 0;

	/* the files of item i: in plan order, then laid out in shard order */
	k = i < d->nplain ? i * d->chunk : d->total + d->at[j];
	end = i < d->nplain ? (i + 1) * d->chunk : d->total + d->at[j + 1];
	if (i < d->nplain && end > d->total)
		end = d->total;
	if (i >= d->nplain)
		wait_shards_before(d, j);
	/* the chunk's files read neighbouring boundaries of a few shards: one
	 * read of a table's few KiB serves many of them (without the buffer,
	 * out of memory, each file reads its own) */
	sfs_bounds_buf_new(&bb);
	for (; !rc && k < end; k++) {
		g = k < d->total ? k :
				   (size_t)(d->laid[k - d->total] & UINT32_MAX);
		plan_file(d->v, g, &e, &fi);
		if (k < d->total && d->laid && laid_out(d->v, e, fi))
			continue; /* described in shard order, below */
		if (atomic_load(&d->failed_at) < g)
			continue;
		rc = sfs_view_cancelled(d->o, &err);
		if (rc)
			continue;
		rc = describe_one(d->v, d->o->srcfd, dg, bb, e, fi, g,
				  &d->desc[e][fi], &err);
		atomic_fetch_add(&d->described, 1);
	}
	sfs_bounds_buf_free(bb);
	if (i >= d->nplain)
		laid_item_done(d, j);
	if (!rc)
		return;
	pthread_mutex_lock(&d->lock);
	if (g < atomic_load(&d->failed_at)) {
		atomic_store(&d->failed_at, g);
		d->rc = rc;
		d->err = err;
	}
	pthread_mutex_unlock(&d->lock);
}

static void describe_progress(const struct sfs_pool *p, bool final)
{
	struct describe *d = p->arg;

	if (!final)
		d->o->progress(d->o, atomic_load(&d->described), d->total,
			       p->elapsed);
}

/* (view_i.h) */
int sfs_view_describe(struct builder *b)
{
	struct sfs_view *v = b->v;
	struct describe d = { .v = v, .o = b->o };
	struct sfs_pool pool = { .work = describe_chunk,
				 .progress = b->o->progress ?
						     describe_progress :
						     NULL,
				 .arg = &d };
	uint32_t e;

	b->desc = calloc(v->nplans, sizeof(*b->desc));
	if (!b->desc)
		return -ENOMEM;
	for (e = 0; e < v->nplans; e++) {
		b->desc[e] =
			malloc((v->plans[e]->nfiles + 1) * sizeof(*b->desc[e]));
		if (!b->desc[e])
			return -ENOMEM;
		d.total += v->plans[e]->nfiles;
	}
	d.desc = b->desc;
	atomic_init(&d.failed_at, SIZE_MAX);
	atomic_init(&d.described, 0);
	pthread_mutex_init(&d.lock, NULL);
	pthread_cond_init(&d.item_done, NULL);
	d.chunk = d.total / (DESCRIBE_ITEMS_PER_THREAD * sfs_pool_cpus());
	if (d.chunk > DESCRIBE_CHUNK)
		d.chunk = DESCRIBE_CHUNK;
	if (!d.chunk)
		d.chunk = 1;
	describe_order(&d);
	d.nplain = (d.total + d.chunk - 1) / d.chunk;
	pool.n = d.nplain + d.nitems;
	sfs_pool_run(&pool);
	pthread_cond_destroy(&d.item_done);
	pthread_mutex_destroy(&d.lock);
	free(d.laid);
	free(d.at);
	free(d.first);
	free(d.done);
	if (d.rc && b->err)
		*b->err = d.err;
	return d.rc;
}

/* (view_i.h) */
void sfs_view_describe_free(struct builder *b)
{
	uint32_t e;

	for (e = 0; b->desc && e < b->v->nplans; e++)
		free(b->desc[e]);
	free(b->desc);
}
