/* One bound on what several holders keep: see include/shardfs/budget.h. */
#include <stddef.h>

#include "shardfs/budget.h"

void sfs_budget_init_within(struct sfs_budget *b, uint64_t max,
			    sfs_budget_reclaim_fn reclaim, void *arg,
			    struct sfs_budget *parent)
{
	b->max = max;
	b->reclaim = reclaim;
	b->arg = arg;
	b->parent = parent;
	atomic_init(&b->used, 0);
	atomic_init(&b->peak, 0);
	atomic_init(&b->held, 0);
}

void sfs_budget_init(struct sfs_budget *b, uint64_t max,
		     sfs_budget_reclaim_fn reclaim, void *arg)
{
	sfs_budget_init_within(b, max, reclaim, arg, NULL);
}

/* Charge n bytes to b alone: true when they fit, beside what is held
 * unless back. */
static bool take_one(struct sfs_budget *b, uint64_t n, bool back)
{
	uint_fast64_t used = atomic_load(&b->used), peak;
	uint64_t held = back ? 0 : atomic_load(&b->held);

	do
		if (n > b->max || held > b->max - n || used > b->max - n - held)
			return false;
	while (!atomic_compare_exchange_weak(&b->used, &used, used + n));
	used += n;
	peak = atomic_load(&b->peak);
	while (peak < used &&
	       !atomic_compare_exchange_weak(&b->peak, &peak, used))
		;
	return true;
}

/* sfs_budget_take, or sfs_budget_take_back when back. */
static bool take(struct sfs_budget *b, uint64_t n, bool back)
{
	if (!take_one(b, n, back))
		return false;
	if (b->parent && !take(b->parent, n, back)) {
		atomic_fetch_sub(&b->used, n);
		return false;
	}
	return true;
}

bool sfs_budget_take(struct sfs_budget *b, uint64_t n)
{
	return take(b, n, false);
}

bool sfs_budget_take_back(struct sfs_budget *b, uint64_t n)
{
	return take(b, n, true);
}

bool sfs_budget_reclaim(struct sfs_budget *b, uint64_t need)
{
	if (!b->reclaim)
		return false;
	b->reclaim(b->arg, need <= b->max ? need : b->max);
	return true;
}

void sfs_budget_give(struct sfs_budget *b, uint64_t n)
{
	for (; b; b = b->parent)
		atomic_fetch_sub(&b->used, n);
}

uint64_t sfs_budget_room(struct sfs_budget *b)
{
	uint64_t room = UINT64_MAX, in;

	for (; b; b = b->parent) {
		in = atomic_load(&b->used) + atomic_load(&b->held);
		if (in >= b->max)
			return 0;
		if (b->max - in < room)
			room = b->max - in;
	}
	return room;
}

uint64_t sfs_budget_short(struct sfs_budget *b, uint64_t n)
{
	uint64_t most = 0, in;

	for (; b; b = b->parent) {
		in = atomic_load(&b->used) + atomic_load(&b->held) + n;
		if (in > b->max && in - b->max > most)
			most = in - b->max;
	}
	return most;
}

void sfs_budget_hold(struct sfs_budget *b, uint64_t n)
{
	for (; b; b = b->parent)
		atomic_fetch_add(&b->held, n);
}

void sfs_budget_unhold(struct sfs_budget *b, uint64_t n)
{
	for (; b; b = b->parent)
		atomic_fetch_sub(&b->held, n);
}

uint64_t sfs_budget_max(const struct sfs_budget *b)
{
	uint64_t max = UINT64_MAX;

	for (; b; b = b->parent)
		if (b->max < max)
			max = b->max;
	return max;
}

uint64_t sfs_budget_used(struct sfs_budget *b)
{
	return atomic_load(&b->used);
}

uint64_t sfs_budget_peak(struct sfs_budget *b)
{
	return atomic_load(&b->peak);
}

uint64_t sfs_budget_held(struct sfs_budget *b)
{
	return atomic_load(&b->held);
}
