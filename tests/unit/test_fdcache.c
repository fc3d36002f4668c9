/*
 * The file cache (src/fuse/fdcache.c): a shard deleted, and forgotten,
 * between a get's open and its caching is not cached, so that its space
 * is freed when its reader is done; a file still there is cached.  The
 * race is made by fstat (linked with --wrap=fstat): the first fstat of an
 * armed test deletes the file and forgets it before it answers.  Gets of
 * one file that miss at once (prefetch threads given chunks of one
 * shard) open it once, the others waiting for it: opens are counted, and
 * made slow, by sfs_index_open_shard (--wrap=sfs_index_open_shard).
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers.h"
#include "fdcache.h"
#include "shardfs/index.h"
#include "shardfs/shard.h"

int __real_fstat(int fd, struct stat *st);
int __wrap_fstat(int fd, struct stat *st);

/* armed: the cache and the file the next fstat deletes and forgets */
static struct fdcache *race_cache;
static int race_dirfd = -1;
static const char *race_path;

int __wrap_fstat(int fd, struct stat *st)
{
	if (race_cache) {
		struct fdcache *c = race_cache;

		race_cache = NULL;
		assert_int_equal(unlinkat(race_dirfd, race_path, 0), 0);
		fdcache_forget(c, race_path);
	}
	return __real_fstat(fd, st);
}

int __real_sfs_index_open_shard(int srcfd, const char *path, int flags);
int __wrap_sfs_index_open_shard(int srcfd, const char *path, int flags);

static atomic_uint opens; /* by the cache, of the source's files */
static atomic_bool no_fds; /* the daemon has no descriptor left */

int __wrap_sfs_index_open_shard(int srcfd, const char *path, int flags)
{
	atomic_fetch_add(&opens, 1);
	if (atomic_load(&no_fds))
		return -EMFILE;
	/* a slow source (an open on s3fs is a request to the server):
	 * every get of the test misses while the first open runs */
	usleep(100 * 1000);
	return __real_sfs_index_open_shard(srcfd, path, flags);
}

static void get_and_put(bool race, unsigned want_cached)
{
	char *dir = tmpdir_new();
	char *path = write_at(dir, "c0.jsonl", "{\"i\":0}\n", 8);
	struct sfs_error err = { 0 };
	struct fdcache c;
	struct fdcache_ent *e;
	struct stat st;
	int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc;

	assert_true(dirfd >= 0);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(fdcache_init(&c, dirfd, 4), 0);
	race_dirfd = dirfd;
	race_path = "c0.jsonl";
	race_cache = race ? &c : NULL;
	e = fdcache_get(&c, "c0.jsonl", 8, sfs_mtime_ns(&st), FDCACHE_AHEAD,
			&rc, &err);
	assert_int_equal(rc, 0);
	assert_non_null(e);
	assert_null(race_cache); /* the race was run */
	fdcache_put(&c, e);
	/* the deleted file's descriptor is closed with its last put */
	assert_int_equal(c.n, want_cached);
	fdcache_destroy(&c);
	close(dirfd);
	free(path);
	tmpdir_remove(dir);
}

static void test_fdcache_deleted_while_opened_not_cached(void **state)
{
	(void)state;
	get_and_put(true, 0);
}

static void test_fdcache_file_there_cached(void **state)
{
	(void)state;
	get_and_put(false, 1);
}

#define GETTERS 8

struct getter {
	struct fdcache *c;
	pthread_barrier_t *start;
	const char *path;
	int64_t mtime;
	struct fdcache_ent *e;
	int rc;
};

static void *get_one(void *arg)
{
	struct getter *g = arg;
	struct sfs_error err = { 0 };

	pthread_barrier_wait(g->start);
	g->e = fdcache_get(g->c, g->path, 8, g->mtime, FDCACHE_AHEAD, &g->rc,
			   &err);
	return NULL;
}

