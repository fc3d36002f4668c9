/*
 * The FUSE operations of every mount: each finds what a request names (a
 * view node or a control file), asks the view, the read path (read.c),
 * the control files (control.c) or, for a followed source's files, the
 * windows (follow.c), and replies.  Everything but
 * .shardfs/epoch (and .shardfs/ack on a followed source) is read-only:
 * every other write answers EROFS.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <syslog.h>

#include "fs.h"
#include "shardfs/window.h"

/* The error for an inode no view answers for: EIO when its view was let
 * go (FS_OLD_VIEWS), ESTALE when it is gone. */
static int gone(struct fs *fs, fuse_ino_t ino)
{
	return view_revoked(fs, ino) ? EIO : ESTALE;
}

static void node_stat(struct fs *fs, const struct view_ref *vr, uint32_t node,
		      struct stat *st)
{
	const struct sfs_view_node *n = sfs_view_node(vr->v, node);

	memset(st, 0, sizeof(*st));
	st->st_ino = node_ino(vr, node);
	st->st_uid = fs->uid;
	st->st_gid = fs->gid;
	st->st_mtime = st->st_ctime = st->st_atime = vr->built;
	/* a page, as a local file says: reads of a data file come from the
	 * page cache, and readers size their buffers by this (Python's
	 * open() allocates st_blksize and fills all of it on the first
	 * read) */
	st->st_blksize = 4096;
	switch (n->kind) {
	case SFS_NODE_DIR:
		st->st_mode = S_IFDIR | 0555;
		st->st_nlink = 2;
		break;
	case SFS_NODE_LINK:
		st->st_mode = S_IFLNK | 0777;
		st->st_nlink = 1;
		st->st_size = (off_t)n->size;
		break;
	case SFS_NODE_FILE: {
		/* the source's owner and mode: with allow_other the kernel
		 * refuses whom the source would (docs/security.md) */
		uint32_t uid = fs->uid, gid = fs->gid, mode = 0444;

		if (vr->v->follow)
			follow_node_access(fs->follow, vr->v, node, &uid, &gid,
					   &mode);
		else
			sfs_view_access(vr->v, n, &uid, &gid, &mode);
		st->st_uid = uid;
		st->st_gid = gid;
		st->st_mode = S_IFREG | mode;
		st->st_nlink = 1;
		st->st_size = (off_t)n->size;
		st->st_blocks = (blkcnt_t)((n->size + 511) / 512);
		break;
	}
	}
}

/*
 * How long the kernel may keep a node's attributes and its entry.  A
 * view's never change.  A followed source's view grows (fs_view_grow): a
 * window file never changes, but a stream's size does (its attributes
 * are never kept, so that a stat sees what is readable now), and a
 * directory lists more windows as they come.
 */
static void node_timeouts(const struct view_ref *vr, uint32_t node,
			  double *attr, double *entry)
{
	const struct sfs_view_follow *f = vr->v->follow;

	*attr = *entry = VIEW_TIMEOUT;
	if (!f || node >= f->window_node)
		return;
	*attr = 0;
	*entry = 1.0;
}

static void fs_getattr(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct view_ref *vr;
	struct stat st;
	uint32_t node;
	double t;
	int rc;

	(void)fi;
	fs_readahead_once(fs);
	if (control_is(ino)) {
		rc = control_stat(fs, ino, &st);
		if (rc)
			fuse_reply_err(req, -rc);
		else
			fuse_reply_attr(req, &st, 0);
		return;
	}
	vr = view_get(fs, ino, &node);
	if (!vr) {
		fuse_reply_err(req, gone(fs, ino));
		return;
	}
	if (sfs_view_gone(vr->v, node)) { /* a window consumed and deleted */
		view_unref(fs, vr);
		fuse_reply_err(req, ESTALE);
		return;
	}
	node_stat(fs, vr, node, &st);
	node_timeouts(vr, node, &t, &(double){ 0 });
	view_unref(fs, vr);
	/* the root's listing changes with the epoch: do not cache it */
	fuse_reply_attr(req, &st, ino == FS_INO_ROOT ? 0 : t);
}

