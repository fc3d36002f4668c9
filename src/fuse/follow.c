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
 *   /.shardfs/status, /.shardfs/consumed
 *
 * Inode numbers: 1 the root, 2..4 the control directory and its files,
 * then a kind in the top 4 bits: a rank's directory (its rank), a
 * worker's directory and its stream (the reader's number here), a window
 * file (reader << 32 | window - first).  Windows are never freed before
 * the unmount: what a number names never changes.
 *
 * One lock (fw.lock) guards the stream, the windows and the readers; the
 * bytes of the shards are read outside it, each read opening the shard
 * and checking it is as it entered the stream.
 *
 * This file: the options, the watcher, the windows and consumption;
 * follow_tree.c: the tree and its FUSE operations; follow_i.h: what they
 * share.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
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
#include "shardfs/util.h"

#include "follow_i.h"

static struct fw fw_state;

static void note(void *arg, const char *msg)
{
	fs_log(arg, LOG_WARNING, "%s", msg);
}

static const char *ext_of(const struct sfs_format_ops *ops)
{
	return ops->name;
}

int follow_prepare(struct fs *fs, const char *src, struct sfs_error *err)
{
	struct fw *w = &fw_state;
	const struct sfs_plan_opts *o = &fs->vopts.options.plan;
	const struct sfs_format_ops *format = NULL;
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
	memset(w, 0, sizeof(*w));
	w->fs = fs;
	w->n = fs->mount.window;
	w->first = o->start / w->n;
	w->wake[0] = w->wake[1] = -1;
	w->progress_fd = -1;
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
	pthread_mutex_init(&w->lock, NULL);
	pthread_mutex_init(&w->text_lock, NULL);
	pthread_cond_init(&w->grew, NULL);
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
			"follow=1: %s holds no shard yet, so its format is not known: add format=jsonl (or tfrecord, tar)",
			w->f->source);
	w->ext = ext_of(w->f->format);
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
	fs->follow = w;
	return 0;
}

const char *follow_source(const struct fs *fs)
{
	return fs->follow->f->source;
}

/* ---- the windows, built by the watcher ---- */

/* Who the source lets read each shard of the stream up to end (those not
 * looked at yet: the shards of a window being added). */
static int note_shard_access(struct fw *w, size_t end)
{
	int rc;

	if (SFS_GROW(w->shard_acc, w->shard_acc_cap, end))
		return -ENOMEM;
	for (; w->nshard_acc < end; w->nshard_acc++) {
		rc = sfs_index_file_access(w->f->source, w->f->srcfd,
					   w->f->shards[w->nshard_acc].path,
					   &w->shard_acc[w->nshard_acc]);
		if (rc)
			return rc;
	}
	return 0;
}

/* a: also of a file that serves bytes of a shard the source lets s read.
 * A shard that cannot be looked at (gone: its bytes are EIO) adds
 * nothing. */
static void access_and(struct faccess *a, const struct sfs_access *s)
{
	if (!s->known)
		return;
	if (!a->known) {
		*a = (struct faccess){ s->uid, s->gid, s->mode & 0444u, true };
		return;
	}
	if (a->uid != s->uid)
		a->uid = 0;
	if (a->gid != s->gid) {
		a->gid = 0;
		a->mode &= ~0070u;
	}
	a->mode &= s->mode & 0444u;
}

/* Add window win (built) to the readers' streams. */
static int add_window(struct fw *w, struct sfs_window *win)
{
	size_t i, j;

	if (SFS_GROW(w->wins, w->cap, w->nwins + 1) ||
	    note_shard_access(w, win->end_shard))
		return -ENOMEM;
	for (i = 0; i < w->nreaders; i++) {
		struct freader *r = &w->readers[i];
		const struct sfs_window_reader *wr = &win->readers[i];
		struct faccess a = { 0 };

		if (SFS_GROW(r->at, r->cap, w->nwins + 2) ||
		    SFS_GROW(r->acc, r->acc_cap, w->nwins + 1))
			return -ENOMEM;
		for (j = 0; j < wr->nruns; j++)
			access_and(&a, &w->shard_acc[wr->runs[j].shard]);
		if (!w->nwins)
			r->at[0] = 0;
		r->at[w->nwins + 1] = r->at[w->nwins] + wr->size;
		r->acc[w->nwins] = a;
		for (j = 0; j < wr->nruns; j++)
			access_and(&r->stream_acc,
				   &w->shard_acc[wr->runs[j].shard]);
	}
	w->wins[w->nwins++] = win;
	w->padding += win->padding;
	w->dropped += win->dropped;
	w->status_gen++;
	return 0;
}

