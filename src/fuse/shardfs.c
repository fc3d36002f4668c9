/*
 * shardfs SRC MNT [-o OPTIONS] [-f] [-d] [-s]: the daemon.
 *
 * Every option is checked, the index loaded and checked against the
 * source, and the first view built, before anything is mounted: a bad
 * option or a stale index never leaves a half-made mount behind.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include "fs.h"
#include "shardfs/indexer.h"
#include "shardfs/mixture.h"
#include "shardfs/options.h"

#define FD_CACHE 256
#define MAX_THREADS 64
/* data files whose slices are kept: enough that readers cycling through
 * many slices do not rebuild them (a Parquet slice costs a footer decode;
 * files.c also bounds their bytes).  Each holds its source open, shared
 * with the other slices of its shard; out of descriptors, unused entries
 * give theirs back (files.c) */
#define FILES_CACHED 1024

static const char *prog = "shardfs";

static void usage(FILE *f)
{
	fprintf(f,
		"usage: shardfs SRC MNT [-o OPTIONS] [-f] [-d] [-s]\n"
		"\n"
		"Mount per-rank, per-worker views of the shards under SRC on MNT:\n"
		"MNT/<rank>/<worker>/ holds, in directory order, exactly what that\n"
		"reader reads this epoch.  MNT/.shardfs/epoch switches the epoch.\n"
		"SRC is an indexed directory, or a JSON mixture file of several\n"
		"(docs/plan.md, \"Mixtures\").  With follow=1, SRC is a directory a\n"
		"producer is still writing shards into, served in windows\n"
		"(docs/follow.md).\n"
		"\n"
		"Options (-o, comma-separated; defaults in brackets):\n");
	sfs_opt_help(sfs_plan_options, f, 2);
	sfs_opt_help(sfs_mount_options, f, 2);
	fprintf(f,
		"  allow_other, default_permissions, ... as FUSE takes them;\n"
		"  mount(8)'s rw, ro, dev, suid, _netdev, noauto, ... are accepted.\n"
		"\n"
		"  -f  stay in the foreground, log to stderr (else syslog)\n"
		"  -d  debug: foreground, log every FUSE request\n"
		"  -s  single-threaded\n"
		"  -h, --help; -V, --version\n"
		"\n"
		"Without an index, one is built in memory (no hashes) with a warning;\n"
		"build it once with shardfs-index SRC.  Unmount with fusermount3 -u MNT\n"
		"or umount MNT.\n"
		"\n"
		"Parquet slices laid out at a view's build that do not fit in memory\n"
		"are kept in an unnamed file in $TMPDIR (/var/tmp when unset) until the\n"
		"view goes (docs/formats.md, \"Costs\").\n");
}

struct args {
	const char *src, *mnt;
	bool foreground, debug, single;
	struct sfs_mount_opts *mount; /* fs.mount, filled here */
	char *fuse_opts; /* passed to libfuse, comma-separated */
	bool allow_other;
};

/*
 * The device of the file system mounted on mnt (absolute), from
 * /proc/self/mountinfo: asking the mount itself (stat) would wait for the
 * session, which is not serving yet.  The last match is the newest mount.
 */
static int mount_dev(const char *mnt, unsigned *maj, unsigned *min)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL, point[PATH_MAX], esc[PATH_MAX];
	size_t cap = 0;
	int found = -ENOENT;

	if (!f)
		return -errno;
	while (getline(&line, &cap, f) > 0) {
		unsigned a, b;
		const char *p;
		size_t n = 0;

		if (sscanf(line, "%*u %*u %u:%u %*s %4095s", &a, &b, esc) != 3)
			continue;
		/* spaces and the like are written as \ooo */
		for (p = esc; *p && n < sizeof(point) - 1; p++) {
			unsigned c;

			if (p[0] == '\\' && sscanf(p + 1, "%3o", &c) == 1) {
				point[n++] = (char)c;
				p += 3;
			} else {
				point[n++] = *p;
			}
		}
		point[n] = '\0';
		if (!strcmp(point, mnt)) {
			*maj = a;
			*min = b;
			found = 0;
		}
	}
	free(line);
	fclose(f);
	return found;
}

