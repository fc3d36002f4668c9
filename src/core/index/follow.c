/*
 * The stream of a source that grows (follow.h): its shards in name order,
 * scanned as they appear, and the log that keeps them for a restart.
 *
 * The log is text, one line per shard: "<samples> <size> <mtime_ns>
 * <name>\n", after a first line "shardfs-follow 1\n".  Each line is
 * appended with one write (O_APPEND), so daemons over one source (one per
 * rank) may append to one file; a load sorts the lines by name and merges
 * repeats.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
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

#define LOG_HEAD "shardfs-follow 1\n"
/* how long a lock of the log held by another is waited for */
#define LOCK_WAIT_MS 1000
/* open_log_file's error for a log that is not a regular file */
#define NOT_REGULAR (-EMEDIUMTYPE)
/* a log larger than this is not one (a line per shard, 10^6 shards) */
#define LOG_MAX (SFS_FOLLOW_LINE_MAX * (size_t)1000000)

static void note(struct sfs_follow *f, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void note(struct sfs_follow *f, const char *fmt, ...)
{
	char msg[SFS_ERROR_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (f->note)
		f->note(f->note_arg, msg);
}

/* A time sfs_mtime_ns holds without overflow: the log's int64_t ns. */
static bool mtime_fits(const struct stat *st)
{
	return st->st_mtim.tv_sec > INT64_MIN / 1000000000 &&
	       st->st_mtim.tv_sec < INT64_MAX / 1000000000;
}

/* A name the stream may hold: directly in the source, no '\n' (a log line
 * each), not hidden, not temporary, not the end marker. */
static bool shard_name(const char *name)
{
	size_t len = strlen(name);

	return name[0] != '.' && !strchr(name, '\n') && !strchr(name, '/') &&
	       !(len >= 4 && !strcmp(name + len - 4, ".tmp")) &&
	       sfs_index_path_ok(name) && len < SFS_FOLLOW_LINE_MAX - 64;
}

void sfs_follow_shards_free(struct sfs_follow_shard *s, size_t n)
{
	size_t i;

	for (i = 0; s && i < n; i++) {
		free(s[i].path);
		free(s[i].bounds);
	}
	free(s);
}

static int by_path(const void *a, const void *b)
{
	return strcmp(((const struct sfs_follow_shard *)a)->path,
		      ((const struct sfs_follow_shard *)b)->path);
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
			 struct sfs_follow_shard **out, size_t *n,
			 struct sfs_error *err)
{
	struct sfs_follow_shard *s = NULL;
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
		struct sfs_follow_shard sh = { 0 };

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
		if (memchr(p, '\0', (size_t)(nl - p)) || !shard_name(sh.path)) {
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
	struct sfs_follow_shard *s;
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
		note(f,
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
	for (i = 0; i < n; i++) {
		s[i].first = f->nsamples;
		f->nsamples += s[i].nsamples;
	}
	f->shards = s;
	f->nshards = f->cap = n;
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
	note(f,
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

int sfs_follow_open(const char *source, const char *index_dir, bool write_log,
		    const struct sfs_format_ops *format,
		    sfs_follow_note_fn note_fn, void *note_arg,
		    struct sfs_follow **out, struct sfs_error *err)
{
	struct sfs_follow *f = calloc(1, sizeof(*f));
	const char *unused = NULL;
	char *dir = NULL, names[64];
	int rc = 0, dirfd = -1;

	if (!f)
		return sfs_errorf(err, -ENOMEM, "out of memory");
	f->log_fd = -1;
	f->chunk_samples_max = SFS_FOLLOW_CHUNK_SAMPLES_MAX;
	f->note = note_fn;
	f->note_arg = note_arg;
	f->format = format;
	f->source = realpath(source, NULL);
	f->srcfd = f->source ?
			   open(f->source, O_RDONLY | O_DIRECTORY | O_CLOEXEC) :
			   -1;
	if (f->srcfd < 0) {
		rc = sfs_errorf(
			err, -errno,
			"%s: %s: give the directory the producer writes shards into",
			source, strerror(errno));
		goto fail;
	}
	if (format && !format->concatenates) {
		rc = sfs_errorf(
			err, -EINVAL,
			"format=%s cannot be followed: only formats whose files concatenate (%s) can",
			format->name,
			sfs_format_concatenating_names(0, ", ", names,
						       sizeof(names)));
		goto fail;
	}
	dir = sfs_index_dir(f->source, index_dir);
	if (!dir || asprintf(&f->log_path, "%s/%s", dir, SFS_FOLLOW_LOG) < 0) {
		f->log_path = NULL;
		rc = sfs_errorf(err, -ENOMEM, "out of memory");
		goto fail;
	}
	dirfd = open_index_dir(f, index_dir, write_log);
	if (dirfd >= 0)
		rc = load_log(f, dirfd, write_log, &unused, err);
	else if (dirfd != -ENOENT || write_log)
		unused = not_used(dirfd);
	if (rc)
		goto fail;
	if (unused && write_log)
		log_not_kept(f, unused);
	else if (unused)
		note(f,
		     "%s: not read (%s): the stream is the shards in the source now",
		     f->log_path, unused);
	else if (write_log)
		open_log(f, dirfd);
	if (!f->format && f->nshards)
		f->format = sfs_format_detect(f->shards[0].path);
	if (dirfd >= 0)
		close(dirfd);
	free(dir);
	*out = f;
	return 0;
fail:
	if (dirfd >= 0)
		close(dirfd);
	free(dir);
	sfs_follow_free(f);
	return rc;
}

static void forget_refusals(struct sfs_follow *f)
{
	size_t i;

	for (i = 0; i < f->nrefused; i++)
		free(f->refused[i].name);
	f->nrefused = 0;
}

void sfs_follow_free(struct sfs_follow *f)
{
	if (!f)
		return;
	sfs_follow_shards_free(f->shards, f->nshards);
	if (f->srcfd >= 0)
		close(f->srcfd);
	if (f->log_fd >= 0)
		close(f->log_fd);
	free(f->source);
	free(f->log_path);
	forget_refusals(f);
	free(f->refused);
	free(f);
}

/* Note a refusal of name once, while its size and mtime stay: true when
 * it is new (or changed), to be noted. */
static bool refuse_once(struct sfs_follow *f, const char *name,
			const struct stat *st)
{
	struct sfs_follow_refusal r = { .size = (uint64_t)st->st_size,
					.mtime_ns =
						mtime_fits(st) ?
							sfs_mtime_ns(st) :
							st->st_mtim.tv_sec };
	size_t lo = SFS_PARTITION_POINT(i, 0, f->nrefused,
					strcmp(f->refused[i].name, name) < 0);

	if (lo < f->nrefused && !strcmp(f->refused[lo].name, name)) {
		struct sfs_follow_refusal *old = &f->refused[lo];
		bool same = old->size == r.size && old->mtime_ns == r.mtime_ns;

		old->size = r.size;
		old->mtime_ns = r.mtime_ns;
		return !same;
	}
	if (f->nrefused >= SFS_FOLLOW_REFUSED_MAX) {
		forget_refusals(f);
		lo = 0;
	}
	r.name = strdup(name);
	if (!r.name || SFS_GROW(f->refused, f->refused_cap, f->nrefused + 1)) {
		free(r.name);
		return true;
	}
	memmove(&f->refused[lo + 1], &f->refused[lo],
		(f->nrefused - lo) * sizeof(*f->refused));
	f->refused[lo] = r;
	f->nrefused++;
	return true;
}

/* Scan shard name (open on fd, st its stat) with ops into sh. */
static int scan_shard(const struct sfs_follow *f,
		      const struct sfs_format_ops *ops, const char *name,
		      int fd, const struct stat *st,
		      struct sfs_follow_shard *sh, struct sfs_error *err)
{
	struct sfs_scan_in in = { .fd = fd,
				  .path = name,
				  .size = (uint64_t)st->st_size,
				  .max_samples = f->chunk_samples_max };
	struct sfs_scan sc = { 0 };
	struct stat after;
	int rc;

	if (!mtime_fits(st))
		return sfs_errorf(
			err, -ERANGE,
			"%s: its modification time (%lld s from 1970) is out of what the follow log holds (nanoseconds from 1970 in 64 bits: years 1678 to 2261): touch it",
			name, (long long)st->st_mtim.tv_sec);
	/* an empty shard holds no sample (a producer's filter left none) */
	if (st->st_size == 0) {
		sh->bounds = calloc(1, sizeof(*sh->bounds));
		if (!sh->bounds)
			return sfs_errorf(err, -ENOMEM, "out of memory");
		sh->nsamples = sh->prefix_len = sh->size = 0;
		sh->newline_missing = false;
		sh->mtime_ns = sfs_mtime_ns(st);
		return 0;
	}
	rc = sfs_format_scan(ops, &in, &sc, err);
	free(rc ? sc.bounds : NULL);
	/* its boundaries are kept until its windows are laid out: their
	 * cost is bounded before it is allocated */
	if (rc && sc.nsamples > in.max_samples)
		return sfs_errorf(
			err, -EFBIG,
			"%s: holds more than %" PRIu64
			" samples, the most a followed chunk may (8 bytes of the daemon's memory each until its windows are laid out): write smaller chunks",
			name, in.max_samples);
	if (rc)
		return rc;
	/* written to while scanned: not final yet */
	if (fstat(fd, &after) < 0 || after.st_size != st->st_size ||
	    sfs_mtime_ns(&after) != sfs_mtime_ns(st)) {
		free(sc.bounds);
		return sfs_errorf(
			err, -EAGAIN,
			"%s changed while it was read: a shard must not change once it has its name (write it under a temporary name, then rename it)",
			name);
	}
	if (!sc.sliceable) {
		free(sc.bounds);
		return sfs_errorf(err, -EINVAL, "%s: cannot be cut", name);
	}
	/* bytes every slice starts with would, concatenated with the other
	 * chunks' slices, apply to their samples too */
	if (sc.prefix_len) {
		free(sc.bounds);
		return sfs_errorf(
			err, -EINVAL,
			"%s: a global pax header at byte 0 (%llu bytes before its first member): in a followed stream it would apply to the members of every chunk after it (renaming them); write chunks without one (Python's tarfile: no pax_headers=; GNU tar: --format=gnu or ustar)",
			name, (unsigned long long)sc.prefix_len);
	}
	sh->bounds = sc.bounds;
	sh->bounds_from = 0;
	sh->nsamples = sc.nsamples;
	sh->prefix_len = sc.prefix_len;
	sh->newline_missing = sc.newline_missing;
	sh->size = (uint64_t)st->st_size;
	sh->mtime_ns = sfs_mtime_ns(st);
	return 0;
}

/* Append sh's line to the log: with its lock, after the last whole line;
 * a line cut short (a full disk) is taken back out. */
static int append_log(struct sfs_follow *f, const struct sfs_follow_shard *sh)
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
	note(f,
	     "%s: cannot append to the follow log (%s): a restart needs every shard still in the source",
	     f->log_path, not_used(rc));
	close(f->log_fd);
	f->log_fd = -1;
	return 0;
}

/* What became of a name a scan tried. */
enum { SKIPPED, ACCEPTED, WAITING };

/* Try to accept shard name: ACCEPTED; SKIPPED, not a shard or refused
 * (noted); WAITING, a shard not ready (malformed, written to: noted),
 * which holds back the names after it; -ENOMEM. */
static int accept(struct sfs_follow *f, const char *name)
{
	const struct sfs_format_ops *ops = sfs_format_detect(name);
	struct sfs_follow_shard sh = { 0 };
	struct sfs_error e = { 0 };
	struct stat st;
	char names[64];
	int fd, rc;

	if (!ops)
		return SKIPPED; /* not a shard: a README, a marker */
	fd = openat(f->srcfd, name,
		    O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return SKIPPED; /* gone again, or a symlink */
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return SKIPPED;
	}
	if (f->nshards && strcmp(name, f->shards[f->nshards - 1].path) < 0) {
		if (refuse_once(f, name, &st))
			note(f,
			     "%s/%s: refused: its name sorts before %s, already in the stream (serving it would change what was served); name shards in the order they are written",
			     f->source, name, f->shards[f->nshards - 1].path);
		close(fd);
		return SKIPPED;
	}
	if (!f->format && !ops->concatenates) {
		if (refuse_once(f, name, &st))
			note(f,
			     "%s/%s: refused: %s shards cannot be followed, only %s",
			     f->source, name, ops->name,
			     sfs_format_concatenating_names(0, " and ", names,
							    sizeof(names)));
		close(fd);
		return SKIPPED;
	}
	if (f->format && ops != f->format) {
		if (refuse_once(f, name, &st))
			note(f,
			     "%s/%s: refused: a %s shard in a stream of %s shards",
			     f->source, name, ops->name, f->format->name);
		close(fd);
		return SKIPPED;
	}
	rc = scan_shard(f, ops, name, fd, &st, &sh, &e);
	close(fd);
	if (rc) {
		if (rc != -EAGAIN && refuse_once(f, name, &st))
			note(f,
			     "%s/%s: waiting: %s (tried again when it changes)",
			     f->source, name, e.msg);
		return rc == -ENOMEM ? rc : WAITING;
	}
	sh.path = strdup(name);
	if (!sh.path || SFS_GROW(f->shards, f->cap, f->nshards + 1)) {
		free(sh.path);
		free(sh.bounds);
		return -ENOMEM;
	}
	sh.first = f->nsamples;
	f->format = ops;
	f->shards[f->nshards++] = sh;
	f->nsamples += sh.nsamples;
	append_log(f, &sh);
	return ACCEPTED;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_names(char **names, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

/*
 * One listing of the source: the names not in the stream that could be
 * shards, sorted, into *out (*n of them); *end when the end marker is
 * there.  Returns 0 or -errno.
 */
static int list(const struct sfs_follow *f, char ***out, size_t *n, bool *end)
{
	const char *last = f->nshards ? f->shards[f->nshards - 1].path : NULL;
	char **names = NULL;
	size_t cap = 0;
	struct dirent *de;
	int fd = dup(f->srcfd), rc = 0;
	DIR *d = fd < 0 ? NULL : fdopendir(fd);

	*n = 0;
	*end = false;
	if (!d) {
		rc = -errno;
		if (fd >= 0)
			close(fd);
		return rc;
	}
	rewinddir(d);
	while (!rc && (errno = 0, de = readdir(d))) {
		char *s;

		if (!strcmp(de->d_name, SFS_FOLLOW_END)) {
			*end = true;
			continue;
		}
		/* names before the last one: refused, but only when new to
		 * the stream (a consumed shard is still listed) */
		if (!shard_name(de->d_name) ||
		    (last && strcmp(de->d_name, last) <= 0 &&
		     sfs_follow_find(f, de->d_name) >= 0))
			continue;
		s = strdup(de->d_name);
		if (!s || SFS_GROW(names, cap, *n + 1)) {
			free(s);
			rc = -ENOMEM;
			break;
		}
		names[(*n)++] = s;
	}
	if (!rc && errno)
		rc = -errno;
	closedir(d);
	if (rc) {
		free_names(names, *n);
		*n = 0;
		return rc;
	}
	if (*n)
		qsort(names, *n, sizeof(*names), by_name);
	*out = names;
	return 0;
}

/*
 * A listing is no snapshot: a name renamed in while it runs may be missed
 * while a later one is seen.  But a producer renames in name order, so
 * every shard before a name one listing saw was renamed before that
 * listing ended, and a second listing sees it.  So the names are taken
 * from the second listing up to the last one the first saw (all of them
 * once the first saw the end marker, written after the last shard); the
 * rest wait for the next scan.
 */
int sfs_follow_scan(struct sfs_follow *f, size_t *added, struct sfs_error *err)
{
	char **first = NULL, **names = NULL;
	size_t nfirst = 0, n = 0, i, got = 0;
	bool end1, end2;
	int rc;

	if (added)
		*added = 0;
	rc = list(f, &first, &nfirst, &end1);
	if (!rc && (nfirst || end1))
		rc = list(f, &names, &n, &end2);
	for (i = 0; !rc && i < n; i++) {
		if (!end1 && strcmp(names[i], first[nfirst - 1]) > 0)
			break;
		rc = accept(f, names[i]);
		got += rc == ACCEPTED;
		/* a shard not ready holds back the ones after it: the
		 * stream is in name order */
		if (rc == WAITING) {
			rc = 0;
			break;
		}
		rc = rc < 0 ? rc : 0;
	}
	/* the end counts once every shard listed with it is in */
	if (end1 && i == n)
		f->ended = true;
	free_names(first, nfirst);
	free_names(names, n);
	if (added)
		*added = got;
	if (rc == -ENOMEM)
		return sfs_errorf(err, rc, "out of memory");
	if (rc)
		return sfs_errorf(err, rc, "%s: %s", f->source, strerror(-rc));
	return 0;
}

int sfs_follow_bounds(struct sfs_follow *f, size_t i, struct sfs_error *err)
{
	return sfs_follow_bounds_from(f, i, 0, err);
}

int sfs_follow_bounds_from(struct sfs_follow *f, size_t i, uint64_t from,
			   struct sfs_error *err)
{
	struct sfs_follow_shard *sh = &f->shards[i], got = { 0 };
	struct stat st;
	int fd, rc;

	if (sh->bounds && sh->bounds_from <= from)
		return 0;
	if (!f->format)
		f->format = sfs_format_detect(sh->path);
	fd = openat(f->srcfd, sh->path,
		    O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return sfs_errorf(
			err, -EIO,
			"%s/%s: %s, but the stream needs it (it was not consumed when the log was written): restore it, or restart with start= past it",
			f->source, sh->path, strerror(errno));
	if (fstat(fd, &st) < 0 || (uint64_t)st.st_size != sh->size ||
	    !mtime_fits(&st) || sfs_mtime_ns(&st) != sh->mtime_ns) {
		close(fd);
		return sfs_errorf(
			err, -EIO,
			"%s/%s: changed since it entered the stream (size or time): a shard must not change once it has its name; restore it",
			f->source, sh->path);
	}
	rc = f->format ?
		     scan_shard(f, f->format, sh->path, fd, &st, &got, err) :
		     sfs_errorf(err, -EINVAL, "%s: no format", sh->path);
	close(fd);
	if (rc)
		return rc == -EAGAIN ? -EIO : rc;
	if (got.nsamples != sh->nsamples) {
		free(got.bounds);
		return sfs_errorf(err, -EIO,
				  "%s/%s: holds %" PRIu64
				  " samples, the follow log says %" PRIu64
				  ": it changed; restore it",
				  f->source, sh->path, got.nsamples,
				  sh->nsamples);
	}
	free(sh->bounds);
	sh->bounds = got.bounds;
	sh->bounds_from = 0;
	if (f->released > i)
		f->released = i; /* sfs_follow_release frees them again */
	sh->prefix_len = got.prefix_len;
	sh->newline_missing = got.newline_missing;
	return 0;
}

void sfs_follow_release(struct sfs_follow *f, uint64_t sample)
{
	size_t i = f->released;

	for (; i < f->nshards && f->shards[i].first < sample; i++) {
		struct sfs_follow_shard *sh = &f->shards[i];
		uint64_t drop, keep;
		uint64_t *b;

		if (sh->first + sh->nsamples <= sample) {
			free(sh->bounds);
			sh->bounds = NULL;
			sh->bounds_from = 0;
			f->released = i + 1;
			continue;
		}
		if (!sh->bounds || sample - sh->first <= sh->bounds_from)
			break;
		/* cut when at least half goes: each boundary moved once on
		 * average, however many windows the shard spans */
		drop = sample - sh->first - sh->bounds_from;
		keep = sh->nsamples + 1 - (sample - sh->first);
		if (drop < keep)
			break;
		memmove(sh->bounds, sh->bounds + drop, keep * sizeof(*b));
		b = realloc(sh->bounds, keep * sizeof(*b));
		if (b)
			sh->bounds = b;
		sh->bounds_from += drop;
		break;
	}
}

ssize_t sfs_follow_find(const struct sfs_follow *f, const char *name)
{
	size_t at = SFS_PARTITION_POINT(i, 0, f->nshards,
					strcmp(f->shards[i].path, name) < 0);

	return at < f->nshards && !strcmp(f->shards[at].path, name) ?
		       (ssize_t)at :
		       -1;
}

size_t sfs_follow_shard_at(const struct sfs_follow *f, uint64_t s)
{
	return SFS_PARTITION_POINT(i, 0, f->nshards,
				   f->shards[i].first + f->shards[i].nsamples <=
					   s);
}
