/*
 * The Thrift compact protocol, bounded: see parquet_i.h.  The encoding is
 * Apache Thrift's "compact protocol": zigzag varints for i16/i32/i64, one
 * byte per i8, 8 little-endian bytes per double, a varint length before
 * binary, a field header holding the id's delta and the type (and a bool
 * field's value), list headers holding a short count and the element type.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/parquet/parquet_i.h"
#include "shardfs/util.h"

const char *sfs_thrift_type_name(int type)
{
	static const char *const names[] = {
		"stop",	  "bool",   "bool", "i8",  "i16", "i32",    "i64",
		"double", "binary", "list", "set", "map", "struct", "uuid",
	};

	if (type < 0 || type >= (int)(sizeof(names) / sizeof(names[0])))
		return "unknown";
	return names[type];
}

int sfs_thrift_fail(struct sfs_thrift_reader *r, size_t at, const char *fmt,
		    ...)
{
	char what[SFS_ERROR_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return sfs_errorf(r->err, -EINVAL, "%s: %s at byte %llu: %s", r->path,
			  sfs_thrift_what(r),
			  (unsigned long long)(r->base + at), what);
}

static size_t left(const struct sfs_thrift_reader *r)
{
	return r->len - r->pos;
}

static int need(struct sfs_thrift_reader *r, size_t n, const char *what)
{
	if (n <= left(r))
		return 0;
	return sfs_thrift_fail(
		r, r->pos, "%s needs %zu bytes but the %s ends %zu bytes on",
		what, n, sfs_thrift_what(r), left(r));
}

static int read_varint(struct sfs_thrift_reader *r, uint64_t *v)
{
	size_t at = r->pos;
	uint64_t x = 0;
	unsigned shift = 0;
	unsigned char b;

	*v = 0; /* defined on failure too: gcc -O3 cannot see rc */
	do {
		if (r->pos >= r->len)
			return sfs_thrift_fail(
				r, at, "varint runs past the end of the %s",
				sfs_thrift_what(r));
		if (shift == 70)
			return sfs_thrift_fail(r, at,
					       "varint longer than 10 bytes");
		b = r->buf[r->pos++];
		if (shift == 63 && (b & 0x7e))
			return sfs_thrift_fail(
				r, at, "varint does not fit in 64 bits");
		x |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
	} while (b & 0x80);
	*v = x;
	return 0;
}

static int64_t unzigzag(uint64_t u)
{
	return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}

static int read_zigzag(struct sfs_thrift_reader *r, int bits, int64_t *v)
{
	size_t at = r->pos;
	uint64_t u;
	int rc = read_varint(r, &u);

	if (rc)
		return rc;
	if (bits < 64 && u >> bits)
		return sfs_thrift_fail(
			r, at, "i%d value does not fit in %d bits", bits, bits);
	*v = unzigzag(u);
	return 0;
}

int sfs_thrift_read_i32(struct sfs_thrift_reader *r, int32_t *v)
{
	int64_t x = 0;
	int rc = read_zigzag(r, 32, &x);

	if (!rc)
		*v = (int32_t)x;
	return rc;
}

int sfs_thrift_read_i64(struct sfs_thrift_reader *r, int64_t *v)
{
	return read_zigzag(r, 64, v);
}

int sfs_thrift_read_binary(struct sfs_thrift_reader *r, const unsigned char **p,
			   size_t *len)
{
	size_t at = r->pos;
	uint64_t n;
	int rc = read_varint(r, &n);

	if (rc)
		return rc;
	if (n > left(r))
		return sfs_thrift_fail(
			r, at,
			"binary of %llu bytes runs past the end of the %s (%zu bytes left)",
			(unsigned long long)n, sfs_thrift_what(r), left(r));
	*p = r->buf + r->pos;
	*len = (size_t)n;
	r->pos += (size_t)n;
	return 0;
}

int sfs_thrift_struct_begin(struct sfs_thrift_reader *r)
{
	if (r->depth >= SFS_THRIFT_DEPTH_MAX)
		return sfs_thrift_fail(
			r, r->pos, "structs and containers nest deeper than %d",
			SFS_THRIFT_DEPTH_MAX);
	r->depth++;
	return 0;
}

void sfs_thrift_struct_end(struct sfs_thrift_reader *r)
{
	r->depth--;
}

int sfs_thrift_read_field(struct sfs_thrift_reader *r, int *last_id,
			  struct sfs_thrift_field *f)
{
	unsigned char b;
	int64_t id;
	int rc;

