/*
 * Parquet pages: the data of a column chunk read page by page (PageHeader,
 * decompression, repetition and definition levels, values in every
 * encoding), cut to rows and re-encoded, and every row digested.
 *
 * Nothing read is trusted: a page header lies inside its chunk, sizes are
 * capped (PAGE_MAX, ENTRIES_MAX), a decompressed page must have exactly
 * the size its header says, every level, index, length and bit width is
 * checked against the bytes left before use.  Memory: one page of each
 * column at a time.
 */
#include <brotli/decode.h>
#include <brotli/encode.h>
#include <errno.h>
#include <lz4.h>
#include <snappy-c.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include "formats/format_i.h"
#include "formats/parquet/parquet_i.h"
#include "shardfs/digest.h"
#include "shardfs/parquet.h"

#define PAGE_MAX (256u << 20) /* bytes of a page, compressed or not */
#define ENTRIES_MAX (16u << 20) /* levels of a page */
#define HEADER_FIRST 1024 /* bytes read for a page header, at first */
#define HEADER_MAX (16u << 20)

enum { PAGE_DATA = 0, PAGE_DICTIONARY = 2, PAGE_DATA_V2 = 3 };
enum {
	ENC_PLAIN = 0,
	ENC_PLAIN_DICTIONARY = 2,
	ENC_RLE = 3,
	ENC_BIT_PACKED = 4,
	ENC_DELTA_BINARY_PACKED = 5,
	ENC_DELTA_LENGTH_BYTE_ARRAY = 6,
	ENC_DELTA_BYTE_ARRAY = 7,
	ENC_RLE_DICTIONARY = 8,
	ENC_BYTE_STREAM_SPLIT = 9,
};
enum {
	T_BOOLEAN,
	T_INT32,
	T_INT64,
	T_INT96,
	T_FLOAT,
	T_DOUBLE,
	T_BYTE_ARRAY,
	T_FLBA,
};
enum {
	C_UNCOMPRESSED,
	C_SNAPPY,
	C_GZIP,
	C_LZO,
	C_BROTLI,
	C_LZ4,
	C_ZSTD,
	C_LZ4_RAW,
};

/* A leaf column: its physical type and its highest levels. */
struct leaf {
	int32_t type, type_length;
	uint32_t max_def, max_rep;
};

struct page_header {
	uint64_t at; /* file offset of the header */
	size_t header_len;
	int32_t type, usize, csize;
	int32_t num_values, encoding, def_encoding, rep_encoding;
	int32_t num_nulls, num_rows, def_len, rep_len; /* v2 */
	bool compressed; /* v2: the values are compressed */
};

struct value {
	const unsigned char *p;
	uint32_t len;
};

/* A decoded data page. */
struct page {
	struct page_header h;
	uint32_t n; /* entries (levels) */
	uint32_t *rep, *def;
	uint32_t nvals; /* values (entries at max_def) */
	struct value *vals;
	uint32_t *idx; /* dictionary-encoded pages: the indexes, else NULL */
	unsigned bit_width; /* of idx */
	unsigned char *raw; /* the uncompressed page (levels and values) */
	struct sfs_thrift_out arena; /* values built while decoding */
};

/* One column chunk being read. */
struct column {
	int fd;
	const struct sfs_parquet_meta *m;
	const struct sfs_parquet_chunk *ch;
	size_t rg;
	struct leaf lf;
	char name[256];
	uint64_t pos, end; /* the next page header; the chunk's end */
	struct value *dict;
	uint32_t ndict;
	unsigned char *dict_raw;
	struct sfs_thrift_out dict_arena;
	struct page pg;
	bool loaded; /* pg holds a page */
	bool seen_data; /* the first data page was read */
	uint64_t pre_usize; /* uncompressed bytes of the pages before it */
	uint32_t at, vat; /* next entry, next value of pg */
	struct sfs_error *err;
};

