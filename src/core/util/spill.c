/* Spilled tables: see include/shardfs/spill.h. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shardfs/digest.h"
#include "shardfs/spill.h"
#include "shardfs/util.h"

#define STREAM_PIECE (1 << 20)

enum { BOUNDS, DIGESTS, NFILES };

static const size_t elem[NFILES] = { sizeof(uint64_t), SFS_DIGEST_LEN };

/* Where a piece of a record went in one file: its offset, entry count. */
struct piece {
	uint64_t at;
	uint64_t count;
};

/* A record: its pieces in each file, in the order they were appended. */
struct record {
	struct piece *p[NFILES];
	size_t n[NFILES], cap[NFILES];
	uint64_t count[NFILES]; /* its entries: the pieces' sum */
	bool put;
};

/*
 * The digest table's SHA-256, taken as its bytes come in table order:
 * records before front whole (put, or never to be put, seen at the end),
 * and front's first pieces.  One thread at a time hashes (busy); the
 * piece a thread has just appended to front is hashed from its memory,
 * the others read back.
 */
struct table_sum {
	struct sfs_digest *d; /* NULL: none kept (no digests) */
	size_t front, pieces; /* under lock */
	bool busy; /* a thread is hashing, under lock */
	bool lost; /* a hash or a read back failed: unknown, under lock */
	unsigned char *buf; /* STREAM_PIECE bytes, the busy thread's */
	bool done; /* sum is the table's, after sfs_spill_sum */
	unsigned char sum[SFS_DIGEST_LEN];
};

struct sfs_spill {
	char *dir; /* for messages */
	int fd[NFILES]; /* -1: no such file */
	bool linkable[NFILES]; /* made with O_TMPFILE: may get a name */
	size_t nrec;
	pthread_mutex_t lock;
	struct record *rec; /* under lock */
	uint64_t end[NFILES]; /* bytes reserved in each file, under lock */
	uint64_t total[NFILES]; /* entries put, under lock */
	struct table_sum ts;
};

/* sfs_open_unlinked (util.h), its failure named as the indexer's. */
static int open_unlinked(const char *dir, const char *stem, bool *linkable,
			 struct sfs_error *err)
{
	int fd = sfs_open_unlinked(dir, stem, 0644, linkable);

	if (fd == -ENAMETOOLONG)
		return sfs_errorf(err, fd, "%s: path too long", dir);
	if (fd < 0)
		return sfs_errorf(
			err, fd,
			"%s: cannot write the indexer's temporary files: %s; if the source is read-only, put the index elsewhere with --out DIR",
			dir, strerror(-fd));
	return fd;
}

int sfs_spill_new(const char *dir, size_t nrec, bool digests,
		  struct sfs_spill **out, struct sfs_error *err)
{
	struct sfs_spill *s;
	int rc, fd;

	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		return sfs_errorf(
			err, -errno,
			"%s: cannot create the index directory: %s; if the source is read-only, put the index elsewhere with --out DIR",
			dir, strerror(errno));
	s = calloc(1, sizeof(*s));
	if (!s)
		return sfs_errorf(err, -ENOMEM, "out of memory");
	pthread_mutex_init(&s->lock, NULL);
	s->fd[BOUNDS] = s->fd[DIGESTS] = -1;
	s->nrec = nrec;
	s->dir = strdup(dir);
	s->rec = calloc(nrec + 1, sizeof(*s->rec));
	if (!s->dir || !s->rec) {
		rc = sfs_errorf(err, -ENOMEM, "out of memory");
		goto out_free;
	}
	fd = open_unlinked(dir, "spill-samples", &s->linkable[BOUNDS], err);
	if (fd < 0) {
		rc = fd;
		goto out_free;
	}
	s->fd[BOUNDS] = fd;
	if (digests) {
		fd = open_unlinked(dir, "spill-digests", &s->linkable[DIGESTS],
				   err);
		if (fd < 0) {
			rc = fd;
			goto out_free;
		}
		s->fd[DIGESTS] = fd;
		/* room for the table's header before its payload */
		s->end[DIGESTS] = SFS_SPILL_HEAD;
		s->ts.d = sfs_digest_new();
		if (!s->ts.d) {
			rc = sfs_errorf(err, -ENOMEM, "out of memory");
			goto out_free;
		}
	}
	*out = s;
	return 0;
out_free:
	sfs_spill_free(s);
	return rc;
}

/*
 * Stream n bytes of file f from off to put: mapped a piece at a time (put
 * reads the page cache's pages, not a copy of them: the save hashes and
 * writes gigabytes of digests), or read through buf where the file cannot
 * be mapped.
 */
