/*
 * Internals of the Lance driver, shared by its files only: a bounded reader
 * of the protobuf wire format (protobuf.c), used by the manifest reader
 * (manifest.c).
 *
 * The reader never reads past buf + len: every varint is at most 10 bytes
 * and must fit its type, every length is checked against the bytes left
 * before it is used, nested messages are read through a reader of their
 * own bytes at most SFS_PB_DEPTH_MAX deep, and nothing is sized from a
 * count read from the file (repeated fields grow with what was decoded).
 * Groups (wire types 3 and 4, which proto3 never writes) and the invalid
 * wire types 6 and 7 are refused.  Its first error is left in err as
 * "<path>: byte <file offset>: <message>: <what>"; the reader is then
 * spent.
 */
#ifndef SHARDFS_LANCE_I_H
#define SHARDFS_LANCE_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shardfs/error.h"
#include "shardfs/format.h"

#define SFS_PB_DEPTH_MAX 16

/*
 * The most a manifest may decode to (manifest.c: fragments, data files,
 * paths, field ids, counted as allocated, slack and malloc's header
 * included): more is refused with -EFBIG.  A 9-byte fragment decodes to
 * ~500 bytes, so a 24 MiB manifest of minimal fragments took 1.36 GB; a
 * real fragment (one data file, a 50-byte path, 100 field ids) takes
 * ~1.1 KB, and one of 1000 columns ~4.6 KB: 100 000 of those, 460 MB,
 * pass.
 */
#define SFS_LANCE_DECODED_MAX ((uint64_t)512 << 20)

/* Wire types. */
enum {
	SFS_PB_VARINT = 0,
	SFS_PB_I64 = 1,
	SFS_PB_LEN = 2,
	SFS_PB_SGROUP = 3,
	SFS_PB_EGROUP = 4,
	SFS_PB_I32 = 5,
};

struct sfs_pb_reader {
	const unsigned char *buf; /* the message's bytes */
	size_t len, pos;
	uint64_t base; /* file offset of buf[0], for messages */
	const char *path; /* the file, for messages */
	const char *what; /* the message being read ("DataFragment") */
	struct sfs_error *err;
	unsigned depth; /* 0 for the outermost message */
};

/* A field's key: its number, its wire type, where it begins (buf offset). */
struct sfs_pb_field {
	uint32_t number;
	int wire;
	size_t at;
};

/* A reader of the len bytes at buf (file offset base) holding message what. */
void sfs_pb_init(struct sfs_pb_reader *r, const unsigned char *buf, size_t len,
		 uint64_t base, const char *path, const char *what,
		 struct sfs_error *err);

