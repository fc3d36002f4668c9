#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <syslog.h>
#include <unistd.h>


#include "fs.h"
#include "shardfs/options.h"
#include "shardfs/status.h"

/* View content never changes under an inode number: cache it for long. */
#define VIEW_TIMEOUT 86400.0
#define PREFETCH_BYTES (4 << 20)
#define XATTR_MAX 65536

enum handle_kind { H_DATA, H_CONTROL, H_DIR };

struct handle {
	enum handle_kind kind;
	struct handle *prev, *next; /* fs->handles (fs->lock) */
	struct view_ref *vr; /* H_DATA, H_DIR */
	uint32_t node; /* H_DIR */
	struct sfs_slice *slice; /* H_DATA */
	struct fdcache_ent *src; /* H_DATA */
	uint64_t src_size; /* H_DATA: the source as indexed */
	int64_t src_mtime;
	atomic_bool logged; /* H_DATA: a changed source was reported */
	char *buf; /* H_CONTROL: a snapshot */
	size_t len;
};

void fs_log(struct fs *fs, int prio, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	if (fs->foreground) {
		fputs("shardfs: ", stderr);
		vfprintf(stderr, fmt, ap);
		fputc('\n', stderr);
	} else {
		vsyslog(prio, fmt, ap);
	}
	va_end(ap);
}

static struct fs *fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static fuse_ino_t node_ino(const struct view_ref *vr, uint32_t node)
{
	return node == 0 ? FS_INO_ROOT : ((fuse_ino_t)vr->gen << 32 | node);
}

void fs_readahead_once(struct fs *fs)
{
	size_t n = strlen(fs->readahead_kb);
	int fd;

	if (!atomic_load(&fs->readahead_pending) ||
	    !atomic_exchange(&fs->readahead_pending, false))
		return;
	fd = open(fs->readahead_path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, fs->readahead_kb, n) != (ssize_t)n)
		fs_log(fs, LOG_INFO,
		       "kept the kernel's read-ahead (%s: %s); reads arrive in smaller requests",
		       fs->readahead_path, strerror(errno));
	if (fd >= 0)
		close(fd);
}

static void handle_free(struct fs *fs, struct handle *h);

/* ---- views ---- */

static void view_free_unused_locked(struct fs *fs, struct view_ref *vr)
{
	struct view_ref **p;

	if (vr->refs || vr->lookups)
		return;
	for (p = &fs->views; *p; p = &(*p)->next)
		if (*p == vr) {
			*p = vr->next;
			break;
		}
	sfs_view_free(vr->v);
	free(vr->held);
	free(vr->plan_json);
	free(vr);
}

static void view_unref_locked(struct fs *fs, struct view_ref *vr)
{
	vr->refs--;
	view_free_unused_locked(fs, vr);
}

static void view_unref(struct fs *fs, struct view_ref *vr)
{
	pthread_mutex_lock(&fs->lock);
	view_unref_locked(fs, vr);
	pthread_mutex_unlock(&fs->lock);
}

/*
 * The live view and node an inode number names, or NULL: root and the
 * control inodes name none.
 */
static struct view_ref *view_find_locked(struct fs *fs, fuse_ino_t ino,
					 uint32_t *node)
{
	struct view_ref *vr;

	if (!(ino >> 32))
		return NULL;
	for (vr = fs->views; vr && vr->gen != ino >> 32; vr = vr->next)
		;
	*node = (uint32_t)ino;
	return vr && *node < vr->v->nnodes ? vr : NULL;
}

/*
 * The view and node an inode names, with a reference taken; root is the
 * current view's node 0.  NULL for a control inode or a view that is gone.
 */
static struct view_ref *view_get(struct fs *fs, fuse_ino_t ino, uint32_t *node)
{
	struct view_ref *vr;

	pthread_mutex_lock(&fs->lock);
	if (ino == FS_INO_ROOT) {
		vr = fs->current;
		*node = 0;
	} else {
		vr = view_find_locked(fs, ino, node);
	}
	if (vr)
		vr->refs++;
	pthread_mutex_unlock(&fs->lock);
	return vr;
}

/* The kernel was given an entry for a node (lookup, readdirplus). */
static void view_looked_up_locked(struct view_ref *vr, uint32_t node)
{
	vr->held[node]++;
	vr->lookups++;
}

/* The kernel forgot n lookups of a node (or never got the reply). */
static void view_forgot_locked(struct fs *fs, struct view_ref *vr,
			       uint32_t node, uint64_t n)
{
	if (n > vr->held[node])
		n = vr->held[node];
	vr->held[node] -= n;
	vr->lookups -= n;
	view_free_unused_locked(fs, vr);
}

/* A name the kernel may still hold in a view that is not current. */
struct held_name {
	fuse_ino_t parent;
	const char *name; /* in a view referenced meanwhile */
};

