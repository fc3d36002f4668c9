/*
 * What the mixture type (mixture.c) and its loader (mixture_load.c) share:
 * the names of the enum values, as a mixture file and the JSON form spell
 * them, and the rule for a source's name.
 */
#ifndef SHARDFS_MIXTURE_I_H
#define SHARDFS_MIXTURE_I_H

#include <stdbool.h>

/* NULL-terminated, indexed by enum sfs_mix_weight, _sampling, _batching */
extern const char *const sfs_mix_weight_names[];
extern const char *const sfs_mix_sampling_names[];
extern const char *const sfs_mix_batching_names[];

/* The position of s in names (NULL-terminated), or -1 (also for NULL). */
int sfs_mix_name_index(const char *const *names, const char *s);

/* True when s is a usable source name: 1 to 64 of [A-Za-z0-9._-], not
 * "." nor "..". */
bool sfs_mix_name_ok(const char *s);

#endif
