/*
 * Saving an index (index.h): every file through a temporary name of this
 * run's own, fsync'd and renamed; the tables first, named after their
 * checksums, the manifest last.  A build's spilled digest table is
 * hashed as it was made (spill.h), and its spill file, when it holds the
 * table as it is to be, is given the table's name rather than copied.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "index_i.h"
#include "shardfs/spill.h"
#include "shardfs/util.h"

/* The spill's digest file leaves room for the header a table has. */
_Static_assert(SFS_SPILL_HEAD == SFS_TABLE_HEADER,
	       "the spill's room for a header is a table's header");

/* A file being written under a temporary name of this run's own. */
struct temp {
	int fd;
	char path[PATH_MAX];
};

/* Name t dir/.{stem}PID-RANDOM.tmp, a new RANDOM each try. */
static int temp_name(const char *dir, const char *stem, unsigned tries,
		     struct temp *t, struct sfs_error *err)
{
	uint32_t r;

	if ((size_t)getrandom(&r, sizeof(r), 0) != sizeof(r))
		r = (uint32_t)time(NULL) ^ tries;
	if ((size_t)snprintf(t->path, sizeof(t->path), "%s/.%s%ld-%08x.tmp",
			     dir, stem, (long)getpid(), r) >= sizeof(t->path))
		return sfs_errorf(err, -ENAMETOOLONG, "%s: path too long", dir);
	return 0;
}

/*
 * Create dir/.{stem}PID-RANDOM.tmp (O_EXCL: a concurrent run, even on
 * another host of a shared file system, gets another name).
 */
static int temp_open(const char *dir, const char *stem, struct temp *t,
		     struct sfs_error *err)
{
	unsigned tries;
	int rc;

	for (tries = 0; tries < 16; tries++) {
		rc = temp_name(dir, stem, tries, t, err);
		if (rc)
			return rc;
		t->fd = open(t->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
			     0644);
		if (t->fd >= 0)
			return 0;
		if (errno != EEXIST)
			break;
	}
	return sfs_errorf(
		err, -errno,
		"%s: cannot write the index: %s; if the source is read-only, put the index elsewhere with --out DIR",
		t->path, strerror(errno));
}

/*
 * Give the file open as fd, which has no name (O_TMPFILE), a temporary
 * name of this run's own in dir, as temp_open would create it (linkat
 * fails on a name that is there), t->fd a descriptor of its own.
 * Returns 0, or -errno (no /proc, another file system...), no message.
 */
static int temp_link(const char *dir, const char *stem, int fd, struct temp *t)
{
	char proc[64];
	unsigned tries;

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	for (tries = 0; tries < 16; tries++) {
		if (temp_name(dir, stem, tries, t, NULL))
			return -ENAMETOOLONG;
		if (!linkat(AT_FDCWD, proc, AT_FDCWD, t->path,
			    AT_SYMLINK_FOLLOW))
			break;
		if (errno != EEXIST)
			return -errno;
	}
	if (tries == 16)
		return -EEXIST;
	t->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (t->fd < 0) {
		int rc = -errno;

		unlink(t->path);
		return rc;
	}
	return 0;
}

/* Close and remove t after an error rc, which is returned. */
static int temp_abort(struct temp *t, int rc)
{
	close(t->fd);
	unlink(t->path);
	return rc;
}

/* Finish t: fsync, close and rename it to dir/name (removed on error). */
static int temp_commit(struct temp *t, const char *dir, const char *name,
		       struct sfs_error *err)
{
	char dst[PATH_MAX];
	int rc = 0;

	if ((size_t)snprintf(dst, sizeof(dst), "%s/%s", dir, name) >=
	    sizeof(dst))
		rc = -ENAMETOOLONG;
	if (!rc && fsync(t->fd) < 0)
		rc = -errno;
	if (close(t->fd) < 0 && !rc)
		rc = -errno;
	if (!rc && rename(t->path, dst) < 0)
		rc = -errno;
	if (rc) {
		unlink(t->path);
		return sfs_errorf(err, rc, "%s/%s: cannot write the index: %s",
				  dir, name, strerror(-rc));
	}
	return 0;
}

