/*
 * The read path: opening a file (a slice of a shard, a whole shard served
 * as a file, or a control file), reading it, releasing it.  A data file's
 * reads find its slice by inode number (files.c), so they need no handle:
 * with no_open the kernel sends no OPEN and no RELEASE at all.  A slice's
 * reads are answered with the source file's descriptor so the kernel can
 * splice; only the bytes a format adds come from memory.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include <linux/fuse.h>

#include "fs.h"
#include "shardfs/util.h"

/* libfuse copies a reply of fewer bytes than two pages itself */
#define SPLICE_MIN 8192

/* A control file opened without no_open: a snapshot for its reads. */
static void open_control(fuse_req_t req, struct fs *fs, fuse_ino_t ino,
			 struct fuse_file_info *fi)
{
	struct handle *h;

	if ((fi->flags & O_ACCMODE) != O_RDONLY && ino != FS_INO_EPOCH &&
	    ino != FS_INO_ACK) {
		fuse_reply_err(req, EROFS);
		return;
	}
	h = handle_new(fs, H_CONTROL);
	if (h)
		h->buf = control_text(fs, ino);
	if (!h || !h->buf) {
		handle_free(fs, h);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	h->len = strlen(h->buf);
	fi->direct_io = 1;
	fi->fh = (uintptr_t)h;
	if (fuse_reply_open(req, fi) == -ENOENT)
		handle_free(fs, h);
}

/*
 * The view of data file ino, held (view_unref), and its node; or NULL
 * after replying with the error: the view is gone, or ino is not a file.
 */
static struct view_ref *file_view(fuse_req_t req, struct fs *fs, fuse_ino_t ino,
				  uint32_t *node)
{
	struct view_ref *vr = view_get(fs, ino, node);
	enum sfs_node_kind kind;

	if (!vr) {
		/* its view let go (FS_OLD_VIEWS), or gone */
		fuse_reply_err(req, view_revoked(fs, ino) ? EIO : ESTALE);
		return NULL;
	}
	kind = sfs_view_node(vr->v, *node)->kind;
	if (kind == SFS_NODE_FILE && !sfs_view_gone(vr->v, *node))
		return vr;
	view_unref(fs, vr);
	/* a followed source's window consumed and deleted: ESTALE */
	fuse_reply_err(req, kind == SFS_NODE_DIR  ? EISDIR :
			    kind == SFS_NODE_FILE ? ESTALE :
						    ELOOP);
	return NULL;
}

void fs_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct view_ref *vr;
	struct file_ent *f;
	uint32_t node;
	bool built;
	int rc;

	fs_readahead_once(fs);
	atomic_fetch_add(&fs->opens, 1);
	/* ENOSYS: the kernel opens every file from now on without asking */
	if (fs->no_open) {
		fuse_reply_err(req, ENOSYS);
		return;
	}
	if (control_is(ino)) {
		open_control(req, fs, ino, fi);
		return;
	}
	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		fuse_reply_err(req, EROFS);
		return;
	}
	vr = file_view(req, fs, ino, &node);
	if (!vr)
		return;
	/* a followed source's window or stream: fi's flags are the
	 * stream's (a stream grows: direct_io) */
	fi->keep_cache = 1;
	rc = vr->v->follow ? follow_open(fs->follow, vr->v, node, fi) : 0;
	/* the slice is built now, so that an unreadable source fails the
	 * open; the reads find it by inode number */
	if (!rc)
		rc = files_get(fs, vr, node, &f, &built);
	if (rc) {
		view_unref(fs, vr);
		fuse_reply_err(req, -rc);
		return;
	}
	files_put(fs, f);
	prefetch_after(fs->prefetch, vr, node);
	view_unref(fs, vr);
	fuse_reply_open(req, fi);
}

/* (fs.h) */
int fs_reply_add(struct fs_reply *r, const void *mem, int fd, uint64_t src,
		 size_t n)
{
	struct fuse_buf *b;

	if (!r->bv || r->bv->count == r->cap) {
		size_t cap = r->cap ? 2 * r->cap : 8;
		struct fuse_bufvec *bv =
			realloc(r->bv, sizeof(*bv) + cap * sizeof(bv->buf[0]));

		if (!bv)
			return -ENOMEM;
		if (!r->bv)
			*bv = (struct fuse_bufvec){ 0 };
		r->bv = bv;
		r->cap = cap;
	}
	b = &r->bv->buf[r->bv->count++];
	memset(b, 0, sizeof(*b));
	b->size = n;
	if (mem) {
		b->mem = (void *)mem;
	} else {
		b->flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK |
			   FUSE_BUF_FD_RETRY;
		b->fd = fd;
		b->pos = (off_t)src;
	}
	r->len += n;
	return 0;
}

