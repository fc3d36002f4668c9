/*
 * The log of a followed stream (follow.h): the shards accepted, kept for a
 * restart, which finds those already consumed and maybe deleted where
 * they were.
 *
 * The log is text, one line per shard: "<samples> <size> <mtime_ns>
 * <name>\n", after a first line "shardfs-follow 1\n".  Each line is
 * appended with one write (O_APPEND), so daemons over one source (one per
 * rank) may append to one file; a load sorts the lines by name and merges
 * repeats.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "shardfs/follow.h"
#include "shardfs/index.h"
#include "shardfs/util.h"

#include "follow_i.h"

#define LOG_HEAD "shardfs-follow 1\n"
/* how long a lock of the log held by another is waited for */
#define LOCK_WAIT_MS 1000
/* open_log_file's error for a log that is not a regular file */
#define NOT_REGULAR (-EMEDIUMTYPE)
/* a log larger than this is not one (a line per shard, 10^6 shards) */
#define LOG_MAX (SFS_FOLLOW_LINE_MAX * (size_t)1000000)

static int by_path(const void *a, const void *b)
{
	return strcmp(((const struct sfs_shard *)a)->path,
		      ((const struct sfs_shard *)b)->path);
}

/* One number of a log line at *p, then the separator sep: digits, no
 * leading zero, within UINT64_MAX. */
static bool log_number(const char **p, const char *end, char sep, uint64_t *v)
{
	const char *s = *p;
	uint64_t x = 0;

	if (s == end || *s < '0' || *s > '9' ||
	    (*s == '0' && s + 1 < end && s[1] != sep))
		return false;
	for (; s < end && *s >= '0' && *s <= '9'; s++) {
		if (x > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
			return false;
		x = x * 10 + (uint64_t)(*s - '0');
	}
	if (s == end || *s != sep)
		return false;
	*v = x;
	*p = s + 1;
	return true;
}

/* A signed number (a time before 1970 is negative), as PRId64 writes
 * it: an optional '-' (never "-0"), then log_number within int64_t. */
static bool log_signed(const char **p, const char *end, char sep, int64_t *v)
{
	const char *s = *p;
	bool neg = s < end && *s == '-';
	uint64_t x;

	s += neg;
	if (!log_number(&s, end, sep, &x) ||
	    x > (neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX) ||
	    (neg && !x))
		return false;
	*v = !neg ? (int64_t)x : x > INT64_MAX ? INT64_MIN : -(int64_t)x;
	*p = s;
	return true;
}

int sfs_follow_log_parse(const char *buf, size_t len, const char *name,
			 struct sfs_shard **out, size_t *n,
			 struct sfs_error *err)
{
	struct sfs_shard *s = NULL;
	const char *p = buf, *end = buf + len;
	size_t cap = 0, cnt = 0, line = 1, i, j;
	int rc = 0;

	*out = NULL;
	*n = 0;
	if (len < strlen(LOG_HEAD) || memcmp(buf, LOG_HEAD, strlen(LOG_HEAD)))
		return sfs_errorf(
			err, -EINVAL,
			"%s: line 1: not a shardfs follow log (it starts \"%s\"): move it away if it is not shardfs's",
			name, "shardfs-follow 1");
	for (p += strlen(LOG_HEAD); p < end; p++) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		struct sfs_shard sh = { 0 };

		line++;
		if (!nl)
			break; /* torn: the append did not finish */
		if (nl - p > SFS_FOLLOW_LINE_MAX ||
		    !log_number(&p, nl, ' ', &sh.nsamples) ||
		    !log_number(&p, nl, ' ', &sh.size) ||
		    !log_signed(&p, nl, ' ', &sh.mtime_ns)) {
			rc = -EINVAL;
			break;
		}
		sh.path = strndup(p, (size_t)(nl - p));
		if (!sh.path) {
			rc = -ENOMEM;
			break;
		}
		if (memchr(p, '\0', (size_t)(nl - p)) ||
		    !sfs_follow_name_ok(sh.path)) {
			free(sh.path);
			rc = -EINVAL;
			break;
		}
		if (SFS_GROW(s, cap, cnt + 1)) {
			free(sh.path);
			rc = -ENOMEM;
			break;
		}
		s[cnt++] = sh;
		p = nl;
	}
	if (rc == -ENOMEM) {
		sfs_follow_shards_free(s, cnt);
		return sfs_errorf(err, rc, "out of memory");
	}
	if (rc) {
		sfs_follow_shards_free(s, cnt);
		return sfs_errorf(
			err, rc,
			"%s: line %zu: not \"<samples> <size> <mtime_ns> <name>\": the log is damaged; removing it is safe only if no consumed shard was deleted from the source: else restore the deleted shards, or remove it and restart with start= counted from the first shard still there (docs/follow.md)",
			name, line);
	}
	if (cnt)
		qsort(s, cnt, sizeof(*s), by_path);
	for (i = 0, j = 0; i < cnt; i++) {
		if (j && !strcmp(s[j - 1].path, s[i].path)) {
			if (s[j - 1].nsamples != s[i].nsamples ||
			    s[j - 1].size != s[i].size ||
			    s[j - 1].mtime_ns != s[i].mtime_ns) {
				rc = sfs_errorf(
					err, -EINVAL,
					"%s: shard %s is logged twice, with different samples, size or time: it was replaced while followed; the stream cannot be resumed exactly (docs/follow.md)",
					name, s[i].path);
				break;
			}
			free(s[i].path);
			continue;
		}
		s[j++] = s[i];
	}
	if (rc) {
		for (; i < cnt; i++)
			free(s[i].path);
		sfs_follow_shards_free(s, j);
		return rc;
	}
	*out = s;
	*n = j;
	return 0;
}

