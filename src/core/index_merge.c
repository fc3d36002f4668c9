/*
 * Joining the parts of an index (shardfs-index --part I/N, one per pod of
 * an Indexed Job) into the index one run over every shard writes.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "shardfs/index.h"

struct part_shard {
	const struct sfs_index *idx;
	const struct sfs_shard *sh;
	size_t part;
};

static int part_shard_cmp(const void *a, const void *b)
{
	return strcmp(((const struct part_shard *)a)->sh->path,
		      ((const struct part_shard *)b)->sh->path);
}

/* Check that parts are the nparts parts of one index, once each. */
static int check_parts(struct sfs_index *const *parts, const char *const *names,
		       size_t nparts, struct sfs_error *err)
{
	size_t i, k;

	for (i = 0; i < nparts; i++) {
		const struct sfs_index *p = parts[i];

		if (!p->nparts)
			return sfs_errorf(
				err, -EINVAL,
				"%s: a whole index, not a part (shardfs-index --part I/N writes parts)",
				names[i]);
		if (p->nparts != nparts)
			return sfs_errorf(
				err, -EINVAL,
				"%s: part %u of %u, but %zu parts were given; give all %u parts, once each",
				names[i], p->part, p->nparts, nparts,
				p->nparts);
		if (strcmp(p->source, parts[0]->source))
			return sfs_errorf(
				err, -EINVAL,
				"%s: a part of the index of %s, not of %s",
				names[i], p->source, parts[0]->source);
		if (!p->digests != !parts[0]->digests)
			return sfs_errorf(
				err, -EINVAL,
				"%s and %s: one part has hashes, the other was built with --no-hash; build every part the same way",
				names[0], names[i]);
		for (k = 0; k < i; k++)
			if (parts[k]->part == p->part)
				return sfs_errorf(
					err, -EINVAL,
					"%s and %s are both part %u of %zu; give each part once",
					names[k], names[i], p->part, nparts);
	}
	return 0;
}

int sfs_index_merge(struct sfs_index *const *parts, const char *const *names,
		    size_t nparts, struct sfs_index **out,
		    struct sfs_error *err)
{
	struct part_shard *all = NULL;
	struct sfs_index *idx = NULL;
	uint64_t nbounds = 0;
	size_t n = 0, i, k;
	int rc = check_parts(parts, names, nparts, err);

	if (rc)
		return rc;
	for (i = 0; i < nparts; i++)
		n += parts[i]->nshards;
	all = calloc(n + 1, sizeof(*all));
	idx = calloc(1, sizeof(*idx));
	if (!all || !idx)
		goto out_nomem;
	for (i = 0, n = 0; i < nparts; i++)
		for (k = 0; k < parts[i]->nshards; k++)
			all[n++] = (struct part_shard){ parts[i],
							&parts[i]->shards[k],
							i };
	qsort(all, n, sizeof(*all), part_shard_cmp);
	for (i = 0; i < n; i++) {
		if (i && !strcmp(all[i].sh->path, all[i - 1].sh->path)) {
			rc = sfs_errorf(
				err, -EINVAL,
				"%s and %s both hold %s: parts of different runs; index every part again",
				names[all[i - 1].part], names[all[i].part],
				all[i].sh->path);
			goto out_free;
		}
		if (sfs_shard_sliceable(all[i].sh))
			nbounds += all[i].sh->nsamples + 1;
		idx->nsamples += all[i].sh->nsamples;
	}
	idx->source = strdup(parts[0]->source);
	idx->shards = calloc(n + 1, sizeof(*idx->shards));
	idx->bounds_heap = malloc((nbounds + 1) * sizeof(uint64_t));
	if (parts[0]->digests)
		idx->digests_heap = malloc(idx->nsamples * SFS_DIGEST_LEN + 1);
	if (!idx->source || !idx->shards || !idx->bounds_heap ||
	    (parts[0]->digests && !idx->digests_heap))
		goto out_nomem;
	for (i = 0, nbounds = 0; i < n; i++) {
		const struct sfs_shard *from = all[i].sh;
		struct sfs_shard *sh = &idx->shards[i];

		*sh = *from;
		sh->path = NULL;
		sh->members = NULL;
		sh->nmembers = 0;
		idx->nshards = i + 1;
		sh->path = strdup(from->path);
		sh->members = calloc(from->nmembers + 1, sizeof(*sh->members));
		if (!sh->path || !sh->members)
			goto out_nomem;
		for (k = 0; k < from->nmembers; k++) {
			sh->members[k] = from->members[k];
			sh->members[k].path = strdup(from->members[k].path);
			sh->nmembers = k + 1;
			if (!sh->members[k].path)
				goto out_nomem;
		}
		sh->first_sample = i ? idx->shards[i - 1].first_sample +
						   idx->shards[i - 1].nsamples :
				       0;
		if (sfs_shard_sliceable(from)) {
			memcpy(idx->bounds_heap + nbounds,
			       sfs_index_bounds(all[i].idx, from),
			       (from->nsamples + 1) * sizeof(uint64_t));
			sh->bounds_at = nbounds;
			nbounds += from->nsamples + 1;
		}
		if (idx->digests_heap)
			memcpy(idx->digests_heap +
				       sh->first_sample * SFS_DIGEST_LEN,
			       all[i].idx->digests +
				       from->first_sample * SFS_DIGEST_LEN,
			       from->nsamples * SFS_DIGEST_LEN);
	}
	idx->bounds = idx->bounds_heap;
	idx->nbounds = nbounds;
	idx->digests = idx->digests_heap;
	*out = idx;
	idx = NULL;
	goto out_free;
out_nomem:
	rc = sfs_errorf(err, -ENOMEM, "out of memory merging the parts");
out_free:
	free(all);
	sfs_index_free(idx);
	return rc;
}
