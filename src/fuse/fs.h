/*
 * The daemon's state, shared by its parts: the FUSE operations (ops.c),
 * the views and handles (views.c), the read path (read.c), the slices of
 * data files (files.c), the control files (control.c), the prefetcher
 * (prefetch.c), and the process they run in: log, threads, read-ahead
 * (runtime.c).  The FUSE layer only translates: it finds the node a
 * request names in a view (core), asks the core for bytes or attributes,
 * and replies.  Every function here returns 0 or a negative errno; a reply
 * of an error is fuse_reply_err(req, -rc).
 *
 * One table of operations (ops.c) serves every mount; a followed source
 * (follow=1) is served as a view that grows (fs_view_grow), whose files'
 * bytes are its windows' (follow.c, follow_control.c, follow_read.c), read
 * through read.c as every view file's.
 *
 * Inode numbers: 1 the root, 2..7 the control directory and its files
 * (FS_INO_*; a mount shows those that apply to it, control.c), and
 * (generation << 32 | node) for every node of a view, so that an epoch
 * switch, which builds a new view with a new generation, never reuses an
 * inode number for other bytes.  A followed source's view keeps one
 * generation: each copy has the nodes of the one before, under the same
 * numbers.
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
#include "shardfs/status.h"
#include "shardfs/view.h"

#define FS_INO_ROOT 1
#define FS_INO_CTL 2
#define FS_INO_EPOCH 3
#define FS_INO_PLAN 4
#define FS_INO_STATUS 5
#define FS_INO_CONSUMED 6 /* follow=1 */
#define FS_INO_ACK 7 /* follow=1 */
/* the control files, FS_INO_EPOCH .. FS_INO_ACK */
#define FS_NCONTROL 5

/*
 * The kernel's lookup counts of the nodes of one generation (every entry
 * given minus every forget; an open file holds its inode): a view's own,
 * or shared by every copy of a followed source's view, which keeps one
 * generation as it grows (fs_view_grow).  Whichever copy a forget finds,
 * it reaches the counts, so that no copy holds another: an old copy lives
 * only while a request or an open directory holds it.
 */
struct view_counts {
	unsigned copies; /* fs.lock: the views that share it */
	uint64_t lookups; /* fs.lock: the sum of held[] */
	/* fs.lock: per node number, nheld of them (the newest copy's
	 * nodes), room for cap; NULL once its view is let go (revoked) */
	uint64_t *held;
	size_t nheld, cap;
};

/*
 * A view and who holds it: the mount while it is current, open directories
 * and requests in progress, and the kernel, for as long as it remembers any
 * of its generation's inodes (counts).  It is freed when no one holds it
 * and the kernel remembers none, or a newer copy of its generation lives
 * on (which finds the kernel's inodes: their numbers are kept), so a
 * request never names an inode the daemon has let go; the slices kept of
 * its files (files.c) go with it.  A view let go past FS_OLD_VIEWS
 * (revoked) keeps only this struct: its contents go with its last request
 * reference, whatever the kernel still remembers, and its inodes answer
 * EIO.
 */
struct view_ref {
	struct sfs_view *v;
	uint32_t gen;
	unsigned refs; /* fs.lock */
	struct view_counts *counts; /* fs.lock: its generation's */
	time_t built; /* st_mtime of its nodes */
	/* fs.lock: let go, past FS_OLD_VIEWS old views (views.c): its
	 * inodes answer EIO, its contents (v, held, texts: NULL) are freed
	 * once no request holds it */
	bool revoked;
	/* its control texts, built at the first ask (fs.text_lock): its
	 * plan.json, and its status but the counters
	 * (sfs_status_json_head) */
	char *plan_json;
	char *status_head;
	struct view_ref *next; /* fs.views, fs.lock: the newest first */
};

enum handle_kind { H_CONTROL, H_DIR };

/*
 * An open control file or directory (fuse_file_info.fh).  A data file has
 * none: its reads find their slice by inode number (files.c), and its view
 * lives while the kernel holds the inode, which it does while the file is
 * open.
 */
