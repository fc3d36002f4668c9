/*
 * A source that grows (include/shardfs/follow.h): the log a restart reads
 * back, the window option, which windows exist, and a stream scanned from
 * a directory and laid out in windows, byte for byte, with the extended
 * attributes of its files.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"
#include "shardfs/crc32c.h"
#include "shardfs/follow.h"
#include "shardfs/options.h"
#include "shardfs/view.h"
#include "shardfs/window.h"

/* A TFRecord file of one record holding data. */
static void tfrecord(const char *dir, const char *name, const char *data)
{
	unsigned char b[64];
	uint64_t n = strlen(data);
	uint32_t c;

	memcpy(b, &n, 8); /* little-endian, as the tests run */
	c = sfs_crc32c_masked(b, 8);
	memcpy(b + 8, &c, 4);
	memcpy(b + 12, data, n);
	c = sfs_crc32c_masked(data, n);
	memcpy(b + 12 + n, &c, 4);
	free(write_at(dir, name, b, 16 + n));
}

/* format='s values after "auto" are the drivers the table says can be
 * followed, each once, and follow=1's messages list those. */
static void test_follow_formats(void **state)
{
	const struct sfs_format_ops *ops;
	char names[64];
	size_t i, n = 0;

	(void)state;
	assert_string_equal(sfs_follow_formats[0], "auto");
	for (i = 1; sfs_follow_formats[i]; i++) {
		ops = sfs_format_by_name(sfs_follow_formats[i]);
		assert_non_null(ops);
		assert_true(ops->concatenates);
	}
	while (sfs_format_concatenating(n))
		n++;
	assert_int_equal(n, i - 1);
	assert_string_equal(sfs_format_concatenating_names(0, " and ", names,
							   sizeof(names)),
			    "tar, jsonl and tfrecord");
	assert_string_equal(sfs_format_concatenating_names(1, ", ", names,
							   sizeof(names)),
			    "jsonl, tfrecord");
}

static void test_log_parse(void **state)
{
	static const char log[] = "shardfs-follow 1\n"
				  "8 96 1 b.jsonl\n"
				  "5 60 2 a b.jsonl\n"
				  "8 96 1 b.jsonl\n"
				  "3 3 3 c.js";
	struct sfs_shard *s;
	struct sfs_error err = { 0 };
	size_t n;

	(void)state;
	assert_int_equal(
		sfs_follow_log_parse(log, strlen(log), "l", &s, &n, &err), 0);
	assert_int_equal(n, 2); /* b merged, c torn */
	assert_string_equal(s[0].path, "a b.jsonl");
	assert_int_equal(s[0].nsamples, 5);
	assert_int_equal(s[0].size, 60);
	assert_int_equal(s[0].mtime_ns, 2);
	assert_string_equal(s[1].path, "b.jsonl");
	sfs_follow_shards_free(s, n);
}

/* A time before 1970 is a negative number of nanoseconds, both ways. */
static void test_log_parse_signed(void **state)
{
	static const char log[] = "shardfs-follow 1\n"
				  "1 2 -315619200000000000 a.jsonl\n"
				  "1 2 -9223372036854775808 b.jsonl\n"
				  "1 2 9223372036854775807 c.jsonl\n"
				  "1 2 0 d.jsonl\n";
	struct sfs_shard *s;
	struct sfs_error err = { 0 };
	size_t n;

	(void)state;
	assert_int_equal(
		sfs_follow_log_parse(log, strlen(log), "l", &s, &n, &err), 0);
	assert_int_equal(n, 4);
	assert_true(s[0].mtime_ns == -315619200000000000LL);
	assert_true(s[1].mtime_ns == INT64_MIN);
	assert_true(s[2].mtime_ns == INT64_MAX);
	assert_true(s[3].mtime_ns == 0);
	sfs_follow_shards_free(s, n);
}

static void expect_refused(const char *log, const char *msg)
{
	struct sfs_shard *s = (void *)1;
	struct sfs_error err = { 0 };
	size_t n = 1;

	assert_int_equal(sfs_follow_log_parse(log, strlen(log), "d/follow.log",
					      &s, &n, &err),
			 -EINVAL);
	assert_null(s);
	assert_int_equal(n, 0);
	assert_string_equal(err.msg, msg);
}

#define SIGNED_BAD \
	"d/follow.log: line 2: not \"<samples> <size> <mtime_ns> <name>\": the log is damaged; removing it is safe only if no consumed shard was deleted from the source: else restore the deleted shards, or remove it and restart with start= counted from the first shard still there (docs/follow.md)"

