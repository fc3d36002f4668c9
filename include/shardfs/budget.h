/*
 * A budget: one bound on the bytes several holders keep for later (the
 * decoded pages the shards' states of one view build keep between their
 * slices), shared by all of them, so that the bound holds whatever the
 * number of holders or of the threads that fill them.
 *
 * A holder charges what it wants to keep before it keeps it
 * (sfs_budget_take), and gives it back when it lets go of it
 * (sfs_budget_give).  When there is no room it lets go of some of its
 * own, when that makes room, else asks the budget's owner to free
 * holders no thread is using (sfs_budget_reclaim, calling the owner's
 * reclaim, set at init); failing that it does without keeping.  used
 * never passes max; peak is the most used ever was (for tests and
 * reports).
 *
 * Every function may be called from any thread at once: the counts are
 * atomic and no lock of the budget's is held while reclaim runs, so
 * reclaim may free holders (which give back to the budget).  A holder
 * must not call sfs_budget_reclaim while holding a lock that reclaim, or
 * the freeing of another holder, takes.
 */
#ifndef SHARDFS_BUDGET_H
#define SHARDFS_BUDGET_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* Free what idle holders keep until need more bytes fit (or none is
 * left to free).  arg: the owner's, given at init. */
typedef void (*sfs_budget_reclaim_fn)(void *arg, uint64_t need);

struct sfs_budget {
	uint64_t max;
	sfs_budget_reclaim_fn reclaim; /* NULL: no owner to ask */
	void *arg;
	atomic_uint_fast64_t used;
	atomic_uint_fast64_t peak;
};

/* Start b empty with bound max; reclaim and arg as above (NULL: none). */
void sfs_budget_init(struct sfs_budget *b, uint64_t max,
		     sfs_budget_reclaim_fn reclaim, void *arg);

/* Charge n bytes to b: true when they fit (used + n <= max), else false
 * and b unchanged. */
bool sfs_budget_take(struct sfs_budget *b, uint64_t n);

/* Ask b's owner to free what idle holders keep until need more bytes fit
 * (b's reclaim; nothing when it has none).  False when it has none. */
bool sfs_budget_reclaim(struct sfs_budget *b, uint64_t need);

/* Give back n bytes charged before. */
void sfs_budget_give(struct sfs_budget *b, uint64_t n);

/* The bytes charged now, and the most ever charged at once. */
uint64_t sfs_budget_used(struct sfs_budget *b);
uint64_t sfs_budget_peak(struct sfs_budget *b);

#endif
