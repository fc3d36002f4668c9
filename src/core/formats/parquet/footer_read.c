/*
 * The Parquet footer read: FileMetaData decoded, its invariants checked
 * (footer_check.c).  Field ids and type codes are those of the Parquet format's
 * parquet.thrift; only the fields a slice needs are decoded, the others are
 * skipped on reading and copied verbatim on writing.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/format_i.h"
#include "formats/parquet/parquet_i.h"
#include "shardfs/parquet.h"
#include "shardfs/util.h"

/*
 * What is being decoded, for messages: "row group 2 column 5".  Kept as
 * numbers and formatted only for a message: a footer has many chunks.
 */
struct where {
	const char *what; /* "FileMetaData", "row group", ... */
	size_t a, b; /* the numbers that follow, when nums says */
	int nums;
};

struct where_str {
	char s[96];
};

static struct where_str where_fmt(const struct where *w)
{
	struct where_str o;

	if (w->nums == 2)
		snprintf(o.s, sizeof(o.s), "%s %zu column %zu", w->what, w->a,
			 w->b);
	else if (w->nums == 1)
		snprintf(o.s, sizeof(o.s), "%s %zu", w->what, w->a);
	else
		snprintf(o.s, sizeof(o.s), "%s", w->what);
	return o;
}

/*
 * Arrays are sized by what was decoded, never by a count read from the
 * file: a count only bounds the loop, the array grows (SFS_GROW) as
 * elements arrive.  The chunks of every row group, their encodings and
 * their paths go to one array each (m->chunk_pool, ...), in footer order,
 * and the row groups' and chunks' pointers are set into them once the
 * footer is read: a small array per chunk would cost malloc's overhead
 * and SFS_GROW's first 8 elements each, 50 times the footer's bytes.
 * What they take is charged as they grow, before they grow: their
 * capacity (up to twice what they hold) and malloc's header, refused past
 * SFS_PARQUET_DECODED_MAX.
 */

/* The pools being filled and what the decoded structures take. */
struct pools {
	size_t chunks_cap, encodings_cap, paths_cap;
	size_t rg_cap;
	uint64_t bytes;
};

/* A footer being decoded: its reader, what it decodes to, the pools. */
struct dec {
	struct sfs_thrift_reader *r;
	struct sfs_parquet_meta *m;
	struct pools *p;
};

/* n more bytes of decoded structures: refused past the budget. */
static int spend(struct dec *d, uint64_t n)
{
	struct sfs_thrift_reader *r = d->r;

	if (n <= SFS_PARQUET_DECODED_MAX - d->p->bytes) {
		d->p->bytes += n;
		return 0;
	}
	return sfs_errorf(
		r->err, -EFBIG,
		"%s: footer at byte %llu: its %zu-byte footer decodes to more than the %u MiB shardfs decodes per footer (%zu row groups, %zu column chunks so far): rewrite the file with fewer, larger row groups (e.g. pyarrow's row_group_size)",
		r->path, (unsigned long long)(r->base + r->pos), r->len,
		SFS_PARQUET_DECODED_MAX >> 20, d->m->nrow_groups,
		d->m->nchunk_pool);
}

/*
 * Room for need elements of size bytes in *arrayp (capacity *cap): what
 * sfs_grow allocates for it is charged first.  0, -EFBIG or -ENOMEM.
 */
static int pool_grow(struct dec *d, void *arrayp, size_t *cap, size_t need,
		     size_t size)
{
	int rc = spend(d, sfs_grow_cost(*cap, need, size,
					SFS_PARQUET_DECODED_MAX));

	if (rc)
		return rc;
	if (sfs_grow(arrayp, cap, need, size))
		return sfs_pq_footer_nomem(d->r);
	return 0;
}

/*
 * ---- The structs, each described once ----
 *
 * A field of a struct this decoder knows: its id and compact type (bool
 * fields as SFS_TC_TRUE; ANY_TYPE: refused whatever its type, by its
 * call), its name in parquet.thrift, how it is decoded, whether the
 * struct needs it and whether it may be negative.  read_struct walks a
 * table: a known field of the wrong type, or twice, is refused; an
 * unknown one is skipped; a required one missing is refused at the end.
 */