/* Look name up in the view parent is a node of. */
static void view_lookup(fuse_req_t req, struct fs *fs, fuse_ino_t parent,
			const char *name)
{
	struct fuse_entry_param e;
	struct view_ref *vr;
	uint32_t node;
	int64_t child;
	int rc;

	vr = view_get(fs, parent, &node);
	if (!vr) {
		fuse_reply_err(req, gone(fs, parent));
		return;
	}
	child = sfs_view_lookup(vr->v, node, name);
	if (child < 0) {
		/* read before the reference goes: a view let go is freed
		 * with its last one */
		rc = sfs_view_node(vr->v, node)->kind == SFS_NODE_DIR ? ENOENT :
									ENOTDIR;
		view_unref(fs, vr);
		fuse_reply_err(req, rc);
		return;
	}
	/* a symlink's reader reads the source itself: what it reaches
	 * next is all the daemon learns */
	if (sfs_view_node(vr->v, child)->kind == SFS_NODE_LINK)
		prefetch_after(fs->prefetch, vr, (uint32_t)child);
	memset(&e, 0, sizeof(e));
	e.ino = node_ino(vr, (uint32_t)child);
	node_stat(fs, vr, (uint32_t)child, &e.attr);
	node_timeouts(vr, (uint32_t)child, &e.attr_timeout, &e.entry_timeout);
	pthread_mutex_lock(&fs->lock);
	view_looked_up_locked(vr, (uint32_t)child);
	pthread_mutex_unlock(&fs->lock);
	if (fuse_reply_entry(req, &e)) {
		pthread_mutex_lock(&fs->lock);
		view_forgot_locked(fs, vr, (uint32_t)child, 1);
		pthread_mutex_unlock(&fs->lock);
	}
	view_unref(fs, vr);
}

static void fs_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs *fs = fs_of(req);
	struct fuse_entry_param e;
	int rc;

	fs_readahead_once(fs);
	memset(&e, 0, sizeof(e));
	e.ino = control_lookup(fs, parent, name);
	if (e.ino || parent == FS_INO_CTL) {
		if (!e.ino) {
			fuse_reply_err(req, ENOENT);
			return;
		}
		rc = control_stat(fs, e.ino, &e.attr);
		if (rc)
			fuse_reply_err(req, -rc);
		else
			fuse_reply_entry(req, &e);
		return;
	}
	if (control_is(parent)) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	if (parent != FS_INO_ROOT) {
		view_lookup(req, fs, parent, name);
		return;
	}
	pthread_rwlock_rdlock(&fs->root_lookups);
	view_lookup(req, fs, parent, name);
	pthread_rwlock_unlock(&fs->root_lookups);
}

static void fs_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	struct fs *fs = fs_of(req);

	pthread_mutex_lock(&fs->lock);
	forget_locked(fs, ino, nlookup);
	pthread_mutex_unlock(&fs->lock);
	fuse_reply_none(req);
}

static void fs_forget_multi(fuse_req_t req, size_t count,
			    struct fuse_forget_data *forgets)
{
	struct fs *fs = fs_of(req);
	size_t i;

	pthread_mutex_lock(&fs->lock);
	for (i = 0; i < count; i++)
		forget_locked(fs, forgets[i].ino, forgets[i].nlookup);
	pthread_mutex_unlock(&fs->lock);
	fuse_reply_none(req);
}

static void fs_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct fs *fs = fs_of(req);
	struct view_ref *vr = view_get(fs, ino, &(uint32_t){ 0 });
	uint32_t node = (uint32_t)ino;
	char *target;

	if (!vr) {
		fuse_reply_err(req, control_is(ino) ? EINVAL : gone(fs, ino));
		return;
	}
	if (ino == FS_INO_ROOT ||
	    sfs_view_node(vr->v, node)->kind != SFS_NODE_LINK) {
		view_unref(fs, vr);
		fuse_reply_err(req, EINVAL);
		return;
	}
	prefetch_after(fs->prefetch, vr, node);
	if (asprintf(&target, "%s/%s", fs->idx->source,
		     sfs_view_source_path(vr->v, sfs_view_node(vr->v, node))) <
	    0)
		target = NULL;
	view_unref(fs, vr);
	if (!target) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	fuse_reply_readlink(req, target);
	free(target);
}

