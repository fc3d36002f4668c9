/*
 * shardfs-check: the overlap auditor.
 *
 *   shardfs-check plan SRC -o OPTIONS [--epochs A-B]   check a plan
 *   shardfs-check view MNT [MNT...] [--emit FILE]      read mounted views
 *   shardfs-check merge REPORT...                      judge node reports
 *
 * Exit status: 0 pass, 1 a violation was found, 2 could not check.
 */
#include <errno.h>
#include <getopt.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "cli.h"
#include "shardfs/mixture.h"
#include "shardfs/audit.h"
#include "shardfs/index.h"
#include "shardfs/indexer.h"
#include "shardfs/observe.h"
#include "shardfs/options.h"
#include "shardfs/plan.h"
#include "shardfs/pool.h"

#define MAX_FINDINGS 50
#define MAX_JOBS 64

static const char *prog = "shardfs-check";

struct args {
	const char *index_dir;
	const char *emit;
	struct sfs_options opts;
	uint64_t epoch_lo, epoch_hi;
	bool epochs;
	bool verify;
	bool json;
	unsigned jobs;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: shardfs-check plan SRC -o OPTIONS [--index DIR] [--epochs A-B]\n"
		"       shardfs-check view MNT [MNT...] [--emit FILE]\n"
		"       shardfs-check merge REPORT.json...\n"
		"  common: [--verify] [--json] [--jobs N]\n"
		"\n"
		"Prove that no sample is read twice and none is lost.\n"
		"\n"
		"  plan    compute the plan of every reader from the index of SRC and check\n"
		"          it: disjoint, covering, equal counts, the padding or drop it\n"
		"          reports.  -o takes the plan options of shardfs-plan; --epochs\n"
		"          A-B checks each epoch and how the order changed between them.\n"
		"          SRC may be a mixture file: reads are also counted per source.\n"
		"  view    read every file of one or more mounted views as a loader would\n"
		"          (tar members, jsonl lines, TFRecord records, files), hash every\n"
		"          sample, map it back to its source sample, and report overlap,\n"
		"          missing samples, wrong bytes, unequal counts, an order that is\n"
		"          not the plan's, mounts whose options disagree, ranks no mount\n"
		"          shows.  --emit FILE writes a report instead of judging, for\n"
		"          merge: one view per node, one merge anywhere.\n"
		"  merge   judge reports written by view --emit, as one audit; reports\n"
		"          of ranks that mount different mixtures are refused.\n"
		"\n"
		"  --verify   also re-hash the source shards against the index's SHA-256\n"
		"  --json     the verdict as JSON on stdout\n"
		"  --jobs N   threads, at most N at once (default: one per CPU this\n"
		"             process may use: affinity, cgroup cpu.max): up to N files\n"
		"             read at once, and the threads no file keeps busy help\n"
		"             hash the rows of a Parquet file of 65536 rows or more;\n"
		"             the source's files are stat'ed on N threads too\n"
		"             (default: 16, for the stats wait on the source,\n"
		"             not on a CPU);\n"
		"             --jobs 1 reads and hashes on one thread.  The verdict is\n"
		"             the same whatever N\n"
		"\n"
		"Exit status: 0 pass, 1 a violation was found, 2 could not check\n"
		"(usage, I/O, a missing index).\n");
}

/* ---- output ---- */

