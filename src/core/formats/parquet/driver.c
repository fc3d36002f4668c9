/*
 * Parquet files: every row is one sample.  The rows and row groups come
 * from the footer (parquet.h); nothing per row is kept in the index, so a
 * Parquet shard has no boundaries: the driver lays out its slices itself.
 *
 * A slice is "PAR1", then for every run of rows, in order, the row groups
 * the run covers: a row group wholly inside the run as its column chunks'
 * bytes, copied from the shard; a row group the run begins or ends inside,
 * cut to the run's rows (sfs_parquet_cut: pages inside copied, the pages
 * a cut falls in re-encoded); then a footer that describes exactly these
 * row groups (sfs_parquet_footer_write).  A row group is never merged with
 * another, so a run of one row is a row group of one row.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "formats/format_i.h"
#include "formats/parquet/parquet_i.h"
#include "shardfs/parquet.h"
#include "shardfs/shard.h"
#include "shardfs/share.h"
#include "shardfs/util.h"

static int parquet_scan(const struct sfs_scan_in *in, struct sfs_scan *out,
			struct sfs_error *err)
{
	struct sfs_parquet_meta *m;
	int rc = sfs_parquet_footer_read(in->fd, in->path, in->size, &m, err);

	if (rc)
		return rc;
	out->nsamples = (uint64_t)m->num_rows;
	if (in->digest_fn) {
		unsigned threads = in->threads;

		/* helpers are taken once the rows are known to use them */
		if (in->share && m->num_rows < SFS_PARQUET_THREADED_ROWS)
			threads = 1;
		else if (in->share)
			threads = sfs_share_take(in->share,
						 SFS_PARQUET_ROWS_THREADS_MAX);
		rc = sfs_parquet_rows_threads(in->fd, m, threads,
					      in->file_digest,
					      &out->file_hashed, in->digest_fn,
					      in->digest_arg, err);
		if (in->share)
			sfs_share_give(in->share, threads);
		out->digested = !rc;
	}
	sfs_parquet_meta_free(m);
	return rc;
}

static int parquet_samples(int fd, const char *path, sfs_sample_fn fn,
			   void *arg, struct sfs_error *err)
{
	return sfs_format_scan_samples(&sfs_format_parquet, fd, path, fn, arg,
				       err);
}

/* The row groups of a slice being laid out. */
struct layout {
	const struct sfs_parquet_meta *m;
	sfs_extent_fn add;
	void *arg;
	uint64_t pos; /* bytes of the slice so far */
	struct sfs_parquet_rg_edit *rgs;
	size_t nrgs, rgs_cap;
	struct sfs_parquet_chunk_edit *chunks; /* nleaves per row group */
	size_t chunks_cap;
	/* the pages the shard's cuts decoded (shard_state's), or NULL */
	struct sfs_parquet_pages *pages;
};

/* Room for one more row group; its chunk edits at lay->chunks[nrgs *
 * nleaves ..]. */
static int grow(struct layout *lay)
{
	size_t nleaves = lay->m->nleaves;

	if (SFS_GROW(lay->rgs, lay->rgs_cap, lay->nrgs + 1))
		return -ENOMEM;
	if (nleaves > SIZE_MAX / (lay->nrgs + 1) ||
	    SFS_GROW(lay->chunks, lay->chunks_cap, (lay->nrgs + 1) * nleaves))
		return -ENOMEM;
	return 0;
}

/* Row group g whole: its chunks as they are in the shard. */
static int add_whole(struct layout *lay, size_t g,
		     struct sfs_parquet_chunk_edit *ce)
{
	const struct sfs_parquet_row_group *rg = &lay->m->row_groups[g];
	size_t c;
	int rc;

	for (c = 0; c < rg->nchunks; c++) {
		const struct sfs_parquet_chunk *ch = &rg->chunks[c];

		rc = lay->add(lay->arg, (uint64_t)sfs_parquet_chunk_start(ch),
			      (uint64_t)ch->total_compressed_size, NULL);
		if (rc)
			return rc;
		ce[c] = (struct sfs_parquet_chunk_edit){
			.start = (int64_t)lay->pos,
			.total_compressed_size = ch->total_compressed_size,
			.total_uncompressed_size = ch->total_uncompressed_size,
			.num_values = ch->num_values,
		};
		lay->pos += (uint64_t)ch->total_compressed_size;
	}
	return 0;
}

