/*
 * The view: the tree a mount shows for some epochs of a plan, as plain
 * data the FUSE layer can answer from without further thought.
 *
 *   /                      node 0
 *     <rank>/              one per shown rank
 *       <worker>/          0 .. workers-1
 *         <seq>-<shard>              a whole shard (symlink, or a regular
 *                                    file with symlinks=0)
 *         <seq>-<stem>.<a>-<b><ext>  a slice: samples a..b of <shard>
 *         <seq>-<stem>.r<hash><ext>  a slice of any other list of samples
 *                                    (hash: of its runs, docs/view.md)
 *         <dir>/<seq>-<file>         `files` datasets keep sub-directories
 *         <dataset>/...              a shard that stands for a dataset
 *                                    (Lance): the reader's dataset of its
 *                                    samples of it, named by the dataset's
 *                                    path (format.h, dataset_view)
 *
 * Names start with a zero-padded sequence number, so that sorted order,
 * directory order and the plan's order are one.  With epochs > 1 a worker
 * directory holds that many consecutive epochs, each name prefixed by its
 * epoch.  The children of every directory are sorted by name (strcmp).
 * A name identifies its bytes: the same name, in any epoch of any view of
 * the same index, is the same runs of the same shard.  <shard> and <stem>
 * are the shard's path within its source, '%' and '/' escaped as "%25" and
 * "%2F"; no name is longer than 255 bytes (a longer one is cut and ends
 * its path with '~' and 16 hex digits of the path's SHA-256: docs/view.md).
 * A view never changes after it is built; an epoch switch builds a new one.
 */
#ifndef SHARDFS_VIEW_H
#define SHARDFS_VIEW_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shardfs/error.h"
#include "shardfs/index.h"
#include "shardfs/options.h"
#include "shardfs/plan.h"
#include "shardfs/slice.h"

struct sfs_window; /* window.h */
struct sfs_view_chunk; /* view_follow.c */

/* The extended attributes of a file of the view: its provenance. */
#define SFS_XATTR_SOURCE "user.shardfs.source" /* the source file */
#define SFS_XATTR_SAMPLES "user.shardfs.samples" /* how many */
#define SFS_XATTR_RANGE "user.shardfs.range" /* "3-9,12" in the shard */
#define SFS_XATTR_PADDING "user.shardfs.padding" /* of them, padding */
#define SFS_XATTR_EPOCH "user.shardfs.epoch"

/* The largest extended attribute's value: a longer one is E2BIG. */
#define SFS_XATTR_MAX 65536

/*
 * user.shardfs.range of a file of samples runs[0 .. n): "3-9,12", each
 * run its first sample and, when longer than one, its last.  Returns 0
 * and a heap string in *out, -E2BIG (over SFS_XATTR_MAX) or -ENOMEM.
 */
int sfs_view_xattr_range(const struct sfs_run *runs, size_t n, char **out);

enum sfs_node_kind {
	SFS_NODE_DIR,
	SFS_NODE_LINK, /* a whole shard as a symlink to the source */
	SFS_NODE_FILE, /* a slice, or a whole shard with symlinks=0 */
};

struct sfs_view_node {
	const char *name; /* "" for the root */
	uint32_t parent;
	enum sfs_node_kind kind;
	uint32_t first_child; /* dirs: children are view->children[...] */
	uint32_t nchildren;
	/* files and links */
	uint32_t plan; /* which of view->plans */
	/* a followed source's window file (sfs_view_follow): its window,
	 * an index into view->follow->wins (in what was padding) */
	uint32_t window;
	size_t file; /* in that plan's files; a followed source's worker
		      * directory, window file or stream: its reader, an
		      * index into view->follow->readers and each window's
		      * readers */
	uint32_t member; /* files datasets: 0 the shard, i members[i-1] */
	/* a file of a reader's dataset: 1 + which of view->datasets (0:
	 * none), and which of its files; plan and file name the reader's
	 * first plan file of that shard */
	uint32_t dataset;
	uint32_t dfile;
	/* a followed source's stream whose windows are not all built (size
	 * is what is readable now; a later copy of the view has more); in
	 * what was padding: a node costs 64 bytes on 64-bit machines */
	bool grows;
	uint64_t size; /* bytes; links: length of the target */
};