/*
 * Arrange for the read-ahead of the mount on mnt (absolute) to become kb
 * (root only): the kernel sets its own when the session starts (INIT), so
 * the first request after that writes ours (fs_readahead_once).
 */
static void plan_readahead(struct fs *fs, const char *mnt, unsigned kb)
{
	unsigned maj = 0, min = 0;

	if (!kb || mount_dev(mnt, &maj, &min) ||
	    asprintf(&fs->readahead_path, "/sys/class/bdi/%u:%u/read_ahead_kb",
		     maj, min) < 0) {
		fs->readahead_path = NULL;
		return;
	}
	snprintf(fs->readahead_kb, sizeof(fs->readahead_kb), "%u", kb);
	atomic_store(&fs->readahead_pending, true);
}

/*
 * The pipe libfuse splices replies through: grown to pipe-max-size
 * (64 KiB at least).
 */
static size_t pipe_size(void)
{
	unsigned long max = 0;
	FILE *f = fopen("/proc/sys/fs/pipe-max-size", "r");

	if (f) {
		if (fscanf(f, "%lu", &max) != 1)
			max = 0;
		fclose(f);
	}
	return max > 65536 ? max : 65536;
}

/* Options mount(8) and fstab pass that mean nothing to a FUSE session. */
static bool ignorable(const char *key)
{
	static const char *const keys[] = { "_netdev",	"auto",	  "noauto",
					    "nofail",	"user",	  "users",
					    "defaults", "nouser", "owner",
					    "group",	NULL };
	size_t i;

	if (!strncmp(key, "x-", 2) || !strncmp(key, "comment=", 8))
		return true;
	for (i = 0; keys[i]; i++)
		if (!strcmp(key, keys[i]))
			return true;
	return false;
}

static int append_opt(char **list, const char *opt)
{
	char *n;

	if (asprintf(&n, "%s%s%s", *list ? *list : "", *list ? "," : "", opt) <
	    0)
		return -ENOMEM;
	free(*list);
	*list = n;
	return 0;
}

/*
 * Options of the daemon's own; others go to libfuse, but for a key that is
 * a likely typo of one of ours ("wrld"): FUSE would refuse it without
 * saying what was meant.
 */
static int daemon_opt(struct args *a, const char *opt, struct sfs_error *err)
{
	static const struct sfs_opt *const ours[] = { sfs_plan_options,
						      sfs_mount_options, NULL };
	const char *eq = strchr(opt, '=');
	char *key = strndup(opt, eq ? (size_t)(eq - opt) : strlen(opt));
	const char *near;
	int rc;

	if (!key)
		return sfs_errorf(err, -ENOMEM, "out of memory");
	rc = eq ? sfs_mount_opts_set(a->mount, key, eq + 1, err) : -ENOENT;
	near = rc == -ENOENT && !ignorable(opt) ? sfs_opt_suggest(ours, key) :
						  NULL;
	if (near)
		rc = sfs_errorf(err, -EINVAL,
				"unknown option \"%s\" (did you mean \"%s\"?)",
				key, near);
	free(key);
	if (rc != -ENOENT)
		return rc;
	if (ignorable(opt))
		return 0;
	if (!strcmp(opt, "allow_other"))
		a->allow_other = true;
	return append_opt(&a->fuse_opts, opt) ?
		       sfs_errorf(err, -ENOMEM, "out of memory") :
		       0;
}

/* Parse one -o list: the core's options first, then the daemon's. */
static int parse_o(struct fs *fs, struct args *a, const char *list,
		   struct sfs_error *err)
{
	char *rest = NULL, *tok, *save = NULL;
	int rc;

	rc = sfs_options_parse_known(&fs->vopts.options, list, &rest, err);
	for (tok = rest ? strtok_r(rest, ",", &save) : NULL; !rc && tok;
	     tok = strtok_r(NULL, ",", &save))
		rc = daemon_opt(a, tok, err);
	free(rest);
	return rc;
}

static int parse_args(struct fs *fs, struct args *a, int argc, char **argv,
		      struct sfs_error *err)
{
	int i, rc;