static void fs_opendir(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct handle *h;

	if (control_is(ino) && ino != FS_INO_CTL) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	h = handle_new(fs, H_DIR);
	if (!h) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (ino != FS_INO_CTL) {
		/* a listing shows the epoch it was opened in, whole */
		uint32_t node;
		struct view_ref *vr = view_get(fs, ino, &node);

		if (!vr || sfs_view_node(vr->v, node)->kind != SFS_NODE_DIR) {
			fuse_reply_err(req, vr ? ENOTDIR : gone(fs, ino));
			if (vr)
				view_unref(fs, vr);
			handle_free(fs, h);
			return;
		}
		/* the handle is on fs.handles: let_go_locked reads its vr */
		pthread_mutex_lock(&fs->lock);
		h->vr = vr;
		h->node = node;
		pthread_mutex_unlock(&fs->lock);
	}
	fi->fh = (uintptr_t)h;
	if (fuse_reply_open(req, fi) == -ENOENT)
		handle_free(fs, h);
}

/*
 * Add entry name of a listing to buf (size bytes, *used of them taken),
 * the next one at offset next; with plus (readdirplus) e whole (its inode,
 * attributes and timeouts: a lookup the kernel counts), else e->attr's
 * inode and type.  "." and ".." never carry a lookup, nor an e whose ino
 * is 0 (its attributes' st_ino is the entry's inode).  Returns false when
 * buf is full (nothing added).
 */
static bool fs_add_entry(fuse_req_t req, char *buf, size_t size, size_t *used,
			 const char *name, const struct fuse_entry_param *e,
			 off_t next, bool plus)
{
	struct fuse_entry_param d;
	size_t n;

	if (plus) {
		d = *e;
		/* "." and ".." carry no lookup: leave d.ino 0 */
		if (!strcmp(name, ".") || !strcmp(name, "..")) {
			d.ino = 0;
			d.attr_timeout = d.entry_timeout = 0;
		}
		n = fuse_add_direntry_plus(req, buf + *used, size - *used, name,
					   &d, next);
	} else {
		n = fuse_add_direntry(req, buf + *used, size - *used, name,
				      &e->attr, next);
	}
	if (n > size - *used)
		return false;
	*used += n;
	return true;
}

/* Add one entry of a view or the control directory, whose attributes
 * hold for attr and entry for entry, with a lookup when lookup
 * (readdirplus); false when buf is full. */
static bool add_entry(fuse_req_t req, char *buf, size_t size, size_t *used,
		      const char *name, const struct stat *st, off_t next,
		      bool plus, double attr, double entry, bool lookup)
{
	struct fuse_entry_param e = { .ino = lookup ? st->st_ino : 0,
				      .attr = *st,
				      .attr_timeout = attr,
				      .entry_timeout = entry };

	return fs_add_entry(req, buf, size, used, name, &e, next, plus);
}

/*
 * readdirplus gave the kernel the entries of children [from, to) of dir,
 * a lookup each; or the reply failed and it got none of them.
 */
static void children_given(struct fs *fs, struct view_ref *vr, uint32_t dir,
			   uint32_t from, uint32_t to, bool given)
{
	const struct sfs_view_node *d = sfs_view_node(vr->v, dir);
	uint32_t k;

	pthread_mutex_lock(&fs->lock);
	for (k = from; k < to; k++) {
		uint32_t c = vr->v->children[d->first_child + k];

		if (given)
			view_looked_up_locked(vr, c);
		else
			view_forgot_locked(fs, vr, c, 1);
	}
	pthread_mutex_unlock(&fs->lock);
}

