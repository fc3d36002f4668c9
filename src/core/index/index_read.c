/*
 * The checked reads of a loaded index's tables at run time: a view's
 * boundaries (sfs_index_read_bounds, or through a buffer of a few slots of
 * the table, sfs_bounds_buf_read), each block of the boundary table
 * checked against the blocks file the first time it is read, and the
 * digests of samples (sfs_index_read_digests).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "index_i.h"
#include "shardfs/util.h"

int sfs_index_pread(int fd, const char *path, void *out, size_t len, off_t off,
		    const char *shard, struct sfs_error *err)
{
	ssize_t got = sfs_pread_full(fd, out, len, (uint64_t)off);

	if (got >= 0 && (size_t)got == len)
		return 0;
	return sfs_errorf(
		err, -EIO, "%s: read failed at byte %llu: %s%s%s%s", path,
		(unsigned long long)(off + (got < 0 ? 0 : (off_t)got)),
		got < 0 ? strerror((int)-got) : "end of file",
		shard ? "; the shard " : "", shard ? shard : "",
		shard ? " cannot be served" : "");
}

static bool block_checked(const struct sfs_index *idx, uint64_t k)
{
	return atomic_load_explicit(&idx->verified[k / 64],
				    memory_order_acquire) >>
		       (k % 64) &
	       1;
}

void sfs_index_block_mark(const struct sfs_index *idx, uint64_t k)
{
	atomic_fetch_or_explicit(&idx->verified[k / 64], 1ULL << (k % 64),
				 memory_order_release);
}

int sfs_index_block_bad(const struct sfs_index *idx, uint64_t k,
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
		(unsigned long long)(SFS_TABLE_HEADER + lo),
		(unsigned long long)(SFS_TABLE_HEADER + hi - 1),
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

	rc = sfs_index_pread(idx->table_fd, idx->table_path, buf, hi - lo,
			     SFS_TABLE_HEADER + (off_t)lo, shard, err);
	if (!rc)
		rc = sfs_index_pread(idx->blocks_fd, idx->blocks_path, sums,
				     (e - k) * SFS_DIGEST_LEN,
				     SFS_TABLE_HEADER +
					     (off_t)(k * SFS_DIGEST_LEN),
				     NULL, err);
	for (j = k; !rc && j < e; j++) {
		uint64_t at = (j - k) * bb;

		sfs_digest_buf(buf + at, hi - lo - at < bb ? hi - lo - at : bb,
			       got);
		if (memcmp(got, sums + (j - k) * SFS_DIGEST_LEN,
			   SFS_DIGEST_LEN))
			return sfs_index_block_bad(idx, j, err);
		sfs_index_block_mark(idx, j);
	}
	return rc;
}

/*
 * pread entries at..at+n of a table with a blocks file into out: the
 * blocks checked already directly, the others whole, checked on the way,
 * at most SFS_BLOCK_BYTES_MAX bytes at a time.
 */
