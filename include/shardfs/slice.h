/*
 * Slices: the bytes of a chosen set of samples of one shard, as a reader of
 * the shard's format expects them.
 *
 * A slice is a list of extents laid end to end: each is either a byte range
 * of the source shard or synthesized bytes (a tar end-of-archive marker, a
 * missing '\n', static; a Parquet footer or re-encoded pages, owned by the
 * slice).  A window of a source that grows (window.h) is a slice of
 * several shards, each extent naming its own.  Nothing is copied until
 * read; the FUSE layer
 * answers reads straight from the extents.  Samples are named by runs of
 * consecutive sample numbers within the shard.
 */
#ifndef SHARDFS_SLICE_H
#define SHARDFS_SLICE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "shardfs/budget.h"
#include "shardfs/error.h"
#include "shardfs/index.h"

struct sfs_extent {
	uint64_t pos; /* offset in the slice */
	uint64_t len;
	uint64_t src; /* offset in the shard, when mem is NULL */
	const void *mem; /* synthesized bytes, or NULL */
	bool owned; /* mem is the slice's, freed with it */
	/* which file src is in, for a slice made of several (a window of a
	 * followed source: its shard's number in the stream, window.h); 0
	 * for a slice of one shard */
	uint32_t file;
};

struct sfs_slice {
	uint64_t size; /* total bytes */
	size_t nextents;
	struct sfs_extent *extents;
	/* the owned extents' bytes are a cache's (sfs_slice_cache_build),
	 * not freed with the slice: they live as long as the cache */
	bool shared;
};

/*
 * Lay out the slice of shard sh of idx holding runs[0..nruns), in that
 * order.  Each run must lie within the shard.  fd is the shard, open for
 * reading, for a driver that lays out slices itself (format.h, lay_out;
 * it reads the shard), else not used (-1 will do).  Returns 0 and a new
 * slice in *out, -EINVAL when sh cannot be sliced or a run is out of
 * range, the driver's errors, -ENOMEM.
 */
int sfs_slice_build(const struct sfs_index *idx, const struct sfs_shard *sh,
		    int fd, const struct sfs_run *runs, size_t nruns,
		    struct sfs_slice **out, struct sfs_error *err);

/*
 * The size sfs_slice_build would give, without keeping the slice (a
 * driver that lays out slices itself still builds it).  The boundaries
 * are read through bb (borrowed, index.h, sfs_bounds_buf_read), or
 * directly when it is NULL.  Same errors.
 */
int sfs_slice_size(const struct sfs_index *idx, struct sfs_bounds_buf *bb,
		   const struct sfs_shard *sh, int fd,
		   const struct sfs_run *runs, size_t nruns, uint64_t *size,
		   struct sfs_error *err);

/*
 * The samples runs[0..nruns) of a shard span: *first, the lowest run's
 * first sample, and *end, one past the highest run's last (0 and 0 for no
 * runs).  A slice's bytes lie between boundaries *first and *end.
 */
void sfs_slice_span(const struct sfs_run *runs, size_t nruns, uint64_t *first,
		    uint64_t *end);

/* A slice that is the whole of a file of size bytes.  0 or -ENOMEM. */
int sfs_slice_whole(uint64_t size, struct sfs_slice **out,
		    struct sfs_error *err);

/*
 * A slice that is the len bytes at mem (borrowed: they must outlive the
 * slice), no shard's: a file a view synthesizes whole.  0 or -ENOMEM.
 */
int sfs_slice_mem(const void *mem, uint64_t len, struct sfs_slice **out,
		  struct sfs_error *err);

/* Free s.  NULL is a no-op. */
void sfs_slice_free(struct sfs_slice *s);

