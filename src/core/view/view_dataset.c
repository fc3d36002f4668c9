/*
 * A reader's datasets in the view's tree: a format that shows a reader its
 * own dataset (format.h, dataset_view; Lance) gets one directory a shard
 * in the reader's worker directory, holding the files the driver made.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shardfs/format.h"
#include "shardfs/mixture.h"
#include "shardfs/util.h"
#include "shardfs/view.h"

#include "view_i.h"

/*
 * The name of a reader's dataset dv of shard sh into b->name: the
 * dataset's path within its source, escaped as a shard's, or when the
 * source is the dataset, the source's base name; after prefix and a
 * mixture's source name.
 */
static int dataset_name(struct builder *b, const struct sfs_shard *sh,
			const struct sfs_dataset_view *dv, const char *prefix)
{
	const struct sfs_index *idx = b->v->idx;
	const struct sfs_mix *mix = sfs_mix_of(idx);
	const struct sfs_mix_source *src =
		mix ? &mix->sources[sfs_mix_source_of(
			      mix, (size_t)(sh - idx->shards))] :
		      NULL;
	size_t plen = src ? src->prefix_len : 0, len = strlen(dv->root);
	const char *dir = len ? dv->root : idx->source, *end, *base;
	char *root;
	int rc;

	if (len > plen) {
		root = strndup(dv->root + plen, len - plen);
	} else {
		/* the dataset is its source: its directory's name */
		end = dir + strlen(dir);
		while (end > dir && end[-1] == '/')
			end--;
		for (base = end; base > dir && base[-1] != '/'; base--)
			;
		root = strndup(base, (size_t)(end - base));
	}
	if (!root)
		return -ENOMEM;
	rc = sfs_view_file_name(&b->name, &b->name_cap, prefix,
				src ? src->name : "", *root ? root : "dataset",
				false, NULL);
	free(root);
	return rc;
}

/*
 * Who may read the files of dv, a reader's dataset of shard sh (whose
 * access the mount's check found): each source file what the source
 * grants it, narrowed by the directories on its path; each synthesized
 * file (the manifest, deletion files) the meet of the shard's (the source
 * manifest) and every source file's, so that a user who cannot read one
 * of the data files cannot read a manifest that describes it.
 */
static int dataset_access(const struct sfs_index *idx, int srcfd,
			  const struct sfs_shard *sh,
			  struct sfs_dataset_view *dv)
{
	struct sfs_access meet = sh->access, a = { 0 };
	uint32_t uid = 0, gid = 0, mode = 0;
	const char *dir = NULL, *slash;
	size_t k, dlen = 0;
	int rc;

	for (k = 0; k < dv->nfiles; k++) {
		struct sfs_dataset_file *df = &dv->files[k];

		if (!df->source)
			continue;
		/* a dataset's data files share a directory, and most an
		 * owner and mode: look at the directories once for those */
		slash = strrchr(df->source, '/');
		if (!dir || df->uid != uid || df->gid != gid ||
		    df->mode != mode ||
		    (size_t)(slash ? slash - df->source : 0) != dlen ||
		    memcmp(dir, df->source, dlen)) {
			dir = df->source;
			dlen = slash ? (size_t)(slash - df->source) : 0;
			uid = df->uid;
			gid = df->gid;
			mode = df->mode;
			rc = sfs_index_access(idx, srcfd, df->source, uid, gid,
					      mode, &a);
			if (rc)
				return rc;
		}
		df->uid = a.uid;
		df->gid = a.gid;
		df->mode = a.mode;
		sfs_index_access_meet(&meet, &a);
	}
	for (k = 0; k < dv->nfiles; k++) {
		struct sfs_dataset_file *df = &dv->files[k];

		if (df->source)
			continue;
		df->uid = meet.uid;
		df->gid = meet.gid;
		df->mode = meet.mode;
	}
	return 0;
}

/*
 * The reader's dataset of the shard of its i-th file (format.h,
 * dataset_view), in worker directory wdir: every run of the reader's
 * files of that shard, in order, in one dataset.
 */
int sfs_view_add_dataset(struct builder *b, uint32_t wdir, uint32_t plan,
			 const struct sfs_plan_reader *r, size_t i,
			 const char *prefix)
{
	struct sfs_view *v = b->v;
	const struct sfs_plan *p = v->plans[plan];
	size_t shard = p->files[r->file_at + i].shard, j, n = 0, cap = 0, k;
	const struct sfs_shard *sh = &v->idx->shards[shard];
	struct sfs_dataset_view *dv = NULL;
	struct sfs_run *runs = NULL;
	uint32_t ddir, dir, node;
	int fd, rc = 0;

	for (j = i; !rc && j < r->nfiles; j++) {
		const struct sfs_plan_file *f = &p->files[r->file_at + j];

		if (f->shard != shard)
			continue;
		if (SFS_GROW(runs, cap, n + f->nruns + 1))
			rc = -ENOMEM;
		else
			memcpy(runs + n, sfs_plan_file_runs(p, f),
			       f->nruns * sizeof(*runs));
		n += f->nruns;
	}
	if (rc) {
		free(runs);
		return rc;
	}
	fd = sfs_view_open_shard(b->o->srcfd, sh, b->err);
	if (fd < 0) {
		free(runs);
		return fd;
	}
	rc = sh->format->dataset_view(b->o->srcfd, sh, fd, runs, n, &dv,
				      b->err);
	close(fd);
	free(runs);
	if (!rc && sh->access.known)
		rc = dataset_access(v->idx, b->o->srcfd, sh, dv);
	if (rc) {
		sfs_dataset_view_free(dv);
		return rc;
	}
	if (v->ndatasets == UINT32_MAX - 1 ||
	    SFS_GROW(v->datasets, b->datasets_cap, (size_t)v->ndatasets + 1)) {
		sfs_dataset_view_free(dv);
		return -ENOMEM;
	}
	v->datasets[v->ndatasets++] = dv;
	rc = dataset_name(b, sh, dv, prefix);
	if (!rc)
		rc = sfs_view_subdir(b, wdir, b->name, strlen(b->name), &ddir);
	for (k = 0; !rc && k < dv->nfiles; k++) {
		const struct sfs_dataset_file *df = &dv->files[k];
		const char *p0 = df->path, *slash;
		bool link = df->source && v->symlinks;

		dir = ddir;
		while (!rc && (slash = strchr(p0, '/'))) {
			rc = sfs_view_subdir(b, dir, p0, (size_t)(slash - p0),
					     &dir);
			p0 = slash + 1;
		}
		if (!rc)
			rc = sfs_view_add_node(
				b, dir, p0, strlen(p0),
				link ? SFS_NODE_LINK : SFS_NODE_FILE, &node);
		if (rc)
			break;
		v->nodes[node].plan = plan;
		v->nodes[node].file = r->file_at + i;
		v->nodes[node].dataset = v->ndatasets;
		v->nodes[node].dfile = (uint32_t)k;
		v->nodes[node].size =
			link ? strlen(v->idx->source) + 1 + strlen(df->source) :
			df->source ? df->size :
				     df->len;
	}
	return rc;
}
