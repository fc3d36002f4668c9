/*
 * Every row of a Parquet file digested (sfs_parquet_rows), as the samples
 * op hands them: a row's digest is the SHA-256 of, for each leaf column in
 * order, each of the column's entries in the row ("E", its repetition and
 * definition levels as u32 little-endian, and for a value its length as
 * u32 little-endian and its bytes), then "Z".
 *
 * The columns are decoded on the calling thread (column.c) into the bytes
 * of a batch of rows (BATCH_ROWS, or BATCH_BYTES and the row that passes
 * them), which it hands out and goes on to fill the next: with up to
 * HASHERS_MAX - 1 helper threads, up to BATCHES batches are out at once
 * (struct rows_out).  Any thread hashes a batch out, CHUNK_ROWS rows at a
 * time, and one thread at a time gives the digests of the hashed batches
 * to the caller, in row order.  The helpers give first, then hash: giving
 * is the caller's work (for the indexer, the spill's writes and the
 * digest table's SHA-256), which must not hold up the decoding; the
 * calling thread, which alone can decode, hashes and gives only when no
 * place is free, and at the end.  With no helper (one CPU, or a small
 * file) the calling thread hashes and gives each batch itself.  The
 * whole file's own SHA-256, when the caller wants it (the indexer's
 * shard digest), is taken a piece at a time by the threads that have no
 * row to hash or give at the time, and finished before the end.  A row of
 * more than ROW_STREAM bytes is hashed as its bytes come, on the calling
 * thread, and a value of ROW_STREAM bytes or more straight from its page.
 * Memory: one page of each column, and BATCHES batches with helpers (one
 * without), each at most BATCH_BYTES + 2 * ROW_STREAM (a row holds less
 * than ROW_STREAM bytes before an entry, and an entry's value less than
 * ROW_STREAM).
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "formats/parquet/parquet_i.h"
#include "shardfs/digest.h"
#include "shardfs/parquet.h"
#include "shardfs/pool.h"
#include "shardfs/util.h"

#define BATCH_ROWS 8192
/* rows a thread takes at a time to hash: 16 a batch */
#define CHUNK_ROWS 512
#define BATCH_BYTES (1u << 20)
/* batches out at once with helpers: the one being filled, and those
 * being hashed or waiting for their digests to go to the caller */
#define BATCHES 4
#define HASHERS_MAX SFS_PARQUET_ROWS_THREADS_MAX
/* a file of fewer rows is hashed on the calling thread alone */
#define THREADED_ROWS SFS_PARQUET_THREADED_ROWS
/* a row's bytes past this are hashed as they come, never held: a row is
 * as big as the pages of its columns, which their budget bounds */
#define ROW_STREAM (4u << 20)
/* bytes of the file fed to its own SHA-256 at a time (file_piece) */
#define FILE_PIECE (1u << 20)

/* The bytes of rows gathered for their digests. */
struct batch {
	unsigned char *bytes; /* the rows', end to end */
	size_t len, cap;
	size_t ends[BATCH_ROWS]; /* row r is bytes [ends[r - 1], ends[r]) */
	bool streamed[BATCH_ROWS]; /* row r's digest is there already */
	size_t n;
	size_t left; /* its chunks not hashed yet, once out: under lock */
	int rc; /* its first failure hashing, once out: under lock */
	unsigned char digests[BATCH_ROWS * SFS_DIGEST_LEN];
};

/* A row too big to hold (ROW_STREAM): hashed as its bytes come. */
struct big_row {
	struct sfs_digest *d;
	bool on; /* the row being gathered is going to d */
};

/*
 * The whole file's SHA-256 (sfs_parquet_rows_threads's file), taken a
 * piece at a time by a thread that has no row to hash or give.
 */
struct file_sum {
	struct sfs_digest *d; /* NULL: not taken here */
	int fd;
	uint64_t size, at; /* bytes fed to d so far: under lock */
	bool busy; /* a thread feeds d, under lock */
	bool failed; /* a read failed, or the rows did: under lock */
};

struct rows_out;

/* A thread that helps hash the batches handed out and give them. */
struct hasher {
	struct rows_out *o;
	pthread_t t;
	struct sfs_digest *d;
};

/*
 * The rows' digests on their way to the caller.  Batch k (counted from
 * 0) is b[k % nb]: the calling thread fills batch filled and hands it
 * out; any thread then takes its chunks of CHUNK_ROWS rows to hash, and
 * once it is hashed and the batches before it have gone, one thread at a
 * time gives its digests to fn (given counts those that went), which
 * frees its place.  The helpers give before they hash, so that the
 * calling thread finds room to fill and only decodes; it hashes and
 * gives only when every place is taken, and at the end.
 */
