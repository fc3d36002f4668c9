/*
 * A bounded cache of open source files for the daemon.
 *
 * Opening a shard costs a system call (an RPC on NFS); readers open the
 * same shards over and over across workers and epochs.  The cache keeps up
 * to `cap` files open, closing the least recently used one that nobody
 * holds.  Every get checks the file's size and mtime against what the
 * index recorded, and that it still has a name: a changed, deleted or
 * replaced shard is refused, never served.
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
};

struct fdcache {
	int srcfd; /* the source directory, borrowed */
	pthread_mutex_t lock; /* guards everything below */
	pthread_cond_t freed; /* an entry's last holder put it */
	struct fdcache_ent **ents;
	unsigned n, cap;
	uint64_t tick;
	uint64_t puts; /* entries put back by their last holder */
};

/* Set up an empty cache of cap files below the directory srcfd. */
int fdcache_init(struct fdcache *c, int srcfd, unsigned cap);

/*
 * 0 when the open file fd (the source file path) still has the size and
 * mtime the index recorded and a name (it was not deleted, nor renamed
 * over, since it was opened); else -EIO with a message that names it and
 * says how to rebuild the index.
 */
int fdcache_check(int fd, const char *path, uint64_t size, int64_t mtime,
		  struct sfs_error *err);

/* Close every cached file.  Entries still held are closed too. */
void fdcache_destroy(struct fdcache *c);

/*
 * An open file for path (relative to the source), checked against size
 * and mtime_ns.  Returns the entry (release it with fdcache_put), or NULL
 * with errno-style code in *rc: -EIO when the file changed since it was
 * indexed or cannot be opened (err says which), -ENOMEM.  Out of
 * descriptors, it closes a cached file nobody holds, or (not ahead) waits
 * up to 2 s for a holder to put one back.
 * ahead: the caller reads ahead of the readers.  A cached file is, at
 * every get by a reader (not ahead), checked to be still the file that
 * path names (not deleted, replaced or moved since: one fstatat), else
 * opened again, so that a reader sees the source as it is when it opens,
 * as without the cache.
 */
struct fdcache_ent *fdcache_get(struct fdcache *c, const char *path,
				uint64_t size, int64_t mtime_ns, bool ahead,
				int *rc, struct sfs_error *err);

void fdcache_put(struct fdcache *c, struct fdcache_ent *e);

#endif
