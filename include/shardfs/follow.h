/*
 * A source that grows (follow=1, docs/follow.md): the stream of its shards
 * in name order, as a producer publishes them, and its windows.
 *
 * The stream (sfs_follow) is what the daemon has accepted: shards directly
 * in the source, of one format whose files concatenate (jsonl, tfrecord,
 * tar), each scanned once it has its final name, in name order: an index
 * (index.h) that grows, its shards appended as they are accepted, whose
 * boundaries are held beside it while windows still need them.  It is
 * kept in a log (follow.log in the index directory) so that a restart
 * finds the shards already consumed and maybe deleted where they were.
 *
 * Its windows, planned with the plan's options, are the view's
 * (window.h).  Nothing here knows FUSE.
 */
#ifndef SHARDFS_FOLLOW_H
#define SHARDFS_FOLLOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "shardfs/error.h"
#include "shardfs/format.h"
#include "shardfs/index.h"

#define SFS_FOLLOW_LOG "follow.log"
#define SFS_FOLLOW_END ".shardfs-end"
/* bytes of a log line at most (a name is at most NAME_MAX) */
#define SFS_FOLLOW_LINE_MAX 400
/* samples a chunk may hold at most: its boundaries (8 bytes a sample)
 * are kept until its windows are laid out; a larger one waits, logged */
#define SFS_FOLLOW_CHUNK_SAMPLES_MAX (UINT64_C(1) << 24)

/*
 * The boundaries of a shard of the stream this process holds: those of
 * samples from .. nsamples (bounds[j] is sample from + j's) once scanned;
 * bounds NULL for a shard known from the log only, or whose windows are
 * all laid out (sfs_follow_release; sfs_follow_bounds scans it again).
 */
struct sfs_follow_held {
	uint64_t *bounds;
	uint64_t from;
};

#define SFS_FOLLOW_REFUSED_MAX 4096

struct sfs_follow_refusal {
	char *name;
	uint64_t size;
	int64_t mtime_ns;
};

/* Called with a line for the daemon's log (a refusal, a problem). */
typedef void (*sfs_follow_note_fn)(void *arg, const char *msg);

struct sfs_follow {
	char *source; /* absolute */
	int srcfd;
	const struct sfs_format_ops *format; /* NULL until known */
	/* the stream: an index whose shards are appended as they are
	 * accepted, in name order (first_sample their place in the stream,
	 * format the stream's once known, bounds_at SFS_NO_BOUNDS: their
	 * boundaries are held, not in a table); nsamples the stream's */
	struct sfs_index *idx;
	size_t shards_cap;
	struct sfs_follow_held *held; /* per shard of idx, held_cap */
	size_t held_cap;
	bool ended; /* SRC/.shardfs-end seen */
	char *log_path; /* the log; NULL when it cannot be kept */
	int log_fd; /* open for appending, or -1 */
	/* the names refused (out of order, malformed, another format),
	 * sorted, with their size and mtime: each noted once, and again
	 * when they change; at most SFS_FOLLOW_REFUSED_MAX remembered */
	struct sfs_follow_refusal *refused;
	size_t nrefused, refused_cap;
	sfs_follow_note_fn note;
	void *note_arg;
	size_t released; /* shards before it hold no boundaries */
	/* the samples a chunk may hold: SFS_FOLLOW_CHUNK_SAMPLES_MAX */
	uint64_t chunk_samples_max;
};

/*
 * Follow source: open it, and read the log in index_dir (NULL:
 * SRC/.shardfs) back when there is one; with write_log, append the
 * shards accepted to it (else the log is only read: shardfs-plan).  format (NULL: the first shard's)
 * must be one whose files concatenate.  A log that cannot be created is
 * noted (note) and the stream followed without it.  Returns 0 and the
 * stream in *out, or a negative errno: the source cannot be opened, the
 * log is damaged (its path and line), a format that cannot be followed.
 */
int sfs_follow_open(const char *source, const char *index_dir, bool write_log,
		    const struct sfs_format_ops *format,
		    sfs_follow_note_fn note, void *note_arg,
		    struct sfs_follow **out, struct sfs_error *err);

void sfs_follow_free(struct sfs_follow *f);

/*
 * List the source and accept, in name order, every new shard whose name
 * sorts after the last one accepted: scanned with its driver, appended to
 * the log.  Names starting with '.' or ending in ".tmp" are skipped; a
 * name that sorts before the last accepted, a shard of another format or
 * a malformed one is noted once (and tried again when it changes).  Sets
 * ended when SRC/.shardfs-end exists.  *added (may be NULL) counts the
 * shards accepted.  Returns 0, or -errno when the source cannot be
 * listed (the message names it).
 */
int sfs_follow_scan(struct sfs_follow *f, size_t *added, struct sfs_error *err);

/*
 * The boundaries of samples from .. nsamples of shard i (held[i].from <=
 * from after), scanning it when they are not held (a shard from the log,
 * or released): it must be as logged (size, mtime, samples).  Returns 0,
 * or a negative errno with a message naming the shard.
 */
int sfs_follow_bounds(struct sfs_follow *f, size_t i, uint64_t from,
		      struct sfs_error *err);

/*
 * The boundaries of the stream's samples before sample are not needed
 * any more (every window before it is laid out): free those of the shards
 * before it, and cut those of the shard it lies in when that frees at
 * least half of them.  A window laid out (sfs_window_build) releases the
 * samples before its first, so that memory follows what is still to be
 * laid out, not the whole stream.  Asking for them again scans the shard
 * again (sfs_follow_bounds).
 */
void sfs_follow_release(struct sfs_follow *f, uint64_t sample);

/*
 * Parse a log (len bytes of text, named name in messages) into *out
 * (*n shards, sorted by name, repeats of a line merged: path, nsamples,
 * size and mtime_ns set, the rest 0; caller frees with
 * sfs_follow_shards_free).  A last line without its '\n' (a torn
 * append) is left out.  Returns 0, or -EINVAL naming the line: a bad
 * number, a bad name, one name with two different lines.
 */
int sfs_follow_log_parse(const char *buf, size_t len, const char *name,
			 struct sfs_shard **out, size_t *n,
			 struct sfs_error *err);

/* Free n shards of a parsed log (their paths) and the array. */
void sfs_follow_shards_free(struct sfs_shard *s, size_t n);

#endif
