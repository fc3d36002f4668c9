/*
 * The worker pool (include/shardfs/pool.h): every item worked on exactly
 * once whatever the thread count, counters summed, progress ended once;
 * the CPUs a pool runs on by default follow the process's affinity and
 * its cgroup's CPU quota.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "helpers.h"
#include "shardfs/pool.h"

struct tally {
	atomic_uint *seen; /* per item */
	unsigned finals;
	size_t done_at_final;
};

static void work(struct sfs_pool *p, size_t i, struct sfs_digest *d)
{
	struct tally *t = p->arg;
	unsigned char out[SFS_DIGEST_LEN];

	/* the thread's own digest is usable */
	sfs_digest_update(d, &i, sizeof(i));
	sfs_digest_final(d, out);
	atomic_fetch_add(&t->seen[i], 1);
	atomic_fetch_add(&p->bytes, i);
	atomic_fetch_add(&p->samples, 1);
}

static void progress(const struct sfs_pool *p, bool final)
{
	struct tally *t = p->arg;

	if (final) {
		t->finals++;
		t->done_at_final = atomic_load(&p->done);
	}
}

static void test_pool_every_item_once(void **state)
{
	static const unsigned threads[] = { 0, 1, 2, 7, 300 };
	static const size_t sizes[] = { 0, 1, 5, 1000 };
	size_t s, k, i;

	(void)state;
	for (s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		for (k = 0; k < sizeof(threads) / sizeof(threads[0]); k++) {
			struct tally t = { 0 };
			struct sfs_pool p = { .n = sizes[s],
					      .threads = threads[k],
					      .work = work,
					      .progress = progress,
					      .arg = &t };

			t.seen = calloc(sizes[s] + 1, sizeof(*t.seen));
			sfs_pool_run(&p);
			for (i = 0; i < sizes[s]; i++)
				assert_int_equal(t.seen[i], 1);
			assert_int_equal(atomic_load(&p.done), sizes[s]);
			assert_int_equal(atomic_load(&p.samples), sizes[s]);
			assert_int_equal(
				atomic_load(&p.bytes),
				sizes[s] ? sizes[s] * (sizes[s] - 1) / 2 : 0);
			assert_int_equal(t.finals, 1);
			assert_int_equal(t.done_at_final, sizes[s]);
			free(t.seen);
		}
	}
}

/* One CPU allowed by affinity: one thread; all of them again: more,
 * where the machine has more. */
static void test_pool_cpus_follow_affinity(void **state)
{
	cpu_set_t all, one;
	int cpu;

	(void)state;
	assert_int_equal(sched_getaffinity(0, sizeof(all), &all), 0);
	for (cpu = 0; !CPU_ISSET(cpu, &all); cpu++)
		;
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	assert_int_equal(sched_setaffinity(0, sizeof(one), &one), 0);
	assert_int_equal(sfs_pool_cpus(), 1);
	assert_int_equal(sched_setaffinity(0, sizeof(all), &all), 0);
	assert_int_equal(sfs_pool_cpus(), (unsigned)CPU_COUNT(&all));
}

static int write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	int rc;

	if (!f)
		return -1;
	rc = fputs(text, f) < 0;
	return fclose(f) || rc ? -1 : 0;
}

static char cg_dir[128], cg_back[128], cg_pid[32];

/* Out of the test's cgroup and remove it, whether the test passed or not. */
static int cgroup_teardown(void **state)
{
	(void)state;
	if (cg_dir[0]) {
		write_file(cg_back, cg_pid);
		rmdir(cg_dir);
		cg_dir[0] = '\0';
	}
	return 0;
}

/*
 * Move this process into a new cgroup of controller ctl whose file v1 (in
 * cgroup v1's /sys/fs/cgroup/CTL) or v2 (in v2's /sys/fs/cgroup) holds
 * value1 or value2; *v2 says which.  Needs root and a hierarchy with the
 * controller: the test is skipped, saying why, without.
 */
