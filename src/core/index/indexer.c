/*
 * Building and verifying an index (indexer.h): the shards the walk found
 * (indexer_walk.c) scanned and hashed on a pool of threads, then
 * assembled into an index; a verify re-reads every shard of one.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shardfs/indexer.h"
#include "shardfs/pool.h"
#include "shardfs/share.h"
#include "shardfs/spill.h"
#include "shardfs/util.h"

#include "index_i.h"
#include "indexer_i.h"

#define ERRORS_NAMED 5

/* Shared by the workers of one run (on the pool: pool.arg is the job). */
struct job {
	struct sfs_pool pool;
	const struct sfs_indexer_opts *o;
	int srcfd;
	uint64_t bytes_total; /* for progress */
	void (*work)(struct job *j, size_t i, struct sfs_digest *d);
	void *ctx;
	struct sfs_spill *spill; /* a build's, when o->spill_dir */
	const struct sfs_index *prev; /* a build's previous index, or NULL */
	/* the job's threads (o->jobs, 0: one per CPU), shared by the
	 * pool's workers and their scans' helpers */
	struct sfs_share share;
};

/* ---- running work in parallel ---- */

static void pool_work(struct sfs_pool *p, size_t i, struct sfs_digest *d)
{
	struct job *j = p->arg;

	j->work(j, i, d);
}

static void pool_progress(const struct sfs_pool *p, bool final)
{
	const struct job *j = p->arg;
	struct sfs_indexer_progress pr = {
		.done = atomic_load(&p->done),
		.total = p->n,
		.bytes_done = atomic_load(&p->bytes),
		.bytes_total = j->bytes_total,
		.samples = atomic_load(&p->samples),
		.elapsed = p->elapsed,
		.final = final,
	};

	j->o->progress(&pr, j->o->arg);
}

/* Work on items 0 .. n-1 of the job on the pool. */
static void run(struct job *j, size_t n, uint64_t bytes_total)
{
	j->pool.n = n;
	j->pool.threads = j->o->jobs;
	j->pool.work = pool_work;
	j->pool.progress = j->o->progress ? pool_progress : NULL;
	j->pool.arg = j;
	j->bytes_total = bytes_total;
	sfs_share_init(&j->share, &j->pool);
	sfs_pool_run(&j->pool);
}

static void item_fail(struct item *it, int rc, const struct sfs_error *e)
{
	it->rc = rc;
	it->msg = strdup(e->msg[0] ? e->msg : strerror(-rc));
}

/*
 * Open path below the source to read it, as the daemon opens a shard
 * (sfs_index_open_shard: no symlink on the way, O_NONBLOCK), and only a
 * regular file: the walk's lstat is older than the open, and a FIFO
 * swapped in since would hang a blocking open or read for ever.  Returns
 * the descriptor with *st filled, or -EIO with a message in e.
 */
static int open_regular(int srcfd, const char *path, struct stat *st,
			struct sfs_error *e)
{
	int fd = sfs_index_open_shard(srcfd, path, O_RDONLY), rc;

	if (fd < 0)
		return sfs_errorf(
			e, -EIO, "%s: cannot open: %s", path,
			fd == -ELOOP || fd == -EXDEV ?
				"a symlink on its path (the source changed since it was listed)" :
				strerror(-fd));
	if (fstat(fd, st) < 0) {
		rc = errno;
		close(fd);
		return sfs_errorf(e, -EIO, "%s: cannot stat: %s", path,
				  strerror(rc));
	}
	if (!S_ISREG(st->st_mode)) {
		close(fd);
		return sfs_errorf(
			e, -EIO,
			"%s: not a regular file (the source changed since it was listed)",
			path);
	}
	return fd;
}

/*
 * Hash the item's file (open as fd; fed to d already when its scan did,
 * it->scan.file_hashed) and its members into it->digest.  d is the
 * thread's, for the items after this one too: left new on every path,
 * a failure's bytes finished away (a review found the next item's digest
 * taken over them).
 */
