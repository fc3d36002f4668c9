/*
 * The worker pool (include/shardfs/pool.h): every item worked on exactly
 * once whatever the thread count, counters summed, progress ended once.
 */
#include <stdlib.h>
#include <string.h>

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
	struct sfs_error err = { 0 };
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
			assert_int_equal(sfs_pool_run(&p, &err), 0);
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pool_every_item_once),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
