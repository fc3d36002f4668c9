/* The index: build, save, load, refresh, staleness, damage. */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <jansson.h>

#include "helpers.h"
#include "shardfs/indexer.h"
#include "shardfs/spill.h"

/* A source with a tar, a jsonl, a tfrecord-less mix and a stray file. */
static char *make_source(void)
{
	char *dir = tmpdir_new();
	struct buf t = { 0 };

	tar_member(&t, "k1.jpg", '0', "111", 3);
	tar_member(&t, "k1.cls", '0', "1", 1);
	tar_member(&t, "k2.jpg", '0', "222", 3);
	tar_end(&t);
	free(write_at(dir, "b/s1.tar", t.p, t.len));
	free(write_at(dir, "a.jsonl", "{}\n{}\n{}\n", 9));
	free(write_at(dir, "README.md", "docs\n", 5));
	free(write_at(dir, ".hidden.jsonl", "{}\n", 3));
	buf_free(&t);
	return dir;
}

static struct sfs_index *build(const char *dir, const struct sfs_index *prev,
			       struct sfs_indexer_report *rep)
{
	struct sfs_indexer_opts o = { .source = dir, .jobs = 2, .hash = true };
	struct sfs_error err = { 0 };
	struct sfs_index *idx = NULL;

	assert_int_equal(sfs_indexer_build(&o, prev, &idx, rep, &err), 0);
	return idx;
}

static void test_index_round_trip(void **state)
{
	struct sfs_indexer_report rep;
	struct sfs_error err = { 0 };
	struct sfs_index *idx, *back;
	char *dir = make_source();
	unsigned char want[SFS_DIGEST_LEN];
	size_t i;

	(void)state;
	idx = build(dir, NULL, &rep);
	assert_int_equal(rep.scanned, 2);
	assert_int_equal(rep.ignored, 1);
	assert_int_equal(idx->nshards, 2);
	assert_string_equal(idx->shards[0].path, "a.jsonl");
	assert_string_equal(idx->shards[1].path, "b/s1.tar");
	assert_int_equal(idx->nsamples, 5);
	sfs_digest_buf("{}\n{}\n{}\n", 9, want);
	assert_memory_equal(idx->shards[0].digest, want, SFS_DIGEST_LEN);
	assert_int_equal(sfs_index_save(idx, NULL, &err), 0);

	assert_int_equal(sfs_index_load(dir, NULL, &back, &err), 0);
	assert_int_equal(back->nshards, idx->nshards);
	assert_int_equal(back->nsamples, idx->nsamples);
	assert_int_equal(back->nbounds, idx->nbounds);
	/* a loaded table is read from its file, not held */
	assert_null(back->bounds);
	for (i = 0; i < idx->nshards; i++) {
		const struct sfs_shard *a = &idx->shards[i],
				       *b = &back->shards[i];
		uint64_t got[4] = { 0 };

		assert_int_equal(sfs_index_read_bounds(back, b, 0,
						       b->nsamples + 1, got,
						       &err),
				 0);
		assert_memory_equal(got, idx->bounds + a->bounds_at,
				    (a->nsamples + 1) * sizeof(uint64_t));

		assert_string_equal(a->path, b->path);
		assert_int_equal(a->size, b->size);
		assert_int_equal(a->mtime_ns, b->mtime_ns);
		assert_ptr_equal(a->format, b->format);
		assert_int_equal(a->nsamples, b->nsamples);
		assert_int_equal(a->bounds_at, b->bounds_at);
		assert_true(b->has_digest);
		assert_memory_equal(a->digest, b->digest, SFS_DIGEST_LEN);
	}
	assert_int_equal(sfs_index_check_source(back, NULL, false, 0, &err), 0);

	/* every sample's digest, as a loader would read it: a line without
	 * its newline; a tar sample's members (path, NUL, size, data) */
	assert_non_null(back->digests);
	assert_false(back->digests_checked);
	assert_int_equal(sfs_index_check_digests(back, &err), 0);
	assert_true(back->digests_checked);
	sfs_digest_buf("{}", 2, want);
	assert_memory_equal(back->digests, want, SFS_DIGEST_LEN);
	assert_memory_equal(back->digests + 2 * SFS_DIGEST_LEN, want,
			    SFS_DIGEST_LEN);
	{
		static const unsigned char k1[] = "k1.jpg\0\3\0\0\0\0\0\0\0"
						  "111"
						  "k1.cls\0\1\0\0\0\0\0\0\0"
						  "1";

		assert_int_equal(back->shards[1].first_sample, 3);
		sfs_digest_buf(k1, sizeof(k1) - 1, want);
		assert_memory_equal(back->digests + 3 * SFS_DIGEST_LEN, want,
				    SFS_DIGEST_LEN);
	}
	assert_memory_equal(back->digests, idx->digests,
			    idx->nsamples * SFS_DIGEST_LEN);
	sfs_index_free(back);
	sfs_index_free(idx);
	sfs_indexer_report_clear(&rep);
	tmpdir_remove(dir);
}

static void test_index_refresh_reuses_unchanged(void **state)
{
	struct sfs_indexer_report rep;
	struct sfs_index *first, *second;
	char *dir = make_source();

	(void)state;
	first = build(dir, NULL, &rep);
	sfs_indexer_report_clear(&rep);
	free(write_at(dir, "a.jsonl", "{}\n{}\n{}\n{}\n", 12));
	second = build(dir, first, &rep);
	assert_int_equal(rep.scanned, 1);
	assert_int_equal(rep.reused, 1);
	assert_int_equal(second->nsamples, 6);
	assert_int_equal(second->shards[0].nsamples, 4);
	assert_memory_equal(second->bounds + second->shards[1].bounds_at,
			    first->bounds + first->shards[1].bounds_at,
			    3 * sizeof(uint64_t));
	/* the reused shard keeps its sample digests, now at samples 4.. */
	assert_memory_equal(second->digests + 4 * SFS_DIGEST_LEN,
			    first->digests + 3 * SFS_DIGEST_LEN,
			    2 * SFS_DIGEST_LEN);
	sfs_indexer_report_clear(&rep);
	sfs_index_free(first);
	sfs_index_free(second);
	tmpdir_remove(dir);
}

/* The stale shards are named in the index's order, up to ten, whatever
 * the threads that stat them (threads: 0 the default, 1 the caller's). */
static void test_index_stale_names_shards(void **state)
{
	static const unsigned threads[] = { 0, 1, 2, 16 };
	struct sfs_indexer_report rep;
	struct sfs_error err = { 0 };
	struct sfs_index *idx;
	char *dir, want[1024], path[512];
	struct timeval tv[2] = { { 1000, 0 }, { 1000, 0 } };
	size_t t;

	(void)state;
	for (t = 0; t < sizeof(threads) / sizeof(threads[0]); t++) {
		dir = make_source();
		idx = build(dir, NULL, &rep);
		free(write_at(dir, "a.jsonl", "{}\n", 3));
		snprintf(path, sizeof(path), "%s/b/s1.tar", dir);
		assert_int_equal(utimes(path, tv), 0);
		assert_int_equal(sfs_index_check_source(idx, NULL, false,
							threads[t], &err),
				 -ESTALE);
		snprintf(
			want, sizeof(want),
			"the index is stale: 2 shard files changed since it was built: a.jsonl (size 3, the index says 9), b/s1.tar (modified); rebuild it with: shardfs-index %s",
			idx->source);
		assert_string_equal(err.msg, want);
		unlink(path);
		assert_int_equal(sfs_index_check_source(idx, "/elsewhere",
							false, threads[t],
							&err),
				 -ESTALE);
		snprintf(
			want, sizeof(want),
			"the index is stale: 2 shard files changed since it was built: a.jsonl (size 3, the index says 9), b/s1.tar (missing); rebuild it with: shardfs-index %s --out /elsewhere",
			idx->source);
		assert_string_equal(err.msg, want);
		sfs_indexer_report_clear(&rep);
		sfs_index_free(idx);
		tmpdir_remove(dir);
	}
}