static int hash_item(struct job *j, struct item *it, int fd,
		     struct sfs_digest *d, struct sfs_error *e)
{
	unsigned char none[SFS_DIGEST_LEN];
	size_t m;
	int rc = 0;

	if (!d)
		return sfs_errorf(e, -ENOMEM, "out of memory");
	if (!it->scan.file_hashed)
		rc = sfs_digest_fd(d, fd, it->size, it->path, e);
	for (m = 0; !rc && m < it->nmembers; m++) {
		struct stat st;
		int mfd = open_regular(j->srcfd, it->members[m].path, &st, e);

		if (mfd < 0) {
			rc = mfd;
			break;
		}
		rc = sfs_digest_fd(d, mfd, it->members[m].size,
				   it->members[m].path, e);
		close(mfd);
	}
	if (!rc)
		rc = sfs_digest_final(d, it->digest);
	else
		sfs_digest_final(d, none);
	return rc;
}

/*
 * Digests a scan hands over are spilled in pieces of this many (1 MiB):
 * a shard's digests (32 bytes a sample, 3.2 GB for 100 M rows) never stand
 * in memory at once.
 */
#define DIGEST_PIECE 32768

/* Spill the digests collected since the last piece. */
static int flush_digests(struct item *it, struct sfs_error *e)
{
	uint64_t n = it->nsdig - it->sdig_spilled;
	int rc = sfs_spill_append(it->spill, it->rec, NULL, 0, it->sdig, n, e);

	if (!rc)
		it->sdig_spilled = it->nsdig;
	return rc;
}

static int collect_digest(void *arg, uint64_t sample,
			  const unsigned char d[SFS_DIGEST_LEN])
{
	struct item *it = arg;
	uint64_t held = it->nsdig - it->sdig_spilled;
	int rc;

	if (sample != it->nsdig)
		return -ERANGE;
	if (it->spill && held == DIGEST_PIECE) {
		rc = flush_digests(it, it->spill_err);
		if (rc) {
			it->spill_failed = true;
			return rc;
		}
		held = 0;
	}
	if (sfs_grow(&it->sdig, &it->sdig_cap,
		     (size_t)(held + 1) * SFS_DIGEST_LEN, 1))
		return -ENOMEM;
	memcpy(it->sdig + held * SFS_DIGEST_LEN, d, SFS_DIGEST_LEN);
	it->nsdig++;
	return 0;
}

/* A piece of the boundaries a scan found, to the spill as they come. */
static int spill_bounds(void *arg, const uint64_t *bounds, uint64_t n)
{
	struct item *it = arg;
	int rc = sfs_spill_append(it->spill, it->rec, bounds, n, NULL, 0,
				  it->spill_err);

	if (rc)
		it->spill_failed = true;
	return rc;
}

/*
 * The digest of every sample, as the auditor will compute it from what a
 * loader reads (format.h's samples op), so that it need not read the
 * source again; drivers that can do it during the scan already have.  A
 * sample of several files is its files' bytes: the item's digest; an
 * opaque file is one unit: every sample gets the file's digest.
 */
static int sample_digests(struct item *it, int fd, struct sfs_error *e)
{
	uint64_t n = it->scan.nsamples, k;
	int rc = 0;

	if (it->ops->whole_file || it->nmembers)
		for (k = 0; !rc && k < n; k++)
			rc = collect_digest(it, k, it->digest);
	else if (!it->scan.digested)
		rc = it->ops->samples(fd, it->path, collect_digest, it, e);
	if (it->spill_failed)
		return rc;
	if (rc == -ENOMEM)
		return sfs_errorf(e, rc, "%s: out of memory", it->path);
	if (rc == -ERANGE || (!rc && it->nsdig != n))
		rc = sfs_errorf(
			e, -EINVAL,
			"%s: its headers hold %llu samples, reading it gives %llu; the shard is malformed",
			it->path, (unsigned long long)n,
			(unsigned long long)it->nsdig);
	return rc;
}

