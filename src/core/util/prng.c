#include "shardfs/prng.h"

#define GOLDEN_GAMMA 0x9E3779B97F4A7C15ULL

uint64_t sfs_prng_mix(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

void sfs_prng_init(struct sfs_prng *p, uint64_t seed, uint64_t epoch,
		   uint64_t tag)
{
	p->state = sfs_prng_mix(sfs_prng_mix(sfs_prng_mix(seed) ^ epoch) ^ tag);
}

uint64_t sfs_prng_next(struct sfs_prng *p)
{
	p->state += GOLDEN_GAMMA;
	return sfs_prng_mix(p->state);
}

uint64_t sfs_prng_below(struct sfs_prng *p, uint64_t bound)
{
	uint64_t r = sfs_prng_next(p), threshold;

	/* the threshold is below bound: a draw at or above bound passes
	 * without the division that computes it (almost every draw, for the
	 * bounds a plan uses) */
	if (r >= bound)
		return r % bound;
	/* (2^64 - bound) mod bound, computed without 128-bit arithmetic. */
	threshold = (0 - bound) % bound;
	while (r < threshold)
		r = sfs_prng_next(p);
	return r % bound;
}

void sfs_prng_shuffle(struct sfs_prng *p, uint64_t *a, size_t n)
{
	size_t i;

	for (i = n; i > 1; i--) {
		uint64_t j = sfs_prng_below(p, i);
		uint64_t t = a[i - 1];

		a[i - 1] = a[j];
		a[j] = t;
	}
}

void sfs_prng_shuffle32(struct sfs_prng *p, uint32_t *a, size_t n)
{
	size_t i;

	for (i = n; i > 1; i--) {
		uint64_t j = sfs_prng_below(p, i);
		uint32_t t = a[i - 1];

		a[i - 1] = a[j];
		a[j] = t;
	}
}