static void test_log_refused(void **state)
{
	(void)state;
	expect_refused(
		"{\"shards\": []}\n",
		"d/follow.log: line 1: not a shardfs follow log (it starts \"shardfs-follow 1\"): move it away if it is not shardfs's");
	expect_refused(
		"shardfs-follow 1\n1 2 3 a.jsonl\n1 2 x b.jsonl\n",
		"d/follow.log: line 3: not \"<samples> <size> <mtime_ns> <name>\": the log is damaged; removing it is safe only if no consumed shard was deleted from the source: else restore the deleted shards, or remove it and restart with start= counted from the first shard still there (docs/follow.md)");
	expect_refused(
		"shardfs-follow 1\n18446744073709551616 2 3 a.jsonl\n",
		"d/follow.log: line 2: not \"<samples> <size> <mtime_ns> <name>\": the log is damaged; removing it is safe only if no consumed shard was deleted from the source: else restore the deleted shards, or remove it and restart with start= counted from the first shard still there (docs/follow.md)");
	expect_refused(
		"shardfs-follow 1\n1 2 3 .hidden\n",
		"d/follow.log: line 2: not \"<samples> <size> <mtime_ns> <name>\": the log is damaged; removing it is safe only if no consumed shard was deleted from the source: else restore the deleted shards, or remove it and restart with start= counted from the first shard still there (docs/follow.md)");
	expect_refused(
		"shardfs-follow 1\n1 2 3 a/b.jsonl\n",
		"d/follow.log: line 2: not \"<samples> <size> <mtime_ns> <name>\": the log is damaged; removing it is safe only if no consumed shard was deleted from the source: else restore the deleted shards, or remove it and restart with start= counted from the first shard still there (docs/follow.md)");
	/* a time is signed, within int64_t, written as PRId64 writes it */
	expect_refused("shardfs-follow 1\n1 2 -0 a.jsonl\n", SIGNED_BAD);
	expect_refused("shardfs-follow 1\n1 2 --1 a.jsonl\n", SIGNED_BAD);
	expect_refused("shardfs-follow 1\n1 2 - a.jsonl\n", SIGNED_BAD);
	expect_refused("shardfs-follow 1\n1 -2 3 a.jsonl\n", SIGNED_BAD);
	expect_refused("shardfs-follow 1\n1 2 -9223372036854775809 a.jsonl\n",
		       SIGNED_BAD);
	expect_refused("shardfs-follow 1\n1 2 9223372036854775808 a.jsonl\n",
		       SIGNED_BAD);
	expect_refused(
		"shardfs-follow 1\n1 2 3 a.jsonl\n1 2 4 a.jsonl\n",
		"d/follow.log: shard a.jsonl is logged twice, with different samples, size or time: it was replaced while followed; the stream cannot be resumed exactly (docs/follow.md)");
}

static void test_window_option(void **state)
{
	struct sfs_options o;
	struct sfs_error err = { 0 };

	(void)state;
	sfs_options_init(&o);
	assert_int_equal(
		sfs_options_parse(&o, "world=4,workers=2,batch=3,replicas=2",
				  &err),
		0);
	assert_int_equal(sfs_follow_check_window(12, &o.plan, &err), 0);
	assert_int_equal(sfs_follow_check_window(48, &o.plan, &err), 0);
	assert_int_equal(sfs_follow_check_window(50, &o.plan, &err), -EINVAL);
	assert_string_equal(
		err.msg,
		"window=50 is not a multiple of world/replicas x workers x batch = 12: use window=48 or window=60");
	assert_int_equal(sfs_follow_check_window(5, &o.plan, &err), -EINVAL);
	assert_string_equal(
		err.msg,
		"window=5 is not a multiple of world/replicas x workers x batch = 12: use window=12, or a multiple of it");
	sfs_options_clear(&o);
}

static void test_windows(void **state)
{
	uint64_t first, full;
	bool last;

	(void)state;
	sfs_follow_windows(0, 8, 0, false, &first, &full, &last);
	assert_true(first == 0 && full == 0 && !last);
	sfs_follow_windows(23, 8, 0, false, &first, &full, &last);
	assert_true(first == 0 && full == 2 && !last);
	sfs_follow_windows(23, 8, 0, true, &first, &full, &last);
	assert_true(first == 0 && full == 2 && last);
	sfs_follow_windows(24, 8, 0, true, &first, &full, &last);
	assert_true(first == 0 && full == 3 && !last);
	/* a restart at sample 10: window 1 partly skipped */
	sfs_follow_windows(23, 8, 10, true, &first, &full, &last);
	assert_true(first == 1 && full == 1 && last);
	/* a restart past everything */
	sfs_follow_windows(23, 8, 23, true, &first, &full, &last);
	assert_true(first == 2 && full == 0 && !last);
}

struct notes {
	char msg[4][SFS_ERROR_MAX];
	int n;
};

static void note(void *arg, const char *msg)
{
	struct notes *n = arg;

	if (n->n < 4)
		snprintf(n->msg[n->n++], SFS_ERROR_MAX, "%s", msg);
}

/* The bytes of reader r of window w, with its trailer. */
static char *window_bytes(const struct sfs_follow *f,
			  const struct sfs_window *w, size_t r)
{
	const struct sfs_window_reader *wr = &w->readers[r];
	const struct sfs_extent *x = wr->bytes.extents;
	char *out = calloc(1, wr->bytes.size + w->trailer_len + 1);
	size_t i;

	for (i = 0; i < wr->bytes.nextents; i++) {
		const struct sfs_extent *e = &x[i];

		assert_int_equal(e->pos, i ? x[i - 1].pos + x[i - 1].len : 0);
		if (e->mem) {
			memcpy(out + e->pos, e->mem, e->len);
		} else {
			char path[512];
			struct buf b;

			snprintf(path, sizeof(path), "%s/%s", f->source,
				 f->idx->shards[e->file].path);
			b = read_all(path);
			memcpy(out + e->pos, b.p + e->src, e->len);
			buf_free(&b);
		}
	}
	return out;
}

