#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shardfs/mixture.h"
#include "shardfs/util.h"
#include "shardfs/view.h"

#include "view_i.h"

#define SEQ_MIN_WIDTH 6

int sfs_view_add_node(struct builder *b, uint32_t parent, const char *name,
		      size_t name_len, enum sfs_node_kind kind, uint32_t *out)
{
	struct sfs_view *v = b->v;
	struct sfs_view_node *n;

	if (v->nnodes == UINT32_MAX - 1)
		return -EOVERFLOW;
	if (SFS_GROW(v->nodes, b->nodes_cap, (size_t)v->nnodes + 1) ||
	    SFS_GROW(b->name_at, b->name_at_cap, (size_t)v->nnodes + 1) ||
	    SFS_GROW(b->pool, b->pool_cap, b->pool_len + name_len + 1))
		return -ENOMEM;
	memcpy(b->pool + b->pool_len, name, name_len);
	b->pool[b->pool_len + name_len] = '\0';
	b->name_at[v->nnodes] = b->pool_len;
	b->pool_len += name_len + 1;
	n = &v->nodes[v->nnodes];
	memset(n, 0, sizeof(*n));
	n->parent = parent;
	n->kind = kind;
	*out = v->nnodes++;
	return 0;
}

static uint64_t dir_hash(uint32_t parent, const char *name, size_t len)
{
	uint64_t h = 1469598103934665603ULL ^ parent;
	size_t i;

	for (i = 0; i < len; i++)
		h = (h ^ (unsigned char)name[i]) * 1099511628211ULL;
	return h;
}

static int dirs_grow(struct builder *b)
{
	size_t ncap = b->dirs_cap ? 2 * b->dirs_cap : 1024, i;
	uint32_t *nd = calloc(ncap, sizeof(*nd));

	if (!nd)
		return -ENOMEM;
	for (i = 0; i < b->dirs_cap; i++) {
		uint32_t id = b->dirs[i];
		const char *name;
		size_t k;

		if (!id)
			continue;
		name = b->pool + b->name_at[id - 1];
		k = dir_hash(b->v->nodes[id - 1].parent, name, strlen(name)) &
		    (ncap - 1);
		while (nd[k])
			k = (k + 1) & (ncap - 1);
		nd[k] = id;
	}
	free(b->dirs);
	b->dirs = nd;
	b->dirs_cap = ncap;
	return 0;
}

int sfs_view_subdir(struct builder *b, uint32_t parent, const char *name,
		    size_t len, uint32_t *out)
{
	size_t k;
	int rc;

	if (2 * (b->ndirs + 1) > b->dirs_cap && (rc = dirs_grow(b)))
		return rc;
	k = dir_hash(parent, name, len) & (b->dirs_cap - 1);
	for (; b->dirs[k]; k = (k + 1) & (b->dirs_cap - 1)) {
		uint32_t id = b->dirs[k] - 1;
		const char *have = b->pool + b->name_at[id];

		if (b->v->nodes[id].parent == parent && strlen(have) == len &&
		    !memcmp(have, name, len)) {
			*out = id;
			return 0;
		}
	}
	rc = sfs_view_add_node(b, parent, name, len, SFS_NODE_DIR, out);
	if (rc)
		return rc;
	b->dirs[k] = *out + 1;
	b->ndirs++;
	return 0;
}

int sfs_view_open_shard(int srcfd, const struct sfs_shard *sh,
			struct sfs_error *err)
{
	struct stat st;
	int fd = sfs_index_open_shard(srcfd, sh->path, O_RDONLY);

	if (fd < 0)
		return sfs_errorf(
			err, fd,
			"%s: cannot open the shard to size a slice: %s",
			sh->path, strerror(-fd));
	if (!fstat(fd, &st) && (uint64_t)st.st_size == sh->size &&
	    sfs_mtime_ns(&st) == sh->mtime_ns)
		return fd;
	close(fd);
	return sfs_errorf(
		err, -ESTALE,
		"%s: the shard changed since it was indexed; rebuild the index with shardfs-index",
		sh->path);
}

/* (view_i.h) */
int sfs_view_cancelled(const struct sfs_view_opts *o, struct sfs_error *err)
{
	if (!o->cancel || !atomic_load(o->cancel))
		return 0;
	return sfs_errorf(err, -ECANCELED, "the view's build was cancelled");
}

