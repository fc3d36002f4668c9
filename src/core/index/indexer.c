#include <dirent.h>
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
#include "shardfs/spill.h"

#define ERRORS_NAMED 5

/* One shard to index: a file, or a group of files for `files`. */
struct item {
	char *path;
	uint64_t size; /* from the walk */
	int64_t mtime_ns;
	const struct sfs_format_ops *ops;
	struct sfs_member *members;
	size_t nmembers;
	const struct sfs_shard *prev; /* reusable entry, or NULL */

	/* results, written by the one worker that takes the item */
	struct sfs_scan scan;
	unsigned char digest[SFS_DIGEST_LEN];
	bool hashed;
	unsigned char *sdig; /* SFS_DIGEST_LEN per sample, if hashed */
	uint64_t nsdig;
	int rc;
	char *msg;
	bool fatal; /* not the shard's fault (spilling): fails the build */
};

struct walk {
	struct item *items;
	size_t n, cap;
	size_t ignored;
};

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
};

static void item_clear(struct item *it)
{
	size_t i;

	free(it->path);
	for (i = 0; i < it->nmembers; i++)
		free(it->members[i].path);
	free(it->members);
	free(it->scan.bounds);
	free(it->sdig);
	free(it->msg);
}

static void walk_clear(struct walk *w)
{
	size_t i;

	for (i = 0; i < w->n; i++)
		item_clear(&w->items[i]);
	free(w->items);
}

/* ---- the walk ---- */

static int walk_add(struct walk *w, const char *path, const struct stat *st,
		    const struct sfs_format_ops *ops)
{
	struct item *it;

	if (w->n == w->cap) {
		size_t ncap = w->cap ? 2 * w->cap : 256;
		struct item *ni = realloc(w->items, ncap * sizeof(*ni));

		if (!ni)
			return -ENOMEM;
		w->items = ni;
		w->cap = ncap;
	}
	it = &w->items[w->n];
	memset(it, 0, sizeof(*it));
	it->path = strdup(path);
	if (!it->path)
		return -ENOMEM;
	it->size = (uint64_t)st->st_size;
	it->mtime_ns = sfs_mtime_ns(st);
	it->ops = ops;
	w->n++;
	return 0;
}

/* A directory that is one dataset (format.h, dataset) is one item:
 * returns 1 then, 0 for any other directory, or a negative errno. */
static int walk_dataset(struct walk *w, int srcfd, const char *rel,
			const struct sfs_indexer_opts *o, struct sfs_error *err)
{
	const struct sfs_format_ops *ops = NULL;
	struct stat st;
	char *shard;
	int rc = sfs_format_dataset(o->format, srcfd, rel, &ops, &shard, err);

	if (rc <= 0)
		return rc;
	if (fstatat(srcfd, shard, &st, AT_SYMLINK_NOFOLLOW) < 0)
		rc = sfs_errorf(err, -errno, "%s/%s: %s", o->source, shard,
				strerror(errno));
	else if (walk_add(w, shard, &st, ops))
		rc = sfs_errorf(err, -ENOMEM, "out of memory");
	free(shard);
	return rc ? rc : 1;
}