static void test_stream(void **state)
{
	char *dir = tmpdir_new(), *p, idx[512];
	struct sfs_follow *f = NULL;
	struct sfs_window *w = NULL;
	struct sfs_error err = { 0 };
	struct notes notes = { 0 };
	struct sfs_options o;
	const size_t readers[] = { 0, 1 };
	size_t added, sh;
	char *bytes;

	(void)state;
	free(write_at(dir, "c1.jsonl", "a\nb\nc", 5));
	free(write_at(dir, "c2.jsonl.tmp", "half", 4));
	free(write_at(dir, ".c3.jsonl", "x\n", 2));
	snprintf(idx, sizeof(idx), "%s/.shardfs", dir);
	assert_int_equal(sfs_follow_open(dir, NULL, true, NULL, note, &notes,
					 &f, &err),
			 0);
	assert_int_equal(sfs_follow_scan(f, &added, &err), 0);
	assert_int_equal(added, 1);
	assert_int_equal(f->idx->nsamples, 3);
	assert_false(f->ended);
	assert_string_equal(f->format->name, "jsonl");
	/* out of order: refused once, and noted once, each of them */
	free(write_at(dir, "c0.jsonl", "z\n", 2));
	free(write_at(dir, "c00.jsonl", "z\n", 2));
	free(write_at(dir, "c4.jsonl", "d\ne\nf\n", 6));
	assert_int_equal(sfs_follow_scan(f, &added, &err), 0);
	assert_int_equal(added, 1);
	assert_int_equal(sfs_follow_scan(f, &added, &err), 0);
	assert_int_equal(added, 0);
	assert_int_equal(notes.n, 2);
	assert_non_null(strstr(notes.msg[1], "/c00.jsonl: refused: "));
	p = strstr(notes.msg[0], "/c0.jsonl: refused: its name sorts before");
	assert_non_null(p);
	assert_string_equal(
		p,
		"/c0.jsonl: refused: its name sorts before c1.jsonl, already in the stream (serving it would change what was served); name shards in the order they are written");
	/* windows of 4 for 2 readers, in stream order */
	sfs_options_init(&o);
	assert_int_equal(sfs_options_parse(&o, "workers=2,shuffle=none", &err),
			 0);
	assert_int_equal(sfs_window_build(f, &o.plan, 4, 0, false, readers, 2,
					  &w, &err),
			 0);
	assert_int_equal(w->per_reader, 2);
	assert_int_equal(w->first_shard, 0);
	assert_int_equal(w->end_shard, 2);
	bytes = window_bytes(f, w, 0);
	assert_string_equal(bytes, "a\nb\n");
	free(bytes);
	bytes = window_bytes(f, w, 1);
	assert_string_equal(bytes, "c\nd\n"); /* c's missing '\n' added */
	free(bytes);
	assert_int_equal(w->readers[1].nruns, 2);
	/* as the stream numbers them: shard 0's sample 2, shard 1's 0 */
	assert_true(sfs_window_run_shard(w, f->idx->shards,
					 &w->readers[1].runs[0]) == 0 &&
		    w->readers[1].runs[0].first ==
			    f->idx->shards[0].first_sample + 2 &&
		    w->readers[1].runs[0].count == 1);
	assert_true(sfs_window_run_shard(w, f->idx->shards,
					 &w->readers[1].runs[1]) == 1 &&
		    w->readers[1].runs[1].first ==
			    f->idx->shards[1].first_sample + 0 &&
		    w->readers[1].runs[1].count == 1);
	sfs_window_free(w);
	/* not complete: window 1 needs samples 4..7 */
	assert_int_equal(sfs_window_build(f, &o.plan, 4, 1, false, readers, 2,
					  &w, &err),
			 -EINVAL);
	/* the end: the last 2 samples padded to 1 each */
	free(write_at(dir, ".shardfs-end", "", 0));
	assert_int_equal(sfs_follow_scan(f, &added, &err), 0);
	assert_true(f->ended);
	assert_int_equal(sfs_window_build(f, &o.plan, 4, 1, true, readers, 2,
					  &w, &err),
			 0);
	bytes = window_bytes(f, w, 0);
	assert_string_equal(bytes, "e\n");
	free(bytes);
	sh = sfs_window_run_shard(w, f->idx->shards, &w->readers[0].runs[0]);
	assert_true(w->readers[0].nruns == 1 &&
		    w->readers[0].runs[0].first ==
			    f->idx->shards[sh].first_sample + 1);
	bytes = window_bytes(f, w, 1);
	assert_string_equal(bytes, "f\n");
	free(bytes);
	sfs_window_free(w);
	sfs_follow_free(f);
	/* a restart reads the log back, the shards' counts in order */
	assert_int_equal(sfs_follow_open(dir, NULL, true, NULL, note, &notes,
					 &f, &err),
			 0);
	assert_int_equal(f->idx->nshards, 2);
	assert_int_equal(f->idx->nsamples, 6);
	assert_null(f->held[1].bounds);
	assert_int_equal(sfs_follow_bounds(f, 1, 0, &err), 0);
	assert_int_equal(f->held[1].bounds[3], 6);
	sfs_follow_free(f);
	sfs_options_clear(&o);
	tmpdir_remove(dir);
}

/* A shard that is not ready holds back those after it; a shard of another
 * format is refused without holding anything back. */
