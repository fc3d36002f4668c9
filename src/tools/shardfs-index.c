/* shardfs-index: build, refresh or verify the index of a source. */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "shardfs/index.h"
#include "shardfs/indexer.h"
#include "shardfs/options.h"
#include "shardfs/util.h"

static const char *prog = "shardfs-index";

/* where --help's option texts start */
#define WRAP_INDENT "                         "

/*
 * words (separated by single spaces), wrapped at 79 columns with the lines
 * after the first indented as --help's option texts are (25 columns), the
 * first starting at column at, into buf (len bytes, cut short if need be).
 */
static const char *wrap(const char *words, size_t at, char *buf, size_t len)
{
	const char *w = words;
	size_t o = 0, n;
	bool wraps;

	buf[0] = '\0';
	while (*w && o < len) {
		n = strcspn(w, " ");
		wraps = w != words && at + 1 + n > 79;
		if (w != words)
			o += (size_t)snprintf(buf + o, len - o, "%s",
					      wraps ? "\n" WRAP_INDENT : " ");
		at = (wraps ? sizeof(WRAP_INDENT) - 1 : at + (w != words)) + n;
		if (o < len)
			o += (size_t)snprintf(buf + o, len - o, "%.*s", (int)n,
					      w);
		w += n;
		w += *w == ' ';
	}
	return buf;
}

static void usage(FILE *f)
{
	char names[256], suffixes[512], names_w[320], suffixes_w[640];

	sfs_format_names(sfs_format_of_files, 0, ", ", names, sizeof(names));
	sfs_format_suffix_list(suffixes, sizeof(suffixes));
	fprintf(f,
		"usage: shardfs-index SRC [options]\n"
		"       shardfs-index SRC --part I/N [options]\n"
		"       shardfs-index SRC --merge [--out DIR] [PART_DIR...]\n"
		"\n"
		"Build or refresh the index of the shards under SRC: per shard its size,\n"
		"mtime, format, sample count, SHA-256 and sample boundaries.  A re-run\n"
		"reuses the entries of shards whose size and mtime are unchanged.\n"
		"Memory follows shards, not samples: boundaries and digests are\n"
		"spilled to unlinked temporary files in the index directory as each\n"
		"shard is done, so it needs free space for them beside the new index.\n"
		"\n"
		"  --out DIR              write the index to DIR (default SRC/.shardfs;\n"
		"                         use this when SRC is read-only)\n"
		"  --jobs N               threads, at most N at once (default: one per\n"
		"                         CPU this process may use: affinity, cgroup\n"
		"                         cpu.max): up to N shards read at once, and\n"
		"                         the threads no shard keeps busy help hash\n"
		"                         the rows of a Parquet shard of 65536 rows or\n"
		"                         more; --jobs 1 reads and hashes on one thread.\n"
		"                         The index is the same whatever N\n"
		"  --no-hash              skip SHA-256 (faster; --verify then checks less)\n"
		"  --verify               check the index's tables whole (the boundary\n"
		"                         table against its blocks file), then re-read\n"
		"                         every shard and report each mismatch with the\n"
		"                         index (size, mtime, samples, CRCs, SHA-256)\n"
		"  --format F             treat every file as format F: %s\n"
		"                         (default: by extension: %s)\n"
		"                         A Lance dataset (a directory holding\n"
		"                         _versions/) anywhere in SRC is one shard of\n"
		"                         its live rows, at its newest version\n"
		"  --dataset-version N    index version N of each Lance dataset instead\n"
		"                         of its newest (the mount serves what the\n"
		"                         index read; a re-run without it moves on to\n"
		"                         the newest)\n"
		"  --samples-per-shard N  samples in each opaque shard (default 1)\n"
		"  --skip-bad             index the good shards, list the bad ones\n"
		"  --part I/N             index part I (0..N-1) of N only: shards I, I+N,\n"
		"                         I+2N, ... in path order, into --out DIR\n"
		"                         (default SRC/.shardfs/part-I-of-N); run the N\n"
		"                         parts anywhere (an Indexed Job), then --merge\n"
		"  --merge                join the N parts (PART_DIRs, default every\n"
		"                         SRC/.shardfs/part-*-of-N) into the index one\n"
		"                         run writes, in --out DIR or SRC/.shardfs\n"
		"  --quiet                no progress line, no summary\n"
		"  --help, --version\n"
		"\n"
		"Exit status: 0 done (verify: no mismatch), 1 verify found mismatches,\n"
		"2 could not do it (usage, bad shard, I/O).\n",
		wrap(names, 55, names_w, sizeof(names_w)),
		wrap(suffixes, 49, suffixes_w, sizeof(suffixes_w)));
}