struct handle {
	enum handle_kind kind;
	struct handle *prev, *next; /* fs->handles (fs->lock) */
	struct view_ref *vr; /* H_DIR; NULL: the control directory */
	uint32_t node; /* H_DIR */
	bool revoked; /* H_DIR, fs.lock: vr was let go, unreferenced */
	char *buf; /* H_CONTROL: a snapshot */
	size_t len;
};

/*
 * The view of the epoch after the current one, built on a thread of its
 * own while the current one is served (ahead=1): a switch to it swaps it
 * in, a switch elsewhere cancels it.  Started once the daemon has forked.
 */
struct ahead {
	bool may_start; /* the daemon may start threads, and ahead=1 */
	bool running; /* thread tid was started and not yet joined */
	pthread_t tid;
	atomic_uint_fast64_t epoch; /* read by status without the lock */
	atomic_bool cancel;
	atomic_bool built; /* v is there, waiting for its switch */
	struct sfs_view *v; /* what the thread built; NULL if it failed */
	/* a view built ahead for an epoch no longer next, freed by the
	 * thread before it builds, not by the switch that dropped it: set
	 * under switch_lock before the thread starts, the thread's until it
	 * is joined */
	struct sfs_view *dropped;
};

/*
 * A data file of a view as its reads need it: its slice and its source
 * open, built by its first read (or open) and kept for the next ones.
 * Its view is not referenced: an entry goes with its view, and whoever
 * uses an entry holds a reference to the view.
 */
struct file_ent {
	fuse_ino_t ino;
	struct view_ref *vr;
	struct sfs_slice *slice;
	struct fdcache_ent *src;
	uint64_t src_size; /* the source as indexed */
	int64_t src_mtime;
	unsigned refs; /* files.lock */
	uint64_t used; /* files.lock: tick of the last get */
	bool building; /* files.lock: its first get builds it */
	int rc; /* files.lock: the build failed (it is out of the table) */
	bool out; /* files.lock: out of the table (files_drop), freed by
		   * its last files_put */
	size_t mem; /* files.lock: bytes its slice holds */
	struct file_ent *next; /* files.buckets, files.lock */
};

#define FILES_FAILED 64

/* The data files whose slices are kept: at most cap of them, holding at
 * most FILES_MEM_MAX bytes (files.c). */
struct files {
	pthread_mutex_t lock; /* guards everything below and the entries */
	pthread_cond_t done; /* a build ended */
	struct file_ent **buckets; /* by inode number */
	size_t nbuckets, n, cap;
	size_t mem; /* bytes the entries' slices hold */
	unsigned builds; /* slices being built */
	uint64_t tick;
	/* why files could not be read, as logged: the last FILES_FAILED
	 * causes (a cause names its shard), each logged once, not per read
	 * nor per file of the shard */
	char *failed[FILES_FAILED];
	unsigned failed_next;
};

/* What a control file's text is made of: while it stays the same, so
 * does the text, which is then not built again. */
struct control_source {
	/* plan.json, status: the view's gen; a followed source's status:
	 * its stream's status generation (follow_status_gen) */
	uint64_t gen;
	struct sfs_status_counters counters; /* status; compared whole */
};

/* The text a control file shows, as its last GETATTR, LOOKUP or OPEN
 * took it (size, mtime): what its reads answer with no_open, and what an
 * open copies without. */
struct control_snap {
	char *text; /* heap */
	size_t len;
	uint64_t ticket; /* the order the texts were taken in */
	struct control_source of; /* what text was made of */
	struct timespec mtime; /* changes with the text */
};

struct fs {
	struct fuse_session *se;
	struct sfs_index *idx;
	struct sfs_mount_opts mount; /* the daemon's options as given */
	struct sfs_view_opts vopts; /* the options; plan.epoch is the
					 * first epoch served: the one served
					 * now is current->v->epoch */
	bool foreground;
	bool no_open; /* the kernel sends no OPEN: mount.no_open */
	bool single; /* single-threaded session loop */
	/* the pipe libfuse splices through, grown to pipe-max-size; a
	 * reply it cannot hold is copied (fs_reply_send); 0: splice=0 */
	size_t pipe_size;
	unsigned max_read; /* FUSE max_read, the largest read request
			    * (given at mount and again at INIT); 0: the
			    * kernel's */
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
	/* read-held by a lookup at the root from its view to its reply: a
	 * switch write-takes it once before it tells the kernel that the
	 * root's names are stale, so that no answer of the view it replaced
	 * reaches the kernel after that (forget_old) */
	pthread_rwlock_t root_lookups;
	struct ahead ahead; /* switch_lock */

