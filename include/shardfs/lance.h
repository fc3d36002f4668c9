/*
 * Lance datasets: a directory of data files (data/<name>.lance), one manifest
 * per version (_versions/<name>.manifest, protobuf `Manifest`), and deletion
 * files (_deletions/<name>.arrow or .bin) that mark rows of a fragment deleted.
 * docs/formats.md describes what is read and what is refused.
 *
 * Nothing here trusts the dataset: the manifest and the deletion files are
 * decoded with a bound on every length and count (lance_i.h), nothing is
 * sized from a count read from a file, and every error names the file,
 * the byte offset, what is wrong and what to do.  A dataset is read through
 * a directory descriptor with every path resolved beneath it (no symlinks,
 * no "..").
 *
 * A dataset's samples are its live rows: the rows of every fragment, in the
 * manifest's fragment order, less the rows its deletion file marks.
 */
#ifndef SHARDFS_LANCE_H
#define SHARDFS_LANCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shardfs/error.h"
#include "shardfs/format.h"

/* The Lance driver (format.c's table holds it too): its name, its
 * operations, for code that reads Lance's own files (the auditor). */
extern const struct sfs_format_ops sfs_format_lance;

/* The directory of a dataset that holds its manifests. */
#define SFS_LANCE_VERSIONS "_versions"

/* Reader feature flags (Manifest.reader_feature_flags) this reader knows. */
#define SFS_LANCE_FLAG_DELETION_FILES 1u
#define SFS_LANCE_FLAG_STABLE_ROW_IDS 2u
#define SFS_LANCE_FLAG_V2_FORMAT 4u /* deprecated, means nothing */
#define SFS_LANCE_FLAG_TABLE_CONFIG 8u
#define SFS_LANCE_FLAG_BASE_PATHS 16u /* refused: files outside the dataset */
#define SFS_LANCE_FLAG_NO_TXN_FILE 32u
#define SFS_LANCE_FLAGS_READ                                             \
	(SFS_LANCE_FLAG_DELETION_FILES | SFS_LANCE_FLAG_STABLE_ROW_IDS | \
	 SFS_LANCE_FLAG_V2_FORMAT | SFS_LANCE_FLAG_TABLE_CONFIG |        \
	 SFS_LANCE_FLAG_NO_TXN_FILE)

/* A fragment holds at most 2^32 rows: a row's address is (fragment, u32). */
#define SFS_LANCE_ROWS_MAX ((uint64_t)1 << 32)

/*
 * The most the deletion bitmaps of a reader's dataset may take
 * (sfs_lance_view_build), counted before each is written: a fragment of
 * 2^32 rows of which a reader keeps a few takes ~0.9 MB (run containers);
 * only runs cut fine over many large fragments come near it.
 */
#define SFS_LANCE_VIEW_MAX ((uint64_t)256 << 20)

/* Files read whole are refused above these sizes. */
#define SFS_LANCE_MANIFEST_MAX ((uint64_t)256 << 20)
#define SFS_LANCE_DELETION_MAX ((uint64_t)256 << 20)

enum sfs_lance_deletion_type {
	SFS_LANCE_DELETION_ARROW =
		0, /* .arrow: Arrow IPC file, one u32 array */
	SFS_LANCE_DELETION_BITMAP = 1, /* .bin: portable Roaring bitmap */
};

struct sfs_lance_deletion {
	bool present;
	uint32_t type; /* enum sfs_lance_deletion_type */
	uint64_t read_version, id;
	uint64_t num_deleted; /* as the manifest says; 0 may mean unknown */
	uint64_t at; /* manifest byte where the DeletionFile message is */
};

struct sfs_lance_data_file {
	char *path; /* relative to the dataset's data/ */
	int32_t *fields; /* field ids of its columns */
	size_t nfields;
	uint64_t size; /* file_size_bytes; 0: unknown */
	uint64_t at; /* manifest byte where the DataFile message is */
};

struct sfs_lance_fragment {
	uint64_t id;
	uint64_t physical_rows; /* rows in the data files, deleted ones too */
	/* NULL and 0 in a dataset opened with sfs_lance_open_view: its data
	 * files are decoded only for the fragments a view uses */
	struct sfs_lance_data_file *files;
	size_t nfiles;
	struct sfs_lance_deletion deletion;
	uint64_t deleted; /* rows the deletion file marks (sfs_lance_open) */
	uint64_t at; /* manifest byte where the DataFragment message is */
	uint64_t len; /* and its length in bytes */
};

struct sfs_lance_manifest {
	uint64_t version;
	uint64_t reader_flags, writer_flags;
	struct sfs_lance_fragment *fragments; /* in the manifest's order */
	size_t nfragments;
};