/* Of 600 shards checked on many threads, the first ten of the 120 that
 * changed are named, in order, and all are counted; and when none
 * changed, every shard's access is noted. */
static void test_index_stale_many_shards(void **state)
{
	struct sfs_indexer_report rep;
	struct sfs_error err = { 0 };
	struct sfs_index *idx;
	char *dir = tmpdir_new(), want[2048], name[64];
	size_t i, at = 0;

	(void)state;
	for (i = 0; i < 600; i++) {
		snprintf(name, sizeof(name), "s%03zu.jsonl", i);
		free(write_at(dir, name, "{}\n{}\n", 6));
	}
	idx = build(dir, NULL, &rep);
	assert_int_equal(idx->nshards, 600);
	assert_int_equal(sfs_index_check_source(idx, NULL, false, 0, &err), 0);
	for (i = 0; i < 600; i++)
		assert_true(idx->shards[i].access.known);
	for (i = 3; i < 600; i += 5) {
		snprintf(name, sizeof(name), "s%03zu.jsonl", i);
		free(write_at(dir, name, "{}\n", 3));
	}
	assert_int_equal(sfs_index_check_source(idx, NULL, false, 0, &err),
			 -ESTALE);
	at = (size_t)snprintf(
		want, sizeof(want),
		"the index is stale: 120 shard files changed since it was built: ");
	for (i = 3; i < 53; i += 5)
		at += (size_t)snprintf(
			want + at, sizeof(want) - at,
			"%ss%03zu.jsonl (size 3, the index says 6)",
			i > 3 ? ", " : "", i);
	snprintf(want + at, sizeof(want) - at,
		 ", ...; rebuild it with: shardfs-index %s", idx->source);
	assert_string_equal(err.msg, want);
	sfs_indexer_report_clear(&rep);
	sfs_index_free(idx);
	tmpdir_remove(dir);
}

/*
 * Save an index of a fresh source, damage a file of it, expect msg: from
 * the load, or with late from sfs_index_check_digests after a load that
 * succeeds (the load checks a digest table's header and length only).
 */
static void expect_damage(const char *file, long off, const char *bytes,
			  long truncate_to, bool late, const char *fmt)
{
	struct sfs_indexer_report rep;
	struct sfs_error err = { 0 };
	struct sfs_index *idx, *back = NULL;
	char *dir = make_source(), path[512], want[1024], table[512];
	FILE *f;

	idx = build(dir, NULL, &rep);
	assert_int_equal(sfs_index_save(idx, NULL, &err), 0);
	snprintf(path, sizeof(path), "%s/.shardfs/manifest.json", idx->source);
	if (strcmp(file, "manifest.json")) {
		struct buf m = read_all(path);
		char *p;

		buf_put(&m, "", 1);
		p = strstr((char *)m.p, file);
		assert_non_null(p);
		snprintf(table, sizeof(table), "%s/.shardfs/%.*s", idx->source,
			 (int)strcspn(p, "\""), p);
		snprintf(path, sizeof(path), "%s", table);
		buf_free(&m);
	}
	if (truncate_to >= 0)
		assert_int_equal(truncate(path, truncate_to), 0);
	if (bytes) {
		f = fopen(path, "r+b");
		assert_non_null(f);
		fseek(f, off, SEEK_SET);
		fwrite(bytes, 1, strlen(bytes), f);
		fclose(f);
	}
	if (late) {
		assert_int_equal(sfs_index_load(dir, NULL, &back, &err), 0);
		assert_int_equal(sfs_index_check_digests(back, &err), -EINVAL);
		assert_false(back->digests_checked);
		sfs_index_free(back);
	} else {
		assert_int_equal(sfs_index_load(dir, NULL, &back, &err),
				 -EINVAL);
		assert_null(back);
	}
	snprintf(want, sizeof(want), fmt, path);
	assert_string_equal(err.msg, want);
	sfs_indexer_report_clear(&rep);
	sfs_index_free(idx);
	tmpdir_remove(dir);
}

static void test_index_damaged_manifest(void **state)
{
	(void)state;
	/* cut short: no longer JSON (in the boundary table's entry, whose
	 * first key is its blocks file's) */
	expect_damage(
		"manifest.json", 0, NULL, 40, false,
		"%s: not valid JSON at line 4, column 7 (premature end of input near '\"blo'); the index is damaged: rebuild it with shardfs-index");
}

static void test_index_damaged_table(void **state)
{
	(void)state;
	/* the boundary table's payload is checked as it is read (see
	 * test_index_damaged_block), its header and length by the load */
	expect_damage(
		"samples-", 9, "X", -1, false,
		"%s: not a shardfs boundary table of version 1; the index is damaged: rebuild it with shardfs-index");
	expect_damage(
		"samples-", 0, NULL, 70, false,
		"%s: truncated or of the wrong length for its manifest; the index is damaged: rebuild it with shardfs-index");
	expect_damage(
		"digests-", 100, "X", -1, true,
		"%s: its contents do not match their checksum; the index is damaged: rebuild it with shardfs-index");
	expect_damage(
		"digests-", 0, "SFSBND01", -1, false,
		"%s: not a shardfs sample digest table of version 1; the index is damaged: rebuild it with shardfs-index");
	/* the blocks file is checked whole by the load */
	expect_damage(
		"blocks-", 70, "X", -1, false,
		"%s: its contents do not match their checksum; the index is damaged: rebuild it with shardfs-index");
	expect_damage(
		"blocks-", 0, NULL, 80, false,
		"%s: truncated or of the wrong length for its manifest; the index is damaged: rebuild it with shardfs-index");
	expect_damage(
		"blocks-", 0, "SFSBND01", -1, false,
		"%s: not a shardfs block checksum file of version 1; the index is damaged: rebuild it with shardfs-index");
}

/* A saved index with a boundary table of several blocks, and its files. */
struct blocks_src {
	char *dir;
	char manifest[600], table[600], blocks[600];
};

/*
 * A source whose boundary table spans three blocks: a.jsonl has 1500
 * lines (boundaries 0..1500: blocks 0, 1 and most of 2), b.jsonl 10
 * (boundaries 1501..1511, in block 2); 1512 * 8 = 12096 bytes.
 */
static void make_blocks_source(struct blocks_src *bs)
{
	struct sfs_indexer_report rep;
	struct sfs_error err = { 0 };
	struct sfs_index *idx;
	char lines[4500];
	json_t *m, *b;
	int i;

	bs->dir = tmpdir_new();
	for (i = 0; i < 1500; i++)
		memcpy(lines + 3 * i, "{}\n", 3);
	free(write_at(bs->dir, "a.jsonl", lines, sizeof(lines)));
	free(write_at(bs->dir, "b.jsonl", lines, 30));
	idx = build(bs->dir, NULL, &rep);
	assert_int_equal(idx->nbounds, 1512);
	assert_int_equal(sfs_index_save(idx, NULL, &err), 0);
	snprintf(bs->manifest, sizeof(bs->manifest),
		 "%s/.shardfs/manifest.json", idx->source);
	m = json_load_file(bs->manifest, 0, NULL);
	assert_non_null(m);
	b = json_object_get(m, "boundaries");
	snprintf(bs->table, sizeof(bs->table), "%s/.shardfs/%s", idx->source,
		 json_string_value(json_object_get(b, "file")));
	b = json_object_get(b, "blocks");
	assert_non_null(b);
	snprintf(bs->blocks, sizeof(bs->blocks), "%s/.shardfs/%s", idx->source,
		 json_string_value(json_object_get(b, "file")));
	json_decref(m);
	sfs_indexer_report_clear(&rep);
	sfs_index_free(idx);
}