/* Rows [first, first + count) of row group g, cut. */
static int add_cut(struct layout *lay, int fd, size_t g, int64_t first,
		   int64_t count, struct sfs_parquet_chunk_edit *ce,
		   struct sfs_error *err)
{
	struct sfs_parquet_cut *cut;
	size_t c, k;
	int rc = sfs_parquet_cut_pages(fd, lay->m, lay->pages, g, first, count,
				       &cut, err);

	if (rc)
		return rc;
	for (c = 0; !rc && c < cut->ncolumns; c++) {
		struct sfs_parquet_cut_column *col = &cut->columns[c];

		ce[c] = (struct sfs_parquet_chunk_edit){
			.start = (int64_t)lay->pos,
			.total_compressed_size = col->total_compressed_size,
			.total_uncompressed_size = col->total_uncompressed_size,
			.num_values = col->num_values,
		};
		for (k = 0; !rc && k < col->npieces; k++) {
			struct sfs_parquet_piece *p = &col->pieces[k];

			rc = lay->add(lay->arg, p->src, p->len, p->mem);
			p->mem = NULL; /* the slice's now, or freed */
			lay->pos += p->len;
		}
	}
	sfs_parquet_cut_free(cut);
	return rc;
}

/* The row group holding row of m: rg_first[g] <= row < rg_first[g + 1]. */
static size_t find_row_group(const int64_t *rg_first, size_t n, int64_t row)
{
	return SFS_PARTITION_POINT(i, 1, n, rg_first[i] <= row) - 1;
}

static int lay_out_runs(struct layout *lay, int fd, const int64_t *rg_first,
			const struct sfs_run *runs, size_t nruns,
			struct sfs_error *err)
{
	const struct sfs_parquet_meta *m = lay->m;
	size_t i, g;
	int rc;

	for (i = 0; i < nruns; i++) {
		int64_t a = (int64_t)runs[i].first;
		int64_t e = a + (int64_t)runs[i].count;

		for (g = find_row_group(rg_first, m->nrow_groups, a); a < e;
		     g++) {
			int64_t lo = a - rg_first[g];
			int64_t hi =
				(e < rg_first[g + 1] ? e : rg_first[g + 1]) -
				rg_first[g];
			struct sfs_parquet_chunk_edit *ce;

			if (lo == hi)
				continue; /* a row group of no rows */
			rc = grow(lay);
			if (rc)
				return sfs_errorf(err, rc, "%s: out of memory",
						  m->path);
			ce = &lay->chunks[lay->nrgs * m->nleaves];
			if (hi - lo == m->row_groups[g].num_rows)
				rc = add_whole(lay, g, ce);
			else
				rc = add_cut(lay, fd, g, lo, hi - lo, ce, err);
			if (rc == -ENOMEM)
				return sfs_errorf(err, rc, "%s: out of memory",
						  m->path);
			if (rc)
				return rc;
			lay->rgs[lay->nrgs++] = (struct sfs_parquet_rg_edit){
				.row_group = g, .num_rows = hi - lo
			};
			a = rg_first[g] + hi;
		}
	}
	return 0;
}

/*
 * What every slice of a shard needs, read once (read_shard): the decoded
 * footer and the first row of each row group, rg_first[nrow_groups] the
 * row count; and the pages its cuts decode, kept for the cuts of the
 * slices that follow (a view's blocks cut one row group many times,
 * shuffle=samples a page once a row), charged to the budget read_shard
 * was given (one for a view's build, shared by all its shards' states).
 * A view's build lays out all its slices of a shard from one, on several
 * threads at once: pages is thread-safe.
 */
struct shard_state {
	struct sfs_parquet_meta *m;
	int64_t *rg_first;
	size_t mem; /* the bytes of the above */
	struct sfs_parquet_pages *pages;
};