/* A dataset opened at one version: its manifest and its live rows. */
struct sfs_lance_dataset {
	char *manifest_path; /* relative to the directory it was opened in */
	unsigned char *buf; /* the manifest file's bytes, as read and decoded */
	size_t len;
	struct sfs_lance_manifest *m; /* decoded from buf */
	uint64_t rows; /* live rows: physical less deleted, every fragment */
};

/*
 * Decode a manifest file: its len bytes (the whole file), named path in
 * messages.  The file is [...][u32 length][Manifest][...][u64 position of
 * that length][u16 major][u16 minor]["LANC"]; the message is decoded field
 * by field, unknown fields skipped.  Checks: the magic and the position,
 * no reader feature flag but SFS_LANCE_FLAGS_READ, no data or deletion
 * file outside the dataset (base_id), every data file path relative and
 * without "..", every fragment's physical_rows given and at most
 * SFS_LANCE_ROWS_MAX; what it decodes to (its arrays at the size they
 * grow to, and its paths) at most SFS_LANCE_DECODED_MAX, charged before
 * each allocation.  Returns 0 and a new manifest in *out, -EINVAL
 * ("<path>: byte <offset>: <what>; <fix>"), -EFBIG past that budget, or
 * -ENOMEM.
 */
int sfs_lance_manifest_parse(const unsigned char *buf, size_t len,
			     const char *path, struct sfs_lance_manifest **out,
			     struct sfs_error *err);

/* Free a manifest.  NULL is a no-op. */
void sfs_lance_manifest_free(struct sfs_lance_manifest *m);

/*
 * The name (in _versions/) of a manifest of the dataset whose directory
 * is rel below dirfd ("" for dirfd itself): of version want, or when want
 * is 0 of the newest.  A version N has a name under either scheme: V1
 * "{N}.manifest" (decimal, no padding: the older scheme, which Lance
 * still reads), V2 "{2^64 - 1 - N:020}.manifest" (20 digits, so that
 * names list newest first; pylance 14.0.2's default); a name of 20 digits
 * is read as V2.  Other names (latest_version_hint.json,
 * temporary files) are ignored.  Returns 1 with *name (heap, caller frees)
 * and *version; 0 when rel has no _versions/ directory (not a Lance
 * dataset), also when _versions/ holds no manifest (a directory of that
 * name in something else); -ENOENT when want is not one of the versions
 * there (the message lists those: "1-5, 7"); -EIO, -ENOMEM.
 */
int sfs_lance_find(int dirfd, const char *rel, uint64_t want, char **name,
		   uint64_t *version, struct sfs_error *err);

/* sfs_lance_find of the newest version. */
int sfs_lance_latest(int dirfd, const char *rel, char **name, uint64_t *version,
		     struct sfs_error *err);

/* Called for each run of deleted rows [first, first + count), in order. */
typedef int (*sfs_lance_deleted_fn)(void *arg, uint64_t first, uint64_t count);

/*
 * Decode a deletion file of type type (its len bytes, named path): an
 * Arrow IPC file of one uint32 or int32 array of row offsets, or a
 * portable Roaring bitmap (CRoaring's format, with or without run
 * containers).  Every offset must be below physical_rows and appear once.
 * Sets *deleted to the number of rows marked, and calls fn (when not
 * NULL) with the deleted runs in increasing order.  Returns 0, -EINVAL
 * with "<path>: byte <offset>: <what>", -ENOMEM, or fn's nonzero result.
 */
int sfs_lance_deletion_parse(const unsigned char *buf, size_t len, int type,
			     const char *path, uint64_t physical_rows,
			     sfs_lance_deleted_fn fn, void *arg,
			     uint64_t *deleted, struct sfs_error *err);

/*
 * The path of a fragment's deletion file, relative to the dataset:
 * "_deletions/{fragment}-{read_version}-{id}.{arrow|bin}".  Returns a heap
 * string or NULL.
 */
char *sfs_lance_deletion_path(const struct sfs_lance_fragment *f);

/*
 * Open the dataset whose manifest is manifest_path (relative to dirfd,
 * "<dataset>/_versions/<name>.manifest"): decode it, check that every data
 * file is a regular file beneath the dataset (of file_size_bytes when the
 * manifest gives it) holding its fragment's physical_rows (its footer's
 * row count; a legacy file, whose footer has none, at least a bit a row),
 * read every deletion file and count the live rows.
 * When fd >= 0 the manifest is read from it (open on manifest_path).
 * Errors as the parsers', and -EINVAL for a data or deletion file that is
 * missing or not what the manifest says (the message names it, the
 * manifest byte that refers to it and the fix), -EIO.  Returns 0 and a new
 * dataset in *out.
 */