/* (fs.h) */
int fs_reply_hold(struct fs *fs, struct fs_reply *r, struct fdcache_ent *e)
{
	if (SFS_GROW(r->held, r->held_cap, r->nheld + 1)) {
		fdcache_put(&fs->fds, e);
		return -ENOMEM;
	}
	r->held[r->nheld++] = e;
	return 0;
}

/* (fs.h) */
int fs_reply_slice(struct fs_reply *r, const struct sfs_slice *s, uint64_t pos,
		   uint64_t end, fs_file_fd_fn fd_of, void *arg)
{
	size_t i;
	int fd = -1, rc = 0;

	for (i = sfs_slice_find(s, pos);
	     !rc && i < s->nextents && s->extents[i].pos < end; i++) {
		const struct sfs_extent *x = &s->extents[i];
		uint64_t a = pos > x->pos ? pos - x->pos : 0;
		uint64_t b = end - x->pos < x->len ? end - x->pos : x->len;

		rc = x->mem ? 0 : fd_of(arg, x->file, &fd);
		if (!rc)
			rc = fs_reply_add(
				r, x->mem ? (const char *)x->mem + a : NULL, fd,
				x->src + a, (size_t)(b - a));
		/* The slice's own bytes (a Parquet footer, re-encoded
		 * pages) go with its entry: reply from a copy of those, so
		 * that the kernel never holds what the daemon may free. */
		r->copy = r->copy || x->owned;
	}
	return rc;
}

/* Release what r holds. */
static void reply_free(struct fs *fs, struct fs_reply *r)
{
	size_t i;

	for (i = 0; i < r->nheld; i++)
		fdcache_put(&fs->fds, r->held[i]);
	free(r->held);
	free(r->bv);
}

/*
 * Whether libfuse splices r (fuse_send_data_iov): not below two pages of
 * bytes, which it copies itself, nor when its pipe cannot hold, by its
 * reckoning, the bytes and the 16-byte header, a page for the header, a
 * page a piece and one more.  Then libfuse copies the reply into memory
 * of its own, and a source that reads short there is sent short: such a
 * reply is copied here instead, where a short source answers EIO.
 * (Pieces that start and end inside pages can take more of the pipe than
 * that reckoning; libfuse then reads back what it spliced and copies:
 * the bytes are right, the copy is not counted.)
 */
static bool splices(const struct fs *fs, const struct fs_reply *r)
{
	return r->len >= SPLICE_MIN &&
	       r->len + sizeof(struct fuse_out_header) +
			       4096 * (r->bv->count + 2) <=
		       fs->pipe_size;
}

/*
 * (fs.h) A reply libfuse would not splice is read into memory
 * (libfuse's own fallback for fd buffers does the same, but allocates and
 * frees the whole reply per request, which costs more than this copy:
 * see the read path in docs/benchmarks.md).
 */
int fs_reply_send(fuse_req_t req, struct fs *fs, struct fs_reply *r, int rc)
{
	struct fuse_bufvec dst = FUSE_BUFVEC_INIT(r->len);
	char *buf = NULL;
	ssize_t got;

	if (rc) {
		fuse_reply_err(req, -rc);
		rc = 0;
	} else if (!r->len) {
		fuse_reply_buf(req, NULL, 0);
	} else if (!r->copy && splices(fs, r)) {
		atomic_fetch_add(&fs->bytes, r->len);
		fuse_reply_data(req, r->bv, 0);
	} else {
		buf = malloc(r->len);
		dst.buf[0].mem = buf;
		got = buf ? fuse_buf_copy(&dst, r->bv, 0) : -ENOMEM;
		if (got == (ssize_t)r->len) {
			atomic_fetch_add(&fs->bytes, r->len);
			/* a small reply is copied as libfuse would copy it */
			if (r->copy || r->len >= SPLICE_MIN)
				atomic_fetch_add(&fs->copied_reads, 1);
			fuse_reply_buf(req, buf, r->len);
		} else if (got == -ENOMEM) {
			fuse_reply_err(req, ENOMEM);
		} else {
			/* a source went short between the check and the
			 * read: never other bytes */
			fuse_reply_err(req, EIO);
			rc = -EIO;
		}
		free(buf);
	}
	reply_free(fs, r);
	return rc;
}

