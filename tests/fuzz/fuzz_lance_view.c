/*
 * libFuzzer harness: a reader's Lance dataset built for runs read from the
 * input (pairs of u16 little-endian: first, count, each taken modulo what
 * fits) over tests/unit/fixtures/lance/frags.lance (1732 live rows in 6
 * fragments, Arrow and bitmap deletions), then read back with the
 * module's own readers: the new manifest must decode, every fragment's
 * data files must be one source fragment's, its bitmap must decode, and
 * the rows it leaves live, fragment after fragment, must be exactly the
 * source rows the runs name, in order.  The fixtures are found beside
 * this file's source (or at $LANCE_FIXTURES).
 */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shardfs/lance.h"

#define ROWS_MAX 1800

/* A row of the source: its fragment (index) and physical offset. */
struct row {
	size_t frag;
	uint64_t phys;
};

struct rows {
	struct row *r;
	size_t n, cap;
	size_t frag;
};

static int add_rows(void *arg, uint64_t first, uint64_t count)
{
	struct rows *rs = arg;
	uint64_t i;

	for (i = 0; i < count; i++) {
		if (rs->n == rs->cap) {
			rs->cap = rs->cap ? 2 * rs->cap : 1024;
			rs->r = realloc(rs->r, rs->cap * sizeof(*rs->r));
			if (!rs->r)
				abort();
		}
		rs->r[rs->n++] = (struct row){ rs->frag, first + i };
	}
	return 0;
}

/* The deleted runs of a view fragment, turned into its live rows. */
struct gaps {
	struct rows *out;
	uint64_t next;
};

static int add_gap(void *arg, uint64_t first, uint64_t count)
{
	struct gaps *g = arg;

	if (first > g->next)
		add_rows(g->out, g->next, first - g->next);
	g->next = first + count;
	return 0;
}

static int dirfd_ = -1;
static struct sfs_lance_dataset *ds;
static struct rows source; /* every live row of ds, in order */

static void setup(void)
{
	char path[PATH_MAX];
	const char *dir = getenv("LANCE_FIXTURES");
	struct sfs_error err = { 0 };
	char *name, *mpath;
	uint64_t v;
	size_t f;

	if (!dir) {
		snprintf(path, sizeof(path), "%s", __FILE__);
		*strrchr(path, '/') = '\0';
		strncat(path, "/../unit/fixtures/lance",
			sizeof(path) - strlen(path) - 1);
		dir = path;
	}
	dirfd_ = open(dir, O_RDONLY | O_DIRECTORY);
	if (dirfd_ < 0 ||
	    sfs_lance_latest(dirfd_, "frags.lance", &name, &v, &err) != 1 ||
	    asprintf(&mpath, "frags.lance/_versions/%s", name) < 0 ||
	    sfs_lance_open(dirfd_, mpath, -1, &ds, &err)) {
		fprintf(stderr, "fuzz_lance_view: %s: %s\n", dir, err.msg);
		abort();
	}
	free(name);
	free(mpath);
	for (f = 0; f < ds->m->nfragments; f++) {
		source.frag = f;
		if (sfs_lance_live_runs(dirfd_, ds, f, add_rows, &source, &err))
			abort();
	}
	if (source.n != ds->rows)
		abort();
}

/* The source fragment whose data files a view fragment has. */
static size_t source_fragment(const struct sfs_lance_fragment *vf)
{
	size_t f;

	for (f = 0; f < ds->m->nfragments; f++)
		if (ds->m->fragments[f].nfiles == vf->nfiles &&
		    !strcmp(ds->m->fragments[f].files[0].path,
			    vf->files[0].path))
			return f;
	abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sfs_run runs[64];
	struct sfs_error err = { 0 };
	struct sfs_dataset_view *v;
	struct sfs_lance_manifest *m = NULL;
	struct rows got = { 0 };
	size_t nruns = 0, i, k, want = 0;

	if (dirfd_ < 0)
		setup();
	for (i = 0; i + 4 <= size && nruns < 64; i += 4) {
		uint64_t a = (uint64_t)(data[i] | data[i + 1] << 8) % ds->rows;
		uint64_t n = (uint64_t)(data[i + 2] | data[i + 3] << 8) %
			     (ds->rows - a + 1);

		if (want + n > ROWS_MAX)
			break;
		runs[nruns++] = (struct sfs_run){ a, n };
		want += n;
	}
	if (sfs_lance_view_build(dirfd_, ds, runs, nruns, &v, &err)) {
		fprintf(stderr, "%s\n", err.msg);
		abort();
	}
	if (v->rows != want)
		abort();
	for (i = 0; i < v->nfiles; i++)
		if (!strncmp(v->files[i].path, "_versions/", 10) &&
		    sfs_lance_manifest_parse(v->files[i].bytes, v->files[i].len,
					     "view", &m, &err))
			abort();
	if (!m || !m->version || m->version >= 1000000000000000000ULL)
		abort();
	for (i = 0; i < m->nfragments; i++) {
		const struct sfs_lance_fragment *vf = &m->fragments[i];
		struct gaps g = { .out = &got };
		uint64_t n = 0;
		char *del;

		got.frag = source_fragment(vf);
		if (vf->id != i ||
		    vf->physical_rows !=
			    ds->m->fragments[got.frag].physical_rows)
			abort();
		if (!vf->deletion.present) {
			add_rows(&got, 0, vf->physical_rows);
			continue;
		}
		del = sfs_lance_deletion_path(vf);
		for (k = 0; k < v->nfiles; k++)
			if (!strcmp(v->files[k].path, del))
				break;
		if (k == v->nfiles ||
		    sfs_lance_deletion_parse(v->files[k].bytes, v->files[k].len,
					     (int)vf->deletion.type, del,
					     vf->physical_rows, add_gap, &g, &n,
					     &err) ||
		    n != vf->deletion.num_deleted)
			abort();
		add_rows(&got, g.next, vf->physical_rows - g.next);
		free(del);
	}
	/* the rows left live are the runs' rows, in order */
	if (got.n != want)
		abort();
	for (i = 0, k = 0; i < nruns; i++) {
		uint64_t s;

		for (s = runs[i].first; s < runs[i].first + runs[i].count;
		     s++, k++)
			if (got.r[k].frag != source.r[s].frag ||
			    got.r[k].phys != source.r[s].phys)
				abort();
	}
	free(got.r);
	sfs_lance_manifest_free(m);
	sfs_dataset_view_free(v);
	return 0;
}
