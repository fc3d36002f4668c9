/*
 * Auditing followed views (follow=1, docs/follow.md): every window a
 * mount lists, read back from each reader's window file as a loader reads
 * it, every sample digested with its format's samples op and compared
 * with the digests of the source samples the window's plan names
 * (sfs_window_build over the stream as the auditor scans it, its log read
 * back, never written).  A window's plan is given as runs of the stream,
 * not as an index and options the judge (audit.c) could plan again, so
 * each window is judged here with the judge's helpers (audit.h): a
 * reader's file against its runs (count, order, bytes:
 * sfs_audit_judge_reading), the mounts' readers (sfs_audit_judge_coverage);
 * the overlap and missing findings per window are this file's; and for a
 * complete stream, that each reader's stream file is its window files
 * laid end to end.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "plan/plan_json_i.h"
#include "shardfs/follow.h"
#include "shardfs/observe.h"
#include "shardfs/util.h"
#include "shardfs/window.h"

#include "observe_i.h"

typedef unsigned char digest_t[SFS_DIGEST_LEN];

struct freader {
	uint32_t rank, worker;
};

/* One followed view, as its .shardfs/status describes it. */
struct fmount {
	const char *path;
	json_t *status;
	const char *source, *index, *format;
	struct sfs_plan_opts opts;
	uint64_t window, first, nwins;
	bool complete;
	struct freader *readers;
	size_t nreaders;
};

/* Every source shard's sample digests, each shard digested once. */
struct sdigests {
	digest_t **d; /* per stream shard, NULL until digested */
	bool *failed;
};

struct fcheck {
	const struct sfs_observe_opts *o;
	struct fmount *m;
	size_t nm;
	struct sfs_follow *f;
	struct sdigests sd;
	struct sfs_verdict *v;
};

static json_t *load_status(const char *mnt, struct sfs_error *err)
{
	char path[PATH_MAX];
	json_error_t je;
	json_t *j;

	snprintf(path, sizeof(path), "%s/.shardfs/status", mnt);
	j = json_load_file(path, 0, &je);
	if (!j)
		sfs_errorf(
			err, -EINVAL,
			"%s: cannot read the view's status (%s); is a shardfs view mounted there?",
			path, je.text);
	return j;
}

bool sfs_observe_is_follow(const char *mnt)
{
	struct sfs_error err = { 0 };
	json_t *j = load_status(mnt, &err);
	bool yes = j && json_is_object(json_object_get(j, "follow"));

	json_decref(j);
	return yes;
}

static int read_mount(struct fmount *m, struct sfs_error *err)
{
	json_t *fo, *rd, *x;
	json_int_t window = 0, first = 0, nwins = 0;
	char where[PATH_MAX + 32];
	size_t i;

	m->status = load_status(m->path, err);
	if (!m->status)
		return -EINVAL;
	snprintf(where, sizeof(where), "%s/.shardfs/status", m->path);
	fo = json_object_get(m->status, "follow");
	rd = json_object_get(m->status, "readers");
	if (json_unpack(m->status, "{s:s}", "source", &m->source) ||
	    json_unpack(fo, "{s:s, s:I, s:I, s:I, s:b}", "format", &m->format,
			"window", &window, "first_window", &first, "windows",
			&nwins, "complete", &m->complete) ||
	    !json_is_array(rd) || window <= 0 || first < 0 || nwins < 0)
		return sfs_errorf(err, -EINVAL,
				  "%s: not the status of a followed view",
				  where);
	if (!json_object_get(m->status, "options"))
		return sfs_errorf(
			err, -EINVAL,
			"%s: the status names no options: a daemon older than its auditor; remount with this version",
			where);
	x = json_object_get(m->status, "index");
	m->index = json_is_string(x) ? json_string_value(x) : NULL;
	m->window = (uint64_t)window;
	m->first = (uint64_t)first;
	m->nwins = (uint64_t)nwins;
	if (sfs_options_from_json(json_object_get(m->status, "options"), where,
				  &m->opts, err))
		return -EINVAL;
	m->readers = calloc(json_array_size(rd) + 1, sizeof(*m->readers));
	if (!m->readers)
		return sfs_errorf(err, -ENOMEM, "out of memory");
	for (i = 0; i < json_array_size(rd); i++) {
		json_int_t rank, worker;

		if (json_unpack(json_array_get(rd, i), "{s:I, s:I}", "rank",
				&rank, "worker", &worker) ||
		    rank < 0 || worker < 0 || rank >= m->opts.world ||
		    worker >= m->opts.workers)
			return sfs_errorf(err, -EINVAL, "%s: readers[%zu]: bad",
					  where, i);
		m->readers[i] =
			(struct freader){ (uint32_t)rank, (uint32_t)worker };
	}
	m->nreaders = i;
	return 0;
}