static void readdir_common(fuse_req_t req, fuse_ino_t ino, size_t size,
			   off_t off, struct fuse_file_info *fi, bool plus)
{
	struct handle *h = (struct handle *)(uintptr_t)fi->fh;
	struct fs *fs = fs_of(req);
	struct view_ref *vr;
	char *buf;
	size_t used = 0;
	uint32_t from = 0, to = 0; /* children given whole: lookups */
	struct stat st;
	off_t i;

	vr = handle_view(fs, h);
	if (h->vr && !vr) { /* its view was let go (FS_OLD_VIEWS) */
		fuse_reply_err(req, EIO);
		return;
	}
	buf = malloc(size);
	if (!buf) {
		if (vr)
			view_unref(fs, vr);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (!vr) { /* the control directory */
		const char *name;
		fuse_ino_t ctl = FS_INO_CTL;

		for (i = off;
		     i < 2 || (name = control_entry(fs, (size_t)(i - 2), &ctl));
		     i++) {
			if (i < 2)
				name = i ? ".." : ".";
			if (control_stat(fs, ctl, &st) ||
			    !add_entry(req, buf, size, &used, name, &st, i + 1,
				       plus, 0, 0, true))
				break;
		}
	} else {
		const struct sfs_view *v = vr->v;
		const struct sfs_view_node *d = sfs_view_node(v, h->node);
		/* ".", "..", [".shardfs" at the root,] then the children */
		off_t extra = h->node == 0 ? 3 : 2;
		/* The root's names lead to the current view: a listing of
		 * the root opened before a switch and read after it would
		 * give the kernel entries of the view it replaced, after
		 * the switch told it those names are stale (forget_old).
		 * Its children carry no lookup; a path walk looks them up. */
		bool lookups = plus && h->node != 0;

		for (i = off; i < extra + (off_t)d->nchildren; i++) {
			const char *name;
			double attr = VIEW_TIMEOUT, entry = VIEW_TIMEOUT;

			if (i < 2) {
				name = i ? ".." : ".";
				node_stat(fs, vr, h->node, &st);
			} else if (i < extra) {
				name = ".shardfs";
				control_stat(fs, FS_INO_CTL, &st);
				attr = entry = 0;
			} else {
				uint32_t c = v->children[d->first_child +
							 (uint32_t)(i - extra)];

				name = sfs_view_node(v, c)->name;
				node_stat(fs, vr, c, &st);
				node_timeouts(vr, c, &attr, &entry);
			}
			if (!add_entry(req, buf, size, &used, name, &st, i + 1,
				       plus, attr, entry, i < extra || lookups))
				break;
		}
		if (lookups && i > extra) {
			from = (uint32_t)((off > extra ? off : extra) - extra);
			to = (uint32_t)(i - extra);
			children_given(fs, vr, h->node, from, to, true);
		}
	}
	(void)ino;
	if (fuse_reply_buf(req, buf, used) && from < to)
		children_given(fs, vr, h->node, from, to, false);
	if (vr)
		view_unref(fs, vr);
	free(buf);
}

static void fs_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	readdir_common(req, ino, size, off, fi, false);
}

static void fs_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
			   off_t off, struct fuse_file_info *fi)
{
	readdir_common(req, ino, size, off, fi, true);
}

static void fs_releasedir(fuse_req_t req, fuse_ino_t ino,
			  struct fuse_file_info *fi)
{
	(void)ino;
	handle_free(fs_of(req), (struct handle *)(uintptr_t)fi->fh);
	fuse_reply_err(req, 0);
}

static void fs_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
		     size_t size, off_t off, struct fuse_file_info *fi)
{
	int rc = control_write(fs_of(req), ino, buf, size, off);

	(void)fi;
	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_write(req, size);
}

static void fs_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		       int to_set, struct fuse_file_info *fi)
{
	struct stat st;
	int rc = control_truncate(fs_of(req), ino, to_set, &st);

	(void)attr;
	(void)fi;
	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_attr(req, &st, 0);
}

static void fs_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct fs *fs = fs_of(req);
	struct statvfs st;
	uint64_t bytes = 0;
	size_t i;

	(void)ino;
	memset(&st, 0, sizeof(st));
	/* a follow mount has no index: no shards */
	for (i = 0; fs->idx && i < fs->idx->nshards; i++)
		bytes += fs->idx->shards[i].size;
	st.f_bsize = st.f_frsize = 4096;
	st.f_blocks = (fsblkcnt_t)((bytes + 4095) / 4096);
	st.f_files = (fsfilcnt_t)(fs->idx ? fs->idx->nshards : 0);
	st.f_namemax = 255;
	st.f_flag = ST_RDONLY;
	fuse_reply_statfs(req, &st);
}

/*
 * Provenance of a file: where its bytes come from, a heap string in *out.
 * Returns 0, -ENODATA (no such attribute), -E2BIG or -ENOMEM.
 */
