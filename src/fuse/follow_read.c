/*
 * The files of a followed source (follow=1), nodes of its view
 * (sfs_view_follow, opened and read by read.c as every view's file, its
 * slices built by files.c): what only they need on that path, who may
 * read them, their extended attributes, the descriptors of the shards
 * their bytes lie in, the read-ahead of the windows after the one read,
 * and the wording and status of a read of a stream parked past its end
 * (read.c parks it).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "fs.h"
#include "shardfs/follow.h"
#include "shardfs/index.h"
#include "shardfs/status.h"
#include "shardfs/util.h"

#include "follow_i.h"

/* (follow_i.h) */
bool follow_may_read(fuse_req_t req, const struct sfs_access *a)
{
	const struct fuse_ctx *c = fuse_req_ctx(req);
	gid_t groups[64];
	int i, n;

	if (!a->known || c->uid == 0)
		return true;
	if (c->uid == a->uid)
		return a->mode & 0400u;
	if (!(a->mode & 0040u) == !(a->mode & 0004u))
		return a->mode & 0004u;
	if (c->gid == a->gid)
		return a->mode & 0040u;
	n = fuse_req_getgroups(req, 64, groups);
	for (i = 0; i < n && i < 64; i++)
		if (groups[i] == a->gid)
			return a->mode & 0040u;
	return a->mode & 0004u;
}

/* (fs.h) */
int follow_shard_hold(struct fw *w, struct fs_reply *r, uint32_t i)
{
	struct fs *fs = w->fs;
	struct sfs_error err = { 0 };
	struct fdcache_ent *e;
	const char *path;
	uint64_t size;
	int64_t mtime;
	bool gone;
	int rc;

	/* the name lives as long as w; the array is grown by the watcher */
	pthread_mutex_lock(&w->lock);
	path = w->shards[i].path;
	size = w->shards[i].size;
	mtime = w->shards[i].mtime_ns;
	pthread_mutex_unlock(&w->lock);
	e = fdcache_get(&fs->fds, path, size, mtime, 0, &rc, &err);
	if (e)
		return fs_reply_hold(fs, r, e);
	if (rc == -ENOMEM)
		return rc;
	gone = faccessat(w->f->srcfd, path, F_OK, AT_SYMLINK_NOFOLLOW) &&
	       errno == ENOENT;
	files_log_failure(
		fs,
		"%s/%s: %s before every reader read it (it entered the stream with %" PRIu64
		" bytes): EIO for its bytes; a shard must not change or go before it is consumed (docs/follow.md)",
		w->f->source, path, gone ? "deleted" : "changed or truncated",
		size);
	return -EIO;
}

/* Queue the source bytes of reader ri's file of window win, the span of
 * its samples in each shard it reads, within *budget; with w->lock.
 * 0 or -ENOMEM. */
static int window_ahead(struct fw *w, const struct sfs_window *win, size_t ri,
			uint64_t *budget)
{
	const struct sfs_window_reader *wr = &win->readers[ri];
	size_t n = win->end_shard - win->first_shard, x, s;
	uint64_t *lo = calloc(2 * (n ? n : 1), sizeof(*lo)), *hi = lo + n;

	if (!lo)
		return -ENOMEM;
	for (x = 0; x < wr->bytes.nextents; x++) {
		const struct sfs_extent *e = &wr->bytes.extents[x];

		s = e->file - win->first_shard;
		if (e->mem || !e->len)
			continue;
		if (!hi[s] || e->src < lo[s])
			lo[s] = e->src;
		if (e->src + e->len > hi[s])
			hi[s] = e->src + e->len;
	}
	for (s = 0; s < n && *budget; s++) {
		const struct sfs_shard *sh = &w->shards[win->first_shard + s];

		if (hi[s])
			prefetch_range(w->fs->prefetch, sh->path, sh->size,
				       sh->mtime_ns, win->first_shard + s,
				       lo[s], hi[s], budget);
	}
	free(lo);
	return 0;
}

