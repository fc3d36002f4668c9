/*
 * What the files of the index share (index.c, index_load.c, index_read.c,
 * index_save.c); not part of the public interface.
 *
 * The tables beside the manifest (index.h, docs/index-format.md) begin with
 * a SFS_TABLE_HEADER-byte header: 8 bytes of magic, the version (u8) and
 * three zero bytes, u32 0, the entry count (u64), the SHA-256 of the
 * payload, 8 zero bytes.  Their payloads are read with sfs_index_pread,
 * never mapped but for the digest table.
 */
#ifndef SHARDFS_INDEX_I_H
#define SHARDFS_INDEX_I_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "shardfs/digest.h"
#include "shardfs/error.h"
#include "shardfs/index.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
	       "the boundary table is read as little-endian u64");

#define SFS_TABLE_HEADER 64
#define SFS_TABLE_SUFFIX ".bin"
/* the largest block a blocks file may describe; reads of blocks not yet
 * checked go in batches of at most this many bytes */
#define SFS_BLOCK_BYTES_MAX (1U << 20)

/*
 * The tables beside the manifest, one entry per boundary, per block of the
 * boundary table or per sample.
 */
struct sfs_table_kind {
	const char *magic; /* 8 bytes */
	const char *prefix; /* of the file name */
	const char *key; /* in the manifest */
	size_t elem; /* bytes per entry */
	const char *what; /* for messages */
};

extern const struct sfs_table_kind sfs_bounds_kind; /* samples-*.bin */
extern const struct sfs_table_kind sfs_blocks_kind; /* blocks-*.bin */
extern const struct sfs_table_kind sfs_digests_kind; /* digests-*.bin */

/* The number of blocks of block_bytes in a table of nbounds boundaries. */
uint64_t sfs_index_blocks_of(uint64_t nbounds, uint64_t block_bytes);

/*
 * The SHA-256 of every block_bytes bytes of a payload fed in pieces of any
 * size (the last block may be shorter), handed to flush SFS_BLOCK_BATCH at
 * a time: the writer puts them in the blocks file, sfs_index_check_bounds
 * compares them with it.  The caller sets d (a new digest, its own),
 * block_bytes, flush, arg, path and err; the rest starts at 0.
 */
#define SFS_BLOCK_BATCH 128
struct sfs_block_sums {
	struct sfs_digest *d;
	uint64_t block_bytes;
	uint64_t fill; /* bytes of the current block hashed */
	uint64_t first; /* the block whose sum is sums[0] */
	size_t n; /* sums held */
	unsigned char sums[SFS_BLOCK_BATCH][SFS_DIGEST_LEN];
	int (*flush)(struct sfs_block_sums *bs, void *arg);
	void *arg;
	const char *path; /* of the payload, for messages */
	struct sfs_error *err;
};

/* Hash len more bytes of the payload: 0, -EIO, or flush's error. */
int sfs_block_sums_add(struct sfs_block_sums *bs, const void *buf, size_t len);

/* The last, shorter block, and the sums still held: as sfs_block_sums_add. */
int sfs_block_sums_finish(struct sfs_block_sums *bs);

/*
 * The manifest's checksum: SHA-256 of root (without its "checksum" key)
 * dumped compact with sorted keys.  Returns 0 or -ENOMEM.
 */
int sfs_index_manifest_checksum(json_t *root,
				unsigned char out[SFS_DIGEST_LEN]);

/*
 * pread len bytes of table path (fd) at off into out.  Returns 0, or -EIO
 * with a message naming the table and the byte (where the file ends, or
 * where the read failed), and the shard whose boundaries they are when
 * shard is given.
 */
int sfs_index_pread(int fd, const char *path, void *out, size_t len, off_t off,
		    const char *shard, struct sfs_error *err);

/* Mark block k of idx's boundary table checked (any thread). */
void sfs_index_block_mark(const struct sfs_index *idx, uint64_t k);

/* The message for block k that does not match its checksum: -EINVAL. */
int sfs_index_block_bad(const struct sfs_index *idx, uint64_t k,
			struct sfs_error *err);

/* Note in each shard's (and member's) access who the source lets read it,
 * as sfs_index_check_source does, for an index just built from the
 * source (sfs_indexer_build).  A file it cannot look at stays unknown.
 * Returns 0, or -ENOMEM. */
int sfs_index_note_access(struct sfs_index *idx);

#endif