static int write_failed(const struct temp *t, int rc, struct sfs_error *err)
{
	return sfs_errorf(
		err, rc,
		"%s: cannot write the index: %s; free space there or put the index elsewhere with --out DIR",
		t->path, strerror(-rc));
}

/* Write bufs to dir/name through a temporary file, fsync, rename. */
static int write_atomic(const char *dir, const char *name, const void *head,
			size_t head_len, const void *body, size_t body_len,
			struct sfs_error *err)
{
	char stem[NAME_MAX];
	struct temp t;
	int rc;

	snprintf(stem, sizeof(stem), "%s.", name);
	rc = temp_open(dir, stem, &t, err);
	if (rc)
		return rc;
	rc = sfs_write_full(t.fd, head, head_len);
	if (!rc)
		rc = sfs_write_full(t.fd, body, body_len);
	if (rc)
		return temp_abort(&t, write_failed(&t, rc, err));
	return temp_commit(&t, dir, name, err);
}

/* Remove tables of kind k other than keep (left by earlier runs). */
static void remove_old_tables(const char *dir, const struct sfs_table_kind *k,
			      const char *keep)
{
	struct dirent *de;
	DIR *d = opendir(dir);

	if (!d)
		return;
	while ((de = readdir(d))) {
		size_t n = strlen(de->d_name);

		if (strncmp(de->d_name, k->prefix, strlen(k->prefix)) ||
		    n < strlen(SFS_TABLE_SUFFIX) ||
		    strcmp(de->d_name + n - strlen(SFS_TABLE_SUFFIX),
			   SFS_TABLE_SUFFIX) ||
		    !strcmp(de->d_name, keep))
			continue;
		unlinkat(dirfd(d), de->d_name, 0);
	}
	closedir(d);
}

/*
 * A table on its way to its file, under a temporary name: the header's
 * place first, then the payload, hashed as it is written unless its sum
 * is known already (summed: a spilled digest table's, taken as it was
 * made) (and, for the boundary table, its blocks hashed too: blocks),
 * then the header.
 */
struct table_out {
	const struct sfs_table_kind *k;
	struct temp t;
	bool open; /* t is still to be committed or removed */
	struct sfs_digest *d;
	bool summed; /* sum is the payload's SHA-256: d is not fed */
	unsigned char sum[SFS_DIGEST_LEN];
	uint64_t bytes;
	struct sfs_block_sums *blocks;
	struct sfs_error *err;
};

static int table_put(void *arg, const void *buf, size_t len)
{
	struct table_out *to = arg;
	int rc;

	if (!to->summed && sfs_digest_update(to->d, buf, len))
		return sfs_errorf(to->err, -EIO, "%s: SHA-256 failed",
				  to->t.path);
	rc = sfs_write_full(to->t.fd, buf, len);
	if (rc)
		return write_failed(&to->t, rc, to->err);
	to->bytes += len;
	return to->blocks ? sfs_block_sums_add(to->blocks, buf, len) : 0;
}

/* The writer's block sums go to the blocks file as they come. */
static int put_sums(struct sfs_block_sums *bs, void *arg)
{
	return table_put(arg, bs->sums, bs->n * SFS_DIGEST_LEN);
}

static int table_open(const char *dir, const struct sfs_table_kind *k,
		      struct table_out *to, struct sfs_error *err)
{
	unsigned char head[SFS_TABLE_HEADER] = { 0 };
	int rc;

	to->k = k;
	to->err = err;
	to->d = sfs_digest_new();
	if (!to->d)
		return sfs_errorf(err, -ENOMEM, "out of memory");
	rc = temp_open(dir, k->prefix, &to->t, err);
	if (rc)
		return rc;
	to->open = true;
	rc = sfs_write_full(to->t.fd, head, sizeof(head));
	return rc ? write_failed(&to->t, rc, err) : 0;
}

