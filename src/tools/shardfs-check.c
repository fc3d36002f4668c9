/*
 * shardfs-check: the overlap auditor.
 *
 *   shardfs-check plan SRC -o OPTIONS [--epochs A-B]   check a plan
 *   shardfs-check view MNT [MNT...] [--emit FILE]      read mounted views
 *   shardfs-check merge REPORT...                      judge node reports
 *
 * Exit status: 0 pass, 1 a violation was found, 2 could not check.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "cli.h"
#include "shardfs/audit.h"
#include "shardfs/digest.h"
#include "shardfs/index.h"
#include "shardfs/indexer.h"
#include "shardfs/options.h"
#include "shardfs/plan.h"
#include "shardfs/status.h"

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
		"  view    read every file of one or more mounted views as a loader would\n"
		"          (tar members, jsonl lines, TFRecord records, files), hash every\n"
		"          sample, map it back to its source sample, and report overlap,\n"
		"          missing samples, wrong bytes, unequal counts, an order that is\n"
		"          not the plan's, mounts whose options disagree, ranks no mount\n"
		"          shows.  --emit FILE writes a report instead of judging, for\n"
		"          merge: one view per node, one merge anywhere.\n"
		"  merge   judge reports written by view --emit, as one audit.\n"
		"\n"
		"  --verify   also re-hash the source shards against the index's SHA-256\n"
		"  --json     the verdict as JSON on stdout\n"
		"  --jobs N   threads for reading and hashing (default: one per CPU)\n"
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
		json_t *root, *fs = json_array();
		char *text;

		for (i = 0; i < v->nfindings; i++)
			json_array_append_new(
				fs,
				json_pack("{s:s, s:s}", "kind",
					  sfs_finding_name(v->findings[i].kind),
					  "message", v->findings[i].msg));
		root = json_pack(
			"{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:I}",
			"check", what, "verdict",
			v->nfindings ? "fail" : "pass", "readers",
			(json_int_t)v->readers_planned, "readers_seen",
			(json_int_t)v->readers_seen, "per_reader",
			(json_int_t)v->per_reader, "padding",
			(json_int_t)v->padding, "dropped",
			(json_int_t)v->dropped, "remaining",
			(json_int_t)v->remaining, "findings", fs, "more",
			(json_int_t)v->nmore);
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
	    sfs_index_load(src, a->index_dir, &idx, &err) ||
	    sfs_index_check_source(idx, a->index_dir, false, &err)) {
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
		char what[64];

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
			printf("%s: world=%u × workers=%u = %zu readers, seed=%llu, shuffle=%s, block=%llu, batch=%llu, start=%llu, partition=%s, remainder=%s\n"
			       "files: %zu in all, %zu whole shards (symlinks), %zu slices; %.1f per reader\n",
			       what, o.world, o.workers, plan->nreaders,
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

/* One mounted view, as its .shardfs/status describes it. */
struct vmount {
	const char *path;
	struct sfs_plan_opts opts;
	char *source;
	char *index; /* NULL: SRC/.shardfs */
	struct sfs_plan *plan;
};

/* One file to read, or (files datasets) one sample of several files. */
struct job {
	size_t reader; /* in the audit */
	char *name; /* as reported */
	char **paths; /* the file(s), in name order */
	size_t npaths;
	const struct sfs_format_ops *ops;
	unsigned char (*digests)[SFS_DIGEST_LEN];
	size_t ndigests;
	uint64_t bytes;
	char *error;
};

struct pool {
	struct job *jobs;
	size_t n;
	atomic_size_t next, done;
	atomic_uint_fast64_t bytes;
	unsigned threads;
	bool progress;
};

static int collect(void *arg, uint64_t sample, const unsigned char d[32])
{
	struct job *j = arg;
	void *nd;

	(void)sample;
	nd = realloc(j->digests, (j->ndigests + 1) * SFS_DIGEST_LEN);
	if (!nd)
		return -ENOMEM;
	j->digests = nd;
	memcpy(j->digests[j->ndigests++], d, SFS_DIGEST_LEN);
	return 0;
}

