/*
 * The views and who holds them: references (the mount's current view, open
 * directories, requests in progress), the kernel's lookup counts, the
 * epoch switch and the kernel invalidations it sends, and the open handles
 * (control files with no_open=0, directories).  Everything shared here is
 * guarded by fs.lock; one switch at a time runs under fs.switch_lock.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "fs.h"
#include "shardfs/util.h"

/* New lookup counts for a view of nnodes nodes, its only copy so far;
 * NULL without memory. */
static struct view_counts *counts_new(size_t nnodes)
{
	struct view_counts *c = calloc(1, sizeof(*c));

	if (c)
		c->held = calloc(nnodes ? nnodes : 1, sizeof(*c->held));
	if (!c || !c->held) {
		free(c);
		return NULL;
	}
	c->nheld = c->cap = nnodes;
	c->copies = 1;
	return c;
}

/* c counts the nodes of a copy of nnodes nodes (at least as many as
 * before: a copy keeps every node number).  0 or -ENOMEM. */
static int counts_fit_locked(struct view_counts *c, size_t nnodes)
{
	if (nnodes <= c->nheld)
		return 0;
	if (SFS_GROW(c->held, c->cap, nnodes))
		return -ENOMEM;
	memset(c->held + c->nheld, 0, (nnodes - c->nheld) * sizeof(*c->held));
	c->nheld = nnodes;
	return 0;
}

/* What a view holds but its place in the list: its nodes, their lookup
 * counts when no other copy shares them, its slices and its control
 * texts. */
static void view_drop_contents_locked(struct fs *fs, struct view_ref *vr)
{
	struct view_counts *c = vr->counts;

	files_forget_view_locked(fs, vr);
	sfs_view_free(vr->v);
	vr->v = NULL;
	if (c->copies == 1) {
		free(c->held);
		c->held = NULL;
		c->nheld = c->cap = 0;
	}
	free(vr->plan_json);
	vr->plan_json = NULL;
	free(vr->status_head);
	vr->status_head = NULL;
}

/* A newer copy of vr's generation lives (before it in fs.views). */
static bool newer_copy_locked(const struct fs *fs, const struct view_ref *vr)
{
	const struct view_ref *o;

	for (o = fs->views; o && o != vr; o = o->next)
		if (o->counts == vr->counts)
			return true;
	return false;
}

/*
 * Free a view no one holds or names; a view let go (revoked) loses its
 * contents as soon as no request holds it, and keeps only its place while
 * the kernel still holds some of its inodes.  The kernel's inodes of a
 * generation keep only its newest copy: the others go with their last
 * request or open directory.
 */
static void view_free_unused_locked(struct fs *fs, struct view_ref *vr)
{
	struct view_counts *c = vr->counts;
	struct view_ref **p;

	if (vr->revoked && !vr->refs && vr->v)
		view_drop_contents_locked(fs, vr);
	if (vr->refs || (c->lookups && !newer_copy_locked(fs, vr)))
		return;
	for (p = &fs->views; *p; p = &(*p)->next)
		if (*p == vr) {
			*p = vr->next;
			break;
		}
	view_drop_contents_locked(fs, vr);
	if (!--c->copies) {
		free(c->held);
		free(c);
	}
	free(vr);
}

static void view_unref_locked(struct fs *fs, struct view_ref *vr)
{
	vr->refs--;
	view_free_unused_locked(fs, vr);
}

void view_unref(struct fs *fs, struct view_ref *vr)
{
	pthread_mutex_lock(&fs->lock);
	view_unref_locked(fs, vr);
	pthread_mutex_unlock(&fs->lock);
}

/*
 * The live view and node an inode number names, or NULL: root and the
 * control inodes name none.  A view let go is found too (the kernel's
 * forgets must find it); its node is not checked once its contents are
 * gone.
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
	return vr && (!vr->v || *node < vr->v->nnodes) ? vr : NULL;
}

/*
 * The view and node an inode names, with a reference taken; root is the
 * current view's node 0.  NULL for a control inode or a view that is gone.
 */
