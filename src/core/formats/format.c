#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "formats/format_i.h"
#include "shardfs/digest.h"
#include "shardfs/util.h"

/* The format table: every driver, in the order --help lists them. */
static const struct sfs_format_ops *const formats[] = {
	&sfs_format_tar,   &sfs_format_jsonl,	&sfs_format_tfrecord,
	&sfs_format_files, &sfs_format_parquet, &sfs_format_opaque,
	&sfs_format_lance,
};

#define NFORMATS (sizeof(formats) / sizeof(formats[0]))

const struct sfs_format_ops *sfs_format_by_name(const char *name)
{
	size_t i;

	for (i = 0; i < NFORMATS; i++)
		if (!strcmp(formats[i]->name, name))
			return formats[i];
	return NULL;
}

const struct sfs_format_ops *sfs_format_detect(const char *filename)
{
	const struct sfs_format_ops *best = NULL;
	size_t len = strlen(filename), best_len = 0, i, k;

	for (i = 0; i < NFORMATS; i++) {
		for (k = 0; formats[i]->suffixes && formats[i]->suffixes[k];
		     k++) {
			const char *suffix = formats[i]->suffixes[k];
			size_t n = strlen(suffix);

			if (len > n && n > best_len &&
			    !strcmp(filename + len - n, suffix)) {
				best = formats[i];
				best_len = n;
			}
		}
	}
	return best;
}

const struct sfs_format_ops *sfs_format_at(size_t i)
{
	return i < NFORMATS ? formats[i] : NULL;
}

bool sfs_format_of_files(const struct sfs_format_ops *ops)
{
	return !ops->dataset;
}

static bool concatenates(const struct sfs_format_ops *ops)
{
	return ops->concatenates;
}

/* The i-th driver keep says yes to (NULL: every one), or NULL. */
static const struct sfs_format_ops *
nth(bool (*keep)(const struct sfs_format_ops *), size_t i)
{
	size_t k;

	for (k = 0; k < NFORMATS; k++)
		if ((!keep || keep(formats[k])) && !i--)
			return formats[k];
	return NULL;
}

const struct sfs_format_ops *sfs_format_concatenating(size_t i)
{
	return nth(concatenates, i);
}

const char *sfs_format_names(bool (*keep)(const struct sfs_format_ops *),
			     size_t from, const char *last, char *buf,
			     size_t len)
{
	const struct sfs_format_ops *ops;
	size_t at = 0, i;

	buf[0] = '\0';
	for (i = from; (ops = nth(keep, i)) && at < len; i++) {
		const char *sep = i == from	   ? "" :
				  nth(keep, i + 1) ? ", " :
						     last;

		at += (size_t)snprintf(buf + at, len - at, "%s%s", sep,
				       ops->name);
	}
	return buf;
}

const char *sfs_format_concatenating_names(size_t from, const char *last,
					   char *buf, size_t len)
{
	return sfs_format_names(concatenates, from, last, buf, len);
}

const char *sfs_format_suffix_list(char *buf, size_t len)
{
	size_t at = 0, i, k;

	buf[0] = '\0';
	for (i = 0; i < NFORMATS && at < len; i++)
		for (k = 0; formats[i]->suffixes && formats[i]->suffixes[k] &&
			    at < len;
		     k++)
			at += (size_t)snprintf(buf + at, len - at, "%s%s",
					       at ? " " : "",
					       formats[i]->suffixes[k]);
	return buf;
}

int sfs_format_dataset(const struct sfs_format_ops *ops, int dirfd,
		       const char *rel, uint64_t version,
		       const struct sfs_format_ops **found, char **shard,
		       struct sfs_error *err)
{
	size_t i;
	int rc;

	*shard = NULL;
	for (i = 0; i < NFORMATS; i++) {
		if (!formats[i]->dataset || (ops && ops != formats[i]))
			continue;
		rc = formats[i]->dataset(dirfd, rel, version, shard, err);
		if (rc) {
			*found = formats[i];
			return rc;
		}
	}
	return 0;
}

