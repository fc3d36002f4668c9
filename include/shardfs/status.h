/*
 * A mount's status (MNT/.shardfs/status): what it serves and how it is
 * doing, as JSON, written by the daemon and read back by the auditor
 * through this one module, so that the two never disagree on its shape.
 *
 *   {"source": ..., "index": ..., "options": {plan inputs, "ranks",
 *    "epochs", "symlinks", "ahead", "prefetch"}, "index_summary": {...},
 *    "plan": {"per_reader", "padding", "dropped", "units", "remaining",
 *    "readers": [...]}, "counters": {...}}
 *
 * A followed source's (follow=1) has the same members, its windows in
 * "plan" (per_reader: per window), and two more before the counters:
 * "follow", the stream and its windows, and "readers", its readers' acks
 * and waits.
 *
 * docs/view.md lists every field; docs/follow.md the follow section.
 */
#ifndef SHARDFS_STATUS_H
#define SHARDFS_STATUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shardfs/error.h"
#include "shardfs/index.h"
#include "shardfs/options.h"
#include "shardfs/plan.h"

/* The daemon's counters since it mounted. */
struct sfs_status_counters {
	uint64_t opens, reads, bytes, errors, epoch_switches, views;
	uint64_t copied_reads; /* of the reads, those answered from a copy
				* in memory, not spliced from the source */
	uint64_t switches_ahead; /* of the switches, those to a view built
				  * ahead (ahead=1) */
	bool ahead_built; /* the view of epoch ahead_epoch is built, */
	uint64_t ahead_epoch; /* waiting for its switch */
	/* read ahead from the source: files read whole (or found cached),
	 * bytes read, bytes found in the source's page cache and not read,
	 * errors, and chunks left out (queue full, or their epoch no longer
	 * served) */
	uint64_t prefetch_files, prefetch_bytes, prefetch_cached_bytes,
		prefetch_errors, prefetch_dropped;
	/* slices laid out at a view's build kept in a file, past memory
	 * (slice.h, sfs_slice_cache_spill); opens that laid their slice
	 * out again (kept nowhere) */
	uint64_t slices_spilled, slices_laid_out;
};

/* What the daemon tells (all borrowed). */
struct sfs_status_in {
	const struct sfs_index *idx;
	const char *index_dir; /* index= as given, or NULL */
	const struct sfs_options *options; /* the ranks shown */
	const struct sfs_mount_opts *mount;
	const struct sfs_plan *plan; /* the current epoch's */
	struct sfs_status_counters counters;
};

/*
 * The status as JSON text, ending in a newline: a heap string (caller
 * frees), or NULL without memory.
 */
char *sfs_status_json(const struct sfs_status_in *in);

/*
 * The same text in two parts, for a daemon that asks often: everything
 * but the counters (in->counters is not read; it depends only on the
 * view, so it can be kept with it), and that head joined with counters
 * into what sfs_status_json gives.  Heap strings (caller frees), or NULL
 * without memory.
 */
char *sfs_status_json_head(const struct sfs_status_in *in);

/* A reader of a followed source, as its status shows it. */
struct sfs_status_follow_reader {
	uint32_t rank, worker;
	uint64_t window; /* the window its last read was in */
	uint64_t windows_read; /* acknowledged: windows before this one */
	bool waiting; /* a read of it waits for the stream */
};

/* A followed source now (all borrowed; names escaped as JSON holds them,
 * sfs_name_escape, or NULL). */
struct sfs_status_follow {
	const char *source, *index_dir, *format, *last_shard, *consumed, *log;
	uint64_t window, shards, samples, bytes, first_window, windows,
		per_window, padding, dropped;
	bool ended, complete;
	const struct sfs_status_follow_reader *readers;
	size_t nreaders;
};

/*
 * sfs_status_json_head of a followed source: the members of every
 * status (in->idx and in->plan are not read: the stream is f, its
 * windows' plan options in->options) and its "follow" section.  A heap
 * string to join with the counters (sfs_status_json_join), or NULL
 * without memory.
 */
char *sfs_status_follow_head(const struct sfs_status_in *in,
			     const struct sfs_status_follow *f);

/*
 * progress=DIR's rank-R.json of a followed source: {"rank", "consumed"
 * (escaped, or null), "windows_read", "ended"}, compact, no newline.  A
 * heap string, or NULL without memory.
 */
char *sfs_status_follow_progress(uint32_t rank, const char *consumed,
				 uint64_t windows_read, bool ended);

/*
 * The plan inputs o as the status's "options" object gives them, as
 * compact JSON text (a followed mount's status, which has no plan of its
 * own, embeds it).  A heap string (caller frees), or NULL without memory.
 */
char *sfs_status_options_json(const struct sfs_plan_opts *o);
char *sfs_status_json_join(const char *head,
			   const struct sfs_status_counters *c);

/* What a reader of a status learns: what the auditor needs. */
struct sfs_status {
	char *source; /* heap */
	char *index_dir; /* heap, NULL when the mount names none */
	struct sfs_plan_opts plan; /* the plan inputs served */
	uint32_t epochs;
};

/*
 * Parse the status text written by sfs_status_json (len bytes; where names
 * it in messages).  Returns 0 and fills *out (sfs_status_clear frees it),
 * or -EINVAL with a message naming where and what is wrong ("not a
 * shardfs status", an option out of range), -ENOMEM.
 */
int sfs_status_read(const char *text, size_t len, const char *where,
		    struct sfs_status *out, struct sfs_error *err);

/* Free what a status read holds; the struct itself is the caller's. */
void sfs_status_clear(struct sfs_status *st);

#endif
