/*
 * Format drivers: where samples begin and end inside a shard, and which
 * bytes a slice of a shard must carry besides its samples.
 *
 * A driver is a table of functions and of the behaviour it declares
 * (struct sfs_format_ops), one file each (format_tar.c, format_jsonl.c,
 * ...), listed in format.c's table: adding a format is one new file, one
 * line in that table and its line in CMakeLists.txt (docs/formats.md).  A scan never
 * trusts the shard: every length it reads is checked against the file size
 * before use, and a malformed shard is an error whose message names the
 * file and the byte offset.  Drivers know nothing of the index on disk, of
 * the plan or of FUSE.
 *
 * A sliceable shard has nsamples + 1 boundaries: bounds[i] is the byte where
 * sample i begins, bounds[nsamples] the byte where the last one ends.  A
 * slice is: bytes [0, prefix_len) of the shard, then for each run of
 * consecutive samples [a, b) the bytes [bounds[a], bounds[b]) followed by the
 * driver's run suffix, then the driver's slice suffix.  A driver whose
 * slices are not byte ranges of its samples (Parquet: rows live in column
 * chunks) lays out slices itself (lay_out), and its shards have no
 * boundaries in the index.
 */
#ifndef SHARDFS_FORMAT_H
#define SHARDFS_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shardfs/error.h"

struct sfs_digest; /* digest.h */
struct sfs_shard; /* shard.h */
struct sfs_share; /* share.h */
struct sfs_budget; /* budget.h */

/* Samples [first, first + count) of a shard. */
struct sfs_run {
	uint64_t first;
	uint64_t count;
};

/*
 * Where lay_out puts a slice's bytes, in order: len bytes of the shard at
 * src when mem is NULL, else the len bytes at mem, which the slice takes
 * (malloc'd; freed with the slice, or at once when the slice is only
 * measured).  Returns 0, or -ENOMEM (mem is freed then).
 */
typedef int (*sfs_extent_fn)(void *arg, uint64_t src, uint64_t len, void *mem);

/* Called once per sample read, in order, with its digest (see samples). */
typedef int (*sfs_sample_fn)(void *arg, uint64_t sample,
			     const unsigned char digest[32]);

/*
 * Called with a piece of a shard's boundaries, n of them, in order, as a
 * scan finds them (see sfs_scan_in.bounds_fn): bounds is borrowed for the
 * call.  Returns 0, or nonzero to stop the scan, which fails then.
 */
typedef int (*sfs_bounds_fn)(void *arg, const uint64_t *bounds, uint64_t n);

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
	/* with digest_fn, a SHA-256 nothing was fed since it was made or
	 * last finished, or NULL: a driver that hashes on helper threads
	 * may feed it the whole file too (size bytes), on a thread that has
	 * no sample to hash at the time, and set file_hashed; else it is
	 * left as it was given */
	struct sfs_digest *file_digest;
	/* the directory path is relative to, for a driver whose shard stands
	 * for a directory (dataset); others leave it 0 and such a driver
	 * fails with a message */
	int dirfd;
	/* 0, or the samples a shard may hold at most: a larger one fails
	 * its scan (the driver's out-of-memory error, with out->nsamples past
	 * it) before its boundaries cost more (sfs_format_scan only) */
	uint64_t max_samples;
	/* when set, a scan hands its boundaries to bounds_fn a piece at a
	 * time as it finds them, so that a shard of 100 M samples never
	 * holds them whole (sfs_format_scan only): out->bounds then holds
	 * only those after the first out->bounds_passed */
	sfs_bounds_fn bounds_fn;
	void *bounds_arg;
	/* the threads a scan may run on, the calling one included (a
	 * Parquet scan that digests 65 536 rows or more hashes on helper
	 * threads); 0: as many as are useful, up to sfs_pool_cpus() */
	unsigned threads;
	/* when set, threads is not read: a scan takes its helpers from
	 * share (share.h) once it knows it will use them, and gives them
	 * back before it returns */
	struct sfs_share *share;
};

