/*
 * The internals the files of the Parquet module share, nothing else
 * includes this header.  The module is split by layer, as arrow-rs and
 * DuckDB split Parquet; each section below names the file that owns it:
 *
 *   thrift.c        the Thrift compact protocol (reader and writer)
 *   footer_read.c   FileMetaData decoded (sfs_parquet_footer_read)
 *   footer_check.c  the invariants of a decoded footer
 *   footer_write.c  the footer re-emitted for a slice
 *   codec.c         compression and decompression of pages
 *   encoding.c      levels, the RLE / bit-packed hybrid, DELTA_*, values
 *   column.c        the page reader of a column chunk; row digests
 *   cut.c           a row group cut to rows (sfs_parquet_cut)
 *   driver.c        the format driver (struct sfs_format_ops)
 *
 * Dependencies go one way: cut.c uses column.c, which uses encoding.c and
 * codec.c; the footer files and the page headers use thrift.c; driver.c
 * uses parquet.h and thrift.c's writer.  Names here are sfs_pq_ and
 * SFS_PQ_ (sfs_thrift_ for thrift.c): private to the module, where
 * parquet.h's are sfs_parquet_.
 *
 * ---- Thrift (thrift.c) ----
 *
 * The Thrift compact protocol, as much as the Parquet footer and page
 * headers need: a bounded reader and a writer.
 *
 * The reader never reads past buf + len: every length and count is checked
 * against the bytes left before it is used, and structs, lists, sets and
 * maps nest at most SFS_THRIFT_DEPTH_MAX deep.  Its first error is left in
 * err as "<path>: footer at byte <file offset>: <what>" ("page header"
 * instead of "footer" when the reader's what says so); the reader is then
 * spent.
 */
#ifndef SHARDFS_PARQUET_I_H
#define SHARDFS_PARQUET_I_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shardfs/error.h"

struct sfs_budget; /* budget.h */

struct sfs_parquet_meta;
struct sfs_parquet_chunk;

#define SFS_THRIFT_DEPTH_MAX 32

/* Compact protocol type codes (field headers and list elements). */
enum {
	SFS_TC_STOP = 0,
	SFS_TC_TRUE = 1, /* a bool field's value; a bool list element */
	SFS_TC_FALSE = 2, /* a bool field's value; also a bool element */
	SFS_TC_I8 = 3,
	SFS_TC_I16 = 4,
	SFS_TC_I32 = 5,
	SFS_TC_I64 = 6,
	SFS_TC_DOUBLE = 7,
	SFS_TC_BINARY = 8,
	SFS_TC_LIST = 9,
	SFS_TC_SET = 10,
	SFS_TC_MAP = 11,
	SFS_TC_STRUCT = 12,
	SFS_TC_UUID = 13,
};

struct sfs_thrift_reader {
	const unsigned char *buf;
	size_t len, pos;
	uint64_t base; /* file offset of buf[0], for messages */
	const char *path;
	struct sfs_error *err;
	unsigned depth;
	const char *what; /* what is read, for messages; NULL: "footer" */
};

/* What r reads, as its messages name it. */
static inline const char *sfs_thrift_what(const struct sfs_thrift_reader *r)
{
	return r->what ? r->what : "footer";
}

/* A field header: id and type, or type SFS_TC_STOP. */
struct sfs_thrift_field {
	int id;
	int type;
	size_t at; /* where the header begins */
};

/*
 * Fail r at byte buf offset at with a message: returns -EINVAL.
 */
int sfs_thrift_fail(struct sfs_thrift_reader *r, size_t at, const char *fmt,
		    ...) __attribute__((format(printf, 3, 4)));

/* Enter and leave a struct (bounds the nesting).  last_id starts at 0. */
int sfs_thrift_struct_begin(struct sfs_thrift_reader *r);
void sfs_thrift_struct_end(struct sfs_thrift_reader *r);