/* A read of a control file: from its open's snapshot, or with no_open
 * from the text its last GETATTR or LOOKUP gave the size of. */
static void read_control(fuse_req_t req, struct fs *fs, fuse_ino_t ino,
			 size_t size, off_t off, const struct handle *h)
{
	char *chunk = NULL;
	size_t len = 0;

	if (h) {
		size_t o = (size_t)off < h->len ? (size_t)off : h->len;

		len = size < h->len - o ? size : h->len - o;
		/* The kernel may release the handle as soon as it has the
		 * reply, before fuse_reply_buf returns: reply from a copy. */
		chunk = malloc(len + 1);
		if (chunk)
			memcpy(chunk, h->buf + o, len);
	} else if (control_read(fs, ino, size, off, &chunk, &len)) {
		chunk = NULL;
	}
	if (!chunk) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	fuse_reply_buf(req, chunk, len);
	free(chunk);
}

/* The descriptors of a slice's files being read into r: f's source, the
 * one file of a slice of a shard; or for a followed source's, the
 * stream's shards (extent.file), held in r. */
struct read_fds {
	struct fs *fs;
	struct file_ent *f;
	struct fs_reply *r;
	uint32_t file; /* r->held[r->nheld - 1]'s, when have */
	bool have;
};

static int file_fd(void *arg, uint32_t file, int *fd)
{
	struct read_fds *d = arg;
	int rc;

	if (d->f->src) {
		*fd = d->f->src->fd;
		return 0;
	}
	if (!d->have || d->file != file) {
		rc = follow_shard_hold(d->fs->follow, d->r, file);
		if (rc)
			return rc;
		d->have = true;
		d->file = file;
	}
	*fd = d->r->held[d->r->nheld - 1]->fd;
	return 0;
}

/* Reply to a read of [pos, end) of the file f, node of vr (pos < end <=
 * its size). */
static void read_slice(fuse_req_t req, struct fs *fs, struct view_ref *vr,
		       uint32_t node, struct file_ent *f, uint64_t pos,
		       uint64_t end)
{
	struct sfs_error err = { 0 };
	struct fs_reply r = { 0 };
	struct read_fds d = { .fs = fs, .f = f, .r = &r };
	int rc = 0;

	/* A shard truncated or rewritten under an open file would splice
	 * short or other bytes: check before every read.  The entry goes,
	 * so that the next read opens the source again: a shard put back as
	 * indexed reads again.  (A followed source's shards are checked as
	 * each is taken from the descriptor cache: follow_shard_hold.) */
	if (f->src && fdcache_check(f->src, f->src_size, f->src_mtime, &err)) {
		files_fail(fs, f, err.msg);
		fuse_reply_err(req, EIO);
		return;
	}
	atomic_fetch_add(&fs->reads, 1);
	if (vr->v->follow)
		rc = follow_read_check(fs->follow, req, vr->v, node, pos, end);
	if (!rc)
		rc = fs_reply_slice(&r, f->slice, pos, end, file_fd, &d);
	if (fs_reply_send(req, fs, &r, rc) != -EIO)
		return;
	if (vr->v->follow)
		follow_log_short(fs->follow, vr->v, node);
	else
		files_log_failure(/* once, whatever the byte */
				  fs,
				  "%s: a read failed: the shard went short while it was read (changed since it was indexed); rebuild the index with shardfs-index",
				  f->src->path);
}

/* A read of [off, off + size) of data file node of vr, off below its
 * size. */
static void read_file(fuse_req_t req, struct fs *fs, struct view_ref *vr,
		      uint32_t node, size_t size, uint64_t off)
{
	struct file_ent *f;
	bool built;
	int rc;

	rc = files_get(fs, vr, node, &f, &built);
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	if (built)
		prefetch_after(fs->prefetch, vr, node);
	read_slice(req, fs, vr, node, f, off,
		   f->slice->size - off < size ? f->slice->size : off + size);
	files_put(fs, f);
}