/* The node(s) of one plan file in worker directory wdir. */
static int add_file(struct builder *b, uint32_t wdir, uint32_t plan, size_t fi,
		    const char *prefix)
{
	struct sfs_view *v = b->v;
	const struct sfs_plan *p = v->plans[plan];
	const struct sfs_plan_file *f = &p->files[fi];
	const struct sfs_shard *sh = &v->idx->shards[f->shard];
	const struct sfs_mix *mix = sfs_mix_of(v->idx);
	const struct sfs_mix_source *src =
		mix ? &mix->sources[sfs_mix_source_of(mix, f->shard)] : NULL;
	/* a mixture's files are named by source, then path in the source */
	const char *sname = src ? src->name : "";
	uint32_t m, node, dir;
	int rc;

	for (m = 0; m <= sh->nmembers; m++) {
		const char *full = m ? sh->members[m - 1].path : sh->path;
		const char *path = full + (src ? src->prefix_len : 0);
		const char *base = strrchr(path, '/');
		uint64_t size = m ? sh->members[m - 1].size : sh->size;
		enum sfs_node_kind kind;
		const char *p0 = path;

		base = base ? base + 1 : path;
		dir = wdir;
		/* tree datasets (`files`) keep their sub-directories */
		while (sh->format->tree && p0 < base) {
			const char *slash = strchr(p0, '/');

			rc = sfs_view_subdir(b, dir, p0, (size_t)(slash - p0),
					     &dir);
			if (rc)
				return rc;
			p0 = slash + 1;
		}
		if (f->whole) {
			rc = sfs_view_file_name(&b->name, &b->name_cap, prefix,
						sname, path, sh->format->tree,
						NULL);
			kind = v->symlinks ? SFS_NODE_LINK : SFS_NODE_FILE;
			if (v->symlinks)
				size = strlen(v->idx->source) + 1 +
				       strlen(full);
		} else {
			rc = sfs_view_file_name(&b->name, &b->name_cap, prefix,
						sname, path, sh->format->tree,
						b->desc[plan][fi].samples);
			kind = SFS_NODE_FILE;
			size = b->desc[plan][fi].size;
		}
		if (!rc)
			rc = sfs_view_add_node(b, dir, b->name, strlen(b->name),
					       kind, &node);
		if (rc)
			return rc;
		v->nodes[node].plan = plan;
		v->nodes[node].file = fi;
		v->nodes[node].member = m;
		v->nodes[node].size = size;
	}
	return 0;
}

/* Whether the reader's i-th file is of a shard an earlier one is of. */
static bool shard_seen(const struct sfs_plan *p,
		       const struct sfs_plan_reader *r, size_t i)
{
	size_t shard = p->files[r->file_at + i].shard, j;

	for (j = 0; j < i; j++)
		if (p->files[r->file_at + j].shard == shard)
			return true;
	return false;
}

static int add_reader(struct builder *b, uint32_t wdir, size_t reader)
{
	struct sfs_view *v = b->v;
	int ew = sfs_view_digits(v->epoch + v->nplans - 1);
	char prefix[64];
	uint32_t e;
	size_t i;
	int rc;

	for (e = 0; e < v->nplans; e++) {
		const struct sfs_plan_reader *r = &v->plans[e]->readers[reader];
		int sw = sfs_view_digits(r->nfiles ? r->nfiles - 1 : 0);

		if (sw < SEQ_MIN_WIDTH)
			sw = SEQ_MIN_WIDTH;
		for (i = 0; i < r->nfiles; i++) {
			const struct sfs_plan_file *f =
				&v->plans[e]->files[r->file_at + i];

			if (v->idx->shards[f->shard].format->dataset_view) {
				/* one dataset a shard, named by it and, with
				 * several epochs, its epoch */
				if (shard_seen(v->plans[e], r, i))
					continue;
				prefix[0] = '\0';
				if (v->nplans > 1)
					snprintf(prefix, sizeof(prefix),
						 "%0*llu-", ew,
						 (unsigned long long)(v->epoch +
								      e));
				rc = sfs_view_add_dataset(b, wdir, e, r, i,
							  prefix);
				if (rc)
					return rc;
				continue;
			}
			rc = sfs_view_name_prefix(prefix, sizeof(prefix),
						  v->nplans > 1, v->epoch + e,
						  ew, i, sw);
			if (rc)
				return rc;
			rc = add_file(b, wdir, e, r->file_at + i, prefix);
			if (rc)
				return rc;
		}
	}
	return 0;
}

