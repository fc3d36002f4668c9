/*
 * The plan-aware prefetcher: the daemon knows the order in which every
 * reader reads its files, so when a reader reaches a file (it opens it, or
 * looks up or reads the link of a symlinked shard) the files that follow
 * it in its plan are read ahead from the source by a few threads of our
 * own.  They read() the source into a scratch buffer and throw the bytes
 * away: that is what fills the source's page cache on a FUSE or network
 * source, where posix_fadvise does not reach the server.  On a local file
 * system, which reads ahead well on its own, they only posix_fadvise the
 * first chunk of the next file.  On a followed source a reader's next
 * files are its next complete windows (follow_ahead, follow_read.c),
 * queued by prefetch_range.  The reader then
 * finds the pages there, whether it reads the source through the view or
 * through a symlink.
 *
 * Bounds: prefetch_files files and prefetch_mb MiB ahead of each trigger,
 * prefetch_threads requests to the source at once, a queue of QUEUE_MAX
 * chunks (more are dropped and counted).  Nothing is served from what the
 * prefetcher reads: it only warms caches, so an error, a changed shard or
 * a stalled source costs speed, never bytes; each is logged and the chunk
 * dropped.  Chunks of a view that is no longer current, or on a followed
 * source of a shard already consumed (which its producer may delete), are
 * dropped when their turn comes.  A chunk whose every page is in the
 * source's page cache already (cachestat) is not read again: a warm epoch
 * would otherwise copy from the cache, for nothing, the shards that the
 * readers of other daemons read.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "fs.h"
#include "shardfs/util.h"

#define CHUNK (4ULL << 20) /* a job: at most this much of one file */
#define BUF (1 << 20) /* one read() */
#define QUEUE_MAX 1024
#define RECENT 2048 /* the last chunks queued, not queued again */
#define RECENT_SLOTS 8192 /* a table of them, by hash */
#define PROBES 64 /* slots of that table a chunk may take */
#define STALL_SECONDS 5 /* a read this long is logged */

/* cachestat(2), since Linux 6.5: the same number on every architecture,
 * which older headers (Debian 12's) lack.  Its arguments are laid out as
 * the kernel's uapi linux/mman.h has them, under names of our own, so
 * that they never clash with headers that have them. */
#ifndef __NR_cachestat
#define __NR_cachestat 451
#endif
struct sfs_cachestat_range {
	uint64_t off, len;
};
struct sfs_cachestat {
	uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted,
		nr_recently_evicted;
};

struct job {
	const char *path; /* the index's, relative to the source */
	uint64_t size; /* as indexed */
	int64_t mtime;
	uint64_t off, len;
	bool last; /* the file's last chunk */
	/* the view it was asked for; on a followed source, its shard's
	 * place in the stream */
	uint64_t gen;
};

/* A worker thread and the chunk it reads, for the stall watch. */
struct slot {
	struct prefetch *p;
	bool busy;
	bool logged;
	struct job job;
	struct timespec started;
};

/* A chunk recently queued: (path, off) queued at serial, its bytes
 * [from, end) (less than the chunk when a budget cut it). */
struct recent {
	const char *path;
	uint64_t off;
	uint64_t from, end;
	uint64_t serial;
};

struct prefetch {
	struct fs *fs; /* borrowed */
	uint64_t max_bytes; /* ahead of a trigger */
	uint32_t max_files;
	bool copy; /* read() the source: fadvise would not reach it */
	uint64_t page; /* the page size */
	unsigned nthreads;
	pthread_t *tids;
	pthread_t watch;
	bool watching;

	pthread_mutex_t lock; /* guards what follows */
	pthread_cond_t wake; /* a job, or stop */
	pthread_cond_t idle; /* a thread left */
	bool stop;
	unsigned running; /* worker threads not yet exited */
	struct job queue[QUEUE_MAX]; /* a ring */
	size_t head, n;
	struct recent recent[RECENT_SLOTS]; /* open addressing */
	uint64_t serial; /* chunks queued so far */
	struct slot *slots; /* one per worker */
	const char *failed; /* the path of the last error logged */
	atomic_bool stopping; /* stop, read without the lock */
	atomic_bool no_cachestat; /* the kernel has none, or forbids it */

	/* bytes: read from the source; cached: found in its page cache and
	 * not read */
	atomic_uint_fast64_t files, bytes, cached, errors, dropped;
};

