#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "plan/plan_json_i.h"
#include "shardfs/mixture.h"
#include "shardfs/status.h"
#include "shardfs/util.h"

/* The readers of the ranks the mount shows, with their counts. */
static json_t *readers_json(const struct sfs_plan *p,
			    const struct sfs_options *o)
{
	json_t *readers = json_array();
	uint32_t k, rank, w;

	for (k = 0; readers && k < (o->nranks ? o->nranks : p->opts.world);
	     k++) {
		rank = o->nranks ? o->ranks[k] : k;
		for (w = 0; w < p->opts.workers; w++) {
			const struct sfs_plan_reader *r =
				&p->readers[sfs_plan_reader_id(p, rank, w)];

			json_array_append_new(
				readers,
				json_pack("{s:i, s:i, s:I, s:I, s:I}", "rank",
					  (int)rank, "worker", (int)w,
					  "samples", (json_int_t)p->per_reader,
					  "padding", (json_int_t)r->npadding,
					  "files", (json_int_t)r->nfiles));
		}
	}
	return readers;
}

/* The plan inputs, then the ranks shown and the daemon's own options. */
static json_t *options_json(const struct sfs_status_in *in,
			    const struct sfs_plan_opts *plan)
{
	json_t *opts = sfs_options_to_json(plan);
	json_t *ranks = json_array();
	size_t i;

	for (i = 0; ranks && i < in->options->nranks; i++)
		json_array_append_new(ranks,
				      json_integer(in->options->ranks[i]));
	if (!opts || !ranks || json_object_set_new(opts, "ranks", ranks) ||
	    json_object_set_new(opts, "epochs",
				json_integer(in->mount->epochs)) ||
	    json_object_set_new(opts, "symlinks",
				json_boolean(in->mount->symlinks)) ||
	    json_object_set_new(opts, "ahead",
				json_boolean(in->mount->ahead)) ||
	    json_object_set_new(opts, "prefetch",
				json_boolean(in->mount->prefetch))) {
		json_decref(opts);
		return NULL;
	}
	return opts;
}

/*
 * json_dumps of o with the indent every status text has, or NULL; its
 * last two bytes are the "\n}" that close the object.
 */
