/*
 * The control directory, MNT/.shardfs/: epoch (read: the epoch served;
 * write a number: switch), plan.json (the plan being served, built once per
 * view), status (options, counts, counters; include/shardfs/status.h); on
 * a followed source (follow=1, docs/follow.md), in place of epoch and
 * plan.json, which do not apply to it: consumed (the last shard every
 * reader acknowledged) and ack (write "RANK WORKER WINDOW";
 * follow_control.c).
 * Reads are answered from a snapshot (snapshot()), taken again only when
 * what its text is made of changed: with no_open=0, a copy of the one
 * taken at open (read.c); with no_open, where the kernel sends no OPEN and
 * reads through its page cache, the one taken by the GETATTR or LOOKUP
 * that told the kernel the file's size.  Such a snapshot's mtime changes
 * with its text, and the kernel then drops the pages of the older one
 * (FUSE_CAP_AUTO_INVAL_DATA; every read() of a control file asks for its
 * attributes, which time out at once).  status changes with every read
 * (its counters), so a reader's GETATTR and its READ may find different
 * snapshots: each of status's texts is padded with spaces to the length
 * of the last (control_pad), so the size a reader was told is the text it
 * reads, and a read of the whole file, one READ, is one text.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>

#include "fs.h"
#include "shardfs/options.h"
#include "shardfs/status.h"
#include "shardfs/util.h"

/* The control files by inode number (from FS_INO_EPOCH), and which mounts
 * show them: a plain mount its epochs, a followed source its windows'
 * consumption. */
static const struct {
	const char *name;
	bool plain, follow;
} files[FS_NCONTROL] = {
	{ "epoch", true, false }, { "plan.json", true, false },
	{ "status", true, true }, { "consumed", false, true },
	{ "ack", false, true },
};

bool control_is(fuse_ino_t ino)
{
	return ino >= FS_INO_CTL && ino < FS_INO_EPOCH + FS_NCONTROL;
}

/* The control file ino is one this mount shows. */
static bool shown(const struct fs *fs, fuse_ino_t ino)
{
	size_t i = (size_t)(ino - FS_INO_EPOCH);

	return fs->follow ? files[i].follow : files[i].plain;
}

fuse_ino_t control_lookup(const struct fs *fs, fuse_ino_t parent,
			  const char *name)
{
	fuse_ino_t i;

	if (parent == FS_INO_ROOT)
		return strcmp(name, ".shardfs") ? 0 : FS_INO_CTL;
	for (i = FS_INO_EPOCH; parent == FS_INO_CTL && control_is(i); i++)
		if (shown(fs, i) && !strcmp(name, files[i - FS_INO_EPOCH].name))
			return i;
	return 0;
}

const char *control_entry(const struct fs *fs, size_t i, fuse_ino_t *ino)
{
	fuse_ino_t x;

	for (x = FS_INO_EPOCH; control_is(x); x++) {
		if (!shown(fs, x))
			continue;
		if (!i--) {
			*ino = x;
			return files[x - FS_INO_EPOCH].name;
		}
	}
	return NULL;
}

static char *plan_json(struct fs *fs, struct view_ref *vr);
static int status_text(struct fs *fs, const struct control_snap *snap,
		       struct control_source *src, char **text);

static char *epoch_text(struct fs *fs)
{
	char *s;
	uint64_t e;

	pthread_mutex_lock(&fs->lock);
	e = fs->current->v->epoch;
	pthread_mutex_unlock(&fs->lock);
	return asprintf(&s, "%" PRIu64 "\n", e) < 0 ? NULL : s;
}

/* The text of epoch, consumed or ack, cheap to make: a heap string, or
 * NULL. */
static char *small_text(struct fs *fs, fuse_ino_t ino)
{
	switch (ino) {
	case FS_INO_EPOCH:
		return epoch_text(fs);
	case FS_INO_CONSUMED:
		return follow_consumed_text(fs->follow);
	case FS_INO_ACK:
		return strdup(""); /* written, never read */
	}
	return NULL;
}

