/*
 * The auditor's judgement (audit.h): observations, added one by one or
 * taken from the plan, judged against the plan into a verdict.  Writing
 * observations to a report and reading reports back is audit_report.c.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardfs/audit.h"
#include "shardfs/mixture.h"
#include "shardfs/util.h"

const char *sfs_finding_name(enum sfs_finding_kind k)
{
	static const char *const names[] = { "options", "coverage", "count",
					     "bytes",	"order",    "overlap",
					     "missing", "source" };

	return (size_t)k < sizeof(names) / sizeof(names[0]) ? names[k] : "?";
}

void sfs_audit_clear(struct sfs_audit *a)
{
	size_t i, j;

	for (i = 0; i < a->nmounts; i++)
		free(a->mounts[i].path);
	free(a->mounts);
	for (i = 0; i < a->nreaders; i++) {
		struct sfs_audit_reader *r = &a->readers[i];

		for (j = 0; j < r->nfiles; j++)
			free(r->files[j].name);
		free(r->files);
		free(r->samples);
	}
	free(a->readers);
	memset(a, 0, sizeof(*a));
}

ssize_t sfs_audit_add_mount(struct sfs_audit *a, const char *path,
			    const struct sfs_plan_opts *opts)
{
	struct sfs_audit_mount *m;

	if (SFS_GROW(a->mounts, a->mounts_cap, a->nmounts + 1))
		return -ENOMEM;
	m = &a->mounts[a->nmounts];
	m->path = strdup(path);
	if (!m->path)
		return -ENOMEM;
	m->opts = *opts;
	return (ssize_t)a->nmounts++;
}

struct sfs_audit_reader *sfs_audit_add_reader(struct sfs_audit *a, size_t m,
					      uint32_t rank, uint32_t worker)
{
	struct sfs_audit_reader *r;

	if (SFS_GROW(a->readers, a->readers_cap, a->nreaders + 1))
		return NULL;
	r = &a->readers[a->nreaders++];
	memset(r, 0, sizeof(*r));
	r->rank = rank;
	r->worker = worker;
	r->mount = m;
	return r;
}

int sfs_audit_add_file(struct sfs_audit_reader *r, const char *name)
{
	struct sfs_audit_file *f;

	if (SFS_GROW(r->files, r->files_cap, r->nfiles + 1))
		return -ENOMEM;
	f = &r->files[r->nfiles];
	f->name = strdup(name);
	if (!f->name)
		return -ENOMEM;
	f->first = r->nsamples;
	f->count = 0;
	r->nfiles++;
	return 0;
}

int sfs_audit_add_sample(struct sfs_audit_reader *r, uint64_t shard,
			 uint64_t sample)
{
	if (SFS_GROW(r->samples, r->samples_cap, r->nsamples + 1))
		return -ENOMEM;
	r->samples[r->nsamples++] = (struct sfs_audit_sample){ shard, sample };
	if (r->nfiles)
		r->files[r->nfiles - 1].count++;
	return 0;
}

int sfs_audit_from_plan(struct sfs_audit *a, const struct sfs_plan *plan,
			const char *label)
{
	ssize_t m = sfs_audit_add_mount(a, label, &plan->opts);
	size_t t, f, k;
	uint64_t i;

	if (m < 0)
		return (int)m;
	for (t = 0; t < (size_t)plan->opts.world * plan->opts.workers; t++) {
		uint32_t rank = (uint32_t)(t / plan->opts.workers);
		uint32_t worker = (uint32_t)(t % plan->opts.workers);
		const struct sfs_plan_reader *pr =
			&plan->readers[sfs_plan_reader_id(plan, rank, worker)];
		struct sfs_audit_reader *r =
			sfs_audit_add_reader(a, (size_t)m, rank, worker);

		if (!r)
			return -ENOMEM;
		for (f = 0; f < pr->nfiles; f++) {
			const struct sfs_plan_file *pf =
				&plan->files[pr->file_at + f];
			char name[32];

			snprintf(name, sizeof(name), "file %zu", f);
			if (sfs_audit_add_file(r, name))
				return -ENOMEM;
			for (k = 0; k < pf->nruns; k++) {
				const struct sfs_run *run =
					&sfs_plan_file_runs(plan, pf)[k];

				for (i = 0; i < run->count; i++)
					if (sfs_audit_add_sample(r, pf->shard,
								 run->first +
									 i))
						return -ENOMEM;
			}
		}
	}
	return 0;
}

/* ---- the verdict ---- */

