/*
 * The protobuf wire format, bounded: see lance_i.h.  A message is a
 * sequence of fields, each a varint key (field number << 3 | wire type)
 * and a value: a varint (0), 8 little-endian bytes (1), a varint length
 * and that many bytes (2: strings, bytes, nested messages, packed repeated
 * scalars) or 4 little-endian bytes (5).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "formats/lance/lance_i.h"

#define FIELD_NUMBER_MAX ((1u << 29) - 1)

void sfs_pb_init(struct sfs_pb_reader *r, const unsigned char *buf, size_t len,
		 uint64_t base, const char *path, const char *what,
		 struct sfs_error *err)
{
	*r = (struct sfs_pb_reader){ .buf = buf,
				     .len = len,
				     .base = base,
				     .path = path,
				     .what = what,
				     .err = err };
}

int sfs_pb_fail(struct sfs_pb_reader *r, size_t at, const char *fmt, ...)
{
	char what[SFS_ERROR_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return sfs_errorf(r->err, -EINVAL, "%s: byte %llu: %s: %s", r->path,
			  (unsigned long long)(r->base + at), r->what, what);
}

static size_t left(const struct sfs_pb_reader *r)
{
	return r->len - r->pos;
}

int sfs_pb_varint(struct sfs_pb_reader *r, uint64_t *v)
{
	size_t at = r->pos;
	uint64_t x = 0;
	unsigned shift = 0;
	unsigned char b;

	*v = 0;
	do {
		if (r->pos >= r->len)
			return sfs_pb_fail(
				r, at,
				"varint runs past the end of the message (%zu bytes)",
				r->len);
		if (shift == 70)
			return sfs_pb_fail(r, at,
					   "varint longer than 10 bytes");
		b = r->buf[r->pos++];
		/* the 10th byte holds bit 63 only */
		if (shift == 63 && (b & 0x7e))
			return sfs_pb_fail(r, at,
					   "varint does not fit in 64 bits");
		x |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
	} while (b & 0x80);
	*v = x;
	return 0;
}

int sfs_pb_uint32(struct sfs_pb_reader *r, uint32_t *v)
{
	size_t at = r->pos;
	uint64_t x;
	int rc = sfs_pb_varint(r, &x);

	*v = 0;
	if (rc)
		return rc;
	if (x > UINT32_MAX)
		return sfs_pb_fail(r, at, "uint32 value %llu does not fit",
				   (unsigned long long)x);
	*v = (uint32_t)x;
	return 0;
}

int sfs_pb_int32(struct sfs_pb_reader *r, int32_t *v)
{
	size_t at = r->pos;
	uint64_t x;
	int64_t s;
	int rc = sfs_pb_varint(r, &x);

	*v = 0;
	if (rc)
		return rc;
	s = (int64_t)x;
	if (s < INT32_MIN || s > INT32_MAX)
		return sfs_pb_fail(r, at, "int32 value %lld does not fit",
				   (long long)s);
	*v = (int32_t)s;
	return 0;
}

int sfs_pb_bytes(struct sfs_pb_reader *r, const unsigned char **p, size_t *len)
{
	size_t at = r->pos;
	uint64_t n;
	int rc = sfs_pb_varint(r, &n);

	*p = NULL;
	*len = 0;
	if (rc)
		return rc;
	if (n > left(r))
		return sfs_pb_fail(
			r, at,
			"length %llu runs past the end of the message (%zu bytes left)",
			(unsigned long long)n, left(r));
	*p = r->buf + r->pos;
	*len = (size_t)n;
	r->pos += (size_t)n;
	return 0;
}

int sfs_pb_message(struct sfs_pb_reader *r, const char *what,
		   struct sfs_pb_reader *sub)
{
	const unsigned char *p;
	size_t at = r->pos, n;
	int rc;

	if (r->depth + 1 > SFS_PB_DEPTH_MAX)
		return sfs_pb_fail(r, at, "messages nest deeper than %d",
				   SFS_PB_DEPTH_MAX);
	rc = sfs_pb_bytes(r, &p, &n);
	if (rc)
		return rc;
	sfs_pb_init(sub, p, n, r->base + (uint64_t)(p - r->buf), r->path, what,
		    r->err);
	sub->depth = r->depth + 1;
	return 0;
}

int sfs_pb_next(struct sfs_pb_reader *r, struct sfs_pb_field *f)
{
	uint64_t key;
	int rc;

	f->at = r->pos;
	f->number = 0;
	f->wire = 0;
	if (r->pos == r->len)
		return 0;
	rc = sfs_pb_varint(r, &key);
	if (rc)
		return rc;
	if (key >> 3 == 0 || key >> 3 > FIELD_NUMBER_MAX)
		return sfs_pb_fail(r, f->at, "field number %llu is invalid",
				   (unsigned long long)(key >> 3));
	f->number = (uint32_t)(key >> 3);
	f->wire = (int)(key & 7);
	switch (f->wire) {
	case SFS_PB_VARINT:
	case SFS_PB_I64:
	case SFS_PB_LEN:
	case SFS_PB_I32:
		return 1;
	case SFS_PB_SGROUP:
	case SFS_PB_EGROUP:
		return sfs_pb_fail(
			r, f->at,
			"field %u is a group (wire type %d), which proto3 never writes",
			f->number, f->wire);
	default:
		return sfs_pb_fail(r, f->at,
				   "field %u has invalid wire type %d",
				   f->number, f->wire);
	}
}

int sfs_pb_expect(struct sfs_pb_reader *r, const struct sfs_pb_field *f,
		  int wire, const char *name)
{
	if (f->wire == wire)
		return 0;
	return sfs_pb_fail(r, f->at,
			   "field %u (%s) has wire type %d, expected %d",
			   f->number, name, f->wire, wire);
}

int sfs_pb_skip(struct sfs_pb_reader *r, const struct sfs_pb_field *f)
{
	const unsigned char *p;
	uint64_t v;
	size_t n;

	switch (f->wire) {
	case SFS_PB_VARINT:
		return sfs_pb_varint(r, &v);
	case SFS_PB_LEN:
		return sfs_pb_bytes(r, &p, &n);
	case SFS_PB_I64:
	case SFS_PB_I32:
		n = f->wire == SFS_PB_I64 ? 8 : 4;
		if (n > left(r))
			return sfs_pb_fail(
				r, r->pos,
				"field %u needs %zu bytes, the message has %zu left",
				f->number, n, left(r));
		r->pos += n;
		return 0;
	default:
		return sfs_pb_fail(r, f->at,
				   "field %u has wire type %d, not skipped",
				   f->number, f->wire);
	}
}
