#include <stdlib.h>

#include <jansson.h>

#include "plan_json_i.h"
#include "shardfs/mixture.h"
#include "shardfs/plan.h"

static json_t *file_json(const struct sfs_plan *plan,
			 const struct sfs_index *idx,
			 const struct sfs_plan_file *f)
{
	json_t *runs = json_array();
	size_t i;

	for (i = 0; i < f->nruns; i++) {
		const struct sfs_run *r = &sfs_plan_file_runs(plan, f)[i];

		json_array_append_new(runs,
				      json_pack("[I, I]", (json_int_t)r->first,
						(json_int_t)r->count));
	}
	return json_pack("{s:s, s:b, s:I, s:I, s:o}", "shard",
			 idx->shards[f->shard].path, "whole", f->whole,
			 "samples", (json_int_t)f->nsamples, "padding",
			 (json_int_t)f->npadding, "runs", runs);
}

json_t *sfs_plan_mixture_json(const struct sfs_plan *plan,
			      const struct sfs_index *idx)
{
	const struct sfs_mix *m = sfs_mix_of(idx);
	char hex[SFS_DIGEST_HEX];
	json_t *sources = json_array(), *root;
	size_t s;

	if (!m || !sources) {
		json_decref(sources);
		return json_null();
	}
	sfs_digest_hex(m->digest, hex);
	for (s = 0; s < m->nsources; s++) {
		const struct sfs_mix_source *src = &m->sources[s];
		const struct sfs_plan_source *ps = &plan->sources[s];
		json_t *w = m->kind == SFS_MIX_CHOOSE ?
				    json_integer((json_int_t)src->weight) :
				    json_real((double)src->weight /
					      (double)SFS_MIX_SCALE);

		json_array_append_new(
			sources,
			json_pack("{s:s, s:s, s:o, s:I, s:I, s:I, s:I, s:I}",
				  "name", src->name, "path", src->path,
				  sfs_mix_weight_name(m->kind), w, "samples",
				  (json_int_t)ps->samples, "allocated",
				  (json_int_t)ps->allocated, "skipped",
				  (json_int_t)ps->skipped, "padding",
				  (json_int_t)ps->padding, "dropped",
				  (json_int_t)ps->dropped));
	}
	root = json_pack("{s:s, s:s, s:s, s:s, s:o}", "file", m->file, "digest",
			 hex, "sampling", sfs_mix_sampling_name(m->sampling),
			 "batching", sfs_mix_batching_name(m->batching),
			 "sources", sources);
	return root ? root : json_null();
}

char *sfs_plan_json(const struct sfs_plan *plan, const struct sfs_index *idx)
{
	const struct sfs_plan_opts *o = &plan->opts;
	json_t *root, *readers = json_array();
	char *text;
	size_t t, i;

	root = json_pack("{s:o, s:o, s:I, s:I, s:I, s:I, s:I, s:I, s:o}",
			 "options", sfs_options_to_json(o), "mixture",
			 sfs_plan_mixture_json(plan, idx), "samples",
			 (json_int_t)plan->total, "remaining",
			 (json_int_t)plan->remaining, "per_reader",
			 (json_int_t)plan->per_reader, "padding",
			 (json_int_t)plan->padding, "dropped",
			 (json_int_t)plan->dropped, "units",
			 (json_int_t)plan->nunits, "readers", readers);
	if (!root)
		return NULL;
	for (t = 0; t < plan->nreaders; t++) {
		const struct sfs_plan_reader *r = &plan->readers[t];
		json_t *files;

		if (!r->nfiles)
			continue;
		files = json_array();
		for (i = 0; i < r->nfiles; i++)
			json_array_append_new(
				files, file_json(plan, idx,
						 &plan->files[r->file_at + i]));
		json_array_append_new(
			readers,
			json_pack("{s:I, s:I, s:I, s:I, s:o}", "rank",
				  (json_int_t)(t / o->workers), "worker",
				  (json_int_t)(t % o->workers), "samples",
				  (json_int_t)plan->per_reader, "padding",
				  (json_int_t)r->npadding, "files", files));
	}
	text = json_dumps(root, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
	json_decref(root);
	return text;
}
