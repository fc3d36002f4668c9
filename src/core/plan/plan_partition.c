/*
 * The plan's steps 5 and 6 (plan.h, docs/plan.md): each reader's positions
 * of the equalised order, cut into files at unit boundaries, built by
 * groups of readers on threads of their own.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardfs/mixture.h"
#include "shardfs/plan.h"
#include "shardfs/pool.h"
#include "shardfs/prng.h"
#include "shardfs/util.h"

#include "plan_i.h"

/* ---- 6. files: a reader's positions cut at unit boundaries ---- */

/* True when the samples of unit un are read in a shuffled order. */
static bool unit_permuted(const struct builder *b, const struct unit *un)
{
	return b->o->shuffle == SFS_SHUFFLE_SAMPLES && un->count > 1 &&
	       sfs_shard_sliceable(&b->idx->shards[un->shard]);
}

/*
 * Where partition puts the files and runs of readers lo .. hi - 1, in
 * reader order: one group of readers, on a thread of its own when there
 * are several; partition appends each group's to the plan's arrays.
 */
struct out {
	size_t lo, hi;
	uint32_t part; /* its number: the plan keeps its runs as runs[part] */
	struct sfs_plan_file *files;
	size_t nfiles, files_cap;
	struct sfs_run *runs;
	size_t nruns, runs_cap;
	uint64_t *perm; /* scratch: a unit's sample permutation */
	struct cursor cur; /* where the last file's positions ended */
	int rc;
	struct sfs_error err;
};

static int push_run(struct out *out, uint64_t first, uint64_t count)
{
	struct sfs_run *last = out->nruns > out->files[out->nfiles - 1].run_at ?
				       &out->runs[out->nruns - 1] :
				       NULL;

	if (last && last->first + last->count == first) {
		last->count += count;
		return 0;
	}
	if (SFS_GROW(out->runs, out->runs_cap, out->nruns + 1))
		return -ENOMEM;
	out->runs[out->nruns++] = (struct sfs_run){ first, count };
	out->files[out->nfiles - 1].nruns++;
	return 0;
}

static int cut_error(const struct builder *b, struct out *out,
		     const struct unit *un, uint64_t a, uint64_t len,
		     size_t reader)
{
	const struct sfs_shard *sh = &b->idx->shards[un->shard];
	uint32_t k = b->o->workers, rep = b->o->replicas;
	size_t rank = reader / k * rep;
	char who[64];

	/* a reader is read by the replicas of its group */
	if (rep > 1)
		snprintf(who, sizeof(who), "ranks %zu..%zu", rank,
			 rank + rep - 1);
	else
		snprintf(who, sizeof(who), "rank %zu", rank);
	return sfs_errorf(
		&out->err, -EINVAL,
		"%s cannot be sliced (a %s shard of %llu samples that is compressed or opaque), but %s worker %zu would read only samples %llu..%llu of it; use uncompressed shards, or choose world, workers, batch and start so that every reader's share ends on a shard boundary",
		sh->path, sh->format->name, (unsigned long long)sh->nsamples,
		who, reader % k, (unsigned long long)(un->first + a),
		(unsigned long long)(un->first + a + len - 1));
}

/* Add a file holding positions [a, a + len) of segment sg. */
static int add_file(const struct builder *b, struct out *out,
		    const struct seg *sg, uint64_t a, uint64_t len,
		    bool padding, size_t reader)
{
	const struct sfs_shard *sh;
	struct sfs_plan_file *f;
	struct unit u, *un = &u;
	bool whole_unit;
	struct sfs_prng rng;
	uint64_t i;

	sfs_plan_unit_get(b, sg->unit, un);
	sh = &b->idx->shards[un->shard];
	a += sg->first;
	whole_unit = a == 0 && len == un->count;
	if (!sfs_shard_sliceable(sh) && !whole_unit)
		return cut_error(b, out, un, a, len, reader);
	if (SFS_GROW(out->files, out->files_cap, out->nfiles + 1))
		return -ENOMEM;
	f = &out->files[out->nfiles++];
	*f = (struct sfs_plan_file){
		.shard = un->shard,
		.nsamples = len,
		.npadding = padding ? len : 0,
		.part = out->part,
		.run_at = out->nruns,
	};
	if (!unit_permuted(b, un)) {
		f->whole = whole_unit && un->first == 0 &&
			   un->count == sh->nsamples;
		return push_run(out, un->first + a, len);
	}
	for (i = 0; i < un->count; i++)
		out->perm[i] = i;
	sfs_prng_init(&rng, b->seed[un->src], b->pass0[un->src] + sg->pass,
		      un->local + 1);
	sfs_prng_shuffle(&rng, out->perm, un->count);
	for (i = a; i < a + len; i++)
		if (push_run(out, un->first + out->perm[i], 1))
			return -ENOMEM;
	return 0;
}

