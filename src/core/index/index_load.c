/*
 * Loading an index (index.h) with every check an untrusted file needs, and
 * the whole-table checks the auditor and the indexer ask for later
 * (sfs_index_check_bounds, sfs_index_check_digests) with the same pass.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "index_i.h"

#define MANIFEST_MAX (1ULL << 32)

struct loader {
	const char *manifest; /* path, for messages */
	const char *table;
	bool allow_part; /* a part of an index is what is wanted */
	struct sfs_error *err;
};

static int corrupt(struct loader *l, const char *file, const char *what)
{
	return sfs_errorf(
		l->err, -EINVAL,
		"%s: %s; the index is damaged: rebuild it with shardfs-index",
		file, what);
}

static int get_u64(json_t *obj, const char *key, bool required, uint64_t *v)
{
	json_t *j = json_object_get(obj, key);

	if (!j)
		return required ? -ENOENT : 0;
	if (!json_is_integer(j) || json_integer_value(j) < 0)
		return -EINVAL;
	*v = (uint64_t)json_integer_value(j);
	return 0;
}

static int load_member(struct loader *l, json_t *j, struct sfs_member *m)
{
	json_t *path = json_object_get(j, "path");
	json_t *mtime = json_object_get(j, "mtime_ns");

	if (!json_is_string(path) ||
	    !sfs_index_path_ok(json_string_value(path)))
		return corrupt(l, l->manifest,
			       "a member has a missing or unsafe path");
	if (get_u64(j, "size", true, &m->size) || !json_is_integer(mtime))
		return corrupt(l, l->manifest,
			       "a member lacks its size or mtime");
	m->mtime_ns = json_integer_value(mtime);
	m->path = strdup(json_string_value(path));
	return m->path ? 0 : -ENOMEM;
}

static int load_shard(struct loader *l, json_t *j, struct sfs_shard *sh)
{
	json_t *path = json_object_get(j, "path");
	json_t *fmt = json_object_get(j, "format");
	json_t *mtime = json_object_get(j, "mtime_ns");
	json_t *sha = json_object_get(j, "sha256");
	json_t *members = json_object_get(j, "members");
	json_t *nl = json_object_get(j, "newline_missing");
	char what[PATH_MAX + 128];
	size_t i;

	if (!json_is_object(j) || !json_is_string(path) ||
	    !sfs_index_path_ok(json_string_value(path)))
		return corrupt(
			l, l->manifest,
			"a shard has a missing or unsafe path (absolute, empty, or with \"..\")");
	sh->path = strdup(json_string_value(path));
	if (!sh->path)
		return -ENOMEM;
	snprintf(what, sizeof(what), "shard \"%s\" has a bad field", sh->path);
	sh->format = json_is_string(fmt) ?
			     sfs_format_by_name(json_string_value(fmt)) :
			     NULL;
	if (!sh->format || !json_is_integer(mtime) ||
	    get_u64(j, "size", true, &sh->size) ||
	    get_u64(j, "samples", true, &sh->nsamples) ||
	    get_u64(j, "prefix", false, &sh->prefix_len) ||
	    (nl && !json_is_boolean(nl)))
		return corrupt(l, l->manifest, what);
	sh->mtime_ns = json_integer_value(mtime);
	sh->newline_missing = json_is_true(nl);
	sh->bounds_at = SFS_NO_BOUNDS;
	if (get_u64(j, "bounds", false, &sh->bounds_at))
		return corrupt(l, l->manifest, what);
	if (sha) {
		if (!json_is_string(sha) ||
		    sfs_digest_parse(json_string_value(sha), sh->digest))
			return corrupt(l, l->manifest, what);
		sh->has_digest = true;
	}
	if (members) {
		if (!json_is_array(members) || json_array_size(members) == 0)
			return corrupt(l, l->manifest, what);
		sh->members =
			calloc(json_array_size(members), sizeof(*sh->members));
		if (!sh->members)
			return -ENOMEM;
		for (i = 0; i < json_array_size(members); i++) {
			int rc = load_member(l, json_array_get(members, i),
					     &sh->members[i]);

			sh->nmembers = i + 1;
			if (rc)
				return rc;
		}
	}
	return 0;
}