int sfs_verdict_add(struct sfs_verdict *v, size_t max_findings,
		    enum sfs_finding_kind kind, const char *fmt, ...)
{
	struct sfs_finding *f;
	va_list ap;
	int n;

	v->kinds[kind]++;
	if (v->nfindings >= max_findings) {
		v->nmore++;
		return 0;
	}
	if (SFS_GROW(v->findings, v->findings_cap, v->nfindings + 1))
		return -ENOMEM;
	f = &v->findings[v->nfindings];
	f->kind = kind;
	va_start(ap, fmt);
	n = vasprintf(&f->msg, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -ENOMEM;
	v->nfindings++;
	return 0;
}

void sfs_verdict_clear(struct sfs_verdict *v)
{
	size_t i;

	for (i = 0; i < v->nfindings; i++)
		free(v->findings[i].msg);
	free(v->findings);
	free(v->sources);
	memset(v, 0, sizeof(*v));
}

struct judge {
	const struct sfs_audit *a;
	const struct sfs_index *idx;
	struct sfs_plan **plans; /* per mount (shared when equal) */
	size_t max;
	struct sfs_verdict *v;
};

static uint64_t gid(const struct judge *j, uint64_t shard, uint64_t sample)
{
	return j->idx->shards[shard].first_sample + sample;
}

/* "shard-000001.tar:17", rd's words for bytes that are none, or (s
 * NULL, past the plan's samples) "no sample" */
static const char *sample_name(const struct sfs_audit_reading *rd,
			       const struct sfs_audit_sample *s, char *buf,
			       size_t len)
{
	if (!s)
		snprintf(buf, len, "no sample");
	else if (s->shard == SFS_AUDIT_UNKNOWN)
		snprintf(buf, len, "%s", rd->unknown);
	else
		snprintf(buf, len, "%s:%llu", rd->idx->shards[s->shard].path,
			 (unsigned long long)s->sample);
	return buf;
}

struct sfs_audit_sample *sfs_audit_planned(const struct sfs_plan *p, size_t t,
					   size_t *n)
{
	const struct sfs_plan_reader *pr = &p->readers[t];
	struct sfs_audit_sample *out =
		malloc((p->per_reader + 1) * sizeof(*out));
	size_t f, k, m = 0;
	uint64_t i;

	if (!out)
		return NULL;
	for (f = 0; f < pr->nfiles; f++) {
		const struct sfs_plan_file *pf = &p->files[pr->file_at + f];
		const struct sfs_run *r = sfs_plan_file_runs(p, pf);

		for (k = 0; k < pf->nruns; k++)
			for (i = 0; i < r[k].count; i++)
				out[m++] = (struct sfs_audit_sample){
					pf->shard, r[k].first + i
				};
	}
	*n = m;
	return out;
}

static int sample_cmp(const void *x, const void *y)
{
	const struct sfs_audit_sample *a = x, *b = y;

	if (a->shard != b->shard)
		return a->shard < b->shard ? -1 : 1;
	return a->sample < b->sample ? -1 : a->sample > b->sample;
}

int sfs_audit_compare(const struct sfs_audit_sample *want, size_t nwant,
		      const struct sfs_audit_sample *got, size_t ngot,
		      size_t *at)
{
	struct sfs_audit_sample *x, *y;
	size_t k;
	int rc;

	for (k = 0; k < nwant && k < ngot; k++)
		if (sample_cmp(&got[k], &want[k]))
			break;
	if (k == nwant || k == ngot)
		return SFS_AUDIT_AS_PLANNED;
	*at = k;
	if (nwant != ngot)
		return SFS_AUDIT_OTHER;
	/* the same samples in another order, or other bytes? */
	x = malloc((nwant + 1) * sizeof(*x));
	y = malloc((ngot + 1) * sizeof(*y));
	rc = -ENOMEM;
	if (x && y) {
		memcpy(x, want, nwant * sizeof(*x));
		memcpy(y, got, ngot * sizeof(*y));
		qsort(x, nwant, sizeof(*x), sample_cmp);
		qsort(y, ngot, sizeof(*y), sample_cmp);
		rc = memcmp(x, y, nwant * sizeof(*x)) ? SFS_AUDIT_OTHER :
							SFS_AUDIT_REORDERED;
	}
	free(x);
	free(y);
	return rc;
}

/* The file of rd's that holds its sample k. */
static const char *file_of(const struct sfs_audit_reading *rd, size_t k)
{
	size_t f;

	for (f = 0; f < rd->nfiles; f++)
		if (k < rd->files[f].first + rd->files[f].count)
			return rd->files[f].name;
	return "?";
}

/* A sample of a reader's, with the group whose order the view keeps. */
struct grouped {
	uint64_t group;
	struct sfs_audit_sample s;
	size_t at;
};

static int grouped_cmp(const void *x, const void *y)
{
	const struct grouped *a = x, *b = y;

	if (a->group != b->group)
		return a->group < b->group ? -1 : 1;
	return a->at < b->at ? -1 : a->at > b->at;
}

/* A dataset shard's group is itself; every other sample is in group 0. */
static uint64_t group_of(const struct sfs_index *idx,
			 const struct sfs_audit_sample *s)
{
	const struct sfs_shard *sh = &idx->shards[s->shard];

	return sh->format && sh->format->dataset_view ? s->shard + 1 : 0;
}

/*
 * A reader's datasets (format.h, dataset_view: Lance) are one directory
 * each, apart from its files, each in the plan's order: the plan's order
 * across them (a mixture's, or a source's of several datasets) is not
 * one a loader can be shown (docs/check.md).  So when the plan gives the
 * reader samples of a dataset, its samples are in order when each
 * dataset's, and its files' together, are the plan's in its order.
 * Returns 1 then, 0 when not (or no dataset), -ENOMEM.
 */
static int in_order_per_dataset(const struct sfs_index *idx,
				const struct sfs_audit_sample *want,
				const struct sfs_audit_sample *got, size_t n)
{
	struct grouped *x, *y;
	size_t k;
	int rc = 0;

	for (k = 0; !rc && k < n; k++)
		rc = group_of(idx, &want[k]) != 0;
	if (!rc)
		return 0;
	x = malloc((n + 1) * sizeof(*x));
	y = malloc((n + 1) * sizeof(*y));
	if (!x || !y) {
		free(x);
		free(y);
		return -ENOMEM;
	}
	for (k = 0; k < n; k++) {
		x[k] = (struct grouped){ group_of(idx, &want[k]), want[k], k };
		y[k] = (struct grouped){ group_of(idx, &got[k]), got[k], k };
	}
	qsort(x, n, sizeof(*x), grouped_cmp);
	qsort(y, n, sizeof(*y), grouped_cmp);
	for (k = 0; rc && k < n; k++)
		if (sample_cmp(&x[k].s, &y[k].s))
			rc = 0;
	free(x);
	free(y);
	return rc;
}

int sfs_audit_judge_reading(const struct sfs_audit_reading *rd, size_t max,
			    struct sfs_verdict *v)
{
	char b1[4200], b2[4200];
	size_t k = 0, end = rd->every ? rd->ngot : 0;
	int rc = 0, how;