enum field_kind {
	FK_I32, /* an int32_t at off */
	FK_I64, /* an int64_t at off */
	FK_BYTES, /* a binary value: a struct sfs_parquet_bytes at off */
	FK_SPAN, /* skipped; its encoded bytes: a sfs_parquet_bytes at off */
	FK_CALL, /* call decodes it */
};

#define F_REQUIRED 1u /* the struct is refused without it */
#define F_NOT_NEGATIVE 2u /* a negative value is refused */
#define ANY_TYPE (-1)

typedef int field_call(struct dec *d, const struct where *w, void *dst,
		       const struct sfs_thrift_field *f);

struct field_def {
	int id;
	int type;
	const char *name;
	enum field_kind kind;
	unsigned flags;
	size_t off; /* FK_I32 .. FK_SPAN: where in the struct decoded */
	field_call *call; /* FK_CALL */
};

/* Where member m of struct sfs_parquet_<s> is. */
#define AT(s, m) offsetof(struct sfs_parquet_##s, m)
#define REQ F_REQUIRED
#define NN F_NOT_NEGATIVE

static field_call read_schema, read_row_groups, read_key_values, encrypted_file,
	read_encodings, read_path, has_statistics, other_file, read_column_meta,
	encrypted_chunk, read_columns;

/* FileMetaData */
static const struct field_def file_fields[] = {
	{ 1, SFS_TC_I32, "version", FK_I32, REQ, .off = AT(meta, version) },
	{ 2, SFS_TC_LIST, "schema", FK_CALL, REQ, .call = read_schema },
	{ 3, SFS_TC_I64, "num_rows", FK_I64, REQ | NN,
	  .off = AT(meta, num_rows) },
	{ 4, SFS_TC_LIST, "row_groups", FK_CALL, REQ, .call = read_row_groups },
	{ 5, SFS_TC_LIST, "key_value_metadata", FK_CALL, 0,
	  .call = read_key_values },
	{ 6, SFS_TC_BINARY, "created_by", FK_BYTES, 0,
	  .off = AT(meta, created_by) },
	{ 8, ANY_TYPE, "encryption_algorithm", FK_CALL, 0,
	  .call = encrypted_file },
	{ 9, ANY_TYPE, "footer_signing_key_metadata", FK_CALL, 0,
	  .call = encrypted_file },
	{ 0 },
};

/* SchemaElement */
static const struct field_def schema_fields[] = {
	{ 1, SFS_TC_I32, "type", FK_I32, 0, .off = AT(schema, type) },
	{ 2, SFS_TC_I32, "type_length", FK_I32, 0,
	  .off = AT(schema, type_length) },
	{ 3, SFS_TC_I32, "repetition_type", FK_I32, 0,
	  .off = AT(schema, repetition_type) },
	{ 4, SFS_TC_BINARY, "name", FK_BYTES, REQ, .off = AT(schema, name) },
	{ 5, SFS_TC_I32, "num_children", FK_I32, NN,
	  .off = AT(schema, num_children) },
	{ 6, SFS_TC_I32, "converted_type", FK_I32, 0,
	  .off = AT(schema, converted_type) },
	{ 10, SFS_TC_STRUCT, "logicalType", FK_SPAN, 0,
	  .off = AT(schema, logical_type) },
	{ 0 },
};

/* RowGroup */
static const struct field_def rg_fields[] = {
	{ 1, SFS_TC_LIST, "columns", FK_CALL, REQ, .call = read_columns },
	{ 2, SFS_TC_I64, "total_byte_size", FK_I64, REQ | NN,
	  .off = AT(row_group, total_byte_size) },
	{ 3, SFS_TC_I64, "num_rows", FK_I64, REQ | NN,
	  .off = AT(row_group, num_rows) },
	{ 0 },
};

