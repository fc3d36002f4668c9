/*
 * Lance deletion files: the row offsets of a fragment that are deleted.
 *
 * ARROW_ARRAY (.arrow): an Arrow IPC file ("ARROW1", padding, messages,
 * the footer, its i32 length, "ARROW1") whose schema is one 32-bit integer
 * field and whose record batches hold its values without nulls and without
 * compression.  The footer and the messages are flatbuffers, read here
 * with a bound on every offset: a table's vtable, every field and every
 * vector must lie inside the buffer before it is read, and only the paths
 * Footer -> Schema -> Field -> Int and Footer -> Block -> Message ->
 * RecordBatch are followed (no recursion).  Lance writes them sorted; any
 * order is read (a copy of the values, sized by the bytes present, is
 * sorted).
 *
 * BITMAP (.bin): a Roaring bitmap in the portable format (cookie 12346
 * without run containers, as Lance writes it, or 12347 with them): the
 * containers' keys and cardinalities, their offsets, then each container
 * (a sorted array of u16, a 2^16-bit bitset, or runs).  Keys must rise,
 * each container's values too, and its cardinality match its header.
 */
#include <errno.h>
#include <stdbool.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "formats/format_i.h"
#include "shardfs/lance.h"
#include "shardfs/util.h"

/* ---- reporting deleted runs in order ---- */

/* Runs are merged as they come, checked in order and below the limit. */
struct runs {
	const char *path;
	uint64_t limit; /* physical rows */
	uint64_t first, count; /* the run being built */
	uint64_t next; /* the smallest offset that may come next */
	uint64_t total;
	sfs_lance_deleted_fn fn;
	void *arg;
	struct sfs_error *err;
};

static int runs_flush(struct runs *r)
{
	int rc = 0;

	if (r->count && r->fn)
		rc = r->fn(r->arg, r->first, r->count);
	r->count = 0;
	return rc;
}

/* Add [first, first + n), found at byte at of the file. */
static int runs_add(struct runs *r, uint64_t first, uint64_t n, uint64_t at)
{
	int rc;

	if (first < r->next)
		return sfs_errorf(
			r->err, -EINVAL,
			"%s: byte %" PRIu64 ": row %" PRIu64
			" is deleted twice or out of order; the deletion file is damaged: restore it",
			r->path, at, first);
	if (first + n > r->limit)
		return sfs_errorf(
			r->err, -EINVAL,
			"%s: byte %" PRIu64 ": deleted row %" PRIu64
			" is past the fragment's %" PRIu64
			" rows; the deletion file belongs to another fragment or is damaged",
			r->path, at, first + n - 1, r->limit);
	if (r->count && r->first + r->count == first) {
		r->count += n;
	} else {
		rc = runs_flush(r);
		if (rc)
			return rc;
		r->first = first;
		r->count = n;
	}
	r->next = first + n;
	r->total += n;
	return 0;
}

/* ---- Roaring ---- */

#define SERIAL_COOKIE_NO_RUN 12346
#define SERIAL_COOKIE 12347
#define NO_OFFSET_THRESHOLD 4
#define BITSET_BYTES 8192
#define ARRAY_MAX 4096

static int roaring_fail(struct runs *r, size_t at, const char *what)
{
	return sfs_errorf(
		r->err, -EINVAL,
		"%s: byte %zu: %s; the deletion file is damaged or not a Roaring bitmap: restore it",
		r->path, at, what);
}

/* A Roaring bitmap's layout: its containers' count, their run bitmap
 * (NULL: none), where their headers are and where the first begins. */
struct roaring {
	const unsigned char *runmap;
	uint32_t n;
	size_t hdr, pos;
};

static int roaring_header(const unsigned char *buf, size_t len, struct runs *r,
			  struct roaring *h)
{
	uint32_t cookie;
	size_t pos;

