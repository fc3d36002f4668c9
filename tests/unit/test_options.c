/* Option parsing: every value accepted as documented, every bad one
 * refused with the message a user sees. */
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "shardfs/options.h"

static void test_options_defaults_and_all_keys(void **state)
{
	struct sfs_error err = { 0 };
	struct sfs_options o;

	(void)state;
	sfs_options_init(&o);
	assert_int_equal(o.plan.world, 1);
	assert_int_equal(o.plan.workers, 1);
	assert_int_equal(o.plan.shuffle, SFS_SHUFFLE_UNITS);
	assert_int_equal(o.plan.remainder, SFS_REMAINDER_PAD);
	assert_int_equal(o.plan.batch, 1);
	assert_int_equal(o.plan.partition, SFS_PARTITION_CONTIGUOUS);
	assert_int_equal(
		sfs_options_parse(
			&o,
			"world=16,workers=4,epoch=3,seed=18446744073709551615,shuffle=samples,block=64,remainder=drop,batch=32,start=1000,partition=interleaved,rank=0,2,4-6",
			&err),
		0);
	assert_int_equal(o.plan.world, 16);
	assert_int_equal(o.plan.workers, 4);
	assert_int_equal(o.plan.epoch, 3);
	assert_true(o.plan.seed == UINT64_MAX);
	assert_int_equal(o.plan.shuffle, SFS_SHUFFLE_SAMPLES);
	assert_int_equal(o.plan.block, 64);
	assert_int_equal(o.plan.remainder, SFS_REMAINDER_DROP);
	assert_int_equal(o.plan.batch, 32);
	assert_int_equal(o.plan.start, 1000);
	assert_int_equal(o.plan.partition, SFS_PARTITION_INTERLEAVED);
	assert_int_equal(o.nranks, 5);
	assert_int_equal(o.ranks[0], 0);
	assert_int_equal(o.ranks[1], 2);
	assert_int_equal(o.ranks[4], 6);
	assert_int_equal(sfs_options_check(&o, &err), 0);
	sfs_options_clear(&o);
}

static void expect(const char *list, int rc, const char *msg)
{
	struct sfs_error err = { 0 };
	struct sfs_options o;

	sfs_options_init(&o);
	assert_int_equal(sfs_options_parse(&o, list, &err), rc);
	assert_string_equal(err.msg, msg);
	sfs_options_clear(&o);
}

static void test_options_bad_values(void **state)
{
	(void)state;
	expect("world=0", -EINVAL,
	       "world=0 is out of range: use an integer in 1..65536");
	expect("world=65537", -EINVAL,
	       "world=65537 is out of range: use an integer in 1..65536");
	expect("workers=abc", -EINVAL,
	       "workers=abc is not a number: use an integer in 1..1024");
	expect("workers=-1", -EINVAL,
	       "workers=-1 is not a number: use an integer in 1..1024");
	expect("epoch=", -EINVAL,
	       "epoch= is empty: use an integer in 0..18446744073709551615");
	expect("epoch=18446744073709551616", -EINVAL,
	       "epoch=18446744073709551616 is out of range: use an integer in 0..18446744073709551615");
	expect("batch=0", -EINVAL,
	       "batch=0 is out of range: use an integer in 1..4294967296");
	expect("shuffle=yes", -EINVAL,
	       "shuffle=yes is not valid: use none | units | samples");
	expect("remainder=keep", -EINVAL,
	       "remainder=keep is not valid: use pad | drop");
	expect("partition=strided", -EINVAL,
	       "partition=strided is not valid: use contiguous | interleaved");
	expect("rank=1-0", -EINVAL,
	       "rank=1-0 is not a rank list: use a number (3), a list (0,2) or a range (0-7) of ranks in 0..65535");
	expect("rank=x", -EINVAL,
	       "rank=x is not a rank list: use a number (3), a list (0,2) or a range (0-7) of ranks in 0..65535");
	expect("colour=blue", -ENOENT,
	       "colour=blue: unknown option; the plan options are world, workers, epoch, seed, shuffle, block, remainder, batch, start, partition and rank");
	expect("world", -EINVAL, "\"world\" is not an option: write key=value");
	expect("world=2,,workers=2", -EINVAL,
	       "\"\" is not an option: write key=value");
}

static void test_options_rank_out_of_range(void **state)
{
	struct sfs_error err = { 0 };
	struct sfs_options o;

	(void)state;
	sfs_options_init(&o);
	assert_int_equal(sfs_options_parse(&o, "world=8,rank=8", &err), 0);
	assert_int_equal(sfs_options_check(&o, &err), -EINVAL);
	assert_string_equal(
		err.msg, "rank=8 is out of range for world=8: ranks are 0..7");
	sfs_options_clear(&o);
}

static void test_options_failed_set_changes_nothing(void **state)
{
	struct sfs_error err = { 0 };
	struct sfs_options o;

	(void)state;
	sfs_options_init(&o);
	assert_int_equal(sfs_options_set(&o, "epoch", "5", &err), 0);
	assert_int_equal(sfs_options_set(&o, "epoch", "5x", &err), -EINVAL);
	assert_int_equal(o.plan.epoch, 5);
	assert_int_equal(sfs_options_set(&o, "rank", "3", &err), 0);
	assert_int_equal(sfs_options_set(&o, "rank", "3-", &err), -EINVAL);
	assert_int_equal(o.nranks, 1);
	assert_int_equal(o.ranks[0], 3);
	sfs_options_clear(&o);
}

static void expect_epoch(const char *buf, size_t len, int rc, uint64_t want,
			 const char *msg)
{
	struct sfs_error err = { 0 };
	uint64_t e = 12345;

	assert_int_equal(sfs_options_parse_epoch(buf, len, &e, &err), rc);
	assert_true(e == (rc ? 12345 : want));
	assert_string_equal(err.msg, msg);
}

static void test_options_epoch_writes(void **state)
{
	(void)state;
	expect_epoch("3\n", 2, 0, 3, "");
	expect_epoch("  42 \r\n", 7, 0, 42, "");
	expect_epoch("18446744073709551615", 20, 0, UINT64_MAX, "");
	expect_epoch(
		"abc\n", 4, -EINVAL, 0,
		"epoch=abc is not a number: use an integer in 0..18446744073709551615");
	expect_epoch(
		"-1\n", 3, -EINVAL, 0,
		"epoch=-1 is not a number: use an integer in 0..18446744073709551615");
	expect_epoch(
		"1 2\n", 4, -EINVAL, 0,
		"epoch=1 2 is not a number: use an integer in 0..18446744073709551615");
	expect_epoch(
		"18446744073709551616\n", 21, -EINVAL, 0,
		"epoch=18446744073709551616 is out of range: use an integer in 0..18446744073709551615");
	expect_epoch(
		"\n", 1, -EINVAL, 0,
		"epoch= is empty: use an integer in 0..18446744073709551615");
	expect_epoch("1\0"
		     "9",
		     3, -EINVAL, 0,
		     "write one epoch number, e.g. echo 3 > .shardfs/epoch");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_options_defaults_and_all_keys),
		cmocka_unit_test(test_options_bad_values),
		cmocka_unit_test(test_options_rank_out_of_range),
		cmocka_unit_test(test_options_failed_set_changes_nothing),
		cmocka_unit_test(test_options_epoch_writes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
