/*
 * The index on disk: load (with every check an untrusted file needs) and
 * save (atomically).  Comparing it with the source is index_source.c,
 * joining the parts of one is index_merge.c.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "shardfs/index.h"
#include "shardfs/mixture.h"
#include "shardfs/spill.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
	       "the boundary table is read as little-endian u64");

#define TABLE_HEADER 64
#define TABLE_SUFFIX ".bin"

/*
 * The tables beside the manifest, one entry per boundary, per block of the
 * boundary table or per sample.
 */
struct table_kind {
	const char *magic; /* 8 bytes */
	const char *prefix; /* of the file name */
	const char *key; /* in the manifest */
	size_t elem; /* bytes per entry */
	const char *what; /* for messages */
};

static const struct table_kind bounds_kind = { "SFSBND01", "samples-",
					       "boundaries", sizeof(uint64_t),
					       "boundary table" };
static const struct table_kind blocks_kind = { "SFSBLK01", "blocks-", "blocks",
					       SFS_DIGEST_LEN,
					       "block checksum file" };
static const struct table_kind digests_kind = { "SFSDIG01", "digests-",
						"digests", SFS_DIGEST_LEN,
						"sample digest table" };
#define MANIFEST_MAX (1ULL << 32)
/* the largest block a blocks file may describe; reads of blocks not yet
 * checked go in batches of at most this many bytes */
#define BLOCK_BYTES_MAX (1U << 20)

char *sfs_index_dir(const char *source, const char *dir)
{
	char *out;

	if (dir)
		return strdup(dir);
	if (asprintf(&out, "%s/%s", source, SFS_INDEX_DIR) < 0)
		return NULL;
	return out;
}

bool sfs_index_path_ok(const char *path)
{
	const char *p = path;

	if (!*path || *path == '/' || strlen(path) >= PATH_MAX)
		return false;
	while (*p) {
		const char *slash = strchr(p, '/');
		size_t n = slash ? (size_t)(slash - p) : strlen(p);

		if (n == 0 || (n == 1 && p[0] == '.') ||
		    (n == 2 && p[0] == '.' && p[1] == '.'))
			return false;
		if (!slash)
			break;
		p = slash + 1;
		if (!*p)
			return false;
	}
	return true;
}

static void shard_clear(struct sfs_shard *sh)
{
	size_t i;

	free(sh->path);
	for (i = 0; i < sh->nmembers; i++)
		free(sh->members[i].path);
	free(sh->members);
}

void sfs_index_free(struct sfs_index *idx)
{
	size_t i;

	if (!idx)
		return;
	for (i = 0; i < idx->nshards; i++)
		shard_clear(&idx->shards[i]);
	free(idx->shards);
	if (idx->table_path && idx->table_fd >= 0)
		close(idx->table_fd);
	free(idx->table_path);
	if (idx->blocks_path && idx->blocks_fd >= 0)
		close(idx->blocks_fd);
	free(idx->blocks_path);
	free((void *)idx->verified);
	if (idx->dmap)
		munmap(idx->dmap, idx->dmap_len);
	if (idx->digests_path && idx->digests_fd >= 0)
		close(idx->digests_fd);
	free(idx->digests_path);
	free(idx->bounds_heap);
	sfs_spill_free(idx->spill);
	sfs_mix_free(idx->mix);
	for (i = 0; i < idx->nsources; i++)
		sfs_index_free(idx->sources[i]);
	free(idx->sources);
	free(idx->digests_heap);
	free(idx->source);
	free(idx);
}

