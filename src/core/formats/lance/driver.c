/*
 * Lance datasets as shards: a directory holding _versions/ is one shard
 * (format.h, dataset), which the index knows by the manifest of the
 * version it counted, "<dataset>/_versions/<name>.manifest": an immutable
 * file (Lance writes a new one per version), so a dataset that moves on is
 * a new shard to a refresh, and one cleaned up under the index is a
 * missing shard to the stale check.  Its samples are its live rows in the
 * manifest's fragment order; the plan cuts it anywhere (lay_out), into
 * runs that a view will turn into fragments.
 *
 * A row's digest (for the auditor) is the SHA-256 of its address, not of
 * its values: "lance-row", NUL, each data file path of its fragment (as
 * the manifest names it, relative to data/) and a NUL, then its physical
 * offset as a u64 little-endian.  Lance data files are immutable and named
 * uniquely, so the address names the row's bytes; a reader's dataset,
 * whose fragments point at the same files, gives the same digests.
 *
 * A reader sees a dataset of its own (dataset_view, sfs_lance_view_build):
 * never a slice, so lay_out only declares that a dataset may be cut
 * anywhere, and refuses to lay one out.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "formats/format_i.h"
#include "formats/lance/lance_i.h"
#include "shardfs/digest.h"
#include "shardfs/lance.h"
#include "shardfs/shard.h"

#define NO_SLICE                                                         \
	"a Lance dataset is shown to a reader as a dataset of its own, " \
	"never as a slice of bytes"

static int lance_dataset(int dirfd, const char *rel, uint64_t want,
			 char **shard, struct sfs_error *err)
{
	uint64_t version;
	char *name;
	int rc = sfs_lance_find(dirfd, rel, want, &name, &version, err);

	if (rc <= 0)
		return rc;
	if (asprintf(shard, "%s%s%s/%s", rel, *rel ? "/" : "",
		     SFS_LANCE_VERSIONS, name) < 0) {
		*shard = NULL;
		rc = sfs_errorf(err, -ENOMEM, "out of memory");
	}
	free(name);
	return rc;
}

static int lance_scan(const struct sfs_scan_in *in, struct sfs_scan *out,
		      struct sfs_error *err)
{
	struct sfs_lance_dataset *ds;
	struct stat st;
	int rc;

	if (fstat(in->dirfd, &st) < 0 || !S_ISDIR(st.st_mode))
		return sfs_errorf(
			err, -EINVAL,
			"%s: a Lance manifest read without its dataset's directory: index the directory that holds the dataset",
			in->path);
	rc = sfs_lance_open(in->dirfd, in->path, in->fd, &ds, err);
	if (rc)
		return rc;
	out->nsamples = ds->rows;
	if (in->digest_fn) {
		rc = sfs_lance_row_digests(in->dirfd, ds, NULL, in->digest_fn,
					   in->digest_arg, err);
		if (rc && !err->msg[0])
			rc = sfs_errorf(err, rc, "%s: %s", in->path,
					strerror(-rc));
		out->digested = !rc;
	}
	sfs_lance_free(ds);
	return rc;
}

static int lance_lay_out(int fd, const struct sfs_shard *sh,
			 const struct sfs_run *runs, size_t nruns,
			 sfs_extent_fn add, void *arg, struct sfs_error *err)
{
	(void)fd;
	(void)runs;
	(void)nruns;
	(void)add;
	(void)arg;
	return sfs_errorf(err, -EOPNOTSUPP, "%s: %s", sh->path, NO_SLICE);
}

static int lance_dataset_view(int dirfd, const struct sfs_shard *sh, int fd,
			      const struct sfs_run *runs, size_t nruns,
			      struct sfs_dataset_view **out,
			      struct sfs_error *err)
{
	struct sfs_lance_dataset *ds;
	int rc = sfs_lance_open_view(dirfd, sh->path, fd, &ds, err);

	if (rc)
		return rc;
	if (ds->rows != sh->nsamples)
		rc = sfs_errorf(
			err, -ESTALE,
			"%s: holds %llu live rows, the index says %llu: rebuild the index with shardfs-index",
			sh->path, (unsigned long long)ds->rows,
			(unsigned long long)sh->nsamples);
	else
		rc = sfs_lance_view_build(dirfd, ds, runs, nruns, out, err);
	sfs_lance_free(ds);
	return rc;
}

static int lance_samples(int fd, const char *path, sfs_sample_fn fn, void *arg,
			 struct sfs_error *err)
{
	(void)fd;
	(void)fn;
	(void)arg;
	return sfs_errorf(
		err, -EOPNOTSUPP,
		"%s: a Lance dataset's rows are read by the index (shardfs-index), not from a file; %s",
		path, NO_SLICE);
}

const struct sfs_format_ops sfs_format_lance = {
	.name = "lance",
	.run_piece = "fragment",
	.dataset = lance_dataset,
	.scan = lance_scan,
	.lay_out = lance_lay_out,
	.dataset_view = lance_dataset_view,
	.samples = lance_samples,
};
