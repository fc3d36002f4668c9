#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fdcache.h"
#include "shardfs/index.h"

/* how long a reader out of descriptors waits for one to be put back */
#define FREED_WAIT_MS 2000

int fdcache_init(struct fdcache *c, int srcfd, unsigned cap)
{
	memset(c, 0, sizeof(*c));
	c->srcfd = srcfd;
	c->cap = cap ? cap : 1;
	c->ents = calloc(c->cap, sizeof(*c->ents));
	if (!c->ents)
		return -ENOMEM;
	pthread_cond_init(&c->freed, NULL);
	pthread_cond_init(&c->opened, NULL);
	return -pthread_mutex_init(&c->lock, NULL);
}

static void ent_close(struct fdcache_ent *e)
{
	close(e->fd);
	free(e->path);
	free(e);
}

void fdcache_destroy(struct fdcache *c)
{
	unsigned i;

	for (i = 0; i < c->n; i++)
		ent_close(c->ents[i]);
	free(c->ents);
	pthread_cond_destroy(&c->freed);
	pthread_cond_destroy(&c->opened);
	pthread_mutex_destroy(&c->lock);
}

/* st, fstat of the open file path, is still the file as indexed; linked:
 * it had a name when it was opened (see fdcache_ent.linked). */
static int check_stat(const struct stat *st, const char *path, bool linked,
		      uint64_t size, int64_t mtime, struct sfs_error *err)
{
	if (!S_ISREG(st->st_mode))
		return sfs_errorf(err, -EIO, "%s: not a regular file", path);
	/* the same fstat tells a shard deleted, or renamed over, since it
	 * was opened: its old bytes would still read, but the source no
	 * longer has them.  Only a change from a name to none counts: some
	 * file systems (FUSE ones) report no links at all. */
	if (linked && st->st_nlink == 0)
		return sfs_errorf(
			err, -EIO,
			"%s was deleted or replaced since it was opened; its files fail with EIO until it is back as indexed, or the index is rebuilt with shardfs-index",
			path);
	if ((uint64_t)st->st_size != size || sfs_mtime_ns(st) != mtime)
		return sfs_errorf(
			err, -EIO,
			"%s changed since it was indexed (size %llu, the index says %llu%s); its files fail with EIO until the index is rebuilt with shardfs-index",
			path, (unsigned long long)st->st_size,
			(unsigned long long)size,
			sfs_mtime_ns(st) != mtime ? ", and a new mtime" : "");
	return 0;
}

int fdcache_check(const struct fdcache_ent *e, uint64_t size, int64_t mtime,
		  struct sfs_error *err)
{
	struct stat st;

	if (fstat(e->fd, &st) < 0)
		return sfs_errorf(err, -EIO, "%s: %s", e->path,
				  strerror(errno));
	return check_stat(&st, e->path, e->linked, size, mtime, err);
}

/* Make room for one more entry: close the least recently used free one. */
static bool evict(struct fdcache *c)
{
	unsigned i, victim = c->n;

	for (i = 0; i < c->n; i++)
		if (!c->ents[i]->refs &&
		    (victim == c->n ||
		     c->ents[i]->used < c->ents[victim]->used))
			victim = i;
	if (victim == c->n)
		return false;
	ent_close(c->ents[victim]);
	c->ents[victim] = c->ents[--c->n];
	return true;
}

