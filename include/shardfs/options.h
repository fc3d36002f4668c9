/*
 * The options every shardfs program shares: the plan's (world, workers,
 * epoch, seed, shuffle, block, remainder, batch, start, partition) and the
 * ranks a
 * view shows.  Parsed from "key=value" strings, validated one by one and
 * together, each bad value refused with a message that names the option,
 * the value and what is allowed.  The daemon, the auditor and the tools
 * all parse through here, so a value means the same everywhere.
 */
#ifndef SHARDFS_OPTIONS_H
#define SHARDFS_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shardfs/error.h"

#define SFS_WORLD_MAX 65536
#define SFS_WORKERS_MAX 1024
#define SFS_BATCH_MAX (1ULL << 32)

enum sfs_shuffle {
	SFS_SHUFFLE_NONE, /* canonical order: shards sorted by path */
	SFS_SHUFFLE_UNITS, /* permute units (the default) */
	SFS_SHUFFLE_SAMPLES, /* permute units and samples inside each */
};

enum sfs_remainder {
	SFS_REMAINDER_PAD, /* repeat samples so every reader has ceil */
	SFS_REMAINDER_DROP, /* leave out the tail so every reader has floor */
};

enum sfs_partition {
	SFS_PARTITION_CONTIGUOUS, /* reader t: positions [t*c, (t+1)*c) */
	SFS_PARTITION_INTERLEAVED, /* batches dealt in loader-step order */
};

/* The inputs of the plan besides the index. */
struct sfs_plan_opts {
	uint32_t world; /* ranks, W */
	uint32_t workers; /* loader workers per rank, K */
	uint64_t epoch;
	uint64_t seed;
	enum sfs_shuffle shuffle;
	uint64_t block; /* samples per unit, 0: whole shards */
	enum sfs_remainder remainder;
	uint64_t batch; /* per-reader count is a multiple of this */
	uint64_t start; /* samples of the epoch already consumed */
	enum sfs_partition partition;
};

struct sfs_options {
	struct sfs_plan_opts plan;
	/* rank=: the ranks to show, sorted, no duplicates; nranks == 0
	 * means every rank. */
	uint32_t *ranks;
	size_t nranks;
};

/* The defaults: world=1, workers=1, epoch=0, seed=0, shuffle=units,
 * block=0, remainder=pad, batch=1, start=0, partition=contiguous, every
 * rank. */
void sfs_options_init(struct sfs_options *o);

/* Free what o holds and reset it to the defaults. */
void sfs_options_clear(struct sfs_options *o);

/*
 * Set one option.  Returns 0; -EINVAL for a bad value (o unchanged,
 * message like "workers=0 is out of range: use 1..1024"); -ENOENT when key
 * is not a shardfs option (message names it), so that a caller with more
 * options of its own can take it.
 */
int sfs_options_set(struct sfs_options *o, const char *key, const char *value,
		    struct sfs_error *err);

/*
 * Set every option of a comma-separated "key=value,..." list.  A rank list
 * may itself hold commas ("rank=0,2,4-7,world=8").  Stops at the first
 * error, which is as sfs_options_set's; o may then be partly updated.
 */
int sfs_options_parse(struct sfs_options *o, const char *list,
		      struct sfs_error *err);

/*
 * Like sfs_options_parse, but options that are not shardfs's (unknown
 * keys, flags without '=') are appended to *rest (a heap string, comma-
 * separated, NULL when none; caller frees) instead of refused, for a caller
 * with options of its own.  Bad values of known options are still errors.
 */
int sfs_options_parse_known(struct sfs_options *o, const char *list,
			    char **rest, struct sfs_error *err);

/*
 * The checks that involve several options: every rank below world.
 * Returns 0 or -EINVAL ("rank=8 is out of range for world=8").
 */
int sfs_options_check(const struct sfs_options *o, struct sfs_error *err);

/* Parse an unsigned decimal number in [min, max] for option key; the
 * message says which of the two was wrong.  Shared with the tools. */
int sfs_options_number(const char *key, const char *value, uint64_t min,
		       uint64_t max, uint64_t *out, struct sfs_error *err);

/*
 * The epoch a write to .shardfs/epoch asks for: one decimal number, with
 * blanks around it and a final newline allowed (`echo 3 > epoch`).
 * Returns 0, or -EINVAL with a message for anything else (empty, signs,
 * NUL bytes, two numbers, more than 2^64 - 1).
 */
int sfs_options_parse_epoch(const char *buf, size_t len, uint64_t *epoch,
			    struct sfs_error *err);

/* Names of the enum values, for output. */
const char *sfs_shuffle_name(enum sfs_shuffle s);
const char *sfs_remainder_name(enum sfs_remainder r);
const char *sfs_partition_name(enum sfs_partition p);

#endif