static void run_job(struct job *j, struct sfs_digest *d)
{
	struct sfs_error err = { 0 };
	unsigned char out[SFS_DIGEST_LEN];
	struct stat st;
	size_t i;
	int fd, rc = 0;

	for (i = 0; !rc && i < j->npaths; i++) {
		fd = open(j->paths[i], O_RDONLY | O_CLOEXEC);
		if (fd < 0 || fstat(fd, &st) < 0) {
			rc = sfs_errorf(&err, -EIO, "%s: %s", j->paths[i],
					strerror(errno));
			if (fd >= 0)
				close(fd);
			break;
		}
		j->bytes += (uint64_t)st.st_size;
		if (j->npaths == 1 && j->ops)
			rc = j->ops->samples(fd, j->paths[i], collect, j, &err);
		else /* a sample of several files: one digest over all */
			rc = sfs_digest_fd(d, fd, (uint64_t)st.st_size,
					   j->paths[i], &err);
		close(fd);
	}
	if (!rc && !(j->npaths == 1 && j->ops)) {
		rc = sfs_digest_final(d, out);
		if (!rc)
			rc = collect(j, 0, out);
	}
	if (rc)
		j->error = strdup(err.msg[0] ? err.msg : strerror(-rc));
}

static void *pool_worker(void *arg)
{
	struct pool *p = arg;
	struct sfs_digest *d = sfs_digest_new();
	size_t i;

	while ((i = atomic_fetch_add(&p->next, 1)) < p->n) {
		run_job(&p->jobs[i], d);
		atomic_fetch_add(&p->bytes, p->jobs[i].bytes);
		atomic_fetch_add(&p->done, 1);
	}
	sfs_digest_free(d);
	return NULL;
}

static void pool_run(struct pool *p, const char *what)
{
	pthread_t tids[MAX_JOBS];
	unsigned i, started = 0;
	double t0 = cli_now();
	char b[32];

	for (i = 0; i < p->threads && i < MAX_JOBS; i++)
		if (!pthread_create(&tids[started], NULL, pool_worker, p))
			started++;
	if (!started)
		pool_worker(p);
	while (p->progress && atomic_load(&p->done) < p->n) {
		struct timespec ts = { 0, 250 * 1000 * 1000 };
		double dt = cli_now() - t0;

		fprintf(stderr, "\r%s: %s %zu/%zu, %s, %.0f MB/s   ", prog,
			what, atomic_load(&p->done), p->n,
			cli_bytes(atomic_load(&p->bytes), b, sizeof(b)),
			dt > 0 ? (double)atomic_load(&p->bytes) / dt / 1e6 : 0);
		nanosleep(&ts, NULL);
	}
	for (i = 0; i < started; i++)
		pthread_join(tids[i], NULL);
	if (p->progress)
		fprintf(stderr, "\r%s: %s %zu/%zu done%30s\n", prog, what, p->n,
			p->n, "");
}

static void jobs_free(struct job *jobs, size_t n)
{
	size_t i, k;

	for (i = 0; i < n; i++) {
		for (k = 0; k < jobs[i].npaths; k++)
			free(jobs[i].paths[k]);
		free(jobs[i].paths);
		free(jobs[i].name);
		free(jobs[i].digests);
		free(jobs[i].error);
	}
	free(jobs);
}

static int add_job(struct job **jobs, size_t *n, size_t reader,
		   const char *name, const struct sfs_format_ops *ops)
{
	struct job *nj = realloc(*jobs, (*n + 1) * sizeof(*nj));

	if (!nj)
		return -ENOMEM;
	*jobs = nj;
	memset(&nj[*n], 0, sizeof(nj[*n]));
	nj[*n].reader = reader;
	nj[*n].ops = ops;
	nj[*n].name = strdup(name);
	(*n)++;
	return nj[*n - 1].name ? 0 : -ENOMEM;
}

