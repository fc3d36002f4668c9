/*
 * A pool of worker threads over n items: each thread takes the next item
 * from a shared counter and works on it with a SHA-256 context of its own
 * (every user of the pool hashes); the calling thread reports progress
 * about four times a second until every item is done, woken by the worker
 * that finishes the last item.  The indexer and
 * the auditor's observation of mounted views both run on it.
 */
#ifndef SHARDFS_POOL_H
#define SHARDFS_POOL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shardfs/digest.h"
#include "shardfs/error.h"

#define SFS_POOL_THREADS_MAX 256

struct sfs_share; /* share.h */

struct sfs_pool {
	size_t n; /* items */
	unsigned threads; /* 0: sfs_pool_cpus(); at most n, SFS_POOL_THREADS_MAX */
	/* work on item i; d is the thread's own digest, reset */
	void (*work)(struct sfs_pool *p, size_t i, struct sfs_digest *d);
	/* from the calling thread while the items run, and once with final
	 * set at the end; NULL for none */
	void (*progress)(const struct sfs_pool *p, bool final);
	void *arg; /* the caller's */
	/* the threads of the job, told each time a worker leaves for want
	 * of items (sfs_share_init sets it); NULL: none */
	struct sfs_share *share;

	/* counters: done is the pool's, bytes and samples the work's */
	atomic_size_t done;
	atomic_uint_fast64_t bytes, samples;
	double elapsed; /* seconds since the run started, for progress */

	/* the pool's own: the next item; the end, told to the caller */
	atomic_size_t next;
	pthread_mutex_t lock;
	pthread_cond_t all_done;
};

/*
 * The CPUs this process may use: those its affinity allows, fewer when
 * its cgroup's CPU quota (a container's CPU limit: cgroup v2 cpu.max, v1
 * cpu.cfs_quota_us) allows fewer, its quota over its period rounded up;
 * at least 1.  A pool of threads 0 runs this many.
 */
unsigned sfs_pool_cpus(void);

/* The worker threads sfs_pool_run(p) starts for p's threads and n. */
unsigned sfs_pool_threads(const struct sfs_pool *p);

/*
 * Run every item of p (its counters zeroed first) and return when all are
 * done: on the calling thread when not one thread can be started.
 */
void sfs_pool_run(struct sfs_pool *p);

#endif
