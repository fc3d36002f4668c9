/*
 * SHA-256 of shard bytes, through OpenSSL (its SHA256_CTX calls where it
 * has them, else EVP: digest.c says why).
 *
 * A digest is 32 raw bytes; on disk and in messages it is 64 lowercase hex
 * characters.  Files are read with pread in large blocks, so hashing runs at
 * the speed of the hash, not of the system calls.
 */
#ifndef SHARDFS_DIGEST_H
#define SHARDFS_DIGEST_H

#include <stddef.h>
#include <stdint.h>

#include "shardfs/error.h"

#define SFS_DIGEST_LEN 32
#define SFS_DIGEST_HEX (2 * SFS_DIGEST_LEN + 1)

struct sfs_digest;

/* A running SHA-256.  Returns NULL when OpenSSL cannot allocate. */
struct sfs_digest *sfs_digest_new(void);
void sfs_digest_free(struct sfs_digest *d);
int sfs_digest_update(struct sfs_digest *d, const void *buf, size_t len);
/* Write the digest to out and reset d for reuse. */
int sfs_digest_final(struct sfs_digest *d, unsigned char out[SFS_DIGEST_LEN]);

/*
 * Feed the whole of the open file fd (size bytes, named path in errors)
 * into d.  Returns 0, -EIO with a message naming path and the offset when
 * a read fails or the file is shorter than size.
 */
int sfs_digest_fd(struct sfs_digest *d, int fd, uint64_t size, const char *path,
		  struct sfs_error *err);

/*
 * Feed bytes [off, off + len) of the open file fd into d, as sfs_digest_fd
 * (its messages name off + len as the size the file should have).
 */
int sfs_digest_fd_range(struct sfs_digest *d, int fd, uint64_t off,
			uint64_t len, const char *path, struct sfs_error *err);

/* One-shot SHA-256 of a memory buffer. */
void sfs_digest_buf(const void *buf, size_t len,
		    unsigned char out[SFS_DIGEST_LEN]);

/* Hex form of a digest into out (SFS_DIGEST_HEX bytes, NUL-terminated). */
void sfs_digest_hex(const unsigned char d[SFS_DIGEST_LEN], char *out);

/* Parse 64 hex characters; returns 0 or -EINVAL. */
int sfs_digest_parse(const char *hex, unsigned char out[SFS_DIGEST_LEN]);

#endif