/* path (below srcfd) still names the file open as fd. */
static bool same_file(int srcfd, const char *path, int fd)
{
	struct stat a, b;

	return !fstatat(srcfd, path, &a, AT_SYMLINK_NOFOLLOW) &&
	       !fstat(fd, &b) && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* Take e out of the table: closed on its last put. */
static void uncache_locked(struct fdcache *c, struct fdcache_ent *e)
{
	unsigned i;

	for (i = 0; e->cached && i < c->n; i++)
		if (c->ents[i] == e) {
			c->ents[i] = c->ents[--c->n];
			e->cached = false;
		}
}

void fdcache_drop(struct fdcache *c, struct fdcache_ent *e)
{
	pthread_mutex_lock(&c->lock);
	uncache_locked(c, e);
	pthread_mutex_unlock(&c->lock);
}

/*
 * Wait (lock held) until some holder puts an entry back, then make room:
 * true when an entry could be closed or one was closed by its put.  Gives
 * up after FREED_WAIT_MS.
 */
static bool wait_freed(struct fdcache *c)
{
	struct timespec until;
	uint64_t gen = c->puts;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_nsec += FREED_WAIT_MS % 1000 * 1000000L;
	until.tv_sec += FREED_WAIT_MS / 1000 + until.tv_nsec / 1000000000L;
	until.tv_nsec %= 1000000000L;
	while (c->puts == gen)
		if (pthread_cond_timedwait(&c->freed, &c->lock, &until))
			return false;
	return true;
}

/* path's entry in the table, with a reference taken, or NULL; a reader
 * (not ahead) gets it only while path still names its file.  *forgets:
 * c->forgets when the table was searched. */
static struct fdcache_ent *lookup(struct fdcache *c, const char *path,
				  bool ahead, uint64_t *forgets)
{
	struct fdcache_ent *e = NULL;
	bool recheck = false;
	unsigned i;

	pthread_mutex_lock(&c->lock);
	*forgets = c->forgets;
	for (i = 0; i < c->n; i++) {
		if (!strcmp(c->ents[i]->path, path)) {
			e = c->ents[i];
			e->refs++;
			e->used = ++c->tick;
			/* a reader sees the source as it is when it gets
			 * the file: path must still name it */
			recheck = !ahead;
			e->ahead = e->ahead && ahead;
			break;
		}
	}
	pthread_mutex_unlock(&c->lock);
	if (e && recheck && !same_file(c->srcfd, path, e->fd)) {
		pthread_mutex_lock(&c->lock);
		uncache_locked(c, e);
		pthread_mutex_unlock(&c->lock);
		fdcache_put(c, e);
		e = NULL;
	}
	return e;
}

/* Let the gets that wait for the open of *slot (open_claim) go, and
 * *slot be none; with c->lock. */
static void release_slot_locked(struct fdcache *c, unsigned *slot)
{
	if (*slot >= FDCACHE_OPENING)
		return;
	c->opening[*slot] = NULL;
	*slot = FDCACHE_OPENING;
	pthread_cond_broadcast(&c->opened);
}

/* Open path below the source, giving back descriptors nobody holds (and
 * waiting for one, as flags say) when the daemon has none left; the gets
 * that wait for this open (its *slot) are let go before it waits for a
 * descriptor, since those that must not wait (the prefetcher's,
 * FDCACHE_NOWAIT) would wait with it.  Returns the descriptor, or a
 * negative errno with a message naming path. */
static int open_evicting(struct fdcache *c, const char *path, unsigned flags,
			 unsigned *slot, struct sfs_error *err)
{
	bool wait = !(flags & FDCACHE_AHEAD) && !(flags & FDCACHE_NOWAIT);
	bool evicted;
	int fd;

	for (;;) {
		fd = sfs_index_open_shard(c->srcfd, path, O_RDONLY);
		if (fd >= 0 || (fd != -EMFILE && fd != -ENFILE))
			break;
		/* out of descriptors: give back one that nobody holds; a
		 * reader (not the prefetcher) waits a while for one when
		 * every descriptor is held, since reads ahead hold theirs
		 * only for a chunk */
		pthread_mutex_lock(&c->lock);
		evicted = evict(c);
		if (!evicted && wait) {
			release_slot_locked(c, slot);
			evicted = wait_freed(c);
		}
		pthread_mutex_unlock(&c->lock);
		if (!evicted && (flags & FDCACHE_NOWAIT))
			return sfs_errorf(
				err, -EMFILE,
				"%s: cannot open: too many open files", path);
		if (!evicted) {
			struct rlimit rl = { 0 };

			getrlimit(RLIMIT_NOFILE, &rl);
			return sfs_errorf(
				err, -EIO,
				"%s: cannot open: too many open files (the daemon may hold %llu, and reads in progress and the prefetcher hold them all); raise the limit (ulimit -n, LimitNOFILE=) or read fewer files at once",
				path, (unsigned long long)rl.rlim_cur);
		}
	}
	if (fd < 0)
		return sfs_errorf(
			err, -EIO, "%s: cannot open: %s", path,
			fd == -ELOOP || fd == -EXDEV ?
				"a symlink on its path (shardfs reads only files inside the source)" :
				strerror(-fd));
	return fd;
}

/* path has an entry in the table; with c->lock. */
static bool cached_locked(const struct fdcache *c, const char *path)
{
	unsigned i;

	for (i = 0; i < c->n; i++)
		if (!strcmp(c->ents[i]->path, path))
			return true;
	return false;
}

/* A new entry for fd, open as path, checked against the index (size,
 * mtime_ns), with one reference, cached when there is room and path has
 * no entry yet; else NULL with *rc and fd closed.  forgets: c->forgets
 * before path was opened. */
static struct fdcache_ent *ent_add(struct fdcache *c, int fd, const char *path,
				   uint64_t size, int64_t mtime_ns, bool ahead,
				   uint64_t forgets, int *rc,
				   struct sfs_error *err)
{
	struct fdcache_ent *e = NULL;
	struct stat st;
	bool keep = true;

	if (fstat(fd, &st) < 0)
		*rc = sfs_errorf(err, -EIO, "%s: %s", path, strerror(errno));
	else
		*rc = check_stat(&st, path, false, size, mtime_ns, err);
	if (!*rc) {
		e = calloc(1, sizeof(*e));
		if (e)
			e->path = strdup(path);
		if (!e || !e->path) {
			free(e);
			e = NULL;
			*rc = sfs_errorf(err, -ENOMEM, "out of memory");
		}
	}
	if (*rc) {
		close(fd);
		return NULL;
	}
	e->fd = fd;
	e->linked = st.st_nlink != 0;
	e->refs = 1;
	e->ahead = ahead;
	pthread_mutex_lock(&c->lock);
	/* a forget since path was opened may have found no entry for it
	 * while it was deleted (a consumed shard): cached, its descriptor
	 * would keep the file's space until evicted.  Cached only while
	 * path still names it. */
	while (keep && c->forgets != forgets) {
		forgets = c->forgets;
		pthread_mutex_unlock(&c->lock);
		keep = same_file(c->srcfd, path, fd);
		pthread_mutex_lock(&c->lock);
	}
	e->used = ++c->tick;
	/* two gets that missed at once (a reader and the prefetcher) open
	 * path twice: one entry a path, so that fdcache_forget closes every
	 * descriptor of it; the other is closed at its last put */
	if (keep && !cached_locked(c, path) && (c->n < c->cap || evict(c))) {
		e->cached = true;
		c->ents[c->n++] = e;
	}
	pthread_mutex_unlock(&c->lock);
	return e;
}

/*
 * Before a get that missed opens path: when another get is opening it,
 * wait until that open ends, or waits for a descriptor, and return -1
 * (look it up again: it is cached now, unless that open failed, found no
 * room or waits); -1 too when path was cached since the miss.  Else the
 * slot of c->opening taken for path (release it with open_done), or
 * FDCACHE_OPENING when every slot is taken (open without one).  Several prefetch threads given chunks of
 * one shard, and the readers behind them, would otherwise each open it:
 * on s3fs, a request to the server each.
 */
static unsigned open_claim(struct fdcache *c, const char *path)
{
	unsigned i, slot;
	bool busy, waited = false;

	pthread_mutex_lock(&c->lock);
	for (;;) {
		busy = false;
		slot = FDCACHE_OPENING;
		for (i = 0; i < FDCACHE_OPENING; i++) {
			if (!c->opening[i] && slot == FDCACHE_OPENING)
				slot = i;
			else if (c->opening[i] && !strcmp(c->opening[i], path))
				busy = true;
		}
		if (!busy)
			break;
		waited = true;
		pthread_cond_wait(&c->opened, &c->lock);
	}
	if (waited || cached_locked(c, path))
		slot = (unsigned)-1;
	else if (slot < FDCACHE_OPENING)
		c->opening[slot] = path;
	pthread_mutex_unlock(&c->lock);
	return slot;
}

/* The open of a slot taken by open_claim ended: wake who waits for it. */
static void open_done(struct fdcache *c, unsigned slot)
{
	if (slot >= FDCACHE_OPENING)
		return;
	pthread_mutex_lock(&c->lock);
	release_slot_locked(c, &slot);
	pthread_mutex_unlock(&c->lock);
}

struct fdcache_ent *fdcache_get(struct fdcache *c, const char *path,
				uint64_t size, int64_t mtime_ns, unsigned flags,
				int *rc, struct sfs_error *err)
{
	bool ahead = flags & FDCACHE_AHEAD;
	uint64_t forgets;
	struct fdcache_ent *e;
	unsigned slot;
	int fd;

	e = lookup(c, path, ahead, &forgets);
	slot = e ? FDCACHE_OPENING : open_claim(c, path);
	if (slot == (unsigned)-1) {
		/* the entry of the open waited for; if that open failed or
		 * found no room, this get opens path on its own (as many
		 * as wait, at once: not one after another) */
		e = lookup(c, path, ahead, &forgets);
		slot = FDCACHE_OPENING;
	}
	if (e) {
		*rc = fdcache_check(e, size, mtime_ns, err);
		if (!*rc)
			return e;
		/* deleted or changed (a new file may even have the old one's
		 * inode number): the next get opens path again */
		fdcache_drop(c, e);
		fdcache_put(c, e);
		return NULL;
	}
	fd = open_evicting(c, path, flags, &slot, err);
	if (fd < 0)
		*rc = fd;
	else
		e = ent_add(c, fd, path, size, mtime_ns, ahead, forgets, rc,
			    err);
	open_done(c, slot);
	return e;
}

void fdcache_forget(struct fdcache *c, const char *path)
{
	struct fdcache_ent *e = NULL;
	unsigned i;

	pthread_mutex_lock(&c->lock);
	c->forgets++; /* a get under way when path went re-checks it */
	for (i = 0; i < c->n && !e; i++) {
		if (!strcmp(c->ents[i]->path, path)) {
			e = c->ents[i];
			e->refs++;
		}
	}
	pthread_mutex_unlock(&c->lock);
	if (e) {
		fdcache_drop(c, e);
		fdcache_put(c, e);
	}
}

bool fdcache_put(struct fdcache *c, struct fdcache_ent *e)
{
	bool last;

	pthread_mutex_lock(&c->lock);
	last = --e->refs == 0;
	if (last) {
		/* closed before the waiters wake, so their open finds the
		 * descriptor free */
		if (!e->cached)
			ent_close(e);
		c->puts++;
		pthread_cond_broadcast(&c->freed);
	}
	pthread_mutex_unlock(&c->lock);
	return last;
}