/* What a scan learns.  bounds is heap memory the caller takes (the
 * boundaries not handed to sfs_scan_in.bounds_fn). */
struct sfs_scan {
	uint64_t nsamples;
	bool sliceable; /* bounds is set: the shard is cut at its bounds */
	uint64_t *bounds; /* nsamples + 1 entries when sliceable */
	uint64_t prefix_len; /* bytes that start every slice */
	bool newline_missing; /* the last line lacks its '\n' (jsonl) */
	bool digested; /* digest_fn had every sample */
	bool file_hashed; /* file_digest had the whole file */
	/* sfs_scan_in's, for the drivers' boundaries (sfs_bounds_push) */
	uint64_t max_samples;
	sfs_bounds_fn bounds_fn;
	void *bounds_arg;
	/* boundaries handed to bounds_fn: bounds[0] is boundary number
	 * bounds_passed, and bounds holds nsamples + 1 - bounds_passed of a
	 * sliceable shard */
	uint64_t bounds_passed;
};

/* A file of a reader's dataset (dataset_view): synthesized bytes, or a file
 * of the source shown as it is. */
struct sfs_dataset_file {
	char *path; /* in the reader's dataset: "_versions/1.manifest", ... */
	unsigned char *bytes; /* its bytes, len of them; NULL for a data file */
	size_t len;
	char *source; /* a data file: the source's, relative to dirfd */
	uint64_t size; /* a data file: its size and mtime, found by the */
	int64_t mtime_ns; /* build, which a read must find again */
	/* who may read it: a data file's owner, group and mode as the
	 * build found them, which the view narrows by the directories on
	 * its path; a synthesized file's the view gives it (the meet of the
	 * files it describes: view.h, sfs_view_access) */
	uint32_t uid, gid;
	uint16_t mode;
};

/* A reader's dataset: its files (directories implied by their paths) and
 * the rows it holds. */
struct sfs_dataset_view {
	char *root; /* the dataset's directory, relative to dirfd ("": dirfd) */
	struct sfs_dataset_file *files;
	size_t nfiles;
	uint64_t rows;
};

/* Free a dataset view.  NULL is a no-op. */
void sfs_dataset_view_free(struct sfs_dataset_view *v);

/*
 * What mkdata asks a driver to write: deterministic synthetic shards, every
 * size, count and byte drawn from the plan's PRNG keyed by seed (format_i.h has
 * the helpers drivers use).
 */
struct sfs_synth {
	uint64_t seed;
	uint64_t samples_lo, samples_hi; /* samples per shard */
	uint64_t size_lo, size_hi; /* bytes per sample or member */
	uint64_t members_lo, members_hi; /* files per sample (1..3) */
	bool long_names; /* tar: member paths that need pax headers */
	unsigned char *buf; /* size_hi + 8 bytes of scratch */
};

/*
 * A driver: what is specific to one format, and all of it.  Code outside
 * the drivers never asks which driver a shard has; it asks these fields.
 */
struct sfs_format_ops {
	const char *name; /* as in the index and in --format */
	/* file name endings that select the driver, NULL-terminated; the
	 * first one names the shards mkdata writes */
	const char *const *suffixes;
	bool allow_empty; /* an empty file is a valid shard */
	/*
	 * Shards are plain files in a directory tree (ImageFolder): files
	 * whose paths share a key (sfs_format_key_len) together are one
	 * sample, and the view keeps their sub-directories.
	 */
	bool tree;
	/*
	 * A shard is one unit of whole-file samples: never cut, and every
	 * sample's digest is the digest of the whole file.
	 */
	bool whole_file;
	/*
	 * The sample count is declared (shardfs-index --samples-per-shard,
	 * in sfs_scan_in.declared), not found in the bytes.
	 */
	bool declared;
	/*
	 * Its files concatenate: a shard is its samples end to end, each a
	 * byte range of it, so that a source that grows (follow=1,
	 * docs/follow.md) can be served as one stream of its shards, in
	 * windows whose files end in the first of its suffixes.
	 */
	bool concatenates;
	/*
	 * What one run of a slice becomes when each run is a piece of its
	 * own in the slice's structure, costing a build and a read of its
	 * own ("row group": Parquet cuts a row group per run; "fragment":
	 * Lance); NULL when runs are byte ranges, costing only their bytes.
	 * A view refuses shuffle=samples (one-sample runs) when a reader's
	 * files would hold too many (view.h, SFS_VIEW_PIECES_MAX).
	 */
	const char *run_piece;
	/*
	 * Views of this format are not built yet: the daemon refuses to mount
	 * a source holding such shards, with this sentence.  NULL: served.
	 */
	const char *no_view;
	/*
	 * Its samples op is its scan's digest pass (digest_fn), which may
	 * hash on helper threads: sfs_format_samples bounds them.
	 */
	bool samples_threaded;