static int xattr_value(struct fs *fs, const struct view_ref *vr, uint32_t node,
		       const char *name, char **out)
{
	const struct sfs_view *v = vr->v;
	const struct sfs_view_node *n = sfs_view_node(v, node);
	const struct sfs_plan_file *f = sfs_view_file(v, n);
	const struct sfs_plan *p = v->plans[n->plan];
	char *s = NULL;
	int rc = 0;

	if (!strcmp(name, SFS_XATTR_SOURCE)) {
		rc = asprintf(&s, "%s/%s", fs->idx->source,
			      sfs_view_source_path(v, n));
	} else if (!strcmp(name, SFS_XATTR_EPOCH)) {
		rc = asprintf(&s, "%" PRIu64, p->opts.epoch);
	} else if (n->dataset) {
		/* a file of a reader's dataset holds no samples of its own:
		 * its manifest names them */
		return -ENODATA;
	} else if (!strcmp(name, SFS_XATTR_SAMPLES)) {
		rc = asprintf(&s, "%" PRIu64, f->nsamples);
	} else if (!strcmp(name, SFS_XATTR_PADDING)) {
		rc = asprintf(&s, "%" PRIu64, f->npadding);
	} else if (!strcmp(name, SFS_XATTR_RANGE)) {
		return sfs_view_xattr_range(sfs_plan_file_runs(p, f), f->nruns,
					    out);
	} else {
		return -ENODATA;
	}
	if (rc < 0 || !s)
		return -ENOMEM;
	*out = s;
	return 0;
}

/* Answer a getxattr or listxattr of size bytes with value (len bytes):
 * its length when size is 0, ERANGE when it does not fit. */
static void fs_reply_xattr(fuse_req_t req, const char *value, size_t len,
			   size_t size)
{
	if (size == 0)
		fuse_reply_xattr(req, len);
	else if (size < len)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, value, len);
}

static void fs_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			size_t size)
{
	struct fs *fs = fs_of(req);
	struct view_ref *vr;
	uint32_t node;
	char *value;
	int rc;

	/* Only user.shardfs.* exists.  Saying so for security.* lets `ls -l`
	 * stop asking (it remembers EOPNOTSUPP per file system) instead of
	 * sending a request per entry. */
	if (strncmp(name, "user.", 5)) {
		fuse_reply_err(req, EOPNOTSUPP);
		return;
	}
	vr = control_is(ino) ? NULL : view_get(fs, ino, &node);
	if (!vr || sfs_view_node(vr->v, node)->kind == SFS_NODE_DIR) {
		if (vr)
			view_unref(fs, vr);
		fuse_reply_err(req, ENODATA);
		return;
	}
	if (vr->v->follow)
		rc = follow_node_xattr(fs->follow, vr->v, node, name, &value);
	else
		rc = xattr_value(fs, vr, node, name, &value);
	view_unref(fs, vr);
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	fs_reply_xattr(req, value, strlen(value), size);
	free(value);
}

static void fs_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	static const char names[] = SFS_XATTR_SOURCE
		"\0" SFS_XATTR_SAMPLES "\0" SFS_XATTR_RANGE
		"\0" SFS_XATTR_PADDING "\0" SFS_XATTR_EPOCH;
	/* a file of a reader's dataset: no samples of its own */
	static const char dataset_names[] = SFS_XATTR_SOURCE
		"\0" SFS_XATTR_EPOCH;
	struct fs *fs = fs_of(req);
	struct view_ref *vr;
	const char *follow = NULL;
	size_t len = 0;
	uint32_t node;
	bool file, dataset = false;

	vr = control_is(ino) ? NULL : view_get(fs, ino, &node);
	file = vr && sfs_view_node(vr->v, node)->kind != SFS_NODE_DIR;
	if (file)
		dataset = sfs_view_node(vr->v, node)->dataset != 0;
	/* a followed source's window file or stream: the windows' */
	if (file && vr->v->follow)
		follow = sfs_window_xattr_names(
			node < vr->v->follow->window_node, &len);
	if (vr)
		view_unref(fs, vr);
	if (follow)
		fs_reply_xattr(req, follow, len, size);
	else if (dataset)
		fs_reply_xattr(req, dataset_names, sizeof(dataset_names), size);
	else
		fs_reply_xattr(req, names, file ? sizeof(names) : 0, size);
}