/* snap (NULL: none) holds the text made of src. */
static bool unchanged(struct fs *fs, const struct control_snap *snap,
		      const struct control_source *src)
{
	bool same;

	if (!snap)
		return false;
	pthread_mutex_lock(&fs->ctl_lock);
	/* whole: a counter added to the status is compared too (both
	 * zeroed, then filled, by counters_now; copied by memcpy) */
	same = snap->text && !memcmp(&snap->of, src, sizeof(*src));
	pthread_mutex_unlock(&fs->ctl_lock);
	return same;
}

/* plan.json's text for the current view into *text, made of *src (the
 * view); *text NULL when snap holds it already.  0 or -ENOMEM. */
static int plan_text(struct fs *fs, const struct control_snap *snap,
		     struct control_source *src, char **text)
{
	struct view_ref *vr = view_get(fs, FS_INO_ROOT, &(uint32_t){ 0 });
	const char *plan;
	int rc = 0;

	*text = NULL;
	if (!vr)
		return -ENOMEM;
	src->gen = vr->gen;
	if (!unchanged(fs, snap, src)) {
		plan = plan_json(fs, vr);
		*text = plan ? strdup(plan) : NULL;
		rc = *text ? 0 : -ENOMEM;
	}
	view_unref(fs, vr);
	return rc;
}

/* Slack in status's padded length: its text grows by digits at most. */
#define STATUS_SLACK 1024

int control_pad(char **text, size_t len)
{
	size_t n = strlen(*text), want = len;
	char *p;

	if (n + 1 > want)
		want = (n + STATUS_SLACK + 4095) / 4096 * 4096;
	p = realloc(*text, want + 1);
	if (!p) {
		free(*text);
		*text = NULL;
		return -ENOMEM;
	}
	memset(p + n, ' ', want - n);
	p[want - 1] = '\n';
	p[want] = '\0';
	*text = p;
	return 0;
}

/*
 * Take the control file's text now into its snapshot, unless the snapshot
 * holds the same text or a later one; its size and mtime into st.  A text
 * made of what the snapshot's was (plan.json: its view; status: the
 * view's or stream's head and the counters) is not built again: a stat
 * of a status of thousands of readers costs what one of a few does.
 */
static int snapshot(struct fs *fs, fuse_ino_t ino, struct stat *st)
{
	struct control_snap *snap = &fs->snaps[ino - FS_INO_EPOCH];
	uint64_t ticket = atomic_fetch_add(&fs->snap_ticket, 1) + 1;
	struct control_source src = { 0 };
	char *text = NULL;
	int rc;

	if (ino == FS_INO_PLAN)
		rc = plan_text(fs, snap, &src, &text);
	else if (ino == FS_INO_STATUS)
		rc = status_text(fs, snap, &src, &text);
	else
		rc = (text = small_text(fs, ino)) ? 0 : -ENOMEM;
	if (rc)
		return rc;
	pthread_mutex_lock(&fs->ctl_lock);
	if (text && ino == FS_INO_STATUS && control_pad(&text, snap->len)) {
		pthread_mutex_unlock(&fs->ctl_lock);
		return -ENOMEM;
	}
	if (!text) {
		/* made of what the snapshot is (unless a snapshot taken
		 * meanwhile changed it), seen later */
		if (ticket > snap->ticket &&
		    !memcmp(&snap->of, &src, sizeof(src)))
			snap->ticket = ticket;
	} else if (ticket > snap->ticket && snap->text &&
		   !strcmp(text, snap->text)) {
		snap->ticket = ticket; /* the same text, seen later */
		memcpy(&snap->of, &src, sizeof(src));
	} else if (ticket > snap->ticket) {
		struct timespec now;

		clock_gettime(CLOCK_REALTIME, &now);
		/* a new text, a later mtime, even within a clock tick */
		if (now.tv_sec < snap->mtime.tv_sec ||
		    (now.tv_sec == snap->mtime.tv_sec &&
		     now.tv_nsec <= snap->mtime.tv_nsec)) {
			now = snap->mtime;
			if (++now.tv_nsec == 1000000000) {
				now.tv_sec++;
				now.tv_nsec = 0;
			}
		}
		free(snap->text);
		snap->text = text;
		snap->len = strlen(text);
		snap->ticket = ticket;
		memcpy(&snap->of, &src, sizeof(src));
		snap->mtime = now;
		text = NULL;
	}
	st->st_size = (off_t)snap->len;
	st->st_mtim = st->st_ctim = snap->mtime;
	rc = snap->text ? 0 : -ENOMEM;
	pthread_mutex_unlock(&fs->ctl_lock);
	free(text);
	return rc;
}

