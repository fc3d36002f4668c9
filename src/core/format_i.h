/* Internals the format drivers share; not part of the public interface. */
#ifndef SHARDFS_FORMAT_I_H
#define SHARDFS_FORMAT_I_H

#include "shardfs/format.h"

/* Append a boundary to out->bounds, growing it.  Returns 0 or -ENOMEM. */
int sfs_bounds_push(struct sfs_scan *out, size_t *cap, uint64_t off);

/*
 * The samples op of formats whose every file is one sample (files,
 * opaque): the digest of the whole file, as sample 0.
 */
int sfs_format_whole_samples(int fd, const char *path, sfs_sample_fn fn,
			     void *arg, struct sfs_error *err);

/*
 * The samples op of a driver whose scan can hash samples as it goes
 * (digest_fn): scan fd of any size with fn as the digest callback.
 */
int sfs_format_scan_samples(const struct sfs_format_ops *ops, int fd,
			    const char *path, sfs_sample_fn fn, void *arg,
			    struct sfs_error *err);

/* Round a tar record length up to the 512-byte block. */
static inline uint64_t sfs_tar_round(uint64_t n)
{
	return (n + 511) & ~(uint64_t)511;
}

/* Little-endian decoding of untrusted bytes, one field at a time. */
static inline uint32_t sfs_le32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static inline uint64_t sfs_le64(const unsigned char *p)
{
	return (uint64_t)sfs_le32(p) | (uint64_t)sfs_le32(p + 4) << 32;
}

#endif