static void test_held_back(void **state)
{
	char *dir = tmpdir_new();
	struct sfs_follow *f = NULL;
	struct sfs_error err = { 0 };
	struct notes notes = { 0 };
	size_t added;
	char *p;

	(void)state;
	/* a TFRecord whose record runs past the end: malformed */
	free(write_at(dir, "a.tfrecord", "\x10\0\0\0\0\0\0\0\0\0\0\0", 12));
	tfrecord(dir, "b.tfrecord", "b");
	assert_int_equal(sfs_follow_open(dir, NULL, false,
					 sfs_format_by_name("tfrecord"), note,
					 &notes, &f, &err),
			 0);
	assert_int_equal(sfs_follow_scan(f, &added, &err), 0);
	assert_int_equal(added, 0);
	assert_int_equal(notes.n, 1);
	p = strstr(notes.msg[0], "/a.tfrecord: waiting: ");
	assert_non_null(p);
	assert_non_null(strstr(p, "(tried again when it changes)"));
	/* the same file again: not noted twice */
	assert_int_equal(sfs_follow_scan(f, &added, &err), 0);
	assert_int_equal(notes.n, 1);
	/* once whole, both enter in order, and a .jsonl is refused */
	tfrecord(dir, "a.tfrecord", "a");
	free(write_at(dir, "c.jsonl", "x\n", 2));
	assert_int_equal(sfs_follow_scan(f, &added, &err), 0);
	assert_int_equal(added, 2);
	assert_int_equal(notes.n, 2);
	p = strstr(notes.msg[1], "/c.jsonl: refused: ");
	assert_non_null(p);
	assert_string_equal(
		p,
		"/c.jsonl: refused: a jsonl shard in a stream of tfrecord shards");
	/* ... and holds nothing back; an empty shard holds no sample */
	free(write_at(dir, "d.tfrecord", "", 0));
	assert_int_equal(sfs_follow_scan(f, &added, &err), 0);
	assert_int_equal(added, 1);
	assert_string_equal(f->idx->shards[2].path, "d.tfrecord");
	assert_int_equal(f->idx->shards[2].nsamples, 0);
	assert_int_equal(f->idx->nsamples, 2);
	sfs_follow_free(f);
	tmpdir_remove(dir);
}

/* Set name's modification time in dir to sec seconds from 1970, nsec. */
static void set_mtime(const char *dir, const char *name, time_t sec, long nsec)
{
	char path[512];
	struct timespec ts[2] = { { sec, nsec }, { sec, nsec } };

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0);
}

/* A chunk dated 1960 is logged as a negative time, and a restart reads
 * that line back; one dated 2300 (beyond the log's int64_t nanoseconds)
 * waits with a message. */
static void test_old_mtime_restart(void **state)
{
	char *dir = tmpdir_new();
	struct sfs_follow *f = NULL;
	struct sfs_error err = { 0 };
	struct notes notes = { 0 };
	size_t added;
	char *p;

	(void)state;
	free(write_at(dir, "a.jsonl", "x\ny\n", 4));
	set_mtime(dir, "a.jsonl", -315619200, 5); /* 1960-01-01 */
	assert_int_equal(sfs_follow_open(dir, NULL, true, NULL, note, &notes,
					 &f, &err),
			 0);
	assert_int_equal(sfs_follow_scan(f, &added, &err), 0);
	assert_int_equal(added, 1);
	sfs_follow_free(f);
	assert_int_equal(sfs_follow_open(dir, NULL, true, NULL, note, &notes,
					 &f, &err),
			 0);
	assert_int_equal(f->idx->nshards, 1);
	assert_true(f->idx->shards[0].mtime_ns == -315619200000000000LL + 5);
	assert_int_equal(sfs_follow_bounds(f, 0, 0, &err), 0);
	assert_int_equal(f->idx->nsamples, 2);
	/* 2300: refused, noted once, holds the stream back */
	free(write_at(dir, "b.jsonl", "z\n", 2));
	set_mtime(dir, "b.jsonl", 10413792000LL, 0);
	assert_int_equal(sfs_follow_scan(f, &added, &err), 0);
	assert_int_equal(added, 0);
	assert_int_equal(notes.n, 1);
	p = strstr(notes.msg[0], "/b.jsonl: waiting: ");
	assert_non_null(p);
	assert_string_equal(
		p,
		"/b.jsonl: waiting: b.jsonl: its modification time (10413792000 s from 1970) is out of what the follow log holds (nanoseconds from 1970 in 64 bits: years 1678 to 2261): touch it (tried again when it changes)");
	sfs_follow_free(f);
	tmpdir_remove(dir);
}

/* The names of f's shards, one line each. */
static void expect_shards(const struct sfs_follow *f, const char *names)
{
	char got[512] = "";
	size_t i;

	for (i = 0; i < f->idx->nshards; i++)
		snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s\n",
			 f->idx->shards[i].path);
	assert_string_equal(got, names);
}

/* A torn last line of the log (an append cut short) is left out at the
 * next load and cut off before the next append: the line after it names
 * its shard, not a phantom glued of the two. */
