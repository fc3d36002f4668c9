/*
 * Shared by the files of the view: view.c builds the tree, view_name.c
 * makes its names.  Not public.
 */
#ifndef SHARDFS_VIEW_I_H
#define SHARDFS_VIEW_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shardfs/digest.h"
#include "shardfs/plan.h"

/* The decimal digits of n. */
int sfs_view_digits(uint64_t n);

/*
 * What a slice's name says of its runs r[0..nruns), into out (len bytes):
 * "a-b", or "r" and 16 hex digits of their SHA-256 (dg, re-initialised at
 * its final).  Returns 0, or -ENOMEM.
 */
int sfs_view_runs_name(struct sfs_digest *dg, const struct sfs_run *r,
		       size_t nruns, char *out, size_t len);

/*
 * The name of a file into *buf (grown as needed, *cap its bytes): prefix,
 * the source's name sname (a mixture's, else ""), the shard's path within
 * its source (escaped; its base alone when tree), samples (a slice's, or
 * NULL), its extension; cut to 255 bytes.  Returns 0, or -ENOMEM.
 */
int sfs_view_file_name(char **buf, size_t *cap, const char *prefix,
		       const char *sname, const char *path, bool tree,
		       const char *samples);

/*
 * The start of a file's name into out (len bytes): its sequence number,
 * after its epoch when with_epoch, each zero-padded to its width.
 * Returns 0, or -ENAMETOOLONG.
 */
int sfs_view_name_prefix(char *out, size_t len, bool with_epoch, uint64_t epoch,
			 int epoch_width, size_t seq, int seq_width);

#endif