int control_stat(struct fs *fs, fuse_ino_t ino, struct stat *st)
{
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
	if (!control_is(ino) || !shown(fs, ino))
		return -ENOENT;
	/* the files written by the job: 0644, the mount's owner's (under
	 * allow_other nobody else may write them) */
	st->st_mode = S_IFREG |
		      (ino == FS_INO_EPOCH || ino == FS_INO_ACK ? 0644 : 0444);
	st->st_nlink = 1;
	return snapshot(fs, ino, st);
}

int control_read(struct fs *fs, fuse_ino_t ino, size_t size, off_t off,
		 char **out, size_t *len)
{
	struct control_snap *snap = &fs->snaps[ino - FS_INO_EPOCH];
	struct stat st;
	bool taken;
	size_t o;

	pthread_mutex_lock(&fs->ctl_lock);
	taken = snap->text != NULL;
	pthread_mutex_unlock(&fs->ctl_lock);
	/* (the kernel asks for the size first: only a read racing the
	 * mount's first GETATTR finds none) */
	if (!taken && snapshot(fs, ino, &st))
		return -ENOMEM;
	pthread_mutex_lock(&fs->ctl_lock);
	o = off >= 0 && (size_t)off < snap->len ? (size_t)off : snap->len;
	*len = size < snap->len - o ? size : snap->len - o;
	*out = malloc(*len + 1);
	if (*out)
		memcpy(*out, snap->text + o, *len);
	pthread_mutex_unlock(&fs->ctl_lock);
	return *out ? 0 : -ENOMEM;
}

/* (fs.h) A copy of the snapshot, so that an open at no_open=0 builds a
 * text only when a stat would. */
char *control_text(struct fs *fs, fuse_ino_t ino)
{
	struct stat st;
	size_t len;
	char *out;

	if (snapshot(fs, ino, &st) ||
	    control_read(fs, ino, SIZE_MAX, 0, &out, &len))
		return NULL;
	out[len] = '\0';
	return out;
}

void control_free(struct fs *fs)
{
	size_t i;

	for (i = 0; i < FS_NCONTROL; i++)
		free(fs->snaps[i].text);
	pthread_mutex_destroy(&fs->ctl_lock);
	pthread_mutex_destroy(&fs->text_lock);
}

/*
 * The plan(s) of vr, built at the first ask and kept with the view (it
 * goes with it).  Built under fs.text_lock only: the reads, which take
 * fs.lock, never wait for it (16.8 MB at world=1024, workers=16,
 * epochs=4, in half a second).  NULL without memory.
 */