	struct fdcache fds;
	struct files files;

	pthread_mutex_t text_lock; /* builds the views' control texts */
	pthread_mutex_t ctl_lock; /* guards snaps */
	struct control_snap snaps[FS_NCONTROL]; /* by FS_INO_* */
	atomic_uint_fast64_t snap_ticket;
	struct prefetch *prefetch; /* NULL with prefetch=0 */

	atomic_uint_fast64_t opens, reads, bytes, errors, switches,
		switches_ahead;
	atomic_uint_fast64_t copied_reads; /* fs_reply_send's copies */
	atomic_int forgetting; /* invalidations still running aside */
	atomic_int answering; /* parked reads being answered aside (read.c) */
	/* some of them still waited for a stalled source when the daemon
	 * stopped (fs_answers_wait): the process exits without them */
	bool answers_stalled;
	struct fw *follow; /* follow=1 (follow.c); NULL otherwise */
	/* reads past the end of a file that grows, parked (read.c) */
	pthread_mutex_t park_lock;
	struct fs_parked *parked;
};

/*
 * Old views (epochs no longer served) kept alive for the kernel: a file or
 * a directory open in each.  Past this many the oldest are let go: their
 * inodes answer EIO (docs/view.md, "Epoch switches").
 */
#define FS_OLD_VIEWS 4

/* View content never changes under an inode number: cache it for long. */
#define VIEW_TIMEOUT 86400.0

extern const struct fuse_lowlevel_ops fs_ops;

static inline struct fs *fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/* The inode number of a node of a view (the root is always 1). */
static inline fuse_ino_t node_ino(const struct view_ref *vr, uint32_t node)
{
	return node == 0 ? FS_INO_ROOT : ((fuse_ino_t)vr->gen << 32 | node);
}

/* ---- runtime.c: the process the daemon runs in ---- */