/*
 * Spill the boundaries and digests of item i (its own, or those of its
 * previous entry, which the build's prev holds) and free its own.
 */
static int spill_item(struct job *j, size_t i, struct item *it,
		      struct sfs_error *e)
{
	const struct sfs_shard *p = it->prev;
	uint64_t n = p ? p->nsamples : it->scan.nsamples, nb = n + 1, k, m;
	int rc = 0;

	if (p ? !sfs_shard_has_bounds(p) : !it->scan.sliceable)
		nb = 0;
	/* a reused entry's tables are read into the item's own buffers,
	 * not through a mapping: a refresh keeps no old table resident;
	 * its digests a piece at a time */
	if (p && j->o->hash) {
		it->sdig = malloc(DIGEST_PIECE * SFS_DIGEST_LEN);
		if (!it->sdig)
			rc = sfs_errorf(e, -ENOMEM, "out of memory");
		for (k = 0; !rc && k < n; k += m) {
			m = n - k < DIGEST_PIECE ? n - k : DIGEST_PIECE;
			rc = sfs_index_read_digests(
				j->prev, p->first_sample + k, m, it->sdig, e);
			if (!rc)
				rc = sfs_spill_append(j->spill, i, NULL, 0,
						      it->sdig, m, e);
		}
		it->nsdig = it->sdig_spilled = n;
	}
	if (p && nb && !rc) {
		it->scan.bounds = malloc(nb * sizeof(uint64_t));
		rc = it->scan.bounds ?
			     sfs_index_read_bounds(j->prev, p, 0, nb,
						   it->scan.bounds, e) :
			     sfs_errorf(e, -ENOMEM, "out of memory");
	}
	/* those a scan handed over are there already */
	nb = nb > it->scan.bounds_passed ? nb - it->scan.bounds_passed : 0;
	if (!rc)
		rc = sfs_spill_put(j->spill, i, it->scan.bounds, nb, it->sdig,
				   it->nsdig - it->sdig_spilled, e);
	free(it->scan.bounds);
	it->scan.bounds = NULL;
	free(it->sdig);
	it->sdig = NULL;
	it->sdig_cap = 0;
	return rc;
}

static void build_one(struct job *j, size_t i, struct sfs_digest *d)
{
	struct item *it = &((struct item *)j->ctx)[i];
	struct sfs_scan_in in = { .path = it->path,
				  .declared = j->o->declared,
				  .dirfd = j->srcfd };
	struct sfs_error e = { 0 }, spill_err = { 0 };
	struct stat st;
	int fd, rc;

	it->spill = j->spill;
	it->rec = i;
	it->spill_err = &spill_err;
	if (it->prev) {
		atomic_fetch_add(&j->pool.bytes, it->size);
		atomic_fetch_add(&j->pool.samples, it->prev->nsamples);
		if (j->spill && (rc = spill_item(j, i, it, &e)))
			goto out_fatal;
		return;
	}
	fd = open_regular(j->srcfd, it->path, &st, &e);
	if (fd < 0) {
		rc = fd;
		goto out_fail;
	}
	/* The file may have changed since the walk: trust what is open. */
	it->size = (uint64_t)st.st_size;
	it->mtime_ns = sfs_mtime_ns(&st);
	in.fd = fd;
	in.size = it->size;
	if (j->o->hash) {
		in.digest_fn = collect_digest;
		in.digest_arg = it;
		/* the scan's helpers may hash the file between its samples */
		in.file_digest = d;
	}
	if (j->spill) {
		in.bounds_fn = spill_bounds;
		in.bounds_arg = it;
	}
	in.share = &j->share;
	rc = sfs_format_scan(it->ops, &in, &it->scan, &e);
	if (!rc && j->o->hash) {
		rc = hash_item(j, it, fd, d, &e);
		it->hashed = !rc;
	}
	if (!rc && j->o->hash)
		rc = sample_digests(it, fd, &e);
	close(fd);
	fd = -1;
	if (it->spill_failed) {
		e = spill_err;
		goto out_fatal;
	}
	atomic_fetch_add(&j->pool.bytes, it->size);
	atomic_fetch_add(&j->pool.samples, it->scan.nsamples);
	if (!rc && j->spill && (rc = spill_item(j, i, it, &e)))
		goto out_fatal;
	if (!rc)
		return;
out_fail:
	if (fd >= 0)
		close(fd);
	item_fail(it, rc, &e);
	return;
out_fatal:
	item_fail(it, rc, &e);
	it->fatal = true;
}

