/*
 * Opaque whole files (arrow, numpy, ...): one unit each, never
 * sliced, holding the declared number of samples (shardfs-index
 * --samples-per-shard, default 1).  Equal counts per reader then depend on
 * the plan never having to cut such a shard; the plan says so when it must.
 */
#include "formats/format_i.h"

static int opaque_scan(const struct sfs_scan_in *in, struct sfs_scan *out,
		       struct sfs_error *err)
{
	(void)err;
	out->nsamples = in->declared ? in->declared : 1;
	return 0;
}

static const char *const opaque_suffixes[] = { ".arrow", ".npy", ".npz", NULL };

const struct sfs_format_ops sfs_format_opaque = {
	.name = "opaque",
	.suffixes = opaque_suffixes,
	.whole_file = true,
	.declared = true,
	.scan = opaque_scan,
	.samples = sfs_format_whole_samples,
};