/* Build the windows that completed; with w->lock. */
static void build_windows(struct fw *w)
{
	const struct sfs_plan_opts *o = &w->fs->vopts.options.plan;
	uint64_t first, full;
	bool last;

	sfs_follow_windows(w->f->nsamples, w->n, o->start, w->f->ended, &first,
			   &full, &last);
	while (w->nwins < full || (last && !w->last_built)) {
		bool is_last = w->nwins >= full;
		struct sfs_window *win;
		struct sfs_error err = { 0 };
		int rc = sfs_window_build(w->f, o, w->n, w->first + w->nwins,
					  is_last, w->plan_readers, w->nreaders,
					  &win, &err);

		if (rc == -ENODATA) {
			w->last_built = true;
			break;
		}
		if (rc || add_window(w, win)) {
			if (!rc)
				sfs_window_free(win);
			if (!w->build_error ||
			    strcmp(w->build_error, err.msg)) {
				fs_log(w->fs, LOG_ERR, "window %" PRIu64 ": %s",
				       w->first + w->nwins,
				       rc ? err.msg : "out of memory");
				free(w->build_error);
				w->build_error = strdup(err.msg);
			}
			return;
		}
		if (is_last)
			w->last_built = true;
	}
	if (w->complete != (w->f->ended && (w->last_built || !last)) ||
	    w->status_ended != w->f->ended ||
	    w->status_nshards != w->f->nshards) {
		w->status_gen++;
		w->status_ended = w->f->ended;
		w->status_nshards = w->f->nshards;
	}
	w->complete = w->f->ended && (w->last_built || !last);
}

/* ---- consumption ---- */

/* (follow_i.h) */
char *follow_consumed_text(struct fw *w)
{
	char *s = NULL;

	if (w->consumed &&
	    asprintf(&s, "%s\n", w->f->shards[w->consumed - 1].path) < 0)
		return NULL;
	return s ? s : strdup("");
}

/* Shards all of whose samples lie in the first done windows (from
 * first), in order. */
static size_t shards_done(const struct fw *w, uint64_t done)
{
	uint64_t upto = (w->first + done) * w->n;
	size_t c = w->consumed;

	if (done >= w->nwins && w->complete)
		upto = UINT64_MAX;
	if (done == 0)
		upto = w->first * w->n;
	while (c < w->f->nshards &&
	       w->f->shards[c].first + w->f->shards[c].nsamples <= upto)
		c++;
	return c;
}

/* progress=DIR: DIR/rank-R.json for every rank shown, written beneath
 * DIR (opened once, at the mount) without following a symlink. */
static void write_progress(struct fw *w)
{
	const char *dir = w->fs->mount.progress_dir;
	size_t r, i;

	for (r = 0; w->progress_fd >= 0 && r < w->nranks; r++) {
		uint64_t done = UINT64_MAX;
		char name[64], *text = NULL, *cons = NULL;
		json_t *j = NULL;
		size_t c;
		int rc = -ENOMEM;

		for (i = 0; i < w->nreaders; i++)
			if (w->readers[i].rank == w->ranks[r] &&
			    w->readers[i].done < done)
				done = w->readers[i].done;
		c = shards_done(w, done);
		/* the name as JSON holds it (sfs_name_escape) */
		cons = c ? sfs_name_escape(w->f->shards[c - 1].path, true) :
			   NULL;
		if (!c || cons)
			j = json_pack("{s:I, s:s?, s:I, s:b}", "rank",
				      (json_int_t)w->ranks[r], "consumed", cons,
				      "windows_read",
				      (json_int_t)(w->first + done), "ended",
				      w->complete);
		text = j ? json_dumps(j, JSON_COMPACT) : NULL;
		json_decref(j);
		free(cons);
		snprintf(name, sizeof(name), "rank-%u.json", w->ranks[r]);
		if (text)
			rc = sfs_write_beneath(w->progress_fd, name, text,
					       strlen(text), 0644);
		if (rc)
			fs_log(w->fs, LOG_WARNING,
			       "progress=%s: cannot write %s: %s", dir, name,
			       text ? strerror(-rc) :
				      "its JSON cannot be made (out of memory)");
		free(text);
	}
}

/* The decimal number at *p (digits only, at most 19 of them: no sign,
 * no overflow) into *v, *p past it.  0 or -EINVAL. */
static int ack_number(const char **p, const char *end, uint64_t *v)
{
	int n = 0;

	*v = 0;
	while (*p < end && **p >= '0' && **p <= '9' && n < 19) {
		*v = *v * 10 + (uint64_t)(**p - '0');
		(*p)++;
		n++;
	}
	return n && !(*p < end && **p >= '0' && **p <= '9') ? 0 : -EINVAL;
}