/* Log a line: stderr in the foreground, syslog otherwise. */
void fs_log(struct fs *fs, int prio, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * pthread_create, the new thread (and the threads it starts) blocking the
 * signals that end the session, as libfuse's own workers do: they are
 * then taken by the main thread, which waits in the session loop, and not
 * by a thread whose handling of one would leave that loop waiting forever
 * (it checks, then sleeps).  Returns 0, or pthread_create's error as a
 * negative errno.
 */
int fs_thread_start(pthread_t *tid, void *(*fn)(void *), void *arg);

/*
 * Raise the mount's read-ahead, once: called by the requests that come
 * before any read (lookup, getattr, open).  Root only; a failure costs
 * speed, not correctness, and is logged.
 */
void fs_readahead_once(struct fs *fs);

/* ---- views.c: views and handles; *_locked functions need fs.lock ---- */

/*
 * The view and node an inode names, with a reference taken; root is the
 * current view's node 0.  NULL for a control inode or a view that is gone.
 */
struct view_ref *view_get(struct fs *fs, fuse_ino_t ino, uint32_t *node);

/* Drop a reference taken by view_get; the view may be freed. */
void view_unref(struct fs *fs, struct view_ref *vr);

/* ino names an inode of a view that was let go (FS_OLD_VIEWS): its
 * requests answer EIO, where those of a view gone answer ESTALE. */
bool view_revoked(struct fs *fs, fuse_ino_t ino);

/* The view of an open directory, with a reference taken; NULL for the
 * control directory or a view let go since the open. */
struct view_ref *handle_view(struct fs *fs, struct handle *h);

/* The kernel was given an entry for a node (lookup, readdirplus). */
void view_looked_up_locked(struct view_ref *vr, uint32_t node);

/* The kernel forgot n lookups of a node (or never got the reply). */
void view_forgot_locked(struct fs *fs, struct view_ref *vr, uint32_t node,
			uint64_t n);

/* The kernel lets go of nlookup lookups of inode ino. */
void forget_locked(struct fs *fs, fuse_ino_t ino, uint64_t nlookup);

/* Views alive: the current one and old ones still open or remembered. */
size_t live_views(struct fs *fs);

/*
 * Make epoch the current one: build its view (outside the lock), swap it in
 * and, when the session is up, tell the kernel to forget the old tree.
 * Returns 0 or the view's error (message in err); nothing changes then.
 */
int fs_switch_epoch(struct fs *fs, uint64_t epoch, struct sfs_error *err);

/*
 * A followed source's view nv (sfs_view_follow, grown from the current
 * one, or the first) becomes the current one, in the same generation:
 * its node numbers are the current's and more, so every inode keeps its
 * meaning, and it shares the current's lookup counts (struct
 * view_counts).  The copy it replaces lives while requests or open
 * directories hold it, no longer.  Takes nv (freed when this fails).  0
 * or -ENOMEM.
 */
int fs_view_grow(struct fs *fs, struct sfs_view *nv);

/*
 * Start building the next epoch's view ahead (ahead=1); called once the
 * daemon may start threads, and by each switch after.
 */
void fs_ahead_start(struct fs *fs);

/*
 * Drop every view; called once the session loop has ended (it waits for
 * invalidations still running, which use the session).
 */
void fs_release_views(struct fs *fs);

/* A new handle, on the list of open ones (freed at exit if the kernel
 * never releases it); NULL without memory. */
struct handle *handle_new(struct fs *fs, enum handle_kind kind);

/* Free a handle and what it holds; NULL is a no-op. */
void handle_free(struct fs *fs, struct handle *h);

/* ---- files.c: the slices of data files ---- */

/* An empty table of at most cap files.  Returns 0 or -ENOMEM. */
int files_init(struct files *t, size_t cap);

/* Free the table; its entries must be gone (fs_release_views). */
void files_destroy(struct files *t);

/*
 * The entry of node of vr (inode ino), its slice built and its source
 * opened at the first get; vr must be referenced by the caller, who
 * releases the entry with files_put before dropping vr.  *built tells that
 * this get built it (the reader reached the file); gets that come while
 * another builds it wait for that build.  Returns 0, or -EIO
 * (the source cannot be read as indexed: logged once per file and cause,
 * counted in fs.errors) or -ENOMEM.
 */
int files_get(struct fs *fs, struct view_ref *vr, uint32_t node,
	      struct file_ent **out, bool *built);

void files_put(struct fs *fs, struct file_ent *f);

/*
 * Bytes cannot be read (the message, printf's fmt and what follows, says
 * which and why, of any length): count it (fs.errors) and log the
 * message, unless that cause is among the last FILES_FAILED logged: the
 * kernel retries a failed page on its own, and readers of a shard's other
 * files meet the same cause.
 */
void files_log_failure(struct fs *fs, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * A read of f (held by the caller) found its source deleted or changed
 * (msg says how): count and log it (once per file and cause, as
 * files_get), and take f out of the table and its source out of the
 * descriptor cache, so that the next read of its file builds it again and
 * opens the source as it is then (EIO while it is gone or changed, its
 * bytes once it is back as indexed).  f is freed by its last files_put.
 */
void files_fail(struct fs *fs, struct file_ent *f, const char *msg);

/* vr is being freed: drop its entries (none is in use then). */
void files_forget_view_locked(struct fs *fs, struct view_ref *vr);

/* ---- read.c: files ---- */

/*
 * A read's reply as it is put together: pieces of source files (their
 * descriptors, so that the kernel can splice them) and of memory, in
 * order.  Start zeroed; fs_reply_send answers it and frees it.
 */
struct fs_reply {
	struct fuse_bufvec *bv; /* bv->count pieces, room for cap */
	size_t cap;
	size_t len; /* bytes in all pieces */
	/* a piece of memory the daemon may free before the kernel has read
	 * it (a slice's own bytes): the reply is sent from a copy */
	bool copy;
	/* descriptors of the descriptor cache held until the reply is
	 * sent (fs_reply_hold) */
	struct fdcache_ent **held;
	size_t nheld, held_cap;
};

/* One more piece of n bytes: of memory mem, or else of file fd at src.
 * 0 or -ENOMEM. */
int fs_reply_add(struct fs_reply *r, const void *mem, int fd, uint64_t src,
		 size_t n);

/* The descriptor of file (extent.file, slice.h) of a slice being read
 * into *fd, held until the reply is sent.  0 or -errno. */
typedef int (*fs_file_fd_fn)(void *arg, uint32_t file, int *fd);

/*
 * Bytes [pos, end) of slice s into r (pos < end <= s->size): its
 * extents' pieces, of the files fd_of(arg, ...) gives, and of memory (an
 * owned extent sets r->copy).  0, or -ENOMEM or fd_of's error.
 */
int fs_reply_slice(struct fs_reply *r, const struct sfs_slice *s, uint64_t pos,
		   uint64_t end, fs_file_fd_fn fd_of, void *arg);

/* Hold e (from fdcache_get) until r is sent, or put it back at once when
 * that fails.  0 or -ENOMEM. */
int fs_reply_hold(struct fs *fs, struct fs_reply *r, struct fdcache_ent *e);

/*
 * Answer req with r's bytes, or with rc when not 0, and free r.  The
 * pieces are spliced, or read into memory when r->copy or too large for
 * the splice pipe (fs.pipe_size).  Returns -EIO when a source read short
 * or failed then (answered EIO, for the caller to log and count:
 * files_log_failure), else 0.
 */
int fs_reply_send(fuse_req_t req, struct fs *fs, struct fs_reply *r, int rc);

void fs_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fs_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
	     struct fuse_file_info *fi);
void fs_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);

