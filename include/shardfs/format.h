/*
 * Format drivers: where samples begin and end inside a shard, and which
 * bytes a slice of a shard must carry besides its samples.
 *
 * A driver is a table of functions (struct sfs_format_ops), one file each
 * (format_tar.c, format_jsonl.c, ...), registered in format.c.  A scan never
 * trusts the shard: every length it reads is checked against the file size
 * before use, and a malformed shard is an error whose message names the
 * file and the byte offset.  Drivers know nothing of the index on disk, of
 * the plan or of FUSE.
 *
 * A sliceable shard has nsamples + 1 boundaries: bounds[i] is the byte where
 * sample i begins, bounds[nsamples] the byte where the last one ends.  A
 * slice is: bytes [0, prefix_len) of the shard, then for each run of
 * consecutive samples [a, b) the bytes [bounds[a], bounds[b]) followed by the
 * driver's run suffix, then the driver's slice suffix.
 */
#ifndef SHARDFS_FORMAT_H
#define SHARDFS_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shardfs/error.h"

struct sfs_shard;

/* Called once per sample read, in order, with its digest (see samples). */
typedef int (*sfs_sample_fn)(void *arg, uint64_t sample,
			     const unsigned char digest[32]);

/* What the caller knows about the shard being scanned (all borrowed). */
struct sfs_scan_in {
	int fd; /* open for reading, any file position */
	const char *path; /* as shown in messages */
	uint64_t size; /* from fstat */
	uint64_t declared; /* opaque shards: samples per shard, 0 = 1 */
	/* when set, a driver that can also hands every sample's digest (as
	 * samples does) to digest_fn in the same pass, and sets digested */
	sfs_sample_fn digest_fn;
	void *digest_arg;
};

/* What a scan learns.  bounds is heap memory the caller takes. */
struct sfs_scan {
	uint64_t nsamples;
	bool sliceable; /* bounds is set and the shard can be cut */
	uint64_t *bounds; /* nsamples + 1 entries when sliceable */
	uint64_t prefix_len; /* bytes that start every slice */
	bool newline_missing; /* the last line lacks its '\n' (jsonl) */
	bool digested; /* digest_fn had every sample */
};

struct sfs_format_ops {
	const char *name; /* as in the index and in --format */
	bool allow_empty; /* an empty file is a valid shard */

	/*
	 * Fill out (zeroed by the caller).  Returns 0, or a negative errno
	 * with a message naming in->path and the byte offset.  On error
	 * out->bounds may be set and is freed by the caller.
	 */
	int (*scan)(const struct sfs_scan_in *in, struct sfs_scan *out,
		    struct sfs_error *err);

	/*
	 * Deeper checks than a scan does, for shardfs-index --verify (e.g.
	 * TFRecord data CRCs).  bounds as the scan found them.  NULL when a
	 * format has none.
	 */
	int (*verify)(int fd, const char *path, const struct sfs_shard *sh,
		      const uint64_t *bounds, struct sfs_error *err);

	/*
	 * Bytes to write after a run of samples that ends at sample end
	 * (exclusive) of sh; sets *bytes to static memory.  NULL: none.
	 */
	size_t (*run_suffix)(const struct sfs_shard *sh, uint64_t end,
			     const void **bytes);

	/* Bytes that end every slice of sh.  NULL: none. */
	size_t (*slice_suffix)(const struct sfs_shard *sh, const void **bytes);

	/*
	 * Read the whole of fd (a shard, or a slice of one, as a loader would:
	 * libarchive for tar, lines, records) and call fn for every sample
	 * with the SHA-256 of its canonical bytes, the same for a sample
	 * wherever it is read: tar, for each member that is not a directory,
	 * its path, a NUL, its size (u64 little-endian) and its data; jsonl,
	 * the line without its '\n'; tfrecord, the record's data (both CRCs
	 * checked); files and opaque, the whole file.  Stops at the first
	 * nonzero return of fn and returns it; -EINVAL for a malformed file
	 * (message with path and offset), -EIO.
	 */
	int (*samples)(int fd, const char *path, sfs_sample_fn fn, void *arg,
		       struct sfs_error *err);
};

extern const struct sfs_format_ops sfs_format_tar;
extern const struct sfs_format_ops sfs_format_jsonl;
extern const struct sfs_format_ops sfs_format_tfrecord;
extern const struct sfs_format_ops sfs_format_files;
extern const struct sfs_format_ops sfs_format_opaque;

/* The driver called name ("tar", "jsonl", ...), or NULL. */
const struct sfs_format_ops *sfs_format_by_name(const char *name);

/*
 * The driver for a file name by its extension (.tar, .tar.gz, .tgz,
 * .tar.zst, .tar.xz, .tar.bz2, .jsonl, .ndjson, .tfrecord, .tfrecords,
 * .parquet, .arrow, ...), or NULL when the name says nothing we know.
 */
const struct sfs_format_ops *sfs_format_detect(const char *filename);

/*
 * The length of the sample key of a member or file path: the path up to
 * the first dot of its basename ("a/b/x.jpg" -> 3, "a/b/x" -> 5).
 */
size_t sfs_format_key_len(const char *path);

/* The i-th driver in registration order, or NULL past the last. */
const struct sfs_format_ops *sfs_format_at(size_t i);

/*
 * Scan through ops, after the checks every driver shares (an empty file is
 * refused unless ops->allow_empty).  out is zeroed first.
 */
int sfs_format_scan(const struct sfs_format_ops *ops,
		    const struct sfs_scan_in *in, struct sfs_scan *out,
		    struct sfs_error *err);

#endif
