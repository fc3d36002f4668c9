/*
 * A shard of a source: the record the index keeps of each (index.h) and
 * the one a format driver is handed (format.h): its path, size, mtime,
 * format, samples, and who may read it.  Drivers read a shard's path,
 * size, sample count and what their own scan found (prefix_len,
 * newline_missing); where its boundaries are (bounds_at, bounds_in) and
 * its digest are the index's to read (index.h, sfs_index_read_bounds).
 * Below the index, so that the drivers need nothing of it.
 */
#ifndef SHARDFS_SHARD_H
#define SHARDFS_SHARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "shardfs/digest.h"

struct sfs_format_ops;
struct sfs_index;

/*
 * Who the source lets read a shard file, as sfs_index_check_source found
 * it (never saved in the index): its owner and group, and the permission
 * bits of its mode with the classes of users cleared that a directory on
 * its path (the source's, the ones above it and below it) does not let
 * through.  A view gives its files these (docs/view.md), so that with
 * allow_other the kernel (default_permissions) refuses a user the slice of
 * a shard that user could not read in the source.  known false: not
 * checked (an index not checked against its source).
 */
struct sfs_access {
	uint32_t uid, gid;
	uint16_t mode; /* 0777 bits at most */
	bool known;
};

/* One more file of a `files` sample that groups several files by key. */
struct sfs_member {
	char *path;
	uint64_t size;
	int64_t mtime_ns;
	struct sfs_access access;
};

struct sfs_shard {
	char *path; /* relative to the source */
	uint64_t size;
	int64_t mtime_ns;
	const struct sfs_format_ops *format;
	uint64_t nsamples;
	uint64_t first_sample; /* global number of its sample 0 */
	uint64_t bounds_at; /* first boundary in the table, or SFS_NO_BOUNDS
				 * when the shard cannot be sliced */
	/* the index whose table holds those boundaries (a mixture's
	 * source, sfs_index_join with borrow); NULL: the shard's own */
	const struct sfs_index *bounds_in;
	uint64_t prefix_len; /* see format.h */
	bool newline_missing; /* see format.h */
	bool has_digest;
	unsigned char digest[SFS_DIGEST_LEN]; /* over the shard, then members */
	struct sfs_member *members; /* files: the rest of the sample's files */
	size_t nmembers;
	struct sfs_access access;
};

/* A stat's mtime in nanoseconds, as the index records it. */
static inline int64_t sfs_mtime_ns(const struct stat *st)
{
	return (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

#endif