/* Overwrite bytes of path at off. */
static void poke(const char *path, long off, const char *bytes)
{
	FILE *f = fopen(path, "r+b");

	assert_non_null(f);
	assert_int_equal(fseek(f, off, SEEK_SET), 0);
	assert_int_equal(fwrite(bytes, 1, strlen(bytes), f), strlen(bytes));
	assert_int_equal(fclose(f), 0);
}

/*
 * The blocks file: the manifest names it with its block size, count and
 * checksum; its header; the SHA-256 of every 4096 bytes of the table's
 * payload, the last block shorter.
 */
static void test_index_blocks_file_written(void **state)
{
	struct blocks_src bs;
	unsigned char want[SFS_DIGEST_LEN];
	char hex[SFS_DIGEST_HEX];
	struct buf t, b;
	json_t *m, *e;
	int k;

	(void)state;
	make_blocks_source(&bs);
	t = read_all(bs.table);
	b = read_all(bs.blocks);
	assert_int_equal(t.len, 64 + 12096);
	assert_int_equal(b.len, 64 + 3 * 32);
	assert_memory_equal(b.p, "SFSBLK01\1\0\0\0\0\0\0\0\3\0\0\0\0\0\0\0",
			    24);
	for (k = 0; k < 3; k++) {
		sfs_digest_buf(t.p + 64 + 4096 * k, k < 2 ? 4096 : 3904, want);
		assert_memory_equal(b.p + 64 + 32 * k, want, 32);
	}
	sfs_digest_buf(b.p + 64, 96, want);
	assert_memory_equal(b.p + 24, want, 32);
	sfs_digest_hex(want, hex);
	m = json_load_file(bs.manifest, 0, NULL);
	assert_non_null(m);
	e = json_object_get(json_object_get(m, "boundaries"), "blocks");
	assert_int_equal(json_object_size(e), 4);
	assert_int_equal(json_integer_value(json_object_get(e, "block_bytes")),
			 4096);
	assert_int_equal(json_integer_value(json_object_get(e, "count")), 3);
	assert_string_equal(json_string_value(json_object_get(e, "sha256")),
			    hex);
	assert_non_null(strstr(bs.blocks, "/blocks-"));
	assert_memory_equal(strstr(bs.blocks, "/blocks-") + 8, hex, 16);
	json_decref(m);
	buf_free(&t);
	buf_free(&b);
	tmpdir_remove(bs.dir);
}

/*
 * Read n boundaries of shard i from from through buffer b (NULL: directly,
 * sfs_index_read_bounds); expect rc (and msg).
 */
static void expect_buf_read(struct sfs_bounds_buf *b,
			    const struct sfs_index *idx, size_t i,
			    uint64_t from, uint64_t n, int rc, const char *msg)
{
	struct sfs_error err = { 0 };
	uint64_t *got = calloc(n + 1, sizeof(*got)), j;

	assert_int_equal(b ? sfs_bounds_buf_read(b, idx, &idx->shards[i], from,
						 n, got, &err) :
			     sfs_index_read_bounds(idx, &idx->shards[i], from,
						   n, got, &err),
			 rc);
	if (rc)
		assert_string_equal(err.msg, msg);
	else
		for (j = 0; j < n; j++)
			assert_int_equal(got[j], 3 * (from + j));
	free(got);
}

static void expect_read(const struct sfs_index *idx, size_t i, uint64_t from,
			uint64_t n, int rc, const char *msg)
{
	expect_buf_read(NULL, idx, i, from, n, rc, msg);
}

/*
 * Reads through a buffer of the table's slots: every range of both shards
 * gives what a direct read gives; a slot is filled with whole blocks, each
 * checked (two blocks of 4 KiB a slot); a damaged block is found whether
 * the range or only its slot touches it, and the range itself is then read
 * directly; a slot of one table never serves a read of another.
 */
static void test_index_bounds_buf_reads(void **state)
{
	struct blocks_src bs, other;
	struct sfs_error err = { 0 };
	struct sfs_index *idx = NULL, *idx2 = NULL;
	struct sfs_bounds_buf *b = NULL;
	uint64_t from, n;
	char want[1200];

	(void)state;
	make_blocks_source(&bs);
	assert_int_equal(sfs_bounds_buf_new(&b), 0);
	assert_int_equal(sfs_index_load(bs.dir, NULL, &idx, &err), 0);
	/* one read fills a slot with blocks 0 and 1, checking both */
	expect_buf_read(b, idx, 0, 5, 2, 0, NULL);
	assert_int_equal(idx->verified[0], 3);
	for (from = 0; from <= 1500; from += 7)
		for (n = 1; n <= 1501 - from && n <= 700; n = 3 * n + 1)
			expect_buf_read(b, idx, 0, from, n, 0, NULL);
	expect_buf_read(b, idx, 0, 0, 1501, 0, NULL);
	for (from = 0; from <= 10; from++)
		for (n = 1; n <= 11 - from; n++)
			expect_buf_read(b, idx, 1, from, n, 0, NULL);
	assert_int_equal(idx->verified[0], 7);

	/* block 1 damaged, in a second source whose slots are not the
	 * first's: its reads check its own blocks */
	make_blocks_source(&other);
	poke(other.table, 64 + 4096 + 100, "X");
	assert_int_equal(sfs_index_load(other.dir, NULL, &idx2, &err), 0);
	snprintf(
		want, sizeof(want),
		"%s: block 1 (bytes 4160 to 8255) does not match its checksum in %s; the index is damaged: rebuild it with shardfs-index",
		other.table, strrchr(other.blocks, '/') + 1);
	/* the slot's fill (blocks 0 and 1) fails: block 0 read alone */
	expect_buf_read(b, idx2, 0, 5, 2, 0, NULL);
	assert_int_equal(idx2->verified[0], 1);
	expect_buf_read(b, idx2, 0, 600, 1, -EINVAL, want);
	expect_buf_read(b, idx2, 0, 511, 2, -EINVAL, want);
	expect_buf_read(b, idx2, 1, 0, 11, 0, NULL);
	assert_int_equal(idx2->verified[0], 5);
	/* the first source's slots still serve it */
	expect_buf_read(b, idx, 0, 600, 1, 0, NULL);

	sfs_bounds_buf_free(b);
	sfs_bounds_buf_free(NULL);
	sfs_index_free(idx2);
	sfs_index_free(idx);
	tmpdir_remove(other.dir);
	tmpdir_remove(bs.dir);
}

/*
 * A byte flipped in block 1 of the table: the load does not read the
 * table and succeeds; a read that touches block 1 fails naming it, its
 * bytes and the fix, and reads of the other blocks succeed, before and
 * after; so does a full check (shardfs-index --verify, shardfs-check).
 */
static void test_index_damaged_block(void **state)
{
	struct blocks_src bs;
	struct sfs_error err = { 0 };
	struct sfs_index *idx = NULL;
	char want[1200];
	int round;

	(void)state;
	make_blocks_source(&bs);
	poke(bs.table, 64 + 4096 + 100, "X");
	snprintf(
		want, sizeof(want),
		"%s: block 1 (bytes 4160 to 8255) does not match its checksum in %s; the index is damaged: rebuild it with shardfs-index",
		bs.table, strrchr(bs.blocks, '/') + 1);
	for (round = 0; round < 2; round++) {
		assert_int_equal(sfs_index_load(bs.dir, NULL, &idx, &err), 0);
		assert_non_null(idx->verified);
		assert_int_equal(idx->nblocks, 3);
		if (round) {
			assert_int_equal(sfs_index_check_bounds(idx, &err),
					 -EINVAL);
			assert_string_equal(err.msg, want);
			assert_false(idx->bounds_checked);
		}
		/* block 0 only, then block 2 only (both shards) */
		expect_read(idx, 0, 0, 512, 0, NULL);
		expect_read(idx, 0, 1024, 477, 0, NULL);
		expect_read(idx, 1, 0, 11, 0, NULL);
		assert_int_equal(idx->verified[0], 5);
		/* block 1, alone or with the others; again */
		expect_read(idx, 0, 600, 1, -EINVAL, want);
		expect_read(idx, 0, 0, 1501, -EINVAL, want);
		expect_read(idx, 0, 511, 2, -EINVAL, want);
		assert_int_equal(idx->verified[0], 5);
		/* the checked blocks are read again without their checks */
		expect_read(idx, 0, 10, 20, 0, NULL);
		expect_read(idx, 1, 3, 5, 0, NULL);
		sfs_index_free(idx);
		idx = NULL;
	}
	tmpdir_remove(bs.dir);
}