/*
 * A read at or past the end of a file that grows (a followed source's
 * stream) is parked: no thread held, until fs_tend_parked answers it
 * through the ordinary read path once the newest view holds its bytes
 * (on a thread of its own: a reply may wait for a slow source, and the
 * caller, the watcher, goes on to the next window), EIO after
 * follow_timeout= (logged every 30 s while it waits: follow_wait_log),
 * EINTR when interrupted or when stopping.  Called on each growth
 * (fs_view_grow) and by the watcher each turn (at least every second
 * while reads are parked: fs_parked_any); without fs.lock.
 */
void fs_tend_parked(struct fs *fs, bool stopping);
/*
 * Wait for the parked reads being answered aside, FS_ANSWER_WAIT_MS at
 * most: true when none is left; false when some still wait for a stalled
 * source (fs.answers_stalled set: they use the views, which must not go;
 * the daemon exits without them, as with the prefetcher's).  Once false,
 * false at once.
 */
bool fs_answers_wait(struct fs *fs);
bool fs_parked_any(struct fs *fs);
/* Forget the reads still parked: the session is gone (the answers under
 * way waited for: fs_answers_wait). */
void fs_parked_free(struct fs *fs);

/* ---- prefetch.c: reading ahead of readers ---- */

/*
 * Start prefetch_threads threads (fs->mount) reading ahead for fs, whose
 * file cache must be set up.  Returns 0 and the prefetcher in *out,
 * -ENOMEM, or -EAGAIN when no thread could be started.
 */
int prefetch_start(struct fs *fs, struct prefetch **out);

/*
 * A reader reached node of vr (opened it, looked it up, read its link):
 * queue the source bytes of the files that follow it in that reader's
 * plan order, at most prefetch_files files and prefetch_mb MiB.  Returns
 * at once; p NULL is a no-op.
 */
void prefetch_after(struct prefetch *p, const struct view_ref *vr,
		    uint32_t node);

/* What one trigger may read ahead: *bytes, in at most *files files
 * (prefetch_mb and prefetch_files over a source that must be read, the
 * next file's first chunk over a local one). */
void prefetch_budget(const struct prefetch *p, uint64_t *bytes,
		     uint32_t *files);

/*
 * Queue bytes [lo, hi) of path (relative to the source, borrowed: it must
 * live as long as p; size and mtime as recorded, checked before it is
 * read), at most *budget of them, which it lowers: for a followed source
 * (follow=1), path being shard number shard of the stream; its chunks
 * still queued when that shard is consumed are dropped.
 */
void prefetch_range(struct prefetch *p, const char *path, uint64_t size,
		    int64_t mtime, uint64_t shard, uint64_t lo, uint64_t hi,
		    uint64_t *budget);

/* Its counters so far into c's prefetch_* (0 for p NULL). */
void prefetch_counters(const struct prefetch *p, struct sfs_status_counters *c);

