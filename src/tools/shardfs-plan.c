/* shardfs-plan: compute the plan of an epoch and show it. */
#include <errno.h>
#include <jansson.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "shardfs/follow.h"
#include "shardfs/mixture.h"
#include "shardfs/index.h"
#include "shardfs/options.h"
#include "shardfs/plan.h"
#include "shardfs/window.h"

static const char *prog = "shardfs-plan";

static void usage(FILE *f)
{
	fprintf(f,
		"usage: shardfs-plan SRC [-o OPTIONS] [--index DIR] [--json]\n"
		"       shardfs-plan SRC --window N [-o OPTIONS] [--index DIR]\n"
		"\n"
		"Compute the plan for every reader (rank, worker) from the index of SRC\n"
		"and print a summary per reader, or the whole plan as JSON.  SRC is a\n"
		"directory, or a mixture file (docs/plan.md, \"Mixtures\").\n"
		"\n"
		"  -o OPTIONS    comma-separated plan options (below)\n"
		"  --index DIR   the index directory (default SRC/.shardfs)\n"
		"  --json        print the plan as JSON (docs/plan.md)\n"
		"  --window N    SRC grows (follow=1, docs/follow.md): print its\n"
		"                windows of N samples as it stands, one JSON line\n"
		"                each (the log in the index directory is read, not\n"
		"                written)\n"
		"  --help, --version\n"
		"\n"
		"Plan options (defaults in brackets):\n");
	sfs_opt_help(sfs_plan_options, f, 2);
}

static void summary(const struct sfs_plan *plan, const struct sfs_index *idx,
		    const struct sfs_options *opts)
{
	const struct sfs_plan_opts *o = &plan->opts;
	size_t t, i, r = 0;

	printf("plan: %llu samples in %zu shards, %llu units (shuffle=%s, seed=%llu, epoch=%llu, block=%llu)\n",
	       (unsigned long long)plan->total, idx->nshards,
	       (unsigned long long)plan->nunits, sfs_shuffle_name(o->shuffle),
	       (unsigned long long)o->seed, (unsigned long long)o->epoch,
	       (unsigned long long)o->block);
	if (o->replicas > 1)
		printf("replicas: %u, consecutive ranks read the same share: %zu shares\n",
		       o->replicas, plan->nreaders);
	printf("readers: world=%u × workers=%u = %zu, each %llu samples (batch=%llu, start=%llu, partition=%s, remainder=%s: %llu padded, %llu dropped)\n",
	       o->world, o->workers, (size_t)o->world * o->workers,
	       (unsigned long long)plan->per_reader,
	       (unsigned long long)o->batch, (unsigned long long)o->start,
	       sfs_partition_name(o->partition),
	       sfs_remainder_name(o->remainder),
	       (unsigned long long)plan->padding,
	       (unsigned long long)plan->dropped);
	printf("%6s %6s %10s %8s %6s %6s %6s  %s\n", "rank", "worker",
	       "samples", "padding", "files", "whole", "slices", "first file");
	for (t = 0; t < (size_t)o->world * o->workers; t++) {
		uint32_t rank = (uint32_t)(t / o->workers);
		const struct sfs_plan_reader *rd =
			&plan->readers[sfs_plan_reader_id(
				plan, rank, (uint32_t)(t % o->workers))];
		size_t whole = 0;

		while (r < opts->nranks && opts->ranks[r] < rank)
			r++;
		if (opts->nranks &&
		    (r == opts->nranks || opts->ranks[r] != rank))
			continue;
		for (i = 0; i < rd->nfiles; i++)
			whole += plan->files[rd->file_at + i].whole;
		printf("%6u %6zu %10llu %8llu %6zu %6zu %6zu  %s\n", rank,
		       t % o->workers, (unsigned long long)plan->per_reader,
		       (unsigned long long)rd->npadding, rd->nfiles, whole,
		       rd->nfiles - whole,
		       rd->nfiles ?
			       idx->shards[plan->files[rd->file_at].shard].path :
			       "-");
	}
}

static void note(void *arg, const char *msg)
{
	(void)arg;
	fprintf(stderr, "%s: %s\n", prog, msg);
}