static int stream_range(const struct sfs_spill *s, int f, uint64_t off,
			uint64_t n, unsigned char *buf,
			int (*put)(void *arg, const void *buf, size_t len),
			void *arg, struct sfs_error *err)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	int rc = 0;

	while (!rc && n) {
		size_t want = n < STREAM_PIECE ? n : STREAM_PIECE;
		size_t skip = (size_t)(off % page);
		void *map = mmap(NULL, skip + want, PROT_READ, MAP_SHARED,
				 s->fd[f], (off_t)(off - skip));
		ssize_t got;

		if (map != MAP_FAILED) {
			rc = put(arg, (unsigned char *)map + skip, want);
			munmap(map, skip + want);
			got = (ssize_t)want;
		} else {
			got = pread(s->fd[f], buf, want, (off_t)off);
			if (got < 0 && errno == EINTR)
				continue;
			if (got <= 0)
				return sfs_errorf(
					err, -EIO,
					"%s: cannot read back the indexer's temporary files at byte %llu: %s",
					s->dir, (unsigned long long)off,
					got ? strerror(errno) : "end of file");
			rc = put(arg, buf, (size_t)got);
		}
		off += (uint64_t)got;
		n -= (uint64_t)got;
	}
	return rc;
}

static int hash_put(void *arg, const void *buf, size_t len)
{
	return sfs_digest_update(arg, buf, len);
}

/*
 * Hash what the digest table's sum can take now, in table order: the
 * pieces of record front not hashed yet and, once it is put, the records
 * after it, until one is still to be filled; unless another thread is at
 * it.  mine is the last piece of record rec, which this thread has just
 * appended (NULL: none): hashed from there.  With end set, every record
 * is put or given up: one never put adds nothing, and the sum is lost
 * when its pieces were hashed.  Called with s->lock held, returns with it
 * held; hashes without it.
 */
static void sum_advance(struct sfs_spill *s, size_t rec, const void *mine,
			bool end)
{
	struct table_sum *ts = &s->ts;
	struct record *r;
	struct piece p;
	bool here;
	int rc;

	if (!ts->d || ts->busy || ts->lost)
		return;
	ts->busy = true;
	while (ts->front < s->nrec) {
		r = &s->rec[ts->front];
		if (end && !r->put) {
			if (ts->pieces) {
				ts->lost = true;
				break;
			}
			ts->front++;
			continue;
		}
		if (ts->pieces == r->n[DIGESTS]) {
			if (!r->put)
				break;
			ts->front++;
			ts->pieces = 0;
			continue;
		}
		p = r->p[DIGESTS][ts->pieces];
		here = mine && ts->front == rec &&
		       ts->pieces + 1 == r->n[DIGESTS];
		pthread_mutex_unlock(&s->lock);
		/* a piece in table order may well be the table's own bytes
		 * (sfs_spill_table_fd): its way to the disk starts now, so
		 * that the save's fsync does not wait for all of them */
		if (here && s->linkable[DIGESTS])
			sync_file_range(s->fd[DIGESTS], (off_t)p.at,
					(off_t)(p.count * SFS_DIGEST_LEN),
					SYNC_FILE_RANGE_WRITE);
		if (here)
			rc = sfs_digest_update(ts->d, mine,
					       p.count * SFS_DIGEST_LEN);
		else if (!ts->buf && !(ts->buf = malloc(STREAM_PIECE)))
			rc = -ENOMEM;
		else
			rc = stream_range(s, DIGESTS, p.at,
					  p.count * SFS_DIGEST_LEN, ts->buf,
					  hash_put, ts->d, NULL);
		pthread_mutex_lock(&s->lock);
		if (rc) {
			ts->lost = true;
			break;
		}
		ts->pieces++;
	}
	ts->busy = false;
}

/*
 * Reserve room for count[f] entries of each file at the end of record rec
 * (under the lock), then write them (without it: the ranges are this
 * piece's alone).  The record then lists them; last marks it put.
 */