	if (rd->ngot != rd->nwant)
		rc = sfs_verdict_add(
			v, max, SFS_FIND_COUNT,
			"%srank %u worker %u (%s) read %zu samples, the plan gives every reader %zu",
			rd->prefix, rd->rank, rd->worker, rd->mount, rd->ngot,
			rd->nwant);
	how = rc ? rc :
		   sfs_audit_compare(rd->want, rd->nwant, rd->got, rd->ngot,
				     &k);
	if (how == SFS_AUDIT_AS_PLANNED && rd->every && rd->ngot > rd->nwant) {
		how = SFS_AUDIT_OTHER; /* samples past the plan's */
		k = rd->nwant;
	}
	/* in another order, but each of its datasets in the plan's: in
	 * order */
	if (how == SFS_AUDIT_REORDERED) {
		int ordered = in_order_per_dataset(rd->idx, rd->want, rd->got,
						   rd->nwant);

		how = ordered < 0 ? ordered :
		      ordered	  ? SFS_AUDIT_AS_PLANNED :
				    how;
	}
	if (how < 0)
		return how;
	if (how == SFS_AUDIT_REORDERED)
		return sfs_verdict_add(
			v, max, SFS_FIND_ORDER,
			"%srank %u worker %u (%s), %s: the plan's samples in another order: sample %zu is %s, the plan says %s",
			rd->prefix, rd->rank, rd->worker, rd->mount,
			file_of(rd, k), k,
			sample_name(rd, &rd->got[k], b1, sizeof(b1)),
			sample_name(rd, &rd->want[k], b2, sizeof(b2)));
	if (how != SFS_AUDIT_OTHER)
		return 0;
	for (end = end > k ? end : k + 1; !rc && k < end; k++)
		if (k >= rd->nwant || sample_cmp(&rd->got[k], &rd->want[k]))
			rc = sfs_verdict_add(
				v, max, SFS_FIND_BYTES,
				"%srank %u worker %u (%s), %s, sample %zu: read %s, the plan says %s",
				rd->prefix, rd->rank, rd->worker, rd->mount,
				file_of(rd, k), k,
				sample_name(rd, &rd->got[k], b1, sizeof(b1)),
				sample_name(rd,
					    k < rd->nwant ? &rd->want[k] : NULL,
					    b2, sizeof(b2)));
	return rc;
}

/* Compare one reader with its mount's plan. */
static int judge_reader(struct judge *j, const struct sfs_audit_reader *r)
{
	const struct sfs_plan *p = j->plans[r->mount];
	struct sfs_audit_reading rd = {
		.prefix = "",
		.rank = r->rank,
		.worker = r->worker,
		.mount = j->a->mounts[r->mount].path,
		.idx = j->idx,
		.unknown = "bytes that match no source sample",
		.files = r->files,
		.nfiles = r->nfiles,
		.got = r->samples,
		.ngot = r->nsamples,
	};
	struct sfs_audit_sample *want;
	int rc;

	if (r->rank >= p->opts.world || r->worker >= p->opts.workers)
		return 0; /* reported as coverage */
	want = sfs_audit_planned(p, sfs_plan_reader_id(p, r->rank, r->worker),
				 &rd.nwant);
	if (!want)
		return -ENOMEM;
	rd.want = want;
	rc = sfs_audit_judge_reading(&rd, j->max, j->v);
	free(want);
	return rc;
}

int sfs_audit_judge_coverage(const uint32_t *shown, uint32_t world,
			     uint32_t workers, size_t max,
			     struct sfs_verdict *v)
{
	uint32_t rank, w, any;
	size_t t;
	int rc = 0;

