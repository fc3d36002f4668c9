/*
 * The auditor's judgement (include/shardfs/audit.h): a faithful reading of
 * the plan passes; every way of departing from it is a finding with its
 * message; reports round-trip into the same verdict.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "shardfs/audit.h"

static struct sfs_plan *plan_of(const struct sfs_index *idx, const char *opts)
{
	struct sfs_error err = { 0 };
	struct sfs_options o;
	struct sfs_plan *p = NULL;

	sfs_options_init(&o);
	assert_int_equal(sfs_options_parse(&o, opts, &err), 0);
	assert_int_equal(sfs_plan_build(idx, &o.plan, &p, &err), 0);
	sfs_options_clear(&o);
	return p;
}

/* The findings of a verdict, one per line, kind first. */
static char *findings(const struct sfs_verdict *v)
{
	static char out[8192];
	size_t i, at = 0;

	out[0] = '\0';
	for (i = 0; i < v->nfindings && at < sizeof(out); i++)
		at += (size_t)snprintf(out + at, sizeof(out) - at, "%s: %s\n",
				       sfs_finding_name(v->findings[i].kind),
				       v->findings[i].msg);
	return out;
}

static char *judge(const struct sfs_audit *a, const struct sfs_index *idx,
		   struct sfs_verdict *v)
{
	struct sfs_error err = { 0 };

	memset(v, 0, sizeof(*v));
	assert_int_equal(sfs_audit_judge(a, idx, 50, v, &err), 0);
	return findings(v);
}

static void test_audit_plan_passes(void **state)
{
	const uint64_t counts[] = { 7, 13, 5, 22 };
	struct sfs_index *idx = mkindex(counts, 4, NULL);
	struct sfs_plan *p = plan_of(idx, "world=2,workers=2,batch=2,seed=4");
	struct sfs_audit a = { 0 };
	struct sfs_verdict v;

	(void)state;
	assert_int_equal(sfs_audit_from_plan(&a, p, "plan"), 0);
	assert_string_equal(judge(&a, idx, &v), "");
	assert_int_equal(v.per_reader, 12);
	assert_int_equal(v.padding, 1);
	assert_int_equal(v.readers_planned, 4);
	assert_int_equal(v.readers_seen, 4);
	sfs_verdict_clear(&v);
	sfs_audit_clear(&a);
	sfs_plan_free(p);
	sfs_index_free(idx);
}

static void test_audit_findings(void **state)
{
	const uint64_t counts[] = { 4, 4, 4 };
	struct sfs_index *idx = mkindex(counts, 3, NULL);
	struct sfs_plan *p = plan_of(idx, "world=2,shuffle=none");
	struct sfs_audit a = { 0 };
	struct sfs_verdict v;
	const struct sfs_audit_sample *s0;
	struct sfs_audit_sample *s1;

	(void)state;
	assert_int_equal(sfs_audit_from_plan(&a, p, "plan"), 0);
	/* reader 1 reads reader 0's first sample instead of its own */
	s0 = &a.readers[0].samples[0];
	s1 = &a.readers[1].samples[0];
	*s1 = *s0;
	assert_string_equal(
		judge(&a, idx, &v),
		"bytes: rank 1 worker 0 (plan), file 0, sample 0: read s0000.tar:0, the plan says s0001.tar:2\n"
		"overlap: s0000.tar:0 is read 2 times (rank 0 worker 0 on plan, rank 1 worker 0 on plan), the plan reads it 1 time\n"
		"missing: s0001.tar:2 is read 0 times, the plan reads it 1 (rank 1 worker 0 should)\n");
	assert_int_equal(v.kinds[SFS_FIND_OVERLAP], 1);
	sfs_verdict_clear(&v);
	/* bytes that are no source sample */
	s1->shard = SFS_AUDIT_UNKNOWN;
	assert_string_equal(
		judge(&a, idx, &v),
		"bytes: rank 1 worker 0 (plan), file 0, sample 0: read bytes that match no source sample, the plan says s0001.tar:2\n"
		"missing: s0001.tar:2 is read 0 times, the plan reads it 1 (rank 1 worker 0 should)\n");
	sfs_verdict_clear(&v);
	/* a reader that read one sample fewer */
	a.readers[1].nsamples--;
	a.readers[1].files[a.readers[1].nfiles - 1].count--;
	assert_string_equal(
		judge(&a, idx, &v),
		"count: rank 1 worker 0 (plan) read 5 samples, the plan gives every reader 6\n"
		"bytes: rank 1 worker 0 (plan), file 0, sample 0: read bytes that match no source sample, the plan says s0001.tar:2\n"
		"missing: s0001.tar:2 is read 0 times, the plan reads it 1 (rank 1 worker 0 should)\n"
		"missing: s0002.tar:3 is read 0 times, the plan reads it 1 (rank 1 worker 0 should)\n");
	sfs_verdict_clear(&v);
	sfs_audit_clear(&a);
	sfs_plan_free(p);
	sfs_index_free(idx);
}

