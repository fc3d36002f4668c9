/* Fixtures the unit tests share: temporary directories, files, tar bytes. */
#ifndef SHARDFS_TEST_HELPERS_H
#define SHARDFS_TEST_HELPERS_H

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "shardfs/format.h"
#include "shardfs/index.h"

/* A growable byte buffer. */
struct buf {
	unsigned char *p;
	size_t len, cap;
};

void buf_put(struct buf *b, const void *data, size_t n);
void buf_zero(struct buf *b, size_t n);
void buf_free(struct buf *b);

/* Append a tar member record: a ustar header of type `type` and data,
 * padded to 512.  Returns the offset of the header. */
size_t tar_member(struct buf *b, const char *name, char type, const void *data,
		  size_t size);
/* Append a pax 'x' (or 'g') header holding one "key=value" record. */
size_t tar_pax(struct buf *b, char type, const char *key, const char *value);
/* Append a GNU 'L' long-name header for name. */
size_t tar_longname(struct buf *b, const char *name);
/* Append the two zero blocks that end an archive. */
void tar_end(struct buf *b);

/* A fresh temporary directory (mkdtemp); rm -rf it with tmpdir_remove. */
char *tmpdir_new(void);
void tmpdir_remove(char *dir);

/* Write bytes to dir/name (creating sub-directories); returns the path. */
char *write_at(const char *dir, const char *name, const void *data, size_t len);

/* Scan path with ops; the file is opened and sized here. */
int scan_file(const struct sfs_format_ops *ops, const char *path,
	      struct sfs_scan *out, struct sfs_error *err);

/*
 * Scan path with ops twice, its boundaries held whole and handed over in
 * pieces (sfs_scan_in.bounds_fn): the same boundaries, pieces of 65 536
 * (format_i.h's BOUNDS_PIECE), the last ones left in the scan; fails the
 * test otherwise.  Returns the pieces handed over.
 */
uint64_t expect_bounds_pieces(const struct sfs_format_ops *ops,
			      const char *path);

/* Read the whole of path into a buffer. */
struct buf read_all(const char *path);

/*
 * An in-memory index of tar shards "s0000.tar", ...: shard i has counts[i]
 * samples of 10 bytes each; opaque (may be NULL) marks shards that cannot
 * be sliced.  Free with sfs_index_free.
 */
struct sfs_index *mkindex(const uint64_t *counts, size_t n, const bool *opaque);

#endif