static void cgroup_enter(const char *ctl, const char *v1, const char *value1,
			 const char *v2name, const char *value2, bool *v2)
{
	char root[64], file[192];
	struct statfs fs;

	snprintf(root, sizeof(root), "/sys/fs/cgroup/%s", ctl);
	*v2 = statfs(root, &fs) || fs.f_type != CGROUP_SUPER_MAGIC;
	if (*v2) {
		snprintf(root, sizeof(root), "/sys/fs/cgroup");
		if (statfs(root, &fs) || fs.f_type != CGROUP2_SUPER_MAGIC) {
			fprintf(stderr,
				"skipped: no cgroup hierarchy with %s at %s\n",
				ctl, root);
			cg_dir[0] = '\0';
			skip();
		}
	}
	snprintf(cg_dir, sizeof(cg_dir), "%s/shardfs-test-%d", root,
		 (int)getpid());
	snprintf(cg_back, sizeof(cg_back), "%s/cgroup.procs", root);
	snprintf(cg_pid, sizeof(cg_pid), "%d", (int)getpid());
	if (mkdir(cg_dir, 0755)) {
		fprintf(stderr, "skipped: cannot make a cgroup %s: %s\n",
			cg_dir, strerror(errno));
		cg_dir[0] = '\0';
		skip();
	}
	snprintf(file, sizeof(file), "%s/%s", cg_dir, *v2 ? v2name : v1);
	if (write_file(file, *v2 ? value2 : value1)) {
		fprintf(stderr, "skipped: cannot set %s: %s\n", file,
			strerror(errno));
		skip();
	}
	snprintf(file, sizeof(file), "%s/cgroup.procs", cg_dir);
	assert_int_equal(write_file(file, cg_pid), 0);
}

/* A cgroup whose CPU quota is half a CPU (a container's limit): one
 * thread though affinity allows more; 1.5 CPUs: two. */
static void test_pool_cpus_follow_cgroup_quota(void **state)
{
	char file[192];
	cpu_set_t all;
	bool v2;

	(void)state;
	assert_int_equal(sched_getaffinity(0, sizeof(all), &all), 0);
	if (CPU_COUNT(&all) < 2) {
		fprintf(stderr,
			"skipped: one CPU, a quota of one changes nothing\n");
		skip();
	}
	cgroup_enter("cpu", "cpu.cfs_quota_us", "50000", "cpu.max",
		     "50000 100000", &v2);
	assert_int_equal(sfs_pool_cpus(), 1);
	snprintf(file, sizeof(file), "%s/%s", cg_dir,
		 v2 ? "cpu.max" : "cpu.cfs_quota_us");
	assert_int_equal(write_file(file, v2 ? "150000 100000" : "150000"), 0);
	assert_int_equal(sfs_pool_cpus(), 2);
	/* back where it was */
	assert_int_equal(write_file(cg_back, cg_pid), 0);
	assert_int_equal(sfs_pool_cpus(), (unsigned)CPU_COUNT(&all));
}

static void *nothing(void *arg)
{
	return arg;
}

/* No thread can be started (a container at its pids limit: a cgroup of
 * one task): the items run on the calling thread, every one once, and
 * progress still ends once. */
static void test_pool_runs_without_threads(void **state)
{
	struct tally t = { 0 };
	struct sfs_pool p = { .n = 100,
			      .threads = 4,
			      .work = work,
			      .progress = progress,
			      .arg = &t };
	pthread_t tid;
	size_t i;
	bool v2;

	(void)state;
	cgroup_enter("pids", "pids.max", "1", "pids.max", "1", &v2);
	assert_int_equal(pthread_create(&tid, NULL, nothing, NULL), EAGAIN);
	t.seen = calloc(p.n, sizeof(*t.seen));
	assert_non_null(t.seen);
	sfs_pool_run(&p);
	for (i = 0; i < p.n; i++)
		assert_int_equal(t.seen[i], 1);
	assert_int_equal(atomic_load(&p.done), p.n);
	assert_int_equal(t.finals, 1);
	free(t.seen);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pool_every_item_once),
		cmocka_unit_test(test_pool_cpus_follow_affinity),
		cmocka_unit_test_teardown(test_pool_cpus_follow_cgroup_quota,
					  cgroup_teardown),
		cmocka_unit_test_teardown(test_pool_runs_without_threads,
					  cgroup_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