/* ---- reads waiting for a file that grows ---- */

/* a parked read says so in the log this often */
#define WAIT_LOG_SECONDS 30

struct fs_parked {
	fuse_req_t req;
	fuse_ino_t ino;
	uint64_t off;
	size_t size;
	double start, logged; /* now() */
	int rc; /* how it is answered: 0 through the read path, or -errno */
	struct fs_parked *next; /* fs.parked (fs.park_lock) */
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* q's reader waits no more for it (its view held, or gone). */
static void unpark(struct fs *fs, struct fs_parked *q)
{
	struct view_ref *vr;
	uint32_t node;

	vr = view_get(fs, q->ino, &node);
	if (!vr)
		return;
	if (vr->v && vr->v->follow)
		follow_wait(fs->follow, vr->v, node, false);
	view_unref(fs, vr);
}

/* An interrupted read (the reader was killed, or gave up): if it is
 * parked, it is answered EINTR.  libfuse calls this with the request
 * held: the pointer is only compared. */
static void interrupted(fuse_req_t req, void *data)
{
	struct fs *fs = data;
	struct fs_parked **pp, *q = NULL;

	pthread_mutex_lock(&fs->park_lock);
	for (pp = &fs->parked; *pp; pp = &(*pp)->next) {
		if ((*pp)->req == req) {
			q = *pp;
			*pp = q->next;
			unpark(fs, q);
			break;
		}
	}
	pthread_mutex_unlock(&fs->park_lock);
	if (q) {
		fuse_reply_err(req, EINTR);
		free(q);
	}
}

/* The size of node of the newest copy of ino's view, and whether it
 * grows; false when the view is gone. */
static bool newest_size(struct fs *fs, fuse_ino_t ino, uint64_t *size,
			bool *grows)
{
	struct view_ref *vr;
	uint32_t node;

	vr = view_get(fs, ino, &node);
	if (!vr)
		return false;
	*size = sfs_view_node(vr->v, node)->size;
	*grows = sfs_view_node(vr->v, node)->grows;
	view_unref(fs, vr);
	return true;
}

/* A read of ino at off, past the end of node of vr, which grows: parked
 * for fs_tend_parked to answer. */
static void park(fuse_req_t req, struct fs *fs, struct view_ref *vr,
		 uint32_t node, fuse_ino_t ino, size_t size, uint64_t off)
{
	struct fs_parked *q = calloc(1, sizeof(*q));
	uint64_t end;
	bool grows;
	int rc;

	if (!q) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	*q = (struct fs_parked){
		.req = req, .ino = ino, .off = off, .size = size, .start = now()
	};
	q->logged = q->start;
	/* before it is on the list: an interrupt that comes now finds it
	 * not there, and fuse_req_interrupted below sees it */
	fuse_req_interrupt_func(req, interrupted, fs);
	pthread_mutex_lock(&fs->park_lock);
	/* grown since (fs_view_grow tends the list after): served now */
	if (!newest_size(fs, ino, &end, &grows) || off < end || !grows) {
		pthread_mutex_unlock(&fs->park_lock);
		free(q);
		fs_read(req, ino, size, (off_t)off, NULL);
		return;
	}
	rc = follow_wait(fs->follow, vr->v, node, true);
	if (!rc && fuse_req_interrupted(req)) {
		follow_wait(fs->follow, vr->v, node, false);
		rc = -EINTR;
	}
	if (rc) {
		pthread_mutex_unlock(&fs->park_lock);
		free(q);
		fuse_reply_err(req, -rc);
		return;
	}
	q->next = fs->parked;
	fs->parked = q;
	pthread_mutex_unlock(&fs->park_lock);
}

/* Answer the reads of list q (their rc set), freed. */
static void answer(struct fs_parked *q)
{
	struct fs_parked *next;

	for (; q; q = next) {
		next = q->next;
		if (q->rc)
			fuse_reply_err(q->req, -q->rc);
		else
			fs_read(q->req, q->ino, q->size, (off_t)q->off, NULL);
		free(q);
	}
}

/* Parked reads whose bytes came, answered on a thread of their own. */
struct answers {
	struct fs *fs;
	struct fs_parked *reads;
};

static void *answer_aside(void *arg)
{
	struct answers *a = arg;
	struct fs *fs = a->fs;

	answer(a->reads);
	free(a);
	/* the last touch of fs: fs_answers_wait lets it go then */
	atomic_fetch_sub(&fs->answering, 1);
	return NULL;
}

/*
 * Answer the parked reads of list q whose bytes came (rc 0) through the
 * read path, aside: the caller is the watcher (fs_view_grow, its turn),
 * and a reply may wait as long as the source takes to give its bytes (a
 * splice from a slow source), which must not hold back the next window
 * nor the timeouts of the other parked reads.  Here when no thread can
 * be started.
 */
static void answer_reads(struct fs *fs, struct fs_parked *q)
{
	struct answers *a;
	pthread_t tid;

	if (!q)
		return;
	a = malloc(sizeof(*a));
	if (a) {
		*a = (struct answers){ .fs = fs, .reads = q };
		atomic_fetch_add(&fs->answering, 1);
		if (!fs_thread_start(&tid, answer_aside, a)) {
			pthread_detach(tid);
			return;
		}
		atomic_fetch_sub(&fs->answering, 1);
		free(a);
	}
	answer(q);
}

/* (fs.h) */
bool fs_answers_wait(struct fs *fs)
{
	double end = now() + FS_ANSWER_WAIT_MS / 1000.0;

	while (atomic_load(&fs->answering)) {
		if (fs->answers_stalled || now() >= end) {
			fs->answers_stalled = true;
			return false;
		}
		usleep(1000);
	}
	return true;
}

/* (fs.h) */
void fs_tend_parked(struct fs *fs, bool stopping)
{
	struct fs_parked *done = NULL, *reads = NULL, **pp, *q;
	double t = now();

	pthread_mutex_lock(&fs->park_lock);
	for (pp = &fs->parked; (q = *pp);) {
		bool out = t - q->start >= fs->mount.follow_timeout, grows;
		struct view_ref *vr;
		uint64_t end;
		uint32_t node;

		if (stopping) {
			q->rc = -EINTR;
		} else if (!newest_size(fs, q->ino, &end, &grows) ||
			   q->off < end || !grows) {
			q->rc = 0;
		} else if (out || t - q->logged >= WAIT_LOG_SECONDS) {
			vr = view_get(fs, q->ino, &node);
			if (vr) {
				follow_wait_log(fs->follow, vr->v, node,
						t - q->start, out);
				view_unref(fs, vr);
			}
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
		unpark(fs, q);
		/* errors are answered here, at once; reads aside */
		if (q->rc) {
			q->next = done;
			done = q;
		} else {
			q->next = reads;
			reads = q;
		}
	}
	pthread_mutex_unlock(&fs->park_lock);
	answer(done);
	answer_reads(fs, reads);
}

/* (fs.h) */
bool fs_parked_any(struct fs *fs)
{
	bool any;

	pthread_mutex_lock(&fs->park_lock);
	any = fs->parked != NULL;
	pthread_mutex_unlock(&fs->park_lock);
	return any;
}

/* (fs.h) */
void fs_parked_free(struct fs *fs)
{
	struct fs_parked *q;

	fs_answers_wait(fs);
	while ((q = fs->parked)) {
		fs->parked = q->next;
		free(q);
	}
}

void fs_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
	     struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct view_ref *vr;
	uint32_t node;

	if (ino == FS_INO_CTL) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	if (control_is(ino)) {
		read_control(req, fs, ino, size, off,
			     fi ? (const struct handle *)(uintptr_t)fi->fh :
				  NULL);
		return;
	}
	/* the view the inode was looked up in: the kernel holds the inode
	 * while the file is open, and with it the view (its newest copy,
	 * for a followed source's) */
	vr = file_view(req, fs, ino, &node);
	if (!vr)
		return;
	if (off >= 0 && (uint64_t)off < sfs_view_node(vr->v, node)->size)
		read_file(req, fs, vr, node, size, (uint64_t)off);
	else if (off >= 0 && sfs_view_node(vr->v, node)->grows)
		/* its bytes are still to come: a read that must wait holds
		 * no thread */
		park(req, fs, vr, node, ino, size, (uint64_t)off);
	else
		fuse_reply_buf(req, NULL, 0);
	view_unref(fs, vr);
}

void fs_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	handle_free(fs_of(req), (struct handle *)(uintptr_t)fi->fh);
	fuse_reply_err(req, 0);
}