struct sfs_view_opts {
	struct sfs_options options; /* plan options, ranks to show */
	uint32_t epochs; /* consecutive epochs per directory */
	bool symlinks; /* whole shards as symlinks */
	/* the source directory (open), where shards whose driver lays out
	 * slices itself (Parquet) are read to size their slices */
	int srcfd;
	/* when it becomes true (another thread sets it), the build stops at
	 * its next step and fails with -ECANCELED; NULL: never */
	const atomic_bool *cancel;
	/* bytes of laid-out slices the view keeps for their opens
	 * (slice.h, sfs_slice_cache); 0: SFS_SLICE_CACHE_MAX */
	size_t slice_cache_max;
	/* bytes of decoded pages the build's shards keep for the slices
	 * that follow, all together; 0: SFS_SLICE_PAGES_MAX */
	uint64_t slice_pages_max;
	/* the bound shared by every view of a daemon (slice.h,
	 * sfs_slice_mem: the pages of every build running and the slices
	 * every view keeps, together), borrowed: it must outlive the view;
	 * NULL: only the two bounds above */
	struct sfs_slice_mem *mem;
	/* where the laid-out slices that do not fit in memory are kept, in
	 * a file no name holds (slice.h, sfs_slice_cache_spill), read back
	 * at open rather than laid out again; NULL: none, laid out again */
	const char *slice_spill_dir;
	/* told of trouble with that file (it cannot be made, the disk is
	 * full: the slices are laid out at open instead), once a view, from
	 * any thread, while the view lives; NULL: not told.  note_arg is the
	 * caller's and must outlive the view. */
	void (*note)(void *arg, const char *msg);
	void *note_arg;
	/* while the view's files are described (named, their slices sized
	 * from the source), about four times a second from the building
	 * thread: done of total files, seconds since they began; NULL:
	 * none.  progress_arg is the caller's. */
	void (*progress)(const struct sfs_view_opts *o, size_t done,
			 size_t total, double seconds);
	void *progress_arg;
};

struct sfs_view {
	const struct sfs_index *idx; /* borrowed */
	uint64_t epoch; /* the first epoch shown */
	uint32_t nplans;
	struct sfs_plan **plans; /* epochs epoch .. epoch + nplans - 1 */
	bool symlinks;
	/* nodes[0] is the root; sfs_view_node(v, n) is node n: of a followed
	 * source's view nodes[] holds those before its windows' only */
	struct sfs_view_node *nodes;
	uint32_t nnodes;
	uint32_t *children; /* node numbers, grouped per dir */
	char *names; /* every name, NUL-separated */
	struct sfs_dataset_view **datasets; /* readers' datasets */
	uint32_t ndatasets;
	/* the slices sized by the build (those a driver lays out itself),
	 * kept for sfs_view_slice, keyed by their file's number counted
	 * across the plans in order */
	struct sfs_slice_cache *slices;
	/* a followed source's view (sfs_view_follow): its windows and
	 * readers, the view's copies; NULL for every other view */
	struct sfs_view_follow *follow;
};

/*
 * The most one-sample runs of a format whose runs are pieces of their own
 * (sfs_format_ops.run_piece) that shuffle=samples may leave a reader:
 * each costs a page decoded to build its file and a piece to read (a
 * Parquet file of 100 000 one-row row groups took minutes to size).
 */
#define SFS_VIEW_PIECES_MAX 1024

/*
 * Build the view of idx (borrowed, must outlive the view) for epochs
 * o->options.plan.epoch .. + o->epochs - 1.  Returns 0 and the view in
 * *out, or the plan's errors (-EINVAL with its message), -E2BIG when
 * shuffle=samples would leave a reader more than SFS_VIEW_PIECES_MAX
 * pieces (the message names the cost and the options to use instead),
 * -EOVERFLOW when the epochs run past 2^64 - 1, -ENOMEM.
 */