/* ColumnChunk */
static const struct field_def chunk_fields[] = {
	{ 1, SFS_TC_BINARY, "file_path", FK_CALL, 0, .call = other_file },
	{ 2, SFS_TC_I64, "file_offset", FK_I64, NN,
	  .off = AT(chunk, file_offset) },
	{ 3, SFS_TC_STRUCT, "meta_data", FK_CALL, REQ,
	  .call = read_column_meta },
	{ 4, SFS_TC_I64, "offset_index_offset", FK_I64, NN,
	  .off = AT(chunk, offset_index_offset) },
	{ 5, SFS_TC_I32, "offset_index_length", FK_I32, NN,
	  .off = AT(chunk, offset_index_length) },
	{ 6, SFS_TC_I64, "column_index_offset", FK_I64, NN,
	  .off = AT(chunk, column_index_offset) },
	{ 7, SFS_TC_I32, "column_index_length", FK_I32, NN,
	  .off = AT(chunk, column_index_length) },
	{ 8, ANY_TYPE, "crypto_metadata", FK_CALL, 0, .call = encrypted_chunk },
	{ 9, ANY_TYPE, "encrypted_column_metadata", FK_CALL, 0,
	  .call = encrypted_chunk },
	{ 0 },
};

/* ColumnMetaData (into the chunk) */
static const struct field_def cmd_fields[] = {
	{ 1, SFS_TC_I32, "type", FK_I32, REQ, .off = AT(chunk, type) },
	{ 2, SFS_TC_LIST, "encodings", FK_CALL, REQ, .call = read_encodings },
	{ 3, SFS_TC_LIST, "path_in_schema", FK_CALL, REQ, .call = read_path },
	{ 4, SFS_TC_I32, "codec", FK_I32, REQ, .off = AT(chunk, codec) },
	{ 5, SFS_TC_I64, "num_values", FK_I64, REQ | NN,
	  .off = AT(chunk, num_values) },
	{ 6, SFS_TC_I64, "total_uncompressed_size", FK_I64, REQ | NN,
	  .off = AT(chunk, total_uncompressed_size) },
	{ 7, SFS_TC_I64, "total_compressed_size", FK_I64, REQ | NN,
	  .off = AT(chunk, total_compressed_size) },
	{ 9, SFS_TC_I64, "data_page_offset", FK_I64, REQ | NN,
	  .off = AT(chunk, data_page_offset) },
	{ 10, SFS_TC_I64, "index_page_offset", FK_I64, NN,
	  .off = AT(chunk, index_page_offset) },
	{ 11, SFS_TC_I64, "dictionary_page_offset", FK_I64, NN,
	  .off = AT(chunk, dictionary_page_offset) },
	{ 12, SFS_TC_STRUCT, "statistics", FK_CALL, 0, .call = has_statistics },
	{ 14, SFS_TC_I64, "bloom_filter_offset", FK_I64, NN,
	  .off = AT(chunk, bloom_filter_offset) },
	{ 15, SFS_TC_I32, "bloom_filter_length", FK_I32, NN,
	  .off = AT(chunk, bloom_filter_length) },
	{ 0 },
};

/* KeyValue */
static const struct field_def kv_fields[] = {
	{ 1, SFS_TC_BINARY, "key", FK_BYTES, REQ, .off = AT(key_value, key) },
	{ 2, SFS_TC_BINARY, "value", FK_BYTES, 0, .off = AT(key_value, value) },
	{ 0 },
};

/* The fields of one struct seen so far (ids below 32 only: the known). */
struct seen {
	uint32_t bits;
};

static const struct field_def *find_def(const struct field_def *defs, int id)
{
	for (; defs->name; defs++)
		if (defs->id == id)
			return defs;
	return NULL;
}

/*
 * Check a known field's type and that it appears once; returns its
 * definition, NULL for an unknown field (skipped), or sets *rc.
 */
static const struct field_def *known(struct sfs_thrift_reader *r,
				     const struct field_def *defs,
				     const struct where *w, struct seen *seen,
				     const struct sfs_thrift_field *f, int *rc)
{
	const struct field_def *d = find_def(defs, f->id);
	int type = f->type == SFS_TC_FALSE ? SFS_TC_TRUE : f->type;

	*rc = 0;
	if (!d)
		return NULL;
	if (d->type != ANY_TYPE && type != d->type) {
		*rc = sfs_thrift_fail(r, f->at,
				      "%s: field %d (%s) is %s, expected %s",
				      where_fmt(w).s, d->id, d->name,
				      sfs_thrift_type_name(f->type),
				      sfs_thrift_type_name(d->type));
		return NULL;
	}
	if (seen->bits & (1u << d->id)) {
		*rc = sfs_thrift_fail(r, f->at,
				      "%s: field %d (%s) appears twice",
				      where_fmt(w).s, d->id, d->name);
		return NULL;
	}
	seen->bits |= 1u << d->id;
	return d;
}