/* ---- 5. partition: each reader's positions of the order ---- */

/* Index into b->segs of the segment holding epoch position g. */
size_t sfs_plan_find_seg(const struct builder *b, uint64_t g)
{
	return SFS_PARTITION_POINT(i, 1, b->nsegs, b->cum[i] <= g) - 1;
}

/* Reader t reads positions [q, end) of the equalised order next. */
static int read_positions(const struct builder *b, struct out *out, size_t t,
			  uint64_t q, uint64_t end)
{
	struct sfs_plan *plan = b->plan;
	struct sfs_plan_reader *r = &plan->readers[t];
	uint64_t n = plan->remaining;
	int rc;

	while (q < end) {
		uint64_t rpos = q % n, g = b->o->start + rpos, a, len;
		const struct seg *sg =
			sfs_plan_order_at(b, &out->cur, g, &a, &len);

		if (sfs_plan_cancelled(b))
			return -ECANCELED;
		if (len > end - q)
			len = end - q;
		if (len > n - rpos)
			len = n - rpos;
		rc = add_file(b, out, sg, a, len, q >= n, t);
		if (rc)
			return rc;
		if (q >= n)
			r->npadding += len;
		q += len;
	}
	return 0;
}

/*
 * Interleaved: the equalised order is cut into batches; batch g is what
 * (replica group) rank g mod D reads at loader step s = g div D, from
 * worker s mod K (a DataLoader takes its workers' batches in turn), as that
 * worker's batch s div K, D = world / replicas.  So after S steps on every
 * rank the first S*D*batch samples of the order have been read, whatever
 * D and K are.  Batches of one reader that happen to be adjacent (D*K = 1)
 * stay one file.
 */
static int read_interleaved(const struct builder *b, struct out *out, size_t t)
{
	const struct sfs_plan_opts *o = b->o;
	uint64_t bs = o->batch, nbatches = b->plan->per_reader / bs, j;
	uint64_t group = t / o->workers, worker = t % o->workers;
	uint64_t groups = o->world / o->replicas;
	uint64_t from = 0, to = 0;
	int rc;

	for (j = 0; j < nbatches; j++) {
		uint64_t g = (j * o->workers + worker) * groups + group;

		if (g * bs != to) {
			rc = read_positions(b, out, t, from, to);
			if (rc)
				return rc;
			from = g * bs;
		}
		to = g * bs + bs;
	}
	return read_positions(b, out, t, from, to);
}

/* Whether reader t is read by one of the ranks asked for. */
static bool wanted(const struct builder *b, size_t t)
{
	size_t group = t / b->o->workers, k;

	for (k = 0; k < b->nranks; k++)
		if (b->ranks[k] / b->o->replicas == group)
			return true;
	return b->nranks == 0;
}

/* Pool item i: the readers of group i. */
static void partition_group(struct sfs_pool *p, size_t i, struct sfs_digest *d)
{
	const struct builder *b = p->arg;
	struct out *out = &b->outs[i];
	size_t t;

	(void)d;
	out->perm = malloc((b->maxunit + 1) * sizeof(*out->perm));
	if (!out->perm || sfs_plan_cursor_init(b, &out->cur))
		out->rc = -ENOMEM;
	for (t = out->lo; t < out->hi && !out->rc; t++) {
		struct sfs_plan_reader *r = &b->plan->readers[t];

		r->file_at = out->nfiles;
		if (!wanted(b, t))
			continue;
		if (b->o->partition == SFS_PARTITION_INTERLEAVED)
			out->rc = read_interleaved(b, out, t);
		else
			out->rc = read_positions(
				b, out, t, (uint64_t)t * b->plan->per_reader,
				(uint64_t)(t + 1) * b->plan->per_reader);
		r->nfiles = out->nfiles - r->file_at;
	}
	free(out->perm);
	out->perm = NULL;
	sfs_plan_cursor_free(&out->cur);
}