/*
 * A mixture borrows its sources' tables (sfs_index_join with borrow): its
 * reads check the source's blocks, and the source keeps what was checked.
 */
static void test_index_blocks_of_borrowed_table(void **state)
{
	struct blocks_src bs;
	struct sfs_error err = { 0 };
	struct sfs_index *src = NULL, *mix = NULL;
	const char *prefix = "one/", *name = "one";
	char want[1200];

	(void)state;
	make_blocks_source(&bs);
	poke(bs.table, 64 + 4096 + 100, "X");
	assert_int_equal(sfs_index_load(bs.dir, NULL, &src, &err), 0);
	assert_int_equal(sfs_index_join((const struct sfs_index *const *)&src,
					&prefix, &name, 1, "/mix", "", true,
					&mix, &err),
			 0);
	assert_ptr_equal(mix->shards[0].bounds_in, src);
	assert_string_equal(mix->shards[0].path, "one/a.jsonl");
	assert_null(mix->verified);
	expect_read(mix, 0, 1024, 477, 0, NULL);
	assert_int_equal(src->verified[0], 4);
	snprintf(
		want, sizeof(want),
		"%s: block 1 (bytes 4160 to 8255) does not match its checksum in %s; the index is damaged: rebuild it with shardfs-index",
		bs.table, strrchr(bs.blocks, '/') + 1);
	expect_read(mix, 0, 600, 1, -EINVAL, want);
	assert_int_equal(src->verified[0], 4);
	sfs_index_free(mix);
	sfs_index_free(src);
	tmpdir_remove(bs.dir);
}

/* An intact table: a full check marks every block, reads stay right. */
static void test_index_check_bounds(void **state)
{
	struct blocks_src bs;
	struct sfs_error err = { 0 };
	struct sfs_index *idx = NULL;

	(void)state;
	make_blocks_source(&bs);
	assert_int_equal(sfs_index_load(bs.dir, NULL, &idx, &err), 0);
	assert_int_equal(idx->verified[0], 0);
	expect_read(idx, 0, 700, 3, 0, NULL);
	assert_int_equal(idx->verified[0], 2);
	assert_int_equal(sfs_index_check_bounds(idx, &err), 0);
	assert_true(idx->bounds_checked);
	assert_int_equal(idx->verified[0], 7);
	expect_read(idx, 0, 0, 1501, 0, NULL);
	sfs_index_free(idx);
	tmpdir_remove(bs.dir);
}

struct reader {
	const struct sfs_index *idx;
	int rc;
	uint64_t got[1501];
};

static void *read_all_bounds(void *arg)
{
	struct reader *r = arg;
	struct sfs_error err = { 0 };

	r->rc = sfs_index_read_bounds(r->idx, &r->idx->shards[0], 0, 1501,
				      r->got, &err);
	return NULL;
}

/* Eight threads read the same unchecked blocks at once: all right. */
static void test_index_blocks_checked_by_threads(void **state)
{
	struct blocks_src bs;
	struct sfs_error err = { 0 };
	struct sfs_index *idx = NULL;
	struct reader *r = calloc(8, sizeof(*r));
	pthread_t tid[8];
	int i, j;

	(void)state;
	make_blocks_source(&bs);
	assert_int_equal(sfs_index_load(bs.dir, NULL, &idx, &err), 0);
	for (i = 0; i < 8; i++) {
		r[i].idx = idx;
		assert_int_equal(pthread_create(&tid[i], NULL, read_all_bounds,
						&r[i]),
				 0);
	}
	for (i = 0; i < 8; i++) {
		assert_int_equal(pthread_join(tid[i], NULL), 0);
		assert_int_equal(r[i].rc, 0);
		for (j = 0; j < 1501; j++)
			assert_int_equal(r[i].got[j], 3 * j);
	}
	assert_int_equal(idx->verified[0], 7);
	sfs_index_free(idx);
	free(r);
	tmpdir_remove(bs.dir);
}

/*
 * Values that are no boundaries of their shard are refused wherever they
 * come from: a table in memory, or a table whose blocks match (signed by
 * whoever wrote it).
 */
static void test_index_bounds_out_of_range(void **state)
{
	struct sfs_indexer_report rep;
	struct sfs_index *idx;
	char *dir = make_source(), want[1200];

	(void)state;
	idx = build(dir, NULL, &rep);
	idx->bounds_heap[idx->shards[0].bounds_at + 2] = 100;
	snprintf(
		want, sizeof(want),
		"%s: the boundaries of shard \"a.jsonl\" are out of order or out of range; the index is damaged: rebuild it with shardfs-index",
		idx->source);
	expect_read(idx, 0, 0, 2, 0, NULL);
	expect_read(idx, 0, 1, 2, -EINVAL, want);
	idx->bounds_heap[idx->shards[0].bounds_at + 2] = 2;
	expect_read(idx, 0, 0, 4, -EINVAL, want);
	sfs_indexer_report_clear(&rep);
	sfs_index_free(idx);
	tmpdir_remove(dir);
}

/*
 * An index written before blocks files (none, and no "blocks" key in the
 * manifest, signed again): loaded with the full pass over its table, which
 * still refuses a damaged table at load.
 */
static void test_index_without_blocks_file(void **state)
{
	struct blocks_src bs;
	struct sfs_bounds_buf *b = NULL;
	uint64_t from, n;
	struct sfs_error err = { 0 };
	struct sfs_index *idx = NULL;
	unsigned char sum[SFS_DIGEST_LEN];
	char hex[SFS_DIGEST_HEX], *text, want[1200];
	json_t *m;
	FILE *f;

	(void)state;
	make_blocks_source(&bs);
	m = json_load_file(bs.manifest, 0, NULL);
	assert_non_null(m);
	assert_int_equal(
		json_object_del(json_object_get(m, "boundaries"), "blocks"), 0);
	json_object_del(m, "checksum");
	text = json_dumps(m, JSON_COMPACT | JSON_SORT_KEYS);
	sfs_digest_buf(text, strlen(text), sum);
	free(text);
	sfs_digest_hex(sum, hex);
	json_object_set_new(m, "checksum", json_string(hex));
	text = json_dumps(m, JSON_INDENT(1) | JSON_SORT_KEYS);
	f = fopen(bs.manifest, "wb");
	assert_non_null(f);
	fprintf(f, "%s\n", text);
	fclose(f);
	free(text);
	json_decref(m);
	assert_int_equal(unlink(bs.blocks), 0);

	assert_int_equal(sfs_index_load(bs.dir, NULL, &idx, &err), 0);
	assert_null(idx->verified);
	assert_true(idx->bounds_checked);
	expect_read(idx, 0, 0, 1501, 0, NULL);
	expect_read(idx, 1, 0, 11, 0, NULL);
	/* read with pread, through slots of 4 KiB-aligned spans too */
	assert_null(idx->bounds);
	assert_int_equal(sfs_bounds_buf_new(&b), 0);
	for (from = 0; from <= 1500; from += 5)
		for (n = 1; n <= 1501 - from && n <= 700; n = 3 * n + 1)
			expect_buf_read(b, idx, 0, from, n, 0, NULL);
	for (from = 0; from <= 10; from++)
		expect_buf_read(b, idx, 1, from, 11 - from, 0, NULL);
	sfs_bounds_buf_free(b);
	assert_int_equal(sfs_index_check_bounds(idx, &err), 0);
	sfs_index_free(idx);
	idx = NULL;

	poke(bs.table, 64 + 4096 + 100, "X");
	assert_int_equal(sfs_index_load(bs.dir, NULL, &idx, &err), -EINVAL);
	assert_null(idx);
	snprintf(
		want, sizeof(want),
		"%s: its contents do not match their checksum; the index is damaged: rebuild it with shardfs-index",
		bs.table);
	assert_string_equal(err.msg, want);
	tmpdir_remove(bs.dir);
}

