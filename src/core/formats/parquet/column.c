/*
 * The page reader: a column chunk read page by page (PageHeader,
 * decompression, the dictionary, repetition and definition levels,
 * values); rows.c digests its rows.
 *
 * Nothing read is trusted: a page header lies inside its chunk, sizes are
 * capped (SFS_PQ_PAGE_MAX, SFS_PQ_ENTRIES_MAX), a decompressed page must
 * have exactly the size its header says; the levels and values are
 * checked by encoding.c.  Memory: one page of each column at a time.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/parquet/parquet_i.h"
#include "shardfs/budget.h"
#include "shardfs/parquet.h"
#include "shardfs/util.h"

#define HEADER_FIRST 1024 /* bytes read for a page header, at first */
#define HEADER_MAX (16u << 20)

int sfs_pq_col_fail(struct sfs_pq_column *c, uint64_t at, const char *fmt, ...)
{
	char what[SFS_ERROR_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return sfs_errorf(c->err, -EINVAL,
			  "%s: row group %zu column %s: page at byte %llu: %s",
			  c->m->path, c->rg, c->name, (unsigned long long)at,
			  what);
}

int sfs_pq_col_nomem(struct sfs_pq_column *c)
{
	return sfs_errorf(c->err, -ENOMEM, "%s: out of memory", c->m->path);
}

/* ---- schema ---- */

/*
 * The leaves of m's schema in order (the chunks' order), with their
 * levels.  out has m->nleaves entries.
 */
int sfs_pq_leaves(const struct sfs_parquet_meta *m, struct sfs_pq_leaf *out,
		  struct sfs_error *err)
{
	/* per open group: children left, its def and rep levels */
	struct frame {
		int32_t left;
		uint32_t def, rep;
	} *stack = malloc((m->nschema + 1) * sizeof(*stack));
	size_t depth = 0, i, nl = 0;

	if (!stack)
		return sfs_errorf(err, -ENOMEM, "%s: out of memory", m->path);
	stack[0] = (struct frame){ m->schema[0].num_children, 0, 0 };
	for (i = 1; i < m->nschema && nl < m->nleaves; i++) {
		const struct sfs_parquet_schema *s = &m->schema[i];
		uint32_t def, rep;

		while (depth && stack[depth].left == 0)
			depth--;
		stack[depth].left--;
		def = stack[depth].def + (s->repetition_type > 0);
		rep = stack[depth].rep + (s->repetition_type == 2);
		if (s->num_children > 0) {
			stack[++depth] =
				(struct frame){ s->num_children, def, rep };
			continue;
		}
		out[nl++] = (struct sfs_pq_leaf){ .type = s->type,
						  .type_length = s->type_length,
						  .max_def = def,
						  .max_rep = rep };
	}
	free(stack);
	if (nl != m->nleaves)
		return sfs_errorf(err, -EINVAL,
				  "%s: the schema has %zu leaves, not %zu",
				  m->path, nl, m->nleaves);
	return 0;
}

int sfs_pq_col_open(struct sfs_pq_column *c, int fd,
		    const struct sfs_parquet_meta *m, size_t rg, size_t k,
		    const struct sfs_pq_leaf *lf, struct sfs_error *err)
{
	const struct sfs_parquet_chunk *ch = &m->row_groups[rg].chunks[k];
	size_t i, n = 0;

	memset(c, 0, sizeof(*c));
	c->fd = fd;
	c->m = m;
	c->ch = ch;
	c->rg = rg;
	c->lf = *lf;
	c->err = err;
	c->held = &c->own;
	c->pos = (uint64_t)sfs_parquet_chunk_start(ch);
	c->end = c->pos + (uint64_t)ch->total_compressed_size;
	for (i = 0; i < ch->npath && n + 1 < sizeof(c->name); i++) {
		int w = snprintf(c->name + n, sizeof(c->name) - n, "%s%.*s",
				 i ? "." : "", (int)ch->path_in_schema[i].len,
				 (const char *)ch->path_in_schema[i].p);

		n = w < 0 ? n : n + (size_t)w;
		if (n >= sizeof(c->name))
			n = sizeof(c->name) - 1;
	}
	if (lf->type < SFS_PQ_T_BOOLEAN || lf->type > SFS_PQ_T_FLBA)
		return sfs_pq_col_fail(c, c->pos, "unknown physical type %d",
				       (int)lf->type);
	if (lf->type == SFS_PQ_T_FLBA && lf->type_length <= 0)
		return sfs_pq_col_fail(c, c->pos,
				       "FIXED_LEN_BYTE_ARRAY of length %d",
				       (int)lf->type_length);
	return 0;
}

static void page_clear(struct sfs_pq_page *p)
{
	free(p->rep);
	free(p->def);
	free(p->vals);
	free(p->idx);
	free(p->raw);
	free(p->arena.p);
	memset(p, 0, sizeof(*p));
}

void sfs_pq_col_close(struct sfs_pq_column *c)
{
	if (c->held)
		*c->held -= c->pg_bytes + c->dict_bytes;
	if (c->also)
		sfs_budget_unhold(c->also, c->pg_bytes + c->dict_bytes);
	c->pg_bytes = c->dict_bytes = 0;
	page_clear(&c->pg);
	free(c->dict);
	free(c->dict_raw);
	free(c->dict_arena.p);
}

void sfs_pq_col_rewind(struct sfs_pq_column *c, int fd, struct sfs_error *err)
{
	c->fd = fd;
	c->err = err;
	c->held = &c->own;
	c->pos = (uint64_t)sfs_parquet_chunk_start(c->ch);
	c->loaded = false;
	c->seen_data = false;
	c->pre_usize = 0;
	c->at = c->vat = 0;
}

/* ---- page headers ---- */

static int read_struct_i32s(struct sfs_thrift_reader *r, int32_t *f, size_t nf,
			    bool *flag7)
{
	struct sfs_thrift_field fl;
	int last = 0, rc = sfs_thrift_struct_begin(r);

	while (!rc && !(rc = sfs_thrift_read_field(r, &last, &fl)) &&
	       fl.type != SFS_TC_STOP) {
		if (fl.id == 7 && flag7 &&
		    (fl.type == SFS_TC_TRUE || fl.type == SFS_TC_FALSE))
			*flag7 = fl.type == SFS_TC_TRUE;
		else if (fl.id >= 1 && (size_t)fl.id <= nf &&
			 fl.type == SFS_TC_I32)
			rc = sfs_thrift_read_i32(r, &f[fl.id - 1]);
		else
			rc = sfs_thrift_skip(r, fl.type);
	}
	if (!rc)
		sfs_thrift_struct_end(r);
	return rc;
}

static int decode_header(struct sfs_thrift_reader *r,
			 struct sfs_pq_page_header *h)
{
	struct sfs_thrift_field f;
	int32_t v1[4] = { -1, -1, -1, -1 }, v2[6] = { -1, -1, -1, -1, -1, -1 };
	int32_t dict[2] = { -1, -1 };
	int last = 0, rc = sfs_thrift_struct_begin(r);
	bool has1 = false, hasd = false, has2 = false;

	h->type = h->usize = h->csize = -1;
	h->compressed = true;
	while (!rc && !(rc = sfs_thrift_read_field(r, &last, &f)) &&
	       f.type != SFS_TC_STOP) {
		if (f.id >= 1 && f.id <= 3 && f.type == SFS_TC_I32)
			rc = sfs_thrift_read_i32(r, f.id == 1 ? &h->type :
						    f.id == 2 ? &h->usize :
								&h->csize);
		else if (f.id == 5 && f.type == SFS_TC_STRUCT)
			rc = read_struct_i32s(r, v1, 4, NULL), has1 = true;
		else if (f.id == 7 && f.type == SFS_TC_STRUCT)
			rc = read_struct_i32s(r, dict, 2, NULL), hasd = true;
		else if (f.id == 8 && f.type == SFS_TC_STRUCT)
			rc = read_struct_i32s(r, v2, 6, &h->compressed),
			has2 = true;
		else
			rc = sfs_thrift_skip(r, f.type);
	}
	if (rc)
		return rc;
	sfs_thrift_struct_end(r);
	h->header_len = r->pos;
	if (h->type < 0 || h->usize < 0 || h->csize < 0)
		return sfs_thrift_fail(
			r, 0,
			"a page header without its type or sizes (or negative)");
	if (h->type == SFS_PQ_PAGE_DATA && has1) {
		h->num_values = v1[0];
		h->encoding = v1[1];
		h->def_encoding = v1[2];
		h->rep_encoding = v1[3];
	} else if (h->type == SFS_PQ_PAGE_DICTIONARY && hasd) {
		h->num_values = dict[0];
		h->encoding = dict[1];
	} else if (h->type == SFS_PQ_PAGE_DATA_V2 && has2) {
		h->num_values = v2[0];
		h->num_nulls = v2[1];
		h->num_rows = v2[2];
		h->encoding = v2[3];
		h->def_len = v2[4];
		h->rep_len = v2[5];
		if (v2[1] < 0 || v2[2] < 0 || v2[4] < 0 || v2[5] < 0)
			return sfs_thrift_fail(
				r, 0,
				"a data page v2 header without its counts and level lengths");
	} else if (h->type != 1) { /* INDEX_PAGE: skipped */
		return sfs_thrift_fail(r, 0, "page type %d without its header",
				       (int)h->type);
	}
	if (h->type != 1 && (h->num_values < 0 || h->encoding < 0))
		return sfs_thrift_fail(
			r, 0, "a page header without num_values or encoding");
	return 0;
}

/* The header of the page at c->pos, which must lie in the chunk. */
static int read_header(struct sfs_pq_column *c, struct sfs_pq_page_header *h)
{
	uint64_t room = c->end - c->pos;
	size_t want = room < HEADER_FIRST ? (size_t)room : HEADER_FIRST;
	unsigned char *buf = NULL;
	size_t cap = 0;
	int rc;

	for (;;) {
		struct sfs_thrift_reader r = { .len = want,
					       .base = c->pos,
					       .path = c->m->path,
					       .err = c->err,
					       .what = "page header" };

		if (SFS_GROW(buf, cap, want ? want : 1)) {
			free(buf);
			return sfs_pq_col_nomem(c);
		}
		if (sfs_pread_full(c->fd, buf, want, c->pos) != (ssize_t)want) {
			free(buf);
			return sfs_errorf(c->err, -EIO,
					  "%s: read failed at byte %llu",
					  c->m->path,
					  (unsigned long long)c->pos);
		}
		r.buf = buf;
		rc = decode_header(&r, h);
		if (!rc || want == room || want >= HEADER_MAX)
			break;
		want = room / 64 < want ? (size_t)room : want * 64;
		if (want > HEADER_MAX)
			want = HEADER_MAX;
	}
	free(buf);
	if (rc)
		return rc;
	h->at = c->pos;
	if ((uint64_t)h->csize > room - h->header_len)
		return sfs_pq_col_fail(
			c, c->pos,
			"its %d bytes run past the column chunk (%llu bytes left)",
			(int)h->csize,
			(unsigned long long)(room - h->header_len));
	if ((uint32_t)h->csize > SFS_PQ_PAGE_MAX ||
	    (uint32_t)h->usize > SFS_PQ_PAGE_MAX)
		return sfs_pq_col_fail(
			c, c->pos,
			"a page of %d bytes (%d compressed): over the %u MiB shardfs reads",
			(int)h->usize, (int)h->csize, SFS_PQ_PAGE_MAX >> 20);
	return 0;
}

/* ---- pages ---- */

/* The uncompressed bytes of the page whose header is h (body at h->at +
 * header_len); for v2, the levels are stored uncompressed. */
static int page_raw(struct sfs_pq_column *c, const struct sfs_pq_page_header *h,
		    unsigned char **out)
{
	size_t cs = (size_t)h->csize, us = (size_t)h->usize, lv = 0;
	unsigned char *in = malloc(cs ? cs : 1), *raw = malloc(us ? us : 1);
	bool plain = c->ch->codec == SFS_PQ_C_UNCOMPRESSED;
	int rc = 0;

	*out = NULL;
	if (!in || !raw) {
		rc = sfs_pq_col_nomem(c);
		goto out;
	}
	if (sfs_pread_full(c->fd, in, cs, h->at + h->header_len) !=
	    (ssize_t)cs) {
		rc = sfs_errorf(c->err, -EIO, "%s: read failed at byte %llu",
				c->m->path,
				(unsigned long long)(h->at + h->header_len));
		goto out;
	}
	if (h->type == SFS_PQ_PAGE_DATA_V2) {
		lv = (size_t)h->def_len + (size_t)h->rep_len;
		if (lv > cs || lv > us) {
			rc = sfs_pq_col_fail(
				c, h->at,
				"levels of %zu bytes in a page of %zu", lv, cs);
			goto out;
		}
		memcpy(raw, in, lv);
		plain = plain || !h->compressed;
	}
	if (plain && cs != us)
		rc = sfs_pq_col_fail(
			c, h->at,
			"an uncompressed page of %zu bytes whose header says %zu",
			cs, us);
	else if (plain)
		memcpy(raw + lv, in + lv, cs - lv);
	else if (!sfs_pq_page_decompress(c->ch->codec, in + lv, cs - lv,
					 raw + lv, us - lv))
		rc = sfs_pq_col_fail(
			c, h->at,
			"%s data of %zu bytes does not decompress to the %zu bytes its header says",
			sfs_pq_codec_name(c->ch->codec), cs - lv, us - lv);
out:
	free(in);
	if (rc)
		free(raw);
	else
		*out = raw;
	return rc;
}

/*
 * The page whose header is h, of n entries, is about to be decoded: count
 * what it takes at its peak into *c->held and *bytes, or fail past the
 * budget.  Its compressed bytes are freed once decompressed, before its
 * entries are made: the peak is its uncompressed bytes and the larger of
 * the two.  What a page decodes to (its bytes and its entries) is what a
 * small file could claim, and is capped for each page.
 */
static int budget(struct sfs_pq_column *c, const struct sfs_pq_page_header *h,
		  uint32_t n, uint64_t *bytes)
{
	uint64_t us = (uint64_t)(uint32_t)h->usize;
	uint64_t cs = (uint64_t)(uint32_t)h->csize;
	uint64_t entries = (uint64_t)n * SFS_PQ_ENTRY_BYTES;
	uint64_t need;

	if (h->encoding != SFS_PQ_ENC_PLAIN)
		entries += (uint64_t)n * SFS_PQ_INDEX_BYTES;
	need = us + (cs > entries ? cs : entries);
	if (us + entries > SFS_PQ_PAGE_DECODED_MAX)
		return sfs_pq_col_fail(
			c, h->at,
			"%u values in %d bytes (%d compressed) decode to %llu MiB: over the %u MiB shardfs decodes for one page; rewrite the file with smaller pages (e.g. pyarrow's data_page_size, DuckDB's ROW_GROUP_SIZE)",
			n, (int)h->usize, (int)h->csize,
			(unsigned long long)((us + entries) >> 20),
			SFS_PQ_PAGE_DECODED_MAX >> 20);
	if (*c->held + need > SFS_PQ_DECODED_MAX)
		return sfs_pq_col_fail(
			c, h->at,
			"%u values in %d bytes (%d compressed) decode to %llu MiB%s: over the %u MiB shardfs decodes at once; rewrite the file with smaller pages (e.g. pyarrow's data_page_size)",
			n, (int)h->usize, (int)h->csize,
			(unsigned long long)((*c->held + need) >> 20),
			*c->held ? " with the other columns' pages" : "",
			SFS_PQ_DECODED_MAX >> 20);
	*c->held += need;
	*bytes = need;
	if (c->also) {
		sfs_budget_hold(c->also, need);
		/* room made before the page is: what idle holders keep */
		if (sfs_budget_short(c->also, 0))
			sfs_budget_reclaim(c->also, 0);
	}
	return 0;
}

/*
 * The values of the page whose header is h would build c->pg.want bytes,
 * over what it may: left of the budget, or a page's worth.
 */
static int built_too_much(struct sfs_pq_column *c,
			  const struct sfs_pq_page_header *h, uint64_t left)
{
	const struct sfs_pq_page *pg = &c->pg;
	const char *enc = sfs_pq_encoding_name(h->encoding);
	uint64_t held = *c->held - pg->arena.cap;

	if (left >= SFS_PQ_PAGE_MAX)
		return sfs_pq_col_fail(
			c, h->at,
			"%u values in encoding %s build %llu MiB from %d bytes: over the %u MiB shardfs builds for a page; rewrite the file with smaller pages or another encoding (e.g. pyarrow's data_page_size or column_encoding)",
			pg->nvals, enc, (unsigned long long)(pg->want >> 20),
			(int)h->usize, SFS_PQ_PAGE_MAX >> 20);
	return sfs_pq_col_fail(
		c, h->at,
		"%u values in encoding %s build %llu MiB from %d bytes, %llu MiB with the page's own%s: over the %u MiB shardfs decodes at once; rewrite the file with smaller pages or another encoding (e.g. pyarrow's data_page_size or column_encoding)",
		pg->nvals, enc, (unsigned long long)(pg->want >> 20),
		(int)h->usize, (unsigned long long)((held + pg->want) >> 20),
		held > c->pg_bytes + c->dict_bytes - pg->arena.cap ?
			" and the other columns' pages" :
			"",
		SFS_PQ_DECODED_MAX >> 20);
}

/* Read the dictionary page whose header is h. */
static int load_dictionary(struct sfs_pq_column *c,
			   const struct sfs_pq_page_header *h)
{
	struct sfs_pq_bytes b;
	int rc;

	if (c->dict && c->dict_at == h->at)
		return 0; /* loaded by an earlier pass (sfs_pq_col_rewind) */
	if (c->dict)
		return sfs_pq_col_fail(c, h->at, "a second dictionary page");
	if (h->encoding != SFS_PQ_ENC_PLAIN &&
	    h->encoding != SFS_PQ_ENC_PLAIN_DICTIONARY)
		return sfs_pq_col_fail(c, h->at, "a dictionary in encoding %d",
				       (int)h->encoding);
	if ((uint32_t)h->num_values > SFS_PQ_ENTRIES_MAX)
		return sfs_pq_col_fail(c, h->at, "a dictionary of %d values",
				       (int)h->num_values);
	rc = budget(c, h, (uint32_t)h->num_values, &c->dict_bytes);
	if (!rc)
		rc = page_raw(c, h, &c->dict_raw);
	if (rc)
		return rc;
	c->ndict = (uint32_t)h->num_values;
	c->dict_at = h->at;
	c->dict = malloc((c->ndict ? c->ndict : 1) * sizeof(*c->dict));
	if (!c->dict)
		return sfs_pq_col_nomem(c);
	b = (struct sfs_pq_bytes){ c->dict_raw, (size_t)h->usize, 0 };
	rc = sfs_pq_plain_decode(&b, &c->lf, c->dict, c->ndict, &c->dict_arena);
	if (rc == -ENOMEM)
		return sfs_pq_col_nomem(c);
	if (rc)
		return sfs_pq_col_fail(
			c, h->at,
			"the dictionary's %u values do not fit its %d bytes",
			c->ndict, (int)h->usize);
	return 0;
}

/* Decode the data page whose header is h into c->pg. */
int sfs_pq_decode_page(struct sfs_pq_column *c,
		       const struct sfs_pq_page_header *h)
{
	struct sfs_pq_page *pg = &c->pg;
	struct sfs_pq_bytes b;
	uint32_t n = (uint32_t)h->num_values, i, starts;
	bool v1 = h->type == SFS_PQ_PAGE_DATA;
	uint64_t left;
	int rc;

	page_clear(pg);
	*c->held -= c->pg_bytes;
	if (c->also)
		sfs_budget_unhold(c->also, c->pg_bytes);
	c->pg_bytes = 0;
	pg->h = *h;
	if (n > SFS_PQ_ENTRIES_MAX)
		return sfs_pq_col_fail(
			c, h->at,
			"a page of %u values, over the %u shardfs reads", n,
			SFS_PQ_ENTRIES_MAX);
	rc = budget(c, h, n, &c->pg_bytes);
	if (!rc)
		rc = page_raw(c, h, &pg->raw);
	if (rc)
		return rc;
	pg->n = n;
	pg->rep = malloc((n ? n : 1) * sizeof(*pg->rep));
	pg->def = malloc((n ? n : 1) * sizeof(*pg->def));
	if (!pg->rep || !pg->def)
		return sfs_pq_col_nomem(c);
	b = (struct sfs_pq_bytes){ pg->raw, (size_t)h->usize, 0 };
	if (v1) {
		if (sfs_pq_levels_decode(&b, h->rep_encoding, true,
					 c->lf.max_rep, pg->rep, n) ||
		    sfs_pq_levels_decode(&b, h->def_encoding, true,
					 c->lf.max_def, pg->def, n))
			return sfs_pq_col_fail(c, h->at, "malformed levels");
	} else {
		struct sfs_pq_bytes rb = { pg->raw, (size_t)h->rep_len, 0 };
		struct sfs_pq_bytes db = { pg->raw + h->rep_len,
					   (size_t)h->def_len, 0 };

		if (sfs_pq_levels_decode(&rb, SFS_PQ_ENC_RLE, false,
					 c->lf.max_rep, pg->rep, n) ||
		    sfs_pq_levels_decode(&db, SFS_PQ_ENC_RLE, false,
					 c->lf.max_def, pg->def, n))
			return sfs_pq_col_fail(c, h->at, "malformed levels");
		b.pos = (size_t)h->rep_len + (size_t)h->def_len;
		/* a cut trusts num_rows of a v2 page: rows begin (repetition
		 * level 0) where the levels say, and never span pages */
		for (i = 0, starts = 0; i < n; i++)
			starts += pg->rep[i] == 0;
		if (n && pg->rep[0])
			return sfs_pq_col_fail(c, h->at,
					       "a v2 page begins inside a row");
		if (starts != (uint32_t)h->num_rows)
			return sfs_pq_col_fail(
				c, h->at,
				"num_rows says %d, the levels begin %u",
				(int)h->num_rows, starts);
	}
	for (i = 0; i < n; i++)
		pg->nvals += pg->def[i] == c->lf.max_def;
	if (!v1 && (uint32_t)h->num_nulls != n - pg->nvals)
		return sfs_pq_col_fail(c, h->at,
				       "num_nulls says %d, the levels say %u",
				       (int)h->num_nulls, n - pg->nvals);
	pg->vals = malloc((pg->nvals ? pg->nvals : 1) * sizeof(*pg->vals));
	if (!pg->vals)
		return sfs_pq_col_nomem(c);
	/* what the values build is held with the page: at most a page's
	 * worth (so that a cut's PLAIN page of them stays a page), and in
	 * what is left of the budget */
	left = SFS_PQ_DECODED_MAX - *c->held;
	pg->room = left < SFS_PQ_PAGE_MAX ? left : SFS_PQ_PAGE_MAX;
	rc = sfs_pq_values_decode(pg, &c->lf, c->dict, c->ndict, &b,
				  h->encoding, pg->nvals);
	*c->held += pg->arena.cap;
	c->pg_bytes += pg->arena.cap;
	if (c->also)
		sfs_budget_hold(c->also, pg->arena.cap);
	if (rc == -EFBIG)
		return built_too_much(c, h, left);
	if (rc == -ENOENT)
		return sfs_pq_col_fail(
			c, h->at,
			"dictionary-encoded values, but the chunk has no dictionary page");
	if (rc == -ENOTSUP)
		return sfs_pq_col_fail(
			c, h->at,
			"values in encoding %d, which shardfs does not read",
			(int)h->encoding);
	if (rc == -ENOMEM)
		return sfs_pq_col_nomem(c);
	if (rc == -1)
		return sfs_pq_col_fail(
			c, h->at, "malformed values (encoding %d, %u values)",
			(int)h->encoding, pg->nvals);
	return rc;
}

/*
 * The next page of the chunk into *h (dictionary pages are loaded, index
 * pages skipped on the way).  Returns 1 with a data page, 0 at the
 * chunk's end, or -errno.
 */
int sfs_pq_next_data_page(struct sfs_pq_column *c, struct sfs_pq_page_header *h)
{
	int rc;

	while (c->pos < c->end) {
		rc = read_header(c, h);
		if (rc)
			return rc;
		c->pos += h->header_len + (uint64_t)h->csize;
		if (h->type == SFS_PQ_PAGE_DATA ||
		    h->type == SFS_PQ_PAGE_DATA_V2) {
			/* what precedes the first data page is copied as it
			 * is into slices: the footer must say where it ends */
			if (!c->seen_data &&
			    h->at != (uint64_t)c->ch->data_page_offset)
				return sfs_pq_col_fail(
					c, h->at,
					"the first data page, but the footer's data_page_offset is %lld",
					(long long)c->ch->data_page_offset);
			c->seen_data = true;
			return 1;
		}
		if (!c->seen_data)
			c->pre_usize += h->header_len + (uint64_t)h->usize;
		if (h->type == SFS_PQ_PAGE_DICTIONARY) {
			rc = load_dictionary(c, h);
			if (rc)
				return rc;
		}
	}
	return 0;
}