/* Note what the kernel holds of vr, children before their directories. */
static bool add_held_locked(const struct view_ref *vr, struct held_name **names,
			    size_t *n, size_t *cap)
{
	uint32_t node;

	for (node = vr->v->nnodes - 1; node > 0; node--) {
		const struct sfs_view_node *nd = &vr->v->nodes[node];

		/* the root's names were invalidated at the switch and now
		 * belong to the current view */
		if (!vr->held[node] || !nd->parent)
			continue;
		if (*n == *cap) {
			size_t c = *cap ? 2 * *cap : 64;
			struct held_name *p = realloc(*names, c * sizeof(*p));

			if (!p)
				return false;
			*names = p;
			*cap = c;
		}
		(*names)[*n].parent = node_ino(vr, nd->parent);
		(*names)[(*n)++].name = nd->name;
	}
	return true;
}

/*
 * Views older than the one just replaced live on while the kernel holds
 * any of their entries: one in use at their switch (a working directory,
 * an open file), or made since by a path walk that had begun before it.
 * Such an entry stays cached after its last use unless it is invalidated,
 * and with it the view: invalidate them now, so that the kernel forgets
 * each as soon as no one uses it.
 */
static void invalidate_held(struct fs *fs, const struct view_ref *replaced)
{
	struct view_ref **views = NULL, *vr;
	struct held_name *names = NULL;
	size_t nviews = 0, n = 0, cap = 0, i;

	pthread_mutex_lock(&fs->lock);
	for (vr = fs->views; vr; vr = vr->next) {
		struct view_ref **vs;

		if (vr == fs->current || vr == replaced || !vr->lookups)
			continue;
		vs = realloc(views, (nviews + 1) * sizeof(*vs));
		if (!vs)
			break;
		views = vs;
		views[nviews++] = vr;
		vr->refs++;
		if (!add_held_locked(vr, &names, &n, &cap))
			break;
	}
	pthread_mutex_unlock(&fs->lock);
	for (i = 0; fs->se && i < n; i++)
		fuse_lowlevel_notify_inval_entry(fs->se, names[i].parent,
						 names[i].name,
						 strlen(names[i].name));
	pthread_mutex_lock(&fs->lock);
	for (i = 0; i < nviews; i++)
		view_unref_locked(fs, views[i]);
	pthread_mutex_unlock(&fs->lock);
	free(names);
	free(views);
}

/* A view that stopped being current, and the kernel still to be told. */
struct forget {
	struct fs *fs;
	struct view_ref *old;
};

/*
 * The root keeps its inode number across epochs: tell the kernel that the
 * names under it now lead elsewhere and to drop its pages, let go of what
 * older views still hold, then drop the old view's two references
 * (current, and this one): it lives on while the kernel holds its inodes.
 */
static void *forget_old(void *arg)
{
	struct forget *f = arg;
	struct fs *fs = f->fs;
	const struct sfs_view *v = f->old->v;
	const struct sfs_view_node *root = &v->nodes[0];
	uint32_t i;

	for (i = 0; fs->se && i < root->nchildren; i++) {
		const char *name =
			v->nodes[v->children[root->first_child + i]].name;

		fuse_lowlevel_notify_inval_entry(fs->se, FS_INO_ROOT, name,
						 strlen(name));
	}
	if (fs->se)
		fuse_lowlevel_notify_inval_inode(fs->se, FS_INO_ROOT, 0, 0);
	invalidate_held(fs, f->old);
	pthread_mutex_lock(&fs->lock);
	view_unref_locked(fs, f->old);
	view_unref_locked(fs, f->old);
	pthread_mutex_unlock(&fs->lock);
	free(f);
	atomic_fetch_sub(&fs->forgetting, 1);
	return NULL;
}

int fs_switch_epoch(struct fs *fs, uint64_t epoch, struct sfs_error *err)
{
	struct sfs_view_opts o;
	struct view_ref *vr, *old;
	bool same;
	int rc;

	pthread_mutex_lock(&fs->switch_lock);
	pthread_mutex_lock(&fs->lock);
	o = fs->vopts;
	/* every rank that shares a mount may write the same epoch */
	same = fs->current && o.options.plan.epoch == epoch;
	pthread_mutex_unlock(&fs->lock);
	rc = 0;
	if (same)
		goto out;
	o.options.plan.epoch = epoch;
	vr = calloc(1, sizeof(*vr));
	if (!vr) {
		rc = sfs_errorf(err, -ENOMEM, "out of memory");
		goto out;
	}
	rc = sfs_view_build(fs->idx, &o, &vr->v, err);
	if (!rc) {
		vr->held = calloc(vr->v->nnodes, sizeof(*vr->held));
		if (!vr->held) {
			sfs_view_free(vr->v);
			rc = sfs_errorf(err, -ENOMEM, "out of memory");
		}
	}
	if (rc) {
		free(vr);
		goto out;
	}
	vr->refs = 1;
	vr->built = time(NULL);
	pthread_mutex_lock(&fs->lock);
	vr->gen = ++fs->next_gen;
	vr->next = fs->views;
	fs->views = vr;
	old = fs->current;
	fs->current = vr;
	fs->vopts.options.plan.epoch = epoch;
	if (old)
		old->refs++; /* kept until the kernel is told */
	pthread_mutex_unlock(&fs->lock);
	atomic_fetch_add(&fs->switches, 1);
	if (old) {
		struct forget *f = calloc(1, sizeof(*f));
		pthread_t tid;

		if (f) {
			f->fs = fs;
			f->old = old;
		}
		/* A single-threaded session cannot serve the lookups the
		 * kernel may wait on while it invalidates: do it aside. */
		if (f)
			atomic_fetch_add(&fs->forgetting, 1);
		if (f && fs->single && fs->se &&
		    !pthread_create(&tid, NULL, forget_old, f)) {
			pthread_detach(tid);
		} else if (f) {
			forget_old(f);
		} else {
			pthread_mutex_lock(&fs->lock);
			view_unref_locked(fs, old);
			view_unref_locked(fs, old);
			pthread_mutex_unlock(&fs->lock);
		}
	}
out:
	pthread_mutex_unlock(&fs->switch_lock);
	return rc;
}