/* "I/N", 0 <= I < N <= SFS_INDEX_PARTS_MAX */
static int parse_part(const char *value, struct sfs_indexer_opts *o,
		      struct sfs_error *err)
{
	const char *slash = strchr(value, '/');
	char first[32];
	uint64_t i, n;

	if (!slash || (size_t)(slash - value) >= sizeof(first))
		return sfs_errorf(
			err, -EINVAL,
			"--part %s: write I/N, part I (0..N-1) of N, e.g. --part 3/16",
			value);
	memcpy(first, value, (size_t)(slash - value));
	first[slash - value] = '\0';
	if (sfs_options_number("parts", slash + 1, 1, SFS_INDEX_PARTS_MAX, &n,
			       err) ||
	    sfs_options_number("part", first, 0, n - 1, &i, err))
		return sfs_errorf(
			err, -EINVAL,
			"--part %s: write I/N with N in 1..%d and I in 0..N-1, e.g. --part 3/16",
			value, SFS_INDEX_PARTS_MAX);
	o->part = (uint32_t)i;
	o->nparts = (uint32_t)n;
	return 0;
}

/*
 * The default place of part I of N, SRC/.shardfs/part-I-of-N, with
 * SRC/.shardfs made (index saving makes only the last directory).
 */
static char *part_dir(const char *source, uint32_t part, uint32_t nparts)
{
	char *dir;

	if (asprintf(&dir, "%s/%s", source, SFS_INDEX_DIR) < 0)
		return NULL;
	mkdir(dir, 0755);
	free(dir);
	return asprintf(&dir, "%s/%s/part-%u-of-%u", source, SFS_INDEX_DIR,
			part, nparts) < 0 ?
		       NULL :
		       dir;
}

/* The part directories of SRC/.shardfs (part-*-of-N), as a heap list. */
static int find_parts(const char *source, char ***dirs, size_t *n,
		      struct sfs_error *err)
{
	char *base = NULL;
	DIR *d;
	struct dirent *de;
	size_t cap = 0;
	int rc = 0;

	*dirs = NULL;
	*n = 0;
	if (asprintf(&base, "%s/%s", source, SFS_INDEX_DIR) < 0)
		return sfs_errorf(err, -ENOMEM, "out of memory");
	d = opendir(base);
	while (d && (de = readdir(d))) {
		unsigned i, k;
		char tail;

		if (sscanf(de->d_name, "part-%u-of-%u%c", &i, &k, &tail) != 2)
			continue;
		if (SFS_GROW(*dirs, cap, *n + 1) ||
		    asprintf(&(*dirs)[*n], "%s/%s", base, de->d_name) < 0) {
			rc = sfs_errorf(err, -ENOMEM, "out of memory");
			break;
		}
		(*n)++;
	}
	if (d)
		closedir(d);
	if (!rc && !*n)
		rc = sfs_errorf(
			err, -ENOENT,
			"%s: no parts (part-I-of-N) to merge; write them with shardfs-index %s --part I/N, or name their directories",
			base, source);
	free(base);
	return rc;
}