static int job_add_path(struct job *j, const char *path)
{
	char **np = realloc(j->paths, (j->npaths + 1) * sizeof(*np));

	if (!np)
		return -ENOMEM;
	j->paths = np;
	np[j->npaths] = strdup(path);
	return np[j->npaths++] ? 0 : -ENOMEM;
}

/* out = a/b; -ENAMETOOLONG when it does not fit. */
static int join(char *out, size_t len, const char *a, const char *b)
{
	int n = snprintf(out, len, "%s/%s", a, b);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The entries of dir (not . and ..), sorted; NULL-terminated, *n set. */
static char **list_dir(const char *dir, size_t *n)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char **names = NULL;

	*n = 0;
	if (!d)
		return NULL;
	while ((de = readdir(d))) {
		char **nn;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		nn = realloc(names, (*n + 2) * sizeof(*nn));
		if (!nn)
			break;
		names = nn;
		names[(*n)++] = strdup(de->d_name);
	}
	closedir(d);
	if (names) {
		names[*n] = NULL;
		qsort(names, *n, sizeof(*names), name_cmp);
	}
	return names;
}

static void free_list(char **names, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

/* The format of a view file: its provenance, else its name. */
static const struct sfs_format_ops *
file_format(const struct sfs_index *idx, const char *path, const char *name)
{
	char target[PATH_MAX];
	ssize_t n = readlink(path, target, sizeof(target) - 1);
	size_t len = strlen(idx->source);
	ssize_t s;

	if (n < 0)
		n = getxattr(path, "user.shardfs.source", target,
			     sizeof(target) - 1);
	if (n > 0) {
		target[n] = '\0';
		if (!strncmp(target, idx->source, len) && target[len] == '/' &&
		    (s = sfs_index_find(idx, target + len + 1)) >= 0)
			return idx->shards[s].format;
	}
	return sfs_format_detect(name);
}

/* files datasets: walk a worker directory, one job per sample (seq). */
static int files_jobs(struct job **jobs, size_t *n, size_t reader,
		      const char *dir, const char *rel)
{
	char path[PATH_MAX], sub[PATH_MAX];
	size_t cnt, i, k;
	char **names = list_dir(dir, &cnt);
	int rc = 0;
	struct stat st;

	for (i = 0; !rc && i < cnt; i++) {
		rc = join(path, sizeof(path), dir, names[i]);
		if (!rc && *rel)
			rc = join(sub, sizeof(sub), rel, names[i]);
		else if (!rc && strlen(names[i]) < sizeof(sub))
			strcpy(sub, names[i]);
		if (rc)
			break;
		if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
			rc = files_jobs(jobs, n, reader, path, sub);
			continue;
		}
		/* Same sequence number in the same directory: one sample.
		 * Names are sorted, so a sample's files are adjacent: only
		 * the last job can be this file's. */
		k = *n;
		if (k) {
			const struct job *j = &(*jobs)[k - 1];
			size_t key = strlen(sub) - strlen(names[i]) +
				     strcspn(names[i], "-");

			if (j->reader != reader || strncmp(j->name, sub, key) ||
			    j->name[key] != '-')
				k = *n;
			else
				k = *n - 1;
		}
		if (k == *n)
			rc = add_job(jobs, n, reader, sub, NULL);
		if (!rc)
			rc = job_add_path(&(*jobs)[k], path);
	}
	free_list(names, cnt);
	return rc;
}

/* Sequence number a `files` job's name starts with (after its dirs). */
static unsigned long long job_seq(const struct job *j)
{
	const char *base = strrchr(j->name, '/');

	return strtoull(base ? base + 1 : j->name, NULL, 10);
}

