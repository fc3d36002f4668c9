/*
 * The threads of a job (shardfs-index --jobs N, shardfs-check --jobs N)
 * shared by its pool's workers (pool.h) and the helpers a worker's scan
 * starts (a Parquet scan hashing 65 536 rows or more, format.h), so that
 * never more than the job's threads run at once.
 *
 * A share counts the spare threads, those no worker and no helper runs
 * on: the threads the pool does not start (fewer items than threads) and
 * those of workers left without items.  A scan takes helpers out of them
 * when it knows it will use them (sfs_share_take) and gives them back
 * when it is done (sfs_share_give).  A worker's own thread is never
 * spare: a scan always runs at least on the one calling it.  Every
 * function may be called from any thread at once.
 */
#ifndef SHARDFS_SHARE_H
#define SHARDFS_SHARE_H

#include <stdatomic.h>

#include "shardfs/pool.h"

struct sfs_share {
	const struct sfs_pool *pool; /* borrowed */
	unsigned threads; /* the job's: the pool's threads, not capped by n */
	atomic_uint spare;
};

/*
 * Start s for the run of pool (its n and threads set) about to begin:
 * threads 0 becomes the CPUs, counted once for both, and the pool tells s
 * of each worker that leaves for want of items (sfs_share_worker_done:
 * its thread is spare then).
 */
void sfs_share_init(struct sfs_share *s, struct sfs_pool *pool);

/* A worker of s's pool is left without items: its thread is spare. */
void sfs_share_worker_done(struct sfs_share *s);

/*
 * The threads a scan that can use at most most of them (0: any number)
 * may run on, the calling one included: 1, and as many spare threads as
 * make its share of s's threads among the workers the items not yet
 * started and its own keep busy (the last item gets them all, one among
 * more items than threads none), taken out of s until given back.
 */
unsigned sfs_share_take(struct sfs_share *s, unsigned most);

/* Give back the helpers (threads - 1) of a scan that took threads. */
void sfs_share_give(struct sfs_share *s, unsigned threads);

#endif