struct rows_out {
	const struct sfs_parquet_meta *m;
	sfs_parquet_row_fn fn;
	void *arg;
	uint64_t row; /* the next row fn gets: the giving thread's */
	pthread_mutex_t lock;
	pthread_cond_t cv; /* a batch out, hashed or given; quit */
	struct batch *b[BATCHES];
	unsigned nb; /* places: BATCHES with helpers, else 1 */
	uint64_t filled; /* batches handed out: the caller's, under lock */
	uint64_t hashing; /* the first batch with chunks left to take (a
			   * batch out has one at least), under lock */
	size_t next; /* its next chunk to take, under lock */
	uint64_t given; /* batches given to fn, under lock */
	bool giving; /* a thread gives batch given, under lock */
	bool quit; /* under lock */
	int failed; /* what stopped the digests going to fn: under lock */
	bool hash_failed; /* failed for a SHA-256: the caller says so */
	struct sfs_digest *d; /* the calling thread's */
	struct big_row big; /* the calling thread's */
	struct file_sum fs;
	unsigned nh; /* helpers running */
	struct hasher h[HASHERS_MAX - 1];
};

/* Digest rows [from, to) of b with d. */
static int hash_rows(struct batch *b, size_t from, size_t to,
		     struct sfs_digest *d)
{
	size_t r, start;

	for (r = from; r < to; r++) {
		if (b->streamed[r])
			continue;
		start = r ? b->ends[r - 1] : 0;
		if (sfs_digest_update(d, b->bytes + start,
				      b->ends[r] - start) ||
		    sfs_digest_final(d, b->digests + r * SFS_DIGEST_LEN))
			return -EIO;
	}
	return 0;
}

static size_t chunks(const struct batch *b)
{
	return (b->n + CHUNK_ROWS - 1) / CHUNK_ROWS;
}

/*
 * Hash the next chunk of the batches out with d, if one is left (false
 * when none is).  Called with o->lock held, returns with it held.
 */
static bool hash_chunk(struct rows_out *o, struct sfs_digest *d)
{
	struct batch *b;
	size_t from, to;
	int rc;

	if (o->hashing == o->filled)
		return false;
	b = o->b[o->hashing % o->nb];
	from = o->next++ * CHUNK_ROWS;
	to = b->n - from < CHUNK_ROWS ? b->n : from + CHUNK_ROWS;
	/* past a batch as its last chunk is taken: once hashed, the batch
	 * may be given and its place filled again, never to be taken from */
	if (o->next == chunks(b)) {
		o->hashing++;
		o->next = 0;
	}
	pthread_mutex_unlock(&o->lock);
	rc = hash_rows(b, from, to, d);
	pthread_mutex_lock(&o->lock);
	if (rc && !b->rc)
		b->rc = rc;
	if (--b->left == 0)
		pthread_cond_broadcast(&o->cv);
	return true;
}

/*
 * Give the digests of the next batch to fn, in order, if it is hashed
 * and no other thread is giving (false when not); empty it, which frees
 * its place.  Called with o->lock held, returns with it held.
 */
static bool give_next(struct rows_out *o)
{
	struct batch *b;
	size_t r;
	int rc;

	if (o->giving || o->given == o->filled)
		return false;
	b = o->b[o->given % o->nb];
	if (b->left)
		return false;
	o->giving = true;
	rc = o->failed;
	if (!rc && b->rc) {
		rc = -EIO;
		o->hash_failed = true;
	}
	pthread_mutex_unlock(&o->lock);
	for (r = 0; !rc && r < b->n; r++)
		rc = o->fn(o->arg, o->row++, b->digests + r * SFS_DIGEST_LEN);
	b->n = 0;
	b->len = 0;
	pthread_mutex_lock(&o->lock);
	o->failed = rc;
	o->given++;
	o->giving = false;
	pthread_cond_broadcast(&o->cv);
	return true;
}

/* Whether the file has bytes left to feed its SHA-256. */
static bool file_left(const struct file_sum *fs)
{
	return fs->d && !fs->failed && fs->at < fs->size;
}

/*
 * Feed the next piece of the file to its SHA-256, if it has one left and
 * no other thread is at it (false when not).  A read that fails leaves
 * the SHA-256 to the caller, who says why.  Called with o->lock held,
 * returns with it held.
 */