/*
 * The spill's digest file holds the table's payload after room for its
 * header (sfs_spill_table_fd), and its SHA-256 is known (to->summed): it
 * becomes the table, under a temporary name, nothing copied.  Returns 0,
 * or -errno when it cannot (the table is then written as a copy).
 */
static int table_adopt(const char *dir, const struct sfs_table_kind *k,
		       struct sfs_spill *spill, struct table_out *to,
		       struct sfs_error *err)
{
	int fd = sfs_spill_table_fd(spill), rc;

	if (fd < 0 || !to->summed)
		return -ENOENT;
	rc = temp_link(dir, k->prefix, fd, &to->t);
	if (rc)
		return rc;
	to->k = k;
	to->err = err;
	to->open = true;
	to->bytes = sfs_spill_count(spill, true) * k->elem;
	return 0;
}

/* Remove the temporary file of to if it is still there; free to. */
static void table_out_free(struct table_out *to)
{
	if (to->open)
		temp_abort(&to->t, 0);
	to->open = false;
	sfs_digest_free(to->d);
	to->d = NULL;
}

/*
 * The tables a save committed under names that were not there before: a
 * save that fails after them removes them again, so that a full disk
 * leaves no table that no manifest names.  (A table already there, under
 * its checksum's name, is an earlier manifest's: it stays.)
 */
struct made {
	char names[3][64];
	size_t n;
};

/* Remove the tables of m from dir. */
static void made_remove(const char *dir, const struct made *m)
{
	char path[PATH_MAX];
	size_t i;

	for (i = 0; i < m->n; i++)
		if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir,
				     m->names[i]) < sizeof(path))
			unlink(path);
}

/*
 * Finish a table of count entries: its header, then its name after its
 * checksum, in dir, noted in made when new.  *entry gets its manifest
 * entry, name its file name.
 */
static int table_close(const char *dir, struct table_out *to, uint64_t count,
		       json_t **entry, char name[64], struct made *made)
{
	unsigned char head[SFS_TABLE_HEADER] = { 0 }, sum[SFS_DIGEST_LEN];
	const struct sfs_table_kind *k = to->k;
	char hex[SFS_DIGEST_HEX], dst[PATH_MAX];
	bool fresh = false;
	size_t i;
	int rc;

	if (to->bytes != count * k->elem)
		return sfs_errorf(
			to->err, -EIO,
			"%s: %llu bytes of the %s written, %llu expected; a bug: report it",
			to->t.path, (unsigned long long)to->bytes, k->what,
			(unsigned long long)(count * k->elem));
	if (to->summed)
		memcpy(sum, to->sum, SFS_DIGEST_LEN);
	else if (sfs_digest_final(to->d, sum))
		return sfs_errorf(to->err, -EIO, "%s: SHA-256 failed",
				  to->t.path);
	memcpy(head, k->magic, 8);
	head[8] = SFS_INDEX_VERSION;
	for (i = 0; i < 8; i++)
		head[16 + i] = (unsigned char)(count >> (8 * i));
	memcpy(head + 24, sum, SFS_DIGEST_LEN);
	sfs_digest_hex(sum, hex);
	snprintf(name, 64, "%s%.16s%s", k->prefix, hex, SFS_TABLE_SUFFIX);
	rc = lseek(to->t.fd, 0, SEEK_SET) < 0 ?
		     -errno :
		     sfs_write_full(to->t.fd, head, sizeof(head));
	if (rc)
		return write_failed(&to->t, rc, to->err);
	to->open = false;
	if ((size_t)snprintf(dst, sizeof(dst), "%s/%s", dir, name) <
		    sizeof(dst) &&
	    access(dst, F_OK) < 0 && errno == ENOENT &&
	    made->n < sizeof(made->names) / sizeof(made->names[0]))
		fresh = true;
	rc = temp_commit(&to->t, dir, name, to->err);
	if (rc)
		return rc;
	if (fresh)
		memcpy(made->names[made->n++], name, 64);
	*entry = json_pack("{s:s, s:I, s:s}", "file", name, "count",
			   (json_int_t)count, "sha256", hex);
	return *entry ? 0 : sfs_errorf(to->err, -ENOMEM, "out of memory");
}