void fs_release_views(struct fs *fs)
{
	while (atomic_load(&fs->forgetting))
		usleep(1000);
	/* the kernel releases nothing once the session has ended */
	while (fs->handles)
		handle_free(fs, fs->handles);
	pthread_mutex_lock(&fs->lock);
	if (fs->current)
		view_unref_locked(fs, fs->current);
	fs->current = NULL;
	while (fs->views) {
		fs->views->refs = 1;
		fs->views->lookups = 0;
		view_unref_locked(fs, fs->views);
	}
	pthread_mutex_unlock(&fs->lock);
}

/* ---- attributes ---- */

static void node_stat(struct fs *fs, const struct view_ref *vr, uint32_t node,
		      struct stat *st)
{
	const struct sfs_view_node *n = &vr->v->nodes[node];

	memset(st, 0, sizeof(*st));
	st->st_ino = node_ino(vr, node);
	st->st_uid = fs->uid;
	st->st_gid = fs->gid;
	st->st_mtime = st->st_ctime = st->st_atime = vr->built;
	st->st_blksize = 1 << 20;
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
	case SFS_NODE_FILE:
		st->st_mode = S_IFREG | 0444;
		st->st_nlink = 1;
		st->st_size = (off_t)n->size;
		st->st_blocks = (blkcnt_t)((n->size + 511) / 512);
		break;
	}
}

static char *status_json(struct fs *fs);
static char *plan_json(struct fs *fs, struct view_ref *vr);

static char *epoch_text(struct fs *fs)
{
	char *s;
	uint64_t e;

	pthread_mutex_lock(&fs->lock);
	e = fs->vopts.options.plan.epoch;
	pthread_mutex_unlock(&fs->lock);
	return asprintf(&s, "%" PRIu64 "\n", e) < 0 ? NULL : s;
}

/* The bytes of a control file now: a heap string, or NULL. */
static char *control_text(struct fs *fs, fuse_ino_t ino)
{
	struct view_ref *vr;
	uint32_t node;
	char *s;

	switch (ino) {
	case FS_INO_EPOCH:
		return epoch_text(fs);
	case FS_INO_STATUS:
		return status_json(fs);
	case FS_INO_PLAN:
		vr = view_get(fs, FS_INO_ROOT, &node);
		if (!vr)
			return NULL;
		s = plan_json(fs, vr);
		s = s ? strdup(s) : NULL;
		view_unref(fs, vr);
		return s;
	}
	return NULL;
}

static int control_stat(struct fs *fs, fuse_ino_t ino, struct stat *st)
{
	char *text;

	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_uid = fs->uid;
	st->st_gid = fs->gid;
	st->st_mtime = st->st_ctime = st->st_atime = fs->mounted;
	if (ino == FS_INO_CTL) {
		st->st_mode = S_IFDIR | 0555;
		st->st_nlink = 2;
		return 0;
	}
	st->st_mode = S_IFREG | (ino == FS_INO_EPOCH ? 0644 : 0444);
	st->st_nlink = 1;
	if (ino == FS_INO_PLAN) {
		/* built once per view: its length without a copy */
		struct view_ref *vr =
			view_get(fs, FS_INO_ROOT, &(uint32_t){ 0 });
		const char *plan = vr ? plan_json(fs, vr) : NULL;

		st->st_size = plan ? (off_t)strlen(plan) : 0;
		if (vr)
			view_unref(fs, vr);
		return plan ? 0 : -ENOMEM;
	}
	text = control_text(fs, ino);
	if (!text)
		return -ENOMEM;
	st->st_size = (off_t)strlen(text);
	free(text);
	return 0;
}

static bool is_control(fuse_ino_t ino)
{
	return ino >= FS_INO_CTL && ino <= FS_INO_STATUS;
}