	if (len < 8)
		return roaring_fail(r, 0, "shorter than a Roaring header");
	cookie = sfs_le32(buf);
	h->runmap = NULL;
	if ((cookie & 0xffff) == SERIAL_COOKIE) {
		h->n = (cookie >> 16) + 1;
		pos = 4;
		if ((h->n + 7) / 8 > len - pos)
			return roaring_fail(r, pos,
					    "the run bitmap runs past the end");
		h->runmap = buf + pos;
		pos += (h->n + 7) / 8;
	} else if (cookie == SERIAL_COOKIE_NO_RUN) {
		h->n = sfs_le32(buf + 4);
		pos = 8;
		if (h->n > 65536)
			return roaring_fail(r, 4, "more than 65536 containers");
	} else {
		return roaring_fail(r, 0, "unknown cookie");
	}
	h->hdr = pos;
	if ((size_t)h->n * 4 > len - pos)
		return roaring_fail(r, pos,
				    "the container headers run past the end");
	pos += (size_t)h->n * 4;
	if (!h->runmap || h->n >= NO_OFFSET_THRESHOLD) {
		if ((size_t)h->n * 4 > len - pos)
			return roaring_fail(
				r, pos,
				"the container offsets run past the end");
		pos += (size_t)h->n * 4;
	}
	h->pos = pos;
	return 0;
}

/* A run container at *pos (values hi + ...): its runs to r, their
 * values counted in *seen; *pos moves past it. */
static int run_container(const unsigned char *buf, size_t len, size_t *pos,
			 uint64_t hi, struct runs *r, uint64_t *seen)
{
	size_t at = *pos, p = *pos;
	uint32_t nruns, start, rlen, k;
	int rc;

	if (len - p < 2)
		return roaring_fail(r, p, "a run container is cut");
	nruns = sfs_le16(buf + p);
	p += 2;
	if ((size_t)nruns * 4 > len - p)
		return roaring_fail(r, at, "a run container is cut");
	for (k = 0; k < nruns; k++, p += 4) {
		start = sfs_le16(buf + p);
		rlen = sfs_le16(buf + p + 2) + 1;
		if (start + rlen > 65536)
			return roaring_fail(
				r, p, "a run passes the end of its container");
		rc = runs_add(r, hi + start, rlen, p);
		if (rc)
			return rc;
		*seen += rlen;
	}
	*pos = p;
	return 0;
}

/* A bitset container at *pos, as run_container. */
static int bitset_container(const unsigned char *buf, size_t len, size_t *pos,
			    uint64_t hi, struct runs *r, uint64_t *seen)
{
	size_t p = *pos;
	uint32_t k;
	int rc;

	if (BITSET_BYTES > len - p)
		return roaring_fail(r, p, "a bitset container is cut");
	for (k = 0; k < 65536; k++) {
		if (!(buf[p + k / 8] >> (k % 8) & 1))
			continue;
		rc = runs_add(r, hi + k, 1, p + k / 8);
		if (rc)
			return rc;
		(*seen)++;
	}
	*pos = p + BITSET_BYTES;
	return 0;
}

/* An array container of card values at *pos, as run_container. */
static int array_container(const unsigned char *buf, size_t len, size_t *pos,
			   uint64_t hi, uint32_t card, struct runs *r,
			   uint64_t *seen)
{
	size_t p = *pos;
	uint32_t k;
	int rc;

	if ((size_t)card * 2 > len - p)
		return roaring_fail(r, p, "an array container is cut");
	for (k = 0; k < card; k++, p += 2) {
		rc = runs_add(r, hi + sfs_le16(buf + p), 1, p);
		if (rc)
			return rc;
	}
	*seen = card;
	*pos = p;
	return 0;
}

