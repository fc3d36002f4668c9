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
 * Beside what is kept, a holder may count bytes it uses for a while and
 * cannot do without (a Parquet column being cut: parquet.h) with
 * sfs_budget_hold, whether they fit or not: they leave that much less
 * room for what is taken until they are given back (sfs_budget_unhold),
 * so that what is kept and what is in use stay within max together but
 * for what was held past it.
 *
 * A budget may have a parent (sfs_budget_init_within): what is charged to
 * it is charged to its parent too, and fits only when it fits in both
 * (and in the parent's parent ...), so that several budgets (each view
 * build's) share one bound (the daemon's) beside their own.  reclaim is
 * the child's: it frees the child's holders only.
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
	struct sfs_budget *parent; /* NULL: none */
	atomic_uint_fast64_t used;
	atomic_uint_fast64_t peak;
	atomic_uint_fast64_t held; /* sfs_budget_hold's */
};

/* Start b empty with bound max; reclaim and arg as above (NULL: none). */
void sfs_budget_init(struct sfs_budget *b, uint64_t max,
		     sfs_budget_reclaim_fn reclaim, void *arg);

/* sfs_budget_init, with parent (borrowed: it must outlive b; NULL: none)
 * charged with everything charged to b. */
void sfs_budget_init_within(struct sfs_budget *b, uint64_t max,
			    sfs_budget_reclaim_fn reclaim, void *arg,
			    struct sfs_budget *parent);

/* Charge n bytes to b and its parents: true when they fit in each (held
 * + used + n <= max), else false and none changed. */
bool sfs_budget_take(struct sfs_budget *b, uint64_t n);

/* Charge n bytes to b and its parents that were charged before and held
 * since (sfs_budget_hold, given back with sfs_budget_unhold first): they
 * fit when used + n <= max in each, what others hold not counted (it
 * was counted beside them, so they find their room), else false and none
 * changed. */
bool sfs_budget_take_back(struct sfs_budget *b, uint64_t n);

/* Ask b's owner to free what idle holders keep until need more bytes fit
 * (b's reclaim; nothing when it has none; need 0: until nothing is past
 * its max).  False when it has none. */
bool sfs_budget_reclaim(struct sfs_budget *b, uint64_t need);

/* Give back n bytes charged before (to b and its parents). */
void sfs_budget_give(struct sfs_budget *b, uint64_t n);

/* The bytes that fit in b now: the least of max - held - used of b and
 * its parents (0 when one is past its max). */
uint64_t sfs_budget_room(struct sfs_budget *b);

/* The bytes to free before n more fit in b and its parents (0: they fit
 * now). */
uint64_t sfs_budget_short(struct sfs_budget *b, uint64_t n);

/* Count n bytes in use as held in b and its parents, past max if need
 * be; give them back with sfs_budget_unhold. */
void sfs_budget_hold(struct sfs_budget *b, uint64_t n);
void sfs_budget_unhold(struct sfs_budget *b, uint64_t n);

/* The most b could ever hold: the least max of b and its parents. */
uint64_t sfs_budget_max(const struct sfs_budget *b);

/* The bytes charged now, and the most ever charged at once (held bytes
 * not counted); the bytes held now. */
uint64_t sfs_budget_used(struct sfs_budget *b);
uint64_t sfs_budget_peak(struct sfs_budget *b);
uint64_t sfs_budget_held(struct sfs_budget *b);

#endif
