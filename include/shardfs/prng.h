/*
 * The PRNG every rank uses to shuffle an epoch.
 *
 * It is SplitMix64 (Steele, Lea, Flood 2014) with streams keyed by
 * (seed, epoch, tag), and Fisher-Yates with rejection sampling on top.
 * docs/plan.md specifies every step, so that the same order can be computed
 * in any language; tests/unit/test_plan.c checks the documented test vector.
 * Everything here is pure integer arithmetic: the same inputs give the same
 * numbers on every machine.
 */
#ifndef SHARDFS_PRNG_H
#define SHARDFS_PRNG_H

#include <stddef.h>
#include <stdint.h>

struct sfs_prng {
	uint64_t state;
};

/* The SplitMix64 finaliser: a bijection on 64-bit integers. */
uint64_t sfs_prng_mix(uint64_t z);

/*
 * Key a stream: state = mix(mix(mix(seed) ^ epoch) ^ tag).  Tag 0 orders
 * the units of an epoch; tag u + 1 orders the samples inside unit u.
 */
void sfs_prng_init(struct sfs_prng *p, uint64_t seed, uint64_t epoch,
		   uint64_t tag);

/* Next 64-bit output: state += 0x9E3779B97F4A7C15; return mix(state). */
uint64_t sfs_prng_next(struct sfs_prng *p);

/*
 * Uniform integer in [0, bound), bound >= 1, by rejection: draw r until
 * r >= (2^64 - bound) mod bound, then return r mod bound.
 */
uint64_t sfs_prng_below(struct sfs_prng *p, uint64_t bound);

/*
 * Fisher-Yates: for i = n-1 down to 1, j = below(i + 1), swap a[i], a[j].
 * Permutes a[0..n) in place.
 */
void sfs_prng_shuffle(struct sfs_prng *p, uint64_t *a, size_t n);

/* sfs_prng_shuffle of 32-bit entries: the same draws, half the memory. */
void sfs_prng_shuffle32(struct sfs_prng *p, uint32_t *a, size_t n);

#endif