/* The mounts must serve one stream the same way; a rank once. */
static int check_mounts(struct fcheck *c)
{
	const struct sfs_plan_opts *o = &c->m[0].opts;
	size_t i, j, n = (size_t)o->world * o->workers;
	uint32_t *shown = calloc(n ? n : 1, sizeof(*shown));
	char diff[512];
	int rc = 0;

	if (!shown)
		return -ENOMEM;
	for (i = 1; !rc && i < c->nm; i++) {
		const struct fmount *m = &c->m[i];

		if (strcmp(m->source, c->m[0].source) ||
		    m->window != c->m[0].window ||
		    strcmp(m->format, c->m[0].format))
			rc = sfs_verdict_add(
				c->v, c->o->max_findings, SFS_FIND_OPTIONS,
				"%s and %s disagree: %s window=%" PRIu64
				" format=%s vs %s window=%" PRIu64 " format=%s",
				c->m[0].path, m->path, c->m[0].source,
				c->m[0].window, c->m[0].format, m->source,
				m->window, m->format);
		else if (sfs_plan_opts_diff(o, &m->opts, diff, sizeof(diff)))
			rc = sfs_verdict_add(c->v, c->o->max_findings,
					     SFS_FIND_OPTIONS,
					     "%s and %s disagree: %s",
					     c->m[0].path, m->path, diff);
	}
	/* the mounts agree on world and workers: their readers are in it */
	for (i = 0; !rc && !c->v->nfindings && i < c->nm; i++)
		for (j = 0; j < c->m[i].nreaders; j++)
			shown[(size_t)c->m[i].readers[j].rank * o->workers +
			      c->m[i].readers[j].worker]++;
	if (!rc && !c->v->nfindings)
		rc = sfs_audit_judge_coverage(shown, o->world, o->workers,
					      c->o->max_findings, c->v);
	c->v->readers_planned = n;
	free(shown);
	return rc;
}

/* Stream shard s digested (once); -EIO when it cannot be (a finding). */
static int shard_digests(struct fcheck *c, size_t s)
{
	const struct sfs_shard *sh = &c->f->idx->shards[s];
	struct sfs_error err = { 0 };
	struct job j = { .ops = c->f->format };
	char shown[PATH_MAX];
	int rc;

	if (c->sd.d[s])
		return 0;
	if (c->sd.failed[s])
		return -EIO;
	snprintf(shown, sizeof(shown), "%s/%s", c->f->source, sh->path);
	rc = sfs_observe_file(&j, c->f->srcfd, sh->path, shown, NULL, &err);
	if (!rc && j.ndigests != sh->nsamples)
		rc = sfs_errorf(
			&err, -EIO,
			"%s holds %zu samples, the stream counts %" PRIu64,
			shown, j.ndigests, sh->nsamples);
	if (rc) {
		free(j.digests);
		c->sd.failed[s] = true;
		rc = sfs_verdict_add(c->v, c->o->max_findings, SFS_FIND_SOURCE,
				     "%s: its windows are not audited",
				     err.msg[0] ? err.msg : strerror(-rc));
		return rc ? rc : -EIO;
	}
	c->sd.d[s] = j.digests;
	return 0;
}

/* Stream sample g (below the stream's samples; UINT64_MAX: none) as
 * (shard, sample). */