/* The next field header of the current struct; last_id is the previous
 * field's id (0 at the first) and is updated. */
int sfs_thrift_read_field(struct sfs_thrift_reader *r, int *last_id,
			  struct sfs_thrift_field *f);

/* Values.  Each checks that the value fits its type. */
int sfs_thrift_read_i32(struct sfs_thrift_reader *r, int32_t *v);
int sfs_thrift_read_i64(struct sfs_thrift_reader *r, int64_t *v);
int sfs_thrift_read_binary(struct sfs_thrift_reader *r, const unsigned char **p,
			   size_t *len);

/*
 * A list or set header: element type and count; the count is checked
 * against the bytes left (every element takes at least one byte).
 */
int sfs_thrift_read_list(struct sfs_thrift_reader *r, int *elem_type,
			 size_t *count);

/* Skip a value of type type (a field type; a bool field has no value). */
int sfs_thrift_skip(struct sfs_thrift_reader *r, int type);

/* The name of a type code for messages ("i64", "list", ...). */
const char *sfs_thrift_type_name(int type);

/* A growable output buffer; after a failed allocation it stays failed
 * (oom set) and every put is a no-op. */
struct sfs_thrift_out {
	unsigned char *p;
	size_t len, cap;
	int oom;
};

void sfs_thrift_put(struct sfs_thrift_out *o, const void *data, size_t n);
/* Room for n more bytes (n may be 0) at the end of o: where they go, or
 * NULL once o is failed.  The buffer may move at the next take or put. */
unsigned char *sfs_thrift_take(struct sfs_thrift_out *o, size_t n);
/* The capacity o has after a take of n (SIZE_MAX on overflow): what a
 * caller charging memory counts before it takes. */
size_t sfs_thrift_cap_after(const struct sfs_thrift_out *o, size_t n);
void sfs_thrift_put_varint(struct sfs_thrift_out *o, uint64_t v);
/* A field header after the field last_id (updated); bool fields carry
 * their value in type (SFS_TC_TRUE or SFS_TC_FALSE). */
void sfs_thrift_put_field(struct sfs_thrift_out *o, int *last_id, int id,
			  int type);
void sfs_thrift_put_i64(struct sfs_thrift_out *o, int64_t v);
void sfs_thrift_put_list(struct sfs_thrift_out *o, int elem_type, size_t count);
/* A field of type SFS_TC_I32 or SFS_TC_I64 (after last_id) holding v. */
void sfs_thrift_put_int(struct sfs_thrift_out *o, int *last_id, int id,
			int type, int64_t v);
/* The stop field that ends a struct. */
void sfs_thrift_put_stop(struct sfs_thrift_out *o);
/* Not Thrift: a u32 little-endian, as Parquet frames its footer, its
 * length-prefixed levels and its PLAIN byte arrays. */
void sfs_thrift_put_le32(struct sfs_thrift_out *o, uint32_t v);

/* ---- The footer (footer_read.c, footer_check.c) ---- */

/* Out of memory while decoding the footer r reads: -ENOMEM, message set. */
static inline int sfs_pq_footer_nomem(struct sfs_thrift_reader *r)
{
	return sfs_errorf(r->err, -ENOMEM,
			  "%s: out of memory decoding the Parquet footer",
			  r->path);
}

/*
 * Check the invariants parquet.h lists of m, just decoded from r's
 * bytes, and count its leaves into m->nleaves (footer_check.c).  Returns
 * 0 or -EINVAL (-ENOMEM) with r's message.
 */
int sfs_pq_meta_check(struct sfs_thrift_reader *r, struct sfs_parquet_meta *m);

/*
 * ---- Pages (column.c; read by encoding.c, codec.c and cut.c) ----
 *
 * The words of parquet.thrift the pages use, and the page reader's
 * structs.  Nothing read is trusted: sizes are capped by SFS_PQ_PAGE_MAX
 * and SFS_PQ_ENTRIES_MAX, whatever a header says.
 */

