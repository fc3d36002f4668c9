/*
 * A mount's status (include/shardfs/status.h): what the daemon writes is
 * what the auditor reads back; a damaged status is named.
 */
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "shardfs/status.h"

static void test_status_round_trip(void **state)
{
	const uint64_t counts[] = { 7, 13, 5 };
	struct sfs_index *idx = mkindex(counts, 3, NULL);
	struct sfs_error err = { 0 };
	struct sfs_options o;
	struct sfs_mount_opts m;
	struct sfs_plan *p = NULL;
	struct sfs_status st;
	struct sfs_status_in in;
	char *text;

	(void)state;
	sfs_options_init(&o);
	sfs_mount_opts_init(&m);
	assert_int_equal(
		sfs_options_parse(
			&o,
			"world=3,workers=2,epoch=18446744073709551615,seed=5,shuffle=samples,remainder=drop,batch=2,rank=1-2",
			&err),
		0);
	assert_int_equal(sfs_plan_build(idx, &o.plan, &p, &err), 0);
	in = (struct sfs_status_in){ .idx = idx,
				     .index_dir = "/idx",
				     .options = &o,
				     .mount = &m,
				     .plan = p,
				     .counters = { .opens = 3, .views = 1 } };
	text = sfs_status_json(&in);
	assert_non_null(strstr(
		text,
		"\"options\": {\n  \"world\": 3,\n  \"workers\": 2,\n  \"replicas\": 1,\n  \"epoch\": -1,"));
	assert_non_null(strstr(text,
			       "\"ranks\": [\n   1,\n   2\n  ],\n"
			       "  \"epochs\": 1,\n  \"symlinks\": true,"));
	assert_non_null(strstr(text, "\"opens\": 3,"));
	assert_int_equal(text[strlen(text) - 1], '\n');
	assert_int_equal(sfs_status_read(text, strlen(text), "MNT/status", &st,
					 &err),
			 0);
	assert_string_equal(st.source, "/src");
	assert_string_equal(st.index_dir, "/idx");
	assert_int_equal(st.epochs, 1);
	assert_memory_equal(&st.plan, &o.plan, sizeof(st.plan));
	sfs_status_clear(&st);
	free(text);

	assert_int_equal(sfs_status_read("{\"options\": {}}", 15, "MNT/status",
					 &st, &err),
			 -EINVAL);
	assert_string_equal(err.msg, "MNT/status: not a shardfs status");
	assert_int_equal(sfs_status_read("[1,", 3, "MNT/status", &st, &err),
			 -EINVAL);
	assert_string_equal(
		err.msg,
		"MNT/status: not a shardfs status (']' expected near end of file)");
	sfs_plan_free(p);
	sfs_options_clear(&o);
	sfs_mount_opts_clear(&m);
	sfs_index_free(idx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_status_round_trip),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