	for (i = 1; i < argc; i++) {
		const char *s = argv[i];

		if (!strcmp(s, "-h") || !strcmp(s, "--help")) {
			usage(stdout);
			exit(0);
		} else if (!strcmp(s, "-V") || !strcmp(s, "--version")) {
			printf("shardfs %s (libfuse %s)\n", SHARDFS_VERSION,
			       fuse_pkgversion());
			exit(0);
		} else if (!strcmp(s, "-f")) {
			a->foreground = true;
		} else if (!strcmp(s, "-d")) {
			a->debug = a->foreground = true;
		} else if (!strcmp(s, "-s")) {
			a->single = true;
		} else if (!strncmp(s, "-o", 2)) {
			const char *list =
				s[2] ? s + 2 :
				       (i + 1 < argc ? argv[++i] : NULL);

			if (!list)
				return sfs_errorf(err, -EINVAL,
						  "-o needs a list of options");
			rc = parse_o(fs, a, list, err);
			if (rc)
				return rc;
		} else if (s[0] == '-') {
			return sfs_errorf(err, -EINVAL,
					  "unknown flag %s; see shardfs --help",
					  s);
		} else if (!a->src) {
			a->src = s;
		} else if (!a->mnt) {
			a->mnt = s;
		} else {
			return sfs_errorf(
				err, -EINVAL,
				"too many arguments (%s); usage: shardfs SRC MNT [-o OPTIONS]",
				s);
		}
	}
	if (!a->mnt)
		return sfs_errorf(
			err, -EINVAL,
			"usage: shardfs SRC MNT [-o OPTIONS]; see shardfs --help");
	return sfs_options_check(&fs->vopts.options, err);
}

static int load_index(struct fs *fs, const char *src, struct sfs_error *err)
{
	struct sfs_indexer_opts o = { .source = src };
	struct sfs_indexer_report rep;
	const char *dir = fs->mount.index_dir;
	struct stat st;
	int rc;

	/* an index named but not there is a typo, not a request to scan
	 * the source: only SRC/.shardfs may be missing */
	if (dir && stat(dir, &st) < 0)
		return sfs_errorf(
			err, -errno,
			"index=%s: %s: give the directory shardfs-index %s --out DIR wrote, or leave index= out to use %s/.shardfs",
			dir, strerror(errno), src, src);
	if (dir && !S_ISDIR(st.st_mode))
		return sfs_errorf(
			err, -ENOTDIR,
			"index=%s: not a directory: give the directory shardfs-index %s --out DIR wrote, or leave index= out to use %s/.shardfs",
			dir, src, src);
	rc = sfs_source_load(src, dir, &fs->idx, err);
	if (rc == -ENOENT && !dir && stat(src, &st) == 0 &&
	    S_ISDIR(st.st_mode)) {
		fprintf(stderr,
			"%s: warning: no index for %s; building one in memory (no hashes, not saved). Build it once with: shardfs-index %s\n",
			prog, src, src);
		rc = sfs_indexer_build(&o, NULL, &fs->idx, &rep, err);
		sfs_indexer_report_clear(&rep);
	} else if (!rc) {
		rc = sfs_index_check_source(fs->idx, fs->mount.index_dir, true,
					    0, err);
	}
	for (size_t i = 0; !rc && i < fs->idx->nshards; i++)
		if (fs->idx->shards[i].format->no_view)
			rc = sfs_errorf(err, -EOPNOTSUPP, "%s/%s: %s",
					fs->idx->source,
					fs->idx->shards[i].path,
					fs->idx->shards[i].format->no_view);
	if (rc)
		return rc;
	/* the views read some shards (Parquet) to size their slices */
	fs->srcfd = open(fs->idx->source, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fs->srcfd < 0)
		return sfs_errorf(err, -errno, "%s: %s", fs->idx->source,
				  strerror(errno));
	fs->vopts.srcfd = fs->srcfd;
	/* the manifest's JSON tree (~1.5 KB a shard) is freed but scattered
	 * through the heap among the shards: give its pages back */
	malloc_trim(0);
	return 0;
}

/* (sfs_view_opts.note) Trouble with the file of a view's slices. */
static void note_slices(void *arg, const char *msg)
{
	fs_log(arg, LOG_WARNING, "%s", msg);
}