static void parquet_free_shard(void *state)
{
	struct shard_state *st = state;

	if (!st)
		return;
	sfs_parquet_pages_free(st->pages);
	sfs_parquet_meta_free(st->m);
	free(st->rg_first);
	free(st);
}

static size_t parquet_shard_mem(const void *state)
{
	const struct shard_state *st = state;

	return (size_t)sfs_parquet_pages_mem(st->pages);
}

/* The bytes a decoded footer holds (its copy of the footer and the
 * arrays it decoded to), as near as the allocator lets us say. */
static size_t meta_mem(const struct sfs_parquet_meta *m)
{
	return sizeof(*m) + m->footer_len + m->nschema * sizeof(*m->schema) +
	       m->nrow_groups * sizeof(*m->row_groups) +
	       m->nkey_values * sizeof(*m->key_values) +
	       m->nchunk_pool * sizeof(*m->chunk_pool) +
	       m->nencoding_pool * sizeof(*m->encoding_pool) +
	       m->npath_pool * sizeof(*m->path_pool);
}

static int parquet_read_shard(int fd, const struct sfs_shard *sh,
			      struct sfs_budget *budget, void **state,
			      size_t *mem, struct sfs_error *err)
{
	struct shard_state *st;
	struct sfs_parquet_meta *m;
	size_t g;
	int rc = sfs_parquet_footer_read(fd, sh->path, sh->size, &m, err);

	if (rc)
		return rc;
	if ((uint64_t)m->num_rows != sh->nsamples) {
		rc = sfs_errorf(
			err, -ESTALE,
			"%s: holds %lld rows, the index says %llu: rebuild the index with shardfs-index",
			sh->path, (long long)m->num_rows,
			(unsigned long long)sh->nsamples);
		sfs_parquet_meta_free(m);
		return rc;
	}
	st = calloc(1, sizeof(*st));
	if (st) {
		st->rg_first =
			malloc((m->nrow_groups + 1) * sizeof(*st->rg_first));
		st->pages = sfs_parquet_pages_new(budget);
	}
	if (!st || !st->rg_first || !st->pages) {
		if (st) {
			free(st->rg_first);
			sfs_parquet_pages_free(st->pages);
		}
		free(st);
		sfs_parquet_meta_free(m);
		return sfs_errorf(err, -ENOMEM, "%s: out of memory", sh->path);
	}
	st->m = m;
	st->rg_first[0] = 0;
	for (g = 0; g < m->nrow_groups; g++)
		st->rg_first[g + 1] =
			st->rg_first[g] + m->row_groups[g].num_rows;
	st->mem = sizeof(*st) + meta_mem(m) +
		  (m->nrow_groups + 1) * sizeof(*st->rg_first);
	*state = st;
	*mem = st->mem;
	return 0;
}

static int parquet_lay_out_from(const void *state, int fd,
				const struct sfs_shard *sh,
				const struct sfs_run *runs, size_t nruns,
				sfs_extent_fn add, void *arg,
				struct sfs_error *err)
{
	const struct shard_state *st = state;
	const struct sfs_parquet_meta *m = st->m;
	struct layout lay = {
		.m = m, .add = add, .arg = arg, .pages = st->pages
	};
	unsigned char *footer = NULL;
	size_t len, g;
	int rc;

	/* the slice starts with the shard's own "PAR1" */
	rc = add(arg, 0, 4, NULL);
	lay.pos = 4;
	if (!rc)
		rc = lay_out_runs(&lay, fd, st->rg_first, runs, nruns, err);
	else
		rc = sfs_errorf(err, rc, "%s: out of memory", sh->path);
	if (rc)
		goto out;
	for (g = 0; g < lay.nrgs; g++)
		lay.rgs[g].chunks = &lay.chunks[g * m->nleaves];
	rc = sfs_parquet_footer_write(m, lay.rgs, lay.nrgs, &footer, &len, err);
	if (!rc) {
		/* kept as long as the slice: its length, not its buffer's */
		unsigned char *p = realloc(footer, len);

		if (p)
			footer = p;
	}
	if (!rc && add(arg, 0, len, footer))
		rc = sfs_errorf(err, -ENOMEM, "%s: out of memory", sh->path);
out:
	free(lay.rgs);
	free(lay.chunks);
	return rc;
}

