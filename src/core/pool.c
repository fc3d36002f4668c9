#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "shardfs/pool.h"

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *worker(void *arg)
{
	struct sfs_pool *p = arg;
	struct sfs_digest *d = sfs_digest_new();
	size_t i;

	while ((i = atomic_fetch_add(&p->next, 1)) < p->n) {
		p->work(p, i, d);
		atomic_fetch_add(&p->done, 1);
	}
	sfs_digest_free(d);
	return NULL;
}

static unsigned threads(const struct sfs_pool *p)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned t = p->threads ? p->threads : (cpus > 0 ? (unsigned)cpus : 1);

	if (t > SFS_POOL_THREADS_MAX)
		t = SFS_POOL_THREADS_MAX;
	if (t > p->n)
		t = p->n ? (unsigned)p->n : 1;
	return t;
}

int sfs_pool_run(struct sfs_pool *p, struct sfs_error *err)
{
	pthread_t tids[SFS_POOL_THREADS_MAX];
	unsigned n = threads(p), started, i;
	double t0 = now();
	int rc = 0;

	atomic_store(&p->next, 0);
	atomic_store(&p->done, 0);
	atomic_store(&p->bytes, 0);
	atomic_store(&p->samples, 0);
	p->elapsed = 0;
	for (started = 0; started < n; started++) {
		rc = pthread_create(&tids[started], NULL, worker, p);
		if (rc)
			break;
	}
	if (!started)
		return sfs_errorf(err, -rc, "cannot start a thread: %s",
				  strerror(rc));
	while (p->progress && atomic_load(&p->done) < p->n) {
		struct timespec ts = { 0, 250 * 1000 * 1000 };

		p->elapsed = now() - t0;
		p->progress(p, false);
		nanosleep(&ts, NULL);
	}
	for (i = 0; i < started; i++)
		pthread_join(tids[i], NULL);
	p->elapsed = now() - t0;
	if (p->progress)
		p->progress(p, true);
	return 0;
}