static int child_cmp(const void *a, const void *b, void *arg)
{
	const struct sfs_view *v = arg;

	return strcmp(sfs_view_node(v, *(const uint32_t *)a)->name,
		      sfs_view_node(v, *(const uint32_t *)b)->name);
}

/* Whether node n's children are in name order already: a worker
 * directory's files are added in the order their sequence numbers give
 * (a followed source's: the stream, then the windows in order, until
 * window numbers pass 8 digits). */
static bool in_order(const struct sfs_view *v, const struct sfs_view_node *n)
{
	const uint32_t *c = v->children + n->first_child;
	uint32_t i;

	for (i = 1; i < n->nchildren; i++)
		if (strcmp(sfs_view_node(v, c[i - 1])->name,
			   sfs_view_node(v, c[i])->name) > 0)
			return false;
	return true;
}

/* (view_i.h) */
int sfs_view_group_children(struct sfs_view *v, uint32_t ndirs, uint32_t skip,
			    uint32_t resume)
{
	uint32_t i, at, *fill;
	size_t n = (size_t)v->nnodes - (resume - skip);

	v->children = malloc(n * sizeof(*v->children));
	fill = calloc(ndirs, sizeof(*fill));
	if (!v->children || !fill) {
		free(v->children);
		v->children = NULL;
		free(fill);
		return -ENOMEM;
	}
	for (i = 0; i < ndirs; i++)
		v->nodes[i].nchildren = 0;
	for (i = 1; i < v->nnodes; i = i + 1 == skip ? resume : i + 1)
		v->nodes[sfs_view_node(v, i)->parent].nchildren++;
	for (i = 0, at = 0; i < ndirs; i++) {
		v->nodes[i].first_child = fill[i] = at;
		at += v->nodes[i].nchildren;
	}
	for (i = 1; i < v->nnodes; i = i + 1 == skip ? resume : i + 1)
		v->children[fill[sfs_view_node(v, i)->parent]++] = i;
	free(fill);
	for (i = 0; i < ndirs; i++)
		if (!in_order(v, &v->nodes[i]))
			qsort_r(v->children + v->nodes[i].first_child,
				v->nodes[i].nchildren, sizeof(uint32_t),
				child_cmp, v);
	return 0;
}

/* Resolve names, group children per directory, sort them by name. */
static int finish(struct builder *b)
{
	struct sfs_view *v = b->v;
	uint32_t i;

	v->names = b->pool;
	b->pool = NULL;
	for (i = 0; i < v->nnodes; i++)
		v->nodes[i].name = v->names + b->name_at[i];
	return sfs_view_group_children(v, v->nnodes, v->nnodes, v->nnodes);
}

static int build_tree(struct builder *b)
{
	const struct sfs_options *opts = &b->o->options;
	uint32_t world = opts->plan.world, workers = opts->plan.workers;
	uint32_t root, rdir, wdir, r, w, k;
	char name[16];
	int rc;

	rc = sfs_view_add_node(b, 0, "", 0, SFS_NODE_DIR, &root);
	for (k = 0; !rc && k < (opts->nranks ? opts->nranks : world); k++) {
		r = opts->nranks ? opts->ranks[k] : k;
		snprintf(name, sizeof(name), "%u", r);
		rc = sfs_view_add_node(b, root, name, strlen(name),
				       SFS_NODE_DIR, &rdir);
		for (w = 0; !rc && w < workers; w++) {
			snprintf(name, sizeof(name), "%u", w);
			rc = sfs_view_add_node(b, rdir, name, strlen(name),
					       SFS_NODE_DIR, &wdir);
			if (!rc)
				rc = add_reader(b, wdir,
						sfs_plan_reader_id(
							b->v->plans[0], r, w));
		}
	}
	return rc ? rc : finish(b);
}

