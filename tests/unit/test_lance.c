/*
 * Lance: the bounded protobuf reader on bytes built here (an encoder of the
 * test's own), manifests built here and refused with exact messages, the
 * datasets pylance 14.0.2 wrote (tests/unit/fixtures/lance, made by
 * tests/mount/lance/make_datasets.py) counted as pylance counts them, and
 * deletion files of both kinds, written by pylance and built here.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats/lance/lance_i.h"
#include "helpers.h"
#include "shardfs/lance.h"
#include "shardfs/util.h"

#ifndef LANCE_FIXTURES
#error "LANCE_FIXTURES names tests/unit/fixtures/lance"
#endif

/* ---- a protobuf encoder of the test's own ---- */

static void byte(struct buf *b, unsigned v)
{
	unsigned char c = (unsigned char)v;

	buf_put(b, &c, 1);
}

static void varint(struct buf *b, uint64_t v)
{
	while (v >= 0x80) {
		byte(b, (unsigned)(v & 0x7f) | 0x80);
		v >>= 7;
	}
	byte(b, (unsigned)v);
}

static void key(struct buf *b, unsigned field, unsigned wire)
{
	varint(b, (uint64_t)field << 3 | wire);
}

static void vfield(struct buf *b, unsigned field, uint64_t v)
{
	key(b, field, 0);
	varint(b, v);
}

static void lfield(struct buf *b, unsigned field, const void *p, size_t n)
{
	key(b, field, 2);
	varint(b, n);
	buf_put(b, p, n);
}

/* A field holding message m (consumed). */
static void mfield(struct buf *b, unsigned field, struct buf *m)
{
	lfield(b, field, m->p, m->len);
	buf_free(m);
}

static void le(struct buf *b, uint64_t v, unsigned n)
{
	unsigned i;

	for (i = 0; i < n; i++)
		byte(b, (unsigned)(v >> 8 * i));
}

/* A manifest file: 7 bytes of another section, then the manifest m
 * (consumed) framed and footed as Lance does. */
static struct buf manifest_file(struct buf *m)
{
	struct buf f = { 0 };
	uint64_t pos;

	buf_put(&f, "\x03\0\0\0\x08\x01\x00", 7);
	pos = f.len;
	le(&f, m->len, 4);
	buf_put(&f, m->p, m->len);
	le(&f, pos, 8);
	le(&f, 0, 2);
	le(&f, 2, 2);
	buf_put(&f, "LANC", 4);
	buf_free(m);
	return f;
}

static void reader(struct sfs_pb_reader *r, const struct buf *b,
		   struct sfs_error *err)
{
	sfs_pb_init(r, b->p, b->len, 100, "t.manifest", "Test", err);
}

/* ---- the protobuf reader ---- */