/* Every required field of defs must have been seen. */
static int check_required(struct sfs_thrift_reader *r, size_t at,
			  const struct field_def *defs, const struct where *w,
			  const struct seen *seen)
{
	for (; defs->name; defs++)
		if ((defs->flags & F_REQUIRED) &&
		    !(seen->bits & (1u << defs->id)))
			return sfs_thrift_fail(r, at,
					       "%s: no %s (field %d, required)",
					       where_fmt(w).s, defs->name,
					       defs->id);
	return 0;
}

static int not_negative(struct sfs_thrift_reader *r, size_t at,
			const struct where *w, const char *name, int64_t v)
{
	if (v >= 0)
		return 0;
	return sfs_thrift_fail(r, at, "%s: %s is negative (%lld)",
			       where_fmt(w).s, name, (long long)v);
}

static int read_bytes(struct sfs_thrift_reader *r, struct sfs_parquet_bytes *b)
{
	return sfs_thrift_read_binary(r, &b->p, &b->len);
}

/* The value of known field f (defined by fd) into dst, as fd says. */
static int read_value(struct dec *d, const struct field_def *fd,
		      const struct where *w, void *dst,
		      const struct sfs_thrift_field *f)
{
	struct sfs_thrift_reader *r = d->r;
	char *at = (char *)dst + fd->off;
	struct sfs_parquet_bytes *b = (struct sfs_parquet_bytes *)at;
	size_t start = r->pos;
	int64_t v = 0;
	int rc;

	switch (fd->kind) {
	case FK_I32:
		rc = sfs_thrift_read_i32(r, (int32_t *)at);
		v = *(int32_t *)at;
		break;
	case FK_I64:
		rc = sfs_thrift_read_i64(r, (int64_t *)at);
		v = *(int64_t *)at;
		break;
	case FK_BYTES:
		return read_bytes(r, b);
	case FK_SPAN:
		rc = sfs_thrift_skip(r, f->type);
		b->p = r->buf + start;
		b->len = r->pos - start;
		return rc;
	default:
		return fd->call(d, w, dst, f);
	}
	if (rc || !(fd->flags & F_NOT_NEGATIVE))
		return rc;
	return not_negative(r, f->at, w, fd->name, v);
}

/* The struct at the reader's position, whose fields defs describes, into
 * dst (named w in messages). */
static int read_struct(struct dec *d, const struct field_def *defs,
		       const struct where *w, void *dst)
{
	struct sfs_thrift_reader *r = d->r;
	struct sfs_thrift_field f;
	struct seen seen = { 0 };
	size_t at = r->pos;
	int last = 0, rc;

	rc = sfs_thrift_struct_begin(r);
	while (!rc) {
		const struct field_def *fd;

		rc = sfs_thrift_read_field(r, &last, &f);
		if (rc || f.type == SFS_TC_STOP)
			break;
		fd = known(r, defs, w, &seen, &f, &rc);
		if (rc)
			break;
		rc = fd ? read_value(d, fd, w, dst, &f) :
			  sfs_thrift_skip(r, f.type);
	}
	sfs_thrift_struct_end(r);
	if (rc)
		return rc;
	return check_required(r, at, defs, w, &seen);
}

/* ---- The fields decoded by a call ---- */

/* Read a list header whose elements must be of type want. */
static int read_list_of(struct sfs_thrift_reader *r, const struct where *w,
			const char *name, int want, size_t *n)
{
	size_t at = r->pos;
	int type, rc;

	rc = sfs_thrift_read_list(r, &type, n);
	if (rc)
		return rc;
	if (type == SFS_TC_FALSE)
		type = SFS_TC_TRUE;
	if (type != want)
		return sfs_thrift_fail(r, at,
				       "%s: %s is a list of %s, expected %s",
				       where_fmt(w).s, name,
				       sfs_thrift_type_name(type),
				       sfs_thrift_type_name(want));
	return 0;
}