/*
 * Lock the log (other daemons over the source append to it too); a file
 * system without locks is written without.  Anyone who may read the log
 * may lock it, so a lock held by another is waited for LOCK_WAIT_MS at
 * most, never for ever: -EWOULDBLOCK then.
 */
static int log_lock(int fd, int op)
{
	const struct timespec pause = { 0, 10 * 1000000 };
	int waited = 0;

	while (flock(fd, op | LOCK_NB) < 0) {
		if (errno == EWOULDBLOCK && waited < LOCK_WAIT_MS) {
			nanosleep(&pause, NULL);
			waited += 10;
			continue;
		}
		if (errno != EINTR)
			return errno == ENOLCK || errno == EOPNOTSUPP ? 0 :
									-errno;
	}
	return 0;
}

/* Why the log (or its directory) at this place is not used, for -rc. */
static const char *not_used(int rc)
{
	if (rc == -ELOOP || rc == -EXDEV)
		return "a symlink on its path, not followed";
	if (rc == -EBADMSG)
		return "its last bytes hold no line end";
	if (rc == -EWOULDBLOCK)
		return "locked by another process for over a second";
	if (rc == NOT_REGULAR)
		return "not a regular file";
	return strerror(-rc);
}

/* Open the log beneath the index directory dirfd, never through a
 * symlink, and only a regular file (a FIFO planted there must not block
 * the daemon).  Returns the descriptor or -errno; NOT_REGULAR: not a
 * regular file. */
static int open_log_file(int dirfd, int flags, mode_t mode)
{
	struct stat st;
	int fd = sfs_open_beneath(dirfd, SFS_FOLLOW_LOG, flags | O_NONBLOCK,
				  mode);

	if (fd < 0)
		return fd;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return NOT_REGULAR;
	}
	return fd;
}

/* Read the log beneath dirfd back, when there is one: under a shared
 * lock, so that an append under way is not taken for a torn one.  *unused
 * (set to a reason, the log left alone) when it is a symlink or not a
 * regular file. */