static void fs_getattr(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct view_ref *vr;
	struct stat st;
	uint32_t node;
	int rc;

	(void)fi;
	fs_readahead_once(fs);
	if (is_control(ino)) {
		rc = control_stat(fs, ino, &st);
		if (rc)
			fuse_reply_err(req, -rc);
		else
			fuse_reply_attr(req, &st, 0);
		return;
	}
	vr = view_get(fs, ino, &node);
	if (!vr) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	node_stat(fs, vr, node, &st);
	view_unref(fs, vr);
	/* the root's listing changes with the epoch: do not cache it */
	fuse_reply_attr(req, &st, ino == FS_INO_ROOT ? 0 : VIEW_TIMEOUT);
}

static void fs_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	static const char *const ctl_names[] = { "epoch", "plan.json",
						 "status" };
	struct fs *fs = fs_of(req);
	struct fuse_entry_param e;
	struct view_ref *vr;
	uint32_t node;
	int64_t child;
	int rc, i;

	fs_readahead_once(fs);
	memset(&e, 0, sizeof(e));
	if (parent == FS_INO_CTL ||
	    (parent == FS_INO_ROOT && !strcmp(name, ".shardfs"))) {
		e.ino = parent == FS_INO_ROOT ? FS_INO_CTL : 0;
		for (i = 0; !e.ino && i < 3; i++)
			if (!strcmp(name, ctl_names[i]))
				e.ino = FS_INO_EPOCH + (fuse_ino_t)i;
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
	if (is_control(parent)) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	vr = view_get(fs, parent, &node);
	if (!vr) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	child = sfs_view_lookup(vr->v, node, name);
	if (child < 0) {
		view_unref(fs, vr);
		fuse_reply_err(req, vr->v->nodes[node].kind == SFS_NODE_DIR ?
					    ENOENT :
					    ENOTDIR);
		return;
	}
	e.ino = node_ino(vr, (uint32_t)child);
	node_stat(fs, vr, (uint32_t)child, &e.attr);
	e.attr_timeout = VIEW_TIMEOUT;
	e.entry_timeout = VIEW_TIMEOUT;
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

/* The kernel lets go of inodes; a view no one holds or names is freed. */
static void forget_locked(struct fs *fs, fuse_ino_t ino, uint64_t nlookup)
{
	uint32_t node;
	struct view_ref *vr = view_find_locked(fs, ino, &node);

	if (vr)
		view_forgot_locked(fs, vr, node, nlookup);
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
		fuse_reply_err(req, is_control(ino) ? EINVAL : ESTALE);
		return;
	}
	if (ino == FS_INO_ROOT || vr->v->nodes[node].kind != SFS_NODE_LINK) {
		view_unref(fs, vr);
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (asprintf(&target, "%s/%s", fs->idx->source,
		     sfs_view_source_path(vr->v, &vr->v->nodes[node])) < 0)
		target = NULL;
	view_unref(fs, vr);
	if (!target) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	fuse_reply_readlink(req, target);
	free(target);
}

/* ---- handles ---- */

/* A new handle, on the list of open ones (freed at exit if the kernel
 * never releases it); NULL without memory. */
static struct handle *handle_new(struct fs *fs, enum handle_kind kind)
{
	struct handle *h = calloc(1, sizeof(*h));

	if (!h)
		return NULL;
	h->kind = kind;
	pthread_mutex_lock(&fs->lock);
	h->next = fs->handles;
	if (h->next)
		h->next->prev = h;
	fs->handles = h;
	pthread_mutex_unlock(&fs->lock);
	return h;
}

static void handle_free(struct fs *fs, struct handle *h)
{
	if (!h)
		return;
	pthread_mutex_lock(&fs->lock);
	if (h->prev)
		h->prev->next = h->next;
	else
		fs->handles = h->next;
	if (h->next)
		h->next->prev = h->prev;
	pthread_mutex_unlock(&fs->lock);
	if (h->src)
		fdcache_put(&fs->fds, h->src);
	if (h->vr)
		view_unref(fs, h->vr);
	sfs_slice_free(h->slice);
	free(h->buf);
	free(h);
}

/* ---- directories ---- */

static void fs_opendir(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct handle *h;

	if (is_control(ino) && ino != FS_INO_CTL) {
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
		h->vr = view_get(fs, ino, &h->node);
		if (!h->vr || h->vr->v->nodes[h->node].kind != SFS_NODE_DIR) {
			fuse_reply_err(req, h->vr ? ENOTDIR : ESTALE);
			handle_free(fs, h);
			return;
		}
	}
	fi->fh = (uintptr_t)h;
	if (fuse_reply_open(req, fi) == -ENOENT)
		handle_free(fs, h);
}

/* Add one entry; returns false when buf is full. */
static bool add_entry(fuse_req_t req, char *buf, size_t size, size_t *used,
		      const char *name, const struct stat *st, off_t next,
		      bool plus, double timeout)
{
	struct fuse_entry_param e;
	size_t n;

	if (plus) {
		memset(&e, 0, sizeof(e));
		e.attr = *st;
		/* "." and ".." carry no lookup: leave e.ino 0 */
		if (strcmp(name, ".") && strcmp(name, "..")) {
			e.ino = st->st_ino;
			e.attr_timeout = e.entry_timeout = timeout;
		}
		n = fuse_add_direntry_plus(req, buf + *used, size - *used, name,
					   &e, next);
	} else {
		n = fuse_add_direntry(req, buf + *used, size - *used, name, st,
				      next);
	}
	if (n > size - *used)
		return false;
	*used += n;
	return true;
}

/*
 * readdirplus gave the kernel the entries of children [from, to) of dir,
 * a lookup each; or the reply failed and it got none of them.
 */
static void children_given(struct fs *fs, struct view_ref *vr, uint32_t dir,
			   uint32_t from, uint32_t to, bool given)
{
	const struct sfs_view_node *d = &vr->v->nodes[dir];
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
	static const char *const ctl_names[] = { ".", "..", "epoch",
						 "plan.json", "status" };
	struct handle *h = (struct handle *)(uintptr_t)fi->fh;
	struct fs *fs = fs_of(req);
	char *buf = malloc(size);
	size_t used = 0;
	uint32_t from = 0, to = 0; /* children given whole: lookups */
	struct stat st;
	off_t i;

	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (!h->vr) { /* the control directory */
		for (i = off; i < 5; i++) {
			if (control_stat(fs,
					 i < 2 ? FS_INO_CTL :
						 FS_INO_EPOCH +
							 (fuse_ino_t)(i - 2),
					 &st) ||
			    !add_entry(req, buf, size, &used, ctl_names[i], &st,
				       i + 1, plus, 0))
				break;
		}
	} else {
		const struct sfs_view *v = h->vr->v;
		const struct sfs_view_node *d = &v->nodes[h->node];
		/* ".", "..", [".shardfs" at the root,] then the children */
		off_t extra = h->node == 0 ? 3 : 2;

		for (i = off; i < extra + (off_t)d->nchildren; i++) {
			const char *name;
			double timeout = VIEW_TIMEOUT;

			if (i < 2) {
				name = i ? ".." : ".";
				node_stat(fs, h->vr, h->node, &st);
			} else if (i < extra) {
				name = ".shardfs";
				control_stat(fs, FS_INO_CTL, &st);
				timeout = 0;
			} else {
				uint32_t c = v->children[d->first_child +
							 (uint32_t)(i - extra)];

				name = v->nodes[c].name;
				node_stat(fs, h->vr, c, &st);
			}
			if (!add_entry(req, buf, size, &used, name, &st, i + 1,
				       plus, timeout))
				break;
		}
		if (plus && i > extra) {
			from = (uint32_t)((off > extra ? off : extra) - extra);
			to = (uint32_t)(i - extra);
			children_given(fs, h->vr, h->node, from, to, true);
		}
	}
	(void)ino;
	if (fuse_reply_buf(req, buf, used) && from < to)
		children_given(fs, h->vr, h->node, from, to, false);
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

/* ---- files ---- */

/* The size and mtime the index recorded for a node's source file. */
static void node_source(const struct sfs_view *v, const struct sfs_view_node *n,
			uint64_t *size, int64_t *mtime)
{
	const struct sfs_shard *sh =
		&v->idx->shards[sfs_view_file(v, n)->shard];

	*size = n->member ? sh->members[n->member - 1].size : sh->size;
	*mtime = n->member ? sh->members[n->member - 1].mtime_ns : sh->mtime_ns;
}

/*
 * Plan-aware prefetch: the reader that opens a file will read the next one
 * in its directory soon; ask the kernel to start reading that one's first
 * bytes from the source now.
 */
static void prefetch_next(struct fs *fs, const struct view_ref *vr,
			  uint32_t node)
{
	const struct sfs_view *v = vr->v;
	int64_t next = sfs_view_next(v, node);
	const struct sfs_view_node *n;
	struct fdcache_ent *e;
	uint64_t size, off, len;
	int64_t mtime;
	int rc;

	if (next < 0 || v->nodes[next].kind == SFS_NODE_DIR)
		return;
	n = &v->nodes[next];
	node_source(v, n, &size, &mtime);
	sfs_view_first_range(v, n, &off, &len);
	e = fdcache_get(&fs->fds, sfs_view_source_path(v, n), size, mtime, &rc,
			NULL);
	if (!e)
		return;
	posix_fadvise(e->fd, (off_t)off,
		      (off_t)(len < PREFETCH_BYTES ? len : PREFETCH_BYTES),
		      POSIX_FADV_WILLNEED);
	fdcache_put(&fs->fds, e);
}

static void fs_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct sfs_error err = { 0 };
	const struct sfs_view_node *n;
	struct handle *h;
	uint64_t size;
	int64_t mtime;
	uint32_t node;
	int rc;

	fs_readahead_once(fs);
	h = handle_new(fs, H_DATA);
	if (!h) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (is_control(ino)) {
		if ((fi->flags & O_ACCMODE) != O_RDONLY &&
		    ino != FS_INO_EPOCH) {
			handle_free(fs, h);
			fuse_reply_err(req, EROFS);
			return;
		}
		h->kind = H_CONTROL;
		h->buf = control_text(fs, ino);
		h->len = h->buf ? strlen(h->buf) : 0;
		fi->direct_io = 1;
		fi->fh = (uintptr_t)h;
		if (!h->buf)
			rc = ENOMEM;
		else
			rc = fuse_reply_open(req, fi) == -ENOENT ? -1 : 0;
		if (rc) {
			if (rc > 0)
				fuse_reply_err(req, rc);
			handle_free(fs, h);
		}
		return;
	}
	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		handle_free(fs, h);
		fuse_reply_err(req, EROFS);
		return;
	}
	h->vr = view_get(fs, ino, &node);
	if (!h->vr) {
		handle_free(fs, h);
		fuse_reply_err(req, ESTALE);
		return;
	}
	n = &h->vr->v->nodes[node];
	if (n->kind != SFS_NODE_FILE) {
		handle_free(fs, h);
		fuse_reply_err(req, n->kind == SFS_NODE_DIR ? EISDIR : ELOOP);
		return;
	}
	node_source(h->vr->v, n, &size, &mtime);
	h->src_size = size;
	h->src_mtime = mtime;
	rc = sfs_view_slice(h->vr->v, n, &h->slice, &err);
	if (!rc) {
		h->src = fdcache_get(&fs->fds,
				     sfs_view_source_path(h->vr->v, n), size,
				     mtime, &rc, &err);
	}
	if (rc) {
		fs_log(fs, LOG_ERR, "%s", err.msg);
		atomic_fetch_add(&fs->errors, 1);
		handle_free(fs, h);
		fuse_reply_err(req, rc == -ENOMEM ? ENOMEM : EIO);
		return;
	}
	atomic_fetch_add(&fs->opens, 1);
	fi->keep_cache = 1;
	fi->fh = (uintptr_t)h;
	if (fs->prefetch)
		prefetch_next(fs, h->vr, node);
	if (fuse_reply_open(req, fi) == -ENOENT)
		handle_free(fs, h);
}