	for (rank = 0; !rc && rank < world; rank++) {
		t = (size_t)rank * workers;
		for (w = 0, any = 0; w < workers; w++)
			any += shown[t + w] > 0;
		v->readers_seen += any;
		if (!any) {
			rc = sfs_verdict_add(v, max, SFS_FIND_COVERAGE,
					     "rank %u is shown by no mount",
					     rank);
			continue;
		}
		for (w = 0; !rc && w < workers; w++) {
			if (shown[t + w] == 0)
				rc = sfs_verdict_add(
					v, max, SFS_FIND_COVERAGE,
					"rank %u worker %u is shown by no mount",
					rank, w);
			else if (shown[t + w] > 1)
				rc = sfs_verdict_add(
					v, max, SFS_FIND_COVERAGE,
					"rank %u worker %u is shown by %u mounts",
					rank, w, shown[t + w]);
		}
	}
	return rc;
}

/* Which planned readers are shown by no mount, or by several. */
static int judge_coverage(struct judge *j, const struct sfs_plan *p0)
{
	const struct sfs_audit *a = j->a;
	uint32_t k = p0->opts.workers;
	uint32_t *shown =
		calloc((size_t)p0->opts.world * k + 1, sizeof(*shown));
	size_t i;
	int rc = 0;

	if (!shown)
		return -ENOMEM;
	for (i = 0; !rc && i < a->nreaders; i++) {
		const struct sfs_audit_reader *r = &a->readers[i];

		if (r->rank >= p0->opts.world || r->worker >= k)
			rc = sfs_verdict_add(
				j->v, j->max, SFS_FIND_COVERAGE,
				"%s shows rank %u worker %u, which world=%u × workers=%u does not have",
				a->mounts[r->mount].path, r->rank, r->worker,
				p0->opts.world, k);
		else
			shown[(size_t)r->rank * k + r->worker]++;
	}
	if (!rc)
		rc = sfs_audit_judge_coverage(shown, p0->opts.world, k, j->max,
					      j->v);
	free(shown);
	return rc;
}

/* Who read a sample, for messages: the first two readers. */
struct who {
	uint32_t first, second; /* audit reader number + 1, 0: none */
};

/* Per source of a mixture: the samples read against the plan's. */
static int judge_sources(struct judge *j, const uint32_t *want,
			 const uint32_t *got)
{
	const struct sfs_mix *m = sfs_mix_of(j->idx);
	struct sfs_verdict *v = j->v;
	size_t s, k;
	uint64_t x;
	int rc = 0;

	v->sources = calloc(m->nsources, sizeof(*v->sources));
	if (!v->sources)
		return -ENOMEM;
	v->nsources = m->nsources;
	for (s = 0; s < m->nsources; s++) {
		struct sfs_verdict_source *vs = &v->sources[s];

		snprintf(vs->name, sizeof(vs->name), "%s", m->sources[s].name);
		for (k = m->sources[s].shard_lo; k < m->sources[s].shard_hi;
		     k++) {
			const struct sfs_shard *sh = &j->idx->shards[k];

			for (x = 0; x < sh->nsamples; x++) {
				vs->planned += want[sh->first_sample + x];
				vs->seen += got[sh->first_sample + x];
			}
		}
		if (vs->seen != vs->planned)
			rc = sfs_verdict_add(
				v, j->max, SFS_FIND_COUNT,
				"source %s: %llu samples read, the plan reads %llu of it",
				vs->name, (unsigned long long)vs->seen,
				(unsigned long long)vs->planned);
		if (rc)
			break;
	}
	return rc;
}

/*
 * Every sample read as often as the first mount's plan reads it: more is
 * an overlap, less is missing.
 */
static int judge_counts(struct judge *j, const struct sfs_plan *p0)
{
	const struct sfs_audit *a = j->a;
	uint64_t n = j->idx->nsamples, g, s;
	uint32_t *want = calloc(n + 1, sizeof(*want));
	uint32_t *got = calloc(n + 1, sizeof(*got));
	uint32_t *planned_by = calloc(n + 1, sizeof(*planned_by));
	struct who *who = calloc(n + 1, sizeof(*who));
	size_t i, t, f, k;
	uint64_t x;
	int rc = 0;

	if (!want || !got || !planned_by || !who) {
		rc = -ENOMEM;
		goto out;
	}
	for (t = 0; t < p0->nreaders; t++) {
		const struct sfs_plan_reader *pr = &p0->readers[t];

		for (f = 0; f < pr->nfiles; f++) {
			const struct sfs_plan_file *pf =
				&p0->files[pr->file_at + f];
			const struct sfs_run *r = sfs_plan_file_runs(p0, pf);

			for (k = 0; k < pf->nruns; k++)
				for (x = 0; x < r[k].count; x++) {
					g = gid(j, pf->shard, r[k].first + x);
					want[g] += p0->opts.replicas;
					planned_by[g] = (uint32_t)t;
				}
		}
	}
	for (i = 0; i < a->nreaders; i++) {
		const struct sfs_audit_reader *r = &a->readers[i];

		for (k = 0; k < r->nsamples; k++) {
			const struct sfs_audit_sample *smp = &r->samples[k];

			if (smp->shard >= j->idx->nshards ||
			    smp->sample >= j->idx->shards[smp->shard].nsamples)
				continue; /* unknown bytes: judged per reader */
			g = gid(j, smp->shard, smp->sample);
			got[g]++;
			if (!who[g].first)
				who[g].first = (uint32_t)i + 1;
			else if (!who[g].second && who[g].first != i + 1)
				who[g].second = (uint32_t)i + 1;
		}
	}
	for (s = 0, g = 0; !rc && s < j->idx->nshards; s++) {
		const struct sfs_shard *sh = &j->idx->shards[s];

		for (x = 0; !rc && x < sh->nsamples; x++, g++) {
			const struct sfs_audit_reader *r1, *r2;
			uint32_t k0 = p0->opts.workers;

			if (got[g] > want[g]) {
				r1 = &a->readers[who[g].first - 1];
				r2 = who[g].second ?
					     &a->readers[who[g].second - 1] :
					     r1;
				rc = sfs_verdict_add(
					j->v, j->max, SFS_FIND_OVERLAP,
					"%s:%llu is read %u times (rank %u worker %u on %s, rank %u worker %u on %s), the plan reads it %u time%s",
					sh->path, (unsigned long long)x, got[g],
					r1->rank, r1->worker,
					a->mounts[r1->mount].path, r2->rank,
					r2->worker, a->mounts[r2->mount].path,
					want[g], want[g] == 1 ? "" : "s");
			} else if (got[g] < want[g]) {
				rc = sfs_verdict_add(
					j->v, j->max, SFS_FIND_MISSING,
					"%s:%llu is read %u time%s, the plan reads it %u (rank %u worker %u should)",
					sh->path, (unsigned long long)x, got[g],
					got[g] == 1 ? "" : "s", want[g],
					planned_by[g] / k0 * p0->opts.replicas,
					planned_by[g] % k0);
			}
		}
	}
	if (!rc && sfs_mix_of(j->idx))
		rc = judge_sources(j, want, got);
out:
	free(want);
	free(got);
	free(planned_by);
	free(who);
	return rc;
}

int sfs_audit_judge(const struct sfs_audit *a, const struct sfs_index *idx,
		    size_t max_findings, struct sfs_verdict *out,
		    struct sfs_error *err)
{
	struct judge j = { .a = a, .idx = idx, .max = max_findings, .v = out };
	char diff[1024];
	size_t m, n, i;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (!a->nmounts)
		return sfs_errorf(err, -EINVAL, "nothing to audit");
	j.plans = calloc(a->nmounts, sizeof(*j.plans));
	if (!j.plans) {
		rc = sfs_errorf(err, -ENOMEM, "out of memory");
		goto out;
	}
	for (m = 0; m < a->nmounts; m++) {
		const struct sfs_audit_mount *mt = &a->mounts[m];

		for (n = 0; n < m; n++)
			if (!sfs_plan_opts_diff(&a->mounts[n].opts, &mt->opts,
						NULL, 0))
				break;
		if (n < m) {
			j.plans[m] = j.plans[n];
			continue;
		}
		rc = sfs_plan_build(idx, &mt->opts, &j.plans[m], err);
		if (rc)
			goto out;
		if (m) {
			sfs_plan_opts_diff(&a->mounts[0].opts, &mt->opts, diff,
					   sizeof(diff));
			rc = sfs_verdict_add(out, max_findings,
					     SFS_FIND_OPTIONS,
					     "%s and %s disagree: %s",
					     a->mounts[0].path, mt->path, diff);
			if (rc)
				goto out_nomem;
		}
	}
	out->per_reader = j.plans[0]->per_reader;
	out->padding = j.plans[0]->padding;
	out->dropped = j.plans[0]->dropped;
	out->remaining = j.plans[0]->remaining;
	out->readers_planned =
		(size_t)j.plans[0]->opts.world * j.plans[0]->opts.workers;
	rc = judge_coverage(&j, j.plans[0]);
	for (i = 0; !rc && i < a->nreaders; i++)
		rc = judge_reader(&j, &a->readers[i]);
	if (!rc)
		rc = judge_counts(&j, j.plans[0]);
	if (rc)
		goto out_nomem;
	goto out;
out_nomem:
	rc = sfs_errorf(err, -ENOMEM, "out of memory judging the audit");
out:
	if (j.plans)
		for (m = 0; m < a->nmounts; m++) {
			for (n = 0; n < m && j.plans[n] != j.plans[m]; n++)
				;
			if (n == m)
				sfs_plan_free(j.plans[m]);
		}
	free(j.plans);
	if (rc)
		sfs_verdict_clear(out);
	return rc;
}