/*
 * Write count entries of kind k, from data or streamed from spill, as a
 * table named after its checksum into dir; *entry gets its manifest entry,
 * name its file name.  The boundary table gets its blocks file too, named
 * in its entry, the blocks file's name in blocks_name.  A spilled digest
 * table's SHA-256 was taken as it was made (sfs_spill_sum): it is only
 * copied then, or not even copied when the spill's file is the table
 * already (table_adopt).
 */
static int save_table(const char *dir, const struct sfs_table_kind *k,
		      const void *data, struct sfs_spill *spill, uint64_t count,
		      json_t **entry, char name[64], char blocks_name[64],
		      struct made *made, struct sfs_error *err)
{
	struct table_out to = { 0 }, bo = { 0 };
	struct sfs_block_sums bs = { .block_bytes = SFS_INDEX_BLOCK_BYTES,
				     .flush = put_sums,
				     .arg = &bo,
				     .err = err };
	json_t *bentry = NULL;
	bool adopted;
	int rc;

	to.summed = spill && k == &sfs_digests_kind &&
		    sfs_spill_sum(spill, to.sum);
	adopted = to.summed && !table_adopt(dir, k, spill, &to, err);
	rc = adopted ? 0 : table_open(dir, k, &to, err);
	if (!rc && k == &sfs_bounds_kind) {
		rc = table_open(dir, &sfs_blocks_kind, &bo, err);
		bs.d = sfs_digest_new();
		bs.path = to.t.path;
		to.blocks = &bs;
		if (!rc && !bs.d)
			rc = sfs_errorf(err, -ENOMEM, "out of memory");
	}
	if (!rc && !adopted && spill)
		rc = sfs_spill_stream(spill, k == &sfs_digests_kind, table_put,
				      &to, err);
	else if (!rc && !adopted)
		rc = table_put(&to, data, count * k->elem);
	if (!rc && to.blocks)
		rc = sfs_block_sums_finish(&bs);
	if (!rc && to.blocks)
		rc = table_close(dir, &bo,
				 sfs_index_blocks_of(count, bs.block_bytes),
				 &bentry, blocks_name, made);
	if (!rc)
		rc = table_close(dir, &to, count, entry, name, made);
	if (!rc && bentry &&
	    (json_object_set_new(bentry, "block_bytes",
				 json_integer((json_int_t)bs.block_bytes)) ||
	     json_object_set_new(*entry, sfs_blocks_kind.key,
				 json_incref(bentry))))
		rc = sfs_errorf(err, -ENOMEM, "out of memory");
	json_decref(bentry);
	sfs_digest_free(bs.d);
	table_out_free(&bo);
	table_out_free(&to);
	return rc;
}

static json_t *shard_json(const struct sfs_shard *sh)
{
	json_t *j = json_pack("{s:s, s:I, s:I, s:s, s:I}", "path", sh->path,
			      "size", (json_int_t)sh->size, "mtime_ns",
			      (json_int_t)sh->mtime_ns, "format",
			      sh->format->name, "samples",
			      (json_int_t)sh->nsamples);
	char hex[SFS_DIGEST_HEX];
	size_t i;

	if (!j)
		return NULL;
	if (sfs_shard_has_bounds(sh))
		json_object_set_new(j, "bounds",
				    json_integer((json_int_t)sh->bounds_at));
	if (sh->prefix_len)
		json_object_set_new(j, "prefix",
				    json_integer((json_int_t)sh->prefix_len));
	if (sh->newline_missing)
		json_object_set_new(j, "newline_missing", json_true());
	if (sh->has_digest) {
		sfs_digest_hex(sh->digest, hex);
		json_object_set_new(j, "sha256", json_string(hex));
	}
	if (sh->nmembers) {
		json_t *m = json_array();

		for (i = 0; i < sh->nmembers; i++)
			json_array_append_new(
				m,
				json_pack("{s:s, s:I, s:I}", "path",
					  sh->members[i].path, "size",
					  (json_int_t)sh->members[i].size,
					  "mtime_ns",
					  (json_int_t)sh->members[i].mtime_ns));
		json_object_set_new(j, "members", m);
	}
	return j;
}