int sfs_lance_open(int dirfd, const char *manifest_path, int fd,
		   struct sfs_lance_dataset **out, struct sfs_error *err);

/*
 * sfs_lance_open for a reader's view (sfs_lance_view_build) of a dataset
 * the index counted with sfs_lance_open, its manifest checked to be the
 * one indexed (sfs_view_open_shard: its size and mtime): what that open
 * checked of the whole dataset is not checked again, so that the views
 * of a mount cost the dataset's fragments once, not once per reader.  The
 * data files are not looked at (sfs_lance_view_build checks those it
 * serves), a fragment's data files are not decoded (files NULL), and a
 * fragment's deleted rows are the manifest's num_deleted_rows: its
 * deletion file is read only when the manifest does not give the count
 * (sfs_lance_view_build reads those of the fragments it uses, and checks
 * the count again).  Errors as sfs_lance_open's.
 */
int sfs_lance_open_view(int dirfd, const char *manifest_path, int fd,
			struct sfs_lance_dataset **out, struct sfs_error *err);

/* Free a dataset.  NULL is a no-op. */
void sfs_lance_free(struct sfs_lance_dataset *ds);

/*
 * The live rows of fragment f (of a dataset opened with sfs_lance_open),
 * in order, as runs [first, first + count) of physical row offsets: the
 * complement of its deletion file's runs.  Reads the deletion file again
 * through dirfd.  Returns 0, fn's nonzero result, the errors of
 * sfs_lance_open, or -ESTALE when the file no longer marks f's deleted
 * rows (one replaced since ds was opened).
 */
int sfs_lance_live_runs(int dirfd, const struct sfs_lance_dataset *ds, size_t f,
			sfs_lance_deleted_fn fn, void *arg,
			struct sfs_error *err);

/*
 * The files of a Lance dataset holding exactly the live rows runs[0 ..
 * nruns) of ds (numbered as its samples: live rows in fragment order), in
 * that order, its data not copied: "_versions/<v>.manifest"
 * (synthesized), "_deletions/<n>-1-<id>.bin" (synthesized Roaring bitmaps,
 * one per fragment that needs one) and "data/<name>" for each data file
 * used, to be shown as the source's file (its size and mtime as found
 * now).  <v> (below 10^18) and <id> are the first 8 bytes of the SHA-256
 * of the file's other bytes: a name identifies its bytes.  Each run, cut at fragment ends, is one
 * fragment of the new manifest, numbered from 0 in run order, whose
 * deletion file deletes every row of its data files but the run's.  The
 * manifest is the source's without its fragments, transaction, index
 * section, branch and stable row ids; everything else (schema, data
 * format, config) copied from ds->buf.  Only the fragments the runs use
 * are looked at: their data files decoded (ds may come from
 * sfs_lance_open_view) and checked as sfs_lance_open checks them, their
 * deletion files read again through dirfd (they may have changed).
 * Returns 0 and a new view, -EINVAL for a run past the dataset's rows or
 * a data or deletion file that is not what the manifest says (messages
 * as sfs_lance_open's), -ESTALE, -ENOMEM.
 */
int sfs_lance_view_build(int dirfd, const struct sfs_lance_dataset *ds,
			 const struct sfs_run *runs, size_t nruns,
			 struct sfs_dataset_view **out, struct sfs_error *err);

/*
 * The dataset directory of a manifest path "<dataset>/_versions/<name>"
 * ("" for "_versions/<name>"): a heap string, or NULL when the path is not
 * of that form (or without memory).
 */
char *sfs_lance_root(const char *manifest_path);

/* What sfs_lance_view_read hands on, in the manifest's order. */
struct sfs_lance_view_reader {
	/* before the rows of fragment f (its number in the manifest), with
	 * the number of its live rows; NULL: not called */
	int (*fragment)(void *arg, size_t f, uint64_t live);
	/* each data file of that fragment: its path below the dataset's
	 * data/ and the size the manifest gives (0: none); NULL: not called */
	int (*data_file)(void *arg, const char *path, uint64_t size);
	/* each live row: its number among the dataset's rows and its
	 * digest, the one the index gives the source row it names */
	sfs_sample_fn row;
	void *arg;
};

/*
 * Read back the Lance dataset in directory dirfd (named path in messages;
 * a reader's dataset of a view, for the auditor) as Lance would: its
 * newest manifest, every fragment's deletion file (with the checks of
 * sfs_lance_open), every live row.  The data files are not opened: they
 * are the caller's to check against the source.  Returns 0, a callback's
 * nonzero result, -EINVAL for a directory without a manifest, or the
 * errors of sfs_lance_open.
 */
int sfs_lance_view_read(int dirfd, const char *path,
			const struct sfs_lance_view_reader *rd,
			struct sfs_error *err);

#endif