static double since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t0->tv_sec) +
	       (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

/*
 * The slot of the table that holds chunk (path, off) among the last RECENT
 * queued, or NULL.  With insert, when there is none, the slot to put it
 * in instead: a free or expired one, else the oldest probed.
 */
static struct recent *recent_locked(struct prefetch *p, const char *path,
				    uint64_t off, bool insert)
{
	uint64_t h = (uint64_t)(uintptr_t)path * 0x9e3779b97f4a7c15ULL ^
		     (off / CHUNK + 1) * 0xc2b2ae3d27d4eb4fULL;
	struct recent *free_slot = NULL, *oldest = NULL;
	size_t i;

	for (i = 0; i < PROBES; i++) {
		struct recent *r = &p->recent[((h >> 17) + i) % RECENT_SLOTS];
		bool live = r->path && p->serial - r->serial < RECENT;

		if (live && r->path == path && r->off == off)
			return r;
		if (!live && !free_slot)
			free_slot = r;
		if (!oldest || r->serial < oldest->serial)
			oldest = r;
	}
	if (!insert)
		return NULL;
	return free_slot ? free_slot : oldest;
}

/* A chunk dropped before it was read: it may be queued again. */
static void unqueued_locked(struct prefetch *p, const struct job *j)
{
	struct recent *r =
		recent_locked(p, j->path, j->off - j->off % CHUNK, false);

	if (r)
		r->path = NULL;
}

/* Queue j, but what of its chunk is queued already: a chunk cut short by
 * one trigger's budget is queued on by the next. */
static void push_locked(struct prefetch *p, const struct job *j)
{
	uint64_t start = j->off - j->off % CHUNK, end = j->off + j->len;
	struct recent *r = recent_locked(p, j->path, start, false);
	struct job *q;

	if (r && r->from <= j->off && end <= r->end)
		return;
	if (p->n == QUEUE_MAX) {
		atomic_fetch_add(&p->dropped, 1);
		return;
	}
	q = &p->queue[(p->head + p->n++) % QUEUE_MAX];
	*q = *j;
	if (r && r->from <= j->off && j->off <= r->end) {
		/* the rest of what was queued */
		q->off = r->end;
		q->len = end - r->end;
	} else {
		if (!r)
			r = recent_locked(p, j->path, start, true);
		r->path = j->path;
		r->off = start;
		r->from = j->off;
	}
	r->end = end;
	r->serial = p->serial++;
	pthread_cond_signal(&p->wake);
}

/* The view that is served now (its generation). */
static uint32_t current_gen(struct fs *fs)
{
	uint32_t gen;

	pthread_mutex_lock(&fs->lock);
	gen = fs->current ? fs->current->gen : 0;
	pthread_mutex_unlock(&fs->lock);
	return gen;
}

/* j's turn has come too late: its view is no longer served, or its shard
 * has been consumed. */
static bool stale(struct fs *fs, const struct job *j)
{
	if (fs->follow)
		return j->gen < follow_consumed_count(fs->follow);
	return j->gen != current_gen(fs);
}

/*
 * Every page of j's chunk is in fd's page cache: 1; some are not, or
 * cachestat cannot tell: 0; no cachestat here: -ENOSYS, logged once.
 */
static int chunk_cached(struct prefetch *p, int fd, const struct job *j)
{
	struct sfs_cachestat_range r = { .off = j->off, .len = j->len };
	struct sfs_cachestat cs = { 0 };
	uint64_t pages = (j->off + j->len - 1) / p->page - j->off / p->page + 1;

	if (!syscall(__NR_cachestat, fd, &r, &cs, 0))
		return cs.nr_cache >= pages;
	/* an old kernel, or a seccomp filter that denies what it does not
	 * know (EPERM) */
	if (errno != ENOSYS && errno != EPERM && errno != EINVAL)
		return 0;
	if (!atomic_exchange(&p->no_cachestat, true))
		fs_log(p->fs, LOG_INFO,
		       "prefetch: cachestat: %s; chunks already in the source's page cache are read again (Linux 6.5 or later, with the system call allowed, skips them)",
		       strerror(errno));
	return -ENOSYS;
}

/*
 * Read one chunk into buf and drop it, unless the source has it cached.  Returns 0 or -errno; an error is
 * logged, once for the chunks of a file in a row.  Gives up early (0) when
 * the prefetcher stops.
 */
static int read_chunk(struct prefetch *p, const struct job *j, char *buf)
{
	struct sfs_error err = { 0 };
	struct fdcache_ent *e;
	uint64_t at = j->off, end = j->off + j->len;
	bool again;
	int rc;

	e = fdcache_get(&p->fs->fds, j->path, j->size, j->mtime, FDCACHE_AHEAD,
			&rc, &err);
	if (e && !p->copy) {
		/* a local file system reads ahead on its own: no copy */
		rc = -posix_fadvise(e->fd, (off_t)at, (off_t)j->len,
				    POSIX_FADV_WILLNEED);
		if (rc)
			sfs_errorf(&err, rc, "%s: posix_fadvise: %s", j->path,
				   strerror(-rc));
		else
			atomic_fetch_add(&p->bytes, j->len);
		at = rc ? at : end;
	}
	/* a chunk partly cached is read whole: the simple rule */
	if (e && p->copy && !atomic_load(&p->no_cachestat) &&
	    chunk_cached(p, e->fd, j) > 0) {
		atomic_fetch_add(&p->cached, j->len);
		at = end;
	}
	while (e && at < end && !atomic_load(&p->stopping)) {
		size_t want = end - at < BUF ? (size_t)(end - at) : BUF;
		ssize_t got = pread(e->fd, buf, want, (off_t)at);

		if (got <= 0) {
			rc = sfs_errorf(&err, got < 0 ? -errno : -EIO,
					"%s: %s at byte %llu", j->path,
					got < 0 ? strerror(errno) :
						  "shorter than indexed",
					(unsigned long long)at);
			break;
		}
		at += (uint64_t)got;
		atomic_fetch_add(&p->bytes, (uint64_t)got);
	}
	if (e)
		fdcache_put(&p->fs->fds, e);
	if (!rc && at == end && j->last)
		atomic_fetch_add(&p->files, 1);
	if (!rc || atomic_load(&p->stopping))
		return rc;
	/* its shard consumed while it was read, and deleted: no error */
	if (stale(p->fs, j)) {
		atomic_fetch_add(&p->dropped, 1);
		return 0;
	}
	atomic_fetch_add(&p->errors, 1);
	pthread_mutex_lock(&p->lock);
	again = p->failed == j->path;
	p->failed = j->path;
	pthread_mutex_unlock(&p->lock);
	if (!again)
		fs_log(p->fs, LOG_WARNING,
		       "prefetch: %s; dropped it (readers read the source themselves and get its error, if any)",
		       err.msg);
	return rc;
}

static void *worker(void *arg)
{
	struct slot *me = arg;
	struct prefetch *p = me->p;
	char *buf = malloc(BUF);
	struct job j;

	pthread_mutex_lock(&p->lock);
	while (buf && !p->stop) {
		if (!p->n) {
			pthread_cond_wait(&p->wake, &p->lock);
			continue;
		}
		j = p->queue[p->head];
		p->head = (p->head + 1) % QUEUE_MAX;
		p->n--;
		pthread_mutex_unlock(&p->lock);
		if (stale(p->fs, &j)) {
			pthread_mutex_lock(&p->lock);
			unqueued_locked(p, &j);
			atomic_fetch_add(&p->dropped, 1);
			continue;
		}
		pthread_mutex_lock(&p->lock);
		me->job = j;
		me->logged = false;
		me->busy = true;
		clock_gettime(CLOCK_MONOTONIC, &me->started);
		pthread_mutex_unlock(&p->lock);
		read_chunk(p, &j, buf);
		pthread_mutex_lock(&p->lock);
		me->busy = false;
	}
	p->running--;
	pthread_cond_broadcast(&p->idle);
	pthread_mutex_unlock(&p->lock);
	free(buf);
	return NULL;
}

/* Log every read that has waited STALL_SECONDS for the source, once. */
static void *watch(void *arg)
{
	struct prefetch *p = arg;
	struct timespec t;
	unsigned i;

	pthread_mutex_lock(&p->lock);
	while (!p->stop) {
		for (i = 0; i < p->nthreads; i++) {
			struct slot *s = &p->slots[i];

			if (!s->busy || s->logged ||
			    since(&s->started) < STALL_SECONDS)
				continue;
			s->logged = true;
			fs_log(p->fs, LOG_WARNING,
			       "prefetch: reading %s (bytes %llu..%llu) has waited %d s for the source: it is slow or stalled; readers do not wait for the prefetch, only for the source",
			       s->job.path, (unsigned long long)s->job.off,
			       (unsigned long long)(s->job.off + s->job.len),
			       STALL_SECONDS);
		}
		clock_gettime(CLOCK_REALTIME, &t);
		t.tv_sec++;
		pthread_cond_timedwait(&p->idle, &p->lock, &t);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

/* The reader whose files hold file f of plan pl. */
static size_t reader_of(const struct sfs_plan *pl, size_t f)
{
	/* the last reader that starts at or before f: readers without files
	 * start where the next one does */
	return SFS_PARTITION_POINT(i, 1, pl->nreaders,
				   pl->readers[i].file_at <= f) -
	       1;
}

/* Queue bytes [lo, hi) of a source file, in chunks, within *budget. */
static void add_range_locked(struct prefetch *p, struct job *j, uint64_t lo,
			     uint64_t hi, uint64_t *budget)
{
	while (lo < hi && *budget) {
		uint64_t len = CHUNK - lo % CHUNK;

		if (len > hi - lo)
			len = hi - lo;
		if (len > *budget)
			len = *budget;
		j->off = lo;
		j->len = len;
		j->last = lo + len == hi;
		push_locked(p, j);
		*budget -= len;
		lo += len;
	}
}

/*
 * Queue the source bytes of file f of plan pl: a whole shard, the span of
 * a slice's samples in its shard, and the other files of a `files`
 * sample.
 */
static void add_file_locked(struct prefetch *p, const struct sfs_view *v,
			    const struct sfs_plan *pl, size_t f, uint32_t gen,
			    uint64_t *budget)
{
	const struct sfs_plan_file *pf = &pl->files[f];
	const struct sfs_shard *sh = &v->idx->shards[pf->shard];
	struct job j = { .path = sh->path,
			 .size = sh->size,
			 .mtime = sh->mtime_ns,
			 .gen = gen };
	uint64_t lo = 0, hi = sh->size;
	size_t i;

	if (!pf->whole && sfs_shard_has_bounds(sh)) {
		uint64_t first, end;
		struct sfs_error err = { 0 };

		sfs_slice_span(sfs_plan_file_runs(pl, pf), pf->nruns, &first,
			       &end);
		/* boundaries do not decrease: the span is b[first]..b[end];
		 * a table that cannot be read leaves the file to its reads */
		if (!pf->nruns ||
		    sfs_index_read_bounds(v->idx, sh, first, 1, &lo, &err) ||
		    sfs_index_read_bounds(v->idx, sh, end, 1, &hi, &err))
			return;
	}
	add_range_locked(p, &j, lo, hi, budget);
	for (i = 0; i < sh->nmembers; i++) {
		const struct sfs_member *m = &sh->members[i];

		j.path = m->path;
		j.size = m->size;
		j.mtime = m->mtime_ns;
		add_range_locked(p, &j, 0, m->size, budget);
	}
}

void prefetch_after(struct prefetch *p, const struct view_ref *vr,
		    uint32_t node)
{
	const struct sfs_view *v = vr->v;
	const struct sfs_view_node *n = sfs_view_node(v, node);
	uint64_t budget;
	uint32_t plan, files, max_files;
	size_t f, end, t;

	/* a reader's dataset is read as its reader's library chooses, not
	 * in plan order: nothing to read ahead; a followed source's files
	 * read ahead their windows (follow_ahead) */
	if (!p || node == 0 || n->kind == SFS_NODE_DIR || n->dataset ||
	    v->follow)
		return;
	plan = n->plan;
	f = n->file;
	t = reader_of(v->plans[plan], f);
	end = v->plans[plan]->readers[t].file_at +
	      v->plans[plan]->readers[t].nfiles;
	prefetch_budget(p, &budget, &max_files);
	pthread_mutex_lock(&p->lock);
	for (files = 0; files < max_files && budget; files++) {
		/* the reader's next file: in this epoch, or the next one's
		 * first when its directory shows several epochs */
		while (++f >= end) {
			const struct sfs_plan_reader *r;

			if (++plan >= v->nplans)
				goto out;
			r = &v->plans[plan]->readers[t];
			f = r->file_at - 1;
			end = r->file_at + r->nfiles;
			if (!r->nfiles)
				goto out;
		}
		add_file_locked(p, v, v->plans[plan], f, vr->gen, &budget);
	}
out:
	pthread_mutex_unlock(&p->lock);
}

/* (fs.h) */
void prefetch_budget(const struct prefetch *p, uint64_t *bytes, uint32_t *files)
{
	/* a local disk serves the reader best alone: more read ahead than
	 * the next file's start slowed it (docs/benchmarks.md) */
	*bytes = p->copy ? p->max_bytes : CHUNK;
	*files = p->copy ? p->max_files : 1;
}

/* (fs.h) */
void prefetch_range(struct prefetch *p, const char *path, uint64_t size,
		    int64_t mtime, uint64_t shard, uint64_t lo, uint64_t hi,
		    uint64_t *budget)
{
	struct job j = {
		.path = path, .size = size, .mtime = mtime, .gen = shard
	};

	pthread_mutex_lock(&p->lock);
	add_range_locked(p, &j, lo, hi, budget);
	pthread_mutex_unlock(&p->lock);
}

void prefetch_counters(const struct prefetch *p, struct sfs_status_counters *c)
{
	c->prefetch_files = p ? atomic_load(&p->files) : 0;
	c->prefetch_bytes = p ? atomic_load(&p->bytes) : 0;
	c->prefetch_cached_bytes = p ? atomic_load(&p->cached) : 0;
	c->prefetch_errors = p ? atomic_load(&p->errors) : 0;
	c->prefetch_dropped = p ? atomic_load(&p->dropped) : 0;
}

bool prefetch_stop(struct prefetch *p)
{
	struct timespec t;
	bool all;
	unsigned i;

	if (!p)
		return true;
	pthread_mutex_lock(&p->lock);
	p->stop = true;
	atomic_store(&p->stopping, true);
	pthread_cond_broadcast(&p->wake);
	pthread_cond_broadcast(&p->idle);
	clock_gettime(CLOCK_REALTIME, &t);
	t.tv_nsec += FS_STOP_WAIT_MS % 1000 * 1000000L;
	t.tv_sec += FS_STOP_WAIT_MS / 1000 + t.tv_nsec / 1000000000L;
	t.tv_nsec %= 1000000000L;
	while (p->running &&
	       pthread_cond_timedwait(&p->idle, &p->lock, &t) != ETIMEDOUT)
		;
	all = !p->running;
	pthread_mutex_unlock(&p->lock);
	if (p->watching)
		pthread_join(p->watch, NULL);
	for (i = 0; i < p->nthreads; i++) {
		if (all)
			pthread_join(p->tids[i], NULL);
		else
			pthread_detach(p->tids[i]);
	}
	if (!all)
		return false; /* p stays: threads still reading use it */
	pthread_cond_destroy(&p->idle);
	pthread_cond_destroy(&p->wake);
	pthread_mutex_destroy(&p->lock);
	free(p->slots);
	free(p->tids);
	free(p);
	return true;
}

/*
 * The source must be read to be read ahead: FUSE, NFS, SMB, CephFS,
 * Lustre, 9p and GPFS pass no posix_fadvise to their servers.  Local file
 * systems take POSIX_FADV_WILLNEED, which reads ahead without a copy (a
 * copy costs a fast disk more than it gains: docs/benchmarks.md).
 */
static bool must_copy(int srcfd)
{
	static const unsigned long remote[] = {
		0x65735546, /* FUSE */ 0x6969, /* NFS */
		0xff534d42, /* CIFS */ 0xfe534d42, /* SMB2 */
		0x00c36400, /* CephFS */ 0x0bd00bd0, /* Lustre */
		0x01021997, /* 9p */ 0x47504653, /* GPFS */
	};
	struct statfs st;
	size_t i;

	if (fstatfs(srcfd, &st))
		return true;
	for (i = 0; i < sizeof(remote) / sizeof(remote[0]); i++)
		if ((unsigned long)st.f_type == remote[i])
			return true;
	return false;
}

int prefetch_start(struct fs *fs, struct prefetch **out)
{
	struct prefetch *p = calloc(1, sizeof(*p));
	unsigned i;

	if (!p)
		return -ENOMEM;
	p->fs = fs;
	p->max_files = fs->mount.prefetch_files;
	p->max_bytes = (uint64_t)fs->mount.prefetch_mb << 20;
	p->nthreads = fs->mount.prefetch_threads;
	p->copy = must_copy(fs->fds.srcfd); /* a view's or a followed one */
	p->page = (uint64_t)sysconf(_SC_PAGESIZE);
	p->tids = calloc(p->nthreads, sizeof(*p->tids));
	p->slots = calloc(p->nthreads, sizeof(*p->slots));
	if (!p->tids || !p->slots) {
		free(p->tids);
		free(p->slots);
		free(p);
		return -ENOMEM;
	}
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->wake, NULL);
	pthread_cond_init(&p->idle, NULL);
	for (i = 0; i < p->nthreads; i++) {
		p->slots[i].p = p;
		if (fs_thread_start(&p->tids[i], worker, &p->slots[i]))
			break;
		p->running++;
	}
	p->nthreads = p->running;
	p->watching = p->running && !fs_thread_start(&p->watch, watch, p);
	if (!p->watching) {
		prefetch_stop(p);
		return -EAGAIN;
	}
	*out = p;
	return 0;
}
