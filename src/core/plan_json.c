#include <stdlib.h>

#include <jansson.h>

#include "shardfs/plan.h"

static json_t *file_json(const struct sfs_plan *plan,
			 const struct sfs_index *idx,
			 const struct sfs_plan_file *f)
{
	json_t *runs = json_array();
	size_t i;

	for (i = 0; i < f->nruns; i++) {
		const struct sfs_run *r = &plan->runs[f->run_at + i];

		json_array_append_new(runs,
				      json_pack("[I, I]", (json_int_t)r->first,
						(json_int_t)r->count));
	}
	return json_pack("{s:s, s:b, s:I, s:I, s:o}", "shard",
			 idx->shards[f->shard].path, "whole", f->whole,
			 "samples", (json_int_t)f->nsamples, "padding",
			 (json_int_t)f->npadding, "runs", runs);
}

char *sfs_plan_json(const struct sfs_plan *plan, const struct sfs_index *idx)
{
	const struct sfs_plan_opts *o = &plan->opts;
	json_t *root, *readers = json_array();
	char *text;
	size_t t, i;

	root = json_pack("{s:o, s:I, s:I, s:I, s:I, s:I, s:I, s:o}", "options",
			 sfs_options_to_json(o), "samples",
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
		json_t *files = json_array();

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