static int print_verdict(const struct args *a, const char *what,
			 bool read_bytes, const struct sfs_verdict *v)
{
	size_t i;

	if (a->json) {
		json_t *root, *fs = json_array(), *srcs = json_array();
		char *text;

		for (i = 0; i < v->nsources; i++)
			json_array_append_new(
				srcs,
				json_pack("{s:s, s:I, s:I}", "name",
					  v->sources[i].name, "planned",
					  (json_int_t)v->sources[i].planned,
					  "read",
					  (json_int_t)v->sources[i].seen));
		for (i = 0; i < v->nfindings; i++)
			json_array_append_new(
				fs,
				json_pack("{s:s, s:s}", "kind",
					  sfs_finding_name(v->findings[i].kind),
					  "message", v->findings[i].msg));
		root = json_pack(
			"{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:o, s:I}",
			"check", what, "verdict",
			v->nfindings ? "fail" : "pass", "readers",
			(json_int_t)v->readers_planned, "readers_seen",
			(json_int_t)v->readers_seen, "per_reader",
			(json_int_t)v->per_reader, "padding",
			(json_int_t)v->padding, "dropped",
			(json_int_t)v->dropped, "remaining",
			(json_int_t)v->remaining, "sources", srcs, "findings",
			fs, "more", (json_int_t)v->nmore);
		text = root ? json_dumps(root, JSON_INDENT(1)) : NULL;
		if (text)
			puts(text);
		free(text);
		json_decref(root);
	} else {
		printf("%s: %zu of %zu readers, %llu samples each (%llu remaining, %llu padded, %llu dropped)\n",
		       what, v->readers_seen, v->readers_planned,
		       (unsigned long long)v->per_reader,
		       (unsigned long long)v->remaining,
		       (unsigned long long)v->padding,
		       (unsigned long long)v->dropped);
		for (i = 0; i < v->nsources; i++)
			printf("%s%s %llu of %llu%s",
			       i ? ", " : "sources: ", v->sources[i].name,
			       (unsigned long long)v->sources[i].seen,
			       (unsigned long long)v->sources[i].planned,
			       i + 1 == v->nsources ? "\n" : "");
		if (!v->nfindings) {
			printf("PASS: disjoint, nothing missing, equal counts%s\n",
			       read_bytes ?
				       ", every sample's bytes and order as planned" :
				       "");
		} else {
			printf("FAIL: %zu finding%s:", v->nfindings + v->nmore,
			       v->nfindings + v->nmore == 1 ? "" : "s");
			for (i = 0; i < SFS_FIND_KINDS; i++)
				if (v->kinds[i])
					printf(" %zu %s", v->kinds[i],
					       sfs_finding_name((
						       enum sfs_finding_kind)i));
			printf("\n");
			for (i = 0; i < v->nfindings; i++)
				printf("  %s: %s\n",
				       sfs_finding_name(v->findings[i].kind),
				       v->findings[i].msg);
			if (v->nmore)
				printf("  ... and %zu more\n", v->nmore);
		}
	}
	return v->nfindings ? CLI_FOUND : CLI_OK;
}

/* --verify: the source against the index's hashes, as findings. */
static int verify_source(const struct args *a, const struct sfs_index *idx,
			 struct sfs_verdict *v, struct sfs_error *err)
{
	struct sfs_indexer_opts o = { .jobs = a->jobs };
	struct sfs_indexer_report rep;
	size_t i;
	int rc;

	rc = sfs_indexer_verify(&o, idx, &rep, err);
	for (i = 0; !rc && i < rep.nproblems; i++)
		rc = sfs_verdict_add(v, MAX_FINDINGS, SFS_FIND_SOURCE, "%s",
				     rep.problems[i]);
	sfs_indexer_report_clear(&rep);
	return rc;
}

/* ---- plan ---- */

/* " (replicas=2: 8 shares)" when groups of ranks share their reads. */
static const char *replicas_note(const struct sfs_plan_opts *o,
				 const struct sfs_plan *plan, char *buf,
				 size_t len)
{
	buf[0] = '\0';
	if (o->replicas > 1)
		snprintf(buf, len, " (replicas=%u: %zu shares)", o->replicas,
			 plan->nreaders);
	return buf;
}

