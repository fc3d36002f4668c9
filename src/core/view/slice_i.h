/* What slice_cache.c takes from slice.c. */
#ifndef SHARDFS_SLICE_I_H
#define SHARDFS_SLICE_I_H

#include "shardfs/slice.h"

/* sfs_slice_build with state, the driver's read_shard state of sh (NULL:
 * none, the driver reads what it needs). */
int slice_build_state(const struct sfs_index *idx, const struct sfs_shard *sh,
		      int fd, const void *state, const struct sfs_run *runs,
		      size_t nruns, struct sfs_slice **out,
		      struct sfs_error *err);

#endif
