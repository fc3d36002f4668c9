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
 * The digest table's SHA-256 is taken as its bytes come in table order
 * (sfs_spill_sum): a piece of the first record not put yet is hashed as
 * it is appended, from the caller's memory, and records put before it
 * are read back and hashed once it is put.  A build of one big shard then
 * hashes its digests while they are made, on the thread that makes them,
 * and its save only copies them.
 *
 * The files are created in the index directory without a name
 * (O_TMPFILE), or where its file system cannot, under a unique name
 * (mkostemp) unlinked at once: they vanish when the spill is freed or the
 * process ends, however it ends (error, SIGINT, SIGTERM, SIGKILL), and a
 * concurrent run cannot collide with them.  The digest file keeps its
 * first SFS_SPILL_HEAD bytes for a table's header: when its records were
 * filled one after the other (one shard, or one thread), it holds the
 * digest table's payload as it is to be, and the save gives it a name
 * (sfs_spill_table_fd) instead of copying it.
 */
#ifndef SHARDFS_SPILL_H
#define SHARDFS_SPILL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shardfs/digest.h"
#include "shardfs/error.h"

struct sfs_spill;

/* Bytes at the start of the digest file left for a table's header. */
#define SFS_SPILL_HEAD 64

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

/*
 * The SHA-256 of the digest table (what sfs_spill_stream streams of it)
 * into out: what was hashed as it came, and the rest read back and hashed
 * now.  Once every record is put or given up, not concurrently with
 * sfs_spill_append or sfs_spill_put; again, the same.  Returns true with
 * out set; false when the spill has no digests or the sum is not known (a
 * record given up after its pieces were hashed, a piece that could not be
 * read back): the table is to be hashed as it is streamed then.
 */
bool sfs_spill_sum(struct sfs_spill *s, unsigned char out[SFS_DIGEST_LEN]);

/*
 * The descriptor (borrowed: s closes it) of the digest file when it holds
 * exactly the digest table's payload (what sfs_spill_stream streams) from
 * byte SFS_SPILL_HEAD on, nothing after it, and was made without a name
 * (O_TMPFILE), so that it can be given one (linkat of /proc/self/fd/N);
 * else -1.  Once every record is put or given up.
 */
int sfs_spill_table_fd(const struct sfs_spill *s);

/* Close the files (which frees their space) and free s.  NULL: no-op. */
void sfs_spill_free(struct sfs_spill *s);

#endif