static int check_plan(struct args *a, const char *src)
{
	struct sfs_error err = { 0 };
	struct sfs_index *idx = NULL;
	struct sfs_plan *prev = NULL;
	uint64_t e, lo = a->opts.plan.epoch, hi = a->opts.plan.epoch;
	int status = CLI_OK, rc;

	if (a->epochs) {
		lo = a->epoch_lo;
		hi = a->epoch_hi;
	}
	if (sfs_options_check(&a->opts, &err) ||
	    sfs_source_load(src, a->index_dir, &idx, &err) ||
	    sfs_index_check_bounds(idx, &err) ||
	    sfs_index_check_source(idx, a->index_dir, false, a->jobs, &err)) {
		cli_fail(prog, err.msg);
		sfs_index_free(idx);
		return CLI_ERROR;
	}
	for (e = lo; e <= hi; e++) {
		struct sfs_plan_opts o = a->opts.plan;
		struct sfs_audit au = { 0 };
		struct sfs_verdict v;
		struct sfs_plan *plan;
		size_t t, f, whole = 0, nfiles = 0;
		char what[64], rep[64];

		o.epoch = e;
		if (sfs_plan_build(idx, &o, &plan, &err) ||
		    sfs_audit_from_plan(&au, plan, "plan") ||
		    sfs_audit_judge(&au, idx, MAX_FINDINGS, &v, &err) ||
		    (a->verify && e == lo && verify_source(a, idx, &v, &err))) {
			cli_fail(prog, err.msg[0] ? err.msg : "out of memory");
			sfs_audit_clear(&au);
			status = CLI_ERROR;
			break;
		}
		for (t = 0; t < plan->nreaders; t++)
			for (f = 0; f < plan->readers[t].nfiles; f++, nfiles++)
				whole +=
					plan->files[plan->readers[t].file_at + f]
						.whole;
		snprintf(what, sizeof(what), "plan, epoch %llu",
			 (unsigned long long)e);
		if (!a->json)
			printf("%s: world=%u × workers=%u = %zu readers%s, seed=%llu, shuffle=%s, block=%llu, batch=%llu, start=%llu, partition=%s, remainder=%s\n"
			       "files: %zu in all, %zu whole shards (symlinks), %zu slices; %.1f per reader\n",
			       what, o.world, o.workers,
			       (size_t)o.world * o.workers,
			       replicas_note(&o, plan, rep, sizeof(rep)),
			       (unsigned long long)o.seed,
			       sfs_shuffle_name(o.shuffle),
			       (unsigned long long)o.block,
			       (unsigned long long)o.batch,
			       (unsigned long long)o.start,
			       sfs_partition_name(o.partition),
			       sfs_remainder_name(o.remainder), nfiles, whole,
			       nfiles - whole,
			       (double)nfiles / (double)plan->nreaders);
		if (prev && !a->json) {
			struct sfs_audit pa = { 0 }, pb = { 0 };
			uint64_t moved = 0, same = 0, n = 0, k;
			size_t r;

			/* how the order changed: readers and positions */
			if (!sfs_audit_from_plan(&pa, prev, "a") &&
			    !sfs_audit_from_plan(&pb, plan, "b"))
				for (r = 0; r < pa.nreaders; r++)
					for (k = 0; k < pa.readers[r].nsamples;
					     k++, n++) {
						same += !memcmp(
							&pa.readers[r]
								 .samples[k],
							&pb.readers[r]
								 .samples[k],
							sizeof(struct sfs_audit_sample));
					}
			moved = n - same;
			printf("order: %.1f%% of positions hold another sample than in epoch %llu%s\n",
			       n ? 100.0 * (double)moved / (double)n : 0.0,
			       (unsigned long long)(e - 1),
			       moved ? "" :
				       " — the epochs are identical: is shuffle=none?");
			sfs_audit_clear(&pa);
			sfs_audit_clear(&pb);
		}
		rc = print_verdict(a, what, false, &v);
		if (rc > status)
			status = rc;
		sfs_verdict_clear(&v);
		sfs_audit_clear(&au);
		sfs_plan_free(prev);
		prev = plan;
		if (e == UINT64_MAX)
			break;
	}
	sfs_plan_free(prev);
	sfs_index_free(idx);
	return status;
}

/* ---- view ---- */

static void observe_progress(const char *what, const struct sfs_pool *p,
			     bool final, void *arg)
{
	char b[32];

	(void)arg;
	if (final)
		fprintf(stderr, "\r%s: %s %zu/%zu done%30s\n", prog, what, p->n,
			p->n, "");
	else
		fprintf(stderr, "\r%s: %s %zu/%zu, %s, %.0f MB/s   ", prog,
			what, atomic_load(&p->done), p->n,
			cli_bytes(atomic_load(&p->bytes), b, sizeof(b)),
			p->elapsed > 0 ? (double)atomic_load(&p->bytes) /
						 p->elapsed / 1e6 :
					 0);
}

static int emit(const struct args *a, const struct sfs_observation *ob,
		size_t nm, struct sfs_error *err)
{
	char *text = sfs_audit_write(&ob->audit, ob->idx);
	FILE *f = text ? fopen(a->emit, "w") : NULL;
	int rc = 0;

	if (!f || fputs(text, f) < 0 || fclose(f))
		rc = sfs_errorf(err, -EIO, "%s: cannot write the report: %s",
				a->emit, strerror(errno));
	else if (!a->json)
		printf("%s: wrote %s: %zu readers of %zu mount%s\n", prog,
		       a->emit, ob->audit.nreaders, nm, nm == 1 ? "" : "s");
	free(text);
	return rc;
}

static int check_view(struct args *a, char **paths, size_t nm)
{
	struct sfs_observe_opts o = {
		.jobs = a->jobs,
		.max_findings = MAX_FINDINGS,
		.verify = a->verify,
		.progress = isatty(2) ? observe_progress : NULL,
	};
	struct sfs_observation ob;
	struct sfs_error err = { 0 };
	struct sfs_verdict v = { 0 };
	size_t i;
	int rc, status = CLI_ERROR;

	if (nm && sfs_observe_is_follow(paths[0])) {
		memset(&ob, 0, sizeof(ob));
		if (a->emit) {
			rc = sfs_errorf(
				&err, -EINVAL,
				"%s serves a followed source: --emit and merge do not apply; audit every mount of the stream together: shardfs-check view MNT...",
				paths[0]);
			goto out;
		}
		rc = sfs_observe_follow((const char *const *)paths, nm, &o, &v,
					&err);
		if (!rc)
			status = print_verdict(a, "view", true, &v);
		goto out;
	}
	rc = sfs_observe_views((const char *const *)paths, nm, &o, &ob, &err);
	if (rc)
		goto out;
	if (a->emit) {
		rc = emit(a, &ob, nm, &err);
		if (!rc)
			status = CLI_OK;
		goto out;
	}
	rc = sfs_audit_judge(&ob.audit, ob.idx, MAX_FINDINGS, &v, &err);
	for (i = 0; !rc && i < ob.found.nfindings; i++)
		rc = sfs_verdict_add(&v, MAX_FINDINGS,
				     ob.found.findings[i].kind, "%s",
				     ob.found.findings[i].msg);
	if (!rc && a->verify)
		rc = verify_source(a, ob.idx, &v, &err);
	if (!rc)
		status = print_verdict(a, "view", true, &v);
out:
	if (rc && status == CLI_ERROR)
		cli_fail(prog, err.msg[0] ? err.msg : strerror(-rc));
	sfs_verdict_clear(&v);
	sfs_observation_clear(&ob);
	return status;
}