static void test_audit_replicas(void **state)
{
	const uint64_t counts[] = { 7, 13, 5, 22 };
	struct sfs_index *idx = mkindex(counts, 4, NULL);
	struct sfs_plan *p =
		plan_of(idx, "world=4,workers=2,replicas=2,shuffle=none");
	struct sfs_audit a = { 0 };
	struct sfs_verdict v;
	const char *got, *want;
	size_t i;

	(void)state;
	assert_int_equal(sfs_audit_from_plan(&a, p, "plan"), 0);
	/* every rank and worker reads, both replicas of each group */
	assert_int_equal(a.nreaders, 8);
	assert_string_equal(judge(&a, idx, &v), "");
	assert_int_equal(v.readers_planned, 8);
	assert_int_equal(v.per_reader, 12);
	sfs_verdict_clear(&v);
	/* rank 1 (rank 0's replica) reads what rank 2 reads */
	for (i = 0; i < a.readers[2].nsamples; i++)
		a.readers[2].samples[i] = a.readers[4].samples[i];
	got = judge(&a, idx, &v);
	/* its one reader's bytes, and each of its 12 samples: read by three
	 * ranks where the plan says two, and one short of two in the share
	 * it should have read */
	assert_int_equal(v.kinds[SFS_FIND_BYTES], 1);
	assert_int_equal(v.kinds[SFS_FIND_OVERLAP], 12);
	assert_int_equal(v.kinds[SFS_FIND_MISSING], 12);
	assert_int_equal(v.nfindings, 25);
	assert_non_null(strstr(
		got,
		"\noverlap: s0002.tar:4 is read 3 times (rank 1 worker 0 on plan, rank 2 worker 0 on plan), the plan reads it 2 times\n"));
	want = "bytes: rank 1 worker 0 (plan), file 0, sample 0: read s0002.tar:4, the plan says s0000.tar:0\n"
	       "missing: s0000.tar:0 is read 3 times, the plan reads it 4 (rank 2 worker 1 should)\n"
	       "missing: s0000.tar:1 is read 1 time, the plan reads it 2 (rank 0 worker 0 should)\n";
	assert_memory_equal(got, want, strlen(want));
	sfs_verdict_clear(&v);
	sfs_audit_clear(&a);
	sfs_plan_free(p);
	sfs_index_free(idx);
}

/* A reader that reads its planned samples in another order: one finding,
 * in the words a followed window's has too (sfs_audit_judge_reading). */
static void test_audit_order(void **state)
{
	const uint64_t counts[] = { 4, 4, 4 };
	struct sfs_index *idx = mkindex(counts, 3, NULL);
	struct sfs_plan *p = plan_of(idx, "world=2,shuffle=none");
	struct sfs_audit a = { 0 };
	struct sfs_audit_sample t;
	struct sfs_verdict v;

	(void)state;
	assert_int_equal(sfs_audit_from_plan(&a, p, "plan"), 0);
	t = a.readers[1].samples[1];
	a.readers[1].samples[1] = a.readers[1].samples[2];
	a.readers[1].samples[2] = t;
	assert_string_equal(
		judge(&a, idx, &v),
		"order: rank 1 worker 0 (plan), file 0: the plan's samples in another order: sample 1 is s0002.tar:0, the plan says s0001.tar:3\n");
	sfs_verdict_clear(&v);
	sfs_audit_clear(&a);
	sfs_plan_free(p);
	sfs_index_free(idx);
}

