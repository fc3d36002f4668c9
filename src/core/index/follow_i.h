/*
 * What the stream of a followed source (follow.c) and its log
 * (follow_log.c) share; not part of the public interface.
 */
#ifndef SHARDFS_INDEX_FOLLOW_I_H
#define SHARDFS_INDEX_FOLLOW_I_H

#include <stdbool.h>

#include "shardfs/error.h"
#include "shardfs/follow.h"

/* A line for the daemon's log (f->note), formatted. */
void sfs_follow_notef(struct sfs_follow *f, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* A name the stream may hold: directly in the source, no '\n' (a log line
 * each), not hidden, not temporary, not the end marker. */
bool sfs_follow_name_ok(const char *name);

/*
 * The log of f (f->source's, in index_dir; NULL: SRC/.shardfs): read its
 * shards back into f when there is one, and with write_log open it for
 * appending.  A log that cannot be read or kept is noted, and the stream
 * followed without it.  Returns 0, or a negative errno with a message: a
 * damaged log (its path and line), -ENOMEM.
 */
int sfs_follow_log_start(struct sfs_follow *f, const char *index_dir,
			 bool write_log, struct sfs_error *err);

/* Append sh's line to the log: with its lock, after the last whole line;
 * a line cut short (a full disk) is taken back out.  A log that cannot be
 * appended to is noted and closed (the stream goes on without it).
 * Returns 0. */
int sfs_follow_log_append(struct sfs_follow *f, const struct sfs_shard *sh);

#endif