struct view_ref *view_get(struct fs *fs, fuse_ino_t ino, uint32_t *node)
{
	struct view_ref *vr;

	pthread_mutex_lock(&fs->lock);
	if (ino == FS_INO_ROOT) {
		vr = fs->current;
		*node = 0;
	} else {
		vr = view_find_locked(fs, ino, node);
	}
	if (vr && vr->revoked)
		vr = NULL;
	if (vr)
		vr->refs++;
	pthread_mutex_unlock(&fs->lock);
	return vr;
}

bool view_revoked(struct fs *fs, fuse_ino_t ino)
{
	struct view_ref *vr;
	uint32_t node;
	bool revoked;

	pthread_mutex_lock(&fs->lock);
	vr = view_find_locked(fs, ino, &node);
	revoked = vr && vr->revoked;
	pthread_mutex_unlock(&fs->lock);
	return revoked;
}

/* The kernel was given an entry for a node (lookup, readdirplus): of
 * vr's generation, whichever copy vr is. */
void view_looked_up_locked(struct view_ref *vr, uint32_t node)
{
	vr->counts->held[node]++;
	vr->counts->lookups++;
}

/* The kernel forgot n lookups of a node (or never got the reply). */
void view_forgot_locked(struct fs *fs, struct view_ref *vr, uint32_t node,
			uint64_t n)
{
	struct view_counts *c = vr->counts;
	/* a view let go keeps only the sum of its counts */
	uint64_t held = c->held ? c->held[node] : c->lookups;
	struct view_ref *o, *next;

	if (n > held)
		n = held;
	if (c->held)
		c->held[node] -= n;
	c->lookups -= n;
	if (c->lookups) {
		view_free_unused_locked(fs, vr);
		return;
	}
	/* the last inode forgotten: every copy no one holds goes */
	for (o = fs->views; o; o = next) {
		next = o->next;
		if (o->counts == c)
			view_free_unused_locked(fs, o);
	}
}

/* The kernel lets go of inodes; a view no one holds or names is freed. */
void forget_locked(struct fs *fs, fuse_ino_t ino, uint64_t nlookup)
{
	uint32_t node;
	struct view_ref *vr = view_find_locked(fs, ino, &node);

	if (vr)
		view_forgot_locked(fs, vr, node, nlookup);
}

/* A name the kernel may still hold in a view that is not current. */
struct held_name {
	fuse_ino_t parent;
	const char *name; /* in a view referenced meanwhile */
};

/* Note what the kernel holds of vr (with dirs_only, its directories),
 * children before their directories. */
static bool add_held_locked(const struct view_ref *vr, bool dirs_only,
			    struct held_name **names, size_t *n, size_t *cap)
{
	uint32_t node;