/* (follow_i.h) */
int follow_ack(struct fw *w, const char *buf, size_t size)
{
	const char *p = buf, *end = buf + size;
	uint64_t rank, worker, k, min = UINT64_MAX;
	char why[160], shown[72];
	struct freader *r = NULL;
	size_t i, c;

	if (size && end[-1] == '\n')
		end--;
	if (size > 64 || ack_number(&p, end, &rank) || p == end ||
	    *p++ != ' ' || ack_number(&p, end, &worker) || p == end ||
	    *p++ != ' ' || ack_number(&p, end, &k) || p != end) {
		snprintf(why, sizeof(why), "not three numbers");
		goto refuse;
	}
	pthread_mutex_lock(&w->lock);
	for (i = 0; i < w->nreaders; i++)
		if (w->readers[i].rank == rank &&
		    w->readers[i].worker == worker)
			r = &w->readers[i];
	if (!r) {
		pthread_mutex_unlock(&w->lock);
		snprintf(why, sizeof(why),
			 "rank %" PRIu64 " worker %" PRIu64
			 " is no reader this mount serves",
			 rank, worker);
		goto refuse;
	}
	if (k >= w->first + w->nwins) {
		snprintf(why, sizeof(why),
			 "window %" PRIu64 " is not complete (%s%" PRIu64 ")",
			 k,
			 w->nwins ? "the last complete one is " : "none is: ",
			 w->nwins ? w->first + w->nwins - 1 : w->first);
		pthread_mutex_unlock(&w->lock);
		goto refuse;
	}
	/* acks only move forward: one of a window acknowledged already, or
	 * before this mount's first (start=), changes nothing */
	if (k >= w->first && k + 1 - w->first > r->done) {
		r->done = k + 1 - w->first;
		w->status_gen++;
		for (i = 0; i < w->nreaders; i++)
			if (w->readers[i].done < min)
				min = w->readers[i].done;
		c = shards_done(w, min);
		if (c != w->consumed || (r->done == w->nwins && w->complete)) {
			w->consumed = c;
			write_progress(w);
		}
	}
	pthread_mutex_unlock(&w->lock);
	return 0;
refuse:
	/* the write as it came (but its final newline), printable, short */
	size = (size_t)(end - buf);
	for (i = 0; i < size && i < sizeof(shown) - 4; i++)
		shown[i] = buf[i] >= ' ' && buf[i] < 127 ? buf[i] : '?';
	snprintf(shown + i, sizeof(shown) - i, "%s", i < size ? "..." : "");
	fs_log(w->fs, LOG_WARNING,
	       "refused a write to .shardfs/ack (\"%s\"): %s; write \"RANK WORKER WINDOW\\n\" (e.g. \"0 1 5\": rank 0's worker 1 has taken windows up to 5), a reader this mount serves and a complete window (docs/follow.md)",
	       shown, why);
	return -EINVAL;
}

/* ---- the watcher ---- */

/* A scan lists the whole source: after one that took t, the next waits
 * 10 t (at most a second), so that a burst of renames into a large
 * directory costs the watcher a tenth of a core, not a scan per rename. */
#define SCAN_GAP_FACTOR 10

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
		struct sfs_error err = { 0 };
		struct pollfd q = { .fd = w->wake[0], .events = POLLIN };
		double t0 = follow_now(), gap;
		size_t before;

		pthread_mutex_lock(&w->lock);
		if (w->stop) {
			pthread_mutex_unlock(&w->lock);
			break;
		}
		before = w->nwins;
		if (sfs_follow_scan(w->f, NULL, &err))
			fs_log(fs, LOG_ERR, "%s", err.msg);
		build_windows(w);
		if (w->nwins != before || w->complete) {
			pthread_cond_broadcast(&w->grew);
			if (w->complete && !before)
				write_progress(w);
		}
		pthread_mutex_unlock(&w->lock);
		gap = (follow_now() - t0) * SCAN_GAP_FACTOR;
		if (gap >= 0.001 &&
		    poll(&q, 1, gap < 1 ? (int)(gap * 1000) : 1000) > 0)
			continue; /* woken to stop */
		if (poll(p, ino >= 0 ? 2 : 1,
			 (int)fs->mount.follow_interval * 1000) > 0) {
			while (ino >= 0 && read(ino, buf, sizeof(buf)) > 0)
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
	pthread_mutex_lock(&w->lock);
	build_windows(w);
	if (w->complete)
		write_progress(w);
	pthread_mutex_unlock(&w->lock);
	rc = fs_thread_start(&w->tid, watch, w);
	if (rc)
		fs_log(fs, LOG_ERR,
		       "follow: cannot start the watcher: %s; windows stay as they are",
		       strerror(-rc));
	w->running = !rc;
}

void follow_stop(struct fs *fs)
{
	struct fw *w = fs->follow;
	size_t i;

	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	w->stop = true;
	pthread_cond_broadcast(&w->grew);
	pthread_mutex_unlock(&w->lock);
	if (w->running) {
		if (write(w->wake[1], "x", 1) < 0)
			fs_log(fs, LOG_WARNING, "follow: %s", strerror(errno));
		pthread_join(w->tid, NULL);
	}
	for (i = 0; i < w->nwins; i++)
		sfs_window_free(w->wins[i]);
	free(w->wins);
	for (i = 0; i < w->nreaders; i++) {
		free(w->readers[i].at);
		free(w->readers[i].acc);
	}
	free(w->shard_acc);
	free(w->readers);
	free(w->plan_readers);
	free(w->ranks);
	free(w->build_error);
	free(w->failed);
	free(w->status_text);
	sfs_follow_free(w->f);
	if (w->progress_fd >= 0)
		close(w->progress_fd);
	if (w->wake[0] >= 0) {
		close(w->wake[0]);
		close(w->wake[1]);
	}
	fs->follow = NULL;
}
