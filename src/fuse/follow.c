/*
 * follow=1 (docs/follow.md): the daemon of a source that grows.  A thread
 * of its own watches the source (inotify, and a listing every
 * follow_interval seconds), accepts new shards into the stream
 * (sfs_follow_scan) and lays out each window as it completes
 * (sfs_window_build) for the readers this mount shows.  The tree:
 *
 *   /<rank>/<worker>/window-<k>.<ext>   a complete window, never changes
 *   /<rank>/<worker>/stream.<ext>       the windows end to end; a read of
 *                                       bytes not there yet waits
 *   /.shardfs/status, consumed, ack      control.c's, as on every mount
 *
 * The tree is a view (sfs_view_follow, served by ops.c and read.c as
 * every view): the watcher copies it as windows come, consumption hides
 * them and the stream completes (publish_view, fs_view_grow), so its
 * inode numbers are a view's (fs.h), kept across its copies.  Windows are
 * never freed before the unmount: what a number names never changes.
 *
 * One lock (fw.lock) guards what the readers see: the stream as published
 * to them (fw.shards), the windows and the readers.  The watcher scans
 * new shards and lays out windows without it (its own sfs_follow, fw.f),
 * then publishes them under it, briefly; the bytes of the shards are read
 * outside it, each read opening the shard and checking it is as it
 * entered the stream.
 *
 * This file: the options, the watcher, the windows, the view (and the
 * windows consumption hides from it); follow_control.c: consumption (the
 * acks, the last shard consumed, the progress files) and the status;
 * follow_read.c: what the files add to read.c's path (access,
 * attributes, shard descriptors, read-ahead, the wording of a parked
 * read); follow_i.h: what they share.  All of it hangs from
 * fs->follow: no state of its own outside struct fs.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <syslog.h>
#include <unistd.h>

#include "fs.h"
#include "shardfs/follow.h"
#include "shardfs/index.h"
#include "shardfs/status.h"
#include "shardfs/util.h"

#include "follow_i.h"

static int publish_view(struct fw *w, struct sfs_error *err);
static void build_failed(struct fw *w, uint64_t k, const char *msg);

static void note(void *arg, const char *msg)
{
	fs_log(arg, LOG_WARNING, "%s", msg);
}

int follow_prepare(struct fs *fs, const char *src, struct sfs_error *err)
{
	struct fw *w;
	const struct sfs_plan_opts *o = &fs->vopts.options.plan;
	const struct sfs_format_ops *format = NULL;
	char names[64];
	size_t r, k, n;
	int rc;

	if (!fs->mount.window)
		return sfs_errorf(
			err, -EINVAL,
			"follow=1 needs window=N, samples per window, a multiple of world/replicas x workers x batch (%llu): e.g. window=%llu",
			(unsigned long long)(o->world / o->replicas) *
				o->workers * o->batch,
			(unsigned long long)(o->world / o->replicas) *
				o->workers * o->batch * 256);
	rc = sfs_follow_check_window(fs->mount.window, o, err);
	if (rc)
		return rc;
	if (o->epoch || fs->mount.epochs != 1 || o->epoch_size)
		return sfs_errorf(
			err, -EINVAL,
			"follow=1 serves windows, not epochs: leave out epoch=, epochs= and epoch_size= (window k is planned as epoch k)");
	if (fs->mount.format)
		format = sfs_format_by_name(
			sfs_follow_formats[fs->mount.format]);
	w = calloc(1, sizeof(*w));
	if (!w)
		return sfs_errorf(err, -ENOMEM, "out of memory");
	/* fs owns it from here: follow_stop frees it, whatever failed */
	fs->follow = w;
	w->fs = fs;
	w->n = fs->mount.window;
	w->first = o->start / w->n;
	w->wake[0] = w->wake[1] = -1;
	w->progress_fd = -1;
	pthread_mutex_init(&w->lock, NULL);
	pthread_mutex_init(&w->text_lock, NULL);
	if (fs->mount.progress_dir) {
		w->progress_fd =
			open(fs->mount.progress_dir,
			     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (w->progress_fd < 0)
			return sfs_errorf(
				err, -errno,
				"progress=%s: cannot open the directory (%s): create it; a symlink is not followed",
				fs->mount.progress_dir, strerror(errno));
	}
	rc = sfs_follow_open(src, fs->mount.index_dir, true, format, note, fs,
			     &w->f, err);
	if (rc)
		return rc;
	rc = sfs_follow_scan(w->f, NULL, err);
	if (rc)
		return rc;
	if (!w->f->format)
		return sfs_errorf(
			err, -EINVAL,
			"follow=1: %s holds no shard yet, so its format is not known: add format=%s (or %s)",
			w->f->source, sfs_format_concatenating(0)->name,
			sfs_format_concatenating_names(1, ", ", names,
						       sizeof(names)));
	/* the first of the driver's endings, without its dot */
	w->ext = w->f->format->suffixes[0] + 1;
	if (w->f->log_path) {
		w->log_path = strdup(w->f->log_path);
		if (!w->log_path)
			return sfs_errorf(err, -ENOMEM, "out of memory");
	}
	/* the readers shown: every worker of each rank shown */
	n = fs->vopts.options.nranks ? fs->vopts.options.nranks : o->world;
	w->ranks = calloc(n, sizeof(*w->ranks));
	w->readers = calloc(n * o->workers, sizeof(*w->readers));
	w->plan_readers = calloc(n * o->workers, sizeof(*w->plan_readers));
	if (!w->ranks || !w->readers || !w->plan_readers)
		return sfs_errorf(err, -ENOMEM, "out of memory");
	for (r = 0; r < n; r++) {
		w->ranks[r] = fs->vopts.options.nranks ?
				      fs->vopts.options.ranks[r] :
				      (uint32_t)r;
		for (k = 0; k < o->workers; k++) {
			struct freader *fr = &w->readers[w->nreaders];

			fr->rank = w->ranks[r];
			fr->worker = (uint32_t)k;
			fr->window = w->first;
			w->plan_readers[w->nreaders++] =
				(size_t)(fr->rank / o->replicas) * o->workers +
				k;
		}
	}
	w->nranks = n;
	w->nreaders_all = (size_t)(o->world / o->replicas) * o->workers;
	w->vreaders = calloc(w->nreaders, sizeof(*w->vreaders));
	if (!w->vreaders)
		return sfs_errorf(err, -ENOMEM, "out of memory");
	for (r = 0; r < w->nreaders; r++)
		w->vreaders[r] = (struct sfs_view_reader){
			.rank = w->readers[r].rank,
			.worker = w->readers[r].worker
		};
	/* the tree, no window in it yet */
	return publish_view(w, err);
}