	/*
	 * A directory that is one shard (a dataset: Lance): called by the
	 * indexer's walk for each directory, rel below dirfd ("" for the
	 * source itself).  Returns 1 and a heap path (relative to dirfd,
	 * inside rel) of the file that stands for the dataset in the index
	 * at version (0: its newest), whose scan reads the rest through
	 * sfs_scan_in.dirfd; 0 when rel is not one; a negative errno with a
	 * message (a version the dataset has not: -ENOENT).  The walk does
	 * not look inside a dataset.  NULL: the format has no such
	 * directories.
	 */
	int (*dataset)(int dirfd, const char *rel, uint64_t version,
		       char **shard, struct sfs_error *err);

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
	 * Lay out the slice of sh (open on fd) holding runs[0 .. nruns), in
	 * that order, each within the shard, by calls to add(arg, ...).  For
	 * formats that need no boundaries (the index has none for their
	 * shards), in place of prefix, runs and suffixes.  Returns 0, or a
	 * negative errno with a message naming sh->path (a shard that no
	 * longer matches the index: -ESTALE; malformed: -EINVAL).  NULL: the
	 * slice is laid out from the boundaries.
	 */
	int (*lay_out)(int fd, const struct sfs_shard *sh,
		       const struct sfs_run *runs, size_t nruns,
		       sfs_extent_fn add, void *arg, struct sfs_error *err);
	/*
	 * lay_out in two steps, for a caller that lays out many slices of
	 * one shard (a view's build, slice.h's sfs_slice_cache): read_shard
	 * reads once what every slice of sh needs (Parquet: the footer) into
	 * *state, taken by the caller, and *mem, the bytes it holds; its
	 * errors are lay_out's.  lay_out_from then lays out a slice as
	 * lay_out would, from that state (borrowed: several threads may use
	 * one state at once, each with its own fd of the same shard).  What
	 * a state keeps for the slices that follow (Parquet's decoded pages)
	 * it keeps thread-safely, beside *mem, each byte charged to budget
	 * (borrowed, budget.h: one for all the states of a build, its owner
	 * freeing idle states when a state finds no room; NULL: a bound of
	 * the state's own), and gives back when it lets go of it.
	 * free_shard frees a state (NULL is a no-op) and what it keeps.
	 * All three or none; lay_out is then read_shard, lay_out_from and
	 * free_shard.  shard_mem, when set, says the bytes a state keeps now
	 * charged to its budget; NULL: none.
	 */
	int (*read_shard)(int fd, const struct sfs_shard *sh,
			  struct sfs_budget *budget, void **state, size_t *mem,
			  struct sfs_error *err);
	int (*lay_out_from)(const void *state, int fd,
			    const struct sfs_shard *sh,
			    const struct sfs_run *runs, size_t nruns,
			    sfs_extent_fn add, void *arg,
			    struct sfs_error *err);
	void (*free_shard)(void *state);
	size_t (*shard_mem)(const void *state);
	/*
	 * A shard that stands for a dataset (dataset) is shown to a reader as
	 * a dataset of its own, never as slices: the files of the dataset
	 * holding exactly samples runs[0 .. nruns) of sh, in that order.  fd
	 * is sh's file (checked to be as indexed), open for reading, dirfd
	 * the directory sh->path is relative to.  Returns 0 and a new view
	 * in *out, or a negative errno with a message naming sh->path (a
	 * dataset that changed since it was indexed: -ESTALE).  NULL: the
	 * format's views are slices.
	 */
	int (*dataset_view)(int dirfd, const struct sfs_shard *sh, int fd,
			    const struct sfs_run *runs, size_t nruns,
			    struct sfs_dataset_view **out,
			    struct sfs_error *err);

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