static int walk_dir(struct walk *w, int srcfd, const char *rel,
		    const struct sfs_indexer_opts *o, struct sfs_error *err)
{
	char path[PATH_MAX];
	struct dirent *de;
	int fd, rc = walk_dataset(w, srcfd, rel, o, err);
	DIR *d;

	if (rc)
		return rc < 0 ? rc : 0;
	fd = *rel ? openat(srcfd, rel,
			   O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) :
		    dup(srcfd);
	if (fd < 0 || !(d = fdopendir(fd))) {
		rc = -errno;
		if (fd >= 0)
			close(fd);
		return sfs_errorf(err, rc,
				  "%s/%s: cannot read the directory: %s",
				  o->source, rel, strerror(-rc));
	}
	while ((de = readdir(d))) {
		const struct sfs_format_ops *ops;
		struct stat st;

		if (de->d_name[0] == '.')
			continue;
		if ((size_t)snprintf(path, sizeof(path), "%s%s%s", rel,
				     *rel ? "/" : "",
				     de->d_name) >= sizeof(path)) {
			rc = sfs_errorf(err, -ENAMETOOLONG,
					"%s/%s/%s: path too long", o->source,
					rel, de->d_name);
			break;
		}
		if (fstatat(srcfd, path, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			rc = sfs_errorf(err, -errno, "%s/%s: %s", o->source,
					path, strerror(errno));
			break;
		}
		if (S_ISDIR(st.st_mode)) {
			rc = walk_dir(w, srcfd, path, o, err);
			if (rc)
				break;
			continue;
		}
		ops = o->format ? o->format : sfs_format_detect(de->d_name);
		if (ops && ops->dataset)
			ops = NULL; /* its shards are directories */
		if (!S_ISREG(st.st_mode) || !ops) {
			w->ignored++;
			continue;
		}
		rc = walk_add(w, path, &st, ops);
		if (rc) {
			sfs_errorf(err, rc, "out of memory");
			break;
		}
	}
	closedir(d);
	return rc;
}

static int item_cmp(const void *a, const void *b)
{
	return strcmp(((const struct item *)a)->path,
		      ((const struct item *)b)->path);
}

/* Fold consecutive items of a tree format (`files`) with equal keys into
 * the first one. */
static int group_files(struct walk *w)
{
	size_t i, out = 0;

	for (i = 0; i < w->n; i++) {
		struct item *head = out ? &w->items[out - 1] : NULL;
		struct item *it = &w->items[i];
		size_t k = sfs_format_key_len(it->path);

		if (head && it->ops->tree && head->ops == it->ops &&
		    sfs_format_key_len(head->path) == k &&
		    !strncmp(head->path, it->path, k)) {
			struct sfs_member *nm =
				realloc(head->members,
					(head->nmembers + 1) * sizeof(*nm));

			if (!nm)
				return -ENOMEM;
			head->members = nm;
			nm[head->nmembers++] = (struct sfs_member){
				.path = it->path,
				.size = it->size,
				.mtime_ns = it->mtime_ns,
			};
			continue;
		}
		w->items[out++] = *it;
	}
	w->n = out;
	return 0;
}

/*
 * Keep the items of one part: positions part, part + nparts, ... of the
 * sorted (and grouped) list, so that every part holds shards from all over
 * the source and the parts' sizes are alike.
 */
static void keep_part(struct walk *w, uint32_t part, uint32_t nparts)
{
	size_t i, out = 0;

	for (i = 0; i < w->n; i++) {
		if (i % nparts == part)
			w->items[out++] = w->items[i];
		else
			item_clear(&w->items[i]);
	}
	w->n = out;
}

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
	sfs_pool_run(&j->pool);
}

static void item_fail(struct item *it, int rc, const struct sfs_error *e)
{
	it->rc = rc;
	it->msg = strdup(e->msg[0] ? e->msg : strerror(-rc));
}

/* Hash the item's file (open as fd) and its members into it->digest. */
static int hash_item(struct job *j, struct item *it, int fd,
		     struct sfs_digest *d, struct sfs_error *e)
{
	size_t m;
	int rc;

