/*
 * The index of a source: per shard its path, size, mtime, format, sample
 * count, SHA-256 and the byte offset of every sample boundary.
 *
 * On disk (default SRC/.shardfs/, or any directory the source cannot
 * hold) it is three files or four, each written to a temporary name of its
 * own run
 * (docs/index-format.md) and renamed:
 *   manifest.json        version, shards, totals and a SHA-256 of itself;
 *   samples-<hash>.bin   the boundary table: a 64-byte header ("SFSBND01",
 *                        u32 version, u32 0, u64 count, 32-byte SHA-256
 *                        of the payload, 8 zero bytes) and count
 *                        little-endian u64 offsets; named after its hash,
 *                        so a reader never sees a manifest paired with the
 *                        wrong table;
 *   blocks-<hash>.bin    the same header ("SFSBLK01") and the 32-byte
 *                        SHA-256 of every block of SFS_INDEX_BLOCK_BYTES
 *                        bytes of the boundary table's payload (the last
 *                        one shorter), named by the manifest's boundary
 *                        entry; an index written before it has none;
 *   digests-<hash>.bin   (when hashed) the same header ("SFSDIG01") and
 *                        the 32-byte SHA-256 of every sample.
 * docs/index-format.md describes them.  A loaded boundary table is read
 * with pread where a view needs it (sfs_index_read_bounds), each block
 * checked against its checksum the first time it is read, and a loaded
 * digest table is mmap'd: a billion samples cost neither heap nor resident
 * pages until used, and a mount reads only the blocks its views need.
 *
 * Invariants of a loaded or built index: shards are sorted by path (bytes,
 * strcmp), paths are relative, '/'-separated, without "." or ".."
 * components; the nsamples + 1 boundaries of a shard that has them are
 * non-decreasing, start at or after prefix_len and end at or before size;
 * shards with boundaries hold them in the table in shard order, without
 * overlap.
 */
#ifndef SHARDFS_INDEX_H
#define SHARDFS_INDEX_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "shardfs/digest.h"
#include "shardfs/error.h"
#include "shardfs/format.h"
#include "shardfs/shard.h"
#include "shardfs/util.h"

#define SFS_INDEX_VERSION 1
#define SFS_INDEX_DIR ".shardfs"
#define SFS_INDEX_MANIFEST "manifest.json"
#define SFS_NO_BOUNDS UINT64_MAX
#define SFS_INDEX_PARTS_MAX 65536
/* bytes of the boundary table's payload per checksum of its blocks file */
#define SFS_INDEX_BLOCK_BYTES 4096

/*
 * A source an index joins (sfs_index_join with borrow): its own index,
 * where it is and where that index was loaded from, and its shards' place
 * in the joined index.  The strings are the joiner's (they live as long
 * as it does, and it lives as long as the index).
 */
struct sfs_index_source {
	struct sfs_index *idx; /* owned: its shards' bounds_in */
	const char *path; /* the source's directory, absolute */
	const char *index_dir; /* its index's, NULL: PATH/.shardfs */
	size_t shard_lo, shard_hi; /* its shards in the joined index */
};

/*
 * What joined an index's sources, as the index sees it: a struct of a
 * layer above (a mixture, mixture.h) holds it, and the index frees
 * that struct with release when it is freed, after the sources' indexes.
 * The index knows nothing else of it.
 */
struct sfs_index_joiner {
	void (*release)(struct sfs_index_joiner *j);
};

