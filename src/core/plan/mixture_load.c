/*
 * Reading a mixture file and joining its sources' indexes into one: the
 * loader sits above the index (it loads and joins indexes), the mixture
 * type (mixture.c) below it.
 */
#include <errno.h>
#include <jansson.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "mixture_i.h"
#include "shardfs/index.h"
#include "shardfs/mixture.h"

#define MIX_FILE_MAX (16 << 20)
#define PROPORTION_MAX 1e9
#define REPEAT_MAX 1e6

/* What loading one mixture file needs; sources' indexes are kept until
 * they are joined. */
struct loader {
	const char *file;
	char *dir; /* the file's directory, resolved */
	struct sfs_mix *mix;
	struct sfs_index **idxs; /* the sources' indexes, nidx loaded */
	size_t nidx;
	struct sfs_error *err;
};

static int bad(struct loader *l, const char *what, const char *fix)
{
	return sfs_errorf(l->err, -EINVAL, "%s: %s; %s", l->file, what, fix);
}

static int bad_source(struct loader *l, size_t i, const char *field,
		      const char *what, const char *fix)
{
	return sfs_errorf(l->err, -EINVAL, "%s: sources[%zu].%s %s; %s",
			  l->file, i, field, what, fix);
}

/* An enum field of the mixture: absent leaves *v. */
static int get_enum(struct loader *l, json_t *root, const char *key,
		    const char *const *names, int *v)
{
	json_t *j = json_object_get(root, key);
	const char *s;
	int i;

	if (!j)
		return 0;
	s = json_string_value(j);
	i = sfs_mix_name_index(names, s);
	if (i >= 0) {
		*v = i;
		return 0;
	}
	return sfs_errorf(l->err, -EINVAL,
			  "%s: %s must be \"%s\" or \"%s\"%s%s%s", l->file, key,
			  names[0], names[1], s ? ", not \"" : "", s ? s : "",
			  s ? "\"" : "");
}

/* A path as written in the file (relative to the file's directory), as a
 * heap string; NULL without memory. */
static char *in_dir(struct loader *l, const char *path)
{
	char *out;

	if (path[0] == '/')
		return strdup(path);
	return asprintf(&out, "%s/%s", l->dir, path) < 0 ? NULL : out;
}

/* The same, resolved (realpath); NULL with errno set. */
static char *resolve(struct loader *l, const char *path)
{
	char *joined = in_dir(l, path), *real;

	if (!joined)
		return NULL;
	real = realpath(joined, NULL);
	free(joined);
	return real;
}

static int read_weight(struct loader *l, size_t i, json_t *src, bool *kind_set)
{
	struct sfs_mix_source *s = &l->mix->sources[i];
	enum sfs_mix_weight k, found = SFS_MIX_PROPORTION;
	int nfound = 0;
	json_t *j = NULL;
	double v;
	char what[160];

	for (k = SFS_MIX_PROPORTION; k <= SFS_MIX_CHOOSE; k++)
		if (json_object_get(src, sfs_mix_weight_names[k])) {
			found = k;
			j = json_object_get(src, sfs_mix_weight_names[k]);
			nfound++;
		}
	if (nfound != 1)
		return bad_source(
			l, i, "proportion",
			nfound ? "is given with another weight" : "is missing",
			"give each source exactly one of proportion, repeat or choose");
	if (*kind_set && found != l->mix->kind) {
		snprintf(what, sizeof(what), "is given where sources[0] has %s",
			 sfs_mix_weight_names[l->mix->kind]);
		return bad_source(
			l, i, sfs_mix_weight_names[found], what,
			"every source of a mixture takes the same kind of weight");
	}
	l->mix->kind = found;
	*kind_set = true;
	if (found == SFS_MIX_CHOOSE) {
		if (!json_is_integer(j) || json_integer_value(j) < 1)
			return bad_source(
				l, i, "choose", "is not a whole number >= 1",
				"choose is how many samples of this source an epoch takes");
		s->weight = (uint64_t)json_integer_value(j);
		return 0;
	}
	v = json_number_value(j);
	if (!json_is_number(j) || !isfinite(v) || v <= 0 ||
	    v > (found == SFS_MIX_PROPORTION ? PROPORTION_MAX : REPEAT_MAX))
		return bad_source(
			l, i, sfs_mix_weight_names[found],
			found == SFS_MIX_PROPORTION ?
				"is not a number in (0, 1e9]" :
				"is not a number in (0, 1e6]",
			found == SFS_MIX_PROPORTION ?
				"a proportion is a relative weight, e.g. 3 and 1, or 0.75 and 0.25" :
				"repeat is a factor: 0.5 takes half the source per epoch, 2 takes it twice");
	s->weight = (uint64_t)(v * (double)SFS_MIX_SCALE + 0.5);
	if (!s->weight)
		return bad_source(l, i, sfs_mix_weight_names[found],
				  "rounds to 0 at 9 decimal places",
				  "use a larger weight");
	return 0;
}

