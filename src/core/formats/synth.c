/*
 * Helpers for the drivers' synthesize ops (shardfs-mkdata): every size,
 * count and byte of a synthetic shard comes from the plan's PRNG, so the
 * same options give the same bytes on every machine.
 */
#include <errno.h>
#include <string.h>

#include "formats/format_i.h"

uint64_t sfs_synth_pick(struct sfs_prng *r, uint64_t lo, uint64_t hi)
{
	return lo + sfs_prng_below(r, hi - lo + 1);
}

void sfs_synth_fill(struct sfs_prng *r, unsigned char *p, uint64_t n)
{
	uint64_t i;

	for (i = 0; i < n; i += 8) {
		uint64_t v = sfs_prng_next(r);
		uint64_t k;

		for (k = 0; k < 8 && i + k < n; k++)
			p[i + k] = (unsigned char)(v >> (8 * k));
	}
}

int sfs_synth_open(struct sfs_synth_file *sf, const char *path,
		   struct sfs_error *err)
{
	sf->path = path;
	sf->f = fopen(path, "we");
	if (!sf->f)
		return sfs_errorf(err, -errno, "%s: %s", path, strerror(errno));
	return 0;
}

void sfs_synth_put(struct sfs_synth_file *sf, const void *data, size_t n)
{
	fwrite(data, 1, n, sf->f);
}

int sfs_synth_close(struct sfs_synth_file *sf, int rc, struct sfs_error *err)
{
	int e = ferror(sf->f) ? EIO : 0;

	if (fclose(sf->f) && !e)
		e = errno;
	if (rc)
		return rc;
	return e ? sfs_errorf(err, -e, "%s: %s", sf->path, strerror(e)) : 0;
}