struct sfs_index {
	char *source; /* absolute path of the source */
	/* a part of an index (shardfs-index --part I/N): part I of nparts N;
	 * nparts 0 for a whole index */
	uint32_t part, nparts;
	struct sfs_shard *shards;
	size_t nshards;
	uint64_t nsamples; /* sum over shards */
	/* the boundary table, nbounds entries: in memory (bounds, owned by
	 * bounds_heap), or, for a loaded index, read from table_fd at
	 * table_path (bounds NULL); read it with sfs_index_read_bounds */
	const uint64_t *bounds;
	uint64_t nbounds;
	uint64_t *bounds_heap;
	int table_fd;
	char *table_path;
	unsigned char table_sum[SFS_DIGEST_LEN]; /* the manifest's */
	/* the table's blocks file, open (blocks_fd at blocks_path): the
	 * checksum of every block_bytes bytes of its payload, nblocks of
	 * them.  A block is checked the first time a boundary in it is read
	 * and then marked in verified (nblocks bits, set atomically: views
	 * are described on several threads at once).  verified is NULL when
	 * every boundary is checked already: the load of an index without a
	 * blocks file checked the whole table, or the table is in memory */
	int blocks_fd;
	char *blocks_path;
	uint64_t block_bytes, nblocks;
	_Atomic uint64_t *verified;
	bool bounds_checked; /* by sfs_index_check_bounds */
	/* SHA-256 of every sample (format.h's samples op), global order;
	 * NULL when the index was built without hashes.  A loaded digest
	 * table is checked against its checksum only by
	 * sfs_index_check_digests (digests_checked), not by the load: only
	 * the auditor and the indexer use it */
	const unsigned char *digests;
	void *dmap; /* owner of digests when mmap'd ... */
	size_t dmap_len;
	unsigned char *digests_heap; /* ... or when built in memory */
	char *digests_path; /* of dmap */
	int digests_fd; /* the same file, open (sfs_index_read_digests) */
	unsigned char digests_sum[SFS_DIGEST_LEN]; /* the manifest's */
	bool digests_checked;
	/* the sources it joins (sfs_index_join with borrow), owned: the
	 * indexes its shards' bounds_in point to; none for the index of one
	 * source directory */
	struct sfs_index_source *sources;
	size_t nsources;
	/* what joined them, owned (a mixture: mixture.h, sfs_mix_of); NULL
	 * for the index of one source directory */
	struct sfs_index_joiner *joiner;
	/* owner of the tables while they are in temporary files (spill.h):
	 * an index built with sfs_indexer_opts.spill_dir, whose bounds and
	 * digests are NULL (nbounds counts the boundaries all the same);
	 * such an index can be saved, its shards read, and freed; NULL for
	 * an index whose tables are in memory or mapped */
	struct sfs_spill *spill;
};

/* True when the shard has boundaries in the table (sfs_index_read_bounds). */
static inline bool sfs_shard_has_bounds(const struct sfs_shard *sh)
{
	return sh->bounds_at != SFS_NO_BOUNDS;
}

/*
 * True when the shard can be cut into slices: it has boundaries, or its
 * driver lays out slices itself (format.h, lay_out; Parquet).
 */
static inline bool sfs_shard_sliceable(const struct sfs_shard *sh)
{
	return sfs_shard_has_bounds(sh) || sh->format->lay_out;
}

/*
 * Copy n boundaries of shard sh (one with boundaries), from its boundary
 * number from on (from + n <= nsamples + 1), into out.  In memory, or with
 * one pread of the table: a view's lookups keep no table pages resident.
 * The first read of a block of a table with a blocks file reads the whole
 * block(s) it touches and checks them against their checksums (safe from
 * several threads at once); the values copied are checked as the shard's
 * (non-decreasing, from prefix_len up to size) whatever the path.  Returns
 * 0, -EIO with a message naming the table when it cannot be read, or
 * -EINVAL when the table is damaged: the message names the table, the
 * block and its bytes (or the shard) and says to rebuild the index.  The
 * state of the checks lives in the index that owns the table (a mixture's
 * source, sh->bounds_in), which idx may be.
 */
int sfs_index_read_bounds(const struct sfs_index *idx,
			  const struct sfs_shard *sh, uint64_t from, uint64_t n,
			  uint64_t *out, struct sfs_error *err);

/*
 * A few slots of boundary-table entries, for a run of reads of
 * neighbouring boundaries (the files of one build of a view, one thread's
 * share): sfs_bounds_buf_read copies a range that lies within a slot, and
 * fills a slot with the SFS_BOUNDS_BUF_BYTES of the table around one that
 * does not.  A slot holds entries of one table, keyed by the index that
 * owns it; the indexes read must outlive the buffer.  One thread at a time.
 */
struct sfs_bounds_buf;

#define SFS_BOUNDS_BUF_SLOTS 16
#define SFS_BOUNDS_BUF_BYTES 8192 /* per slot: two blocks of the default */

/* A new, empty buffer into *out: 0 or -ENOMEM. */
int sfs_bounds_buf_new(struct sfs_bounds_buf **out);

/* Free b.  NULL is a no-op. */
void sfs_bounds_buf_free(struct sfs_bounds_buf *b);

/*
 * sfs_index_read_bounds through b (borrowed; NULL reads directly): the
 * same values, checks and errors.  A table in memory, or a range the
 * shard does not hold, is read directly.  A slot is filled from the block
 * holding the range's first entry on, block-aligned (whole blocks of
 * SFS_INDEX_BLOCK_BYTES without a blocks file), each block of a table with
 * a blocks file checked as sfs_index_read_bounds checks it; when a slot
 * cannot hold the range or its fill fails, the range is read directly, so
 * an error is that read's.  Every range copied is checked as the shard's.
 */
