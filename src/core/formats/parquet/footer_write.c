/*
 * The Parquet footer re-emitted for a slice: the checked footer copy
 * re-walked struct by struct, the fields a slice changes rewritten, every
 * other field (unknown ones too) copied byte for byte.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "formats/parquet/parquet_i.h"
#include "shardfs/parquet.h"

/* The writer: re-walks the (checked) footer copy struct by struct. */
struct writer {
	const struct sfs_parquet_meta *m;
	struct sfs_thrift_out o;
	struct sfs_error *err;
	int reported; /* err holds the message already */
};

static struct sfs_thrift_reader reader_at(const struct sfs_parquet_meta *m,
					  size_t at)
{
	struct sfs_thrift_reader r = { .buf = m->footer,
				       .len = m->footer_len,
				       .pos = at,
				       .base = m->data_end,
				       .path = "footer" };

	return r;
}

/* Copy field f, whose value begins at r->pos, header and value. */
static int copy_field(struct writer *w, struct sfs_thrift_reader *r,
		      int *last_out, const struct sfs_thrift_field *f)
{
	size_t start = r->pos;
	int rc = sfs_thrift_skip(r, f->type);

	if (rc)
		return rc;
	sfs_thrift_put_field(&w->o, last_out, f->id, f->type);
	sfs_thrift_put(&w->o, r->buf + start, r->pos - start);
	return 0;
}

/* Field f, an i64, now holds v: copied verbatim when unchanged. */
static int put_i64_field(struct writer *w, struct sfs_thrift_reader *r,
			 int *last_out, const struct sfs_thrift_field *f,
			 int64_t v)
{
	size_t start = r->pos;
	int64_t old;
	int rc = sfs_thrift_read_i64(r, &old);

	if (rc)
		return rc;
	sfs_thrift_put_field(&w->o, last_out, f->id, SFS_TC_I64);
	if (old == v)
		sfs_thrift_put(&w->o, r->buf + start, r->pos - start);
	else
		sfs_thrift_put_i64(&w->o, v);
	return 0;
}

static int skip_field(struct sfs_thrift_reader *r,
		      const struct sfs_thrift_field *f)
{
	return sfs_thrift_skip(r, f->type);
}

/*
 * The value of the i64 field at r moved by delta.  Only file_offset and
 * index_page_offset, which no reader follows, can fall below 0 so; they
 * then become 0, the value for "not written".
 */
static int moved(struct sfs_thrift_reader *r, int64_t delta, int64_t *v)
{
	struct sfs_thrift_reader peek = *r;
	int64_t old;
	int rc = sfs_thrift_read_i64(&peek, &old);

	if (rc)
		return rc;
	if (__builtin_add_overflow(old, delta, v) || *v < 0)
		*v = 0;
	return 0;
}

static int write_column_meta(struct writer *w, struct sfs_thrift_reader *r,
			     const struct sfs_parquet_chunk *c,
			     const struct sfs_parquet_chunk_edit *e)
{
	int64_t delta = e->start - sfs_parquet_chunk_start(c), v;
	bool changed = e->total_compressed_size != c->total_compressed_size ||
		       e->total_uncompressed_size !=
			       c->total_uncompressed_size ||
		       e->num_values != c->num_values;
	struct sfs_thrift_field f;
	int last_in = 0, last_out = 0, rc = 0;

	while (!rc) {
		rc = sfs_thrift_read_field(r, &last_in, &f);
		if (rc || f.type == SFS_TC_STOP)
			break;
		switch (f.id) {
		case 5:
			rc = put_i64_field(w, r, &last_out, &f, e->num_values);
			break;
		case 6:
			rc = put_i64_field(w, r, &last_out, &f,
					   e->total_uncompressed_size);
			break;
		case 7:
			rc = put_i64_field(w, r, &last_out, &f,
					   e->total_compressed_size);
			break;
		case 9:
		case 10:
			rc = moved(r, delta, &v);
			if (!rc)
				rc = put_i64_field(w, r, &last_out, &f, v);
			break;
		case 11:
			v = 0;
			rc = c->dictionary_page_offset > 0 ?
				     moved(r, delta, &v) :
				     0;
			if (!rc)
				rc = put_i64_field(w, r, &last_out, &f, v);
			break;
		case 12:
		case 13:
		case 16:
		case 17:
			rc = changed ? skip_field(r, &f) :
				       copy_field(w, r, &last_out, &f);
			break;
		case 14:
		case 15:
			rc = skip_field(r, &f);
			break;
		default:
			rc = copy_field(w, r, &last_out, &f);
		}
	}
	sfs_thrift_put_stop(&w->o);
	return rc;
}