/* sfs_audit_judge_reading: a finding for the first sample that is not the
 * plan's, or (every) for each of them and those past the plan's. */
static void test_audit_judge_reading(void **state)
{
	const struct sfs_audit_sample want[] = { { 0, 0 }, { 0, 1 }, { 1, 0 } };
	const struct sfs_audit_sample got[] = {
		{ 0, 0 }, { SFS_AUDIT_UNKNOWN, 0 }, { 1, 1 }, { 1, 2 }
	};
	const uint64_t counts[] = { 2, 3 };
	struct sfs_index *idx = mkindex(counts, 2, NULL);
	struct sfs_audit_file files[] = { { (char *)"f0", 0, 2 },
					  { (char *)"f1", 2, 2 } };
	struct sfs_audit_reading rd = { .prefix = "window 7: ",
					.rank = 1,
					.worker = 2,
					.mount = "m",
					.idx = idx,
					.unknown = "nothing",
					.files = files,
					.nfiles = 2,
					.want = want,
					.nwant = 3,
					.got = got,
					.ngot = 4 };
	struct sfs_verdict v = { 0 };

	(void)state;
	assert_int_equal(sfs_audit_judge_reading(&rd, 50, &v), 0);
	assert_string_equal(
		findings(&v),
		"count: window 7: rank 1 worker 2 (m) read 4 samples, the plan gives every reader 3\n"
		"bytes: window 7: rank 1 worker 2 (m), f0, sample 1: read nothing, the plan says s0000.tar:1\n");
	sfs_verdict_clear(&v);
	rd.every = true;
	assert_int_equal(sfs_audit_judge_reading(&rd, 50, &v), 0);
	assert_string_equal(
		findings(&v),
		"count: window 7: rank 1 worker 2 (m) read 4 samples, the plan gives every reader 3\n"
		"bytes: window 7: rank 1 worker 2 (m), f0, sample 1: read nothing, the plan says s0000.tar:1\n"
		"bytes: window 7: rank 1 worker 2 (m), f1, sample 2: read s0001.tar:1, the plan says s0001.tar:0\n"
		"bytes: window 7: rank 1 worker 2 (m), f1, sample 3: read s0001.tar:2, the plan says no sample\n");
	sfs_verdict_clear(&v);
	/* the plan's samples and one more: only with every */
	rd.got = want;
	rd.ngot = 3;
	rd.nwant = 2;
	assert_int_equal(sfs_audit_judge_reading(&rd, 50, &v), 0);
	assert_string_equal(
		findings(&v),
		"count: window 7: rank 1 worker 2 (m) read 3 samples, the plan gives every reader 2\n"
		"bytes: window 7: rank 1 worker 2 (m), f1, sample 2: read s0001.tar:0, the plan says no sample\n");
	sfs_verdict_clear(&v);
	rd.every = false;
	assert_int_equal(sfs_audit_judge_reading(&rd, 50, &v), 0);
	assert_string_equal(
		findings(&v),
		"count: window 7: rank 1 worker 2 (m) read 3 samples, the plan gives every reader 2\n");
	sfs_verdict_clear(&v);
	sfs_index_free(idx);
}

/* The step both judges share (sfs_observe_follow's and the plan's): where
 * a reader's samples first depart from its plan's, and how. */