/* ---- assembling the index ---- */

static bool reusable(const struct sfs_index *prev, const struct sfs_shard *sh,
		     const struct item *it, const struct sfs_indexer_opts *o)
{
	size_t m;

	if (sh->size != it->size || sh->mtime_ns != it->mtime_ns ||
	    sh->format != it->ops || sh->nmembers != it->nmembers ||
	    (o->hash && (!sh->has_digest || !prev->digests ||
			 (prev->dmap && !prev->digests_checked))))
		return false;
	if (sh->format->declared &&
	    sh->nsamples != (o->declared ? o->declared : 1))
		return false;
	for (m = 0; m < it->nmembers; m++)
		if (strcmp(sh->members[m].path, it->members[m].path) ||
		    sh->members[m].size != it->members[m].size ||
		    sh->members[m].mtime_ns != it->members[m].mtime_ns)
			return false;
	return true;
}

/* Whether the item's shard has boundaries (in the table). */
static bool item_cut(const struct item *it)
{
	return it->prev ? sfs_shard_has_bounds(it->prev) : it->scan.sliceable;
}

/*
 * Move the item's results into sh; bounds go to table[*nb...], or only
 * count there when table is NULL (they were spilled).
 */
static int assemble_one(const struct sfs_index *prev, struct item *it,
			struct sfs_shard *sh, uint64_t *table, uint64_t *nb,
			struct sfs_error *err)
{
	const struct sfs_shard *p = it->prev;
	uint64_t n;
	int rc;

	sh->path = it->path;
	it->path = NULL;
	sh->members = it->members;
	sh->nmembers = it->nmembers;
	it->members = NULL;
	it->nmembers = 0;
	sh->bounds_at = SFS_NO_BOUNDS;
	if (p) {
		sh->size = p->size;
		sh->mtime_ns = p->mtime_ns;
		sh->format = p->format;
		sh->nsamples = p->nsamples;
		sh->prefix_len = p->prefix_len;
		sh->newline_missing = p->newline_missing;
		sh->has_digest = p->has_digest;
		memcpy(sh->digest, p->digest, SFS_DIGEST_LEN);
		if (!sfs_shard_has_bounds(p))
			return 0;
		rc = table ? sfs_index_read_bounds(prev, p, 0, p->nsamples + 1,
						   table + *nb, err) :
			     0;
	} else {
		sh->size = it->size;
		sh->mtime_ns = it->mtime_ns;
		sh->format = it->ops;
		sh->nsamples = it->scan.nsamples;
		sh->prefix_len = it->scan.prefix_len;
		sh->newline_missing = it->scan.newline_missing;
		sh->has_digest = it->hashed;
		memcpy(sh->digest, it->digest, SFS_DIGEST_LEN);
		if (!it->scan.sliceable)
			return 0;
		if (table)
			memcpy(table + *nb, it->scan.bounds,
			       (sh->nsamples + 1) * sizeof(*table));
		rc = 0;
	}
	n = sh->nsamples + 1;
	sh->bounds_at = *nb;
	*nb += n;
	return rc;
}

static int add_problem(struct sfs_indexer_report *rep, const char *msg)
{
	if (SFS_GROW(rep->problems, rep->problems_cap, rep->nproblems + 1))
		return -ENOMEM;
	rep->problems[rep->nproblems] = strdup(msg);
	if (!rep->problems[rep->nproblems])
		return -ENOMEM;
	rep->nproblems++;
	return 0;
}