static int merge(const char *source, const char *out, char **dirs, size_t n,
		 bool quiet)
{
	struct sfs_error err = { 0 };
	struct sfs_index **parts = calloc(n + 1, sizeof(*parts));
	struct sfs_index *idx = NULL;
	char *spill_dir = sfs_index_dir(source, out);
	size_t i;
	int rc = parts && spill_dir ?
			 0 :
			 sfs_errorf(&err, -ENOMEM, "out of memory");

	for (i = 0; !rc && i < n; i++)
		rc = sfs_index_load_part(source, dirs[i], &parts[i], &err);
	/* the tables go through a spill, so memory follows shards */
	if (!rc)
		rc = sfs_index_merge(parts, (const char *const *)dirs, n,
				     spill_dir, &idx, &err);
	if (!rc)
		rc = sfs_index_save(idx, out, &err);
	if (rc)
		cli_fail(prog, err.msg);
	else if (!quiet) {
		char *dir = sfs_index_dir(idx->source, out);

		printf("merged %zu parts: %zu shards, %llu samples; index in %s\n",
		       n, idx->nshards, (unsigned long long)idx->nsamples,
		       dir ? dir : "?");
		free(dir);
	}
	for (i = 0; parts && i < n; i++)
		sfs_index_free(parts[i]);
	free(parts);
	free(spill_dir);
	sfs_index_free(idx);
	return rc ? CLI_ERROR : CLI_OK;
}

static void progress(const struct sfs_indexer_progress *p, void *arg)
{
	char done[32], total[32];
	double rate = p->elapsed > 0 ? (double)p->samples / p->elapsed : 0;
	double bps = p->elapsed > 0 ? (double)p->bytes_done / p->elapsed : 0;
	double eta = bps > 0 ? (double)(p->bytes_total - p->bytes_done) / bps :
			       0;

	(void)arg;
	fprintf(stderr,
		"\r%s: %zu/%zu shards, %s/%s, %.0f samples/s, ETA %.0fs   %s",
		prog, p->done, p->total,
		cli_bytes(p->bytes_done, done, sizeof(done)),
		cli_bytes(p->bytes_total, total, sizeof(total)), rate, eta,
		p->final ? "\n" : "");
}

static void print_problems(const struct sfs_indexer_report *rep,
			   const char *what)
{
	size_t i;

	for (i = 0; i < rep->nproblems; i++)
		fprintf(stderr, "%s: %s: %s\n", prog, what, rep->problems[i]);
}

static int verify(const struct sfs_indexer_opts *o, const char *out, bool quiet)
{
	struct sfs_indexer_report rep;
	struct sfs_error err = { 0 };
	struct sfs_index *idx;
	int rc, status;

	rc = sfs_index_load(o->source, out, &idx, &err);
	if (!rc)
		rc = sfs_index_check_bounds(idx, &err);
	if (!rc)
		rc = sfs_index_check_digests(idx, &err);
	if (rc) {
		cli_fail(prog, err.msg);
		sfs_index_free(idx);
		return CLI_ERROR;
	}
	rc = sfs_indexer_verify(o, idx, &rep, &err);
	if (rc) {
		cli_fail(prog, err.msg);
		sfs_index_free(idx);
		return CLI_ERROR;
	}
	print_problems(&rep, "mismatch");
	status = rep.nproblems ? CLI_FOUND : CLI_OK;
	if (!quiet)
		printf("verified %zu shards, %llu samples: %zu mismatch%s\n",
		       idx->nshards, (unsigned long long)idx->nsamples,
		       rep.nproblems, rep.nproblems == 1 ? "" : "es");
	sfs_indexer_report_clear(&rep);
	sfs_index_free(idx);
	return status;
}

/*
 * Build the index, its tables spilled to temporary files in the index
 * directory (removed however the run ends) and streamed into place by the
 * save: memory follows shards, not samples.
 */