int sfs_bounds_buf_read(struct sfs_bounds_buf *b, const struct sfs_index *idx,
			const struct sfs_shard *sh, uint64_t from, uint64_t n,
			uint64_t *out, struct sfs_error *err);

/*
 * Copy the digests of samples first..first+n-1 into out (n * 32 bytes): in
 * memory, or with pread from a loaded table, so that copying a whole table
 * (a refresh, --merge) keeps none of it resident.  Returns 0, or -EIO
 * naming the table.
 */
int sfs_index_read_digests(const struct sfs_index *idx, uint64_t first,
			   uint64_t n, unsigned char *out,
			   struct sfs_error *err);

/*
 * Check a loaded digest table against its checksum (a pass over the whole
 * table; the load checks only its header and length), once: the auditor
 * and the indexer call it before they trust idx->digests.  Returns 0 (also
 * for an index without digests or built in memory), or -EINVAL with the
 * load's message for a damaged table, -EIO.
 */
int sfs_index_check_digests(struct sfs_index *idx, struct sfs_error *err);

/*
 * Check the whole boundary table of a loaded index (and of a mixture's
 * sources) once, as the load of an index without a blocks file does: its
 * checksum, every block against the blocks file, every shard's boundaries;
 * then no read checks a block again.  The auditor and shardfs-index call it
 * before they trust or reuse the table.  Returns 0 (also for a table in
 * memory or checked already), -EINVAL with the load's or
 * sfs_index_read_bounds' message for a damaged table, -EIO, -ENOMEM.
 */
int sfs_index_check_bounds(struct sfs_index *idx, struct sfs_error *err);

/*
 * The directory that holds the index of source: dir when given, else
 * SRC/.shardfs.  Returns a heap string (caller frees) or NULL.
 */
char *sfs_index_dir(const char *source, const char *dir);

/*
 * Load the index of source from dir (NULL: SRC/.shardfs).  Checks versions,
 * the manifest's checksum, the tables' headers and lengths, and every
 * invariant above that the manifest alone shows.  With a blocks file, it
 * checks that file's checksum and leaves the boundary table's payload to
 * the reads (sfs_index_read_bounds); without one (an index written by an
 * older shardfs) it checks the table's checksum and every shard's
 * boundaries in one pass over it.  Of the digest table only its header and
 * length are checked (sfs_index_check_digests).  It does not look at the
 * shards (see sfs_index_check_source).  Returns 0 and a new index in *out, or:
 * -ENOENT (no index: the message says how to build one), -EINVAL (corrupt,
 * truncated or of another version: the message names the file and says to
 * rebuild), -EIO, -ENOMEM.
 */
int sfs_index_load(const char *source, const char *dir, struct sfs_index **out,
		   struct sfs_error *err);

/*
 * Load a part of an index (shardfs-index --part), which sfs_index_load
 * refuses: it lacks the other parts' shards.  As sfs_index_load otherwise;
 * a whole index is loaded too (nparts 0).
 */
int sfs_index_load_part(const char *source, const char *dir,
			struct sfs_index **out, struct sfs_error *err);

/*
 * Join the parts of an index (borrowed; nparts of them, each loaded with
 * sfs_index_load_part, names[i] naming parts[i] in messages) into the
 * index one run over every shard builds.  With spill_dir (the index
 * directory it will be saved in) its tables are copied shard by shard
 * into a spill there (spill.h, idx->spill: save it and free it), not into
 * memory; NULL: in memory.  Returns 0 and a new index, or -EINVAL with a
 * message naming the part: not a part, parts of another count or source,
 * a part missing or given twice, a shard in two parts, hashes in some
 * parts only; -ENOMEM; a spill's errors (spill.h).
 */
int sfs_index_merge(struct sfs_index *const *parts, const char *const *names,
		    size_t nparts, const char *spill_dir,
		    struct sfs_index **out, struct sfs_error *err);

/*
 * Join nidx indexes (borrowed) into a new index of source: every shard of
 * idxs[i] with prefixes[i] put before its path (and its members' paths),
 * sorted by the new paths; digests kept when every index has them, checked
 * (sfs_index_check_digests) or in memory.  Boundaries are copied, or with
 * borrow read from idxs[]'s own tables (bounds_in), which must then outlive
 * the new index: hand them to it (sources, nsources).  An index that
 * borrows is not saved.  Returns 0, -EINVAL when two shards get one path
 * (the message names both indexes by names[] and ends with dup_hint),
 * -ENOMEM.
 */