static int load_log(struct sfs_follow *f, int dirfd, bool write_log,
		    const char **unused, struct sfs_error *err)
{
	struct sfs_index *idx = f->idx;
	struct sfs_shard *s;
	struct stat st;
	char *buf;
	size_t n, i;
	ssize_t got;
	int fd = open_log_file(dirfd, O_RDONLY, 0), rc;

	*unused = NULL;
	if (fd == -ENOENT)
		return 0;
	if (fd == -ELOOP || fd == -EXDEV || fd == NOT_REGULAR) {
		*unused = not_used(fd);
		return 0;
	}
	if (fd < 0)
		return sfs_errorf(err, fd, "%s: %s", f->log_path,
				  strerror(-fd));
	/* held by another too long: read as it is (a line being appended
	 * then looks torn, and is left out) */
	rc = log_lock(fd, LOCK_SH);
	if (rc && rc != -EWOULDBLOCK) {
		close(fd);
		return sfs_errorf(err, rc, "%s: cannot lock it: %s",
				  f->log_path, strerror(-rc));
	}
	if (fstat(fd, &st) < 0 || (uint64_t)st.st_size > LOG_MAX) {
		close(fd);
		return sfs_errorf(err, -EINVAL,
				  "%s: larger than a follow log can be",
				  f->log_path);
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		close(fd);
		return sfs_errorf(err, -ENOMEM, "out of memory");
	}
	got = sfs_pread_full(fd, buf, (size_t)st.st_size, 0);
	close(fd); /* and its lock */
	if (got < 0) {
		free(buf);
		return sfs_errorf(err, (int)got, "%s: %s", f->log_path,
				  strerror((int)-got));
	}
	/* a log cut short in its first line (a crash as it was created)
	 * is an empty one */
	if ((size_t)got < strlen(LOG_HEAD) &&
	    !memcmp(buf, LOG_HEAD, (size_t)got))
		got = 0;
	if (got && buf[got - 1] != '\n')
		sfs_follow_notef(
			f,
			"%s: its last line is cut short (an append that did not finish: a full disk, a crash): left out, its shard is read again from the source%s",
			f->log_path,
			write_log ?
				"; the cut line is removed before the next append" :
				"");
	s = NULL;
	n = 0;
	rc = got ? sfs_follow_log_parse(buf, (size_t)got, f->log_path, &s, &n,
					err) :
		   0;
	free(buf);
	if (rc)
		return rc;
	f->held = calloc(n ? n : 1, sizeof(*f->held));
	if (!f->held) {
		sfs_follow_shards_free(s, n);
		return sfs_errorf(err, -ENOMEM, "out of memory");
	}
	for (i = 0; i < n; i++) {
		s[i].first_sample = idx->nsamples;
		s[i].bounds_at = SFS_NO_BOUNDS;
		idx->nsamples += s[i].nsamples;
	}
	idx->shards = s;
	idx->nshards = f->shards_cap = n;
	f->held_cap = n ? n : 1;
	return 0;
}

/*
 * With the log's lock held: make the log end with a whole line, as an
 * append must find it.  An append cut short (a full disk, a process that
 * died) left a line without its '\n'; the next append would glue onto it
 * a line naming no shard and lose its own, so the cut line is removed.  A
 * log cut in its first line is written again.  Sets *size to the log's
 * size after.  Returns 0, or -errno; -EBADMSG when the tail holds no line
 * end (not a log this code wrote).
 */
static int log_mend(int fd, uint64_t *size)
{
	char tail[SFS_FOLLOW_LINE_MAX + 1];
	uint64_t at;
	ssize_t got;
	struct stat st;
	size_t i;

	if (fstat(fd, &st) < 0)
		return -errno;
	*size = (uint64_t)st.st_size;
	if (*size < strlen(LOG_HEAD)) {
		if (ftruncate(fd, 0) < 0)
			return -errno;
		*size = strlen(LOG_HEAD);
		return sfs_write_full(fd, LOG_HEAD, strlen(LOG_HEAD));
	}
	at = *size > sizeof(tail) ? *size - sizeof(tail) : 0;
	got = sfs_pread_full(fd, tail, (size_t)(*size - at), at);
	if (got < 0)
		return (int)got;
	if (got != (ssize_t)(*size - at))
		return -EIO;
	if (tail[got - 1] == '\n')
		return 0;
	for (i = (size_t)got; i > 0 && tail[i - 1] != '\n'; i--)
		;
	if (!i)
		return -EBADMSG;
	*size = at + i;
	return ftruncate(fd, (off_t)*size) < 0 ? -errno : 0;
}

/* Note that the log is not kept (why: not_used's). */
static void log_not_kept(struct sfs_follow *f, const char *why)
{
	sfs_follow_notef(
		f,
		"%s: cannot keep the follow log (%s): the stream is served, but a restart needs every shard still in the source (give index=DIR on a writable disk)",
		f->log_path, why);
}