/*
 * A reply too large for the splice pipe: read it into memory.  (libfuse's
 * own fallback for fd buffers does the same, but allocates and frees the
 * whole reply with an extra copy: ../shared/notes/fuse-performance.md.)
 */
static void reply_copy(fuse_req_t req, struct fs *fs, const struct handle *h,
		       uint64_t pos, size_t len)
{
	char *buf = malloc(len);
	ssize_t got;

	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	got = sfs_slice_pread(h->slice, h->src->fd, buf, len, pos);
	if (got < 0) {
		atomic_fetch_add(&fs->errors, 1);
		fs_log(fs, LOG_ERR,
		       "%s: read failed at byte %llu: the shard is shorter than indexed; rebuild the index with shardfs-index",
		       h->src->path, (unsigned long long)pos);
		fuse_reply_err(req, EIO);
	} else {
		fuse_reply_buf(req, buf, (size_t)got);
	}
	free(buf);
}

static void fs_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct handle *h = (struct handle *)(uintptr_t)fi->fh;
	struct fs *fs = fs_of(req);
	const struct sfs_slice *s = h->slice;
	struct sfs_error err = { 0 };
	struct fuse_bufvec *bv;
	uint64_t pos = (uint64_t)off, end;
	size_t i, n = 0, first;

	(void)ino;
	if (h->kind == H_CONTROL) {
		size_t o = (size_t)off < h->len ? (size_t)off : h->len;
		size_t len = size < h->len - o ? size : h->len - o;
		/* The kernel may release the handle as soon as it has the
		 * reply, before fuse_reply_buf returns: reply from a copy. */
		char *chunk = malloc(len + 1);

		if (!chunk) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		memcpy(chunk, h->buf + o, len);
		fuse_reply_buf(req, chunk, len);
		free(chunk);
		return;
	}
	if (off < 0 || pos >= s->size) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	/* A shard truncated or rewritten under an open file would splice
	 * short or other bytes: check before every read. */
	if (fdcache_check(h->src->fd, h->src->path, h->src_size, h->src_mtime,
			  &err)) {
		atomic_fetch_add(&fs->errors, 1);
		if (!atomic_exchange(&h->logged, true))
			fs_log(fs, LOG_ERR, "%s", err.msg);
		fuse_reply_err(req, EIO);
		return;
	}
	end = s->size - pos < size ? s->size : pos + size;
	atomic_fetch_add(&fs->reads, 1);
	atomic_fetch_add(&fs->bytes, end - pos);
	if (end - pos > fs->splice_max) {
		reply_copy(req, fs, h, pos, (size_t)(end - pos));
		return;
	}
	first = sfs_slice_find(s, pos);
	for (i = first; i < s->nextents && s->extents[i].pos < end; i++)
		n++;
	bv = malloc(sizeof(*bv) + n * sizeof(bv->buf[0]));
	if (!bv) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	bv->count = n;
	bv->idx = 0;
	bv->off = 0;
	for (i = 0; i < n; i++) {
		const struct sfs_extent *x = &s->extents[first + i];
		uint64_t a = pos > x->pos ? pos - x->pos : 0;
		uint64_t b = end - x->pos < x->len ? end - x->pos : x->len;
		struct fuse_buf *fb = &bv->buf[i];

		memset(fb, 0, sizeof(*fb));
		fb->size = (size_t)(b - a);
		if (x->mem) {
			fb->mem = (char *)x->mem + a;
		} else {
			fb->flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK |
				    FUSE_BUF_FD_RETRY;
			fb->fd = h->src->fd;
			fb->pos = (off_t)(x->src + a);
		}
	}
	fuse_reply_data(req, bv, FUSE_BUF_SPLICE_MOVE);
	free(bv);
}

