/*
 * The slices of data files, by inode number.  With no_open the kernel
 * sends no OPEN, so a read names only its inode: the first read of a file
 * in a view builds its slice and opens its source, and the entry is kept
 * for the reads that follow, at most files.cap of them holding at most
 * FILES_MEM_MAX bytes (the least recently used one that no read holds
 * goes first).  Entries go with their view, or when a read finds their
 * source deleted or changed (files_fail: the next read builds the entry
 * again and opens the source as it is then).  An entry holds its source
 * open: when the daemon runs out of descriptors, the least recently used
 * entries no read holds give theirs back and the open is tried again.
 *
 * A slice is built once: the reads of a file that come while its first
 * read builds it wait for that build, and at most FILES_BUILDS slices are
 * built at once, however many request threads read.  A build may decode
 * much (a Parquet cut decodes whole pages; parquet.h bounds each), so
 * this bounds the daemon's memory by a few builds, not by its threads.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "fs.h"

/* Slices built at once (each may decode hundreds of MiB: see above). */
#define FILES_BUILDS 2
/* Bytes the kept slices may hold (their extents and their own bytes, a
 * Parquet footer or re-encoded pages): past it, the least recently used
 * ones go, however few entries there are. */
#define FILES_MEM_MAX ((size_t)256 << 20)
/* Descriptors the idle entries give back when the daemon is out of them:
 * a few, so that the builds that follow find some free, not all, so that
 * the files being read keep theirs. */
#define FILES_GIVE_BACK 4

int files_init(struct files *t, size_t cap)
{
	memset(t, 0, sizeof(*t));
	t->cap = cap;
	t->nbuckets = 2 * cap;
	t->buckets = calloc(t->nbuckets, sizeof(*t->buckets));
	if (!t->buckets)
		return -ENOMEM;
	if (pthread_cond_init(&t->done, NULL)) {
		free(t->buckets);
		return -ENOMEM;
	}
	return -pthread_mutex_init(&t->lock, NULL);
}

void files_destroy(struct files *t)
{
	unsigned i;

	free(t->buckets);
	for (i = 0; i < FILES_FAILED; i++)
		free(t->failed[i]);
	pthread_cond_destroy(&t->done);
	pthread_mutex_destroy(&t->lock);
}

static struct file_ent **bucket(struct files *t, fuse_ino_t ino)
{
	return &t->buckets[(ino ^ ino >> 32) % t->nbuckets];
}

static void ent_free(struct fs *fs, struct file_ent *f)
{
	if (f->src)
		fdcache_put(&fs->fds, f->src);
	sfs_slice_free(f->slice);
	free(f);
}

/* Take f out of the table. */
static void unlink_locked(struct files *t, struct file_ent *f)
{
	struct file_ent **p;

	for (p = bucket(t, f->ino); *p != f; p = &(*p)->next)
		;
	*p = f->next;
	t->n--;
	t->mem -= f->mem;
}

/* The least recently used entry no read holds, taken out; or NULL. */
static struct file_ent *evict_locked(struct files *t)
{
	struct file_ent *victim = NULL, *f;
	size_t b;

	for (b = 0; b < t->nbuckets; b++)
		for (f = t->buckets[b]; f; f = f->next)
			if (!f->refs && (!victim || f->used < victim->used))
				victim = f;
	if (victim)
		unlink_locked(t, victim);
	return victim;
}

/* Give back the least recently used entries no read holds until max
 * descriptors are free (entries of one shard share one) or none is left;
 * returns how many descriptors were freed. */
static size_t drop_unused(struct fs *fs, size_t max)
{
	struct file_ent *f;
	size_t n = 0;

	while (n < max) {
		pthread_mutex_lock(&fs->files.lock);
		f = evict_locked(&fs->files);
		pthread_mutex_unlock(&fs->files.lock);
		if (!f)
			break;
		if (f->src && fdcache_put(&fs->fds, f->src))
			n++;
		f->src = NULL;
		ent_free(fs, f);
	}
	return n;
}

