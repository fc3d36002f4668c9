/*
 * libFuzzer harness: any bytes, read as a Lance manifest file (the bounded
 * protobuf reader under the manifest decoder).  A read may refuse the
 * bytes, never crash.  When it accepts them, what it returns must keep its
 * promises: every fragment has a data file with a safe relative path and
 * at most 2^32 rows, no more rows deleted than it holds, and a deletion
 * file path that names it.  The view's shallow decode (fragments' data
 * files counted, each decoded later from its own bytes) must agree with
 * the whole decode wherever the whole one accepts, and never crash where it
 * refuses.  Seeds: every version of the datasets pylance wrote in
 * tests/unit/fixtures/lance.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lance_i.h"
#include "shardfs/index.h"
#include "shardfs/lance.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void clear(struct sfs_lance_fragment *f)
{
	size_t k;

	for (k = 0; k < f->nfiles; k++) {
		free(f->files[k].path);
		free(f->files[k].fields);
	}
	free(f->files);
}

/* The shallow decode, and each fragment decoded from its own bytes: equal
 * to whole (NULL: the whole decode refused the bytes) where it accepts. */
static void shallow(const uint8_t *data, size_t size,
		    const struct sfs_lance_manifest *whole)
{
	struct sfs_error err = { 0 };
	struct sfs_lance_manifest *m = NULL;
	size_t i, k;

	if (sfs_lance_manifest_decode(data, size, "fuzz", true, &m, &err)) {
		if (whole || m)
			abort(); /* it decodes less: it may not refuse more */
		return;
	}
	if (whole && m->nfragments != whole->nfragments)
		abort();
	for (i = 0; i < m->nfragments; i++) {
		const struct sfs_lance_fragment *f = &m->fragments[i];
		struct sfs_lance_fragment got = { 0 };

		if (f->files || f->nfiles || f->at > size ||
		    f->len > size - f->at)
			abort();
		if (sfs_lance_fragment_decode(data, size, "fuzz", f, &got,
					      &err)) {
			if (whole || got.files)
				abort();
			continue;
		}
		if (whole) {
			const struct sfs_lance_fragment *w =
				&whole->fragments[i];

			if (got.id != w->id ||
			    got.physical_rows != w->physical_rows ||
			    got.nfiles != w->nfiles)
				abort();
			for (k = 0; k < got.nfiles; k++)
				if (strcmp(got.files[k].path, w->files[k].path))
					abort();
		}
		clear(&got);
	}
	sfs_lance_manifest_free(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sfs_error err = { 0 };
	struct sfs_lance_manifest *m = NULL;
	size_t i, k;

	if (sfs_lance_manifest_parse(data, size, "fuzz", &m, &err)) {
		if (m || !err.msg[0] || strncmp(err.msg, "fuzz: ", 6))
			abort(); /* a refusal names the file and leaves no
				  * manifest */
		shallow(data, size, NULL);
		return 0;
	}
	shallow(data, size, m);
	for (i = 0; i < m->nfragments; i++) {
		const struct sfs_lance_fragment *f = &m->fragments[i];
		char *del, want[80];

		if (!f->nfiles || !f->physical_rows ||
		    f->physical_rows > SFS_LANCE_ROWS_MAX ||
		    f->deletion.num_deleted > f->physical_rows)
			abort();
		for (k = 0; k < f->nfiles; k++)
			if (!sfs_index_path_ok(f->files[k].path))
				abort();
		if (!f->deletion.present)
			continue;
		del = sfs_lance_deletion_path(f);
		snprintf(want, sizeof(want), "_deletions/%" PRIu64 "-", f->id);
		if (!del || strncmp(del, want, strlen(want)))
			abort();
		free(del);
	}
	if (m->reader_flags & ~(uint64_t)SFS_LANCE_FLAGS_READ)
		abort();
	sfs_lance_manifest_free(m);
	return 0;
}
