#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardfs/plan.h"
#include "shardfs/prng.h"

struct unit {
	size_t shard;
	uint64_t first; /* first sample of the shard in the unit */
	uint64_t count;
};

struct builder {
	const struct sfs_index *idx;
	const struct sfs_plan_opts *o;
	struct sfs_plan *plan;
	struct unit *units; /* canonical order */
	uint64_t *order; /* canonical unit numbers in epoch order */
	uint64_t *cum; /* cum[i]: samples before order[i]; cum[U] = N */
	uint64_t *perm; /* scratch: a unit's sample permutation */
	size_t files_cap, runs_cap;
	struct sfs_error *err;
};

static int make_units(struct builder *b)
{
	const struct sfs_index *idx = b->idx;
	uint64_t block = b->o->block, n = 0;
	size_t i;

	for (i = 0; i < idx->nshards; i++) {
		const struct sfs_shard *sh = &idx->shards[i];

		if (!sh->nsamples)
			continue;
		n += block && sfs_shard_sliceable(sh) ?
			     (sh->nsamples - 1) / block + 1 :
			     1;
	}
	b->units = malloc((n + 1) * sizeof(*b->units));
	b->order = malloc((n + 1) * sizeof(*b->order));
	b->cum = malloc((n + 1) * sizeof(*b->cum));
	if (!b->units || !b->order || !b->cum)
		return -ENOMEM;
	b->plan->nunits = n;
	n = 0;
	for (i = 0; i < idx->nshards; i++) {
		const struct sfs_shard *sh = &idx->shards[i];
		uint64_t first = 0;

		if (!sh->nsamples)
			continue;
		if (!block || !sfs_shard_sliceable(sh)) {
			b->units[n++] = (struct unit){ i, 0, sh->nsamples };
			continue;
		}
		for (; first < sh->nsamples; first += block) {
			uint64_t left = sh->nsamples - first;

			b->units[n++] =
				(struct unit){ i, first,
					       left < block ? left : block };
		}
	}
	return 0;
}

static void order_units(struct builder *b)
{
	uint64_t u, n = b->plan->nunits;
	struct sfs_prng rng;

	for (u = 0; u < n; u++)
		b->order[u] = u;
	if (b->o->shuffle != SFS_SHUFFLE_NONE) {
		sfs_prng_init(&rng, b->o->seed, b->o->epoch, 0);
		sfs_prng_shuffle(&rng, b->order, n);
	}
	b->cum[0] = 0;
	for (u = 0; u < n; u++)
		b->cum[u + 1] = b->cum[u] + b->units[b->order[u]].count;
}

/* True when the samples of unit u are read in a shuffled order. */
static bool unit_permuted(const struct builder *b, uint64_t u)
{
	const struct unit *un = &b->units[u];

	return b->o->shuffle == SFS_SHUFFLE_SAMPLES && un->count > 1 &&
	       sfs_shard_sliceable(&b->idx->shards[un->shard]);
}

static int push_run(struct builder *b, uint64_t first, uint64_t count)
{
	struct sfs_plan *plan = b->plan;
	struct sfs_run *last =
		plan->nruns > plan->files[plan->nfiles - 1].run_at ?
			&plan->runs[plan->nruns - 1] :
			NULL;

	if (last && last->first + last->count == first) {
		last->count += count;
		return 0;
	}
	if (plan->nruns == b->runs_cap) {
		size_t ncap = b->runs_cap ? 2 * b->runs_cap : 1024;
		struct sfs_run *nr = realloc(plan->runs, ncap * sizeof(*nr));

		if (!nr)
			return -ENOMEM;
		plan->runs = nr;
		b->runs_cap = ncap;
	}
	plan->runs[plan->nruns++] = (struct sfs_run){ first, count };
	plan->files[plan->nfiles - 1].nruns++;
	return 0;
}

