/* The threads of a job shared: see include/shardfs/share.h. */
#include "shardfs/share.h"

void sfs_share_init(struct sfs_share *s, struct sfs_pool *pool)
{
	if (!pool->threads)
		pool->threads = sfs_pool_cpus();
	s->pool = pool;
	s->threads = pool->threads < SFS_POOL_THREADS_MAX ?
			     pool->threads :
			     SFS_POOL_THREADS_MAX;
	atomic_store(&s->spare, s->threads - sfs_pool_threads(pool));
	pool->share = s;
}

void sfs_share_worker_done(struct sfs_share *s)
{
	atomic_fetch_add(&s->spare, 1);
}

unsigned sfs_share_take(struct sfs_share *s, unsigned most)
{
	size_t next = atomic_load(&s->pool->next), n = s->pool->n;
	size_t left = next < n ? n - next + 1 : 1; /* and this scan's */
	unsigned workers = sfs_pool_threads(s->pool), have, k;
	unsigned busy = left < workers ? (unsigned)left : workers;
	unsigned want = s->threads / busy;

	want = (most && most < want ? most : want) - 1;
	have = atomic_load(&s->spare);
	do
		k = have < want ? have : want;
	while (k && !atomic_compare_exchange_weak(&s->spare, &have, have - k));
	return k + 1;
}

void sfs_share_give(struct sfs_share *s, unsigned threads)
{
	if (threads > 1)
		atomic_fetch_add(&s->spare, threads - 1);
}