static void test_log_torn_tail(void **state)
{
	char *dir = tmpdir_new(), log[512];
	struct sfs_follow *f = NULL;
	struct sfs_error err = { 0 };
	struct notes notes = { 0 };
	struct buf b;
	size_t added;
	char *p;

	(void)state;
	free(write_at(dir, "a.jsonl", "1\n2\n", 4));
	free(write_at(dir, "b.jsonl", "3\n4\n", 4));
	assert_int_equal(sfs_follow_open(dir, NULL, true, NULL, note, &notes,
					 &f, &err),
			 0);
	assert_int_equal(sfs_follow_scan(f, &added, &err), 0);
	assert_int_equal(added, 2);
	sfs_follow_free(f);
	/* c's line cut short after "2 4 17" */
	free(write_at(dir, "c.jsonl", "5\n6\n", 4));
	snprintf(log, sizeof(log), "%s/.shardfs/follow.log", dir);
	b = read_all(log);
	p = malloc(b.len + 8);
	memcpy(p, b.p, b.len);
	memcpy(p + b.len, "2 4 17", 6);
	free(write_at(dir, ".shardfs/follow.log", p, b.len + 6));
	free(p);
	buf_free(&b);
	/* the restart: a, b; c and d read again from the source */
	free(write_at(dir, "d.jsonl", "7\n8\n", 4));
	assert_int_equal(sfs_follow_open(dir, NULL, true, NULL, note, &notes,
					 &f, &err),
			 0);
	assert_int_equal(notes.n, 1);
	p = strstr(notes.msg[0], "/.shardfs/follow.log: its last line");
	assert_non_null(p);
	assert_string_equal(
		p,
		"/.shardfs/follow.log: its last line is cut short (an append that did not finish: a full disk, a crash): left out, its shard is read again from the source; the cut line is removed before the next append");
	expect_shards(f, "a.jsonl\nb.jsonl\n");
	assert_int_equal(sfs_follow_scan(f, &added, &err), 0);
	assert_int_equal(added, 2);
	sfs_follow_free(f);
	/* the next restart: exactly a b c d, 2 samples each, in order */
	assert_int_equal(sfs_follow_open(dir, NULL, false, NULL, note, &notes,
					 &f, &err),
			 0);
	assert_int_equal(notes.n, 1);
	expect_shards(f, "a.jsonl\nb.jsonl\nc.jsonl\nd.jsonl\n");
	assert_int_equal(f->idx->nsamples, 8);
	assert_int_equal(f->idx->shards[2].first_sample, 4);
	assert_int_equal(f->idx->shards[2].size, 4);
	sfs_follow_free(f);
	/* a log cut in its first line is an empty one, written again */
	free(write_at(dir, ".shardfs/follow.log", "shardfs-fol", 11));
	assert_int_equal(sfs_follow_open(dir, NULL, true, NULL, note, &notes,
					 &f, &err),
			 0);
	assert_int_equal(f->idx->nshards, 0);
	assert_int_equal(sfs_follow_scan(f, &added, &err), 0);
	assert_int_equal(added, 4);
	sfs_follow_free(f);
	b = read_all(log);
	assert_int_equal(memcmp(b.p, "shardfs-follow 1\n2 4 ", 21), 0);
	buf_free(&b);
	tmpdir_remove(dir);
}

/* Open src as a daemon would (the log kept), scan it: one shard in. */
static void open_noted(const char *src, const char *index, bool write_log,
		       const char *expect)
{
	struct sfs_follow *f = NULL;
	struct sfs_error err = { 0 };
	struct notes notes = { 0 };
	size_t added;
	char *p;

	assert_int_equal(sfs_follow_open(src, index, write_log, NULL, note,
					 &notes, &f, &err),
			 0);
	assert_int_equal(f->log_fd, -1);
	assert_int_equal(sfs_follow_scan(f, &added, &err), 0);
	assert_int_equal(added, 1);
	assert_int_equal(f->idx->nsamples, 2);
	assert_int_equal(notes.n, 1);
	p = strstr(notes.msg[0], "/.shardfs/follow.log: ");
	assert_non_null(p);
	assert_string_equal(p, expect);
	sfs_follow_free(f);
}

#define NOT_KEPT(why)                                            \
	"/.shardfs/follow.log: cannot keep the follow log (" why \
	"): the stream is served, but a restart needs every shard still in the source (give index=DIR on a writable disk)"

/* The log and its directory sit where the producer writes: a symlink
 * planted as either is never followed (the file it names is neither
 * created nor written nor read), a FIFO never blocks; the stream is
 * served without the log, and a line says so. */
static void test_log_symlink(void **state)
{
	char *src = tmpdir_new(), *away = tmpdir_new(), path[512], to[512];
	struct buf b;

	(void)state;
	free(write_at(src, "a.jsonl", "1\n2\n", 4));
	free(write_at(away, "kept", "secret\n", 7));
	/* follow.log a symlink to a file not there, then to one there */
	snprintf(path, sizeof(path), "%s/.shardfs", src);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/.shardfs/follow.log", src);
	snprintf(to, sizeof(to), "%s/made", away);
	assert_int_equal(symlink(to, path), 0);
	open_noted(src, NULL, true,
		   NOT_KEPT("a symlink on its path, not followed"));
	assert_int_equal(access(to, F_OK), -1);
	assert_int_equal(unlink(path), 0);
	snprintf(to, sizeof(to), "%s/kept", away);
	assert_int_equal(symlink(to, path), 0);
	open_noted(src, NULL, true,
		   NOT_KEPT("a symlink on its path, not followed"));
	open_noted(
		src, NULL, false,
		"/.shardfs/follow.log: not read (a symlink on its path, not followed): the stream is the shards in the source now");
	b = read_all(to);
	assert_int_equal(b.len, 7);
	assert_memory_equal(b.p, "secret\n", 7);
	buf_free(&b);
	/* a FIFO */
	assert_int_equal(unlink(path), 0);
	assert_int_equal(mkfifo(path, 0644), 0);
	open_noted(src, NULL, true, NOT_KEPT("not a regular file"));
	assert_int_equal(unlink(path), 0);
	/* .shardfs a symlink to a directory elsewhere */
	snprintf(path, sizeof(path), "%s/.shardfs", src);
	assert_int_equal(rmdir(path), 0);
	assert_int_equal(symlink(away, path), 0);
	open_noted(src, NULL, true,
		   NOT_KEPT("a symlink on its path, not followed"));
	snprintf(to, sizeof(to), "%s/follow.log", away);
	assert_int_equal(access(to, F_OK), -1);
	/* index= a symlink (its last component) */
	open_noted(src, path, true,
		   NOT_KEPT("a symlink on its path, not followed"));
	assert_int_equal(access(to, F_OK), -1);
	tmpdir_remove(away);
	tmpdir_remove(src);
}