static struct sfs_audit_sample sample_at(const struct sfs_follow *f, uint64_t g)
{
	size_t s = g == UINT64_MAX ? 0 : sfs_index_shard_at(f->idx, g);

	return g == UINT64_MAX ?
		       (struct sfs_audit_sample){ SFS_AUDIT_UNKNOWN, 0 } :
		       (struct sfs_audit_sample){
			       s, g - f->idx->shards[s].first_sample
		       };
}

/* "shard:sample" of a sample of the stream. */
static const char *name_of(const struct sfs_follow *f,
			   struct sfs_audit_sample x, char *buf, size_t len)
{
	snprintf(buf, len, "%s:%" PRIu64, f->idx->shards[x.shard].path,
		 x.sample);
	return buf;
}

struct wstate {
	const struct sfs_window *win;
	uint64_t lo, hi;
	struct sfs_observe_table map; /* its samples by their bytes */
	uint32_t *planned, *read; /* per sample of [lo, hi) */
};

/* The digest of stream sample g (arg: the fcheck). */
static const unsigned char *digest_of(const void *arg, uint64_t g)
{
	const struct fcheck *c = arg;
	struct sfs_audit_sample x = sample_at(c->f, g);

	return c->sd.d[x.shard][x.sample];
}

/* The samples of the stream wr's window file holds, as planned, into
 * *out (caller frees), counted in ws->planned.  0 or -ENOMEM. */
static int planned_samples(struct fcheck *c, struct wstate *ws,
			   const struct sfs_window_reader *wr,
			   struct sfs_audit_sample **out, size_t *n)
{
	struct sfs_audit_sample *exp = malloc((wr->samples + 1) * sizeof(*exp));
	const struct sfs_shard *shards = c->f->idx->shards;
	size_t i, k, e = 0, sh;

	if (!exp)
		return -ENOMEM;
	for (i = 0; i < wr->nruns; i++) {
		sh = sfs_window_run_shard(ws->win, shards, &wr->runs[i]);
		for (k = 0; k < wr->runs[i].count; k++) {
			exp[e++] = (struct sfs_audit_sample){
				sh,
				wr->runs[i].first - shards[sh].first_sample + k
			};
			ws->planned[wr->runs[i].first + k - ws->lo]++;
		}
	}
	*out = exp;
	*n = e;
	return 0;
}

/* Each sample read (j's digests) as a sample of the stream into got: the
 * planned one (exp[0 .. e)) when its bytes are, else the sample of the
 * window with those bytes, else none (SFS_AUDIT_UNKNOWN); counted in
 * ws->read. */
static void identify(struct fcheck *c, struct wstate *ws, const struct job *j,
		     const struct sfs_audit_sample *exp, size_t e,
		     struct sfs_audit_sample *got)
{
	uint64_t g, pg;
	size_t i;

	for (i = 0; i < j->ndigests; i++) {
		pg = i < e ? c->f->idx->shards[exp[i].shard].first_sample +
				     exp[i].sample :
			     UINT64_MAX;
		g = sfs_observe_table_find(&ws->map, j->digests[i], pg);
		got[i] = sample_at(c->f, g);
		if (g != UINT64_MAX)
			ws->read[g - ws->lo]++;
	}
}