/* The message for a shard whose boundaries are wrong. */
static int bad_bounds(struct loader *l, const struct sfs_shard *sh)
{
	char what[PATH_MAX + 128];

	snprintf(
		what, sizeof(what),
		"the boundaries of shard \"%s\" are out of order or out of range",
		sh->path);
	return corrupt(l, l->table, what);
}

/*
 * Check, from the manifest alone, that the shards' boundaries lie in the
 * table in shard order without overlap, so one pass over the table checks
 * them all (check_chunk).
 */
static int check_bounds_at(struct loader *l, const struct sfs_index *idx)
{
	uint64_t end = 0;
	size_t i;

	for (i = 0; i < idx->nshards; i++) {
		const struct sfs_shard *sh = &idx->shards[i];

		if (!sfs_shard_has_bounds(sh))
			continue;
		if (sh->bounds_at < end || sh->bounds_at > idx->nbounds ||
		    sh->nsamples >= idx->nbounds - sh->bounds_at)
			return bad_bounds(l, sh);
		end = sh->bounds_at + sh->nsamples + 1;
	}
	return 0;
}

/* Where the pass over the boundary table is (check_chunk). */
struct bounds_pass {
	size_t shard; /* the next shard whose boundaries are checked */
	uint64_t prev; /* its last boundary seen */
	const struct sfs_shard *bad; /* the first shard found wrong */
};

/*
 * Check entries at..at+n of the boundary table (v) against the shards they
 * belong to: non-decreasing, from prefix_len, up to size.
 */
static void check_chunk(const struct sfs_index *idx, struct bounds_pass *bp,
			const uint64_t *v, uint64_t at, uint64_t n)
{
	while (n && !bp->bad) {
		const struct sfs_shard *sh;
		uint64_t lo, hi, take, i;

		while (bp->shard < idx->nshards &&
		       !sfs_shard_has_bounds(&idx->shards[bp->shard]))
			bp->shard++;
		if (bp->shard == idx->nshards)
			return;
		sh = &idx->shards[bp->shard];
		lo = sh->bounds_at;
		hi = lo + sh->nsamples + 1;
		if (at + n <= lo)
			return;
		if (at < lo) {
			v += lo - at;
			n -= lo - at;
			at = lo;
		}
		take = hi - at < n ? hi - at : n;
		for (i = 0; i < take; i++) {
			if (at + i == lo ? v[i] < sh->prefix_len :
					   v[i] < bp->prev) {
				bp->bad = sh;
				return;
			}
			bp->prev = v[i];
		}
		v += take;
		n -= take;
		at += take;
		if (at == hi) {
			if (bp->prev > sh->size) {
				bp->bad = sh;
				return;
			}
			bp->shard++;
		}
	}
}

/*
 * Read a table's payload (after its header) with pread, hashing it into
 * sum and, for the boundary table (idx given), checking every shard's
 * boundaries on the way (bp) and, with bs, hashing its blocks.
 */
static int read_payload(struct loader *l, int fd, size_t len, const char *path,
			const struct sfs_index *idx, struct bounds_pass *bp,
			struct sfs_block_sums *bs,
			unsigned char sum[SFS_DIGEST_LEN])
{
	struct sfs_digest *d = sfs_digest_new();
	size_t off = SFS_TABLE_HEADER, bufsz = 1 << 20;
	uint64_t *buf = malloc(bufsz);
	int rc = 0;

	if (!d || !buf) {
		rc = sfs_errorf(l->err, -ENOMEM, "%s: out of memory", path);
		goto out;
	}
	while (off < len) {
		size_t want = len - off < bufsz ? len - off : bufsz;

		rc = sfs_index_pread(fd, path, buf, want, (off_t)off, NULL,
				     l->err);
		if (rc)
			goto out;
		if (sfs_digest_update(d, buf, want)) {
			rc = sfs_errorf(l->err, -EIO, "%s: SHA-256 failed",
					path);
			goto out;
		}
		if (idx)
			check_chunk(idx, bp, buf,
				    (off - SFS_TABLE_HEADER) / sizeof(*buf),
				    want / sizeof(*buf));
		if (bs) {
			rc = sfs_block_sums_add(bs, buf, want);
			if (rc)
				goto out;
		}
		off += want;
	}
	if (bs) {
		rc = sfs_block_sums_finish(bs);
		if (rc)
			goto out;
	}
	if (sfs_digest_final(d, sum))
		rc = sfs_errorf(l->err, -EIO, "%s: SHA-256 failed", path);
out:
	free(buf);
	sfs_digest_free(d);
	return rc;
}