int sfs_index_save(const struct sfs_index *idx, const char *dir,
		   struct sfs_error *err)
{
	unsigned char sum[SFS_DIGEST_LEN];
	char hex[SFS_DIGEST_HEX], tname[64], bname[64], dname[64], *idir;
	char *text = NULL;
	json_t *root = NULL, *shards, *bounds = NULL, *digests = NULL;
	bool hashed = idx->spill ? sfs_spill_has_digests(idx->spill) :
				   idx->digests != NULL;
	struct made made = { 0 };
	size_t i;
	int rc;

	if (idx->nsources)
		return sfs_errorf(
			err, -EINVAL,
			"%s: a mixture's index is not saved: index each of its sources",
			idx->source);
	idir = sfs_index_dir(idx->source, dir);
	if (!idir)
		return sfs_errorf(err, -ENOMEM, "out of memory");
	if (mkdir(idir, 0755) < 0 && errno != EEXIST) {
		rc = sfs_errorf(
			err, -errno,
			"%s: cannot create the index directory: %s; if the source is read-only, put the index elsewhere with --out DIR",
			idir, strerror(errno));
		goto out_free;
	}
	rc = save_table(idir, &sfs_bounds_kind, idx->bounds, idx->spill,
			idx->nbounds, &bounds, tname, bname, &made, err);
	if (!rc && hashed)
		rc = save_table(idir, &sfs_digests_kind, idx->digests,
				idx->spill, idx->nsamples, &digests, dname,
				NULL, &made, err);
	if (rc)
		goto out_free;

	rc = -ENOMEM;
	shards = json_array();
	root = json_pack("{s:i, s:s, s:I, s:I, s:O, s:o}", "shardfs_index",
			 SFS_INDEX_VERSION, "source", idx->source, "samples",
			 (json_int_t)idx->nsamples, "shard_count",
			 (json_int_t)idx->nshards, "boundaries", bounds,
			 "shards", shards);
	if (!root)
		goto out_nomem;
	if (digests)
		json_object_set(root, "digests", digests);
	if (idx->nparts)
		json_object_set_new(root, "part",
				    json_pack("[i, i]", (int)idx->part,
					      (int)idx->nparts));
	for (i = 0; i < idx->nshards; i++)
		if (json_array_append_new(shards, shard_json(&idx->shards[i])))
			goto out_nomem;
	if (sfs_index_manifest_checksum(root, sum))
		goto out_nomem;
	sfs_digest_hex(sum, hex);
	json_object_set_new(root, "checksum", json_string(hex));
	text = json_dumps(root, JSON_INDENT(1) | JSON_SORT_KEYS);
	if (!text)
		goto out_nomem;
	rc = write_atomic(idir, SFS_INDEX_MANIFEST, text, strlen(text), "\n", 1,
			  err);
	if (!rc) {
		remove_old_tables(idir, &sfs_bounds_kind, tname);
		remove_old_tables(idir, &sfs_blocks_kind, bname);
		remove_old_tables(idir, &sfs_digests_kind, hashed ? dname : "");
	}
	goto out_free;
out_nomem:
	sfs_errorf(err, rc, "out of memory writing the index");
out_free:
	if (rc)
		made_remove(idir, &made);
	free(text);
	json_decref(root);
	json_decref(bounds);
	json_decref(digests);
	free(idir);
	return rc;
}
