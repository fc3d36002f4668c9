/*
 * libFuzzer harness: any bytes, read as a Parquet file down to its pages.
 * Reading every row's digest may refuse the bytes, never crash.  When it
 * accepts them, every row group is cut to its middle third (at least one
 * row) and the cut laid out as a slice file (PAR1, the pieces, the footer
 * of that one row group): the slice must read back, its rows' digests
 * must be exactly the source's digests of those rows.  (The footer of a
 * slice may be refused when the original's sizes are absurd.)
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "shardfs/parquet.h"

#define ROWS_MAX 100000 /* rows digested per input (time per input) */

struct digests {
	unsigned char (*d)[32];
	uint64_t n;
};

static int collect(void *arg, uint64_t row, const unsigned char digest[32])
{
	struct digests *ds = arg;

	if (row != ds->n || row >= ROWS_MAX)
		return 1;
	memcpy(ds->d[ds->n++], digest, 32);
	return 0;
}

static int mem_fd(const void *data, size_t size)
{
	int fd = memfd_create("fuzz", MFD_CLOEXEC);

	if (fd < 0 || write(fd, data, size) != (ssize_t)size)
		abort();
	return fd;
}

/* Cut row group g of m to rows [a, a + n): its slice must hold exactly
 * those rows, whose digests begin at want. */
static void check_cut(int fd, const uint8_t *data,
		      const struct sfs_parquet_meta *m, size_t g, int64_t a,
		      int64_t n, unsigned char (*want)[32])
{
	struct sfs_parquet_chunk_edit *ce =
		calloc(m->nleaves ? m->nleaves : 1, sizeof(*ce));
	struct sfs_parquet_rg_edit e = { .row_group = g,
					 .num_rows = n,
					 .chunks = ce };
	struct sfs_parquet_cut *cut;
	struct sfs_parquet_meta *back = NULL;
	struct digests got = { calloc((size_t)n, 32), 0 };
	unsigned char *tail, *file = NULL;
	size_t len, size = 4, c, k;
	int sfd;

	if (sfs_parquet_cut(fd, m, g, a, n, &cut, NULL))
		abort(); /* every page decoded when the rows were read */
	for (c = 0; c < cut->ncolumns; c++) {
		ce[c].start = (int64_t)size;
		ce[c].total_compressed_size =
			cut->columns[c].total_compressed_size;
		ce[c].total_uncompressed_size =
			cut->columns[c].total_uncompressed_size;
		ce[c].num_values = cut->columns[c].num_values;
		size += (size_t)cut->columns[c].total_compressed_size;
	}
	/* a footer whose sizes are absurd may be refused (its message says
	 * so), never a cut */
	if (sfs_parquet_footer_write(m, &e, 1, &tail, &len, NULL))
		goto out;
	file = malloc(size + len);
	memcpy(file, "PAR1", 4);
	size = 4;
	for (c = 0; c < cut->ncolumns; c++)
		for (k = 0; k < cut->columns[c].npieces; k++) {
			const struct sfs_parquet_piece *p =
				&cut->columns[c].pieces[k];

			memcpy(file + size, p->mem ? p->mem : data + p->src,
			       p->len);
			size += p->len;
		}
	memcpy(file + size, tail, len);
	sfd = mem_fd(file, size + len);
	if (sfs_parquet_footer_read(sfd, "slice", size + len, &back, NULL) ||
	    back->num_rows != n ||
	    sfs_parquet_rows(sfd, back, collect, &got, NULL) ||
	    got.n != (uint64_t)n || memcmp(got.d, want, (size_t)n * 32))
		abort();
	close(sfd);
	sfs_parquet_meta_free(back);
	free(tail);
	free(file);
out:
	sfs_parquet_cut_free(cut);
	free(got.d);
	free(ce);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sfs_parquet_meta *m = NULL;
	struct digests all = { 0 };
	int fd = mem_fd(data, size);
	int64_t first = 0;
	size_t g;

	if (sfs_parquet_footer_read(fd, "fuzz", size, &m, NULL) ||
	    m->num_rows > ROWS_MAX)
		goto out;
	all.d = calloc((size_t)m->num_rows + 1, 32);
	if (sfs_parquet_rows(fd, m, collect, &all, NULL))
		goto out;
	if (all.n != (uint64_t)m->num_rows)
		abort();
	for (g = 0; g < m->nrow_groups; g++) {
		int64_t rows = m->row_groups[g].num_rows;
		int64_t a = rows / 3, n = rows / 3 ? rows / 3 : 1;

		if (rows)
			check_cut(fd, data, m, g, a, n, all.d + first + a);
		first += rows;
	}
out:
	sfs_parquet_meta_free(m);
	free(all.d);
	close(fd);
	return 0;
}
