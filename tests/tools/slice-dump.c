/*
 * slice-dump SRC SHARD RUNS OUT: write the slice of SHARD (a path in the
 * index of SRC) holding RUNS ("first:count,first:count,...") to OUT, so
 * that the tests can hand slices to GNU tar, bsdtar and Python before the
 * file system serves them.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shardfs/index.h"
#include "shardfs/slice.h"

int main(int argc, char **argv)
{
	struct sfs_error err = { 0 };
	struct sfs_run runs[256];
	struct sfs_index *idx;
	struct sfs_slice *sl;
	size_t nruns = 0;
	char *tok, *save = NULL, *buf, path[4096];
	ssize_t shard;
	FILE *out;
	int fd;

	if (argc != 5) {
		fprintf(stderr, "usage: slice-dump SRC SHARD RUNS OUT\n");
		return 2;
	}
	for (tok = strtok_r(argv[3], ",", &save); tok && nruns < 256;
	     tok = strtok_r(NULL, ",", &save)) {
		unsigned long long first, count;

		if (sscanf(tok, "%llu:%llu", &first, &count) != 2)
			return 2;
		runs[nruns++] = (struct sfs_run){ first, count };
	}
	if (sfs_index_load(argv[1], NULL, &idx, &err)) {
		fprintf(stderr, "slice-dump: %s\n", err.msg);
		return 2;
	}
	shard = sfs_index_find(idx, argv[2]);
	snprintf(path, sizeof(path), "%s/%s", idx->source, argv[2]);
	fd = open(path, O_RDONLY);
	if (shard < 0 || fd < 0 ||
	    sfs_slice_build(idx, &idx->shards[shard], fd, runs, nruns, &sl,
			    &err)) {
		fprintf(stderr, "slice-dump: %s\n",
			shard < 0 ? "no such shard" :
			fd < 0	  ? "cannot open the shard" :
				    err.msg);
		return 2;
	}
	buf = malloc(sl->size + 1);
	if (!buf ||
	    sfs_slice_pread(sl, fd, buf, sl->size, 0) != (ssize_t)sl->size) {
		fprintf(stderr, "slice-dump: cannot read %s\n", path);
		return 2;
	}
	out = fopen(argv[4], "wb");
	if (!out || fwrite(buf, 1, sl->size, out) != sl->size || fclose(out))
		return 2;
	close(fd);
	free(buf);
	sfs_slice_free(sl);
	sfs_index_free(idx);
	return 0;
}