/*
 * Open the table of kind k that the manifest's entry names and check its
 * length and header against the manifest.  Sets fd (the caller closes it,
 * also on error), len, count, the manifest's checksum want, and path (heap,
 * the caller frees it, also on error).
 */
static int open_table(struct loader *l, const struct sfs_table_kind *k,
		      json_t *entry, const char *dir, int *fd, size_t *len,
		      uint64_t *count, unsigned char want[SFS_DIGEST_LEN],
		      char **pathp)
{
	json_t *tfile = json_object_get(entry, "file");
	json_t *tsha = json_object_get(entry, "sha256");
	unsigned char h[SFS_TABLE_HEADER];
	char *path = NULL, what[96];
	struct stat st;
	int rc;

	snprintf(what, sizeof(what), "the %s entry is malformed", k->what);
	if (!json_is_object(entry) || !json_is_string(tfile) ||
	    !json_is_string(tsha) || strchr(json_string_value(tfile), '/') ||
	    sfs_digest_parse(json_string_value(tsha), want) ||
	    get_u64(entry, "count", true, count))
		return corrupt(l, l->manifest, what);
	if (asprintf(&path, "%s/%s", dir, json_string_value(tfile)) < 0)
		return -ENOMEM;
	*pathp = path;
	*fd = open(path, O_RDONLY | O_CLOEXEC);
	if (*fd < 0 && (errno == EMFILE || errno == ENFILE))
		return sfs_errorf(
			l->err, -errno,
			"%s: cannot open the %s: %s; raise the limit of open files (ulimit -n) and try again",
			path, k->what, strerror(errno));
	if (*fd < 0)
		return sfs_errorf(
			l->err, errno == ENOENT ? -EINVAL : -EIO,
			"%s: cannot open the %s: %s; rebuild the index with shardfs-index",
			path, k->what, strerror(errno));
	if (fstat(*fd, &st) < 0)
		return sfs_errorf(l->err, -EIO, "%s: %s", path,
				  strerror(errno));
	if ((uint64_t)st.st_size < SFS_TABLE_HEADER ||
	    ((uint64_t)st.st_size - SFS_TABLE_HEADER) / k->elem != *count ||
	    ((uint64_t)st.st_size - SFS_TABLE_HEADER) % k->elem)
		return corrupt(
			l, path,
			"truncated or of the wrong length for its manifest");
	*len = (size_t)st.st_size;
	rc = sfs_index_pread(*fd, path, h, sizeof(h), 0, NULL, l->err);
	if (rc)
		return rc;
	snprintf(what, sizeof(what), "not a shardfs %s of version 1", k->what);
	if (memcmp(h, k->magic, 8) || h[8] != SFS_INDEX_VERSION || h[9] ||
	    h[10] || h[11] || memcmp(h + 16, count, 8))
		return corrupt(l, path, what);
	if (memcmp(h + 24, want, SFS_DIGEST_LEN))
		return corrupt(l, path,
			       "its checksum differs from the manifest's");
	return 0;
}

/*
 * Open the blocks file the boundary table's entry names (entry) and check
 * its checksum and that it has one sum per block of the table; the index
 * keeps it open (blocks_fd), and the sums are read where a block is
 * checked (sfs_index_read_bounds).
 */
static int load_blocks(struct loader *l, json_t *entry, const char *dir,
		       struct sfs_index *idx)
{
	unsigned char sum[SFS_DIGEST_LEN], want[SFS_DIGEST_LEN];
	uint64_t bb = 0;
	size_t len = 0;
	int fd = -1, rc;

	if (!json_is_object(entry) ||
	    get_u64(entry, "block_bytes", true, &bb) || bb < sizeof(uint64_t) ||
	    bb > SFS_BLOCK_BYTES_MAX || bb % sizeof(uint64_t))
		return corrupt(l, l->manifest,
			       "the block checksum file entry is malformed");
	rc = open_table(l, &sfs_blocks_kind, entry, dir, &fd, &len,
			&idx->nblocks, want, &idx->blocks_path);
	if (!rc && idx->nblocks != sfs_index_blocks_of(idx->nbounds, bb))
		rc = corrupt(
			l, idx->blocks_path,
			"it does not hold one checksum per block of the boundary table");
	if (!rc)
		rc = read_payload(l, fd, len, idx->blocks_path, NULL, NULL,
				  NULL, sum);
	if (!rc && memcmp(sum, want, SFS_DIGEST_LEN))
		rc = corrupt(l, idx->blocks_path,
			     "its contents do not match their checksum");
	if (!rc) {
		idx->verified =
			calloc(idx->nblocks / 64 + 1, sizeof(*idx->verified));
		if (!idx->verified)
			rc = -ENOMEM;
	}
	if (rc) {
		if (fd >= 0)
			close(fd);
		return rc;
	}
	idx->block_bytes = bb;
	idx->blocks_fd = fd;
	posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
	return 0;
}