static void fs_release(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	(void)ino;
	handle_free(fs_of(req), (struct handle *)(uintptr_t)fi->fh);
	fuse_reply_err(req, 0);
}

/* ---- the control file ---- */

static void fs_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
		     size_t size, off_t off, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct sfs_error err = { 0 };
	uint64_t epoch;
	int rc;

	(void)fi;
	if (ino != FS_INO_EPOCH) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if (off != 0 || sfs_options_parse_epoch(buf, size, &epoch, &err)) {
		fs_log(fs, LOG_WARNING, "refused a write to .shardfs/epoch: %s",
		       off ? "write from the start of the file" : err.msg);
		fuse_reply_err(req, EINVAL);
		return;
	}
	rc = fs_switch_epoch(fs, epoch, &err);
	if (rc) {
		fs_log(fs, LOG_WARNING, "refused epoch %" PRIu64 ": %s", epoch,
		       err.msg);
		fuse_reply_err(req, rc == -ENOMEM ? ENOMEM : EINVAL);
		return;
	}
	fs_log(fs, LOG_INFO, "now serving epoch %" PRIu64, epoch);
	fuse_reply_write(req, size);
}

static void fs_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		       int to_set, struct fuse_file_info *fi)
{
	struct stat st;
	int rc;

	(void)attr;
	(void)fi;
	/* `echo 3 > epoch` truncates before it writes: let that pass */
	if (ino != FS_INO_EPOCH ||
	    (to_set & ~(FUSE_SET_ATTR_SIZE | FUSE_SET_ATTR_MTIME |
			FUSE_SET_ATTR_MTIME_NOW | FUSE_SET_ATTR_CTIME))) {
		fuse_reply_err(req, EROFS);
		return;
	}
	rc = control_stat(fs_of(req), ino, &st);
	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_attr(req, &st, 0);
}

