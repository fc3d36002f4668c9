/* Spilled tables: see include/shardfs/spill.h. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shardfs/digest.h"
#include "shardfs/spill.h"
#include "shardfs/util.h"

#define STREAM_PIECE (1 << 20)

enum { BOUNDS, DIGESTS, NFILES };

static const size_t elem[NFILES] = { sizeof(uint64_t), SFS_DIGEST_LEN };

/* Where one record went: in each file, its offset and entry count. */
struct record {
	uint64_t at[NFILES];
	uint64_t count[NFILES];
	bool put;
};

struct sfs_spill {
	char *dir; /* for messages */
	int fd[NFILES]; /* -1: no such file */
	size_t nrec;
	pthread_mutex_t lock;
	struct record *rec; /* under lock */
	uint64_t end[NFILES]; /* bytes reserved in each file, under lock */
	uint64_t total[NFILES]; /* entries put, under lock */
};

/* A unique file in dir, unlinked at once: only the descriptor holds it. */
static int open_unlinked(const char *dir, const char *stem,
			 struct sfs_error *err)
{
	char path[PATH_MAX];
	int fd;

	if ((size_t)snprintf(path, sizeof(path), "%s/.%s-XXXXXX", dir, stem) >=
	    sizeof(path))
		return sfs_errorf(err, -ENAMETOOLONG, "%s: path too long", dir);
	fd = mkostemp(path, O_CLOEXEC);
	if (fd < 0)
		return sfs_errorf(
			err, -errno,
			"%s: cannot write the indexer's temporary files: %s; if the source is read-only, put the index elsewhere with --out DIR",
			dir, strerror(errno));
	if (unlink(path) < 0) {
		int rc = -errno;

		close(fd);
		return sfs_errorf(err, rc, "%s: cannot remove %s: %s", dir,
				  path, strerror(-rc));
	}
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
	fd = open_unlinked(dir, "spill-samples", err);
	if (fd < 0) {
		rc = fd;
		goto out_free;
	}
	s->fd[BOUNDS] = fd;
	if (digests) {
		fd = open_unlinked(dir, "spill-digests", err);
		if (fd < 0) {
			rc = fd;
			goto out_free;
		}
		s->fd[DIGESTS] = fd;
	}
	*out = s;
	return 0;
out_free:
	sfs_spill_free(s);
	return rc;
}

int sfs_spill_put(struct sfs_spill *s, size_t rec, const uint64_t *bounds,
		  uint64_t nbounds, const unsigned char *digests,
		  uint64_t ndigests, struct sfs_error *err)
{
	const void *data[NFILES] = { bounds, digests };
	uint64_t count[NFILES] = { nbounds, ndigests };
	struct record r = { .put = true };
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
	for (f = 0; f < NFILES; f++) {
		r.at[f] = s->end[f];
		r.count[f] = count[f];
		s->end[f] += count[f] * elem[f];
	}
	pthread_mutex_unlock(&s->lock);
	/* the ranges are this record's alone: write them without the lock */
	for (f = 0; !rc && f < NFILES; f++)
		if (count[f])
			rc = sfs_pwrite_full(s->fd[f], data[f],
					     count[f] * elem[f], r.at[f]);
	if (rc)
		return sfs_errorf(
			err, -EIO,
			"%s: cannot write the indexer's temporary files: %s; free space there or put the index elsewhere with --out DIR",
			s->dir, strerror(-rc));
	pthread_mutex_lock(&s->lock);
	s->rec[rec] = r;
	for (f = 0; f < NFILES; f++)
		s->total[f] += count[f];
	pthread_mutex_unlock(&s->lock);
	return 0;
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
	size_t i;

	if (!buf)
		return sfs_errorf(err, -ENOMEM, "out of memory");
	for (i = 0; !rc && i < s->nrec; i++) {
		uint64_t off = s->rec[i].at[f];
		uint64_t left = s->rec[i].count[f] * elem[f];

		while (!rc && left) {
			size_t want = left < STREAM_PIECE ? left : STREAM_PIECE;
			ssize_t got = pread(s->fd[f], buf, want, (off_t)off);

			if (got < 0 && errno == EINTR)
				continue;
			if (got <= 0) {
				rc = sfs_errorf(
					err, -EIO,
					"%s: cannot read back the indexer's temporary files at byte %llu: %s",
					s->dir, (unsigned long long)off,
					got ? strerror(errno) : "end of file");
				break;
			}
			rc = put(arg, buf, (size_t)got);
			off += (uint64_t)got;
			left -= (uint64_t)got;
		}
	}
	free(buf);
	return rc;
}

void sfs_spill_free(struct sfs_spill *s)
{
	int f;

	if (!s)
		return;
	for (f = 0; f < NFILES; f++)
		if (s->fd[f] >= 0)
			close(s->fd[f]);
	pthread_mutex_destroy(&s->lock);
	free(s->rec);
	free(s->dir);
	free(s);
}
