/*
 * The auditor's report files (audit.h): observations written as JSON with
 * the shard list and mixture they refer to, and read back, checked, so
 * that the reports of several nodes merge into one audit.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "shardfs/audit.h"
#include "plan/plan_json_i.h"
#include "shardfs/mixture.h"

#define REPORT_VERSION 2

char *sfs_audit_write(const struct sfs_audit *a, const struct sfs_index *idx)
{
	json_t *root, *shards = json_array(), *mounts = json_array();
	json_t *readers = json_array();
	size_t i, f, k;
	char *text;

	for (i = 0; i < idx->nshards; i++)
		json_array_append_new(
			shards, json_pack("[s, I, b, s]", idx->shards[i].path,
					  (json_int_t)idx->shards[i].nsamples,
					  sfs_shard_sliceable(&idx->shards[i]),
					  idx->shards[i].format->name));
	for (i = 0; i < a->nmounts; i++)
		json_array_append_new(
			mounts,
			json_pack("{s:s, s:o}", "path", a->mounts[i].path,
				  "options",
				  sfs_options_to_json(&a->mounts[i].opts)));
	for (i = 0; i < a->nreaders; i++) {
		const struct sfs_audit_reader *r = &a->readers[i];
		json_t *files = json_array();

		for (f = 0; f < r->nfiles; f++) {
			json_t *smp = json_array();

			for (k = 0; k < r->files[f].count; k++) {
				const struct sfs_audit_sample *x =
					&r->samples[r->files[f].first + k];

				json_array_append_new(
					smp,
					x->shard == SFS_AUDIT_UNKNOWN ?
						json_pack("[i, i]", -1, 0) :
						json_pack(
							"[I, I]",
							(json_int_t)x->shard,
							(json_int_t)x->sample));
			}
			json_array_append_new(files,
					      json_pack("{s:s, s:o}", "name",
							r->files[f].name,
							"samples", smp));
		}
		json_array_append_new(
			readers,
			json_pack("{s:I, s:i, s:i, s:o}", "mount",
				  (json_int_t)r->mount, "rank", (int)r->rank,
				  "worker", (int)r->worker, "files", files));
	}
	root = json_pack("{s:i, s:s, s:o, s:o, s:o, s:o*}", "shardfs_audit",
			 REPORT_VERSION, "source", idx->source, "shards",
			 shards, "mounts", mounts, "readers", readers,
			 "mixture", sfs_mix_to_json(sfs_mix_of(idx)));
	if (!root)
		return NULL;
	text = json_dumps(root, JSON_COMPACT);
	json_decref(root);
	return text;
}

static int bad_report(struct sfs_error *err, const char *path, const char *what)
{
	return sfs_errorf(
		err, -EINVAL,
		"%s: %s; write reports with shardfs-check view --emit", path,
		what);
}

/* Whether a report's mixture (mix, borrowed) is the one of idx. */
static int same_mixture(const struct sfs_index *idx, json_t *mix,
			const char *path, struct sfs_error *err)
{
	const char *file = json_string_value(json_object_get(mix, "file"));
	const char *hex = json_string_value(json_object_get(mix, "digest"));
	unsigned char d[SFS_DIGEST_LEN];

	if (!sfs_mix_of(idx) && (!mix || json_is_null(mix)))
		return 0;
	if (sfs_mix_of(idx) && hex && !sfs_digest_parse(hex, d) &&
	    !memcmp(d, sfs_mix_of(idx)->digest, SFS_DIGEST_LEN))
		return 0;
	return sfs_errorf(
		err, -EINVAL,
		"%s: its ranks mount %s%s, the first report's mount %s%s: every rank must mount the same mixture (same sources, weights and options)",
		path, file ? "the mixture " : "one source directory",
		file ? file : "",
		sfs_mix_of(idx) ? "the mixture " : "one source directory",
		sfs_mix_of(idx) ? sfs_mix_of(idx)->file : "");
}

/* The plan-only index a report describes. */
static int report_index(json_t *shards, const char *source,
			struct sfs_index **out)
{
	struct sfs_index *idx = calloc(1, sizeof(*idx));
	size_t i;

	if (!idx)
		return -ENOMEM;
	idx->source = strdup(source);
	idx->shards = calloc(json_array_size(shards) + 1, sizeof(*idx->shards));
	if (!idx->source || !idx->shards)
		goto out_nomem;
	for (i = 0; i < json_array_size(shards); i++) {
		struct sfs_shard *sh = &idx->shards[i];
		const char *path, *format;
		json_int_t n;
		int cut;

		if (json_unpack(json_array_get(shards, i), "[s, I, b, s]",
				&path, &n, &cut, &format) ||
		    n < 0 || !sfs_index_path_ok(path) ||
		    !(sh->format = sfs_format_by_name(format))) {
			sfs_index_free(idx);
			return -EINVAL;
		}
		sh->path = strdup(path);
		if (!sh->path)
			goto out_nomem;
		idx->nshards = i + 1;
		sh->nsamples = (uint64_t)n;
		sh->first_sample = idx->nsamples;
		sh->bounds_at = cut ? 0 : SFS_NO_BOUNDS;
		idx->nsamples += sh->nsamples;
	}
	*out = idx;
	return 0;
out_nomem:
	sfs_index_free(idx);
	return -ENOMEM;
}

/* The mixture of a report (mix, borrowed) into idx: -EINVAL when bad. */
static int report_mixture(struct sfs_index *idx, json_t *mix)
{
	struct sfs_mix *m;
	int rc = sfs_mix_from_json(mix, idx->nshards, &m);
	size_t i, k;

	if (!rc && m)
		sfs_mix_attach(idx, m);
	for (i = 0; !rc && m && i < m->nsources; i++) {
		const struct sfs_mix_source *s = &m->sources[i];

		for (k = s->shard_lo; k < s->shard_hi; k++)
			if (strlen(idx->shards[k].path) <= s->prefix_len)
				rc = -EINVAL;
	}
	return rc;
}

