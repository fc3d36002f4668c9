/*
 * The windows of a source that grows (follow=1, docs/follow.md), the
 * view's part of it (src/core/view/window.c).
 *
 * A window (sfs_window) is samples [kN, (k+1)N) of the stream (follow.h)
 * planned like an epoch of its own (epoch k) over the stream's index cut
 * to those samples, laid out for some readers as a slice of the shards:
 * what a reader's window file and its part of stream.<ext> hold.
 * Nothing here knows FUSE.
 */
#ifndef SHARDFS_WINDOW_H
#define SHARDFS_WINDOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shardfs/error.h"
#include "shardfs/follow.h"
#include "shardfs/options.h"
#include "shardfs/slice.h"

/*
 * The window option checked against the plan options: window must be a
 * positive multiple of world / replicas * workers * batch.  Returns 0 or
 * -EINVAL with the nearest valid values.
 */
int sfs_follow_check_window(uint64_t window, const struct sfs_plan_opts *o,
			    struct sfs_error *err);

/*
 * Windows of a stream of total samples, window samples each, starting at
 * sample start: *full complete ones (from window start / window on, the
 * first one maybe partly skipped), and with ended a last, partial one
 * (*last true) after them.
 */
void sfs_follow_windows(uint64_t total, uint64_t window, uint64_t start,
			bool ended, uint64_t *first, uint64_t *full,
			bool *last);

struct sfs_window_reader {
	/* its bytes, without the trailer: a slice of the stream's shards
	 * (an extent's file is its shard's number in the stream), its
	 * synthesized bytes static */
	struct sfs_slice bytes;
	/* its samples, in order, as the stream numbers them: each run in
	 * one shard (sfs_window_run_shard) */
	struct sfs_run *runs;
	size_t nruns;
	uint64_t samples;
	uint64_t padding; /* of the samples, those repeated as padding */
};

struct sfs_window {
	uint64_t k;
	uint64_t per_reader, padding, dropped;
	size_t first_shard, end_shard; /* the shards it reads: [first, end) */
	uint64_t last_sample; /* one past its last sample in the stream */
	size_t nreaders;
	struct sfs_window_reader *readers; /* as asked, in order */
	/* the bytes that end a window file (a tar's end-of-archive), and the
	 * stream after its last window; static */
	const void *trailer;
	uint64_t trailer_len;
};

/*
 * Lay out window k of f (window samples each; with last, the partial one
 * at the end) for readers[0 .. nreaders) (plan reader numbers), planned
 * with o (epoch k; start: what of the stream's first start samples lie in
 * it).  Scans the shards whose boundaries are not known.  Returns 0 and
 * the window in *out; -ENODATA when remainder=drop leaves nothing of a
 * last window; a shard's errors; -ENOMEM.
 */
int sfs_window_build(struct sfs_follow *f, const struct sfs_plan_opts *o,
		     uint64_t window, uint64_t k, bool last,
		     const size_t *readers, size_t nreaders,
		     struct sfs_window **out, struct sfs_error *err);

void sfs_window_free(struct sfs_window *w);

/* The shard of the stream run r of a reader of win lies in, of shards
 * (the stream's: its index's, follow.h, or copies of them). */
size_t sfs_window_run_shard(const struct sfs_window *win,
			    const struct sfs_shard *shards,
			    const struct sfs_run *r);

/*
 * Extended attribute name (SFS_XATTR_*, view.h) of reader's file of
 * window win (reader: an index into win->readers), whose shards are
 * shards[win->first_shard .. win->end_shard) of the stream (its index's,
 * follow.h, or copies of them) read from source: user.shardfs.source,
 * the shards the file reads, their absolute paths one a line in the
 * stream's order; samples and padding, its
 * counts; range, its samples as the stream numbers them, adjacent ones
 * joined ("3-9,12"); epoch, k (window k is planned as epoch k).  Returns
 * 0 and a heap string in *out, -ENODATA (no such attribute), -E2BIG (over
 * SFS_XATTR_MAX) or -ENOMEM.
 */
int sfs_window_xattr(const struct sfs_window *win, size_t reader,
		     const char *source, const struct sfs_shard *shards,
		     const char *name, char **out);

/*
 * Extended attribute name of reader's stream (stream.<ext>) whose windows
 * built so far are wins[0 .. nwins): user.shardfs.source, source; samples
 * and padding, its counts in those windows.  Returns 0 and a heap string
 * in *out, -ENODATA or -ENOMEM.
 */
int sfs_window_stream_xattr(struct sfs_window *const *wins, size_t nwins,
			    size_t reader, const char *source, const char *name,
			    char **out);

/* The names of the extended attributes of a window file (stream false) or
 * of a stream, each ended by a NUL, as listxattr gives them: *len bytes. */
const char *sfs_window_xattr_names(bool stream, size_t *len);

#endif