static int job_seq_cmp(const void *a, const void *b)
{
	const struct job *x = a, *y = b;
	unsigned long long p = job_seq(x), q = job_seq(y);

	if (x->reader != y->reader)
		return x->reader < y->reader ? -1 : 1;
	return p < q ? -1 : p > q;
}

/* Read MNT/.shardfs/status into m. */
static int read_status(struct vmount *m, struct sfs_error *err)
{
	struct sfs_status st;
	char path[PATH_MAX];
	char *text = NULL;
	size_t len = 0;
	FILE *f;
	int rc;

	snprintf(path, sizeof(path), "%s/.shardfs/status", m->path);
	f = fopen(path, "re");
	if (!f)
		return sfs_errorf(
			err, -EINVAL,
			"%s: cannot read the view's status (unable to open %s: %s); is a shardfs view mounted there?",
			path, path, strerror(errno));
	rc = getdelim(&text, &len, '\0', f) < 0 ? -EINVAL : 0;
	fclose(f);
	if (!rc)
		rc = sfs_status_read(text, strlen(text), path, &st, err);
	else
		sfs_errorf(err, rc, "%s: cannot read the view's status", path);
	free(text);
	if (rc)
		return rc;
	m->source = st.source;
	m->index = st.index_dir;
	m->opts = st.plan;
	if (st.epochs != 1)
		rc = sfs_errorf(
			err, -EINVAL,
			"%s is mounted with epochs=%u: the auditor checks one epoch per mount; mount with epochs=1",
			m->path, st.epochs);
	return rc;
}

/* Digests of every source sample, and a table from digest to sample. */
struct source_map {
	/* per global sample: the index's digests, or own when hashed here */
	const unsigned char (*dig)[SFS_DIGEST_LEN];
	unsigned char (*own)[SFS_DIGEST_LEN];
	uint64_t *table; /* global sample + 1, or 0 */
	uint64_t mask;
	uint64_t n;
};

static uint64_t dig_hash(const unsigned char *d)
{
	uint64_t h;

	memcpy(&h, d, sizeof(h));
	return h;
}

/*
 * A shard that cannot be read, or reads other than indexed, is a finding
 * in v; its samples then match nothing.
 */
static int source_map_build(struct source_map *sm, const struct sfs_index *idx,
			    const struct args *a, struct sfs_verdict *v,
			    struct sfs_error *err)
{
	struct pool p = { .threads = a->jobs, .progress = isatty(2) };
	uint64_t g, k;
	size_t i, s;
	int rc = 0;