/*
 * One pass over the boundary table (open on fd, len bytes with its header):
 * its checksum, every shard's boundaries and, with bs, its blocks against
 * the blocks file.  Then nothing needs checking again.
 */
static int pass_bounds(struct loader *l, int fd, size_t len,
		       struct sfs_index *idx, struct sfs_block_sums *bs)
{
	unsigned char sum[SFS_DIGEST_LEN];
	struct bounds_pass bp = { 0 };
	int rc;

	rc = read_payload(l, fd, len, idx->table_path, idx, &bp, bs, sum);
	if (!rc && memcmp(sum, idx->table_sum, SFS_DIGEST_LEN))
		rc = corrupt(l, idx->table_path,
			     "its contents do not match their checksum");
	if (!rc && bp.bad)
		rc = bad_bounds(l, bp.bad);
	idx->bounds_checked = !rc;
	return rc;
}

/*
 * Open the boundary table, check its header and length, and, with a blocks
 * file, that file (the table's blocks are checked as they are read);
 * without one, check the table in one pass: its checksum, and every
 * shard's boundaries.  The index keeps the descriptor (table_fd).
 */
static int load_bounds(struct loader *l, json_t *entry, const char *dir,
		       struct sfs_index *idx)
{
	json_t *blocks = NULL;
	size_t len = 0;
	int fd = -1, rc;

	rc = open_table(l, &sfs_bounds_kind, entry, dir, &fd, &len,
			&idx->nbounds, idx->table_sum, &idx->table_path);
	l->table = idx->table_path;
	if (!rc)
		rc = check_bounds_at(l, idx);
	if (!rc)
		blocks = json_object_get(entry, sfs_blocks_kind.key);
	if (!rc)
		rc = blocks ? load_blocks(l, blocks, dir, idx) :
			      pass_bounds(l, fd, len, idx, NULL);
	if (rc) {
		if (fd >= 0)
			close(fd);
		return rc;
	}
	if (idx->nbounds) {
		idx->table_fd = fd;
		posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
	} else {
		close(fd);
	}
	return 0;
}

/* Map the digest table, checking its header and length only. */
static int load_digests(struct loader *l, json_t *entry, const char *dir,
			struct sfs_index *idx)
{
	uint64_t count = 0;
	int fd = -1, rc;

	rc = open_table(l, &sfs_digests_kind, entry, dir, &fd, &idx->dmap_len,
			&count, idx->digests_sum, &idx->digests_path);
	if (!rc && count != idx->nsamples)
		rc = corrupt(
			l, idx->digests_path,
			"it does not hold one digest per sample of the manifest");
	if (!rc) {
		idx->dmap =
			mmap(NULL, idx->dmap_len, PROT_READ, MAP_SHARED, fd, 0);
		if (idx->dmap == MAP_FAILED) {
			idx->dmap = NULL;
			rc = sfs_errorf(l->err, -EIO, "%s: cannot map: %s",
					idx->digests_path, strerror(errno));
		} else {
			idx->digests = (const unsigned char *)idx->dmap +
				       SFS_TABLE_HEADER;
		}
	}
	if (rc) {
		if (fd >= 0)
			close(fd);
		return rc;
	}
	idx->digests_fd = fd;
	return 0;
}

/* ---- the whole-table checks, asked for after the load ---- */

int sfs_index_check_digests(struct sfs_index *idx, struct sfs_error *err)
{
	struct loader l = { .err = err };
	unsigned char sum[SFS_DIGEST_LEN];
	int rc;

	if (!idx->dmap || idx->digests_checked)
		return 0;
	rc = read_payload(&l, idx->digests_fd, idx->dmap_len, idx->digests_path,
			  NULL, NULL, NULL, sum);
	if (!rc && memcmp(sum, idx->digests_sum, SFS_DIGEST_LEN))
		rc = corrupt(&l, idx->digests_path,
			     "its contents do not match their checksum");
	if (!rc)
		idx->digests_checked = true;
	return rc;
}

