/*
 * The nodes of a followed source (follow=1): its rank and worker
 * directories, window files and streams, which the operations of ops.c
 * and read.c ask here for every inode that is not a control file (the
 * control files, status, consumed and ack among them, are control.c's);
 * the inode numbers are explained in follow.c.
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

#define KIND_SHIFT 60
#define K_RANK 1ULL
#define K_WORKER 2ULL
#define K_STREAM 3ULL
#define K_WINDOW 4ULL
/* a waiting read says so in the log this often */
#define WAIT_LOG_SECONDS 30
#define READ_MAX (1 << 20)

/* ---- the tree ---- */

static fuse_ino_t ino_of(uint64_t kind, uint64_t v)
{
	return (fuse_ino_t)(kind << KIND_SHIFT | v);
}

static uint64_t kind_of(fuse_ino_t ino)
{
	return (uint64_t)ino >> KIND_SHIFT;
}

static uint64_t val_of(fuse_ino_t ino)
{
	return (uint64_t)ino & ((1ULL << KIND_SHIFT) - 1);
}

/* The reader a worker directory, stream or window inode is of, or NULL. */
static struct freader *reader_of(struct fw *w, fuse_ino_t ino)
{
	uint64_t k = kind_of(ino), v = val_of(ino);

	if (k == K_WINDOW)
		v >>= 32;
	if ((k != K_WORKER && k != K_STREAM && k != K_WINDOW) ||
	    v >= w->nreaders)
		return NULL;
	return &w->readers[v];
}

static bool rank_shown(struct fw *w, uint64_t rank)
{
	size_t i;

	for (i = 0; i < w->nranks; i++)
		if (w->ranks[i] == rank)
			return true;
	return false;
}

/* A file's mode and owner: the source's for the shards it serves (with
 * allow_other, default_permissions refuses whom the source would), else
 * the mount's owner's and 0444. */
static void set_access(struct stat *st, const struct sfs_access *a)
{
	st->st_mode = S_IFREG | (a->known ? a->mode : 0444u);
	if (a->known) {
		st->st_uid = a->uid;
		st->st_gid = a->gid;
	}
}

/*
 * The caller of req may read bytes a file of access a serves, as the
 * kernel's default_permissions would decide: the stream's modes narrow as
 * windows with other shards come, so a stream opened before is checked
 * again at each window it reads (supplementary groups read only when the
 * group's bits decide).
 */
static bool may_read(fuse_req_t req, const struct sfs_access *a)
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

/* Attributes of ino, with w->lock; *timeout: how long they hold. */
static int stat_of(struct fw *w, fuse_ino_t ino, struct stat *st,
		   double *timeout)
{
	struct fs *fs = w->fs;
	uint64_t k = kind_of(ino), v = val_of(ino);
	struct freader *r = reader_of(w, ino);

	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_uid = fs->uid;
	st->st_gid = fs->gid;
	st->st_mtime = st->st_ctime = st->st_atime = fs->mounted;
	*timeout = 0;
	if (ino == FS_INO_ROOT || k == K_RANK || k == K_WORKER) {
		if ((k == K_RANK && !rank_shown(w, v)) || (k == K_WORKER && !r))
			return -ENOENT;
		st->st_mode = S_IFDIR | 0555;
		st->st_nlink = 2;
		return 0;
	}
	if (!r)
		return -ENOENT;
	st->st_nlink = 1;
	if (k == K_STREAM) {
		set_access(st, &r->stream_acc);
		st->st_size = (off_t)follow_reader_size(w, r);
		if (w->complete && w->nwins)
			st->st_size += (off_t)w->wins[0]->trailer_len;
		return 0;
	}
	v &= 0xffffffffULL;
	if (v >= w->nwins)
		return -ENOENT;
	if (v < w->hidden) /* consumed and deleted: as a view's node gone */
		return -ESTALE;
	set_access(st, &r->acc[v]);
	st->st_size =
		(off_t)(r->at[v + 1] - r->at[v] + w->wins[v]->trailer_len);
	*timeout = VIEW_TIMEOUT;
	return 0;
}