/* Judge one reader's window file against its runs. */
static int judge_reader(struct fcheck *c, struct wstate *ws,
			const struct fmount *m, const struct freader *fr,
			const struct sfs_window_reader *wr)
{
	const struct sfs_window *win = ws->win;
	/* the window files' ending: the driver's first, without its dot */
	const char *ext = c->f->format->suffixes[0] + 1;
	struct sfs_error err = { 0 };
	struct job j = { .ops = c->f->format };
	char file[64], path[PATH_MAX], prefix[40], unknown[64];
	struct sfs_audit_sample *exp = NULL, *got = NULL;
	struct sfs_audit_file af = { .name = file };
	struct sfs_audit_reading rd = { .prefix = prefix,
					.rank = fr->rank,
					.worker = fr->worker,
					.mount = m->path,
					.idx = c->f->idx,
					.unknown = unknown,
					.files = &af,
					.nfiles = 1,
					.every = true };
	size_t e = 0;
	int rc = 0;

	snprintf(file, sizeof(file), "window-%08" PRIu64 ".%s", win->k, ext);
	snprintf(path, sizeof(path), "%s/%u/%u/%s", m->path, fr->rank,
		 fr->worker, file);
	snprintf(prefix, sizeof(prefix), "window %" PRIu64 ": ", win->k);
	snprintf(unknown, sizeof(unknown),
		 "bytes that are no sample of window %" PRIu64, win->k);
	rc = planned_samples(c, ws, wr, &exp, &e);
	if (rc)
		return rc;
	rc = sfs_observe_file(&j, AT_FDCWD, path, path, NULL, &err);
	if (rc) {
		rc = sfs_verdict_add(c->v, c->o->max_findings, SFS_FIND_BYTES,
				     "window %" PRIu64
				     ": rank %u worker %u (%s): %s",
				     win->k, fr->rank, fr->worker, m->path,
				     err.msg[0] ? err.msg : strerror(-rc));
		goto out;
	}
	got = malloc((j.ndigests + 1) * sizeof(*got));
	if (!got) {
		rc = -ENOMEM;
		goto out;
	}
	identify(c, ws, &j, exp, e, got);
	rd.want = exp;
	rd.nwant = e;
	rd.got = got;
	rd.ngot = af.count = j.ndigests;
	rc = sfs_audit_judge_reading(&rd, c->o->max_findings, c->v);
out:
	free(exp);
	free(got);
	free(j.digests);
	return rc;
}

/* The overlap and missing findings of a window, over the readers shown. */
static int judge_counts(struct fcheck *c, const struct wstate *ws)
{
	char a[PATH_MAX];
	uint64_t g;
	int rc = 0;

	for (g = ws->lo; !rc && g < ws->hi; g++) {
		uint32_t p = ws->planned[g - ws->lo], r = ws->read[g - ws->lo];

		if (r == p)
			continue;
		rc = sfs_verdict_add(
			c->v, c->o->max_findings,
			r > p ? SFS_FIND_OVERLAP : SFS_FIND_MISSING,
			"window %" PRIu64
			": %s is read %u time%s, the plan reads it %u",
			ws->win->k,
			name_of(c->f, sample_at(c->f, g), a, sizeof(a)), r,
			r == 1 ? "" : "s", p);
	}
	return rc;
}

/* Window k for the readers of the mounts that list it. */
static int audit_window(struct fcheck *c, uint64_t k, bool last,
			struct sfs_error *err)
{
	const struct sfs_plan_opts *o = &c->m[0].opts;
	struct wstate ws = { 0 };
	struct sfs_window *win = NULL;
	size_t *ids = NULL, n = 0, i, j, s;
	const struct fmount **who = NULL;
	const struct freader **fr = NULL;
	int rc = 0;