/* Compare a batch of sums of the table's blocks with the blocks file. */
static int compare_sums(struct sfs_block_sums *bs, void *arg)
{
	const struct sfs_index *idx = arg;
	unsigned char want[SFS_BLOCK_BATCH][SFS_DIGEST_LEN];
	size_t i;
	int rc;

	rc = sfs_index_pread(
		idx->blocks_fd, idx->blocks_path, want, bs->n * SFS_DIGEST_LEN,
		SFS_TABLE_HEADER + (off_t)(bs->first * SFS_DIGEST_LEN), NULL,
		bs->err);
	for (i = 0; !rc && i < bs->n; i++)
		if (memcmp(want[i], bs->sums[i], SFS_DIGEST_LEN))
			return sfs_index_block_bad(idx, bs->first + i, bs->err);
	return rc;
}

int sfs_index_check_bounds(struct sfs_index *idx, struct sfs_error *err)
{
	struct loader l = { .table = idx->table_path, .err = err };
	struct sfs_block_sums bs = { .flush = compare_sums,
				     .arg = idx,
				     .block_bytes = idx->block_bytes,
				     .path = idx->table_path,
				     .err = err };
	uint64_t k;
	size_t i;
	int rc;

	for (i = 0; i < idx->nsources; i++) {
		rc = sfs_index_check_bounds(idx->sources[i].idx, err);
		if (rc)
			return rc;
	}
	if (!idx->verified || idx->bounds_checked)
		return 0;
	bs.d = sfs_digest_new();
	if (!bs.d)
		return sfs_errorf(err, -ENOMEM, "out of memory");
	rc = pass_bounds(&l, idx->table_fd,
			 SFS_TABLE_HEADER + idx->nbounds * sizeof(uint64_t),
			 idx, &bs);
	sfs_digest_free(bs.d);
	for (k = 0; !rc && k < idx->nblocks; k++)
		sfs_index_block_mark(idx, k);
	return rc;
}

/* ---- the manifest, then its tables ---- */

static int load_manifest(struct loader *l, const char *dir, json_t *root,
			 struct sfs_index *idx)
{
	unsigned char sum[SFS_DIGEST_LEN], want[SFS_DIGEST_LEN];
	json_t *checksum = json_object_get(root, "checksum");
	json_t *shards = json_object_get(root, "shards");
	json_t *table = json_object_get(root, "boundaries");
	json_t *digests = json_object_get(root, "digests");
	uint64_t version = 0, total = 0;
	size_t i;
	int rc;

	if (get_u64(root, "shardfs_index", true, &version))
		return corrupt(l, l->manifest, "not a shardfs index manifest");
	if (version != SFS_INDEX_VERSION)
		return sfs_errorf(
			l->err, -EINVAL,
			"%s: index version %llu, this shardfs reads version %d; rebuild the index with this version's shardfs-index",
			l->manifest, (unsigned long long)version,
			SFS_INDEX_VERSION);
	if (!json_is_string(checksum) ||
	    sfs_digest_parse(json_string_value(checksum), want))
		return corrupt(l, l->manifest, "its checksum field is missing");
	json_incref(checksum);
	json_object_del(root, "checksum");
	rc = sfs_index_manifest_checksum(root, sum);
	json_object_set_new(root, "checksum", checksum);
	if (rc)
		return rc;
	if (memcmp(sum, want, SFS_DIGEST_LEN))
		return corrupt(l, l->manifest,
			       "its contents do not match their checksum");
	if (!json_is_array(shards))
		return corrupt(l, l->manifest, "the shard list is missing");
	if (json_object_get(root, "part")) {
		json_int_t part, nparts;

		if (json_unpack(json_object_get(root, "part"), "[I, I]", &part,
				&nparts) ||
		    nparts < 1 || nparts > SFS_INDEX_PARTS_MAX || part < 0 ||
		    part >= nparts)
			return corrupt(l, l->manifest, "a bad part field");
		idx->part = (uint32_t)part;
		idx->nparts = (uint32_t)nparts;
		if (!l->allow_part)
			return sfs_errorf(
				l->err, -EINVAL,
				"%s: this is part %u of %u of an index, not a whole one; join the parts with: shardfs-index %s --merge",
				l->manifest, idx->part, idx->nparts,
				idx->source);
	}
	idx->shards = calloc(json_array_size(shards) + 1, sizeof(*idx->shards));
	if (!idx->shards)
		return -ENOMEM;
	for (i = 0; i < json_array_size(shards); i++) {
		struct sfs_shard *sh = &idx->shards[i];

		idx->nshards = i + 1;
		rc = load_shard(l, json_array_get(shards, i), sh);
		if (rc)
			return rc;
		if (i && strcmp(idx->shards[i - 1].path, sh->path) >= 0)
			return corrupt(l, l->manifest,
				       "its shards are not sorted by path");
		if (sh->nsamples > UINT64_MAX - total)
			return corrupt(l, l->manifest,
				       "sample counts overflow");
		sh->first_sample = total;
		total += sh->nsamples;
	}
	idx->nsamples = total;
	rc = load_bounds(l, table, dir, idx);
	l->table = NULL;
	if (!rc && digests)
		rc = load_digests(l, digests, dir, idx);
	return rc;
}

