#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "shardfs/options.h"

int cli_range(const char *name, const char *value, uint64_t min, uint64_t max,
	      uint64_t *lo, uint64_t *hi, struct sfs_error *err)
{
	const char *dash = strchr(value, '-');
	char first[32];
	int rc;

	if (!dash) {
		rc = sfs_options_number(name, value, min, max, lo, err);
		*hi = *lo;
		return rc;
	}
	if ((size_t)(dash - value) >= sizeof(first))
		return sfs_errorf(err, -EINVAL,
				  "--%s %s is not a range: write A or A-B",
				  name, value);
	memcpy(first, value, (size_t)(dash - value));
	first[dash - value] = '\0';
	rc = sfs_options_number(name, first, min, max, lo, err);
	if (!rc)
		rc = sfs_options_number(name, dash + 1, min, max, hi, err);
	if (!rc && *hi < *lo)
		rc = sfs_errorf(
			err, -EINVAL,
			"--%s %s is an empty range: write A-B with A <= B",
			name, value);
	return rc;
}

const char *cli_bytes(uint64_t n, char *buf, size_t len)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)n;
	int u = 0;

	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", v, units[u]);
	return buf;
}

double cli_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void cli_fail(const char *prog, const char *msg)
{
	fprintf(stderr, "%s: %s\n", prog, msg);
}