/* A tar chunk of samples named key0, key1, ... (one member each), with
 * a global pax header first (at 'g' == 1), between its members (2), or
 * none. */
static void tar_chunk(const char *dir, const char *name, const char *key, int n,
		      int global)
{
	struct buf b = { 0 };
	char member[64];
	int i;

	if (global == 1)
		tar_pax(&b, 'g', "path", "evil");
	for (i = 0; i < n; i++) {
		if (global == 2 && i == 1)
			tar_pax(&b, 'g', "path", "evil");
		snprintf(member, sizeof(member), "%s%d.txt", key, i);
		tar_member(&b, member, '0', "x", 1);
	}
	tar_end(&b);
	free(write_at(dir, name, b.p, b.len));
	buf_free(&b);
}

/* A global pax header in one tar chunk would rename the members of every
 * chunk after it in a window or the stream: such a chunk waits, with a
 * line naming it, the byte and the fix, and holds back those after it. */
static void test_tar_global_header(void **state)
{
	char *dir = tmpdir_new();
	struct sfs_follow *f = NULL;
	struct sfs_error err = { 0 };
	struct notes notes = { 0 };
	size_t added;
	char *p;

	(void)state;
	tar_chunk(dir, "c0.tar", "a", 2, 0);
	tar_chunk(dir, "c1.tar", "b", 2, 1);
	tar_chunk(dir, "c2.tar", "c", 2, 0);
	assert_int_equal(sfs_follow_open(dir, NULL, false, NULL, note, &notes,
					 &f, &err),
			 0);
	assert_int_equal(sfs_follow_scan(f, &added, &err), 0);
	assert_int_equal(added, 1);
	assert_int_equal(notes.n, 1);
	p = strstr(notes.msg[0], "/c1.tar: waiting: ");
	assert_non_null(p);
	assert_string_equal(
		p,
		"/c1.tar: waiting: c1.tar: a global pax header at byte 0 (1024 bytes before its first member): in a followed stream it would apply to the members of every chunk after it (renaming them); write chunks without one (Python's tarfile: no pax_headers=; GNU tar: --format=gnu or ustar) (tried again when it changes)");
	/* rewritten with the header between its members: still waits */
	tar_chunk(dir, "c1.tar", "b", 2, 2);
	assert_int_equal(sfs_follow_scan(f, &added, &err), 0);
	assert_int_equal(added, 0);
	assert_int_equal(notes.n, 2);
	p = strstr(notes.msg[1], "/c1.tar: waiting: ");
	assert_non_null(p);
	assert_string_equal(
		p,
		"/c1.tar: waiting: c1.tar: global pax header at byte 1024, after the first member: it would apply to the members after it wherever a slice puts them (renaming them); put global headers only at the start of the archive, or write none (tried again when it changes)");
	/* without one: in, and c2 after it */
	tar_chunk(dir, "c1.tar", "b", 2, 0);
	assert_int_equal(sfs_follow_scan(f, &added, &err), 0);
	assert_int_equal(added, 2);
	assert_int_equal(f->idx->nsamples, 6);
	sfs_follow_free(f);
	tmpdir_remove(dir);
}

/* A chunk's boundaries cost 8 bytes a sample: a chunk of more samples
 * than the limit waits, logged, before they are all allocated; those of
 * samples whose windows are laid out are released as windows are built,
 * and asked for again they are scanned again. */