const char *follow_source(const struct fs *fs)
{
	return fs->follow->f->source;
}

int follow_srcfd(const struct fs *fs)
{
	return fs->follow->f->srcfd;
}

/* ---- the windows, built by the watcher ---- */

/* Who the source lets read the shards of the stream the readers do not
 * have yet (publish adds them): into acc (from shard w->nshards on), by
 * the watcher, without w->lock (a few stats each). */
static int look_at_shards(struct fw *w, struct sfs_access **acc)
{
	const struct sfs_follow *f = w->f;
	size_t i, n = f->idx->nshards - w->nshards;
	int rc;

	*acc = n ? calloc(n, sizeof(**acc)) : NULL;
	if (n && !*acc)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		rc = sfs_index_file_access(f->source, f->srcfd,
					   f->idx->shards[w->nshards + i].path,
					   &(*acc)[i]);
		if (rc) {
			free(*acc);
			*acc = NULL;
			return rc;
		}
	}
	return 0;
}

/* Publish to the readers (with w->lock) the shards of the stream they do
 * not have yet, with acc (look_at_shards).  0 or -ENOMEM (nothing of it
 * then). */
static int publish_shards(struct fw *w, const struct sfs_access *acc)
{
	const struct sfs_follow *f = w->f;
	size_t i, n = f->idx->nshards;

	if (SFS_GROW(w->shards, w->shards_cap, n) ||
	    SFS_GROW(w->shard_acc, w->shard_acc_cap, n))
		return -ENOMEM;
	for (i = w->nshards; i < n; i++) {
		w->shards[i] = f->idx->shards[i];
		w->shards[i].path = strdup(f->idx->shards[i].path);
		if (!w->shards[i].path) {
			while (i-- > w->nshards)
				free(w->shards[i].path);
			return -ENOMEM;
		}
		w->shard_acc[i] = acc[i - w->nshards];
	}
	w->nshards = n;
	w->nsamples = f->idx->nsamples;
	w->ended = f->ended;
	w->log_kept = f->log_fd >= 0;
	return 0;
}

/* a: also of a file that serves bytes of a shard the source lets s read.
 * A shard that cannot be looked at (gone: its bytes are EIO) adds
 * nothing. */
static void access_and(struct sfs_access *a, const struct sfs_access *s)
{
	if (!s->known)
		return;
	if (!a->known) {
		*a = *s;
		a->mode &= 0444u;
		return;
	}
	sfs_index_access_meet(a, s);
}

