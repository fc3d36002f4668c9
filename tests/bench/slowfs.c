/*
 * slowfs DIR MNT [-o latency=MS,bw=MBPS,timeout=S,stats=FILE,
 *                     latency_file=FILE] [fuse args]:
 * slow storage for the benchmarks and tests.  A read-only pass-through of
 * DIR that answers every lookup, getattr, open, readdir and read after a
 * fixed latency, and moves read bytes through one token bucket of bw MB/s
 * shared by all requests.  While latency_file exists, the number in it is
 * the latency instead (a source that slows down or stalls, for tests).  It runs many threads, so concurrent requests overlap
 * their latency and share the bandwidth, as on a network file system.
 * Like one, it keeps the page cache across opens (keep_cache) and lets the
 * kernel cache entries and attributes for timeout seconds [60].
 * At exit it writes per-operation counts, mean latency and read bytes to
 * stats (default: stderr).
 */
#define FUSE_USE_VERSION 312

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum op { OP_GETATTR, OP_OPEN, OP_READ, OP_READDIR, OP_READLINK, NOPS };

static const char *const op_names[] = { "getattr", "open", "read", "readdir",
					"readlink" };

struct slow {
	char *dir; /* the directory passed through */
	int dirfd;
	unsigned latency_ms; /* per request */
	unsigned bw_mbps; /* MB/s (10^6 bytes), 0: unlimited */
	unsigned timeout; /* entry and attribute cache, seconds */
	char *stats; /* where the statistics go at exit */
	char *latency_file; /* while it exists: the latency, ms */

	pthread_mutex_t lock; /* guards the bucket and the counters */
	double bucket_free; /* the time the link is free again */
	uint64_t count[NOPS];
	double seconds[NOPS]; /* summed wall time of each kind */
	uint64_t bytes;
	unsigned busy, busy_max; /* requests in progress */
};

static struct slow slow;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_until(double t)
{
	struct timespec ts;

	ts.tv_sec = (time_t)t;
	ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) ==
	       EINTR)
		;
}

/* The latency now: latency_file's number while it exists. */
static unsigned latency(void)
{
	unsigned ms = slow.latency_ms;
	FILE *f = slow.latency_file ? fopen(slow.latency_file, "re") : NULL;

	if (f) {
		if (fscanf(f, "%u", &ms) != 1)
			ms = slow.latency_ms;
		fclose(f);
	}
	return ms;
}

/* The start of a request: its latency, spent concurrently with others. */
static double begin(void)
{
	double t0 = now();
	unsigned ms = latency();

	pthread_mutex_lock(&slow.lock);
	if (++slow.busy > slow.busy_max)
		slow.busy_max = slow.busy;
	pthread_mutex_unlock(&slow.lock);
	sleep_until(t0 + ms / 1000.0);
	return t0;
}

/* n bytes through the shared link: wait for their turn and transfer. */
static void transfer(size_t n)
{
	double t, done;

	if (!slow.bw_mbps || !n)
		return;
	pthread_mutex_lock(&slow.lock);
	t = now();
	if (slow.bucket_free < t)
		slow.bucket_free = t;
	slow.bucket_free += (double)n / (slow.bw_mbps * 1e6);
	done = slow.bucket_free;
	pthread_mutex_unlock(&slow.lock);
	sleep_until(done);
}

static void end(enum op op, double t0, size_t bytes)
{
	double t = now();

	pthread_mutex_lock(&slow.lock);
	slow.busy--;
	slow.count[op]++;
	slow.seconds[op] += t - t0;
	slow.bytes += bytes;
	pthread_mutex_unlock(&slow.lock);
}

/* The path below DIR: "." for the root, else without its leading '/'. */
static const char *rel(const char *path)
{
	return path[1] ? path + 1 : ".";
}

static void *slow_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
	(void)conn;
	cfg->entry_timeout = slow.timeout;
	cfg->attr_timeout = slow.timeout;
	cfg->negative_timeout = slow.timeout;
	cfg->nullpath_ok = 1;
	return NULL;
}

static int slow_getattr(const char *path, struct stat *st,
			struct fuse_file_info *fi)
{
	double t0 = begin();
	int rc = fi ? fstat((int)fi->fh, st) :
		      fstatat(slow.dirfd, rel(path), st, AT_SYMLINK_NOFOLLOW);

	rc = rc < 0 ? -errno : 0;
	end(OP_GETATTR, t0, 0);
	return rc;
}

static int slow_readlink(const char *path, char *buf, size_t size)
{
	double t0 = begin();
	ssize_t n = readlinkat(slow.dirfd, rel(path), buf, size - 1);
	int rc = n < 0 ? -errno : 0;

	if (n >= 0)
		buf[n] = '\0';
	end(OP_READLINK, t0, 0);
	return rc;
}

static int slow_open(const char *path, struct fuse_file_info *fi)
{
	double t0 = begin();
	int fd, rc = 0;

	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		rc = -EROFS;
	} else {
		fd = openat(slow.dirfd, rel(path), O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			rc = -errno;
		else
			fi->fh = (uint64_t)fd;
		/* a network file system keeps the pages of a file that did
		 * not change (NFS's close-to-open): so does this one */
		fi->keep_cache = 1;
	}
	end(OP_OPEN, t0, 0);
	return rc;
}