/* Fail r at buf offset at with a message: returns -EINVAL. */
int sfs_pb_fail(struct sfs_pb_reader *r, size_t at, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * The next field's key.  Returns 1 and fills f, 0 at the end of the
 * message, or -EINVAL (a key past the end, field number 0 or above
 * 2^29 - 1, a group or an invalid wire type).
 */
int sfs_pb_next(struct sfs_pb_reader *r, struct sfs_pb_field *f);

/*
 * Check that field f (named name in the message) has wire type wire:
 * returns 0 or -EINVAL.
 */
int sfs_pb_expect(struct sfs_pb_reader *r, const struct sfs_pb_field *f,
		  int wire, const char *name);

/* Values.  Each checks its bytes and that the value fits its type. */
int sfs_pb_varint(struct sfs_pb_reader *r, uint64_t *v);
int sfs_pb_uint32(struct sfs_pb_reader *r, uint32_t *v);
/* an int32: negative values are 10-byte varints, sign-extended */
int sfs_pb_int32(struct sfs_pb_reader *r, int32_t *v);
int sfs_pb_bytes(struct sfs_pb_reader *r, const unsigned char **p, size_t *len);

/*
 * A length-delimited field read as a message named what: sub reads its
 * bytes, one level deeper (at most SFS_PB_DEPTH_MAX), and r moves past
 * them.  Returns 0 or -EINVAL.
 */
int sfs_pb_message(struct sfs_pb_reader *r, const char *what,
		   struct sfs_pb_reader *sub);

/* Skip the value of field f by its wire type.  Returns 0 or -EINVAL. */
int sfs_pb_skip(struct sfs_pb_reader *r, const struct sfs_pb_field *f);

/*
 * The whole regular file fd (named path in messages), of at most max
 * bytes, into *buf (malloc'd, one byte to spare) and *len: dataset.c's,
 * for manifests and deletion files; view.c reads a manifest again with
 * it.  Returns 0, -EINVAL (not regular, too large), -EIO or -ENOMEM.
 */
int sfs_lance_read_whole(int fd, const char *path, uint64_t max,
			 unsigned char **buf, size_t *len,
			 struct sfs_error *err);

/* What sfs_lance_open_at checks and reads. */
enum sfs_lance_open_how {
	/* sfs_lance_open: every data file checked, every deletion file read */
	SFS_LANCE_OPEN_ALL,
	/* the data files not looked at (the auditor reads a reader's
	 * dataset, whose data files are symlinks to the source's, and checks
	 * them against the source itself) */
	SFS_LANCE_OPEN_NO_DATA,
	/* sfs_lance_open_view */
	SFS_LANCE_OPEN_VIEW,
};

struct sfs_lance_dataset;
int sfs_lance_open_at(int dirfd, const char *manifest_path, int fd,
		      enum sfs_lance_open_how how,
		      struct sfs_lance_dataset **out, struct sfs_error *err);

/*
 * sfs_lance_manifest_parse, or with shallow its fragments' data files
 * counted (a fragment must have one) but not decoded: files NULL, nfiles
 * 0; sfs_lance_fragment_decode decodes one fragment's later.
 */
struct sfs_lance_manifest;
struct sfs_lance_fragment;
struct sfs_lance_data_file;
int sfs_lance_manifest_decode(const unsigned char *buf, size_t len,
			      const char *path, bool shallow,
			      struct sfs_lance_manifest **out,
			      struct sfs_error *err);

/*
 * Decode again, whole, the fragment shallow (of a manifest decoded from
 * the len bytes at buf, the whole file named path): its DataFragment
 * message at shallow->at, shallow->len bytes long, into *out (the caller
 * clears it: free its files' paths and fields, and files).  Returns 0 or
 * the errors of sfs_lance_manifest_parse; on error *out holds nothing.
 */
int sfs_lance_fragment_decode(const unsigned char *buf, size_t len,
			      const char *path,
			      const struct sfs_lance_fragment *shallow,
			      struct sfs_lance_fragment *out,
			      struct sfs_error *err);

/*
 * Check data file df of fragment fr of the manifest mpath of the dataset
 * in directory root (below dirfd): a regular file beneath the dataset (no
 * symlink, no ".."), of df->size bytes when the manifest gives it,
 * holding fr->physical_rows (its footer read: docs/formats.md).  Its
 * stat in *st when st is not NULL.  Returns 0, -EINVAL ("<mpath>: byte
 * <at>: fragment <id>'s data file <path> is missing: ...") or -EIO.
 */
struct stat;
int sfs_lance_check_data_file(int dirfd, const char *root, const char *mpath,
			      const struct sfs_lance_fragment *fr,
			      const struct sfs_lance_data_file *df,
			      struct stat *st, struct sfs_error *err);

/*
 * Hand the digest of every live row of ds (driver.c says what a row's
 * digest is), in fragment order, to fn with its sample number (from 0);
 * when frag is not NULL, call it before each fragment's rows with the
 * fragment's number in the manifest.  Reads the deletion files again
 * through dirfd.  Returns 0, fn's or frag's nonzero result, -EIO when the
 * deletion files no longer count ds->rows, or the errors of
 * sfs_lance_live_runs.
 */
int sfs_lance_row_digests(int dirfd, const struct sfs_lance_dataset *ds,
			  int (*frag)(void *arg, size_t f), sfs_sample_fn fn,
			  void *arg, struct sfs_error *err);

#endif