/* Add window win (built) to the readers' streams; with w->lock, its
 * shards published. */
static int add_window(struct fw *w, struct sfs_window *win)
{
	size_t i, j;

	if (SFS_GROW(w->wins, w->cap, w->nwins + 1))
		return -ENOMEM;
	for (i = 0; i < w->nreaders; i++) {
		struct freader *r = &w->readers[i];
		const struct sfs_window_reader *wr = &win->readers[i];
		struct sfs_access a = { 0 };

		if (SFS_GROW(r->at, r->cap, w->nwins + 2) ||
		    SFS_GROW(r->acc, r->acc_cap, w->nwins + 1))
			return -ENOMEM;
		for (j = 0; j < wr->nruns; j++) {
			const struct sfs_access *sa =
				&w->shard_acc[sfs_window_run_shard(
					win, w->shards, &wr->runs[j])];

			access_and(&a, sa);
			access_and(&r->stream_acc, sa);
		}
		if (!w->nwins)
			r->at[0] = 0;
		r->at[w->nwins + 1] = r->at[w->nwins] + wr->bytes.size;
		r->acc[w->nwins] = a;
	}
	w->wins[w->nwins++] = win;
	w->padding += win->padding;
	w->dropped += win->dropped;
	w->status_gen++;
	return 0;
}

/* Log a failed build of window k once (the same error again: not). */
static void build_failed(struct fw *w, uint64_t k, const char *msg)
{
	if (w->build_error && !strcmp(w->build_error, msg))
		return;
	fs_log(w->fs, LOG_ERR, "window %" PRIu64 ": %s", k, msg);
	free(w->build_error);
	w->build_error = strdup(msg);
}

/*
 * The watcher's turn: list the source (with scan), scan the new shards
 * and lay out the windows that completed, all without w->lock (a shard
 * of a gigabyte takes seconds: reads of what is there must not wait for
 * it), then publish the shards and the windows to the readers under the
 * lock, briefly.  Only the watcher (or follow_start, before it runs)
 * changes w->f, w->nwins and w->last_built, so it reads them unlocked.
 * Returns the windows there were before (to see what changed).
 */
static size_t advance(struct fw *w, bool scan)
{
	const struct sfs_plan_opts *o = &w->fs->vopts.options.plan;
	struct sfs_window **built = NULL;
	struct sfs_access *acc = NULL;
	struct sfs_error err = { 0 };
	size_t nbuilt = 0, cap = 0, i, before = w->nwins;
	uint64_t first, full;
	bool last, last_built = w->last_built, failed = false;
	bool complete;

	if (scan && sfs_follow_scan(w->f, NULL, &err))
		fs_log(w->fs, LOG_ERR, "%s", err.msg);
	sfs_follow_windows(w->f->idx->nsamples, w->n, o->start, w->f->ended,
			   &first, &full, &last);
	while (before + nbuilt < full || (last && !last_built)) {
		uint64_t k = w->first + before + nbuilt;
		bool is_last = before + nbuilt >= full;
		struct sfs_window *win;
		int rc = sfs_window_build(w->f, o, w->n, k, is_last,
					  w->plan_readers, w->nreaders, &win,
					  &err);

		if (rc == -ENODATA) {
			last_built = true;
			break;
		}
		if (!rc && SFS_GROW(built, cap, nbuilt + 1)) {
			sfs_window_free(win);
			rc = -ENOMEM;
			snprintf(err.msg, sizeof(err.msg), "out of memory");
		}
		if (rc) {
			build_failed(w, k, err.msg);
			failed = true;
			break;
		}
		built[nbuilt++] = win;
		if (is_last)
			last_built = true;
	}
	if (look_at_shards(w, &acc)) {
		build_failed(w, w->first + before, "out of memory");
		for (i = 0; i < nbuilt; i++)
			sfs_window_free(built[i]);
		free(built);
		return before;
	}
	pthread_mutex_lock(&w->lock);
	i = 0;
	if (publish_shards(w, acc)) {
		build_failed(w, w->first + before, "out of memory");
		failed = true;
	}
	for (; !failed && i < nbuilt; i++) {
		if (add_window(w, built[i])) {
			build_failed(w, w->first + w->nwins, "out of memory");
			failed = true;
			break;
		}
	}
	if (!failed)
		w->last_built = last_built;
	complete = failed ? w->complete : w->ended && (w->last_built || !last);
	if (w->complete != complete || w->status_ended != w->ended ||
	    w->status_nshards != w->nshards) {
		w->status_gen++;
		w->status_ended = w->ended;
		w->status_nshards = w->nshards;
	}
	w->complete = complete;
	if (w->complete && !before)
		follow_write_progress(w);
	pthread_mutex_unlock(&w->lock);
	for (; i < nbuilt; i++) /* those not added: still ours */
		sfs_window_free(built[i]);
	free(built);
	free(acc);
	return before;
}