static int build_failed(struct walk *w, struct sfs_error *err)
{
	char list[ERRORS_NAMED * 512];
	size_t i, nbad = 0, len = 0;

	list[0] = '\0';
	for (i = 0; i < w->n; i++) {
		if (!w->items[i].rc)
			continue;
		if (nbad++ < ERRORS_NAMED && len < sizeof(list)) {
			int k = snprintf(list + len, sizeof(list) - len, "%s%s",
					 len ? "; " : "", w->items[i].msg);

			if (k > 0)
				len += (size_t)k;
		}
	}
	return sfs_errorf(
		err, -EINVAL,
		"%zu shard%s could not be indexed: %s%s; fix or remove %s, or run shardfs-index --skip-bad to index the rest",
		nbad, nbad == 1 ? "" : "s", list,
		nbad > ERRORS_NAMED ? "; ..." : "", nbad == 1 ? "it" : "them");
}

/* Copy the item's sample digests (or its previous entry's) into idx. */
static void assemble_digests(const struct sfs_index *prev,
			     const struct item *it, struct sfs_index *idx,
			     const struct sfs_shard *sh)
{
	const unsigned char *src =
		it->prev ? prev->digests +
				   it->prev->first_sample * SFS_DIGEST_LEN :
			   it->sdig;

	memcpy(idx->digests_heap + sh->first_sample * SFS_DIGEST_LEN, src,
	       sh->nsamples * SFS_DIGEST_LEN);
}

/*
 * Fill idx from the items.  With spill the tables stay in it (moved into
 * idx): only the shards' places in them are counted here.
 */
static int assemble(struct walk *w, const struct sfs_index *prev,
		    struct sfs_index *idx, bool hashed,
		    struct sfs_spill **spill, struct sfs_indexer_report *rep,
		    struct sfs_error *err)
{
	uint64_t nbounds = 0, nb = 0, nsamples = 0, k;
	size_t i, n = 0;
	int rc;

	for (i = 0; i < w->n; i++) {
		struct item *it = &w->items[i];

		if (it->rc)
			continue;
		k = it->prev ? it->prev->nsamples : it->scan.nsamples;
		if (item_cut(it))
			nbounds += k + 1;
		nsamples += k;
		n++;
	}
	idx->shards = calloc(n + 1, sizeof(*idx->shards));
	if (!idx->shards)
		return sfs_errorf(err, -ENOMEM, "out of memory");
	if (*spill) {
		idx->spill = *spill;
		*spill = NULL;
		hashed = false;
	} else {
		idx->bounds_heap = malloc((nbounds + 1) * sizeof(uint64_t));
		if (!idx->bounds_heap)
			return sfs_errorf(err, -ENOMEM, "out of memory");
	}
	if (hashed)
		idx->digests_heap = malloc(nsamples * SFS_DIGEST_LEN + 1);
	if (hashed && !idx->digests_heap)
		return sfs_errorf(err, -ENOMEM, "out of memory");
	for (i = 0; i < w->n; i++) {
		struct item *it = &w->items[i];
		struct sfs_shard *sh = &idx->shards[idx->nshards];

		if (it->rc) {
			if (add_problem(rep, it->msg))
				return sfs_errorf(err, -ENOMEM,
						  "out of memory");
			continue;
		}
		idx->nshards++;
		rc = assemble_one(prev, it, sh, idx->bounds_heap, &nb, err);
		if (rc)
			return rc;
		sh->first_sample = idx->nsamples;
		if (hashed)
			assemble_digests(prev, it, idx, sh);
		if (it->prev)
			rep->reused++;
		else
			rep->scanned++;
		idx->nsamples += sh->nsamples;
	}
	idx->bounds = idx->bounds_heap;
	idx->nbounds = nb;
	idx->digests = idx->digests_heap;
	return 0;
}