/*
 * A cache of laid-out slices, so that a slice whose driver lays it out
 * itself (Parquet: its footer decoded, the row groups a run begins or
 * ends inside cut) is laid out once, not once to size it and again at
 * every open.  A view has one (view.h), freed with it.
 *
 * While a view is built, sfs_slice_cache_size lays out each slice and
 * keeps it, its extents and the bytes it synthesized, while the kept
 * slices hold at most max bytes (slices past that are laid out again
 * when opened); and what the driver reads once per shard (its
 * read_shard state, format.h: a Parquet footer, decoded) is shared by
 * all the slices of that shard until sfs_slice_cache_end_build.  The
 * states no slice is being laid out from are kept while they hold at
 * most SFS_SLICE_STATES_MAX bytes, not counting what they keep for the
 * slices that follow (Parquet's decoded pages), which has a bound of its
 * own for the whole build, whatever the number of shards or of threads:
 * one budget (budget.h, sfs_slice_cache_pages) of pages_max bytes
 * (SFS_SLICE_PAGES_MAX, 256 MiB, unless the cache was made with another)
 * shared by all the states, and within a daemon's bound for all its
 * views (struct sfs_slice_mem) when the cache was made with one; the
 * kept slices too (and then at most half its slices' bound a cache).
 * A state that finds it full lets go of its
 * own least recently used pages when that makes room, else the cache
 * frees the least recently used idle states that keep pages, and
 * failing that the state does without keeping; so a state is never
 * freed only because it keeps big pages.  Beside the budget, each thread
 * laying out a slice holds what its driver is cutting (Parquet: one
 * column, parquet.h).
 * The slices past the cache's room in memory go to a file when the cache
 * has one (sfs_slice_cache_spill): their extents and synthesized bytes,
 * read back when the slice is opened instead of laying it out again.
 * sfs_slice_cache_build hands out a kept slice only while the shard's fd
 * still has the size, mtime, device and inode it was laid out from.
 * Keys name slices: the caller's numbering, one key one list of runs of
 * one shard.  Every function may be called from several threads at once.
 */
#define SFS_SLICE_CACHE_MAX ((size_t)64 << 20)
#define SFS_SLICE_STATES_MAX ((size_t)256 << 20)
#define SFS_SLICE_PAGES_MAX ((uint64_t)256 << 20)

/*
 * One bound on what several caches keep, shared by all of them: a
 * daemon's, for every view it builds and keeps (view.h, sfs_view_opts'
 * mem).  all bounds the pages of every build running and the slices of
 * every view alive together: each cache's pages budget is charged to it
 * too (its parent), and so is every slice kept (through slices, whose
 * parent it is).  slices bounds the kept slices alone, so that the
 * slices of the views alive leave the pages of a build at least
 * all.max - slices.max: a build whose pages do not fit decodes them
 * again for every slice.  So the current epoch's view and the next
 * one's, built ahead (or two builds at once), keep at most all.max
 * together, whatever each cache's own bounds say.
 */
struct sfs_slice_mem {
	struct sfs_budget all;
	struct sfs_budget slices; /* parent: all */
	/* of all the caches, for the status: the slices kept in their
	 * files (sfs_slice_cache_spill), the opens that laid their slice
	 * out (not kept) */
	atomic_uint_least64_t spilled, laid_out;
};

/* A daemon's defaults: 228 MiB in all, of which the slices 16 MiB, so
 * that a build's pages have 212 MiB at least, all of it when the slices
 * leave it (a row group of a million rows of DuckDB's pages, one page a
 * column, decodes to 220 MiB; of 850 000 rows, 187 MiB, and then the
 * daemon peaks within DESIGN.md's 256 MB: docs/formats.md, "Costs"). */
#define SFS_SLICE_MEM_MAX ((uint64_t)228 << 20)
#define SFS_SLICE_MEM_SLICES_MAX ((uint64_t)16 << 20)

/* Start m empty: max in all (0: SFS_SLICE_MEM_MAX), slices_max of it for
 * the kept slices (0: SFS_SLICE_MEM_SLICES_MAX). */
void sfs_slice_mem_init(struct sfs_slice_mem *m, uint64_t max,
			uint64_t slices_max);

struct sfs_slice_cache;

/*
 * A new empty cache for slices of shards of idx (borrowed, must outlive
 * it) keeping at most max bytes of slices (0: SFS_SLICE_CACHE_MAX), its
 * states at most pages_max bytes for the slices that follow, all
 * together (0: SFS_SLICE_PAGES_MAX), both within mem (borrowed, must
 * outlive it; NULL: those bounds only).  Returns 0 or -ENOMEM.
 */
int sfs_slice_cache_new_within(const struct sfs_index *idx, size_t max,
			       uint64_t pages_max, struct sfs_slice_mem *mem,
			       struct sfs_slice_cache **out);

/* sfs_slice_cache_new_within with pages_max SFS_SLICE_PAGES_MAX. */
int sfs_slice_cache_new(const struct sfs_index *idx, size_t max,
			struct sfs_slice_cache **out);