/* ---- the rest ---- */

static void fs_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct fs *fs = fs_of(req);
	struct statvfs st;
	uint64_t bytes = 0;
	size_t i;

	(void)ino;
	memset(&st, 0, sizeof(st));
	for (i = 0; i < fs->idx->nshards; i++)
		bytes += fs->idx->shards[i].size;
	st.f_bsize = st.f_frsize = 4096;
	st.f_blocks = (fsblkcnt_t)((bytes + 4095) / 4096);
	st.f_files = (fsfilcnt_t)fs->idx->nshards;
	st.f_namemax = 255;
	st.f_flag = ST_RDONLY;
	fuse_reply_statfs(req, &st);
}

/* Provenance of a file: where its bytes come from. */
static char *xattr_value(struct fs *fs, const struct view_ref *vr,
			 uint32_t node, const char *name)
{
	const struct sfs_view *v = vr->v;
	const struct sfs_view_node *n = &v->nodes[node];
	const struct sfs_plan_file *f = sfs_view_file(v, n);
	const struct sfs_plan *p = v->plans[n->plan];
	char *s = NULL;
	size_t i, len = 0;

	if (!strcmp(name, "user.shardfs.source")) {
		if (asprintf(&s, "%s/%s", fs->idx->source,
			     sfs_view_source_path(v, n)) < 0)
			return NULL;
	} else if (!strcmp(name, "user.shardfs.samples")) {
		if (asprintf(&s, "%" PRIu64, f->nsamples) < 0)
			return NULL;
	} else if (!strcmp(name, "user.shardfs.padding")) {
		if (asprintf(&s, "%" PRIu64, f->npadding) < 0)
			return NULL;
	} else if (!strcmp(name, "user.shardfs.epoch")) {
		if (asprintf(&s, "%" PRIu64, p->opts.epoch) < 0)
			return NULL;
	} else if (!strcmp(name, "user.shardfs.range")) {
		s = malloc(XATTR_MAX + 32);
		for (i = 0; s && i < f->nruns && len < XATTR_MAX; i++) {
			const struct sfs_run *r = &p->runs[f->run_at + i];

			len += (size_t)snprintf(s + len, 32, "%s%" PRIu64,
						i ? "," : "", r->first);
			if (r->count > 1)
				len += (size_t)snprintf(
					s + len, 32, "-%" PRIu64,
					r->first + r->count - 1);
		}
		if (s && len >= XATTR_MAX) {
			free(s);
			s = NULL;
			errno = E2BIG;
		}
	} else {
		errno = ENODATA;
	}
	return s;
}