static void test_index_checksum_of_manifest(void **state)
{
	struct sfs_indexer_report rep;
	struct sfs_error err = { 0 };
	struct sfs_index *idx, *back = NULL;
	char *dir = make_source(), path[512], want[1024];
	struct buf m;
	char *p;
	FILE *f;

	(void)state;
	idx = build(dir, NULL, &rep);
	assert_int_equal(sfs_index_save(idx, NULL, &err), 0);
	snprintf(path, sizeof(path), "%s/.shardfs/manifest.json", idx->source);
	m = read_all(path);
	buf_put(&m, "", 1);
	/* "samples": 5 -> 6: still valid JSON, no longer what was written */
	p = strstr((char *)m.p, "\"samples\": 5");
	assert_non_null(p);
	p[11] = '6';
	f = fopen(path, "wb");
	fwrite(m.p, 1, m.len - 1, f);
	fclose(f);
	assert_int_equal(sfs_index_load(dir, NULL, &back, &err), -EINVAL);
	snprintf(
		want, sizeof(want),
		"%s: its contents do not match their checksum; the index is damaged: rebuild it with shardfs-index",
		path);
	assert_string_equal(err.msg, want);
	buf_free(&m);
	sfs_indexer_report_clear(&rep);
	sfs_index_free(idx);
	tmpdir_remove(dir);
}

static void test_index_missing(void **state)
{
	struct sfs_error err = { 0 };
	struct sfs_index *idx = NULL;
	char *dir = tmpdir_new(), *real, want[1024];

	(void)state;
	real = realpath(dir, NULL);
	assert_int_equal(sfs_index_load(dir, NULL, &idx, &err), -ENOENT);
	snprintf(
		want, sizeof(want),
		"%s/.shardfs/manifest.json: no index; build it with: shardfs-index %s",
		real, dir);
	assert_string_equal(err.msg, want);
	free(real);
	tmpdir_remove(dir);
}

static void test_index_out_dir_and_read_only_source(void **state)
{
	struct sfs_indexer_report rep;
	struct sfs_error err = { 0 };
	struct sfs_index *idx, *back;
	char *dir = make_source(), *out = tmpdir_new(), want[1024];

	(void)state;
	idx = build(dir, NULL, &rep);
	assert_int_equal(sfs_index_save(idx, out, &err), 0);
	assert_int_equal(sfs_index_load(dir, out, &back, &err), 0);
	assert_int_equal(back->nsamples, 5);
	sfs_index_free(back);
	/* root ignores permissions, so make the target a file instead */
	free(write_at(dir, "ro", "", 0));
	snprintf(want, sizeof(want), "%s/ro", dir);
	assert_int_equal(sfs_index_save(idx, want, &err), -ENOTDIR);
	assert_non_null(
		strstr(err.msg, "put the index elsewhere with --out DIR"));
	sfs_indexer_report_clear(&rep);
	sfs_index_free(idx);
	tmpdir_remove(out);
	tmpdir_remove(dir);
}

static void test_index_skip_bad(void **state)
{
	struct sfs_indexer_opts o = { .jobs = 2 };
	struct sfs_indexer_report rep;
	struct sfs_error err = { 0 };
	struct sfs_index *idx = NULL;
	char *dir = make_source(), want[1024];

	(void)state;
	free(write_at(dir, "c.tar",
		      "not a tar at all, just some text that is long enough\n",
		      53));
	free(write_at(dir, "d.jsonl", "", 0));
	o.source = dir;
	assert_int_equal(sfs_indexer_build(&o, NULL, &idx, &rep, &err),
			 -EINVAL);
	assert_null(idx);
	assert_string_equal(
		err.msg,
		"2 shards could not be indexed: c.tar: not a tar archive at byte 0 (Unrecognized archive format); d.jsonl: empty file at byte 0: a jsonl shard holds at least one sample; fix or remove them, or run shardfs-index --skip-bad to index the rest");
	o.skip_bad = true;
	assert_int_equal(sfs_indexer_build(&o, NULL, &idx, &rep, &err), 0);
	assert_int_equal(idx->nshards, 2);
	assert_int_equal(rep.nproblems, 2);
	snprintf(
		want, sizeof(want),
		"c.tar: not a tar archive at byte 0 (Unrecognized archive format)");
	assert_string_equal(rep.problems[0], want);
	sfs_indexer_report_clear(&rep);
	sfs_index_free(idx);
	tmpdir_remove(dir);
}

/*
 * "name sha256" of every entry of dir, sorted, one per line (heap): what
 * must be equal between two index directories, temporary files included.
 */
static char *dir_listing(const char *dir)
{
	struct dirent **ents;
	struct buf out = { 0 };
	int n, i;

	n = scandir(dir, &ents, NULL, alphasort);
	assert_true(n >= 0);
	for (i = 0; i < n; i++) {
		char path[1024], hex[SFS_DIGEST_HEX], line[1300];
		unsigned char sum[SFS_DIGEST_LEN];
		struct buf b;

		if (strcmp(ents[i]->d_name, ".") &&
		    strcmp(ents[i]->d_name, "..")) {
			snprintf(path, sizeof(path), "%s/%s", dir,
				 ents[i]->d_name);
			b = read_all(path);
			sfs_digest_buf(b.p, b.len, sum);
			sfs_digest_hex(sum, hex);
			snprintf(line, sizeof(line), "%s %s\n", ents[i]->d_name,
				 hex);
			buf_put(&out, line, strlen(line));
			buf_free(&b);
		}
		free(ents[i]);
	}
	free(ents);
	buf_put(&out, "", 1);
	return (char *)out.p;
}

/*
 * Build the index of src with o (spill_dir set or not) and prev, save it
 * into out; with a spill, out gains no file between the build and the
 * save: the spill's files have no name, so no ending of the process can
 * leave them behind.
 */
static void build_save(struct sfs_indexer_opts *o, const char *src,
		       const struct sfs_index *prev, const char *out,
		       size_t scanned)
{
	struct sfs_indexer_report rep;
	struct sfs_error err = { 0 };
	struct sfs_index *idx = NULL;
	char *before = dir_listing(out), *after;

	o->source = src;
	o->spill_dir = o->spill_dir ? out : NULL;
	assert_int_equal(sfs_indexer_build(o, prev, &idx, &rep, &err), 0);
	assert_int_equal(rep.scanned, scanned);
	if (o->spill_dir) {
		assert_non_null(idx->spill);
		assert_null(idx->bounds);
		assert_null(idx->digests);
		after = dir_listing(out);
		assert_string_equal(after, before);
		free(after);
	}
	free(before);
	assert_int_equal(sfs_index_save(idx, out, &err), 0);
	sfs_indexer_report_clear(&rep);
	sfs_index_free(idx);
}