/*
 * How long a daemon told to stop waits for the reads still waiting for a
 * stalled source before it exits without them, leaving them what they
 * use (fs_stop, main): the prefetcher's (no reader waits for them), and
 * the parked reads being answered aside (fs_answers_wait: a reader waits
 * for each, and gets its bytes if the source answers by then).
 */
#define FS_STOP_WAIT_MS 1000
#define FS_ANSWER_WAIT_MS 5000

/*
 * Stop and free p, after the session has ended.  Waits FS_STOP_WAIT_MS
 * for reads in progress; returns false when some still wait for the
 * source (stalled): p is left to them then, and the caller must exit
 * without freeing the index or the file cache.  NULL: true.
 */
bool prefetch_stop(struct prefetch *p);

/* ---- follow.c: a source that grows (follow=1, docs/follow.md) ---- */

/*
 * Check the options of follow=1, open the stream of src (its log read
 * back) and list it once; fs->follow is set.  Returns 0 or a negative
 * errno with a message.
 */
int follow_prepare(struct fs *fs, const char *src, struct sfs_error *err);

/* The source followed (absolute), and its directory open (the shards'
 * descriptors are opened beneath it, fdcache.c). */
const char *follow_source(const struct fs *fs);
int follow_srcfd(const struct fs *fs);

/* Build the windows complete now and start the watcher (after the fork). */
void follow_start(struct fs *fs);

/* Stop the watcher and answer the reads parked waiting for the stream
 * (EINTR), waiting for those answered aside (fs_answers_wait: its
 * result; true without follow=1): when the session loop ends, before its
 * views go (fs_release_views), and from the session's destroy, while it
 * can still answer.  Once is enough; again, a no-op. */
bool follow_end_waits(struct fs *fs);

/* Stop the watcher and free the stream; NULL fs->follow is a no-op. */
void follow_stop(struct fs *fs);

/*
 * A followed source's view (sfs_view_follow) is the current view, copied
 * as windows come (fs_view_grow); these answer for its files, node of v,
 * what the windows know and the view does not.
 */

/* Who may read it (as sfs_view_access): the meet of its shards' access,
 * for a stream every window's so far; left as they are before any shard
 * was looked at. */
void follow_node_access(struct fw *w, const struct sfs_view *v, uint32_t node,
			uint32_t *uid, uint32_t *gid, uint32_t *mode);

/* Its extended attribute name (docs/follow.md, "What readers see") in
 * *out, a heap string; -ENODATA, -ESTALE (a window gone), -ENOMEM. */
int follow_node_xattr(struct fw *w, const struct sfs_view *v, uint32_t node,
		      const char *name, char **out);

/* Open it: fi's flags set (a stream direct_io, a window keep_cache, and
 * the windows after it read ahead).  0 or -ESTALE (a window gone). */
int follow_open(struct fw *w, const struct sfs_view *v, uint32_t node,
		struct fuse_file_info *fi);

/* A read of bytes [pos, end) of it by req's caller (read.c): a stream's
 * reader may read each window the bytes lie in (its modes narrow as
 * windows come), its last window read noted and the windows after it
 * read ahead.  0, -EACCES or -ESTALE (a window gone). */
int follow_read_check(struct fw *w, fuse_req_t req, const struct sfs_view *v,
		      uint32_t node, uint64_t pos, uint64_t end);

/* Shard i of the stream (extent.file of its slices), held in r
 * (fs_reply_hold): the descriptor cache checks that it is as it entered
 * the stream.  0, -EIO (logged once per shard and cause) or -ENOMEM. */
int follow_shard_hold(struct fw *w, struct fs_reply *r, uint32_t i);

/* A read of it went short (a shard changed while read): logged once. */
void follow_log_short(struct fw *w, const struct sfs_view *v, uint32_t node);

/* A read of its stream waits for bytes to come (on) or no longer (off):
 * its reader shows as waiting, for the next window.  On: 0, or -EINTR
 * (the daemon stops) or -EIO (no watcher: nothing would answer). */
int follow_wait(struct fw *w, const struct sfs_view *v, uint32_t node, bool on);

/* A read of it waited seconds (out: and gives up, EIO): logged, naming
 * its reader, the window it waits for and what the stream lacks. */
