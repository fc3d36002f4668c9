/*
 * A Lance dataset at one version: its manifest decoded, its data files
 * checked, its deletion files read and its live rows counted; or, for a
 * reader's view of a dataset the index counted so, only its manifest
 * decoded, the counts taken from it (sfs_lance_open_view).  Every file
 * is opened beneath the directory given (sfs_open_beneath: no symlink,
 * no "..").
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "formats/format_i.h"
#include "formats/lance/lance_i.h"
#include "shardfs/lance.h"
#include "shardfs/util.h"

void sfs_lance_free(struct sfs_lance_dataset *ds)
{
	if (!ds)
		return;
	free(ds->manifest_path);
	free(ds->buf);
	sfs_lance_manifest_free(ds->m);
	free(ds);
}

char *sfs_lance_root(const char *manifest_path)
{
	const char *v = strrchr(manifest_path, '/');
	size_t n;

	if (!v)
		return NULL;
	n = (size_t)(v - manifest_path);
	if (n < strlen(SFS_LANCE_VERSIONS) ||
	    strncmp(v - strlen(SFS_LANCE_VERSIONS), SFS_LANCE_VERSIONS,
		    strlen(SFS_LANCE_VERSIONS)))
		return NULL;
	n -= strlen(SFS_LANCE_VERSIONS);
	if (n && manifest_path[n - 1] != '/')
		return NULL;
	return strndup(manifest_path, n ? n - 1 : 0);
}

int sfs_lance_read_whole(int fd, const char *path, uint64_t max,
			 unsigned char **buf, size_t *len,
			 struct sfs_error *err)
{
	struct stat st;
	ssize_t got;

	*buf = NULL;
	*len = 0;
	if (fstat(fd, &st) < 0)
		return sfs_errorf(err, -EIO, "%s: %s", path, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return sfs_errorf(err, -EINVAL, "%s: not a regular file", path);
	if ((uint64_t)st.st_size > max)
		return sfs_errorf(
			err, -EINVAL,
			"%s: %llu bytes, more than the %llu this reader takes: not a file Lance writes this large",
			path, (unsigned long long)st.st_size,
			(unsigned long long)max);
	*buf = malloc((size_t)st.st_size + 1);
	if (!*buf)
		return sfs_errorf(err, -ENOMEM, "%s: out of memory", path);
	got = sfs_pread_full(fd, *buf, (size_t)st.st_size, 0);
	if (got != st.st_size) {
		free(*buf);
		*buf = NULL;
		return sfs_errorf(err, -EIO, "%s: read failed at byte %lld: %s",
				  path, got < 0 ? 0LL : (long long)got,
				  got < 0 ? strerror((int)-got) :
					    "the file shrank while read");
	}
	*len = (size_t)st.st_size;
	return 0;
}

/* root joined with rel ("" root: rel). */
static char *join(const char *root, const char *rel)
{
	char *p;

	if (asprintf(&p, "%s%s%s", root, *root ? "/" : "", rel) < 0)
		return NULL;
	return p;
}

/* A footer that is not what the Lance file format says: -EINVAL. */
static int bad_footer(struct sfs_error *err, const char *path, uint64_t at,
		      const char *what)
{
	return sfs_errorf(
		err, -EINVAL,
		"%s: byte %llu: %s: not a Lance data file, or cut short; copy the dataset again",
		path, (unsigned long long)at, what);
}

/*
 * The rows the Lance data file fd (named path, size bytes) holds, as its
 * footer says.  A file of format 2.x (2.0 says version 0.3, the later
 * ones 2.1, 2.2, ...) ends with 40 bytes: the positions of
 * its column metadata, their offsets, and the table of global buffers
 * (u64 each), how many global buffers and columns (u32), its major and
 * minor version (u16) and "LANC"; global buffer 0 (a u64 position and a
 * u64 size in that table) is the protobuf FileDescriptor, whose field 2 is
 * the row count.  Only the bytes needed are read: a few preads, nothing
 * sized from the file.  Returns 1 and *rows; 0 for a file of the legacy
 * format (0.1, 0.2), whose footer does not say; -EINVAL (the message names the
 * file and the byte) or -EIO.
 */
