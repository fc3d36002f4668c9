/*
 * lance-view DATASET OUT FIRST:COUNT...: write into OUT (created) the
 * Lance dataset a reader of DATASET's newest version would see holding
 * its live rows FIRST..FIRST+COUNT-1, run after run
 * (sfs_lance_view_build): the synthesized files as files, the data files
 * as symlinks to DATASET's.  For tests/cli/test_lance.sh: the builder
 * alone, without a mount (tests/mount/test_lance.sh mounts).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shardfs/lance.h"
#include "shardfs/util.h"

static int make_parents(char *path)
{
	char *p;

	for (p = strchr(path + 1, '/'); p; p = strchr(p + 1, '/')) {
		*p = '\0';
		if (mkdir(path, 0755) < 0 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct sfs_error err = { 0 };
	struct sfs_lance_dataset *ds = NULL;
	struct sfs_dataset_view *v = NULL;
	struct sfs_run *runs;
	char src[PATH_MAX], *name = NULL, *mpath = NULL;
	uint64_t version;
	size_t i;
	int dirfd, rc;

	if (argc < 3 || !realpath(argv[1], src)) {
		fprintf(stderr,
			"usage: lance-view DATASET OUT FIRST:COUNT...\n");
		return 2;
	}
	runs = calloc((size_t)argc, sizeof(*runs));
	for (i = 3; runs && i < (size_t)argc; i++) {
		unsigned long long a, n;

		if (sscanf(argv[i], "%llu:%llu", &a, &n) != 2)
			return 2;
		runs[i - 3] = (struct sfs_run){ a, n };
	}
	dirfd = open(src, O_RDONLY | O_DIRECTORY);
	rc = dirfd < 0 ? -errno :
			 sfs_lance_latest(dirfd, "", &name, &version, &err);
	if (rc == 1 && asprintf(&mpath, "_versions/%s", name) > 0)
		rc = sfs_lance_open(dirfd, mpath, -1, &ds, &err);
	if (!rc)
		rc = sfs_lance_view_build(dirfd, ds, runs, (size_t)argc - 3, &v,
					  &err);
	if (rc) {
		fprintf(stderr, "lance-view: %s\n", err.msg);
		return 1;
	}
	mkdir(argv[2], 0755);
	for (i = 0; i < v->nfiles; i++) {
		const struct sfs_dataset_file *f = &v->files[i];
		char *out, *target;
		int fd;

		if (asprintf(&out, "%s/%s", argv[2], f->path) < 0 ||
		    make_parents(out))
			return 1;
		if (f->source) {
			if (asprintf(&target, "%s/%s", src, f->source) < 0 ||
			    symlink(target, out) < 0)
				return 1;
			free(target);
		} else {
			fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
			if (fd < 0 || sfs_write_full(fd, f->bytes, f->len))
				return 1;
			close(fd);
		}
		free(out);
	}
	printf("%llu\n", (unsigned long long)v->rows);
	sfs_dataset_view_free(v);
	sfs_lance_free(ds);
	free(name);
	free(mpath);
	free(runs);
	close(dirfd);
	return 0;
}