int sfs_view_build(const struct sfs_index *idx, const struct sfs_view_opts *o,
		   struct sfs_view **out, struct sfs_error *err);

void sfs_view_free(struct sfs_view *v);

/*
 * Whether the shards view v read to size its slices (those whose driver
 * lays out slices itself: Parquet) are still the files the index
 * describes, as its build found them: for a view built a while before it
 * is served.  0, or the error the build would give now (-ESTALE, or the
 * shard's open error; message in err).
 */
int sfs_view_check_shards(const struct sfs_view *v, int srcfd,
			  struct sfs_error *err);

/*
 * The sequence number a view file's name starts with (after its epoch when
 * with_epoch, as views of epochs > 1 name files): sets *seq and returns the
 * length of that start, the '-' after it included; 0 when name does not
 * start so.  "000012-shard-3.tar" -> 12, 7; "08-000012-x" (with_epoch) ->
 * 12, 10.
 */
size_t sfs_view_name_seq(const char *name, bool with_epoch, uint64_t *seq);

/* The child of dir called name, or -1. */
int64_t sfs_view_lookup(const struct sfs_view *v, uint32_t dir,
			const char *name);

/* The sibling after node in its directory's order, or -1. */
int64_t sfs_view_next(const struct sfs_view *v, uint32_t node);

/* The plan file and shard of a file or link node. */
const struct sfs_plan_file *sfs_view_file(const struct sfs_view *v,
					  const struct sfs_view_node *n);

/*
 * Who may read a file node: *uid, *gid and the read bits of *mode (0444
 * at most: the view is read-only) that the source grants the bytes it
 * serves (struct
 * sfs_access, index.h: the shard's, or the member's, owner, group and
 * mode as the mount's check found them, less what the directories on
 * its path keep out).  A file of a reader's dataset has what the build
 * gave it: a source file's own, so narrowed; a synthesized file (a
 * manifest, a deletion file), made of several, their meet
 * (sfs_index_access_meet: the owner theirs when all share it, else root,
 * and a class's read bit only when it reads each of them).  Leaves all
 * three as they are when the index was not checked against its source.
 */
void sfs_view_access(const struct sfs_view *v, const struct sfs_view_node *n,
		     uint32_t *uid, uint32_t *gid, uint32_t *mode);

/*
 * The source path of a file or link node (relative to the source): the
 * shard, or a member of a `files` sample; of a file of a reader's
 * dataset, the source file it shows, or for a file the view synthesizes,
 * the shard.
 */
const char *sfs_view_source_path(const struct sfs_view *v,
				 const struct sfs_view_node *n);

/*
 * Where a file or link node's bytes come from: the source file's path
 * (relative to the source; the index's or the view's), and the size and
 * mtime the index recorded for it (for a source file a reader's dataset
 * shows, what the build found), which the file must still have.  A file
 * the view synthesizes names its shard: it is served while the shard is
 * as indexed.
 */
void sfs_view_source(const struct sfs_view *v, const struct sfs_view_node *n,
		     const char **path, uint64_t *size, int64_t *mtime_ns);

/*
 * The bytes a file node serves: a slice of its shard, the whole shard, a
 * whole file of a reader's dataset, or the bytes the view synthesized.
 * fd is the source file (sfs_view_source), open for reading.  Returns 0
 * and a new slice (sfs_slice_free; it may share bytes the view keeps:
 * free it before the view) or the errors of sfs_slice_cache_build.  Of a
 * followed source's view (sfs_view_follow): a window file's, its reader's
 * part of the window and the window's trailer; a stream's, its reader's
 * part of every window in order (those gone too: offsets never move),
 * and the last window's trailer once complete; -ESTALE for a window gone
 * (its bytes' shards deleted).
 */