/* Index src in memory into mem/ and spilled into spill/: same bytes. */
static void expect_spill_same(const char *src, bool hash, const char *mem,
			      const char *spill, const struct sfs_index *prev,
			      size_t scanned)
{
	struct sfs_indexer_opts o = { .jobs = 2,
				      .hash = hash,
				      .skip_bad = true };
	char *a, *b;

	build_save(&o, src, prev, mem, scanned);
	a = dir_listing(mem);
	assert_non_null(strstr(a, "manifest.json "));
	assert_non_null(strstr(a, "samples-"));
	assert_true(!hash == !strstr(a, "digests-"));
	/* two threads (shards' digests spilled side by side: the table
	 * copied), then one (one after the other: the spill's file is the
	 * digest table) */
	for (o.jobs = 2; o.jobs > 0; o.jobs--) {
		o.spill_dir = spill;
		build_save(&o, src, prev, spill, scanned);
		b = dir_listing(spill);
		assert_string_equal(a, b);
		free(b);
	}
	free(a);
}

static void test_index_spill_same_bytes(void **state)
{
	struct sfs_error err = { 0 };
	struct sfs_index *prev;
	char *dir = make_source(), *mem = tmpdir_new(), *spill = tmpdir_new();
	char *nohash = tmpdir_new();
	int hash;

	(void)state;
	/* not sliceable (digests, no boundaries), and a shard that fails
	 * (--skip-bad: it puts no record) */
	free(write_at(dir, "c/x.npy", "\x93NUMPY", 6));
	free(write_at(dir, "c/y.tar", "not a tar at all, just some text", 32));
	for (hash = 0; hash < 2; hash++)
		expect_spill_same(dir, hash, hash ? mem : nohash, spill, NULL,
				  3);
	/* a refresh: two entries reused from the previous index (its
	 * digests checked first, as shardfs-index does), one shard scanned
	 * again */
	assert_int_equal(sfs_index_load(dir, mem, &prev, &err), 0);
	assert_int_equal(sfs_index_check_digests(prev, &err), 0);
	free(write_at(dir, "a.jsonl", "{}\n{\"k\": 2}\n", 13));
	expect_spill_same(dir, true, mem, spill, prev, 1);
	sfs_index_free(prev);
	tmpdir_remove(nohash);
	tmpdir_remove(spill);
	tmpdir_remove(mem);
	tmpdir_remove(dir);
}

/* A shard whose boundaries go to the spill in several pieces (300 000
 * lines: four), as the scan finds them, with digests and without: the
 * bytes of the in-memory build. */
static void test_index_spill_bound_pieces_same_bytes(void **state)
{
	char *dir = tmpdir_new(), *mem = tmpdir_new(), *spill = tmpdir_new();
	char *nohash = tmpdir_new(), *text = malloc(300000);
	int hash;

	(void)state;
	assert_non_null(text);
	memset(text, '\n', 300000);
	memcpy(text, "{}", 2);
	free(write_at(dir, "big.jsonl", text, 300000));
	free(write_at(dir, "small.jsonl", "{}\n", 3));
	for (hash = 0; hash < 2; hash++)
		expect_spill_same(dir, hash, hash ? mem : nohash, spill, NULL,
				  2);
	free(text);
	tmpdir_remove(nohash);
	tmpdir_remove(spill);
	tmpdir_remove(mem);
	tmpdir_remove(dir);
}

/* --merge: parts joined through a spill give the bytes of the in-memory
 * join, and of one run. */
static void test_index_spill_merge_same_bytes(void **state)
{
	struct sfs_indexer_opts o = { .jobs = 2, .hash = true };
	struct sfs_index *parts[3] = { NULL }, *idx;
	struct sfs_error err = { 0 };
	char *dir = make_source(), *pdirs[3], *one = tmpdir_new();
	char *mem = tmpdir_new(), *spill = tmpdir_new(), *a, *b, *c;
	const char *names[3] = { "p0", "p1", "p2" };
	int i;

	(void)state;
	free(write_at(dir, "c/x.npy", "\x93NUMPY", 6));
	free(write_at(dir, "c/z.jsonl", "{}\n", 3));
	build_save(&o, dir, NULL, one, 4);
	for (i = 0; i < 3; i++) {
		o.part = (uint32_t)i;
		o.nparts = 3;
		o.spill_dir = NULL;
		pdirs[i] = tmpdir_new();
		build_save(&o, dir, NULL, pdirs[i], i < 1 ? 2 : 1);
		assert_int_equal(
			sfs_index_load_part(dir, pdirs[i], &parts[i], &err), 0);
	}
	assert_int_equal(sfs_index_merge(parts, names, 3, NULL, &idx, &err), 0);
	assert_null(idx->spill);
	assert_int_equal(sfs_index_save(idx, mem, &err), 0);
	sfs_index_free(idx);
	assert_int_equal(sfs_index_merge(parts, names, 3, spill, &idx, &err),
			 0);
	assert_non_null(idx->spill);
	assert_int_equal(sfs_index_save(idx, spill, &err), 0);
	sfs_index_free(idx);
	a = dir_listing(mem);
	b = dir_listing(spill);
	c = dir_listing(one);
	assert_non_null(strstr(a, "digests-"));
	assert_string_equal(a, b);
	assert_string_equal(a, c);
	free(a);
	free(b);
	free(c);
	for (i = 0; i < 3; i++) {
		sfs_index_free(parts[i]);
		tmpdir_remove(pdirs[i]);
	}
	tmpdir_remove(spill);
	tmpdir_remove(mem);
	tmpdir_remove(one);
	tmpdir_remove(dir);
}

/*
 * A shard of more samples than one piece of digests (70 000 lines: three
 * pieces) is spilled a piece at a time, also when a refresh reads its
 * entry back: the same bytes as the index built in memory.
 */
static void test_index_spill_pieces_same_bytes(void **state)
{
	struct sfs_error err = { 0 };
	struct sfs_index *prev;
	char *dir = make_source(), *mem = tmpdir_new(), *spill = tmpdir_new();
	struct buf big = { 0 };
	char line[32];
	int k;

	(void)state;
	for (k = 0; k < 70000; k++) {
		snprintf(line, sizeof(line), "{\"k\": %d}\n", k);
		buf_put(&big, line, strlen(line));
	}
	free(write_at(dir, "big.jsonl", big.p, big.len));
	expect_spill_same(dir, true, mem, spill, NULL, 3);
	assert_int_equal(sfs_index_load(dir, mem, &prev, &err), 0);
	assert_int_equal(sfs_index_check_digests(prev, &err), 0);
	assert_int_equal(prev->nsamples, 70005);
	free(write_at(dir, "a.jsonl", "{}\n{\"k\": 2}\n", 13));
	expect_spill_same(dir, true, mem, spill, prev, 1);
	sfs_index_free(prev);
	buf_free(&big);
	tmpdir_remove(spill);
	tmpdir_remove(mem);
	tmpdir_remove(dir);
}

static int collect(void *arg, const void *buf, size_t len)
{
	buf_put(arg, buf, len);
	return 0;
}

/*
 * Records filled in pieces, in any order: a table is the records put, in
 * record order, each its pieces in order; a record that had pieces but
 * was never put (a shard that failed mid-scan) adds nothing; a put record
 * takes no more.
 */