/* (follow_i.h) */
void follow_ahead(struct fw *w, struct freader *r, uint64_t i)
{
	uint64_t budget, k, end;
	uint32_t files;

	if (!w->fs->prefetch)
		return;
	prefetch_budget(w->fs->prefetch, &budget, &files);
	end = i + 1 + files < w->nwins ? i + 1 + files : w->nwins;
	/* walked from window i already, as far as there were windows: the
	 * chunks are queued */
	if (r->ahead_at == i + 1 && r->ahead_end >= end)
		return;
	/* a new walk from the window after i, with a fresh budget: what is
	 * queued already (the prefetcher's recent chunks) is charged to it
	 * but not queued again, so the read-ahead stays within the budget
	 * of the window reached */
	for (k = i + 1; k < end && budget; k++)
		if (window_ahead(w, w->wins[k], (size_t)(r - w->readers),
				 &budget))
			break;
	r->ahead_at = i + 1;
	r->ahead_end = end;
}

/* The reader of file node of v (a window file or a stream), and its
 * window (from first) in *win, SIZE_MAX for the stream. */
static size_t reader_of(const struct sfs_view *v, uint32_t node, size_t *win)
{
	const struct sfs_view_node *n = sfs_view_node(v, node);

	*win = node < v->follow->window_node ? SIZE_MAX : n->window;
	return n->file;
}

/* (fs.h) */
void follow_node_access(struct fw *w, const struct sfs_view *v, uint32_t node,
			uint32_t *uid, uint32_t *gid, uint32_t *mode)
{
	size_t i, ri = reader_of(v, node, &i);
	struct sfs_access a;

	pthread_mutex_lock(&w->lock);
	a = i == SIZE_MAX ? w->readers[ri].stream_acc : w->readers[ri].acc[i];
	pthread_mutex_unlock(&w->lock);
	/* the source's for the shards it serves (with allow_other,
	 * default_permissions refuses whom the source would) */
	if (!a.known)
		return;
	*uid = a.uid;
	*gid = a.gid;
	*mode = a.mode;
}

/* (fs.h) */
int follow_node_xattr(struct fw *w, const struct sfs_view *v, uint32_t node,
		      const char *name, char **out)
{
	size_t i, ri = reader_of(v, node, &i);
	int rc;

	pthread_mutex_lock(&w->lock);
	if (i == SIZE_MAX)
		rc = sfs_window_stream_xattr(w->wins, w->nwins, ri,
					     w->f->source, name, out);
	else if (i < w->hidden)
		rc = -ESTALE; /* consumed and deleted */
	else
		rc = sfs_window_xattr(w->wins[i], ri, w->f->source, w->shards,
				      name, out);
	pthread_mutex_unlock(&w->lock);
	return rc;
}

/* (fs.h) */
int follow_open(struct fw *w, const struct sfs_view *v, uint32_t node,
		struct fuse_file_info *fi)
{
	size_t i, ri = reader_of(v, node, &i);
	int rc = 0;

	pthread_mutex_lock(&w->lock);
	if (i == SIZE_MAX) {
		fi->direct_io = 1; /* its size changes; reads past it wait */
		fi->keep_cache = 0;
	} else if (i < w->hidden) {
		rc = -ESTALE; /* consumed and deleted */
	} else {
		fi->keep_cache = 1;
		/* the reader reached it: the windows after it are next */
		follow_ahead(w, &w->readers[ri], i);
	}
	pthread_mutex_unlock(&w->lock);
	return rc;
}

/* The window (from first) holding byte pos of r's stream (pos below its
 * size). */
static size_t window_at(const struct fw *w, const struct freader *r,
			uint64_t pos)
{
	return SFS_PARTITION_POINT(i, 1, w->nwins, r->at[i] <= pos) - 1;
}