	for (node = vr->v->nnodes - 1; node > 0; node--) {
		const struct sfs_view_node *nd = sfs_view_node(vr->v, node);

		/* the root's names were invalidated at the switch and now
		 * belong to the current view */
		if (!vr->counts->held[node] || !nd->parent ||
		    (dirs_only && nd->kind != SFS_NODE_DIR))
			continue;
		if (SFS_GROW(*names, *cap, *n + 1))
			return false;
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
 *
 * The replaced view's directories too.  Its names at the root were just
 * invalidated, which drops everything beneath them no one uses; but a
 * name at the root is invalidated by name, and the one the switch before
 * invalidated may have been this view's already (looked up between that
 * switch and its invalidation): in use then, what was looked up beneath
 * it since is still cached, under a name no invalidation of the root
 * reaches.
 */
static void invalidate_held(struct fs *fs, const struct view_ref *replaced)
{
	struct view_ref **views = NULL, *vr;
	struct held_name *names = NULL;
	size_t nviews = 0, views_cap = 0, n = 0, cap = 0, i;

	pthread_mutex_lock(&fs->lock);
	for (vr = fs->views; vr; vr = vr->next) {
		/* (a copy of the current generation is no view replaced) */
		if (vr == fs->current || !vr->counts->lookups || vr->revoked ||
		    (fs->current && vr->gen == fs->current->gen))
			continue;
		if (SFS_GROW(views, views_cap, nviews + 1))
			break;
		views[nviews++] = vr;
		vr->refs++;
		if (!add_held_locked(vr, vr == replaced, &names, &n, &cap))
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

/* The views let go by one bound_old_views: what to log and what pages
 * the kernel must drop. */
struct let_go {
	uint64_t *epochs;
	size_t nepochs, epochs_cap;
	fuse_ino_t *inos; /* their files the kernel holds */
	size_t ninos, inos_cap;
};

/* Let vr go: see bound_old_views. */
static void let_go_locked(struct fs *fs, struct view_ref *vr, struct let_go *g)
{
	struct handle *h;
	uint32_t node;

	if (!SFS_GROW(g->epochs, g->epochs_cap, g->nepochs + 1))
		g->epochs[g->nepochs++] = vr->v->epoch;
	for (node = 1; node < vr->v->nnodes; node++)
		if (vr->counts->held[node] &&
		    sfs_view_node(vr->v, node)->kind == SFS_NODE_FILE &&
		    !SFS_GROW(g->inos, g->inos_cap, g->ninos + 1))
			g->inos[g->ninos++] = node_ino(vr, node);
	vr->revoked = true;
	/* an open directory's reference goes now; a listing under way holds
	 * one of its own (handle_view) */
	for (h = fs->handles; h; h = h->next)
		if (h->kind == H_DIR && h->vr == vr && !h->revoked) {
			h->revoked = true;
			vr->refs--;
		}
	view_free_unused_locked(fs, vr);
}

/*
 * Old views live while the kernel holds any of their inodes, and whoever
 * can open the mount can hold one of each epoch (a file left open): past
 * FS_OLD_VIEWS old views, the oldest are let go.  Their memory is freed
 * once no request is in progress in them, their inodes answer EIO from
 * then on (the kernel is told to drop their pages, so that an open file
 * reads no cached bytes either), and each is logged once.  What is left
 * of one is its place in the list and its lookup count, until the kernel
 * forgets its last inode.
 */
static void bound_old_views(struct fs *fs)
{
	struct let_go g = { 0 };
	struct view_ref *vr, *oldest;
	size_t old, i;

	pthread_mutex_lock(&fs->lock);
	for (;;) {
		old = 0;
		oldest = NULL;
		for (vr = fs->views; vr; vr = vr->next) {
			/* a copy of the current generation (fs_view_grow)
			 * is no old epoch: it lives while requests or
			 * listings hold it */
			if (vr == fs->current || vr->revoked ||
			    (fs->current && vr->gen == fs->current->gen))
				continue;
			old++;
			if (!oldest || vr->gen < oldest->gen)
				oldest = vr;
		}
		if (old <= FS_OLD_VIEWS)
			break;
		let_go_locked(fs, oldest, &g);
	}
	pthread_mutex_unlock(&fs->lock);
	for (i = 0; i < g.nepochs; i++)
		fs_log(fs, LOG_WARNING,
		       "epoch %" PRIu64
		       ": let go of its view: more than %d older epochs were held open (a file or directory in each); its files still open now fail with EIO",
		       g.epochs[i], FS_OLD_VIEWS);
	for (i = 0; fs->se && i < g.ninos; i++)
		fuse_lowlevel_notify_inval_inode(fs->se, g.inos[i], 0, 0);
	free(g.epochs);
	free(g.inos);
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
	const struct sfs_view_node *root = sfs_view_node(v, 0);
	uint32_t i;

	/* every lookup at the root that found the old view has replied */
	pthread_rwlock_wrlock(&fs->root_lookups);
	pthread_rwlock_unlock(&fs->root_lookups);
	for (i = 0; fs->se && i < root->nchildren; i++) {
		const char *name =
			sfs_view_node(v, v->children[root->first_child + i])
				->name;

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
	bound_old_views(fs);
	free(f);
	atomic_fetch_sub(&fs->forgetting, 1);
	return NULL;
}

/* A build that takes long says so, every BUILD_NOTE_SECONDS. */
#define BUILD_NOTE_SECONDS 10

struct build_note {
	struct fs *fs;
	bool ahead; /* built ahead, for the next epoch */
	unsigned noted; /* lines logged */
};

/* (sfs_view_opts.progress) */
static void build_progress(const struct sfs_view_opts *o, size_t done,
			   size_t total, double seconds)
{
	struct build_note *n = o->progress_arg;

	if (seconds < (double)BUILD_NOTE_SECONDS * (n->noted + 1))
		return;
	n->noted = (unsigned)(seconds / BUILD_NOTE_SECONDS);
	fs_log(n->fs, LOG_NOTICE,
	       "epoch %" PRIu64
	       "%s: its view is still being built: %zu of %zu files described in %.0f s (a Parquet slice is sized by cutting its pages: larger blocks build faster)",
	       o->options.plan.epoch, n->ahead ? " (built ahead)" : "", done,
	       total, seconds);
}

/* Set o to note a long build in the log. */
static void note_build(struct sfs_view_opts *o, struct build_note *n,
		       struct fs *fs, bool ahead)
{
	n->fs = fs;
	n->ahead = ahead;
	n->noted = 0;
	o->progress = build_progress;
	o->progress_arg = n;
}

static void *build_ahead(void *arg)
{
	struct fs *fs = arg;
	struct sfs_view_opts o = fs->vopts;
	struct build_note note;
	struct sfs_error err;

	sfs_view_free(fs->ahead.dropped);
	fs->ahead.dropped = NULL;
	o.options.plan.epoch = fs->ahead.epoch;
	o.cancel = &fs->ahead.cancel;
	note_build(&o, &note, fs, true);
	if (sfs_view_build(fs->idx, &o, &fs->ahead.v, &err))
		fs->ahead.v = NULL;
	else
		atomic_store(&fs->ahead.built, true);
	return NULL;
}

/* Wait for the build ahead to end, first asking it to stop if cancel. */
static void ahead_join_locked(struct fs *fs, bool cancel)
{
	if (!fs->ahead.running)
		return;
	if (cancel)
		atomic_store(&fs->ahead.cancel, true);
	pthread_join(fs->ahead.tid, NULL);
	fs->ahead.running = false;
}

/* Wait for the build ahead (asking it to stop if cancel) and take what
 * it built: the caller's, NULL if none. */
static struct sfs_view *ahead_end_locked(struct fs *fs, bool cancel)
{
	struct sfs_view *v;

	ahead_join_locked(fs, cancel);
	atomic_store(&fs->ahead.built, false);
	v = fs->ahead.v;
	fs->ahead.v = NULL;
	return v;
}

/*
 * Have the view of the epoch after the current one built ahead: keep the
 * one built or being built for it, else drop what there is and start it
 * (the new build frees what was dropped: the switch does not wait on it).
 */
static void ahead_start_locked(struct fs *fs)
{
	uint64_t next;

	if (!fs->current || fs->current->v->epoch == UINT64_MAX)
		return;
	next = fs->current->v->epoch + 1;
	if ((fs->ahead.running || fs->ahead.v) && fs->ahead.epoch == next)
		return;
	fs->ahead.dropped = ahead_end_locked(fs, true);
	if (fs->ahead.may_start) {
		fs->ahead.epoch = next;
		atomic_store(&fs->ahead.cancel, false);
		/* without a thread, the next switch builds its view itself */
		fs->ahead.running =
			!fs_thread_start(&fs->ahead.tid, build_ahead, fs);
	}
	if (!fs->ahead.running) {
		sfs_view_free(fs->ahead.dropped);
		fs->ahead.dropped = NULL;
	}
}

/*
 * The view built ahead if it is epoch's and still what a build would give
 * (the shards it read unchanged), else NULL.  A build ahead of another
 * epoch is stopped; what it built is kept, for the epoch after the current
 * one if this switch fails.
 */
static struct sfs_view *ahead_take_locked(struct fs *fs, uint64_t epoch)
{
	struct sfs_view *v;
	struct sfs_error err;

	if (fs->ahead.epoch != epoch) {
		ahead_join_locked(fs, true);
		return NULL;
	}
	v = ahead_end_locked(fs, false);
	if (v && sfs_view_check_shards(v, fs->vopts.srcfd, &err)) {
		sfs_view_free(v);
		v = NULL;
	}
	return v;
}

void fs_ahead_start(struct fs *fs)
{
	pthread_mutex_lock(&fs->switch_lock);
	/* a loader that lists a view of epochs=N > 1 once sees N epochs,
	 * and does not switch */
	fs->ahead.may_start = fs->mount.ahead && fs->vopts.epochs == 1;
	ahead_start_locked(fs);
	pthread_mutex_unlock(&fs->switch_lock);
}

int fs_switch_epoch(struct fs *fs, uint64_t epoch, struct sfs_error *err)
{
	struct sfs_view_opts o;
	struct build_note note;
	struct view_ref *vr, *old;
	bool same, taken = false;
	int rc;

	pthread_mutex_lock(&fs->switch_lock);
	pthread_mutex_lock(&fs->lock);
	o = fs->vopts;
	/* every rank that shares a mount may write the same epoch */
	same = fs->current && fs->current->v->epoch == epoch;
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
	vr->v = ahead_take_locked(fs, epoch);
	taken = vr->v != NULL;
	note_build(&o, &note, fs, false);
	if (!taken)
		rc = sfs_view_build(fs->idx, &o, &vr->v, err);
	if (!rc) {
		vr->counts = counts_new(vr->v->nnodes);
		if (!vr->counts) {
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
	if (old)
		old->refs++; /* kept until the kernel is told */
	pthread_mutex_unlock(&fs->lock);
	atomic_fetch_add(&fs->switches, 1);
	if (taken)
		atomic_fetch_add(&fs->switches_ahead, 1);
	if (old) {
		struct forget *f = calloc(1, sizeof(*f));
		/* A single-threaded session cannot serve the lookups (nor
		 * the reads) the kernel may wait on while it invalidates: do
		 * it aside, never in this handler. */
		bool aside = fs->single && fs->se;
		pthread_t tid;

		if (f) {
			f->fs = fs;
			f->old = old;
			atomic_fetch_add(&fs->forgetting, 1);
		}
		if (f && aside && !fs_thread_start(&tid, forget_old, f)) {
			pthread_detach(tid);
		} else if (f && !aside) {
			forget_old(f);
		} else {
			if (f) {
				free(f);
				atomic_fetch_sub(&fs->forgetting, 1);
			}
			pthread_mutex_lock(&fs->lock);
			view_unref_locked(fs, old);
			view_unref_locked(fs, old);
			pthread_mutex_unlock(&fs->lock);
			if (aside)
				fs_log(fs, LOG_WARNING,
				       "epoch %" PRIu64
				       ": out of memory or threads: the kernel is not told that the names of the epoch before are stale (they go when their entry timeout ends), and old views are let go at the next switch",
				       epoch);
			else
				bound_old_views(fs);
		}
	}
out:
	ahead_start_locked(fs);
	pthread_mutex_unlock(&fs->switch_lock);
	return rc;
}

/* (fs.h) */
int fs_view_grow(struct fs *fs, struct sfs_view *nv)
{
	struct view_ref *vr = calloc(1, sizeof(*vr)), *cur;
	struct view_counts *fresh = NULL;

	if (!vr)
		goto out_nomem;
	pthread_mutex_lock(&fs->lock);
	cur = fs->current;
	pthread_mutex_unlock(&fs->lock);
	/* (only the watcher grows the view: cur stays current) */
	if (!cur) {
		fresh = counts_new(nv->nnodes);
		if (!fresh)
			goto out_nomem;
	}
	vr->v = nv;
	vr->refs = 1; /* current */
	pthread_mutex_lock(&fs->lock);
	if (cur) {
		/* the copy shares the kernel's lookups: node numbers are
		 * kept, and it has every node of cur and more; the counts
		 * grow as a vector does, never copied whole per copy */
		if (counts_fit_locked(cur->counts, nv->nnodes)) {
			pthread_mutex_unlock(&fs->lock);
			goto out_nomem;
		}
		vr->counts = cur->counts;
		vr->counts->copies++;
		vr->gen = cur->gen;
		vr->built = cur->built;
	} else {
		vr->counts = fresh;
		vr->gen = ++fs->next_gen;
		vr->built = time(NULL);
	}
	/* at the head: view_find_locked finds the newest copy of a gen */
	vr->next = fs->views;
	fs->views = vr;
	fs->current = vr;
	if (cur)
		view_unref_locked(fs, cur);
	pthread_mutex_unlock(&fs->lock);
	/* the reads parked past the end read what came */
	fs_tend_parked(fs, false);
	return 0;
out_nomem:
	free(vr);
	sfs_view_free(nv);
	return -ENOMEM;
}

void fs_release_views(struct fs *fs)
{
	struct view_ref *vr;

	pthread_mutex_lock(&fs->switch_lock);
	fs->ahead.may_start = false;
	sfs_view_free(ahead_end_locked(fs, true));
	pthread_mutex_unlock(&fs->switch_lock);
	while (atomic_load(&fs->forgetting))
		usleep(1000);
	/* the kernel releases nothing once the session has ended */
	while (fs->handles)
		handle_free(fs, fs->handles);
	pthread_mutex_lock(&fs->lock);
	if (fs->current)
		view_unref_locked(fs, fs->current);
	fs->current = NULL;
	/* every view goes, whatever the kernel remembered */
	for (vr = fs->views; vr; vr = vr->next)
		vr->counts->lookups = 0;
	while (fs->views) {
		fs->views->refs = 1;
		view_unref_locked(fs, fs->views);
	}
	pthread_mutex_unlock(&fs->lock);
}

struct view_ref *handle_view(struct fs *fs, struct handle *h)
{
	struct view_ref *vr = NULL;

	pthread_mutex_lock(&fs->lock);
	/* (a view let go between an opendir's view_get and its handle's
	 * vr being set keeps its contents until the closedir) */
	if (h->vr && !h->revoked && !h->vr->revoked) {
		vr = h->vr;
		vr->refs++;
	}
	pthread_mutex_unlock(&fs->lock);
	return vr;
}

/* A new handle, on the list of open ones (freed at exit if the kernel
 * never releases it); NULL without memory. */
struct handle *handle_new(struct fs *fs, enum handle_kind kind)
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

void handle_free(struct fs *fs, struct handle *h)
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
	if (h->vr && !h->revoked)
		view_unref_locked(fs, h->vr);
	pthread_mutex_unlock(&fs->lock);
	free(h->buf);
	free(h);
}

/* Views alive: the current one and old ones still open or remembered
 * (not those let go). */
size_t live_views(struct fs *fs)
{
	const struct view_ref *vr;
	size_t n = 0;

	pthread_mutex_lock(&fs->lock);
	for (vr = fs->views; vr; vr = vr->next)
		n += !vr->revoked;
	pthread_mutex_unlock(&fs->lock);
	return n;
}
