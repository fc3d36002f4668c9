/*
 * The control directory, MNT/.shardfs/: epoch (read: the epoch served;
 * write a number: switch), plan.json (the plan being served, built once per
 * view), status (options, counts, counters; include/shardfs/status.h).
 * Reads are answered from a snapshot taken at open (read.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "fs.h"
#include "shardfs/options.h"
#include "shardfs/status.h"

static const char *const names[] = { "epoch", "plan.json", "status" };

bool control_is(fuse_ino_t ino)
{
	return ino >= FS_INO_CTL && ino <= FS_INO_STATUS;
}

fuse_ino_t control_lookup(fuse_ino_t parent, const char *name)
{
	fuse_ino_t i;

	if (parent == FS_INO_ROOT)
		return strcmp(name, ".shardfs") ? 0 : FS_INO_CTL;
	for (i = 0; parent == FS_INO_CTL && i < 3; i++)
		if (!strcmp(name, names[i]))
			return FS_INO_EPOCH + i;
	return 0;
}

const char *control_entry(size_t i, fuse_ino_t *ino)
{
	if (i >= 3)
		return NULL;
	*ino = FS_INO_EPOCH + (fuse_ino_t)i;
	return names[i];
}

static char *plan_json(struct fs *fs, struct view_ref *vr);
static char *status_json(struct fs *fs);

static char *epoch_text(struct fs *fs)
{
	char *s;
	uint64_t e;

	pthread_mutex_lock(&fs->lock);
	e = fs->current->v->epoch;
	pthread_mutex_unlock(&fs->lock);
	return asprintf(&s, "%" PRIu64 "\n", e) < 0 ? NULL : s;
}

/* The bytes of a control file now: a heap string, or NULL. */
char *control_text(struct fs *fs, fuse_ino_t ino)
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

int control_stat(struct fs *fs, fuse_ino_t ino, struct stat *st)
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

static char *status_json(struct fs *fs)
{
	struct sfs_status_in in = {
		.idx = fs->idx,
		.index_dir = fs->mount.index_dir,
		.options = &fs->vopts.options,
		.mount = &fs->mount,
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

	prefetch_counters(fs->prefetch, &in.counters);
	vr = view_get(fs, FS_INO_ROOT, &node);
	if (!vr)
		return NULL;
	in.plan = vr->v->plans[0];
	text = sfs_status_json(&in);
	view_unref(fs, vr);
	return text;
}

int control_write(struct fs *fs, fuse_ino_t ino, const char *buf, size_t size,
		  off_t off)
{
	struct sfs_error err = { 0 };
	uint64_t epoch;
	int rc;

	if (ino != FS_INO_EPOCH)
		return EROFS;
	if (off != 0 || sfs_options_parse_epoch(buf, size, &epoch, &err)) {
		fs_log(fs, LOG_WARNING, "refused a write to .shardfs/epoch: %s",
		       off ? "write from the start of the file" : err.msg);
		return EINVAL;
	}
	rc = fs_switch_epoch(fs, epoch, &err);
	if (rc) {
		fs_log(fs, LOG_WARNING, "refused epoch %" PRIu64 ": %s", epoch,
		       err.msg);
		return rc == -ENOMEM ? ENOMEM : EINVAL;
	}
	fs_log(fs, LOG_INFO, "now serving epoch %" PRIu64, epoch);
	return 0;
}

int control_truncate(struct fs *fs, fuse_ino_t ino, int to_set, struct stat *st)
{
	/* `echo 3 > epoch` truncates before it writes: let that pass */
	if (ino != FS_INO_EPOCH ||
	    (to_set & ~(FUSE_SET_ATTR_SIZE | FUSE_SET_ATTR_MTIME |
			FUSE_SET_ATTR_MTIME_NOW | FUSE_SET_ATTR_CTIME)))
		return EROFS;
	return -control_stat(fs, ino, st);
}