	sm->n = idx->nsamples;
	/* an index built with hashes holds every sample's digest: no need
	 * to read the source (--verify does, against the shard hashes) */
	if (idx->digests) {
		sm->dig = (const unsigned char(*)[SFS_DIGEST_LEN])idx->digests;
		goto table;
	}
	sm->own = calloc(sm->n + 1, SFS_DIGEST_LEN);
	p.jobs = calloc(idx->nshards + 1, sizeof(*p.jobs));
	if (!sm->own || !p.jobs) {
		free(p.jobs);
		return sfs_errorf(err, -ENOMEM, "out of memory");
	}
	sm->dig = (const unsigned char(*)[SFS_DIGEST_LEN])sm->own;
	p.n = idx->nshards;
	for (i = 0; i < idx->nshards; i++) {
		const struct sfs_shard *sh = &idx->shards[i];
		char path[PATH_MAX];

		p.jobs[i].reader = i;
		p.jobs[i].ops = sh->nmembers ? NULL : sh->format;
		snprintf(path, sizeof(path), "%s/%s", idx->source, sh->path);
		rc = job_add_path(&p.jobs[i], path);
		for (k = 0; !rc && k < sh->nmembers; k++) {
			snprintf(path, sizeof(path), "%s/%s", idx->source,
				 sh->members[k].path);
			rc = job_add_path(&p.jobs[i], path);
		}
		if (rc)
			return sfs_errorf(err, -ENOMEM, "out of memory");
	}
	pool_run(&p, "hashing source shards");
	for (i = 0; !rc && i < idx->nshards; i++) {
		const struct sfs_shard *sh = &idx->shards[i];
		struct job *j = &p.jobs[i];

		if (j->error)
			rc = sfs_verdict_add(v, MAX_FINDINGS, SFS_FIND_SOURCE,
					     "%s", j->error);
		else if (j->ndigests != sh->nsamples &&
			 !(sh->format->whole_file && j->ndigests == 1))
			rc = sfs_verdict_add(
				v, MAX_FINDINGS, SFS_FIND_SOURCE,
				"%s: %zu samples read, the index says %llu; rebuild the index with shardfs-index",
				sh->path, j->ndigests,
				(unsigned long long)sh->nsamples);
		else
			for (k = 0; k < sh->nsamples; k++)
				memcpy(sm->own[sh->first_sample + k],
				       j->digests[k < j->ndigests ? k : 0],
				       SFS_DIGEST_LEN);
	}
	if (rc)
		sfs_errorf(err, rc, "out of memory");
	jobs_free(p.jobs, p.n);
	if (rc)
		return rc;
table:
	for (sm->mask = 1; sm->mask < 2 * sm->n + 2; sm->mask <<= 1)
		;
	sm->table = calloc(sm->mask, sizeof(*sm->table));
	if (!sm->table)
		return sfs_errorf(err, -ENOMEM, "out of memory");
	sm->mask--;
	for (g = 0; g < sm->n; g++) {
		for (s = dig_hash(sm->dig[g]) & sm->mask; sm->table[s];
		     s = (s + 1) & sm->mask)
			if (!memcmp(sm->dig[sm->table[s] - 1], sm->dig[g],
				    SFS_DIGEST_LEN))
				break;
		if (!sm->table[s])
			sm->table[s] = g + 1;
	}
	return 0;
}

static void source_map_free(struct source_map *sm)
{
	free(sm->own);
	free(sm->table);
}

/* The sample with digest d: the planned one when it matches, else any. */
static struct sfs_audit_sample lookup(const struct source_map *sm,
				      const struct sfs_index *idx,
				      const unsigned char *d,
				      const struct sfs_audit_sample *planned)
{
	struct sfs_audit_sample out = { SFS_AUDIT_UNKNOWN, 0 };
	size_t lo, hi;
	uint64_t s, g;

	if (planned &&
	    !memcmp(sm->dig[idx->shards[planned->shard].first_sample +
			    planned->sample],
		    d, SFS_DIGEST_LEN))
		return *planned;
	for (s = dig_hash(d) & sm->mask; sm->table[s]; s = (s + 1) & sm->mask)
		if (!memcmp(sm->dig[sm->table[s] - 1], d, SFS_DIGEST_LEN))
			break;
	if (!sm->table[s])
		return out;
	g = sm->table[s] - 1;
	/* the last shard that starts at or before g holds it (empty shards
	 * before it start at the same sample) */
	lo = 0;
	hi = idx->nshards;
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (idx->shards[mid].first_sample <= g)
			lo = mid;
		else
			hi = mid;
	}
	out.shard = lo;
	out.sample = g - idx->shards[lo].first_sample;
	return out;
}

/* List the readers of every mount: the audit's readers and the jobs. */
static int enumerate(struct vmount *mounts, size_t nm,
		     const struct sfs_index *idx, struct sfs_audit *au,
		     struct job **jobs, size_t *njobs, struct sfs_error *err)
{
	bool files = idx->nshards && idx->shards[0].format->tree;
	size_t m, i, w, k, nranks, nworkers, first;
	char path[PATH_MAX];
	int rc = 0;