static int parquet_lay_out(int fd, const struct sfs_shard *sh,
			   const struct sfs_run *runs, size_t nruns,
			   sfs_extent_fn add, void *arg, struct sfs_error *err)
{
	void *st;
	size_t mem;
	int rc = parquet_read_shard(fd, sh, NULL, &st, &mem, err);

	if (rc)
		return rc;
	/* one slice: one run cuts two row groups at most, never one twice,
	 * nothing to keep its pages for */
	if (nruns < 2) {
		struct shard_state *s = st;

		sfs_parquet_pages_free(s->pages);
		s->pages = NULL;
	}
	rc = parquet_lay_out_from(st, fd, sh, runs, nruns, add, arg, err);
	parquet_free_shard(st);
	return rc;
}

/* ---- synthetic shards ---- */

static void put_binary(struct sfs_thrift_out *o, const void *p, size_t n)
{
	sfs_thrift_put_varint(o, n);
	sfs_thrift_put(o, p, n);
}

static void put_string(struct sfs_thrift_out *o, int *last, int id,
		       const char *s)
{
	sfs_thrift_put_field(o, last, id, SFS_TC_BINARY);
	put_binary(o, s, strlen(s));
}

/* The columns mkdata writes: key (UTF-8, required), data (optional). */
#define SYNTH_COLUMNS 2
#define SYNTH_PAGE_ROWS 16
#define SYNTH_NULL_EVERY 8

/* One column chunk being written: its pages go to the file at once. */
struct chunk_out {
	int64_t start, values, size;
};

/*
 * A data page (v1, PLAIN, uncompressed) of rows [r, r + n) of column c.
 * Returns 0 or -ENOMEM.
 */
static int synth_page(struct sfs_synth_file *f, const struct sfs_synth *s,
		      uint64_t shard, int c, uint64_t r, uint64_t n,
		      struct sfs_prng *data, struct chunk_out *co)
{
	struct sfs_thrift_out body = { 0 }, head = { 0 };
	unsigned char levels[SYNTH_PAGE_ROWS / 8 + 1];
	uint64_t i;
	int last = 0, dl, rc;

	if (c == 1) {
		/* definition levels: one bit-packed run, 8 values a byte */
		size_t groups = (size_t)(n + 7) / 8;

		memset(levels, 0, groups);
		for (i = 0; i < n; i++)
			if ((r + i) % SYNTH_NULL_EVERY != 3)
				levels[i / 8] |= (unsigned char)(1 << i % 8);
		sfs_thrift_put_le32(&body, (uint32_t)(1 + groups));
		sfs_thrift_put_varint(&body, groups << 1 | 1);
		sfs_thrift_put(&body, levels, groups);
	}
	for (i = 0; i < n; i++) {
		char key[40];
		uint32_t len;

		if (c == 0) {
			len = (uint32_t)snprintf(key, sizeof(key),
						 "%06llu_%06llu",
						 (unsigned long long)shard,
						 (unsigned long long)(r + i));
			sfs_thrift_put_le32(&body, len);
			sfs_thrift_put(&body, key, len);
			continue;
		}
		if ((r + i) % SYNTH_NULL_EVERY == 3)
			continue;
		len = (uint32_t)sfs_synth_pick(data, s->size_lo, s->size_hi);
		sfs_synth_fill(data, s->buf, len);
		sfs_thrift_put_le32(&body, len);
		sfs_thrift_put(&body, s->buf, len);
	}
	sfs_thrift_put_int(&head, &last, 1, SFS_TC_I32, 0); /* DATA_PAGE */
	sfs_thrift_put_int(&head, &last, 2, SFS_TC_I32, (int64_t)body.len);
	sfs_thrift_put_int(&head, &last, 3, SFS_TC_I32, (int64_t)body.len);
	sfs_thrift_put_field(&head, &last, 5, SFS_TC_STRUCT);
	dl = 0;
	sfs_thrift_put_int(&head, &dl, 1, SFS_TC_I32, (int64_t)n);
	sfs_thrift_put_int(&head, &dl, 2, SFS_TC_I32, 0); /* PLAIN */
	sfs_thrift_put_int(&head, &dl, 3, SFS_TC_I32, 3); /* RLE */
	sfs_thrift_put_int(&head, &dl, 4, SFS_TC_I32, 3);
	sfs_thrift_put_stop(&head);
	sfs_thrift_put_stop(&head);
	rc = head.oom || body.oom ? -ENOMEM : 0;
	if (!rc) {
		sfs_synth_put(f, head.p, head.len);
		sfs_synth_put(f, body.p, body.len);
	}
	co->values += (int64_t)n;
	co->size += (int64_t)(head.len + body.len);
	free(head.p);
	free(body.p);
	return rc;
}

