/*
 * libFuzzer harness: a follow log (follow.h), as a restart finds it after a
 * crash, a full disk or someone's editor.  Refused or accepted, never a
 * crash; an accepted log is sorted by name, each name once, every name one
 * a stream may hold, and a torn last line is left out.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shardfs/follow.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sfs_follow_shard *s = NULL;
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
		    strchr(s[i].path, '\n') || s[i].mtime_ns < 0)
			abort();
		if (i && strcmp(s[i - 1].path, s[i].path) >= 0)
			abort();
	}
	sfs_follow_shards_free(s, n);
	return 0;
}
