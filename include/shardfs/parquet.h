/*
 * The Parquet footer: FileMetaData (Thrift compact protocol) decoded with a
 * bound on everything, and re-emitted for a slice of the file; and the
 * pages of its column chunks, read, cut to rows and digested per row
 * (below, "pages").
 *
 * A Parquet file is "PAR1", the column chunks, the footer, the footer's
 * length (le32) and "PAR1".  sfs_parquet_footer_read reads and checks the
 * footer; the result owns a copy of the footer's bytes, and every struct it
 * describes keeps the byte range it was decoded from, so that
 * sfs_parquet_footer_write can copy verbatim whatever it does not change,
 * including fields this decoder does not know.
 *
 * Invariants of a decoded struct sfs_parquet_meta (checked, or the read
 * fails): no negative row count, size, offset or value count; the row
 * groups' num_rows add up to num_rows; the schema is one well-formed tree
 * whose leaves number nleaves; every row group has nleaves column chunks,
 * each with its ColumnMetaData, and each chunk's bytes
 * [sfs_parquet_chunk_start, + total_compressed_size) lie within
 * [4, data_end), data_end being where the footer begins, hold its first
 * data page and its dictionary page, and are no other chunk's; a chunk of
 * a row group of no rows may have no data page (data_page_offset 0, as
 * pyarrow writes an empty table): its bytes are then its dictionary
 * page's, or none (start 0, total_compressed_size 0).  Memory
 * grows with what is decoded, never with a count read from the file, and
 * is capped: the chunks of all row groups, their encodings and their
 * paths are one array each (chunk_pool, ...), about 2.5 times a real
 * footer's size, 7 times the most compact one's (a 14.7 MB footer of
 * 400 000 row groups: ~100 MB); the capacity an array grows to is
 * charged before it grows, and a footer whose arrays would pass
 * SFS_PARQUET_DECODED_MAX is refused.
 * Encrypted files (a "PARE" footer, or a plaintext footer with an
 * encryption algorithm) are refused.
 *
 * This module knows nothing of indexes, plans or FUSE: it maps bytes to a
 * description and back.  Nothing here is thread-safe beyond "distinct
 * objects in distinct threads".
 */
#ifndef SHARDFS_PARQUET_H
#define SHARDFS_PARQUET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shardfs/error.h"

struct sfs_digest;

/* The largest footer read: bigger ones are refused (a memory bound). */
#define SFS_PARQUET_FOOTER_MAX (64u << 20)
/*
 * The most a footer may decode to (the structs below, not counting the
 * footer's own copy): larger ones are refused with -EFBIG.  A chunk takes
 * about 200 bytes decoded: real footers, whose chunks carry statistics
 * (~90 bytes each in the file), decode to ~2.5 times their size and stay
 * under it up to SFS_PARQUET_FOOTER_MAX; footers of bare minimal chunks
 * (~35 bytes each) up to ~1.2 million chunks, 40 MB.
 */
#define SFS_PARQUET_DECODED_MAX (256u << 20)

/* Bytes borrowed from the footer copy of a struct sfs_parquet_meta. */
struct sfs_parquet_bytes {
	const unsigned char *p;
	size_t len;
};

/* One SchemaElement; -1 (or a NULL .p) where the field is absent. */
struct sfs_parquet_schema {
	struct sfs_parquet_bytes name;
	int32_t type; /* Type: 0 BOOLEAN .. 7 FIXED_LEN_BYTE_ARRAY */
	int32_t type_length;
	int32_t repetition_type; /* 0 REQUIRED, 1 OPTIONAL, 2 REPEATED */
	int32_t num_children;
	int32_t converted_type;
	struct sfs_parquet_bytes logical_type; /* the encoded struct */
};

/*
 * One ColumnChunk and its ColumnMetaData.  Optional fields are -1 when
 * absent.  dictionary_page_offset 0 is taken as absent (some writers write
 * 0 for "no dictionary"; no page can begin inside the magic).
 */
struct sfs_parquet_chunk {
	int64_t file_offset;
	int32_t type;
	int32_t codec; /* 0 UNCOMPRESSED, 1 SNAPPY, 2 GZIP, ... 6 ZSTD */
	size_t nencodings;
	int32_t *encodings;
	size_t npath;
	struct sfs_parquet_bytes *path_in_schema;
	int64_t num_values;
	int64_t total_uncompressed_size;
	int64_t total_compressed_size;
	int64_t data_page_offset;
	int64_t index_page_offset;
	int64_t dictionary_page_offset;
	bool has_statistics;
	int64_t offset_index_offset;
	int32_t offset_index_length;
	int64_t column_index_offset;
	int32_t column_index_length;
	int64_t bloom_filter_offset;
	int32_t bloom_filter_length;
	size_t at, len; /* the ColumnChunk's bytes in the footer */
};