#define SFS_PQ_PAGE_MAX (256u << 20) /* bytes of a page, compressed or not */
#define SFS_PQ_ENTRIES_MAX (16u << 20) /* levels of a page */
/*
 * What the pages a reader holds at once may decode to (a cut holds one
 * column's, a row digest one page of every column): the uncompressed
 * bytes, and per entry its two levels and its value (SFS_PQ_ENTRY_BYTES)
 * and, unless the page is PLAIN, its dictionary index (or RLE boolean)
 * unpacked (SFS_PQ_INDEX_BYTES); while the page decompresses, its
 * compressed bytes instead of the entries when they are more (they are
 * freed before the entries are made).  A page read as a 1 MiB page of
 * 20 000 rows (pyarrow's, arrow-rs', parquet-mr's defaults) takes ~2 MiB;
 * the largest page the caps above let through, 256 MiB of 16 Mi values,
 * would take 704 MiB, and a 64 KiB gzip page 512 MiB: refused.
 */
#define SFS_PQ_DECODED_MAX (512u << 20)
#define SFS_PQ_ENTRY_BYTES 24
#define SFS_PQ_INDEX_BYTES 4
/*
 * What one page may decode to: its uncompressed bytes and its entries
 * (counted as above; its compressed bytes are the file's own, not
 * something a small file can claim, so they count only against
 * SFS_PQ_DECODED_MAX).  Legitimate pages are below it, but for large
 * row groups of DuckDB: pyarrow's, parquet-mr's and arrow-rs' 1 MiB
 * pages of at most 20 000 rows take ~2.5 MiB, DuckDB's pages (up to
 * 100 MiB) in row groups of up to 1 Mi rows at most ~124 MiB (1 Mi
 * strings of 96 characters; a row group of 4 M strings of 20 characters,
 * 183 MiB, is refused), while a 62 KB file of one gzip page of 16 Mi
 * INT32 values decodes to 427 MiB: with the daemon's two builds at once,
 * nearly 1 GB.  Past it, refused, naming the limit and the fix.
 */
#define SFS_PQ_PAGE_DECODED_MAX (128u << 20)

enum {
	SFS_PQ_PAGE_DATA = 0,
	SFS_PQ_PAGE_DICTIONARY = 2,
	SFS_PQ_PAGE_DATA_V2 = 3
};
enum {
	SFS_PQ_ENC_PLAIN = 0,
	SFS_PQ_ENC_PLAIN_DICTIONARY = 2,
	SFS_PQ_ENC_RLE = 3,
	SFS_PQ_ENC_BIT_PACKED = 4,
	SFS_PQ_ENC_DELTA_BINARY_PACKED = 5,
	SFS_PQ_ENC_DELTA_LENGTH_BYTE_ARRAY = 6,
	SFS_PQ_ENC_DELTA_BYTE_ARRAY = 7,
	SFS_PQ_ENC_RLE_DICTIONARY = 8,
	SFS_PQ_ENC_BYTE_STREAM_SPLIT = 9,
};
enum {
	SFS_PQ_T_BOOLEAN,
	SFS_PQ_T_INT32,
	SFS_PQ_T_INT64,
	SFS_PQ_T_INT96,
	SFS_PQ_T_FLOAT,
	SFS_PQ_T_DOUBLE,
	SFS_PQ_T_BYTE_ARRAY,
	SFS_PQ_T_FLBA,
};
enum {
	SFS_PQ_C_UNCOMPRESSED,
	SFS_PQ_C_SNAPPY,
	SFS_PQ_C_GZIP,
	SFS_PQ_C_LZO,
	SFS_PQ_C_BROTLI,
	SFS_PQ_C_LZ4,
	SFS_PQ_C_ZSTD,
	SFS_PQ_C_LZ4_RAW,
};

