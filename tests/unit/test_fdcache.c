/*
 * The file cache (src/fuse/fdcache.c): a shard deleted, and forgotten,
 * between a get's open and its caching is not cached, so that its space
 * is freed when its reader is done; a file still there is cached.  The
 * race is made by fstat (linked with --wrap=fstat): the first fstat of an
 * armed test deletes the file and forgets it before it answers.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers.h"
#include "fdcache.h"
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fdcache_deleted_while_opened_not_cached),
		cmocka_unit_test(test_fdcache_file_there_cached),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
