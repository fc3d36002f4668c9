/*
 * Observing mounted views as a loader reads them: every worker directory
 * of every view listed in name order, every file read through its format
 * driver's samples op, every sample hashed and mapped back to the source
 * sample with that digest (the index's digests, or the source hashed here
 * when the index has none).  A reader's dataset directory (a Lance
 * dataset of the reader's rows) is read back as its format's library
 * would read it, every live row digested as the index digests the source
 * row it names, and its data files checked to be the source's.  The
 * result is an audit (include/shardfs/audit.h) for the judge, and the
 * findings made on the way.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "shardfs/mixture.h"
#include "shardfs/observe.h"
#include "shardfs/plan.h"
#include "shardfs/pool.h"
#include "shardfs/share.h"
#include "shardfs/status.h"
#include "shardfs/util.h"
#include "shardfs/view.h"

#include "observe_i.h"

/* One mounted view, as its .shardfs/status describes it. */
struct vmount {
	const char *path;
	struct sfs_plan_opts opts;
	char *source;
	char *index; /* NULL: SRC/.shardfs */
	struct sfs_plan *plan;
};

/* The jobs of one pass over the pool (pool.arg). */
struct pass {
	struct sfs_pool pool;
	struct job *jobs;
	const char *what; /* for progress */
	const struct sfs_observe_opts *o;
	/* o->jobs threads (0: one per CPU), shared by the pool's workers
	 * and their scans' helpers */
	struct sfs_share share;
};

int sfs_observe_file(struct job *j, int dirfd, const char *path,
		     const char *shown, struct sfs_digest *d,
		     struct sfs_error *err)
{
	int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC), rc, e = errno;
	struct stat st;

	if (fd < 0 || fstat(fd, &st) < 0) {
		e = fd < 0 ? e : errno;
		if (fd >= 0)
			close(fd);
		return sfs_errorf(err, -e, "%s: %s", shown, strerror(e));
	}
	j->bytes += (uint64_t)st.st_size;
	rc = d ? sfs_digest_fd(d, fd, (uint64_t)st.st_size, shown, err) :
		 sfs_format_samples(j->ops, fd, shown, j->share,
				    sfs_observe_collect, j, err);
	close(fd);
	return rc;
}

static void run_job(struct job *j, bool verify, struct sfs_digest *d)
{
	struct sfs_error err = { 0 };
	unsigned char out[SFS_DIGEST_LEN];
	bool whole = !(j->npaths == 1 && j->ops); /* one digest over all */
	size_t i;
	int rc = 0;

	if (j->kind != JOB_FILE) {
		rc = j->kind == JOB_SCAN ?
			     sfs_observe_dataset_scan(j, &err) :
			     sfs_observe_dataset_read(j, verify, d, &err);
		whole = false;
	}
	for (i = 0; !rc && j->kind == JOB_FILE && i < j->npaths; i++)
		rc = sfs_observe_file(j, AT_FDCWD, j->paths[i], j->paths[i],
				      whole ? d : NULL, &err);
	if (!rc && whole) {
		rc = sfs_digest_final(d, out);
		if (!rc)
			rc = sfs_observe_collect(j, 0, out);
	}
	if (rc)
		j->error = strdup(err.msg[0] ? err.msg : strerror(-rc));
}

static void pass_work(struct sfs_pool *p, size_t i, struct sfs_digest *d)
{
	struct pass *ps = p->arg;

	run_job(&ps->jobs[i], ps->o->verify, d);
	atomic_fetch_add(&p->bytes, ps->jobs[i].bytes);
}

static void pass_progress(const struct sfs_pool *p, bool final)
{
	const struct pass *ps = p->arg;

	ps->o->progress(ps->what, p, final, ps->o->arg);
}

/* Run the n jobs of ps on the pool. */
static void pass_run(struct pass *ps, size_t n)
{
	size_t i;

	ps->pool.n = n;
	ps->pool.threads = ps->o->jobs;
	ps->pool.work = pass_work;
	ps->pool.progress = ps->o->progress ? pass_progress : NULL;
	ps->pool.arg = ps;
	sfs_share_init(&ps->share, &ps->pool);
	for (i = 0; i < n; i++)
		ps->jobs[i].share = &ps->share;
	sfs_pool_run(&ps->pool);
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
		for (k = 0; k < jobs[i].ndfiles; k++) {
			free(jobs[i].dfiles[k].path);
			free(jobs[i].dfiles[k].target);
		}
		free(jobs[i].dfiles);
		free(jobs[i].frags);
	}
	free(jobs);
}

