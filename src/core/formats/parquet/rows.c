/*
 * Every row of a Parquet file digested (sfs_parquet_rows), as the samples
 * op hands them: a row's digest is the SHA-256 of, for each leaf column in
 * order, each of the column's entries in the row ("E", its repetition and
 * definition levels as u32 little-endian, and for a value its length as
 * u32 little-endian and its bytes), then "Z".
 *
 * The columns are decoded on the calling thread (column.c) into the bytes
 * of a batch of rows (BATCH_ROWS, or BATCH_BYTES and the row that passes
 * them); a full batch is handed to up to HASHERS_MAX - 1 helper threads,
 * which take it CHUNK_ROWS rows at a time, while the calling thread fills
 * the next one and then hashes the chunks they have not taken: a SHA-256
 * per row costs more than the decoding, and no thread waits while rows
 * wait for their digests.  A batch's digests go to the caller while the
 * helpers hash the next one.  With no helper (one CPU, or a small file)
 * the calling thread digests each batch itself.  A row of more than
 * ROW_STREAM bytes is hashed as its bytes come, on the calling thread,
 * and a value of ROW_STREAM bytes or more straight from its page.  The
 * digests go to the caller in row order, from the calling thread.
 * Memory: one page of each column, and two batches (each at most
 * BATCH_BYTES + 2 * ROW_STREAM: a row holds less than ROW_STREAM bytes
 * before an entry, and an entry's value less than ROW_STREAM).
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
#define HASHERS_MAX SFS_PARQUET_ROWS_THREADS_MAX
/* a file of fewer rows is hashed on the calling thread alone */
#define THREADED_ROWS SFS_PARQUET_THREADED_ROWS
/* a row's bytes past this are hashed as they come, never held: a row is
 * as big as the pages of its columns, which their budget bounds */
#define ROW_STREAM (4u << 20)

/* The bytes of rows gathered for their digests. */
struct batch {
	unsigned char *bytes; /* the rows', end to end */
	size_t len, cap;
	size_t ends[BATCH_ROWS]; /* row r is bytes [ends[r - 1], ends[r]) */
	bool streamed[BATCH_ROWS]; /* row r's digest is there already */
	size_t n;
	unsigned char digests[BATCH_ROWS * SFS_DIGEST_LEN];
};

struct hashers;

/* A thread that helps hash the batches handed out. */
struct hasher {
	struct hashers *hs;
	pthread_t t;
	struct sfs_digest *d;
};

/*
 * The threads helping the calling thread: a batch handed out is hashed a
 * chunk of CHUNK_ROWS rows at a time by whichever thread takes the next
 * chunk, the calling thread too once it has filled the next batch, so
 * that no thread waits while another has rows to hash.
 */
