/*
 * The tree of a followed source (follow=1) and its FUSE operations; the
 * inode numbers are explained in follow.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
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
#include "shardfs/util.h"

#include "follow_i.h"

#define INO_CTL 2
#define INO_STATUS 3
#define INO_CONSUMED 4
#define INO_ACK 5
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

static int control_stat_of(struct fw *w, fuse_ino_t ino, struct stat *st);

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
	if (ino == FS_INO_ROOT || ino == INO_CTL || k == K_RANK ||
	    k == K_WORKER) {
		if ((k == K_RANK && !rank_shown(w, v)) || (k == K_WORKER && !r))
			return -ENOENT;
		st->st_mode = S_IFDIR | 0555;
		st->st_nlink = 2;
		return 0;
	}
	if (ino == INO_ACK) {
		/* written by the job (0644, the mount's owner's: under
		 * allow_other nobody else may), reads empty */
		st->st_mode = S_IFREG | 0644;
		st->st_nlink = 1;
		return 0;
	}
	if (ino == INO_STATUS || ino == INO_CONSUMED)
		return -EINVAL; /* control_stat_of, without the lock */
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
		if (!strcmp(name, ".shardfs"))
			return INO_CTL;
		v = strtoull(name, &end, 10);
		if (*name < '0' || *name > '9' || *end ||
		    (name[0] == '0' && name[1]) || !rank_shown(w, v))
			return 0;
		return ino_of(K_RANK, v);
	}
	if (parent == INO_CTL)
		return !strcmp(name, "status")	 ? INO_STATUS :
		       !strcmp(name, "consumed") ? INO_CONSUMED :
		       !strcmp(name, "ack")	 ? INO_ACK :
						   0;
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
	    v - w->first >= w->nwins)
		return 0;
	return ino_of(K_WINDOW, val_of(parent) << 32 | (v - w->first));
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fw *w = fs_of(req)->follow;
	struct fuse_entry_param e = { 0 };
	double t;
	int rc;

	pthread_mutex_lock(&w->lock);
	e.ino = child(w, parent, name);
	t = 0;
	rc = !e.ino ? -ENOENT :
	     e.ino == INO_STATUS || e.ino == INO_CONSUMED ?
		      0 :
		      stat_of(w, e.ino, &e.attr, &t);
	pthread_mutex_unlock(&w->lock);
	if (!rc && (e.ino == INO_STATUS || e.ino == INO_CONSUMED))
		rc = control_stat_of(w, e.ino, &e.attr);
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	e.attr_timeout = t;
	e.entry_timeout = kind_of(e.ino) == K_WINDOW ? VIEW_TIMEOUT : 1.0;
	fuse_reply_entry(req, &e);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct fw *w = fs_of(req)->follow;
	struct stat st;
	double t;
	int rc;

	(void)fi;
	t = 0;
	if (ino == INO_STATUS || ino == INO_CONSUMED) {
		rc = control_stat_of(w, ino, &st);
	} else {
		pthread_mutex_lock(&w->lock);
		rc = stat_of(w, ino, &st, &t);
		pthread_mutex_unlock(&w->lock);
	}
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
			return INO_CTL;
		}
		if (i - 1 >= w->nranks)
			return 0;
		snprintf(name, len, "%u", w->ranks[i - 1]);
		return ino_of(K_RANK, w->ranks[i - 1]);
	}
	if (ino == INO_CTL) {
		static const char *const names[] = { "status", "consumed",
						     "ack" };
		static const fuse_ino_t inos[] = { INO_STATUS, INO_CONSUMED,
						   INO_ACK };

		if (i > 2)
			return 0;
		snprintf(name, len, "%s", names[i]);
		return inos[i];
	}
	if (k == K_RANK) {
		if (i >= w->fs->vopts.options.plan.workers)
			return 0;
		snprintf(name, len, "%zu", i);
		return child(w, ino, name);
	}
	if (k != K_WORKER)
		return 0;
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

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	struct fw *w = fs_of(req)->follow;
	char *buf = malloc(size), name[64];
	size_t used = 0;
	fuse_ino_t e;

	(void)fi;
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	pthread_mutex_lock(&w->lock);
	if (off == 0 && kind_of(ino) != K_WORKER && kind_of(ino) != K_RANK &&
	    ino != FS_INO_ROOT && ino != INO_CTL) {
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
		st.st_mode = kind_of(e) == K_STREAM || kind_of(e) == K_WINDOW ||
					     e == INO_STATUS ||
					     e == INO_CONSUMED || e == INO_ACK ?
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

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fw *w = fs_of(req)->follow;
	uint64_t k = kind_of(ino);

	if (ino == INO_ACK) {
		fi->direct_io = 1;
		fuse_reply_open(req, fi);
		return;
	}
	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		fuse_reply_err(req, EROFS);
		return;
	}
	pthread_mutex_lock(&w->lock);
	if (k == K_STREAM || ino == INO_STATUS || ino == INO_CONSUMED)
		fi->direct_io = 1; /* its size changes; reads past it wait */
	else if (k == K_WINDOW)
		fi->keep_cache = 1;
	else if (!reader_of(w, ino))
		k = 0;
	pthread_mutex_unlock(&w->lock);
	if (!k && ino != INO_STATUS && ino != INO_CONSUMED) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	fuse_reply_open(req, fi);
}