static int write_chunk(struct writer *w, const struct sfs_parquet_chunk *c,
		       const struct sfs_parquet_chunk_edit *e)
{
	struct sfs_thrift_reader r = reader_at(w->m, c->at);
	int64_t delta = e->start - sfs_parquet_chunk_start(c), v;
	struct sfs_thrift_field f;
	int last_in = 0, last_out = 0, rc = 0;

	while (!rc) {
		rc = sfs_thrift_read_field(&r, &last_in, &f);
		if (rc || f.type == SFS_TC_STOP)
			break;
		switch (f.id) {
		case 2:
			v = 0;
			rc = c->file_offset ? moved(&r, delta, &v) : 0;
			if (!rc)
				rc = put_i64_field(w, &r, &last_out, &f, v);
			break;
		case 3:
			sfs_thrift_put_field(&w->o, &last_out, f.id, f.type);
			rc = write_column_meta(w, &r, c, e);
			break;
		case 4:
		case 5:
		case 6:
		case 7:
			rc = skip_field(&r, &f);
			break;
		default:
			rc = copy_field(w, &r, &last_out, &f);
		}
	}
	sfs_thrift_put_stop(&w->o);
	return rc;
}

static int overflow(struct writer *w, size_t i)
{
	w->reported = 1;
	return sfs_errorf(
		w->err, -EINVAL,
		"%s: slice footer: edit %zu: the sizes of its chunks overflow 64 bits",
		w->m->path, i);
}

static int write_row_group(struct writer *w,
			   const struct sfs_parquet_rg_edit *e, size_t ordinal)
{
	const struct sfs_parquet_row_group *g = &w->m->row_groups[e->row_group];
	struct sfs_thrift_reader r = reader_at(w->m, g->at);
	int64_t dunc = 0, dcomp = 0, delta0 = 0, unc, v;
	struct sfs_thrift_field f;
	int last_in = 0, last_out = 0, rc = 0;
	size_t j;

	for (j = 0; j < g->nchunks; j++)
		if (__builtin_add_overflow(
			    dunc,
			    e->chunks[j].total_uncompressed_size -
				    g->chunks[j].total_uncompressed_size,
			    &dunc) ||
		    __builtin_add_overflow(
			    dcomp,
			    e->chunks[j].total_compressed_size -
				    g->chunks[j].total_compressed_size,
			    &dcomp))
			return overflow(w, ordinal);
	if (__builtin_add_overflow(g->total_byte_size, dunc, &unc) || unc < 0)
		return overflow(w, ordinal);
	if (g->nchunks)
		delta0 = e->chunks[0].start -
			 sfs_parquet_chunk_start(&g->chunks[0]);
	while (!rc) {
		rc = sfs_thrift_read_field(&r, &last_in, &f);
		if (rc || f.type == SFS_TC_STOP)
			break;
		switch (f.id) {
		case 1:
			rc = sfs_thrift_skip(&r, f.type);
			sfs_thrift_put_field(&w->o, &last_out, f.id, f.type);
			sfs_thrift_put_list(&w->o, SFS_TC_STRUCT, g->nchunks);
			for (j = 0; !rc && j < g->nchunks; j++)
				rc = write_chunk(w, &g->chunks[j],
						 &e->chunks[j]);
			break;
		case 2:
			rc = put_i64_field(w, &r, &last_out, &f, unc);
			break;
		case 3:
			rc = put_i64_field(w, &r, &last_out, &f, e->num_rows);
			break;
		case 5:
		case 6:
			if (f.type != SFS_TC_I64) {
				rc = copy_field(w, &r, &last_out, &f);
				break;
			}
			rc = moved(&r, f.id == 5 ? delta0 : dcomp, &v);
			if (!rc)
				rc = put_i64_field(w, &r, &last_out, &f, v);
			break;
		case 7:
			if (f.type != SFS_TC_I16 || ordinal > INT16_MAX) {
				rc = copy_field(w, &r, &last_out, &f);
				break;
			}
			rc = skip_field(&r, &f);
			sfs_thrift_put_field(&w->o, &last_out, f.id,
					     SFS_TC_I16);
			sfs_thrift_put_i64(&w->o, (int64_t)ordinal);
			break;
		default:
			rc = copy_field(w, &r, &last_out, &f);
		}
	}
	sfs_thrift_put_stop(&w->o);
	return rc;
}