static int read_checked(const struct sfs_index *idx, uint64_t at, uint64_t n,
			uint64_t *out, const char *shard, struct sfs_error *err)
{
	uint64_t bb = idx->block_bytes, batch = SFS_BLOCK_BYTES_MAX / bb;
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
			rc = sfs_index_pread(
				idx->table_fd, idx->table_path,
				(char *)out + (off - at * sizeof(*out)),
				stop - off, SFS_TABLE_HEADER + (off_t)off,
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

/* Check b[0..n), boundaries of shard sh in table t, as the shard's. */
static int check_shard_bounds(const struct sfs_index *t,
			      const struct sfs_shard *sh, const uint64_t *b,
			      uint64_t n, struct sfs_error *err)
{
	uint64_t i;

	for (i = 0; i < n; i++)
		if (b[i] < sh->prefix_len || b[i] > sh->size ||
		    (i && b[i] < b[i - 1]))
			return sfs_errorf(
				err, -EINVAL,
				"%s: the boundaries of shard \"%s\" are out of order or out of range; the index is damaged: rebuild it with shardfs-index",
				t->table_path ? t->table_path : t->source,
				sh->path);
	return 0;
}

/* Read entries at..at+n of table t (not in memory) into out. */
static int read_table(const struct sfs_index *t, uint64_t at, uint64_t n,
		      uint64_t *out, const char *shard, struct sfs_error *err)
{
	if (t->verified)
		return read_checked(t, at, n, out, shard, err);
	return sfs_index_pread(t->table_fd, t->table_path, out,
			       n * sizeof(*out),
			       SFS_TABLE_HEADER + (off_t)(at * sizeof(*out)),
			       shard, err);
}

int sfs_index_read_bounds(const struct sfs_index *idx,
			  const struct sfs_shard *sh, uint64_t from, uint64_t n,
			  uint64_t *out, struct sfs_error *err)
{
	uint64_t at = sh->bounds_at + from;
	int rc = 0;

	if (sh->bounds_in)
		idx = sh->bounds_in;
	if (idx->bounds)
		memcpy(out, idx->bounds + at, n * sizeof(*out));
	else
		rc = read_table(idx, at, n, out, sh->path, err);
	return rc ? rc : check_shard_bounds(idx, sh, out, n, err);
}

#define SLOT_ENTRIES (SFS_BOUNDS_BUF_BYTES / sizeof(uint64_t))

/* Entries at..at+n of table in e, or none while table is NULL. */
struct bounds_slot {
	const struct sfs_index *table; /* the index that owns the table */
	uint64_t at, n;
	uint64_t used; /* the tick of its last use */
	uint64_t *e; /* SLOT_ENTRIES of the buffer's entries */
};

/* The slots apart from their entries: a buffer whose slots are never
 * filled touches one page of its memory. */
struct sfs_bounds_buf {
	uint64_t tick;
	struct bounds_slot slot[SFS_BOUNDS_BUF_SLOTS];
	uint64_t entries[SFS_BOUNDS_BUF_SLOTS][SLOT_ENTRIES];
};

int sfs_bounds_buf_new(struct sfs_bounds_buf **out)
{
	struct sfs_bounds_buf *b = malloc(sizeof(*b));
	size_t i;

	if (!b)
		return -ENOMEM;
	b->tick = 0;
	for (i = 0; i < SFS_BOUNDS_BUF_SLOTS; i++)
		b->slot[i] = (struct bounds_slot){ .e = b->entries[i] };
	*out = b;
	return 0;
}

void sfs_bounds_buf_free(struct sfs_bounds_buf *b)
{
	free(b);
}

/*
 * Fill the least recently used slot of b with the entries of table t from
 * the block holding entry at on, as many whole blocks as a slot holds, if
 * they hold at..at+n.  The slot, or NULL when they do not or the read
 * fails (then no slot holds anything of that read).
 */
static struct bounds_slot *fill(struct sfs_bounds_buf *b,
				const struct sfs_index *t, uint64_t at,
				uint64_t n, const char *shard,
				struct sfs_error *err)
{
	uint64_t unit = (t->verified ? t->block_bytes : SFS_INDEX_BLOCK_BYTES) /
			sizeof(uint64_t);
	uint64_t lo = at / unit * unit, cap = SLOT_ENTRIES / unit * unit;
	struct bounds_slot *s = &b->slot[0];
	size_t i;

	if (at + n > lo + cap)
		return NULL; /* or a block is larger than a slot (cap 0) */
	for (i = 1; i < SFS_BOUNDS_BUF_SLOTS; i++)
		if (b->slot[i].used < s->used)
			s = &b->slot[i];
	s->table = NULL;
	s->at = lo;
	s->n = t->nbounds - lo < cap ? t->nbounds - lo : cap;
	if (read_table(t, s->at, s->n, s->e, shard, err))
		return NULL;
	s->table = t;
	return s;
}

int sfs_bounds_buf_read(struct sfs_bounds_buf *b, const struct sfs_index *idx,
			const struct sfs_shard *sh, uint64_t from, uint64_t n,
			uint64_t *out, struct sfs_error *err)
{
	const struct sfs_index *t = sh->bounds_in ? sh->bounds_in : idx;
	uint64_t at = sh->bounds_at + from;
	struct bounds_slot *s = NULL;
	size_t i;

	/* only the shard's own entries come from a slot */
	if (!b || t->bounds || !sfs_shard_has_bounds(sh) ||
	    from > sh->nsamples || n > sh->nsamples + 1 - from ||
	    sh->bounds_at > t->nbounds || at + n > t->nbounds)
		return sfs_index_read_bounds(idx, sh, from, n, out, err);
	for (i = 0; !s && i < SFS_BOUNDS_BUF_SLOTS; i++)
		if (b->slot[i].table == t && b->slot[i].at <= at &&
		    at + n <= b->slot[i].at + b->slot[i].n)
			s = &b->slot[i];
	if (!s)
		s = fill(b, t, at, n, sh->path, err);
	if (!s)
		return sfs_index_read_bounds(idx, sh, from, n, out, err);
	s->used = ++b->tick;
	memcpy(out, s->e + (at - s->at), n * sizeof(*out));
	return check_shard_bounds(t, sh, out, n, err);
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
	return sfs_index_pread(
		idx->digests_fd, idx->digests_path, out, n * SFS_DIGEST_LEN,
		SFS_TABLE_HEADER + (off_t)(first * SFS_DIGEST_LEN), NULL, err);
}