/* The inode called name in parent, with w->lock; 0 when none. */
static fuse_ino_t child(struct fw *w, fuse_ino_t parent, const char *name)
{
	uint64_t k = kind_of(parent), v;
	const struct sfs_plan_opts *o = &w->fs->vopts.options.plan;
	char tail[32];
	char *end;
	size_t i;

	if (parent == FS_INO_ROOT) {
		v = strtoull(name, &end, 10);
		if (*name < '0' || *name > '9' || *end ||
		    (name[0] == '0' && name[1]) || !rank_shown(w, v))
			return 0;
		return ino_of(K_RANK, v);
	}
	if (k == K_RANK) {
		v = strtoull(name, &end, 10);
		if (*name < '0' || *name > '9' || *end ||
		    (name[0] == '0' && name[1]) || v >= o->workers)
			return 0;
		for (i = 0; i < w->nreaders; i++)
			if (w->readers[i].rank == val_of(parent) &&
			    w->readers[i].worker == v)
				return ino_of(K_WORKER, i);
		return 0;
	}
	if (k != K_WORKER)
		return 0;
	snprintf(tail, sizeof(tail), "stream.%s", w->ext);
	if (!strcmp(name, tail))
		return ino_of(K_STREAM, val_of(parent));
	if (strncmp(name, "window-", 7) || name[7] < '0' || name[7] > '9')
		return 0;
	v = strtoull(name + 7, &end, 10);
	snprintf(tail, sizeof(tail), ".%s", w->ext);
	if (strcmp(end, tail) || end - name != 15 || v < w->first ||
	    v - w->first >= w->nwins || v - w->first < w->hidden)
		return 0;
	return ino_of(K_WINDOW, val_of(parent) << 32 | (v - w->first));
}

void follow_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fw *w = fs_of(req)->follow;
	struct fuse_entry_param e = { 0 };
	double t = 0;
	int rc;

	pthread_mutex_lock(&w->lock);
	e.ino = child(w, parent, name);
	rc = e.ino ? stat_of(w, e.ino, &e.attr, &t) : -ENOENT;
	pthread_mutex_unlock(&w->lock);
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	e.attr_timeout = t;
	e.entry_timeout = kind_of(e.ino) == K_WINDOW ? VIEW_TIMEOUT : 1.0;
	fuse_reply_entry(req, &e);
}

void follow_getattr(fuse_req_t req, fuse_ino_t ino)
{
	struct fw *w = fs_of(req)->follow;
	struct stat st;
	double t = 0;
	int rc;

	pthread_mutex_lock(&w->lock);
	rc = stat_of(w, ino, &st, &t);
	pthread_mutex_unlock(&w->lock);
	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_attr(req, &st, t);
}

/* Entry i of directory ino (with w->lock): its name into name, its inode;
 * 0 past the last. */
static fuse_ino_t entry(struct fw *w, fuse_ino_t ino, size_t i, char *name,
			size_t len)
{
	uint64_t k = kind_of(ino);

	if (i == 0 || i == 1) {
		snprintf(name, len, i ? ".." : ".");
		return ino;
	}
	i -= 2;
	if (ino == FS_INO_ROOT) {
		if (i == 0) {
			snprintf(name, len, ".shardfs");
			return FS_INO_CTL;
		}
		if (i - 1 >= w->nranks)
			return 0;
		snprintf(name, len, "%u", w->ranks[i - 1]);
		return ino_of(K_RANK, w->ranks[i - 1]);
	}
	if (k == K_RANK) {
		if (i >= w->fs->vopts.options.plan.workers)
			return 0;
		snprintf(name, len, "%zu", i);
		return child(w, ino, name);
	}
	if (k != K_WORKER)
		return 0;
	/* the windows but those consumed and deleted, then the stream */
	i += w->hidden;
	if (i < w->nwins) {
		snprintf(name, len, "window-%08" PRIu64 ".%s", w->first + i,
			 w->ext);
		return ino_of(K_WINDOW, val_of(ino) << 32 | i);
	}
	if (i > w->nwins)
		return 0;
	snprintf(name, len, "stream.%s", w->ext);
	return ino_of(K_STREAM, val_of(ino));
}

