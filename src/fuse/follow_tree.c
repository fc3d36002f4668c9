/*
 * The nodes of a followed source (follow=1): its rank and worker
 * directories, window files and streams, which the operations of ops.c
 * and read.c ask here for every inode that is not a control file (the
 * control files, status, consumed and ack among them, are control.c's):
 * their lookups, attributes, listings and status.  Their reads, and the
 * reads parked until their bytes come, are follow_read.c's; the inode
 * numbers are explained in follow.c.
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
struct freader *follow_reader_of(struct fw *w, fuse_ino_t ino)
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

/* Attributes of ino, with w->lock; *timeout: how long they hold. */
static int stat_of(struct fw *w, fuse_ino_t ino, struct stat *st,
		   double *timeout)
{
	struct fs *fs = w->fs;
	uint64_t k = kind_of(ino), v = val_of(ino);
	struct freader *r = follow_reader_of(w, ino);

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

/*
 * What a lookup or a readdirplus tells the kernel of ino, with w->lock.
 * A window never changes: the kernel keeps its entry and attributes as a
 * view's.  The stream grows: its attributes are never kept, so that a
 * reader's stat asks again and sees what is readable now.  A directory
 * lists more windows as they come; the control directory is control.c's
 * (nothing of it kept, as on every mount).
 */
static int entry_of(struct fw *w, fuse_ino_t ino, struct fuse_entry_param *e)
{
	double t = 0;
	int rc;

	memset(e, 0, sizeof(*e));
	e->ino = ino;
	if (ino == FS_INO_CTL)
		return control_stat(w->fs, ino, &e->attr);
	rc = stat_of(w, ino, &e->attr, &t);
	e->attr_timeout = t;
	e->entry_timeout = kind_of(ino) == K_WINDOW ? VIEW_TIMEOUT : 1.0;
	return rc;
}

void follow_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fw *w = fs_of(req)->follow;
	struct fuse_entry_param e;
	fuse_ino_t ino;
	int rc;

	pthread_mutex_lock(&w->lock);
	ino = child(w, parent, name);
	rc = ino ? entry_of(w, ino, &e) : -ENOENT;
	pthread_mutex_unlock(&w->lock);
	if (rc)
		fuse_reply_err(req, -rc);
	else
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
	       (k == K_WORKER && follow_reader_of(w, ino));
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

void follow_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    bool plus)
{
	struct fw *w = fs_of(req)->follow;
	char *buf = malloc(size), name[64];
	size_t used = 0;
	fuse_ino_t c;

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
		struct fuse_entry_param e = { 0 };

		c = entry(w, ino, (size_t)off, name, sizeof(name));
		if (!c)
			break;
		/* an entry that cannot be stat'ed (none is: entry() lists
		 * what stat_of answers) goes without a lookup */
		if (!plus || entry_of(w, c, &e)) {
			bool file = kind_of(c) == K_STREAM ||
				    kind_of(c) == K_WINDOW;

			memset(&e, 0, sizeof(e));
			e.attr.st_ino = c;
			e.attr.st_mode = file ? S_IFREG : S_IFDIR;
		}
		if (!fs_add_entry(req, buf, size, &used, name, &e, off + 1,
				  plus))
			break;
	}
	pthread_mutex_unlock(&w->lock);
	fuse_reply_buf(req, buf, used);
	free(buf);
}

void follow_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fw *w = fs_of(req)->follow;
	uint64_t k = kind_of(ino);
	struct freader *r;
	int rc = 0;

	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		fuse_reply_err(req, EROFS);
		return;
	}
	pthread_mutex_lock(&w->lock);
	r = follow_reader_of(w, ino);
	if (!r)
		rc = ENOENT;
	else if (k == K_STREAM)
		fi->direct_io = 1; /* its size changes; reads past it wait */
	else if (k == K_WINDOW && (val_of(ino) & 0xffffffffULL) < w->hidden)
		rc = ESTALE; /* consumed and deleted */
	else if (k == K_WINDOW) {
		fi->keep_cache = 1;
		/* the reader reached it: the windows after it are next */
		follow_ahead(w, r, val_of(ino) & 0xffffffffULL);
	}
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
 * (w->status_gen: a window, an ack, a wait) and kept, under w->text_lock,
 * which the join is made under too (the head is not copied): the lock
 * reads take is held only to copy what it shows, never to build it.
 */
char *follow_status_text(struct fw *w, const struct sfs_status_in *in,
			 const struct sfs_status_counters *c)
{
	struct status_snap sn;
	uint64_t gen;
	char *t = NULL;

	pthread_mutex_lock(&w->text_lock);
	pthread_mutex_lock(&w->lock);
	gen = w->status_gen;
	if (w->status_text && w->status_text_gen == gen) {
		pthread_mutex_unlock(&w->lock);
		goto join;
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
join:
	t = sfs_status_json_join(w->status_text, c);
out:
	pthread_mutex_unlock(&w->text_lock);
	return t;
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

/* ---- extended attributes (docs/follow.md, "What readers see") ---- */

void follow_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
		     size_t size)
{
	struct fw *w = fs_of(req)->follow;
	uint64_t k = kind_of(ino), i = val_of(ino) & 0xffffffffULL;
	struct freader *r;
	char *value = NULL;
	int rc = -ENODATA; /* a directory has none */

	pthread_mutex_lock(&w->lock);
	r = follow_reader_of(w, ino);
	if (r && k == K_WINDOW && i >= w->nwins)
		rc = -ENOENT;
	else if (r && k == K_WINDOW && i < w->hidden)
		rc = -ESTALE; /* consumed and deleted */
	else if (r && k == K_WINDOW)
		rc = sfs_window_xattr(w->wins[i], (size_t)(r - w->readers),
				      w->f->source, w->shards, name, &value);
	else if (r && k == K_STREAM)
		rc = sfs_window_stream_xattr(w->wins, w->nwins,
					     (size_t)(r - w->readers),
					     w->f->source, name, &value);
	pthread_mutex_unlock(&w->lock);
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	fs_reply_xattr(req, value, strlen(value), size);
	free(value);
}

void follow_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	uint64_t k = kind_of(ino);
	const char *names;
	size_t len;

	if (k == K_WINDOW || k == K_STREAM) {
		names = sfs_window_xattr_names(k == K_STREAM, &len);
		fs_reply_xattr(req, names, len, size);
	} else {
		fs_reply_xattr(req, NULL, 0, size);
	}
}