/*
 * Refuse, before anything is built, shuffle=samples over shards whose
 * runs are pieces of their own when a reader would get more than
 * SFS_VIEW_PIECES_MAX of them: every sample of a permuted unit is a run.
 * An estimate (the samples of such shards over the readers), not the plan.
 */
static int check_pieces(const struct sfs_index *idx,
			const struct sfs_plan_opts *po, struct sfs_error *err)
{
	const struct sfs_shard *first = NULL;
	uint64_t rows = 0, readers, per;
	size_t i;

	if (po->shuffle != SFS_SHUFFLE_SAMPLES)
		return 0;
	for (i = 0; i < idx->nshards; i++) {
		const struct sfs_shard *sh = &idx->shards[i];

		if (!sh->format->run_piece || !sfs_shard_sliceable(sh) ||
		    sh->nsamples < 2 || po->block == 1)
			continue;
		first = first ? first : sh;
		rows += sh->nsamples;
	}
	readers = (uint64_t)po->world / po->replicas * po->workers;
	per = (rows + readers - 1) / readers;
	if (!first || per <= SFS_VIEW_PIECES_MAX)
		return 0;
	return sfs_errorf(
		err, -E2BIG,
		"shuffle=samples cuts the %llu samples of %s's %s shards (%s, ...) into one-sample runs, each a %s of its own: about %llu in each reader's files, more than %d (minutes to build, slow to read); use shuffle=units with block=N (units of N samples, shuffled each epoch; a loader's shuffle buffer mixes the samples inside them)",
		(unsigned long long)rows, idx->source, first->format->name,
		first->path, first->format->run_piece, (unsigned long long)per,
		SFS_VIEW_PIECES_MAX);
}

/*
 * Give the view's cache a file for the slices past its memory: a Parquet
 * slice of big pages (DuckDB's, one a column chunk) costs a decode of
 * them to lay out again at open, about a second of CPU, while reading
 * its synthesized bytes back costs a pread.  Chosen over keeping the
 * decoded pages after the build: those are up to 187 MiB a row group,
 * which the daemon's bound holds for one build at most, where the file
 * holds the view's re-encoded bytes (128 MB for the benchmark's three
 * shards) whatever the page size, outside the daemon's memory
 * (docs/formats.md, "Costs").  A file that cannot be made is noted, and
 * the view goes on without it.
 */
static void spill_slices(struct sfs_slice_cache *c,
			 const struct sfs_view_opts *o)
{
	struct sfs_error err = { 0 };

	if (sfs_slice_cache_spill(c, o->slice_spill_dir, o->note, o->note_arg,
				  &err) &&
	    o->note)
		o->note(o->note_arg, err.msg);
}

int sfs_view_build(const struct sfs_index *idx, const struct sfs_view_opts *o,
		   struct sfs_view **out, struct sfs_error *err)
{
	struct builder b = { .o = o, .err = err };
	struct sfs_plan_opts po = o->options.plan;
	uint32_t e;
	int rc;

	if (o->epochs == 0 || po.epoch > UINT64_MAX - (o->epochs - 1))
		return sfs_errorf(
			err, -EOVERFLOW,
			"epoch=%llu with epochs=%u runs past the last epoch, %llu",
			(unsigned long long)po.epoch, o->epochs,
			(unsigned long long)UINT64_MAX);
	rc = check_pieces(idx, &po, err);
	if (rc)
		return rc;
	b.v = calloc(1, sizeof(*b.v));
	if (!b.v)
		return sfs_errorf(err, -ENOMEM, "out of memory");
	b.v->idx = idx;
	b.v->epoch = po.epoch;
	b.v->symlinks = o->symlinks;
	b.v->plans = calloc(o->epochs, sizeof(*b.v->plans));
	rc = b.v->plans ? 0 : -ENOMEM;
	for (e = 0; !rc && e < o->epochs; e++) {
		po.epoch = b.v->epoch + e;
		rc = sfs_plan_build_ranks(idx, &po, o->options.ranks,
					  o->options.nranks, o->cancel,
					  &b.v->plans[e], err);
		if (!rc)
			b.v->nplans++;
	}
	if (!rc)
		rc = sfs_slice_cache_new_within(idx, o->slice_cache_max,
						o->slice_pages_max, o->mem,
						&b.v->slices);
	if (!rc && o->slice_spill_dir)
		spill_slices(b.v->slices, o);
	if (!rc)
		rc = sfs_view_describe(&b);
	/* the shards' decoded footers go; the slices stay */
	sfs_slice_cache_end_build(b.v->slices);
	if (!rc)
		rc = sfs_view_cancelled(o, err);
	if (!rc)
		rc = build_tree(&b);
	sfs_view_describe_free(&b);
	free(b.name_at);
	free(b.name);
	free(b.pool);
	free(b.dirs);
	if (rc) {
		if (rc == -ENOMEM || rc == -EOVERFLOW)
			sfs_errorf(err, rc, "the view is too large: %s",
				   strerror(-rc));
		if (rc == -ECANCELED)
			sfs_errorf(err, rc, "the view's build was cancelled");
		sfs_view_free(b.v);
		return rc;
	}
	*out = b.v;
	return 0;
}