static int read_schema(struct dec *d, const struct where *w, void *dst,
		       const struct sfs_thrift_field *f)
{
	struct sfs_parquet_meta *m = dst;
	size_t n, i, cap = 0;
	int rc;

	(void)f;
	rc = read_list_of(d->r, w, "schema", SFS_TC_STRUCT, &n);
	for (i = 0; !rc && i < n; i++) {
		struct where we = { "schema element", i, 0, 1 };
		struct sfs_parquet_schema *e;

		rc = pool_grow(d, &m->schema, &cap, i + 1, sizeof(*m->schema));
		if (rc)
			break;
		e = &m->schema[i];
		memset(e, 0, sizeof(*e));
		e->type = e->type_length = e->repetition_type = -1;
		e->num_children = e->converted_type = -1;
		rc = read_struct(d, schema_fields, &we, e);
		if (!rc)
			m->nschema = i + 1;
	}
	return rc;
}

static int read_key_values(struct dec *d, const struct where *w, void *dst,
			   const struct sfs_thrift_field *f)
{
	struct sfs_parquet_meta *m = dst;
	size_t n, i, cap = 0;
	int rc;

	(void)f;
	rc = read_list_of(d->r, w, "key_value_metadata", SFS_TC_STRUCT, &n);
	for (i = 0; !rc && i < n; i++) {
		struct where wk = { "key_value_metadata", i, 0, 1 };

		rc = pool_grow(d, &m->key_values, &cap, i + 1,
			       sizeof(*m->key_values));
		if (rc)
			break;
		memset(&m->key_values[i], 0, sizeof(m->key_values[i]));
		rc = read_struct(d, kv_fields, &wk, &m->key_values[i]);
		if (!rc)
			m->nkey_values = i + 1;
	}
	return rc;
}

static int read_row_groups(struct dec *d, const struct where *w, void *dst,
			   const struct sfs_thrift_field *f)
{
	struct sfs_parquet_meta *m = dst;
	size_t n, i;
	int rc;

	(void)f;
	rc = read_list_of(d->r, w, "row_groups", SFS_TC_STRUCT, &n);
	for (i = 0; !rc && i < n; i++) {
		struct where wg = { "row group", i, 0, 1 };
		struct sfs_parquet_row_group *g;

		rc = pool_grow(d, &m->row_groups, &d->p->rg_cap, i + 1,
			       sizeof(*m->row_groups));
		if (rc)
			break;
		g = &m->row_groups[i];
		memset(g, 0, sizeof(*g));
		g->at = d->r->pos;
		rc = read_struct(d, rg_fields, &wg, g);
		g->len = d->r->pos - g->at;
		m->nrow_groups = i + 1;
	}
	return rc;
}

/* RowGroup.columns: the chunks go to m->chunk_pool. */
static int read_columns(struct dec *d, const struct where *w, void *dst,
			const struct sfs_thrift_field *f)
{
	struct sfs_parquet_row_group *g = dst;
	struct sfs_parquet_meta *m = d->m;
	size_t n, j, k;
	int rc;

	(void)f;
	rc = read_list_of(d->r, w, "columns", SFS_TC_STRUCT, &n);
	for (j = 0; !rc && j < n; j++) {
		struct where wc = { "row group", w->a, j, 2 };
		struct sfs_parquet_chunk *c;

		k = m->nchunk_pool;
		rc = pool_grow(d, &m->chunk_pool, &d->p->chunks_cap, k + 1,
			       sizeof(*m->chunk_pool));
		if (rc)
			break;
		m->nchunk_pool = k + 1;
		g->nchunks = j + 1;
		c = &m->chunk_pool[k];
		memset(c, 0, sizeof(*c));
		c->index_page_offset = c->dictionary_page_offset = -1;
		c->offset_index_offset = c->column_index_offset = -1;
		c->offset_index_length = c->column_index_length = -1;
		c->bloom_filter_offset = -1;
		c->bloom_filter_length = -1;
		c->at = d->r->pos;
		rc = read_struct(d, chunk_fields, &wc, c);
		c->len = d->r->pos - c->at;
	}
	return rc;
}

static int read_column_meta(struct dec *d, const struct where *w, void *dst,
			    const struct sfs_thrift_field *f)
{
	(void)f;
	return read_struct(d, cmd_fields, w, dst);
}