static void fs_init(void *userdata, struct fuse_conn_info *conn)
{
	const unsigned no_open_caps = FUSE_CAP_NO_OPEN_SUPPORT |
				      FUSE_CAP_AUTO_INVAL_DATA;
	struct fs *fs = userdata;

	conn->max_read = fs->max_read;
	if (conn->capable & FUSE_CAP_SPLICE_WRITE)
		conn->want |= FUSE_CAP_SPLICE_WRITE;
	if (conn->capable & FUSE_CAP_CACHE_SYMLINKS)
		conn->want |= FUSE_CAP_CACHE_SYMLINKS;
	if (fs->no_open && (conn->capable & no_open_caps) != no_open_caps) {
		fs_log(fs, LOG_INFO,
		       "this kernel cannot open files without asking the daemon (FUSE no_open, auto_inval_data): serving as with no_open=0");
		fs->no_open = false;
	}
	/* With no_open the kernel truncates through SETATTR, which refuses
	 * it for data files; an O_TRUNC handed to OPEN would go unanswered. */
	if (!fs->no_open && (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC))
		conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
	/* Bytes under a data file's inode number never change, so the
	 * kernel need not revalidate them; with no_open the control files
	 * are read through the page cache too, and their pages must go when
	 * their mtime changes (control.c).  Data files' attributes do not
	 * time out: their reads ask for nothing more. */
	if (fs->no_open)
		conn->want |= FUSE_CAP_AUTO_INVAL_DATA;
	else
		conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
}

/* The session ends (fuse_session_destroy, or the kernel's DESTROY): the
 * reads of a followed source still parked are answered while it can. */
static void fs_destroy(void *userdata)
{
	follow_end_waits(userdata);
}

static void fs_mkdir(fuse_req_t req, fuse_ino_t p, const char *n, mode_t m)
{
	(void)p, (void)n, (void)m;
	fuse_reply_err(req, EROFS);
}

static void fs_mknod(fuse_req_t req, fuse_ino_t p, const char *n, mode_t m,
		     dev_t d)
{
	(void)p, (void)n, (void)m, (void)d;
	fuse_reply_err(req, EROFS);
}

static void fs_unlink(fuse_req_t req, fuse_ino_t p, const char *n)
{
	(void)p, (void)n;
	fuse_reply_err(req, EROFS);
}

static void fs_symlink(fuse_req_t req, const char *l, fuse_ino_t p,
		       const char *n)
{
	(void)l, (void)p, (void)n;
	fuse_reply_err(req, EROFS);
}

static void fs_rename(fuse_req_t req, fuse_ino_t p, const char *n,
		      fuse_ino_t np, const char *nn, unsigned int f)
{
	(void)p, (void)n, (void)np, (void)nn, (void)f;
	fuse_reply_err(req, EROFS);
}

static void fs_link(fuse_req_t req, fuse_ino_t i, fuse_ino_t np, const char *nn)
{
	(void)i, (void)np, (void)nn;
	fuse_reply_err(req, EROFS);
}

static void fs_create(fuse_req_t req, fuse_ino_t p, const char *n, mode_t m,
		      struct fuse_file_info *fi)
{
	(void)p, (void)n, (void)m, (void)fi;
	fuse_reply_err(req, EROFS);
}

static void fs_setxattr(fuse_req_t req, fuse_ino_t i, const char *n,
			const char *v, size_t s, int f)
{
	(void)i, (void)n, (void)v, (void)s, (void)f;
	fuse_reply_err(req, EROFS);
}

static void fs_removexattr(fuse_req_t req, fuse_ino_t i, const char *n)
{
	(void)i, (void)n;
	fuse_reply_err(req, EROFS);
}

const struct fuse_lowlevel_ops fs_ops = {
	.init = fs_init,
	.destroy = fs_destroy,
	.lookup = fs_lookup,
	.forget = fs_forget,
	.forget_multi = fs_forget_multi,
	.getattr = fs_getattr,
	.setattr = fs_setattr,
	.readlink = fs_readlink,
	.opendir = fs_opendir,
	.readdir = fs_readdir,
	.readdirplus = fs_readdirplus,
	.releasedir = fs_releasedir,
	.open = fs_open,
	.read = fs_read,
	.write = fs_write,
	.release = fs_release,
	.statfs = fs_statfs,
	.getxattr = fs_getxattr,
	.listxattr = fs_listxattr,
	.mkdir = fs_mkdir,
	.mknod = fs_mknod,
	.unlink = fs_unlink,
	.rmdir = fs_unlink,
	.symlink = fs_symlink,
	.rename = fs_rename,
	.link = fs_link,
	.create = fs_create,
	.setxattr = fs_setxattr,
	.removexattr = fs_removexattr,
};
