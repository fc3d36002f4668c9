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

/* A field of a struct this decoder knows: its name and compact type. */
struct field_def {
	int id;
	int type;
	const char *name;
};

static const struct field_def file_fields[] = {
	{ 1, SFS_TC_I32, "version" },
	{ 2, SFS_TC_LIST, "schema" },
	{ 3, SFS_TC_I64, "num_rows" },
	{ 4, SFS_TC_LIST, "row_groups" },
	{ 5, SFS_TC_LIST, "key_value_metadata" },
	{ 6, SFS_TC_BINARY, "created_by" },
	{ 0, 0, NULL },
};

static const struct field_def schema_fields[] = {
	{ 1, SFS_TC_I32, "type" },
	{ 2, SFS_TC_I32, "type_length" },
	{ 3, SFS_TC_I32, "repetition_type" },
	{ 4, SFS_TC_BINARY, "name" },
	{ 5, SFS_TC_I32, "num_children" },
	{ 6, SFS_TC_I32, "converted_type" },
	{ 10, SFS_TC_STRUCT, "logicalType" },
	{ 0, 0, NULL },
};

static const struct field_def rg_fields[] = {
	{ 1, SFS_TC_LIST, "columns" },
	{ 2, SFS_TC_I64, "total_byte_size" },
	{ 3, SFS_TC_I64, "num_rows" },
	{ 0, 0, NULL },
};

static const struct field_def chunk_fields[] = {
	{ 1, SFS_TC_BINARY, "file_path" },
	{ 2, SFS_TC_I64, "file_offset" },
	{ 3, SFS_TC_STRUCT, "meta_data" },
	{ 4, SFS_TC_I64, "offset_index_offset" },
	{ 5, SFS_TC_I32, "offset_index_length" },
	{ 6, SFS_TC_I64, "column_index_offset" },
	{ 7, SFS_TC_I32, "column_index_length" },
	{ 0, 0, NULL },
};

static const struct field_def cmd_fields[] = {
	{ 1, SFS_TC_I32, "type" },
	{ 2, SFS_TC_LIST, "encodings" },
	{ 3, SFS_TC_LIST, "path_in_schema" },
	{ 4, SFS_TC_I32, "codec" },
	{ 5, SFS_TC_I64, "num_values" },
	{ 6, SFS_TC_I64, "total_uncompressed_size" },
	{ 7, SFS_TC_I64, "total_compressed_size" },
	{ 9, SFS_TC_I64, "data_page_offset" },
	{ 10, SFS_TC_I64, "index_page_offset" },
	{ 11, SFS_TC_I64, "dictionary_page_offset" },
	{ 12, SFS_TC_STRUCT, "statistics" },
	{ 14, SFS_TC_I64, "bloom_filter_offset" },
	{ 15, SFS_TC_I32, "bloom_filter_length" },
	{ 0, 0, NULL },
};