struct sfs_parquet_row_group {
	int64_t num_rows;
	int64_t total_byte_size;
	size_t nchunks; /* == nleaves of the meta */
	struct sfs_parquet_chunk *chunks;
	size_t at, len; /* the RowGroup's bytes in the footer */
};

struct sfs_parquet_key_value {
	struct sfs_parquet_bytes key;
	struct sfs_parquet_bytes value; /* .p NULL when absent */
};

struct sfs_parquet_meta {
	char *path; /* owned copy, names the file in messages */
	uint64_t size; /* of the file */
	uint64_t data_end; /* where the footer begins */
	unsigned char *footer; /* owned copy of the FileMetaData bytes */
	size_t footer_len;
	int32_t version;
	int64_t num_rows;
	size_t nschema;
	struct sfs_parquet_schema *schema;
	size_t nleaves;
	size_t nrow_groups;
	struct sfs_parquet_row_group *row_groups;
	size_t nkey_values;
	struct sfs_parquet_key_value *key_values;
	struct sfs_parquet_bytes created_by; /* .p NULL when absent */
	/* what the row groups' chunks and the chunks' encodings and paths
	 * point into: one array each, in footer order */
	struct sfs_parquet_chunk *chunk_pool;
	size_t nchunk_pool;
	int32_t *encoding_pool;
	size_t nencoding_pool;
	struct sfs_parquet_bytes *path_pool;
	size_t npath_pool;
};

/*
 * Read and check the footer of the Parquet file open on fd, size bytes
 * long; path only names the file in messages.  Returns 0 and a new meta in
 * *out (free with sfs_parquet_meta_free), or: -EINVAL for a file that is
 * not Parquet or whose footer is malformed or inconsistent, the message
 * naming the file, the byte offset and what is wrong; -ENOTSUP for an
 * encrypted file; -EFBIG for a footer over SFS_PARQUET_FOOTER_MAX or one
 * that decodes to more than SFS_PARQUET_DECODED_MAX; -EIO
 * or another -errno when reading fails; -ENOMEM.  *out is untouched on
 * failure.
 */
int sfs_parquet_footer_read(int fd, const char *path, uint64_t size,
			    struct sfs_parquet_meta **out,
			    struct sfs_error *err);

/* Free m and everything it holds.  NULL is a no-op. */
void sfs_parquet_meta_free(struct sfs_parquet_meta *m);

/* Where a chunk's bytes begin: its dictionary page, else its first data
 * page (0 for a chunk of no bytes, which has neither). */
int64_t sfs_parquet_chunk_start(const struct sfs_parquet_chunk *c);

/*
 * A column chunk of a slice.  The chunk's bytes now begin at start; they
 * are total_compressed_size long and hold num_values values.  Every offset
 * of the chunk (data, dictionary and index page, file_offset when not 0)
 * moves by start - sfs_parquet_chunk_start(original): whatever precedes
 * the first data page (a dictionary page) keeps its size.  file_offset and
 * index_page_offset, which no reader follows, become 0 if moving them
 * would make them negative.  A chunk whose
 * sizes or num_values differ from the original's is "changed".
 */
struct sfs_parquet_chunk_edit {
	int64_t start;
	int64_t total_compressed_size;
	int64_t total_uncompressed_size;
	int64_t num_values;
};

/* One row group of a slice: row group row_group of the meta, now holding
 * num_rows rows, its chunks as chunks[0 .. nleaves) say (borrowed; never
 * NULL when nleaves > 0). */
struct sfs_parquet_rg_edit {
	size_t row_group;
	int64_t num_rows;
	const struct sfs_parquet_chunk_edit *chunks;
};