/* ColumnMetaData.encodings: to m->encoding_pool. */
static int read_encodings(struct dec *d, const struct where *w, void *dst,
			  const struct sfs_thrift_field *f)
{
	struct sfs_parquet_chunk *c = dst;
	struct sfs_parquet_meta *m = d->m;
	size_t n, i;
	int rc;

	(void)f;
	rc = read_list_of(d->r, w, "encodings", SFS_TC_I32, &n);
	for (i = 0; !rc && i < n; i++) {
		size_t k = m->nencoding_pool;

		rc = pool_grow(d, &m->encoding_pool, &d->p->encodings_cap,
			       k + 1, sizeof(*m->encoding_pool));
		if (!rc)
			rc = sfs_thrift_read_i32(d->r, &m->encoding_pool[k]);
		if (!rc) {
			m->nencoding_pool = k + 1;
			c->nencodings = i + 1;
		}
	}
	return rc;
}

/* ColumnMetaData.path_in_schema: to m->path_pool. */
static int read_path(struct dec *d, const struct where *w, void *dst,
		     const struct sfs_thrift_field *f)
{
	struct sfs_parquet_chunk *c = dst;
	struct sfs_parquet_meta *m = d->m;
	size_t n, i;
	int rc;

	(void)f;
	rc = read_list_of(d->r, w, "path_in_schema", SFS_TC_BINARY, &n);
	for (i = 0; !rc && i < n; i++) {
		size_t k = m->npath_pool;

		rc = pool_grow(d, &m->path_pool, &d->p->paths_cap, k + 1,
			       sizeof(*m->path_pool));
		if (!rc)
			rc = read_bytes(d->r, &m->path_pool[k]);
		if (!rc) {
			m->npath_pool = k + 1;
			c->npath = i + 1;
		}
	}
	return rc;
}

/* ColumnMetaData.statistics: skipped, but a slice must drop them. */
static int has_statistics(struct dec *d, const struct where *w, void *dst,
			  const struct sfs_thrift_field *f)
{
	struct sfs_parquet_chunk *c = dst;

	(void)w;
	c->has_statistics = true;
	return sfs_thrift_skip(d->r, f->type);
}

static int other_file(struct dec *d, const struct where *w, void *dst,
		      const struct sfs_thrift_field *f)
{
	(void)dst;
	return sfs_thrift_fail(
		d->r, f->at,
		"%s: its data is in another file (file_path): not supported, only self-contained files are",
		where_fmt(w).s);
}

static int encrypted_chunk(struct dec *d, const struct where *w, void *dst,
			   const struct sfs_thrift_field *f)
{
	(void)dst;
	return sfs_errorf(
		d->r->err, -ENOTSUP,
		"%s: footer at byte %llu: %s is encrypted: encrypted Parquet files are not supported, decrypt it first",
		d->r->path, (unsigned long long)(d->r->base + f->at),
		where_fmt(w).s);
}

static int encrypted_file(struct dec *d, const struct where *w, void *dst,
			  const struct sfs_thrift_field *f)
{
	(void)w;
	(void)dst;
	return sfs_errorf(
		d->r->err, -ENOTSUP,
		"%s: footer at byte %llu: the file is encrypted (plaintext footer with encryption fields): encrypted Parquet files are not supported, decrypt it first",
		d->r->path, (unsigned long long)(d->r->base + f->at));
}

/* Point the row groups and chunks into the pools, filled in their order. */
static void point_into_pools(struct sfs_parquet_meta *m)
{
	size_t g, j, k = 0, e = 0, q = 0;

	for (g = 0; g < m->nrow_groups; g++) {
		struct sfs_parquet_row_group *rg = &m->row_groups[g];

		rg->chunks = rg->nchunks ? m->chunk_pool + k : NULL;
		for (j = 0; j < rg->nchunks; j++) {
			struct sfs_parquet_chunk *c = &rg->chunks[j];

			c->encodings = c->nencodings ? m->encoding_pool + e :
						       NULL;
			c->path_in_schema = c->npath ? m->path_pool + q : NULL;
			e += c->nencodings;
			q += c->npath;
		}
		k += rg->nchunks;
	}
}

static int read_file_meta(struct sfs_thrift_reader *r,
			  struct sfs_parquet_meta *m, struct pools *p)
{
	struct where w = { .what = "FileMetaData" };
	struct dec d = { r, m, p };

	return read_struct(&d, file_fields, &w, m);
}

