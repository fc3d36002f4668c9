/*
 * A bounded cache of open source files for the daemon.
 *
 * Opening a shard costs a system call (an RPC on NFS); readers open the
 * same shards over and over across workers and epochs.  The cache keeps up
 * to `cap` files open, closing the least recently used one that nobody
 * holds.  Every get checks the file's size and mtime against what the
 * index recorded, and that it still has a name (when it had one at open):
 * a changed, deleted or replaced shard is refused, never served.
 * Thread-safe: one mutex guards the table.
 */
#ifndef SHARDFS_FDCACHE_H
#define SHARDFS_FDCACHE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "shardfs/error.h"

struct fdcache_ent {
	char *path; /* relative to the source: the key */
	int fd;
	unsigned refs;
	uint64_t used; /* tick of the last get */
	bool cached; /* in the table; else closed on last put */
	bool ahead; /* opened ahead of its readers (by the prefetcher) */
	bool linked; /* it had a name (st_nlink) when opened: only then does
		      * none now mean deleted, since some file systems (FUSE
		      * ones) report no links at all */
};

/* fdcache_get flags */
enum {
	FDCACHE_AHEAD = 1, /* read ahead of the readers: see fdcache_get */
	FDCACHE_NOWAIT = 2, /* out of descriptors, fail with -EMFILE at once */
};

/* paths a get may be opening at once, the others waiting for it; a get
 * that finds them all taken opens on its own */
#define FDCACHE_OPENING 32

struct fdcache {
	int srcfd; /* the source directory, borrowed */
	pthread_mutex_t lock; /* guards everything below */
	pthread_cond_t freed; /* an entry's last holder put it */
	pthread_cond_t opened; /* a get's open of a path ended */
	/* the paths gets are opening (their own strings), NULL a free slot:
	 * a get that misses the path waits for that open rather than open
	 * the file too (s3fs asks the server at an open of a file nobody has
	 * open) */
	const char *opening[FDCACHE_OPENING];
	struct fdcache_ent **ents;
	unsigned n, cap;
	uint64_t tick;
	uint64_t puts; /* entries put back by their last holder */
	uint64_t forgets; /* fdcache_forget calls so far */
};

/* Set up an empty cache of cap files below the directory srcfd. */
int fdcache_init(struct fdcache *c, int srcfd, unsigned cap);

/*
 * 0 when e's open file still has the size and mtime the index recorded
 * and, if it had a name when opened, still has one (it was not deleted,
 * nor renamed over, since); else -EIO with a message that names it and
 * says what to do.
 */
int fdcache_check(const struct fdcache_ent *e, uint64_t size, int64_t mtime,
		  struct sfs_error *err);

/* Close every cached file.  Entries still held are closed too. */
void fdcache_destroy(struct fdcache *c);

/*
 * An open file for path (relative to the source), checked against size
 * and mtime_ns.  Returns the entry (release it with fdcache_put), or NULL
 * with errno-style code in *rc: -EIO when the file changed since it was
 * indexed or cannot be opened (err says which), -ENOMEM.  Out of
 * descriptors, it closes a cached file nobody holds, or (flags without
 * FDCACHE_AHEAD nor FDCACHE_NOWAIT) waits up to 2 s for a holder to put
 * one back; with FDCACHE_NOWAIT it fails at once with -EMFILE instead, so
 * that the caller can give back descriptors it holds and try again.
 * FDCACHE_AHEAD: the caller reads ahead of the readers.  Gets of one path
 * that miss at once open it once: the others wait for that open and take
 * its entry.  A cached file is, at
 * every get by a reader (not ahead), checked to be still the file that
 * path names (not deleted, replaced or moved since: one fstatat), else
 * opened again, so that a reader sees the source as it is when it opens,
 * as without the cache.
 */
struct fdcache_ent *fdcache_get(struct fdcache *c, const char *path,
				uint64_t size, int64_t mtime_ns, unsigned flags,
				int *rc, struct sfs_error *err);

/* Release e (got by fdcache_get); closed when out of the table and this
 * was its last holder.  Returns true when it was the last holder: its
 * descriptor is closed, or may be closed by the next get that needs one. */
bool fdcache_put(struct fdcache *c, struct fdcache_ent *e);

/* Take e (held by the caller) out of the table: the next get of its path
 * opens the file again, and e is closed on its last put. */
void fdcache_drop(struct fdcache *c, struct fdcache_ent *e);

/* Take path's entry out of the table, if it is there (fdcache_drop): a
 * file deleted for good is closed once nobody reads it, so that its
 * space is freed. */
void fdcache_forget(struct fdcache *c, const char *path);

#endif