static int data_file_rows(int fd, const char *path, uint64_t size,
			  uint64_t *rows, struct sfs_error *err)
{
	unsigned char t[40], b[32];
	uint64_t gbo, at, end, v;
	struct sfs_pb_reader r;
	struct sfs_pb_field f;
	size_t n;
	int rc;

	if (size < 16 || sfs_pread_full(fd, t + 24, 16, size - 16) != 16)
		return bad_footer(err, path, size, "no Lance footer");
	if (memcmp(t + 36, "LANC", 4))
		return bad_footer(err, path, size - 4,
				  "no LANC magic at its end");
	/* the legacy format is 0.1 and 0.2; 2.0 says 0.3, later ones 2.x */
	if ((t[32] | t[33] << 8) == 0 && (t[34] | t[35] << 8) < 3)
		return 0;
	if (size < 40 + 16 || sfs_pread_full(fd, t, 24, size - 40) != 24)
		return bad_footer(err, path, 0, "too short for its footer");
	gbo = sfs_le64(t + 16);
	if (sfs_le32(t + 24) < 1 || gbo > size - 40 - 16)
		return bad_footer(
			err, path, size - 24,
			"its table of global buffers is not inside it");
	if (sfs_pread_full(fd, b, 16, gbo) != 16)
		return sfs_errorf(err, -EIO, "%s: read failed at byte %llu",
				  path, (unsigned long long)gbo);
	at = sfs_le64(b);
	v = sfs_le64(b + 8);
	if (at > size - 40 || v > size - 40 - at)
		return bad_footer(err, path, gbo,
				  "its file descriptor is not inside it");
	/* the FileDescriptor, field by field: skip the schema (1) */
	for (end = at + v; at < end; at += r.pos) {
		n = end - at < sizeof(b) ? (size_t)(end - at) : sizeof(b);
		if (sfs_pread_full(fd, b, n, at) != (ssize_t)n)
			return sfs_errorf(err, -EIO,
					  "%s: read failed at byte %llu", path,
					  (unsigned long long)at);
		sfs_pb_init(&r, b, n, at, path, "FileDescriptor", err);
		rc = sfs_pb_next(&r, &f);
		if (rc < 0)
			return rc;
		if (f.number == 2 && f.wire == SFS_PB_VARINT)
			return sfs_pb_varint(&r, rows) ? -EINVAL : 1;
		if (f.wire == SFS_PB_VARINT) {
			rc = sfs_pb_varint(&r, &v);
		} else if (f.wire == SFS_PB_LEN) {
			rc = sfs_pb_varint(&r, &v);
			if (!rc && v > end - at - r.pos)
				return bad_footer(
					err, path, at,
					"a field of its file descriptor runs past it");
			at += v;
		} else {
			at += f.wire == SFS_PB_I64 ? 8 : 4;
		}
		if (rc)
			return rc;
	}
	return bad_footer(err, path, gbo,
			  "its file descriptor does not say how many rows");
}

/*
 * Whether data file fd (df of fragment fr, at path, size bytes) holds the
 * rows the manifest mpath claims for the fragment: what its footer says,
 * or for a legacy file, at most 8 a byte (its columns store at least a
 * bit a row).  A manifest claiming more rows than its data files hold
 * would have every later step (the row digests of the index, a reader's
 * deletion bitmap) sized from the claim.  Returns 0, -EINVAL or -EIO.
 */
static int check_rows(int fd, const char *mpath,
		      const struct sfs_lance_fragment *fr,
		      const struct sfs_lance_data_file *df, const char *path,
		      uint64_t size, struct sfs_error *err)
{
	uint64_t rows = 0;
	int rc = data_file_rows(fd, path, size, &rows, err);

	if (rc < 0)
		return rc;
	if (rc == 1 && rows != fr->physical_rows)
		return sfs_errorf(
			err, -EINVAL,
			"%s: byte %llu: fragment %llu claims %llu rows (physical_rows), its data file %s holds %llu (its footer): the manifest is damaged or forged; restore it from the dataset's writer, or index another version",
			mpath, (unsigned long long)df->at,
			(unsigned long long)fr->id,
			(unsigned long long)fr->physical_rows, path,
			(unsigned long long)rows);
	if (rc == 0 && fr->physical_rows / 8 > size)
		return sfs_errorf(
			err, -EINVAL,
			"%s: byte %llu: fragment %llu claims %llu rows (physical_rows), more than its data file %s of %llu bytes can hold (a legacy Lance file stores at least a bit a row): the manifest is damaged or forged; restore it from the dataset's writer, or index another version",
			mpath, (unsigned long long)df->at,
			(unsigned long long)fr->id,
			(unsigned long long)fr->physical_rows, path,
			(unsigned long long)size);
	return 0;
}

int sfs_lance_check_data_file(int dirfd, const char *root, const char *mpath,
			      const struct sfs_lance_fragment *fr,
			      const struct sfs_lance_data_file *df,
			      struct stat *out, struct sfs_error *err)
{
	char *rel, *path;
	struct stat st;
	int fd, rc = 0;