	if (!d)
		return sfs_errorf(e, -ENOMEM, "out of memory");
	rc = sfs_digest_fd(d, fd, it->size, it->path, e);
	for (m = 0; !rc && m < it->nmembers; m++) {
		int mfd = openat(j->srcfd, it->members[m].path,
				 O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

		if (mfd < 0)
			return sfs_errorf(e, -EIO, "%s: %s",
					  it->members[m].path, strerror(errno));
		rc = sfs_digest_fd(d, mfd, it->members[m].size,
				   it->members[m].path, e);
		close(mfd);
	}
	if (!rc)
		rc = sfs_digest_final(d, it->digest);
	return rc;
}

static int collect_digest(void *arg, uint64_t sample,
			  const unsigned char d[SFS_DIGEST_LEN])
{
	struct item *it = arg;

	if (sample != it->nsdig)
		return -ERANGE;
	/* grow by doubling: capacity is the next power of two */
	if (!(it->nsdig & (it->nsdig - 1))) {
		unsigned char *n =
			realloc(it->sdig, (it->nsdig ? 2 * it->nsdig : 1) *
						  SFS_DIGEST_LEN);

		if (!n)
			return -ENOMEM;
		it->sdig = n;
	}
	memcpy(it->sdig + sample * SFS_DIGEST_LEN, d, SFS_DIGEST_LEN);
	it->nsdig++;
	return 0;
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

	if (it->ops->whole_file || it->nmembers) {
		it->sdig = malloc(n * SFS_DIGEST_LEN + 1);
		if (!it->sdig)
			return sfs_errorf(e, -ENOMEM, "%s: out of memory",
					  it->path);
		for (k = 0; k < n; k++)
			memcpy(it->sdig + k * SFS_DIGEST_LEN, it->digest,
			       SFS_DIGEST_LEN);
		it->nsdig = n;
		return 0;
	}
	if (!it->scan.digested)
		rc = it->ops->samples(fd, it->path, collect_digest, it, e);
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
	uint64_t n = p ? p->nsamples : it->scan.nsamples, nb = n + 1;
	int rc = 0;

	if (p ? !sfs_shard_has_bounds(p) : !it->scan.sliceable)
		nb = 0;
	/* a reused entry's tables are read into the item's own buffers,
	 * not through a mapping: a refresh keeps no old table resident */
	if (p && j->o->hash) {
		it->sdig = malloc(n * SFS_DIGEST_LEN + 1);
		rc = it->sdig ? sfs_index_read_digests(j->prev, p->first_sample,
						       n, it->sdig, e) :
				sfs_errorf(e, -ENOMEM, "out of memory");
	}
	if (p && nb && !rc) {
		it->scan.bounds = malloc(nb * sizeof(uint64_t));
		rc = it->scan.bounds ?
			     sfs_index_read_bounds(j->prev, p, 0, nb,
						   it->scan.bounds, e) :
			     sfs_errorf(e, -ENOMEM, "out of memory");
	}
	if (!rc)
		rc = sfs_spill_put(j->spill, i, it->scan.bounds, nb, it->sdig,
				   j->o->hash ? n : 0, e);
	free(it->scan.bounds);
	it->scan.bounds = NULL;
	free(it->sdig);
	it->sdig = NULL;
	return rc;
}

static void build_one(struct job *j, size_t i, struct sfs_digest *d)
{
	struct item *it = &((struct item *)j->ctx)[i];
	struct sfs_scan_in in = { .path = it->path,
				  .declared = j->o->declared,
				  .dirfd = j->srcfd };
	struct sfs_error e = { 0 };
	struct stat st;
	int fd, rc;

	if (it->prev) {
		atomic_fetch_add(&j->pool.bytes, it->size);
		atomic_fetch_add(&j->pool.samples, it->prev->nsamples);
		if (j->spill && (rc = spill_item(j, i, it, &e)))
			goto out_fatal;
		return;
	}
	fd = openat(j->srcfd, it->path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		rc = sfs_errorf(&e, -EIO, "%s: cannot open: %s", it->path,
				strerror(errno));
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
	}
	rc = sfs_format_scan(it->ops, &in, &it->scan, &e);
	if (!rc && j->o->hash) {
		rc = hash_item(j, it, fd, d, &e);
		it->hashed = !rc;
	}
	if (!rc && j->o->hash)
		rc = sample_digests(it, fd, &e);
	close(fd);
	fd = -1;
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
	char **np = realloc(rep->problems, (rep->nproblems + 1) * sizeof(*np));

	if (!np)
		return -ENOMEM;
	rep->problems = np;
	np[rep->nproblems] = strdup(msg);
	if (!np[rep->nproblems])
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
	rc = walk_dir(&w, j.srcfd, "", o, err);
	if (rc)
		goto out_free;
	qsort(w.items, w.n, sizeof(*w.items), item_cmp);
	if (group_files(&w)) {
		rc = sfs_errorf(err, -ENOMEM, "out of memory");
		goto out_free;
	}
	if (o->nparts) {
		keep_part(&w, o->part, o->nparts);
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
	if (rc)
		goto out_free;
	*out = idx;
	idx = NULL;
out_free:
	if (j.srcfd >= 0)
		close(j.srcfd);
	sfs_spill_free(j.spill);
	walk_clear(&w);
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