/* A leaf column: its physical type and its highest levels. */
struct sfs_pq_leaf {
	int32_t type, type_length;
	uint32_t max_def, max_rep;
};

struct sfs_pq_page_header {
	uint64_t at; /* file offset of the header */
	size_t header_len;
	int32_t type, usize, csize;
	int32_t num_values, encoding, def_encoding, rep_encoding;
	int32_t num_nulls, num_rows, def_len, rep_len; /* v2 */
	bool compressed; /* v2: the values are compressed */
};

struct sfs_pq_value {
	const unsigned char *p;
	uint32_t len;
};

/* A decoded data page. */
struct sfs_pq_page {
	struct sfs_pq_page_header h;
	uint32_t n; /* entries (levels) */
	uint32_t *rep, *def;
	uint32_t nvals; /* values (entries at max_def) */
	struct sfs_pq_value *vals;
	uint32_t *idx; /* dictionary-encoded pages: the indexes, else NULL */
	unsigned bit_width; /* of idx */
	unsigned char *raw; /* the uncompressed page (levels and values) */
	struct sfs_thrift_out arena; /* values built while decoding */
	/* what decoding may still build (the arena's capacity, DELTA_*
	 * lengths), set by the page reader from its budget; after -EFBIG,
	 * want is what it would have built */
	uint64_t room, want;
};

/* One column chunk being read. */
struct sfs_pq_column {
	int fd;
	const struct sfs_parquet_meta *m;
	const struct sfs_parquet_chunk *ch;
	size_t rg;
	struct sfs_pq_leaf lf;
	char name[256];
	uint64_t pos, end; /* the next page header; the chunk's end */
	struct sfs_pq_value *dict;
	uint32_t ndict;
	uint64_t dict_at; /* where the dictionary page loaded begins */
	unsigned char *dict_raw;
	struct sfs_thrift_out dict_arena;
	struct sfs_pq_page pg;
	bool loaded; /* pg holds a page */
	bool seen_data; /* the first data page was read */
	uint64_t pre_usize; /* uncompressed bytes of the pages before it */
	uint32_t at, vat; /* next entry, next value of pg */
	struct sfs_error *err;
	/* bytes decoded for pg and the dictionary, counted in *held: the
	 * column's own, or the caller's counter for columns read together
	 * (set after sfs_pq_col_open), capped at SFS_PQ_DECODED_MAX */
	uint64_t pg_bytes, dict_bytes, own;
	uint64_t *held;
	/* what *held counts of this column is also held in this budget
	 * (budget.h, sfs_budget_hold) while it is decoded and cut: a
	 * cut's pages' (cut.c), so that a column being cut leaves less
	 * room for what is kept; NULL (sfs_pq_col_open's): none */
	struct sfs_budget *also;
};

/* A cursor over bytes being decoded: p[pos .. len) are left. */
struct sfs_pq_bytes {
	const unsigned char *p;
	size_t len, pos;
};

/* ---- Codecs (codec.c) ---- */

/* The name of a codec for messages ("SNAPPY"; "unknown"). */
const char *sfs_pq_codec_name(int32_t codec);

/* Decompress n bytes of codec into exactly un bytes at out: false when
 * they do not, or the codec is not read. */
bool sfs_pq_page_decompress(int32_t codec, const unsigned char *in, size_t n,
			    unsigned char *out, size_t un);

/* Compress in[0 .. n) with codec, appended to o.  Returns 0, -EINVAL (the
 * codec cannot compress it) or -ENOMEM. */
int sfs_pq_page_compress(int32_t codec, const unsigned char *in, size_t n,
			 struct sfs_thrift_out *o);

/* ---- Encodings (encoding.c) ---- */

/* The bit width of levels (or indexes) up to max. */
unsigned sfs_pq_bits_for(uint32_t max);

/*
 * n levels up to max from b, in encoding enc: a v1 page's RLE levels
 * after their u32 length, or its BIT_PACKED ones; a v2 page's bare RLE
 * levels.  Returns 0 or -1 (malformed).
 */