/* Where the views keep the laid-out slices past their memory, made
 * absolute now: the daemon leaves its working directory when it goes to
 * the background, before the views of later epochs are built.  NULL when
 * out of memory (no such file then). */
static char *slice_spill_dir(void)
{
	const char *dir = getenv("TMPDIR");
	char *abs;

	dir = dir && *dir ? dir : "/var/tmp";
	abs = realpath(dir, NULL);
	return abs ? abs : strdup(dir);
}

/* Source files stay open in a cache: take every descriptor allowed (the
 * soft limit up to the hard one); the cache gives them back when short. */
static void raise_nofile(void)
{
	struct rlimit rl;

	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/*
 * What the daemon needs to serve once the source is loaded: its owner,
 * the largest read it asks for, the descriptor cache.  0, or -1 after a
 * message on stderr.
 */
static int setup(struct fs *fs, const struct args *a)
{
	fs->single = a->single;
	fs->uid = getuid();
	fs->gid = getgid();
	fs->mounted = time(NULL);
	fs->pipe_size = fs->mount.splice ? pipe_size() : 0;
	/* Requests no larger than a splice of one piece (the pipe holds the
	 * reply's header, a page a piece and one more, and the bytes: see
	 * fs_reply_send; an unaligned extent straddles one page more), or
	 * the kernel sends some of 1 MiB whatever the read-ahead (large
	 * folios) and those are copied; a followed source's too, whose
	 * reads splice from the descriptor cache as a view's do.  The daemon passes max_read itself: libfuse
	 * wants it at the mount and again at INIT */
	fs->max_read = fs->mount.max_read;
	if (!fs->max_read && fs->pipe_size)
		fs->max_read =
			(unsigned)((fs->pipe_size - 16384) & ~(size_t)4095);
	if (fdcache_init(&fs->fds, fs->follow ? follow_srcfd(fs) : fs->srcfd,
			 FD_CACHE)) {
		fprintf(stderr, "%s: %s: %s\n", prog,
			fs->follow ? follow_source(fs) : fs->idx->source,
			strerror(errno));
		return -1;
	}
	return 0;
}

/* The options FUSE mounts with, into *base (the caller frees it), and the
 * arguments of fuse_session_new into fargs.  0, or -1 out of memory. */
static int fuse_argv(const struct fs *fs, const struct args *a,
		     const char *argv0, struct fuse_args *fargs, char **base)
{
	char *fsname = NULL, *maxread = NULL;
	int rc = -1;

	/* The source's path is anyone's choice: escaped as libfuse's option
	 * parser reads it (\, and \\), so that a comma in it ends no option
	 * (a directory "ds,allow_other" must not mount with allow_other) */
	if (asprintf(&fsname, "fsname=%s",
		     fs->follow		 ? follow_source(fs) :
		     sfs_mix_of(fs->idx) ? sfs_mix_of(fs->idx)->file :
					   fs->idx->source) < 0) {
		fsname = NULL;
		goto out;
	}
	if (fs->max_read &&
	    asprintf(&maxread, "max_read=%u", fs->max_read) < 0) {
		maxread = NULL;
		goto out;
	}
	if (fuse_opt_add_opt_escaped(base, fsname) ||
	    fuse_opt_add_opt(base, "subtype=shardfs") ||
	    (maxread && fuse_opt_add_opt(base, maxread)) ||
	    (a->allow_other && fuse_opt_add_opt(base, "default_permissions")) ||
	    (a->fuse_opts && fuse_opt_add_opt(base, a->fuse_opts)))
		goto out;
	if (fuse_opt_add_arg(fargs, argv0) || fuse_opt_add_arg(fargs, "-o") ||
	    fuse_opt_add_arg(fargs, *base) ||
	    (a->debug && fuse_opt_add_arg(fargs, "-d")))
		goto out;
	rc = 0;
out:
	free(fsname);
	free(maxread);
	return rc;
}

/* Mounted on mnt: say what is served, in the log. */
static void log_serving(struct fs *fs, const char *mnt)
{
	if (fs->follow)
		fs_log(fs, LOG_INFO,
		       "following %s on %s: windows of %llu samples",
		       follow_source(fs), mnt,
		       (unsigned long long)fs->mount.window);
	else
		fs_log(fs, LOG_INFO,
		       "serving %s on %s: %zu shards, %llu samples, epoch %llu",
		       fs->idx->source, mnt, fs->idx->nshards,
		       (unsigned long long)fs->idx->nsamples,
		       (unsigned long long)fs->vopts.options.plan.epoch);
}

/* The daemon's threads (after the fork of fuse_daemonize: the daemon
 * would not have them, and a lock one held would stay held), then its
 * loop until unmounted.  Returns the loop's. */
static int serve(struct fs *fs, bool single)
{
	struct fuse_loop_config *cfg;
	int bad, rc;

	if (fs->follow)
		follow_start(fs);
	/* a followed source's readers read their windows in order: the
	 * next ones built are read ahead (follow_ahead) */
	bad = fs->mount.prefetch ? prefetch_start(fs, &fs->prefetch) : 0;
	if (bad)
		fs_log(fs, LOG_WARNING,
		       "cannot start the prefetch threads: %s; serving without prefetch (mount with fewer prefetch_threads=)",
		       strerror(-bad));
	if (!fs->follow)
		fs_ahead_start(fs);
	if (single)
		return fuse_session_loop(fs->se);
	cfg = fuse_loop_cfg_create();
	fuse_loop_cfg_set_max_threads(cfg, MAX_THREADS);
	rc = fuse_session_loop_mt(fs->se, cfg);
	fuse_loop_cfg_destroy(cfg);
	return rc;
}

/* fs's options at their defaults, its locks and its file table, and
 * every descriptor allowed (the check of the shards at load runs
 * threads): 0 or -ENOMEM */
static int fs_prepare(struct fs *fs)
{
	raise_nofile();
	sfs_options_init(&fs->vopts.options);
	sfs_mount_opts_init(&fs->mount);
	fs->srcfd = -1;
	pthread_mutex_init(&fs->lock, NULL);
	pthread_mutex_init(&fs->switch_lock, NULL);
	pthread_rwlock_init(&fs->root_lookups, NULL);
	pthread_mutex_init(&fs->ctl_lock, NULL);
	pthread_mutex_init(&fs->text_lock, NULL);
	pthread_mutex_init(&fs->park_lock, NULL);
	return files_init(&fs->files, FILES_CACHED);
}

/* End the process with rc at once, reads that still wait for a stalled
 * source (what) using what it would free (FS_STOP_WAIT_MS). */
static void exit_stalled(struct fs *fs, int rc, const char *what)
{
	fs_log(fs, LOG_WARNING,
	       "exiting while %s still wait for the stalled source: they end with the process",
	       what);
	_exit(rc);
}

/* Stop what serves fs's reads and free its views and index; a prefetch
 * read stuck on a stalled source ends the process with rc instead. */
static void fs_stop(struct fs *fs, int rc)
{
	/* first: its queued chunks name shards of the index or, on a
	 * followed source, of the stream, which follow_stop frees */
	if (!prefetch_stop(fs->prefetch))
		exit_stalled(fs, rc, "prefetch reads");
	/* the watcher, stopped next, answers parked reads, which ask for
	 * it (follow_ahead) */
	fs->prefetch = NULL;
	follow_stop(fs);
	fs_release_views(fs);
	if (fs->fds.ents)
		fdcache_destroy(&fs->fds);
	if (fs->srcfd >= 0)
		close(fs->srcfd);
	sfs_index_free(fs->idx);
}

int main(int argc, char **argv)
{
	struct fs fs = { 0 };
	struct args a = { 0 };
	struct sfs_error err = { 0 };
	struct fuse_args fargs = FUSE_ARGS_INIT(0, NULL);
	/* one bound for what all the views built keep (slice.h) */
	struct sfs_slice_mem mem;
	char *base = NULL, *mnt = NULL, *spill_dir = slice_spill_dir();
	int rc = 1, bad;

	a.mount = &fs.mount;
	sfs_slice_mem_init(&mem, 0, 0);
	fs.vopts.mem = &mem;
	fs.vopts.slice_spill_dir = spill_dir;
	fs.vopts.note = note_slices;
	fs.vopts.note_arg = &fs;
	/* Replies too large to splice are read into a buffer allocated per
	 * request (as libfuse's own fallback does): keep those allocations
	 * off mmap and the heap untrimmed, or every request pays for fresh
	 * pages (the read path in docs/benchmarks.md measures it).  Set
	 * before the first view is built: a threshold that moves (glibc's
	 * default) puts the decoded Parquet pages of that build, up to
	 * 32 MiB each, in the heap, which keeps them when they are freed */
	mallopt(M_MMAP_THRESHOLD, 4 << 20);
	mallopt(M_TRIM_THRESHOLD, 64 << 20);
	if (fs_prepare(&fs)) {
		fprintf(stderr, "%s: out of memory\n", prog);
		goto out_files;
	}
	bad = parse_args(&fs, &a, argc, argv, &err);
	/* the log's destination before anything is logged: the first scan
	 * of a followed source notes what it refuses (once) */
	fs.foreground = a.foreground;
	if (!bad && !a.foreground)
		openlog(prog, LOG_PID, LOG_DAEMON);
	/* a stream's size grows and its reads wait: never through the page
	 * cache (docs/follow.md) */
	fs.no_open = fs.mount.no_open && !fs.mount.follow;
	fs.vopts.epochs = fs.mount.epochs;
	fs.vopts.symlinks = fs.mount.symlinks;
	if (bad ||
	    (fs.mount.follow ?
		     follow_prepare(&fs, a.src, &err) :
		     load_index(&fs, a.src, &err) ||
			     fs_switch_epoch(&fs, fs.vopts.options.plan.epoch,
					     &err))) {
		fprintf(stderr, "%s: %s\n", prog, err.msg);
		goto out;
	}
	if (setup(&fs, &a) || fuse_argv(&fs, &a, argv[0], &fargs, &base))
		goto out;
	fs.se = fuse_session_new(&fargs, &fs_ops, sizeof(fs_ops), &fs);
	if (!fs.se) {
		fprintf(stderr,
			"%s: FUSE refused the options \"%s\"; see shardfs --help\n",
			prog, base);
		goto out;
	}
	if (fuse_set_signal_handlers(fs.se))
		goto out_session;
	/* absolute, as libfuse's own option parser makes it: the unmount
	 * at exit needs the same path from wherever the daemon then is */
	mnt = realpath(a.mnt, NULL);
	if (!mnt || fuse_session_mount(fs.se, mnt)) {
		fprintf(stderr,
			"%s: cannot mount on %s (is it an existing directory, and is /dev/fuse there?)\n",
			prog, a.mnt);
		goto out_signals;
	}
	log_serving(&fs, mnt);
	plan_readahead(&fs, mnt, fs.mount.readahead_kb);
	if (fuse_daemonize(a.foreground))
		goto out_unmount;
	rc = serve(&fs, a.single);
	/* the loop ends with the signal's number on SIGTERM, SIGINT, SIGHUP:
	 * a clean unmount, as asked */
	rc = rc == 0 || rc == SIGTERM || rc == SIGINT || rc == SIGHUP ? 0 : 1;
	fs_log(&fs, LOG_INFO, "unmounting %s", mnt);
	/* the watcher and the parked reads answered aside use the views:
	 * stopped, and waited for, before the views go; an answer still
	 * waiting for a stalled source keeps them, and the session, and the
	 * process exits once unmounted */
	if (follow_end_waits(&fs))
		fs_release_views(&fs);
out_unmount:
	fuse_session_unmount(fs.se);
	if (fs.answers_stalled)
		exit_stalled(&fs, rc,
			     "reads of a followed source answered aside");
out_signals:
	fuse_remove_signal_handlers(fs.se);
out_session:
	fuse_session_destroy(fs.se);
	fs.se = NULL;
out:
	fs_stop(&fs, rc);
out_files:
	files_destroy(&fs.files);
	control_free(&fs);
	sfs_options_clear(&fs.vopts.options);
	fuse_opt_free_args(&fargs);
	free(base);
	free(a.fuse_opts);
	sfs_mount_opts_clear(&fs.mount);
	free(fs.readahead_path);
	free(mnt);
	free(spill_dir);
	return rc;
}
