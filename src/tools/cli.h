/* Small helpers the command-line tools share: ranges, sizes, messages. */
#ifndef SHARDFS_CLI_H
#define SHARDFS_CLI_H

#include <stdint.h>

#include "shardfs/error.h"

/* Exit statuses of every tool. */
#define CLI_OK 0
#define CLI_FOUND 1 /* the check ran and found a problem */
#define CLI_ERROR 2 /* usage, I/O: could not do the job */

/* Parse "A" or "A-B" (A <= B) within [min, max] for option name. */
int cli_range(const char *name, const char *value, uint64_t min, uint64_t max,
	      uint64_t *lo, uint64_t *hi, struct sfs_error *err);

/* "1.5 GiB": bytes in a human unit, into buf. */
const char *cli_bytes(uint64_t n, char *buf, size_t len);

/* Seconds on the monotonic clock, for elapsed times and rates. */
double cli_now(void);

/* Print "prog: message" to stderr. */
void cli_fail(const char *prog, const char *msg);

#endif