/*
 * Make the view served show what w holds now (fs_view_grow): its windows,
 * those hidden, whether complete; nothing when it shows that already.
 * Called by follow_prepare, then by the watcher only (follow_start before
 * it runs), without w->lock: the copy (sfs_view_follow) is built under
 * no lock, from the windows' list as it was taken under w->lock, and
 * fs.lock, which fs_view_grow takes, is never taken under w->lock.
 * Returns 0, or the copy's error (message in err): tried again at the
 * watcher's next turn.
 */
static int publish_view(struct fw *w, struct sfs_error *err)
{
	struct sfs_view_follow in = { .readers = w->vreaders,
				      .nreaders = w->nreaders,
				      .ext = w->ext };
	struct sfs_window **wins;
	struct view_ref *vr;
	struct sfs_view *nv;
	uint32_t node;
	int rc;

	pthread_mutex_lock(&w->lock);
	in.nwins = w->nwins;
	in.hidden = w->hidden;
	in.complete = w->complete;
	if (w->shown && in.nwins == w->shown_wins &&
	    in.hidden == w->shown_hidden && in.complete == w->shown_complete) {
		pthread_mutex_unlock(&w->lock);
		return 0;
	}
	/* the array moves as the watcher grows it; the windows do not */
	wins = malloc((in.nwins ? in.nwins : 1) * sizeof(*wins));
	if (wins && in.nwins)
		memcpy(wins, w->wins, in.nwins * sizeof(*wins));
	pthread_mutex_unlock(&w->lock);
	if (!wins)
		return sfs_errorf(err, -ENOMEM, "out of memory");
	in.wins = wins;
	vr = view_get(w->fs, FS_INO_ROOT, &node);
	rc = sfs_view_follow(vr ? vr->v : NULL, &in, &nv, err);
	if (vr)
		view_unref(w->fs, vr);
	free(wins);
	if (!rc) {
		rc = fs_view_grow(w->fs, nv);
		if (rc)
			sfs_errorf(err, rc, "out of memory");
	}
	if (rc)
		return rc;
	w->shown = true;
	w->shown_wins = in.nwins;
	w->shown_hidden = in.hidden;
	w->shown_complete = in.complete;
	return 0;
}

/* (follow_i.h) */
void follow_hide_consumed(struct fw *w)
{
	const char **names = NULL;
	size_t from, to, k, i, n = 0, cap = 0, hidden;
	struct sfs_error err = { 0 };
	struct view_ref *vr;
	uint32_t node;
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
	if (publish_view(w, &err)) {
		build_failed(w, w->first + hidden, err.msg);
		return;
	}
	/* the kernel forgets their names (it keeps a window's for long),
	 * under their worker's directory */
	vr = view_get(w->fs, FS_INO_ROOT, &node);
	for (k = from; vr && w->fs->se && k < hidden; k++) {
		const struct sfs_view_follow *f = vr->v->follow;
		char name[64];
		int len = snprintf(name, sizeof(name),
				   "window-%08" PRIu64 ".%s", w->first + k,
				   w->ext);

		for (i = 0; i < w->nreaders; i++)
			fuse_lowlevel_notify_inval_entry(
				w->fs->se,
				node_ino(vr, sfs_view_node(vr->v,
							   f->stream_node + i)
						     ->parent),
				name, (size_t)len);
	}
	if (vr)
		view_unref(w->fs, vr);
}

/* ---- the watcher ---- */

/* A scan lists the whole source: after one that took t, the next waits
 * 10 t (at most a second), so that a burst of renames into a large
 * directory costs the watcher a tenth of a core, not a scan per rename. */
#define SCAN_GAP_FACTOR 10

/* publish_view, its failure logged (once while the same). */
static void publish(struct fw *w)
{
	struct sfs_error err = { 0 };

	if (publish_view(w, &err))
		build_failed(w, w->first + w->shown_wins, err.msg);
}

