/*
 * libFuzzer harness: a mixture file, as any user may write one.  Three
 * small indexed sources (a, b, c) lie beside it, so that inputs naming them
 * reach the join and the plan.  Refused or accepted, never a crash; an
 * accepted mixture gives a plan whose readers all have the same count and
 * whose sources' allocations add up to the epoch.
 */
#include <errno.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shardfs/indexer.h"
#include "shardfs/mixture.h"
#include "shardfs/plan.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[] = "/tmp/shardfs-fuzz-mixture-XXXXXX";
static char file[sizeof(dir) + 16];

/* Source name with lines[i] lines in shard i. */
static void make_source(const char *name, const int *lines, int nshards)
{
	struct sfs_indexer_opts o = { .jobs = 1 };
	struct sfs_indexer_report rep = { 0 };
	struct sfs_index *idx = NULL;
	char path[256];
	int i, k;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (mkdir(path, 0755))
		abort();
	for (i = 0; i < nshards; i++) {
		FILE *f;

		snprintf(path, sizeof(path), "%s/%s/s%d.jsonl", dir, name, i);
		f = fopen(path, "w");
		if (!f)
			abort();
		for (k = 0; k < lines[i]; k++)
			fprintf(f, "{\"%s\": %d}\n", name, i * 100 + k);
		fclose(f);
	}
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	o.source = path;
	if (sfs_indexer_build(&o, NULL, &idx, &rep, NULL) ||
	    sfs_index_save(idx, NULL, NULL))
		abort();
	sfs_indexer_report_clear(&rep);
	sfs_index_free(idx);
}

static int remove_one(const char *path, const struct stat *st, int flag,
		      struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void remove_dir(void)
{
	nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	static const int a[] = { 5, 9 }, b[] = { 3 }, c[] = { 7, 1, 4 };

	(void)argc;
	(void)argv;
	if (!mkdtemp(dir))
		abort();
	atexit(remove_dir);
	make_source("a", a, 2);
	make_source("b", b, 1);
	make_source("c", c, 3);
	snprintf(file, sizeof(file), "%s/mix.json", dir);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sfs_plan_opts o = { .world = 2,
				   .workers = 2,
				   .replicas = 1,
				   .epoch = 3,
				   .seed = 1,
				   .shuffle = SFS_SHUFFLE_SAMPLES,
				   .block = 2,
				   .batch = 1 };
	struct sfs_index *idx = NULL;
	struct sfs_plan *plan = NULL;
	const struct sfs_mix *m;
	uint64_t sum = 0;
	size_t i;
	FILE *f = fopen(file, "w");

	if (!f)
		abort();
	if (fwrite(data, 1, size, f) != size)
		abort();
	fclose(f);
	if (sfs_source_load(file, NULL, &idx, NULL))
		return 0;
	m = sfs_mix_of(idx);
	if (!m)
		abort();
	/* keep each input fast: a plan of many samples is not a finding */
	for (i = 0; i < m->nsources; i++)
		sum += m->kind == SFS_MIX_REPEAT ?
			       m->sources[i].nsamples *
				       (m->sources[i].weight / SFS_MIX_SCALE +
					1) :
		       m->kind == SFS_MIX_CHOOSE ? m->sources[i].weight :
						   0;
	if (sum > 100000 || m->epoch_size > 100000)
		goto out;
	sum = 0;
	if (!sfs_plan_build(idx, &o, &plan, NULL)) {
		for (i = 0; i < plan->nsources; i++)
			sum += plan->sources[i].allocated;
		if (sum != plan->total)
			abort();
		for (i = 0; i < plan->nreaders; i++) {
			const struct sfs_plan_reader *r = &plan->readers[i];
			uint64_t n = 0;
			size_t k;

			for (k = 0; k < r->nfiles; k++)
				n += plan->files[r->file_at + k].nsamples;
			if (n != plan->per_reader)
				abort();
		}
	}
out:
	sfs_plan_free(plan);
	sfs_index_free(idx);
	return 0;
}
