/*
 * The observer's reading of a reader's dataset directory (format.h,
 * dataset_view: a Lance dataset of the reader's rows): read back as its
 * format's library would read it, with the driver's own decoders, every
 * live row's digest the one the index gives the source row it names; and
 * its data files checked to be the source's.  A source dataset whose
 * index has no digests is digested here too, by its driver's scan.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shardfs/lance.h"
#include "shardfs/util.h"

#include "observe_i.h"

int sfs_observe_collect(void *arg, uint64_t sample, const unsigned char d[32])
{
	struct job *j = arg;

	(void)sample;
	if (SFS_GROW(j->digests, j->digests_cap, j->ndigests + 1))
		return -ENOMEM;
	memcpy(j->digests[j->ndigests++], d, SFS_DIGEST_LEN);
	return 0;
}

/*
 * Readers of a reader's dataset directory, by the format whose shards a
 * view shows as datasets of their own (format.h, dataset_view): its rows
 * as the digests the index gives their source rows, its data files, and
 * the dataset directory of a shard of that format.
 */
static const struct dataset_reader {
	const struct sfs_format_ops *format;
	int (*read)(int dirfd, const char *path,
		    const struct sfs_lance_view_reader *rd,
		    struct sfs_error *err);
	char *(*root)(const char *shard_path);
} dataset_readers[] = {
	{ &sfs_format_lance, sfs_lance_view_read, sfs_lance_root },
};

static const struct dataset_reader *
dataset_reader(const struct sfs_format_ops *ops)
{
	size_t i;

	for (i = 0;
	     ops && i < sizeof(dataset_readers) / sizeof(dataset_readers[0]);
	     i++)
		if (dataset_readers[i].format == ops)
			return &dataset_readers[i];
	return NULL;
}

static int dataset_fragment(void *arg, size_t f, uint64_t live)
{
	struct job *j = arg;

	(void)live;
	if (SFS_GROW(j->frags, j->frags_cap, j->nfrags + 1))
		return -ENOMEM;
	j->frags[j->nfrags++] = (struct dfrag){ f, j->ndigests };
	return 0;
}

static int dataset_data_file(void *arg, const char *path, uint64_t size)
{
	struct job *j = arg;
	size_t i;

	for (i = 0; i < j->ndfiles; i++)
		if (!strcmp(j->dfiles[i].path, path))
			return 0;
	if (SFS_GROW(j->dfiles, j->dfiles_cap, j->ndfiles + 1))
		return -ENOMEM;
	memset(&j->dfiles[j->ndfiles], 0, sizeof(j->dfiles[0]));
	j->dfiles[j->ndfiles].path = strdup(path);
	j->dfiles[j->ndfiles].declared = size;
	j->dfiles[j->ndfiles].fragment = j->nfrags ? j->frags[j->nfrags - 1].f :
						     0;
	return j->dfiles[j->ndfiles++].path ? 0 : -ENOMEM;
}

/* How a data file of the reader's dataset dir is shown: a symlink (its
 * target) or a regular file (its size; with verify, its SHA-256). */
static void look_at_data_file(int dirfd, struct dfile *df, bool verify,
			      struct sfs_digest *d)
{
	char rel[PATH_MAX], target[PATH_MAX];
	struct sfs_error err = { 0 };
	struct stat st;
	ssize_t n;
	int fd;