static bool file_piece(struct rows_out *o)
{
	struct file_sum *fs = &o->fs;
	uint64_t at = fs->at, n;
	int rc;

	if (fs->busy || !file_left(fs))
		return false;
	fs->busy = true;
	n = fs->size - at < FILE_PIECE ? fs->size - at : FILE_PIECE;
	pthread_mutex_unlock(&o->lock);
	rc = sfs_digest_fd_range(fs->d, fs->fd, at, n, o->m->path, NULL);
	pthread_mutex_lock(&o->lock);
	if (rc)
		fs->failed = true;
	else
		fs->at += n;
	fs->busy = false;
	pthread_cond_broadcast(&o->cv);
	return true;
}

/*
 * Wait until the file's SHA-256 is taken, this thread feeding it too;
 * with give_up, only until no thread feeds it.
 */
static void file_finish(struct rows_out *o, bool give_up)
{
	pthread_mutex_lock(&o->lock);
	if (give_up)
		o->fs.failed = true;
	while (file_left(&o->fs) || o->fs.busy)
		if (!file_piece(o))
			pthread_cond_wait(&o->cv, &o->lock);
	pthread_mutex_unlock(&o->lock);
}

static void *hasher_main(void *arg)
{
	struct hasher *h = arg;
	struct rows_out *o = h->o;

	pthread_mutex_lock(&o->lock);
	while (!o->quit)
		if (!give_next(o) && !hash_chunk(o, h->d) && !file_piece(o))
			pthread_cond_wait(&o->cv, &o->lock);
	pthread_mutex_unlock(&o->lock);
	return NULL;
}

/* Start up to want helpers; as many as could be started run (maybe 0). */
static void hashers_start(struct rows_out *o, unsigned want)
{
	struct hasher *h;

	while (o->nh < want && o->nh < HASHERS_MAX - 1) {
		h = &o->h[o->nh];
		h->o = o;
		h->d = sfs_digest_new();
		if (!h->d)
			break;
		if (pthread_create(&h->t, NULL, hasher_main, h)) {
			sfs_digest_free(h->d);
			break;
		}
		o->nh++;
	}
}

static void hashers_stop(struct rows_out *o)
{
	unsigned i;

	pthread_mutex_lock(&o->lock);
	o->quit = true;
	pthread_cond_broadcast(&o->cv);
	pthread_mutex_unlock(&o->lock);
	for (i = 0; i < o->nh; i++) {
		pthread_join(o->h[i].t, NULL);
		sfs_digest_free(o->h[i].d);
	}
}

/*
 * The batch being filled is done: handed out when it holds rows, then
 * room made for the next one (with drain, every batch out given to fn),
 * this thread hashing and giving what no helper has while it waits; with
 * no helper, it hashes and gives this one.  Returns what stopped the
 * digests going to fn, or 0.
 */
static int flush(struct rows_out *o, bool drain)
{
	struct batch *b = o->b[o->filled % o->nb];
	int rc;

	pthread_mutex_lock(&o->lock);
	if (b->n) {
		b->left = chunks(b);
		b->rc = 0;
		o->filled++;
		if (o->nh)
			pthread_cond_broadcast(&o->cv);
	}
	while (drain ? o->given < o->filled : o->filled - o->given == o->nb)
		if (!hash_chunk(o, o->d) && !give_next(o) && !file_piece(o))
			pthread_cond_wait(&o->cv, &o->lock);
	rc = o->failed;
	pthread_mutex_unlock(&o->lock);
	return rc;
}

/* Room for n more bytes in b. */
static int reserve(struct batch *b, size_t n)
{
	if (b->cap - b->len >= n)
		return 0;
	if (n > SIZE_MAX - b->len)
		return -ENOMEM;
	return sfs_grow(&b->bytes, &b->cap, b->len + n, 1);
}

static void put_u32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)v;
	p[1] = (unsigned char)(v >> 8);
	p[2] = (unsigned char)(v >> 16);
	p[3] = (unsigned char)(v >> 24);
}

/* Where the row being gathered begins in b. */
static size_t row_start(const struct batch *b)
{
	return b->n ? b->ends[b->n - 1] : 0;
}

/* The row's bytes gathered so far to big->d when they are too many. */
static int stream(struct batch *b, struct big_row *big)
{
	size_t start = row_start(b);

	if (b->len - start < ROW_STREAM)
		return 0;
	if (sfs_digest_update(big->d, b->bytes + start, b->len - start))
		return -EIO;
	b->len = start;
	big->on = true;
	return 0;
}

/*
 * A value of ROW_STREAM bytes or more goes to big->d from the page, never
 * copied into b: the row's bytes gathered so far (its entry's head last),
 * then the value's.
 */
