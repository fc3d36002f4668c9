/*
 * Parquet's encodings: the RLE / bit-packed hybrid and the deprecated
 * BIT_PACKED levels, DELTA_BINARY_PACKED, and the values of a page in each
 * encoding shardfs reads (PLAIN, dictionary indexes, RLE booleans,
 * DELTA_*, BYTE_STREAM_SPLIT).  Nothing read is trusted: every level,
 * index, length and bit width is checked against the bytes left before
 * use.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "formats/format_i.h"
#include "formats/parquet/parquet_i.h"

/* ---- levels and bit packing ---- */

/* A section of b that its u32 length prefix says: 0, or -1 when it does
 * not fit. */
static int take_prefixed(struct sfs_pq_bytes *b, struct sfs_pq_bytes *out)
{
	uint32_t len;

	if (b->len - b->pos < 4)
		return -1;
	len = sfs_le32(b->p + b->pos);
	b->pos += 4;
	if (len > b->len - b->pos)
		return -1;
	*out = (struct sfs_pq_bytes){ b->p + b->pos, len, 0 };
	b->pos += len;
	return 0;
}

static int get_uvarint(struct sfs_pq_bytes *b, uint64_t *v)
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

static int get_zigzag(struct sfs_pq_bytes *b, int64_t *v)
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
static int hybrid_decode(struct sfs_pq_bytes *b, unsigned w, uint32_t *out,
			 size_t n, uint32_t max)
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
static int bitpacked_decode(struct sfs_pq_bytes *b, unsigned w, uint32_t *out,
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
void sfs_pq_hybrid_encode(struct sfs_thrift_out *o, const uint32_t *v, size_t n,
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

unsigned sfs_pq_bits_for(uint32_t max)
{
	unsigned b = 0;

	while (max >> b)
		b++;
	return b;
}

/* Levels of width for max, in encoding enc, from b. */
int sfs_pq_levels_decode(struct sfs_pq_bytes *b, int32_t enc, bool v1,
			 uint32_t max, uint32_t *out, uint32_t n)
{
	unsigned w = sfs_pq_bits_for(max);
	uint32_t i;

	if (!max) {
		for (i = 0; i < n; i++)
			out[i] = 0;
		return 0;
	}
	if (enc == SFS_PQ_ENC_BIT_PACKED && v1)
		return bitpacked_decode(b, w, out, n, max);
	if (v1) {
		struct sfs_pq_bytes lb;

		if (enc != SFS_PQ_ENC_RLE || take_prefixed(b, &lb))
			return -1;
		return hybrid_decode(&lb, w, out, n, max);
	}
	return hybrid_decode(b, w, out, n, max);
}

/* ---- values ---- */

/* Bytes of one value of a fixed-width type, 0 for BYTE_ARRAY. */
static uint32_t fixed_width(const struct sfs_pq_leaf *lf)
{
	switch (lf->type) {
	case SFS_PQ_T_INT32:
	case SFS_PQ_T_FLOAT:
		return 4;
	case SFS_PQ_T_INT64:
	case SFS_PQ_T_DOUBLE:
		return 8;
	case SFS_PQ_T_INT96:
		return 12;
	case SFS_PQ_T_FLBA:
		return (uint32_t)lf->type_length;
	default:
		return 0;
	}
}

/*
 * Values built in the arena are recorded as offsets while it may move:
 * p holds the offset until fix_arena turns it into a pointer.
 */
static void fix_arena(struct sfs_pq_value *v, size_t n,
		      const struct sfs_thrift_out *a)
{
	size_t i;

	for (i = 0; i < n; i++)
		v[i].p = a->p + (uintptr_t)v[i].p;
}

int sfs_pq_plain_decode(struct sfs_pq_bytes *b, const struct sfs_pq_leaf *lf,
			struct sfs_pq_value *v, uint32_t n,
			struct sfs_thrift_out *arena)
{
	uint32_t w = fixed_width(lf), i;

	if (lf->type == SFS_PQ_T_BOOLEAN) {
		unsigned char *bits = sfs_thrift_take(arena, n);

		if (!bits)
			return -ENOMEM;
		if (((uint64_t)n + 7) / 8 > b->len - b->pos)
			return -1;
		for (i = 0; i < n; i++) {
			bits[i] = b->p[b->pos + i / 8] >> (i % 8) & 1;
			v[i] = (struct sfs_pq_value){
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
		struct sfs_pq_bytes one = { b->p + b->pos, w, 0 };

		if (w ? w > b->len - b->pos : take_prefixed(b, &one))
			return -1;
		if (w)
			b->pos += w;
		v[i] = (struct sfs_pq_value){ one.p, (uint32_t)one.len };
	}
	return 0;
}

const char *sfs_pq_encoding_name(int32_t enc)
{
	static const char *const names[] = {
		"PLAIN",
		"unknown",
		"PLAIN_DICTIONARY",
		"RLE",
		"BIT_PACKED",
		"DELTA_BINARY_PACKED",
		"DELTA_LENGTH_BYTE_ARRAY",
		"DELTA_BYTE_ARRAY",
		"RLE_DICTIONARY",
		"BYTE_STREAM_SPLIT",
	};

	return enc >= 0 && enc < 10 ? names[enc] : "unknown";
}

/*
 * n more bytes built for pg: charged against what its reader left it
 * (pg->room) before they are allocated.  0, or -EFBIG with pg->want.
 */
static int charge(struct sfs_pq_page *pg, uint64_t n)
{
	if (n > pg->room) {
		pg->want = n;
		return -EFBIG;
	}
	pg->room -= n;
	return 0;
}

/* n bytes at the end of pg's arena into *t, its growth charged first:
 * 0, -EFBIG or -ENOMEM.  The arena's capacity stays charged (the page
 * reader counts it in its budget until the page goes). */
static int arena_take(struct sfs_pq_page *pg, size_t n, unsigned char **t)
{
	size_t cap = sfs_thrift_cap_after(&pg->arena, n);
	int rc = charge(pg, cap == SIZE_MAX ? UINT64_MAX :
					      (uint64_t)(cap - pg->arena.cap));

	if (rc)
		return rc;
	*t = sfs_thrift_take(&pg->arena, n);
	return *t ? 0 : -ENOMEM;
}

/*
 * DELTA_BINARY_PACKED: the header's count of values into *count, the
 * first want of them (at most) as u64 into *out (heap, charged to pg
 * while decoding: the caller gives the bytes back with release()).  The
 * values past want are walked, not stored: a DELTA_BYTE_ARRAY page's
 * second stream begins after them, and a header may count up to
 * SFS_PQ_ENTRIES_MAX values in a few bytes.
 */
static int delta_decode(struct sfs_pq_bytes *b, uint64_t want, uint64_t **out,
			uint64_t *count, struct sfs_pq_page *pg)
{
	uint64_t block, nmini, total, per, done = 0, *v = NULL, i, keep;
	int64_t first;
	int rc;

	*out = NULL;
	if (get_uvarint(b, &block) || get_uvarint(b, &nmini) ||
	    get_uvarint(b, &total) || get_zigzag(b, &first))
		return -1;
	if (!block || !nmini || block % 128 || nmini > block || block % nmini ||
	    (block / nmini) % 32 || total > SFS_PQ_ENTRIES_MAX)
		return -1;
	per = block / nmini;
	keep = total < want ? total : want;
	rc = charge(pg, keep * sizeof(*v));
	if (rc)
		return rc;
	v = malloc((keep ? keep : 1) * sizeof(*v));
	if (!v) {
		pg->room += keep * sizeof(*v);
		return -ENOMEM;
	}
	if (keep)
		v[0] = (uint64_t)first;
	if (total)
		done = 1;
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
			for (k = 0; k < per && done < keep; k++) {
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
			/* the rest of the miniblock: not kept */
			done += per - k < total - done ? per - k : total - done;
			b->pos += (size_t)bytes;
		}
	}
	*out = v;
	*count = total;
	return 0;
bad:
	free(v);
	pg->room += keep * sizeof(*v);
	return -1;
}

/* Free what delta_decode gave (n values kept) and give its bytes back. */
static void release(struct sfs_pq_page *pg, uint64_t *v, uint64_t n)
{
	if (!v)
		return;
	free(v);
	pg->room += n * sizeof(*v);
}

/* n values of the page's encoding from b into pg (see parquet_i.h). */
/* PLAIN_DICTIONARY, RLE_DICTIONARY: a bit width, then the indexes. */
static int dict_decode(struct sfs_pq_page *pg, const struct sfs_pq_value *dict,
		       uint32_t ndict, struct sfs_pq_bytes *b, uint32_t n)
{
	uint64_t i;

	if (!dict)
		return -ENOENT;
	if (b->pos >= b->len && n)
		return -1;
	pg->bit_width = n ? b->p[b->pos++] : 0;
	pg->idx = malloc((n ? n : 1) * sizeof(*pg->idx));
	if (!pg->idx)
		return -ENOMEM;
	if (pg->bit_width > 32 ||
	    hybrid_decode(b, pg->bit_width, pg->idx, n,
			  ndict ? ndict - 1 : 0) ||
	    (n && !ndict))
		return -1;
	for (i = 0; i < n; i++)
		pg->vals[i] = dict[pg->idx[i]];
	return 0;
}

/* RLE: BOOLEAN values, as the length-prefixed hybrid of width 1. */
static int rle_bool_decode(struct sfs_pq_page *pg, const struct sfs_pq_leaf *lf,
			   struct sfs_pq_bytes *b, uint32_t n)
{
	struct sfs_pq_value *v = pg->vals;
	struct sfs_pq_bytes rb;
	unsigned char *t;
	uint32_t *bits;
	uint64_t i;
	int rc;

	if (lf->type != SFS_PQ_T_BOOLEAN || take_prefixed(b, &rb))
		return -1;
	rc = arena_take(pg, n, &t);
	if (rc)
		return rc;
	bits = malloc((n ? n : 1) * sizeof(*bits));
	if (!bits)
		return -ENOMEM;
	if (hybrid_decode(&rb, 1, bits, n, 1)) {
		free(bits);
		return -1;
	}
	for (i = 0; i < n; i++) {
		t[i] = (unsigned char)bits[i];
		v[i] = (struct sfs_pq_value){
			(const unsigned char *)(uintptr_t)(t - pg->arena.p + i),
			1
		};
	}
	free(bits);
	fix_arena(v, n, &pg->arena);
	return 0;
}

/* DELTA_BINARY_PACKED: INT32 and INT64 values, w bytes each. */
static int delta_int_decode(struct sfs_pq_page *pg,
			    const struct sfs_pq_leaf *lf,
			    struct sfs_pq_bytes *b, uint32_t n, uint32_t w)
{
	struct sfs_pq_value *v = pg->vals;
	uint64_t *d = NULL, cnt = 0, i;
	unsigned char *t;
	int rc;

	if (lf->type != SFS_PQ_T_INT32 && lf->type != SFS_PQ_T_INT64)
		return -1;
	rc = delta_decode(b, n, &d, &cnt, pg);
	if (!rc && cnt >= n)
		rc = arena_take(pg, (size_t)n * w, &t);
	if (rc || cnt < n) {
		release(pg, d, cnt < n ? cnt : n);
		return rc ? rc : -1;
	}
	for (i = 0; i < n; i++) {
		unsigned k;

		for (k = 0; k < w; k++)
			t[i * w + k] = (unsigned char)(d[i] >> (8 * k));
		v[i] = (struct sfs_pq_value){
			(const unsigned char *)(uintptr_t)(t - pg->arena.p +
							   i * w),
			w
		};
	}
	release(pg, d, n);
	fix_arena(v, n, &pg->arena);
	return 0;
}

/* DELTA_LENGTH_BYTE_ARRAY: the lengths, then the bytes, in place. */
static int delta_length_decode(struct sfs_pq_page *pg,
			       const struct sfs_pq_leaf *lf,
			       struct sfs_pq_bytes *b, uint32_t n)
{
	uint64_t *d = NULL, cnt = 0, i;
	int rc;

	if (lf->type != SFS_PQ_T_BYTE_ARRAY)
		return -1;
	rc = delta_decode(b, n, &d, &cnt, pg);
	if (rc || cnt < n) {
		release(pg, d, cnt < n ? cnt : n);
		return rc ? rc : -1;
	}
	for (i = 0; i < n; i++) {
		if (d[i] > b->len - b->pos) {
			release(pg, d, n);
			return -1;
		}
		pg->vals[i] =
			(struct sfs_pq_value){ b->p + b->pos, (uint32_t)d[i] };
		b->pos += (size_t)d[i];
	}
	release(pg, d, n);
	return 0;
}

/*
 * The bytes the n values of DELTA_BYTE_ARRAY prefixes pre and suffixes
 * suf build, into *built: -1 when a prefix is longer than the value
 * before or the suffixes run past b.
 */
static int dba_measure(const struct sfs_pq_bytes *b, const uint64_t *pre,
		       const uint64_t *suf, uint32_t n, uint64_t *built)
{
	uint64_t prev_len = 0, suffixes = 0, i;

	*built = 0;
	for (i = 0; i < n; i++) {
		if (pre[i] > prev_len || suf[i] > b->len - b->pos - suffixes ||
		    pre[i] + suf[i] > UINT32_MAX)
			return -1;
		suffixes += suf[i];
		prev_len = pre[i] + suf[i];
		*built += prev_len;
	}
	return 0;
}

/*
 * DELTA_BYTE_ARRAY: each value is a prefix of the one before and a
 * suffix: a page of n values may build n times its longest, so what they
 * build is added up (and charged) before it is built.
 */
static int delta_byte_array_decode(struct sfs_pq_page *pg,
				   const struct sfs_pq_leaf *lf,
				   struct sfs_pq_bytes *b, uint32_t n)
{
	uint64_t *d = NULL, *d2 = NULL, cnt = 0, cnt2 = 0, i;
	uint64_t prev_len, built;
	size_t at = 0;
	unsigned char *t = NULL;
	int rc;

	if (lf->type != SFS_PQ_T_BYTE_ARRAY && lf->type != SFS_PQ_T_FLBA)
		return -1;
	rc = delta_decode(b, n, &d, &cnt, pg);
	if (!rc)
		rc = delta_decode(b, n, &d2, &cnt2, pg);
	if (!rc && (cnt < n || cnt2 < n || dba_measure(b, d, d2, n, &built)))
		rc = -1;
	if (rc)
		goto out;
	/* n <= 2^24 values of < 2^32 bytes: built fits a u64 */
	rc = built > SIZE_MAX ? charge(pg, UINT64_MAX) :
				arena_take(pg, (size_t)built, &t);
	if (rc == -EFBIG)
		pg->want = built;
	if (rc)
		goto out;
	for (i = 0, prev_len = 0; i < n; i++) {
		/* the previous value ends at t + at */
		memcpy(t + at, t + at - prev_len, (size_t)d[i]);
		memcpy(t + at + d[i], b->p + b->pos, (size_t)d2[i]);
		b->pos += (size_t)d2[i];
		pg->vals[i] = (struct sfs_pq_value){ t + at,
						     (uint32_t)(d[i] + d2[i]) };
		prev_len = d[i] + d2[i];
		at += (size_t)prev_len;
	}
out:
	release(pg, d, cnt < n ? cnt : n);
	release(pg, d2, cnt2 < n ? cnt2 : n);
	return rc;
}

/* BYTE_STREAM_SPLIT: byte k of every value, then byte k + 1, ... */
static int byte_stream_split_decode(struct sfs_pq_page *pg,
				    struct sfs_pq_bytes *b, uint32_t n,
				    uint32_t w)
{
	struct sfs_pq_value *v = pg->vals;
	unsigned char *t;
	uint64_t i;
	uint32_t k;
	int rc;

	if (!w || (uint64_t)n * w > b->len - b->pos)
		return -1;
	rc = arena_take(pg, (size_t)n * w, &t);
	if (rc)
		return rc;
	for (i = 0; i < n; i++) {
		for (k = 0; k < w; k++)
			t[i * w + k] = b->p[b->pos + (size_t)k * n + i];
		v[i] = (struct sfs_pq_value){
			(const unsigned char *)(uintptr_t)(t - pg->arena.p +
							   i * w),
			w
		};
	}
	b->pos += (size_t)n * w;
	fix_arena(v, n, &pg->arena);
	return 0;
}

int sfs_pq_values_decode(struct sfs_pq_page *pg, const struct sfs_pq_leaf *lf,
			 const struct sfs_pq_value *dict, uint32_t ndict,
			 struct sfs_pq_bytes *b, int32_t enc, uint32_t n)
{
	switch (enc) {
	case SFS_PQ_ENC_PLAIN:
		return sfs_pq_plain_decode(b, lf, pg->vals, n, &pg->arena);
	case SFS_PQ_ENC_PLAIN_DICTIONARY:
	case SFS_PQ_ENC_RLE_DICTIONARY:
		return dict_decode(pg, dict, ndict, b, n);
	case SFS_PQ_ENC_RLE:
		return rle_bool_decode(pg, lf, b, n);
	case SFS_PQ_ENC_DELTA_BINARY_PACKED:
		return delta_int_decode(pg, lf, b, n, fixed_width(lf));
	case SFS_PQ_ENC_DELTA_LENGTH_BYTE_ARRAY:
		return delta_length_decode(pg, lf, b, n);
	case SFS_PQ_ENC_DELTA_BYTE_ARRAY:
		return delta_byte_array_decode(pg, lf, b, n);
	case SFS_PQ_ENC_BYTE_STREAM_SPLIT:
		return byte_stream_split_decode(pg, b, n, fixed_width(lf));
	default:
		return -ENOTSUP;
	}
}
