/*
 * The tables of an index being built, spilled to disk: each shard's
 * boundaries and sample digests go to two temporary files as its scan
 * finishes, and sfs_index_save streams them, in shard order, into the
 * final tables.  Memory then grows with shards, not samples.
 *
 * A spill holds nrec records (a build's shards, in the order of the
 * index): any thread may fill record r, in any order: pieces appended as a
 * scan produces them (so that a shard of 100 M samples never holds its
 * digests in memory), then put once, which closes it.  Pieces are
 * appended to the files under a lock, and where each went is remembered
 * (16 bytes a piece).  A table is the concatenation of the records put,
 * in record order, each its pieces in order; a record never put (a shard
 * that failed after some pieces) adds nothing.
 *
 * The files are created in the index directory under a unique name
 * (mkostemp) and unlinked at once: they vanish when the spill is freed or
 * the process ends, however it ends (error, SIGINT, SIGTERM, SIGKILL), and
 * a concurrent run cannot collide with them.
 */
#ifndef SHARDFS_SPILL_H
#define SHARDFS_SPILL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shardfs/error.h"

struct sfs_spill;

/*
 * A spill of nrec records in dir (created, as the index directory, when
 * missing), with a digest file when digests.  Returns 0 and the spill in
 * *out, or -errno with a message naming dir (and, when it cannot be
 * written, saying to use --out DIR).
 */
int sfs_spill_new(const char *dir, size_t nrec, bool digests,
		  struct sfs_spill **out, struct sfs_error *err);

/*
 * Append a piece to record rec (< nrec, not put yet): nbounds boundaries
 * (borrowed, may be 0) and, when the spill has digests, ndigests digests
 * of SFS_DIGEST_LEN bytes (borrowed).  Thread-safe, but one record is
 * filled by one thread at a time.  Returns 0, -EINVAL for a record out of
 * range or already put, -ENOMEM, or -EIO (disk full...) with a message
 * naming the file's directory; the record is then as it was.
 */
int sfs_spill_append(struct sfs_spill *s, size_t rec, const uint64_t *bounds,
		     uint64_t nbounds, const unsigned char *digests,
		     uint64_t ndigests, struct sfs_error *err);

/*
 * Append a last piece to record rec, as sfs_spill_append, and close it:
 * its entries count in the tables from now on, and it takes no more.
 */
int sfs_spill_put(struct sfs_spill *s, size_t rec, const uint64_t *bounds,
		  uint64_t nbounds, const unsigned char *digests,
		  uint64_t ndigests, struct sfs_error *err);

/* Whether the spill holds digests. */
bool sfs_spill_has_digests(const struct sfs_spill *s);

/* The entries of the boundary (or digest) table: the records' sum. */
uint64_t sfs_spill_count(const struct sfs_spill *s, bool digests);

/*
 * Call put with the boundary (or digest) table's bytes, in record order,
 * in pieces of at most 1 MiB; it returns 0 or -errno, which stops the
 * stream and is returned.  Not concurrently with sfs_spill_put.  Returns
 * 0, that error, -EIO when a file cannot be read back (message), -ENOMEM.
 */
int sfs_spill_stream(const struct sfs_spill *s, bool digests,
		     int (*put)(void *arg, const void *buf, size_t len),
		     void *arg, struct sfs_error *err);

/* Close the files (which frees their space) and free s.  NULL: no-op. */
void sfs_spill_free(struct sfs_spill *s);

#endif