static void reply_xattr(fuse_req_t req, const char *value, size_t len,
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

	/* Only user.shardfs.* exists.  Saying so for security.* lets `ls -l`
	 * stop asking (it remembers EOPNOTSUPP per file system) instead of
	 * sending a request per entry. */
	if (strncmp(name, "user.", 5)) {
		fuse_reply_err(req, EOPNOTSUPP);
		return;
	}
	vr = is_control(ino) ? NULL : view_get(fs, ino, &node);
	if (!vr || vr->v->nodes[node].kind == SFS_NODE_DIR) {
		if (vr)
			view_unref(fs, vr);
		fuse_reply_err(req, ENODATA);
		return;
	}
	errno = ENOMEM;
	value = xattr_value(fs, vr, node, name);
	view_unref(fs, vr);
	if (!value) {
		fuse_reply_err(req, errno);
		return;
	}
	reply_xattr(req, value, strlen(value), size);
	free(value);
}

static void fs_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	static const char names[] =
		"user.shardfs.source\0user.shardfs.samples\0"
		"user.shardfs.range\0user.shardfs.padding\0user.shardfs.epoch";
	struct fs *fs = fs_of(req);
	struct view_ref *vr;
	uint32_t node;
	bool file;

	vr = is_control(ino) ? NULL : view_get(fs, ino, &node);
	file = vr && vr->v->nodes[node].kind != SFS_NODE_DIR;
	if (vr)
		view_unref(fs, vr);
	reply_xattr(req, names, file ? sizeof(names) : 0, size);
}

/* ---- introspection ---- */

/* The plan(s) being served, built once per view (under fs.lock). */
static char *plan_json(struct fs *fs, struct view_ref *vr)
{
	char *out = NULL, *one;
	size_t len = 0, n;
	uint32_t e;

	pthread_mutex_lock(&fs->lock);
	for (e = 0; !vr->plan_json && e < vr->v->nplans; e++) {
		char *grown;

		one = sfs_plan_json(vr->v->plans[e], fs->idx);
		n = one ? strlen(one) : 0;
		grown = one ? realloc(out, len + n + 4) : NULL;
		if (!grown) {
			free(one);
			free(out);
			out = NULL;
			break;
		}
		out = grown;
		if (vr->v->nplans > 1)
			out[len++] = e ? ',' : '[';
		memcpy(out + len, one, n);
		len += n;
		if (vr->v->nplans > 1 && e + 1 == vr->v->nplans)
			out[len++] = ']';
		out[len++] = '\n';
		out[len] = '\0';
		free(one);
		if (e + 1 == vr->v->nplans)
			vr->plan_json = out;
	}
	pthread_mutex_unlock(&fs->lock);
	return vr->plan_json;
}

/* Views alive: the current one and old ones still open or remembered. */
static size_t live_views(struct fs *fs)
{
	const struct view_ref *vr;
	size_t n = 0;

	pthread_mutex_lock(&fs->lock);
	for (vr = fs->views; vr; vr = vr->next)
		n++;
	pthread_mutex_unlock(&fs->lock);
	return n;
}

static char *status_json(struct fs *fs)
{
	struct sfs_mount_opts mount = {
		.epochs = fs->vopts.epochs,
		.symlinks = fs->vopts.symlinks,
		.prefetch = fs->prefetch,
	};
	struct sfs_status_in in = {
		.idx = fs->idx,
		.index_dir = fs->index_dir,
		.options = &fs->vopts.options,
		.mount = &mount,
		.counters = {
			.opens = atomic_load(&fs->opens),
			.reads = atomic_load(&fs->reads),
			.bytes = atomic_load(&fs->bytes),
			.errors = atomic_load(&fs->errors),
			.epoch_switches = atomic_load(&fs->switches),
			.views = live_views(fs),
		},
	};
	struct view_ref *vr;
	uint32_t node;
	char *text;

	vr = view_get(fs, FS_INO_ROOT, &node);
	if (!vr)
		return NULL;
	in.plan = vr->v->plans[0];
	text = sfs_status_json(&in);
	view_unref(fs, vr);
	return text;
}

static void fs_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	if (conn->capable & FUSE_CAP_SPLICE_WRITE)
		conn->want |= FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE;
	if (conn->capable & FUSE_CAP_CACHE_SYMLINKS)
		conn->want |= FUSE_CAP_CACHE_SYMLINKS;
	if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC)
		conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
	/* bytes under an inode number never change: no need to revalidate */
	conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
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