static void test_memory_follows_windows(void **state)
{
	char *dir = tmpdir_new(), *bytes, lines[64];
	struct sfs_follow *f = NULL;
	struct sfs_window *w = NULL;
	struct sfs_error err = { 0 };
	struct notes notes = { 0 };
	struct sfs_options o;
	const size_t readers[] = { 0 };
	size_t added, i;
	char *p;

	(void)state;
	for (i = 0; i < 20; i++)
		lines[i] = '\n';
	free(write_at(dir, "c0.jsonl", "a\nb\n", 4));
	free(write_at(dir, "c1.jsonl", lines, 20));
	free(write_at(dir, "c2.jsonl", lines, 6));
	assert_int_equal(sfs_follow_open(dir, NULL, false, NULL, note, &notes,
					 &f, &err),
			 0);
	f->chunk_samples_max = 19;
	assert_int_equal(sfs_follow_scan(f, &added, &err), 0);
	assert_int_equal(added, 1);
	assert_int_equal(notes.n, 1);
	p = strstr(notes.msg[0], "/c1.jsonl: waiting: ");
	assert_non_null(p);
	assert_string_equal(
		p,
		"/c1.jsonl: waiting: c1.jsonl: holds more than 19 samples, the most a followed chunk may (8 bytes of the daemon's memory each until its windows are laid out): write smaller chunks (tried again when it changes)");
	/* at the limit: in */
	f->chunk_samples_max = 20;
	free(write_at(dir, "c1.jsonl", lines, 20));
	assert_int_equal(sfs_follow_scan(f, &added, &err), 0);
	assert_int_equal(added, 2);
	assert_int_equal(f->idx->nsamples, 28);
	/* windows of 4, in order: what is before each is released */
	sfs_options_init(&o);
	assert_int_equal(sfs_options_parse(&o, "shuffle=none", &err), 0);
	assert_int_equal(sfs_window_build(f, &o.plan, 4, 0, false, readers, 1,
					  &w, &err),
			 0);
	sfs_window_free(w);
	assert_non_null(f->held[0].bounds); /* window 0 may be built again */
	assert_int_equal(sfs_window_build(f, &o.plan, 4, 1, false, readers, 1,
					  &w, &err),
			 0);
	sfs_window_free(w);
	assert_null(f->held[0].bounds);
	assert_int_equal(f->held[1].from, 0); /* 2 of 21: kept */
	for (i = 2; i <= 4; i++) {
		assert_int_equal(sfs_window_build(f, &o.plan, 4, i, false,
						  readers, 1, &w, &err),
				 0);
		sfs_window_free(w);
	}
	/* window 4 starts at sample 16, c1's 14th: 14 of its 21 cut */
	assert_int_equal(f->held[1].from, 14);
	assert_int_equal(f->held[1].bounds[0], 14);
	/* window 5: c1's last 6 samples and c2's 2 */
	assert_int_equal(sfs_window_build(f, &o.plan, 4, 5, false, readers, 1,
					  &w, &err),
			 0);
	bytes = window_bytes(f, w, 0);
	assert_string_equal(bytes, "\n\n\n\n");
	free(bytes);
	sfs_window_free(w);
	/* window 1 again: c0 and c1 scanned again, the same bytes */
	assert_int_equal(sfs_window_build(f, &o.plan, 4, 1, false, readers, 1,
					  &w, &err),
			 0);
	assert_int_equal(w->readers[0].nruns, 1);
	assert_true(sfs_window_run_shard(w, f->idx->shards,
					 &w->readers[0].runs[0]) == 1 &&
		    w->readers[0].runs[0].first ==
			    f->idx->shards[1].first_sample + 2 &&
		    w->readers[0].runs[0].count == 4);
	assert_int_equal(f->held[1].from, 0);
	assert_int_equal(w->readers[0].bytes.extents[0].src, 2);
	sfs_window_free(w);
	sfs_options_clear(&o);
	sfs_follow_free(f);
	tmpdir_remove(dir);
}

/* Anyone who may read the log may lock it: a lock held by another is
 * waited for a second at most, never for ever.  At the open, the log is
 * read all the same and not kept; while followed, the shards go on. */