static void *watch(void *arg)
{
	struct fw *w = arg;
	struct fs *fs = w->fs;
	int ino = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	char buf[4096];

	if (ino >= 0 &&
	    inotify_add_watch(ino, w->f->source,
			      IN_MOVED_TO | IN_CLOSE_WRITE | IN_CREATE |
				      IN_DELETE | IN_ATTRIB) < 0) {
		close(ino);
		ino = -1;
	}
	if (ino < 0)
		fs_log(fs, LOG_INFO,
		       "%s: no inotify (%s): listing it every %u s",
		       w->f->source, strerror(errno),
		       fs->mount.follow_interval);
	for (;;) {
		struct pollfd p[2] = { { .fd = w->wake[0], .events = POLLIN },
				       { .fd = ino, .events = POLLIN } };
		struct pollfd q = { .fd = w->wake[0], .events = POLLIN };
		double t0 = follow_now(), gap;
		bool stop, waiting;
		int ms;

		pthread_mutex_lock(&w->lock);
		stop = w->stop;
		pthread_mutex_unlock(&w->lock);
		if (stop)
			break;
		advance(w, true);
		publish(w);
		fs_tend_parked(fs, false);
		follow_hide_consumed(w);
		gap = (follow_now() - t0) * SCAN_GAP_FACTOR;
		if (gap >= 0.001 &&
		    poll(&q, 1, gap < 1 ? (int)(gap * 1000) : 1000) > 0) {
			/* woken: to stop, or a read parked */
			while (read(w->wake[0], buf, sizeof(buf)) > 0)
				;
			continue;
		}
		waiting = fs_parked_any(fs);
		/* parked reads are timed out and logged to the second */
		ms = (int)fs->mount.follow_interval * 1000;
		if (waiting && ms > 1000)
			ms = 1000;
		if (poll(p, ino >= 0 ? 2 : 1, ms) > 0) {
			while (ino >= 0 && read(ino, buf, sizeof(buf)) > 0)
				;
			while (read(w->wake[0], buf, sizeof(buf)) > 0)
				;
		}
	}
	if (ino >= 0)
		close(ino);
	return NULL;
}

void follow_start(struct fs *fs)
{
	struct fw *w = fs->follow;
	int rc;

	if (pipe2(w->wake, O_CLOEXEC | O_NONBLOCK) < 0) {
		fs_log(fs, LOG_ERR, "follow: %s", strerror(errno));
		return;
	}
	advance(w, false);
	publish(w);
	pthread_mutex_lock(&w->lock);
	if (w->complete)
		follow_write_progress(w);
	pthread_mutex_unlock(&w->lock);
	rc = fs_thread_start(&w->tid, watch, w);
	if (rc)
		fs_log(fs, LOG_ERR,
		       "follow: cannot start the watcher: %s; windows stay as they are",
		       strerror(-rc));
	w->running = !rc;
}

/* Stop the watcher (once) and join it. */
static void halt(struct fw *w)
{
	pthread_mutex_lock(&w->lock);
	w->stop = true;
	pthread_mutex_unlock(&w->lock);
	if (w->running) {
		if (write(w->wake[1], "x", 1) < 0 && errno != EAGAIN)
			fs_log(w->fs, LOG_WARNING, "follow: %s",
			       strerror(errno));
		pthread_join(w->tid, NULL);
		w->running = false;
	}
}

bool follow_end_waits(struct fs *fs)
{
	if (!fs->follow)
		return true;
	halt(fs->follow);
	fs_tend_parked(fs, true); /* EINTR, every one */
	return fs_answers_wait(fs);
}

void follow_stop(struct fs *fs)
{
	struct fw *w = fs->follow;
	size_t i;

	if (!w)
		return;
	halt(w);
	/* the session is gone: a read still parked cannot be answered */
	fs_parked_free(fs);
	for (i = 0; i < w->nwins; i++)
		sfs_window_free(w->wins[i]);
	free(w->wins);
	for (i = 0; i < w->nreaders; i++) {
		free(w->readers[i].at);
		free(w->readers[i].acc);
	}
	free(w->shard_acc);
	for (i = 0; i < w->nshards; i++)
		free(w->shards[i].path);
	free(w->shards);
	free(w->readers);
	free(w->plan_readers);
	free(w->vreaders);
	free(w->ranks);
	free(w->build_error);
	free(w->status_text);
	free(w->log_path);
	sfs_follow_free(w->f);
	if (w->progress_fd >= 0)
		close(w->progress_fd);
	if (w->wake[0] >= 0) {
		close(w->wake[0]);
		close(w->wake[1]);
	}
	pthread_mutex_destroy(&w->lock);
	pthread_mutex_destroy(&w->text_lock);
	free(w);
	fs->follow = NULL;
}