static bool same_shards(const struct sfs_index *idx, json_t *shards)
{
	size_t i;

	if (json_array_size(shards) != idx->nshards)
		return false;
	for (i = 0; i < idx->nshards; i++) {
		const char *path, *format;
		json_int_t n;
		int cut;

		if (json_unpack(json_array_get(shards, i), "[s, I, b, s]",
				&path, &n, &cut, &format) ||
		    strcmp(path, idx->shards[i].path) ||
		    strcmp(format, idx->shards[i].format->name) ||
		    (uint64_t)n != idx->shards[i].nsamples ||
		    !cut != !sfs_shard_sliceable(&idx->shards[i]))
			return false;
	}
	return true;
}

static int read_readers(struct sfs_audit *a, json_t *readers, size_t base,
			size_t nmounts, const struct sfs_index *idx)
{
	size_t i, f, k;

	for (i = 0; i < json_array_size(readers); i++) {
		json_t *jr = json_array_get(readers, i), *files;
		json_int_t mount;
		int rank, worker;
		struct sfs_audit_reader *r;

		if (json_unpack(jr, "{s:I, s:i, s:i, s:o}", "mount", &mount,
				"rank", &rank, "worker", &worker, "files",
				&files) ||
		    mount < 0 || (size_t)mount >= nmounts || rank < 0 ||
		    worker < 0 || !json_is_array(files))
			return -EINVAL;
		r = sfs_audit_add_reader(a, base + (size_t)mount,
					 (uint32_t)rank, (uint32_t)worker);
		if (!r)
			return -ENOMEM;
		for (f = 0; f < json_array_size(files); f++) {
			json_t *jf = json_array_get(files, f), *smp;
			const char *name;

			if (json_unpack(jf, "{s:s, s:o}", "name", &name,
					"samples", &smp) ||
			    !json_is_array(smp))
				return -EINVAL;
			if (sfs_audit_add_file(r, name))
				return -ENOMEM;
			for (k = 0; k < json_array_size(smp); k++) {
				json_int_t sh, x;

				if (json_unpack(json_array_get(smp, k),
						"[I, I]", &sh, &x))
					return -EINVAL;
				if (sh < 0) {
					sh = (json_int_t)SFS_AUDIT_UNKNOWN;
				} else if ((size_t)sh >= idx->nshards ||
					   x < 0 ||
					   (uint64_t)x >=
						   idx->shards[sh].nsamples) {
					return -EINVAL;
				}
				if (sfs_audit_add_sample(r, (uint64_t)sh,
							 (uint64_t)x))
					return -ENOMEM;
			}
		}
	}
	return 0;
}

int sfs_audit_read(struct sfs_audit *a, const char *path,
		   struct sfs_index **idx, struct sfs_error *err)
{
	json_t *root, *shards, *mounts, *readers, *mix;
	json_error_t jerr;
	const char *source;
	size_t base = a->nmounts, i;
	int version, rc;

	root = json_load_file(path, 0, &jerr);
	if (!root)
		return sfs_errorf(err, -EINVAL,
				  "%s: not valid JSON at line %d (%s)", path,
				  jerr.line, jerr.text);
	mix = json_object_get(root, "mixture");
	if (json_unpack(root, "{s:i, s:s, s:o, s:o, s:o}", "shardfs_audit",
			&version, "source", &source, "shards", &shards,
			"mounts", &mounts, "readers", &readers) ||
	    !json_is_array(shards) || !json_is_array(mounts) ||
	    !json_is_array(readers)) {
		rc = bad_report(err, path, "not a shardfs-check report");
		goto out;
	}
	if (version != REPORT_VERSION) {
		rc = bad_report(err, path, "a report of another version");
		goto out;
	}
	if (!*idx) {
		const char *what = "a bad shard list";

		rc = report_index(shards, source, idx);
		if (!rc && mix) {
			what = "a bad mixture";
			rc = report_mixture(*idx, mix);
		}
		if (rc) {
			rc = rc == -ENOMEM ?
				     sfs_errorf(err, rc, "out of memory") :
				     bad_report(err, path, what);
			sfs_index_free(*idx);
			*idx = NULL;
			goto out;
		}
	} else if ((rc = same_mixture(*idx, mix, path, err))) {
		goto out;
	} else if (!same_shards(*idx, shards)) {
		rc = sfs_errorf(
			err, -EINVAL,
			"%s: its index lists other shards than the first report's: reports must come from views of one index",
			path);
		goto out;
	}
	for (i = 0; i < json_array_size(mounts); i++) {
		struct sfs_plan_opts o;
		const char *mpath;
		json_t *jo;

		if (json_unpack(json_array_get(mounts, i), "{s:s, s:o}", "path",
				&mpath, "options", &jo) ||
		    sfs_options_from_json(jo, path, &o, NULL)) {
			rc = bad_report(err, path, "a mount with bad options");
			goto out;
		}
		if (sfs_audit_add_mount(a, mpath, &o) < 0) {
			rc = sfs_errorf(err, -ENOMEM, "out of memory");
			goto out;
		}
	}
	rc = read_readers(a, readers, base, json_array_size(mounts), *idx);
	if (rc == -ENOMEM)
		sfs_errorf(err, rc, "out of memory");
	else if (rc)
		rc = bad_report(err, path, "a reader entry is malformed");
out:
	json_decref(root);
	return rc;
}