static int col_fail(struct column *c, uint64_t at, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int col_fail(struct column *c, uint64_t at, const char *fmt, ...)
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

static int col_nomem(struct column *c)
{
	return sfs_errorf(c->err, -ENOMEM, "%s: out of memory", c->m->path);
}

/* ---- schema ---- */

/*
 * The leaves of m's schema in order (the chunks' order), with their
 * levels.  out has m->nleaves entries.
 */
static int leaves(const struct sfs_parquet_meta *m, struct leaf *out,
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
		out[nl++] = (struct leaf){ .type = s->type,
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

static unsigned bits_for(uint32_t max)
{
	unsigned b = 0;

	while (max >> b)
		b++;
	return b;
}

static int col_open(struct column *c, int fd, const struct sfs_parquet_meta *m,
		    size_t rg, size_t k, const struct leaf *lf,
		    struct sfs_error *err)
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
	if (lf->type < T_BOOLEAN || lf->type > T_FLBA)
		return col_fail(c, c->pos, "unknown physical type %d",
				(int)lf->type);
	if (lf->type == T_FLBA && lf->type_length <= 0)
		return col_fail(c, c->pos, "FIXED_LEN_BYTE_ARRAY of length %d",
				(int)lf->type_length);
	return 0;
}

static void page_clear(struct page *p)
{
	free(p->rep);
	free(p->def);
	free(p->vals);
	free(p->idx);
	free(p->raw);
	free(p->arena.p);
	memset(p, 0, sizeof(*p));
}

static void col_close(struct column *c)
{
	page_clear(&c->pg);
	free(c->dict);
	free(c->dict_raw);
	free(c->dict_arena.p);
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

static int decode_header(struct sfs_thrift_reader *r, struct page_header *h)
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
	if (h->type == PAGE_DATA && has1) {
		h->num_values = v1[0];
		h->encoding = v1[1];
		h->def_encoding = v1[2];
		h->rep_encoding = v1[3];
	} else if (h->type == PAGE_DICTIONARY && hasd) {
		h->num_values = dict[0];
		h->encoding = dict[1];
	} else if (h->type == PAGE_DATA_V2 && has2) {
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
static int read_header(struct column *c, struct page_header *h)
{
	uint64_t room = c->end - c->pos;
	size_t want = room < HEADER_FIRST ? (size_t)room : HEADER_FIRST;
	unsigned char *buf = NULL;
	int rc;

	for (;;) {
		struct sfs_thrift_reader r = { .len = want,
					       .base = c->pos,
					       .path = c->m->path,
					       .err = c->err,
					       .what = "page header" };
		unsigned char *nb = realloc(buf, want ? want : 1);
		ssize_t got;

		if (!nb) {
			free(buf);
			return col_nomem(c);
		}
		buf = nb;
		got = pread(c->fd, buf, want, (off_t)c->pos);
		if (got != (ssize_t)want) {
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
		return col_fail(
			c, c->pos,
			"its %d bytes run past the column chunk (%llu bytes left)",
			(int)h->csize,
			(unsigned long long)(room - h->header_len));
	if ((uint32_t)h->csize > PAGE_MAX || (uint32_t)h->usize > PAGE_MAX)
		return col_fail(
			c, c->pos,
			"a page of %d bytes (%d compressed): over the %u MiB shardfs reads",
			(int)h->usize, (int)h->csize, PAGE_MAX >> 20);
	return 0;
}

/* ---- codecs ---- */

static const char *codec_name(int32_t codec)
{
	static const char *const names[] = { "UNCOMPRESSED", "SNAPPY", "GZIP",
					     "LZO",	     "BROTLI", "LZ4",
					     "ZSTD",	     "LZ4_RAW" };

	return codec >= 0 && codec < 8 ? names[codec] : "unknown";
}

static bool gunzip(const unsigned char *in, size_t n, unsigned char *out,
		   size_t un)
{
	z_stream z = { 0 };
	bool ok;

	if (inflateInit2(&z, 15 + 32) != Z_OK)
		return false;
	z.next_in = (unsigned char *)in;
	z.avail_in = (uInt)n;
	z.next_out = out;
	z.avail_out = (uInt)un;
	ok = inflate(&z, Z_FINISH) == Z_STREAM_END && z.total_out == un;
	inflateEnd(&z);
	return ok;
}

/* Hadoop's LZ4 framing: blocks of (u32 BE size, u32 BE compressed, LZ4). */
static bool lz4_hadoop(const unsigned char *in, size_t n, unsigned char *out,
		       size_t un)
{
	size_t done = 0;

	while (n >= 8) {
		uint32_t ul = (uint32_t)in[0] << 24 | (uint32_t)in[1] << 16 |
			      (uint32_t)in[2] << 8 | in[3];
		uint32_t cl = (uint32_t)in[4] << 24 | (uint32_t)in[5] << 16 |
			      (uint32_t)in[6] << 8 | in[7];
		int got;

		if (cl > n - 8 || ul > un - done || cl > INT32_MAX ||
		    ul > INT32_MAX)
			return false;
		got = LZ4_decompress_safe((const char *)in + 8,
					  (char *)out + done, (int)cl, (int)ul);
		if (got != (int)ul)
			return false;
		done += ul;
		in += 8 + cl;
		n -= 8 + cl;
	}
	return n == 0 && done == un;
}

/* Decompress n bytes of codec into exactly un bytes at out. */
static bool page_decompress(int32_t codec, const unsigned char *in, size_t n,
			    unsigned char *out, size_t un)
{
	size_t got = un;

	switch (codec) {
	case C_UNCOMPRESSED:
		if (n != un)
			return false;
		memcpy(out, in, n);
		return true;
	case C_SNAPPY:
		return snappy_uncompressed_length((const char *)in, n, &got) ==
			       SNAPPY_OK &&
		       got == un &&
		       snappy_uncompress((const char *)in, n, (char *)out,
					 &got) == SNAPPY_OK &&
		       got == un;
	case C_GZIP:
		return gunzip(in, n, out, un);
	case C_BROTLI:
		return BrotliDecoderDecompress(n, in, &got, out) ==
			       BROTLI_DECODER_RESULT_SUCCESS &&
		       got == un;
	case C_LZ4:
		if (lz4_hadoop(in, n, out, un))
			return true;
		/* some writers wrote bare LZ4 blocks */
		__attribute__((fallthrough));
	case C_LZ4_RAW:
		return n <= INT32_MAX && un <= INT32_MAX &&
		       LZ4_decompress_safe((const char *)in, (char *)out,
					   (int)n, (int)un) == (int)un;
	case C_ZSTD:
		got = ZSTD_decompress(out, un, in, n);
		return !ZSTD_isError(got) && got == un;
	default:
		return false;
	}
}

/* Compress in[0 .. n) with codec, appended to o.  Returns 0 or -ENOMEM. */
static int page_compress(int32_t codec, const unsigned char *in, size_t n,
			 struct sfs_thrift_out *o)
{
	size_t cap, got;
	unsigned char *p;
	bool ok = true;

	if (codec == C_UNCOMPRESSED) {
		sfs_thrift_put(o, in, n);
		return o->oom ? -ENOMEM : 0;
	}
	cap = n + n / 2 + 1024;
	if (codec == C_SNAPPY)
		cap = snappy_max_compressed_length(n);
	else if (codec == C_ZSTD)
		cap = ZSTD_compressBound(n);
	else if (codec == C_BROTLI)
		cap = BrotliEncoderMaxCompressedSize(n) + 1024;
	else if (codec == C_LZ4 || codec == C_LZ4_RAW)
		cap = (size_t)LZ4_compressBound((int)n) + 8;
	p = malloc(cap);
	if (!p)
		return -ENOMEM;
	got = cap;
	switch (codec) {
	case C_SNAPPY:
		ok = snappy_compress((const char *)in, n, (char *)p, &got) ==
		     SNAPPY_OK;
		break;
	case C_GZIP: {
		z_stream z = { 0 };

		ok = deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8,
				  Z_DEFAULT_STRATEGY) == Z_OK;
		if (ok) {
			z.next_in = (unsigned char *)in;
			z.avail_in = (uInt)n;
			z.next_out = p;
			z.avail_out = (uInt)cap;
			ok = deflate(&z, Z_FINISH) == Z_STREAM_END;
			got = z.total_out;
			deflateEnd(&z);
		}
		break;
	}
	case C_BROTLI:
		ok = BrotliEncoderCompress(BROTLI_DEFAULT_QUALITY,
					   BROTLI_DEFAULT_WINDOW,
					   BROTLI_DEFAULT_MODE, n, in, &got,
					   p) == BROTLI_TRUE;
		break;
	case C_LZ4: {
		/* Hadoop framing, one block: what arrow writes for LZ4 */
		int c = LZ4_compress_default((const char *)in, (char *)p + 8,
					     (int)n, (int)(cap - 8));

		ok = c > 0;
		got = (size_t)c + 8;
		p[0] = (unsigned char)(n >> 24);
		p[1] = (unsigned char)(n >> 16);
		p[2] = (unsigned char)(n >> 8);
		p[3] = (unsigned char)n;
		p[4] = (unsigned char)((unsigned)c >> 24);
		p[5] = (unsigned char)((unsigned)c >> 16);
		p[6] = (unsigned char)((unsigned)c >> 8);
		p[7] = (unsigned char)c;
		break;
	}
	case C_LZ4_RAW: {
		int c = LZ4_compress_default((const char *)in, (char *)p,
					     (int)n, (int)cap);

		ok = c > 0;
		got = (size_t)c;
		break;
	}
	case C_ZSTD:
		got = ZSTD_compress(p, cap, in, n, 3);
		ok = !ZSTD_isError(got);
		break;
	default:
		ok = false;
	}
	if (ok)
		sfs_thrift_put(o, p, got);
	free(p);
	return !ok ? -EINVAL : o->oom ? -ENOMEM : 0;
}

/* ---- levels and bit packing ---- */

struct bytes {
	const unsigned char *p;
	size_t len, pos;
};

/* A section of b that its u32 length prefix says: 0, or -1 when it does
 * not fit. */
static int take_prefixed(struct bytes *b, struct bytes *out)
{
	uint32_t len;

	if (b->len - b->pos < 4)
		return -1;
	len = sfs_le32(b->p + b->pos);
	b->pos += 4;
	if (len > b->len - b->pos)
		return -1;
	*out = (struct bytes){ b->p + b->pos, len, 0 };
	b->pos += len;
	return 0;
}

static int get_uvarint(struct bytes *b, uint64_t *v)
{
	unsigned shift = 0;

	*v = 0;
	while (b->pos < b->len && shift < 64) {
		unsigned char x = b->p[b->pos++];

		*v |= (uint64_t)(x & 0x7f) << shift;
		if (!(x & 0x80))
			return 0;
		shift += 7;
	}
	return -1;
}

static int get_zigzag(struct bytes *b, int64_t *v)
{
	uint64_t u;

	if (get_uvarint(b, &u))
		return -1;
	*v = (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
	return 0;
}

/* Value i of a little-endian bit-packed run of width w at p. */
static uint32_t unpack(const unsigned char *p, size_t i, unsigned w)
{
	uint64_t bit = (uint64_t)i * w, v = 0;
	unsigned k;

	for (k = 0; k < w; k++, bit++)
		v |= (uint64_t)(p[bit / 8] >> (bit % 8) & 1) << k;
	return (uint32_t)v;
}

/*
 * n values of the RLE / bit-packed hybrid of width w (0..32) from b into
 * out; each must be <= max.  Returns 0 or -1 (malformed).
 */
static int hybrid_decode(struct bytes *b, unsigned w, uint32_t *out, size_t n,
			 uint32_t max)
{
	size_t done = 0, k;

	if (w > 32)
		return -1;
	while (done < n) {
		uint64_t head;

		if (get_uvarint(b, &head))
			return -1;
		if (head & 1) {
			uint64_t count = (head >> 1) * 8;
			uint64_t bytes = (head >> 1) * w;

			if (bytes > b->len - b->pos || count == 0)
				return -1;
			for (k = 0; k < count && done < n; k++) {
				out[done] = unpack(b->p + b->pos, k, w);
				if (out[done++] > max)
					return -1;
			}
			b->pos += (size_t)bytes;
		} else {
			uint64_t count = head >> 1;
			unsigned nb = (w + 7) / 8, i;
			uint32_t v = 0;

			if (nb > b->len - b->pos || count == 0)
				return -1;
			for (i = 0; i < nb; i++)
				v |= (uint32_t)b->p[b->pos + i] << (8 * i);
			b->pos += nb;
			if (v > max)
				return -1;
			for (k = 0; k < count && done < n; k++)
				out[done++] = v;
		}
	}
	return 0;
}

/* The deprecated BIT_PACKED levels: width w, most significant bit first. */
static int bitpacked_decode(struct bytes *b, unsigned w, uint32_t *out,
			    size_t n, uint32_t max)
{
	uint64_t bytes = ((uint64_t)n * w + 7) / 8, bit = 0;
	size_t i;
	unsigned k;

	if (bytes > b->len - b->pos)
		return -1;
	for (i = 0; i < n; i++) {
		uint32_t v = 0;

		for (k = 0; k < w; k++, bit++)
			v = v << 1 |
			    (b->p[b->pos + bit / 8] >> (7 - bit % 8) & 1);
		if (v > max)
			return -1;
		out[i] = v;
	}
	b->pos += (size_t)bytes;
	return 0;
}

static void pack_group(struct sfs_thrift_out *o, const uint32_t *v, size_t n,
		       unsigned w)
{
	unsigned char buf[32] = { 0 }; /* 8 values of up to 32 bits */
	uint64_t bit = 0;
	size_t i;
	unsigned k;

	for (i = 0; i < 8; i++)
		for (k = 0; k < w; k++, bit++)
			if (i < n && (v[i] >> k & 1))
				buf[bit / 8] |= (unsigned char)(1 << bit % 8);
	sfs_thrift_put(o, buf, w);
}

static size_t run_length(const uint32_t *v, size_t i, size_t n)
{
	size_t j = i + 1;

	while (j < n && v[j] == v[i])
		j++;
	return j - i;
}

/* v[0 .. n) as the RLE / bit-packed hybrid of width w, appended to o. */
static void hybrid_encode(struct sfs_thrift_out *o, const uint32_t *v, size_t n,
			  unsigned w)
{
	size_t i = 0, j, g;

	while (i < n) {
		size_t run = run_length(v, i, n);

		if (run >= 8) {
			unsigned char le[4];
			unsigned nb = (w + 7) / 8, k;

			sfs_thrift_put_varint(o, (uint64_t)run << 1);
			for (k = 0; k < nb; k++)
				le[k] = (unsigned char)(v[i] >> (8 * k));
			sfs_thrift_put(o, le, nb);
			i += run;
			continue;
		}
		/* groups of 8 until a run of 8 starts or the values end */
		for (j = i + 8; j < n && run_length(v, j, n) < 8; j += 8)
			;
		if (j > n)
			j = n;
		g = (j - i + 7) / 8;
		sfs_thrift_put_varint(o, (uint64_t)g << 1 | 1);
		for (; i < j; i += 8)
			pack_group(o, v + i, j - i < 8 ? j - i : 8, w);
	}
}

/* ---- values ---- */

/* Bytes of one value of a fixed-width type, 0 for BYTE_ARRAY. */
static uint32_t fixed_width(const struct leaf *lf)
{
	switch (lf->type) {
	case T_INT32:
	case T_FLOAT:
		return 4;
	case T_INT64:
	case T_DOUBLE:
		return 8;
	case T_INT96:
		return 12;
	case T_FLBA:
		return (uint32_t)lf->type_length;
	default:
		return 0;
	}
}

/* Room in a for n more bytes (n may be 0): where they go, or NULL when
 * out of memory. */
static unsigned char *arena_take(struct sfs_thrift_out *a, size_t n)
{
	size_t at = a->len;

	if (a->oom)
		return NULL;
	if (!a->p || n > a->cap - a->len) {
		size_t cap = a->cap ? a->cap : 4096;
		unsigned char *p;

		while (cap - a->len < n) {
			if (cap > SIZE_MAX / 2)
				return NULL;
			cap *= 2;
		}
		p = realloc(a->p, cap);
		if (!p)
			return NULL;
		a->p = p;
		a->cap = cap;
	}
	a->len += n;
	return a->p + at;
}

/*
 * Values built in the arena are recorded as offsets while it may move:
 * p holds the offset until fix_arena turns it into a pointer.
 */
static void fix_arena(struct value *v, size_t n, const struct sfs_thrift_out *a)
{
	size_t i;

	for (i = 0; i < n; i++)
		v[i].p = a->p + (uintptr_t)v[i].p;
}

static int plain_decode(struct bytes *b, const struct leaf *lf, struct value *v,
			uint32_t n, struct sfs_thrift_out *arena)
{
	uint32_t w = fixed_width(lf), i;

	if (lf->type == T_BOOLEAN) {
		unsigned char *bits = arena_take(arena, n);

		if (!bits)
			return -ENOMEM;
		if (((uint64_t)n + 7) / 8 > b->len - b->pos)
			return -1;
		for (i = 0; i < n; i++) {
			bits[i] = b->p[b->pos + i / 8] >> (i % 8) & 1;
			v[i] = (struct value){
				(const unsigned char *)(uintptr_t)(bits -
								   arena->p +
								   i),
				1
			};
		}
		b->pos += (n + 7) / 8;
		fix_arena(v, n, arena);
		return 0;
	}
	for (i = 0; i < n; i++) {
		struct bytes one = { b->p + b->pos, w, 0 };

		if (w ? w > b->len - b->pos : take_prefixed(b, &one))
			return -1;
		if (w)
			b->pos += w;
		v[i] = (struct value){ one.p, (uint32_t)one.len };
	}
	return 0;
}

/* DELTA_BINARY_PACKED: n values (or, with n NULL, the header's count) as
 * u64 into out (heap, *count of them). */
static int delta_decode(struct bytes *b, uint64_t **out, uint64_t *count)
{
	uint64_t block, nmini, total, per, done = 0, *v = NULL, i;
	int64_t first;

	*out = NULL;
	if (get_uvarint(b, &block) || get_uvarint(b, &nmini) ||
	    get_uvarint(b, &total) || get_zigzag(b, &first))
		return -1;
	if (!block || !nmini || block % 128 || nmini > block || block % nmini ||
	    (block / nmini) % 32 || total > ENTRIES_MAX)
		return -1;
	per = block / nmini;
	v = malloc((total ? total : 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	if (total)
		v[done++] = (uint64_t)first;
	while (done < total) {
		int64_t min;
		const unsigned char *widths;

		if (get_zigzag(b, &min) || nmini > b->len - b->pos)
			goto bad;
		widths = b->p + b->pos;
		b->pos += nmini;
		for (i = 0; i < nmini && done < total; i++) {
			unsigned w = widths[i];
			uint64_t bytes = per * w / 8, k;

			if (w > 64 || bytes > b->len - b->pos)
				goto bad;
			for (k = 0; k < per && done < total; k++) {
				uint64_t bit = k * w, d = 0;
				unsigned j;

				for (j = 0; j < w; j++, bit++)
					d |= (uint64_t)(b->p[b->pos + bit / 8] >>
								(bit % 8) &
							1)
					     << j;
				v[done] = v[done - 1] + (uint64_t)min + d;
				done++;
			}
			b->pos += (size_t)bytes;
		}
	}
	*out = v;
	*count = total;
	return 0;
bad:
	free(v);
	return -1;
}

/* n values of the page's encoding from b. */
static int values_decode(struct column *c, struct page *pg, struct bytes *b,
			 int32_t enc, uint32_t n)
{
	const struct leaf *lf = &c->lf;
	struct value *v = pg->vals;
	uint64_t *d = NULL, *d2 = NULL, cnt = 0, cnt2 = 0, i;
	uint32_t w = fixed_width(lf);
	int rc = 0;

	switch (enc) {
	case ENC_PLAIN:
		return plain_decode(b, lf, v, n, &pg->arena);
	case ENC_PLAIN_DICTIONARY:
	case ENC_RLE_DICTIONARY:
		if (!c->dict)
			return col_fail(
				c, pg->h.at,
				"dictionary-encoded values, but the chunk has no dictionary page");
		if (b->pos >= b->len && n)
			return -1;
		pg->bit_width = n ? b->p[b->pos++] : 0;
		pg->idx = malloc((n ? n : 1) * sizeof(*pg->idx));
		if (!pg->idx)
			return -ENOMEM;
		if (pg->bit_width > 32 ||
		    hybrid_decode(b, pg->bit_width, pg->idx, n,
				  c->ndict ? c->ndict - 1 : 0) ||
		    (n && !c->ndict))
			return -1;
		for (i = 0; i < n; i++)
			v[i] = c->dict[pg->idx[i]];
		return 0;
	case ENC_RLE: {
		uint32_t *bits;
		struct bytes rb;
		unsigned char *t;

		if (lf->type != T_BOOLEAN || take_prefixed(b, &rb))
			return -1;
		bits = malloc((n ? n : 1) * sizeof(*bits));
		t = arena_take(&pg->arena, n);
		if (!bits || !t) {
			free(bits);
			return -ENOMEM;
		}
		if (hybrid_decode(&rb, 1, bits, n, 1)) {
			free(bits);
			return -1;
		}
		for (i = 0; i < n; i++) {
			t[i] = (unsigned char)bits[i];
			v[i] = (struct value){
				(const unsigned char *)(uintptr_t)(t -
								   pg->arena.p +
								   i),
				1
			};
		}
		free(bits);
		fix_arena(v, n, &pg->arena);
		return 0;
	}
	case ENC_DELTA_BINARY_PACKED: {
		unsigned char *t;

		if (lf->type != T_INT32 && lf->type != T_INT64)
			return -1;
		rc = delta_decode(b, &d, &cnt);
		if (rc || cnt < n) {
			free(d);
			return rc ? rc : -1;
		}
		t = arena_take(&pg->arena, (size_t)n * w);
		if (!t) {
			free(d);
			return -ENOMEM;
		}
		for (i = 0; i < n; i++) {
			unsigned k;

			for (k = 0; k < w; k++)
				t[i * w + k] = (unsigned char)(d[i] >> (8 * k));
			v[i] = (struct value){
				(const unsigned char *)(uintptr_t)(t -
								   pg->arena.p +
								   i * w),
				w
			};
		}
		free(d);
		fix_arena(v, n, &pg->arena);
		return 0;
	}
	case ENC_DELTA_LENGTH_BYTE_ARRAY:
		if (lf->type != T_BYTE_ARRAY)
			return -1;
		rc = delta_decode(b, &d, &cnt);
		if (rc || cnt < n) {
			free(d);
			return rc ? rc : -1;
		}
		for (i = 0; i < n; i++) {
			if (d[i] > b->len - b->pos) {
				free(d);
				return -1;
			}
			v[i] = (struct value){ b->p + b->pos, (uint32_t)d[i] };
			b->pos += (size_t)d[i];
		}
		free(d);
		return 0;
	case ENC_DELTA_BYTE_ARRAY: {
		size_t prev_at = 0, prev_len = 0;

		if (lf->type != T_BYTE_ARRAY && lf->type != T_FLBA)
			return -1;
		rc = delta_decode(b, &d, &cnt);
		if (!rc)
			rc = delta_decode(b, &d2, &cnt2);
		if (rc || cnt < n || cnt2 < n)
			goto dba_out;
		for (i = 0; i < n; i++) {
			unsigned char *t;

			if (d[i] > prev_len || d2[i] > b->len - b->pos ||
			    d[i] + d2[i] > UINT32_MAX) {
				rc = -1;
				goto dba_out;
			}
			t = arena_take(&pg->arena, (size_t)(d[i] + d2[i]));
			if (!t) {
				rc = -ENOMEM;
				goto dba_out;
			}
			memcpy(t, pg->arena.p + prev_at, (size_t)d[i]);
			memcpy(t + d[i], b->p + b->pos, (size_t)d2[i]);
			b->pos += (size_t)d2[i];
			prev_at = (size_t)(t - pg->arena.p);
			prev_len = (size_t)(d[i] + d2[i]);
			v[i] = (struct value){
				(const unsigned char *)(uintptr_t)prev_at,
				(uint32_t)prev_len
			};
		}
		fix_arena(v, n, &pg->arena);
dba_out:
		free(d);
		free(d2);
		return rc || cnt < n || cnt2 < n ? (rc ? rc : -1) : 0;
	}
	case ENC_BYTE_STREAM_SPLIT: {
		unsigned char *t;
		uint32_t k;

		if (!w || (uint64_t)n * w > b->len - b->pos)
			return -1;
		t = arena_take(&pg->arena, (size_t)n * w);
		if (!t)
			return -ENOMEM;
		for (i = 0; i < n; i++) {
			for (k = 0; k < w; k++)
				t[i * w + k] = b->p[b->pos + (size_t)k * n + i];
			v[i] = (struct value){
				(const unsigned char *)(uintptr_t)(t -
								   pg->arena.p +
								   i * w),
				w
			};
		}
		b->pos += (size_t)n * w;
		fix_arena(v, n, &pg->arena);
		return 0;
	}
	default:
		return col_fail(
			c, pg->h.at,
			"values in encoding %d, which shardfs does not read",
			(int)enc);
	}
}

/* ---- pages ---- */

/* The uncompressed bytes of the page whose header is h (body at h->at +
 * header_len); for v2, the levels are stored uncompressed. */
static int page_raw(struct column *c, const struct page_header *h,
		    unsigned char **out)
{
	size_t cs = (size_t)h->csize, us = (size_t)h->usize, lv = 0;
	unsigned char *in = malloc(cs ? cs : 1), *raw = malloc(us ? us : 1);
	bool plain = c->ch->codec == C_UNCOMPRESSED;
	int rc = 0;

	*out = NULL;
	if (!in || !raw) {
		rc = col_nomem(c);
		goto out;
	}
	if (pread(c->fd, in, cs, (off_t)(h->at + h->header_len)) !=
	    (ssize_t)cs) {
		rc = sfs_errorf(c->err, -EIO, "%s: read failed at byte %llu",
				c->m->path,
				(unsigned long long)(h->at + h->header_len));
		goto out;
	}
	if (h->type == PAGE_DATA_V2) {
		lv = (size_t)h->def_len + (size_t)h->rep_len;
		if (lv > cs || lv > us) {
			rc = col_fail(c, h->at,
				      "levels of %zu bytes in a page of %zu",
				      lv, cs);
			goto out;
		}
		memcpy(raw, in, lv);
		plain = plain || !h->compressed;
	}
	if (plain && cs != us)
		rc = col_fail(
			c, h->at,
			"an uncompressed page of %zu bytes whose header says %zu",
			cs, us);
	else if (plain)
		memcpy(raw + lv, in + lv, cs - lv);
	else if (!page_decompress(c->ch->codec, in + lv, cs - lv, raw + lv,
				  us - lv))
		rc = col_fail(
			c, h->at,
			"%s data of %zu bytes does not decompress to the %zu bytes its header says",
			codec_name(c->ch->codec), cs - lv, us - lv);
out:
	free(in);
	if (rc)
		free(raw);
	else
		*out = raw;
	return rc;
}

/* Read the dictionary page whose header is h. */
static int load_dictionary(struct column *c, const struct page_header *h)
{
	struct bytes b;
	int rc;

	if (c->dict)
		return col_fail(c, h->at, "a second dictionary page");
	if (h->encoding != ENC_PLAIN && h->encoding != ENC_PLAIN_DICTIONARY)
		return col_fail(c, h->at, "a dictionary in encoding %d",
				(int)h->encoding);
	if ((uint32_t)h->num_values > ENTRIES_MAX)
		return col_fail(c, h->at, "a dictionary of %d values",
				(int)h->num_values);
	rc = page_raw(c, h, &c->dict_raw);
	if (rc)
		return rc;
	c->ndict = (uint32_t)h->num_values;
	c->dict = malloc((c->ndict ? c->ndict : 1) * sizeof(*c->dict));
	if (!c->dict)
		return col_nomem(c);
	b = (struct bytes){ c->dict_raw, (size_t)h->usize, 0 };
	rc = plain_decode(&b, &c->lf, c->dict, c->ndict, &c->dict_arena);
	if (rc == -ENOMEM)
		return col_nomem(c);
	if (rc)
		return col_fail(
			c, h->at,
			"the dictionary's %u values do not fit its %d bytes",
			c->ndict, (int)h->usize);
	return 0;
}

/* Levels of width for max, in encoding enc, from b. */
static int levels_decode(struct bytes *b, int32_t enc, bool v1, uint32_t max,
			 uint32_t *out, uint32_t n)
{
	unsigned w = bits_for(max);
	uint32_t i;

	if (!max) {
		for (i = 0; i < n; i++)
			out[i] = 0;
		return 0;
	}
	if (enc == ENC_BIT_PACKED && v1)
		return bitpacked_decode(b, w, out, n, max);
	if (v1) {
		struct bytes lb;

		if (enc != ENC_RLE || take_prefixed(b, &lb))
			return -1;
		return hybrid_decode(&lb, w, out, n, max);
	}
	return hybrid_decode(b, w, out, n, max);
}

/* Decode the data page whose header is h into c->pg. */
static int decode_page(struct column *c, const struct page_header *h)
{
	struct page *pg = &c->pg;
	struct bytes b;
	uint32_t n = (uint32_t)h->num_values, i, starts;
	bool v1 = h->type == PAGE_DATA;
	int rc;

	page_clear(pg);
	pg->h = *h;
	if (n > ENTRIES_MAX)
		return col_fail(
			c, h->at,
			"a page of %u values, over the %u shardfs reads", n,
			ENTRIES_MAX);
	rc = page_raw(c, h, &pg->raw);
	if (rc)
		return rc;
	pg->n = n;
	pg->rep = malloc((n ? n : 1) * sizeof(*pg->rep));
	pg->def = malloc((n ? n : 1) * sizeof(*pg->def));
	if (!pg->rep || !pg->def)
		return col_nomem(c);
	b = (struct bytes){ pg->raw, (size_t)h->usize, 0 };
	if (v1) {
		if (levels_decode(&b, h->rep_encoding, true, c->lf.max_rep,
				  pg->rep, n) ||
		    levels_decode(&b, h->def_encoding, true, c->lf.max_def,
				  pg->def, n))
			return col_fail(c, h->at, "malformed levels");
	} else {
		struct bytes rb = { pg->raw, (size_t)h->rep_len, 0 };
		struct bytes db = { pg->raw + h->rep_len, (size_t)h->def_len,
				    0 };

		if (levels_decode(&rb, ENC_RLE, false, c->lf.max_rep, pg->rep,
				  n) ||
		    levels_decode(&db, ENC_RLE, false, c->lf.max_def, pg->def,
				  n))
			return col_fail(c, h->at, "malformed levels");
		b.pos = (size_t)h->rep_len + (size_t)h->def_len;
		/* a cut trusts num_rows of a v2 page: rows begin (repetition
		 * level 0) where the levels say, and never span pages */
		for (i = 0, starts = 0; i < n; i++)
			starts += pg->rep[i] == 0;
		if (n && pg->rep[0])
			return col_fail(c, h->at,
					"a v2 page begins inside a row");
		if (starts != (uint32_t)h->num_rows)
			return col_fail(c, h->at,
					"num_rows says %d, the levels begin %u",
					(int)h->num_rows, starts);
	}
	for (i = 0; i < n; i++)
		pg->nvals += pg->def[i] == c->lf.max_def;
	if (!v1 && (uint32_t)h->num_nulls != n - pg->nvals)
		return col_fail(c, h->at,
				"num_nulls says %d, the levels say %u",
				(int)h->num_nulls, n - pg->nvals);
	pg->vals = malloc((pg->nvals ? pg->nvals : 1) * sizeof(*pg->vals));
	if (!pg->vals)
		return col_nomem(c);
	rc = values_decode(c, pg, &b, h->encoding, pg->nvals);
	if (rc == -ENOMEM)
		return col_nomem(c);
	if (rc == -1)
		return col_fail(c, h->at,
				"malformed values (encoding %d, %u values)",
				(int)h->encoding, pg->nvals);
	return rc;
}

/*
 * The next page of the chunk into *h (dictionary pages are loaded, index
 * pages skipped on the way).  Returns 1 with a data page, 0 at the
 * chunk's end, or -errno.
 */
static int next_data_page(struct column *c, struct page_header *h)
{
	int rc;

	while (c->pos < c->end) {
		rc = read_header(c, h);
		if (rc)
			return rc;
		c->pos += h->header_len + (uint64_t)h->csize;
		if (h->type == PAGE_DATA || h->type == PAGE_DATA_V2) {
			/* what precedes the first data page is copied as it
			 * is into slices: the footer must say where it ends */
			if (!c->seen_data &&
			    h->at != (uint64_t)c->ch->data_page_offset)
				return col_fail(
					c, h->at,
					"the first data page, but the footer's data_page_offset is %lld",
					(long long)c->ch->data_page_offset);
			c->seen_data = true;
			return 1;
		}
		if (!c->seen_data)
			c->pre_usize += h->header_len + (uint64_t)h->usize;
		if (h->type == PAGE_DICTIONARY) {
			rc = load_dictionary(c, h);
			if (rc)
				return rc;
		}
	}
	return 0;
}

/* ---- rows ---- */

static void put_u32(struct sfs_digest *d, uint32_t v)
{
	unsigned char le[4] = { (unsigned char)v, (unsigned char)(v >> 8),
				(unsigned char)(v >> 16),
				(unsigned char)(v >> 24) };

	sfs_digest_update(d, le, 4);
}

/* Hash the entries of the next row of c; 1 when c has no row left. */
static int hash_row(struct column *c, struct sfs_digest *d)
{
	struct page_header h;
	bool started = false;
	int rc;

	for (;;) {
		if (!c->loaded || c->at == c->pg.n) {
			rc = next_data_page(c, &h);
			if (rc < 0)
				return rc;
			if (rc == 0)
				break;
			rc = decode_page(c, &h);
			if (rc)
				return rc;
			c->loaded = true;
			c->at = c->vat = 0;
			continue;
		}
		if (c->pg.rep[c->at] == 0 && started)
			break;
		if (c->pg.rep[c->at] != 0 && !started)
			return col_fail(
				c, c->pg.h.at,
				"value %u continues a row that no page began",
				c->at);
		started = true;
		sfs_digest_update(d, "E", 1);
		put_u32(d, c->pg.rep[c->at]);
		put_u32(d, c->pg.def[c->at]);
		if (c->pg.def[c->at] == c->lf.max_def) {
			const struct value *v = &c->pg.vals[c->vat++];

			put_u32(d, v->len);
			sfs_digest_update(d, v->p, v->len);
		}
		c->at++;
	}
	sfs_digest_update(d, "Z", 1);
	return started ? 0 : 1;
}

int sfs_parquet_rows(int fd, const struct sfs_parquet_meta *m,
		     sfs_parquet_row_fn fn, void *arg, struct sfs_error *err)
{
	struct leaf *lf = calloc(m->nleaves ? m->nleaves : 1, sizeof(*lf));
	struct column *cols =
		calloc(m->nleaves ? m->nleaves : 1, sizeof(*cols));
	struct sfs_digest *d = sfs_digest_new();
	unsigned char digest[SFS_DIGEST_LEN];
	uint64_t row = 0;
	size_t g, k, opened = 0;
	int64_t r;
	int rc;

	if (!lf || !cols || !d) {
		rc = sfs_errorf(err, -ENOMEM, "%s: out of memory", m->path);
		goto out;
	}
	rc = leaves(m, lf, err);
	for (g = 0; !rc && g < m->nrow_groups; g++) {
		for (k = 0; !rc && k < m->nleaves; k++, opened = k)
			rc = col_open(&cols[k], fd, m, g, k, &lf[k], err);
		for (r = 0; !rc && r < m->row_groups[g].num_rows; r++) {
			for (k = 0; !rc && k < m->nleaves; k++) {
				rc = hash_row(&cols[k], d);
				if (rc == 1)
					rc = col_fail(
						&cols[k], cols[k].pos,
						"the column holds %lld rows, the row group %lld",
						(long long)r,
						(long long)m->row_groups[g]
							.num_rows);
			}
			if (!rc && sfs_digest_final(d, digest))
				rc = sfs_errorf(err, -EIO, "%s: SHA-256 failed",
						m->path);
			if (!rc)
				rc = fn(arg, row++, digest);
		}
		for (k = 0; !rc && k < m->nleaves; k++) {
			struct sfs_digest *x = sfs_digest_new();

			rc = x ? hash_row(&cols[k], x) : -ENOMEM;
			sfs_digest_free(x);
			if (rc == 0)
				rc = col_fail(
					&cols[k], cols[k].pos,
					"the column holds more rows than the row group's %lld",
					(long long)m->row_groups[g].num_rows);
			else if (rc == 1)
				rc = 0;
			else if (rc == -ENOMEM)
				rc = sfs_errorf(err, rc, "%s: out of memory",
						m->path);
		}
		for (k = 0; k < opened; k++)
			col_close(&cols[k]);
		opened = 0;
	}
out:
	for (k = 0; k < opened; k++)
		col_close(&cols[k]);
	sfs_digest_free(d);
	free(cols);
	free(lf);
	return rc;
}

/* ---- cuts ---- */

static int add_piece(struct sfs_parquet_cut_column *cc, size_t *cap,
		     uint64_t src, uint64_t len, unsigned char *mem)
{
	struct sfs_parquet_piece *last =
		cc->npieces ? &cc->pieces[cc->npieces - 1] : NULL;

	if (!mem && last && !last->mem && last->src + last->len == src) {
		last->len += len;
		return 0;
	}
	if (cc->npieces == *cap) {
		size_t ncap = *cap ? 2 * *cap : 8;
		struct sfs_parquet_piece *np =
			realloc(cc->pieces, ncap * sizeof(*np));

		if (!np)
			return -ENOMEM;
		cc->pieces = np;
		*cap = ncap;
	}
	cc->pieces[cc->npieces++] = (struct sfs_parquet_piece){ .src = src,
								.len = len,
								.mem = mem };
	return 0;
}

/* Values k0 .. k1 of c's decoded page as the cut page writes them: the
 * dictionary indexes in the page's encoding, or PLAIN. */
static void encode_values(const struct column *c, uint32_t k0, uint32_t k1,
			  struct sfs_thrift_out *val)
{
	const struct page *pg = &c->pg;
	uint32_t i, j;

	if (pg->idx) {
		unsigned char w = (unsigned char)pg->bit_width;

		sfs_thrift_put(val, &w, 1);
		hybrid_encode(val, pg->idx + k0, k1 - k0, w);
		return;
	}
	for (i = k0; i < k1; i += c->lf.type == T_BOOLEAN ? 8 : 1) {
		if (c->lf.type == T_BOOLEAN) {
			unsigned char bits = 0;

			for (j = 0; j < 8 && i + j < k1; j++)
				bits |= (unsigned char)((pg->vals[i + j].p[0] &
							 1)
							<< j);
			sfs_thrift_put(val, &bits, 1);
			continue;
		}
		if (c->lf.type == T_BYTE_ARRAY)
			sfs_thrift_put_le32(val, pg->vals[i].len);
		sfs_thrift_put(val, pg->vals[i].p, pg->vals[i].len);
	}
}

/*
 * Levels of entries e0 .. e0 + n of c's decoded page, repetition then
 * definition, as the RLE / bit-packed hybrid: each after its u32 length
 * in a v1 page, bare in a v2 page.  Sets *rep_len to the bytes of the
 * repetition levels.
 */
static void encode_levels(const struct column *c, uint32_t e0, uint32_t n,
			  bool v1, struct sfs_thrift_out *lev, size_t *rep_len)
{
	struct sfs_thrift_out one = { 0 };
	int which;

	*rep_len = 0;
	for (which = 0; which < 2; which++) {
		uint32_t max = which ? c->lf.max_def : c->lf.max_rep;
		const uint32_t *l = which ? c->pg.def : c->pg.rep;

		if (!max)
			continue;
		one.len = 0;
		hybrid_encode(&one, l + e0, n, bits_for(max));
		if (v1)
			sfs_thrift_put_le32(lev, (uint32_t)one.len);
		sfs_thrift_put(lev, one.p, one.len);
		if (!which)
			*rep_len = lev->len;
	}
	free(one.p);
	if (one.oom)
		lev->oom = 1;
}

/*
 * Entries [e0, e1) of c's decoded page as a new page (header and body)
 * in *out: levels re-encoded, values PLAIN or, dictionary-encoded, their
 * indexes in the page's encoding; compressed with the chunk's codec.
 */
static int reencode(struct column *c, uint32_t e0, uint32_t e1,
		    struct sfs_thrift_out *out, int64_t *usize)
{
	const struct page *pg = &c->pg;
	struct sfs_thrift_out lev = { 0 }, val = { 0 }, body = { 0 };
	uint32_t k0 = 0, k1, i, n = e1 - e0, rows = 0;
	int32_t enc = pg->idx ? pg->h.encoding : ENC_PLAIN;
	bool v1 = pg->h.type == PAGE_DATA;
	size_t rep_len;
	int last = 0, sub = 0, rc;

	for (i = 0; i < e0; i++)
		k0 += pg->def[i] == c->lf.max_def;
	k1 = k0;
	for (i = e0; i < e1; i++) {
		k1 += pg->def[i] == c->lf.max_def;
		rows += pg->rep[i] == 0;
	}
	encode_values(c, k0, k1, &val);
	encode_levels(c, e0, n, v1, &lev, &rep_len);
	if (v1) {
		/* levels and values compressed together */
		sfs_thrift_put(&lev, val.p, val.len);
		*usize = (int64_t)lev.len;
		rc = lev.oom || val.oom ?
			     -ENOMEM :
			     page_compress(c->ch->codec, lev.p, lev.len, &body);
	} else {
		/* levels as they are, values compressed unless the page
		 * said not */
		*usize = (int64_t)(lev.len + val.len);
		sfs_thrift_put(&body, lev.p, lev.len);
		rc = val.oom || body.oom ?
			     -ENOMEM :
			     page_compress(pg->h.compressed ? c->ch->codec :
							      C_UNCOMPRESSED,
					   val.p, val.len, &body);
	}
	if (rc == -EINVAL)
		rc = col_fail(c, pg->h.at,
			      "the cut page cannot be compressed with %s",
			      codec_name(c->ch->codec));
	else if (rc)
		rc = col_nomem(c);
	if (rc)
		goto out;
	sfs_thrift_put_int(out, &last, 1, SFS_TC_I32, pg->h.type);
	sfs_thrift_put_int(out, &last, 2, SFS_TC_I32, *usize);
	sfs_thrift_put_int(out, &last, 3, SFS_TC_I32, (int64_t)body.len);
	sfs_thrift_put_field(out, &last, v1 ? 5 : 8, SFS_TC_STRUCT);
	sfs_thrift_put_int(out, &sub, 1, SFS_TC_I32, n);
	if (v1) {
		sfs_thrift_put_int(out, &sub, 2, SFS_TC_I32, enc);
		sfs_thrift_put_int(out, &sub, 3, SFS_TC_I32, ENC_RLE);
		sfs_thrift_put_int(out, &sub, 4, SFS_TC_I32, ENC_RLE);
	} else {
		sfs_thrift_put_int(out, &sub, 2, SFS_TC_I32, n - (k1 - k0));
		sfs_thrift_put_int(out, &sub, 3, SFS_TC_I32, rows);
		sfs_thrift_put_int(out, &sub, 4, SFS_TC_I32, enc);
		sfs_thrift_put_int(out, &sub, 5, SFS_TC_I32,
				   (int64_t)(lev.len - rep_len));
		sfs_thrift_put_int(out, &sub, 6, SFS_TC_I32, (int64_t)rep_len);
		sfs_thrift_put_field(out, &sub, 7,
				     pg->h.compressed ? SFS_TC_TRUE :
							SFS_TC_FALSE);
	}
	sfs_thrift_put_stop(out); /* the data page header */
	sfs_thrift_put_stop(out); /* the PageHeader */
	*usize += (int64_t)out->len;
	sfs_thrift_put(out, body.p, body.len);
	if (out->oom)
		rc = col_nomem(c);
out:
	free(lev.p);
	free(val.p);
	free(body.p);
	return rc;
}

/* Cut column c (opened on row group rg) to rows [first, end). */
static int cut_column(struct column *c, int64_t first, int64_t end,
		      struct sfs_parquet_cut_column *cc)
{
	struct page_header h;
	size_t cap = 0;
	int64_t row = 0; /* rows begun before the page */
	bool pre = false; /* what precedes the first data page is laid */
	int rc;

	while ((rc = next_data_page(c, &h)) == 1) {
		uint64_t at = h.at, len = h.header_len + (uint64_t)h.csize;
		uint64_t start = (uint64_t)sfs_parquet_chunk_start(c->ch);
		int64_t lo, hi, starts;
		bool cont;

		if (!pre && at > start) {
			/* the dictionary page (whatever precedes the first
			 * data page), as it is */
			if (add_piece(cc, &cap, start, at - start, NULL))
				return col_nomem(c);
			cc->total_compressed_size = (int64_t)(at - start);
			cc->total_uncompressed_size = (int64_t)c->pre_usize;
		}
		pre = true;
		/* the rows the page touches: [lo, hi) */
		if (!c->lf.max_rep || h.type == PAGE_DATA_V2) {
			starts = c->lf.max_rep ? h.num_rows : h.num_values;
			cont = false;
			c->loaded = false;
		} else {
			uint32_t i;

			rc = decode_page(c, &h);
			if (rc)
				return rc;
			c->loaded = true;
			for (starts = 0, i = 0; i < c->pg.n; i++)
				starts += c->pg.rep[i] == 0;
			cont = c->pg.n && c->pg.rep[0] != 0;
		}
		lo = cont ? row - 1 : row;
		hi = row + starts;
		row += starts;
		if (lo >= end)
			break;
		if (hi <= first || hi == lo)
			continue;
		if (lo >= first && hi <= end) {
			if (add_piece(cc, &cap, at, len, NULL))
				return col_nomem(c);
			cc->total_compressed_size += (int64_t)len;
			cc->total_uncompressed_size +=
				(int64_t)h.header_len + h.usize;
			cc->num_values += h.num_values;
		} else {
			struct sfs_thrift_out out = { 0 };
			int64_t usize = 0, r = row - starts - 1;
			uint32_t i, e0 = UINT32_MAX, e1 = 0;

			if (!c->loaded) {
				rc = decode_page(c, &h);
				if (rc)
					return rc;
			}
			c->loaded = false;
			/* entry i belongs to the row last begun (rep 0) */
			for (i = 0; i < c->pg.n; i++) {
				r += c->pg.rep[i] == 0;
				if (r >= first && r < end) {
					if (e0 == UINT32_MAX)
						e0 = i;
					e1 = i + 1;
				}
			}
			if (e0 == UINT32_MAX)
				continue;
			rc = reencode(c, e0, e1, &out, &usize);
			if (!rc && add_piece(cc, &cap, 0, out.len, out.p))
				rc = col_nomem(c);
			if (rc) {
				free(out.p);
				return rc;
			}
			cc->total_compressed_size += (int64_t)out.len;
			cc->total_uncompressed_size += usize;
			cc->num_values += e1 - e0;
		}
	}
	if (rc < 0)
		return rc;
	if (row < end)
		return col_fail(
			c, c->pos,
			"the column chunk ends after %lld rows; the cut needs %lld",
			(long long)row, (long long)end);
	return 0;
}

void sfs_parquet_cut_free(struct sfs_parquet_cut *c)
{
	size_t i, k;

	if (!c)
		return;
	for (i = 0; i < c->ncolumns; i++) {
		for (k = 0; k < c->columns[i].npieces; k++)
			free(c->columns[i].pieces[k].mem);
		free(c->columns[i].pieces);
	}
	free(c->columns);
	free(c);
}

int sfs_parquet_cut(int fd, const struct sfs_parquet_meta *m, size_t rg,
		    int64_t first, int64_t count, struct sfs_parquet_cut **out,
		    struct sfs_error *err)
{
	struct sfs_parquet_cut *cut = calloc(1, sizeof(*cut));
	struct leaf *lf = calloc(m->nleaves ? m->nleaves : 1, sizeof(*lf));
	size_t k;
	int rc;

	if (!cut || !lf ||
	    !(cut->columns = calloc(m->nleaves ? m->nleaves : 1,
				    sizeof(*cut->columns)))) {
		rc = sfs_errorf(err, -ENOMEM, "%s: out of memory", m->path);
		goto out;
	}
	if (rg >= m->nrow_groups || first < 0 || count < 1 ||
	    count > m->row_groups[rg].num_rows - first) {
		rc = sfs_errorf(err, -EINVAL,
				"%s: rows %lld..+%lld are not in row group %zu",
				m->path, (long long)first, (long long)count,
				rg);
		goto out;
	}
	cut->ncolumns = m->nleaves;
	rc = leaves(m, lf, err);
	for (k = 0; !rc && k < m->nleaves; k++) {
		struct column c;

		rc = col_open(&c, fd, m, rg, k, &lf[k], err);
		if (!rc)
			rc = cut_column(&c, first, first + count,
					&cut->columns[k]);
		col_close(&c);
	}
out:
	free(lf);
	if (rc) {
		sfs_parquet_cut_free(cut);
		return rc;
	}
	*out = cut;
	return 0;
}
