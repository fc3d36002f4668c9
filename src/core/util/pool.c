#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "shardfs/pool.h"
#include "shardfs/share.h"

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
		if (atomic_fetch_add(&p->done, 1) + 1 == p->n) {
			pthread_mutex_lock(&p->lock);
			pthread_cond_signal(&p->all_done);
			pthread_mutex_unlock(&p->lock);
		}
	}
	sfs_digest_free(d);
	if (p->share)
		sfs_share_worker_done(p->share);
	return NULL;
}

/* Up to n numbers from the file at path; how many were read. */
static int read_numbers(const char *path, long long *v, int n)
{
	FILE *f = fopen(path, "re");
	int got = 0;

	if (!f)
		return 0;
	while (got < n && fscanf(f, "%lld", &v[got]) == 1)
		got++;
	fclose(f);
	return got;
}

/* Whether the comma-separated list of len bytes names "cpu". */
static bool has_cpu(const char *list, size_t len)
{
	size_t at = 0, k;

	while (at < len) {
		k = strcspn(list + at, ",:");
		if (k == 3 && !strncmp(list + at, "cpu", 3))
			return true;
		at += k + 1;
	}
	return false;
}

/*
 * The CPUs this process's cgroup allows, its CFS quota over its period
 * rounded up: cgroup v2's cpu.max ("QUOTA PERIOD"; "max PERIOD" for
 * none), or v1's cpu.cfs_quota_us (-1 for none) and cpu.cfs_period_us;
 * 0 when none is set or none can be read.
 */
static unsigned cgroup_cpus(void)
{
	char line[4096], path[4200];
	unsigned long long n, best = 0;
	FILE *f = fopen("/proc/self/cgroup", "re");

	/* lines "ID:CONTROLLERS:PATH"; v2's is "0::PATH" */
	while (f && fgets(line, sizeof(line), f)) {
		char *c = strchr(line, ':'), *p = c ? strchr(c + 1, ':') : NULL;
		long long v[2] = { 0, 0 };

		if (!p)
			continue;
		p[strcspn(p, "\n")] = '\0';
		if (p == c + 1) {
			snprintf(path, sizeof(path), "/sys/fs/cgroup%s/cpu.max",
				 p + 1);
			read_numbers(path, v, 2);
		} else if (has_cpu(c + 1, (size_t)(p - c - 1))) {
			snprintf(path, sizeof(path),
				 "/sys/fs/cgroup/cpu%s/cpu.cfs_quota_us",
				 p + 1);
			read_numbers(path, v, 1);
			snprintf(path, sizeof(path),
				 "/sys/fs/cgroup/cpu%s/cpu.cfs_period_us",
				 p + 1);
			read_numbers(path, v + 1, 1);
		}
		if (v[0] <= 0 || v[1] <= 0)
			continue;
		n = ((unsigned long long)v[0] + (unsigned long long)v[1] - 1) /
		    (unsigned long long)v[1];
		if (!best || n < best)
			best = n;
	}
	if (f)
		fclose(f);
	return best > SFS_POOL_THREADS_MAX ? SFS_POOL_THREADS_MAX :
					     (unsigned)best;
}

unsigned sfs_pool_cpus(void)
{
	unsigned n = 0, q = cgroup_cpus();
	cpu_set_t set;

	if (!sched_getaffinity(0, sizeof(set), &set))
		n = (unsigned)CPU_COUNT(&set);
	else if (sysconf(_SC_NPROCESSORS_ONLN) > 0)
		n = (unsigned)sysconf(_SC_NPROCESSORS_ONLN);
	if (q && (!n || q < n))
		n = q;
	return n ? n : 1;
}

unsigned sfs_pool_threads(const struct sfs_pool *p)
{
	unsigned t = p->threads ? p->threads : sfs_pool_cpus();

	if (t > SFS_POOL_THREADS_MAX)
		t = SFS_POOL_THREADS_MAX;
	if (t > p->n)
		t = p->n ? (unsigned)p->n : 1;
	return t;
}

/*
 * Report p's progress about four times a second until its last item is
 * done, waking at once when it is.
 */
static void report_until_done(struct sfs_pool *p, double t0)
{
	struct timespec at;

	pthread_mutex_lock(&p->lock);
	while (atomic_load(&p->done) < p->n) {
		pthread_mutex_unlock(&p->lock);
		p->elapsed = now() - t0;
		p->progress(p, false);
		clock_gettime(CLOCK_MONOTONIC, &at);
		at.tv_nsec += 250 * 1000 * 1000;
		if (at.tv_nsec >= 1000 * 1000 * 1000) {
			at.tv_sec++;
			at.tv_nsec -= 1000 * 1000 * 1000;
		}
		pthread_mutex_lock(&p->lock);
		if (atomic_load(&p->done) < p->n)
			pthread_cond_timedwait(&p->all_done, &p->lock, &at);
	}
	pthread_mutex_unlock(&p->lock);
}

void sfs_pool_run(struct sfs_pool *p)
{
	pthread_t tids[SFS_POOL_THREADS_MAX];
	pthread_condattr_t attr;
	unsigned n = sfs_pool_threads(p), started, i;
	double t0 = now();

	atomic_store(&p->next, 0);
	atomic_store(&p->done, 0);
	atomic_store(&p->bytes, 0);
	atomic_store(&p->samples, 0);
	p->elapsed = 0;
	pthread_mutex_init(&p->lock, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&p->all_done, &attr);
	pthread_condattr_destroy(&attr);
	for (started = 0; started < n; started++)
		if (pthread_create(&tids[started], NULL, worker, p))
			break;
	/* not one thread (a container at its pids limit): the items run
	 * here, with no progress until they are done */
	if (!started)
		worker(p);
	if (p->progress)
		report_until_done(p, t0);
	for (i = 0; i < started; i++)
		pthread_join(tids[i], NULL);
	pthread_cond_destroy(&p->all_done);
	pthread_mutex_destroy(&p->lock);
	p->elapsed = now() - t0;
	if (p->progress)
		p->progress(p, true);
}
