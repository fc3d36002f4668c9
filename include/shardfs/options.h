/*
 * The options every shardfs program shares: the plan's (world, workers,
 * epoch, seed, shuffle, block, remainder, batch, start, partition), the
 * ranks a view shows, and the daemon's own (epochs, index, symlinks, ...).
 * Each lives once, in a table (sfs_plan_options, sfs_mount_options) that
 * drives parsing, validation, --help, the docs' option lists
 * (sfs_opt_markdown) and the options' JSON, so a value means the same
 * everywhere.  Parsed from "key=value" strings, validated one by one and
 * together, each bad value refused with a message that names the option,
 * the value and what is allowed.
 */
#ifndef SHARDFS_OPTIONS_H
#define SHARDFS_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

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
	uint32_t replicas; /* ranks per group reading one share, R | W */
	uint64_t epoch;
	uint64_t seed;
	enum sfs_shuffle shuffle;
	uint64_t block; /* samples per unit, 0: whole shards */
	enum sfs_remainder remainder;
	uint64_t batch; /* per-reader count is a multiple of this */
	uint64_t start; /* samples of the epoch already consumed */
	uint64_t epoch_size; /* samples per epoch, 0: the source's */
	enum sfs_partition partition;
};

struct sfs_options {
	struct sfs_plan_opts plan;
	/* rank=: the ranks to show, sorted, no duplicates; nranks == 0
	 * means every rank. */
	uint32_t *ranks;
	size_t nranks;
};

#define SFS_EPOCHS_MAX 1000

/* The daemon's own options (shardfs -o ...), besides struct sfs_options. */
struct sfs_mount_opts {
	uint32_t epochs; /* consecutive epochs per worker directory */
	char *index_dir; /* index=, heap; NULL: SRC/.shardfs */
	bool symlinks; /* whole shards as symlinks to the source */
	bool ahead; /* build the next epoch's view ahead of its switch */
	bool prefetch; /* read ahead the next file a reader opens */
	bool splice; /* answer reads by splicing from the source */
	bool no_open; /* opens of files never reach the daemon */
	uint32_t readahead_kb; /* the mount's kernel read-ahead, 0: leave */
	uint32_t max_read; /* FUSE's max_read, 0: not given (the daemon's) */
	uint32_t prefetch_files; /* files read ahead of a reader */
	uint32_t prefetch_mb; /* MiB read ahead of a reader */
	uint32_t prefetch_threads; /* threads reading ahead */
	bool follow; /* SRC grows: windows (follow.h) */
	uint64_t window; /* follow: samples per window, 0: not given */
	int format; /* follow: sfs_follow_formats[format], 0: auto */
	uint32_t follow_interval; /* follow: seconds between listings */
	uint32_t follow_timeout; /* follow: seconds a read may wait */
	char *progress_dir; /* follow: progress=, heap; NULL: none */
};

/* format=: "auto", then the formats a followed source may hold. */
extern const char *const sfs_follow_formats[];

/*
 * One option of a table: how a value is parsed and checked, where it goes
 * (offset into the struct the table fills), and how --help and the docs
 * show it.  Tables end with a NULL key.
 */
enum sfs_opt_type {
	SFS_OPT_U32, /* a uint32_t in min..max */
	SFS_OPT_U64, /* a uint64_t in min..max */
	SFS_OPT_ENUM, /* an int: the index of the value in names */
	SFS_OPT_FLAG, /* a bool: 1 or 0 */
	SFS_OPT_RANKS, /* struct sfs_options' rank list */
	SFS_OPT_PATH, /* a heap string (char *), not empty */
};

struct sfs_opt {
	const char *key;
	enum sfs_opt_type type;
	size_t offset;
	uint64_t min, max; /* numbers */
	const char *const *names; /* enums, NULL-terminated */
	const char *arg; /* the value's placeholder in --help ("W") */
	const char *def; /* the default, as shown */
	const char *help; /* what it means; lines separated by \n */
	bool plan_input; /* an input of the plan: in plan.json and reports */
};

/* The plan options and rank= (fill struct sfs_options). */
extern const struct sfs_opt sfs_plan_options[];

/* The daemon's own options (fill struct sfs_mount_opts). */
extern const struct sfs_opt sfs_mount_options[];

/* The defaults: world=1, workers=1, replicas=1, epoch=0, seed=0,
 * shuffle=units, block=0, remainder=pad, batch=1, start=0,
 * partition=contiguous, every rank. */
void sfs_options_init(struct sfs_options *o);

/* Free what o holds and reset it to the defaults. */
void sfs_options_clear(struct sfs_options *o);

/*
 * Set one option.  Returns 0; -EINVAL for a bad value (o unchanged,
 * message like "workers=0 is out of range: use 1..1024"); -ENOENT when key
 * is not a plan option (the message names it, and the plan option it is
 * likely a typo of: 'unknown option "wrld" (did you mean "world"?)'), so
 * that a caller with more options of its own can take it.
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
 * The checks that involve several options: every rank below world,
 * replicas dividing world.  Returns 0 or -EINVAL ("rank=8 is out of range
 * for world=8").
 */
int sfs_options_check(const struct sfs_options *o, struct sfs_error *err);

/*
 * The checks of the plan options together: replicas divides world.
 * Returns 0 or -EINVAL ("replicas=3 does not divide world=8: ...").
 */
int sfs_plan_opts_check(const struct sfs_plan_opts *o, struct sfs_error *err);

/*
 * How the plan inputs of a and b differ, as "seed=0 vs seed=1, epoch=2 vs
 * epoch=3" into out (len bytes; out may be NULL when len is 0).  Returns
 * the number of options that differ.
 */
size_t sfs_plan_opts_diff(const struct sfs_plan_opts *a,
			  const struct sfs_plan_opts *b, char *out, size_t len);

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

/* The daemon's defaults: epochs=1, index in the source, symlinks=1,
 * prefetch=1, splice=1, no_open=1, readahead=1024, prefetch_files=16,
 * prefetch_mb=256, prefetch_threads=8. */
void sfs_mount_opts_init(struct sfs_mount_opts *m);

/* Free what m holds and reset it to the defaults. */
void sfs_mount_opts_clear(struct sfs_mount_opts *m);

/* Set one of the daemon's options; errors as sfs_options_set's. */
int sfs_mount_opts_set(struct sfs_mount_opts *m, const char *key,
		       const char *value, struct sfs_error *err);

/*
 * The key of the tables (a NULL-terminated array of tables) that key is
 * most likely a typo of (at most two edits away, and fewer than half its
 * letters), or NULL.
 */
const char *sfs_opt_suggest(const struct sfs_opt *const *tables,
			    const char *key);

/* Print table as --help lines: "key=ARG [default]  help", indented. */
void sfs_opt_help(const struct sfs_opt *table, FILE *f, int indent);

/* Print table as the rows of a Markdown table (option, default, meaning),
 * as docs/plan.md and docs/view.md show them. */
void sfs_opt_markdown(const struct sfs_opt *table, FILE *f);

/* Names of the enum values, for output. */
const char *sfs_shuffle_name(enum sfs_shuffle s);
const char *sfs_remainder_name(enum sfs_remainder r);
const char *sfs_partition_name(enum sfs_partition p);

#endif