static int stream_value(struct batch *b, struct big_row *big,
			const struct sfs_pq_value *v)
{
	size_t start = row_start(b);

	if (sfs_digest_update(big->d, b->bytes + start, b->len - start) ||
	    sfs_digest_update(big->d, v->p, v->len))
		return -EIO;
	b->len = start;
	big->on = true;
	return 0;
}

/* The row gathered is done: b holds it, or its digest when it streamed. */
static int end_row(struct batch *b, struct big_row *big)
{
	size_t start = row_start(b);

	b->streamed[b->n] = big->on;
	if (big->on) {
		big->on = false;
		if (sfs_digest_update(big->d, b->bytes + start,
				      b->len - start) ||
		    sfs_digest_final(big->d,
				     b->digests + b->n * SFS_DIGEST_LEN))
			return -EIO;
		b->len = start;
	}
	b->ends[b->n++] = b->len;
	return 0;
}

/*
 * The bytes of the next row of c onto b (to big when the row grows too
 * big); 1 when c has no row left (b holds one "Z" more then), -errno
 * with the column's message.
 */
static int row_bytes(struct sfs_pq_column *c, struct batch *b,
		     struct big_row *big)
{
	const struct sfs_pq_value *v;
	struct sfs_pq_page_header h;
	bool started = false, huge;
	unsigned char *p;
	int rc;

	for (;;) {
		if (!c->loaded || c->at == c->pg.n) {
			rc = sfs_pq_next_data_page(c, &h);
			if (rc < 0)
				return rc;
			if (rc == 0)
				break;
			rc = sfs_pq_decode_page(c, &h);
			if (rc)
				return rc;
			c->loaded = true;
			c->at = c->vat = 0;
			continue;
		}
		if (c->pg.rep[c->at] == 0 && started)
			break;
		if (c->pg.rep[c->at] != 0 && !started)
			return sfs_pq_col_fail(
				c, c->pg.h.at,
				"value %u continues a row that no page began",
				c->at);
		started = true;
		v = c->pg.def[c->at] == c->lf.max_def ? &c->pg.vals[c->vat++] :
							NULL;
		huge = v && v->len >= ROW_STREAM;
		if (reserve(b, v && !huge ? 13 + (size_t)v->len : 13))
			return sfs_pq_col_nomem(c);
		p = b->bytes + b->len;
		p[0] = 'E';
		put_u32(p + 1, c->pg.rep[c->at]);
		put_u32(p + 5, c->pg.def[c->at]);
		b->len += 9;
		if (huge) {
			put_u32(p + 9, v->len);
			b->len += 4;
			if (stream_value(b, big, v))
				return sfs_pq_col_fail(c, c->pg.h.at,
						       "SHA-256 failed");
		} else if (v) {
			put_u32(p + 9, v->len);
			/* fixed sizes are copied inline, not by a call */
			if (v->len == 8)
				memcpy(p + 13, v->p, 8);
			else if (v->len == 4)
				memcpy(p + 13, v->p, 4);
			else
				memcpy(p + 13, v->p, v->len);
			b->len += 4 + (size_t)v->len;
		}
		/* after every entry, not only a value's: a row of nulls
		 * alone can span any number of pages */
		if (stream(b, big))
			return sfs_pq_col_fail(c, c->pg.h.at, "SHA-256 failed");
		c->at++;
	}
	if (reserve(b, 1))
		return sfs_pq_col_nomem(c);
	b->bytes[b->len++] = 'Z';
	return started ? 0 : 1;
}

/* Whether column k of row group g holds no row past the num_rows read. */
static int check_end(struct sfs_pq_column *c, struct batch *b,
		     struct big_row *big, const struct sfs_parquet_meta *m,
		     size_t g, struct sfs_error *err)
{
	unsigned char none[SFS_DIGEST_LEN];
	size_t len = b->len;
	int rc = row_bytes(c, b, big);

	b->len = len;
	if (big->on) {
		big->on = false;
		sfs_digest_final(big->d, none);
	}
	if (rc == 0)
		return sfs_pq_col_fail(
			c, c->pos,
			"the column holds more rows than the row group's %lld",
			(long long)m->row_groups[g].num_rows);
	if (rc == -ENOMEM)
		return sfs_errorf(err, rc, "%s: out of memory", m->path);
	return rc == 1 ? 0 : rc;
}

int sfs_parquet_rows(int fd, const struct sfs_parquet_meta *m,
		     sfs_parquet_row_fn fn, void *arg, struct sfs_error *err)
{
	return sfs_parquet_rows_threads(fd, m, 0, NULL, NULL, fn, arg, err);
}