/* What the status shows of the stream and its readers, taken under
 * w->lock (copies: nothing of it changes under the build). */
struct status_snap {
	uint64_t nshards, nsamples, nwins, padding, dropped;
	bool ended, complete;
	char *last, *cons, *logp; /* escaped (sfs_name_escape) or NULL */
	struct sreader {
		uint32_t rank, worker;
		uint64_t window, done;
		bool waiting;
	} * r;
	uint64_t gen;
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
				    .complete = w->complete,
				    .gen = w->status_gen };
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

		sn->r[i] = (struct sreader){ r->rank, r->worker, r->window,
					     r->done, r->waiting };
	}
	return 0;
}

/* The status text of sn (JSON and a newline), built without w->lock:
 * the rest of what it shows never changes after the mount. */
static char *status_json(struct fw *w, const struct status_snap *sn)
{
	json_t *readers = json_array(), *j, *opts;
	char *s = NULL, *text, *src, *idx;
	size_t i;

	for (i = 0; readers && i < w->nreaders; i++) {
		const struct sreader *r = &sn->r[i];

		json_array_append_new(
			readers,
			json_pack("{s:I, s:I, s:I, s:I, s:b}", "rank",
				  (json_int_t)r->rank, "worker",
				  (json_int_t)r->worker, "window",
				  (json_int_t)r->window, "windows_read",
				  (json_int_t)(w->first + r->done), "waiting",
				  r->waiting));
	}
	/* the plan inputs, as the normal status gives them, so that an
	 * auditor can plan the windows again (shardfs-check view) */
	text = sfs_status_options_json(&w->fs->vopts.options.plan);
	opts = text ? json_loads(text, 0, NULL) : NULL;
	free(text);
	src = sfs_name_escape(w->f->source, false);
	idx = w->fs->mount.index_dir ?
		      sfs_name_escape(w->fs->mount.index_dir, false) :
		      NULL;
	if (!src || (w->fs->mount.index_dir && !idx)) {
		json_decref(opts);
		json_decref(readers);
		goto out;
	}
	j = json_pack(
		"{s:s, s:s?, s:o?, s:{s:s, s:I, s:I, s:I, s:s?, s:b, s:I, s:I, s:b, s:I, s:I, s:I, s:s?, s:s?}, s:o}",
		"source", src, "index", idx, "options", opts, "follow",
		"format", w->ext, "window", (json_int_t)w->n, "shards",
		(json_int_t)sn->nshards, "samples", (json_int_t)sn->nsamples,
		"last_shard", sn->last, "ended", sn->ended, "first_window",
		(json_int_t)w->first, "windows", (json_int_t)sn->nwins,
		"complete", sn->complete, "per_window",
		(json_int_t)(w->n / w->nreaders_all), "padding",
		(json_int_t)sn->padding, "dropped", (json_int_t)sn->dropped,
		"consumed", sn->cons, "log", sn->logp, "readers", readers);
	s = j ? json_dumps(j, JSON_INDENT(2)) : NULL;
	json_decref(j);
out:
	free(src);
	free(idx);
	if (s) {
		char *t = realloc(s, strlen(s) + 2);

		if (t)
			strcat(t, "\n");
		s = t ? t : s;
	}
	return s;
}

