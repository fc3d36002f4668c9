/*
 * The Thrift compact protocol, as much as the Parquet footer needs: a
 * bounded reader and a writer.  Shared by parquet_thrift.c and
 * parquet_meta.c only.
 *
 * The reader never reads past buf + len: every length and count is checked
 * against the bytes left before it is used, and structs, lists, sets and
 * maps nest at most SFS_THRIFT_DEPTH_MAX deep.  Its first error is left in
 * err as "<path>: footer at byte <file offset>: <what>" ("page header"
 * instead of "footer" when the reader's what says so); the reader is then
 * spent.
 */
#ifndef SHARDFS_PARQUET_I_H
#define SHARDFS_PARQUET_I_H

#include <stddef.h>
#include <stdint.h>

#include "shardfs/error.h"

#define SFS_THRIFT_DEPTH_MAX 32

/* Compact protocol type codes (field headers and list elements). */
enum {
	SFS_TC_STOP = 0,
	SFS_TC_TRUE = 1, /* a bool field's value; a bool list element */
	SFS_TC_FALSE = 2, /* a bool field's value; also a bool element */
	SFS_TC_I8 = 3,
	SFS_TC_I16 = 4,
	SFS_TC_I32 = 5,
	SFS_TC_I64 = 6,
	SFS_TC_DOUBLE = 7,
	SFS_TC_BINARY = 8,
	SFS_TC_LIST = 9,
	SFS_TC_SET = 10,
	SFS_TC_MAP = 11,
	SFS_TC_STRUCT = 12,
	SFS_TC_UUID = 13,
};

struct sfs_thrift_reader {
	const unsigned char *buf;
	size_t len, pos;
	uint64_t base; /* file offset of buf[0], for messages */
	const char *path;
	struct sfs_error *err;
	unsigned depth;
	const char *what; /* what is read, for messages; NULL: "footer" */
};

/* What r reads, as its messages name it. */
static inline const char *sfs_thrift_what(const struct sfs_thrift_reader *r)
{
	return r->what ? r->what : "footer";
}

/* A field header: id and type, or type SFS_TC_STOP. */
struct sfs_thrift_field {
	int id;
	int type;
	size_t at; /* where the header begins */
};

/*
 * Fail r at byte buf offset at with a message: returns -EINVAL.
 */
int sfs_thrift_fail(struct sfs_thrift_reader *r, size_t at, const char *fmt,
		    ...) __attribute__((format(printf, 3, 4)));

/* Enter and leave a struct (bounds the nesting).  last_id starts at 0. */
int sfs_thrift_struct_begin(struct sfs_thrift_reader *r);
void sfs_thrift_struct_end(struct sfs_thrift_reader *r);

/* The next field header of the current struct; last_id is the previous
 * field's id (0 at the first) and is updated. */
int sfs_thrift_read_field(struct sfs_thrift_reader *r, int *last_id,
			  struct sfs_thrift_field *f);

/* Values.  Each checks that the value fits its type. */
int sfs_thrift_read_i32(struct sfs_thrift_reader *r, int32_t *v);
int sfs_thrift_read_i64(struct sfs_thrift_reader *r, int64_t *v);
int sfs_thrift_read_binary(struct sfs_thrift_reader *r, const unsigned char **p,
			   size_t *len);

/*
 * A list or set header: element type and count; the count is checked
 * against the bytes left (every element takes at least one byte).
 */
int sfs_thrift_read_list(struct sfs_thrift_reader *r, int *elem_type,
			 size_t *count);

/* Skip a value of type type (a field type; a bool field has no value). */
int sfs_thrift_skip(struct sfs_thrift_reader *r, int type);

/* The name of a type code for messages ("i64", "list", ...). */
const char *sfs_thrift_type_name(int type);

/* A growable output buffer; after a failed allocation it stays failed
 * (oom set) and every put is a no-op. */
struct sfs_thrift_out {
	unsigned char *p;
	size_t len, cap;
	int oom;
};

void sfs_thrift_put(struct sfs_thrift_out *o, const void *data, size_t n);
void sfs_thrift_put_varint(struct sfs_thrift_out *o, uint64_t v);
/* A field header after the field last_id (updated); bool fields carry
 * their value in type (SFS_TC_TRUE or SFS_TC_FALSE). */
void sfs_thrift_put_field(struct sfs_thrift_out *o, int *last_id, int id,
			  int type);
void sfs_thrift_put_i64(struct sfs_thrift_out *o, int64_t v);
void sfs_thrift_put_list(struct sfs_thrift_out *o, int elem_type, size_t count);
/* A field of type SFS_TC_I32 or SFS_TC_I64 (after last_id) holding v. */
void sfs_thrift_put_int(struct sfs_thrift_out *o, int *last_id, int id,
			int type, int64_t v);
/* The stop field that ends a struct. */
void sfs_thrift_put_stop(struct sfs_thrift_out *o);
/* Not Thrift: a u32 little-endian, as Parquet frames its footer, its
 * length-prefixed levels and its PLAIN byte arrays. */
void sfs_thrift_put_le32(struct sfs_thrift_out *o, uint32_t v);

#endif