static int roaring_parse(const unsigned char *buf, size_t len, struct runs *r)
{
	struct roaring h = { 0 };
	uint32_t i;
	int rc, prev_key = -1;

	rc = roaring_header(buf, len, r, &h);
	for (i = 0; !rc && i < h.n; i++) {
		size_t head = h.hdr + 4 * (size_t)i;
		uint32_t key = sfs_le16(buf + head);
		uint32_t card = sfs_le16(buf + head + 2) + 1;
		uint64_t hi = (uint64_t)key << 16, seen = 0;

		if ((int)key <= prev_key)
			return roaring_fail(r, head,
					    "container keys do not rise");
		prev_key = (int)key;
		if (!h.runmap || h.n >= NO_OFFSET_THRESHOLD) {
			size_t off = h.hdr + 4 * (size_t)h.n + 4 * i;

			if (sfs_le32(buf + off) != h.pos)
				return roaring_fail(
					r, off,
					"a container offset does not match the containers' sizes");
		}
		if (h.runmap && (h.runmap[i / 8] >> (i % 8) & 1))
			rc = run_container(buf, len, &h.pos, hi, r, &seen);
		else if (card > ARRAY_MAX)
			rc = bitset_container(buf, len, &h.pos, hi, r, &seen);
		else
			rc = array_container(buf, len, &h.pos, hi, card, r,
					     &seen);
		if (!rc && seen != card)
			return roaring_fail(
				r, head + 2,
				"a container holds another number of values than its header says");
	}
	if (rc)
		return rc;
	if (h.pos != len)
		return roaring_fail(r, h.pos,
				    "bytes follow the last container");
	return 0;
}

/* ---- Arrow IPC file, through bounded flatbuffers ---- */

#define ARROW_MAGIC "ARROW1"
#define ARROW_TYPE_INT 2
#define ARROW_HEADER_RECORD_BATCH 3
#define ARROW_CODEC_ZSTD 1

struct fb {
	const unsigned char *buf;
	size_t len;
	struct runs *r;
};

static int fb_fail(struct fb *b, size_t at, const char *what)
{
	return sfs_errorf(
		b->r->err, -EINVAL,
		"%s: byte %zu: %s; the deletion file is damaged or not the Arrow IPC file Lance writes: restore it",
		b->r->path, at, what);
}

/* The table a uoffset at ref points to. */
static int fb_deref(struct fb *b, size_t ref, size_t *out)
{
	uint32_t off;

	if (ref > b->len || b->len - ref < 4)
		return fb_fail(b, ref, "an offset runs past the end");
	off = sfs_le32(b->buf + ref);
	if (off > b->len - ref || b->len - ref - off < 4)
		return fb_fail(b, ref, "an offset points past the end");
	*out = ref + off;
	return 0;
}

/*
 * Where field idx of the table at t is (*at, with *room bytes of the
 * table from there), or *at 0 when the table lacks it.
 */
static int fb_field(struct fb *b, size_t t, unsigned idx, size_t *at,
		    size_t *room)
{
	int32_t soff = (int32_t)sfs_le32(b->buf + t);
	int64_t vt = (int64_t)t - soff;
	uint16_t vlen, tlen, foff;

	*at = 0;
	if (vt < 0 || (uint64_t)vt > b->len || b->len - (size_t)vt < 4)
		return fb_fail(b, t, "a table's vtable is outside the file");
	vlen = (uint16_t)(b->buf[vt] | b->buf[vt + 1] << 8);
	tlen = (uint16_t)(b->buf[vt + 2] | b->buf[vt + 3] << 8);
	if (vlen < 4 || vlen % 2 || vlen > b->len - (size_t)vt || tlen < 4 ||
	    tlen > b->len - t)
		return fb_fail(b, (size_t)vt,
			       "a vtable or its table runs past the end");
	if (4 + 2 * (size_t)idx + 2 > vlen)
		return 0;
	foff = (uint16_t)(b->buf[vt + 4 + 2 * idx] | b->buf[vt + 5 + 2 * idx]
							     << 8);
	if (!foff)
		return 0;
	if (foff >= tlen)
		return fb_fail(b, (size_t)vt, "a field lies outside its table");
	*at = t + foff;
	*room = tlen - foff;
	return 0;
}