/* Append group out's files to the plan's (the first group's array becomes
 * the plan's, the others' are copied once and freed) and keep its runs as
 * they are, as part out->part, without the room doubling left. */
static int gather(struct builder *b, struct out *out)
{
	struct sfs_plan *plan = b->plan;
	struct sfs_plan_file *f;
	struct sfs_run *r;
	size_t i;

	if (out->nruns && (r = realloc(out->runs, out->nruns * sizeof(*r))))
		out->runs = r;
	plan->runs[out->part] = out->runs;
	plan->nruns += out->nruns;
	out->runs = NULL;
	for (i = out->lo; i < out->hi; i++)
		plan->readers[i].file_at += plan->nfiles;
	if (!plan->nfiles) {
		free(plan->files);
		plan->files = out->files;
		plan->nfiles = out->nfiles;
		out->files = NULL;
		return 0;
	}
	if (!out->nfiles)
		return 0;
	f = realloc(plan->files, (plan->nfiles + out->nfiles) * sizeof(*f));
	if (!f)
		return -ENOMEM;
	plan->files = f;
	memcpy(f + plan->nfiles, out->files, out->nfiles * sizeof(*f));
	plan->nfiles += out->nfiles;
	free(out->files);
	out->files = NULL;
	return 0;
}

/*
 * Step 5: the files of the readers wanted.  A plan for some ranks (a
 * daemon's, at an epoch switch) cuts them into one group per CPU, each
 * built on a thread of its own, its files appended in order and its runs
 * kept as a part of the plan's, where they were built; the plan of every
 * reader (shardfs-plan) is built by one thread, so that it is never held
 * twice.  Either way the files are the same.
 */
int sfs_plan_partition(struct builder *b)
{
	struct sfs_plan *plan = b->plan;
	struct sfs_pool pool = { .work = partition_group, .arg = b };
	size_t t, nwanted = 0, k = 1, g, seen;
	struct sfs_plan_file *f;
	int rc = 0;

	for (t = 0; t < plan->nreaders; t++)
		nwanted += wanted(b, t);
	if (b->nranks &&
	    (unsigned __int128)nwanted * plan->per_reader >= 1 << 16) {
		k = sfs_plan_threads(b);
		k = k < nwanted ? k : nwanted;
	}
	b->outs = calloc(k, sizeof(*b->outs));
	plan->runs = calloc(k, sizeof(*plan->runs));
	if (!b->outs || !plan->runs)
		return -ENOMEM;
	b->nouts = k;
	plan->nparts = k;
	for (g = 0; g < k; g++)
		b->outs[g].part = (uint32_t)g;
	/* group g: the readers up to its share of the wanted ones */
	for (t = 0, g = 0, seen = 0; t < plan->nreaders; t++) {
		seen += wanted(b, t);
		if (g + 1 < k && seen > nwanted * (g + 1) / k) {
			b->outs[g++].hi = t;
			b->outs[g].lo = t;
		}
	}
	b->outs[g].hi = plan->nreaders;
	pool.n = k;
	sfs_plan_run_items(b, &pool);
	for (g = 0; !rc && g < k; g++) {
		rc = b->outs[g].rc;
		if (rc && rc != -ECANCELED && b->err)
			*b->err = b->outs[g].err;
	}
	for (g = 0; !rc && g < k; g++)
		rc = gather(b, &b->outs[g]);
	if (rc)
		return rc;
	/* a view holds the plan for its epoch: give back the room doubling
	 * left (a shrinking realloc that fails leaves the block as it was) */
	if (plan->nfiles &&
	    (f = realloc(plan->files, plan->nfiles * sizeof(*f))))
		plan->files = f;
	return 0;
}

void sfs_plan_outs_free(struct builder *b)
{
	size_t s;

	for (s = 0; s < b->nouts; s++) {
		free(b->outs[s].files);
		free(b->outs[s].runs);
	}
	free(b->outs);
}