static int read_source(struct loader *l, size_t i, json_t *src, bool *kind_set)
{
	struct sfs_mix_source *s = &l->mix->sources[i];
	const char *key, *path, *name, *index;
	char *copy;
	json_t *v;

	if (!json_is_object(src))
		return bad_source(
			l, i, "", "is not an object",
			"write {\"path\": \"/data/x\", \"proportion\": 1}");
	json_object_foreach(src, key, v)
	{
		if (strcmp(key, "path") && strcmp(key, "name") &&
		    strcmp(key, "index") && strcmp(key, "proportion") &&
		    strcmp(key, "repeat") && strcmp(key, "choose"))
			return bad_source(
				l, i, key, "is not a key of a source",
				"a source has path, name, index and one of proportion, repeat or choose");
	}
	path = json_string_value(json_object_get(src, "path"));
	if (!path || !*path)
		return bad_source(l, i, "path", "is missing or not a string",
				  "name the source's directory");
	s->path = resolve(l, path);
	if (!s->path)
		return sfs_errorf(l->err, -ENOENT,
				  "%s: sources[%zu].path %s: %s; %s", l->file,
				  i, path, strerror(errno),
				  errno == ENOMEM ?
					  "out of memory" :
					  "name an indexed directory");
	v = json_object_get(src, "name");
	if (v && !json_is_string(v))
		return bad_source(l, i, "name", "is not a string",
				  "use letters, digits, '.', '_' and '-'");
	copy = strdup(path);
	if (!copy)
		return sfs_errorf(l->err, -ENOMEM, "out of memory");
	name = v ? json_string_value(v) : basename(copy);
	s->name = strdup(name);
	free(copy);
	if (!s->name)
		return sfs_errorf(l->err, -ENOMEM, "out of memory");
	if (!sfs_mix_name_ok(s->name))
		return bad_source(
			l, i, "name",
			v ? "has characters a file name may not hold" :
			    "(the path's last component) is not a usable name",
			"give \"name\": up to 64 letters, digits, '.', '_' and '-'");
	v = json_object_get(src, "index");
	if (v) {
		index = json_string_value(v);
		if (!index || !*index)
			return bad_source(l, i, "index", "is not a string",
					  "name the directory of its index");
		s->index_dir = in_dir(l, index);
		if (!s->index_dir)
			return sfs_errorf(l->err, -ENOMEM, "out of memory");
	}
	return read_weight(l, i, src, kind_set);
}

/* The index of source i. */
static int load_source(struct loader *l, size_t i)
{
	struct sfs_mix_source *s = &l->mix->sources[i];
	char msg[SFS_ERROR_MAX];
	int rc = sfs_index_load(s->path, s->index_dir, &l->idxs[i], l->err);

	if (rc) {
		snprintf(msg, sizeof(msg), "%s", l->err ? l->err->msg : "");
		return sfs_errorf(l->err, rc, "%s: source \"%s\": %s", l->file,
				  s->name, msg);
	}
	l->nidx = i + 1;
	s->nsamples = l->idxs[i]->nsamples;
	return 0;
}