int sfs_view_check_shards(const struct sfs_view *v, int srcfd,
			  struct sfs_error *err)
{
	const struct sfs_index *idx = v->idx;
	uint8_t *seen = calloc(idx->nshards / 8 + 1, 1);
	uint32_t e;
	size_t i;
	int rc = seen ? 0 : sfs_errorf(err, -ENOMEM, "out of memory");

	for (e = 0; !rc && e < v->nplans; e++)
		for (i = 0; !rc && i < v->plans[e]->nfiles; i++) {
			const struct sfs_plan_file *f = &v->plans[e]->files[i];
			const struct sfs_shard *sh = &idx->shards[f->shard];
			int fd;

			/* a dataset's view reads its shard even when whole */
			if ((f->whole && !sh->format->dataset_view) ||
			    !sh->format->lay_out ||
			    seen[f->shard / 8] & 1 << f->shard % 8)
				continue;
			seen[f->shard / 8] |= 1 << f->shard % 8;
			fd = sfs_view_open_shard(srcfd, sh, err);
			if (fd < 0)
				rc = fd;
			else
				close(fd);
		}
	free(seen);
	return rc;
}

void sfs_view_free(struct sfs_view *v)
{
	uint32_t e;

	if (!v)
		return;
	for (e = 0; e < v->nplans; e++)
		sfs_plan_free(v->plans[e]);
	free(v->plans);
	free(v->nodes);
	free(v->children);
	free(v->names);
	for (e = 0; e < v->ndatasets; e++)
		sfs_dataset_view_free(v->datasets[e]);
	free(v->datasets);
	sfs_slice_cache_free(v->slices);
	sfs_view_follow_free(v->follow);
	free(v);
}

/* The position of name among dir's children, or -1. */
static int64_t child_at(const struct sfs_view *v, uint32_t dir,
			const char *name)
{
	const struct sfs_view_node *d = sfs_view_node(v, dir);
	const uint32_t *c = &v->children[d->first_child];
	size_t at;

	if (d->kind != SFS_NODE_DIR)
		return -1;
	at = SFS_PARTITION_POINT(i, 0, d->nchildren,
				 strcmp(sfs_view_node(v, c[i])->name, name) <
					 0);
	return at < d->nchildren &&
			       !strcmp(sfs_view_node(v, c[at])->name, name) ?
		       (int64_t)at :
		       -1;
}

int64_t sfs_view_lookup(const struct sfs_view *v, uint32_t dir,
			const char *name)
{
	int64_t at = child_at(v, dir, name);

	if (at < 0)
		return -1;
	return v->children[sfs_view_node(v, dir)->first_child + at];
}

int64_t sfs_view_next(const struct sfs_view *v, uint32_t node)
{
	const struct sfs_view_node *n = sfs_view_node(v, node);
	const struct sfs_view_node *d = sfs_view_node(v, n->parent);
	int64_t at;

	if (node == 0)
		return -1;
	at = child_at(v, n->parent, n->name);
	if (at < 0 || at + 1 >= d->nchildren)
		return -1;
	return v->children[d->first_child + at + 1];
}

const struct sfs_plan_file *sfs_view_file(const struct sfs_view *v,
					  const struct sfs_view_node *n)
{
	return &v->plans[n->plan]->files[n->file];
}

