/*
 * The index object: its paths, lookup and free, and what its files share
 * (index_i.h): the tables' kinds, the checksums of the boundary table's
 * blocks, the manifest's checksum.  Loading is index_load.c, the checked
 * reads of a loaded table index_read.c, saving index_save.c; comparing the
 * index with the source is index_source.c, joining indexes index_merge.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "index_i.h"
#include "shardfs/spill.h"
#include "shardfs/util.h"

const struct sfs_table_kind sfs_bounds_kind = { "SFSBND01", "samples-",
						"boundaries", sizeof(uint64_t),
						"boundary table" };
const struct sfs_table_kind sfs_blocks_kind = { "SFSBLK01", "blocks-", "blocks",
						SFS_DIGEST_LEN,
						"block checksum file" };
const struct sfs_table_kind sfs_digests_kind = { "SFSDIG01", "digests-",
						 "digests", SFS_DIGEST_LEN,
						 "sample digest table" };

char *sfs_index_dir(const char *source, const char *dir)
{
	char *out;

	if (dir)
		return strdup(dir);
	if (asprintf(&out, "%s/%s", source, SFS_INDEX_DIR) < 0)
		return NULL;
	return out;
}

static void shard_clear(struct sfs_shard *sh)
{
	size_t i;

	free(sh->path);
	for (i = 0; i < sh->nmembers; i++)
		free(sh->members[i].path);
	free(sh->members);
}

void sfs_index_free(struct sfs_index *idx)
{
	size_t i;

	if (!idx)
		return;
	for (i = 0; i < idx->nshards; i++)
		shard_clear(&idx->shards[i]);
	free(idx->shards);
	if (idx->table_path && idx->table_fd >= 0)
		close(idx->table_fd);
	free(idx->table_path);
	if (idx->blocks_path && idx->blocks_fd >= 0)
		close(idx->blocks_fd);
	free(idx->blocks_path);
	free((void *)idx->verified);
	if (idx->dmap)
		munmap(idx->dmap, idx->dmap_len);
	if (idx->digests_path && idx->digests_fd >= 0)
		close(idx->digests_fd);
	free(idx->digests_path);
	free(idx->bounds_heap);
	sfs_spill_free(idx->spill);
	for (i = 0; i < idx->nsources; i++)
		sfs_index_free(idx->sources[i].idx);
	free(idx->sources);
	if (idx->joiner)
		idx->joiner->release(idx->joiner);
	free(idx->digests_heap);
	free(idx->source);
	free(idx);
}

ssize_t sfs_index_find(const struct sfs_index *idx, const char *path)
{
	size_t at = SFS_PARTITION_POINT(i, 0, idx->nshards,
					strcmp(idx->shards[i].path, path) < 0);

	return at < idx->nshards && !strcmp(idx->shards[at].path, path) ?
		       (ssize_t)at :
		       -1;
}

size_t sfs_index_shard_at(const struct sfs_index *idx, uint64_t g)
{
	return SFS_PARTITION_POINT(
		i, 0, idx->nshards,
		idx->shards[i].first_sample + idx->shards[i].nsamples <= g);
}

/* ---- what the files of the index share ---- */

uint64_t sfs_index_blocks_of(uint64_t nbounds, uint64_t block_bytes)
{
	return (nbounds * sizeof(uint64_t) + block_bytes - 1) / block_bytes;
}

static int block_sums_flush(struct sfs_block_sums *bs)
{
	int rc;

	if (!bs->n)
		return 0;
	rc = bs->flush(bs, bs->arg);
	bs->first += bs->n;
	bs->n = 0;
	return rc;
}

static int block_sums_end(struct sfs_block_sums *bs)
{
	if (sfs_digest_final(bs->d, bs->sums[bs->n]))
		return sfs_errorf(bs->err, -EIO, "%s: SHA-256 failed",
				  bs->path);
	bs->fill = 0;
	return ++bs->n == SFS_BLOCK_BATCH ? block_sums_flush(bs) : 0;
}

int sfs_block_sums_add(struct sfs_block_sums *bs, const void *buf, size_t len)
{
	const char *p = buf;
	int rc;

	while (len) {
		size_t take = bs->block_bytes - bs->fill < len ?
				      (size_t)(bs->block_bytes - bs->fill) :
				      len;

		if (sfs_digest_update(bs->d, p, take))
			return sfs_errorf(bs->err, -EIO, "%s: SHA-256 failed",
					  bs->path);
		bs->fill += take;
		p += take;
		len -= take;
		if (bs->fill == bs->block_bytes) {
			rc = block_sums_end(bs);
			if (rc)
				return rc;
		}
	}
	return 0;
}

int sfs_block_sums_finish(struct sfs_block_sums *bs)
{
	int rc = bs->fill ? block_sums_end(bs) : 0;

	return rc ? rc : block_sums_flush(bs);
}
int sfs_index_manifest_checksum(json_t *root, unsigned char out[SFS_DIGEST_LEN])
{
	char *text = json_dumps(root, JSON_COMPACT | JSON_SORT_KEYS);

	if (!text)
		return -ENOMEM;
	sfs_digest_buf(text, strlen(text), out);
	free(text);
	return 0;
}