size_t sfs_format_key_len(const char *path)
{
	const char *base = strrchr(path, '/');
	const char *dot;

	base = base ? base + 1 : path;
	dot = strchr(base, '.');
	return dot ? (size_t)(dot - path) : strlen(path);
}

int sfs_format_scan(const struct sfs_format_ops *ops,
		    const struct sfs_scan_in *in, struct sfs_scan *out,
		    struct sfs_error *err)
{
	memset(out, 0, sizeof(*out));
	out->max_samples = in->max_samples;
	out->bounds_fn = in->bounds_fn;
	out->bounds_arg = in->bounds_arg;
	if (in->size == 0 && !ops->allow_empty)
		return sfs_errorf(
			err, -EINVAL,
			"%s: empty file at byte 0: a %s shard holds at least one sample",
			in->path, ops->name);
	return ops->scan(in, out, err);
}

int sfs_format_whole_samples(int fd, const char *path, sfs_sample_fn fn,
			     void *arg, struct sfs_error *err)
{
	unsigned char digest[SFS_DIGEST_LEN];
	struct sfs_digest *d = sfs_digest_new();
	struct stat st;
	int rc;

	if (!d)
		return sfs_errorf(err, -ENOMEM, "%s: out of memory", path);
	if (fstat(fd, &st) < 0)
		rc = sfs_errorf(err, -EIO, "%s: %s", path, strerror(errno));
	else
		rc = sfs_digest_fd(d, fd, (uint64_t)st.st_size, path, err);
	if (!rc)
		rc = sfs_digest_final(d, digest);
	if (!rc)
		rc = fn(arg, 0, digest);
	sfs_digest_free(d);
	return rc;
}

static int scan_samples(const struct sfs_format_ops *ops, int fd,
			const char *path, struct sfs_share *share,
			sfs_sample_fn fn, void *arg, struct sfs_error *err)
{
	struct sfs_scan_in in = { .fd = fd,
				  .path = path,
				  .digest_fn = fn,
				  .digest_arg = arg,
				  .share = share };
	struct sfs_scan out = { 0 };
	struct stat st;
	int rc;

	if (fstat(fd, &st) < 0)
		return sfs_errorf(err, -EIO, "%s: %s", path, strerror(errno));
	in.size = (uint64_t)st.st_size;
	rc = ops->scan(&in, &out, err);
	free(out.bounds);
	return rc;
}

int sfs_format_scan_samples(const struct sfs_format_ops *ops, int fd,
			    const char *path, sfs_sample_fn fn, void *arg,
			    struct sfs_error *err)
{
	return scan_samples(ops, fd, path, NULL, fn, arg, err);
}

int sfs_format_samples(const struct sfs_format_ops *ops, int fd,
		       const char *path, struct sfs_share *share,
		       sfs_sample_fn fn, void *arg, struct sfs_error *err)
{
	if (share && ops->samples_threaded)
		return scan_samples(ops, fd, path, share, fn, arg, err);
	return ops->samples(fd, path, fn, arg, err);
}

int sfs_bounds_push(struct sfs_scan *out, size_t *cap, uint64_t off)
{
	uint64_t held = out->nsamples - out->bounds_passed;
	int rc;

	/* nsamples is max_samples at the last boundary of a shard of
	 * max_samples samples, past it only for a larger shard */
	if (out->max_samples && out->nsamples > out->max_samples)
		return -ENOMEM;
	if (out->bounds_fn && held == BOUNDS_PIECE) {
		rc = out->bounds_fn(out->bounds_arg, out->bounds, held);
		if (rc)
			return rc;
		out->bounds_passed += held;
		held = 0;
	}
	/* room for the boundary after this one too */
	if (SFS_GROW(out->bounds, *cap, (size_t)held + 2))
		return -ENOMEM;
	out->bounds[held] = off;
	return 0;
}

void sfs_dataset_view_free(struct sfs_dataset_view *v)
{
	size_t i;

	if (!v)
		return;
	for (i = 0; i < v->nfiles; i++) {
		free(v->files[i].path);
		free(v->files[i].bytes);
		free(v->files[i].source);
	}
	free(v->files);
	free(v->root);
	free(v);
}