int sfs_view_slice(const struct sfs_view *v, const struct sfs_view_node *n,
		   int fd, struct sfs_slice **out, struct sfs_error *err);

/*
 * The view of a source that grows (follow=1, docs/follow.md): the same
 * tree, its files made of windows (window.h).
 *
 *   /                      node 0
 *     <rank>/              one per rank shown, in the readers' order
 *       <worker>/          a reader's
 *         stream.<ext>     its windows end to end, and the trailer
 *                          (a tar's end-of-archive) once complete
 *         window-<k>.<ext> its part of window k, with the trailer
 *                          (k zero-padded to 8 digits)
 *
 * Such a view is built once (prev NULL), then copied as the stream grows:
 * each copy is a new immutable view, the one it grew from unchanged.
 * Node numbers are given once and kept: the root, then for each reader
 * in order its rank's directory (at the rank's first reader) and its
 * worker directory, then every reader's stream (stream_node + reader),
 * then each window's files, one per reader in order (window_node +
 * window * nreaders + reader).  A node number names the same file in
 * every later copy.  A window consumed and deleted (below hidden) keeps
 * its node (sfs_view_gone) and leaves its directory's children.
 *
 * Its file nodes are SFS_NODE_FILE with window and file (the reader) set;
 * sfs_view_slice serves them (fd not used: each extent's file is its
 * shard's number in the stream, window.h); sfs_view_file,
 * sfs_view_source, sfs_view_source_path and sfs_view_access do not apply
 * (no plan): the windows answer those (window.h, sfs_window_xattr).
 */
struct sfs_view_reader {
	uint32_t rank, worker;
};

struct sfs_view_follow {
	/* the windows built, in stream order, consecutive (window k + 1
	 * after window k); borrowed: they must outlive every view that
	 * names them.  The view keeps a copy of the array. */
	struct sfs_window *const *wins;
	size_t nwins;
	size_t hidden; /* wins[0 .. hidden): consumed and deleted */
	/* the readers shown (ranks in order, each rank's workers in order),
	 * as each window's readers are: wins[i]->readers[r] is readers[r]'s */
	const struct sfs_view_reader *readers;
	size_t nreaders;
	const char *ext; /* the files' ending, without its dot: "jsonl" */
	bool complete; /* the stream ended and every window is in wins */
	/* set by the build, ignored in its input: the first stream's node
	 * and window 0's reader 0's; the windows' file nodes (view_follow.c:
	 * in chunks a copy shares with the view it grew from) */
	uint32_t stream_node, window_node;
	struct sfs_view_chunk **chunks;
	size_t nchunks;
};

/* Node n (< v->nnodes) of a followed source's view v (sfs_view_node). */
const struct sfs_view_node *sfs_view_follow_node(const struct sfs_view *v,
						 uint32_t n);

/* Node n (< v->nnodes) of v. */
static inline const struct sfs_view_node *
sfs_view_node(const struct sfs_view *v, uint32_t n)
{
	return v->follow ? sfs_view_follow_node(v, n) : &v->nodes[n];
}

/*
 * Whether node n of v is a followed source's window file consumed and
 * deleted: its number kept, no longer its directory's child, its bytes
 * no longer served.  Never of any other view.
 */
bool sfs_view_gone(const struct sfs_view *v, uint32_t n);

/*
 * The view of the followed source in: a first one (prev NULL), or prev
 * grown (borrowed, unchanged: it stays valid while readers use it).  A
 * copy must name the same readers and every window of prev, in order,
 * and may add windows, hide more of them and become complete; never
 * fewer, never after prev was complete.  Returns 0 and the new view in
 * *out, -EINVAL (the message names what differs and the fix),
 * -EOVERFLOW (more nodes than a view numbers), -ENOMEM; *out untouched
 * then.
 */
int sfs_view_follow(const struct sfs_view *prev,
		    const struct sfs_view_follow *in, struct sfs_view **out,
		    struct sfs_error *err);

#endif