	if (asprintf(&rel, "data/%s", df->path) < 0)
		return sfs_errorf(err, -ENOMEM, "out of memory");
	path = join(root, rel);
	free(rel);
	if (!path)
		return sfs_errorf(err, -ENOMEM, "out of memory");
	fd = sfs_open_beneath(dirfd, path, O_RDONLY | O_NONBLOCK, 0);
	if (fd < 0) {
		rc = sfs_errorf(
			err, -EINVAL,
			"%s: byte %llu: fragment %llu's data file %s %s: the dataset is incomplete (copied in part, or cleaned up under this version); copy it whole, or index its newest version",
			mpath, (unsigned long long)df->at,
			(unsigned long long)fr->id, path,
			fd == -ENOENT ? "is missing" :
			fd == -ELOOP || fd == -EXDEV ?
					"is a symlink or leaves the dataset" :
					strerror(-fd));
		goto out;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		rc = sfs_errorf(
			err, -EINVAL,
			"%s: byte %llu: fragment %llu's data file %s is not a regular file; copy the dataset whole",
			mpath, (unsigned long long)df->at,
			(unsigned long long)fr->id, path);
	else if (df->size && (uint64_t)st.st_size != df->size)
		rc = sfs_errorf(
			err, -EINVAL,
			"%s: byte %llu: fragment %llu's data file %s holds %llu bytes, the manifest says %llu: it was changed or cut short; copy the dataset again",
			mpath, (unsigned long long)df->at,
			(unsigned long long)fr->id, path,
			(unsigned long long)st.st_size,
			(unsigned long long)df->size);
	else
		rc = check_rows(fd, mpath, fr, df, path, (uint64_t)st.st_size,
				err);
	if (!rc && out)
		*out = st;
	close(fd);
out:
	free(path);
	return rc;
}

/* Read fragment fr's deletion file and count (and pass to fn) its runs. */
static int read_deletion(int dirfd, const char *root, const char *mpath,
			 const struct sfs_lance_fragment *fr,
			 sfs_lance_deleted_fn fn, void *arg, uint64_t *deleted,
			 struct sfs_error *err)
{
	char *rel = sfs_lance_deletion_path(fr), *path;
	unsigned char *buf = NULL;
	size_t len;
	int fd, rc;

	path = rel ? join(root, rel) : NULL;
	free(rel);
	if (!path)
		return sfs_errorf(err, -ENOMEM, "out of memory");
	fd = sfs_open_beneath(dirfd, path, O_RDONLY | O_NONBLOCK, 0);
	if (fd < 0) {
		rc = sfs_errorf(
			err, -EINVAL,
			"%s: byte %llu: fragment %llu's deletion file %s %s: the dataset is incomplete (copied in part, or cleaned up under this version); copy it whole, or index its newest version",
			mpath, (unsigned long long)fr->deletion.at,
			(unsigned long long)fr->id, path,
			fd == -ENOENT ? "is missing" :
			fd == -ELOOP || fd == -EXDEV ?
					"is a symlink or leaves the dataset" :
					strerror(-fd));
		goto out;
	}
	rc = sfs_lance_read_whole(fd, path, SFS_LANCE_DELETION_MAX, &buf, &len,
				  err);
	close(fd);
	if (!rc)
		rc = sfs_lance_deletion_parse(buf, len, (int)fr->deletion.type,
					      path, fr->physical_rows, fn, arg,
					      deleted, err);
	if (!rc && fr->deletion.num_deleted &&
	    *deleted != fr->deletion.num_deleted)
		rc = sfs_errorf(
			err, -EINVAL,
			"%s: byte %llu: fragment %llu's deletion file %s marks %llu row%s deleted, the manifest says %llu: one of them was replaced; copy the dataset again",
			mpath, (unsigned long long)fr->deletion.at,
			(unsigned long long)fr->id, path,
			(unsigned long long)*deleted, *deleted == 1 ? "" : "s",
			(unsigned long long)fr->deletion.num_deleted);
	free(buf);
out:
	free(path);
	return rc;
}

int sfs_lance_open_at(int dirfd, const char *manifest_path, int fd,
		      enum sfs_lance_open_how how,
		      struct sfs_lance_dataset **out, struct sfs_error *err)
{
	struct sfs_lance_dataset *ds;
	char *root = sfs_lance_root(manifest_path);
	size_t i, k;
	int own = -1, rc;

