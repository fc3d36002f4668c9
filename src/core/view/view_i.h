/*
 * Shared by the files of the view: view.c builds the tree,
 * view_describe.c describes its slices first (names and sizes),
 * view_dataset.c puts a reader's datasets (format.h, dataset_view) in it,
 * view_name.c makes its names.  Not public.
 */
#ifndef SHARDFS_VIEW_I_H
#define SHARDFS_VIEW_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shardfs/digest.h"
#include "shardfs/error.h"
#include "shardfs/index.h"
#include "shardfs/plan.h"
#include "shardfs/view.h"

/* What the node of a slice needs and costs to find: the samples part of
 * its name (a hash of its runs) and its size (from boundaries read from
 * the table, or the shard). */
struct slice_desc {
	uint64_t size;
	char samples[48];
};

/* Growing state while nodes are added; names are offsets into pool until
 * the pool stops moving. */
struct builder {
	struct sfs_view *v;
	const struct sfs_view_opts *o;
	size_t nodes_cap; /* of v->nodes */
	size_t *name_at; /* per node, offset of its name in pool */
	size_t name_at_cap;
	char *pool;
	size_t pool_len, pool_cap;
	uint32_t *dirs; /* hash of (parent, name) -> dir node + 1 */
	size_t dirs_cap, ndirs;
	struct slice_desc **desc; /* per plan, per file: slices' */
	size_t datasets_cap; /* of v->datasets */
	char *name; /* scratch: the name of a file or a dataset */
	size_t name_cap;
	struct sfs_error *err;
};

/*
 * Add a node of kind, named name (name_len bytes, copied), under parent
 * into *out; its other fields zero.  Returns 0, -EOVERFLOW (too many
 * nodes) or -ENOMEM.
 */
int sfs_view_add_node(struct builder *b, uint32_t parent, const char *name,
		      size_t name_len, enum sfs_node_kind kind, uint32_t *out);

/*
 * The sub-directory of parent named name (len bytes) into *out, created
 * when missing.  Returns 0, -EOVERFLOW or -ENOMEM.
 */
int sfs_view_subdir(struct builder *b, uint32_t parent, const char *name,
		    size_t len, uint32_t *out);

/*
 * Open shard sh of the source (srcfd, borrowed) to read it: it must still
 * be the file the index describes.  Returns the descriptor (the caller's
 * to close) or -errno, with its message in err.
 */
int sfs_view_open_shard(int srcfd, const struct sfs_shard *sh,
			struct sfs_error *err);

/* -ECANCELED once the view's build is asked to stop (o->cancel), else 0. */
int sfs_view_cancelled(const struct sfs_view_opts *o, struct sfs_error *err);

/*
 * Describe every slice of b->v's plans into b->desc (per plan, per file:
 * allocated here, freed by sfs_view_describe_free even when this fails),
 * on a pool of threads (view_describe.c).  Returns 0, -ENOMEM, or the
 * error of the earliest file that failed (its message in b->err).
 */
int sfs_view_describe(struct builder *b);

/* Free b->desc.  Safe when sfs_view_describe failed or never ran. */
void sfs_view_describe_free(struct builder *b);

/*
 * The dataset of reader r of plan for the shard of the reader's i-th file
 * (format.h, dataset_view), in worker directory wdir, named after prefix:
 * every run of the reader's files of that shard, in order, in one dataset,
 * which b->v then owns.  Returns 0 or -errno (message in b->err for the
 * driver's and the shard's errors).
 */
int sfs_view_add_dataset(struct builder *b, uint32_t wdir, uint32_t plan,
			 const struct sfs_plan_reader *r, size_t i,
			 const char *prefix);

/*
 * Group the children of v's directories, nodes[0 .. ndirs) (each node's
 * parent), into v->children, each directory's sorted by name, as
 * sfs_view_lookup needs: first_child and nchildren set on those nodes.
 * Nodes skip .. resume - 1 are left out: a followed source's windows
 * consumed and deleted, so that a copy costs what is live, not every
 * window gone before (a plain view: skip = resume = v->nnodes).
 * Returns 0 or -ENOMEM (v->children then NULL).
 */
int sfs_view_group_children(struct sfs_view *v, uint32_t ndirs, uint32_t skip,
			    uint32_t resume);

/* sfs_view_slice of a followed source's node n (view_follow.c). */
int sfs_view_follow_slice(const struct sfs_view *v,
			  const struct sfs_view_node *n, struct sfs_slice **out,
			  struct sfs_error *err);

/* Free what a followed source's view keeps of its windows (its copies of
 * the arrays; the windows are borrowed).  NULL is a no-op. */
void sfs_view_follow_free(struct sfs_view_follow *f);

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