static void synth_column_meta(struct sfs_thrift_out *o, int c,
			      const struct chunk_out *co)
{
	static const char *const names[SYNTH_COLUMNS] = { "key", "data" };
	int last = 0, ml = 0;

	sfs_thrift_put_int(o, &last, 2, SFS_TC_I64,
			   co->start); /* file_offset */
	sfs_thrift_put_field(o, &last, 3, SFS_TC_STRUCT);
	sfs_thrift_put_int(o, &ml, 1, SFS_TC_I32, 6); /* BYTE_ARRAY */
	sfs_thrift_put_field(o, &ml, 2, SFS_TC_LIST);
	sfs_thrift_put_list(o, SFS_TC_I32, 2);
	sfs_thrift_put_i64(o, 0); /* PLAIN */
	sfs_thrift_put_i64(o, 3); /* RLE */
	sfs_thrift_put_field(o, &ml, 3, SFS_TC_LIST);
	sfs_thrift_put_list(o, SFS_TC_BINARY, 1);
	put_binary(o, names[c], strlen(names[c]));
	sfs_thrift_put_int(o, &ml, 4, SFS_TC_I32, 0); /* UNCOMPRESSED */
	sfs_thrift_put_int(o, &ml, 5, SFS_TC_I64, co->values);
	sfs_thrift_put_int(o, &ml, 6, SFS_TC_I64, co->size);
	sfs_thrift_put_int(o, &ml, 7, SFS_TC_I64, co->size);
	sfs_thrift_put_int(o, &ml, 9, SFS_TC_I64, co->start);
	sfs_thrift_put_stop(o);
	sfs_thrift_put_stop(o);
}

static void synth_schema(struct sfs_thrift_out *o)
{
	int last = 0;

	sfs_thrift_put_list(o, SFS_TC_STRUCT, 1 + SYNTH_COLUMNS);
	put_string(o, &last, 4, "schema");
	sfs_thrift_put_int(o, &last, 5, SFS_TC_I32, SYNTH_COLUMNS);
	sfs_thrift_put_stop(o);
	last = 0;
	sfs_thrift_put_int(o, &last, 1, SFS_TC_I32, 6); /* BYTE_ARRAY */
	sfs_thrift_put_int(o, &last, 3, SFS_TC_I32, 0); /* REQUIRED */
	put_string(o, &last, 4, "key");
	sfs_thrift_put_int(o, &last, 6, SFS_TC_I32, 0); /* UTF8 */
	sfs_thrift_put_stop(o);
	last = 0;
	sfs_thrift_put_int(o, &last, 1, SFS_TC_I32, 6);
	sfs_thrift_put_int(o, &last, 3, SFS_TC_I32, 1); /* OPTIONAL */
	put_string(o, &last, 4, "data");
	sfs_thrift_put_stop(o);
}

/*
 * Rows {key: "<shard>_<row>" (UTF-8), data: random bytes, null every 8th
 * row}, in row groups of a drawn number of rows, pages of up to 16 rows:
 * v1 data pages, PLAIN, uncompressed, as small a Parquet file as readers
 * take, with row groups and pages to cut inside.
 */
