/* One bound on what several holders keep: see include/shardfs/budget.h. */
#include "shardfs/budget.h"

void sfs_budget_init(struct sfs_budget *b, uint64_t max,
		     sfs_budget_reclaim_fn reclaim, void *arg)
{
	b->max = max;
	b->reclaim = reclaim;
	b->arg = arg;
	atomic_init(&b->used, 0);
	atomic_init(&b->peak, 0);
}

bool sfs_budget_take(struct sfs_budget *b, uint64_t n)
{
	uint_fast64_t used = atomic_load(&b->used), peak;

	do
		if (n > b->max || used > b->max - n)
			return false;
	while (!atomic_compare_exchange_weak(&b->used, &used, used + n));
	used += n;
	peak = atomic_load(&b->peak);
	while (peak < used &&
	       !atomic_compare_exchange_weak(&b->peak, &peak, used))
		;
	return true;
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
	atomic_fetch_sub(&b->used, n);
}

uint64_t sfs_budget_used(struct sfs_budget *b)
{
	return atomic_load(&b->used);
}

uint64_t sfs_budget_peak(struct sfs_budget *b)
{
	return atomic_load(&b->peak);
}