ssize_t sfs_index_find(const struct sfs_index *idx, const char *path)
{
	size_t lo = 0, hi = idx->nshards;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(idx->shards[mid].path, path);

		if (c == 0)
			return (ssize_t)mid;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

/* The number of blocks of block_bytes in a table of nbounds boundaries. */
static uint64_t blocks_of(uint64_t nbounds, uint64_t block_bytes)
{
	return (nbounds * sizeof(uint64_t) + block_bytes - 1) / block_bytes;
}

/*
 * The SHA-256 of every block_bytes bytes of a payload fed in pieces of any
 * size (the last block may be shorter), handed to flush BLOCK_BATCH at a
 * time: the writer puts them in the blocks file, sfs_index_check_bounds
 * compares them with it.
 */
#define BLOCK_BATCH 128
struct block_sums {
	struct sfs_digest *d;
	uint64_t block_bytes;
	uint64_t fill; /* bytes of the current block hashed */
	uint64_t first; /* the block whose sum is sums[0] */
	size_t n; /* sums held */
	unsigned char sums[BLOCK_BATCH][SFS_DIGEST_LEN];
	int (*flush)(struct block_sums *bs, void *arg);
	void *arg;
	const char *path; /* of the payload, for messages */
	struct sfs_error *err;
};

static int block_sums_flush(struct block_sums *bs)
{
	int rc;

	if (!bs->n)
		return 0;
	rc = bs->flush(bs, bs->arg);
	bs->first += bs->n;
	bs->n = 0;
	return rc;
}

static int block_sums_end(struct block_sums *bs)
{
	if (sfs_digest_final(bs->d, bs->sums[bs->n]))
		return sfs_errorf(bs->err, -EIO, "%s: SHA-256 failed",
				  bs->path);
	bs->fill = 0;
	return ++bs->n == BLOCK_BATCH ? block_sums_flush(bs) : 0;
}

static int block_sums_add(struct block_sums *bs, const void *buf, size_t len)
{
	const char *p = buf;
	int rc;

	while (len) {
		size_t take = bs->block_bytes - bs->fill < len ?
				      (size_t)(bs->block_bytes - bs->fill) :
				      len;

		if (sfs_digest_update(bs->d, p, take))
			return sfs_errorf(bs->err, -EIO, "%s: SHA-256 failed",
					  bs->path);
		bs->fill += take;
		p += take;
		len -= take;
		if (bs->fill == bs->block_bytes) {
			rc = block_sums_end(bs);
			if (rc)
				return rc;
		}
	}
	return 0;
}

/* The last, shorter block, and the sums still held. */
static int block_sums_finish(struct block_sums *bs)
{
	int rc = bs->fill ? block_sums_end(bs) : 0;

	return rc ? rc : block_sums_flush(bs);
}

/* ---- loading ---- */

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

static int manifest_checksum(json_t *root, unsigned char out[SFS_DIGEST_LEN])
{
	char *text = json_dumps(root, JSON_COMPACT | JSON_SORT_KEYS);

	if (!text)
		return -ENOMEM;
	sfs_digest_buf(text, strlen(text), out);
	free(text);
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
 * pread len bytes of table path (fd) at off into out; -EIO naming the
 * table, and the shard whose boundaries they are when shard is given.
 */
static int read_at(int fd, const char *path, void *out, size_t len, off_t off,
		   const char *shard, struct sfs_error *err)
{
	size_t done = 0;

	while (done < len) {
		ssize_t got = pread(fd, (char *)out + done, len - done,
				    off + (off_t)done);

		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return sfs_errorf(
				err, -EIO,
				"%s: read failed at byte %llu: %s%s%s%s", path,
				(unsigned long long)(off + (off_t)done),
				got < 0 ? strerror(errno) : "end of file",
				shard ? "; the shard " : "", shard ? shard : "",
				shard ? " cannot be served" : "");
		done += (size_t)got;
	}
	return 0;
}

/*
 * Read a table's payload (after its header) with pread, hashing it into
 * sum and, for the boundary table (idx given), checking every shard's
 * boundaries on the way (bp) and, with bs, hashing its blocks.
 */
static int read_payload(struct loader *l, int fd, size_t len, const char *path,
			const struct sfs_index *idx, struct bounds_pass *bp,
			struct block_sums *bs,
			unsigned char sum[SFS_DIGEST_LEN])
{
	struct sfs_digest *d = sfs_digest_new();
	size_t off = TABLE_HEADER, bufsz = 1 << 20;
	uint64_t *buf = malloc(bufsz);
	int rc = 0;

	if (!d || !buf) {
		rc = sfs_errorf(l->err, -ENOMEM, "%s: out of memory", path);
		goto out;
	}
	while (off < len) {
		size_t want = len - off < bufsz ? len - off : bufsz;

		rc = read_at(fd, path, buf, want, (off_t)off, NULL, l->err);
		if (rc)
			goto out;
		if (sfs_digest_update(d, buf, want)) {
			rc = sfs_errorf(l->err, -EIO, "%s: SHA-256 failed",
					path);
			goto out;
		}
		if (idx)
			check_chunk(idx, bp, buf,
				    (off - TABLE_HEADER) / sizeof(*buf),
				    want / sizeof(*buf));
		if (bs) {
			rc = block_sums_add(bs, buf, want);
			if (rc)
				goto out;
		}
		off += want;
	}
	if (bs) {
		rc = block_sums_finish(bs);
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
static int open_table(struct loader *l, const struct table_kind *k,
		      json_t *entry, const char *dir, int *fd, size_t *len,
		      uint64_t *count, unsigned char want[SFS_DIGEST_LEN],
		      char **pathp)
{
	json_t *tfile = json_object_get(entry, "file");
	json_t *tsha = json_object_get(entry, "sha256");
	unsigned char h[TABLE_HEADER];
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
	if (*fd < 0)
		return sfs_errorf(
			l->err, errno == ENOENT ? -EINVAL : -EIO,
			"%s: cannot open the %s: %s; rebuild the index with shardfs-index",
			path, k->what, strerror(errno));
	if (fstat(*fd, &st) < 0)
		return sfs_errorf(l->err, -EIO, "%s: %s", path,
				  strerror(errno));
	if ((uint64_t)st.st_size < TABLE_HEADER ||
	    ((uint64_t)st.st_size - TABLE_HEADER) / k->elem != *count ||
	    ((uint64_t)st.st_size - TABLE_HEADER) % k->elem)
		return corrupt(
			l, path,
			"truncated or of the wrong length for its manifest");
	*len = (size_t)st.st_size;
	rc = read_at(*fd, path, h, sizeof(h), 0, NULL, l->err);
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
	    bb > BLOCK_BYTES_MAX || bb % sizeof(uint64_t))
		return corrupt(l, l->manifest,
			       "the block checksum file entry is malformed");
	rc = open_table(l, &blocks_kind, entry, dir, &fd, &len, &idx->nblocks,
			want, &idx->blocks_path);
	if (!rc && idx->nblocks != blocks_of(idx->nbounds, bb))
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
		       struct sfs_index *idx, struct block_sums *bs)
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

	rc = open_table(l, &bounds_kind, entry, dir, &fd, &len, &idx->nbounds,
			idx->table_sum, &idx->table_path);
	l->table = idx->table_path;
	if (!rc)
		rc = check_bounds_at(l, idx);
	if (!rc)
		blocks = json_object_get(entry, blocks_kind.key);
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

	rc = open_table(l, &digests_kind, entry, dir, &fd, &idx->dmap_len,
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
			idx->digests =
				(const unsigned char *)idx->dmap + TABLE_HEADER;
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

static bool block_checked(const struct sfs_index *idx, uint64_t k)
{
	return atomic_load_explicit(&idx->verified[k / 64],
				    memory_order_acquire) >>
		       (k % 64) &
	       1;
}

static void block_mark(const struct sfs_index *idx, uint64_t k)
{
	atomic_fetch_or_explicit(&idx->verified[k / 64], 1ULL << (k % 64),
				 memory_order_release);
}

static int block_bad(const struct sfs_index *idx, uint64_t k,
		     struct sfs_error *err)
{
	uint64_t lo = k * idx->block_bytes,
		 hi = lo + idx->block_bytes < idx->nbounds * sizeof(uint64_t) ?
			      lo + idx->block_bytes :
			      idx->nbounds * sizeof(uint64_t);
	const char *base = strrchr(idx->blocks_path, '/');

	return sfs_errorf(
		err, -EINVAL,
		"%s: block %llu (bytes %llu to %llu) does not match its checksum in %s; the index is damaged: rebuild it with shardfs-index",
		idx->table_path, (unsigned long long)k,
		(unsigned long long)(TABLE_HEADER + lo),
		(unsigned long long)(TABLE_HEADER + hi - 1),
		base ? base + 1 : idx->blocks_path);
}

/*
 * Read blocks k..e-1 of the table whole into buf (then their sums after
 * them), check each against the blocks file and mark it checked.
 */
static int check_blocks(const struct sfs_index *idx, uint64_t k, uint64_t e,
			unsigned char *buf, const char *shard,
			struct sfs_error *err)
{
	uint64_t payload = idx->nbounds * sizeof(uint64_t),
		 bb = idx->block_bytes;
	uint64_t lo = k * bb, hi = e * bb < payload ? e * bb : payload, j;
	unsigned char *sums = buf + (e - k) * bb, got[SFS_DIGEST_LEN];
	int rc;

	rc = read_at(idx->table_fd, idx->table_path, buf, hi - lo,
		     TABLE_HEADER + (off_t)lo, shard, err);
	if (!rc)
		rc = read_at(idx->blocks_fd, idx->blocks_path, sums,
			     (e - k) * SFS_DIGEST_LEN,
			     TABLE_HEADER + (off_t)(k * SFS_DIGEST_LEN), NULL,
			     err);
	for (j = k; !rc && j < e; j++) {
		uint64_t at = (j - k) * bb;

		sfs_digest_buf(buf + at, hi - lo - at < bb ? hi - lo - at : bb,
			       got);
		if (memcmp(got, sums + (j - k) * SFS_DIGEST_LEN,
			   SFS_DIGEST_LEN))
			return block_bad(idx, j, err);
		block_mark(idx, j);
	}
	return rc;
}

/*
 * pread entries at..at+n of a table with a blocks file into out: the
 * blocks checked already directly, the others whole, checked on the way,
 * at most BLOCK_BYTES_MAX bytes at a time.
 */
static int read_checked(const struct sfs_index *idx, uint64_t at, uint64_t n,
			uint64_t *out, const char *shard, struct sfs_error *err)
{
	uint64_t bb = idx->block_bytes, batch = BLOCK_BYTES_MAX / bb;
	uint64_t off = at * sizeof(*out), end = off + n * sizeof(*out);
	uint64_t k = off / bb;
	unsigned char *buf = NULL;
	size_t cap = 0;
	int rc = 0;

	while (!rc && off < end) {
		bool ok = block_checked(idx, k);
		uint64_t e = k + 1, stop;

		while (e * bb < end && block_checked(idx, e) == ok &&
		       (ok || e - k < batch))
			e++;
		stop = e * bb < end ? e * bb : end;
		if (ok) {
			rc = read_at(idx->table_fd, idx->table_path,
				     (char *)out + (off - at * sizeof(*out)),
				     stop - off, TABLE_HEADER + (off_t)off,
				     shard, err);
		} else {
			size_t need = (e - k) * (bb + SFS_DIGEST_LEN);

			if (need > cap) {
				free(buf);
				buf = malloc(need);
				cap = buf ? need : 0;
			}
			rc = buf ? check_blocks(idx, k, e, buf, shard, err) :
				   sfs_errorf(err, -ENOMEM, "out of memory");
			if (!rc)
				memcpy((char *)out + (off - at * sizeof(*out)),
				       buf + (off - k * bb), stop - off);
		}
		off = stop;
		k = e;
	}
	free(buf);
	return rc;
}

int sfs_index_read_bounds(const struct sfs_index *idx,
			  const struct sfs_shard *sh, uint64_t from, uint64_t n,
			  uint64_t *out, struct sfs_error *err)
{
	uint64_t at = sh->bounds_at + from, i;
	int rc = 0;

	if (sh->bounds_in)
		idx = sh->bounds_in;
	if (idx->bounds)
		memcpy(out, idx->bounds + at, n * sizeof(*out));
	else if (idx->verified)
		rc = read_checked(idx, at, n, out, sh->path, err);
	else
		rc = read_at(idx->table_fd, idx->table_path, out,
			     n * sizeof(*out),
			     TABLE_HEADER + (off_t)(at * sizeof(*out)),
			     sh->path, err);
	for (i = 0; !rc && i < n; i++)
		if (out[i] < sh->prefix_len || out[i] > sh->size ||
		    (i && out[i] < out[i - 1]))
			rc = sfs_errorf(
				err, -EINVAL,
				"%s: the boundaries of shard \"%s\" are out of order or out of range; the index is damaged: rebuild it with shardfs-index",
				idx->table_path ? idx->table_path : idx->source,
				sh->path);
	return rc;
}

/* Compare a batch of sums of the table's blocks with the blocks file. */
static int compare_sums(struct block_sums *bs, void *arg)
{
	const struct sfs_index *idx = arg;
	unsigned char want[BLOCK_BATCH][SFS_DIGEST_LEN];
	size_t i;
	int rc;

	rc = read_at(idx->blocks_fd, idx->blocks_path, want,
		     bs->n * SFS_DIGEST_LEN,
		     TABLE_HEADER + (off_t)(bs->first * SFS_DIGEST_LEN), NULL,
		     bs->err);
	for (i = 0; !rc && i < bs->n; i++)
		if (memcmp(want[i], bs->sums[i], SFS_DIGEST_LEN))
			return block_bad(idx, bs->first + i, bs->err);
	return rc;
}

int sfs_index_check_bounds(struct sfs_index *idx, struct sfs_error *err)
{
	struct loader l = { .table = idx->table_path, .err = err };
	struct block_sums bs = { .flush = compare_sums,
				 .arg = idx,
				 .block_bytes = idx->block_bytes,
				 .path = idx->table_path,
				 .err = err };
	uint64_t k;
	size_t i;
	int rc;

	for (i = 0; i < idx->nsources; i++) {
		rc = sfs_index_check_bounds(idx->sources[i], err);
		if (rc)
			return rc;
	}
	if (!idx->verified || idx->bounds_checked)
		return 0;
	bs.d = sfs_digest_new();
	if (!bs.d)
		return sfs_errorf(err, -ENOMEM, "out of memory");
	rc = pass_bounds(&l, idx->table_fd,
			 TABLE_HEADER + idx->nbounds * sizeof(uint64_t), idx,
			 &bs);
	sfs_digest_free(bs.d);
	for (k = 0; !rc && k < idx->nblocks; k++)
		block_mark(idx, k);
	return rc;
}

int sfs_index_read_digests(const struct sfs_index *idx, uint64_t first,
			   uint64_t n, unsigned char *out,
			   struct sfs_error *err)
{
	if (!idx->dmap) {
		memcpy(out, idx->digests + first * SFS_DIGEST_LEN,
		       n * SFS_DIGEST_LEN);
		return 0;
	}
	return read_at(idx->digests_fd, idx->digests_path, out,
		       n * SFS_DIGEST_LEN,
		       TABLE_HEADER + (off_t)(first * SFS_DIGEST_LEN), NULL,
		       err);
}

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
	rc = manifest_checksum(root, sum);
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

/* ---- saving ---- */

static int write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* A file being written under a temporary name of this run's own. */
struct temp {
	int fd;
	char path[PATH_MAX];
};

/*
 * Create dir/.{stem}PID-RANDOM.tmp (O_EXCL: a concurrent run, even on
 * another host of a shared file system, gets another name).
 */
static int temp_open(const char *dir, const char *stem, struct temp *t,
		     struct sfs_error *err)
{
	unsigned tries;

	for (tries = 0; tries < 16; tries++) {
		uint32_t r;

		if ((size_t)getrandom(&r, sizeof(r), 0) != sizeof(r))
			r = (uint32_t)time(NULL) ^ tries;
		if ((size_t)snprintf(t->path, sizeof(t->path),
				     "%s/.%s%ld-%08x.tmp", dir, stem,
				     (long)getpid(), r) >= sizeof(t->path))
			return sfs_errorf(err, -ENAMETOOLONG,
					  "%s: path too long", dir);
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
	rc = write_all(t.fd, head, head_len);
	if (!rc)
		rc = write_all(t.fd, body, body_len);
	if (rc)
		return temp_abort(&t, write_failed(&t, rc, err));
	return temp_commit(&t, dir, name, err);
}

/* Remove tables of kind k other than keep (left by earlier runs). */
static void remove_old_tables(const char *dir, const struct table_kind *k,
			      const char *keep)
{
	struct dirent *de;
	DIR *d = opendir(dir);

	if (!d)
		return;
	while ((de = readdir(d))) {
		size_t n = strlen(de->d_name);

		if (strncmp(de->d_name, k->prefix, strlen(k->prefix)) ||
		    n < strlen(TABLE_SUFFIX) ||
		    strcmp(de->d_name + n - strlen(TABLE_SUFFIX),
			   TABLE_SUFFIX) ||
		    !strcmp(de->d_name, keep))
			continue;
		unlinkat(dirfd(d), de->d_name, 0);
	}
	closedir(d);
}

/*
 * A table on its way to its file, under a temporary name: the header's
 * place first, then the payload, hashed as it is written (and, for the
 * boundary table, its blocks hashed too: blocks), then the header.
 */
struct table_out {
	const struct table_kind *k;
	struct temp t;
	bool open; /* t is still to be committed or removed */
	struct sfs_digest *d;
	uint64_t bytes;
	struct block_sums *blocks;
	struct sfs_error *err;
};

static int table_put(void *arg, const void *buf, size_t len)
{
	struct table_out *to = arg;
	int rc;

	if (sfs_digest_update(to->d, buf, len))
		return sfs_errorf(to->err, -EIO, "%s: SHA-256 failed",
				  to->t.path);
	rc = write_all(to->t.fd, buf, len);
	if (rc)
		return write_failed(&to->t, rc, to->err);
	to->bytes += len;
	return to->blocks ? block_sums_add(to->blocks, buf, len) : 0;
}

/* The writer's block sums go to the blocks file as they come. */
static int put_sums(struct block_sums *bs, void *arg)
{
	return table_put(arg, bs->sums, bs->n * SFS_DIGEST_LEN);
}

static int table_open(const char *dir, const struct table_kind *k,
		      struct table_out *to, struct sfs_error *err)
{
	unsigned char head[TABLE_HEADER] = { 0 };
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
	rc = write_all(to->t.fd, head, sizeof(head));
	return rc ? write_failed(&to->t, rc, err) : 0;
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
 * Finish a table of count entries: its header, then its name after its
 * checksum, in dir.  *entry gets its manifest entry, name its file name.
 */
static int table_close(const char *dir, struct table_out *to, uint64_t count,
		       json_t **entry, char name[64])
{
	unsigned char head[TABLE_HEADER] = { 0 }, sum[SFS_DIGEST_LEN];
	const struct table_kind *k = to->k;
	char hex[SFS_DIGEST_HEX];
	size_t i;
	int rc;

	if (to->bytes != count * k->elem)
		return sfs_errorf(
			to->err, -EIO,
			"%s: %llu bytes of the %s written, %llu expected; a bug: report it",
			to->t.path, (unsigned long long)to->bytes, k->what,
			(unsigned long long)(count * k->elem));
	if (sfs_digest_final(to->d, sum))
		return sfs_errorf(to->err, -EIO, "%s: SHA-256 failed",
				  to->t.path);
	memcpy(head, k->magic, 8);
	head[8] = SFS_INDEX_VERSION;
	for (i = 0; i < 8; i++)
		head[16 + i] = (unsigned char)(count >> (8 * i));
	memcpy(head + 24, sum, SFS_DIGEST_LEN);
	sfs_digest_hex(sum, hex);
	snprintf(name, 64, "%s%.16s%s", k->prefix, hex, TABLE_SUFFIX);
	rc = lseek(to->t.fd, 0, SEEK_SET) < 0 ?
		     -errno :
		     write_all(to->t.fd, head, sizeof(head));
	if (rc)
		return write_failed(&to->t, rc, to->err);
	to->open = false;
	rc = temp_commit(&to->t, dir, name, to->err);
	if (rc)
		return rc;
	*entry = json_pack("{s:s, s:I, s:s}", "file", name, "count",
			   (json_int_t)count, "sha256", hex);
	return *entry ? 0 : sfs_errorf(to->err, -ENOMEM, "out of memory");
}

/*
 * Write count entries of kind k, from data or streamed from spill, as a
 * table named after its checksum into dir; *entry gets its manifest entry,
 * name its file name.  The boundary table gets its blocks file too, named
 * in its entry, the blocks file's name in blocks_name.
 */
static int save_table(const char *dir, const struct table_kind *k,
		      const void *data, const struct sfs_spill *spill,
		      uint64_t count, json_t **entry, char name[64],
		      char blocks_name[64], struct sfs_error *err)
{
	struct table_out to = { 0 }, bo = { 0 };
	struct block_sums bs = { .block_bytes = SFS_INDEX_BLOCK_BYTES,
				 .flush = put_sums,
				 .arg = &bo,
				 .err = err };
	json_t *bentry = NULL;
	int rc;

	rc = table_open(dir, k, &to, err);
	if (!rc && k == &bounds_kind) {
		rc = table_open(dir, &blocks_kind, &bo, err);
		bs.d = sfs_digest_new();
		bs.path = to.t.path;
		to.blocks = &bs;
		if (!rc && !bs.d)
			rc = sfs_errorf(err, -ENOMEM, "out of memory");
	}
	if (!rc && spill)
		rc = sfs_spill_stream(spill, k == &digests_kind, table_put, &to,
				      err);
	else if (!rc)
		rc = table_put(&to, data, count * k->elem);
	if (!rc && to.blocks)
		rc = block_sums_finish(&bs);
	if (!rc && to.blocks)
		rc = table_close(dir, &bo, blocks_of(count, bs.block_bytes),
				 &bentry, blocks_name);
	if (!rc)
		rc = table_close(dir, &to, count, entry, name);
	if (!rc && bentry &&
	    (json_object_set_new(bentry, "block_bytes",
				 json_integer((json_int_t)bs.block_bytes)) ||
	     json_object_set_new(*entry, blocks_kind.key, json_incref(bentry))))
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
	rc = save_table(idir, &bounds_kind, idx->bounds, idx->spill,
			idx->nbounds, &bounds, tname, bname, err);
	if (!rc && hashed)
		rc = save_table(idir, &digests_kind, idx->digests, idx->spill,
				idx->nsamples, &digests, dname, NULL, err);
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
	if (manifest_checksum(root, sum))
		goto out_nomem;
	sfs_digest_hex(sum, hex);
	json_object_set_new(root, "checksum", json_string(hex));
	text = json_dumps(root, JSON_INDENT(1) | JSON_SORT_KEYS);
	if (!text)
		goto out_nomem;
	rc = write_atomic(idir, SFS_INDEX_MANIFEST, text, strlen(text), "\n", 1,
			  err);
	if (!rc) {
		remove_old_tables(idir, &bounds_kind, tname);
		remove_old_tables(idir, &blocks_kind, bname);
		remove_old_tables(idir, &digests_kind, hashed ? dname : "");
	}
	goto out_free;
out_nomem:
	sfs_errorf(err, rc, "out of memory writing the index");
out_free:
	free(text);
	json_decref(root);
	json_decref(bounds);
	json_decref(digests);
	free(idir);
	return rc;
}
