/*
 * Trees of plain files (ImageFolder and the like): every file is one
 * sample, or files sharing a key (path up to the first dot of the
 * basename) together are one sample; the indexer does the grouping.  Never
 * sliced: the view shows each file as a symlink, keeping sub-directories.
 */
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>

#include "formats/format_i.h"

static int files_scan(const struct sfs_scan_in *in, struct sfs_scan *out,
		      struct sfs_error *err)
{
	(void)in;
	(void)err;
	out->nsamples = 1;
	return 0;
}

/* One directory per "shard" (a class), 1..3 files (.jpg .cls .json) per
 * sample sharing its key. */
static int files_synthesize(const struct sfs_synth *s, uint64_t shard,
			    const char *dir, struct sfs_error *err)
{
	static const char *const ext[] = { ".jpg", ".cls", ".json" };
	struct sfs_synth_file f;
	struct sfs_prng r;
	uint64_t n, i, m, nm, size;
	char path[PATH_MAX];
	int rc = 0;

	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		return sfs_errorf(err, -errno, "%s: %s", dir, strerror(errno));
	sfs_prng_init(&r, s->seed, shard, 4);
	n = sfs_synth_pick(&r, s->samples_lo, s->samples_hi);
	for (i = 0; !rc && i < n; i++) {
		nm = sfs_synth_pick(&r, s->members_lo, s->members_hi);
		for (m = 0; !rc && m < nm; m++) {
			size = sfs_synth_pick(&r, s->size_lo, s->size_hi);
			sfs_synth_fill(&r, s->buf, size);
			if ((size_t)snprintf(path, sizeof(path),
					     "%s/%06llu_%06llu%s", dir,
					     (unsigned long long)shard,
					     (unsigned long long)i,
					     ext[m % 3]) >= sizeof(path))
				return sfs_errorf(err, -ENAMETOOLONG,
						  "%s: path too long", dir);
			rc = sfs_synth_open(&f, path, err);
			if (rc)
				break;
			sfs_synth_put(&f, s->buf, size);
			rc = sfs_synth_close(&f, 0, err);
		}
	}
	return rc;
}

const struct sfs_format_ops sfs_format_files = {
	.name = "files",
	.allow_empty = true,
	.tree = true,
	.whole_file = true,
	.scan = files_scan,
	.samples = sfs_format_whole_samples,
	.synthesize = files_synthesize,
};