/* (fs.h) */
int follow_read_check(struct fw *w, fuse_req_t req, const struct sfs_view *v,
		      uint32_t node, uint64_t pos, uint64_t end)
{
	size_t i, ri = reader_of(v, node, &i);
	struct freader *r;
	uint64_t at;
	int rc = 0;

	pthread_mutex_lock(&w->lock);
	r = &w->readers[ri];
	if (i != SIZE_MAX) {
		/* reads never consume: acks do (.shardfs/ack) */
		rc = i < w->hidden ? -ESTALE : 0; /* consumed and deleted */
		pthread_mutex_unlock(&w->lock);
		return rc;
	}
	/* the windows the bytes lie in (r->at is grown, moved, by the
	 * watcher: read under the lock); the trailer after them needs none */
	for (at = pos; at < end && at < follow_reader_size(w, r);
	     at = r->at[i + 1]) {
		i = window_at(w, r, at);
		if (r->window != w->first + i)
			w->status_gen++;
		r->window = w->first + i;
		if (!follow_may_read(req, &r->acc[i])) {
			rc = -EACCES;
			break;
		}
		follow_ahead(w, r, i);
	}
	pthread_mutex_unlock(&w->lock);
	return rc;
}

/* (fs.h) */
void follow_log_short(struct fw *w, const struct sfs_view *v, uint32_t node)
{
	size_t i, ri = reader_of(v, node, &i);

	files_log_failure(
		w->fs,
		"%s: a read of a %s of reader %zu failed: a shard of it went short while it was read; a shard must not change or go before it is consumed (docs/follow.md)",
		w->f->source, i == SIZE_MAX ? "stream" : "window", ri);
}

/* (fs.h) */
int follow_wait(struct fw *w, const struct sfs_view *v, uint32_t node, bool on)
{
	size_t i, ri = reader_of(v, node, &i);
	struct freader *r;
	uint64_t k;

	pthread_mutex_lock(&w->lock);
	r = &w->readers[ri];
	if (!on) {
		if (r->nwaiting && !--r->nwaiting) {
			r->waiting = false;
			w->status_gen++;
		}
		pthread_mutex_unlock(&w->lock);
		return 0;
	}
	if (w->stop || !w->running) {
		/* no watcher (it could not start): nothing would answer it */
		pthread_mutex_unlock(&w->lock);
		return w->stop || w->running ? -EINTR : -EIO;
	}
	k = w->first + w->nwins;
	if (!r->nwaiting++ || r->window != k)
		w->status_gen++;
	r->waiting = true;
	r->window = k;
	pthread_mutex_unlock(&w->lock);
	/* the watcher times it out: wake it to take its second's tick */
	if (write(w->wake[1], "w", 1) < 0 && errno != EAGAIN)
		fs_log(w->fs, LOG_WARNING, "follow: %s", strerror(errno));
	return 0;
}

/* (fs.h) */
void follow_wait_log(struct fw *w, const struct sfs_view *v, uint32_t node,
		     double seconds, bool out)
{
	size_t i, ri = reader_of(v, node, &i);
	const struct freader *r;
	uint64_t k, need;

	pthread_mutex_lock(&w->lock);
	r = &w->readers[ri];
	k = w->first + w->nwins;
	need = (k + 1) * w->n;
	fs_log(w->fs, out ? LOG_ERR : LOG_INFO,
	       "reader %u/%u %s window %" PRIu64
	       " for %.0f s: the stream holds %" PRIu64
	       " samples, the window needs %" PRIu64 " (%" PRIu64
	       " missing) after the last shard %s%s",
	       r->rank, r->worker, out ? "gave up waiting for" : "waits for", k,
	       seconds, w->nsamples, need, need - w->nsamples,
	       w->nshards ? w->shards[w->nshards - 1].path : "(none yet)",
	       out ? " (follow_timeout=): EIO" : "");
	pthread_mutex_unlock(&w->lock);
}