	f->at = r->pos;
	f->type = SFS_TC_STOP;
	f->id = 0;
	if (r->pos >= r->len)
		return sfs_thrift_fail(
			r, r->pos,
			"struct runs past the end of the %s (no stop field)",
			sfs_thrift_what(r));
	b = r->buf[r->pos++];
	if (b == 0) {
		f->type = SFS_TC_STOP;
		f->id = 0;
		return 0;
	}
	f->type = b & 0x0f;
	if (f->type == SFS_TC_STOP || f->type > SFS_TC_UUID)
		return sfs_thrift_fail(
			r, f->at, "field header 0x%02x has unknown type %d", b,
			f->type);
	if (b >> 4) {
		id = *last_id + (b >> 4);
		if (id > INT16_MAX)
			return sfs_thrift_fail(
				r, f->at,
				"field id %lld does not fit in 16 bits",
				(long long)id);
	} else {
		rc = read_zigzag(r, 16, &id);
		if (rc)
			return rc;
	}
	f->id = (int)id;
	*last_id = f->id;
	return 0;
}

/* The fewest bytes an element of a list, set or map can take. */
static size_t min_size(int type)
{
	switch (type) {
	case SFS_TC_DOUBLE:
		return 8;
	case SFS_TC_UUID:
		return 16;
	default:
		return 1;
	}
}

static int check_elem_type(struct sfs_thrift_reader *r, size_t at, int type)
{
	if (type == SFS_TC_STOP || type > SFS_TC_UUID)
		return sfs_thrift_fail(r, at, "unknown element type %d", type);
	return 0;
}

int sfs_thrift_read_list(struct sfs_thrift_reader *r, int *elem_type,
			 size_t *count)
{
	size_t at = r->pos;
	uint64_t n;
	unsigned char b;
	int rc;

	if (r->pos >= r->len)
		return sfs_thrift_fail(
			r, at, "list header runs past the end of the %s",
			sfs_thrift_what(r));
	b = r->buf[r->pos++];
	*elem_type = b & 0x0f;
	rc = check_elem_type(r, at, *elem_type);
	if (rc)
		return rc;
	n = b >> 4;
	if (n == 15) {
		rc = read_varint(r, &n);
		if (rc)
			return rc;
	}
	if (n > left(r) / min_size(*elem_type))
		return sfs_thrift_fail(
			r, at,
			"list of %llu %s elements cannot fit in the %zu bytes left",
			(unsigned long long)n, sfs_thrift_type_name(*elem_type),
			left(r));
	*count = (size_t)n;
	return 0;
}

static int skip_value(struct sfs_thrift_reader *r, int type, int element);

static int skip_struct(struct sfs_thrift_reader *r)
{
	struct sfs_thrift_field f;
	int last = 0, rc;

	rc = sfs_thrift_struct_begin(r);
	while (!rc) {
		rc = sfs_thrift_read_field(r, &last, &f);
		if (rc || f.type == SFS_TC_STOP)
			break;
		rc = skip_value(r, f.type, 0);
	}
	sfs_thrift_struct_end(r);
	return rc;
}

static int skip_list(struct sfs_thrift_reader *r)
{
	size_t n, i;
	int type, rc;

	rc = sfs_thrift_struct_begin(r);
	if (rc)
		return rc;
	rc = sfs_thrift_read_list(r, &type, &n);
	for (i = 0; !rc && i < n; i++)
		rc = skip_value(r, type, 1);
	sfs_thrift_struct_end(r);
	return rc;
}

static int skip_map(struct sfs_thrift_reader *r)
{
	size_t at = r->pos, i;
	int ktype, vtype, rc;
	uint64_t n;

	rc = sfs_thrift_struct_begin(r);
	if (rc)
		return rc;
	rc = read_varint(r, &n);
	if (rc || n == 0)
		goto out;
	rc = need(r, 1, "map header");
	if (rc)
		goto out;
	ktype = r->buf[r->pos] >> 4;
	vtype = r->buf[r->pos] & 0x0f;
	rc = check_elem_type(r, r->pos, ktype);
	if (!rc)
		rc = check_elem_type(r, r->pos, vtype);
	if (rc)
		goto out;
	r->pos++;
	if (n > left(r) / (min_size(ktype) + min_size(vtype))) {
		rc = sfs_thrift_fail(
			r, at,
			"map of %llu entries cannot fit in the %zu bytes left",
			(unsigned long long)n, left(r));
		goto out;
	}
	for (i = 0; !rc && i < n; i++) {
		rc = skip_value(r, ktype, 1);
		if (!rc)
			rc = skip_value(r, vtype, 1);
	}
out:
	sfs_thrift_struct_end(r);
	return rc;
}

