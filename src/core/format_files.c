/*
 * Trees of plain files (ImageFolder and the like): every file is one
 * sample, or files sharing a key (path up to the first dot of the
 * basename) together are one sample; the indexer does the grouping.  Never
 * sliced: the view shows each file as a symlink, keeping sub-directories.
 */
#include "format_i.h"

static int files_scan(const struct sfs_scan_in *in, struct sfs_scan *out,
		      struct sfs_error *err)
{
	(void)in;
	(void)err;
	out->nsamples = 1;
	return 0;
}

const struct sfs_format_ops sfs_format_files = {
	.name = "files",
	.allow_empty = true,
	.scan = files_scan,
	.samples = sfs_format_whole_samples,
};