	for (i = 0; i < c->nm; i++)
		if (k >= c->m[i].first && k < c->m[i].first + c->m[i].nwins)
			n += c->m[i].nreaders;
	ids = calloc(n + 1, sizeof(*ids));
	who = calloc(n + 1, sizeof(*who));
	fr = calloc(n + 1, sizeof(*fr));
	if (!ids || !who || !fr) {
		rc = sfs_errorf(err, -ENOMEM, "out of memory");
		goto out;
	}
	n = 0;
	for (i = 0; i < c->nm; i++) {
		const struct fmount *m = &c->m[i];

		if (k < m->first || k >= m->first + m->nwins)
			continue;
		for (j = 0; j < m->nreaders; j++) {
			who[n] = m;
			fr[n] = &m->readers[j];
			ids[n++] = (size_t)(m->readers[j].rank / o->replicas) *
					   o->workers +
				   m->readers[j].worker;
		}
	}
	rc = sfs_window_build(c->f, o, c->m[0].window, k, last, ids, n, &win,
			      err);
	if (rc == -ENODATA) {
		rc = sfs_verdict_add(
			c->v, c->o->max_findings, SFS_FIND_COUNT,
			"window %" PRIu64
			" is listed, but remainder=drop leaves nothing of it",
			k);
		goto out;
	}
	if (rc)
		goto out;
	ws.win = win;
	ws.lo = k * c->m[0].window;
	ws.hi = win->last_sample;
	for (s = win->first_shard; s < win->end_shard; s++)
		if (shard_digests(c, s) == -EIO)
			goto out; /* a source finding says so */
	ws.planned = calloc(ws.hi - ws.lo, sizeof(*ws.planned));
	ws.read = calloc(ws.hi - ws.lo, sizeof(*ws.read));
	ws.map.digest = digest_of;
	ws.map.arg = c;
	if (!ws.planned || !ws.read ||
	    sfs_observe_table_build(&ws.map, ws.lo, ws.hi)) {
		rc = sfs_errorf(err, -ENOMEM, "out of memory");
		goto out;
	}
	for (i = 0; !rc && i < n; i++)
		rc = judge_reader(c, &ws, who[i], fr[i], &win->readers[i]);
	if (!rc)
		rc = judge_counts(c, &ws);
	if (rc == -ENOMEM)
		sfs_errorf(err, rc, "out of memory");
	c->v->per_reader += win->per_reader;
	c->v->padding += win->padding;
	c->v->dropped += win->dropped;
	c->v->remaining += ws.hi - ws.lo;
out:
	free(ws.planned);
	free(ws.read);
	free(ws.map.slots);
	free(ids);
	free(who);
	free(fr);
	sfs_window_free(win);
	return rc;
}

/*
 * A complete stream: reader fr's stream file is its window files laid
 * end to end, each without its trailer (trailer bytes), one at the end.
 */
static int check_stream(struct fcheck *c, const struct fmount *m,
			const struct freader *fr, uint64_t trailer)
{
	const char *ext = c->f->format->suffixes[0] + 1;
	char path[PATH_MAX], wpath[PATH_MAX], tail[64] = "";
	static const size_t chunk = 1 << 16;
	char *a = malloc(chunk), *b = malloc(chunk);
	uint64_t pos = 0, k;
	const char *why = NULL;
	int sfd, rc = 0;

	snprintf(path, sizeof(path), "%s/%u/%u/stream.%s", m->path, fr->rank,
		 fr->worker, ext);
	sfd = open(path, O_RDONLY | O_CLOEXEC);
	if (!a || !b || sfd < 0) {
		rc = a && b ? sfs_verdict_add(c->v, c->o->max_findings,
					      SFS_FIND_BYTES, "%s: %s", path,
					      strerror(errno)) :
			      -ENOMEM;
		goto out;
	}
	for (k = m->first; !why && k < m->first + m->nwins; k++) {
		bool lastw = k + 1 == m->first + m->nwins;
		struct stat st;
		uint64_t size, done = 0;
		int wfd;

		snprintf(wpath, sizeof(wpath),
			 "%s/%u/%u/window-%08" PRIu64 ".%s", m->path, fr->rank,
			 fr->worker, k, ext);
		wfd = open(wpath, O_RDONLY | O_CLOEXEC);
		if (wfd < 0 || fstat(wfd, &st) ||
		    (uint64_t)st.st_size < trailer) {
			why = "a window file cannot be read";
			if (wfd >= 0)
				close(wfd);
			break;
		}
		size = (uint64_t)st.st_size - (lastw ? 0 : trailer);
		while (!why && done < size) {
			size_t want = size - done < chunk ? size - done : chunk;
			ssize_t x = sfs_pread_full(wfd, a, want, done), y;

			if (x <= 0) {
				why = "a window file cannot be read";
				break;
			}
			y = sfs_pread_full(sfd, b, (size_t)x, pos);
			if (y != x)
				why = "it ends before its window files do";
			else if (memcmp(a, b, (size_t)x))
				why = "its bytes differ";
			if (why) {
				snprintf(tail, sizeof(tail),
					 " (window-%08" PRIu64 ".%s)", k, ext);
				break;
			}
			done += (uint64_t)x;
			pos += (uint64_t)x;
		}
		close(wfd);
	}
	if (!why && sfs_pread_full(sfd, b, 1, pos) > 0) {
		why = "it goes on after its window files end";
	}
	if (why)
		rc = sfs_verdict_add(
			c->v, c->o->max_findings, SFS_FIND_BYTES,
			"rank %u worker %u (%s): stream.%s is not its window files laid end to end: %s near byte %" PRIu64
			"%s",
			fr->rank, fr->worker, m->path, ext, why, pos, tail);
	close(sfd);
out:
	free(a);
	free(b);
	return rc;
}

