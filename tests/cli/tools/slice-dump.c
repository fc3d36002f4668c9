/*
 * slice-dump SRC SHARD RUNS OUT [stats]: write the slice of SHARD (a path
 * in the index of SRC) holding RUNS ("first:count,first:count,...") to
 * OUT, so that the tests can hand slices to GNU tar, bsdtar and Python
 * before the file system serves them.  With "stats", print the time the
 * slice took to lay out and how many of its bytes are synthesized (not
 * copied from the shard).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "shardfs/index.h"
#include "shardfs/slice.h"

int main(int argc, char **argv)
{
	struct sfs_error err = { 0 };
	struct sfs_run runs[256];
	struct sfs_index *idx;
	struct sfs_slice *sl;
	size_t nruns = 0, i;
	unsigned long long synthesized = 0;
	struct timespec t0, t1;
	char *tok, *save = NULL, *buf, path[4096];
	ssize_t shard;
	FILE *out;
	int fd;

	if (argc != 5 && (argc != 6 || strcmp(argv[5], "stats"))) {
		fprintf(stderr,
			"usage: slice-dump SRC SHARD RUNS OUT [stats]\n");
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
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (shard < 0 || fd < 0 ||
	    sfs_slice_build(idx, &idx->shards[shard], fd, runs, nruns, &sl,
			    &err)) {
		fprintf(stderr, "slice-dump: %s\n",
			shard < 0 ? "no such shard" :
			fd < 0	  ? "cannot open the shard" :
				    err.msg);
		return 2;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	for (i = 0; i < sl->nextents; i++)
		if (sl->extents[i].mem)
			synthesized += sl->extents[i].len;
	if (argc == 6)
		printf("laid out in %.3f ms: %llu bytes, %llu synthesized\n",
		       (double)(t1.tv_sec - t0.tv_sec) * 1e3 +
			       (double)(t1.tv_nsec - t0.tv_nsec) / 1e6,
		       (unsigned long long)sl->size,
		       (unsigned long long)synthesized);
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