static int build(struct sfs_indexer_opts *o, const char *out, bool quiet)
{
	struct sfs_indexer_report rep;
	struct sfs_error err = { 0 };
	struct sfs_index *prev = NULL, *idx;
	uint64_t bytes = 0;
	double t0 = cli_now();
	char size[32], *spill_dir;
	size_t i;
	int rc;

	rc = o->nparts ? sfs_index_load_part(o->source, out, &prev, &err) :
			 sfs_index_load(o->source, out, &prev, &err);
	if (!rc)
		rc = sfs_index_check_bounds(prev, &err);
	if (!rc && o->hash)
		rc = sfs_index_check_digests(prev, &err);
	if (rc && rc != -ENOENT && !quiet)
		fprintf(stderr, "%s: not reusing the old index: %s\n", prog,
			err.msg);
	if (rc) {
		sfs_index_free(prev);
		prev = NULL;
	}
	spill_dir = sfs_index_dir(o->source, out);
	if (!spill_dir) {
		sfs_index_free(prev);
		cli_fail(prog, "out of memory");
		return CLI_ERROR;
	}
	o->spill_dir = spill_dir;
	rc = sfs_indexer_build(o, prev, &idx, &rep, &err);
	sfs_index_free(prev);
	o->spill_dir = NULL;
	free(spill_dir);
	if (rc) {
		cli_fail(prog, err.msg);
		return CLI_ERROR;
	}
	print_problems(&rep, "skipped");
	for (i = 0; o->version && i < idx->nshards; i++)
		if (idx->shards[i].format->dataset)
			break;
	if (o->version && i == idx->nshards) {
		fprintf(stderr,
			"%s: --dataset-version %llu: %s holds no dataset (a Lance dataset is a directory holding _versions/); leave the option out, or index the dataset's directory\n",
			prog, (unsigned long long)o->version, o->source);
		rc = CLI_ERROR;
		goto out_free;
	}
	rc = sfs_index_save(idx, out, &err);
	if (rc) {
		cli_fail(prog, err.msg);
		goto out_free;
	}
	for (i = 0; i < idx->nshards; i++)
		bytes += idx->shards[i].size;
	if (!quiet) {
		char *dir = sfs_index_dir(idx->source, out);

		if (o->nparts)
			printf("part %u of %u: ", o->part, o->nparts);
		printf("indexed %zu shards (%zu scanned, %zu reused, %zu skipped), %llu samples, %s in %.2f s; %zu other files ignored; index in %s\n",
		       idx->nshards, rep.scanned, rep.reused, rep.nproblems,
		       (unsigned long long)idx->nsamples,
		       cli_bytes(bytes, size, sizeof(size)), cli_now() - t0,
		       rep.ignored, dir ? dir : "?");
		free(dir);
	}
out_free:
	sfs_indexer_report_clear(&rep);
	sfs_index_free(idx);
	return rc ? CLI_ERROR : CLI_OK;
}

/*
 * Long for a reason: getopt_long's table and its switch, one case per
 * option, then the choice of merge, verify or build; each case is a
 * line or two, and splitting the switch would scatter the options.
 */
