/* Option parsing: every value accepted as documented, every bad one
 * refused with the message a user sees. */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "helpers.h"
#include "plan/plan_json_i.h"
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
	       "colour=blue: unknown option; the plan options are world, workers, replicas, epoch, seed, shuffle, block, remainder, batch, start, epoch_size, partition and rank");
	expect("wrld=2", -ENOENT,
	       "unknown option \"wrld\" (did you mean \"world\"?)");
	expect("worker=2", -ENOENT,
	       "unknown option \"worker\" (did you mean \"workers\"?)");
	expect("shufle=none", -ENOENT,
	       "unknown option \"shufle\" (did you mean \"shuffle\"?)");
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

static void test_options_suggest(void **state)
{
	static const struct sfs_opt *const both[] = { sfs_plan_options,
						      sfs_mount_options, NULL };

	(void)state;
	assert_string_equal(sfs_opt_suggest(both, "wrld"), "world");
	assert_string_equal(sfs_opt_suggest(both, "symlink"), "symlinks");
	assert_string_equal(sfs_opt_suggest(both, "readahed"), "readahead");
	assert_string_equal(sfs_opt_suggest(both, "partiton"), "partition");
	/* too far, or too short to guess: FUSE's own options stay theirs */
	assert_null(sfs_opt_suggest(both, "colour"));
	assert_null(sfs_opt_suggest(both, "ro"));
	assert_null(sfs_opt_suggest(both, "sync"));
	assert_null(sfs_opt_suggest(both, "fsname"));
	assert_null(sfs_opt_suggest(both, "allow_other"));
	assert_null(sfs_opt_suggest(both, "default_permissions"));
}

static void test_options_mount_opts(void **state)
{
	struct sfs_error err = { 0 };
	struct sfs_mount_opts m;

	(void)state;
	sfs_mount_opts_init(&m);
	assert_int_equal(m.epochs, 1);
	assert_true(m.symlinks && m.prefetch && m.splice);
	assert_int_equal(m.readahead_kb, 1008);
	assert_null(m.index_dir);
	assert_int_equal(sfs_mount_opts_set(&m, "epochs", "3", &err), 0);
	assert_int_equal(sfs_mount_opts_set(&m, "symlinks", "0", &err), 0);
	assert_int_equal(sfs_mount_opts_set(&m, "readahead", "0", &err), 0);
	assert_int_equal(sfs_mount_opts_set(&m, "index", "/x/idx", &err), 0);
	assert_int_equal(sfs_mount_opts_set(&m, "index", "/y", &err), 0);
	assert_int_equal(m.epochs, 3);
	assert_false(m.symlinks);
	assert_int_equal(m.readahead_kb, 0);
	assert_string_equal(m.index_dir, "/y");
	assert_int_equal(sfs_mount_opts_set(&m, "epochs", "1001", &err),
			 -EINVAL);
	assert_string_equal(
		err.msg,
		"epochs=1001 is out of range: use an integer in 1..1000");
	assert_int_equal(sfs_mount_opts_set(&m, "prefetch", "yes", &err),
			 -EINVAL);
	assert_string_equal(
		err.msg,
		"prefetch=yes is not a number: use an integer in 0..1");
	assert_int_equal(sfs_mount_opts_set(&m, "index", "", &err), -EINVAL);
	assert_string_equal(err.msg,
			    "index= is empty: give the index directory");
	assert_int_equal(m.epochs, 3);
	assert_string_equal(m.index_dir, "/y");
	assert_int_equal(sfs_mount_opts_set(&m, "world", "2", &err), -ENOENT);
	sfs_mount_opts_clear(&m);
	assert_null(m.index_dir);
}

static void test_options_json_round_trip(void **state)
{
	struct sfs_error err = { 0 };
	struct sfs_options o;
	struct sfs_plan_opts back;
	json_t *j;
	char *text;

	(void)state;
	sfs_options_init(&o);
	assert_int_equal(
		sfs_options_parse(
			&o,
			"world=16,workers=4,replicas=2,epoch=18446744073709551615,seed=9223372036854775808,shuffle=samples,block=7,remainder=drop,batch=32,start=5,partition=interleaved,rank=1",
			&err),
		0);
	j = sfs_options_to_json(&o.plan);
	text = json_dumps(j, JSON_COMPACT);
	assert_string_equal(
		text,
		"{\"world\":16,\"workers\":4,\"replicas\":2,\"epoch\":-1,\"seed\":-9223372036854775808,\"shuffle\":\"samples\",\"block\":7,\"remainder\":\"drop\",\"batch\":32,\"start\":5,\"epoch_size\":0,\"partition\":\"interleaved\"}");
	assert_int_equal(sfs_options_from_json(j, "r.json", &back, &err), 0);
	assert_memory_equal(&back, &o.plan, sizeof(back));
	free(text);

	memset(&back, 0x5a, sizeof(back));
	json_object_set_new(j, "workers", json_integer(0));
	assert_int_equal(sfs_options_from_json(j, "r.json", &back, &err),
			 -EINVAL);
	assert_string_equal(
		err.msg,
		"r.json: options: workers=0 is out of range: use an integer in 1..1024");
	json_object_del(j, "batch");
	json_object_set_new(j, "workers", json_integer(2));
	assert_int_equal(sfs_options_from_json(j, "r.json", &back, &err),
			 -EINVAL);
	assert_string_equal(err.msg, "r.json: options: batch is missing");
	json_object_set_new(j, "batch", json_string("32"));
	assert_int_equal(sfs_options_from_json(j, "r.json", &back, &err),
			 -EINVAL);
	assert_string_equal(err.msg,
			    "r.json: options: batch is of the wrong type");
	assert_true(back.world == 0x5a5a5a5a);
	/* each value valid, not together (found by fuzz_reports) */
	json_object_set_new(j, "batch", json_integer(32));
	json_object_set_new(j, "world", json_integer(3));
	assert_int_equal(sfs_options_from_json(j, "r.json", &back, &err),
			 -EINVAL);
	assert_string_equal(
		err.msg,
		"r.json: options: replicas=2 does not divide world=3: every group of replicas holds the same number of ranks; use a divisor of 3");
	json_decref(j);
	sfs_options_clear(&o);
}

static void test_options_help_and_markdown(void **state)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	(void)state;
	sfs_opt_help(sfs_mount_options, f, 2);
	fclose(f);
	assert_non_null(strstr(
		buf,
		"  symlinks=1|0 [1]        whole shards as symlinks to SRC; 0 serves them as\n"
		"                          files (the reader cannot see SRC)\n"));
	assert_non_null(strstr(buf,
			       "  index=DIR [SRC/.shardfs]\n"
			       "                          where the index"));
	free(buf);
	f = open_memstream(&buf, &len);
	sfs_opt_markdown(sfs_plan_options, f);
	fclose(f);
	assert_non_null(strstr(
		buf,
		"| `world=W` | 1 | ranks, W (1..65536) |\n| `workers=K` | 1 |"));
	assert_non_null(strstr(
		buf,
		"| `shuffle=none\\|units\\|samples` | units | what is permuted each epoch |\n"));
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_options_defaults_and_all_keys),
		cmocka_unit_test(test_options_bad_values),
		cmocka_unit_test(test_options_rank_out_of_range),
		cmocka_unit_test(test_options_failed_set_changes_nothing),
		cmocka_unit_test(test_options_epoch_writes),
		cmocka_unit_test(test_options_suggest),
		cmocka_unit_test(test_options_mount_opts),
		cmocka_unit_test(test_options_json_round_trip),
		cmocka_unit_test(test_options_help_and_markdown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