	for (m = 0; !rc && m < nm; m++) {
		char **ranks = list_dir(mounts[m].path, &nranks);

		if (sfs_audit_add_mount(au, mounts[m].path, &mounts[m].opts) <
		    0)
			rc = -ENOMEM;
		for (i = 0; !rc && i < nranks; i++) {
			char **workers, *end;
			unsigned long rank = strtoul(ranks[i], &end, 10);

			if (*end || ranks[i][0] == '.')
				continue;
			if (join(path, sizeof(path), mounts[m].path, ranks[i]))
				continue;
			workers = list_dir(path, &nworkers);
			for (w = 0; !rc && w < nworkers; w++) {
				unsigned long worker =
					strtoul(workers[w], &end, 10);
				struct sfs_audit_reader *r;
				char **names, dir[PATH_MAX];
				size_t nn;

				if (*end)
					continue;
				r = sfs_audit_add_reader(au, m, (uint32_t)rank,
							 (uint32_t)worker);
				if (!r) {
					rc = -ENOMEM;
					break;
				}
				rc = join(dir, sizeof(dir), path, workers[w]);
				if (rc)
					break;
				if (files) {
					first = *njobs;
					rc = files_jobs(jobs, njobs,
							au->nreaders - 1, dir,
							"");
					qsort(*jobs + first, *njobs - first,
					      sizeof(**jobs), job_seq_cmp);
					continue;
				}
				names = list_dir(dir, &nn);
				for (k = 0; !rc && k < nn; k++) {
					char fp[PATH_MAX];

					rc = join(fp, sizeof(fp), dir,
						  names[k]);
					if (!rc)
						rc = add_job(
							jobs, njobs,
							au->nreaders - 1,
							names[k],
							file_format(idx, fp,
								    names[k]));
					if (!rc)
						rc = job_add_path(
							&(*jobs)[*njobs - 1],
							fp);
				}
				free_list(names, nn);
			}
			free_list(workers, nworkers);
		}
		free_list(ranks, nranks);
	}
	if (rc)
		sfs_errorf(err, rc, "cannot list the views: %s", strerror(-rc));
	return rc;
}

/* Turn what the jobs read into the audit's samples. */
static int record(struct sfs_audit *au, struct vmount *mounts,
		  const struct sfs_index *idx, const struct source_map *sm,
		  struct job *jobs, size_t njobs, struct sfs_verdict *v)
{
	struct sfs_audit_sample *want = NULL;
	size_t i, k, nwant = 0, pos = 0, cur = SIZE_MAX;
	int rc = 0;

	for (i = 0; !rc && i < njobs; i++) {
		struct job *j = &jobs[i];
		struct sfs_audit_reader *r = &au->readers[j->reader];
		const struct sfs_plan *p = mounts[r->mount].plan;

		if (j->reader != cur) {
			free(want);
			want = NULL;
			nwant = pos = 0;
			cur = j->reader;
			if (r->rank < p->opts.world &&
			    r->worker < p->opts.workers)
				want = sfs_audit_planned(
					p,
					sfs_plan_reader_id(p, r->rank,
							   r->worker),
					&nwant);
		}
		rc = sfs_audit_add_file(r, j->name);
		if (!rc && j->error)
			rc = sfs_verdict_add(
				v, MAX_FINDINGS, SFS_FIND_BYTES,
				"rank %u worker %u: %s cannot be read: %s",
				r->rank, r->worker, j->name, j->error);
		for (k = 0; !rc && k < j->ndigests; k++, pos++) {
			struct sfs_audit_sample s =
				lookup(sm, idx, j->digests[k],
				       pos < nwant ? &want[pos] : NULL);

			rc = sfs_audit_add_sample(r, s.shard, s.sample);
		}
	}
	free(want);
	return rc;
}