static void test_index_spill_records_in_pieces(void **state)
{
	unsigned char d[5][SFS_DIGEST_LEN];
	uint64_t b[4] = { 0, 10, 20, 30 };
	struct sfs_error err = { 0 };
	struct sfs_spill *s;
	struct buf got = { 0 };
	char *dir = tmpdir_new();
	int k;

	(void)state;
	for (k = 0; k < 5; k++)
		memset(d[k], 'a' + k, SFS_DIGEST_LEN);
	assert_int_equal(sfs_spill_new(dir, 3, true, &s, &err), 0);
	assert_int_equal(sfs_spill_append(s, 2, NULL, 0, d[3], 1, &err), 0);
	assert_int_equal(sfs_spill_append(s, 1, b, 2, d[1], 1, &err), 0);
	assert_int_equal(sfs_spill_put(s, 0, NULL, 0, d[0], 1, &err), 0);
	assert_int_equal(sfs_spill_append(s, 1, NULL, 0, d[2], 1, &err), 0);
	assert_int_equal(sfs_spill_put(s, 1, b + 2, 2, NULL, 0, &err), 0);
	assert_int_equal(sfs_spill_append(s, 1, NULL, 0, d[4], 1, &err),
			 -EINVAL);
	assert_int_equal(sfs_spill_count(s, true), 3);
	assert_int_equal(sfs_spill_count(s, false), 4);
	assert_int_equal(sfs_spill_stream(s, true, collect, &got, &err), 0);
	assert_int_equal(got.len, 3 * SFS_DIGEST_LEN);
	for (k = 0; k < 3; k++)
		assert_memory_equal(got.p + k * SFS_DIGEST_LEN, d[k],
				    SFS_DIGEST_LEN);
	got.len = 0;
	assert_int_equal(sfs_spill_stream(s, false, collect, &got, &err), 0);
	assert_int_equal(got.len, sizeof(b));
	assert_memory_equal(got.p, b, sizeof(b));
	sfs_spill_free(s);
	buf_free(&got);
	tmpdir_remove(dir);
}

/* The digest table's SHA-256 as sfs_spill_stream gives it. */
static void expect_sum(struct sfs_spill *s, size_t len)
{
	unsigned char want[SFS_DIGEST_LEN], got[SFS_DIGEST_LEN];
	struct sfs_error err = { 0 };
	struct buf all = { 0 };

	assert_int_equal(sfs_spill_stream(s, true, collect, &all, &err), 0);
	assert_int_equal(all.len, len);
	sfs_digest_buf(all.p, all.len, want);
	assert_true(sfs_spill_sum(s, got));
	assert_memory_equal(got, want, SFS_DIGEST_LEN);
	/* asked again: the same */
	memset(got, 0, sizeof(got));
	assert_true(sfs_spill_sum(s, got));
	assert_memory_equal(got, want, SFS_DIGEST_LEN);
	buf_free(&all);
}

/*
 * The digest table's SHA-256 taken as its pieces come (sfs_spill_sum) is
 * the stream's, whatever order the records are filled and put in (those
 * put before the records ahead of them read back), a record never put
 * that had no digests skipped; one given up after its pieces were hashed
 * (it was the first record not put) leaves the sum unknown.  The digest
 * file is the table (after room for its header) only when the records
 * were filled one after the other and none was given up after pieces.
 */
static void test_index_spill_sum(void **state)
{
	unsigned char d[8][SFS_DIGEST_LEN], sum[SFS_DIGEST_LEN];
	unsigned char file[8 * SFS_DIGEST_LEN];
	struct sfs_error err = { 0 };
	struct sfs_spill *s;
	struct buf got = { 0 };
	char *dir = tmpdir_new();
	int k, fd;

	(void)state;
	for (k = 0; k < 8; k++)
		memset(d[k], 'a' + k, SFS_DIGEST_LEN);
	assert_int_equal(sfs_spill_new(dir, 5, true, &s, &err), 0);
	assert_int_equal(sfs_spill_append(s, 2, NULL, 0, d[0], 2, &err), 0);
	assert_int_equal(sfs_spill_put(s, 1, NULL, 0, d[2], 1, &err), 0);
	assert_int_equal(sfs_spill_append(s, 0, NULL, 0, d[3], 1, &err), 0);
	assert_int_equal(sfs_spill_put(s, 4, NULL, 0, d[4], 1, &err), 0);
	assert_int_equal(sfs_spill_put(s, 0, NULL, 0, d[5], 1, &err), 0);
	assert_int_equal(sfs_spill_append(s, 2, NULL, 0, d[6], 1, &err), 0);
	assert_int_equal(sfs_spill_put(s, 2, NULL, 0, d[7], 1, &err), 0);
	/* record 3 never put, with no digests */
	expect_sum(s, 8 * SFS_DIGEST_LEN);
	/* the records' digests are not in table order in the file */
	assert_int_equal(sfs_spill_table_fd(s), -1);
	sfs_spill_free(s);

	/* records filled one after the other: the file is the table, after
	 * room for its header */
	assert_int_equal(sfs_spill_new(dir, 3, true, &s, &err), 0);
	assert_int_equal(sfs_spill_append(s, 0, NULL, 0, d[0], 2, &err), 0);
	assert_int_equal(sfs_spill_put(s, 0, NULL, 0, d[2], 1, &err), 0);
	assert_int_equal(sfs_spill_put(s, 2, NULL, 0, d[3], 3, &err), 0);
	expect_sum(s, 6 * SFS_DIGEST_LEN);
	fd = sfs_spill_table_fd(s);
	assert_true(fd >= 0);
	assert_int_equal(lseek(fd, 0, SEEK_END), SFS_SPILL_HEAD + 6 * 32);
	assert_int_equal(pread(fd, file, sizeof(file), SFS_SPILL_HEAD),
			 6 * SFS_DIGEST_LEN);
	assert_memory_equal(file, d[0], 6 * SFS_DIGEST_LEN);
	sfs_spill_free(s);

	assert_int_equal(sfs_spill_new(dir, 2, true, &s, &err), 0);
	assert_int_equal(sfs_spill_append(s, 0, NULL, 0, d[0], 1, &err), 0);
	assert_int_equal(sfs_spill_put(s, 1, NULL, 0, d[1], 1, &err), 0);
	assert_false(sfs_spill_sum(s, sum));
	assert_int_equal(sfs_spill_table_fd(s), -1);
	assert_int_equal(sfs_spill_stream(s, true, collect, &got, &err), 0);
	assert_int_equal(got.len, SFS_DIGEST_LEN);
	assert_memory_equal(got.p, d[1], SFS_DIGEST_LEN);
	sfs_spill_free(s);

	assert_int_equal(sfs_spill_new(dir, 1, false, &s, &err), 0);
	assert_int_equal(sfs_spill_put(s, 0, NULL, 0, d[0], 1, &err), 0);
	assert_false(sfs_spill_sum(s, sum));
	sfs_spill_free(s);
	buf_free(&got);
	tmpdir_remove(dir);
}

/* A build that fails leaves nothing in the index directory. */
static void test_index_spill_failure_leaves_nothing(void **state)
{
	struct sfs_indexer_opts o = { .jobs = 2, .hash = true };
	struct sfs_indexer_report rep;
	struct sfs_error err = { 0 };
	struct sfs_index *idx = NULL;
	char *dir = make_source(), *out = tmpdir_new(), *list, want[1024];

	(void)state;
	free(write_at(dir, "c.tar", "not a tar at all", 16));
	o.source = dir;
	o.spill_dir = out;
	assert_int_equal(sfs_indexer_build(&o, NULL, &idx, &rep, &err),
			 -EINVAL);
	assert_null(idx);
	assert_string_equal(
		err.msg,
		"1 shard could not be indexed: c.tar: not a tar archive at byte 0 (Unrecognized archive format); fix or remove it, or run shardfs-index --skip-bad to index the rest");
	list = dir_listing(out);
	assert_string_equal(list, "");
	free(list);
	/* a spill directory that cannot be made: the message says where
	 * and what to do */
	snprintf(want, sizeof(want), "%s/a.jsonl/idx", dir);
	o.spill_dir = want;
	assert_int_equal(sfs_indexer_build(&o, NULL, &idx, &rep, &err),
			 -ENOTDIR);
	snprintf(
		want, sizeof(want),
		"%s/a.jsonl/idx: cannot create the index directory: Not a directory; if the source is read-only, put the index elsewhere with --out DIR",
		dir);
	assert_string_equal(err.msg, want);
	tmpdir_remove(out);
	tmpdir_remove(dir);
}

