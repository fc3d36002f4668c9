/*
 * The invariants of a decoded footer (parquet.h): one schema tree, row
 * counts that add up, every chunk's bytes inside the data and no other
 * chunk's.
 */
#include <stdlib.h>

#include "formats/parquet/parquet_i.h"
#include "shardfs/parquet.h"

/* The schema is one tree, listed depth first; count its leaves. */
static int check_schema(struct sfs_thrift_reader *r, struct sfs_parquet_meta *m)
{
	int64_t open = 1;
	size_t i;

	if (m->nschema == 0 || m->schema[0].num_children < 0)
		return sfs_thrift_fail(
			r, 0,
			"the schema has no root (a first element with num_children)");
	for (i = 0; i < m->nschema; i++) {
		if (open == 0)
			return sfs_thrift_fail(
				r, 0,
				"schema element %zu is outside the tree: the root's %d children end before it",
				i, m->schema[0].num_children);
		open--;
		if (m->schema[i].num_children >= 0)
			open += m->schema[i].num_children;
		else
			m->nleaves++;
	}
	if (open)
		return sfs_thrift_fail(
			r, 0,
			"the schema ends with %lld elements missing (num_children says more than there are)",
			(long long)open);
	return 0;
}

int64_t sfs_parquet_chunk_start(const struct sfs_parquet_chunk *c)
{
	if (c->dictionary_page_offset > 0 &&
	    (c->data_page_offset == 0 ||
	     c->dictionary_page_offset < c->data_page_offset))
		return c->dictionary_page_offset;
	return c->data_page_offset;
}

/* The refusals of a chunk's placement, each worded once. */
static int fail_past(struct sfs_thrift_reader *r,
		     const struct sfs_parquet_chunk *c, size_t i, size_t j,
		     const char *field, int64_t at, uint64_t end)
{
	return sfs_thrift_fail(
		r, c->at,
		"row group %zu column %zu %s %lld is past the data (ends at %llu)",
		i, j, field, (long long)at, (unsigned long long)end);
}

static int fail_in_magic(struct sfs_thrift_reader *r,
			 const struct sfs_parquet_chunk *c, size_t i, size_t j,
			 int64_t start)
{
	return sfs_thrift_fail(
		r, c->at,
		"row group %zu column %zu begins at byte %lld, inside the PAR1 magic",
		i, j, (long long)start);
}

/* Whether the chunk's bytes from start fit before end. */
static int check_fits(struct sfs_thrift_reader *r,
		      const struct sfs_parquet_chunk *c, size_t i, size_t j,
		      int64_t start, uint64_t end)
{
	if ((uint64_t)c->total_compressed_size <= end - (uint64_t)start)
		return 0;
	return sfs_thrift_fail(
		r, c->at,
		"row group %zu column %zu: its %lld bytes from byte %lld run past the data (ends at %llu)",
		i, j, (long long)c->total_compressed_size, (long long)start,
		(unsigned long long)end);
}

/*
 * A chunk of a row group of no rows that has no data page: pyarrow writes
 * one per column for an empty table (data_page_offset 0, and no bytes or
 * an empty dictionary page).  Readers read such a file; its bytes, when
 * it has any, are checked as any chunk's.
 */
static int check_no_data(struct sfs_thrift_reader *r,
			 const struct sfs_parquet_chunk *c, uint64_t end,
			 size_t i, size_t j)
{
	int64_t start = c->dictionary_page_offset;

	if (start <= 0) {
		if (c->total_compressed_size == 0)
			return 0;
		return sfs_thrift_fail(
			r, c->at,
			"row group %zu column %zu has no rows and no pages (data_page_offset 0) but claims %lld bytes",
			i, j, (long long)c->total_compressed_size);
	}
	if (start < 4)
		return fail_in_magic(r, c, i, j, start);
	if ((uint64_t)start >= end)
		return fail_past(r, c, i, j, "dictionary_page_offset", start,
				 end);
	if (c->total_compressed_size == 0)
		return sfs_thrift_fail(
			r, c->at,
			"row group %zu column %zu: its dictionary page (byte %lld) lies outside its 0 bytes",
			i, j, (long long)start);
	return check_fits(r, c, i, j, start, end);
}