static int cut_error(struct builder *b, const struct unit *un, uint64_t a,
		     uint64_t len, size_t reader)
{
	const struct sfs_shard *sh = &b->idx->shards[un->shard];
	uint32_t k = b->o->workers;

	return sfs_errorf(
		b->err, -EINVAL,
		"%s cannot be sliced (a %s shard of %llu samples that is compressed or opaque), but rank %zu worker %zu would read only samples %llu..%llu of it; use uncompressed shards, or choose world, workers, batch and start so that every reader's share ends on a shard boundary",
		sh->path, sh->format->name, (unsigned long long)sh->nsamples,
		reader / k, reader % k, (unsigned long long)(un->first + a),
		(unsigned long long)(un->first + a + len - 1));
}

/* Add a file holding samples [a, a + len) (in epoch order) of unit u. */
static int add_file(struct builder *b, uint64_t u, uint64_t a, uint64_t len,
		    bool padding, size_t reader)
{
	const struct unit *un = &b->units[u];
	const struct sfs_shard *sh = &b->idx->shards[un->shard];
	struct sfs_plan *plan = b->plan;
	struct sfs_plan_file *f;
	bool whole_unit = a == 0 && len == un->count;
	struct sfs_prng rng;
	uint64_t i;

	if (!sfs_shard_sliceable(sh) && !whole_unit)
		return cut_error(b, un, a, len, reader);
	if (plan->nfiles == b->files_cap) {
		size_t ncap = b->files_cap ? 2 * b->files_cap : 1024;
		struct sfs_plan_file *nf =
			realloc(plan->files, ncap * sizeof(*nf));

		if (!nf)
			return -ENOMEM;
		plan->files = nf;
		b->files_cap = ncap;
	}
	f = &plan->files[plan->nfiles++];
	*f = (struct sfs_plan_file){
		.shard = un->shard,
		.nsamples = len,
		.npadding = padding ? len : 0,
		.run_at = plan->nruns,
	};
	if (!unit_permuted(b, u)) {
		f->whole = whole_unit && un->first == 0 &&
			   un->count == sh->nsamples;
		return push_run(b, un->first + a, len);
	}
	for (i = 0; i < un->count; i++)
		b->perm[i] = i;
	sfs_prng_init(&rng, b->o->seed, b->o->epoch, u + 1);
	sfs_prng_shuffle(&rng, b->perm, un->count);
	for (i = a; i < a + len; i++)
		if (push_run(b, un->first + b->perm[i], 1))
			return -ENOMEM;
	return 0;
}

/* Index i into b->order of the unit holding epoch position g. */
static size_t find_unit(const struct builder *b, uint64_t g)
{
	size_t lo = 0, hi = b->plan->nunits;

	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (b->cum[mid] <= g)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* Reader t reads positions [q, end) of the equalised order next. */
static int read_positions(struct builder *b, size_t t, uint64_t q, uint64_t end)
{
	struct sfs_plan *plan = b->plan;
	struct sfs_plan_reader *r = &plan->readers[t];
	uint64_t n = plan->remaining;
	int rc;

	while (q < end) {
		uint64_t rpos = q % n, g = b->o->start + rpos;
		size_t i = find_unit(b, g);
		uint64_t u = b->order[i], a = g - b->cum[i];
		uint64_t len = b->cum[i + 1] - g;

		if (len > end - q)
			len = end - q;
		if (len > n - rpos)
			len = n - rpos;
		rc = add_file(b, u, a, len, q >= n, t);
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
static int read_interleaved(struct builder *b, size_t t)
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
			rc = read_positions(b, t, from, to);
			if (rc)
				return rc;
			from = g * bs;
		}
		to = g * bs + bs;
	}
	return read_positions(b, t, from, to);
}

static int partition(struct builder *b)
{
	struct sfs_plan *plan = b->plan;
	uint64_t c = plan->per_reader;
	size_t t;
	int rc;

	for (t = 0; t < plan->nreaders; t++) {
		struct sfs_plan_reader *r = &plan->readers[t];

		r->file_at = plan->nfiles;
		if (b->o->partition == SFS_PARTITION_INTERLEAVED)
			rc = read_interleaved(b, t);
		else
			rc = read_positions(b, t, (uint64_t)t * c,
					    (uint64_t)t * c + c);
		if (rc)
			return rc;
		r->nfiles = plan->nfiles - r->file_at;
	}
	return 0;
}