static int load(const char *source, const char *dir, bool allow_part,
		struct sfs_index **out, struct sfs_error *err)
{
	struct loader l = { .err = err, .allow_part = allow_part };
	struct sfs_index *idx;
	char *idir = NULL, *mpath = NULL;
	json_error_t jerr;
	json_t *root = NULL;
	struct stat st;
	int rc;

	idx = calloc(1, sizeof(*idx));
	if (!idx)
		return sfs_errorf(err, -ENOMEM, "out of memory");
	idx->table_fd = -1;
	idx->blocks_fd = -1;
	idx->digests_fd = -1;
	idx->source = realpath(source, NULL);
	if (!idx->source) {
		rc = sfs_errorf(err, -ENOENT, "%s: source directory: %s",
				source, strerror(errno));
		goto out_free;
	}
	idir = sfs_index_dir(idx->source, dir);
	if (!idir || asprintf(&mpath, "%s/%s", idir, SFS_INDEX_MANIFEST) < 0) {
		mpath = NULL;
		rc = sfs_errorf(err, -ENOMEM, "out of memory");
		goto out_free;
	}
	l.manifest = mpath;
	if (stat(mpath, &st) < 0) {
		if (errno == ENOENT)
			rc = sfs_errorf(
				err, -ENOENT,
				"%s: no index; build it with: shardfs-index %s%s%s",
				mpath, source, dir ? " --out " : "",
				dir ? dir : "");
		else if (errno == EACCES)
			rc = sfs_errorf(
				err, -EACCES,
				"%s: Permission denied: this user cannot read the index; give it read access to the source and its index (or run as their owner)",
				mpath);
		else
			rc = sfs_errorf(err, -EIO, "%s: %s", mpath,
					strerror(errno));
		goto out_free;
	}
	if ((uint64_t)st.st_size > MANIFEST_MAX) {
		rc = corrupt(&l, mpath, "larger than 4 GiB");
		goto out_free;
	}
	root = json_load_file(mpath, JSON_REJECT_DUPLICATES, &jerr);
	if (!root) {
		rc = sfs_errorf(
			err, -EINVAL,
			"%s: not valid JSON at line %d, column %d (%s); the index is damaged: rebuild it with shardfs-index",
			mpath, jerr.line, jerr.column, jerr.text);
		goto out_free;
	}
	if (!json_is_object(root)) {
		rc = corrupt(&l, mpath, "not a JSON object");
		goto out_free;
	}
	rc = load_manifest(&l, idir, root, idx);
	if (rc) {
		if (rc == -ENOMEM)
			sfs_errorf(err, rc, "out of memory loading %s", mpath);
		goto out_free;
	}
	*out = idx;
	idx = NULL;
out_free:
	json_decref(root);
	free(mpath);
	free(idir);
	sfs_index_free(idx);
	return rc;
}

int sfs_index_load(const char *source, const char *dir, struct sfs_index **out,
		   struct sfs_error *err)
{
	return load(source, dir, false, out, err);
}

int sfs_index_load_part(const char *source, const char *dir,
			struct sfs_index **out, struct sfs_error *err)
{
	return load(source, dir, true, out, err);
}