/*
 * The status text now, padded (control_pad: the size a reader was told
 * is the size of what it reads), its length in *len: a heap copy with
 * copy, else only non-NULL (not to be used); NULL without memory.  It
 * is built only when what it shows changed (w->status_gen: a window, an
 * ack, a wait) and kept, under w->text_lock: the lock reads take is held
 * only to copy what it shows, never to build it.
 */
static char *status_text(struct fw *w, size_t *len, bool copy)
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
	t = status_json(w, &sn);
	snap_free(&sn);
	if (!t || control_pad(&t, w->status_len))
		goto out;
	free(w->status_text);
	w->status_text = t;
	w->status_len = strlen(t);
	w->status_text_gen = gen;
copy:
	*len = w->status_len;
	t = copy ? strdup(w->status_text) : w->status_text;
out:
	pthread_mutex_unlock(&w->text_lock);
	return t;
}

/* The text of a control file (a heap string, NULL without memory);
 * without w->lock. */
static char *control_text_of(struct fw *w, fuse_ino_t ino)
{
	size_t len;
	char *t;

	if (ino == INO_STATUS)
		return status_text(w, &len, true);
	pthread_mutex_lock(&w->lock);
	t = follow_consumed_text(w);
	pthread_mutex_unlock(&w->lock);
	return t;
}

