/*
 * A Lance dataset's rows as the auditor knows them: one digest per live
 * row, in fragment order.  The index's digests of a source dataset
 * (driver.c's scan) and the auditor's reading of a reader's dataset back
 * (sfs_lance_view_read) both come from sfs_lance_row_digests, so that a
 * row served by a view has the digest of the source row it names.
 *
 * A row's digest is the SHA-256 of its address, not of its values:
 * "lance-row", NUL, each data file path of its fragment (as the manifest
 * names it, relative to data/) and a NUL, then its physical offset as a
 * u64 little-endian.  Lance data files are immutable and named uniquely,
 * so the address names the row's bytes.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats/lance/lance_i.h"
#include "shardfs/digest.h"
#include "shardfs/lance.h"

/* Hands every live row's digest of one fragment to fn. */
struct row_digests {
	const struct sfs_lance_fragment *fr;
	struct sfs_digest *d;
	sfs_sample_fn fn;
	void *arg;
	uint64_t sample;
};

static int digest_run(void *arg, uint64_t first, uint64_t count)
{
	struct row_digests *rd = arg;
	unsigned char digest[SFS_DIGEST_LEN], le[8];
	uint64_t row;
	size_t k;
	int i, rc;

	for (row = first; row < first + count; row++) {
		sfs_digest_update(rd->d, "lance-row", 10);
		for (k = 0; k < rd->fr->nfiles; k++)
			sfs_digest_update(rd->d, rd->fr->files[k].path,
					  strlen(rd->fr->files[k].path) + 1);
		for (i = 0; i < 8; i++)
			le[i] = (unsigned char)(row >> 8 * i);
		sfs_digest_update(rd->d, le, 8);
		if (sfs_digest_final(rd->d, digest))
			return -EIO;
		rc = rd->fn(rd->arg, rd->sample++, digest);
		if (rc)
			return rc;
	}
	return 0;
}

int sfs_lance_row_digests(int dirfd, const struct sfs_lance_dataset *ds,
			  int (*frag)(void *arg, size_t f), sfs_sample_fn fn,
			  void *arg, struct sfs_error *err)
{
	struct row_digests rd = { .fn = fn, .arg = arg };
	size_t f;
	int rc = 0;

	rd.d = sfs_digest_new();
	if (!rd.d)
		return sfs_errorf(err, -ENOMEM, "out of memory");
	for (f = 0; !rc && f < ds->m->nfragments; f++) {
		rd.fr = &ds->m->fragments[f];
		if (frag)
			rc = frag(arg, f);
		if (!rc)
			rc = sfs_lance_live_runs(dirfd, ds, f, digest_run, &rd,
						 err);
	}
	if (!rc && rd.sample != ds->rows)
		rc = sfs_errorf(err, -EIO,
				"%s: the deletion files changed while read",
				ds->manifest_path);
	sfs_digest_free(rd.d);
	return rc;
}

/* What sfs_lance_view_read hands on, fragment by fragment. */
struct view_read {
	const struct sfs_lance_dataset *ds;
	const struct sfs_lance_view_reader *rd;
};

static int view_fragment(void *arg, size_t f)
{
	struct view_read *vr = arg;
	const struct sfs_lance_fragment *fr = &vr->ds->m->fragments[f];
	size_t k;
	int rc = 0;

	if (vr->rd->fragment)
		rc = vr->rd->fragment(vr->rd->arg, f,
				      fr->physical_rows - fr->deleted);
	for (k = 0; !rc && vr->rd->data_file && k < fr->nfiles; k++)
		rc = vr->rd->data_file(vr->rd->arg, fr->files[k].path,
				       fr->files[k].size);
	return rc;
}

static int view_row(void *arg, uint64_t sample, const unsigned char d[32])
{
	struct view_read *vr = arg;

	return vr->rd->row(vr->rd->arg, sample, d);
}

int sfs_lance_view_read(int dirfd, const char *path,
			const struct sfs_lance_view_reader *rd,
			struct sfs_error *err)
{
	struct view_read vr = { .rd = rd };
	struct sfs_lance_dataset *ds = NULL;
	char *name = NULL, *mpath = NULL;
	uint64_t version;
	int rc = sfs_lance_latest(dirfd, "", &name, &version, err);

	if (rc == 0)
		return sfs_errorf(
			err, -EINVAL,
			"%s: no %s/<version>.manifest: not a Lance dataset (a reader's dataset directory of a view holds one manifest); audit a mounted view",
			path, SFS_LANCE_VERSIONS);
	if (rc < 0)
		return rc;
	if (asprintf(&mpath, "%s/%s", SFS_LANCE_VERSIONS, name) < 0) {
		mpath = NULL;
		rc = sfs_errorf(err, -ENOMEM, "out of memory");
		goto out;
	}
	rc = sfs_lance_open_at(dirfd, mpath, -1, SFS_LANCE_OPEN_NO_DATA, &ds,
			       err);
	if (!rc) {
		vr.ds = ds;
		rc = sfs_lance_row_digests(dirfd, ds, view_fragment, view_row,
					   &vr, err);
	}
	if (rc && rc != -ENOMEM && !err->msg[0])
		rc = sfs_errorf(err, rc, "%s: %s", path, strerror(-rc));
out:
	sfs_lance_free(ds);
	free(mpath);
	free(name);
	return rc;
}
