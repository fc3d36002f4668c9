/*
 * libFuzzer harness: any bytes, read as a Lance deletion file.  The first
 * byte says which kind (bit 0: a Roaring bitmap, else an Arrow IPC file)
 * and, by its other bits, how many rows the fragment holds (1 << (b >> 1)
 * when below 2^32, else 100 000); the rest is the file.  A read may refuse
 * the bytes, never crash.  What it reports must hold together: runs in
 * increasing order, none touching the next, none empty, all below the
 * fragment's rows, adding up to the count it returns.  Seeds: the deletion
 * files pylance wrote in tests/unit/fixtures/lance, each behind its byte.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shardfs/lance.h"

struct check {
	uint64_t limit, next, total;
	int any;
};

static int run(void *arg, uint64_t first, uint64_t count)
{
	struct check *c = arg;

	if (!count || (c->any && first <= c->next) || first < c->next ||
	    first + count > c->limit)
		abort();
	c->next = first + count;
	c->total += count;
	c->any = 1;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sfs_error err = { 0 };
	struct check c = { 0 };
	uint64_t deleted;
	unsigned shift;
	int type;

	if (!size)
		return 0;
	type = data[0] & 1 ? SFS_LANCE_DELETION_BITMAP :
			     SFS_LANCE_DELETION_ARROW;
	shift = data[0] >> 1;
	c.limit = shift < 32 ? (uint64_t)1 << shift : 100000;
	if (sfs_lance_deletion_parse(data + 1, size - 1, type, "fuzz", c.limit,
				     run, &c, &deleted, &err)) {
		if (!err.msg[0] || strncmp(err.msg, "fuzz: ", 6))
			abort();
		return 0;
	}
	if (deleted != c.total || deleted > c.limit)
		abort();
	return 0;
}