static int skip_value(struct sfs_thrift_reader *r, int type, int element)
{
	int64_t x;

	switch (type) {
	case SFS_TC_TRUE:
	case SFS_TC_FALSE:
		if (!element)
			return 0;
		if (need(r, 1, "bool"))
			return -EINVAL;
		r->pos++;
		return 0;
	case SFS_TC_I8:
		if (need(r, 1, "i8"))
			return -EINVAL;
		r->pos++;
		return 0;
	case SFS_TC_I16:
		return read_zigzag(r, 16, &x);
	case SFS_TC_I32:
		return read_zigzag(r, 32, &x);
	case SFS_TC_I64:
		return read_zigzag(r, 64, &x);
	case SFS_TC_DOUBLE:
		if (need(r, 8, "double"))
			return -EINVAL;
		r->pos += 8;
		return 0;
	case SFS_TC_UUID:
		if (need(r, 16, "uuid"))
			return -EINVAL;
		r->pos += 16;
		return 0;
	case SFS_TC_BINARY: {
		const unsigned char *p;
		size_t n;

		return sfs_thrift_read_binary(r, &p, &n);
	}
	case SFS_TC_LIST:
	case SFS_TC_SET:
		return skip_list(r);
	case SFS_TC_MAP:
		return skip_map(r);
	case SFS_TC_STRUCT:
		return skip_struct(r);
	default:
		return sfs_thrift_fail(r, r->pos, "unknown type %d", type);
	}
}

int sfs_thrift_skip(struct sfs_thrift_reader *r, int type)
{
	return skip_value(r, type, 0);
}

unsigned char *sfs_thrift_take(struct sfs_thrift_out *o, size_t n)
{
	size_t at = o->len, need;

	if (o->oom)
		return NULL;
	if (n > SIZE_MAX - o->len) {
		o->oom = 1;
		return NULL;
	}
	need = o->len + n;
	/* a page's worth at first: small puts do not realloc eight times */
	if (!o->cap && need < 4096)
		need = 4096;
	if (sfs_grow(&o->p, &o->cap, need, 1)) {
		o->oom = 1;
		return NULL;
	}
	o->len += n;
	return o->p + at;
}

size_t sfs_thrift_cap_after(const struct sfs_thrift_out *o, size_t n)
{
	size_t need;

	if (n > SIZE_MAX - o->len)
		return SIZE_MAX;
	need = o->len + n;
	if (need <= o->cap)
		return o->cap;
	/* as sfs_thrift_take asks, and sfs_grow gives: at least double */
	if (!o->cap)
		return need < 4096 ? 4096 : need;
	return o->cap > SIZE_MAX / 2 ? SIZE_MAX :
	       2 * o->cap > need     ? 2 * o->cap :
				       need;
}

void sfs_thrift_put(struct sfs_thrift_out *o, const void *data, size_t n)
{
	unsigned char *p;

	if (o->oom || !n)
		return;
	p = sfs_thrift_take(o, n);
	if (p)
		memcpy(p, data, n);
}

void sfs_thrift_put_varint(struct sfs_thrift_out *o, uint64_t v)
{
	unsigned char b[10];
	size_t n = 0;

	while (v >= 0x80) {
		b[n++] = (unsigned char)(v | 0x80);
		v >>= 7;
	}
	b[n++] = (unsigned char)v;
	sfs_thrift_put(o, b, n);
}

static uint64_t zigzag(int64_t v)
{
	return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

void sfs_thrift_put_field(struct sfs_thrift_out *o, int *last_id, int id,
			  int type)
{
	unsigned char b;

	if (id > *last_id && id - *last_id <= 15) {
		b = (unsigned char)((id - *last_id) << 4 | type);
		sfs_thrift_put(o, &b, 1);
	} else {
		b = (unsigned char)type;
		sfs_thrift_put(o, &b, 1);
		sfs_thrift_put_varint(o, zigzag(id));
	}
	*last_id = id;
}

void sfs_thrift_put_i64(struct sfs_thrift_out *o, int64_t v)
{
	sfs_thrift_put_varint(o, zigzag(v));
}

void sfs_thrift_put_int(struct sfs_thrift_out *o, int *last_id, int id,
			int type, int64_t v)
{
	sfs_thrift_put_field(o, last_id, id, type);
	sfs_thrift_put_i64(o, v);
}

void sfs_thrift_put_stop(struct sfs_thrift_out *o)
{
	unsigned char stop = SFS_TC_STOP;

	sfs_thrift_put(o, &stop, 1);
}

void sfs_thrift_put_le32(struct sfs_thrift_out *o, uint32_t v)
{
	unsigned char le[4] = { (unsigned char)v, (unsigned char)(v >> 8),
				(unsigned char)(v >> 16),
				(unsigned char)(v >> 24) };

	sfs_thrift_put(o, le, 4);
}

void sfs_thrift_put_list(struct sfs_thrift_out *o, int elem_type, size_t count)
{
	unsigned char b;

	if (count < 15) {
		b = (unsigned char)(count << 4 | (size_t)elem_type);
		sfs_thrift_put(o, &b, 1);
	} else {
		b = (unsigned char)(0xf0 | elem_type);
		sfs_thrift_put(o, &b, 1);
		sfs_thrift_put_varint(o, count);
	}
}
