/*
 * parquet-footer: the Parquet footer module from the command line, for the
 * tests (tests/cli/parquet/test_footer.sh) and the measurements.
 *
 *   parquet-footer dump FILE         the decoded footer as JSON
 *   parquet-footer same FILE OUT     FILE's data and a footer rewritten
 *                                    with every row group where it is
 *   parquet-footer slice FILE OUT RG...
 *                                    PAR1, the column chunks of row groups
 *                                    RG... (numbers, in that order) one
 *                                    after the other, and their footer
 *   parquet-footer bench FILE RUNS   decode the footer RUNS times; print
 *                                    the time per decode
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "shardfs/parquet.h"

static int open_meta(const char *path, int *fd, struct sfs_parquet_meta **m)
{
	struct sfs_error err = { 0 };
	struct stat st;

	*fd = open(path, O_RDONLY | O_CLOEXEC);
	if (*fd < 0 || fstat(*fd, &st)) {
		fprintf(stderr, "parquet-footer: %s: %s\n", path,
			strerror(errno));
		return -1;
	}
	if (sfs_parquet_footer_read(*fd, path, (uint64_t)st.st_size, m, &err)) {
		fprintf(stderr, "parquet-footer: %s\n", err.msg);
		close(*fd);
		return -1;
	}
	return 0;
}

static json_t *bytes(struct sfs_parquet_bytes b)
{
	return b.p ? json_stringn((const char *)b.p, b.len) : json_null();
}

static json_t *opt(int64_t v)
{
	return v < 0 ? json_null() : json_integer(v);
}

static json_t *chunk_json(const struct sfs_parquet_chunk *c)
{
	json_t *path = json_array(), *enc = json_array();
	size_t i;

	for (i = 0; i < c->npath; i++)
		json_array_append_new(path, bytes(c->path_in_schema[i]));
	for (i = 0; i < c->nencodings; i++)
		json_array_append_new(enc, json_integer(c->encodings[i]));
	return json_pack(
		"{s:o, s:o, s:i, s:i, s:I, s:I, s:I, s:I, s:I, s:o, s:o, s:b,"
		" s:o, s:o, s:o, s:o, s:o, s:o, s:I}",
		"path_in_schema", path, "encodings", enc, "type", c->type,
		"codec", c->codec, "file_offset", (json_int_t)c->file_offset,
		"num_values", (json_int_t)c->num_values,
		"total_uncompressed_size",
		(json_int_t)c->total_uncompressed_size, "total_compressed_size",
		(json_int_t)c->total_compressed_size, "data_page_offset",
		(json_int_t)c->data_page_offset, "dictionary_page_offset",
		opt(c->dictionary_page_offset), "index_page_offset",
		opt(c->index_page_offset), "has_statistics", c->has_statistics,
		"offset_index_offset", opt(c->offset_index_offset),
		"offset_index_length", opt(c->offset_index_length),
		"column_index_offset", opt(c->column_index_offset),
		"column_index_length", opt(c->column_index_length),
		"bloom_filter_offset", opt(c->bloom_filter_offset),
		"bloom_filter_length", opt(c->bloom_filter_length), "start",
		(json_int_t)sfs_parquet_chunk_start(c));
}

static int dump(const struct sfs_parquet_meta *m)
{
	json_t *rgs = json_array(), *schema = json_array(), *kv = json_array();
	json_t *root;
	size_t i, j;

	for (i = 0; i < m->nschema; i++)
		json_array_append_new(
			schema,
			json_pack("{s:o, s:o, s:o, s:o}", "name",
				  bytes(m->schema[i].name), "type",
				  opt(m->schema[i].type), "num_children",
				  opt(m->schema[i].num_children),
				  "repetition_type",
				  opt(m->schema[i].repetition_type)));
	for (i = 0; i < m->nkey_values; i++)
		json_array_append_new(
			kv, json_pack("{s:o, s:o}", "key",
				      bytes(m->key_values[i].key), "value",
				      bytes(m->key_values[i].value)));
	for (i = 0; i < m->nrow_groups; i++) {
		const struct sfs_parquet_row_group *g = &m->row_groups[i];
		json_t *cols = json_array();

		for (j = 0; j < g->nchunks; j++)
			json_array_append_new(cols, chunk_json(&g->chunks[j]));
		json_array_append_new(rgs,
				      json_pack("{s:I, s:I, s:o}", "num_rows",
						(json_int_t)g->num_rows,
						"total_byte_size",
						(json_int_t)g->total_byte_size,
						"columns", cols));
	}
	root = json_pack("{s:i, s:I, s:I, s:I, s:I, s:o, s:o, s:o, s:o}",
			 "version", m->version, "num_rows",
			 (json_int_t)m->num_rows, "data_end",
			 (json_int_t)m->data_end, "footer_len",
			 (json_int_t)m->footer_len, "leaves",
			 (json_int_t)m->nleaves, "schema", schema,
			 "key_value_metadata", kv, "created_by",
			 bytes(m->created_by), "row_groups", rgs);
	json_dumpf(root, stdout, JSON_INDENT(1));
	putchar('\n');
	json_decref(root);
	return 0;
}

static int copy_range(int in, int out, uint64_t from, uint64_t len)
{
	char buf[65536];

	while (len) {
		size_t n = len < sizeof(buf) ? (size_t)len : sizeof(buf);
		ssize_t r = pread(in, buf, n, (off_t)from);

		if (r <= 0 || write(out, buf, (size_t)r) != r)
			return -1;
		from += (uint64_t)r;
		len -= (uint64_t)r;
	}
	return 0;
}

/*
 * Write OUT: with rgs NULL, FILE's bytes up to its footer and a footer
 * with every row group unchanged; else PAR1 and the chunks of rgs[] laid
 * end to end, and their footer.
 */