/* A scalar field of n bytes (little-endian, n <= 8), or dflt if absent. */
static int fb_scalar(struct fb *b, size_t t, unsigned idx, unsigned n,
		     uint64_t dflt, uint64_t *v)
{
	size_t at, room;
	unsigned i;
	int rc = fb_field(b, t, idx, &at, &room);

	*v = dflt;
	if (rc || !at)
		return rc;
	if (room < n)
		return fb_fail(b, at, "a field runs past its table");
	*v = 0;
	for (i = 0; i < n; i++)
		*v |= (uint64_t)b->buf[at + i] << 8 * i;
	return 0;
}

/* A table field: *sub, or 0 when absent. */
static int fb_table(struct fb *b, size_t t, unsigned idx, size_t *sub)
{
	size_t at, room;
	int rc = fb_field(b, t, idx, &at, &room);

	*sub = 0;
	if (rc || !at)
		return rc;
	if (room < 4)
		return fb_fail(b, at, "a field runs past its table");
	return fb_deref(b, at, sub);
}

/* A vector field of elements of size bytes: its first element and count. */
static int fb_vector(struct fb *b, size_t t, unsigned idx, size_t size,
		     size_t *first, size_t *count)
{
	size_t v;
	int rc = fb_table(b, t, idx, &v);

	*first = *count = 0;
	if (rc || !v)
		return rc;
	*count = sfs_le32(b->buf + v);
	if (*count > (b->len - v - 4) / size)
		return fb_fail(b, v, "a vector runs past the end");
	*first = v + 4;
	return 0;
}

/* The schema: one field, a 32-bit integer, no dictionary. */
static int arrow_schema(struct fb *b, size_t footer)
{
	size_t schema, fields, n, field, type, at, room;
	uint64_t v, width;
	int rc;

	rc = fb_table(b, footer, 1, &schema);
	if (!rc && !schema)
		return fb_fail(b, footer, "the footer has no schema");
	if (!rc)
		rc = fb_scalar(b, schema, 0, 2, 0, &v);
	if (!rc && v != 0)
		return fb_fail(b, schema, "the schema is big-endian");
	if (!rc)
		rc = fb_vector(b, schema, 1, 4, &fields, &n);
	if (!rc && n != 1)
		return fb_fail(b, schema,
			       "the schema does not hold exactly one field");
	if (!rc)
		rc = fb_deref(b, fields, &field);
	if (!rc)
		rc = fb_scalar(b, field, 2, 1, 0, &v);
	if (!rc && v != ARROW_TYPE_INT)
		return fb_fail(b, field, "the field is not an integer");
	if (!rc)
		rc = fb_field(b, field, 4, &at, &room);
	if (!rc && at)
		return fb_fail(b, at, "the field is dictionary-encoded");
	if (!rc)
		rc = fb_table(b, field, 3, &type);
	if (!rc && !type)
		return fb_fail(b, field, "the integer type is missing");
	if (!rc)
		rc = fb_scalar(b, type, 0, 4, 0, &width);
	if (!rc && width != 32)
		return fb_fail(b, type, "the integers are not 32-bit");
	return rc;
}

struct values {
	uint32_t *v;
	size_t n, cap;
};

/*
 * The values buffer of a batch (n bytes at p in the file), as raw u32s:
 * itself, or, in a batch with BodyCompression, after its i64 uncompressed
 * length: the bytes that follow when that is -1, else their ZSTD
 * decompression (into *owned), which must be exactly rows values.
 */
