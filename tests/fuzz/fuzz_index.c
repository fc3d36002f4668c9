/*
 * libFuzzer harness: a hostile index.  The input is a manifest, then (after
 * a line "--table--") the bytes of its boundary table, written to a scratch
 * index directory.  So that the fuzzer gets past the checksums to the
 * fields behind them, the harness signs what it is given the way
 * shardfs-index would (when the manifest is a JSON object); loading must
 * refuse or accept without crashing, and an accepted index must plan.
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

/* Sign the table and the manifest as the indexer does. */
static void sign(json_t *root, unsigned char *table, size_t len)
{
	unsigned char sum[SFS_DIGEST_LEN];
	char hex[SFS_DIGEST_HEX], *text;
	json_t *b = json_object_get(root, "boundaries");

	if (len >= 64 && json_is_object(b)) {
		sfs_digest_buf(table + 64, len - 64, sum);
		memcpy(table + 24, sum, SFS_DIGEST_LEN);
		sfs_digest_hex(sum, hex);
		json_object_set_new(b, "sha256", json_string(hex));
		json_object_set_new(b, "file", json_string(TABLE));
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char sep[] = "\n--table--\n";
	const char *cut = memmem(data, size, sep, sizeof(sep) - 1);
	size_t mlen = cut ? (size_t)(cut - (const char *)data) : size;
	struct sfs_options o;
	struct sfs_index *idx = NULL;
	struct sfs_plan *plan = NULL;
	struct sfs_view_opts vo = { 0 };
	struct sfs_view *v = NULL;

	if (!dir[0]) {
		strcpy(dir, "/tmp/shardfs-fuzz-XXXXXX");
		if (!mkdtemp(dir))
			abort();
	}
	size_t tlen = cut ? size - mlen - (sizeof(sep) - 1) : 0;
	unsigned char *table = malloc(tlen + 1);
	json_t *root = json_loadb((const char *)data, mlen, 0, NULL);
	char *text;

	if (!table)
		return 0;
	if (cut)
		memcpy(table, cut + sizeof(sep) - 1, tlen);
	if (json_is_object(root)) {
		sign(root, table, tlen);
		text = json_dumps(root, JSON_COMPACT | JSON_SORT_KEYS);
		put("manifest.json", text ? text : "", text ? strlen(text) : 0);
		free(text);
	} else {
		put("manifest.json", data, mlen);
	}
	json_decref(root);
	put(TABLE, table, tlen);
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