static void test_index_files_grouped_by_key(void **state)
{
	struct sfs_indexer_opts o = { .format = sfs_format_by_name("files"),
				      .jobs = 1,
				      .hash = true };
	struct sfs_indexer_report rep;
	struct sfs_error err = { 0 };
	struct sfs_index *idx;
	char *dir = tmpdir_new();
	unsigned char want[SFS_DIGEST_LEN];

	(void)state;
	free(write_at(dir, "cat/x.jpg", "JPG", 3));
	free(write_at(dir, "cat/x.cls", "0", 1));
	free(write_at(dir, "cat/x1.jpg", "J1", 2));
	free(write_at(dir, "dog/x.jpg", "D", 1));
	o.source = dir;
	assert_int_equal(sfs_indexer_build(&o, NULL, &idx, &rep, &err), 0);
	assert_int_equal(idx->nshards, 3);
	assert_int_equal(idx->nsamples, 3);
	assert_string_equal(idx->shards[0].path, "cat/x.cls");
	assert_int_equal(idx->shards[0].nmembers, 1);
	assert_string_equal(idx->shards[0].members[0].path, "cat/x.jpg");
	assert_false(sfs_shard_sliceable(&idx->shards[0]));
	sfs_digest_buf("0JPG", 4, want);
	assert_memory_equal(idx->shards[0].digest, want, SFS_DIGEST_LEN);
	assert_string_equal(idx->shards[1].path, "cat/x1.jpg");
	assert_string_equal(idx->shards[2].path, "dog/x.jpg");
	sfs_indexer_report_clear(&rep);
	sfs_index_free(idx);
	tmpdir_remove(dir);
}

/* The files driver's scan, which also empties a/x.jpg, a member of the
 * sample being scanned, as if it were rewritten since the walk. */
static int scan_emptying_member(const struct sfs_scan_in *in,
				struct sfs_scan *out, struct sfs_error *err)
{
	int fd;

	if (!strcmp(in->path, "a/x.cls")) {
		fd = openat(in->dirfd, "a/x.jpg", O_WRONLY | O_TRUNC);
		assert_true(fd >= 0);
		close(fd);
	}
	return sfs_format_by_name("files")->scan(in, out, err);
}

/*
 * A shard whose hashing fails halfway (a member shorter than listed),
 * skipped with skip_bad, leaves nothing in its thread's SHA-256: the next
 * shard that thread hashes gets the digest of its own bytes.
 */
static void test_index_failed_hash_leaves_digest_fresh(void **state)
{
	struct sfs_format_ops ops = *sfs_format_by_name("files");
	struct sfs_indexer_opts o = {
		.format = &ops, .jobs = 1, .hash = true, .skip_bad = true
	};
	struct sfs_indexer_report rep;
	struct sfs_error err = { 0 };
	struct sfs_index *idx;
	char *dir = tmpdir_new();
	unsigned char want[SFS_DIGEST_LEN];

	(void)state;
	ops.scan = scan_emptying_member;
	free(write_at(dir, "a/x.cls", "0", 1));
	free(write_at(dir, "a/x.jpg", "JPG", 3));
	free(write_at(dir, "b/y.jpg", "Y", 1));
	o.source = dir;
	assert_int_equal(sfs_indexer_build(&o, NULL, &idx, &rep, &err), 0);
	assert_int_equal(idx->nshards, 1);
	assert_string_equal(idx->shards[0].path, "b/y.jpg");
	sfs_digest_buf("Y", 1, want);
	assert_memory_equal(idx->shards[0].digest, want, SFS_DIGEST_LEN);
	sfs_indexer_report_clear(&rep);
	sfs_index_free(idx);
	tmpdir_remove(dir);
}

static void test_index_verify_reports_mismatch(void **state)
{
	struct sfs_indexer_opts o = { .jobs = 2 };
	struct sfs_indexer_report rep;
	struct sfs_error err = { 0 };
	struct sfs_index *idx;
	char *dir = make_source(), path[512];
	struct stat st;
	struct timespec ts[2];

	(void)state;
	idx = build(dir, NULL, &rep);
	sfs_indexer_report_clear(&rep);
	assert_int_equal(sfs_indexer_verify(&o, idx, &rep, &err), 0);
	assert_int_equal(rep.nproblems, 0);
	/* same size, same mtime, different bytes: only the hash can tell */
	snprintf(path, sizeof(path), "%s/a.jsonl", dir);
	assert_int_equal(stat(path, &st), 0);
	free(write_at(dir, "a.jsonl", "{}\n{}\n[]\n", 9));
	ts[0] = st.st_atim;
	ts[1] = st.st_mtim;
	assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0);
	assert_int_equal(sfs_indexer_verify(&o, idx, &rep, &err), 0);
	assert_int_equal(rep.nproblems, 1);
	assert_non_null(strstr(rep.problems[0], "a.jsonl: SHA-256 "));
	assert_non_null(strstr(rep.problems[0], ", the index says "));
	sfs_indexer_report_clear(&rep);
	sfs_index_free(idx);
	tmpdir_remove(dir);
}

static void test_index_unsafe_paths(void **state)
{
	(void)state;
	assert_true(sfs_index_path_ok("a/b.tar"));
	assert_true(sfs_index_path_ok("a..b/c"));
	assert_false(sfs_index_path_ok("../a.tar"));
	assert_false(sfs_index_path_ok("a/../../b.tar"));
	assert_false(sfs_index_path_ok("/etc/passwd"));
	assert_false(sfs_index_path_ok("a//b"));
	assert_false(sfs_index_path_ok("./a"));
	assert_false(sfs_index_path_ok("a/"));
	assert_false(sfs_index_path_ok(""));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_index_round_trip),
		cmocka_unit_test(test_index_refresh_reuses_unchanged),
		cmocka_unit_test(test_index_stale_names_shards),
		cmocka_unit_test(test_index_stale_many_shards),
		cmocka_unit_test(test_index_damaged_manifest),
		cmocka_unit_test(test_index_damaged_table),
		cmocka_unit_test(test_index_blocks_file_written),
		cmocka_unit_test(test_index_damaged_block),
		cmocka_unit_test(test_index_check_bounds),
		cmocka_unit_test(test_index_bounds_buf_reads),
		cmocka_unit_test(test_index_blocks_of_borrowed_table),
		cmocka_unit_test(test_index_blocks_checked_by_threads),
		cmocka_unit_test(test_index_bounds_out_of_range),
		cmocka_unit_test(test_index_without_blocks_file),
		cmocka_unit_test(test_index_checksum_of_manifest),
		cmocka_unit_test(test_index_missing),
		cmocka_unit_test(test_index_out_dir_and_read_only_source),
		cmocka_unit_test(test_index_skip_bad),
		cmocka_unit_test(test_index_spill_same_bytes),
		cmocka_unit_test(test_index_spill_merge_same_bytes),
		cmocka_unit_test(test_index_spill_failure_leaves_nothing),
		cmocka_unit_test(test_index_spill_pieces_same_bytes),
		cmocka_unit_test(test_index_spill_bound_pieces_same_bytes),
		cmocka_unit_test(test_index_spill_records_in_pieces),
		cmocka_unit_test(test_index_spill_sum),
		cmocka_unit_test(test_index_files_grouped_by_key),
		cmocka_unit_test(test_index_failed_hash_leaves_digest_fresh),
		cmocka_unit_test(test_index_verify_reports_mismatch),
		cmocka_unit_test(test_index_unsafe_paths),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