static void test_log_locked(void **state)
{
	char *dir = tmpdir_new(), log[512];
	struct sfs_follow *f = NULL;
	struct sfs_error err = { 0 };
	struct notes notes = { 0 };
	size_t added;
	int fd;
	char *p;

	(void)state;
	free(write_at(dir, "a.jsonl", "1\n", 2));
	assert_int_equal(sfs_follow_open(dir, NULL, true, NULL, note, &notes,
					 &f, &err),
			 0);
	assert_int_equal(sfs_follow_scan(f, &added, &err), 0);
	snprintf(log, sizeof(log), "%s/.shardfs/follow.log", dir);
	fd = open(log, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(flock(fd, LOCK_EX), 0);
	/* an append: waits a second, then the log is no longer kept */
	free(write_at(dir, "b.jsonl", "2\n", 2));
	assert_int_equal(sfs_follow_scan(f, &added, &err), 0);
	assert_int_equal(added, 1);
	assert_int_equal(f->log_fd, -1);
	assert_int_equal(notes.n, 1);
	p = strstr(notes.msg[0], "/.shardfs/follow.log: ");
	assert_non_null(p);
	assert_string_equal(
		p,
		"/.shardfs/follow.log: cannot append to the follow log (locked by another process for over a second): a restart needs every shard still in the source");
	sfs_follow_free(f);
	/* an open: read as it is, not kept */
	assert_int_equal(sfs_follow_open(dir, NULL, true, NULL, note, &notes,
					 &f, &err),
			 0);
	assert_int_equal(f->idx->nshards, 1);
	assert_int_equal(f->log_fd, -1);
	assert_int_equal(notes.n, 2);
	p = strstr(notes.msg[1], "/.shardfs/follow.log: ");
	assert_non_null(p);
	assert_string_equal(
		p, NOT_KEPT("locked by another process for over a second"));
	sfs_follow_free(f);
	close(fd);
	tmpdir_remove(dir);
}

/* Attribute name of reader r's file of window w of f (sfs_window_xattr
 * over the stream's shards), or NULL when rc says so. */
static char *window_attr(const struct sfs_follow *f, const struct sfs_window *w,
			 size_t r, const char *name, int rc)
{
	char *s = NULL;

	assert_int_equal(sfs_window_xattr(w, r, f->source, f->idx->shards, name,
					  &s),
			 rc);
	return s;
}

/* What getfattr shows of a window file and a stream, byte for byte: the
 * shards a file reads, its samples as the stream numbers them (runs of
 * two shards joined), its counts and its epoch. */
static void test_window_xattr(void **state)
{
	char *dir = tmpdir_new(), *s, want[1024];
	struct sfs_follow *f = NULL;
	struct sfs_window *w[2] = { NULL, NULL };
	struct sfs_error err = { 0 };
	struct sfs_options o;
	const size_t readers[] = { 0, 1 };
	const char *names;
	size_t added, len, r;

	(void)state;
	free(write_at(dir, "c1.jsonl", "a\nb\nc\n", 6));
	free(write_at(dir, "c2.jsonl", "d\ne\n", 4));
	free(write_at(dir, ".shardfs-end", "", 0));
	assert_int_equal(sfs_follow_open(dir, NULL, false, NULL, NULL, NULL, &f,
					 &err),
			 0);
	assert_int_equal(sfs_follow_scan(f, &added, &err), 0);
	assert_int_equal(f->idx->nsamples, 5);
	sfs_options_init(&o);
	assert_int_equal(sfs_options_parse(&o, "workers=2,shuffle=none", &err),
			 0);
	assert_int_equal(sfs_window_build(f, &o.plan, 4, 0, false, readers, 2,
					  &w[0], &err),
			 0);
	/* reader 0: samples 0 and 1, of c1 */
	s = window_attr(f, w[0], 0, SFS_XATTR_SOURCE, 0);
	snprintf(want, sizeof(want), "%s/c1.jsonl", dir);
	assert_string_equal(s, want);
	free(s);
	s = window_attr(f, w[0], 0, SFS_XATTR_RANGE, 0);
	assert_string_equal(s, "0-1");
	free(s);
	/* reader 1: sample 2 of c1 and sample 0 of c2, the stream's 2-3 */
	s = window_attr(f, w[0], 1, SFS_XATTR_SOURCE, 0);
	snprintf(want, sizeof(want), "%s/c1.jsonl\n%s/c2.jsonl", dir, dir);
	assert_string_equal(s, want);
	free(s);
	s = window_attr(f, w[0], 1, SFS_XATTR_RANGE, 0);
	assert_string_equal(s, "2-3");
	free(s);
	s = window_attr(f, w[0], 1, SFS_XATTR_SAMPLES, 0);
	assert_string_equal(s, "2");
	free(s);
	s = window_attr(f, w[0], 1, SFS_XATTR_PADDING, 0);
	assert_string_equal(s, "0");
	free(s);
	s = window_attr(f, w[0], 1, SFS_XATTR_EPOCH, 0);
	assert_string_equal(s, "0");
	free(s);
	assert_null(window_attr(f, w[0], 1, "user.shardfs.other", -ENODATA));
	/* the last window: sample 4 for reader 0, padding for reader 1 */
	assert_int_equal(sfs_window_build(f, &o.plan, 4, 1, true, readers, 2,
					  &w[1], &err),
			 0);
	s = window_attr(f, w[1], 1, SFS_XATTR_EPOCH, 0);
	assert_string_equal(s, "1");
	free(s);
	snprintf(want, sizeof(want), "%s/c2.jsonl", dir);
	for (r = 0; r < 2; r++) {
		s = window_attr(f, w[1], r, SFS_XATTR_SOURCE, 0);
		assert_string_equal(s, want);
		free(s);
		s = window_attr(f, w[1], r, SFS_XATTR_RANGE, 0);
		assert_string_equal(s, "4"); /* reader 1's padding repeats it */
		free(s);
		s = window_attr(f, w[1], r, SFS_XATTR_SAMPLES, 0);
		assert_string_equal(s, "1");
		free(s);
		s = window_attr(f, w[1], r, SFS_XATTR_PADDING, 0);
		assert_string_equal(s, r ? "1" : "0");
		free(s);
		/* the stream: its source, its counts over both windows */
		assert_int_equal(sfs_window_stream_xattr(w, 2, r, f->source,
							 SFS_XATTR_SOURCE, &s),
				 0);
		assert_string_equal(s, dir);
		free(s);
		assert_int_equal(sfs_window_stream_xattr(w, 2, r, f->source,
							 SFS_XATTR_SAMPLES, &s),
				 0);
		assert_string_equal(s, "3");
		free(s);
		assert_int_equal(sfs_window_stream_xattr(w, 2, r, f->source,
							 SFS_XATTR_PADDING, &s),
				 0);
		assert_string_equal(s, r ? "1" : "0");
		free(s);
		assert_int_equal(sfs_window_stream_xattr(w, 2, r, f->source,
							 SFS_XATTR_RANGE, &s),
				 -ENODATA);
	}
	names = sfs_window_xattr_names(false, &len);
	assert_int_equal(len, sizeof(SFS_XATTR_SOURCE) +
				      sizeof(SFS_XATTR_SAMPLES) +
				      sizeof(SFS_XATTR_RANGE) +
				      sizeof(SFS_XATTR_PADDING) +
				      sizeof(SFS_XATTR_EPOCH));
	assert_memory_equal(names,
			    "user.shardfs.source\0user.shardfs.samples\0"
			    "user.shardfs.range\0user.shardfs.padding\0"
			    "user.shardfs.epoch",
			    len);
	names = sfs_window_xattr_names(true, &len);
	assert_memory_equal(names,
			    "user.shardfs.source\0user.shardfs.samples\0"
			    "user.shardfs.padding",
			    len);
	assert_int_equal(len, 62);
	sfs_window_free(w[0]);
	sfs_window_free(w[1]);
	sfs_follow_free(f);
	sfs_options_clear(&o);
	tmpdir_remove(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_follow_formats),
		cmocka_unit_test(test_log_parse),
		cmocka_unit_test(test_log_parse_signed),
		cmocka_unit_test(test_log_refused),
		cmocka_unit_test(test_window_option),
		cmocka_unit_test(test_windows),
		cmocka_unit_test(test_stream),
		cmocka_unit_test(test_held_back),
		cmocka_unit_test(test_old_mtime_restart),
		cmocka_unit_test(test_log_torn_tail),
		cmocka_unit_test(test_log_symlink),
		cmocka_unit_test(test_log_locked),
		cmocka_unit_test(test_tar_global_header),
		cmocka_unit_test(test_memory_follows_windows),
		cmocka_unit_test(test_window_xattr),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
