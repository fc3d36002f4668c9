/* Internals the format drivers share; not part of the public interface. */
#ifndef SHARDFS_FORMAT_I_H
#define SHARDFS_FORMAT_I_H

#include <stdio.h>

#include "shardfs/format.h"
#include "shardfs/prng.h"

/* The drivers of the format table (format.c). */
extern const struct sfs_format_ops sfs_format_tar;
extern const struct sfs_format_ops sfs_format_jsonl;
extern const struct sfs_format_ops sfs_format_tfrecord;
extern const struct sfs_format_ops sfs_format_files;
extern const struct sfs_format_ops sfs_format_parquet;
extern const struct sfs_format_ops sfs_format_opaque;
extern const struct sfs_format_ops sfs_format_lance;

/*
 * Boundaries a scan holds before it hands them to sfs_scan.bounds_fn
 * (512 KiB of them).
 */
#define BOUNDS_PIECE 65536

/*
 * Append boundary number out->nsamples to out->bounds, growing it, after
 * handing the boundaries held to out->bounds_fn when there are
 * BOUNDS_PIECE of them.  Returns 0, -ENOMEM, or bounds_fn's nonzero
 * return.
 */
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

/* ---- synthetic shards (synth.c), for the drivers' synthesize ---- */

/* A number drawn from lo..hi (inclusive). */
uint64_t sfs_synth_pick(struct sfs_prng *r, uint64_t lo, uint64_t hi);

/* n bytes drawn from r into p. */
void sfs_synth_fill(struct sfs_prng *r, unsigned char *p, uint64_t n);

/* A file being written: stdio with errors kept for the end. */
struct sfs_synth_file {
	FILE *f;
	const char *path;
};

/* Create path for writing.  Returns 0 or -errno with a message. */
int sfs_synth_open(struct sfs_synth_file *sf, const char *path,
		   struct sfs_error *err);

/* Append n bytes (errors are reported by sfs_synth_close). */
void sfs_synth_put(struct sfs_synth_file *sf, const void *data, size_t n);

/*
 * Close the file; rc is the writer's own result so far (a nonzero rc is
 * returned as it is, its message kept).  Returns 0 or -errno with a
 * message naming the path.
 */
int sfs_synth_close(struct sfs_synth_file *sf, int rc, struct sfs_error *err);

/* Round a tar record length up to the 512-byte block. */
static inline uint64_t sfs_tar_round(uint64_t n)
{
	return (n + 511) & ~(uint64_t)511;
}

/* Little-endian decoding of untrusted bytes, one field at a time. */
static inline uint32_t sfs_le16(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8;
}

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