/* ino is one of the tree's directories; with w->lock. */
static bool is_dir(struct fw *w, fuse_ino_t ino)
{
	uint64_t k = kind_of(ino);

	return ino == FS_INO_ROOT ||
	       (k == K_RANK && rank_shown(w, val_of(ino))) ||
	       (k == K_WORKER && reader_of(w, ino));
}

void follow_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fw *w = fs_of(req)->follow;
	struct stat st;
	double t;
	int rc;

	pthread_mutex_lock(&w->lock);
	rc = is_dir(w, ino) ? 0 : stat_of(w, ino, &st, &t) ? -ENOENT : -ENOTDIR;
	pthread_mutex_unlock(&w->lock);
	fi->fh = 0;
	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_open(req, fi);
}

void follow_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off)
{
	struct fw *w = fs_of(req)->follow;
	char *buf = malloc(size), name[64];
	size_t used = 0;
	fuse_ino_t e;

	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	pthread_mutex_lock(&w->lock);
	if (off == 0 && !is_dir(w, ino)) {
		pthread_mutex_unlock(&w->lock);
		free(buf);
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	for (;; off++) {
		struct stat st = { 0 };
		size_t n;

		e = entry(w, ino, (size_t)off, name, sizeof(name));
		if (!e)
			break;
		st.st_ino = e;
		st.st_mode = kind_of(e) == K_STREAM || kind_of(e) == K_WINDOW ?
				     S_IFREG :
				     S_IFDIR;
		n = fuse_add_direntry(req, buf + used, size - used, name, &st,
				      off + 1);
		if (n > size - used)
			break;
		used += n;
	}
	pthread_mutex_unlock(&w->lock);
	fuse_reply_buf(req, buf, used);
	free(buf);
}

void follow_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fw *w = fs_of(req)->follow;
	uint64_t k = kind_of(ino);
	int rc = 0;

	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		fuse_reply_err(req, EROFS);
		return;
	}
	pthread_mutex_lock(&w->lock);
	if (k == K_STREAM)
		fi->direct_io = 1; /* its size changes; reads past it wait */
	else if (k == K_WINDOW && (val_of(ino) & 0xffffffffULL) < w->hidden)
		rc = ESTALE; /* consumed and deleted */
	else if (k == K_WINDOW)
		fi->keep_cache = 1;
	else if (!reader_of(w, ino))
		rc = ENOENT;
	pthread_mutex_unlock(&w->lock);
	if (rc) {
		fuse_reply_err(req, rc);
		return;
	}
	fuse_reply_open(req, fi);
}

/* What the status shows of the stream and its readers, taken under
 * w->lock (copies: nothing of it changes under the build). */
struct status_snap {
	uint64_t nshards, nsamples, bytes, nwins, padding, dropped;
	bool ended, complete;
	char *last, *cons, *logp; /* escaped (sfs_name_escape) or NULL */
	struct sfs_status_follow_reader *r;
};

static void snap_free(struct status_snap *sn)
{
	free(sn->last);
	free(sn->cons);
	free(sn->logp);
	free(sn->r);
}

/* sn from w now; with w->lock.  0 or -ENOMEM. */
static int snap_take(struct fw *w, struct status_snap *sn)
{
	size_t i;

	*sn = (struct status_snap){ .nshards = w->nshards,
				    .nsamples = w->nsamples,
				    .nwins = w->nwins,
				    .padding = w->padding,
				    .dropped = w->dropped,
				    .ended = w->ended,
				    .complete = w->complete };
	for (i = 0; i < w->nshards; i++)
		sn->bytes += w->shards[i].size;
	/* names as JSON holds them (sfs_name_escape, docs/follow.md) */
	if (w->nshards)
		sn->last =
			sfs_name_escape(w->shards[w->nshards - 1].path, true);
	if (w->consumed)
		sn->cons =
			sfs_name_escape(w->shards[w->consumed - 1].path, true);
	if (w->log_kept && w->log_path)
		sn->logp = sfs_name_escape(w->log_path, false);
	sn->r = calloc(w->nreaders, sizeof(*sn->r));
	if (!sn->r || (w->nshards && !sn->last) || (w->consumed && !sn->cons) ||
	    (w->log_kept && w->log_path && !sn->logp)) {
		snap_free(sn);
		return -ENOMEM;
	}
	for (i = 0; i < w->nreaders; i++) {
		const struct freader *r = &w->readers[i];

		sn->r[i] = (struct sfs_status_follow_reader){
			.rank = r->rank,
			.worker = r->worker,
			.window = r->window,
			.windows_read = w->first + r->done,
			.waiting = r->waiting
		};
	}
	return 0;
}