int sfs_indexer_build(const struct sfs_indexer_opts *o,
		      const struct sfs_index *prev, struct sfs_index **out,
		      struct sfs_indexer_report *rep, struct sfs_error *err)
{
	struct walk w = { 0 };
	struct job j = { .o = o, .work = build_one, .prev = prev };
	struct sfs_index *idx;
	uint64_t bytes = 0;
	size_t i, nbad = 0;
	int rc;

	memset(rep, 0, sizeof(*rep));
	idx = calloc(1, sizeof(*idx));
	if (!idx)
		return sfs_errorf(err, -ENOMEM, "out of memory");
	idx->source = realpath(o->source, NULL);
	j.srcfd = idx->source ? open(idx->source,
				     O_RDONLY | O_DIRECTORY | O_CLOEXEC) :
				-1;
	if (j.srcfd < 0) {
		rc = sfs_errorf(err, -ENOENT,
				"%s: cannot open the source directory: %s",
				o->source, strerror(errno));
		goto out_free;
	}
	rc = sfs_indexer_walk(&w, j.srcfd, o, err);
	if (rc)
		goto out_free;
	if (o->nparts) {
		idx->part = o->part;
		idx->nparts = o->nparts;
	}
	for (i = 0; i < w.n; i++) {
		ssize_t p = prev ? sfs_index_find(prev, w.items[i].path) : -1;

		if (p >= 0 && reusable(prev, &prev->shards[p], &w.items[i], o))
			w.items[i].prev = &prev->shards[p];
		bytes += w.items[i].size;
	}
	rep->ignored = w.ignored;
	if (o->spill_dir) {
		rc = sfs_spill_new(o->spill_dir, w.n, o->hash, &j.spill, err);
		if (rc)
			goto out_free;
	}
	j.ctx = w.items;
	run(&j, w.n, bytes);
	for (i = 0; i < w.n; i++) {
		if (w.items[i].fatal) {
			rc = sfs_errorf(err, w.items[i].rc, "%s",
					w.items[i].msg);
			goto out_free;
		}
		nbad += w.items[i].rc != 0;
	}
	if (nbad && !o->skip_bad) {
		rc = build_failed(&w, err);
		goto out_free;
	}
	rc = assemble(&w, prev, idx, o->hash, &j.spill, rep, err);
	if (!rc && sfs_index_note_access(idx))
		rc = sfs_errorf(err, -ENOMEM, "out of memory");
	if (rc)
		goto out_free;
	*out = idx;
	idx = NULL;
out_free:
	if (j.srcfd >= 0)
		close(j.srcfd);
	sfs_spill_free(j.spill);
	sfs_indexer_walk_clear(&w);
	sfs_index_free(idx);
	return rc;
}

/* ---- verify ---- */

struct verify_ctx {
	const struct sfs_index *idx;
	char **msgs; /* one per shard, NULL when it is fine */
};

static int verify_shard(struct job *j, const struct sfs_index *idx,
			const struct sfs_shard *sh, struct sfs_digest *d,
			struct sfs_error *e)
{
	struct sfs_scan_in in = { .path = sh->path,
				  .declared = sh->nsamples,
				  .dirfd = j->srcfd };
	struct sfs_scan scan;
	struct item it = { .path = sh->path,
			   .size = sh->size,
			   .members = sh->members,
			   .nmembers = sh->nmembers };
	uint64_t *b = NULL;
	struct stat st;
	int fd, rc;