/* One JSON line per window of the followed source src. */
static int windows(const char *src, const char *dir, uint64_t n,
		   const struct sfs_plan_opts *o, struct sfs_error *err)
{
	size_t nreaders = (size_t)(o->world / o->replicas) * o->workers, i, j;
	struct sfs_follow *f = NULL;
	size_t *readers = calloc(nreaders, sizeof(*readers));
	uint64_t first, full, k;
	bool last;
	int rc = readers ? 0 : sfs_errorf(err, -ENOMEM, "out of memory");

	for (i = 0; i < nreaders; i++)
		readers[i] = i;
	if (!rc)
		rc = sfs_follow_check_window(n, o, err);
	if (!rc)
		rc = sfs_follow_open(src, dir, false, NULL, note, NULL, &f,
				     err);
	if (!rc)
		rc = sfs_follow_scan(f, NULL, err);
	if (!rc && !f->format)
		rc = sfs_errorf(err, -ENODATA, "%s holds no shard yet", src);
	if (rc)
		goto out;
	sfs_follow_windows(f->idx->nsamples, n, o->start, f->ended, &first,
			   &full, &last);
	for (k = first; !rc && k < first + full + last; k++) {
		struct sfs_window *w = NULL;

		rc = sfs_window_build(f, o, n, k, k == first + full, readers,
				      nreaders, &w, err);
		if (rc == -ENODATA) {
			rc = 0;
			break;
		}
		if (rc)
			break;
		printf("{\"window\": %llu, \"samples\": [%llu, %llu], \"per_reader\": %llu, \"padding\": %llu, \"dropped\": %llu, \"readers\": [",
		       (unsigned long long)k, (unsigned long long)(k * n),
		       (unsigned long long)w->last_sample,
		       (unsigned long long)w->per_reader,
		       (unsigned long long)w->padding,
		       (unsigned long long)w->dropped);
		for (i = 0; i < nreaders; i++) {
			const struct sfs_window_reader *r = &w->readers[i];

			printf("%s{\"rank\": %zu, \"worker\": %zu, \"bytes\": %llu, \"runs\": [",
			       i ? ", " : "", i / o->workers * o->replicas,
			       i % o->workers,
			       (unsigned long long)(r->bytes.size +
						    w->trailer_len));
			for (j = 0; j < r->nruns; j++) {
				const struct sfs_shard *sh =
					&f->idx->shards[sfs_window_run_shard(
						w, f->idx->shards, &r->runs[j])];
				json_t *p = json_string(sh->path);
				char *q = p ? json_dumps(p, JSON_ENCODE_ANY) :
					      NULL;

				/* the shard, its first sample, the count */
				printf("%s[%s, %llu, %llu]", j ? ", " : "",
				       q ? q : "null",
				       (unsigned long long)(r->runs[j].first -
							    sh->first_sample),
				       (unsigned long long)r->runs[j].count);
				free(q);
				json_decref(p);
			}
			printf("]}");
		}
		printf("], \"ended\": %s}\n",
		       f->ended && k + 1 == first + full + last ? "true" :
								  "false");
		sfs_window_free(w);
	}
out:
	sfs_follow_free(f);
	free(readers);
	return rc;
}

int main(int argc, char **argv)
{
	enum { OPT_INDEX = 256, OPT_JSON, OPT_WINDOW, OPT_HELP, OPT_VERSION };
	static const struct option longopts[] = {
		{ "index", required_argument, NULL, OPT_INDEX },
		{ "window", required_argument, NULL, OPT_WINDOW },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "help", no_argument, NULL, OPT_HELP },
		{ "version", no_argument, NULL, OPT_VERSION },
		{ NULL, 0, NULL, 0 },
	};
	struct sfs_error err = { 0 };
	struct sfs_options opts;
	struct sfs_index *idx = NULL;
	struct sfs_plan *plan = NULL;
	const char *dir = NULL;
	bool json = false;
	uint64_t window = 0;
	int c, status = CLI_ERROR;

	sfs_options_init(&opts);
	while ((c = getopt_long(argc, argv, "o:", longopts, NULL)) != -1) {
		switch (c) {
		case 'o':
			if (sfs_options_parse(&opts, optarg, &err)) {
				cli_fail(prog, err.msg);
				goto out;
			}
			break;
		case OPT_INDEX:
			dir = optarg;
			break;
		case OPT_JSON:
			json = true;
			break;
		case OPT_WINDOW:
			if (sfs_options_number("--window", optarg, 1,
					       1ULL << 40, &window, &err)) {
				cli_fail(prog, err.msg);
				goto out;
			}
			break;
		case OPT_HELP:
			usage(stdout);
			status = CLI_OK;
			goto out;
		case OPT_VERSION:
			printf("shardfs-plan %s\n", SHARDFS_VERSION);
			status = CLI_OK;
			goto out;
		default:
			usage(stderr);
			goto out;
		}
	}
	if (optind != argc - 1) {
		usage(stderr);
		goto out;
	}
	if (window) {
		if (sfs_options_check(&opts, &err) ||
		    windows(argv[optind], dir, window, &opts.plan, &err))
			cli_fail(prog, err.msg);
		else
			status = CLI_OK;
		goto out;
	}
	if (sfs_options_check(&opts, &err) ||
	    sfs_source_load(argv[optind], dir, &idx, &err) ||
	    sfs_index_check_source(idx, dir, false, 0, &err) ||
	    sfs_plan_build(idx, &opts.plan, &plan, &err)) {
		cli_fail(prog, err.msg);
		goto out;
	}
	if (json) {
		char *text = sfs_plan_json(plan, idx);

		if (!text) {
			cli_fail(prog, "out of memory");
			goto out;
		}
		puts(text);
		free(text);
	} else {
		summary(plan, idx, &opts);
	}
	status = CLI_OK;
out:
	sfs_plan_free(plan);
	sfs_index_free(idx);
	sfs_options_clear(&opts);
	return status;
}