/* The status of sn but its counters (sfs_status_follow_head), built
 * without w->lock: the rest of what it shows never changes after the
 * mount. */
static char *status_head(struct fw *w, const struct status_snap *sn,
			 const struct sfs_status_in *in)
{
	struct sfs_status_follow f = {
		.format = w->ext,
		.last_shard = sn->last,
		.consumed = sn->cons,
		.log = sn->logp,
		.window = w->n,
		.shards = sn->nshards,
		.samples = sn->nsamples,
		.bytes = sn->bytes,
		.first_window = w->first,
		.windows = sn->nwins,
		.per_window = w->n / w->nreaders_all,
		.padding = sn->padding,
		.dropped = sn->dropped,
		.ended = sn->ended,
		.complete = sn->complete,
		.readers = sn->r,
		.nreaders = w->nreaders,
	};
	char *src, *idx = NULL, *s = NULL;

	src = sfs_name_escape(w->f->source, false);
	if (in->index_dir)
		idx = sfs_name_escape(in->index_dir, false);
	f.source = src;
	f.index_dir = idx;
	if (src && (!in->index_dir || idx))
		s = sfs_status_follow_head(in, &f);
	free(src);
	free(idx);
	return s;
}

/*
 * (fs.h) The head is built only when what it shows changed
 * (w->status_gen: a window, an ack, a wait) and kept, under w->text_lock:
 * the lock reads take is held only to copy what it shows, never to build
 * it.
 */
char *follow_status_head(struct fw *w, const struct sfs_status_in *in)
{
	struct status_snap sn;
	uint64_t gen;
	char *t = NULL;

	pthread_mutex_lock(&w->text_lock);
	pthread_mutex_lock(&w->lock);
	gen = w->status_gen;
	if (w->status_text && w->status_text_gen == gen) {
		pthread_mutex_unlock(&w->lock);
		goto copy;
	}
	if (snap_take(w, &sn)) {
		pthread_mutex_unlock(&w->lock);
		goto out;
	}
	pthread_mutex_unlock(&w->lock);
	t = status_head(w, &sn, in);
	snap_free(&sn);
	if (!t)
		goto out;
	free(w->status_text);
	w->status_text = t;
	w->status_text_gen = gen;
copy:
	t = strdup(w->status_text);
out:
	pthread_mutex_unlock(&w->text_lock);
	return t;
}

/* Room for n shards in w->failed, the new ones zero; with w->lock. */
static int grow_failed(struct fw *w, size_t n)
{
	size_t old = w->failed_cap;

	if (SFS_GROW(w->failed, w->failed_cap, n))
		return -ENOMEM;
	memset(w->failed + old, 0, w->failed_cap - old);
	return 0;
}

/*
 * The bytes of a read as the main tree's reads answer them (read.c):
 * pieces of shards, open in the descriptor cache (fdcache.c) and held
 * until the reply is sent, so that the kernel can splice them; memory
 * only for the bytes a format adds (a tar window's end-of-archive).
 */
struct pieces {
	struct fuse_bufvec *bv; /* bv->count pieces, room for cap */
	size_t cap;
	struct fdcache_ent **held; /* the shards the pieces read */
	size_t nheld, held_cap;
	size_t shard; /* held[nheld - 1]'s shard in the stream */
	size_t len; /* bytes in all pieces */
};