	if ((size_t)snprintf(rel, sizeof(rel), "data/%s", df->path) >=
		    sizeof(rel) ||
	    fstatat(dirfd, rel, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return;
	if (S_ISLNK(st.st_mode)) {
		n = readlinkat(dirfd, rel, target, sizeof(target) - 1);
		if (n < 0)
			return;
		target[n] = '\0';
		df->target = strdup(target);
		df->type = df->target ? S_IFLNK : 0;
		return;
	}
	if (!S_ISREG(st.st_mode))
		return;
	df->type = S_IFREG;
	df->size = (uint64_t)st.st_size;
	if (!verify)
		return;
	fd = openat(dirfd, rel, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return;
	df->hashed = !sfs_digest_fd(d, fd, df->size, rel, &err) &&
		     !sfs_digest_final(d, df->digest);
	close(fd);
}

/* A reader's dataset directory: its rows' digests, fragments, data files. */
int sfs_observe_dataset_read(struct job *j, bool verify, struct sfs_digest *d,
			     struct sfs_error *err)
{
	const struct dataset_reader *dr = dataset_reader(j->ops);
	struct sfs_lance_view_reader rd = {
		.fragment = dataset_fragment,
		.data_file = dataset_data_file,
		.row = sfs_observe_collect,
		.arg = j,
	};
	int dirfd, rc;
	size_t i;

	if (!dr)
		return sfs_errorf(
			err, -EOPNOTSUPP,
			"%s: the auditor has no reader of %s datasets; check its rows with the dataset's library",
			j->name, j->ops ? j->ops->name : "these");
	dirfd = open(j->paths[0], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return sfs_errorf(err, -EIO, "%s: %s", j->paths[0],
				  strerror(errno));
	rc = dr->read(dirfd, j->name, &rd, err);
	for (i = 0; !rc && i < j->ndfiles; i++)
		look_at_data_file(dirfd, &j->dfiles[i], verify, d);
	close(dirfd);
	return rc;
}

/* A source dataset (an index without digests): its driver's scan. */
int sfs_observe_dataset_scan(struct job *j, struct sfs_error *err)
{
	const struct sfs_shard *sh = &j->idx->shards[j->shard];
	struct sfs_scan_in in = { .path = sh->path,
				  .digest_fn = sfs_observe_collect,
				  .digest_arg = j,
				  .share = j->share };
	struct sfs_scan out = { 0 };
	struct stat st;
	int rc;

	in.dirfd = open(j->idx->source, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (in.dirfd < 0)
		return sfs_errorf(err, -EIO, "%s: %s", j->idx->source,
				  strerror(errno));
	in.fd = sfs_index_open_shard(in.dirfd, sh->path, O_RDONLY);
	if (in.fd < 0) {
		rc = sfs_errorf(err, -EIO, "%s: cannot open: %s", sh->path,
				strerror(-in.fd));
		goto out;
	}
	if (fstat(in.fd, &st) < 0) {
		rc = sfs_errorf(err, -EIO, "%s: %s", sh->path, strerror(errno));
		goto out_close;
	}
	in.size = (uint64_t)st.st_size;
	rc = sh->format->scan(&in, &out, err);
	free(out.bounds);
	if (!rc && !out.digested)
		rc = sfs_errorf(err, -EIO, "%s: its rows were not digested",
				sh->path);
out_close:
	close(in.fd);
out:
	close(in.dirfd);
	return rc;
}

void sfs_observe_hashes_free(struct sfs_observe_hashes *h)
{
	size_t i;

	for (i = 0; i < h->n; i++)
		free(h->paths[i]);
	free(h->paths);
	free(h->digests);
}

/* path's SHA-256 into out: 0, or -errno (the file cannot be read). */
static int src_hash(struct sfs_observe_hashes *h, const char *path,
		    uint64_t size, unsigned char *out)
{
	struct sfs_error err = { 0 };
	struct sfs_digest *d;
	size_t i;
	int fd, rc;

	for (i = 0; i < h->n; i++)
		if (!strcmp(h->paths[i], path)) {
			memcpy(out, h->digests[i], SFS_DIGEST_LEN);
			return 0;
		}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	d = sfs_digest_new();
	rc = d ? sfs_digest_fd(d, fd, size, path, &err) : -ENOMEM;
	if (!rc)
		rc = sfs_digest_final(d, out);
	sfs_digest_free(d);
	close(fd);
	if (rc)
		return rc;
	if (SFS_GROW(h->paths, h->cap, h->n + 1) ||
	    SFS_GROW(h->digests, h->digests_cap, h->n + 1))
		return -ENOMEM;
	h->paths[h->n] = strdup(path);
	if (!h->paths[h->n])
		return -ENOMEM;
	memcpy(h->digests[h->n++], out, SFS_DIGEST_LEN);
	return 0;
}

int sfs_observe_data_files_check(const struct job *j,
				 const struct sfs_audit_reader *r,
				 const struct sfs_index *idx, size_t s,
				 bool verify, struct sfs_observe_hashes *h,
				 size_t max_findings, struct sfs_verdict *v)
{
	const struct dataset_reader *dr = dataset_reader(j->ops);
	char *root = dr ? dr->root(idx->shards[s].path) : NULL;
	unsigned char digest[SFS_DIGEST_LEN];
	char src[PATH_MAX];
	struct stat st;
	size_t i;
	int rc = 0, n;

	if (!root)
		return dr ? -ENOMEM : 0;
	for (i = 0; !rc && i < j->ndfiles; i++) {
		const struct dfile *df = &j->dfiles[i];

		n = snprintf(src, sizeof(src), "%s/%s%sdata/%s", idx->source,
			     root, *root ? "/" : "", df->path);
		if (n < 0 || (size_t)n >= sizeof(src) || stat(src, &st) < 0)
			rc = sfs_verdict_add(
				v, max_findings, SFS_FIND_BYTES,
				"rank %u worker %u: %s/data/%s (fragment %zu's) is no data file of the source's dataset %s: %s",
				r->rank, r->worker, j->name, df->path,
				df->fragment, idx->shards[s].path,
				n < 0 || (size_t)n >= sizeof(src) ?
					"path too long" :
					strerror(errno));
		else if (df->declared && df->declared != (uint64_t)st.st_size)
			rc = sfs_verdict_add(
				v, max_findings, SFS_FIND_BYTES,
				"rank %u worker %u: %s: fragment %zu's data file %s is %llu bytes by its manifest, the source's %s holds %llu",
				r->rank, r->worker, j->name, df->fragment,
				df->path, (unsigned long long)df->declared, src,
				(unsigned long long)st.st_size);
		else if (!df->type)
			rc = sfs_verdict_add(
				v, max_findings, SFS_FIND_BYTES,
				"rank %u worker %u: %s/data/%s (fragment %zu's) is missing or neither a symlink nor a regular file",
				r->rank, r->worker, j->name, df->path,
				df->fragment);
		else if (df->type == S_IFLNK && strcmp(df->target, src))
			rc = sfs_verdict_add(
				v, max_findings, SFS_FIND_BYTES,
				"rank %u worker %u: %s/data/%s is a symlink to %s, not to the source's %s",
				r->rank, r->worker, j->name, df->path,
				df->target, src);
		else if (df->type == S_IFREG &&
			 df->size != (uint64_t)st.st_size)
			rc = sfs_verdict_add(
				v, max_findings, SFS_FIND_BYTES,
				"rank %u worker %u: %s/data/%s holds %llu bytes, the source's %s %llu",
				r->rank, r->worker, j->name, df->path,
				(unsigned long long)df->size, src,
				(unsigned long long)st.st_size);
		else if (df->type == S_IFREG && verify &&
			 (!df->hashed ||
			  src_hash(h, src, (uint64_t)st.st_size, digest) ||
			  memcmp(digest, df->digest, SFS_DIGEST_LEN)))
			rc = sfs_verdict_add(
				v, max_findings, SFS_FIND_BYTES,
				"rank %u worker %u: %s/data/%s: its bytes are not the source's %s (SHA-256)",
				r->rank, r->worker, j->name, df->path, src);
	}
	free(root);
	return rc;
}