void follow_wait_log(struct fw *w, const struct sfs_view *v, uint32_t node,
		     double seconds, bool out);

/* follow_control.c: what the control files show of the stream and take
 * from its readers. */

/* `.shardfs/status` with the counters c: its head (sfs_status_follow_head,
 * with in's options) built only when what it shows changed, joined with
 * c.  A heap string, NULL without memory. */
char *follow_status_text(struct fw *w, const struct sfs_status_in *in,
			 const struct sfs_status_counters *c);

/* The generation of what the status head shows: while it stays the same,
 * follow_status_text gives the same text for the same counters. */
uint64_t follow_status_gen(struct fw *w);

/* The number of shards consumed (the first of the stream's not yet). */
size_t follow_consumed_count(struct fw *w);

/* `.shardfs/consumed`: the last shard consumed and a newline, or ""; a
 * heap string, NULL without memory. */
char *follow_consumed_text(struct fw *w);

/*
 * A write of size bytes to .shardfs/ack: "RANK WORKER WINDOW\n", that
 * reader has taken every window up to WINDOW; consumption moves when
 * every reader has (docs/follow.md, "Consumption").  Returns 0 (an ack of
 * a window acknowledged already changes nothing), or -EINVAL, logged with
 * the write and the form expected: not three numbers, a reader this mount
 * does not serve, a window not complete.
 */
int follow_ack(struct fw *w, const char *buf, size_t size);

/* ---- control.c: MNT/.shardfs/ ---- */

/* ino is the control directory or one of its files. */
bool control_is(fuse_ino_t ino);

/* The control inode called name in parent (".shardfs" in the root, a file
 * of the control directory this mount shows), or 0. */
fuse_ino_t control_lookup(const struct fs *fs, fuse_ino_t parent,
			  const char *name);

/* The i-th file of the control directory this mount shows and its inode,
 * NULL past the last. */
const char *control_entry(const struct fs *fs, size_t i, fuse_ino_t *ino);

/*
 * Attributes of a control inode.  A file's are those of its text now,
 * kept as its snapshot for control_read; its mtime changes whenever the
 * text does, so that the kernel (FUSE_CAP_AUTO_INVAL_DATA) drops the pages
 * of an older text.  Returns 0 or -ENOMEM.
 */
int control_stat(struct fs *fs, fuse_ino_t ino, struct stat *st);

/*
 * Pad the text of a status file (a NUL-terminated JSON text ending in a
 * newline) with spaces before its final newline to len bytes, the length
 * of its last text; when longer, to the next multiple of 4096 with 1 KiB
 * to spare.  So the size a reader was told is the size of the text it
 * reads, whichever text that is.  0, or -ENOMEM with *text freed.
 */
int control_pad(char **text, size_t len);

/* The bytes of a control file now: a copy of its snapshot, taken as
 * control_stat takes it (built again only when what the text is made of
 * changed), so a stat gives its size and mtime.  A heap string, or NULL. */
char *control_text(struct fs *fs, fuse_ino_t ino);

/*
 * With no_open: len bytes from off of the control file's text as the
 * kernel last learnt its size (control_stat), copied to a heap buffer in
 * *out (*len is what it holds).  Returns 0 or -ENOMEM.
 */
int control_read(struct fs *fs, fuse_ino_t ino, size_t size, off_t off,
		 char **out, size_t *len);

/* Free the snapshots of the control files. */
void control_free(struct fs *fs);

/*
 * A write to a control inode: only .shardfs/epoch takes one (a number,
 * from offset 0: switch to that epoch), and on a followed source
 * .shardfs/ack (follow_ack).  Returns 0, -EROFS, -EINVAL or -ENOMEM;
 * refusals are logged.
 */
int control_write(struct fs *fs, fuse_ino_t ino, const char *buf, size_t size,
		  off_t off);

/*
 * A setattr: truncating .shardfs/epoch or .shardfs/ack (as `echo 3 >
 * epoch` does) is let through, with *st its attributes; anything else is
 * refused.  Returns 0,
 * -EROFS or -ENOMEM.
 */
int control_truncate(struct fs *fs, fuse_ino_t ino, int to_set,
		     struct stat *st);

#endif