const char *sfs_view_source_path(const struct sfs_view *v,
				 const struct sfs_view_node *n)
{
	const struct sfs_shard *sh =
		&v->idx->shards[sfs_view_file(v, n)->shard];

	if (n->dataset) {
		const struct sfs_dataset_file *df =
			&v->datasets[n->dataset - 1]->files[n->dfile];

		return df->source ? df->source : sh->path;
	}
	return n->member ? sh->members[n->member - 1].path : sh->path;
}

int sfs_view_xattr_range(const struct sfs_run *runs, size_t n, char **out)
{
	char *s = malloc(SFS_XATTR_MAX), run[64];
	size_t i, len = 0;
	int k;

	if (!s)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		if (runs[i].count > 1)
			k = snprintf(run, sizeof(run), "%s%" PRIu64 "-%" PRIu64,
				     i ? "," : "", runs[i].first,
				     runs[i].first + runs[i].count - 1);
		else
			k = snprintf(run, sizeof(run), "%s%" PRIu64,
				     i ? "," : "", runs[i].first);
		if (len + (size_t)k >= SFS_XATTR_MAX) {
			free(s);
			return -E2BIG;
		}
		memcpy(s + len, run, (size_t)k);
		len += (size_t)k;
	}
	s[len] = '\0';
	*out = s;
	return 0;
}

void sfs_view_access(const struct sfs_view *v, const struct sfs_view_node *n,
		     uint32_t *uid, uint32_t *gid, uint32_t *mode)
{
	const struct sfs_shard *sh =
		&v->idx->shards[sfs_view_file(v, n)->shard];
	const struct sfs_access *a =
		n->member ? &sh->members[n->member - 1].access : &sh->access;

	if (!a->known)
		return;
	if (n->dataset) { /* the view's build narrowed it (its access) */
		const struct sfs_dataset_file *df =
			&v->datasets[n->dataset - 1]->files[n->dfile];

		*uid = df->uid;
		*gid = df->gid;
		*mode = df->mode & 0444u;
		return;
	}
	*uid = a->uid;
	*gid = a->gid;
	/* the view is read-only: its read bits only */
	*mode = a->mode & 0444;
}

void sfs_view_source(const struct sfs_view *v, const struct sfs_view_node *n,
		     const char **path, uint64_t *size, int64_t *mtime_ns)
{
	const struct sfs_shard *sh =
		&v->idx->shards[sfs_view_file(v, n)->shard];
	const struct sfs_member *m = n->member ? &sh->members[n->member - 1] :
						 NULL;

	*path = m ? m->path : sh->path;
	*size = m ? m->size : sh->size;
	*mtime_ns = m ? m->mtime_ns : sh->mtime_ns;
	if (n->dataset) {
		const struct sfs_dataset_file *df =
			&v->datasets[n->dataset - 1]->files[n->dfile];

		if (df->source) {
			*path = df->source;
			*size = df->size;
			*mtime_ns = df->mtime_ns;
		}
	}
}

int sfs_view_slice(const struct sfs_view *v, const struct sfs_view_node *n,
		   int fd, struct sfs_slice **out, struct sfs_error *err)
{
	const struct sfs_plan_file *f;
	const struct sfs_plan *p;
	uint64_t key = n->file;
	uint32_t e;

	if (v->follow) /* no plan: its windows */
		return sfs_view_follow_slice(v, n, out, err);
	f = sfs_view_file(v, n);
	p = v->plans[n->plan];
	if (n->dataset) {
		const struct sfs_dataset_file *df =
			&v->datasets[n->dataset - 1]->files[n->dfile];

		return df->source ? sfs_slice_whole(df->size, out, err) :
				    sfs_slice_mem(df->bytes, df->len, out, err);
	}
	if (f->whole || n->member)
		return sfs_slice_whole(n->size, out, err);
	if (!v->slices)
		return sfs_slice_build(v->idx, &v->idx->shards[f->shard], fd,
				       sfs_plan_file_runs(p, f), f->nruns, out,
				       err);
	for (e = 0; e < n->plan; e++)
		key += v->plans[e]->nfiles;
	return sfs_slice_cache_build(v->slices, &v->idx->shards[f->shard], fd,
				     key, sfs_plan_file_runs(p, f), f->nruns,
				     out, err);
}
