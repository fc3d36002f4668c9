/*
 * The index against its source: opening a shard below the source so that
 * no path leaves it, and telling which shards changed since the index was
 * built (or may not be read).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "shardfs/index.h"
#include "shardfs/mixture.h"

#define STALE_NAMED 10

int sfs_index_open_shard(int srcfd, const char *path, int flags)
{
	struct open_how how = {
		/* openat2 refuses O_PATH with other flags */
		.flags = (uint64_t)(flags | O_CLOEXEC |
				    (flags & O_PATH ? 0 : O_NONBLOCK)),
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
			   RESOLVE_NO_MAGICLINKS,
	};
	long fd = syscall(SYS_openat2, srcfd, path, &how, sizeof(how));

	if (fd < 0 && errno == ENOSYS)
		fd = openat(srcfd, path, (int)how.flags | O_NOFOLLOW);
	return fd < 0 ? -errno : (int)fd;
}

struct stale {
	char *msg;
	size_t len, cap;
	size_t count;
};

static void stale_add(struct stale *s, const char *path, const char *what)
{
	int n;

	if (s->count++ >= STALE_NAMED)
		return;
	n = snprintf(s->msg + s->len, s->cap - s->len, "%s%s (%s)",
		     s->len ? ", " : "", path, what);
	if (n > 0 && (size_t)n < s->cap - s->len)
		s->len += (size_t)n;
}

/*
 * Whether this process may read the file behind an O_PATH descriptor.  Only
 * a clear refusal counts: a kernel without faccessat2 cannot tell, and the
 * first open will.
 */
static bool readable(int fd)
{
	return faccessat(fd, "", R_OK, AT_EMPTY_PATH | AT_EACCESS) == 0 ||
	       (errno != EACCES && errno != EPERM);
}

/* Note in s how path differs from the index; in unreadable (when not NULL)
 * that this process may not read it. */
static void check_file(struct stale *s, struct stale *unreadable, int srcfd,
		       const char *path, uint64_t size, int64_t mtime_ns)
{
	char what[96];
	struct stat st;
	bool may_read = true;
	int fd = sfs_index_open_shard(srcfd, path, O_PATH), rc = fd;

	if (fd >= 0) {
		rc = fstat(fd, &st) < 0 ? -errno : 0;
		if (!rc && unreadable && S_ISREG(st.st_mode))
			may_read = readable(fd);
		close(fd);
	}
	if (rc < 0) {
		stale_add(s, path,
			  rc == -ENOENT ? "missing" :
			  rc == -ELOOP || rc == -EXDEV ?
					  "a symlink on its path" :
					  strerror(-rc));
	} else if (!S_ISREG(st.st_mode)) {
		stale_add(s, path, "not a regular file");
	} else if ((uint64_t)st.st_size != size) {
		snprintf(what, sizeof(what), "size %llu, the index says %llu",
			 (unsigned long long)st.st_size,
			 (unsigned long long)size);
		stale_add(s, path, what);
	} else if (sfs_mtime_ns(&st) != mtime_ns) {
		stale_add(s, path, "modified");
	} else if (!may_read) {
		stale_add(unreadable, path, strerror(EACCES));
	}
}

/* Check shards [lo, hi) of idx, which came from the index of source in
 * dir (NULL: the default), as sfs_index_check_source does. */
static int check_shards(const struct sfs_index *idx, size_t lo, size_t hi,
			const char *source, const char *dir, bool to_read,
			struct sfs_error *err)
{
	char names[STALE_NAMED * (PATH_MAX / 8)];
	char denied[STALE_NAMED * (PATH_MAX / 8)];
	struct stale s = { .msg = names, .cap = sizeof(names) };
	struct stale d = { .msg = denied, .cap = sizeof(denied) };
	size_t i, j;
	int srcfd;

	names[0] = denied[0] = '\0';
	srcfd = open(idx->source, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (srcfd < 0)
		return sfs_errorf(err, -EIO, "%s: cannot open the source: %s",
				  idx->source, strerror(errno));
	for (i = lo; i < hi; i++) {
		const struct sfs_shard *sh = &idx->shards[i];

		check_file(&s, to_read ? &d : NULL, srcfd, sh->path, sh->size,
			   sh->mtime_ns);
		for (j = 0; j < sh->nmembers; j++)
			check_file(&s, to_read ? &d : NULL, srcfd,
				   sh->members[j].path, sh->members[j].size,
				   sh->members[j].mtime_ns);
	}
	close(srcfd);
	if (!s.count && d.count)
		return sfs_errorf(
			err, -EACCES,
			"%s: this user (uid %u) cannot read %zu shard file%s: %s%s; give it read access to them (or run as their owner)",
			source, (unsigned)geteuid(), d.count,
			d.count == 1 ? "" : "s", denied,
			d.count > STALE_NAMED ? ", ..." : "");
	if (!s.count)
		return 0;
	return sfs_errorf(
		err, -ESTALE,
		"the index is stale: %zu shard file%s changed since it was built: %s%s; rebuild it with: shardfs-index %s%s%s",
		s.count, s.count == 1 ? "" : "s", names,
		s.count > STALE_NAMED ? ", ..." : "", source,
		dir ? " --out " : "", dir ? dir : "");
}

int sfs_index_check_source(const struct sfs_index *idx, const char *dir,
			   bool to_read, struct sfs_error *err)
{
	const struct sfs_mix *m = idx->mix;
	size_t i;
	int rc;

	if (!m)
		return check_shards(idx, 0, idx->nshards, idx->source, dir,
				    to_read, err);
	for (i = 0; i < m->nsources; i++) {
		const struct sfs_mix_source *s = &m->sources[i];

		rc = check_shards(idx, s->shard_lo, s->shard_hi, s->path,
				  s->index_dir, to_read, err);
		if (rc)
			return rc;
	}
	return 0;
}