/* One more piece of n bytes: of memory mem, or of held[nheld - 1] at
 * src.  0 or -ENOMEM. */
static int piece_add(struct pieces *p, const void *mem, uint64_t src, size_t n)
{
	struct fuse_buf *b;

	if (!p->bv || p->bv->count == p->cap) {
		size_t cap = p->cap ? 2 * p->cap : 8;
		struct fuse_bufvec *bv =
			realloc(p->bv, sizeof(*bv) + cap * sizeof(bv->buf[0]));

		if (!bv)
			return -ENOMEM;
		if (!p->bv)
			*bv = (struct fuse_bufvec){ 0 };
		p->bv = bv;
		p->cap = cap;
	}
	b = &p->bv->buf[p->bv->count++];
	memset(b, 0, sizeof(*b));
	b->size = n;
	if (mem) {
		b->mem = (void *)mem;
	} else {
		b->flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK |
			   FUSE_BUF_FD_RETRY;
		b->fd = p->held[p->nheld - 1]->fd;
		b->pos = (off_t)src;
	}
	p->len += n;
	return 0;
}

/* Release what p holds. */
static void pieces_free(struct fs *fs, struct pieces *p)
{
	size_t i;

	for (i = 0; i < p->nheld; i++)
		fdcache_put(&fs->fds, p->held[i]);
	free(p->held);
	free(p->bv);
}

/*
 * Shard i of the stream open in p (held[nheld - 1]): taken from the
 * descriptor cache, which checks that it is as it entered the stream
 * (size, mtime, still named).  Returns 0, or -EIO (logged once per shard
 * and cause: deleted, or changed) or -ENOMEM.
 */
static int piece_shard(struct fw *w, struct pieces *p, size_t i)
{
	struct fs *fs = w->fs;
	struct sfs_error err = { 0 };
	struct fdcache_ent *e;
	const char *path;
	uint64_t size;
	int64_t mtime;
	unsigned char why;
	bool say;
	int rc;

	if (p->nheld && p->shard == i)
		return 0;
	if (SFS_GROW(p->held, p->held_cap, p->nheld + 1))
		return -ENOMEM;
	/* the name lives as long as w; the array is grown by the watcher */
	pthread_mutex_lock(&w->lock);
	path = w->shards[i].path;
	size = w->shards[i].size;
	mtime = w->shards[i].mtime_ns;
	pthread_mutex_unlock(&w->lock);
	e = fdcache_get(&fs->fds, path, size, mtime, 0, &rc, &err);
	if (e) {
		p->held[p->nheld++] = e;
		p->shard = i;
		return 0;
	}
	if (rc == -ENOMEM)
		return rc;
	why = faccessat(w->f->srcfd, path, F_OK, AT_SYMLINK_NOFOLLOW) &&
			      errno == ENOENT ?
		      1 :
		      2;
	pthread_mutex_lock(&w->lock);
	say = !grow_failed(w, i + 1) && w->failed[i] != why;
	if (say)
		w->failed[i] = why;
	pthread_mutex_unlock(&w->lock);
	atomic_fetch_add(&fs->errors, 1);
	if (say)
		fs_log(fs, LOG_ERR,
		       "%s/%s: %s before every reader read it (it entered the stream with %" PRIu64
		       " bytes): EIO for its bytes; a shard must not change or go before it is consumed (docs/follow.md)",
		       w->f->source, path,
		       why == 1 ? "deleted" : "changed or truncated", size);
	return -EIO;
}

/* Bytes [pos, pos + len) of reader ri's file of window win (with its
 * trailer) into p, outside w->lock: a window never changes.  Returns 0,
 * -EIO (logged) or -ENOMEM. */
static int window_pieces(struct fw *w, const struct sfs_window *win, size_t ri,
			 struct pieces *p, uint64_t pos, size_t len)
{
	const struct sfs_window_reader *r = &win->readers[ri];
	size_t done = 0, x;
	int rc;