static void test_lance_pb_varints(void **state)
{
	struct sfs_error err = { 0 };
	struct sfs_pb_reader r;
	struct buf b = { 0 };
	uint64_t v;
	int32_t i;
	uint32_t u;

	(void)state;
	varint(&b, 0);
	varint(&b, 300);
	varint(&b, UINT64_MAX);
	varint(&b, (uint64_t)-1); /* int32 -1, sign-extended */
	varint(&b, UINT32_MAX);
	reader(&r, &b, &err);
	assert_int_equal(sfs_pb_varint(&r, &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(sfs_pb_varint(&r, &v), 0);
	assert_int_equal(v, 300);
	assert_int_equal(sfs_pb_varint(&r, &v), 0);
	assert_true(v == UINT64_MAX);
	assert_int_equal(sfs_pb_int32(&r, &i), 0);
	assert_int_equal(i, -1);
	assert_int_equal(sfs_pb_uint32(&r, &u), 0);
	assert_true(u == UINT32_MAX);
	assert_int_equal(r.pos, r.len);
	buf_free(&b);
}

static void test_lance_pb_bad_varints(void **state)
{
	struct sfs_error err = { 0 };
	struct sfs_pb_reader r;
	struct buf b = { 0 };
	uint64_t v;
	int32_t i;
	uint32_t u;

	(void)state;
	buf_put(&b, "\x80\x80", 2);
	reader(&r, &b, &err);
	assert_int_equal(sfs_pb_varint(&r, &v), -EINVAL);
	assert_string_equal(
		err.msg,
		"t.manifest: byte 100: Test: varint runs past the end of the message (2 bytes)");
	buf_free(&b);

	/* 10 continuation bytes: an 11th would be needed */
	buf_put(&b, "\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x00", 11);
	reader(&r, &b, &err);
	assert_int_equal(sfs_pb_varint(&r, &v), -EINVAL);
	assert_string_equal(
		err.msg,
		"t.manifest: byte 100: Test: varint longer than 10 bytes");
	buf_free(&b);

	/* a 10th byte above 1 overflows 64 bits */
	buf_put(&b, "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02", 10);
	reader(&r, &b, &err);
	assert_int_equal(sfs_pb_varint(&r, &v), -EINVAL);
	assert_string_equal(
		err.msg,
		"t.manifest: byte 100: Test: varint does not fit in 64 bits");
	buf_free(&b);

	varint(&b, 5);
	varint(&b, (uint64_t)1 << 31);
	varint(&b, (uint64_t)1 << 32);
	reader(&r, &b, &err);
	r.pos = 1;
	assert_int_equal(sfs_pb_int32(&r, &i), -EINVAL);
	assert_string_equal(
		err.msg,
		"t.manifest: byte 101: Test: int32 value 2147483648 does not fit");
	assert_int_equal(sfs_pb_uint32(&r, &u), -EINVAL);
	assert_string_equal(
		err.msg,
		"t.manifest: byte 106: Test: uint32 value 4294967296 does not fit");
	buf_free(&b);
}

static void test_lance_pb_lengths(void **state)
{
	struct sfs_error err = { 0 };
	struct sfs_pb_reader r, sub;
	struct sfs_pb_field f;
	struct buf b = { 0 };
	const unsigned char *p;
	size_t n;

	(void)state;
	key(&b, 1, 2);
	varint(&b, 5);
	buf_put(&b, "ab", 2);
	reader(&r, &b, &err);
	assert_int_equal(sfs_pb_next(&r, &f), 1);
	assert_int_equal(f.number, 1);
	assert_int_equal(f.wire, SFS_PB_LEN);
	assert_int_equal(sfs_pb_bytes(&r, &p, &n), -EINVAL);
	assert_string_equal(
		err.msg,
		"t.manifest: byte 101: Test: length 5 runs past the end of the message (2 bytes left)");
	/* as a message, the same */
	r.pos = 1;
	assert_int_equal(sfs_pb_message(&r, "Sub", &sub), -EINVAL);
	buf_free(&b);

	/* a length of 2^64 - 1 */
	key(&b, 1, 2);
	varint(&b, UINT64_MAX);
	reader(&r, &b, &err);
	assert_int_equal(sfs_pb_next(&r, &f), 1);
	assert_int_equal(sfs_pb_bytes(&r, &p, &n), -EINVAL);
	assert_string_equal(
		err.msg,
		"t.manifest: byte 101: Test: length 18446744073709551615 runs past the end of the message (0 bytes left)");
	buf_free(&b);

	/* a fixed64 cut short */
	key(&b, 3, 1);
	buf_put(&b, "1234567", 7);
	reader(&r, &b, &err);
	assert_int_equal(sfs_pb_next(&r, &f), 1);
	assert_int_equal(sfs_pb_skip(&r, &f), -EINVAL);
	assert_string_equal(
		err.msg,
		"t.manifest: byte 101: Test: field 3 needs 8 bytes, the message has 7 left");
	buf_free(&b);
}

static void test_lance_pb_nesting(void **state)
{
	struct sfs_error err = { 0 };
	struct sfs_pb_reader r[SFS_PB_DEPTH_MAX + 2];
	struct sfs_pb_field f;
	struct buf b = { 0 }, inner;
	int d, rc = 0;

	(void)state;
	/* 20 messages, each the field 1 of the one around it */
	vfield(&b, 2, 7);
	for (d = 0; d < 20; d++) {
		inner = b;
		memset(&b, 0, sizeof(b));
		mfield(&b, 1, &inner);
	}
	reader(&r[0], &b, &err);
	for (d = 0; d <= SFS_PB_DEPTH_MAX; d++) {
		assert_int_equal(sfs_pb_next(&r[d], &f), 1);
		assert_int_equal(f.number, 1);
		rc = sfs_pb_message(&r[d], "Nested", &r[d + 1]);
		if (rc)
			break;
		assert_int_equal(r[d + 1].depth, d + 1);
	}
	assert_int_equal(d, SFS_PB_DEPTH_MAX);
	assert_int_equal(rc, -EINVAL);
	assert_string_equal(
		err.msg,
		"t.manifest: byte 133: Nested: messages nest deeper than 16");
	buf_free(&b);
}

static void test_lance_pb_unknown_fields(void **state)
{
	struct sfs_error err = { 0 };
	struct sfs_pb_reader r;
	struct sfs_pb_field f;
	struct buf b = { 0 };
	uint64_t v = 0;
	int rc, seen = 0;

	(void)state;
	vfield(&b, 5, 1234567);
	key(&b, 6, 1);
	buf_put(&b, "12345678", 8);
	lfield(&b, 7, "hello", 5);
	key(&b, 8, 5);
	buf_put(&b, "1234", 4);
	vfield(&b, 536870911, 1); /* the highest field number */
	vfield(&b, 1, 42);
	reader(&r, &b, &err);
	while ((rc = sfs_pb_next(&r, &f)) > 0) {
		if (f.number == 1) {
			assert_int_equal(sfs_pb_varint(&r, &v), 0);
			continue;
		}
		assert_int_equal(sfs_pb_skip(&r, &f), 0);
		seen++;
	}
	assert_int_equal(rc, 0);
	assert_int_equal(seen, 5);
	assert_int_equal(v, 42);
	buf_free(&b);
}

static void test_lance_pb_bad_keys(void **state)
{
	static const struct {
		uint64_t key;
		const char *msg;
	} cases[] = {
		{ 1 << 3 | 3,
		  "t.manifest: byte 100: Test: field 1 is a group (wire type 3), which proto3 never writes" },
		{ 2 << 3 | 4,
		  "t.manifest: byte 100: Test: field 2 is a group (wire type 4), which proto3 never writes" },
		{ 3 << 3 | 6,
		  "t.manifest: byte 100: Test: field 3 has invalid wire type 6" },
		{ 4 << 3 | 7,
		  "t.manifest: byte 100: Test: field 4 has invalid wire type 7" },
		{ 0 << 3 | 0,
		  "t.manifest: byte 100: Test: field number 0 is invalid" },
		{ (uint64_t)1 << 32,
		  "t.manifest: byte 100: Test: field number 536870912 is invalid" },
	};
	struct sfs_error err = { 0 };
	struct sfs_pb_reader r;
	struct sfs_pb_field f;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct buf b = { 0 };

		varint(&b, cases[i].key);
		reader(&r, &b, &err);
		assert_int_equal(sfs_pb_next(&r, &f), -EINVAL);
		assert_string_equal(err.msg, cases[i].msg);
		buf_free(&b);
	}
}

/* ---- manifests built here ---- */

static struct buf data_file(const char *path, bool packed)
{
	struct buf df = { 0 }, ids = { 0 };

	lfield(&df, 1, path, strlen(path));
	if (packed) {
		varint(&ids, 0);
		varint(&ids, 1);
		varint(&ids, (uint64_t)-2); /* tombstoned */
		mfield(&df, 2, &ids);
	} else {
		vfield(&df, 2, 4);
	}
	vfield(&df, 4, 2);
	vfield(&df, 6, 123);
	return df;
}

/* A manifest of two fragments; extra (consumed, may be empty) is appended
 * to the second fragment, flags set as reader_feature_flags. */
static struct buf two_fragments(struct buf *extra, uint64_t flags)
{
	struct buf m = { 0 }, fr = { 0 }, df, del = { 0 };

	lfield(&m, 1, "\x0a\x02id", 4); /* a schema field, skipped */
	vfield(&fr, 1, 0);
	df = data_file("a.lance", true);
	mfield(&fr, 2, &df);
	vfield(&fr, 4, 10);
	mfield(&m, 2, &fr);
	vfield(&fr, 1, 7);
	df = data_file("sub/b.lance", false);
	mfield(&fr, 2, &df);
	vfield(&del, 1, 1);
	vfield(&del, 2, 3);
	vfield(&del, 3, 99);
	vfield(&del, 4, 4);
	vfield(&del, 9, 1); /* unknown */
	mfield(&fr, 3, &del);
	vfield(&fr, 4, 20);
	lfield(&fr, 5, "rowids", 6); /* inline row ids, skipped */
	if (extra && extra->len)
		buf_put(&fr, extra->p, extra->len);
	if (extra)
		buf_free(extra);
	mfield(&m, 2, &fr);
	vfield(&m, 3, 5);
	if (flags)
		vfield(&m, 9, flags);
	vfield(&m, 10, 1);
	lfield(&m, 13, "\x0a\x05lance", 7); /* writer version, skipped */
	return m;
}

static void test_lance_manifest_fields(void **state)
{
	struct sfs_error err = { 0 };
	struct sfs_lance_manifest *m;
	struct buf mb = two_fragments(NULL, 3);
	struct buf f = manifest_file(&mb);
	const struct sfs_lance_fragment *fr;

	(void)state;
	assert_int_equal(sfs_lance_manifest_parse(f.p, f.len, "t.manifest", &m,
						  &err),
			 0);
	assert_int_equal(m->version, 5);
	assert_int_equal(m->reader_flags, 3);
	assert_int_equal(m->writer_flags, 1);
	assert_int_equal(m->nfragments, 2);
	fr = &m->fragments[0];
	assert_int_equal(fr->id, 0);
	assert_int_equal(fr->physical_rows, 10);
	assert_false(fr->deletion.present);
	assert_int_equal(fr->nfiles, 1);
	assert_string_equal(fr->files[0].path, "a.lance");
	assert_int_equal(fr->files[0].nfields, 3);
	assert_int_equal(fr->files[0].fields[1], 1);
	assert_int_equal(fr->files[0].fields[2], -2);
	assert_int_equal(fr->files[0].size, 123);
	fr = &m->fragments[1];
	assert_int_equal(fr->id, 7);
	assert_int_equal(fr->physical_rows, 20);
	assert_string_equal(fr->files[0].path, "sub/b.lance");
	assert_int_equal(fr->files[0].nfields, 1);
	assert_int_equal(fr->files[0].fields[0], 4);
	assert_true(fr->deletion.present);
	assert_int_equal(fr->deletion.type, SFS_LANCE_DELETION_BITMAP);
	assert_int_equal(fr->deletion.read_version, 3);
	assert_int_equal(fr->deletion.id, 99);
	assert_int_equal(fr->deletion.num_deleted, 4);
	{
		char *p = sfs_lance_deletion_path(fr);

		assert_string_equal(p, "_deletions/7-3-99.bin");
		free(p);
	}
	sfs_lance_manifest_free(m);
	buf_free(&f);
}

/*
 * A manifest of many minimal fragments (9 bytes each: a data file "a", one
 * row) decodes to ~450 bytes each: 1 048 577 of them (9 MiB) pass
 * SFS_LANCE_DECODED_MAX when the fragments' array would double, and are
 * refused there; 100 000 real fragments (a 50-byte path, 100 field ids)
 * pass.
 */
static void test_lance_manifest_decoded_budget(void **state)
{
	struct sfs_error err = { 0 };
	struct sfs_lance_manifest *m = NULL;
	struct buf mb = { 0 }, fr = { 0 }, df = { 0 }, ids = { 0 }, f;
	unsigned char one[9];
	size_t i;

	(void)state;
	lfield(&df, 1, "a", 1);
	mfield(&fr, 2, &df);
	vfield(&fr, 4, 1);
	mfield(&mb, 2, &fr);
	assert_int_equal(mb.len, 9);
	memcpy(one, mb.p, 9);
	for (i = 1; i < 1048577; i++)
		buf_put(&mb, one, 9);
	vfield(&mb, 3, 1);
	f = manifest_file(&mb);
	assert_int_equal(sfs_lance_manifest_parse(f.p, f.len, "t.manifest", &m,
						  &err),
			 -EFBIG);
	assert_null(m);
	/* the 1 048 577th fragment's bytes: 11 + 9 * 1048576 + 2 */
	assert_string_equal(
		err.msg,
		"t.manifest: byte 9437197: the manifest decodes to more than the 512 MiB shardfs decodes (1048576 fragments so far): "
		"compact the dataset into fewer, larger fragments (lance.dataset(uri).optimize.compact_files())");
	buf_free(&f);

	for (i = 0; i < 100; i++)
		varint(&ids, i);
	for (i = 0; i < 100000; i++) {
		char path[64];

		snprintf(path, sizeof(path),
			 "%08zx-0000-4000-8000-000000000000.lance", i);
		vfield(&fr, 1, i);
		lfield(&df, 1, path, strlen(path));
		lfield(&df, 2, ids.p, ids.len);
		vfield(&df, 6, 1 << 20);
		mfield(&fr, 2, &df);
		vfield(&fr, 4, 1000);
		mfield(&mb, 2, &fr);
	}
	buf_free(&ids);
	vfield(&mb, 3, 1);
	f = manifest_file(&mb);
	assert_int_equal(sfs_lance_manifest_parse(f.p, f.len, "t.manifest", &m,
						  &err),
			 0);
	assert_int_equal(m->nfragments, 100000);
	assert_int_equal(m->fragments[99999].files[0].nfields, 100);
	sfs_lance_manifest_free(m);
	buf_free(&f);
}

/* Parse a manifest of two fragments with extra and flags; expect msg
 * (a printf template of the file's length, when it holds %zu). */
static void refused(struct buf extra, uint64_t flags, const char *msg)
{
	struct sfs_error err = { 0 };
	struct sfs_lance_manifest *m = NULL;
	struct buf mb = two_fragments(&extra, flags);
	struct buf f = manifest_file(&mb);

	assert_int_equal(sfs_lance_manifest_parse(f.p, f.len, "t.manifest", &m,
						  &err),
			 -EINVAL);
	assert_null(m);
	assert_string_equal(err.msg, msg);
	buf_free(&f);
}

static void test_lance_manifest_refused(void **state)
{
	struct buf e = { 0 }, df;

	(void)state;
	refused(e, 64 | 1,
		"t.manifest: byte 101: Manifest: reader feature flags 0x40 are set that this shardfs does not know (it reads 0x2f): the dataset needs a newer reader; upgrade shardfs, or write the dataset with the Lance version shardfs was tested with (docs/formats.md)");
	refused(e, 16,
		"t.manifest: byte 101: Manifest: reader feature flag 16 (base paths: files outside the dataset directory, a shallow clone) is set: only datasets whose files are all inside their directory are read; deep-copy the dataset first");
	/* a second data file, in another base */
	df = data_file("c.lance", false);
	vfield(&df, 7, 2);
	mfield(&e, 2, &df);
	refused(e, 0,
		"t.manifest: byte 116: DataFile: the data file lives in another base path (base_id 2: a shallow clone or imported files): only data files inside the dataset are read; deep-copy the dataset first");
	memset(&e, 0, sizeof(e));
	df = data_file("../c.lance", false);
	mfield(&e, 2, &df);
	refused(e, 0,
		"t.manifest: byte 101: DataFile: a data file path is missing, absolute or holds \"..\" (\"../c.lance\"); the manifest is damaged: restore it, or write the dataset again");
	memset(&e, 0, sizeof(e));
	vfield(&e, 4, 0); /* physical_rows 0 after 20: as if never given */
	refused(e, 0,
		"t.manifest: byte 54: DataFragment: fragment 7 does not say how many rows it holds (physical_rows; Lance before 0.8 did not write it), so they cannot be counted without reading its data: rewrite the dataset with a current pylance (lance.write_dataset(lance.dataset(old).to_table(), new))");
	memset(&e, 0, sizeof(e));
	vfield(&e, 4, ((uint64_t)1 << 32) + 1);
	refused(e, 0,
		"t.manifest: byte 54: DataFragment: fragment 7 claims 4294967297 rows, more than the 2^32 a fragment can address; the manifest is damaged");
	memset(&e, 0, sizeof(e));
	vfield(&e, 4, 3); /* fewer rows than the 4 deleted */
	refused(e, 0,
		"t.manifest: byte 79: DataFragment: fragment 7 has 3 rows but its deletion file claims 4 deleted; the manifest is damaged");
	memset(&e, 0, sizeof(e));
	lfield(&e, 3, "\x08\x02", 2); /* a deletion file of type 2 */
	refused(e, 0,
		"t.manifest: byte 101: DeletionFile: deletion file type 2 is unknown (0 ARROW_ARRAY and 1 BITMAP are read): the dataset is newer than this shardfs");
	memset(&e, 0, sizeof(e));
	lfield(&e, 3, "\x38\x01", 2); /* a deletion file in base 1 */
	refused(e, 0,
		"t.manifest: byte 101: DeletionFile: the deletion file lives in another base path (base_id 1): only files inside the dataset are read; deep-copy the dataset first");
	memset(&e, 0, sizeof(e));
	vfield(&e, 4, 1); /* physical_rows as a wrong wire type */
	e.p[0] = 4 << 3 | 5;
	refused(e, 0,
		"t.manifest: byte 99: DataFragment: field 4 (physical_rows) has wire type 5, expected 0");
}

static void test_lance_manifest_framing(void **state)
{
	struct sfs_error err = { 0 };
	struct sfs_lance_manifest *m = NULL;
	struct buf mb = two_fragments(NULL, 0);
	struct buf f = manifest_file(&mb);

	(void)state;
	/* no magic */
	assert_int_equal(sfs_lance_manifest_parse(f.p, f.len - 1, "t.manifest",
						  &m, &err),
			 -EINVAL);
	assert_string_equal(
		err.msg,
		"t.manifest: byte 123: no \"LANC\" magic at the end: not a Lance manifest, or truncated; restore it from the dataset's writer");
	/* the position past the footer */
	f.p[f.len - 16] = 0xff;
	assert_int_equal(sfs_lance_manifest_parse(f.p, f.len, "t.manifest", &m,
						  &err),
			 -EINVAL);
	assert_string_equal(
		err.msg,
		"t.manifest: byte 112: the manifest position 255 is past the footer (byte 112): the manifest is damaged or truncated");
	/* the length past the footer */
	f.p[f.len - 16] = 7;
	f.p[8] = 0xff;
	assert_int_equal(sfs_lance_manifest_parse(f.p, f.len, "t.manifest", &m,
						  &err),
			 -EINVAL);
	assert_string_equal(
		err.msg,
		"t.manifest: byte 7: the manifest's length 65381 runs past the footer (101 bytes left): the manifest is damaged or truncated");
	/* too short for a footer */
	assert_int_equal(sfs_lance_manifest_parse(f.p, 3, "t.manifest", &m,
						  &err),
			 -EINVAL);
	assert_string_equal(
		err.msg,
		"t.manifest: byte 0: no \"LANC\" magic at the end: not a Lance manifest, or truncated; restore it from the dataset's writer");
	assert_null(m);
	buf_free(&f);
}

/* ---- the datasets pylance wrote ---- */

struct collect {
	uint64_t runs[16][2];
	size_t n;
};

static int collect_run(void *arg, uint64_t first, uint64_t count)
{
	struct collect *c = arg;

	assert_true(c->n < 16);
	c->runs[c->n][0] = first;
	c->runs[c->n][1] = count;
	c->n++;
	return 0;
}

static int fixtures(void)
{
	int fd = open(LANCE_FIXTURES, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	assert_true(fd >= 0);
	return fd;
}

/* Open dataset ds of the fixtures at its newest version. */
static struct sfs_lance_dataset *open_newest(int dirfd, const char *ds,
					     uint64_t want_version)
{
	struct sfs_error err = { 0 };
	struct sfs_lance_dataset *d = NULL;
	uint64_t version;
	char *name, *path;

	assert_int_equal(sfs_lance_latest(dirfd, ds, &name, &version, &err), 1);
	assert_int_equal(version, want_version);
	assert_true(asprintf(&path, "%s/_versions/%s", ds, name) > 0);
	if (sfs_lance_open(dirfd, path, -1, &d, &err))
		fail_msg("%s", err.msg);
	free(name);
	free(path);
	return d;
}

static void test_lance_pylance_frags(void **state)
{
	/* tests/unit/fixtures/lance/expected.json, as pylance reported it */
	static const uint64_t want[][4] = {
		/* id, physical_rows, deleted, type (2: none) */
		{ 0, 1, 0, 2 },	  { 1, 300, 4, SFS_LANCE_DELETION_ARROW },
		{ 2, 300, 1, 0 }, { 3, 100, 0, 2 },
		{ 4, 37, 1, 0 },  { 5, 6000, 5000, SFS_LANCE_DELETION_BITMAP },
	};
	struct sfs_error err = { 0 };
	struct collect c = { 0 };
	int dirfd = fixtures();
	struct sfs_lance_dataset *d = open_newest(dirfd, "frags.lance", 7);
	size_t i;

	(void)state;
	assert_int_equal(d->rows, 1732);
	assert_int_equal(d->m->nfragments, 6);
	assert_int_equal(d->m->reader_flags, SFS_LANCE_FLAG_DELETION_FILES);
	for (i = 0; i < 6; i++) {
		const struct sfs_lance_fragment *fr = &d->m->fragments[i];

		assert_int_equal(fr->id, want[i][0]);
		assert_int_equal(fr->physical_rows, want[i][1]);
		assert_int_equal(fr->deleted, want[i][2]);
		assert_int_equal(fr->deletion.present, want[i][3] != 2);
		if (want[i][3] != 2)
			assert_int_equal(fr->deletion.type, want[i][3]);
		assert_int_equal(fr->nfiles, 1);
		assert_int_equal(fr->files[0].nfields, 2);
	}
	/* fragment 1 holds ids 1..300; ids 3, 5, 7 and 250 are deleted */
	assert_int_equal(
		sfs_lance_live_runs(dirfd, d, 1, collect_run, &c, &err), 0);
	assert_int_equal(c.n, 5);
	assert_int_equal(c.runs[0][0], 0);
	assert_int_equal(c.runs[0][1], 2);
	assert_int_equal(c.runs[1][0], 3);
	assert_int_equal(c.runs[1][1], 1);
	assert_int_equal(c.runs[2][0], 5);
	assert_int_equal(c.runs[2][1], 1);
	assert_int_equal(c.runs[3][0], 7);
	assert_int_equal(c.runs[3][1], 242);
	assert_int_equal(c.runs[4][0], 250);
	assert_int_equal(c.runs[4][1], 50);
	/* fragment 5 holds ids 738..6737; 1000..5999 are deleted (a bitmap) */
	c.n = 0;
	assert_int_equal(
		sfs_lance_live_runs(dirfd, d, 5, collect_run, &c, &err), 0);
	assert_int_equal(c.n, 2);
	assert_int_equal(c.runs[0][0], 0);
	assert_int_equal(c.runs[0][1], 262);
	assert_int_equal(c.runs[1][0], 5262);
	assert_int_equal(c.runs[1][1], 738);
	/* a fragment without deletions is one run */
	c.n = 0;
	assert_int_equal(
		sfs_lance_live_runs(dirfd, d, 3, collect_run, &c, &err), 0);
	assert_int_equal(c.n, 1);
	assert_int_equal(c.runs[0][1], 100);
	sfs_lance_free(d);
	close(dirfd);
}

static void test_lance_pylance_v1_and_stable(void **state)
{
	int dirfd = fixtures();
	struct sfs_lance_dataset *d = open_newest(dirfd, "v1.lance", 3);

	(void)state;
	assert_string_equal(d->manifest_path, "v1.lance/_versions/3.manifest");
	assert_int_equal(d->rows, 69);
	assert_int_equal(d->m->nfragments, 2);
	assert_int_equal(d->m->fragments[1].physical_rows, 20);
	assert_int_equal(d->m->fragments[1].deleted, 1);
	sfs_lance_free(d);
	d = open_newest(dirfd, "stable.lance", 2);
	assert_int_equal(d->rows, 37);
	assert_int_equal(d->m->reader_flags,
			 SFS_LANCE_FLAG_DELETION_FILES |
				 SFS_LANCE_FLAG_STABLE_ROW_IDS);
	sfs_lance_free(d);
	close(dirfd);
}

static void test_lance_pylance_every_version(void **state)
{
	/* frags.lance's versions 1..7: rows after each write */
	static const uint64_t rows[] = { 1, 701, 738, 6738, 6733, 1733, 1732 };
	struct sfs_error err = { 0 };
	int dirfd = fixtures();
	uint64_t v;

	(void)state;
	for (v = 1; v <= 7; v++) {
		struct sfs_lance_dataset *d;
		char *path;

		assert_true(asprintf(&path,
				     "frags.lance/_versions/%020llu.manifest",
				     (unsigned long long)(UINT64_MAX - v)) > 0);
		if (sfs_lance_open(dirfd, path, -1, &d, &err))
			fail_msg("%s", err.msg);
		assert_int_equal(d->m->version, v);
		assert_int_equal(d->rows, rows[v - 1]);
		sfs_lance_free(d);
		free(path);
	}
	close(dirfd);
}

static void test_lance_find_version(void **state)
{
	struct sfs_error err = { 0 };
	const struct sfs_format_ops *found = NULL;
	char *dir = tmpdir_new(), *name = NULL, *shard = NULL, want[64];
	int dirfd = fixtures(), tmpfd;
	uint64_t v, got;

	(void)state;
	/* V2 names: 2^64 - 1 - N, 20 digits */
	for (v = 1; v <= 7; v++) {
		assert_int_equal(sfs_lance_find(dirfd, "frags.lance", v, &name,
						&got, &err),
				 1);
		snprintf(want, sizeof(want), "%020llu.manifest",
			 (unsigned long long)(UINT64_MAX - v));
		assert_string_equal(name, want);
		assert_int_equal(got, v);
		free(name);
	}
	/* V1 names: N */
	assert_int_equal(
		sfs_lance_find(dirfd, "v1.lance", 2, &name, &got, &err), 1);
	assert_string_equal(name, "2.manifest");
	free(name);
	/* through the driver, as shardfs-index --dataset-version asks */
	assert_int_equal(sfs_format_dataset(NULL, dirfd, "frags.lance", 3,
					    &found, &shard, &err),
			 1);
	assert_string_equal(found->name, "lance");
	assert_string_equal(
		shard, "frags.lance/_versions/18446744073709551612.manifest");
	free(shard);
	/* a version the dataset has not: the versions it has */
	assert_int_equal(sfs_lance_find(dirfd, "frags.lance", 9, &name, &got,
					&err),
			 -ENOENT);
	assert_null(name);
	assert_string_equal(
		err.msg,
		"frags.lance/_versions: the dataset has no version 9 (no 9.manifest, no 18446744073709551606.manifest); its versions are 1-7: index one of those (shardfs-index --dataset-version N), or leave the option out for the newest");
	sfs_error_clear(&err);
	/* both schemes in one directory, gaps listed as ranges */
	tmpfd = open(dir, O_RDONLY | O_DIRECTORY);
	free(write_at(dir, "_versions/2.manifest", "", 0));
	free(write_at(dir, "_versions/3.manifest", "", 0));
	free(write_at(dir, "_versions/18446744073709551611.manifest", "", 0));
	free(write_at(dir, "_versions/10.manifest", "", 0));
	free(write_at(dir, "_versions/latest_version_hint.json", "{}", 2));
	assert_int_equal(sfs_lance_find(tmpfd, "", 4, &name, &got, &err), 1);
	assert_string_equal(name, "18446744073709551611.manifest");
	free(name);
	assert_int_equal(sfs_lance_find(tmpfd, "", 5, &name, &got, &err),
			 -ENOENT);
	assert_string_equal(
		err.msg,
		"_versions: the dataset has no version 5 (no 5.manifest, no 18446744073709551610.manifest); its versions are 2-4, 10: index one of those (shardfs-index --dataset-version N), or leave the option out for the newest");
	/* no manifest at all: not a dataset, whatever the version */
	free(write_at(dir, "e/_versions/latest_version_hint.json", "{}", 2));
	assert_int_equal(sfs_lance_find(tmpfd, "e", 5, &name, &got, &err), 0);
	close(tmpfd);
	close(dirfd);
	tmpdir_remove(dir);
}

static void test_lance_not_a_dataset(void **state)
{
	struct sfs_error err = { 0 };
	char *dir = tmpdir_new(), *name = NULL, *p;
	uint64_t v;
	int dirfd = open(dir, O_RDONLY | O_DIRECTORY);

	(void)state;
	assert_int_equal(sfs_lance_latest(dirfd, "", &name, &v, &err), 0);
	/* a symlink called _versions: not a dataset either */
	assert_int_equal(symlinkat("/tmp", dirfd, "_versions"), 0);
	assert_int_equal(sfs_lance_latest(dirfd, "", &name, &v, &err), 0);
	assert_int_equal(unlinkat(dirfd, "_versions", 0), 0);
	free(write_at(dir, "_versions/latest_version_hint.json", "{}", 2));
	free(write_at(dir, "_versions/x.manifest", "", 0));
	free(write_at(dir, "_versions/123456789012345678901.manifest", "", 0));
	/* a _versions/ of something else: not a dataset */
	assert_int_equal(sfs_lance_latest(dirfd, "", &name, &v, &err), 0);
	p = write_at(dir, "_versions/2.manifest", "", 0);
	free(p);
	p = write_at(dir, "_versions/10.manifest", "", 0);
	free(p);
	p = write_at(dir, "_versions/18446744073709551613.manifest", "", 0);
	free(p);
	assert_int_equal(sfs_lance_latest(dirfd, "", &name, &v, &err), 1);
	assert_int_equal(v, 10);
	assert_string_equal(name, "10.manifest");
	free(name);
	close(dirfd);
	tmpdir_remove(dir);
}

/* ---- deletion files ---- */

static int deletion(const struct buf *b, int type, uint64_t rows,
		    struct collect *c, uint64_t *deleted, struct sfs_error *err)
{
	c->n = 0;
	return sfs_lance_deletion_parse(b->p, b->len, type, "d.bin", rows,
					collect_run, c, deleted, err);
}

static void u16(struct buf *b, unsigned v)
{
	le(b, v, 2);
}

static void test_lance_roaring(void **state)
{
	struct sfs_error err = { 0 };
	struct collect c;
	struct buf b = { 0 };
	uint64_t n;
	unsigned k;

	(void)state;
	/* no runs: key 0 holds 1 2 3 10, key 1 holds 5 */
	le(&b, 12346, 4);
	le(&b, 2, 4);
	u16(&b, 0), u16(&b, 3), u16(&b, 1), u16(&b, 0);
	le(&b, 24, 4), le(&b, 32, 4);
	u16(&b, 1), u16(&b, 2), u16(&b, 3), u16(&b, 10);
	u16(&b, 5);
	assert_int_equal(deletion(&b, 1, 70000, &c, &n, &err), 0);
	assert_int_equal(n, 5);
	assert_int_equal(c.n, 3);
	assert_int_equal(c.runs[0][0], 1);
	assert_int_equal(c.runs[0][1], 3);
	assert_int_equal(c.runs[1][0], 10);
	assert_int_equal(c.runs[2][0], 65541);
	/* past the fragment */
	assert_int_equal(deletion(&b, 1, 65541, &c, &n, &err), -EINVAL);
	assert_string_equal(
		err.msg,
		"d.bin: byte 32: deleted row 65541 is past the fragment's 65541 rows; the deletion file belongs to another fragment or is damaged");
	/* a value given twice */
	b.p[30] = 3;
	assert_int_equal(deletion(&b, 1, 70000, &c, &n, &err), -EINVAL);
	assert_string_equal(
		err.msg,
		"d.bin: byte 30: row 3 is deleted twice or out of order; the deletion file is damaged: restore it");
	b.p[30] = 10;
	/* a byte too many */
	byte(&b, 0);
	assert_int_equal(deletion(&b, 1, 70000, &c, &n, &err), -EINVAL);
	assert_string_equal(
		err.msg,
		"d.bin: byte 34: bytes follow the last container; the deletion file is damaged or not a Roaring bitmap: restore it");
	/* cut short */
	b.len -= 4;
	assert_int_equal(deletion(&b, 1, 70000, &c, &n, &err), -EINVAL);
	assert_string_equal(
		err.msg,
		"d.bin: byte 24: an array container is cut; the deletion file is damaged or not a Roaring bitmap: restore it");
	/* keys that do not rise */
	b.len += 3;
	b.p[12] = 0;
	assert_int_equal(deletion(&b, 1, 70000, &c, &n, &err), -EINVAL);
	assert_string_equal(
		err.msg,
		"d.bin: byte 12: container keys do not rise; the deletion file is damaged or not a Roaring bitmap: restore it");
	buf_free(&b);

	/* runs: container 0 a run container [100, 150) [200, 201), container
	 * 1 an array holding 0 (no offsets below 4 containers) */
	le(&b, 12347 | 1 << 16, 4);
	byte(&b, 1);
	u16(&b, 0), u16(&b, 50), u16(&b, 1), u16(&b, 0);
	u16(&b, 2), u16(&b, 100), u16(&b, 49), u16(&b, 200), u16(&b, 0);
	u16(&b, 0);
	assert_int_equal(deletion(&b, 1, 1 << 20, &c, &n, &err), 0);
	assert_int_equal(n, 52);
	assert_int_equal(c.n, 3);
	assert_int_equal(c.runs[0][0], 100);
	assert_int_equal(c.runs[0][1], 50);
	assert_int_equal(c.runs[1][0], 200);
	assert_int_equal(c.runs[2][0], 65536);
	/* a header cardinality the runs contradict */
	b.p[7] = 60;
	assert_int_equal(deletion(&b, 1, 1 << 20, &c, &n, &err), -EINVAL);
	assert_string_equal(
		err.msg,
		"d.bin: byte 7: a container holds another number of values than its header says; the deletion file is damaged or not a Roaring bitmap: restore it");
	buf_free(&b);

	/* a bitset container: every row from 0 to 4999 but 17 */
	le(&b, 12346, 4);
	le(&b, 1, 4);
	u16(&b, 0), u16(&b, 4998);
	le(&b, 16, 4);
	for (k = 0; k < 8192; k++)
		byte(&b, k < 625 ? 0xff : 0);
	b.p[16 + 2] &= (unsigned char)~(1 << 1);
	assert_int_equal(deletion(&b, 1, 5000, &c, &n, &err), 0);
	assert_int_equal(n, 4999);
	assert_int_equal(c.n, 2);
	assert_int_equal(c.runs[0][1], 17);
	assert_int_equal(c.runs[1][0], 18);
	assert_int_equal(c.runs[1][1], 4982);
	buf_free(&b);

	le(&b, 12345, 4);
	le(&b, 0, 4);
	assert_int_equal(deletion(&b, 1, 10, &c, &n, &err), -EINVAL);
	assert_string_equal(
		err.msg,
		"d.bin: byte 0: unknown cookie; the deletion file is damaged or not a Roaring bitmap: restore it");
	buf_free(&b);
}

static void test_lance_pylance_deletions(void **state)
{
	struct sfs_error err = { 0 };
	struct collect c;
	struct buf b;
	uint64_t n;

	(void)state;
	/* ids 0..999 of 20 000, an Arrow array of ZSTD-compressed values */
	b = read_all(LANCE_FIXTURES "/deletions/first-1000-of-20000.arrow");
	assert_int_equal(deletion(&b, 0, 20000, &c, &n, &err), 0);
	assert_int_equal(n, 1000);
	assert_int_equal(c.n, 1);
	assert_int_equal(c.runs[0][0], 0);
	assert_int_equal(c.runs[0][1], 1000);
	assert_int_equal(deletion(&b, 0, 999, &c, &n, &err), -EINVAL);
	assert_string_equal(
		err.msg,
		"d.bin: byte 280: the batch holds more rows than its fragment; the deletion file is damaged or not the Arrow IPC file Lance writes: restore it");
	/* damaged ZSTD */
	b.p[0x1d0] ^= 0x55;
	assert_int_equal(deletion(&b, 0, 20000, &c, &n, &err), -EINVAL);
	assert_string_equal(
		err.msg,
		"d.bin: byte 456: the ZSTD values do not decompress to their stated length; the deletion file is damaged or not the Arrow IPC file Lance writes: restore it");
	b.p[0x1d0] ^= 0x55;
	b.len--;
	assert_int_equal(deletion(&b, 0, 20000, &c, &n, &err), -EINVAL);
	assert_string_equal(
		err.msg,
		"d.bin: byte 0: no ARROW1 magic at both ends; the deletion file is damaged or not the Arrow IPC file Lance writes: restore it");
	buf_free(&b);
	/* every third row of 20 000, a Roaring bitset */
	b = read_all(LANCE_FIXTURES "/deletions/every-3rd-of-20000.bin");
	assert_int_equal(sfs_lance_deletion_parse(b.p, b.len, 1, "d.bin", 20000,
						  NULL, NULL, &n, &err),
			 0);
	assert_int_equal(n, 6667);
	buf_free(&b);
}

/* ---- readers' datasets ---- */

static void test_lance_view_reads_back(void **state)
{
	/* live rows 430..439 (fragment 2), then 0..2 (fragments 0 and 1),
	 * then 1000..1731 (fragment 5: its bitmap), then 430 again */
	static const struct sfs_run runs[] = {
		{ 430, 10 }, { 0, 3 }, { 1000, 732 }, { 430, 1 }
	};
	struct sfs_error err = { 0 };
	int dirfd = fixtures();
	struct sfs_lance_dataset *d = open_newest(dirfd, "frags.lance", 7);
	struct sfs_dataset_view *v;
	struct sfs_lance_manifest *m;
	const struct sfs_dataset_file *man = NULL;
	char name[64];
	uint64_t live = 0, n;
	size_t i, k, ndata = 0;

	(void)state;
	if (sfs_lance_view_build(dirfd, d, runs, 4, &v, &err))
		fail_msg("%s", err.msg);
	assert_int_equal(v->rows, 10 + 3 + 732 + 1);
	for (i = 0; i < v->nfiles; i++) {
		if (!strncmp(v->files[i].path, "_versions/", 10)) {
			assert_null(man); /* one manifest */
			man = &v->files[i];
		}
		if (v->files[i].source) {
			assert_null(v->files[i].bytes);
			assert_memory_equal(v->files[i].path, "data/", 5);
			assert_memory_equal(v->files[i].source, "frags.lance/",
					    12);
			assert_string_equal(v->files[i].source + 12,
					    v->files[i].path);
			ndata++;
		}
	}
	assert_non_null(man);
	assert_int_equal(ndata, 4); /* fragments 0, 1, 2 and 5's */
	assert_int_equal(sfs_lance_manifest_parse(man->bytes, man->len, "v", &m,
						  &err),
			 0);
	/* the name is its version, and the version names its bytes */
	assert_true(m->version > 0 && m->version < 1000000000000000000ULL);
	snprintf(name, sizeof(name), "_versions/%llu.manifest",
		 (unsigned long long)m->version);
	assert_string_equal(man->path, name);
	/* fragment 0 has 1 live row, 1 296, 2 299, 3 100, 4 36, 5 1000 */
	assert_int_equal(m->nfragments, 1 + 2 + 1 + 1);
	for (i = 0; i < m->nfragments; i++) {
		const struct sfs_lance_fragment *f = &m->fragments[i];
		char *path = sfs_lance_deletion_path(f);

		assert_int_equal(f->id, i);
		if (!f->deletion.present) {
			live += f->physical_rows;
			free(path);
			continue;
		}
		for (k = 0; k < v->nfiles; k++)
			if (!strcmp(v->files[k].path, path))
				break;
		assert_true(k < v->nfiles);
		assert_int_equal(sfs_lance_deletion_parse(
					 v->files[k].bytes, v->files[k].len,
					 (int)f->deletion.type, path,
					 f->physical_rows, NULL, NULL, &n,
					 &err),
				 0);
		assert_int_equal(n, f->deletion.num_deleted);
		live += f->physical_rows - n;
		free(path);
	}
	assert_int_equal(live, v->rows);
	sfs_lance_manifest_free(m);
	sfs_dataset_view_free(v);
	sfs_lance_free(d);
	close(dirfd);
}

/* Copy file rel of the fixtures' frags.lance to dir/frags.lance/rel. */
static void copy_fixture(const char *dir, const char *rel)
{
	struct buf b;
	char *src, *dst;

	assert_true(asprintf(&src, "%s/frags.lance/%s", LANCE_FIXTURES, rel) >
		    0);
	assert_true(asprintf(&dst, "frags.lance/%s", rel) > 0);
	b = read_all(src);
	free(write_at(dir, dst, b.p, b.len));
	buf_free(&b);
	free(src);
	free(dst);
}

static void views_equal(const struct sfs_dataset_view *a,
			const struct sfs_dataset_view *b)
{
	size_t i;

	assert_int_equal(a->rows, b->rows);
	assert_string_equal(a->root, b->root);
	assert_int_equal(a->nfiles, b->nfiles);
	for (i = 0; i < a->nfiles; i++) {
		assert_string_equal(a->files[i].path, b->files[i].path);
		assert_int_equal(a->files[i].len, b->files[i].len);
		if (a->files[i].len)
			assert_memory_equal(a->files[i].bytes,
					    b->files[i].bytes, a->files[i].len);
		assert_int_equal(!a->files[i].source, !b->files[i].source);
		if (a->files[i].source)
			assert_string_equal(a->files[i].source,
					    b->files[i].source);
		assert_int_equal(a->files[i].size, b->files[i].size);
	}
}

static void test_lance_view_opens_its_fragments_only(void **state)
{
	/* fragments 2, 0, 1 and 5 (test_lance_view_reads_back) */
	static const struct sfs_run runs[] = {
		{ 430, 10 }, { 0, 3 }, { 1000, 732 }, { 430, 1 }
	};
	/* live rows 596..695 are fragment 3's, 696..731 fragment 4's */
	static const struct sfs_run frag3[] = { { 600, 5 } };
	static const struct sfs_run frag4[] = { { 700, 5 } };
	struct sfs_error err = { 0 };
	int fix = fixtures(), dirfd;
	struct sfs_lance_dataset *full = open_newest(fix, "frags.lance", 7);
	struct sfs_lance_dataset *d, *again;
	struct sfs_dataset_view *a = NULL, *b = NULL;
	char *dir = tmpdir_new(), *rel, *p, want[512];
	const char *mpath =
		"frags.lance/_versions/18446744073709551608.manifest";
	size_t f;

	(void)state;
	/* a copy of the dataset: the newest manifest, its data and deletion
	 * files */
	copy_fixture(dir, mpath + strlen("frags.lance/"));
	for (f = 0; f < full->m->nfragments; f++) {
		const struct sfs_lance_fragment *fr = &full->m->fragments[f];

		assert_true(asprintf(&rel, "data/%s", fr->files[0].path) > 0);
		copy_fixture(dir, rel);
		free(rel);
		if (!fr->deletion.present)
			continue;
		rel = sfs_lance_deletion_path(fr);
		copy_fixture(dir, rel);
		free(rel);
	}
	dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(dirfd >= 0);
	/* opened for a view: the counts the manifest gives, no data file
	 * decoded; the view is the one a full open gives, byte for byte */
	if (sfs_lance_open_view(dirfd, mpath, -1, &d, &err))
		fail_msg("%s", err.msg);
	assert_int_equal(d->rows, 1732);
	assert_int_equal(d->m->nfragments, full->m->nfragments);
	for (f = 0; f < d->m->nfragments; f++) {
		assert_null(d->m->fragments[f].files);
		assert_int_equal(d->m->fragments[f].deleted,
				 full->m->fragments[f].deleted);
	}
	if (sfs_lance_view_build(dirfd, full, runs, 4, &a, &err) ||
	    sfs_lance_view_build(dirfd, d, runs, 4, &b, &err))
		fail_msg("%s", err.msg);
	views_equal(a, b);
	sfs_dataset_view_free(b);
	/* fragment 3's data file and fragment 4's deletion file gone: the
	 * dataset is refused as a whole (the index's open), a reader's view
	 * that does not use them is built as before */
	assert_true(asprintf(&p, "%s/frags.lance/data/%s", dir,
			     full->m->fragments[3].files[0].path) > 0);
	assert_int_equal(unlink(p), 0);
	free(p);
	rel = sfs_lance_deletion_path(&full->m->fragments[4]);
	assert_true(asprintf(&p, "%s/frags.lance/%s", dir, rel) > 0);
	assert_int_equal(unlink(p), 0);
	free(p);
	assert_int_equal(sfs_lance_open(dirfd, mpath, -1, &again, &err),
			 -EINVAL);
	sfs_error_clear(&err);
	sfs_lance_free(d);
	if (sfs_lance_open_view(dirfd, mpath, -1, &d, &err) ||
	    sfs_lance_view_build(dirfd, d, runs, 4, &b, &err))
		fail_msg("%s", err.msg);
	views_equal(a, b);
	sfs_dataset_view_free(b);
	/* one that does: refused as the index's open refuses them */
	assert_int_equal(sfs_lance_view_build(dirfd, d, frag3, 1, &b, &err),
			 -EINVAL);
	snprintf(
		want, sizeof(want),
		"%s: byte %llu: fragment 3's data file frags.lance/data/%s is missing: the dataset is incomplete (copied in part, or cleaned up under this version); copy it whole, or index its newest version",
		mpath, (unsigned long long)full->m->fragments[3].files[0].at,
		full->m->fragments[3].files[0].path);
	assert_string_equal(err.msg, want);
	sfs_error_clear(&err);
	assert_int_equal(sfs_lance_view_build(dirfd, d, frag4, 1, &b, &err),
			 -EINVAL);
	snprintf(
		want, sizeof(want),
		"%s: byte %llu: fragment 4's deletion file frags.lance/%s is missing: the dataset is incomplete (copied in part, or cleaned up under this version); copy it whole, or index its newest version",
		mpath, (unsigned long long)full->m->fragments[4].deletion.at,
		rel);
	assert_string_equal(err.msg, want);
	sfs_error_clear(&err);
	free(rel);
	sfs_dataset_view_free(a);
	sfs_lance_free(d);
	sfs_lance_free(full);
	close(dirfd);
	close(fix);
	tmpdir_remove(dir);
}

/* Row digests, fragments and data files as sfs_lance_view_read hands
 * them on. */
struct rows_seen {
	unsigned char (*d)[SFS_DIGEST_LEN];
	size_t n, cap;
	size_t frags, files;
};

static int seen_row(void *arg, uint64_t sample, const unsigned char d[32])
{
	struct rows_seen *rs = arg;

	assert_int_equal(sample, rs->n);
	if (SFS_GROW(rs->d, rs->cap, rs->n + 1))
		return -ENOMEM;
	memcpy(rs->d[rs->n++], d, SFS_DIGEST_LEN);
	return 0;
}

static int seen_fragment(void *arg, size_t f, uint64_t live)
{
	struct rows_seen *rs = arg;

	assert_int_equal(f, rs->frags);
	assert_true(live > 0);
	rs->frags++;
	return 0;
}

static int seen_data_file(void *arg, const char *path, uint64_t size)
{
	struct rows_seen *rs = arg;

	assert_true(strlen(path) > 6 && !strchr(path, '/'));
	assert_true(size > 0);
	rs->files++;
	return 0;
}

static void test_lance_view_read_rows(void **state)
{
	/* as test_lance_view_reads_back: rows of fragments 2, 0, 1, 5, 2 */
	static const struct sfs_run runs[] = {
		{ 430, 10 }, { 0, 3 }, { 1000, 732 }, { 430, 1 }
	};
	struct sfs_error err = { 0 };
	int dirfd = fixtures(), vfd;
	struct sfs_lance_dataset *d = open_newest(dirfd, "frags.lance", 7);
	struct rows_seen src = { 0 }, got = { 0 };
	struct sfs_lance_view_reader rd = { seen_fragment, seen_data_file,
					    seen_row, &got };
	struct sfs_dataset_view *v;
	char *dir = tmpdir_new(), *p, *target, *slash, *bin = NULL;
	size_t i, k, at = 0;

	(void)state;
	/* the source's rows, all 1732, by the driver's digest */
	assert_int_equal(
		sfs_lance_row_digests(dirfd, d, NULL, seen_row, &src, &err), 0);
	assert_int_equal(src.n, 1732);
	/* the view's files in a directory, data files as symlinks */
	if (sfs_lance_view_build(dirfd, d, runs, 4, &v, &err))
		fail_msg("%s", err.msg);
	for (i = 0; i < v->nfiles; i++) {
		const struct sfs_dataset_file *f = &v->files[i];

		if (!f->source) {
			free(write_at(dir, f->path, f->bytes, f->len));
			if (!strncmp(f->path, "_deletions/", 11) && !bin)
				bin = f->path;
			continue;
		}
		p = write_at(dir, f->path, "", 0);
		assert_int_equal(unlink(p), 0);
		assert_true(asprintf(&target, "%s/%s", LANCE_FIXTURES,
				     f->source) > 0);
		assert_int_equal(symlink(target, p), 0);
		free(target);
		free(p);
	}
	vfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(vfd >= 0);
	if (sfs_lance_view_read(vfd, "v.lance", &rd, &err))
		fail_msg("%s", err.msg);
	/* every row is the source row the run names, in run order */
	assert_int_equal(got.n, 10 + 3 + 732 + 1);
	assert_int_equal(got.frags, 5);
	assert_int_equal(got.files, 5); /* fragment 2's twice */
	for (i = 0; i < 4; i++)
		for (k = 0; k < runs[i].count; k++, at++)
			assert_memory_equal(got.d[at], src.d[runs[i].first + k],
					    SFS_DIGEST_LEN);
	/* a deletion file that deletes another number of rows than the
	 * manifest says: refused, naming it */
	assert_non_null(bin);
	p = write_at(dir, bin, "", 0);
	free(p);
	got.n = got.frags = got.files = 0;
	assert_int_equal(sfs_lance_view_read(vfd, "v.lance", &rd, &err),
			 -EINVAL);
	slash = strstr(err.msg, bin);
	assert_non_null(slash);
	sfs_error_clear(&err);
	/* a directory without a manifest */
	assert_int_equal(sfs_lance_view_read(dirfd, "fixtures", &rd, &err),
			 -EINVAL);
	assert_string_equal(
		err.msg,
		"fixtures: no _versions/<version>.manifest: not a Lance dataset (a reader's dataset directory of a view holds one manifest); audit a mounted view");
	close(vfd);
	free(src.d);
	free(got.d);
	sfs_dataset_view_free(v);
	sfs_lance_free(d);
	close(dirfd);
	tmpdir_remove(dir);
}

/* ---- rows claimed, checked against the data files ---- */

/* A data file of Lance's format 2.x (version major.minor: 2.0 writes
 * 0.3) that holds no column, its footer claiming rows: its
 * FileDescriptor (a schema, then the row count) in global buffer 0. */
static struct buf lance_file(uint64_t rows, unsigned major, unsigned minor)
{
	struct buf f = { 0 }, fd = { 0 };
	uint64_t at, gbo;

	buf_put(&f, "cols", 4);
	lfield(&fd, 1, "\x0a\x02id", 4);
	vfield(&fd, 2, rows);
	at = f.len;
	buf_put(&f, fd.p, fd.len);
	gbo = f.len;
	le(&f, at, 8);
	le(&f, fd.len, 8);
	le(&f, 0, 8); /* column metadata */
	le(&f, 0, 8); /* their offsets */
	le(&f, gbo, 8);
	le(&f, 1, 4); /* global buffers */
	le(&f, 0, 4); /* columns */
	le(&f, major, 2);
	le(&f, minor, 2);
	buf_put(&f, "LANC", 4);
	buf_free(&fd);
	return f;
}

/* A manifest file of one fragment over data file path claiming rows. */
static struct buf one_fragment(const char *path, uint64_t rows)
{
	struct buf m = { 0 }, fr = { 0 }, df = { 0 };

	lfield(&m, 1, "\x0a\x02id", 4);
	vfield(&fr, 1, 0);
	lfield(&df, 1, path, strlen(path));
	vfield(&df, 2, 0);
	mfield(&fr, 2, &df);
	vfield(&fr, 4, rows);
	mfield(&m, 2, &fr);
	vfield(&m, 3, 1);
	return manifest_file(&m);
}

static void test_lance_rows_claimed_checked(void **state)
{
	static const char real[] =
		"01000001110011011010101070480240c8999dc205b38d415b.lance";
	static const char mpath[] = "x.lance/_versions/1.manifest";
	static const struct sfs_run runs[] = { { 5, 10 },
					       { ((uint64_t)1 << 32) - 3, 3 } };
	struct sfs_error err = { 0 };
	struct sfs_lance_dataset *d = NULL;
	struct sfs_lance_manifest *m = NULL;
	struct sfs_dataset_view *v = NULL;
	char *dir = tmpdir_new(), *p, want[512];
	struct buf b, man;
	struct collect c;
	uint64_t deleted, total = 0;
	size_t i, bitmaps = 0;
	int dirfd;

	(void)state;
	/* the fixture's data file of 6000 rows, under a manifest that
	 * claims 2^32: refused by the index's open, and by a reader's view
	 * before a bitmap of 2^32 rows is sized (512 MiB, 58 s before) */
	assert_true(asprintf(&p, "%s/frags.lance/data/%s", LANCE_FIXTURES,
			     real) > 0);
	b = read_all(p);
	free(p);
	assert_true(asprintf(&p, "x.lance/data/%s", real) > 0);
	free(write_at(dir, p, b.p, b.len));
	free(p);
	buf_free(&b);
	man = one_fragment(real, (uint64_t)1 << 32);
	free(write_at(dir, mpath, man.p, man.len));
	if (sfs_lance_manifest_parse(man.p, man.len, mpath, &m, &err))
		fail_msg("%s", err.msg);
	snprintf(
		want, sizeof(want),
		"%s: byte %llu: fragment 0 claims 4294967296 rows (physical_rows), its data file x.lance/data/%s holds 6000 (its footer): the manifest is damaged or forged; restore it from the dataset's writer, or index another version",
		mpath, (unsigned long long)m->fragments[0].files[0].at, real);
	sfs_lance_manifest_free(m);
	buf_free(&man);
	dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(dirfd >= 0);
	assert_int_equal(sfs_lance_open(dirfd, mpath, -1, &d, &err), -EINVAL);
	assert_string_equal(err.msg, want);
	sfs_error_clear(&err);
	if (sfs_lance_open_view(dirfd, mpath, -1, &d, &err))
		fail_msg("%s", err.msg);
	assert_int_equal(sfs_lance_view_build(dirfd, d, runs, 1, &v, &err),
			 -EINVAL);
	assert_string_equal(err.msg, want);
	sfs_error_clear(&err);
	sfs_lance_free(d);
	/* a data file whose footer says 2^32 rows, as the manifest does:
	 * read; a reader keeping 13 of them gets bitmaps of run containers,
	 * under 1 MiB each, deleting every other row */
	b = lance_file((uint64_t)1 << 32, 2, 2);
	free(write_at(dir, "x.lance/data/big.lance", b.p, b.len));
	buf_free(&b);
	man = one_fragment("big.lance", (uint64_t)1 << 32);
	free(write_at(dir, mpath, man.p, man.len));
	buf_free(&man);
	if (sfs_lance_open(dirfd, mpath, -1, &d, &err) ||
	    sfs_lance_view_build(dirfd, d, runs, 2, &v, &err))
		fail_msg("%s", err.msg);
	assert_int_equal(d->rows, (uint64_t)1 << 32);
	assert_int_equal(v->rows, 13);
	for (i = 0; i < v->nfiles; i++) {
		const struct sfs_dataset_file *f = &v->files[i];

		if (strncmp(f->path, "_deletions/", 11))
			continue;
		bitmaps++;
		assert_true(f->len < 1 << 20);
		assert_int_equal(f->bytes[0] | f->bytes[1] << 8, 12347);
		c.n = 0;
		if (sfs_lance_deletion_parse(f->bytes, f->len,
					     SFS_LANCE_DELETION_BITMAP, f->path,
					     (uint64_t)1 << 32, collect_run, &c,
					     &deleted, &err))
			fail_msg("%s", err.msg);
		total += deleted;
	}
	assert_int_equal(bitmaps, 2);
	assert_int_equal(total, ((uint64_t)1 << 33) - 13);
	/* the same file claiming another count than the manifest, in
	 * format 2.2 and 2.0 (which says 0.3): refused; as 0.2, a legacy
	 * file whose footer does not say, bounded by its size: refused */
	sfs_lance_free(d);
	b = lance_file(7, 2, 2);
	free(write_at(dir, "x.lance/data/big.lance", b.p, b.len));
	buf_free(&b);
	assert_int_equal(sfs_lance_open(dirfd, mpath, -1, &d, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "big.lance holds 7 (its footer)"));
	sfs_error_clear(&err);
	b = lance_file(7, 0, 3);
	free(write_at(dir, "x.lance/data/big.lance", b.p, b.len));
	buf_free(&b);
	assert_int_equal(sfs_lance_open(dirfd, mpath, -1, &d, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "big.lance holds 7 (its footer)"));
	sfs_error_clear(&err);
	b = lance_file(7, 0, 2);
	free(write_at(dir, "x.lance/data/big.lance", b.p, b.len));
	buf_free(&b);
	assert_int_equal(sfs_lance_open(dirfd, mpath, -1, &d, &err), -EINVAL);
	assert_non_null(strstr(
		err.msg,
		"fragment 0 claims 4294967296 rows (physical_rows), more than its data file x.lance/data/big.lance of 68 bytes can hold (a legacy Lance file stores at least a bit a row)"));
	sfs_error_clear(&err);
	sfs_dataset_view_free(v);
	close(dirfd);
	tmpdir_remove(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lance_pb_varints),
		cmocka_unit_test(test_lance_pb_bad_varints),
		cmocka_unit_test(test_lance_pb_lengths),
		cmocka_unit_test(test_lance_pb_nesting),
		cmocka_unit_test(test_lance_pb_unknown_fields),
		cmocka_unit_test(test_lance_pb_bad_keys),
		cmocka_unit_test(test_lance_manifest_fields),
		cmocka_unit_test(test_lance_manifest_refused),
		cmocka_unit_test(test_lance_manifest_framing),
		cmocka_unit_test(test_lance_pylance_frags),
		cmocka_unit_test(test_lance_pylance_v1_and_stable),
		cmocka_unit_test(test_lance_pylance_every_version),
		cmocka_unit_test(test_lance_find_version),
		cmocka_unit_test(test_lance_not_a_dataset),
		cmocka_unit_test(test_lance_roaring),
		cmocka_unit_test(test_lance_pylance_deletions),
		cmocka_unit_test(test_lance_view_reads_back),
		cmocka_unit_test(test_lance_view_opens_its_fragments_only),
		cmocka_unit_test(test_lance_view_read_rows),
		cmocka_unit_test(test_lance_manifest_decoded_budget),
		cmocka_unit_test(test_lance_rows_claimed_checked),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