/* All len bytes at off, or -errno; the file ending before them is -EIO. */
static int read_exact(int fd, void *buf, size_t len, uint64_t off)
{
	ssize_t got = sfs_pread_full(fd, buf, len, off);

	if (got < 0)
		return (int)got;
	return (size_t)got == len ? 0 : -EIO;
}

void sfs_parquet_meta_free(struct sfs_parquet_meta *m)
{
	if (!m)
		return;
	free(m->chunk_pool);
	free(m->encoding_pool);
	free(m->path_pool);
	free(m->row_groups);
	free(m->schema);
	free(m->key_values);
	free(m->footer);
	free(m->path);
	free(m);
}

int sfs_parquet_footer_read(int fd, const char *path, uint64_t size,
			    struct sfs_parquet_meta **out,
			    struct sfs_error *err)
{
	struct sfs_thrift_reader r = { 0 };
	struct pools pools = { 0 };
	struct sfs_parquet_meta *m;
	unsigned char head[4], tail[8];
	uint32_t flen;
	int rc;

	if (size < 12)
		return sfs_errorf(
			err, -EINVAL,
			"%s: %llu bytes is too short for a Parquet file (it needs at least 12: PAR1, the footer length, PAR1)",
			path, (unsigned long long)size);
	rc = read_exact(fd, head, 4, 0);
	if (!rc)
		rc = read_exact(fd, tail, 8, size - 8);
	if (rc)
		return sfs_errorf(
			err, rc,
			"%s: reading the Parquet magic and footer length failed: %s",
			path, strerror(-rc));
	if (!memcmp(tail + 4, "PARE", 4))
		return sfs_errorf(
			err, -ENOTSUP,
			"%s: byte %llu: the footer is encrypted (PARE): encrypted Parquet files are not supported, decrypt it first",
			path, (unsigned long long)(size - 4));
	if (memcmp(head, "PAR1", 4))
		return sfs_errorf(
			err, -EINVAL,
			"%s: byte 0: no PAR1 magic: not a Parquet file", path);
	if (memcmp(tail + 4, "PAR1", 4))
		return sfs_errorf(
			err, -EINVAL,
			"%s: byte %llu: no PAR1 magic at the end: not a Parquet file, or a truncated one",
			path, (unsigned long long)(size - 4));
	flen = sfs_le32(tail);
	if (flen > size - 12)
		return sfs_errorf(
			err, -EINVAL,
			"%s: byte %llu: the footer length %u is more than the file holds (%llu bytes between the magics): truncated or not Parquet",
			path, (unsigned long long)(size - 8), flen,
			(unsigned long long)(size - 12));
	if (flen > SFS_PARQUET_FOOTER_MAX)
		return sfs_errorf(
			err, -EFBIG,
			"%s: byte %llu: the footer is %u bytes, more than the %u this reader accepts",
			path, (unsigned long long)(size - 8), flen,
			SFS_PARQUET_FOOTER_MAX);
	m = calloc(1, sizeof(*m));
	if (!m)
		return sfs_errorf(err, -ENOMEM, "%s: out of memory", path);
	m->size = size;
	m->path = strdup(path);
	if (!m->path) {
		rc = sfs_errorf(err, -ENOMEM, "%s: out of memory", path);
		goto out_free;
	}
	m->data_end = size - 8 - flen;
	m->footer_len = flen;
	m->footer = malloc(flen ? flen : 1);
	if (!m->footer) {
		rc = sfs_errorf(err, -ENOMEM, "%s: out of memory", path);
		goto out_free;
	}
	rc = read_exact(fd, m->footer, flen, m->data_end);
	if (rc) {
		rc = sfs_errorf(
			err, rc,
			"%s: reading the %u-byte footer at byte %llu failed: %s",
			path, flen, (unsigned long long)m->data_end,
			strerror(-rc));
		goto out_free;
	}
	r.buf = m->footer;
	r.len = flen;
	r.base = m->data_end;
	r.path = path;
	r.err = err;
	rc = read_file_meta(&r, m, &pools);
	if (!rc) {
		point_into_pools(m);
		rc = sfs_pq_meta_check(&r, m);
	}
	if (rc)
		goto out_free;
	*out = m;
	return 0;
out_free:
	sfs_parquet_meta_free(m);
	return rc;
}