struct hashers {
	pthread_mutex_t lock;
	pthread_cond_t go, done;
	struct batch *b; /* the batch out, under lock */
	size_t next, nchunks; /* its next chunk to take, its chunks: lock */
	size_t left; /* its chunks not hashed yet, under lock */
	int rc; /* the first failure hashing it, under lock */
	bool quit; /* under lock */
	unsigned n; /* helpers running */
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

/*
 * Hash the next chunk of the batch out with d, if one is left (false when
 * none is).  Called with hs->lock held, returns with it held.
 */
static bool hash_chunk(struct hashers *hs, struct sfs_digest *d)
{
	struct batch *b = hs->b;
	size_t from, to;
	int rc;

	if (hs->next == hs->nchunks)
		return false;
	from = hs->next++ * CHUNK_ROWS;
	to = b->n - from < CHUNK_ROWS ? b->n : from + CHUNK_ROWS;
	pthread_mutex_unlock(&hs->lock);
	rc = hash_rows(b, from, to, d);
	pthread_mutex_lock(&hs->lock);
	if (rc && !hs->rc)
		hs->rc = rc;
	if (--hs->left == 0)
		pthread_cond_signal(&hs->done);
	return true;
}

static void *hasher_main(void *arg)
{
	struct hasher *h = arg;
	struct hashers *hs = h->hs;

	pthread_mutex_lock(&hs->lock);
	while (!hs->quit)
		if (!hash_chunk(hs, h->d))
			pthread_cond_wait(&hs->go, &hs->lock);
	pthread_mutex_unlock(&hs->lock);
	return NULL;
}

/* Start up to want helpers; as many as could be started run (maybe 0). */
static void hashers_start(struct hashers *hs, unsigned want)
{
	struct hasher *h;

	pthread_mutex_init(&hs->lock, NULL);
	pthread_cond_init(&hs->go, NULL);
	pthread_cond_init(&hs->done, NULL);
	while (hs->n < want && hs->n < HASHERS_MAX - 1) {
		h = &hs->h[hs->n];
		h->hs = hs;
		h->d = sfs_digest_new();
		if (!h->d)
			break;
		if (pthread_create(&h->t, NULL, hasher_main, h)) {
			sfs_digest_free(h->d);
			break;
		}
		hs->n++;
	}
}

static void hashers_stop(struct hashers *hs)
{
	unsigned i;

	pthread_mutex_lock(&hs->lock);
	hs->quit = true;
	pthread_cond_broadcast(&hs->go);
	pthread_mutex_unlock(&hs->lock);
	for (i = 0; i < hs->n; i++) {
		pthread_join(hs->h[i].t, NULL);
		sfs_digest_free(hs->h[i].d);
	}
	pthread_cond_destroy(&hs->done);
	pthread_cond_destroy(&hs->go);
	pthread_mutex_destroy(&hs->lock);
}

/* Hand the rows of b (some) to the helpers, a chunk at a time. */
static void hand_out(struct hashers *hs, struct batch *b)
{
	pthread_mutex_lock(&hs->lock);
	hs->b = b;
	hs->next = 0;
	hs->nchunks = hs->left = (b->n + CHUNK_ROWS - 1) / CHUNK_ROWS;
	hs->rc = 0;
	pthread_cond_broadcast(&hs->go);
	pthread_mutex_unlock(&hs->lock);
}

/*
 * Hash the chunks of the batch out that no helper has taken, with d, then
 * wait for those they have; the first failure.
 */
static int finish_batch(struct hashers *hs, struct sfs_digest *d)
{
	int rc;

	pthread_mutex_lock(&hs->lock);
	while (hash_chunk(hs, d))
		;
	while (hs->left)
		pthread_cond_wait(&hs->done, &hs->lock);
	rc = hs->rc;
	pthread_mutex_unlock(&hs->lock);
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

/* A row too big to hold (ROW_STREAM): hashed as its bytes come. */
struct big_row {
	struct sfs_digest *d;
	bool on; /* the row being gathered is going to d */
};

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

/* The rows' digests on their way to the caller. */
struct rows_out {
	const struct sfs_parquet_meta *m;
	sfs_parquet_row_fn fn;
	void *arg;
	uint64_t row; /* the next row fn gets */
	struct hashers hs;
	struct sfs_digest *d; /* the calling thread's */
	struct batch *b[2]; /* b[cur] is being filled */
	struct big_row big; /* the calling thread's */
	int cur;
	bool out; /* the other batch is with the helpers */
	int failed; /* what stopped the digests going to fn, or 0 */
	struct sfs_error *err;
};

/* Hand the digests of b to fn, in order; empty b. */
static int give(struct rows_out *o, struct batch *b, int hrc)
{
	size_t r;
	int rc = o->failed;

	if (!rc && hrc)
		rc = sfs_errorf(o->err, -EIO, "%s: SHA-256 failed", o->m->path);
	for (r = 0; !rc && r < b->n; r++)
		rc = o->fn(o->arg, o->row++, b->digests + r * SFS_DIGEST_LEN);
	b->n = 0;
	b->len = 0;
	o->failed = rc;
	return rc;
}

/*
 * The batch being filled is done: the one with the helpers is finished
 * (this thread hashing what they have not taken), this one handed to
 * them, and the digests of the first go to fn while they hash it; with no
 * helpers, or when drain is set (the last batch), this thread hashes this
 * one (with the helpers) and it goes to fn.
 */
static int flush(struct rows_out *o, bool drain)
{
	struct batch *b = o->b[o->cur], *prev = o->b[!o->cur];
	bool had = o->out;
	int hrc = had ? finish_batch(&o->hs, o->d) : 0, rc;

	o->out = false;
	if (b->n && o->hs.n && !o->failed) {
		hand_out(&o->hs, b);
		o->out = true;
	}
	rc = had ? give(o, prev, hrc) : o->failed;
	if (!b->n)
		return rc;
	if (!o->out)
		return give(o, b, rc ? 0 : hash_rows(b, 0, b->n, o->d));
	if (drain) {
		o->out = false;
		return give(o, b, finish_batch(&o->hs, o->d));
	}
	o->cur = !o->cur;
	return rc;
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
	return sfs_parquet_rows_threads(fd, m, 0, fn, arg, err);
}

int sfs_parquet_rows_threads(int fd, const struct sfs_parquet_meta *m,
			     unsigned threads, sfs_parquet_row_fn fn, void *arg,
			     struct sfs_error *err)
{
	struct sfs_pq_leaf *lf =
		calloc(m->nleaves ? m->nleaves : 1, sizeof(*lf));
	struct sfs_pq_column *cols =
		calloc(m->nleaves ? m->nleaves : 1, sizeof(*cols));
	struct rows_out o = { .m = m, .fn = fn, .arg = arg, .err = err };
	uint64_t held = 0;
	struct batch *b;
	size_t g, k, opened = 0;
	int64_t r;
	int rc, frc;

	if (m->num_rows < THREADED_ROWS)
		threads = 1;
	else if (!threads)
		threads = sfs_pool_cpus();
	o.d = sfs_digest_new();
	o.big.d = sfs_digest_new();
	o.b[0] = calloc(1, sizeof(*o.b[0]));
	o.b[1] = threads > 1 ? calloc(1, sizeof(*o.b[1])) : NULL;
	hashers_start(&o.hs, o.b[1] ? threads - 1 : 0);
	if (!lf || !cols || !o.d || !o.big.d || !o.b[0]) {
		rc = sfs_errorf(err, -ENOMEM, "%s: out of memory", m->path);
		goto out;
	}
	rc = sfs_pq_leaves(m, lf, err);
	for (g = 0; !rc && g < m->nrow_groups; g++) {
		/* one page of every column at once: one budget */
		for (k = 0; !rc && k < m->nleaves; k++, opened = k) {
			rc = sfs_pq_col_open(&cols[k], fd, m, g, k, &lf[k],
					     err);
			cols[k].held = &held;
		}
		for (r = 0; !rc && r < m->row_groups[g].num_rows; r++) {
			b = o.b[o.cur];
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
			rc = check_end(&cols[k], o.b[o.cur], &o.big, m, g, err);
		for (k = 0; k < opened; k++)
			sfs_pq_col_close(&cols[k]);
		opened = 0;
	}
	/* the rows before a malformed one go to fn first, as they were
	 * read: its error comes first when it has one */
	frc = flush(&o, true);
	if (frc)
		rc = frc;
out:
	for (k = 0; k < opened; k++)
		sfs_pq_col_close(&cols[k]);
	hashers_stop(&o.hs);
	for (k = 0; k < 2; k++) {
		if (o.b[k])
			free(o.b[k]->bytes);
		free(o.b[k]);
	}
	sfs_digest_free(o.big.d);
	sfs_digest_free(o.d);
	free(cols);
	free(lf);
	return rc;
}