static int parquet_synthesize(const struct sfs_synth *s, uint64_t shard,
			      const char *path, struct sfs_error *err)
{
	struct sfs_thrift_out meta = { 0 }, rgs = { 0 };
	struct sfs_synth_file f;
	struct sfs_prng r, data;
	uint64_t n, row = 0, rg_rows, i, nrgs = 0;
	int64_t pos = 4;
	int c, last, rl, rc = sfs_synth_open(&f, path, err);

	if (rc)
		return rc;
	sfs_prng_init(&r, s->seed, shard, 2);
	sfs_prng_init(&data, s->seed, shard, 3);
	n = sfs_synth_pick(&r, s->samples_lo, s->samples_hi);
	sfs_synth_put(&f, "PAR1", 4);
	while (!rc && row < n) {
		struct chunk_out co[SYNTH_COLUMNS] = { 0 };

		rg_rows = sfs_synth_pick(&r, 1, n - row < 64 ? n - row : 64);
		for (c = 0; c < SYNTH_COLUMNS; c++) {
			co[c].start = pos;
			for (i = 0; !rc && i < rg_rows; i += SYNTH_PAGE_ROWS)
				rc = synth_page(&f, s, shard, c, row + i,
						rg_rows - i < SYNTH_PAGE_ROWS ?
							rg_rows - i :
							SYNTH_PAGE_ROWS,
						&data, &co[c]);
			pos += co[c].size;
		}
		rl = 0;
		sfs_thrift_put_field(&rgs, &rl, 1, SFS_TC_LIST);
		sfs_thrift_put_list(&rgs, SFS_TC_STRUCT, SYNTH_COLUMNS);
		for (c = 0; c < SYNTH_COLUMNS; c++)
			synth_column_meta(&rgs, c, &co[c]);
		sfs_thrift_put_int(&rgs, &rl, 2, SFS_TC_I64,
				   co[0].size + co[1].size);
		sfs_thrift_put_int(&rgs, &rl, 3, SFS_TC_I64, (int64_t)rg_rows);
		sfs_thrift_put_stop(&rgs);
		row += rg_rows;
		nrgs++;
	}
	last = 0;
	sfs_thrift_put_int(&meta, &last, 1, SFS_TC_I32, 1); /* version */
	sfs_thrift_put_field(&meta, &last, 2, SFS_TC_LIST);
	synth_schema(&meta);
	sfs_thrift_put_int(&meta, &last, 3, SFS_TC_I64, (int64_t)n);
	sfs_thrift_put_field(&meta, &last, 4, SFS_TC_LIST);
	sfs_thrift_put_list(&meta, SFS_TC_STRUCT, nrgs);
	sfs_thrift_put(&meta, rgs.p, rgs.len);
	put_string(&meta, &last, 6, "shardfs-mkdata");
	sfs_thrift_put_stop(&meta);
	/* the footer's length and the closing magic */
	sfs_thrift_put_le32(&meta, (uint32_t)meta.len);
	sfs_thrift_put(&meta, "PAR1", 4);
	if (rc || meta.oom || rgs.oom)
		rc = sfs_errorf(err, -ENOMEM, "%s: out of memory", path);
	else
		sfs_synth_put(&f, meta.p, meta.len);
	free(meta.p);
	free(rgs.p);
	return sfs_synth_close(&f, rc, err);
}

static const char *const parquet_suffixes[] = { ".parquet", NULL };

const struct sfs_format_ops sfs_format_parquet = {
	.name = "parquet",
	.run_piece = "row group",
	.suffixes = parquet_suffixes,
	.scan = parquet_scan,
	.lay_out = parquet_lay_out,
	.read_shard = parquet_read_shard,
	.lay_out_from = parquet_lay_out_from,
	.free_shard = parquet_free_shard,
	.shard_mem = parquet_shard_mem,
	.samples = parquet_samples,
	.samples_threaded = true,
	.synthesize = parquet_synthesize,
};