/* Attributes of a control file (status, consumed); without w->lock. */
static int control_stat_of(struct fw *w, fuse_ino_t ino, struct stat *st)
{
	size_t len;
	char *t;

	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_uid = w->fs->uid;
	st->st_gid = w->fs->gid;
	st->st_atime = st->st_ctime = w->fs->mounted;
	st->st_mode = S_IFREG | 0444;
	st->st_nlink = 1;
	st->st_mtime = time(NULL);
	if (ino == INO_STATUS) {
		if (!status_text(w, &len, false))
			return -ENOMEM;
	} else {
		t = control_text_of(w, ino);
		if (!t)
			return -ENOMEM;
		len = strlen(t);
		free(t);
	}
	st->st_size = (off_t)len;
	return 0;
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

/* Bytes [pos, pos + len) of reader r's window i (within it; with its
 * trailer) into buf, outside the lock: the extents are the window's,
 * which never changes.  Returns the count or -EIO (logged). */
static ssize_t read_window(struct fw *w, const struct sfs_window *win,
			   size_t ri, char *buf, size_t len, uint64_t pos)
{
	const struct sfs_window_reader *r = &win->readers[ri];
	size_t done = 0, x;

	if (pos < r->size && r->n) {
		for (x = sfs_window_find(r, pos); x < r->n && done < len; x++) {
			const struct sfs_wext *e = &r->ext[x];
			uint64_t in = pos + done - e->pos;
			size_t n = (size_t)(e->len - in) < len - done ?
					   (size_t)(e->len - in) :
					   len - done;

			if (e->mem) {
				memcpy(buf + done, (const char *)e->mem + in,
				       n);
			} else {
				const struct fshard *sh;
				struct stat st;
				char path[SFS_FOLLOW_LINE_MAX];
				uint64_t size;
				int64_t mtime;
				ssize_t got = -1;
				int fd;

				pthread_mutex_lock(&w->lock);
				sh = &w->shards[e->shard];
				snprintf(path, sizeof(path), "%s", sh->path);
				size = sh->size;
				mtime = sh->mtime_ns;
				pthread_mutex_unlock(&w->lock);
				fd = openat(w->f->srcfd, path,
					    O_RDONLY | O_CLOEXEC | O_NOFOLLOW |
						    O_NONBLOCK);
				if (fd >= 0 && !fstat(fd, &st) &&
				    (uint64_t)st.st_size == size &&
				    sfs_mtime_ns(&st) == mtime &&
				    st.st_nlink > 0)
					got = sfs_pread_full(fd, buf + done, n,
							     e->src + in);
				if (fd >= 0)
					close(fd);
				if (got != (ssize_t)n) {
					unsigned char why = fd < 0 ? 1 : 2;
					bool say;

					pthread_mutex_lock(&w->lock);
					say = !grow_failed(w, e->shard + 1) &&
					      w->failed[e->shard] != why;
					if (say)
						w->failed[e->shard] = why;
					pthread_mutex_unlock(&w->lock);
					atomic_fetch_add(&w->fs->errors, 1);
					if (!say)
						return -EIO;
					fs_log(w->fs, LOG_ERR,
					       "%s/%s: %s before every reader read it (it entered the stream with %" PRIu64
					       " bytes): EIO for its bytes; a shard must not change or go before it is consumed (docs/follow.md)",
					       w->f->source, path,
					       fd < 0 ? "deleted" :
							"changed or truncated",
					       size);
					return -EIO;
				}
			}
			done += n;
		}
	}
	if (done < len && pos + done >= r->size &&
	    pos + done < r->size + win->trailer_len) {
		uint64_t in = pos + done - r->size;

		x = (size_t)(win->trailer_len - in) < len - done ?
			    (size_t)(win->trailer_len - in) :
			    len - done;
		memcpy(buf + done, (const char *)win->trailer + in, x);
		done += x;
	}
	return (ssize_t)done;
}

/* The window (from first) holding byte pos of r's stream (pos below its
 * size). */
static size_t window_at(const struct fw *w, const struct freader *r,
			uint64_t pos)
{
	return SFS_PARTITION_POINT(i, 1, w->nwins, r->at[i] <= pos) - 1;
}

/*
 * Bytes [pos, pos + size) of reader ri's stream into buf, what of them the
 * stream holds (pos below its size, or the stream complete); with w->lock
 * on entry and on return (let go while the shards are read).  Returns the
 * count, or -EIO, -EACCES.
 */
static ssize_t stream_bytes(struct fw *w, fuse_req_t req, size_t ri, char *buf,
			    size_t size, uint64_t pos)
{
	struct freader *r = &w->readers[ri];
	ssize_t got = 0;
	size_t i;

	while ((size_t)got < size &&
	       pos + (uint64_t)got < follow_reader_size(w, r)) {
		uint64_t at = pos + (uint64_t)got, from, to;
		const struct sfs_window *win;
		ssize_t n;

		/* r->at is grown (moved) by the watcher: what of it the read
		 * needs is taken under the lock */
		i = window_at(w, r, at);
		win = w->wins[i];
		from = r->at[i];
		to = r->at[i + 1];
		if (r->window != w->first + i)
			w->status_gen++;
		r->window = w->first + i;
		if (!may_read(req, &r->acc[i]))
			return -EACCES;
		pthread_mutex_unlock(&w->lock);
		/* within the window, without its trailer */
		n = read_window(w, win, ri, buf + got,
				(size_t)(to - at) < size - (size_t)got ?
					(size_t)(to - at) :
					size - (size_t)got,
				at - from);
		pthread_mutex_lock(&w->lock);
		if (n < 0)
			return n;
		got += n;
	}
	/* after the last window: the stream's ending */
	if (w->complete && (size_t)got < size && w->nwins &&
	    pos + (uint64_t)got >= follow_reader_size(w, r)) {
		const struct sfs_window *last = w->wins[w->nwins - 1];
		uint64_t in = pos + (uint64_t)got - follow_reader_size(w, r);

		if (in < last->trailer_len) {
			size_t n = (size_t)(last->trailer_len - in) <
						   size - (size_t)got ?
					   (size_t)(last->trailer_len - in) :
					   size - (size_t)got;

			memcpy(buf + got, (const char *)last->trailer + in, n);
			got += (ssize_t)n;
		}
	}
	return got;
}

/* Answer req with buf's got bytes, or its error (got < 0); frees buf. */
static void reply_read(struct fw *w, fuse_req_t req, char *buf, ssize_t got)
{
	if (got < 0) {
		fuse_reply_err(req, (int)-got);
	} else {
		atomic_fetch_add(&w->fs->bytes, (uint64_t)got);
		/* a followed file's reads are all copies */
		atomic_fetch_add(&w->fs->copied_reads, 1);
		fuse_reply_buf(req, buf, (size_t)got);
	}
	free(buf);
}

/* Answer a read of reader ri's stream whose bytes are there (or the
 * stream complete); without w->lock. */
static void serve_stream(struct fw *w, fuse_req_t req, size_t ri, uint64_t pos,
			 size_t size)
{
	char *buf = malloc(size ? size : 1);
	ssize_t got = -ENOMEM;

	if (buf) {
		pthread_mutex_lock(&w->lock);
		got = stream_bytes(w, req, ri, buf, size, pos);
		pthread_mutex_unlock(&w->lock);
	}
	reply_read(w, req, buf, got);
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

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct fw *w = fs->follow;
	uint64_t k = kind_of(ino), pos = (uint64_t)off;
	const struct sfs_window *win;
	struct freader *r;
	size_t ri, i;
	ssize_t got;
	bool ready;
	char *buf;

	(void)fi;
	if (ino == INO_ACK) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (ino == INO_STATUS || ino == INO_CONSUMED) {
		char *t;
		size_t len;

		t = control_text_of(w, ino);
		if (!t) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		len = strlen(t);
		fuse_reply_buf(
			req, t + (pos < len ? pos : len),
			pos < len ? (len - pos < size ? len - pos : size) : 0);
		free(t);
		return;
	}
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
	win = w->wins[i];
	pthread_mutex_unlock(&w->lock);
	buf = malloc(size ? size : 1);
	/* reads never consume: acks do (.shardfs/ack) */
	got = buf ? read_window(w, win, ri, buf, size, pos) : -ENOMEM;
	reply_read(w, req, buf, got);
}

/* libfuse refuses the session unless INIT repeats the mount's max_read */
static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	conn->max_read = ((struct fs *)userdata)->max_read;
}