	if (pos < r->size && r->n) {
		for (x = sfs_window_find(r, pos); x < r->n && done < len; x++) {
			const struct sfs_wext *e = &r->ext[x];
			uint64_t in = pos + done - e->pos;
			size_t n = (size_t)(e->len - in) < len - done ?
					   (size_t)(e->len - in) :
					   len - done;

			rc = e->mem ? 0 : piece_shard(w, p, e->shard);
			if (!rc)
				rc = piece_add(p,
					       e->mem ? (const char *)e->mem +
								in :
							NULL,
					       e->src + in, n);
			if (rc)
				return rc;
			done += n;
		}
	}
	if (done < len && pos + done >= r->size &&
	    pos + done < r->size + win->trailer_len) {
		uint64_t in = pos + done - r->size;

		x = (size_t)(win->trailer_len - in) < len - done ?
			    (size_t)(win->trailer_len - in) :
			    len - done;
		return piece_add(p, (const char *)win->trailer + in, 0, x);
	}
	return 0;
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
	uint64_t end, at, in;
	size_t i, n;
	int rc;

	pthread_mutex_lock(&w->lock);
	while (p->len < size && pos + p->len < follow_reader_size(w, r)) {
		const struct sfs_window *win;
		uint64_t from, to;

		/* r->at is grown (moved) by the watcher: what of it the read
		 * needs is taken under the lock */
		at = pos + p->len;
		i = window_at(w, r, at);
		win = w->wins[i];
		from = r->at[i];
		to = r->at[i + 1];
		if (r->window != w->first + i)
			w->status_gen++;
		r->window = w->first + i;
		if (!may_read(req, &r->acc[i])) {
			pthread_mutex_unlock(&w->lock);
			return -EACCES;
		}
		pthread_mutex_unlock(&w->lock);
		/* within the window, without its trailer */
		n = (size_t)(to - at) < size - p->len ? (size_t)(to - at) :
							size - p->len;
		rc = window_pieces(w, win, ri, p, at - from, n);
		if (rc)
			return rc;
		pthread_mutex_lock(&w->lock);
	}
	/* after the last window: the stream's ending */
	end = follow_reader_size(w, r);
	last = w->complete && w->nwins ? w->wins[w->nwins - 1] : NULL;
	pthread_mutex_unlock(&w->lock);
	if (!last || p->len >= size || pos + p->len < end)
		return 0;
	in = pos + p->len - end;
	if (in >= last->trailer_len)
		return 0;
	n = (size_t)(last->trailer_len - in) < size - p->len ?
		    (size_t)(last->trailer_len - in) :
		    size - p->len;
	return piece_add(p, (const char *)last->trailer + in, 0, n);
}

/* Answer req with p's bytes, or rc; frees p.  Spliced as read.c's
 * replies, or read into memory when too large for the splice pipe. */
static void reply_pieces(struct fw *w, fuse_req_t req, struct pieces *p, int rc)
{
	struct fs *fs = w->fs;
	char *buf = NULL;
	ssize_t got;

	if (rc) {
		fuse_reply_err(req, -rc);
	} else if (!p->len) {
		fuse_reply_buf(req, NULL, 0);
	} else if (p->len <= fs->splice_max) {
		atomic_fetch_add(&fs->bytes, p->len);
		fuse_reply_data(req, p->bv, FUSE_BUF_SPLICE_MOVE);
	} else {
		struct fuse_bufvec dst = FUSE_BUFVEC_INIT(p->len);

		buf = malloc(p->len);
		dst.buf[0].mem = buf;
		got = buf ? fuse_buf_copy(&dst, p->bv, 0) : -ENOMEM;
		if (got == (ssize_t)p->len) {
			atomic_fetch_add(&fs->bytes, p->len);
			atomic_fetch_add(&fs->copied_reads, 1);
			fuse_reply_buf(req, buf, p->len);
		} else {
			/* the shard went short between the check and the
			 * read: never other bytes */
			atomic_fetch_add(&fs->errors, 1);
			fuse_reply_err(req, got < 0 && got != -EIO ? (int)-got :
								     EIO);
		}
		free(buf);
	}
	pieces_free(fs, p);
}