/* a is b, or a directory above it */
static bool holds(const char *a, const char *b)
{
	size_t n = strlen(a);

	return !strncmp(a, b, n) &&
	       (b[n] == '\0' || b[n] == '/' || (n == 1 && a[0] == '/'));
}

static int check_distinct(struct loader *l)
{
	const struct sfs_mix *m = l->mix;
	size_t i, k;

	for (i = 0; i < m->nsources; i++)
		for (k = 0; k < i; k++) {
			const struct sfs_mix_source *a = &m->sources[k];
			const struct sfs_mix_source *b = &m->sources[i];

			if (!strcmp(a->name, b->name))
				return sfs_errorf(
					l->err, -EINVAL,
					"%s: sources[%zu] and sources[%zu] are both named \"%s\"; give one of them another \"name\"",
					l->file, k, i, a->name);
			if (!strcmp(a->path, b->path))
				return sfs_errorf(
					l->err, -EINVAL,
					"%s: sources[%zu] and sources[%zu] are both %s; list a source once (repeat=2 takes it twice)",
					l->file, k, i, a->path);
			if (holds(a->path, b->path) || holds(b->path, a->path))
				return sfs_errorf(
					l->err, -EINVAL,
					"%s: sources[%zu] (%s) and sources[%zu] (%s) overlap: one is inside the other; give sources that hold different shards",
					l->file, k, a->path, i, b->path);
		}
	return 0;
}

/* The deepest directory that holds every source. */
static char *common_root(const struct sfs_mix *m)
{
	size_t n = strlen(m->sources[0].path), i;
	char *root = strdup(m->sources[0].path);

	if (!root)
		return NULL;
	for (i = 1; i < m->nsources; i++) {
		const char *p = m->sources[i].path;
		size_t k = 0;

		while (k < n && root[k] == p[k])
			k++;
		if (!(k == n && (p[k] == '/' || p[k] == '\0'))) {
			while (k > 0 && root[k] != '/')
				k--;
			n = k;
		}
		root[n] = '\0';
	}
	if (n == 0)
		strcpy(root, "/");
	return root;
}

static void mix_digest(struct sfs_mix *m, const struct sfs_index *idx,
		       char *const *prefixes)
{
	struct sfs_digest *d = sfs_digest_new();
	char line[256];
	size_t i, k;

	if (!d)
		return;
	snprintf(line, sizeof(line), "%s %llu %s %s\n",
		 sfs_mix_weight_names[m->kind],
		 (unsigned long long)m->epoch_size,
		 sfs_mix_sampling_names[m->sampling],
		 sfs_mix_batching_names[m->batching]);
	sfs_digest_update(d, line, strlen(line));
	for (i = 0; i < m->nsources; i++) {
		const struct sfs_mix_source *s = &m->sources[i];
		size_t skip = strlen(prefixes[i]);

		snprintf(line, sizeof(line), "%s %llu %llu\n", s->name,
			 (unsigned long long)s->weight,
			 (unsigned long long)s->nsamples);
		sfs_digest_update(d, line, strlen(line));
		for (k = s->shard_lo; k < s->shard_hi; k++) {
			const struct sfs_shard *sh = &idx->shards[k];

			sfs_digest_update(d, sh->path + skip,
					  strlen(sh->path + skip));
			snprintf(line, sizeof(line), " %llu\n",
				 (unsigned long long)sh->nsamples);
			sfs_digest_update(d, line, strlen(line));
		}
	}
	sfs_digest_final(d, m->digest);
	sfs_digest_free(d);
}

