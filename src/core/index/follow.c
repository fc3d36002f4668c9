/*
 * The stream of a source that grows (follow.h): its shards in name order,
 * scanned as they appear, refused (noted once) when they cannot join it,
 * and the boundaries of their samples, released as windows are laid out.
 * The log that keeps them for a restart is follow_log.c's.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "shardfs/follow.h"
#include "shardfs/index.h"
#include "shardfs/util.h"

#include "follow_i.h"

/* (follow_i.h) */
void sfs_follow_notef(struct sfs_follow *f, const char *fmt, ...)
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

/* (follow_i.h) */
bool sfs_follow_name_ok(const char *name)
{
	size_t len = strlen(name);

	return name[0] != '.' && !strchr(name, '\n') && !strchr(name, '/') &&
	       !(len >= 4 && !strcmp(name + len - 4, ".tmp")) &&
	       sfs_index_path_ok(name) && len < SFS_FOLLOW_LINE_MAX - 64;
}

void sfs_follow_shards_free(struct sfs_shard *s, size_t n)
{
	size_t i;

	for (i = 0; s && i < n; i++)
		free(s[i].path);
	free(s);
}

int sfs_follow_open(const char *source, const char *index_dir, bool write_log,
		    const struct sfs_format_ops *format,
		    sfs_follow_note_fn note_fn, void *note_arg,
		    struct sfs_follow **out, struct sfs_error *err)
{
	struct sfs_follow *f = calloc(1, sizeof(*f));
	char names[64];
	size_t i;
	int rc = 0;

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
	/* the stream, an index of no shard yet */
	f->idx = calloc(1, sizeof(*f->idx));
	if (!f->idx || !(f->idx->source = strdup(f->source))) {
		rc = sfs_errorf(err, -ENOMEM, "out of memory");
		goto fail;
	}
	f->idx->table_fd = f->idx->blocks_fd = f->idx->digests_fd = -1;
	rc = sfs_follow_log_start(f, index_dir, write_log, err);
	if (rc)
		goto fail;
	if (!f->format && f->idx->nshards)
		f->format = sfs_format_detect(f->idx->shards[0].path);
	for (i = 0; i < f->idx->nshards; i++)
		f->idx->shards[i].format = f->format;
	*out = f;
	return 0;
fail:
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
	size_t i;

