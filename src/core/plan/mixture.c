/*
 * The mixture type: what a loaded mixture is, its names, its JSON form and
 * its place in the index that owns it.  Reading a mixture file and joining
 * its sources' indexes is mixture_load.c.
 */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "mixture_i.h"
#include "plan_json_i.h"
#include "shardfs/mixture.h"
#include "shardfs/util.h"

#define NAME_MAX_LEN 64

const char *const sfs_mix_weight_names[] = { "proportion", "repeat", "choose",
					     NULL };
const char *const sfs_mix_sampling_names[] = { "balanced", "fixed", NULL };
const char *const sfs_mix_batching_names[] = { "random", "stratified", NULL };

const char *sfs_mix_weight_name(enum sfs_mix_weight w)
{
	return sfs_mix_weight_names[w];
}

const char *sfs_mix_sampling_name(enum sfs_mix_sampling s)
{
	return sfs_mix_sampling_names[s];
}

const char *sfs_mix_batching_name(enum sfs_mix_batching b)
{
	return sfs_mix_batching_names[b];
}

void sfs_mix_free(struct sfs_mix *m)
{
	size_t i;

	if (!m)
		return;
	for (i = 0; i < m->nsources; i++) {
		free(m->sources[i].name);
		free(m->sources[i].path);
		free(m->sources[i].index_dir);
	}
	free(m->sources);
	free(m->file);
	free(m);
}

static void mix_release(struct sfs_index_joiner *j)
{
	sfs_mix_free(SFS_CONTAINER_OF(j, struct sfs_mix, joiner));
}

void sfs_mix_attach(struct sfs_index *idx, struct sfs_mix *m)
{
	m->joiner.release = mix_release;
	idx->joiner = &m->joiner;
}

struct sfs_mix *sfs_mix_of(const struct sfs_index *idx)
{
	/* a joiner of another kind is not a mixture */
	if (!idx->joiner || idx->joiner->release != mix_release)
		return NULL;
	return SFS_CONTAINER_OF(idx->joiner, struct sfs_mix, joiner);
}

size_t sfs_mix_source_of(const struct sfs_mix *m, size_t shard)
{
	size_t i;

	/* in mixture order, not by shard range: a short list */
	for (i = 0; i < m->nsources; i++)
		if (shard >= m->sources[i].shard_lo &&
		    shard < m->sources[i].shard_hi)
			return i;
	return 0;
}

int sfs_mix_name_index(const char *const *names, const char *s)
{
	int i;

	for (i = 0; s && names[i]; i++)
		if (!strcmp(s, names[i]))
			return i;
	return -1;
}

bool sfs_mix_name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > NAME_MAX_LEN || !strcmp(s, ".") || !strcmp(s, ".."))
		return false;
	return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
			 "0123456789._-") == n;
}

json_t *sfs_mix_to_json(const struct sfs_mix *m)
{
	char hex[SFS_DIGEST_HEX];
	json_t *sources, *root;
	size_t i;

	if (!m)
		return json_null();
	sources = json_array();
	for (i = 0; sources && i < m->nsources; i++) {
		const struct sfs_mix_source *s = &m->sources[i];

		if (json_array_append_new(
			    sources,
			    json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:I}",
				      "name", s->name, "path", s->path,
				      "weight", (json_int_t)s->weight,
				      "shard_lo", (json_int_t)s->shard_lo,
				      "shard_hi", (json_int_t)s->shard_hi,
				      "prefix_len", (json_int_t)s->prefix_len,
				      "samples", (json_int_t)s->nsamples))) {
			json_decref(sources);
			return NULL;
		}
	}
	sfs_digest_hex(m->digest, hex);
	root = json_pack("{s:s, s:s, s:s, s:I, s:s, s:s, s:o}", "file", m->file,
			 "digest", hex, "weight", sfs_mix_weight_names[m->kind],
			 "epoch_size", (json_int_t)m->epoch_size, "sampling",
			 sfs_mix_sampling_names[m->sampling], "batching",
			 sfs_mix_batching_names[m->batching], "sources",
			 sources);
	return root;
}

int sfs_mix_from_json(json_t *j, size_t nshards, struct sfs_mix **out)
{
	const char *file, *digest, *weight, *sampling, *batching;
	json_t *sources;
	json_int_t esize;
	struct sfs_mix *m;
	size_t i, k;
	int kind, smp, bat;

	*out = NULL;
	if (json_is_null(j))
		return 0;
	if (json_unpack(j, "{s:s, s:s, s:s, s:I, s:s, s:s, s:o}", "file", &file,
			"digest", &digest, "weight", &weight, "epoch_size",
			&esize, "sampling", &sampling, "batching", &batching,
			"sources", &sources) ||
	    !json_is_array(sources) || json_array_size(sources) == 0 ||
	    json_array_size(sources) > SFS_MIX_SOURCES_MAX || esize < 0)
		return -EINVAL;
	kind = sfs_mix_name_index(sfs_mix_weight_names, weight);
	smp = sfs_mix_name_index(sfs_mix_sampling_names, sampling);
	bat = sfs_mix_name_index(sfs_mix_batching_names, batching);
	if (kind < 0 || smp < 0 || bat < 0)
		return -EINVAL;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->kind = (enum sfs_mix_weight)kind;
	m->sampling = (enum sfs_mix_sampling)smp;
	m->batching = (enum sfs_mix_batching)bat;
	m->epoch_size = (uint64_t)esize;
	m->nsources = json_array_size(sources);
	m->file = strdup(file);
	m->sources = calloc(m->nsources, sizeof(*m->sources));
	if (!m->file || !m->sources)
		goto out_nomem;
	if (sfs_digest_parse(digest, m->digest))
		goto out_inval;
	for (i = 0; i < m->nsources; i++) {
		struct sfs_mix_source *s = &m->sources[i];
		const char *name, *path;
		json_int_t w, lo, hi, plen, n;

		if (json_unpack(json_array_get(sources, i),
				"{s:s, s:s, s:I, s:I, s:I, s:I, s:I}", "name",
				&name, "path", &path, "weight", &w, "shard_lo",
				&lo, "shard_hi", &hi, "prefix_len", &plen,
				"samples", &n) ||
		    !sfs_mix_name_ok(name) || w < 1 || lo < 0 || hi < lo ||
		    (uint64_t)hi > nshards || plen < 0 || n < 0)
			goto out_inval;
		s->name = strdup(name);
		s->path = strdup(path);
		if (!s->name || !s->path)
			goto out_nomem;
		s->weight = (uint64_t)w;
		s->shard_lo = (size_t)lo;
		s->shard_hi = (size_t)hi;
		s->prefix_len = (size_t)plen;
		s->nsamples = (uint64_t)n;
		for (k = 0; k < i; k++)
			if (s->shard_lo < m->sources[k].shard_hi &&
			    m->sources[k].shard_lo < s->shard_hi)
				goto out_inval;
	}
	*out = m;
	return 0;
out_inval:
	sfs_mix_free(m);
	return -EINVAL;
out_nomem:
	sfs_mix_free(m);
	return -ENOMEM;
}
