/*
 * libFuzzer harness: option strings (-o lists, with rank lists inside) and
 * writes to .shardfs/epoch.  Refused or accepted, never a crash; accepted
 * rank lists are sorted and unique.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shardfs/options.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	struct sfs_options o;
	char *rest = NULL;
	uint64_t epoch;
	size_t i;

	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	sfs_options_init(&o);
	if (!sfs_options_parse_known(&o, text, &rest, NULL)) {
		for (i = 1; i < o.nranks; i++)
			if (o.ranks[i - 1] >= o.ranks[i])
				abort();
		sfs_options_check(&o, NULL);
	}
	free(rest);
	sfs_options_clear(&o);
	sfs_options_parse_epoch((const char *)data, size, &epoch, NULL);
	free(text);
	return 0;
}