/* The session ends (fuse_session_destroy, or the kernel's DESTROY): the
 * reads still parked are answered while it can. */
static void op_destroy(void *userdata)
{
	follow_end_waits(userdata);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct statvfs st = { 0 };

	(void)ino;
	st.f_bsize = st.f_frsize = 4096;
	st.f_namemax = 255;
	fuse_reply_statfs(req, &st);
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		       int to_set, struct fuse_file_info *fi)
{
	struct fw *w = fs_of(req)->follow;
	struct stat st;
	double t;

	(void)attr;
	(void)fi;
	/* `echo 0 1 5 > ack` truncates before it writes: let that pass */
	if (ino != INO_ACK ||
	    (to_set & ~(FUSE_SET_ATTR_SIZE | FUSE_SET_ATTR_MTIME |
			FUSE_SET_ATTR_MTIME_NOW | FUSE_SET_ATTR_CTIME))) {
		fuse_reply_err(req, EROFS);
		return;
	}
	stat_of(w, ino, &st, &t);
	fuse_reply_attr(req, &st, 0);
}

/* Only .shardfs/ack takes writes: one ack each, at any offset (a job may
 * keep it open). */
static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
		     size_t size, off_t off, struct fuse_file_info *fi)
{
	int rc;

	(void)off;
	(void)fi;
	if (ino != INO_ACK) {
		fuse_reply_err(req, EROFS);
		return;
	}
	rc = follow_ack(fs_of(req)->follow, buf, size);
	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_write(req, size);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode)
{
	(void)parent;
	(void)name;
	(void)mode;
	fuse_reply_err(req, EROFS);
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		      mode_t mode, struct fuse_file_info *fi)
{
	(void)parent;
	(void)name;
	(void)mode;
	(void)fi;
	fuse_reply_err(req, EROFS);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	(void)parent;
	(void)name;
	fuse_reply_err(req, EROFS);
}

const struct fuse_lowlevel_ops follow_ops = {
	.init = op_init,
	.destroy = op_destroy,
	.lookup = op_lookup,
	.getattr = op_getattr,
	.readdir = op_readdir,
	.open = op_open,
	.read = op_read,
	.statfs = op_statfs,
	.setattr = op_setattr,
	.write = op_write,
	.mkdir = op_mkdir,
	.create = op_create,
	.unlink = op_unlink,
	.rmdir = op_unlink,
};
