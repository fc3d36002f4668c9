/*
 * Joining indexes: the parts of an index (shardfs-index --part I/N, one per
 * pod of an Indexed Job) into the index one run over every shard writes,
 * and the sources of a mixture into one index.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardfs/index.h"
#include "shardfs/spill.h"

struct part_shard {
	const struct sfs_index *idx;
	const struct sfs_shard *sh;
	size_t part;
	char *path; /* in the joined index */
};

static int part_shard_cmp(const void *a, const void *b)
{
	return strcmp(((const struct part_shard *)a)->path,
		      ((const struct part_shard *)b)->path);
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

/* Spill the boundaries and digests of shard from of idx as record rec. */
static int spill_shard(struct sfs_spill *spill, size_t rec,
		       const struct sfs_index *idx,
		       const struct sfs_shard *from, struct sfs_error *err)
{
	bool cut = sfs_shard_has_bounds(from);
	uint64_t *b = NULL;
	unsigned char *d = NULL;
	int rc = 0;

	/* read, not mapped: a merge keeps none of the parts' tables
	 * resident */
	if (cut) {
		b = malloc((from->nsamples + 1) * sizeof(*b));
		rc = b ? sfs_index_read_bounds(idx, from, 0, from->nsamples + 1,
					       b, err) :
			 sfs_errorf(err, -ENOMEM, "out of memory");
	}
	if (!rc && idx->digests) {
		d = malloc(from->nsamples * SFS_DIGEST_LEN + 1);
		rc = d ? sfs_index_read_digests(idx, from->first_sample,
						from->nsamples, d, err) :
			 sfs_errorf(err, -ENOMEM, "out of memory");
	}
	if (!rc)
		rc = sfs_spill_put(spill, rec, b, cut ? from->nsamples + 1 : 0,
				   d, from->nsamples, err);
	free(d);
	free(b);
	return rc;
}

/*
 * Every shard of idxs[0 .. nidx) with its path in the joined index
 * (prefixes[i] and its own) into all (n + 1 entries, n the shards'
 * count), in path order.  Returns 0 or -ENOMEM.
 */
static int collect_shards(const struct sfs_index *const *idxs,
			  const char *const *prefixes, size_t nidx,
			  struct part_shard *all)
{
	size_t i, k, n = 0;

	for (i = 0; i < nidx; i++)
		for (k = 0; k < idxs[i]->nshards; k++) {
			all[n].idx = idxs[i];
			all[n].sh = &idxs[i]->shards[k];
			all[n].part = i;
			if (asprintf(&all[n].path, "%s%s", prefixes[i],
				     idxs[i]->shards[k].path) < 0) {
				all[n].path = NULL;
				return -ENOMEM;
			}
			n++;
		}
	qsort(all, n, sizeof(*all), part_shard_cmp);
	return 0;
}

static int join_nomem(struct sfs_error *err)
{
	return sfs_errorf(err, -ENOMEM, "out of memory joining indexes");
}

/*
 * Shard i of the joined index idx from p: its fields, its members under
 * their new paths, its first sample, and its boundaries (borrowed, or
 * copied to idx's heap or spill at *nbounds, which moves past them) and
 * digests.  Returns 0 or -errno with err set.
 */
static int join_shard(struct sfs_index *idx, size_t i, struct part_shard *p,
		      const char *prefix, bool borrow, uint64_t *nbounds,
		      struct sfs_error *err)
{
	const struct sfs_shard *from = p->sh;
	struct sfs_shard *sh = &idx->shards[i];
	size_t k;
	int rc;

	*sh = *from;
	sh->members = NULL;
	sh->nmembers = 0;
	sh->path = p->path;
	p->path = NULL;
	idx->nshards = i + 1;
	sh->members = calloc(from->nmembers + 1, sizeof(*sh->members));
	if (!sh->members)
		return join_nomem(err);
	for (k = 0; k < from->nmembers; k++) {
		sh->members[k] = from->members[k];
		if (asprintf(&sh->members[k].path, "%s%s", prefix,
			     from->members[k].path) < 0) {
			sh->members[k].path = NULL;
			return join_nomem(err);
		}
		sh->nmembers = k + 1;
	}
	sh->first_sample = i ? idx->shards[i - 1].first_sample +
					   idx->shards[i - 1].nsamples :
			       0;
	if (idx->spill) {
		rc = spill_shard(idx->spill, i, p->idx, from, err);
		if (rc)
			return rc;
	}
	if (sfs_shard_has_bounds(from) && borrow) {
		sh->bounds_in = from->bounds_in ? from->bounds_in : p->idx;
	} else if (sfs_shard_has_bounds(from)) {
		if (idx->bounds_heap) {
			rc = sfs_index_read_bounds(p->idx, from, 0,
						   from->nsamples + 1,
						   idx->bounds_heap + *nbounds,
						   err);
			if (rc)
				return rc;
		}
		sh->bounds_at = *nbounds;
		*nbounds += from->nsamples + 1;
	}
	if (idx->digests_heap)
		memcpy(idx->digests_heap + sh->first_sample * SFS_DIGEST_LEN,
		       p->idx->digests + from->first_sample * SFS_DIGEST_LEN,
		       from->nsamples * SFS_DIGEST_LEN);
	return 0;
}

/*
 * sfs_index_join, its tables spilled into spill_dir when not NULL (borrow
 * false then).
 */
static int join(const struct sfs_index *const *idxs,
		const char *const *prefixes, const char *const *names,
		size_t nidx, const char *source, const char *dup_hint,
		bool borrow, const char *spill_dir, struct sfs_index **out,
		struct sfs_error *err)
{
	struct part_shard *all = NULL;
	struct sfs_index *idx = NULL;
	uint64_t nbounds = 0;
	size_t n = 0, i;
	bool digests = true;
	int rc;

	for (i = 0; i < nidx; i++) {
		n += idxs[i]->nshards;
		/* a loaded digest table is copied only once checked */
		digests = digests && idxs[i]->digests &&
			  (!idxs[i]->dmap || idxs[i]->digests_checked);
	}
	all = calloc(n + 1, sizeof(*all));
	idx = calloc(1, sizeof(*idx));
	if (!all || !idx || collect_shards(idxs, prefixes, nidx, all))
		goto out_nomem;
	for (i = 0; i < n; i++) {
		if (i && !strcmp(all[i].path, all[i - 1].path)) {
			rc = sfs_errorf(err, -EINVAL,
					"%s and %s both hold %s: %s",
					names[all[i - 1].part],
					names[all[i].part], all[i].path,
					dup_hint);
			goto out_free;
		}
		if (sfs_shard_has_bounds(all[i].sh) && !borrow)
			nbounds += all[i].sh->nsamples + 1;
		idx->nsamples += all[i].sh->nsamples;
	}
	idx->source = strdup(source);
	idx->shards = calloc(n + 1, sizeof(*idx->shards));
	if (!idx->source || !idx->shards)
		goto out_nomem;
	if (spill_dir) {
		rc = sfs_spill_new(spill_dir, n, digests, &idx->spill, err);
		if (rc)
			goto out_free;
	} else {
		idx->bounds_heap = malloc((nbounds + 1) * sizeof(uint64_t));
		if (digests)
			idx->digests_heap =
				malloc(idx->nsamples * SFS_DIGEST_LEN + 1);
		if (!idx->bounds_heap || (digests && !idx->digests_heap))
			goto out_nomem;
	}
	for (i = 0, nbounds = 0; i < n; i++) {
		rc = join_shard(idx, i, &all[i], prefixes[all[i].part], borrow,
				&nbounds, err);
		if (rc)
			goto out_free;
	}
	idx->bounds = idx->bounds_heap;
	idx->nbounds = nbounds;
	idx->digests = idx->digests_heap;
	*out = idx;
	idx = NULL;
	rc = 0;
	goto out_free;
out_nomem:
	rc = join_nomem(err);
out_free:
	for (i = 0; all && i < n; i++)
		free(all[i].path);
	free(all);
	sfs_index_free(idx);
	return rc;
}

int sfs_index_join(const struct sfs_index *const *idxs,
		   const char *const *prefixes, const char *const *names,
		   size_t nidx, const char *source, const char *dup_hint,
		   bool borrow, struct sfs_index **out, struct sfs_error *err)
{
	return join(idxs, prefixes, names, nidx, source, dup_hint, borrow, NULL,
		    out, err);
}

int sfs_index_merge(struct sfs_index *const *parts, const char *const *names,
		    size_t nparts, const char *spill_dir,
		    struct sfs_index **out, struct sfs_error *err)
{
	const char **prefixes;
	size_t i;
	int rc = check_parts(parts, names, nparts, err);

	for (i = 0; !rc && i < nparts; i++)
		rc = sfs_index_check_digests(parts[i], err);
	if (rc)
		return rc;
	prefixes = calloc(nparts + 1, sizeof(*prefixes));
	if (!prefixes)
		return sfs_errorf(err, -ENOMEM, "out of memory");
	for (i = 0; i < nparts; i++)
		prefixes[i] = "";
	rc = join((const struct sfs_index *const *)parts, prefixes, names,
		  nparts, parts[0]->source,
		  "parts of different runs; index every part again", false,
		  spill_dir, out, err);
	free(prefixes);
	return rc;
}