static void note_nothing(void *arg, const char *msg)
{
	(void)arg;
	(void)msg;
}

int sfs_observe_follow(const char *const *paths, size_t nm,
		       const struct sfs_observe_opts *o, struct sfs_verdict *v,
		       struct sfs_error *err)
{
	struct fcheck c = { .o = o, .nm = nm, .v = v };
	uint64_t first, full, k, hi = 0, trailer = 0;
	bool last;
	size_t i, j;
	int rc = 0;

	c.m = calloc(nm ? nm : 1, sizeof(*c.m));
	if (!c.m)
		return sfs_errorf(err, -ENOMEM, "out of memory");
	for (i = 0; !rc && i < nm; i++) {
		c.m[i].path = paths[i];
		rc = read_mount(&c.m[i], err);
	}
	if (!rc)
		rc = check_mounts(&c);
	if (rc || v->nfindings)
		goto out;
	rc = sfs_follow_open(c.m[0].source, c.m[0].index, false,
			     sfs_format_by_name(c.m[0].format), note_nothing,
			     NULL, &c.f, err);
	if (!rc)
		rc = sfs_follow_scan(c.f, NULL, err);
	if (rc)
		goto out;
	c.sd.d = calloc(c.f->idx->nshards + 1, sizeof(*c.sd.d));
	c.sd.failed = calloc(c.f->idx->nshards + 1, sizeof(*c.sd.failed));
	if (!c.sd.d || !c.sd.failed) {
		rc = sfs_errorf(err, -ENOMEM, "out of memory");
		goto out;
	}
	sfs_follow_windows(c.f->idx->nsamples, c.m[0].window, c.m[0].opts.start,
			   c.f->ended, &first, &full, &last);
	for (i = 0; i < nm; i++)
		if (c.m[i].first + c.m[i].nwins > hi)
			hi = c.m[i].first + c.m[i].nwins;
	if (hi > first + full + last) {
		rc = sfs_errorf(
			err, -EINVAL,
			"the mounts list windows up to %" PRIu64
			", the stream of %s holds %" PRIu64
			" samples, windows up to %" PRIu64
			" as the auditor reads it: is the log the mount's (index=)?",
			hi - 1, c.f->source, c.f->idx->nsamples,
			first + full + last - 1);
		goto out;
	}
	for (k = c.m[0].first; !rc && k < hi; k++)
		rc = audit_window(&c, k, last && k == first + full, err);
	if (c.f->format->slice_suffix && c.f->idx->nshards) {
		const void *t;

		trailer = c.f->format->slice_suffix(&c.f->idx->shards[0], &t);
	}
	for (i = 0; !rc && i < nm; i++)
		for (j = 0; !rc && c.m[i].complete && j < c.m[i].nreaders; j++)
			rc = check_stream(&c, &c.m[i], &c.m[i].readers[j],
					  trailer);
	if (rc == -ENOMEM)
		sfs_errorf(err, rc, "out of memory");
out:
	if (c.f)
		for (i = 0; i < c.f->idx->nshards; i++)
			free(c.sd.d ? c.sd.d[i] : NULL);
	free(c.sd.d);
	free(c.sd.failed);
	sfs_follow_free(c.f);
	for (i = 0; i < nm; i++) {
		free(c.m[i].readers);
		json_decref(c.m[i].status);
	}
	free(c.m);
	return rc;
}