static int check_chunk(struct sfs_thrift_reader *r,
		       const struct sfs_parquet_meta *m, size_t i, size_t j)
{
	const struct sfs_parquet_chunk *c = &m->row_groups[i].chunks[j];
	int64_t start = sfs_parquet_chunk_start(c);
	uint64_t end = m->data_end;
	int rc;

	if (m->row_groups[i].num_rows == 0 && c->data_page_offset == 0)
		return check_no_data(r, c, end, i, j);
	if (c->data_page_offset < start)
		start = c->data_page_offset; /* (0 .. 3: refused below) */
	if ((uint64_t)c->data_page_offset >= end)
		return fail_past(r, c, i, j, "data_page_offset",
				 c->data_page_offset, end);
	if (c->dictionary_page_offset >= 0 &&
	    (uint64_t)c->dictionary_page_offset >= end)
		return fail_past(r, c, i, j, "dictionary_page_offset",
				 c->dictionary_page_offset, end);
	if (start < 4)
		return fail_in_magic(r, c, i, j, start);
	rc = check_fits(r, c, i, j, start, end);
	if (rc)
		return rc;
	/* every page, the data page too, lies in the chunk's bytes: a slice
	 * moves those bytes and nothing else */
	if (c->data_page_offset - start >= c->total_compressed_size ||
	    (c->dictionary_page_offset > 0 &&
	     c->dictionary_page_offset - start >= c->total_compressed_size))
		return sfs_thrift_fail(
			r, c->at,
			"row group %zu column %zu: its first data page (byte %lld) or dictionary page lies outside its %lld bytes from byte %lld",
			i, j, (long long)c->data_page_offset,
			(long long)c->total_compressed_size, (long long)start);
	return 0;
}

/* A chunk's bytes, for the overlap check. */
struct span {
	int64_t start, end;
	size_t rg, col;
};

static int span_cmp(const void *a, const void *b)
{
	const struct span *x = a, *y = b;

	return (x->start > y->start) - (x->start < y->start);
}

/*
 * No two chunks share a byte: a slice of a file is then never larger than
 * the file, whatever its footer claims.
 */
static int check_overlap(struct sfs_thrift_reader *r,
			 const struct sfs_parquet_meta *m)
{
	size_t n = 0, i, j;
	struct span *s;
	int rc = 0;

	for (i = 0; i < m->nrow_groups; i++)
		n += m->row_groups[i].nchunks;
	s = malloc((n ? n : 1) * sizeof(*s));
	if (!s)
		return sfs_pq_footer_nomem(r);
	n = 0;
	for (i = 0; i < m->nrow_groups; i++)
		for (j = 0; j < m->row_groups[i].nchunks; j++) {
			const struct sfs_parquet_chunk *c =
				&m->row_groups[i].chunks[j];

			if (!c->total_compressed_size)
				continue; /* no bytes (check_no_data) */
			s[n].start = sfs_parquet_chunk_start(c);
			s[n].end = s[n].start + c->total_compressed_size;
			s[n].rg = i;
			s[n++].col = j;
		}
	qsort(s, n, sizeof(*s), span_cmp);
	for (i = 1; i < n && !rc; i++)
		if (s[i].start < s[i - 1].end)
			rc = sfs_thrift_fail(
				r, m->row_groups[s[i].rg].chunks[s[i].col].at,
				"row group %zu column %zu: its bytes [%lld, %lld) overlap those of row group %zu column %zu [%lld, %lld)",
				s[i].rg, s[i].col, (long long)s[i].start,
				(long long)s[i].end, s[i - 1].rg, s[i - 1].col,
				(long long)s[i - 1].start,
				(long long)s[i - 1].end);
	free(s);
	return rc;
}

int sfs_pq_meta_check(struct sfs_thrift_reader *r, struct sfs_parquet_meta *m)
{
	int64_t rows = 0;
	size_t i, j;
	int rc;

	rc = check_schema(r, m);
	if (rc)
		return rc;
	for (i = 0; i < m->nrow_groups; i++) {
		const struct sfs_parquet_row_group *g = &m->row_groups[i];

		if (g->nchunks != m->nleaves)
			return sfs_thrift_fail(
				r, g->at,
				"row group %zu has %zu columns but the schema has %zu leaves",
				i, g->nchunks, m->nleaves);
		for (j = 0; j < g->nchunks; j++) {
			rc = check_chunk(r, m, i, j);
			if (rc)
				return rc;
		}
		if (__builtin_add_overflow(rows, g->num_rows, &rows))
			return sfs_thrift_fail(
				r, g->at,
				"row group %zu: the row count overflows 64 bits",
				i);
	}
	if (rows != m->num_rows)
		return sfs_thrift_fail(
			r, 0,
			"the row groups hold %lld rows but num_rows says %lld",
			(long long)rows, (long long)m->num_rows);
	return check_overlap(r, m);
}