static const struct field_def kv_fields[] = {
	{ 1, SFS_TC_BINARY, "key" },
	{ 2, SFS_TC_BINARY, "value" },
	{ 0, 0, NULL },
};

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
	if (type != d->type) {
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

/* Every field of defs whose id is in required must have been seen. */
static int check_required(struct sfs_thrift_reader *r, size_t at,
			  const struct field_def *defs, const struct where *w,
			  const struct seen *seen, uint32_t required)
{
	for (; defs->name; defs++)
		if ((required & (1u << defs->id)) &&
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

/* n more bytes of decoded structures: refused past the budget. */
static int spend(struct sfs_thrift_reader *r, struct sfs_parquet_meta *m,
		 struct pools *p, size_t n)
{
	p->bytes += n;
	if (p->bytes <= SFS_PARQUET_DECODED_MAX)
		return 0;
	return sfs_errorf(
		r->err, -EFBIG,
		"%s: footer at byte %llu: its %zu-byte footer decodes to more than the %u MiB shardfs decodes per footer (%zu row groups, %zu column chunks so far): rewrite the file with fewer, larger row groups (e.g. pyarrow's row_group_size)",
		r->path, (unsigned long long)(r->base + r->pos), r->len,
		SFS_PARQUET_DECODED_MAX >> 20, m->nrow_groups, m->nchunk_pool);
}

#define MALLOC_HEADER 16

/*
 * Room for need elements of size bytes in *arrayp (capacity *cap): the
 * capacity it grows to (double, at least 8: what sfs_grow gives when
 * asked for it) is charged before it is allocated.  0, -EFBIG or -ENOMEM.
 */
static int pool_grow(struct sfs_thrift_reader *r, struct sfs_parquet_meta *m,
		     struct pools *p, void *arrayp, size_t *cap, size_t need,
		     size_t size)
{
	size_t want;
	int rc;

	if (need <= *cap)
		return 0;
	want = *cap ? 2 * *cap : 8;
	if (want < need)
		want = need;
	if (want > SFS_PARQUET_DECODED_MAX / size)
		return spend(r, m, p, SFS_PARQUET_DECODED_MAX + (size_t)1);
	rc = spend(r, m, p, (want - *cap) * size + (*cap ? 0 : MALLOC_HEADER));
	if (rc)
		return rc;
	return sfs_grow(arrayp, cap, want, size) ? sfs_pq_footer_nomem(r) : 0;
}

static int read_bytes(struct sfs_thrift_reader *r, struct sfs_parquet_bytes *b)
{
	return sfs_thrift_read_binary(r, &b->p, &b->len);
}

static int read_schema_element(struct sfs_thrift_reader *r, size_t i,
			       struct sfs_parquet_schema *e)
{
	struct sfs_thrift_field f;
	struct seen seen = { 0 };
	struct where w = { "schema element", i, 0, 1 };
	size_t at = r->pos, start;
	int last = 0, rc;

	memset(e, 0, sizeof(*e));
	e->type = e->type_length = e->repetition_type = -1;
	e->num_children = e->converted_type = -1;
	rc = sfs_thrift_struct_begin(r);
	while (!rc) {
		const struct field_def *d;

		rc = sfs_thrift_read_field(r, &last, &f);
		if (rc || f.type == SFS_TC_STOP)
			break;
		d = known(r, schema_fields, &w, &seen, &f, &rc);
		if (rc)
			break;
		switch (d ? d->id : 0) {
		case 1:
			rc = sfs_thrift_read_i32(r, &e->type);
			break;
		case 2:
			rc = sfs_thrift_read_i32(r, &e->type_length);
			break;
		case 3:
			rc = sfs_thrift_read_i32(r, &e->repetition_type);
			break;
		case 4:
			rc = read_bytes(r, &e->name);
			break;
		case 5:
			rc = sfs_thrift_read_i32(r, &e->num_children);
			if (!rc && e->num_children < 0)
				rc = not_negative(r, f.at, &w, "num_children",
						  e->num_children);
			break;
		case 6:
			rc = sfs_thrift_read_i32(r, &e->converted_type);
			break;
		case 10:
			start = r->pos;
			rc = sfs_thrift_skip(r, f.type);
			e->logical_type.p = r->buf + start;
			e->logical_type.len = r->pos - start;
			break;
		default:
			rc = sfs_thrift_skip(r, f.type);
		}
	}
	sfs_thrift_struct_end(r);
	if (rc)
		return rc;
	return check_required(r, at, schema_fields, &w, &seen, 1u << 4);
}

static int read_schema(struct sfs_thrift_reader *r, struct sfs_parquet_meta *m,
		       struct pools *p)
{
	struct where w = { .what = "FileMetaData" };
	size_t n, i, cap = 0;
	int rc;

	rc = read_list_of(r, &w, "schema", SFS_TC_STRUCT, &n);
	for (i = 0; !rc && i < n; i++) {
		rc = pool_grow(r, m, p, &m->schema, &cap, i + 1,
			       sizeof(*m->schema));
		if (!rc)
			rc = read_schema_element(r, i, &m->schema[i]);
		if (!rc)
			m->nschema = i + 1;
	}
	return rc;
}

static int read_key_value(struct sfs_thrift_reader *r, size_t i,
			  struct sfs_parquet_key_value *kv)
{
	struct sfs_thrift_field f;
	struct seen seen = { 0 };
	struct where w = { "key_value_metadata", i, 0, 1 };
	size_t at = r->pos;
	int last = 0, rc;

	memset(kv, 0, sizeof(*kv));
	rc = sfs_thrift_struct_begin(r);
	while (!rc) {
		const struct field_def *d;

		rc = sfs_thrift_read_field(r, &last, &f);
		if (rc || f.type == SFS_TC_STOP)
			break;
		d = known(r, kv_fields, &w, &seen, &f, &rc);
		if (rc)
			break;
		if (d && d->id == 1)
			rc = read_bytes(r, &kv->key);
		else if (d && d->id == 2)
			rc = read_bytes(r, &kv->value);
		else
			rc = sfs_thrift_skip(r, f.type);
	}
	sfs_thrift_struct_end(r);
	if (rc)
		return rc;
	return check_required(r, at, kv_fields, &w, &seen, 1u << 1);
}

static int read_key_values(struct sfs_thrift_reader *r,
			   struct sfs_parquet_meta *m, struct pools *p)
{
	struct where w = { .what = "FileMetaData" };
	size_t n, i, cap = 0;
	int rc;

	rc = read_list_of(r, &w, "key_value_metadata", SFS_TC_STRUCT, &n);
	for (i = 0; !rc && i < n; i++) {
		rc = pool_grow(r, m, p, &m->key_values, &cap, i + 1,
			       sizeof(*m->key_values));
		if (!rc)
			rc = read_key_value(r, i, &m->key_values[i]);
		if (!rc)
			m->nkey_values = i + 1;
	}
	return rc;
}

static int read_encodings(struct sfs_thrift_reader *r, const struct where *w,
			  struct sfs_parquet_meta *m, struct pools *p,
			  struct sfs_parquet_chunk *c)
{
	size_t n, i;
	int rc;

	rc = read_list_of(r, w, "encodings", SFS_TC_I32, &n);
	for (i = 0; !rc && i < n; i++) {
		size_t k = m->nencoding_pool;

		rc = pool_grow(r, m, p, &m->encoding_pool, &p->encodings_cap,
			       k + 1, sizeof(*m->encoding_pool));
		if (!rc)
			rc = sfs_thrift_read_i32(r, &m->encoding_pool[k]);
		if (!rc) {
			m->nencoding_pool = k + 1;
			c->nencodings = i + 1;
		}
	}
	return rc;
}

static int read_path(struct sfs_thrift_reader *r, const struct where *w,
		     struct sfs_parquet_meta *m, struct pools *p,
		     struct sfs_parquet_chunk *c)
{
	size_t n, i;
	int rc;

	rc = read_list_of(r, w, "path_in_schema", SFS_TC_BINARY, &n);
	for (i = 0; !rc && i < n; i++) {
		size_t k = m->npath_pool;

		rc = pool_grow(r, m, p, &m->path_pool, &p->paths_cap, k + 1,
			       sizeof(*m->path_pool));
		if (!rc)
			rc = read_bytes(r, &m->path_pool[k]);
		if (!rc) {
			m->npath_pool = k + 1;
			c->npath = i + 1;
		}
	}
	return rc;
}

static int read_i64_field(struct sfs_thrift_reader *r, const struct where *w,
			  const struct sfs_thrift_field *f,
			  const struct field_def *d, int64_t *v)
{
	int rc = sfs_thrift_read_i64(r, v);

	if (rc)
		return rc;
	return not_negative(r, f->at, w, d->name, *v);
}

static int read_i32_field(struct sfs_thrift_reader *r, const struct where *w,
			  const struct sfs_thrift_field *f,
			  const struct field_def *d, int32_t *v)
{
	int rc = sfs_thrift_read_i32(r, v);

	if (rc)
		return rc;
	return not_negative(r, f->at, w, d->name, *v);
}

static int read_column_meta(struct sfs_thrift_reader *r, const struct where *w,
			    struct sfs_parquet_meta *m, struct pools *p,
			    struct sfs_parquet_chunk *c)
{
	struct sfs_thrift_field f;
	struct seen seen = { 0 };
	size_t at = r->pos;
	int last = 0, rc;

	rc = sfs_thrift_struct_begin(r);
	while (!rc) {
		const struct field_def *d;

		rc = sfs_thrift_read_field(r, &last, &f);
		if (rc || f.type == SFS_TC_STOP)
			break;
		d = known(r, cmd_fields, w, &seen, &f, &rc);
		if (rc)
			break;
		switch (d ? d->id : 0) {
		case 1:
			rc = sfs_thrift_read_i32(r, &c->type);
			break;
		case 2:
			rc = read_encodings(r, w, m, p, c);
			break;
		case 3:
			rc = read_path(r, w, m, p, c);
			break;
		case 4:
			rc = sfs_thrift_read_i32(r, &c->codec);
			break;
		case 5:
			rc = read_i64_field(r, w, &f, d, &c->num_values);
			break;
		case 6:
			rc = read_i64_field(r, w, &f, d,
					    &c->total_uncompressed_size);
			break;
		case 7:
			rc = read_i64_field(r, w, &f, d,
					    &c->total_compressed_size);
			break;
		case 9:
			rc = read_i64_field(r, w, &f, d, &c->data_page_offset);
			break;
		case 10:
			rc = read_i64_field(r, w, &f, d, &c->index_page_offset);
			break;
		case 11:
			rc = read_i64_field(r, w, &f, d,
					    &c->dictionary_page_offset);
			break;
		case 12:
			c->has_statistics = true;
			rc = sfs_thrift_skip(r, f.type);
			break;
		case 14:
			rc = read_i64_field(r, w, &f, d,
					    &c->bloom_filter_offset);
			break;
		case 15:
			rc = read_i32_field(r, w, &f, d,
					    &c->bloom_filter_length);
			break;
		default:
			rc = sfs_thrift_skip(r, f.type);
		}
	}
	sfs_thrift_struct_end(r);
	if (rc)
		return rc;
	return check_required(r, at, cmd_fields, w, &seen,
			      1u << 1 | 1u << 2 | 1u << 3 | 1u << 4 | 1u << 5 |
				      1u << 6 | 1u << 7 | 1u << 9);
}

static int read_chunk(struct sfs_thrift_reader *r, struct sfs_parquet_meta *m,
		      struct pools *p, size_t rg, size_t col,
		      struct sfs_parquet_chunk *c)
{
	struct sfs_thrift_field f;
	struct seen seen = { 0 };
	struct where w = { "row group", rg, col, 2 };
	int last = 0, rc;

	memset(c, 0, sizeof(*c));
	c->index_page_offset = c->dictionary_page_offset = -1;
	c->offset_index_offset = c->column_index_offset = -1;
	c->offset_index_length = c->column_index_length = -1;
	c->bloom_filter_offset = -1;
	c->bloom_filter_length = -1;
	c->at = r->pos;
	rc = sfs_thrift_struct_begin(r);
	while (!rc) {
		const struct field_def *d;

		rc = sfs_thrift_read_field(r, &last, &f);
		if (rc || f.type == SFS_TC_STOP)
			break;
		if (f.id == 8 || f.id == 9) {
			rc = sfs_errorf(
				r->err, -ENOTSUP,
				"%s: footer at byte %llu: %s is encrypted: encrypted Parquet files are not supported, decrypt it first",
				r->path, (unsigned long long)(r->base + f.at),
				where_fmt(&w).s);
			break;
		}
		d = known(r, chunk_fields, &w, &seen, &f, &rc);
		if (rc)
			break;
		switch (d ? d->id : 0) {
		case 1:
			rc = sfs_thrift_fail(
				r, f.at,
				"%s: its data is in another file (file_path): not supported, only self-contained files are",
				where_fmt(&w).s);
			break;
		case 2:
			rc = read_i64_field(r, &w, &f, d, &c->file_offset);
			break;
		case 3:
			rc = read_column_meta(r, &w, m, p, c);
			break;
		case 4:
			rc = read_i64_field(r, &w, &f, d,
					    &c->offset_index_offset);
			break;
		case 5:
			rc = read_i32_field(r, &w, &f, d,
					    &c->offset_index_length);
			break;
		case 6:
			rc = read_i64_field(r, &w, &f, d,
					    &c->column_index_offset);
			break;
		case 7:
			rc = read_i32_field(r, &w, &f, d,
					    &c->column_index_length);
			break;
		default:
			rc = sfs_thrift_skip(r, f.type);
		}
	}
	sfs_thrift_struct_end(r);
	c->len = r->pos - c->at;
	if (rc)
		return rc;
	return check_required(r, c->at, chunk_fields, &w, &seen, 1u << 3);
}

static int read_row_group(struct sfs_thrift_reader *r,
			  struct sfs_parquet_meta *m, struct pools *p, size_t i,
			  struct sfs_parquet_row_group *g)
{
	struct sfs_thrift_field f;
	struct seen seen = { 0 };
	struct where w = { "row group", i, 0, 1 };
	size_t n, j, k;
	int last = 0, rc;

	memset(g, 0, sizeof(*g));
	g->at = r->pos;
	rc = sfs_thrift_struct_begin(r);
	while (!rc) {
		const struct field_def *d;

		rc = sfs_thrift_read_field(r, &last, &f);
		if (rc || f.type == SFS_TC_STOP)
			break;
		d = known(r, rg_fields, &w, &seen, &f, &rc);
		if (rc)
			break;
		switch (d ? d->id : 0) {
		case 1:
			rc = read_list_of(r, &w, "columns", SFS_TC_STRUCT, &n);
			for (j = 0; !rc && j < n; j++) {
				k = m->nchunk_pool;
				rc = pool_grow(r, m, p, &m->chunk_pool,
					       &p->chunks_cap, k + 1,
					       sizeof(*m->chunk_pool));
				if (rc)
					break;
				m->nchunk_pool = k + 1;
				g->nchunks = j + 1;
				rc = read_chunk(r, m, p, i, j,
						&m->chunk_pool[k]);
			}
			break;
		case 2:
			rc = read_i64_field(r, &w, &f, d, &g->total_byte_size);
			break;
		case 3:
			rc = read_i64_field(r, &w, &f, d, &g->num_rows);
			break;
		default:
			rc = sfs_thrift_skip(r, f.type);
		}
	}
	sfs_thrift_struct_end(r);
	g->len = r->pos - g->at;
	if (rc)
		return rc;
	return check_required(r, g->at, rg_fields, &w, &seen,
			      1u << 1 | 1u << 2 | 1u << 3);
}

static int read_row_groups(struct sfs_thrift_reader *r,
			   struct sfs_parquet_meta *m, struct pools *p)
{
	struct where w = { .what = "FileMetaData" };
	size_t n, i;
	int rc;

	rc = read_list_of(r, &w, "row_groups", SFS_TC_STRUCT, &n);
	for (i = 0; !rc && i < n; i++) {
		rc = pool_grow(r, m, p, &m->row_groups, &p->rg_cap, i + 1,
			       sizeof(*m->row_groups));
		if (rc)
			break;
		rc = read_row_group(r, m, p, i, &m->row_groups[i]);
		m->nrow_groups = i + 1;
	}
	return rc;
}

/* Point the row groups and chunks into the pools, filled in their order. */
static void point_into_pools(struct sfs_parquet_meta *m)
{
	size_t g, j, k = 0, e = 0, q = 0;

	for (g = 0; g < m->nrow_groups; g++) {
		struct sfs_parquet_row_group *rg = &m->row_groups[g];

		rg->chunks = m->chunk_pool + k;
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
	struct sfs_thrift_field f;
	struct seen seen = { 0 };
	int last = 0, rc;

	rc = sfs_thrift_struct_begin(r);
	while (!rc) {
		const struct field_def *d;

		rc = sfs_thrift_read_field(r, &last, &f);
		if (rc || f.type == SFS_TC_STOP)
			break;
		if (f.id == 8 || f.id == 9) {
			rc = sfs_errorf(
				r->err, -ENOTSUP,
				"%s: footer at byte %llu: the file is encrypted (plaintext footer with encryption fields): encrypted Parquet files are not supported, decrypt it first",
				r->path, (unsigned long long)(r->base + f.at));
			break;
		}
		d = known(r, file_fields, &w, &seen, &f, &rc);
		if (rc)
			break;
		switch (d ? d->id : 0) {
		case 1:
			rc = sfs_thrift_read_i32(r, &m->version);
			break;
		case 2:
			rc = read_schema(r, m, p);
			break;
		case 3:
			rc = read_i64_field(r, &w, &f, d, &m->num_rows);
			break;
		case 4:
			rc = read_row_groups(r, m, p);
			break;
		case 5:
			rc = read_key_values(r, m, p);
			break;
		case 6:
			rc = read_bytes(r, &m->created_by);
			break;
		default:
			rc = sfs_thrift_skip(r, f.type);
		}
	}
	sfs_thrift_struct_end(r);
	if (rc)
		return rc;
	return check_required(r, 0, file_fields, &w, &seen,
			      1u << 1 | 1u << 2 | 1u << 3 | 1u << 4);
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