/* GETTERS threads get path at once; want_opens opens of it are made. */
static void get_at_once(const char *path, unsigned want_opens, int want_rc)
{
	char *dir = tmpdir_new();
	char *file = write_at(dir, "c0.jsonl", "{\"i\":0}\n", 8);
	struct getter g[GETTERS];
	pthread_t t[GETTERS];
	pthread_barrier_t start;
	struct fdcache c;
	struct stat st;
	int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	unsigned i;

	assert_true(dirfd >= 0);
	assert_int_equal(stat(file, &st), 0);
	assert_int_equal(fdcache_init(&c, dirfd, 4), 0);
	assert_int_equal(pthread_barrier_init(&start, NULL, GETTERS), 0);
	atomic_store(&opens, 0);
	for (i = 0; i < GETTERS; i++) {
		g[i] = (struct getter){ .c = &c,
					.start = &start,
					.path = path,
					.mtime = sfs_mtime_ns(&st) };
		assert_int_equal(pthread_create(&t[i], NULL, get_one, &g[i]),
				 0);
	}
	for (i = 0; i < GETTERS; i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
	assert_int_equal(atomic_load(&opens), want_opens);
	for (i = 0; i < GETTERS; i++) {
		assert_int_equal(g[i].rc, want_rc);
		/* one entry, held by every getter */
		assert_ptr_equal(g[i].e, want_rc ? NULL : g[0].e);
		if (g[i].e)
			fdcache_put(&c, g[i].e);
	}
	assert_int_equal(c.n, want_rc ? 0 : 1);
	pthread_barrier_destroy(&start);
	fdcache_destroy(&c);
	close(dirfd);
	free(file);
	tmpdir_remove(dir);
}

static void test_fdcache_gets_at_once_open_once(void **state)
{
	(void)state;
	get_at_once("c0.jsonl", 1, 0);
}

/* an open that fails is not waited for in turn: the others, woken, try
 * on their own at once (and fail with it) */
static void test_fdcache_gets_at_once_of_missing_file(void **state)
{
	(void)state;
	get_at_once("gone.jsonl", GETTERS, -EIO);
}

struct waiting_get {
	struct fdcache *c;
	int64_t mtime;
	struct fdcache_ent *e;
	int rc;
};

static void *get_waiting(void *arg)
{
	struct waiting_get *g = arg;
	struct sfs_error err = { 0 };

	g->e = fdcache_get(g->c, "c0.jsonl", 8, g->mtime, 0, &g->rc, &err);
	return NULL;
}

/* Out of descriptors, a reader's get waits for one to be put back (2 s
 * at most); a get of the same path that must not wait (FDCACHE_NOWAIT:
 * the caller gives back descriptors of its own then) fails at once with
 * -EMFILE, not held behind the reader's wait: the caller's put of one
 * then lets the reader's open through. */
static void test_fdcache_nowait_not_held_by_a_waiting_open(void **state)
{
	char *dir = tmpdir_new();
	char *file = write_at(dir, "c0.jsonl", "{\"i\":0}\n", 8);
	char *other = write_at(dir, "c1.jsonl", "{\"i\":1}\n", 8);
	struct sfs_error err = { 0 };
	struct waiting_get g = { 0 };
	struct fdcache_ent *held, *e;
	struct fdcache c;
	struct stat st;
	pthread_t t;
	int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc;

	(void)state;
	assert_true(dirfd >= 0);
	assert_int_equal(stat(file, &st), 0);
	assert_int_equal(fdcache_init(&c, dirfd, 4), 0);
	assert_int_equal(stat(other, &st), 0);
	held = fdcache_get(&c, "c1.jsonl", 8, sfs_mtime_ns(&st), 0, &rc, &err);
	assert_non_null(held);
	assert_int_equal(stat(file, &st), 0);
	atomic_store(&no_fds, true);
	g = (struct waiting_get){ .c = &c, .mtime = sfs_mtime_ns(&st) };
	assert_int_equal(pthread_create(&t, NULL, get_waiting, &g), 0);
	usleep(300 * 1000); /* the reader's open fails: it waits */
	e = fdcache_get(&c, "c0.jsonl", 8, sfs_mtime_ns(&st), FDCACHE_NOWAIT,
			&rc, &err);
	assert_null(e);
	assert_int_equal(rc, -EMFILE);
	atomic_store(&no_fds, false);
	fdcache_put(&c, held);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(g.rc, 0);
	assert_non_null(g.e);
	fdcache_put(&c, g.e);
	fdcache_destroy(&c);
	close(dirfd);
	free(file);
	free(other);
	tmpdir_remove(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fdcache_deleted_while_opened_not_cached),
		cmocka_unit_test(test_fdcache_file_there_cached),
		cmocka_unit_test(test_fdcache_gets_at_once_open_once),
		cmocka_unit_test(test_fdcache_gets_at_once_of_missing_file),
		cmocka_unit_test(
			test_fdcache_nowait_not_held_by_a_waiting_open),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