/* Open the log beneath dirfd for appending, its last line mended. */
static void open_log(struct sfs_follow *f, int dirfd)
{
	uint64_t size;
	int rc;

	f->log_fd = open_log_file(dirfd, O_RDWR | O_APPEND | O_CREAT, 0644);
	if (f->log_fd < 0) {
		rc = f->log_fd;
		goto fail;
	}
	rc = log_lock(f->log_fd, LOCK_EX);
	if (rc)
		goto fail;
	rc = log_mend(f->log_fd, &size);
	log_lock(f->log_fd, LOCK_UN);
	if (rc)
		goto fail;
	return;
fail:
	log_not_kept(f, not_used(rc));
	if (f->log_fd >= 0)
		close(f->log_fd);
	f->log_fd = -1;
}

/*
 * The index directory, opened (and with create, made when missing)
 * without following a symlink: SRC/.shardfs beneath the source, which
 * its producer writes; an index= directory as given, but for a symlink
 * as its last component.  Returns the descriptor or -errno.
 */
static int open_index_dir(const struct sfs_follow *f, const char *index_dir,
			  bool create)
{
	int base = index_dir ? AT_FDCWD : f->srcfd, fd;
	const char *name = index_dir ? index_dir : SFS_INDEX_DIR;
	struct stat st;

	if (create && mkdirat(base, name, 0755) < 0 && errno != EEXIST)
		return -errno;
	if (!index_dir)
		return sfs_open_beneath(f->srcfd, name, O_RDONLY | O_DIRECTORY,
					0);
	fd = open(name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == ENOTDIR && !lstat(name, &st) &&
	    S_ISLNK(st.st_mode))
		return -ELOOP; /* O_DIRECTORY's answer to a symlink */
	return fd < 0 ? -errno : fd;
}

/* (follow_i.h) */
int sfs_follow_log_append(struct sfs_follow *f, const struct sfs_shard *sh)
{
	char line[SFS_FOLLOW_LINE_MAX + 1];
	uint64_t size;
	ssize_t put;
	int len, rc;

	if (f->log_fd < 0)
		return 0;
	len = snprintf(line, sizeof(line),
		       "%" PRIu64 " %" PRIu64 " %" PRId64 " %s\n", sh->nsamples,
		       sh->size, sh->mtime_ns, sh->path);
	if (len < 0 || (size_t)len >= sizeof(line))
		return 0; /* shard_name keeps a line within its bound */
	rc = log_lock(f->log_fd, LOCK_EX);
	if (rc)
		goto fail;
	rc = log_mend(f->log_fd, &size);
	if (!rc) {
		put = write(f->log_fd, line, (size_t)len);
		if (put != len) {
			rc = put < 0 ? -errno : -ENOSPC;
			if (put > 0 && ftruncate(f->log_fd, (off_t)size) < 0)
				rc = -errno;
		}
	}
	log_lock(f->log_fd, LOCK_UN);
	if (!rc)
		return 0;
fail:
	sfs_follow_notef(
		f,
		"%s: cannot append to the follow log (%s): a restart needs every shard still in the source",
		f->log_path, not_used(rc));
	close(f->log_fd);
	f->log_fd = -1;
	return 0;
}

/* (follow_i.h) */
int sfs_follow_log_start(struct sfs_follow *f, const char *index_dir,
			 bool write_log, struct sfs_error *err)
{
	const char *unused = NULL;
	char *dir = sfs_index_dir(f->source, index_dir);
	int rc = 0, dirfd;

	if (!dir || asprintf(&f->log_path, "%s/%s", dir, SFS_FOLLOW_LOG) < 0) {
		f->log_path = NULL;
		free(dir);
		return sfs_errorf(err, -ENOMEM, "out of memory");
	}
	free(dir);
	dirfd = open_index_dir(f, index_dir, write_log);
	if (dirfd >= 0)
		rc = load_log(f, dirfd, write_log, &unused, err);
	else if (dirfd != -ENOENT || write_log)
		unused = not_used(dirfd);
	if (rc)
		goto out;
	if (unused && write_log)
		log_not_kept(f, unused);
	else if (unused)
		sfs_follow_notef(
			f,
			"%s: not read (%s): the stream is the shards in the source now",
			f->log_path, unused);
	else if (write_log)
		open_log(f, dirfd);
out:
	if (dirfd >= 0)
		close(dirfd);
	return rc;
}