int sfs_index_join(const struct sfs_index *const *idxs,
		   const char *const *prefixes, const char *const *names,
		   size_t nidx, const char *source, const char *dup_hint,
		   bool borrow, struct sfs_index **out, struct sfs_error *err);

/*
 * Write idx into dir (NULL: SRC/.shardfs, created if missing) atomically:
 * the tables (the boundary table's blocks file with it), then the manifest,
 * each through a temporary file and rename; older tables are removed
 * after.  A table is hashed as it is written, in
 * pieces: from memory, or streamed from idx->spill.  Returns 0 or a
 * negative errno; a temporary file is removed on every error.
 */
int sfs_index_save(const struct sfs_index *idx, const char *dir,
		   struct sfs_error *err);

/* The threads sfs_index_check_source runs on by default. */
#define SFS_INDEX_CHECK_THREADS 16

/*
 * Compare every shard's size and mtime with the source, and with to_read
 * check that this process may read each; note in each shard's (and
 * member's) access who the source lets read it.  Returns 0 when all match, -ESTALE
 * with a message that names the changed shards (up to ten, and how many
 * more) and the command that rebuilds the index (dir as given to load, NULL
 * for the default), or -EACCES naming the shards it may not read.  An
 * index that joins sources (a mixture's) is checked source by source, each
 * against its own index directory (dir is not used then).
 *
 * It stats the files on up to threads threads at once (0:
 * SFS_INDEX_CHECK_THREADS; 1: the caller's alone): it waits on the
 * source, a round trip a file on a network file system or an object
 * store's adapter, far more than it computes.
 */
int sfs_index_check_source(struct sfs_index *idx, const char *dir, bool to_read,
			   unsigned threads, struct sfs_error *err);

/*
 * Who the source at source (absolute; open as srcfd) lets read the file at
 * path (relative to it) into *acc, as sfs_index_check_source notes it for
 * a shard: owner, group and mode less what the directories on its path
 * keep out.  acc->known is false when the file cannot be looked at (gone,
 * not a regular file, a symlink on its path).  Returns 0, or -ENOMEM.
 */
int sfs_index_file_access(const char *source, int srcfd, const char *path,
			  struct sfs_access *acc);

/* The position of path in idx (binary search), or -1. */
ssize_t sfs_index_find(const struct sfs_index *idx, const char *path);

/* The shard of idx holding its sample g, the global number (empty shards
 * hold none), or nshards when g is past its samples (binary search). */
size_t sfs_index_shard_at(const struct sfs_index *idx, uint64_t g);

/*
 * Who the source lets read a file that is not a shard (a data file of a
 * dataset shard: Lance) at path (relative to idx's source, opened below
 * srcfd, borrowed), owned by uid:gid with mode: *acc as
 * sfs_index_check_source finds a shard's, mode narrowed by the
 * directories on its path.  Returns 0, or -ENOMEM (*acc unchanged).
 */
int sfs_index_access(const struct sfs_index *idx, int srcfd, const char *path,
		     uint32_t uid, uint32_t gid, uint32_t mode,
		     struct sfs_access *acc);

/*
 * Who may read bytes made of two files: *a becomes an access that lets a
 * user read only if a and b both do (owner and group theirs when they
 * share them, else root's; a class keeps its read bit only when every
 * user it may hold reads both, membership not being known; read bits
 * only).  Both must be known.
 */
void sfs_index_access_meet(struct sfs_access *a, const struct sfs_access *b);

/* Free idx and everything it owns.  NULL is a no-op. */
void sfs_index_free(struct sfs_index *idx);

/* True when a path from an index is safe to join to the source (util.h). */
static inline bool sfs_index_path_ok(const char *path)
{
	return sfs_path_ok(path);
}

/*
 * Open path (from an index) below the source directory srcfd with flags,
 * as util.h's sfs_open_beneath opens it (O_CLOEXEC added; no component
 * may be a symlink or lead out of the source), and O_NONBLOCK but to
 * O_PATH: a FIFO planted as a shard must not block.  Returns the
 * descriptor, or -errno: -ELOOP for a symlink on the way, -EXDEV for a
 * path that leaves the source.
 */
int sfs_index_open_shard(int srcfd, const char *path, int flags);

#endif