int sfs_pq_levels_decode(struct sfs_pq_bytes *b, int32_t enc, bool v1,
			 uint32_t max, uint32_t *out, uint32_t n);

/* v[0 .. n) as the RLE / bit-packed hybrid of width w, appended to o. */
void sfs_pq_hybrid_encode(struct sfs_thrift_out *o, const uint32_t *v, size_t n,
			  unsigned w);

/*
 * n PLAIN values of leaf lf from b into v; BOOLEAN values are built in
 * arena.  Returns 0, -1 (malformed) or -ENOMEM.
 */
int sfs_pq_plain_decode(struct sfs_pq_bytes *b, const struct sfs_pq_leaf *lf,
			struct sfs_pq_value *v, uint32_t n,
			struct sfs_thrift_out *arena);

/* The name of an encoding for messages ("DELTA_BYTE_ARRAY"; "unknown"). */
const char *sfs_pq_encoding_name(int32_t enc);

/*
 * n values of leaf lf in encoding enc from b into pg->vals (dictionary
 * indexes into pg->idx, values built into pg->arena); dict holds the
 * chunk's ndict dictionary values, NULL when it has none.  What is built
 * (the arena's capacity, DELTA_* lengths while they are decoded) is
 * charged against pg->room before it is allocated.  Returns 0, -1
 * (malformed), -ENOMEM, -EFBIG (over pg->room; pg->want says by how
 * much), -ENOENT (dictionary-encoded, but no dict) or -ENOTSUP (an
 * encoding not read); the caller says which in its message.
 */
int sfs_pq_values_decode(struct sfs_pq_page *pg, const struct sfs_pq_leaf *lf,
			 const struct sfs_pq_value *dict, uint32_t ndict,
			 struct sfs_pq_bytes *b, int32_t enc, uint32_t n);

/* ---- The page reader (column.c) ---- */

/* c fails at file byte at: -EINVAL, the message naming the file, the row
 * group, the column's dotted path and the page. */
int sfs_pq_col_fail(struct sfs_pq_column *c, uint64_t at, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* -ENOMEM with c's message. */
int sfs_pq_col_nomem(struct sfs_pq_column *c);

/* The leaves of m's schema in order (the chunks' order), with their
 * levels: out has m->nleaves entries.  0, -ENOMEM or -EINVAL. */
int sfs_pq_leaves(const struct sfs_parquet_meta *m, struct sfs_pq_leaf *out,
		  struct sfs_error *err);

/* Open column k of row group rg (leaf lf; m, fd and err borrowed); close
 * it with sfs_pq_col_close even when this fails.  0 or -EINVAL. */
int sfs_pq_col_open(struct sfs_pq_column *c, int fd,
		    const struct sfs_parquet_meta *m, size_t rg, size_t k,
		    const struct sfs_pq_leaf *lf, struct sfs_error *err);
void sfs_pq_col_close(struct sfs_pq_column *c);
/*
 * Read c's chunk again from its first page, keeping its dictionary (not
 * decoded again when the pages come to it) and its decoded page, for
 * another cut of the same row group; fd and err as sfs_pq_col_open's.
 * c may have moved since it was opened: its own budget is its own again.
 */
void sfs_pq_col_rewind(struct sfs_pq_column *c, int fd, struct sfs_error *err);

/*
 * The next page of the chunk into *h (dictionary pages are loaded, index
 * pages skipped on the way).  Returns 1 with a data page, 0 at the
 * chunk's end, or -errno.
 */
int sfs_pq_next_data_page(struct sfs_pq_column *c,
			  struct sfs_pq_page_header *h);

/* Decode the data page whose header is h into c->pg: 0 or -errno. */
int sfs_pq_decode_page(struct sfs_pq_column *c,
		       const struct sfs_pq_page_header *h);

#endif