	*out = NULL;
	if (!root)
		return sfs_errorf(
			err, -EINVAL,
			"%s: not a manifest of a Lance dataset (<dataset>/%s/<version>.manifest)",
			manifest_path, SFS_LANCE_VERSIONS);
	ds = calloc(1, sizeof(*ds));
	if (!ds || !(ds->manifest_path = strdup(manifest_path))) {
		rc = sfs_errorf(err, -ENOMEM, "out of memory");
		goto out;
	}
	if (fd < 0) {
		own = sfs_open_beneath(dirfd, manifest_path,
				       O_RDONLY | O_NONBLOCK, 0);
		if (own < 0) {
			rc = sfs_errorf(err, -EIO, "%s: cannot open: %s",
					manifest_path, strerror(-own));
			goto out;
		}
		fd = own;
	}
	rc = sfs_lance_read_whole(fd, manifest_path, SFS_LANCE_MANIFEST_MAX,
				  &ds->buf, &ds->len, err);
	if (!rc)
		rc = sfs_lance_manifest_decode(ds->buf, ds->len, manifest_path,
					       how == SFS_LANCE_OPEN_VIEW,
					       &ds->m, err);
	for (i = 0; !rc && i < ds->m->nfragments; i++) {
		struct sfs_lance_fragment *fr = &ds->m->fragments[i];

		for (k = 0; how == SFS_LANCE_OPEN_ALL && !rc && k < fr->nfiles;
		     k++)
			rc = sfs_lance_check_data_file(dirfd, root,
						       manifest_path, fr,
						       &fr->files[k], NULL,
						       err);
		/* a view trusts the count the index's open checked against
		 * the file; a manifest without one (0) is read */
		if (!rc && how == SFS_LANCE_OPEN_VIEW && fr->deletion.present &&
		    fr->deletion.num_deleted)
			fr->deleted = fr->deletion.num_deleted;
		else if (!rc && fr->deletion.present)
			rc = read_deletion(dirfd, root, manifest_path, fr, NULL,
					   NULL, &fr->deleted, err);
		if (!rc)
			ds->rows += fr->physical_rows - fr->deleted;
	}
	if (!rc) {
		*out = ds;
		ds = NULL;
	}
out:
	if (own >= 0)
		close(own);
	free(root);
	sfs_lance_free(ds);
	return rc;
}

int sfs_lance_open(int dirfd, const char *manifest_path, int fd,
		   struct sfs_lance_dataset **out, struct sfs_error *err)
{
	return sfs_lance_open_at(dirfd, manifest_path, fd, SFS_LANCE_OPEN_ALL,
				 out, err);
}

int sfs_lance_open_view(int dirfd, const char *manifest_path, int fd,
			struct sfs_lance_dataset **out, struct sfs_error *err)
{
	return sfs_lance_open_at(dirfd, manifest_path, fd, SFS_LANCE_OPEN_VIEW,
				 out, err);
}

/* Turns deleted runs into the live runs between them. */
struct live {
	uint64_t next; /* first row not yet reported */
	sfs_lance_deleted_fn fn;
	void *arg;
};

static int live_gap(void *arg, uint64_t first, uint64_t count)
{
	struct live *l = arg;
	int rc = 0;

	if (first > l->next)
		rc = l->fn(l->arg, l->next, first - l->next);
	l->next = first + count;
	return rc;
}

int sfs_lance_live_runs(int dirfd, const struct sfs_lance_dataset *ds, size_t f,
			sfs_lance_deleted_fn fn, void *arg,
			struct sfs_error *err)
{
	const struct sfs_lance_fragment *fr = &ds->m->fragments[f];
	struct live l = { .fn = fn, .arg = arg };
	char *root = sfs_lance_root(ds->manifest_path);
	uint64_t deleted;
	int rc = 0;

	if (!root)
		return sfs_errorf(err, -ENOMEM, "out of memory");
	if (fr->deletion.present)
		rc = read_deletion(dirfd, root, ds->manifest_path, fr, live_gap,
				   &l, &deleted, err);
	/* the rows of the fragments after f were numbered with the count
	 * ds was opened with */
	if (!rc && fr->deletion.present && deleted != fr->deleted)
		rc = sfs_errorf(
			err, -ESTALE,
			"%s: byte %llu: fragment %llu's deletion file marks %llu row%s deleted, %llu when the dataset was opened: it was replaced; copy the dataset again, and rebuild the index with shardfs-index",
			ds->manifest_path, (unsigned long long)fr->deletion.at,
			(unsigned long long)fr->id, (unsigned long long)deleted,
			deleted == 1 ? "" : "s",
			(unsigned long long)fr->deleted);
	if (!rc && l.next < fr->physical_rows)
		rc = fn(arg, l.next, fr->physical_rows - l.next);
	free(root);
	return rc;
}