/* Free c, its slices and states.  NULL is a no-op. */
void sfs_slice_cache_free(struct sfs_slice_cache *c);

/*
 * sfs_slice_size of shard sh of c's index holding runs[0..nruns), fd
 * open on it (as the index describes it: the caller checked), under
 * key.  A driver that reads a shard once for all its slices
 * (read_shard) reads it at the first slice of the shard; the slice is
 * kept when the cache has room.  Same errors as sfs_slice_size.
 */
int sfs_slice_cache_size(struct sfs_slice_cache *c, const struct sfs_shard *sh,
			 int fd, uint64_t key, const struct sfs_run *runs,
			 size_t nruns, uint64_t *size, struct sfs_error *err);

/* Free the shards' states: the slices of the build are laid out. */
void sfs_slice_cache_end_build(struct sfs_slice_cache *c);

/*
 * sfs_slice_build through the cache: the slice kept under key (a new
 * slice sharing the kept one's bytes, valid while c is), else built from
 * fd.  A slice is kept only while fd (fstat) has the size and mtime the
 * shard had when it was laid out, else -ESTALE ("<path>: the shard
 * changed since its slices were laid out; rebuild the index with
 * shardfs-index"); another device or inode (the shard deleted and put
 * back) lays it out again from fd.  Errors of sfs_slice_build, -errno of
 * fstat.
 */
int sfs_slice_cache_build(struct sfs_slice_cache *c, const struct sfs_shard *sh,
			  int fd, uint64_t key, const struct sfs_run *runs,
			  size_t nruns, struct sfs_slice **out,
			  struct sfs_error *err);

/*
 * Keep the slices that do not fit in c's memory in a file of dir that no
 * name holds (util.h, sfs_open_unlinked: safe in a directory others may
 * write), made at the first such slice (a view that needs none holds no
 * descriptor for it) and closed with c: each such slice's extents and synthesized bytes
 * are written there when it is laid out (sfs_slice_cache_size), and
 * sfs_slice_cache_build reads them back (a pread of the slice's own
 * bytes, the memory a slice laid out at open would own) rather than lay
 * the slice out again, which for Parquet's big pages decodes them (about
 * a second of CPU for a page of 850 000 rows).  The disk holds the
 * synthesized bytes of every slice past memory; memory, a record of 64
 * bytes a slice (as many as the view has files, like its nodes).  The
 * file stops growing where its file system would keep less than a tenth
 * of its size free, and a write that fails (a full disk) keeps no more
 * slices there either: the ones
 * already written stay, the others are laid out at open, and note
 * (NULL: none) is told once, with arg (which must outlive c); so is a
 * read back that fails, which lays that slice out, and a file that
 * cannot be made (then none is tried again).  Returns 0 or -ENOMEM.
 */
int sfs_slice_cache_spill(struct sfs_slice_cache *c, const char *dir,
			  void (*note)(void *arg, const char *msg), void *arg,
			  struct sfs_error *err);

/* What a cache keeps and what its opens cost, for the status and tests. */
struct sfs_slice_cache_stats {
	size_t kept; /* slices kept in memory */
	size_t kept_mem; /* their bytes (sfs_slice_cache_mem) */
	size_t spilled; /* slices kept in the file */
	uint64_t spilled_bytes; /* the file's bytes for them */
	uint64_t laid_out; /* opens that laid their slice out (of a
			    * driver with read_shard: format.h) */
};

void sfs_slice_cache_stats(struct sfs_slice_cache *c,
			   struct sfs_slice_cache_stats *st);

/* The budget of what c's states keep for the slices that follow (its
 * used and peak bytes: budget.h), valid while c is. */
struct sfs_budget *sfs_slice_cache_pages(struct sfs_slice_cache *c);

/* The bytes and the number of the slices c keeps in memory. */
size_t sfs_slice_cache_mem(struct sfs_slice_cache *c);
size_t sfs_slice_cache_count(struct sfs_slice_cache *c);

/* The extent holding byte pos of the slice (pos < size). */
size_t sfs_slice_find(const struct sfs_slice *s, uint64_t pos);

/*
 * Read up to len bytes of the slice at pos into buf, the shard's bytes from
 * fd.  Returns the count (0 at or past the end) or -errno.  A source that
 * ends early gives -EIO, never short or wrong bytes.
 */
ssize_t sfs_slice_pread(const struct sfs_slice *s, int fd, void *buf,
			size_t len, uint64_t pos);

#endif
