/*
 * The indexer's walk of its source (indexer_i.h): the shards to index, in
 * path order, grouped and cut to a part as the options say.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shardfs/util.h"

#include "indexer_i.h"

void sfs_indexer_item_clear(struct item *it)
{
	size_t i;

	free(it->path);
	for (i = 0; i < it->nmembers; i++)
		free(it->members[i].path);
	free(it->members);
	free(it->scan.bounds);
	free(it->sdig);
	free(it->msg);
}

void sfs_indexer_walk_clear(struct walk *w)
{
	size_t i;

	for (i = 0; i < w->n; i++)
		sfs_indexer_item_clear(&w->items[i]);
	free(w->items);
}

static int walk_add(struct walk *w, const char *path, const struct stat *st,
		    const struct sfs_format_ops *ops)
{
	struct item *it;

	if (SFS_GROW(w->items, w->cap, w->n + 1))
		return -ENOMEM;
	it = &w->items[w->n];
	memset(it, 0, sizeof(*it));
	it->path = strdup(path);
	if (!it->path)
		return -ENOMEM;
	it->size = (uint64_t)st->st_size;
	it->mtime_ns = sfs_mtime_ns(st);
	it->ops = ops;
	w->n++;
	return 0;
}

/* A directory that is one dataset (format.h, dataset) is one item:
 * returns 1 then, 0 for any other directory, or a negative errno. */
static int walk_dataset(struct walk *w, int srcfd, const char *rel,
			const struct sfs_indexer_opts *o, struct sfs_error *err)
{
	const struct sfs_format_ops *ops = NULL;
	struct stat st;
	char *shard;
	int rc = sfs_format_dataset(o->format, srcfd, rel, o->version, &ops,
				    &shard, err);

	if (rc <= 0)
		return rc;
	if (fstatat(srcfd, shard, &st, AT_SYMLINK_NOFOLLOW) < 0)
		rc = sfs_errorf(err, -errno, "%s/%s: %s", o->source, shard,
				strerror(errno));
	else if (walk_add(w, shard, &st, ops))
		rc = sfs_errorf(err, -ENOMEM, "out of memory");
	free(shard);
	return rc ? rc : 1;
}

static int walk_dir(struct walk *w, int srcfd, const char *rel,
		    const struct sfs_indexer_opts *o, struct sfs_error *err)
{
	char path[PATH_MAX];
	struct dirent *de;
	int fd, rc = walk_dataset(w, srcfd, rel, o, err);
	DIR *d;

	if (rc)
		return rc < 0 ? rc : 0;

	/* below the source with no symlink on the way, as shards are
	 * opened: a directory swapped for a symlink is not walked */
	fd = *rel ? sfs_index_open_shard(srcfd, rel, O_RDONLY | O_DIRECTORY) :
		    dup(srcfd);
	if (fd < 0 && *rel)
		errno = -fd;
	if (fd < 0 || !(d = fdopendir(fd))) {
		rc = -errno;
		if (fd >= 0)
			close(fd);
		return sfs_errorf(err, rc,
				  "%s/%s: cannot read the directory: %s",
				  o->source, rel, strerror(-rc));
	}
	while ((de = readdir(d))) {
		const struct sfs_format_ops *ops;
		struct stat st;

		if (de->d_name[0] == '.')
			continue;
		if ((size_t)snprintf(path, sizeof(path), "%s%s%s", rel,
				     *rel ? "/" : "",
				     de->d_name) >= sizeof(path)) {
			rc = sfs_errorf(err, -ENAMETOOLONG,
					"%s/%s/%s: path too long", o->source,
					rel, de->d_name);
			break;
		}
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) <
		    0) {
			rc = sfs_errorf(err, -errno, "%s/%s: %s", o->source,
					path, strerror(errno));
			break;
		}
		if (S_ISDIR(st.st_mode)) {
			rc = walk_dir(w, srcfd, path, o, err);
			if (rc)
				break;
			continue;
		}
		ops = o->format ? o->format : sfs_format_detect(de->d_name);
		if (ops && ops->dataset)
			ops = NULL; /* its shards are directories */
		if (!S_ISREG(st.st_mode) || !ops) {
			w->ignored++;
			continue;
		}
		rc = walk_add(w, path, &st, ops);
		if (rc) {
			sfs_errorf(err, rc, "out of memory");
			break;
		}
	}
	closedir(d);
	return rc;
}

static int item_cmp(const void *a, const void *b)
{
	return strcmp(((const struct item *)a)->path,
		      ((const struct item *)b)->path);
}

/* Fold consecutive items of a tree format (`files`) with equal keys into
 * the first one. */
static int group_files(struct walk *w)
{
	size_t i, out = 0;

	for (i = 0; i < w->n; i++) {
		struct item *head = out ? &w->items[out - 1] : NULL;
		struct item *it = &w->items[i];
		size_t k = sfs_format_key_len(it->path);

		if (head && it->ops->tree && head->ops == it->ops &&
		    sfs_format_key_len(head->path) == k &&
		    !strncmp(head->path, it->path, k)) {
			if (SFS_GROW(head->members, head->members_cap,
				     head->nmembers + 1))
				return -ENOMEM;
			head->members[head->nmembers++] = (struct sfs_member){
				.path = it->path,
				.size = it->size,
				.mtime_ns = it->mtime_ns,
			};
			continue;
		}
		w->items[out++] = *it;
	}
	w->n = out;
	return 0;
}

/*
 * Keep the items of one part: positions part, part + nparts, ... of the
 * sorted (and grouped) list, so that every part holds shards from all over
 * the source and the parts' sizes are alike.
 */
static void keep_part(struct walk *w, uint32_t part, uint32_t nparts)
{
	size_t i, out = 0;

	for (i = 0; i < w->n; i++) {
		if (i % nparts == part)
			w->items[out++] = w->items[i];
		else
			sfs_indexer_item_clear(&w->items[i]);
	}
	w->n = out;
}

int sfs_indexer_walk(struct walk *w, int srcfd,
		     const struct sfs_indexer_opts *o, struct sfs_error *err)
{
	int rc = walk_dir(w, srcfd, "", o, err);

	if (rc)
		return rc;
	qsort(w->items, w->n, sizeof(*w->items), item_cmp);
	if (group_files(w))
		return sfs_errorf(err, -ENOMEM, "out of memory");
	if (o->nparts)
		keep_part(w, o->part, o->nparts);
	return 0;
}