static int slow_read(const char *path, char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	double t0 = begin();
	ssize_t n = pread((int)fi->fh, buf, size, off);
	int rc = n < 0 ? -errno : (int)n;

	(void)path;
	if (n > 0)
		transfer((size_t)n);
	end(OP_READ, t0, n > 0 ? (size_t)n : 0);
	return rc;
}

static int slow_release(const char *path, struct fuse_file_info *fi)
{
	(void)path;
	close((int)fi->fh);
	return 0;
}

/* A directory's descriptor, held from opendir: with nullpath_ok a readdir
 * is given no path. */
static int slow_opendir(const char *path, struct fuse_file_info *fi)
{
	int fd = openat(slow.dirfd, rel(path),
			O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	fi->fh = (uint64_t)fd;
	return 0;
}

static int slow_releasedir(const char *path, struct fuse_file_info *fi)
{
	(void)path;
	close((int)fi->fh);
	return 0;
}

static int slow_readdir(const char *path, void *buf, fuse_fill_dir_t fill,
			off_t off, struct fuse_file_info *fi,
			enum fuse_readdir_flags flags)
{
	double t0 = begin();
	int fd = dup((int)fi->fh);
	struct dirent *de;
	DIR *d;
	int rc = 0;

	(void)path;
	(void)off;
	(void)flags;
	d = fd < 0 ? NULL : fdopendir(fd);
	if (!d) {
		rc = -errno;
		if (fd >= 0)
			close(fd);
		goto out;
	}
	rewinddir(d);
	while ((de = readdir(d)))
		if (fill(buf, de->d_name, NULL, 0, 0))
			break;
	closedir(d);
out:
	end(OP_READDIR, t0, 0);
	return rc;
}

static int slow_statfs(const char *path, struct statvfs *st)
{
	(void)path;
	return fstatvfs(slow.dirfd, st) < 0 ? -errno : 0;
}

static void slow_destroy(void *data)
{
	FILE *f = slow.stats ? fopen(slow.stats, "w") : stderr;
	int i;

	(void)data;
	if (!f)
		f = stderr;
	fprintf(f, "slowfs %s: latency %u ms, bandwidth %u MB/s\n", slow.dir,
		slow.latency_ms, slow.bw_mbps);
	for (i = 0; i < NOPS; i++) {
		fprintf(f, "%-8s %8llu requests, mean %.2f ms\n", op_names[i],
			(unsigned long long)slow.count[i],
			slow.count[i] ? 1e3 * slow.seconds[i] / slow.count[i] :
					0.0);
	}
	fprintf(f, "read     %llu bytes, %.1f KiB per read\n",
		(unsigned long long)slow.bytes,
		slow.count[OP_READ] ?
			slow.bytes / 1024.0 / slow.count[OP_READ] :
			0.0);
	fprintf(f, "at most %u requests at once\n", slow.busy_max);
	if (f != stderr)
		fclose(f);
}

static const struct fuse_operations ops = {
	.init = slow_init,
	.getattr = slow_getattr,
	.readlink = slow_readlink,
	.open = slow_open,
	.read = slow_read,
	.release = slow_release,
	.opendir = slow_opendir,
	.readdir = slow_readdir,
	.releasedir = slow_releasedir,
	.statfs = slow_statfs,
	.destroy = slow_destroy,
};

#define OPT(t, p)                              \
	{                                      \
		t, offsetof(struct slow, p), 1 \
	}
static const struct fuse_opt slow_opts[] = {
	OPT("latency=%u", latency_ms),	      OPT("bw=%u", bw_mbps),
	OPT("timeout=%u", timeout),	      OPT("stats=%s", stats),
	OPT("latency_file=%s", latency_file), FUSE_OPT_END
};

int main(int argc, char **argv)
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	int rc;

	slow.timeout = 60;
	pthread_mutex_init(&slow.lock, NULL);
	if (argc < 3 || argv[1][0] == '-') {
		fprintf(stderr,
			"usage: slowfs DIR MNT [-o latency=MS,bw=MBPS,timeout=S,stats=FILE,latency_file=FILE] [fuse args]\n");
		return 2;
	}
	slow.dir = realpath(argv[1], NULL);
	slow.dirfd = slow.dir ? open(slow.dir, O_RDONLY | O_DIRECTORY) : -1;
	if (slow.dirfd < 0) {
		fprintf(stderr, "slowfs: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	/* DIR is ours; the rest is libfuse's (MNT, -f, -o ...) */
	args.argv[1] = args.argv[0];
	args.argv++;
	args.argc--;
	if (fuse_opt_parse(&args, &slow, slow_opts, NULL) ||
	    fuse_opt_add_arg(
		    &args,
		    "-oro,default_permissions,max_threads=64,max_idle_threads=16,fsname=slowfs"))
		return 2;
	rc = fuse_main(args.argc, args.argv, &ops, NULL);
	fuse_opt_free_args(&args);
	free(slow.dir);
	free(slow.stats);
	free(slow.latency_file);
	close(slow.dirfd);
	return rc;
}