int main(int argc, char **argv)
{
	enum {
		OPT_OUT = 256,
		OPT_JOBS,
		OPT_NO_HASH,
		OPT_VERIFY,
		OPT_FORMAT,
		OPT_SAMPLES,
		OPT_SKIP_BAD,
		OPT_DATASET_VERSION,
		OPT_QUIET,
		OPT_PART,
		OPT_MERGE,
		OPT_HELP,
		OPT_VERSION
	};
	static const struct option longopts[] = {
		{ "out", required_argument, NULL, OPT_OUT },
		{ "jobs", required_argument, NULL, OPT_JOBS },
		{ "no-hash", no_argument, NULL, OPT_NO_HASH },
		{ "verify", no_argument, NULL, OPT_VERIFY },
		{ "format", required_argument, NULL, OPT_FORMAT },
		{ "samples-per-shard", required_argument, NULL, OPT_SAMPLES },
		{ "skip-bad", no_argument, NULL, OPT_SKIP_BAD },
		{ "dataset-version", required_argument, NULL,
		  OPT_DATASET_VERSION },
		{ "quiet", no_argument, NULL, OPT_QUIET },
		{ "part", required_argument, NULL, OPT_PART },
		{ "merge", no_argument, NULL, OPT_MERGE },
		{ "help", no_argument, NULL, OPT_HELP },
		{ "version", no_argument, NULL, OPT_VERSION },
		{ NULL, 0, NULL, 0 },
	};
	struct sfs_indexer_opts o = { .hash = true };
	struct sfs_error err = { 0 };
	const char *out = NULL;
	bool do_verify = false, quiet = false, do_merge = false;
	char *dir = NULL, **dirs = NULL;
	size_t ndirs = 0, i;
	uint64_t v;
	int c, status;

	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case OPT_OUT:
			out = optarg;
			break;
		case OPT_JOBS:
			if (sfs_options_number("jobs", optarg, 1, 256, &v,
					       &err)) {
				cli_fail(prog, err.msg);
				return CLI_ERROR;
			}
			o.jobs = (unsigned)v;
			break;
		case OPT_NO_HASH:
			o.hash = false;
			break;
		case OPT_VERIFY:
			do_verify = true;
			break;
		case OPT_FORMAT:
			o.format = sfs_format_by_name(optarg);
			if (!o.format || !sfs_format_of_files(o.format)) {
				char names[256];

				fprintf(stderr,
					"%s: --format %s is not a format of files: use %s; a Lance dataset needs no --format\n",
					prog, optarg,
					sfs_format_names(sfs_format_of_files, 0,
							 " or ", names,
							 sizeof(names)));
				return CLI_ERROR;
			}
			break;
		case OPT_SAMPLES:
			if (sfs_options_number("samples-per-shard", optarg, 1,
					       UINT32_MAX, &o.declared, &err)) {
				cli_fail(prog, err.msg);
				return CLI_ERROR;
			}
			break;
		case OPT_SKIP_BAD:
			o.skip_bad = true;
			break;
		case OPT_DATASET_VERSION:
			if (sfs_options_number("dataset-version", optarg, 1,
					       UINT64_MAX - 1, &o.version,
					       &err)) {
				cli_fail(prog, err.msg);
				return CLI_ERROR;
			}
			break;
		case OPT_QUIET:
			quiet = true;
			break;
		case OPT_PART:
			if (parse_part(optarg, &o, &err)) {
				cli_fail(prog, err.msg);
				return CLI_ERROR;
			}
			break;
		case OPT_MERGE:
			do_merge = true;
			break;
		case OPT_HELP:
			usage(stdout);
			return CLI_OK;
		case OPT_VERSION:
			printf("shardfs-index %s\n", SHARDFS_VERSION);
			return CLI_OK;
		default:
			usage(stderr);
			return CLI_ERROR;
		}
	}
	if (optind >= argc || (!do_merge && optind != argc - 1) ||
	    (do_merge && (do_verify || o.nparts)) || (do_verify && o.nparts)) {
		usage(stderr);
		return CLI_ERROR;
	}
	o.source = argv[optind];
	if (do_merge) {
		if (optind + 1 < argc)
			return merge(o.source, out, argv + optind + 1,
				     (size_t)(argc - optind - 1), quiet);
		if (find_parts(o.source, &dirs, &ndirs, &err)) {
			cli_fail(prog, err.msg);
			return CLI_ERROR;
		}
		status = merge(o.source, out, dirs, ndirs, quiet);
		for (i = 0; i < ndirs; i++)
			free(dirs[i]);
		free(dirs);
		return status;
	}
	if (!quiet && isatty(STDERR_FILENO))
		o.progress = progress;
	if (o.nparts && !out) {
		dir = part_dir(o.source, o.part, o.nparts);
		if (!dir) {
			cli_fail(prog, "out of memory");
			return CLI_ERROR;
		}
		out = dir;
	}
	status = do_verify ? verify(&o, out, quiet) : build(&o, out, quiet);
	free(dir);
	return status;
}
