/*
 * The files of a followed source (follow=1), nodes of its view
 * (sfs_view_follow, served by ops.c and read.c as every view): who may
 * read them, their extended attributes, their opens and their reads: the
 * pieces of the shards a read's bytes lie in, spliced or copied into the
 * reply, and the reads of a stream parked until their window is laid
 * out, answered by the watcher (follow_tend_waiters).
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

/* a waiting read says so in the log this often */
#define WAIT_LOG_SECONDS 30
#define READ_MAX (1 << 20)

/* The bytes of a read, as the main tree's reads answer them (read.c):
 * pieces of shards, held open in the descriptor cache until the reply is
 * sent, and of memory for the bytes a format adds (a tar window's
 * end-of-archive). */
struct pieces {
	struct fs_reply r;
	struct fw *w;
	size_t shard; /* r.held[r.nheld - 1]'s shard in the stream */
};

/*
 * Shard i of the stream open in p (r.held[r.nheld - 1]): taken from the
 * descriptor cache, which checks that it is as it entered the stream
 * (size, mtime, still named).  Returns 0, or -EIO (logged once per shard
 * and cause, deleted or changed: files_log_failure) or -ENOMEM.
 */
static int piece_shard(struct pieces *p, size_t i)
{
	struct fw *w = p->w;
	struct fs *fs = w->fs;
	struct sfs_error err = { 0 };
	struct fdcache_ent *e;
	const char *path;
	uint64_t size;
	int64_t mtime;
	bool gone;
	int rc;

	if (p->r.nheld && p->shard == i)
		return 0;
	/* the name lives as long as w; the array is grown by the watcher */
	pthread_mutex_lock(&w->lock);
	path = w->shards[i].path;
	size = w->shards[i].size;
	mtime = w->shards[i].mtime_ns;
	pthread_mutex_unlock(&w->lock);
	e = fdcache_get(&fs->fds, path, size, mtime, 0, &rc, &err);
	if (e) {
		rc = fs_reply_hold(fs, &p->r, e);
		if (!rc)
			p->shard = i;
		return rc;
	}
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

/* The descriptor of shard i of the stream (fs_file_fd_fn), held in
 * p. */
static int shard_fd(void *arg, uint32_t i, int *fd)
{
	struct pieces *p = arg;
	int rc = piece_shard(p, i);

	if (!rc)
		*fd = p->r.held[p->r.nheld - 1]->fd;
	return rc;
}

/* Bytes of win's trailer from byte in, room at most, into p (none past
 * its end).  0 or -ENOMEM. */
static int trailer_add(struct pieces *p, const struct sfs_window *win,
		       uint64_t in, uint64_t room)
{
	if (in >= win->trailer_len)
		return 0;
	if (room > win->trailer_len - in)
		room = win->trailer_len - in;
	return fs_reply_add(&p->r, (const char *)win->trailer + in, -1, 0,
			    (size_t)room);
}

/* Bytes [pos, pos + len) of reader ri's file of window win (with its
 * trailer) into p, outside w->lock: a window never changes.  Returns 0,
 * -EIO (logged) or -ENOMEM. */
static int window_pieces(const struct sfs_window *win, size_t ri,
			 struct pieces *p, uint64_t pos, size_t len)
{
	const struct sfs_slice *s = &win->readers[ri].bytes;
	uint64_t end = pos + len, to = end < s->size ? end : s->size;
	int rc;

	if (pos < to) {
		rc = fs_reply_slice(&p->r, s, pos, to, shard_fd, p);
		if (rc)
			return rc;
		pos = to;
	}
	return pos < end ? trailer_add(p, win, pos - s->size, end - pos) : 0;
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
		const struct sfs_stream_shard *sh =
			&w->shards[win->first_shard + s];

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

/* The window (from first) holding byte pos of r's stream (pos below its
 * size). */
static size_t window_at(const struct fw *w, const struct freader *r,
			uint64_t pos)
{
	return SFS_PARTITION_POINT(i, 1, w->nwins, r->at[i] <= pos) - 1;
}

/*
 * Bytes [pos, pos + size) of reader ri's stream into p, what of them the
 * stream holds (pos below its size, or the stream complete); w->lock is
 * taken to find the windows, let go while they are laid into p.  Returns
 * 0, -EIO, -EACCES or -ENOMEM.
 */
static int stream_pieces(struct fw *w, fuse_req_t req, size_t ri,
			 struct pieces *p, uint64_t pos, size_t size)
{
	struct freader *r = &w->readers[ri];
	const struct sfs_window *last;
	uint64_t end, at;
	size_t i, n;
	int rc;

	pthread_mutex_lock(&w->lock);
	while (p->r.len < size && pos + p->r.len < follow_reader_size(w, r)) {
		const struct sfs_window *win;
		uint64_t from, to;

		/* r->at is grown (moved) by the watcher: what of it the read
		 * needs is taken under the lock */
		at = pos + p->r.len;
		i = window_at(w, r, at);
		win = w->wins[i];
		from = r->at[i];
		to = r->at[i + 1];
		if (r->window != w->first + i)
			w->status_gen++;
		r->window = w->first + i;
		if (!follow_may_read(req, &r->acc[i])) {
			pthread_mutex_unlock(&w->lock);
			return -EACCES;
		}
		follow_ahead(w, r, i);
		pthread_mutex_unlock(&w->lock);
		/* within the window, without its trailer */
		n = (size_t)(to - at) < size - p->r.len ? (size_t)(to - at) :
							  size - p->r.len;
		rc = window_pieces(win, ri, p, at - from, n);
		if (rc)
			return rc;
		pthread_mutex_lock(&w->lock);
	}
	/* after the last window: the stream's ending */
	end = follow_reader_size(w, r);
	last = w->complete && w->nwins ? w->wins[w->nwins - 1] : NULL;
	pthread_mutex_unlock(&w->lock);
	if (!last || p->r.len >= size || pos + p->r.len < end)
		return 0;
	return trailer_add(p, last, pos + p->r.len - end, size - p->r.len);
}

/* A read of reader ri's file (what: "stream" or "window") whose shard
 * went short after its check: logged once (files_log_failure). */
static void log_short(struct fw *w, size_t ri, const char *what)
{
	files_log_failure(
		w->fs,
		"%s: a read of a %s of reader %zu failed: a shard of it went short while it was read; a shard must not change or go before it is consumed (docs/follow.md)",
		w->f->source, what, ri);
}

/* Answer a read of reader ri's stream whose bytes are there (or the
 * stream complete); without w->lock. */
static void serve_stream(struct fw *w, fuse_req_t req, size_t ri, uint64_t pos,
			 size_t size)
{
	struct pieces p = { .w = w };

	if (fs_reply_send(req, w->fs, &p.r,
			  stream_pieces(w, req, ri, &p, pos, size)) == -EIO)
		log_short(w, ri, "stream");
}

/* The reader of q waits no more for it; with w->lock. */
static void unpark(struct fw *w, struct fwaiter *q)
{
	struct freader *r = &w->readers[q->ri];

	if (!--r->nwaiting) {
		r->waiting = false;
		w->status_gen++;
	}
}

/* An interrupted read (the reader was killed, or gave up): if it is
 * parked, it is answered EINTR.  libfuse calls this with the request
 * held: the pointer is only compared. */
static void interrupted(fuse_req_t req, void *data)
{
	struct fw *w = data;
	struct fwaiter **pp, *q = NULL;

	pthread_mutex_lock(&w->lock);
	for (pp = &w->waiters; *pp; pp = &(*pp)->next) {
		if ((*pp)->req == req) {
			q = *pp;
			*pp = q->next;
			unpark(w, q);
			break;
		}
	}
	pthread_mutex_unlock(&w->lock);
	if (q) {
		fuse_reply_err(req, EINTR);
		free(q);
	}
}

/*
 * A read of bytes reader ri's stream does not hold yet: park it (the
 * request kept, no thread held) for the watcher to answer when the bytes
 * come (follow_tend_waiters), after follow_timeout=, on interrupt, or at
 * the unmount.  Without w->lock.
 */
static void park(struct fw *w, fuse_req_t req, size_t ri, uint64_t pos,
		 size_t size)
{
	struct fwaiter *q = calloc(1, sizeof(*q));
	struct freader *r;
	uint64_t k;

	if (!q) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	*q = (struct fwaiter){ .req = req,
			       .ri = ri,
			       .pos = pos,
			       .size = size,
			       .start = follow_now() };
	q->logged = q->start;
	/* before it is on the list: an interrupt that comes now finds it
	 * not there, and fuse_req_interrupted below sees it */
	fuse_req_interrupt_func(req, interrupted, w);
	pthread_mutex_lock(&w->lock);
	r = &w->readers[ri];
	if (pos < follow_reader_size(w, r) || w->complete) {
		pthread_mutex_unlock(&w->lock);
		free(q);
		serve_stream(w, req, ri, pos, size);
		return;
	}
	if (w->stop || fuse_req_interrupted(req) || !w->running) {
		/* no watcher (it could not start): nothing would answer it */
		pthread_mutex_unlock(&w->lock);
		free(q);
		fuse_reply_err(req, w->stop || w->running ? EINTR : EIO);
		return;
	}
	q->next = w->waiters;
	w->waiters = q;
	k = w->first + w->nwins;
	if (!r->nwaiting++ || r->window != k)
		w->status_gen++;
	r->waiting = true;
	r->window = k;
	pthread_mutex_unlock(&w->lock);
	/* the watcher times it out: wake it to take its second's tick */
	if (write(w->wake[1], "w", 1) < 0 && errno != EAGAIN)
		fs_log(w->fs, LOG_WARNING, "follow: %s", strerror(errno));
}

/* (follow_i.h) */
void follow_tend_waiters(struct fw *w)
{
	struct fs *fs = w->fs;
	struct fwaiter *done = NULL, **pp, *q;
	double t = follow_now();

	pthread_mutex_lock(&w->lock);
	for (pp = &w->waiters; (q = *pp);) {
		struct freader *r = &w->readers[q->ri];
		uint64_t k = w->first + w->nwins, need = (k + 1) * w->n;
		bool out = t - q->start >= fs->mount.follow_timeout;

		if (w->stop || w->complete ||
		    q->pos < follow_reader_size(w, r)) {
			q->rc = w->stop ? -EINTR : 0;
		} else if (out || t - q->logged >= WAIT_LOG_SECONDS) {
			fs_log(fs, out ? LOG_ERR : LOG_INFO,
			       "reader %u/%u %s window %" PRIu64
			       " for %.0f s: the stream holds %" PRIu64
			       " samples, the window needs %" PRIu64
			       " (%" PRIu64
			       " missing) after the last shard %s%s",
			       r->rank, r->worker,
			       out ? "gave up waiting for" : "waits for", k,
			       t - q->start, w->nsamples, need,
			       need - w->nsamples,
			       w->nshards ? w->shards[w->nshards - 1].path :
					    "(none yet)",
			       out ? " (follow_timeout=): EIO" : "");
			q->logged = t;
			if (!out) {
				pp = &q->next;
				continue;
			}
			atomic_fetch_add(&fs->errors, 1);
			q->rc = -EIO;
		} else {
			pp = &q->next;
			continue;
		}
		*pp = q->next;
		unpark(w, q);
		q->next = done;
		done = q;
	}
	pthread_mutex_unlock(&w->lock);
	while ((q = done)) {
		done = q->next;
		if (q->rc)
			fuse_reply_err(q->req, -q->rc);
		else
			serve_stream(w, q->req, q->ri, q->pos, q->size);
		free(q);
	}
}

/* The reader of file node of v (a window file or a stream), and its
 * window (from first) in *win, SIZE_MAX for the stream. */
static size_t reader_of(const struct sfs_view *v, uint32_t node, size_t *win)
{
	const struct sfs_view_node *n = &v->nodes[node];

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

/* (fs.h) */
void follow_read(fuse_req_t req, const struct sfs_view *v, uint32_t node,
		 size_t size, off_t off)
{
	struct fs *fs = fs_of(req);
	struct fw *w = fs->follow;
	uint64_t pos = (uint64_t)off;
	const struct sfs_window *win;
	struct pieces p = { .w = w };
	struct freader *r;
	size_t ri, i;
	bool ready;

	size = size < READ_MAX ? size : READ_MAX;
	atomic_fetch_add(&fs->reads, 1);
	ri = reader_of(v, node, &i);
	pthread_mutex_lock(&w->lock);
	r = &w->readers[ri];
	if (i == SIZE_MAX) {
		/* a read that must wait holds no thread: it is parked */
		ready = pos < follow_reader_size(w, r) || w->complete;
		pthread_mutex_unlock(&w->lock);
		if (ready)
			serve_stream(w, req, ri, pos, size);
		else
			park(w, req, ri, pos, size);
		return;
	}
	win = i < w->hidden ? NULL : w->wins[i];
	pthread_mutex_unlock(&w->lock);
	if (!win) { /* consumed and deleted */
		fuse_reply_err(req, ESTALE);
		return;
	}
	/* reads never consume: acks do (.shardfs/ack) */
	if (fs_reply_send(req, fs, &p.r,
			  window_pieces(win, ri, &p, pos, size)) == -EIO)
		log_short(w, ri, "window");
}