/* Join the sources' indexes and find each source's shards. */
static int join(struct loader *l, struct sfs_index **out)
{
	struct sfs_mix *m = l->mix;
	char *root = common_root(m);
	char **prefixes = calloc(m->nsources + 1, sizeof(*prefixes));
	const char **names = calloc(m->nsources + 1, sizeof(*names));
	struct sfs_index *idx = NULL;
	size_t i, k, rl;
	int rc = -ENOMEM;

	if (!root || !prefixes || !names)
		goto out_nomem;
	rl = strcmp(root, "/") ? strlen(root) + 1 : 1;
	for (i = 0; i < m->nsources; i++) {
		const char *p = m->sources[i].path;

		names[i] = m->sources[i].name;
		if (asprintf(&prefixes[i], "%s%s", strlen(p) > rl ? p + rl : "",
			     strlen(p) > rl ? "/" : "") < 0) {
			prefixes[i] = NULL;
			goto out_nomem;
		}
	}
	rc = sfs_index_join((const struct sfs_index *const *)l->idxs,
			    (const char *const *)prefixes, names, m->nsources,
			    root, "sources may not share shards", true, &idx,
			    l->err);
	if (rc)
		goto out_free;
	for (i = 0; i < m->nsources; i++) {
		size_t plen = strlen(prefixes[i]);
		struct sfs_mix_source *s = &m->sources[i];

		s->prefix_len = plen;
		s->shard_lo = s->shard_hi = 0;
		for (k = 0; k < idx->nshards; k++)
			if (!strncmp(idx->shards[k].path, prefixes[i], plen)) {
				if (s->shard_hi == 0)
					s->shard_lo = k;
				s->shard_hi = k + 1;
			}
	}
	mix_digest(m, idx, prefixes);
	/* the shards read their boundaries from the sources' tables */
	idx->sources = calloc(l->nidx, sizeof(*idx->sources));
	if (!idx->sources)
		goto out_nomem;
	for (i = 0; i < l->nidx; i++)
		idx->sources[i] = (struct sfs_index_source){
			.idx = l->idxs[i],
			.path = m->sources[i].path,
			.index_dir = m->sources[i].index_dir,
			.shard_lo = m->sources[i].shard_lo,
			.shard_hi = m->sources[i].shard_hi,
		};
	idx->nsources = l->nidx;
	l->nidx = 0;
	sfs_mix_attach(idx, m);
	l->mix = NULL;
	*out = idx;
	idx = NULL;
	rc = 0;
	goto out_free;
out_nomem:
	rc = sfs_errorf(l->err, -ENOMEM, "out of memory");
out_free:
	for (i = 0; prefixes && i < m->nsources; i++)
		free(prefixes[i]);
	free(prefixes);
	free(names);
	free(root);
	sfs_index_free(idx);
	return rc;
}