static int check_view(struct args *a, char **paths, size_t nm)
{
	struct vmount *mounts = calloc(nm, sizeof(*mounts));
	struct sfs_error err = { 0 };
	struct sfs_index *idx = NULL;
	struct source_map sm = { 0 };
	struct sfs_audit au = { 0 };
	struct sfs_verdict v = { 0 }, pre = { 0 };
	struct pool p = { .threads = a->jobs, .progress = isatty(2) };
	size_t m, i;
	int rc = 0, status = CLI_ERROR;

	if (!mounts)
		return CLI_ERROR;
	for (m = 0; !rc && m < nm; m++) {
		mounts[m].path = paths[m];
		rc = read_status(&mounts[m], &err);
		if (!rc && m &&
		    (strcmp(mounts[m].source, mounts[0].source) ||
		     (mounts[m].index == NULL) != (mounts[0].index == NULL) ||
		     (mounts[m].index &&
		      strcmp(mounts[m].index, mounts[0].index))))
			rc = sfs_errorf(
				&err, -EINVAL,
				"%s serves %s, %s serves %s: audit views of one source and index together",
				mounts[0].path, mounts[0].source,
				mounts[m].path, mounts[m].source);
	}
	if (!rc)
		rc = sfs_index_load(mounts[0].source, mounts[0].index, &idx,
				    &err);
	if (rc)
		goto out;
	/* a stale index is a finding: its views may serve other bytes */
	if (sfs_index_check_source(idx, mounts[0].index, false, &err)) {
		rc = sfs_verdict_add(&pre, MAX_FINDINGS, SFS_FIND_SOURCE, "%s",
				     err.msg);
		sfs_error_clear(&err);
	}
	for (m = 0; !rc && m < nm; m++)
		rc = sfs_plan_build(idx, &mounts[m].opts, &mounts[m].plan,
				    &err);
	if (!rc)
		rc = source_map_build(&sm, idx, a, &pre, &err);
	if (!rc)
		rc = enumerate(mounts, nm, idx, &au, &p.jobs, &p.n, &err);
	if (rc)
		goto out;
	pool_run(&p, "reading view files");
	rc = record(&au, mounts, idx, &sm, p.jobs, p.n, &pre);
	if (rc) {
		sfs_errorf(&err, rc, "out of memory");
		goto out;
	}
	if (a->emit) {
		char *text = sfs_audit_write(&au, idx);
		FILE *f = text ? fopen(a->emit, "w") : NULL;

		if (!f || fputs(text, f) < 0 || fclose(f)) {
			rc = sfs_errorf(&err, -EIO,
					"%s: cannot write the report: %s",
					a->emit, strerror(errno));
			free(text);
			goto out;
		}
		free(text);
		if (!a->json)
			printf("%s: wrote %s: %zu readers of %zu mount%s\n",
			       prog, a->emit, au.nreaders, nm,
			       nm == 1 ? "" : "s");
		status = CLI_OK;
		goto out;
	}
	rc = sfs_audit_judge(&au, idx, MAX_FINDINGS, &v, &err);
	for (i = 0; !rc && i < pre.nfindings; i++)
		rc = sfs_verdict_add(&v, MAX_FINDINGS, pre.findings[i].kind,
				     "%s", pre.findings[i].msg);
	if (!rc && a->verify)
		rc = verify_source(a, idx, &v, &err);
	if (!rc)
		status = print_verdict(a, "view", true, &v);
out:
	if (rc && status == CLI_ERROR)
		cli_fail(prog, err.msg[0] ? err.msg : strerror(-rc));
	for (m = 0; m < nm; m++) {
		free(mounts[m].source);
		free(mounts[m].index);
		sfs_plan_free(mounts[m].plan);
	}
	free(mounts);
	jobs_free(p.jobs, p.n);
	source_map_free(&sm);
	sfs_verdict_clear(&v);
	sfs_verdict_clear(&pre);
	sfs_audit_clear(&au);
	sfs_index_free(idx);
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
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	int c, status = CLI_ERROR;

	sfs_options_init(&a.opts);
	a.jobs = cpus > 0 ? (unsigned)cpus : 1;
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