static char *dump(json_t *o)
{
	char *text;

	if (!o)
		return NULL;
	text = json_dumps(o, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
	json_decref(o);
	return text;
}

/* dump of o less the "\n}" that close it: a head the counters follow. */
static char *dump_head(json_t *o)
{
	char *text = dump(o);
	size_t len;

	if (!text)
		return NULL;
	len = strlen(text);
	if (len >= 2)
		text[len - 2] = '\0';
	return text;
}

char *sfs_status_options_json(const struct sfs_plan_opts *o)
{
	json_t *j = sfs_options_to_json(o);
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;

	json_decref(j);
	return s;
}

char *sfs_status_json_head(const struct sfs_status_in *in)
{
	const struct sfs_plan *p = in->plan;
	uint64_t bytes = 0;
	size_t i;

	for (i = 0; i < in->idx->nshards; i++)
		bytes += in->idx->shards[i].size;
	return dump_head(json_pack(
		"{s:s, s:s?, s:o, s:o, s:{s:I, s:I, s:I}, s:{s:I, s:I, s:I, s:I, s:I, s:o}}",
		"source",
		sfs_mix_of(in->idx) ? sfs_mix_of(in->idx)->file :
				      in->idx->source,
		"index", in->index_dir, "options",
		options_json(in, &in->plan->opts), "mixture",
		sfs_plan_mixture_json(p, in->idx), "index_summary", "shards",
		(json_int_t)in->idx->nshards, "samples",
		(json_int_t)in->idx->nsamples, "bytes", (json_int_t)bytes,
		"plan", "per_reader", (json_int_t)p->per_reader, "padding",
		(json_int_t)p->padding, "dropped", (json_int_t)p->dropped,
		"units", (json_int_t)p->nunits, "remaining",
		(json_int_t)p->remaining, "readers",
		readers_json(p, in->options)));
}

/* A followed source's readers: in "plan" as every status's, and with
 * their acks and waits in "follow". */
static json_t *follow_readers(const struct sfs_status_follow *f, bool plan)
{
	json_t *readers = json_array();
	size_t i;

	for (i = 0; readers && i < f->nreaders; i++) {
		const struct sfs_status_follow_reader *r = &f->readers[i];

		json_array_append_new(
			readers,
			/* samples and files served so far (the padding of
			 * the last window is the stream's, in "follow") */
			plan ? json_pack(
				       "{s:I, s:I, s:I, s:I}", "rank",
				       (json_int_t)r->rank, "worker",
				       (json_int_t)r->worker, "samples",
				       (json_int_t)(f->per_window * f->windows),
				       "files", (json_int_t)f->windows) :
			       json_pack("{s:I, s:I, s:I, s:I, s:b}", "rank",
					 (json_int_t)r->rank, "worker",
					 (json_int_t)r->worker, "window",
					 (json_int_t)r->window, "windows_read",
					 (json_int_t)r->windows_read, "waiting",
					 r->waiting));
	}
	return readers;
}

char *sfs_status_follow_head(const struct sfs_status_in *in,
			     const struct sfs_status_follow *f)
{
	return dump_head(json_pack(
		"{s:s, s:s?, s:o, s:{s:I, s:I, s:I}, s:{s:I, s:I, s:I, s:I, s:I, s:o}, s:{s:s, s:I, s:I, s:I, s:s?, s:b, s:I, s:I, s:b, s:I, s:I, s:I, s:s?, s:s?}, s:o}",
		"source", f->source, "index", f->index_dir, "options",
		options_json(in, &in->options->plan), "index_summary", "shards",
		(json_int_t)f->shards, "samples", (json_int_t)f->samples,
		"bytes", (json_int_t)f->bytes, "plan", "per_reader",
		(json_int_t)f->per_window, "padding", (json_int_t)f->padding,
		"dropped", (json_int_t)f->dropped, "units",
		(json_int_t)f->windows, "remaining",
		(json_int_t)(f->samples > f->first_window * f->window ?
				     f->samples - f->first_window * f->window :
				     0),
		"readers", follow_readers(f, true), "follow", "format",
		f->format, "window", (json_int_t)f->window, "shards",
		(json_int_t)f->shards, "samples", (json_int_t)f->samples,
		"last_shard", f->last_shard, "ended", f->ended, "first_window",
		(json_int_t)f->first_window, "windows", (json_int_t)f->windows,
		"complete", f->complete, "per_window",
		(json_int_t)f->per_window, "padding", (json_int_t)f->padding,
		"dropped", (json_int_t)f->dropped, "consumed", f->consumed,
		"log", f->log, "readers", follow_readers(f, false)));
}

char *sfs_status_follow_progress(uint32_t rank, const char *consumed,
				 uint64_t windows_read, bool ended)
{
	json_t *j = json_pack("{s:I, s:s?, s:I, s:b}", "rank", (json_int_t)rank,
			      "consumed", consumed, "windows_read",
			      (json_int_t)windows_read, "ended", ended);
	char *s = j ? json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;

	json_decref(j);
	return s;
}

char *sfs_status_json_join(const char *head,
			   const struct sfs_status_counters *c)
{
	char *counters, *text;
	size_t hlen, clen;

	counters = dump(json_pack(
		"{s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}}",
		"counters", "opens", (json_int_t)c->opens, "reads",
		(json_int_t)c->reads, "copied_reads",
		(json_int_t)c->copied_reads, "bytes", (json_int_t)c->bytes,
		"errors", (json_int_t)c->errors, "epoch_switches",
		(json_int_t)c->epoch_switches, "switches_ahead",
		(json_int_t)c->switches_ahead, "ahead",
		c->ahead_built ? json_integer((json_int_t)c->ahead_epoch) :
				 json_null(),
		"views", (json_int_t)c->views, "prefetch_files",
		(json_int_t)c->prefetch_files, "prefetch_bytes",
		(json_int_t)c->prefetch_bytes, "prefetch_cached_bytes",
		(json_int_t)c->prefetch_cached_bytes, "prefetch_errors",
		(json_int_t)c->prefetch_errors, "prefetch_dropped",
		(json_int_t)c->prefetch_dropped, "slices_spilled",
		(json_int_t)c->slices_spilled, "slices_laid_out",
		(json_int_t)c->slices_laid_out));
	if (!counters)
		return NULL;
	/* the counters are the object's last member: head's members, a
	 * comma, then the counters' object without its "{" */
	hlen = strlen(head);
	clen = strlen(counters + 1);
	text = malloc(hlen + 1 + clen + 2);
	if (text) {
		memcpy(text, head, hlen);
		text[hlen] = ',';
		memcpy(text + hlen + 1, counters + 1, clen);
		memcpy(text + hlen + 1 + clen, "\n", 2);
	}
	free(counters);
	return text;
}

char *sfs_status_json(const struct sfs_status_in *in)
{
	char *head = sfs_status_json_head(in), *text;

	if (!head)
		return NULL;
	text = sfs_status_json_join(head, &in->counters);
	free(head);
	return text;
}

static char *str_dup(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	return json_is_string(v) ? strdup(json_string_value(v)) : NULL;
}

int sfs_status_read(const char *text, size_t len, const char *where,
		    struct sfs_status *out, struct sfs_error *err)
{
	struct sfs_status st = { 0 };
	json_error_t jerr;
	json_t *root = json_loadb(text, len, 0, &jerr), *o;
	json_int_t epochs = 1;
	int rc;

	if (!root)
		return sfs_errorf(err, -EINVAL, "%s: not a shardfs status (%s)",
				  where, jerr.text);
	o = json_object_get(root, "options");
	st.source = str_dup(root, "source");
	st.index_dir = str_dup(root, "index");
	if (!st.source || !json_is_object(o) ||
	    json_unpack(o, "{s:I}", "epochs", &epochs) || epochs < 1 ||
	    epochs > SFS_EPOCHS_MAX) {
		rc = sfs_errorf(err, -EINVAL, "%s: not a shardfs status",
				where);
		goto out;
	}
	st.epochs = (uint32_t)epochs;
	rc = sfs_options_from_json(o, where, &st.plan, err);
out:
	json_decref(root);
	if (rc)
		sfs_status_clear(&st);
	else
		*out = st;
	return rc;
}

void sfs_status_clear(struct sfs_status *st)
{
	free(st->source);
	free(st->index_dir);
	memset(st, 0, sizeof(*st));
}