static int arrow_values(struct fb *b, size_t p, uint64_t n, uint64_t codec,
			bool compressed, uint64_t rows,
			const unsigned char **raw, unsigned char **owned)
{
	int64_t un;
	size_t got;

	*raw = b->buf + p;
	if (!compressed)
		return n / 4 < rows ?
			       fb_fail(b, p,
				       "the values buffer is shorter than its batch") :
			       0;
	if (n < 8)
		return fb_fail(b, p, "a compressed buffer lacks its length");
	un = (int64_t)sfs_le64(b->buf + p);
	*raw = b->buf + p + 8;
	if (un == -1)
		return (n - 8) / 4 < rows ?
			       fb_fail(b, p,
				       "the values buffer is shorter than its batch") :
			       0;
	if (codec != ARROW_CODEC_ZSTD)
		return fb_fail(
			b, p,
			"the values are LZ4-compressed (only ZSTD, as Lance writes, is read)");
	if (un < 0 || (uint64_t)un != rows * 4)
		return fb_fail(
			b, p,
			"the values' uncompressed length is not 4 bytes a row");
	*owned = malloc((size_t)un + 1);
	if (!*owned)
		return -ENOMEM;
	got = ZSTD_decompress(*owned, (size_t)un, b->buf + p + 8,
			      (size_t)(n - 8));
	if (ZSTD_isError(got) || got != (size_t)un)
		return fb_fail(
			b, p + 8,
			"the ZSTD values do not decompress to their stated length");
	*raw = *owned;
	return 0;
}