static int read_mixture(struct loader *l, json_t *root)
{
	struct sfs_mix *m = l->mix;
	json_t *sources, *v;
	const char *key;
	bool kind_set = false;
	int sampling = SFS_MIX_BALANCED, batching = SFS_MIX_RANDOM;
	size_t i;
	int rc;

	if (!json_is_object(root))
		return bad(
			l, "not a JSON object",
			"a mixture is {\"sources\": [...], ...} (docs/plan.md)");
	json_object_foreach(root, key, v)
	{
		if (strcmp(key, "sources") && strcmp(key, "epoch_size") &&
		    strcmp(key, "sampling") && strcmp(key, "batching"))
			return sfs_errorf(
				l->err, -EINVAL,
				"%s: unknown key \"%s\"; a mixture has sources, epoch_size, sampling and batching",
				l->file, key);
	}
	sources = json_object_get(root, "sources");
	if (!json_is_array(sources) || json_array_size(sources) == 0 ||
	    json_array_size(sources) > SFS_MIX_SOURCES_MAX)
		return bad(
			l, "sources is missing, empty or not a list",
			"list 1 to 1024 sources: [{\"path\": \"/data/x\", \"proportion\": 1}, ...]");
	v = json_object_get(root, "epoch_size");
	if (v) {
		if (!json_is_integer(v) || json_integer_value(v) < 1)
			return bad(
				l, "epoch_size is not a whole number >= 1",
				"give the samples of an epoch, or leave epoch_size out");
		m->epoch_size = (uint64_t)json_integer_value(v);
	}
	rc = get_enum(l, root, "sampling", sfs_mix_sampling_names, &sampling);
	if (!rc)
		rc = get_enum(l, root, "batching", sfs_mix_batching_names,
			      &batching);
	if (rc)
		return rc;
	m->sampling = (enum sfs_mix_sampling)sampling;
	m->batching = (enum sfs_mix_batching)batching;
	m->nsources = json_array_size(sources);
	m->sources = calloc(m->nsources, sizeof(*m->sources));
	l->idxs = calloc(m->nsources, sizeof(*l->idxs));
	if (!m->sources || !l->idxs)
		return sfs_errorf(l->err, -ENOMEM, "out of memory");
	for (i = 0; i < m->nsources; i++) {
		rc = read_source(l, i, json_array_get(sources, i), &kind_set);
		if (rc)
			return rc;
	}
	rc = check_distinct(l);
	for (i = 0; !rc && i < m->nsources; i++)
		rc = load_source(l, i);
	return rc;
}

/* The mixture file, size bytes long. */
static int load_mixture(const char *file, off_t size, struct sfs_index **out,
			struct sfs_error *err)
{
	struct loader l = { .file = file, .err = err };
	char *real = NULL;
	json_error_t jerr;
	json_t *root = NULL;
	size_t i;
	int rc;

	l.mix = calloc(1, sizeof(*l.mix));
	real = realpath(file, NULL);
	if (!real) {
		rc = sfs_errorf(err, -errno, "%s: %s", file, strerror(errno));
		goto out_free;
	}
	if (!l.mix || !(l.mix->file = strdup(real))) {
		rc = sfs_errorf(err, -ENOMEM, "out of memory");
		goto out_free;
	}
	l.dir = strdup(dirname(real));
	if (!l.dir) {
		rc = sfs_errorf(err, -ENOMEM, "out of memory");
		goto out_free;
	}
	if (size > MIX_FILE_MAX) {
		rc = bad(&l, "larger than 16 MiB",
			 "a mixture file lists sources, not shards");
		goto out_free;
	}
	root = json_load_file(file, JSON_REJECT_DUPLICATES, &jerr);
	if (!root) {
		rc = sfs_errorf(
			err, -EINVAL,
			"%s: not a directory nor a JSON mixture file: line %d, column %d: %s; a source is an indexed directory or a mixture file (docs/plan.md)",
			file, jerr.line, jerr.column, jerr.text);
		goto out_free;
	}
	rc = read_mixture(&l, root);
	if (!rc)
		rc = join(&l, out);
out_free:
	for (i = 0; i < l.nidx; i++)
		sfs_index_free(l.idxs[i]);
	free(l.idxs);
	json_decref(root);
	sfs_mix_free(l.mix);
	free(l.dir);
	free(real);
	return rc;
}

int sfs_source_load(const char *path, const char *index_dir,
		    struct sfs_index **out, struct sfs_error *err)
{
	struct stat st;

	if (stat(path, &st) < 0)
		return sfs_errorf(
			err, -ENOENT,
			"%s: %s; give an indexed directory or a mixture file",
			path, strerror(errno));
	if (S_ISDIR(st.st_mode))
		return sfs_index_load(path, index_dir, out, err);
	if (index_dir)
		return sfs_errorf(
			err, -EINVAL,
			"%s: index= is for a source directory; a mixture names each source's index in its \"index\" field",
			path);
	return load_mixture(path, st.st_size, out, err);
}