/* (fs.h) */
void files_log_failure(struct fs *fs, const char *fmt, ...)
{
	struct files *t = &fs->files;
	bool again = false;
	char *msg;
	unsigned i;
	va_list ap;
	int n;

	atomic_fetch_add(&fs->errors, 1);
	va_start(ap, fmt);
	n = vasprintf(&msg, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	pthread_mutex_lock(&t->lock);
	for (i = 0; i < FILES_FAILED && !again; i++)
		again = t->failed[i] && !strcmp(t->failed[i], msg);
	if (!again) {
		free(t->failed[t->failed_next]);
		t->failed[t->failed_next] = strdup(msg);
		t->failed_next = (t->failed_next + 1) % FILES_FAILED;
	}
	pthread_mutex_unlock(&t->lock);
	if (!again)
		fs_log(fs, LOG_ERR, "%s", msg);
	free(msg);
}

/* The bytes slice s holds in memory (of a slice its view keeps, its
 * extents: their bytes are the view's, counted there). */
static size_t slice_mem(const struct sfs_slice *s)
{
	size_t mem = sizeof(*s) + s->nextents * sizeof(s->extents[0]), i;

	for (i = 0; !s->shared && i < s->nextents; i++)
		if (s->extents[i].owned)
			mem += (size_t)s->extents[i].len;
	return mem;
}

/* Open f's source and build its slice (node of vr). */
static int build(struct fs *fs, struct view_ref *vr, uint32_t node,
		 struct file_ent *f, struct sfs_error *err)
{
	const struct sfs_view_node *n = sfs_view_node(vr->v, node);
	const char *path;
	uint64_t size;
	int64_t mtime;
	int rc;

	/* a followed source's: its extents' files are the stream's shards
	 * (read.c takes them from the descriptor cache as it reads) */
	if (vr->v->follow)
		return sfs_view_slice(vr->v, n, -1, &f->slice, err);
	sfs_view_source(vr->v, n, &path, &size, &mtime);
	f->src_size = size;
	f->src_mtime = mtime;
	/* out of descriptors, the idle entries give theirs back before any
	 * wait: they would never put them back on their own */
	f->src = fdcache_get(&fs->fds, path, size, mtime, FDCACHE_NOWAIT, &rc,
			     err);
	if (rc == -EMFILE) {
		drop_unused(fs, FILES_GIVE_BACK);
		f->src = fdcache_get(&fs->fds, path, size, mtime, 0, &rc, err);
		/* every descriptor was held through the wait: those that
		 * reads held then may be idle now */
		if (rc && drop_unused(fs, SIZE_MAX))
			f->src = fdcache_get(&fs->fds, path, size, mtime, 0,
					     &rc, err);
	}
	if (!rc)
		rc = sfs_view_slice(vr->v, n, f->src->fd, &f->slice, err);
	return rc;
}

/* The entry of ino, held; or NULL. */
static struct file_ent *find_locked(struct files *t, fuse_ino_t ino)
{
	struct file_ent *f;

	for (f = *bucket(t, ino); f && f->ino != ino; f = f->next)
		;
	if (f) {
		f->refs++;
		f->used = ++t->tick;
	}
	return f;
}

/* Take out the least recently used entries no read holds while the table
 * holds more than it may (one more entry to come when room); on *gone. */
static void trim_locked(struct files *t, bool room, struct file_ent **gone)
{
	struct file_ent *f;

	while ((t->n + room > t->cap || t->mem > FILES_MEM_MAX) &&
	       (f = evict_locked(t))) {
		f->next = *gone;
		*gone = f;
	}
}

static void free_list(struct fs *fs, struct file_ent *gone)
{
	struct file_ent *f;

	while ((f = gone)) {
		gone = f->next;
		ent_free(fs, f);
	}
}

int files_get(struct fs *fs, struct view_ref *vr, uint32_t node,
	      struct file_ent **out, bool *built)
{
	struct files *t = &fs->files;
	fuse_ino_t ino = node_ino(vr, node);
	struct sfs_error err = { 0 };
	struct file_ent *f, *gone = NULL;
	int rc;

	*built = false;
	pthread_mutex_lock(&t->lock);
	f = find_locked(t, ino);
	if (f) {
		/* its first read builds it: wait for that build */
		while (f->building)
			pthread_cond_wait(&t->done, &t->lock);
		rc = f->rc;
		if (!rc && f->vr != vr) {
			/* built of another copy of a followed source's view
			 * (fs_view_grow: same gen, same node numbers), which
			 * may have fewer bytes: built again, of vr, once per
			 * copy read */
			if (!f->out) {
				unlink_locked(t, f);
				f->out = true;
			}
			if (!--f->refs) {
				f->next = gone; /* its next: the table's */
				gone = f;
			}
			f = NULL;
		} else {
			if (rc && !--f->refs) {
				f->next = gone; /* out of the table: the last
						 * one frees it */
				gone = f;
			}
			pthread_mutex_unlock(&t->lock);
			free_list(fs, gone);
			if (rc)
				return rc;
			*out = f;
			return 0;
		}
	}
	f = calloc(1, sizeof(*f));
	if (!f) {
		pthread_mutex_unlock(&t->lock);
		free_list(fs, gone);
		return -ENOMEM;
	}
	f->ino = ino;
	f->vr = vr;
	f->refs = 1;
	f->building = true;
	/* (only more reads at once than cap could hold every entry, and
	 * leave none to evict) */
	trim_locked(t, true, &gone);
	f->used = ++t->tick;
	f->next = *bucket(t, ino);
	*bucket(t, ino) = f;
	t->n++;
	if (gone) {
		/* their sources go back now, not after the wait below */
		pthread_mutex_unlock(&t->lock);
		free_list(fs, gone);
		gone = NULL;
		pthread_mutex_lock(&t->lock);
	}
	while (t->builds >= FILES_BUILDS)
		pthread_cond_wait(&t->done, &t->lock);
	t->builds++;
	pthread_mutex_unlock(&t->lock);

	rc = build(fs, vr, node, f, &err);
	if (rc)
		rc = rc == -ENOMEM ? -ENOMEM : -EIO;

	pthread_mutex_lock(&t->lock);
	t->builds--;
	f->building = false;
	if (rc) {
		unlink_locked(t, f);
		f->rc = rc;
		if (!--f->refs) {
			f->next = gone;
			gone = f;
		}
	} else {
		f->mem = slice_mem(f->slice);
		t->mem += f->mem;
		trim_locked(t, false, &gone);
	}
	pthread_cond_broadcast(&t->done);
	pthread_mutex_unlock(&t->lock);
	free_list(fs, gone);
	if (rc) {
		files_log_failure(fs, "%s", err.msg);
		return rc;
	}
	*built = true;
	*out = f;
	return 0;
}

void files_put(struct fs *fs, struct file_ent *f)
{
	struct files *t = &fs->files;
	struct file_ent *gone = NULL;

	pthread_mutex_lock(&t->lock);
	if (!--f->refs && f->out) {
		f->next = gone;
		gone = f;
	}
	/* more entries than the table may hold (every one was held when the
	 * last build ended) go as soon as they are let go, not at the next
	 * build */
	trim_locked(t, false, &gone);
	pthread_mutex_unlock(&t->lock);
	free_list(fs, gone);
}

void files_fail(struct fs *fs, struct file_ent *f, const char *msg)
{
	struct files *t = &fs->files;

	files_log_failure(fs, "%s", msg);
	pthread_mutex_lock(&t->lock);
	if (!f->out) {
		unlink_locked(t, f);
		f->out = true;
	}
	pthread_mutex_unlock(&t->lock);
	if (f->src)
		fdcache_drop(&fs->fds, f->src);
}

void files_forget_view_locked(struct fs *fs, struct view_ref *vr)
{
	struct files *t = &fs->files;
	struct file_ent **p, *f, *gone = NULL;
	size_t b;

	pthread_mutex_lock(&t->lock);
	for (b = 0; t->n && b < t->nbuckets; b++) {
		for (p = &t->buckets[b]; (f = *p);) {
			if (f->vr != vr) {
				p = &f->next;
				continue;
			}
			*p = f->next;
			t->n--;
			t->mem -= f->mem;
			f->next = gone;
			gone = f;
		}
	}
	pthread_mutex_unlock(&t->lock);
	while ((f = gone)) {
		gone = f->next;
		ent_free(fs, f);
	}
}