	if (!f)
		return;
	for (i = 0; f->idx && i < f->idx->nshards; i++)
		free(f->held[i].bounds);
	free(f->held);
	sfs_index_free(f->idx);
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

/* Scan shard name (open on fd, st its stat) with ops into sh, its
 * boundaries into h. */
static int scan_shard(const struct sfs_follow *f,
		      const struct sfs_format_ops *ops, const char *name,
		      int fd, const struct stat *st, struct sfs_shard *sh,
		      struct sfs_follow_held *h, struct sfs_error *err)
{
	/* on the watcher's thread alone: the background of a serving
	 * daemon starts no helpers (docs/follow.md) */
	struct sfs_scan_in in = { .fd = fd,
				  .path = name,
				  .size = (uint64_t)st->st_size,
				  .max_samples = f->chunk_samples_max,
				  .threads = 1 };
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
		h->bounds = calloc(1, sizeof(*h->bounds));
		h->from = 0;
		if (!h->bounds)
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
	h->bounds = sc.bounds;
	h->from = 0;
	sh->nsamples = sc.nsamples;
	sh->prefix_len = sc.prefix_len;
	sh->newline_missing = sc.newline_missing;
	sh->size = (uint64_t)st->st_size;
	sh->mtime_ns = sfs_mtime_ns(st);
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
	struct sfs_index *idx = f->idx;
	struct sfs_shard sh = { .format = ops, .bounds_at = SFS_NO_BOUNDS };
	struct sfs_follow_held h = { 0 };
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
	if (idx->nshards &&
	    strcmp(name, idx->shards[idx->nshards - 1].path) < 0) {
		if (refuse_once(f, name, &st))
			sfs_follow_notef(
				f,
				"%s/%s: refused: its name sorts before %s, already in the stream (serving it would change what was served); name shards in the order they are written",
				f->source, name,
				idx->shards[idx->nshards - 1].path);
		close(fd);
		return SKIPPED;
	}
	if (!f->format && !ops->concatenates) {
		if (refuse_once(f, name, &st))
			sfs_follow_notef(
				f,
				"%s/%s: refused: %s shards cannot be followed, only %s",
				f->source, name, ops->name,
				sfs_format_concatenating_names(
					0, " and ", names, sizeof(names)));
		close(fd);
		return SKIPPED;
	}
	if (f->format && ops != f->format) {
		if (refuse_once(f, name, &st))
			sfs_follow_notef(
				f,
				"%s/%s: refused: a %s shard in a stream of %s shards",
				f->source, name, ops->name, f->format->name);
		close(fd);
		return SKIPPED;
	}
	rc = scan_shard(f, ops, name, fd, &st, &sh, &h, &e);
	close(fd);
	if (rc) {
		if (rc != -EAGAIN && refuse_once(f, name, &st))
			sfs_follow_notef(
				f,
				"%s/%s: waiting: %s (tried again when it changes)",
				f->source, name, e.msg);
		return rc == -ENOMEM ? rc : WAITING;
	}
	sh.path = strdup(name);
	if (!sh.path ||
	    SFS_GROW(idx->shards, f->shards_cap, idx->nshards + 1) ||
	    SFS_GROW(f->held, f->held_cap, idx->nshards + 1)) {
		free(sh.path);
		free(h.bounds);
		return -ENOMEM;
	}
	sh.first_sample = idx->nsamples;
	f->format = ops;
	f->held[idx->nshards] = h;
	idx->shards[idx->nshards++] = sh;
	idx->nsamples += sh.nsamples;
	sfs_follow_log_append(f, &sh);
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
	const struct sfs_index *idx = f->idx;
	const char *last = idx->nshards ? idx->shards[idx->nshards - 1].path :
					  NULL;
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
		if (!sfs_follow_name_ok(de->d_name) ||
		    (last && strcmp(de->d_name, last) <= 0 &&
		     sfs_index_find(idx, de->d_name) >= 0))
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

int sfs_follow_bounds(struct sfs_follow *f, size_t i, uint64_t from,
		      struct sfs_error *err)
{
	struct sfs_shard *sh = &f->idx->shards[i], got = { 0 };
	struct sfs_follow_held *h = &f->held[i], held = { 0 };
	struct stat st;
	int fd, rc;

	if (h->bounds && h->from <= from)
		return 0;
	if (!f->format)
		f->format = sfs_format_detect(sh->path);
	sh->format = f->format;
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
	rc = f->format ? scan_shard(f, f->format, sh->path, fd, &st, &got,
				    &held, err) :
			 sfs_errorf(err, -EINVAL, "%s: no format", sh->path);
	close(fd);
	if (rc)
		return rc == -EAGAIN ? -EIO : rc;
	if (got.nsamples != sh->nsamples) {
		free(held.bounds);
		return sfs_errorf(err, -EIO,
				  "%s/%s: holds %" PRIu64
				  " samples, the follow log says %" PRIu64
				  ": it changed; restore it",
				  f->source, sh->path, got.nsamples,
				  sh->nsamples);
	}
	free(h->bounds);
	*h = held;
	if (f->released > i)
		f->released = i; /* sfs_follow_release frees them again */
	sh->prefix_len = got.prefix_len;
	sh->newline_missing = got.newline_missing;
	return 0;
}

void sfs_follow_release(struct sfs_follow *f, uint64_t sample)
{
	const struct sfs_index *idx = f->idx;
	size_t i = f->released;

	for (; i < idx->nshards && idx->shards[i].first_sample < sample; i++) {
		const struct sfs_shard *sh = &idx->shards[i];
		struct sfs_follow_held *h = &f->held[i];
		uint64_t in = sample - sh->first_sample, drop, keep;
		uint64_t *b;

		if (in >= sh->nsamples) {
			free(h->bounds);
			*h = (struct sfs_follow_held){ 0 };
			f->released = i + 1;
			continue;
		}
		if (!h->bounds || in <= h->from)
			break;
		/* cut when at least half goes: each boundary moved once on
		 * average, however many windows the shard spans */
		drop = in - h->from;
		keep = sh->nsamples + 1 - in;
		if (drop < keep)
			break;
		memmove(h->bounds, h->bounds + drop, keep * sizeof(*b));
		b = realloc(h->bounds, keep * sizeof(*b));
		if (b)
			h->bounds = b;
		h->from += drop;
		break;
	}
}