/*
 * Emit the tail of a slice of the file m describes: a FileMetaData, its
 * length (le32) and "PAR1".  It holds the row groups rgs[0 .. nrgs), in
 * that order, edited as they say; num_rows is their sum; each row group's
 * total_byte_size and total_compressed_size move by the change of its
 * chunks' sizes, its file_offset by its first chunk's move, its ordinal
 * is its new position.  Dropped: the page index (offset_index_*,
 * column_index_*) and the bloom filter (bloom_filter_*) of every chunk,
 * which would point at bytes the slice does not have; the statistics,
 * encoding_stats, size_statistics and geospatial_statistics of changed
 * chunks.  Everything else, including fields unknown here, is copied byte
 * for byte; field headers are written in the short form whenever the
 * protocol allows, as every known writer does.
 *
 * Returns 0 and a malloc'd buffer in *out (taken by the caller) of *len
 * bytes; -EINVAL when an edit names a row group that does not exist, a
 * chunk start below 4, a negative size or count, or sizes that overflow
 * (nothing is written); -ENOMEM.  The message names m->path.
 */
int sfs_parquet_footer_write(const struct sfs_parquet_meta *m,
			     const struct sfs_parquet_rg_edit *rgs, size_t nrgs,
			     unsigned char **out, size_t *len,
			     struct sfs_error *err);

/* ---- pages (src/core/formats/parquet/cut.c, column.c) ---- */

/*
 * Bytes of a cut column chunk: len bytes of the file at src when mem is
 * NULL, else len bytes at mem (malloc'd; owned by the cut until the
 * caller takes it by setting mem to NULL).
 */
struct sfs_parquet_piece {
	uint64_t src;
	uint64_t len;
	unsigned char *mem;
};

/* A column chunk cut: its pieces in order, and what its ColumnMetaData
 * must now say (sfs_parquet_chunk_edit). */
struct sfs_parquet_cut_column {
	struct sfs_parquet_piece *pieces;
	size_t npieces;
	int64_t total_compressed_size; /* the pieces' lengths added up */
	int64_t total_uncompressed_size; /* page headers included */
	int64_t num_values;
};

struct sfs_parquet_cut {
	size_t ncolumns; /* m->nleaves, in chunk order */
	struct sfs_parquet_cut_column *columns;
};

/*
 * Row group rg of the file m describes (open on fd) cut to its rows
 * [first, first + count), count >= 1.  Per column: the dictionary page
 * copied as it is (so the chunk's bytes before its first data page keep
 * their size, as sfs_parquet_footer_write expects), the data pages whose
 * entries all belong to those rows copied byte for byte (header and
 * body; adjacent ones in one piece), and the pages a cut falls inside
 * decoded and re-encoded: a new header of the same page type (v1 or v2)
 * without statistics or CRC, levels as the RLE / bit-packed hybrid,
 * values PLAIN, or for a dictionary-encoded page its indexes in the
 * page's own encoding (the dictionary being copied), compressed with the
 * chunk's codec (LZ4, codec 5, in Hadoop's framing).  Rows are found by
 * repetition level 0, so lists, maps and rows that span pages are cut
 * whole.  Returns 0 and *out (sfs_parquet_cut_free), or -EINVAL with a
 * message naming m->path, the row group, the column's dotted path, the
 * page's byte offset and what is malformed or not read, -EIO, -ENOMEM.
 */
int sfs_parquet_cut(int fd, const struct sfs_parquet_meta *m, size_t rg,
		    int64_t first, int64_t count, struct sfs_parquet_cut **out,
		    struct sfs_error *err);

/* Free c and every piece it still owns.  NULL is a no-op. */
void sfs_parquet_cut_free(struct sfs_parquet_cut *c);

/*
 * The pages cuts decoded, kept for the cuts that follow (of one file, one
 * meta): per column of a row group, its dictionary and the data page it
 * decoded last, so that cutting many rows of one page (a slice of
 * shuffle=samples: a cut per row; the slices of a view cutting one row
 * group into blocks) decodes the page once, not once a cut.  At most
 * SFS_PARQUET_PAGES_COLUMNS columns, their decoded bytes (as the page
 * reader counts them) charged to a budget (budget.h) before they are
 * kept: one budget for all the files a view's build cuts (slice.h's
 * cache owns it, SFS_SLICE_PAGES_MAX; a daemon's builds share one more
 * as its parent, sfs_slice_mem), or a budget of the pages' own of
 * SFS_PARQUET_PAGES_MAX.  When the budget has no room, the least
 * recently used columns of these pages go when that makes room, else
 * the budget's owner is asked to free what idle holders keep, and
 * failing that the column is not kept (a later cut decodes it again).
 * Beside what is kept, each cut running holds the one column it is
 * cutting, uncharged: its dictionary and one page, within the page
 * reader's limits (a page decodes to at most 128 MiB, a column to
 * 512 MiB: docs/formats.md), as before anything was kept.  The default
 * bound holds the pages of a row group of DuckDB's (pages up to
 * 100 MiB): a million strings of 96 characters and three numbers count
 * 220 MiB.  A cut through it gives
 * the bytes sfs_parquet_cut gives.  Thread-safe: cuts of one file may
 * run through it at once; a cut that needs a column another cut has
 * waits for it rather than decode its page again.
 */
