/*
 * The Parquet footer: FileMetaData built here byte by byte in the Thrift
 * compact protocol (an encoder of the test's own, not the module's), read
 * back, checked, refused with exact messages, and rewritten for slices;
 * and files of rows whose digests are read on helper threads.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "helpers.h"
#include "shardfs/digest.h"
#include "shardfs/parquet.h"

/* The compact protocol, written the canonical way every writer uses. */
struct enc {
	struct buf b;
	int last[32]; /* previous field id, per open struct */
	int depth;
};

static void byte(struct enc *e, unsigned v)
{
	unsigned char c = (unsigned char)v;

	buf_put(&e->b, &c, 1);
}

static void varint(struct enc *e, uint64_t v)
{
	while (v >= 0x80) {
		byte(e, (unsigned)(v & 0x7f) | 0x80);
		v >>= 7;
	}
	byte(e, (unsigned)v);
}

static uint64_t zz(int64_t v)
{
	return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static void field(struct enc *e, int id, int type)
{
	int *last = &e->last[e->depth];

	if (id > *last && id - *last <= 15) {
		byte(e, (unsigned)((id - *last) << 4 | type));
	} else {
		byte(e, (unsigned)type);
		varint(e, zz(id));
	}
	*last = id;
}

static void sbegin(struct enc *e)
{
	e->last[++e->depth] = 0;
}

static void send(struct enc *e)
{
	byte(e, 0);
	e->depth--;
}

static void f_struct(struct enc *e, int id)
{
	field(e, id, 12);
	sbegin(e);
}

static void f_i32(struct enc *e, int id, int64_t v)
{
	field(e, id, 5);
	varint(e, zz(v));
}

static void f_i64(struct enc *e, int id, int64_t v)
{
	field(e, id, 6);
	varint(e, zz(v));
}

static void f_bin(struct enc *e, int id, const char *s)
{
	field(e, id, 8);
	varint(e, strlen(s));
	buf_put(&e->b, s, strlen(s));
}

static void list(struct enc *e, int type, size_t n)
{
	if (n < 15) {
		byte(e, (unsigned)(n << 4 | (size_t)type));
	} else {
		byte(e, 0xf0u | (unsigned)type);
		varint(e, n);
	}
}

static void f_list(struct enc *e, int id, int type, size_t n)
{
	field(e, id, 9);
	list(e, type, n);
}

/* A column chunk as the spec of a test file gives it. */
struct cspec {
	int64_t file_offset, dict, data, comp, unc, nvals;
	bool stats, index, bloom, kv;
};

struct rgspec {
	int64_t rows, total_byte_size, file_offset, total_comp;
	int ordinal;
	struct cspec c[3];
};

struct spec {
	int64_t num_rows;
	size_t nleaves; /* 2, or 3 for a schema with an extra leaf */
	size_t ncols; /* columns per row group written */
	size_t nrgs;
	struct rgspec rg[3];
	bool unknown; /* the field of every type, FileMetaData field 200 */
};

static const char *const leaf_names[] = { "a", "b", "c" };

static void column_meta(struct enc *e, size_t j, const struct cspec *c)
{
	f_i32(e, 1, j == 1 ? 6 : 2);
	f_list(e, 2, 5, 2);
	varint(e, zz(0));
	varint(e, zz(8));
	f_list(e, 3, 8, 1);
	varint(e, 1);
	buf_put(&e->b, leaf_names[j], 1);
	f_i32(e, 4, j == 1 ? 6 : 1);
	f_i64(e, 5, c->nvals);
	f_i64(e, 6, c->unc);
	f_i64(e, 7, c->comp);
	if (c->kv) {
		f_list(e, 8, 12, 1);
		sbegin(e);
		f_bin(e, 1, "k");
		f_bin(e, 2, "v");
		send(e);
	}
	f_i64(e, 9, c->data);
	if (c->dict)
		f_i64(e, 11, c->dict);
	if (c->stats) {
		f_struct(e, 12);
		f_i64(e, 3, 0);
		f_bin(e, 5, "zz");
		f_bin(e, 6, "aa");
		send(e);
		f_list(e, 13, 12, 1);
		sbegin(e);
		f_i32(e, 1, 0);
		f_i32(e, 2, 0);
		f_i32(e, 3, 1);
		send(e);
	}
	if (c->bloom) {
		f_i64(e, 14, 90);
		f_i32(e, 15, 10);
	}
	if (c->stats) {
		f_struct(e, 16);
		f_i64(e, 1, 10);
		send(e);
	}
	/* unknown here: map<binary, i64> */
	field(e, 100, 11);
	varint(e, 1);
	byte(e, 0x86);
	varint(e, 1);
	byte(e, 'm');
	varint(e, zz(-3));
}

static void row_group(struct enc *e, const struct spec *s,
		      const struct rgspec *g)
{
	size_t j;

	f_list(e, 1, 12, s->ncols);
	for (j = 0; j < s->ncols; j++) {
		sbegin(e);
		f_i64(e, 2, g->c[j].file_offset);
		f_struct(e, 3);
		column_meta(e, j, &g->c[j]);
		send(e);
		if (g->c[j].index) {
			f_i64(e, 4, 95);
			f_i32(e, 5, 3);
			f_i64(e, 6, 98);
			f_i32(e, 7, 2);
		}
		send(e);
	}
	f_i64(e, 2, g->total_byte_size);
	f_i64(e, 3, g->rows);
	f_list(e, 4, 12, 1); /* sorting_columns: bool fields */
	sbegin(e);
	f_i32(e, 1, 0);
	field(e, 2, 2);
	field(e, 3, 1);
	send(e);
	f_i64(e, 5, g->file_offset);
	f_i64(e, 6, g->total_comp);
	field(e, 7, 4);
	varint(e, zz(g->ordinal));
}

/* A field of every compact type, and the long forms. */
static void every_type(struct enc *e)
{
	size_t i;

	f_struct(e, 200);
	field(e, 1, 3); /* i8 */
	byte(e, 0xff);
	field(e, 2, 4); /* i16 */
	varint(e, zz(-300));
	f_i32(e, 3, 2147483647);
	f_i64(e, 4, INT64_MIN);
	field(e, 5, 7); /* double */
	buf_put(&e->b, "\x00\x00\x00\x00\x00\x00\xf0\x3f", 8);
	f_bin(e, 6, "");
	f_list(e, 7, 1, 2); /* list<bool> */
	byte(e, 1);
	byte(e, 2);
	field(e, 8, 10); /* set<i32>, long form count */
	list(e, 5, 20);
	for (i = 0; i < 20; i++)
		varint(e, zz((int64_t)i));
	field(e, 9, 11); /* empty map */
	byte(e, 0);
	field(e, 10, 1); /* bool true */
	field(e, 11, 2); /* bool false */
	field(e, 12, 13); /* uuid */
	buf_put(&e->b, "0123456789abcdef", 16);
	f_struct(e, 300); /* long-form id, nested struct */
	f_list(e, 1, 9, 1); /* list<list<binary>> */
	list(e, 8, 1);
	varint(e, 2);
	buf_put(&e->b, "hi", 2);
	send(e);
	field(e, -7, 5); /* a negative id, long form */
	varint(e, zz(7));
	send(e);
}

static void file_meta(struct enc *e, const struct spec *s)
{
	size_t i;

	sbegin(e);
	f_i32(e, 1, 1);
	f_list(e, 2, 12, 1 + s->nleaves);
	sbegin(e);
	f_bin(e, 4, "schema");
	f_i32(e, 5, (int64_t)s->nleaves);
	send(e);
	for (i = 0; i < s->nleaves; i++) {
		sbegin(e);
		f_i32(e, 1, i == 1 ? 6 : 2);
		f_i32(e, 3, i == 1 ? 1 : 0);
		f_bin(e, 4, leaf_names[i]);
		if (i == 1) {
			f_i32(e, 6, 0);
			f_struct(e, 10);
			f_struct(e, 1);
			send(e);
			send(e);
		}
		send(e);
	}
	f_i64(e, 3, s->num_rows);
	f_list(e, 4, 12, s->nrgs);
	for (i = 0; i < s->nrgs; i++) {
		sbegin(e);
		row_group(e, s, &s->rg[i]);
		send(e);
	}
	f_list(e, 5, 12, 1);
	sbegin(e);
	f_bin(e, 1, "ARROW:schema");
	f_bin(e, 2, "/////w==");
	send(e);
	f_bin(e, 6, "shardfs test");
	f_list(e, 7, 12, s->nleaves);
	for (i = 0; i < s->nleaves; i++) {
		sbegin(e);
		f_struct(e, 1);
		send(e);
		send(e);
	}
	if (s->unknown)
		every_type(e);
	send(e);
}

/* The file: PAR1, 100 bytes of data, the footer, its length, PAR1. */
#define DATA_END 104

static void put_tail(struct buf *b, const struct buf *footer)
{
	unsigned char n[4];
	size_t i;

	buf_put(b, footer->p, footer->len);
	for (i = 0; i < 4; i++)
		n[i] = (unsigned char)(footer->len >> (8 * i));
	buf_put(b, n, 4);
	buf_put(b, "PAR1", 4);
}

static void file_with_footer(struct buf *file, const struct buf *footer)
{
	unsigned char data[DATA_END - 4];

	memset(data, 'x', sizeof(data));
	buf_put(file, "PAR1", 4);
	buf_put(file, data, sizeof(data));
	put_tail(file, footer);
}

static struct buf footer_of(const struct spec *s)
{
	struct enc e = { 0 };

	e.depth = -1;
	file_meta(&e, s);
	return e.b;
}

/*
 * Two row groups of 3 and 2 rows; columns a (INT64, no dictionary) and b
 * (BYTE_ARRAY, a dictionary page), every optional field present.
 */
static struct spec good(void)
{
	struct spec s = {
		.num_rows = 5,
		.nleaves = 2,
		.ncols = 2,
		.nrgs = 2,
		.unknown = true,
		.rg = {
			{ 3, 70, 4, 40, 0,
			  { { 0, 0, 4, 20, 30, 3, true, true, true, true },
			    { 24, 24, 30, 20, 40, 3, true, true, true,
			      false } } },
			{ 2, 50, 44, 60, 1,
			  { { 0, 0, 44, 20, 25, 2, true, true, false, false },
			    { 0, 64, 72, 40, 25, 2, true, false, true,
			      false } } },
		},
	};

	return s;
}

static int read_buf(const struct buf *b, struct sfs_parquet_meta **m,
		    struct sfs_error *err)
{
	int fd = memfd_create("x.parquet", MFD_CLOEXEC), rc;

	assert_true(fd >= 0);
	assert_int_equal(write(fd, b->p, b->len), (ssize_t)b->len);
	rc = sfs_parquet_footer_read(fd, "x.parquet", b->len, m, err);
	close(fd);
	return rc;
}

static struct sfs_parquet_meta *read_spec(const struct spec *s)
{
	struct buf footer = footer_of(s), file = { 0 };
	struct sfs_parquet_meta *m = NULL;
	struct sfs_error err = { 0 };

	file_with_footer(&file, &footer);
	assert_int_equal(read_buf(&file, &m, &err), 0);
	buf_free(&file);
	buf_free(&footer);
	return m;
}

static void assert_bytes(struct sfs_parquet_bytes b, const char *s)
{
	assert_int_equal(b.len, strlen(s));
	assert_memory_equal(b.p, s, b.len);
}

static void test_parquet_decode(void **state)
{
	struct spec s = good();
	struct sfs_parquet_meta *m = read_spec(&s);
	const struct sfs_parquet_chunk *c;

	(void)state;
	assert_int_equal(m->version, 1);
	assert_int_equal(m->num_rows, 5);
	assert_int_equal(m->data_end, DATA_END);
	assert_int_equal(m->nschema, 3);
	assert_int_equal(m->nleaves, 2);
	assert_bytes(m->schema[0].name, "schema");
	assert_int_equal(m->schema[0].num_children, 2);
	assert_int_equal(m->schema[0].type, -1);
	assert_bytes(m->schema[2].name, "b");
	assert_int_equal(m->schema[2].type, 6);
	assert_int_equal(m->schema[2].repetition_type, 1);
	assert_int_equal(m->schema[2].converted_type, 0);
	assert_int_equal(m->schema[2].logical_type.len, 3);
	assert_memory_equal(m->schema[2].logical_type.p, "\x1c\x00\x00", 3);
	assert_int_equal(m->nrow_groups, 2);
	assert_int_equal(m->row_groups[0].num_rows, 3);
	assert_int_equal(m->row_groups[0].total_byte_size, 70);
	assert_int_equal(m->row_groups[1].num_rows, 2);
	assert_int_equal(m->row_groups[1].nchunks, 2);
	c = &m->row_groups[0].chunks[1];
	assert_int_equal(c->type, 6);
	assert_int_equal(c->codec, 6);
	assert_int_equal(c->nencodings, 2);
	assert_int_equal(c->encodings[1], 8);
	assert_int_equal(c->npath, 1);
	assert_bytes(c->path_in_schema[0], "b");
	assert_int_equal(c->file_offset, 24);
	assert_int_equal(c->dictionary_page_offset, 24);
	assert_int_equal(c->data_page_offset, 30);
	assert_int_equal(sfs_parquet_chunk_start(c), 24);
	assert_int_equal(c->total_compressed_size, 20);
	assert_int_equal(c->total_uncompressed_size, 40);
	assert_int_equal(c->num_values, 3);
	assert_true(c->has_statistics);
	assert_int_equal(c->offset_index_offset, 95);
	assert_int_equal(c->offset_index_length, 3);
	assert_int_equal(c->column_index_offset, 98);
	assert_int_equal(c->column_index_length, 2);
	assert_int_equal(c->bloom_filter_offset, 90);
	assert_int_equal(c->bloom_filter_length, 10);
	assert_int_equal(c->index_page_offset, -1);
	c = &m->row_groups[1].chunks[0];
	assert_int_equal(c->dictionary_page_offset, -1);
	assert_int_equal(c->bloom_filter_offset, -1);
	assert_int_equal(sfs_parquet_chunk_start(c), 44);
	assert_int_equal(m->nkey_values, 1);
	assert_bytes(m->key_values[0].key, "ARROW:schema");
	assert_bytes(m->key_values[0].value, "/////w==");
	assert_bytes(m->created_by, "shardfs test");
	sfs_parquet_meta_free(m);
}

/* Edits that keep every chunk where and as it is. */
static void same(const struct sfs_parquet_meta *m, size_t rg,
		 struct sfs_parquet_chunk_edit *ce,
		 struct sfs_parquet_rg_edit *e)
{
	size_t j;

	for (j = 0; j < m->nleaves; j++) {
		const struct sfs_parquet_chunk *c =
			&m->row_groups[rg].chunks[j];

		ce[j].start = sfs_parquet_chunk_start(c);
		ce[j].total_compressed_size = c->total_compressed_size;
		ce[j].total_uncompressed_size = c->total_uncompressed_size;
		ce[j].num_values = c->num_values;
	}
	e->row_group = rg;
	e->num_rows = m->row_groups[rg].num_rows;
	e->chunks = ce;
}

static void assert_tail(const unsigned char *got, size_t len,
			const struct buf *footer)
{
	struct buf want = { 0 };

	put_tail(&want, footer);
	assert_int_equal(len, want.len);
	assert_memory_equal(got, want.p, len);
	buf_free(&want);
}

static void test_parquet_rewrite_same_drops_only_indexes(void **state)
{
	struct spec s = good();
	struct sfs_parquet_meta *m = read_spec(&s);
	struct sfs_parquet_chunk_edit ce[2][2];
	struct sfs_parquet_rg_edit e[2];
	struct sfs_error err = { 0 };
	struct buf want;
	unsigned char *out;
	size_t len, i, j;

	(void)state;
	same(m, 0, ce[0], &e[0]);
	same(m, 1, ce[1], &e[1]);
	assert_int_equal(sfs_parquet_footer_write(m, e, 2, &out, &len, &err),
			 0);
	for (i = 0; i < 2; i++)
		for (j = 0; j < 2; j++)
			s.rg[i].c[j].index = s.rg[i].c[j].bloom = false;
	want = footer_of(&s);
	assert_tail(out, len, &want);
	buf_free(&want);
	free(out);
	sfs_parquet_meta_free(m);
}

static void test_parquet_rewrite_subset(void **state)
{
	struct spec s = good(), w;
	struct sfs_parquet_meta *m = read_spec(&s), *back;
	struct sfs_parquet_chunk_edit ce[2];
	struct sfs_parquet_rg_edit e;
	struct sfs_error err = { 0 };
	struct buf want, file = { 0 };
	unsigned char *out;
	size_t len;

	(void)state;
	/* row group 1 alone, moved to byte 4; column b re-encoded to hold
	 * one row of the two */
	same(m, 1, ce, &e);
	ce[0].start = 4;
	ce[1].start = 24;
	ce[1].total_compressed_size = 30;
	ce[1].total_uncompressed_size = 35;
	ce[1].num_values = 1;
	e.num_rows = 1;
	assert_int_equal(sfs_parquet_footer_write(m, &e, 1, &out, &len, &err),
			 0);
	w = s;
	w.num_rows = 1;
	w.nrgs = 1;
	w.rg[0] = s.rg[1];
	w.rg[0].rows = 1;
	w.rg[0].total_byte_size = 50 + 10;
	w.rg[0].file_offset = 4;
	w.rg[0].total_comp = 60 - 10;
	w.rg[0].ordinal = 0;
	w.rg[0].c[0].data = 4;
	w.rg[0].c[0].index = false;
	w.rg[0].c[1] = (struct cspec){ 0, 24,	 32,	30,    35,
				       1, false, false, false, false };
	want = footer_of(&w);
	assert_tail(out, len, &want);

	/* and it reads back */
	buf_put(&file, "PAR1", 4);
	buf_zero(&file, 50);
	buf_put(&file, out, len);
	assert_int_equal(read_buf(&file, &back, &err), 0);
	assert_int_equal(back->num_rows, 1);
	assert_int_equal(back->row_groups[0].chunks[1].num_values, 1);
	assert_false(back->row_groups[0].chunks[1].has_statistics);
	assert_true(back->row_groups[0].chunks[0].has_statistics);
	sfs_parquet_meta_free(back);
	buf_free(&file);
	buf_free(&want);
	free(out);
	sfs_parquet_meta_free(m);
}

static void test_parquet_rewrite_bad_edits(void **state)
{
	struct spec s = good();
	struct sfs_parquet_meta *m = read_spec(&s);
	struct sfs_parquet_chunk_edit ce[2];
	struct sfs_parquet_rg_edit e;
	struct sfs_error err = { 0 };
	unsigned char *out = NULL;
	size_t len;

	(void)state;
	same(m, 0, ce, &e);
	e.row_group = 2;
	assert_int_equal(sfs_parquet_footer_write(m, &e, 1, &out, &len, &err),
			 -EINVAL);
	assert_string_equal(
		err.msg,
		"x.parquet: slice footer: edit 0 names row group 2, but the file has 2");
	e.row_group = 0;
	ce[1].total_compressed_size = -1;
	assert_int_equal(sfs_parquet_footer_write(m, &e, 1, &out, &len, &err),
			 -EINVAL);
	assert_string_equal(
		err.msg,
		"x.parquet: slice footer: edit 0 column 1: start 24 must be at least 4, sizes -1 and 40 and num_values 3 must not be negative");
	same(m, 0, ce, &e);
	ce[0].total_uncompressed_size = INT64_MAX;
	assert_int_equal(sfs_parquet_footer_write(m, &e, 1, &out, &len, &err),
			 -EINVAL);
	assert_string_equal(
		err.msg,
		"x.parquet: slice footer: edit 0: the sizes of its chunks overflow 64 bits");
	assert_null(out);
	sfs_parquet_meta_free(m);
}

/* Read file bytes; expect rc and exactly msg. */
static void expect(const struct buf *file, int rc, const char *msg)
{
	struct sfs_parquet_meta *m = NULL;
	struct sfs_error err = { 0 };

	assert_int_equal(read_buf(file, &m, &err), rc);
	assert_string_equal(err.msg, msg);
	assert_null(m);
}

/* A file whose footer is the raw bytes given, right after PAR1. */
static void expect_raw(const void *footer, size_t n, int rc, const char *msg)
{
	struct buf f = { 0 }, file = { 0 };

	buf_put(&f, footer, n);
	buf_put(&file, "PAR1", 4);
	put_tail(&file, &f);
	expect(&file, rc, msg);
	buf_free(&f);
	buf_free(&file);
}

static void expect_spec(const struct spec *s, const char *msg)
{
	struct buf footer = footer_of(s), file = { 0 };

	file_with_footer(&file, &footer);
	expect(&file, -EINVAL, msg);
	buf_free(&file);
	buf_free(&footer);
}

static void test_parquet_not_parquet(void **state)
{
	struct buf file = { 0 };

	(void)state;
	buf_put(&file, "PAR1PAR1", 8);
	expect(&file, -EINVAL,
	       "x.parquet: 8 bytes is too short for a Parquet file (it needs at least 12: PAR1, the footer length, PAR1)");
	buf_free(&file);
	buf_put(&file, "PAR0\0\0\0\0PAR1", 12);
	expect(&file, -EINVAL,
	       "x.parquet: byte 0: no PAR1 magic: not a Parquet file");
	buf_free(&file);
	buf_put(&file, "PAR1\0\0\0\0PAR2", 12);
	expect(&file, -EINVAL,
	       "x.parquet: byte 8: no PAR1 magic at the end: not a Parquet file, or a truncated one");
	buf_free(&file);
	buf_put(&file, "PAR1\0\0\0\0PARE", 12);
	expect(&file, -ENOTSUP,
	       "x.parquet: byte 8: the footer is encrypted (PARE): encrypted Parquet files are not supported, decrypt it first");
	buf_free(&file);
	buf_put(&file, "PAR1xx\x03\0\0\0PAR1", 14);
	expect(&file, -EINVAL,
	       "x.parquet: byte 6: the footer length 3 is more than the file holds (2 bytes between the magics): truncated or not Parquet");
	buf_free(&file);
}

static void test_parquet_thrift_errors(void **state)
{
	unsigned char deep[64];
	size_t i;

	(void)state;
	expect_raw("\x15\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01", 12,
		   -EINVAL,
		   "x.parquet: footer at byte 5: varint longer than 10 bytes");
	expect_raw(
		"\x15\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02", 11, -EINVAL,
		"x.parquet: footer at byte 5: varint does not fit in 64 bits");
	expect_raw(
		"\x15\x80\x80", 3, -EINVAL,
		"x.parquet: footer at byte 5: varint runs past the end of the footer");
	expect_raw(
		"\x15\x80\x80\x80\x80\x20", 6, -EINVAL,
		"x.parquet: footer at byte 5: i32 value does not fit in 32 bits");
	expect_raw(
		"\x68\x64xy", 4, -EINVAL,
		"x.parquet: footer at byte 5: binary of 100 bytes runs past the end of the footer (2 bytes left)");
	expect_raw(
		"\x29\xfc\xff\xff\xff\xff\x0f", 7, -EINVAL,
		"x.parquet: footer at byte 5: list of 4294967295 struct elements cannot fit in the 0 bytes left");
	expect_raw(
		"\x29\x37\x00\x00\x00", 5, -EINVAL,
		"x.parquet: footer at byte 5: list of 3 double elements cannot fit in the 3 bytes left");
	expect_raw(
		"\x1e", 1, -EINVAL,
		"x.parquet: footer at byte 4: field header 0x1e has unknown type 14");
	expect_raw(
		"\x15\x02", 2, -EINVAL,
		"x.parquet: footer at byte 6: struct runs past the end of the footer (no stop field)");
	expect_raw(
		"\x36\x09\x00", 3, -EINVAL,
		"x.parquet: footer at byte 4: FileMetaData: num_rows is negative (-5)");
	expect_raw(
		"\x18\x00\x00", 3, -EINVAL,
		"x.parquet: footer at byte 4: FileMetaData: field 1 (version) is binary, expected i32");
	expect_raw(
		"\x15\x02\x05\x02\x02\x00", 6, -EINVAL,
		"x.parquet: footer at byte 6: FileMetaData: field 1 (version) appears twice");
	expect_raw(
		"\x00", 1, -EINVAL,
		"x.parquet: footer at byte 4: FileMetaData: no version (field 1, required)");
	expect_raw(
		"\x0b\xc8\x01\x05", 4, -EINVAL,
		"x.parquet: footer at byte 8: map header needs 1 bytes but the footer ends 0 bytes on");
	expect_raw("\x0b\xc8\x01\x05\xf5\x00", 6, -EINVAL,
		   "x.parquet: footer at byte 8: unknown element type 15");
	expect_raw(
		"\x0b\xc8\x01\x05\x88\x00", 6, -EINVAL,
		"x.parquet: footer at byte 7: map of 5 entries cannot fit in the 1 bytes left");
	expect_raw(
		"\x85\x02\x00\x00", 4, -ENOTSUP,
		"x.parquet: footer at byte 4: the file is encrypted (plaintext footer with encryption fields): encrypted Parquet files are not supported, decrypt it first");
	/* a depth bomb: field 100, a list of a list of a list ... */
	deep[0] = 0x09;
	deep[1] = 0xc8;
	deep[2] = 0x01;
	for (i = 3; i < sizeof(deep); i++)
		deep[i] = 0x19;
	expect_raw(
		deep, sizeof(deep), -EINVAL,
		"x.parquet: footer at byte 38: structs and containers nest deeper than 32");
}

static void test_parquet_inconsistent(void **state)
{
	struct spec s;

	(void)state;
	s = good();
	s.num_rows = 6;
	expect_spec(
		&s,
		"x.parquet: footer at byte 104: the row groups hold 5 rows but num_rows says 6");
	s = good();
	s.rg[1].c[1].data = 104;
	expect_spec(
		&s,
		"x.parquet: footer at byte 393: row group 1 column 1 data_page_offset 104 is past the data (ends at 104)");
	s = good();
	s.rg[1].c[1].comp = 41;
	expect_spec(
		&s,
		"x.parquet: footer at byte 393: row group 1 column 1: its 41 bytes from byte 64 run past the data (ends at 104)");
	s = good();
	s.rg[0].c[1].data = 50;
	expect_spec(
		&s,
		"x.parquet: footer at byte 229: row group 0 column 1: its first data page (byte 50) or dictionary page lies outside its 20 bytes from byte 24");
	s = good();
	s.rg[1].c[0].data = 30;
	expect_spec(
		&s,
		"x.parquet: footer at byte 325: row group 1 column 0: its bytes [30, 50) overlap those of row group 0 column 1 [24, 44)");
	s = good();
	s.rg[0].c[0].data = 3;
	expect_spec(
		&s,
		"x.parquet: footer at byte 147: row group 0 column 0 begins at byte 3, inside the PAR1 magic");
	s = good();
	s.rg[0].c[1].comp = -20;
	expect_spec(
		&s,
		"x.parquet: footer at byte 248: row group 0 column 1: total_compressed_size is negative (-20)");
	s = good();
	s.rg[1].rows = -1;
	s.num_rows = 2;
	expect_spec(
		&s,
		"x.parquet: footer at byte 462: row group 1: num_rows is negative (-1)");
	s = good();
	s.nleaves = 3;
	expect_spec(
		&s,
		"x.parquet: footer at byte 153: row group 0 has 2 columns but the schema has 3 leaves");
	s = good();
	s.ncols = 1;
	expect_spec(
		&s,
		"x.parquet: footer at byte 145: row group 0 has 1 columns but the schema has 2 leaves");
}

/*
 * Row groups of no rows as pyarrow writes an empty table: data_page_offset
 * 0 and, per chunk, no bytes or an empty dictionary page.  Accepted, their
 * bytes checked as any chunk's; data_page_offset 0 in a row group of rows
 * is still refused.
 */
static struct spec with_empty(void)
{
	struct spec s = good();

	s.rg[1].c[1].comp = 30; /* [64, 94): bytes 94 .. 104 free */
	s.nrgs = 3;
	s.rg[2] = (struct rgspec){ .rows = 0, .ordinal = 2 };
	s.rg[2].c[0].dict = 94;
	s.rg[2].c[0].comp = 10;
	s.rg[2].c[0].unc = 10;
	return s;
}

static void test_parquet_empty_row_group(void **state)
{
	struct sfs_parquet_meta *m;
	struct spec s;

	(void)state;
	s = with_empty();
	m = read_spec(&s);
	assert_int_equal(m->nrow_groups, 3);
	assert_int_equal(m->row_groups[2].num_rows, 0);
	assert_int_equal(sfs_parquet_chunk_start(&m->row_groups[2].chunks[0]),
			 94);
	assert_int_equal(m->row_groups[2].chunks[0].total_compressed_size, 10);
	assert_int_equal(sfs_parquet_chunk_start(&m->row_groups[2].chunks[1]),
			 0);
	assert_int_equal(m->row_groups[2].chunks[1].total_compressed_size, 0);
	sfs_parquet_meta_free(m);
	s = with_empty();
	s.rg[2].c[1].comp = 10;
	expect_spec(
		&s,
		"x.parquet: footer at byte 516: row group 2 column 1 has no rows and no pages (data_page_offset 0) but claims 10 bytes");
	s = with_empty();
	s.rg[2].c[0].dict = 2;
	expect_spec(
		&s,
		"x.parquet: footer at byte 480: row group 2 column 0 begins at byte 2, inside the PAR1 magic");
	s = with_empty();
	s.rg[2].c[0].comp = 20;
	expect_spec(
		&s,
		"x.parquet: footer at byte 480: row group 2 column 0: its 20 bytes from byte 94 run past the data (ends at 104)");
	s = with_empty();
	s.rg[2].c[0].dict = 104;
	expect_spec(
		&s,
		"x.parquet: footer at byte 480: row group 2 column 0 dictionary_page_offset 104 is past the data (ends at 104)");
	s = with_empty();
	s.rg[2].c[0].comp = 0;
	expect_spec(
		&s,
		"x.parquet: footer at byte 480: row group 2 column 0: its dictionary page (byte 94) lies outside its 0 bytes");
	s = with_empty();
	s.rg[2].c[0].dict = 60;
	expect_spec(
		&s,
		"x.parquet: footer at byte 480: row group 2 column 0: its bytes [60, 70) overlap those of row group 1 column 0 [44, 64)");
	/* a row group of rows: its first data page cannot be at byte 0 */
	s = good();
	s.rg[0].c[1].data = 0;
	expect_spec(
		&s,
		"x.parquet: footer at byte 229: row group 0 column 1 begins at byte 0, inside the PAR1 magic");
}

/*
 * A footer of nothing but minimal schema elements (4 bytes each, 56
 * decoded): refused once what it decodes to would pass
 * SFS_PARQUET_DECODED_MAX, counting the array's capacity (doubled from 8,
 * and malloc's header) before it grows, at the element that would double
 * it past the limit, long before SFS_PARQUET_FOOTER_MAX.
 */
static void test_parquet_decoded_budget(void **state)
{
	size_t size = sizeof(struct sfs_parquet_schema), over = 8;
	size_t n, i, at = 0;
	struct enc e = { 0 };
	struct buf file = { 0 };
	char msg[SFS_ERROR_MAX];

	(void)state;
	while (2 * over * size + 16 <= SFS_PARQUET_DECODED_MAX)
		over *= 2;
	/* 4 Mi elements of 56 bytes: 224 MiB, the next doubling 448 MiB;
	 * counting elements refused only at 4.79 Mi */
	assert_int_equal(over, 4u << 20);
	n = over + 1000;
	e.depth = -1;
	sbegin(&e);
	f_i32(&e, 1, 1);
	f_list(&e, 2, 12, n);
	for (i = 0; i < n; i++) {
		if (i == over)
			at = e.b.len;
		sbegin(&e);
		f_bin(&e, 4, i ? "a" : "root");
		if (!i)
			f_i32(&e, 5, (int64_t)n - 1);
		send(&e);
	}
	f_i64(&e, 3, 0);
	f_list(&e, 4, 12, 0);
	send(&e);
	assert_true(e.b.len < SFS_PARQUET_FOOTER_MAX);
	buf_put(&file, "PAR1", 4);
	put_tail(&file, &e.b);
	snprintf(
		msg, sizeof(msg),
		"x.parquet: footer at byte %zu: its %zu-byte footer decodes to more than the %u MiB shardfs decodes per footer (0 row groups, 0 column chunks so far): rewrite the file with fewer, larger row groups (e.g. pyarrow's row_group_size)",
		4 + at, e.b.len, SFS_PARQUET_DECODED_MAX >> 20);
	expect(&file, -EFBIG, msg);
	buf_free(&file);
	buf_free(&e.b);
}

/* Rows of the files of rows_file: a page's values at most. */
#define PAGE_ROWS 10000

static int64_t row_value(uint64_t i)
{
	return (int64_t)(i * 7 % 1000003);
}

static void put_le(unsigned char *p, uint64_t v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

/*
 * A file of rows rows of one column "id" (INT64, required, PLAIN, no
 * codec, v1 pages of PAGE_ROWS values) in row groups of rg rows, the last
 * one the rest: row i holds row_value(i).  The pages of the last row
 * group hold short_by values fewer than it says it has rows.
 */
static void rows_file(struct buf *file, int64_t rows, int64_t rg,
		      int64_t short_by)
{
	int64_t ngroups = (rows + rg - 1) / rg, g, first, n, vals, at, k, i;
	int64_t start[16], size[16];
	unsigned char v[8];
	struct enc f = { 0 };

	assert_true(ngroups <= 16);
	buf_put(file, "PAR1", 4);
	for (g = 0; g < ngroups; g++) {
		first = g * rg;
		n = rows - first < rg ? rows - first : rg;
		vals = n - (g == ngroups - 1 ? short_by : 0);
		start[g] = (int64_t)file->len;
		for (at = 0; at < vals; at += k) {
			struct enc h = { 0 };

			k = vals - at < PAGE_ROWS ? vals - at : PAGE_ROWS;
			h.depth = -1;
			sbegin(&h);
			f_i32(&h, 1, 0); /* DATA_PAGE */
			f_i32(&h, 2, k * 8);
			f_i32(&h, 3, k * 8);
			f_struct(&h, 5);
			f_i32(&h, 1, k);
			f_i32(&h, 2, 0); /* PLAIN */
			f_i32(&h, 3, 3); /* RLE levels: none stored */
			f_i32(&h, 4, 3);
			send(&h);
			send(&h);
			buf_put(file, h.b.p, h.b.len);
			buf_free(&h.b);
			for (i = 0; i < k; i++) {
				put_le(v,
				       (uint64_t)row_value(
					       (uint64_t)(first + at + i)),
				       8);
				buf_put(file, v, 8);
			}
		}
		size[g] = (int64_t)file->len - start[g];
	}
	f.depth = -1;
	sbegin(&f);
	f_i32(&f, 1, 1);
	f_list(&f, 2, 12, 2);
	sbegin(&f);
	f_bin(&f, 4, "schema");
	f_i32(&f, 5, 1);
	send(&f);
	sbegin(&f);
	f_i32(&f, 1, 2); /* INT64 */
	f_i32(&f, 3, 0); /* REQUIRED */
	f_bin(&f, 4, "id");
	send(&f);
	f_i64(&f, 3, rows);
	f_list(&f, 4, 12, (size_t)ngroups);
	for (g = 0; g < ngroups; g++) {
		n = rows - g * rg < rg ? rows - g * rg : rg;
		vals = n - (g == ngroups - 1 ? short_by : 0);
		sbegin(&f);
		f_list(&f, 1, 12, 1);
		sbegin(&f);
		f_i64(&f, 2, start[g]);
		f_struct(&f, 3);
		f_i32(&f, 1, 2);
		f_list(&f, 2, 5, 1);
		varint(&f, zz(0));
		f_list(&f, 3, 8, 1);
		varint(&f, 2);
		buf_put(&f.b, "id", 2);
		f_i32(&f, 4, 0);
		f_i64(&f, 5, vals);
		f_i64(&f, 6, size[g]);
		f_i64(&f, 7, size[g]);
		f_i64(&f, 9, start[g]);
		send(&f);
		send(&f);
		f_i64(&f, 2, size[g]);
		f_i64(&f, 3, n);
		send(&f);
	}
	send(&f);
	put_tail(file, &f.b);
	buf_free(&f.b);
}

/* What fn saw of the rows of a file. */
struct seen {
	pthread_t caller;
	uint64_t n; /* calls */
	uint64_t off_caller; /* of them, from another thread than caller */
	atomic_int inside; /* calls under way */
	uint64_t stop_at; /* fn returns 7 at that row (0: never) */
	struct sfs_digest *sum; /* of every digest, in the order given */
	bool wrong; /* a row out of order or wrong, or two calls at once */
};

static int seen_row(void *arg, uint64_t row, const unsigned char d[32])
{
	struct seen *s = arg;
	unsigned char bytes[22], want[32];

	if (atomic_fetch_add(&s->inside, 1))
		s->wrong = true;
	if (row != s->n++)
		s->wrong = true;
	if (!pthread_equal(pthread_self(), s->caller))
		s->off_caller++;
	if (row % 997 == 0) {
		/* "E", levels 0 and 0, length 8, the value; "Z" */
		bytes[0] = 'E';
		put_le(bytes + 1, 0, 4);
		put_le(bytes + 5, 0, 4);
		put_le(bytes + 9, 8, 4);
		put_le(bytes + 13, (uint64_t)row_value(row), 8);
		bytes[21] = 'Z';
		sfs_digest_buf(bytes, sizeof(bytes), want);
		if (memcmp(want, d, 32))
			s->wrong = true;
	}
	if (sfs_digest_update(s->sum, d, 32))
		s->wrong = true;
	atomic_fetch_sub(&s->inside, 1);
	return s->stop_at && row == s->stop_at ? 7 : 0;
}

static void seen_start(struct seen *s, uint64_t stop_at)
{
	s->caller = pthread_self();
	s->n = s->off_caller = 0;
	atomic_init(&s->inside, 0);
	s->stop_at = stop_at;
	s->sum = sfs_digest_new();
	assert_non_null(s->sum);
	s->wrong = false;
}

static int rows_fd(const struct buf *file, struct sfs_parquet_meta **m)
{
	int fd = memfd_create("rows.parquet", MFD_CLOEXEC);
	struct sfs_error err = { 0 };

	assert_true(fd >= 0);
	assert_int_equal(write(fd, file->p, file->len), (ssize_t)file->len);
	assert_int_equal(sfs_parquet_footer_read(fd, "rows.parquet", file->len,
						 m, &err),
			 0);
	return fd;
}

/*
 * The rows' digests read on 1, 2 and 4 threads: the same, each row's
 * right, given to fn in row order one call at a time; with helpers, they
 * give the digests while the calling thread decodes (some calls come
 * from them: the calling thread gave every one, and decoded nothing while
 * it did).  fn's failure stops the rows there; a column short of its row
 * group's rows fails after the rows before it went to fn.  With helpers,
 * the file's own SHA-256 is taken beside the rows; left new without them
 * or when the rows fail.
 */
#define ROWS 400000

static void test_parquet_rows_threads(void **state)
{
	static const unsigned threads[] = { 1, 2, 4 };
	unsigned char sums[3][32], whole[32], empty[32], got[32];
	char msg[SFS_ERROR_MAX];
	struct sfs_digest *fd_sum = sfs_digest_new();
	bool hashed;
	struct sfs_parquet_meta *m = NULL;
	struct sfs_error err = { 0 };
	struct buf file = { 0 };
	struct seen s;
	size_t i;
	int fd;

	(void)state;
	assert_non_null(fd_sum);
	rows_file(&file, ROWS, 150000, 0);
	fd = rows_fd(&file, &m);
	sfs_digest_buf("", 0, empty);
	assert_int_equal(sfs_digest_fd(fd_sum, fd, file.len, "rows", &err), 0);
	assert_int_equal(sfs_digest_final(fd_sum, whole), 0);
	for (i = 0; i < 3; i++) {
		seen_start(&s, 0);
		hashed = threads[i] == 1;
		assert_int_equal(sfs_parquet_rows_threads(fd, m, threads[i],
							  fd_sum, &hashed,
							  seen_row, &s, &err),
				 0);
		assert_false(s.wrong);
		assert_int_equal(s.n, ROWS);
		/* the file's own SHA-256 taken by the helpers too */
		assert_int_equal(sfs_digest_final(fd_sum, got), 0);
		if (threads[i] == 1) {
			assert_int_equal(s.off_caller, 0);
			assert_false(hashed);
			assert_memory_equal(got, empty, 32);
		} else {
			assert_true(s.off_caller > 0);
			assert_true(hashed);
			assert_memory_equal(got, whole, 32);
		}
		assert_int_equal(sfs_digest_final(s.sum, sums[i]), 0);
		sfs_digest_free(s.sum);
		assert_memory_equal(sums[i], sums[0], 32);
	}
	/* the rows fail: the file's SHA-256 is left new */
	seen_start(&s, 250000);
	assert_int_equal(sfs_parquet_rows_threads(fd, m, 4, fd_sum, &hashed,
						  seen_row, &s, &err),
			 7);
	assert_false(s.wrong);
	assert_int_equal(s.n, 250001);
	assert_false(hashed);
	assert_int_equal(sfs_digest_final(fd_sum, got), 0);
	assert_memory_equal(got, empty, 32);
	sfs_digest_free(s.sum);
	sfs_parquet_meta_free(m);
	close(fd);
	buf_free(&file);

	file = (struct buf){ 0 };
	rows_file(&file, ROWS, 150000, 1000);
	fd = rows_fd(&file, &m);
	seen_start(&s, 0);
	assert_int_equal(sfs_parquet_rows_threads(fd, m, 4, NULL, NULL,
						  seen_row, &s, &err),
			 -EINVAL);
	assert_false(s.wrong);
	assert_int_equal(s.n, ROWS - 1000);
	/* where the chunk's pages end: the footer */
	snprintf(
		msg, sizeof(msg),
		"rows.parquet: row group 2 column id: page at byte %llu: the column holds 99000 rows, the row group 100000",
		(unsigned long long)m->data_end);
	assert_string_equal(err.msg, msg);
	sfs_digest_free(s.sum);
	sfs_parquet_meta_free(m);
	close(fd);
	buf_free(&file);
	sfs_digest_free(fd_sum);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parquet_decode),
		cmocka_unit_test(test_parquet_rewrite_same_drops_only_indexes),
		cmocka_unit_test(test_parquet_rewrite_subset),
		cmocka_unit_test(test_parquet_rewrite_bad_edits),
		cmocka_unit_test(test_parquet_not_parquet),
		cmocka_unit_test(test_parquet_thrift_errors),
		cmocka_unit_test(test_parquet_inconsistent),
		cmocka_unit_test(test_parquet_empty_row_group),
		cmocka_unit_test(test_parquet_decoded_budget),
		cmocka_unit_test(test_parquet_rows_threads),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