int sfs_parquet_rows_threads(int fd, const struct sfs_parquet_meta *m,
			     unsigned threads, struct sfs_digest *file,
			     bool *file_hashed, sfs_parquet_row_fn fn,
			     void *arg, struct sfs_error *err)
{
	unsigned char none[SFS_DIGEST_LEN];
	struct sfs_pq_leaf *lf =
		calloc(m->nleaves ? m->nleaves : 1, sizeof(*lf));
	struct sfs_pq_column *cols =
		calloc(m->nleaves ? m->nleaves : 1, sizeof(*cols));
	struct rows_out o = { .m = m, .fn = fn, .arg = arg };
	uint64_t held = 0;
	struct batch *b;
	size_t g, k, nbatches, opened = 0;
	int64_t r;
	int rc, frc;
	bool nomem = !lf || !cols;

	if (m->num_rows < THREADED_ROWS)
		threads = 1;
	else if (!threads)
		threads = sfs_pool_cpus();
	pthread_mutex_init(&o.lock, NULL);
	pthread_cond_init(&o.cv, NULL);
	o.d = sfs_digest_new();
	o.big.d = sfs_digest_new();
	nbatches = threads > 1 ? BATCHES : 1;
	for (k = 0; k < nbatches; k++) {
		o.b[k] = calloc(1, sizeof(*o.b[k]));
		if (!o.b[k])
			nomem = true;
	}
	if (nomem || !o.d || !o.big.d) {
		rc = sfs_errorf(err, -ENOMEM, "%s: out of memory", m->path);
		goto out;
	}
	hashers_start(&o, threads - 1);
	o.nb = o.nh ? BATCHES : 1;
	pthread_mutex_lock(&o.lock);
	o.fs = (struct file_sum){ .d = o.nh ? file : NULL,
				  .fd = fd,
				  .size = m->size };
	pthread_mutex_unlock(&o.lock);
	rc = sfs_pq_leaves(m, lf, err);
	for (g = 0; !rc && g < m->nrow_groups; g++) {
		/* one page of every column at once: one budget */
		for (k = 0; !rc && k < m->nleaves; k++, opened = k) {
			rc = sfs_pq_col_open(&cols[k], fd, m, g, k, &lf[k],
					     err);
			cols[k].held = &held;
		}
		for (r = 0; !rc && r < m->row_groups[g].num_rows; r++) {
			/* filled is this thread's to write: read unlocked */
			b = o.b[o.filled % o.nb];
			for (k = 0; !rc && k < m->nleaves; k++) {
				rc = row_bytes(&cols[k], b, &o.big);
				if (rc == 1)
					rc = sfs_pq_col_fail(
						&cols[k], cols[k].pos,
						"the column holds %lld rows, the row group %lld",
						(long long)r,
						(long long)m->row_groups[g]
							.num_rows);
			}
			if (!rc && end_row(b, &o.big))
				rc = sfs_errorf(err, -EIO, "%s: SHA-256 failed",
						m->path);
			if (rc)
				break;
			if (b->n == BATCH_ROWS || b->len >= BATCH_BYTES)
				rc = flush(&o, false);
		}
		for (k = 0; !rc && k < m->nleaves; k++)
			rc = check_end(&cols[k], o.b[o.filled % o.nb], &o.big,
				       m, g, err);
		for (k = 0; k < opened; k++)
			sfs_pq_col_close(&cols[k]);
		opened = 0;
	}
	/* the rows before a malformed one go to fn first, as they were
	 * read: its error comes first when it has one */
	frc = flush(&o, true);
	if (frc && o.hash_failed)
		rc = sfs_errorf(err, -EIO, "%s: SHA-256 failed", m->path);
	else if (frc)
		rc = frc;
	file_finish(&o, rc != 0);
out:
	for (k = 0; k < opened; k++)
		sfs_pq_col_close(&cols[k]);
	hashers_stop(&o);
	if (file_hashed)
		*file_hashed = o.fs.d && !o.fs.failed;
	/* a SHA-256 fed part of the file is new again */
	if (o.fs.d && o.fs.failed)
		sfs_digest_final(file, none);
	for (k = 0; k < BATCHES; k++) {
		if (o.b[k])
			free(o.b[k]->bytes);
		free(o.b[k]);
	}
	pthread_cond_destroy(&o.cv);
	pthread_mutex_destroy(&o.lock);
	sfs_digest_free(o.big.d);
	sfs_digest_free(o.d);
	free(cols);
	free(lf);
	return rc;
}
