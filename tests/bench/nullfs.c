/*
 * nullfs MNT FILES SIZE [-o opts]: the FUSE transport ceiling for the read
 * benchmark.  A low-level file system of FILES regular files f0, f1, ...
 * of SIZE bytes whose reads are answered with zeros from one static buffer:
 * no I/O, no copies beyond what the kernel and libfuse do for every reply.
 * Same mount options as shardfs (multithreaded, keep_cache off so that
 * every read reaches it).
 */
#define FUSE_USE_VERSION 312

#include <errno.h>
#include <fuse_lowlevel.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_REPLY (1 << 20)

static char zeros[MAX_REPLY];
static unsigned long nfiles;
static off_t fsize;

static void fill(fuse_ino_t ino, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	if (ino == FUSE_ROOT_ID) {
		st->st_mode = S_IFDIR | 0555;
		st->st_nlink = 2;
	} else {
		st->st_mode = S_IFREG | 0444;
		st->st_nlink = 1;
		st->st_size = fsize;
	}
}

static void null_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;
	unsigned long i;
	char *end;

	if (parent != FUSE_ROOT_ID || name[0] != 'f') {
		fuse_reply_err(req, ENOENT);
		return;
	}
	i = strtoul(name + 1, &end, 10);
	if (*end || i >= nfiles) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	memset(&e, 0, sizeof(e));
	e.ino = i + 2;
	e.attr_timeout = e.entry_timeout = 86400;
	fill(e.ino, &e.attr);
	fuse_reply_entry(req, &e);
}

static void null_getattr(fuse_req_t req, fuse_ino_t ino,
			 struct fuse_file_info *fi)
{
	struct stat st;

	(void)fi;
	fill(ino, &st);
	fuse_reply_attr(req, &st, 86400);
}

static void null_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	fuse_reply_open(req, fi);
}

static void null_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		      struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	if (off >= fsize)
		size = 0;
	else if ((off_t)size > fsize - off)
		size = (size_t)(fsize - off);
	fuse_reply_buf(req, zeros, size < MAX_REPLY ? size : MAX_REPLY);
}

static const struct fuse_lowlevel_ops ops = {
	.lookup = null_lookup,
	.getattr = null_getattr,
	.open = null_open,
	.read = null_read,
};

int main(int argc, char **argv)
{
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	struct fuse_loop_config *cfg;
	struct fuse_session *se;
	int rc;

	if (argc < 4) {
		fprintf(stderr, "usage: nullfs MNT FILES SIZE [fuse args]\n");
		return 2;
	}
	nfiles = strtoul(argv[2], NULL, 10);
	fsize = (off_t)strtoull(argv[3], NULL, 10);
	fuse_opt_add_arg(&args, argv[0]);
	for (rc = 4; rc < argc; rc++)
		fuse_opt_add_arg(&args, argv[rc]);
	se = fuse_session_new(&args, &ops, sizeof(ops), NULL);
	if (!se || fuse_set_signal_handlers(se) ||
	    fuse_session_mount(se, argv[1]))
		return 1;
	fuse_daemonize(0);
	cfg = fuse_loop_cfg_create();
	fuse_loop_cfg_set_max_threads(cfg, 64);
	rc = fuse_session_loop_mt(se, cfg);
	fuse_loop_cfg_destroy(cfg);
	fuse_session_unmount(se);
	fuse_remove_signal_handlers(se);
	fuse_session_destroy(se);
	fuse_opt_free_args(&args);
	return rc ? 1 : 0;
}
