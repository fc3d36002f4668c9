/*
 * libFuzzer harness: any bytes, read as a Parquet file, and read once more
 * framed: the first 4 bytes (le32, modulo what follows) say how many of
 * the rest are data, the others are the footer, and the file is PAR1, the
 * data, the footer, its true length and PAR1 -- so that mutations of the
 * footer are not all lost to a wrong footer length (the seeds named
 * framed-* are in this form).  A read may refuse the bytes, never crash.
 * When it accepts them, the footer is rewritten twice and each result must
 * read back:
 *  - every row group where it is: the new tail after the same data must
 *    decode to the same rows, and rewriting that again must give the same
 *    bytes (the writer is a fixed point on its own output);
 *  - every other row group, its chunks laid end to end after PAR1: the
 *    slice must decode, holding those row groups' rows.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "shardfs/parquet.h"

static struct sfs_parquet_meta *read_mem(const void *data, size_t size)
{
	struct sfs_parquet_meta *m = NULL;
	int fd = memfd_create("fuzz", MFD_CLOEXEC);

	if (fd < 0)
		abort();
	if (write(fd, data, size) != (ssize_t)size)
		abort();
	if (sfs_parquet_footer_read(fd, "fuzz", size, &m, NULL))
		m = NULL;
	close(fd);
	return m;
}

/*
 * Edits for the row groups step, step*2, ...: laid end to end from byte 4
 * when splice, else where they are.  Returns their row count.
 */
static int64_t edits(const struct sfs_parquet_meta *m, size_t step, int splice,
		     struct sfs_parquet_rg_edit *e,
		     struct sfs_parquet_chunk_edit *ce, size_t *n,
		     uint64_t *end)
{
	int64_t rows = 0;
	uint64_t pos = 4;
	size_t i, j;

	*n = 0;
	for (i = 0; i < m->nrow_groups; i += step) {
		const struct sfs_parquet_row_group *g = &m->row_groups[i];

		e[*n].row_group = i;
		e[*n].num_rows = g->num_rows;
		e[*n].chunks = ce + *n * m->nleaves;
		for (j = 0; j < g->nchunks; j++) {
			const struct sfs_parquet_chunk *c = &g->chunks[j];
			struct sfs_parquet_chunk_edit *x =
				&ce[*n * m->nleaves + j];

			x->start = splice ? (int64_t)pos :
					    sfs_parquet_chunk_start(c);
			x->total_compressed_size = c->total_compressed_size;
			x->total_uncompressed_size = c->total_uncompressed_size;
			x->num_values = c->num_values;
			pos += (uint64_t)c->total_compressed_size;
		}
		rows += g->num_rows;
		(*n)++;
	}
	*end = pos;
	return rows;
}

static void same(const struct sfs_parquet_meta *m, const uint8_t *data,
		 struct sfs_parquet_rg_edit *e,
		 struct sfs_parquet_chunk_edit *ce)
{
	struct sfs_parquet_meta *back;
	unsigned char *tail, *tail2, *file;
	size_t n, len, len2;
	uint64_t end;
	int64_t rows = edits(m, 1, 0, e, ce, &n, &end);

	if (sfs_parquet_footer_write(m, e, n, &tail, &len, NULL))
		abort();
	file = malloc(m->data_end + len);
	memcpy(file, data, m->data_end);
	memcpy(file + m->data_end, tail, len);
	back = read_mem(file, m->data_end + len);
	if (!back || back->num_rows != rows ||
	    back->nrow_groups != m->nrow_groups || back->nleaves != m->nleaves)
		abort();
	edits(back, 1, 0, e, ce, &n, &end);
	if (sfs_parquet_footer_write(back, e, n, &tail2, &len2, NULL))
		abort();
	if (len2 != len || memcmp(tail, tail2, len))
		abort();
	sfs_parquet_meta_free(back);
	free(tail2);
	free(tail);
	free(file);
}

static void slice(const struct sfs_parquet_meta *m, const uint8_t *data,
		  struct sfs_parquet_rg_edit *e,
		  struct sfs_parquet_chunk_edit *ce)
{
	struct sfs_parquet_meta *back;
	unsigned char *tail, *file;
	size_t n, len, i, j;
	uint64_t end, pos = 4;
	int64_t rows = edits(m, 2, 1, e, ce, &n, &end);

	if (sfs_parquet_footer_write(m, e, n, &tail, &len, NULL))
		abort();
	file = malloc(end + len);
	memcpy(file, "PAR1", 4);
	for (i = 0; i < n; i++) {
		const struct sfs_parquet_row_group *g =
			&m->row_groups[e[i].row_group];

		for (j = 0; j < g->nchunks; j++) {
			const struct sfs_parquet_chunk *c = &g->chunks[j];
			size_t k = (size_t)c->total_compressed_size;

			memcpy(file + pos, data + sfs_parquet_chunk_start(c),
			       k);
			pos += k;
		}
	}
	memcpy(file + end, tail, len);
	back = read_mem(file, end + len);
	if (!back || back->num_rows != rows || back->nrow_groups != n)
		abort();
	sfs_parquet_meta_free(back);
	free(tail);
	free(file);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const uint8_t *data, size_t size)
{
	struct sfs_parquet_meta *m = read_mem(data, size);
	struct sfs_parquet_chunk_edit *ce;
	struct sfs_parquet_rg_edit *e;

	if (!m)
		return;
	e = calloc(m->nrow_groups + 1, sizeof(*e));
	ce = calloc(m->nrow_groups * m->nleaves + 1, sizeof(*ce));
	if (!e || !ce)
		abort();
	same(m, data, e, ce);
	slice(m, data, e, ce);
	free(ce);
	free(e);
	sfs_parquet_meta_free(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *file;
	size_t d, footer;

	check(data, size);
	if (size < 4)
		return 0;
	d = (size_t)(data[0] | data[1] << 8 | data[2] << 16 |
		     (uint32_t)data[3] << 24) %
	    (size - 3);
	footer = size - 4 - d;
	file = malloc(size + 8);
	if (!file)
		abort();
	memcpy(file, "PAR1", 4);
	memcpy(file + 4, data + 4, size - 4);
	file[size] = (uint8_t)footer;
	file[size + 1] = (uint8_t)(footer >> 8);
	file[size + 2] = (uint8_t)(footer >> 16);
	file[size + 3] = (uint8_t)(footer >> 24);
	memcpy(file + size + 4, "PAR1", 4);
	check(file, size + 8);
	free(file);
	return 0;
}