static int add_job(struct job **jobs, size_t *n, size_t *cap, size_t reader,
		   const char *name, const struct sfs_format_ops *ops)
{
	struct job *nj;

	if (sfs_grow(jobs, cap, *n + 1, sizeof(**jobs)))
		return -ENOMEM;
	nj = *jobs;
	memset(&nj[*n], 0, sizeof(nj[*n]));
	nj[*n].reader = reader;
	nj[*n].ops = ops;
	nj[*n].name = strdup(name);
	(*n)++;
	return nj[*n - 1].name ? 0 : -ENOMEM;
}

static int job_add_path(struct job *j, const char *path)
{
	if (SFS_GROW(j->paths, j->paths_cap, j->npaths + 1))
		return -ENOMEM;
	j->paths[j->npaths] = strdup(path);
	return j->paths[j->npaths++] ? 0 : -ENOMEM;
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
	size_t cap = 0;

	*n = 0;
	if (!d)
		return NULL;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (SFS_GROW(names, cap, *n + 2))
			break;
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
		n = getxattr(path, SFS_XATTR_SOURCE, target,
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
static int files_jobs(struct job **jobs, size_t *n, size_t *cap, size_t reader,
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
			rc = files_jobs(jobs, n, cap, reader, path, sub);
			continue;
		}
		/* Same sequence number in the same directory: one sample.
		 * Names are sorted, so a sample's files are adjacent: only
		 * the last job can be this file's. */
		k = *n;
		if (k) {
			const struct job *j = &(*jobs)[k - 1];
			uint64_t seq;
			size_t key = strlen(sub) - strlen(names[i]) +
				     sfs_view_name_seq(names[i], false, &seq);

			if (j->reader != reader || strncmp(j->name, sub, key))
				k = *n;
			else
				k = *n - 1;
		}
		if (k == *n)
			rc = add_job(jobs, n, cap, reader, sub, NULL);
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
	uint64_t seq = 0;

	sfs_view_name_seq(base ? base + 1 : j->name, false, &seq);
	return seq;
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

/* The slot of t that holds the sample with digest d, or the empty one it
 * would go to. */
static uint64_t slot_of(const struct sfs_observe_table *t,
			const unsigned char *d)
{
	uint64_t s;

	memcpy(&s, d, sizeof(s)); /* a digest's bytes are its hash */
	for (s &= t->mask;
	     t->slots[s] &&
	     memcmp(t->digest(t->arg, t->slots[s] - 1), d, SFS_DIGEST_LEN);
	     s = (s + 1) & t->mask)
		;
	return s;
}

int sfs_observe_table_build(struct sfs_observe_table *t, uint64_t lo,
			    uint64_t hi)
{
	uint64_t g, s;

	for (t->mask = 1; t->mask < 2 * (hi - lo) + 2; t->mask <<= 1)
		;
	t->slots = calloc(t->mask--, sizeof(*t->slots));
	for (g = lo; t->slots && g < hi; g++) {
		s = slot_of(t, t->digest(t->arg, g));
		if (!t->slots[s]) /* the first with these bytes */
			t->slots[s] = g + 1;
	}
	return t->slots ? 0 : -ENOMEM;
}

uint64_t sfs_observe_table_find(const struct sfs_observe_table *t,
				const unsigned char *d, uint64_t planned)
{
	uint64_t s;

	if (planned != UINT64_MAX &&
	    !memcmp(t->digest(t->arg, planned), d, SFS_DIGEST_LEN))
		return planned;
	s = slot_of(t, d);
	return t->slots[s] ? t->slots[s] - 1 : UINT64_MAX;
}

/* Digests of every source sample, and a table from digest to sample. */
struct source_map {
	/* per global sample: the index's digests, or own when hashed here */
	const unsigned char (*dig)[SFS_DIGEST_LEN];
	unsigned char (*own)[SFS_DIGEST_LEN];
	struct sfs_observe_table table;
	uint64_t n;
};

static const unsigned char *source_digest(const void *arg, uint64_t g)
{
	const struct source_map *sm = arg;

	return sm->dig[g];
}

/*
 * A shard that cannot be read, or reads other than indexed, is a finding
 * in v; its samples then match nothing.
 */
static int source_map_build(struct source_map *sm, const struct sfs_index *idx,
			    const struct sfs_observe_opts *o,
			    struct sfs_verdict *v, struct sfs_error *err)
{
	struct pass p = { .what = "hashing source shards", .o = o };
	uint64_t k;
	size_t i;
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
	for (i = 0; i < idx->nshards; i++) {
		const struct sfs_shard *sh = &idx->shards[i];
		char path[PATH_MAX];

		p.jobs[i].reader = i;
		p.jobs[i].ops = sh->nmembers ? NULL : sh->format;
		if (sh->format->dataset_view) { /* rows, not bytes: scanned */
			p.jobs[i].kind = JOB_SCAN;
			p.jobs[i].idx = idx;
			p.jobs[i].shard = i;
		}
		snprintf(path, sizeof(path), "%s/%s", idx->source, sh->path);
		rc = job_add_path(&p.jobs[i], path);
		for (k = 0; !rc && k < sh->nmembers; k++) {
			snprintf(path, sizeof(path), "%s/%s", idx->source,
				 sh->members[k].path);
			rc = job_add_path(&p.jobs[i], path);
		}
		if (rc) {
			jobs_free(p.jobs, idx->nshards);
			return sfs_errorf(err, -ENOMEM, "out of memory");
		}
	}
	pass_run(&p, idx->nshards);
	for (i = 0; !rc && i < idx->nshards; i++) {
		const struct sfs_shard *sh = &idx->shards[i];
		struct job *j = &p.jobs[i];

		if (j->error)
			rc = sfs_verdict_add(v, o->max_findings,
					     SFS_FIND_SOURCE, "%s", j->error);
		else if (j->ndigests != sh->nsamples &&
			 !(sh->format->whole_file && j->ndigests == 1))
			rc = sfs_verdict_add(
				v, o->max_findings, SFS_FIND_SOURCE,
				"%s: %zu samples read, the index says %llu; rebuild the index with shardfs-index",
				sh->path, j->ndigests,
				(unsigned long long)sh->nsamples);
		else
			for (k = 0; k < sh->nsamples; k++)
				memcpy(sm->own[sh->first_sample + k],
				       j->digests[k < j->ndigests ? k : 0],
				       SFS_DIGEST_LEN);
	}
	if (rc == -ENOMEM)
		sfs_errorf(err, rc, "out of memory");
	jobs_free(p.jobs, idx->nshards);
	if (rc)
		return rc;
table:
	sm->table.digest = source_digest;
	sm->table.arg = sm;
	if (sfs_observe_table_build(&sm->table, 0, sm->n))
		return sfs_errorf(err, -ENOMEM, "out of memory");
	return 0;
}

static void source_map_free(struct source_map *sm)
{
	free(sm->own);
	free(sm->table.slots);
}

/* The sample with digest d: the planned one when it matches, else any. */
static struct sfs_audit_sample lookup(const struct source_map *sm,
				      const struct sfs_index *idx,
				      const unsigned char *d,
				      const struct sfs_audit_sample *planned)
{
	struct sfs_audit_sample out = { SFS_AUDIT_UNKNOWN, 0 };
	uint64_t pg = planned ? idx->shards[planned->shard].first_sample +
					planned->sample :
				UINT64_MAX;
	uint64_t g = sfs_observe_table_find(&sm->table, d, pg);

	if (g == UINT64_MAX)
		return out;
	if (g == pg)
		return *planned;
	out.shard = sfs_index_shard_at(idx, g);
	out.sample = g - idx->shards[out.shard].first_sample;
	return out;
}

/* The format of the index's shards that views show as datasets, or NULL. */
static const struct sfs_format_ops *dataset_ops(const struct sfs_index *idx)
{
	size_t i;

	for (i = 0; i < idx->nshards; i++)
		if (idx->shards[i].format->dataset_view)
			return idx->shards[i].format;
	return NULL;
}

/* List the readers of every mount: the audit's readers and the jobs. */
static int enumerate(struct vmount *mounts, size_t nm,
		     const struct sfs_index *idx, struct sfs_audit *au,
		     struct job **jobs, size_t *njobs, size_t *cap,
		     struct sfs_error *err)
{
	bool files = idx->nshards && idx->shards[0].format->tree;
	const struct sfs_format_ops *dops = dataset_ops(idx);
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
					rc = files_jobs(jobs, njobs, cap,
							au->nreaders - 1, dir,
							"");
					qsort(*jobs + first, *njobs - first,
					      sizeof(**jobs), job_seq_cmp);
					continue;
				}
				names = list_dir(dir, &nn);
				for (k = 0; !rc && k < nn; k++) {
					char fp[PATH_MAX];
					struct stat st;

					rc = join(fp, sizeof(fp), dir,
						  names[k]);
					if (!rc && dops && !lstat(fp, &st) &&
					    S_ISDIR(st.st_mode)) {
						/* a reader's dataset */
						rc = add_job(jobs, njobs, cap,
							     au->nreaders - 1,
							     names[k], dops);
						if (!rc)
							(*jobs)[*njobs - 1]
								.kind =
								JOB_DATASET;
					} else if (!rc)
						rc = add_job(
							jobs, njobs, cap,
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
		  struct job *jobs, size_t njobs,
		  const struct sfs_observe_opts *o, struct sfs_verdict *v)
{
	struct sfs_audit_sample *want = NULL;
	struct sfs_observe_hashes h = { 0 };
	size_t i, k, f, nwant = 0, pos = 0, cur = SIZE_MAX;
	size_t max_findings = o->max_findings;
	char name[PATH_MAX];
	int rc = 0;

	for (i = 0; !rc && i < njobs; i++) {
		struct job *j = &jobs[i];
		struct sfs_audit_reader *r = &au->readers[j->reader];
		const struct sfs_plan *p = mounts[r->mount].plan;
		uint64_t shard = SFS_AUDIT_UNKNOWN;

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
		/* a dataset's rows are named by fragment, a file's by it */
		if (j->kind != JOB_DATASET || !j->nfrags)
			rc = sfs_audit_add_file(r, j->name);
		if (!rc && j->error)
			rc = sfs_verdict_add(
				v, max_findings, SFS_FIND_BYTES,
				"rank %u worker %u: %s cannot be read: %s",
				r->rank, r->worker, j->name, j->error);
		for (k = 0, f = 0; !rc && k < j->ndigests; k++, pos++) {
			struct sfs_audit_sample s;

			for (; !rc && j->kind == JOB_DATASET && f < j->nfrags &&
			       j->frags[f].first == k;
			     f++) {
				snprintf(name, sizeof(name), "%s, fragment %zu",
					 j->name, j->frags[f].f);
				rc = sfs_audit_add_file(r, name);
			}
			s = lookup(sm, idx, j->digests[k],
				   pos < nwant ? &want[pos] : NULL);
			if (shard == SFS_AUDIT_UNKNOWN)
				shard = s.shard;
			if (!rc)
				rc = sfs_audit_add_sample(r, s.shard, s.sample);
		}
		if (!rc && j->kind == JOB_DATASET && !j->error &&
		    shard != SFS_AUDIT_UNKNOWN)
			rc = sfs_observe_data_files_check(j, r, idx,
							  (size_t)shard,
							  o->verify, &h,
							  max_findings, v);
	}
	free(want);
	sfs_observe_hashes_free(&h);
	return rc;
}

int sfs_observe_views(const char *const *paths, size_t nm,
		      const struct sfs_observe_opts *o,
		      struct sfs_observation *out, struct sfs_error *err)
{
	struct vmount *mounts = calloc(nm + 1, sizeof(*mounts));
	struct source_map sm = { 0 };
	struct pass p = { .what = "reading view files", .o = o };
	size_t m, njobs = 0, jobs_cap = 0;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (!mounts)
		return sfs_errorf(err, -ENOMEM, "out of memory");
	for (m = 0; !rc && m < nm; m++) {
		mounts[m].path = paths[m];
		rc = read_status(&mounts[m], err);
		if (!rc && m &&
		    (strcmp(mounts[m].source, mounts[0].source) ||
		     (mounts[m].index == NULL) != (mounts[0].index == NULL) ||
		     (mounts[m].index &&
		      strcmp(mounts[m].index, mounts[0].index))))
			rc = sfs_errorf(
				err, -EINVAL,
				"%s serves %s, %s serves %s: audit views of one source and index together",
				mounts[0].path, mounts[0].source,
				mounts[m].path, mounts[m].source);
	}
	if (!rc)
		rc = sfs_source_load(mounts[0].source, mounts[0].index,
				     &out->idx, err);
	if (!rc)
		rc = sfs_index_check_bounds(out->idx, err);
	if (!rc)
		rc = sfs_index_check_digests(out->idx, err);
	if (rc)
		goto out;
	/* a stale index is a finding: its views may serve other bytes */
	if (sfs_index_check_source(out->idx, mounts[0].index, false, o->jobs,
				   err)) {
		rc = sfs_verdict_add(&out->found, o->max_findings,
				     SFS_FIND_SOURCE, "%s", err->msg);
		sfs_error_clear(err);
	}
	for (m = 0; !rc && m < nm; m++)
		rc = sfs_plan_build(out->idx, &mounts[m].opts, &mounts[m].plan,
				    err);
	if (!rc)
		rc = source_map_build(&sm, out->idx, o, &out->found, err);
	if (!rc)
		rc = enumerate(mounts, nm, out->idx, &out->audit, &p.jobs,
			       &njobs, &jobs_cap, err);
	if (rc)
		goto out;
	pass_run(&p, njobs);
	rc = record(&out->audit, mounts, out->idx, &sm, p.jobs, njobs, o,
		    &out->found);
	if (rc)
		sfs_errorf(err, rc, "out of memory");
out:
	for (m = 0; m < nm; m++) {
		free(mounts[m].source);
		free(mounts[m].index);
		sfs_plan_free(mounts[m].plan);
	}
	free(mounts);
	jobs_free(p.jobs, njobs);
	source_map_free(&sm);
	if (rc)
		sfs_observation_clear(out);
	return rc;
}

void sfs_observation_clear(struct sfs_observation *ob)
{
	sfs_index_free(ob->idx);
	sfs_audit_clear(&ob->audit);
	sfs_verdict_clear(&ob->found);
	memset(ob, 0, sizeof(*ob));
}