#define SFS_PARQUET_PAGES_MAX ((uint64_t)256 << 20)
#define SFS_PARQUET_PAGES_COLUMNS 64

struct sfs_parquet_pages;
struct sfs_budget;

/* A new empty one whose kept pages are charged to budget (borrowed: it
 * must outlive the pages; NULL: a budget of their own of
 * SFS_PARQUET_PAGES_MAX), or NULL (out of memory). */
struct sfs_parquet_pages *sfs_parquet_pages_new(struct sfs_budget *budget);

/* Free ps and every page it keeps, given back to its budget (no cut may
 * be running through it).  NULL is a no-op. */
void sfs_parquet_pages_free(struct sfs_parquet_pages *ps);

/* The data pages the cuts through ps decoded so far. */
uint64_t sfs_parquet_pages_decoded(struct sfs_parquet_pages *ps);

/* The decoded bytes ps keeps now (the columns no cut has), charged to
 * its budget; NULL: 0. */
uint64_t sfs_parquet_pages_mem(struct sfs_parquet_pages *ps);

/* sfs_parquet_cut through pages (NULL: none), the same meta and file at
 * every call. */
int sfs_parquet_cut_pages(int fd, const struct sfs_parquet_meta *m,
			  struct sfs_parquet_pages *pages, size_t rg,
			  int64_t first, int64_t count,
			  struct sfs_parquet_cut **out, struct sfs_error *err);

/*
 * Every row of the file m describes (open on fd), in order, numbered from
 * 0 across row groups, with its canonical SHA-256, the same for a row's
 * values however they are stored (page size, encoding, codec, row group,
 * dictionary or not, v1 or v2 pages): the SHA-256 of, for each leaf
 * column in schema order, each entry of the row in that column as "E",
 * its repetition level and definition level (u32 little-endian each) and,
 * when the definition level is the column's highest, the value as u32
 * length and bytes (INT32, INT64, INT96, FLOAT, DOUBLE little-endian as
 * PLAIN stores them, BOOLEAN one byte 0 or 1, byte arrays as they are),
 * then "Z" to end the column.  Calls fn(arg, row, digest), in row order,
 * one call at a time, each after the one before returned, from the
 * calling thread or a helper; stops at and returns fn's first nonzero
 * return.  The rows of a file of 65 536 rows or more are hashed on helper
 * threads too (one fewer than sfs_pool_cpus(), at most 3; with
 * sfs_parquet_rows_threads, one fewer than threads, 0 taken as
 * sfs_pool_cpus()), which also hand the digests to fn while the calling
 * thread decodes.  Memory: one decoded page per column and four batches
 * of rows' bytes with helpers, one without (8 192 rows, or 1 MiB and the
 * row that passes it; a row's bytes past 4 MiB are hashed as they come,
 * not held).  sfs_parquet_rows_threads's file (NULL: none), a SHA-256
 * nothing was fed since it was made or last finished: with helpers, the
 * whole file (m->size bytes) is fed to it too, by the threads that have
 * no row to hash at the time, and *file_hashed (when not NULL) says
 * whether it was; when it was not, file is left as it was given.  Errors
 * as sfs_parquet_cut's, and a column that holds more or fewer rows than
 * its row group says; the rows before the one that fails go to fn first.
 */
#define SFS_PARQUET_THREADED_ROWS 65536 /* rows hashed on helpers too */
#define SFS_PARQUET_ROWS_THREADS_MAX 4 /* the calling one and 3 helpers */
typedef int (*sfs_parquet_row_fn)(void *arg, uint64_t row,
				  const unsigned char digest[32]);
int sfs_parquet_rows(int fd, const struct sfs_parquet_meta *m,
		     sfs_parquet_row_fn fn, void *arg, struct sfs_error *err);
int sfs_parquet_rows_threads(int fd, const struct sfs_parquet_meta *m,
			     unsigned threads, struct sfs_digest *file,
			     bool *file_hashed, sfs_parquet_row_fn fn,
			     void *arg, struct sfs_error *err);

#endif
