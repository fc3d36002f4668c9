/*
 * libFuzzer harness: a follow log (follow.h), as a restart finds it after a
 * crash, a full disk or someone's editor.  Refused or accepted, never a
 * crash; an accepted log is sorted by name, each name once, every name one
 * a stream may hold, and a torn last line is left out; every entry, written
 * back as the daemon writes a line (a time before 1970 negative), parses
 * back to itself.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardfs/follow.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sfs_shard *s = NULL;
	struct sfs_error err = { 0 };
	size_t n = 0, i, lines = 0;

	if (sfs_follow_log_parse((const char *)data, size, "fuzz.log", &s, &n,
				 &err)) {
		if (s || n || !err.msg[0])
			abort();
		return 0;
	}
	for (i = 0; i < size; i++)
		lines += data[i] == '\n';
	if (n + 1 > lines)
		abort(); /* an entry without its line */
	for (i = 0; i < n; i++) {
		if (!s[i].path[0] || s[i].path[0] == '.' ||
		    strchr(s[i].path, '\n'))
			abort();
		if (i && strcmp(s[i - 1].path, s[i].path) >= 0)
			abort();
	}
	for (i = 0; i < n; i++) {
		char line[SFS_FOLLOW_LINE_MAX + 32];
		struct sfs_shard *b;
		size_t nb;
		int len = snprintf(line, sizeof(line),
				   "shardfs-follow 1\n%" PRIu64 " %" PRIu64
				   " %" PRId64 " %s\n",
				   s[i].nsamples, s[i].size, s[i].mtime_ns,
				   s[i].path);

		if (len < 0 || (size_t)len >= sizeof(line) ||
		    sfs_follow_log_parse(line, (size_t)len, "back.log", &b, &nb,
					 &err) ||
		    nb != 1 || b[0].nsamples != s[i].nsamples ||
		    b[0].size != s[i].size || b[0].mtime_ns != s[i].mtime_ns ||
		    strcmp(b[0].path, s[i].path))
			abort();
		sfs_follow_shards_free(b, nb);
	}
	sfs_follow_shards_free(s, n);
	return 0;
}
