/*
 * What follow.c (the watcher, the windows, the view grown as they come),
 * follow_control.c (consumption: acks, the last shard consumed, the
 * progress files; the status) and follow_read.c (what the files add to
 * read.c's path: access, attributes, shard descriptors, read-ahead, a
 * parked read's wording) of the follow=1 daemon share.  Private to
 * src/fuse/.
 */
#ifndef SHARDFS_FUSE_FOLLOW_I_H
#define SHARDFS_FUSE_FOLLOW_I_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "fs.h"
#include "shardfs/follow.h"
#include "shardfs/index.h"
#include "shardfs/window.h"

struct freader {
	uint32_t rank, worker;
	uint64_t *at; /* at[i]: its stream's offset of window first + i */
	size_t cap;
	uint64_t done; /* windows acknowledged (.shardfs/ack), from first */
	uint64_t window; /* the window its last read was in */
	/* who may read a file made of some shards: only the classes of users
	 * that may read every shard it serves (sfs_index_access_meet of the
	 * shards' sfs_index_file_access); known false: no shard looked at
	 * yet (the mount's owner and 0444 then, as the main tree's unchecked
	 * files).  acc[i]: of its file of window first + i */
	struct sfs_access *acc;
	size_t acc_cap;
	struct sfs_access stream_acc; /* of its stream: every window's */
	/* the prefetcher was last asked (follow_ahead) for the windows
	 * after window ahead_at - 1 (from first; 0: never), up to ahead_end
	 * (as many as were built then, or the budget allowed) */
	uint64_t ahead_at, ahead_end;
	bool waiting; /* reads of it are parked: nwaiting of them */
	size_t nwaiting;
};

struct fw {
	struct fs *fs;
	struct sfs_follow *f; /* the watcher's (w->lock not needed); readers
			       * use what is published of it (shards) */
	uint64_t n; /* window= */
	const char *ext;
	pthread_mutex_t lock;
	struct sfs_window **wins; /* windows first .. first + nwins - 1 */
	size_t nwins, cap;
	uint64_t first;
	bool last_built; /* the last, partial window is in wins (or none) */
	bool complete; /* ended, and every window built */
	struct freader *readers;
	size_t nreaders;
	struct sfs_view_reader *vreaders; /* the readers, as the view has them */
	/* what the view served shows (publish_view, the watcher's only):
	 * its windows, those hidden, complete */
	size_t shown_wins, shown_hidden;
	bool shown_complete, shown;
	size_t *plan_readers;
	size_t nreaders_all; /* world / replicas x workers */
	uint32_t *ranks; /* shown, sorted */
	size_t nranks;
	size_t consumed; /* shards consumed */
	/* windows (from first) consumed and deleted: no longer listed, their
	 * inodes ESTALE; only the watcher moves it (follow_hide_consumed) */
	size_t hidden;
	/* the stream as published to the readers (w->lock): its shards,
	 * who the source lets read each, its samples, its end, its log */
	struct sfs_shard *shards; /* copies of w->f's (the watcher's,
				   * scanned without the lock) */
	size_t nshards, shards_cap;
	struct sfs_access *shard_acc;
	size_t shard_acc_cap;
	uint64_t nsamples;
	bool ended, log_kept;
	char *log_path; /* the log's path (a copy), or NULL */
	/* bumped (w->lock) whenever what the status shows changes: a
	 * window, consumption, an ack, a reader's wait or window */
	uint64_t status_gen;
	bool status_ended; /* f->ended and f->nshards as status_gen saw */
	size_t status_nshards;
	uint64_t padding, dropped; /* over the windows built */
	pthread_mutex_t text_lock; /* guards the two below; taken before
				    * w->lock, never after */
	char *status_text; /* built for status_text_gen */
	uint64_t status_text_gen;
	char *build_error; /* the last failed build, logged once */
	int progress_fd; /* progress=DIR, open; -1 without it */
	bool stop;
	int wake[2]; /* wakes the watcher: to stop, or a read parked */
	pthread_t tid;
	bool running;
};

/* Reader r's stream: its bytes in the windows built so far. */
static inline uint64_t follow_reader_size(const struct fw *w,
					  const struct freader *r)
{
	return w->nwins ? r->at[w->nwins] : 0;
}

static inline double follow_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/*
 * progress=DIR: DIR/rank-R.json for every rank shown, written beneath DIR
 * (opened once, at the mount) without following a symlink; with w->lock.
 * (follow_control.c)
 */
void follow_write_progress(struct fw *w);

/*
 * Stop listing the windows all of whose shards are consumed and gone
 * from the source (deleted by the producer, as docs/follow.md lets it),
 * and tell the kernel to forget their names.  Called by the watcher each
 * turn; takes w->lock, but not while it looks at the source.
 */
void follow_hide_consumed(struct fw *w);

/*
 * Reader r reached window i (from first): queue for the prefetcher
 * (prefetch.c) the source bytes of its windows after i, as many as one
 * trigger may read (prefetch_files=, prefetch_mb=), of those built only:
 * a window is built once every byte of it is written, so nothing is read
 * ahead of the producer.  r->ahead keeps what was queued, so a call costs
 * a comparison until a window more is built or reached.  With w->lock
 * (the prefetcher's is taken inside it, never the other way round); a
 * no-op with prefetch=0.  (follow_read.c)
 */
void follow_ahead(struct fw *w, struct freader *r, uint64_t i);

/*
 * The caller of req may read bytes a file of access a serves, as the
 * kernel's default_permissions would decide: the stream's modes narrow as
 * windows with other shards come, so a stream opened before is checked
 * again at each window it reads (supplementary groups read only when the
 * group's bits decide).  (follow_read.c)
 */
bool follow_may_read(fuse_req_t req, const struct sfs_access *a);

#endif