static int write_file_meta(struct writer *w,
			   const struct sfs_parquet_rg_edit *rgs, size_t nrgs,
			   int64_t rows)
{
	struct sfs_thrift_reader r = reader_at(w->m, 0);
	struct sfs_thrift_field f;
	int last_in = 0, last_out = 0, rc = 0;
	size_t i;

	while (!rc) {
		rc = sfs_thrift_read_field(&r, &last_in, &f);
		if (rc || f.type == SFS_TC_STOP)
			break;
		switch (f.id) {
		case 3:
			rc = put_i64_field(w, &r, &last_out, &f, rows);
			break;
		case 4:
			/* the list ends where its last row group does, as
			 * the read found it: a slice's footer costs its row
			 * groups, not the file's (400 000 of them took 60 ms
			 * to skip again) */
			if (w->m->nrow_groups) {
				const struct sfs_parquet_row_group *g =
					&w->m->row_groups[w->m->nrow_groups - 1];

				r.pos = g->at + g->len;
			} else {
				rc = sfs_thrift_skip(&r, f.type);
			}
			sfs_thrift_put_field(&w->o, &last_out, f.id, f.type);
			sfs_thrift_put_list(&w->o, SFS_TC_STRUCT, nrgs);
			for (i = 0; !rc && i < nrgs; i++)
				rc = write_row_group(w, &rgs[i], i);
			break;
		default:
			rc = copy_field(w, &r, &last_out, &f);
		}
	}
	sfs_thrift_put_stop(&w->o);
	return rc;
}

/* Every edit names a row group that exists and nothing negative. */
static int check_edits(const struct sfs_parquet_meta *m,
		       const struct sfs_parquet_rg_edit *rgs, size_t nrgs,
		       int64_t *rows, struct sfs_error *err)
{
	size_t i, j;

	*rows = 0;
	for (i = 0; i < nrgs; i++) {
		const struct sfs_parquet_rg_edit *e = &rgs[i];

		if (e->row_group >= m->nrow_groups)
			return sfs_errorf(
				err, -EINVAL,
				"%s: slice footer: edit %zu names row group %zu, but the file has %zu",
				m->path, i, e->row_group, m->nrow_groups);
		if (e->num_rows < 0 ||
		    __builtin_add_overflow(*rows, e->num_rows, rows))
			return sfs_errorf(
				err, -EINVAL,
				"%s: slice footer: edit %zu: num_rows %lld is negative or overflows the total",
				m->path, i, (long long)e->num_rows);
		for (j = 0; j < m->nleaves; j++) {
			const struct sfs_parquet_chunk_edit *c = &e->chunks[j];

			if (c->start < 4 || c->total_compressed_size < 0 ||
			    c->total_uncompressed_size < 0 || c->num_values < 0)
				return sfs_errorf(
					err, -EINVAL,
					"%s: slice footer: edit %zu column %zu: start %lld must be at least 4, sizes %lld and %lld and num_values %lld must not be negative",
					m->path, i, j, (long long)c->start,
					(long long)c->total_compressed_size,
					(long long)c->total_uncompressed_size,
					(long long)c->num_values);
		}
	}
	return 0;
}

int sfs_parquet_footer_write(const struct sfs_parquet_meta *m,
			     const struct sfs_parquet_rg_edit *rgs, size_t nrgs,
			     unsigned char **out, size_t *len,
			     struct sfs_error *err)
{
	struct writer w = { .m = m, .err = err };
	int64_t rows;
	size_t flen;
	int rc;

	rc = check_edits(m, rgs, nrgs, &rows, err);
	if (rc)
		return rc;
	rc = write_file_meta(&w, rgs, nrgs, rows);
	if (rc && w.reported) {
		free(w.o.p);
		return rc;
	}
	if (rc) {
		free(w.o.p);
		return sfs_errorf(
			err, rc,
			"%s: slice footer: the decoded footer no longer reads back (%s)",
			m->path, strerror(-rc));
	}
	flen = w.o.len;
	if (flen > UINT32_MAX) {
		free(w.o.p);
		return sfs_errorf(
			err, -EFBIG,
			"%s: slice footer: the new footer is %zu bytes, more than a Parquet footer length can say",
			m->path, flen);
	}
	sfs_thrift_put_le32(&w.o, (uint32_t)flen);
	sfs_thrift_put(&w.o, "PAR1", 4);
	if (w.o.oom) {
		free(w.o.p);
		return sfs_errorf(
			err, -ENOMEM,
			"%s: slice footer: out of memory writing the footer",
			m->path);
	}
	*out = w.o.p;
	*len = w.o.len;
	return 0;
}