	/*
	 * Write synthetic shard number shard at path (a file; for a tree
	 * format, a directory to create and fill).  Returns 0 or -errno with
	 * a message naming path.  NULL: mkdata cannot write this format.
	 */
	int (*synthesize)(const struct sfs_synth *s, uint64_t shard,
			  const char *path, struct sfs_error *err);
};

/*
 * ops->samples(fd, path, fn, arg, err) on the threads of share: a driver
 * whose samples may hash on helper threads (samples_threaded) takes them
 * from share when it will use them (sfs_scan_in.share).  NULL share: as
 * ops->samples.
 */
int sfs_format_samples(const struct sfs_format_ops *ops, int fd,
		       const char *path, struct sfs_share *share,
		       sfs_sample_fn fn, void *arg, struct sfs_error *err);

/* The driver called name ("tar", "jsonl", ...), or NULL. */
const struct sfs_format_ops *sfs_format_by_name(const char *name);

/*
 * The driver for a file name by its ending (the drivers' suffixes: .tar,
 * .tar.gz, .jsonl, .tfrecord, .parquet, ...; the longest that matches
 * wins), or NULL when the name says nothing we know.
 */
const struct sfs_format_ops *sfs_format_detect(const char *filename);

/*
 * The length of the sample key of a member or file path: the path up to
 * the first dot of its basename ("a/b/x.jpg" -> 3, "a/b/x" -> 5).
 */
size_t sfs_format_key_len(const char *path);

/*
 * Whether directory rel below dirfd is a dataset of a driver (ops, or any
 * driver when ops is NULL): 1 with *found and *shard as the driver's
 * dataset op gives them at version (0: the newest), 0, or its negative
 * errno.
 */
int sfs_format_dataset(const struct sfs_format_ops *ops, int dirfd,
		       const char *rel, uint64_t version,
		       const struct sfs_format_ops **found, char **shard,
		       struct sfs_error *err);

/* The i-th driver of the format table, or NULL past the last. */
const struct sfs_format_ops *sfs_format_at(size_t i);

/* The i-th driver whose files concatenate (the ones follow=1 can follow),
 * in the table's order, or NULL past the last. */
const struct sfs_format_ops *sfs_format_concatenating(size_t i);

/* A driver whose shards are files (not directories: Lance), which
 * shardfs-index --format may name. */
bool sfs_format_of_files(const struct sfs_format_ops *ops);

/*
 * The names of the drivers keep says yes to (NULL: every one), from the
 * from-th such on, into buf (len bytes, cut short if need be): "a, b" and
 * the last joined by last (" and ", " or ").  Returns buf.
 */
const char *sfs_format_names(bool (*keep)(const struct sfs_format_ops *),
			     size_t from, const char *last, char *buf,
			     size_t len);

/* sfs_format_names of the drivers whose files concatenate. */
const char *sfs_format_concatenating_names(size_t from, const char *last,
					   char *buf, size_t len);

/* Every driver's file name endings, in the table's order, separated by
 * spaces, into buf (len bytes, cut short if need be).  Returns buf. */
const char *sfs_format_suffix_list(char *buf, size_t len);

/*
 * Scan through ops, after the checks every driver shares (an empty file is
 * refused unless ops->allow_empty).  out is zeroed first.
 */
int sfs_format_scan(const struct sfs_format_ops *ops,
		    const struct sfs_scan_in *in, struct sfs_scan *out,
		    struct sfs_error *err);

#endif
