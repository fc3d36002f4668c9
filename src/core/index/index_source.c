/*
 * The index against its source: opening a shard below the source so that
 * no path leaves it, and telling which shards changed since the index was
 * built (or may not be read).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shardfs/index.h"
#include "shardfs/pool.h"
#include "shardfs/util.h"

#include "index_i.h"

#define STALE_NAMED 10

int sfs_index_open_shard(int srcfd, const char *path, int flags)
{
	/* openat2 refuses O_PATH with other flags */
	return sfs_open_beneath(srcfd, path,
				flags & O_PATH ? flags : flags | O_NONBLOCK, 0);
}

struct stale {
	char *msg;
	size_t len, cap;
	size_t count;
	size_t want; /* look no further once this many are counted */
	/* a file that could not be looked at for want of descriptors or
	 * memory (-EMFILE, -ENFILE, -ENOMEM): not stale, the check failed */
	int failed;
};

/* Whether rc says the process, not the file, was short of something. */
static bool short_of(int rc)
{
	return rc == -EMFILE || rc == -ENFILE || rc == -ENOMEM;
}

static void stale_add(struct stale *s, const char *path, const char *what)
{
	int n;

	if (s->count++ >= STALE_NAMED || !s->cap)
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

/* The owner, group and mode of a directory on a shard's path. */
struct dir_perm {
	uint32_t uid, gid, mode;
};

/*
 * The directories on the paths of shards, for sfs_access: those of the
 * source (from "/" down to the source itself), taken once, and those
 * below it on the path of the last shard looked at (shards come sorted
 * by path: the next one is most often in the same directory).
 */
struct dirs {
	struct dir_perm *above;
	size_t nabove;
	char *last; /* the directory of the last shard, "" the source's */
	struct dir_perm *below;
	size_t nbelow, below_cap;
};

/* The directory at path (below dirfd) as a dir_perm; one that cannot be
 * looked at lets nobody through. */
static struct dir_perm dir_perm_at(int dirfd, const char *path)
{
	struct stat st;

	if (fstatat(dirfd, path, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
	    !S_ISDIR(st.st_mode))
		return (struct dir_perm){ 0, 0, 0 };
	return (struct dir_perm){ st.st_uid, st.st_gid, st.st_mode };
}

/* dc->above: "/", then every directory down to the source. */
static int dirs_init(struct dirs *dc, const char *source)
{
	size_t n = strlen(source), i;
	char *p = strdup(source);

	dc->above = malloc((n + 2) * sizeof(*dc->above));
	if (!p || !dc->above) {
		free(p);
		return -ENOMEM;
	}
	dc->above[dc->nabove++] = dir_perm_at(AT_FDCWD, "/");
	for (i = 1; i <= n; i++) {
		if (p[i] != '/' && p[i] != '\0')
			continue;
		if (p[i - 1] == '/')
			continue;
		p[i] = '\0';
		dc->above[dc->nabove++] = dir_perm_at(AT_FDCWD, p);
		p[i] = source[i];
	}
	free(p);
	return 0;
}

/* dc->below: the directories from the source down to path's. */
static int dirs_below(struct dirs *dc, int srcfd, const char *path)
{
	const char *slash = strrchr(path, '/');
	size_t len = slash ? (size_t)(slash - path) : 0, i;
	char *dir;

	if (dc->last && strlen(dc->last) == len && !memcmp(dc->last, path, len))
		return 0;
	dir = strndup(path, len);
	if (!dir || SFS_GROW(dc->below, dc->below_cap, len / 2 + 1)) {
		free(dir);
		return -ENOMEM;
	}
	free(dc->last);
	dc->last = dir;
	dc->nbelow = 0;
	for (i = 1; i <= len; i++) {
		if (dir[i] != '/' && dir[i] != '\0')
			continue;
		dir[i] = '\0';
		dc->below[dc->nbelow++] = dir_perm_at(srcfd, dir);
		dir[i] = i < len ? '/' : '\0';
	}
	return 0;
}

static void dirs_free(struct dirs *dc)
{
	free(dc->above);
	free(dc->last);
	free(dc->below);
}

/*
 * mode (of a file owned by uid:gid) with the classes of users cleared
 * that cannot search directory d.  Supplementary groups and ACLs are not
 * read, so whether a user is in d's group is known only when d's group
 * is the file's, and whether d's owner is of the file's group or among
 * its others not at all: when unsure, a class is kept out, so it passes
 * d only when each class of d its users may fall in lets them search.
 *
 *   owner: d's owner bits when it owns d, else d's group and others' bits
 *          (it may be in d's group or not);
 *   group: d's owner bits unless the file's owner owns d (d's owner may
 *          be of the group), and d's group bits, with others' bits too
 *          when d's group is not the file's (a member may be in it or not);
 *   other: d's owner bits unless the file's owner owns d, d's group bits
 *          unless d's group is the file's (no other is then in it), and
 *          d's others' bits.
 */
static uint32_t through(uint32_t mode, uint32_t uid, uint32_t gid,
			const struct dir_perm *d)
{
	bool usr = d->mode & S_IXUSR, grp = d->mode & S_IXGRP,
	     oth = d->mode & S_IXOTH;
	bool by_owner = d->uid == uid || usr; /* d's owner, if not uid */
	bool owner = d->uid == uid ? usr : grp && oth;
	bool group = by_owner && grp && (d->gid == gid || oth);
	bool other = by_owner && (d->gid == gid || grp) && oth;
	uint32_t keep = (owner ? 0700u : 0) | (group ? 0070u : 0) |
			(other ? 0007u : 0);

	return mode & keep;
}

/* Who the source lets read the file at path, with st its stat. */
static void note_access(struct dirs *dc, int srcfd, const char *path,
			const struct stat *st, struct sfs_access *acc)
{
	uint32_t mode = st->st_mode & 0777;
	size_t i;

	if (dirs_below(dc, srcfd, path))
		mode = 0;
	for (i = 0; i < dc->nabove; i++)
		mode = through(mode, st->st_uid, st->st_gid, &dc->above[i]);
	for (i = 0; mode && i < dc->nbelow; i++)
		mode = through(mode, st->st_uid, st->st_gid, &dc->below[i]);
	*acc = (struct sfs_access){ .uid = st->st_uid,
				    .gid = st->st_gid,
				    .mode = (uint16_t)mode,
				    .known = true };
}

/* Note in s how path differs from the index; in unreadable (when not NULL)
 * that this process may not read it; in acc who the source lets read it. */
static void check_file(struct stale *s, struct stale *unreadable,
		       struct dirs *dc, int srcfd, const char *path,
		       uint64_t size, int64_t mtime_ns, struct sfs_access *acc)
{
	char what[96];
	struct stat st;
	bool may_read = true;
	int fd = sfs_index_open_shard(srcfd, path, O_PATH), rc = fd;

	if (fd >= 0) {
		rc = fstat(fd, &st) < 0 ? -errno : 0;
		if (!rc && unreadable && S_ISREG(st.st_mode))
			may_read = readable(fd);
		if (!rc && S_ISREG(st.st_mode))
			note_access(dc, srcfd, path, &st, acc);
		close(fd);
	}
	if (short_of(rc)) {
		s->failed = s->failed ? s->failed : rc;
	} else if (rc < 0) {
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

/* note_access for the file at path, when it is a regular file. */
static void look(struct dirs *dc, int srcfd, const char *path,
		 struct sfs_access *acc)
{
	int fd = sfs_index_open_shard(srcfd, path, O_PATH);
	struct stat st;

	if (fd < 0)
		return;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
		note_access(dc, srcfd, path, &st, acc);
	close(fd);
}

int sfs_index_note_access(struct sfs_index *idx)
{
	struct dirs dc = { 0 };
	size_t i, j;
	int srcfd;

	if (dirs_init(&dc, idx->source)) {
		dirs_free(&dc);
		return -ENOMEM;
	}
	srcfd = open(idx->source, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	for (i = 0; srcfd >= 0 && i < idx->nshards; i++) {
		struct sfs_shard *sh = &idx->shards[i];

		look(&dc, srcfd, sh->path, &sh->access);
		for (j = 0; j < sh->nmembers; j++)
			look(&dc, srcfd, sh->members[j].path,
			     &sh->members[j].access);
	}
	if (srcfd >= 0)
		close(srcfd);
	dirs_free(&dc);
	return 0;
}

int sfs_index_access(const struct sfs_index *idx, int srcfd, const char *path,
		     uint32_t uid, uint32_t gid, uint32_t mode,
		     struct sfs_access *acc)
{
	struct dirs dc = { 0 };
	struct stat st = { .st_uid = uid, .st_gid = gid, .st_mode = mode };

	if (dirs_init(&dc, idx->source)) {
		dirs_free(&dc);
		return -ENOMEM;
	}
	note_access(&dc, srcfd, path, &st, acc);
	dirs_free(&dc);
	return 0;
}

int sfs_index_file_access(const char *source, int srcfd, const char *path,
			  struct sfs_access *acc)
{
	struct dirs dc = { 0 };

	*acc = (struct sfs_access){ 0 };
	if (dirs_init(&dc, source)) {
		dirs_free(&dc);
		return -ENOMEM;
	}
	look(&dc, srcfd, path, acc);
	dirs_free(&dc);
	return 0;
}

/*
 * The read bit file x gives each class of users of a file owned by
 * uid:gid (0444 at most): a user of a class that may be x's owner needs
 * x's owner bit, one who may be in x's group or not needs x's group and
 * others' bits.
 */
static uint32_t reads_of(const struct sfs_access *x, uint32_t uid, uint32_t gid)
{
	bool own = x->mode & S_IRUSR, grp = x->mode & S_IRGRP,
	     oth = x->mode & S_IROTH;
	bool not_x_owner = x->uid == uid || own; /* x's owner, if not uid */
	bool owner = x->uid == uid ? own : grp && oth;
	bool group = not_x_owner && grp && (x->gid == gid || oth);
	bool other = not_x_owner && oth && (x->gid == gid || grp);

	return (owner ? 0400u : 0) | (group ? 0040u : 0) | (other ? 0004u : 0);
}

void sfs_index_access_meet(struct sfs_access *a, const struct sfs_access *b)
{
	uint32_t uid = a->uid == b->uid ? a->uid : 0;
	uint32_t gid = a->gid == b->gid ? a->gid : 0;
	uint32_t mode = reads_of(a, uid, gid) & reads_of(b, uid, gid);

	*a = (struct sfs_access){
		.uid = uid, .gid = gid, .mode = (uint16_t)mode, .known = true
	};
}

/* Shards per item of a check's pool: a few items a thread, so that they
 * share out evenly. */
#define CHECK_ITEM_SHARDS_MAX 256

/* One check of shards [lo, hi) of idx, shared by its pool's items. */
struct check {
	struct sfs_index *idx;
	size_t lo, hi, per_item;
	int srcfd;
	bool to_read;
	const struct dirs *dc; /* its directories above the source */
	atomic_size_t stale, denied;
	atomic_int failed; /* a struct stale's failed, the first seen */
	/* per item: whether its files hold any that differ or may not be
	 * read, for the pass that names them to look at those items only */
	bool *found;
};

/* Check the files of shards [lo, hi) of idx into s, and into d (when not
 * NULL) whether this process may read them, until as many as they want
 * are counted; dc caches directories. */
static void check_range(struct sfs_index *idx, size_t lo, size_t hi, int srcfd,
			struct dirs *dc, struct stale *s, struct stale *d)
{
	size_t i, j;

	for (i = lo; i < hi && !s->failed &&
		     (s->count < s->want || (d && d->count < d->want));
	     i++) {
		struct sfs_shard *sh = &idx->shards[i];

		check_file(s, d, dc, srcfd, sh->path, sh->size, sh->mtime_ns,
			   &sh->access);
		for (j = 0; j < sh->nmembers; j++)
			check_file(s, d, dc, srcfd, sh->members[j].path,
				   sh->members[j].size, sh->members[j].mtime_ns,
				   &sh->members[j].access);
	}
}

/* The shards [*lo, *hi) of item i of c. */
static void item_range(const struct check *c, size_t i, size_t *lo, size_t *hi)
{
	*lo = c->lo + i * c->per_item;
	*hi = c->hi - *lo > c->per_item ? *lo + c->per_item : c->hi;
}

/* (sfs_pool.work) Item i of a check: who may read each file, and how
 * many differ (named by a second pass, when any do). */
static void check_item(struct sfs_pool *p, size_t i, struct sfs_digest *dg)
{
	struct check *c = p->arg;
	size_t lo, hi;
	struct dirs dc = { .above = c->dc->above, .nabove = c->dc->nabove };
	struct stale s = { .want = SIZE_MAX }, d = { .want = SIZE_MAX };
	int none = 0;

	(void)dg;
	item_range(c, i, &lo, &hi);
	check_range(c->idx, lo, hi, c->srcfd, &dc, &s, c->to_read ? &d : NULL);
	free(dc.last);
	free(dc.below);
	atomic_fetch_add(&c->stale, s.count);
	atomic_fetch_add(&c->denied, d.count);
	if (s.failed)
		atomic_compare_exchange_strong(&c->failed, &none, s.failed);
	c->found[i] = s.count || d.count;
}

/* The threads a check of a process allowed files open descriptors may
 * run, of those asked: each holds a few at a time. */
static unsigned check_threads(unsigned threads)
{
	struct rlimit rl;

	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur != RLIM_INFINITY &&
	    threads > rl.rlim_cur / 4)
		return rl.rlim_cur >= 8 ? (unsigned)(rl.rlim_cur / 4) : 1;
	return threads;
}

/* Check c's shards into s and d on the threads of pool: a pass that
 * counts, then one that names the first files that differ (or, when none
 * do, may not be read), no more, in the items that found them; or, when
 * the threads ran out of descriptors, one pass on this thread alone. */
static void check_pooled(struct check *c, struct sfs_pool *pool,
			 struct dirs *dc, struct stale *s, struct stale *d)
{
	size_t stale, unreadable, k, lo, hi;

	sfs_pool_run(pool);
	if (atomic_load(&c->failed) == -EMFILE) {
		/* short of descriptors with the threads at once: one at a
		 * time, which fails only when not one is left */
		check_range(c->idx, c->lo, c->hi, c->srcfd, dc, s,
			    c->to_read ? d : NULL);
		return;
	}
	stale = atomic_load(&c->stale);
	unreadable = atomic_load(&c->denied);
	s->failed = atomic_load(&c->failed);
	s->want = stale < STALE_NAMED ? stale : STALE_NAMED;
	d->want = stale			   ? 0 :
		  unreadable < STALE_NAMED ? unreadable :
					     STALE_NAMED;
	for (k = 0; k < pool->n && !s->failed; k++) {
		if (!c->found[k])
			continue;
		item_range(c, k, &lo, &hi);
		check_range(c->idx, lo, hi, c->srcfd, dc, s,
			    c->to_read ? d : NULL);
	}
	if (stale > s->count)
		s->count = stale;
	if (unreadable > d->count)
		d->count = unreadable;
}

/* Check shards [lo, hi) of idx, which came from the index of source in
 * dir (NULL: the default), as sfs_index_check_source does: on the
 * threads of a pool, then, only when some file differs or may not be
 * read, once more in order to name them. */
static int check_shards(struct sfs_index *idx, size_t lo, size_t hi,
			const char *source, const char *dir, bool to_read,
			unsigned threads, struct sfs_error *err)
{
	char names[STALE_NAMED * (PATH_MAX / 8)];
	char denied[STALE_NAMED * (PATH_MAX / 8)];
	struct stale s = { .msg = names,
			   .cap = sizeof(names),
			   .want = SIZE_MAX };
	struct stale d = { .msg = denied,
			   .cap = sizeof(denied),
			   .want = SIZE_MAX };
	struct dirs dc = { 0 };
	struct check c = {
		.idx = idx, .lo = lo, .hi = hi, .to_read = to_read, .dc = &dc
	};
	struct sfs_pool pool = { .threads = check_threads(
					 threads ? threads :
						   SFS_INDEX_CHECK_THREADS),
				 .work = check_item,
				 .arg = &c };
	int failed;

	names[0] = denied[0] = '\0';
	if (dirs_init(&dc, idx->source)) {
		dirs_free(&dc);
		return sfs_errorf(err, -ENOMEM, "out of memory");
	}
	c.srcfd = open(idx->source, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (c.srcfd < 0) {
		failed = -errno;
		dirs_free(&dc);
		return sfs_errorf(
			err, -EIO, "%s: cannot open the source: %s%s",
			idx->source, strerror(-failed),
			short_of(failed) ?
				"; raise the limit of open files (ulimit -n) and try again" :
				"");
	}
	c.per_item = (hi - lo) / (pool.threads * 4) + 1;
	if (c.per_item > CHECK_ITEM_SHARDS_MAX)
		c.per_item = CHECK_ITEM_SHARDS_MAX;
	pool.n = (hi - lo + c.per_item - 1) / c.per_item;
	atomic_init(&c.stale, 0);
	atomic_init(&c.denied, 0);
	atomic_init(&c.failed, 0);
	c.found = calloc(pool.n, sizeof(*c.found));
	/* one thread: the caller's, in order, naming as it goes */
	if (c.found && sfs_pool_threads(&pool) > 1)
		check_pooled(&c, &pool, &dc, &s, &d);
	else
		check_range(idx, lo, hi, c.srcfd, &dc, &s, to_read ? &d : NULL);
	failed = s.failed;
	free(c.found);
	close(c.srcfd);
	dirs_free(&dc);
	if (failed)
		return sfs_errorf(
			err, failed,
			"%s: its shard files could not be checked against the index: %s; %s",
			source, strerror(-failed),
			failed == -ENOMEM ?
				"free some memory and try again" :
				"raise the limit of open files (ulimit -n) and try again");
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

int sfs_index_check_source(struct sfs_index *idx, const char *dir, bool to_read,
			   unsigned threads, struct sfs_error *err)
{
	size_t i;
	int rc;

	if (!idx->nsources)
		return check_shards(idx, 0, idx->nshards, idx->source, dir,
				    to_read, threads, err);
	for (i = 0; i < idx->nsources; i++) {
		const struct sfs_index_source *s = &idx->sources[i];

		rc = check_shards(idx, s->shard_lo, s->shard_hi, s->path,
				  s->index_dir, to_read, threads, err);
		if (rc)
			return rc;
	}
	return 0;
}