static char *plan_json(struct fs *fs, struct view_ref *vr)
{
	char *out = NULL, *one;
	size_t len = 0, cap = 0, n;
	uint32_t e;

	pthread_mutex_lock(&fs->text_lock);
	for (e = 0; !vr->plan_json && e < vr->v->nplans; e++) {
		one = sfs_plan_json(vr->v->plans[e], fs->idx);
		n = one ? strlen(one) : 0;
		if (!one || SFS_GROW(out, cap, len + n + 4)) {
			free(one);
			free(out);
			out = NULL;
			break;
		}
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
	pthread_mutex_unlock(&fs->text_lock);
	return vr->plan_json;
}

/* The daemon's counters now. */
static void counters_now(struct fs *fs, struct sfs_status_counters *c)
{
	memset(c, 0, sizeof(*c));
	c->opens = atomic_load(&fs->opens);
	c->reads = atomic_load(&fs->reads);
	c->copied_reads = atomic_load(&fs->copied_reads);
	c->bytes = atomic_load(&fs->bytes);
	c->errors = atomic_load(&fs->errors);
	c->epoch_switches = atomic_load(&fs->switches);
	c->switches_ahead = atomic_load(&fs->switches_ahead);
	c->ahead_built = atomic_load(&fs->ahead.built);
	c->ahead_epoch = atomic_load(&fs->ahead.epoch);
	c->views = live_views(fs);
	prefetch_counters(fs->prefetch, c);
	if (fs->vopts.mem) {
		c->slices_spilled = atomic_load(&fs->vopts.mem->spilled);
		c->slices_laid_out = atomic_load(&fs->vopts.mem->laid_out);
	}
}

/*
 * The status now into *text, made of *src (the head and the counters);
 * *text NULL when snap (NULL: none) holds that text already.  All of it
 * but the counters is the current view's (a followed source's: its
 * stream's) and costs a walk of every reader (1.6 MB, tens of ms, at
 * world=1024, workers=16): it is built once per view (per change of the
 * stream) and kept; only the counters are written when they changed.
 * 0 or -ENOMEM.
 */
static int status_text(struct fs *fs, const struct control_snap *snap,
		       struct control_source *src, char **text)
{
	struct sfs_status_in in = {
		.idx = fs->idx,
		.index_dir = fs->mount.index_dir,
		.options = &fs->vopts.options,
		.mount = &fs->mount,
	};
	struct view_ref *vr;

	*text = NULL;
	counters_now(fs, &src->counters);
	if (fs->follow) {
		/* taken before the head: a head built after it is as new
		 * or newer, and the next ask builds again */
		src->gen = follow_status_gen(fs->follow);
		if (unchanged(fs, snap, src))
			return 0;
		*text = follow_status_text(fs->follow, &in, &src->counters);
		return *text ? 0 : -ENOMEM;
	}
	vr = view_get(fs, FS_INO_ROOT, &(uint32_t){ 0 });
	if (!vr)
		return -ENOMEM;
	src->gen = vr->gen;
	if (unchanged(fs, snap, src)) {
		view_unref(fs, vr);
		return 0;
	}
	in.plan = vr->v->plans[0];
	pthread_mutex_lock(&fs->text_lock);
	if (!vr->status_head)
		vr->status_head = sfs_status_json_head(&in);
	if (vr->status_head)
		*text = sfs_status_json_join(vr->status_head, &src->counters);
	pthread_mutex_unlock(&fs->text_lock);
	view_unref(fs, vr);
	return *text ? 0 : -ENOMEM;
}

int control_write(struct fs *fs, fuse_ino_t ino, const char *buf, size_t size,
		  off_t off)
{
	struct sfs_error err = { 0 };
	uint64_t epoch;
	int rc;

	/* one ack a write, at any offset: a job may keep the file open */
	if (ino == FS_INO_ACK && fs->follow)
		return follow_ack(fs->follow, buf, size);
	if (ino != FS_INO_EPOCH || fs->follow)
		return -EROFS;
	if (off != 0 || sfs_options_parse_epoch(buf, size, &epoch, &err)) {
		fs_log(fs, LOG_WARNING, "refused a write to .shardfs/epoch: %s",
		       off ? "write from the start of the file" : err.msg);
		return -EINVAL;
	}
	rc = fs_switch_epoch(fs, epoch, &err);
	if (rc) {
		fs_log(fs, LOG_WARNING, "refused epoch %" PRIu64 ": %s", epoch,
		       err.msg);
		return rc == -ENOMEM ? -ENOMEM : -EINVAL;
	}
	fs_log(fs, LOG_INFO, "now serving epoch %" PRIu64, epoch);
	return 0;
}

int control_truncate(struct fs *fs, fuse_ino_t ino, int to_set, struct stat *st)
{
	/* `echo 3 > epoch` (`echo 0 1 5 > ack`) truncates before it
	 * writes: let that pass */
	if ((ino != FS_INO_EPOCH && ino != FS_INO_ACK) || !control_is(ino) ||
	    !shown(fs, ino) ||
	    (to_set & ~(FUSE_SET_ATTR_SIZE | FUSE_SET_ATTR_MTIME |
			FUSE_SET_ATTR_MTIME_NOW | FUSE_SET_ATTR_CTIME)))
		return -EROFS;
	return control_stat(fs, ino, st);
}