static int append(struct sfs_spill *s, size_t rec, const void *data[NFILES],
		  uint64_t count[NFILES], bool last, struct sfs_error *err)
{
	uint64_t at[NFILES];
	struct record *r;
	int f, rc = 0;

	if (s->fd[DIGESTS] < 0)
		count[DIGESTS] = 0;
	pthread_mutex_lock(&s->lock);
	if (rec >= s->nrec || s->rec[rec].put) {
		pthread_mutex_unlock(&s->lock);
		return sfs_errorf(
			err, -EINVAL,
			"%s: spill record %zu out of range or put twice",
			s->dir, rec);
	}
	r = &s->rec[rec];
	for (f = 0; f < NFILES; f++) {
		if (count[f] && r->n[f] == r->cap[f] &&
		    SFS_GROW(r->p[f], r->cap[f], r->n[f] + 1)) {
			pthread_mutex_unlock(&s->lock);
			return sfs_errorf(err, -ENOMEM, "out of memory");
		}
		at[f] = s->end[f];
		s->end[f] += count[f] * elem[f];
	}
	pthread_mutex_unlock(&s->lock);
	for (f = 0; !rc && f < NFILES; f++)
		if (count[f])
			rc = sfs_pwrite_full(s->fd[f], data[f],
					     count[f] * elem[f], at[f]);
	if (rc)
		return sfs_errorf(
			err, -EIO,
			"%s: cannot write the indexer's temporary files: %s; free space there or put the index elsewhere with --out DIR",
			s->dir, strerror(-rc));
	pthread_mutex_lock(&s->lock);
	for (f = 0; f < NFILES; f++) {
		if (count[f])
			r->p[f][r->n[f]++] = (struct piece){ at[f], count[f] };
		r->count[f] += count[f];
		if (last)
			s->total[f] += r->count[f];
	}
	r->put = last;
	sum_advance(s, rec, count[DIGESTS] ? data[DIGESTS] : NULL, false);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

int sfs_spill_append(struct sfs_spill *s, size_t rec, const uint64_t *bounds,
		     uint64_t nbounds, const unsigned char *digests,
		     uint64_t ndigests, struct sfs_error *err)
{
	const void *data[NFILES] = { bounds, digests };
	uint64_t count[NFILES] = { nbounds, ndigests };

	return append(s, rec, data, count, false, err);
}

int sfs_spill_put(struct sfs_spill *s, size_t rec, const uint64_t *bounds,
		  uint64_t nbounds, const unsigned char *digests,
		  uint64_t ndigests, struct sfs_error *err)
{
	const void *data[NFILES] = { bounds, digests };
	uint64_t count[NFILES] = { nbounds, ndigests };

	return append(s, rec, data, count, true, err);
}

bool sfs_spill_has_digests(const struct sfs_spill *s)
{
	return s->fd[DIGESTS] >= 0;
}

uint64_t sfs_spill_count(const struct sfs_spill *s, bool digests)
{
	return s->total[digests ? DIGESTS : BOUNDS];
}

int sfs_spill_stream(const struct sfs_spill *s, bool digests,
		     int (*put)(void *arg, const void *buf, size_t len),
		     void *arg, struct sfs_error *err)
{
	int f = digests ? DIGESTS : BOUNDS, rc = 0;
	unsigned char *buf = malloc(STREAM_PIECE);
	size_t i, k;

	if (!buf)
		return sfs_errorf(err, -ENOMEM, "out of memory");
	for (i = 0; !rc && i < s->nrec; i++)
		for (k = 0; !rc && s->rec[i].put && k < s->rec[i].n[f]; k++)
			rc = stream_range(s, f, s->rec[i].p[f][k].at,
					  s->rec[i].p[f][k].count * elem[f],
					  buf, put, arg, err);
	free(buf);
	return rc;
}

bool sfs_spill_sum(struct sfs_spill *s, unsigned char out[SFS_DIGEST_LEN])
{
	struct table_sum *ts = &s->ts;

	pthread_mutex_lock(&s->lock);
	if (!ts->done)
		sum_advance(s, 0, NULL, true);
	if (!ts->done && ts->d && !ts->lost)
		ts->done = !sfs_digest_final(ts->d, ts->sum);
	pthread_mutex_unlock(&s->lock);
	if (ts->done)
		memcpy(out, ts->sum, SFS_DIGEST_LEN);
	return ts->done;
}

int sfs_spill_table_fd(const struct sfs_spill *s)
{
	uint64_t at = SFS_SPILL_HEAD;
	size_t i, k;

	if (s->fd[DIGESTS] < 0 || !s->linkable[DIGESTS])
		return -1;
	for (i = 0; i < s->nrec; i++) {
		const struct record *r = &s->rec[i];

		if (!r->put && r->n[DIGESTS])
			return -1;
		for (k = 0; r->put && k < r->n[DIGESTS]; k++) {
			if (r->p[DIGESTS][k].at != at)
				return -1;
			at += r->p[DIGESTS][k].count * SFS_DIGEST_LEN;
		}
	}
	return at == s->end[DIGESTS] ? s->fd[DIGESTS] : -1;
}

void sfs_spill_free(struct sfs_spill *s)
{
	size_t i;
	int f;

	if (!s)
		return;
	for (f = 0; f < NFILES; f++)
		if (s->fd[f] >= 0)
			close(s->fd[f]);
	pthread_mutex_destroy(&s->lock);
	for (i = 0; s->rec && i < s->nrec; i++)
		for (f = 0; f < NFILES; f++)
			free(s->rec[i].p[f]);
	free(s->rec);
	sfs_digest_free(s->ts.d);
	free(s->ts.buf);
	free(s->dir);
	free(s);
}