	fd = sfs_index_open_shard(j->srcfd, sh->path, O_RDONLY);
	if (fd < 0)
		return sfs_errorf(e, -EIO, "%s: cannot open: %s", sh->path,
				  strerror(-fd));
	if (fstat(fd, &st) < 0 || (uint64_t)st.st_size != sh->size ||
	    sfs_mtime_ns(&st) != sh->mtime_ns) {
		rc = sfs_errorf(
			e, -ESTALE,
			"%s: size or mtime differ from the index (size %llu, the index says %llu)",
			sh->path, (unsigned long long)st.st_size,
			(unsigned long long)sh->size);
		goto out_close;
	}
	if (sfs_shard_has_bounds(sh)) {
		b = malloc((sh->nsamples + 1) * sizeof(*b));
		rc = b ? sfs_index_read_bounds(idx, sh, 0, sh->nsamples + 1, b,
					       e) :
			 sfs_errorf(e, -ENOMEM, "out of memory");
		if (rc)
			goto out_close;
	}
	in.fd = fd;
	in.size = sh->size;
	rc = sfs_format_scan(sh->format, &in, &scan, e);
	if (!rc &&
	    (scan.nsamples != sh->nsamples ||
	     scan.sliceable != sfs_shard_has_bounds(sh) ||
	     (scan.sliceable &&
	      memcmp(scan.bounds, b, (sh->nsamples + 1) * sizeof(uint64_t)))))
		rc = sfs_errorf(
			e, -EINVAL,
			"%s: its samples differ from the index (%llu samples now, the index says %llu)",
			sh->path, (unsigned long long)scan.nsamples,
			(unsigned long long)sh->nsamples);
	free(scan.bounds);
	if (!rc && sh->format->verify && b)
		rc = sh->format->verify(fd, sh->path, sh, b, e);
	if (!rc && sh->has_digest) {
		rc = hash_item(j, &it, fd, d, e);
		if (!rc && memcmp(it.digest, sh->digest, SFS_DIGEST_LEN)) {
			char want[SFS_DIGEST_HEX], got[SFS_DIGEST_HEX];

			sfs_digest_hex(sh->digest, want);
			sfs_digest_hex(it.digest, got);
			rc = sfs_errorf(e, -EINVAL,
					"%s: SHA-256 %s, the index says %s",
					sh->path, got, want);
		}
	}
	atomic_fetch_add(&j->pool.samples, sh->nsamples);
out_close:
	atomic_fetch_add(&j->pool.bytes, sh->size);
	free(b);
	close(fd);
	return rc;
}

static void verify_one(struct job *j, size_t i, struct sfs_digest *d)
{
	struct verify_ctx *v = j->ctx;
	struct sfs_error e = { 0 };

	if (verify_shard(j, v->idx, &v->idx->shards[i], d, &e))
		v->msgs[i] = strdup(e.msg);
}

int sfs_indexer_verify(const struct sfs_indexer_opts *o,
		       const struct sfs_index *idx,
		       struct sfs_indexer_report *rep, struct sfs_error *err)
{
	struct verify_ctx v = { .idx = idx };
	struct job j = { .o = o, .work = verify_one, .ctx = &v };
	uint64_t bytes = 0;
	size_t i;
	int rc = 0;

	memset(rep, 0, sizeof(*rep));
	v.msgs = calloc(idx->nshards + 1, sizeof(*v.msgs));
	if (!v.msgs)
		return sfs_errorf(err, -ENOMEM, "out of memory");
	j.srcfd = open(idx->source, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (j.srcfd < 0) {
		rc = sfs_errorf(err, -EIO, "%s: cannot open the source: %s",
				idx->source, strerror(errno));
		goto out_free;
	}
	for (i = 0; i < idx->nshards; i++)
		bytes += idx->shards[i].size;
	run(&j, idx->nshards, bytes);
	for (i = 0; !rc && i < idx->nshards; i++) {
		if (v.msgs[i] && add_problem(rep, v.msgs[i]))
			rc = sfs_errorf(err, -ENOMEM, "out of memory");
	}
	rep->scanned = idx->nshards;
	close(j.srcfd);
out_free:
	for (i = 0; i < idx->nshards; i++)
		free(v.msgs[i]);
	free(v.msgs);
	return rc;
}

void sfs_indexer_report_clear(struct sfs_indexer_report *rep)
{
	size_t i;

	if (!rep)
		return;
	for (i = 0; i < rep->nproblems; i++)
		free(rep->problems[i]);
	free(rep->problems);
	memset(rep, 0, sizeof(*rep));
}
