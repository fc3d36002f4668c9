/*
 * The daemon's state and its FUSE operations.  The FUSE layer only
 * translates: it finds the node a request names in a view (core), asks the
 * core for bytes or attributes, and replies.
 *
 * Inode numbers: 1 the root, 2..5 the control directory and its files, and
 * (generation << 32 | node) for every node of a view, so that an epoch
 * switch, which builds a new view with a new generation, never reuses an
 * inode number for other bytes.
 */
#ifndef SHARDFS_FS_H
#define SHARDFS_FS_H

#define FUSE_USE_VERSION 312

#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "fdcache.h"
#include "shardfs/index.h"
#include "shardfs/view.h"

#define FS_INO_ROOT 1
#define FS_INO_CTL 2
#define FS_INO_EPOCH 3
#define FS_INO_PLAN 4
#define FS_INO_STATUS 5

/*
 * A view and who holds it: the mount while it is current, open handles, and
 * the kernel, for as long as it remembers any of the view's inodes (its
 * lookup count: every entry given minus every forget).  It is freed when
 * both are zero, so a request never names an inode the daemon has let go.
 */
struct view_ref {
	struct sfs_view *v;
	uint32_t gen;
	unsigned refs; /* fs.lock */
	uint64_t lookups; /* fs.lock: the sum of held[] */
	uint64_t *held; /* fs.lock: the kernel's lookup count per node */
	time_t built; /* st_mtime of its nodes */
	char *plan_json; /* built on first read, fs.lock */
	struct view_ref *next; /* fs.views, fs.lock */
};

struct handle;

struct fs {
	struct fuse_session *se;
	struct sfs_index *idx;
	char *index_dir; /* index= as given, or NULL */
	struct sfs_view_opts vopts; /* the options; plan.epoch follows
					 * the current view (fs.lock) */
	bool foreground;
	bool prefetch;
	bool single; /* single-threaded session loop */
	size_t splice_max; /* larger replies are copied: libfuse's
					 * pipe cannot hold them */
	int srcfd;
	uid_t uid;
	gid_t gid;
	time_t mounted;
	/* the mount's read-ahead (sysfs file, value): written by the first
	 * request after INIT, which is when the kernel has set its own */
	char *readahead_path;
	char readahead_kb[16];
	atomic_bool readahead_pending;

	pthread_mutex_t lock; /* guards the views and the handle list */
	struct view_ref *current;
	struct view_ref *views; /* every live view */
	struct handle *handles; /* every open file and directory */
	uint32_t next_gen;
	pthread_mutex_t switch_lock; /* one epoch switch at a time */

	struct fdcache fds;

	atomic_uint_fast64_t opens, reads, bytes, errors, switches;
	atomic_int forgetting; /* invalidations still running aside */
};

extern const struct fuse_lowlevel_ops fs_ops;

/* Log a line: stderr in the foreground, syslog otherwise. */
void fs_log(struct fs *fs, int prio, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * Make epoch the current one: build its view (outside the lock), swap it in
 * and, when the session is up, tell the kernel to forget the old tree.
 * Returns 0 or the view's error (message in err); nothing changes then.
 */
int fs_switch_epoch(struct fs *fs, uint64_t epoch, struct sfs_error *err);

/*
 * Raise the mount's read-ahead, once: called by the requests that come
 * before any read (lookup, getattr, open).  Root only; a failure costs
 * speed, not correctness, and is logged.
 */
void fs_readahead_once(struct fs *fs);

/*
 * Drop every view; called once the session loop has ended (it waits for
 * invalidations still running, which use the session).
 */
void fs_release_views(struct fs *fs);

#endif