static void test_audit_compare(void **state)
{
	const struct sfs_audit_sample want[] = { { 0, 0 }, { 0, 1 }, { 1, 0 } };
	const struct sfs_audit_sample swapped[] = { { 0, 0 },
						    { 1, 0 },
						    { 0, 1 } };
	const struct sfs_audit_sample other[] = { { 0, 0 },
						  { 0, 1 },
						  { 0, 1 } };
	const struct sfs_audit_sample unknown[] = { { SFS_AUDIT_UNKNOWN, 0 } };
	size_t at = 99;

	(void)state;
	assert_int_equal(sfs_audit_compare(want, 3, want, 3, &at),
			 SFS_AUDIT_AS_PLANNED);
	/* a count that differs is the caller's: the samples both hold are */
	assert_int_equal(sfs_audit_compare(want, 3, want, 2, &at),
			 SFS_AUDIT_AS_PLANNED);
	assert_int_equal(sfs_audit_compare(want, 2, want, 3, &at),
			 SFS_AUDIT_AS_PLANNED);
	assert_int_equal(at, 99);
	assert_int_equal(sfs_audit_compare(want, 3, swapped, 3, &at),
			 SFS_AUDIT_REORDERED);
	assert_int_equal(at, 1);
	assert_int_equal(sfs_audit_compare(want, 3, other, 3, &at),
			 SFS_AUDIT_OTHER);
	assert_int_equal(at, 2);
	/* the plan's samples in another order, but not all of them */
	assert_int_equal(sfs_audit_compare(want, 3, swapped, 2, &at),
			 SFS_AUDIT_OTHER);
	assert_int_equal(at, 1);
	assert_int_equal(sfs_audit_compare(want, 3, unknown, 1, &at),
			 SFS_AUDIT_OTHER);
	assert_int_equal(at, 0);
}

static void test_audit_report_round_trip(void **state)
{
	const uint64_t counts[] = { 6, 6, 4 };
	const bool opaque[] = { false, false, true };
	struct sfs_index *idx = mkindex(counts, 3, opaque), *back = NULL;
	struct sfs_plan *p = plan_of(idx, "world=2,workers=2,shuffle=none");
	struct sfs_audit a = { 0 }, b = { 0 };
	struct sfs_error err = { 0 };
	struct sfs_verdict v;
	char *dir = tmpdir_new(), *path, *text, *bad, want[4096];

	(void)state;
	idx->shards[2].format = sfs_format_by_name("opaque");
	assert_int_equal(sfs_audit_from_plan(&a, p, "node-a"), 0);
	text = sfs_audit_write(&a, idx);
	path = write_at(dir, "r.json", text, strlen(text));
	assert_int_equal(sfs_audit_read(&b, path, &back, &err), 0);
	/* the index a report rebuilds keeps every shard's format */
	assert_int_equal(back->nshards, 3);
	assert_string_equal(back->shards[0].format->name, "tar");
	assert_string_equal(back->shards[2].format->name, "opaque");
	assert_false(sfs_shard_sliceable(&back->shards[2]));
	assert_int_equal(b.nreaders, 4);
	assert_memory_equal(&b.mounts[0].opts, &p->opts, sizeof(p->opts));
	assert_string_equal(judge(&b, back, &v), "");
	sfs_verdict_clear(&v);

	/* a second report of the same shards merges; another one is refused */
	assert_int_equal(sfs_audit_read(&b, path, &back, &err), 0);
	assert_int_equal(b.nreaders, 8);
	bad = strstr(text, "\"opaque\"");
	memcpy(bad, "\"parqet\"", 8);
	free(path);
	path = write_at(dir, "bad.json", text, strlen(text));
	sfs_audit_clear(&b);
	sfs_index_free(back);
	back = NULL;
	assert_int_equal(sfs_audit_read(&b, path, &back, &err), -EINVAL);
	snprintf(
		want, sizeof(want),
		"%s: a bad shard list; write reports with shardfs-check view --emit",
		path);
	assert_string_equal(err.msg, want);
	free(path);
	free(text);
	sfs_audit_clear(&a);
	sfs_audit_clear(&b);
	sfs_plan_free(p);
	sfs_index_free(idx);
	tmpdir_remove(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_audit_plan_passes),
		cmocka_unit_test(test_audit_findings),
		cmocka_unit_test(test_audit_replicas),
		cmocka_unit_test(test_audit_order),
		cmocka_unit_test(test_audit_judge_reading),
		cmocka_unit_test(test_audit_compare),
		cmocka_unit_test(test_audit_report_round_trip),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