/* Answer a read of reader ri's stream whose bytes are there (or the
 * stream complete); without w->lock. */
static void serve_stream(struct fw *w, fuse_req_t req, size_t ri, uint64_t pos,
			 size_t size)
{
	struct pieces p = { 0 };

	reply_pieces(w, req, &p, stream_pieces(w, req, ri, &p, pos, size));
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

void follow_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off)
{
	struct fs *fs = fs_of(req);
	struct fw *w = fs->follow;
	uint64_t k = kind_of(ino), pos = (uint64_t)off;
	const struct sfs_window *win;
	struct pieces p = { 0 };
	struct freader *r;
	size_t ri, i;
	bool ready;

	size = size < READ_MAX ? size : READ_MAX;
	atomic_fetch_add(&fs->reads, 1);
	pthread_mutex_lock(&w->lock);
	r = reader_of(w, ino);
	if (!r || (k != K_STREAM && k != K_WINDOW)) {
		pthread_mutex_unlock(&w->lock);
		fuse_reply_err(req, r ? EISDIR : ENOENT);
		return;
	}
	ri = (size_t)(r - w->readers);
	if (k == K_STREAM) {
		/* a read that must wait holds no thread: it is parked */
		ready = pos < follow_reader_size(w, r) || w->complete;
		pthread_mutex_unlock(&w->lock);
		if (ready)
			serve_stream(w, req, ri, pos, size);
		else
			park(w, req, ri, pos, size);
		return;
	}
	i = (size_t)(val_of(ino) & 0xffffffffULL);
	win = i < w->hidden ? NULL : w->wins[i];
	pthread_mutex_unlock(&w->lock);
	if (!win) { /* consumed and deleted */
		fuse_reply_err(req, ESTALE);
		return;
	}
	/* reads never consume: acks do (.shardfs/ack) */
	reply_pieces(w, req, &p, window_pieces(w, win, ri, &p, pos, size));
}

/* (follow_i.h) */
void follow_hide_consumed(struct fw *w)
{
	const char **names = NULL;
	size_t from, to, k, i, n = 0, cap = 0, hidden;
	bool gone = true;

	/* the windows after those hidden whose shards are all consumed, and
	 * those shards' names (they live as long as w) */
	pthread_mutex_lock(&w->lock);
	from = w->hidden;
	for (to = from; to < w->nwins && w->wins[to]->end_shard <= w->consumed;
	     to++) {
		for (i = w->wins[to]->first_shard; i < w->wins[to]->end_shard;
		     i++) {
			if (SFS_GROW(names, cap, n + 1))
				break;
			names[n++] = w->shards[i].path;
		}
		if (i < w->wins[to]->end_shard)
			break;
	}
	pthread_mutex_unlock(&w->lock);
	/* which of them are gone from the source: outside the lock (a stat
	 * each, on a network file system an RPC) */
	hidden = from;
	for (k = from, i = 0; gone && k < to; k++) {
		size_t end =
			i + (w->wins[k]->end_shard - w->wins[k]->first_shard);

		for (; gone && i < end; i++) {
			gone = faccessat(w->f->srcfd, names[i], F_OK,
					 AT_SYMLINK_NOFOLLOW) &&
			       errno == ENOENT;
			/* its descriptor closed, its space freed */
			if (gone)
				fdcache_forget(&w->fs->fds, names[i]);
		}
		if (gone)
			hidden = k + 1;
	}
	free(names);
	if (hidden == from)
		return;
	pthread_mutex_lock(&w->lock);
	w->hidden = hidden;
	pthread_mutex_unlock(&w->lock);
	/* the kernel forgets their names (it keeps a window's for long) */
	for (k = from; w->fs->se && k < hidden; k++) {
		char name[64];
		int len = snprintf(name, sizeof(name),
				   "window-%08" PRIu64 ".%s", w->first + k,
				   w->ext);

		for (i = 0; i < w->nreaders; i++)
			fuse_lowlevel_notify_inval_entry(w->fs->se,
							 ino_of(K_WORKER, i),
							 name, (size_t)len);
	}
}
