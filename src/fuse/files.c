/*
 * The slices of data files, by inode number.  With no_open the kernel
 * sends no OPEN, so a read names only its inode: the first read of a file
 * in a view builds its slice and opens its source, and the entry is kept
 * for the reads that follow, at most files.cap of them (the least recently
 * used one that no read holds goes first).  Entries go with their view.
 * An entry holds its source open: when the daemon runs out of descriptors,
 * the entries no read holds give theirs back and the open is tried again.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "fs.h"

int files_init(struct files *t, size_t cap)
{
	memset(t, 0, sizeof(*t));
	t->cap = cap;
	t->nbuckets = 2 * cap;
	t->buckets = calloc(t->nbuckets, sizeof(*t->buckets));
	if (!t->buckets)
		return -ENOMEM;
	return -pthread_mutex_init(&t->lock, NULL);
}

void files_destroy(struct files *t)
{
	free(t->buckets);
	free(t->failed_msg);
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

/* Give back every entry no read holds; returns how many. */
static size_t drop_unused(struct fs *fs)
{
	struct file_ent *f, *gone = NULL;
	size_t n = 0;

	pthread_mutex_lock(&fs->files.lock);
	while ((f = evict_locked(&fs->files))) {
		f->next = gone;
		gone = f;
		n++;
	}
	pthread_mutex_unlock(&fs->files.lock);
	while ((f = gone)) {
		gone = f->next;
		ent_free(fs, f);
	}
	return n;
}

/* Log why ino cannot be read, unless that was the last thing logged: the
 * kernel retries a failed page on its own. */
static void log_failure(struct fs *fs, fuse_ino_t ino, const char *msg)
{
	struct files *t = &fs->files;
	bool again;

	pthread_mutex_lock(&t->lock);
	again = t->failed_ino == ino && t->failed_msg &&
		!strcmp(t->failed_msg, msg);
	if (!again) {
		free(t->failed_msg);
		t->failed_msg = strdup(msg);
		t->failed_ino = ino;
	}
	pthread_mutex_unlock(&t->lock);
	if (!again)
		fs_log(fs, LOG_ERR, "%s", msg);
}

/* A new entry for node of vr: its source open, its slice built. */
static int build(struct fs *fs, struct view_ref *vr, uint32_t node,
		 struct file_ent **out, struct sfs_error *err)
{
	const struct sfs_view_node *n = &vr->v->nodes[node];
	struct file_ent *f = calloc(1, sizeof(*f));
	const char *path;
	uint64_t size;
	int64_t mtime;
	int rc;

	if (!f)
		return sfs_errorf(err, -ENOMEM, "out of memory");
	f->ino = node_ino(vr, node);
	f->vr = vr;
	sfs_view_source(vr->v, n, &path, &size, &mtime);
	f->src_size = size;
	f->src_mtime = mtime;
	f->src = fdcache_get(&fs->fds, path, size, mtime, false, &rc, err);
	if (rc && drop_unused(fs))
		f->src = fdcache_get(&fs->fds, path, size, mtime, false, &rc,
				     err);
	if (!rc)
		rc = sfs_view_slice(vr->v, n, f->src->fd, &f->slice, err);
	if (rc) {
		ent_free(fs, f);
		return rc;
	}
	f->refs = 1;
	*out = f;
	return 0;
}

int files_get(struct fs *fs, struct view_ref *vr, uint32_t node,
	      struct file_ent **out, bool *built)
{
	struct files *t = &fs->files;
	fuse_ino_t ino = node_ino(vr, node);
	struct sfs_error err = { 0 };
	struct file_ent *f, *mine = NULL, *old = NULL;
	int rc;

	*built = false;
	pthread_mutex_lock(&t->lock);
	for (f = *bucket(t, ino); f && f->ino != ino; f = f->next)
		;
	if (f) {
		f->refs++;
		f->used = ++t->tick;
	}
	pthread_mutex_unlock(&t->lock);
	if (f) {
		*out = f;
		return 0;
	}
	rc = build(fs, vr, node, &mine, &err);
	if (rc) {
		atomic_fetch_add(&fs->errors, 1);
		log_failure(fs, ino, err.msg);
		return rc == -ENOMEM ? -ENOMEM : -EIO;
	}
	pthread_mutex_lock(&t->lock);
	/* another read of the file may have built it meanwhile */
	for (f = *bucket(t, ino); f && f->ino != ino; f = f->next)
		;
	if (f) {
		f->refs++;
		f->used = ++t->tick;
	} else {
		/* (only more reads at once than cap could hold every entry,
		 * and leave none to evict) */
		if (t->n >= t->cap)
			old = evict_locked(t);
		mine->used = ++t->tick;
		mine->next = *bucket(t, ino);
		*bucket(t, ino) = mine;
		t->n++;
		f = mine;
		mine = NULL;
		*built = true;
	}
	pthread_mutex_unlock(&t->lock);
	if (mine)
		ent_free(fs, mine);
	if (old)
		ent_free(fs, old);
	*out = f;
	return 0;
}

void files_put(struct fs *fs, struct file_ent *f)
{
	pthread_mutex_lock(&fs->files.lock);
	f->refs--;
	pthread_mutex_unlock(&fs->files.lock);
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