static int rewrite(int in, const struct sfs_parquet_meta *m, const char *out,
		   const size_t *rgs, size_t nrgs)
{
	struct sfs_parquet_rg_edit *e = calloc(nrgs, sizeof(*e));
	struct sfs_parquet_chunk_edit *ce =
		calloc(nrgs * m->nleaves + 1, sizeof(*ce));
	struct sfs_error err = { 0 };
	unsigned char *tail = NULL;
	int fd, rc = -1;
	uint64_t pos = 4;
	size_t i, j, len;

	fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || !e || !ce) {
		fprintf(stderr, "parquet-footer: %s: %s\n", out,
			strerror(errno));
		goto out_free;
	}
	if (rgs) {
		if (write(fd, "PAR1", 4) != 4)
			goto out_close;
	} else if (copy_range(in, fd, 0, m->data_end)) {
		goto out_close;
	}
	for (i = 0; i < nrgs; i++) {
		size_t rg = rgs ? rgs[i] : i;
		const struct sfs_parquet_row_group *g;

		if (rg >= m->nrow_groups) {
			fprintf(stderr,
				"parquet-footer: %s has %zu row groups, no %zu\n",
				m->path, m->nrow_groups, rg);
			goto out_close;
		}
		g = &m->row_groups[rg];
		e[i].row_group = rg;
		e[i].num_rows = g->num_rows;
		e[i].chunks = ce + i * m->nleaves;
		for (j = 0; j < g->nchunks; j++) {
			const struct sfs_parquet_chunk *c = &g->chunks[j];
			struct sfs_parquet_chunk_edit *x =
				&ce[i * m->nleaves + j];
			int64_t start = sfs_parquet_chunk_start(c);

			x->start = rgs ? (int64_t)pos : start;
			x->total_compressed_size = c->total_compressed_size;
			x->total_uncompressed_size = c->total_uncompressed_size;
			x->num_values = c->num_values;
			if (rgs &&
			    copy_range(in, fd, (uint64_t)start,
				       (uint64_t)c->total_compressed_size))
				goto out_close;
			pos += (uint64_t)c->total_compressed_size;
		}
	}
	if (sfs_parquet_footer_write(m, e, nrgs, &tail, &len, &err)) {
		fprintf(stderr, "parquet-footer: %s\n", err.msg);
		goto out_close;
	}
	if (write(fd, tail, len) != (ssize_t)len)
		goto out_close;
	rc = 0;
out_close:
	if (rc)
		fprintf(stderr, "parquet-footer: writing %s failed\n", out);
	if (close(fd))
		rc = -1;
out_free:
	free(tail);
	free(ce);
	free(e);
	return rc;
}

static int bench(int fd, const char *path, long runs)
{
	struct sfs_parquet_meta *m = NULL;
	struct timespec t0, t1;
	struct stat st;
	size_t chunks = 0, i;
	long r;
	double s;

	if (fstat(fd, &st))
		return -1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (r = 0; r < runs; r++) {
		sfs_parquet_meta_free(m);
		m = NULL;
		if (sfs_parquet_footer_read(fd, path, (uint64_t)st.st_size, &m,
					    NULL))
			return -1;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	s = (double)(t1.tv_sec - t0.tv_sec) +
	    (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	for (i = 0; i < m->nrow_groups; i++)
		chunks += m->row_groups[i].nchunks;
	printf("%s: footer of %zu bytes, %zu row groups x %zu columns = %zu chunks: %.3f ms per decode (%ld runs)\n",
	       path, m->footer_len, m->nrow_groups, m->nleaves, chunks,
	       s * 1e3 / (double)runs, runs);
	sfs_parquet_meta_free(m);
	return 0;
}

static int usage(void)
{
	fprintf(stderr,
		"usage: parquet-footer dump FILE | same FILE OUT | slice FILE OUT RG... | bench FILE RUNS\n");
	return 2;
}

int main(int argc, char **argv)
{
	struct sfs_parquet_meta *m;
	size_t *rgs = NULL;
	int fd, rc, i;

	if (argc < 3)
		return usage();
	if (!strcmp(argv[1], "bench")) {
		if (argc != 4)
			return usage();
		fd = open(argv[2], O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			fprintf(stderr, "parquet-footer: %s: %s\n", argv[2],
				strerror(errno));
			return 1;
		}
		rc = bench(fd, argv[2], atol(argv[3]));
		close(fd);
		return rc ? 1 : 0;
	}
	if (open_meta(argv[2], &fd, &m))
		return 1;
	if (!strcmp(argv[1], "dump") && argc == 3) {
		rc = dump(m);
	} else if (!strcmp(argv[1], "same") && argc == 4) {
		rc = rewrite(fd, m, argv[3], NULL, m->nrow_groups);
	} else if (!strcmp(argv[1], "slice") && argc >= 5) {
		rgs = calloc((size_t)argc, sizeof(*rgs));
		for (i = 4; rgs && i < argc; i++)
			rgs[i - 4] = strtoul(argv[i], NULL, 10);
		rc = rgs ? rewrite(fd, m, argv[3], rgs, (size_t)(argc - 4)) :
			   -1;
	} else {
		rc = usage();
	}
	free(rgs);
	sfs_parquet_meta_free(m);
	close(fd);
	return rc ? 1 : 0;
}
