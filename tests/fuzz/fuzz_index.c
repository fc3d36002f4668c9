/*
 * libFuzzer harness: a hostile index.  The input is a manifest, then (after
 * a line "--table--") the bytes of its boundary table, then (after a line
 * "--blocks--", optional) the bytes of the table's blocks file, written to
 * a scratch index directory.  So that the fuzzer gets past the checksums
 * to the fields behind them, the harness signs what it is given the way
 * shardfs-index would (when the manifest is a JSON object); when the
 * manifest's boundary entry has a "blocks" object with a usable
 * "block_bytes" but the input no blocks file, the harness writes the one
 * shardfs-index would, so that the reads of boundaries (lazily checked
 * against it) see the table's values.  Loading must refuse or accept
 * without crashing, and an accepted index must plan and build a view.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "shardfs/digest.h"
#include "shardfs/index.h"
#include "shardfs/options.h"
#include "shardfs/plan.h"
#include "shardfs/view.h"

static char dir[64];

static void put(const char *name, const void *data, size_t len)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f)
		abort();
	fwrite(data, 1, len, f);
	fclose(f);
}

#define TABLE "samples-0000000000000000.bin"
#define BLOCKS "blocks-0000000000000000.bin"

/*
 * The blocks file of table (len bytes, header included) with block_bytes
 * per block, as shardfs-index writes it; *n gets its length.  NULL when
 * block_bytes cannot be used.
 */
static unsigned char *blocks_of(const unsigned char *table, size_t len,
				json_int_t block_bytes, size_t *n)
{
	size_t payload = len - 64, bb = (size_t)block_bytes, k, count;
	unsigned char *out;

	if (block_bytes < 8 || block_bytes > (1 << 20) || block_bytes % 8)
		return NULL;
	count = (payload + bb - 1) / bb;
	*n = 64 + count * SFS_DIGEST_LEN;
	out = calloc(1, *n);
	if (!out)
		return NULL;
	memcpy(out, "SFSBLK01\1", 9);
	for (k = 0; k < 8; k++)
		out[16 + k] = (unsigned char)((uint64_t)count >> (8 * k));
	for (k = 0; k < count; k++)
		sfs_digest_buf(table + 64 + k * bb,
			       payload - k * bb < bb ? payload - k * bb : bb,
			       out + 64 + k * SFS_DIGEST_LEN);
	return out;
}

/*
 * Sign the table, the blocks file (given, or made here: *blocks, *blen)
 * and the manifest as the indexer does.
 */
static void sign(json_t *root, unsigned char *table, size_t len,
		 unsigned char **blocks, size_t *blen)
{
	unsigned char sum[SFS_DIGEST_LEN];
	char hex[SFS_DIGEST_HEX], *text;
	json_t *b = json_object_get(root, "boundaries");
	json_t *bl = json_object_get(b, "blocks");

	if (len >= 64 && json_is_object(b)) {
		sfs_digest_buf(table + 64, len - 64, sum);
		memcpy(table + 24, sum, SFS_DIGEST_LEN);
		sfs_digest_hex(sum, hex);
		json_object_set_new(b, "sha256", json_string(hex));
		json_object_set_new(b, "file", json_string(TABLE));
	}
	if (len >= 64 && json_is_object(bl) && !*blocks) {
		*blocks = blocks_of(
			table, len,
			json_integer_value(json_object_get(bl, "block_bytes")),
			blen);
		if (*blocks)
			json_object_set_new(
				bl, "count",
				json_integer((json_int_t)(*blen - 64) /
					     SFS_DIGEST_LEN));
	}
	if (*blocks && *blen >= 64 && json_is_object(bl)) {
		sfs_digest_buf(*blocks + 64, *blen - 64, sum);
		memcpy(*blocks + 24, sum, SFS_DIGEST_LEN);
		sfs_digest_hex(sum, hex);
		json_object_set_new(bl, "sha256", json_string(hex));
		json_object_set_new(bl, "file", json_string(BLOCKS));
	}
	json_object_del(root, "checksum");
	text = json_dumps(root, JSON_COMPACT | JSON_SORT_KEYS);
	if (!text)
		return;
	sfs_digest_buf(text, strlen(text), sum);
	free(text);
	sfs_digest_hex(sum, hex);
	json_object_set_new(root, "checksum", json_string(hex));
}

/* No blocks file of an earlier input is left for this one. */
/* Remove dir/name, if there. */
static void unlink_in_dir(const char *name)
{
	char path[128];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	unlink(path);
}

static void unlink_blocks(void)
{
	unlink_in_dir(BLOCKS);
}

/* At exit: the scratch index directory and what the harness wrote in it. */
static void remove_dir(void)
{
	unlink_in_dir("manifest.json");
	unlink_in_dir(TABLE);
	unlink_in_dir(BLOCKS);
	rmdir(dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char sep[] = "\n--table--\n", bsep[] = "\n--blocks--\n";
	const char *cut = memmem(data, size, sep, sizeof(sep) - 1), *bcut;
	size_t mlen = cut ? (size_t)(cut - (const char *)data) : size;
	unsigned char *blocks = NULL;
	size_t blen = 0;
	struct sfs_options o;
	struct sfs_index *idx = NULL;
	struct sfs_plan *plan = NULL;
	struct sfs_view_opts vo = { 0 };
	struct sfs_view *v = NULL;

	if (!dir[0]) {
		strcpy(dir, "/tmp/shardfs-fuzz-XXXXXX");
		if (!mkdtemp(dir))
			abort();
		atexit(remove_dir);
	}
	size_t tlen = cut ? size - mlen - (sizeof(sep) - 1) : 0;
	unsigned char *table = malloc(tlen + 1);
	json_t *root = json_loadb((const char *)data, mlen, 0, NULL);
	char *text;

	if (!table)
		return 0;
	if (cut)
		memcpy(table, cut + sizeof(sep) - 1, tlen);
	bcut = memmem(table, tlen, bsep, sizeof(bsep) - 1);
	if (bcut) {
		size_t at = (size_t)(bcut - (const char *)table);

		blen = tlen - at - (sizeof(bsep) - 1);
		blocks = malloc(blen + 1);
		if (!blocks) {
			free(table);
			json_decref(root);
			return 0;
		}
		memcpy(blocks, bcut + sizeof(bsep) - 1, blen);
		tlen = at;
	}
	unlink_blocks();
	if (json_is_object(root)) {
		sign(root, table, tlen, &blocks, &blen);
		text = json_dumps(root, JSON_COMPACT | JSON_SORT_KEYS);
		put("manifest.json", text ? text : "", text ? strlen(text) : 0);
		free(text);
	} else {
		put("manifest.json", data, mlen);
	}
	json_decref(root);
	put(TABLE, table, tlen);
	if (blocks)
		put(BLOCKS, blocks, blen);
	free(blocks);
	free(table);
	if (sfs_index_load("/", dir, &idx, NULL))
		return 0;
	sfs_options_init(&o);
	o.plan.world = 3;
	o.plan.workers = 2;
	o.plan.block = 2;
	o.plan.shuffle = SFS_SHUFFLE_SAMPLES;
	if (!sfs_plan_build(idx, &o.plan, &plan, NULL))
		sfs_plan_free(plan);
	/* a view sizes every slice: boundaries read from the table */
	vo.options = o;
	vo.epochs = 1;
	vo.srcfd = -1;
	if (!sfs_view_build(idx, &vo, &v, NULL))
		sfs_view_free(v);
	sfs_index_free(idx);
	return 0;
}