/* ---- merge ---- */

static int check_merge(struct args *a, char **paths, size_t n)
{
	struct sfs_error err = { 0 };
	struct sfs_index *idx = NULL;
	struct sfs_audit au = { 0 };
	struct sfs_verdict v = { 0 };
	size_t i;
	int status = CLI_ERROR;

	for (i = 0; i < n; i++)
		if (sfs_audit_read(&au, paths[i], &idx, &err))
			goto out;
	if (sfs_audit_judge(&au, idx, MAX_FINDINGS, &v, &err))
		goto out;
	status = print_verdict(a, "merge", true, &v);
out:
	if (status == CLI_ERROR)
		cli_fail(prog, err.msg);
	sfs_verdict_clear(&v);
	sfs_audit_clear(&au);
	sfs_index_free(idx);
	return status;
}

int main(int argc, char **argv)
{
	enum {
		OPT_INDEX = 256,
		OPT_EPOCHS,
		OPT_EMIT,
		OPT_VERIFY,
		OPT_JSON,
		OPT_JOBS,
		OPT_HELP,
		OPT_VERSION
	};
	static const struct option longopts[] = {
		{ "index", required_argument, NULL, OPT_INDEX },
		{ "epochs", required_argument, NULL, OPT_EPOCHS },
		{ "emit", required_argument, NULL, OPT_EMIT },
		{ "verify", no_argument, NULL, OPT_VERIFY },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "jobs", required_argument, NULL, OPT_JOBS },
		{ "help", no_argument, NULL, OPT_HELP },
		{ "version", no_argument, NULL, OPT_VERSION },
		{ NULL, 0, NULL, 0 },
	};
	struct args a = { 0 };
	struct sfs_error err = { 0 };
	const char *cmd;
	uint64_t v;
	int c, status = CLI_ERROR;

	sfs_options_init(&a.opts);
	while ((c = getopt_long(argc, argv, "o:", longopts, NULL)) != -1) {
		switch (c) {
		case 'o':
			if (sfs_options_parse(&a.opts, optarg, &err))
				goto usage_error;
			break;
		case OPT_INDEX:
			a.index_dir = optarg;
			break;
		case OPT_EPOCHS:
			if (cli_range("epochs", optarg, 0, UINT64_MAX,
				      &a.epoch_lo, &a.epoch_hi, &err))
				goto usage_error;
			a.epochs = true;
			break;
		case OPT_EMIT:
			a.emit = optarg;
			break;
		case OPT_VERIFY:
			a.verify = true;
			break;
		case OPT_JSON:
			a.json = true;
			break;
		case OPT_JOBS:
			if (sfs_options_number("jobs", optarg, 1, MAX_JOBS, &v,
					       &err))
				goto usage_error;
			a.jobs = (unsigned)v;
			break;
		case OPT_HELP:
			usage(stdout);
			status = CLI_OK;
			goto out;
		case OPT_VERSION:
			printf("shardfs-check %s\n", SHARDFS_VERSION);
			status = CLI_OK;
			goto out;
		default:
			usage(stderr);
			goto out;
		}
	}
	if (optind >= argc - 1) {
		usage(stderr);
		goto out;
	}
	cmd = argv[optind++];
	if (!strcmp(cmd, "plan") && optind == argc - 1)
		status = check_plan(&a, argv[optind]);
	else if (!strcmp(cmd, "view"))
		status = check_view(&a, argv + optind, (size_t)(argc - optind));
	else if (!strcmp(cmd, "merge"))
		status =
			check_merge(&a, argv + optind, (size_t)(argc - optind));
	else
		usage(stderr);
	goto out;
usage_error:
	cli_fail(prog, err.msg);
out:
	sfs_options_clear(&a.opts);
	return status;
}