/* The values of the record batch whose Block is at blk. */
static int arrow_batch(struct fb *b, size_t blk, struct values *vals)
{
	uint64_t off = sfs_le64(b->buf + blk);
	uint64_t mlen = (uint32_t)sfs_le32(b->buf + blk + 8);
	uint64_t blen = sfs_le64(b->buf + blk + 16);
	size_t msg, hdr, comp, nodes, nn, bufs, nb, at;
	uint64_t v, rows, nulls, voff, vlen, body, i, codec = 0, method = 0;
	const unsigned char *raw;
	unsigned char *owned = NULL;
	int rc;

	if (off > b->len || mlen > b->len - off || blen > b->len - off - mlen ||
	    mlen < 8)
		return fb_fail(b, blk, "a record batch lies outside the file");
	/* the message: 0xffffffff, its i32 length, the flatbuffer */
	at = (size_t)off;
	if (sfs_le32(b->buf + at) == 0xffffffffu)
		at += 4;
	if ((uint64_t)sfs_le32(b->buf + at) > off + mlen - at - 4)
		return fb_fail(b, at, "a message's length runs past its block");
	rc = fb_deref(b, at + 4, &msg);
	if (!rc)
		rc = fb_scalar(b, msg, 1, 1, 0, &v);
	if (!rc && v != ARROW_HEADER_RECORD_BATCH)
		return fb_fail(b, msg, "a block is not a record batch");
	if (!rc)
		rc = fb_table(b, msg, 2, &hdr);
	if (!rc && !hdr)
		return fb_fail(b, msg, "a record batch message has no header");
	if (!rc)
		rc = fb_scalar(b, hdr, 0, 8, 0, &rows);
	if (!rc)
		rc = fb_table(b, hdr, 3, &comp);
	if (!rc && comp)
		rc = fb_scalar(b, comp, 0, 1, 0, &codec);
	if (!rc && comp)
		rc = fb_scalar(b, comp, 1, 1, 0, &method);
	if (!rc && method != 0)
		return fb_fail(b, comp,
			       "the batch's compression is not per buffer");
	if (!rc)
		rc = fb_vector(b, hdr, 1, 16, &nodes, &nn);
	if (!rc && nn != 1)
		return fb_fail(b, hdr,
			       "the record batch does not hold one column");
	if (rc)
		return rc;
	nulls = sfs_le64(b->buf + nodes + 8);
	if (sfs_le64(b->buf + nodes) != rows || nulls)
		return fb_fail(
			b, nodes,
			"the column has nulls, or another length than its batch");
	/* values are distinct rows of the fragment: no more of them, in all
	 * batches, than it holds (nor than a deletion file may) */
	if (rows > b->r->limit - vals->n ||
	    rows > SFS_LANCE_DELETION_MAX / 4 - vals->n)
		return fb_fail(b, nodes,
			       "the batch holds more rows than its fragment");
	rc = fb_vector(b, hdr, 2, 16, &bufs, &nb);
	if (!rc && nb != 2)
		return fb_fail(b, hdr,
			       "the column does not have its two buffers");
	if (rc)
		return rc;
	voff = sfs_le64(b->buf + bufs + 16);
	vlen = sfs_le64(b->buf + bufs + 24);
	body = off + mlen;
	if (voff > blen || vlen > blen - voff)
		return fb_fail(
			b, bufs + 16,
			"the values buffer lies outside the batch's body");
	rc = arrow_values(b, (size_t)(body + voff), vlen, codec, comp != 0,
			  rows, &raw, &owned);
	if (!rc && rows > SIZE_MAX / sizeof(*vals->v) - vals->n)
		rc = -ENOMEM;
	if (!rc && SFS_GROW(vals->v, vals->cap, vals->n + rows))
		rc = -ENOMEM;
	for (i = 0; !rc && i < rows; i++)
		vals->v[vals->n++] = sfs_le32(raw + 4 * i);
	free(owned);
	return rc;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static int arrow_parse(const unsigned char *buf, size_t len, struct runs *r)
{
	struct fb b = { .buf = buf, .len = len, .r = r };
	struct values vals = { 0 };
	size_t footer, blocks, nblocks, dicts, ndicts, i;
	uint32_t flen;
	int rc;

	if (len < 8 + 10 || memcmp(buf, ARROW_MAGIC, 6) ||
	    memcmp(buf + len - 6, ARROW_MAGIC, 6))
		return fb_fail(&b, 0, "no ARROW1 magic at both ends");
	flen = sfs_le32(buf + len - 10);
	if (flen > len - 10 - 8 || flen < 4)
		return fb_fail(&b, len - 10,
			       "the footer's length is past the file");
	/* the footer is a buffer of its own: offsets are relative to it */
	b.buf = buf + (len - 10 - flen);
	b.len = flen;
	rc = fb_deref(&b, 0, &footer);
	if (!rc)
		rc = arrow_schema(&b, footer);
	if (!rc)
		rc = fb_vector(&b, footer, 2, 24, &dicts, &ndicts);
	if (!rc && ndicts)
		rc = fb_fail(&b, dicts, "the file holds dictionaries");
	if (!rc)
		rc = fb_vector(&b, footer, 3, 24, &blocks, &nblocks);
	if (rc)
		return rc;
	/* the blocks hold file offsets: read them against the whole file */
	for (i = 0; !rc && i < nblocks; i++) {
		struct fb whole = { .buf = buf, .len = len, .r = r };

		rc = arrow_batch(&whole,
				 (size_t)(len - 10 - flen) + blocks + 24 * i,
				 &vals);
	}
	if (rc == -ENOMEM)
		rc = sfs_errorf(r->err, -ENOMEM, "%s: out of memory", r->path);
	if (!rc && vals.n) {
		qsort(vals.v, vals.n, sizeof(*vals.v), cmp_u32);
		for (i = 0; !rc && i < vals.n; i++)
			rc = runs_add(r, vals.v[i], 1, 0);
	}
	free(vals.v);
	return rc;
}

int sfs_lance_deletion_parse(const unsigned char *buf, size_t len, int type,
			     const char *path, uint64_t physical_rows,
			     sfs_lance_deleted_fn fn, void *arg,
			     uint64_t *deleted, struct sfs_error *err)
{
	struct runs r = { .path = path,
			  .limit = physical_rows,
			  .fn = fn,
			  .arg = arg,
			  .err = err };
	int rc;

	*deleted = 0;
	if (type == SFS_LANCE_DELETION_BITMAP)
		rc = roaring_parse(buf, len, &r);
	else
		rc = arrow_parse(buf, len, &r);
	if (!rc)
		rc = runs_flush(&r);
	if (!rc)
		*deleted = r.total;
	return rc;
}

char *sfs_lance_deletion_path(const struct sfs_lance_fragment *f)
{
	char *p;

	if (asprintf(&p, "_deletions/%" PRIu64 "-%" PRIu64 "-%" PRIu64 ".%s",
		     f->id, f->deletion.read_version, f->deletion.id,
		     f->deletion.type == SFS_LANCE_DELETION_BITMAP ?
			     "bin" :
			     "arrow") < 0)
		return NULL;
	return p;
}