/* Steps 3 and 4: how many samples each reader gets. */
static int equalise(struct builder *b)
{
	const struct sfs_plan_opts *o = b->o;
	struct sfs_plan *plan = b->plan;
	uint64_t T = (uint64_t)(o->world / o->replicas) * o->workers, n, c;
	int rc = sfs_plan_opts_check(o, b->err);

	if (rc)
		return rc;
	if (plan->total == 0)
		return sfs_errorf(
			b->err, -EINVAL,
			"the index of %s has no samples: nothing to serve",
			b->idx->source);
	if (o->start >= plan->total)
		return sfs_errorf(
			b->err, -EINVAL,
			"start=%llu leaves no samples: the epoch has %llu; use start=0..%llu",
			(unsigned long long)o->start,
			(unsigned long long)plan->total,
			(unsigned long long)plan->total - 1);
	n = plan->total - o->start;
	if (o->remainder == SFS_REMAINDER_PAD) {
		c = n / T + (n % T != 0);
		c = (c / o->batch + (c % o->batch != 0)) * o->batch;
	} else {
		c = n / T;
		c -= c % o->batch;
		if (c == 0) {
			char batch[48] = "";

			if (o->batch > 1)
				snprintf(batch, sizeof(batch),
					 " in batches of %llu",
					 (unsigned long long)o->batch);
			if (o->replicas > 1)
				snprintf(batch + strlen(batch),
					 sizeof(batch) - strlen(batch),
					 " (replicas=%u: %llu groups)",
					 o->replicas,
					 (unsigned long long)(o->world /
							      o->replicas));
			return sfs_errorf(
				b->err, -EINVAL,
				"remainder=drop leaves 0 samples per reader: %llu samples for world=%u × workers=%u%s; use remainder=pad or fewer readers",
				(unsigned long long)n, o->world, o->workers,
				batch);
		}
	}
	if (c > UINT64_MAX / T)
		return sfs_errorf(b->err, -EINVAL,
				  "batch=%llu is too large for %llu readers",
				  (unsigned long long)o->batch,
				  (unsigned long long)T);
	plan->remaining = n;
	plan->per_reader = c;
	if (c * T >= n)
		plan->padding = c * T - n;
	else
		plan->dropped = n - c * T;
	plan->nreaders = (size_t)T;
	return 0;
}

int sfs_plan_build(const struct sfs_index *idx, const struct sfs_plan_opts *o,
		   struct sfs_plan **out, struct sfs_error *err)
{
	struct builder b = { .idx = idx, .o = o, .err = err };
	uint64_t maxunit = 0, u;
	int rc;

	b.plan = calloc(1, sizeof(*b.plan));
	if (!b.plan)
		return sfs_errorf(err, -ENOMEM, "out of memory");
	b.plan->opts = *o;
	b.plan->total = idx->nsamples;
	rc = equalise(&b);
	if (rc)
		goto out_free;
	rc = -ENOMEM;
	if (make_units(&b))
		goto out_nomem;
	order_units(&b);
	/* only sliceable units are permuted: their counts are backed by a
	 * boundary table, an opaque shard's is just a number in the index */
	if (o->shuffle == SFS_SHUFFLE_SAMPLES)
		for (u = 0; u < b.plan->nunits; u++)
			if (unit_permuted(&b, u) && b.units[u].count > maxunit)
				maxunit = b.units[u].count;
	b.perm = malloc((maxunit + 1) * sizeof(*b.perm));
	b.plan->readers = calloc(b.plan->nreaders, sizeof(*b.plan->readers));
	if (!b.perm || !b.plan->readers)
		goto out_nomem;
	rc = partition(&b);
	if (rc == -ENOMEM)
		goto out_nomem;
	if (rc)
		goto out_free;
	*out = b.plan;
	b.plan = NULL;
	goto out_free;
out_nomem:
	sfs_errorf(err, rc, "out of memory building the plan");
out_free:
	free(b.units);
	free(b.order);
	free(b.cum);
	free(b.perm);
	sfs_plan_free(b.plan);
	return rc;
}

void sfs_plan_free(struct sfs_plan *plan)
{
	if (!plan)
		return;
	free(plan->readers);
	free(plan->files);
	free(plan->runs);
	free(plan);
}
