/*
 * The view of a source that grows (view.h, sfs_view_follow): built once,
 * then copied as windows come, each copy a new immutable view whose node
 * numbers are those of the one it grew from, and a window's more.
 *
 * A copy costs the nodes and names copied (64 bytes a node, one name a
 * window: the files of one window share it, as the streams share theirs)
 * and the children of the live nodes grouped again (group_live: not those
 * of the windows consumed and deleted); the windows themselves are
 * borrowed.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardfs/util.h"
#include "shardfs/view.h"
#include "shardfs/window.h"

#include "view_i.h"

/* the longest ending a file's name takes (the formats' are 3 to 8) */
#define EXT_MAX 32
/* "window-", a window's number, ".", the ending, its NUL */
#define WINDOW_NAME_MAX (7 + 20 + 1 + EXT_MAX + 1)

static bool same_reader(const struct sfs_view_reader *a,
			const struct sfs_view_reader *b)
{
	return a->rank == b->rank && a->worker == b->worker;
}

/* in's readers and ending, for a first view.  0 or -EINVAL. */
static int check_readers(const struct sfs_view_follow *in,
			 struct sfs_error *err)
{
	size_t i, j;

	if (!in->ext || !*in->ext || strlen(in->ext) > EXT_MAX ||
	    strchr(in->ext, '/'))
		return sfs_errorf(
			err, -EINVAL,
			"follow view: the files' ending \"%s\" is not a short name (1 to %d bytes, no '/'): give the format's ending without its dot (\"jsonl\")",
			in->ext ? in->ext : "", EXT_MAX);
	if (!in->nreaders)
		return sfs_errorf(
			err, -EINVAL,
			"follow view: no reader: give the readers shown, every worker of each rank shown");
	for (i = 0; i < in->nreaders; i++)
		for (j = 0; j < i; j++)
			if (same_reader(&in->readers[i], &in->readers[j]))
				return sfs_errorf(
					err, -EINVAL,
					"follow view: reader %u/%u given twice (readers %zu and %zu): give each rank's worker once",
					in->readers[i].rank,
					in->readers[i].worker, j, i);
	return 0;
}

/* in against prev (NULL: a first view).  0 or -EINVAL. */
static int check(const struct sfs_view *prev, const struct sfs_view_follow *in,
		 struct sfs_error *err)
{
	const struct sfs_view_follow *p = prev ? prev->follow : NULL;
	size_t i, from = p ? p->nwins : 0;

	if (prev && !p)
		return sfs_errorf(
			err, -EINVAL,
			"follow view: the view to grow is not a followed source's: grow a view sfs_view_follow built, or build a first one (prev NULL)");
	if (!p && check_readers(in, err))
		return -EINVAL;
	if (p && (in->nreaders != p->nreaders || !in->ext ||
		  strcmp(in->ext, p->ext)))
		return sfs_errorf(
			err, -EINVAL,
			"follow view: %zu readers of \"%s\" files given, the view to grow has %zu of \"%s\": a view grows with the readers and ending it was built with",
			in->nreaders, in->ext ? in->ext : "", p->nreaders,
			p->ext);
	for (i = 0; p && i < in->nreaders; i++)
		if (!same_reader(&in->readers[i], &p->readers[i]))
			return sfs_errorf(
				err, -EINVAL,
				"follow view: reader %zu is %u/%u, in the view to grow %u/%u: a view grows with the readers it was built with, in their order",
				i, in->readers[i].rank, in->readers[i].worker,
				p->readers[i].rank, p->readers[i].worker);
	if (p && in->nwins < p->nwins)
		return sfs_errorf(
			err, -EINVAL,
			"follow view: %zu windows given, fewer than the %zu of the view to grow: a view only grows; give every window built since the first, in order",
			in->nwins, p->nwins);
	if (p && p->complete && (in->nwins > p->nwins || !in->complete))
		return sfs_errorf(
			err, -EINVAL,
			"follow view: the view to grow is complete (its stream ended, every window built): it takes no window more and stays complete");
	if (in->hidden > in->nwins || (p && in->hidden < p->hidden))
		return sfs_errorf(
			err, -EINVAL,
			"follow view: %zu windows hidden of %zu given (the view to grow hid %zu): give the windows consumed and deleted, at most those given and never fewer than before",
			in->hidden, in->nwins, p ? p->hidden : 0);
	for (i = 0; i < from; i++)
		if (in->wins[i] != p->wins[i])
			return sfs_errorf(
				err, -EINVAL,
				"follow view: window %zu given is not the view to grow's: give the same windows, in order, and the new ones after them",
				i);
	for (i = from; i < in->nwins; i++) {
		const struct sfs_window *w = in->wins[i];

		if (!w || w->nreaders != in->nreaders)
			return sfs_errorf(
				err, -EINVAL,
				"follow view: window %zu is laid out for %zu readers, the view shows %zu: lay every window out for the readers shown, in their order",
				i, w ? w->nreaders : 0, in->nreaders);
		if (i && w->k != in->wins[i - 1]->k + 1)
			return sfs_errorf(
				err, -EINVAL,
				"follow view: window %" PRIu64
				" follows window %" PRIu64
				": give the windows consecutive, in stream order",
				w->k, in->wins[i - 1]->k);
	}
	return 0;
}

/* The nodes of a first view: the root, each rank's directory at its first
 * reader, each reader's worker directory, then the streams; names into
 * v->names from *len.  0 or -ENOMEM. */
static int add_dirs(struct sfs_view *v, const struct sfs_view_follow *in,
		    size_t *len)
{
	size_t nr = in->nreaders, i, j, stream;
	char *pool = v->names;
	/* reader i's rank's directory, rdir[i], and its own, wdir[i] */
	uint32_t *rdir = calloc(2 * nr, sizeof(*rdir)), *wdir = rdir + nr;

	if (!rdir)
		return -ENOMEM;
	v->nodes[0] =
		(struct sfs_view_node){ .name = pool, .kind = SFS_NODE_DIR };
	pool[(*len)++] = '\0';
	v->nnodes = 1;
	for (i = 0; i < nr; i++) {
		const struct sfs_view_reader *r = &in->readers[i];

		for (j = 0; j < i && in->readers[j].rank != r->rank; j++)
			;
		if (j < i) {
			rdir[i] = rdir[j];
		} else {
			v->nodes[v->nnodes] =
				(struct sfs_view_node){ .name = pool + *len,
							.kind = SFS_NODE_DIR };
			*len += (size_t)sprintf(pool + *len, "%u", r->rank) + 1;
			rdir[i] = v->nnodes++;
		}
		v->nodes[v->nnodes] = (struct sfs_view_node){
			.name = pool + *len,
			.parent = rdir[i],
			.kind = SFS_NODE_DIR,
			.file = i,
		};
		*len += (size_t)sprintf(pool + *len, "%u", r->worker) + 1;
		wdir[i] = v->nnodes++;
	}
	/* one name for every stream */
	stream = *len;
	*len += (size_t)sprintf(pool + *len, "stream.%s", in->ext) + 1;
	for (i = 0; i < nr; i++)
		v->nodes[v->nnodes++] = (struct sfs_view_node){
			.name = pool + stream,
			.parent = wdir[i],
			.kind = SFS_NODE_FILE,
			.file = i,
		};
	free(rdir);
	return 0;
}

/* The view's copy of in, its node numbers set.  0 or -ENOMEM. */
static int copy_in(struct sfs_view *v, const struct sfs_view_follow *in,
		   uint32_t stream_node)
{
	struct sfs_view_follow *f = calloc(1, sizeof(*f));
	struct sfs_window **wins =
		malloc((in->nwins ? in->nwins : 1) * sizeof(*wins));
	struct sfs_view_reader *readers =
		malloc(in->nreaders * sizeof(*readers));
	char *ext = strdup(in->ext);

	if (!f || !wins || !readers || !ext) {
		free(f);
		free(wins);
		free(readers);
		free(ext);
		return -ENOMEM;
	}
	if (in->nwins)
		memcpy(wins, in->wins, in->nwins * sizeof(*wins));
	memcpy(readers, in->readers, in->nreaders * sizeof(*readers));
	*f = *in;
	f->wins = wins;
	f->readers = readers;
	f->ext = ext;
	f->stream_node = stream_node;
	f->window_node = stream_node + (uint32_t)in->nreaders;
	v->follow = f;
	return 0;
}

/* The stream's bytes before its trailer in view p (NULL: none) for reader
 * r: its stream node's size less the trailer it holds when complete. */
static uint64_t stream_body(const struct sfs_view *p, size_t r)
{
	const struct sfs_view_follow *f = p ? p->follow : NULL;
	uint64_t size;

	if (!f)
		return 0;
	size = p->nodes[f->stream_node + r].size;
	if (f->complete && f->nwins)
		size -= f->wins[f->nwins - 1]->trailer_len;
	return size;
}

/* The nodes of windows from .. in->nwins (names appended to v->names at
 * *len), the streams' sizes, the windows hidden.  Every node before
 * those windows' is in v already. */
static void add_windows(struct sfs_view *v, const struct sfs_view *prev,
			const struct sfs_view_follow *in, size_t from,
			size_t *len)
{
	const struct sfs_view_follow *f = v->follow;
	size_t nr = in->nreaders, i, r;
	char *name;

	for (i = from; i < in->nwins; i++) {
		const struct sfs_window *w = in->wins[i];

		name = v->names + *len;
		*len += (size_t)sprintf(name, "window-%08" PRIu64 ".%s", w->k,
					in->ext) +
			1;
		for (r = 0; r < nr; r++)
			v->nodes[v->nnodes++] = (struct sfs_view_node){
				.name = name,
				/* a stream's directory is its reader's */
				.parent = v->nodes[f->stream_node + r].parent,
				.kind = SFS_NODE_FILE,
				.window = (uint32_t)i,
				.file = r,
				.size = w->readers[r].bytes.size +
					w->trailer_len,
			};
	}
	for (r = 0; r < nr; r++) {
		struct sfs_view_node *s = &v->nodes[f->stream_node + r];

		s->size = stream_body(prev, r);
		for (i = from; i < in->nwins; i++)
			s->size += in->wins[i]->readers[r].bytes.size;
		if (in->complete && in->nwins)
			s->size += in->wins[in->nwins - 1]->trailer_len;
		s->grows = !in->complete;
	}
	for (i = prev ? prev->follow->hidden : 0; i < in->hidden; i++)
		for (r = 0; r < nr; r++)
			v->nodes[f->window_node + i * nr + r].gone = true;
}

/* The bytes of a followed source's view's names: its last node's name
 * is the last added. */
static size_t names_len(const struct sfs_view *v)
{
	const struct sfs_view_node *last = &v->nodes[v->nnodes - 1];

	return (size_t)(last->name - v->names) + strlen(last->name) + 1;
}

static int by_name(const void *a, const void *b, void *arg)
{
	const struct sfs_view *v = arg;

	return strcmp(v->nodes[*(const uint32_t *)a].name,
		      v->nodes[*(const uint32_t *)b].name);
}

/* Whether directory d's children are in name order: a worker directory's
 * are (the stream, then the windows in order) until window numbers pass
 * 8 digits, a rank's workers until 10. */
static bool in_order(const struct sfs_view *v, const struct sfs_view_node *d)
{
	const uint32_t *c = v->children + d->first_child;
	uint32_t i;

	for (i = 1; i < d->nchildren; i++)
		if (strcmp(v->nodes[c[i - 1]].name, v->nodes[c[i]].name) > 0)
			return false;
	return true;
}

/*
 * The children of v's directories, grouped and sorted by name: of its
 * live nodes only, the directories and streams (every node before
 * window_node: its directories are all there) and the files of the
 * windows not hidden, so that a copy costs what is live, not every
 * window gone before (as sfs_view_group_children, which walks every
 * node, would).  A file node's first_child and nchildren are left as
 * they are (0, or what a copy before gave them): nothing reads them.
 * 0 or -ENOMEM.
 */
static int group_live(struct sfs_view *v)
{
	const struct sfs_view_follow *f = v->follow;
	uint32_t wn = f->window_node, i, at, *fill;
	uint32_t from = wn + (uint32_t)(f->hidden * f->nreaders);
	size_t n = (wn - 1) + (size_t)(v->nnodes - from);

	v->children = malloc((n ? n : 1) * sizeof(*v->children));
	fill = calloc(wn, sizeof(*fill));
	if (!v->children || !fill) {
		free(fill);
		return -ENOMEM;
	}
	for (i = 0; i < wn; i++)
		v->nodes[i].nchildren = 0;
	for (i = 1; i < v->nnodes; i = i + 1 == wn ? from : i + 1)
		v->nodes[v->nodes[i].parent].nchildren++;
	for (i = 0, at = 0; i < wn; i++) {
		v->nodes[i].first_child = fill[i] = at;
		at += v->nodes[i].nchildren;
	}
	for (i = 1; i < v->nnodes; i = i + 1 == wn ? from : i + 1)
		v->children[fill[v->nodes[i].parent]++] = i;
	free(fill);
	for (i = 0; i < wn; i++)
		if (!in_order(v, &v->nodes[i]))
			qsort_r(v->children + v->nodes[i].first_child,
				v->nodes[i].nchildren, sizeof(uint32_t),
				by_name, v);
	return 0;
}

/* prev's nodes and names into v, the names' pointers moved to v's copy;
 * *len: the names' bytes. */
static void copy_prev(struct sfs_view *v, const struct sfs_view *prev,
		      size_t *len)
{
	uint32_t i;

	*len = names_len(prev);
	memcpy(v->names, prev->names, *len);
	memcpy(v->nodes, prev->nodes, prev->nnodes * sizeof(*v->nodes));
	for (i = 0; i < prev->nnodes; i++)
		v->nodes[i].name =
			v->names + (prev->nodes[i].name - prev->names);
	v->nnodes = prev->nnodes;
}

int sfs_view_follow(const struct sfs_view *prev,
		    const struct sfs_view_follow *in, struct sfs_view **out,
		    struct sfs_error *err)
{
	size_t nr = in->nreaders, from, names, len = 0;
	uint64_t nnodes;
	uint32_t stream_node;
	struct sfs_view *v;
	int rc;

	rc = check(prev, in, err);
	if (rc)
		return rc;
	from = prev ? prev->follow->nwins : 0;
	/* the nodes: prev's, or the root, at most a directory for each
	 * reader's rank, a worker directory and a stream each; then a file
	 * per reader of each new window */
	if (prev) {
		nnodes = prev->nnodes;
		names = names_len(prev);
		stream_node = prev->follow->stream_node;
	} else {
		nnodes = 1 + 3 * (uint64_t)nr;
		names = 1 + 2 * nr * 11 + 8 + EXT_MAX + 1;
		stream_node = 0; /* known once the directories are in */
	}
	if (nnodes > UINT32_MAX - 1 ||
	    (uint64_t)(in->nwins - from) > (UINT32_MAX - 1 - nnodes) / nr)
		return sfs_errorf(
			err, -EOVERFLOW,
			"follow view: %zu windows of %zu readers are more files than a view numbers (2^32 - 1 nodes): use a larger window= (fewer, larger windows)",
			in->nwins, nr);
	nnodes += (uint64_t)(in->nwins - from) * nr;
	names += (in->nwins - from) * WINDOW_NAME_MAX;
	v = calloc(1, sizeof(*v));
	if (!v)
		return sfs_errorf(err, -ENOMEM, "out of memory");
	v->nodes = malloc((size_t)nnodes * sizeof(*v->nodes));
	v->names = malloc(names);
	if (!v->nodes || !v->names)
		goto out_nomem;
	if (prev) {
		copy_prev(v, prev, &len);
	} else {
		rc = add_dirs(v, in, &len);
		if (rc)
			goto out_nomem;
		stream_node = v->nnodes - (uint32_t)nr;
	}
	if (copy_in(v, in, stream_node))
		goto out_nomem;
	add_windows(v, prev, in, from, &len);
	if (group_live(v))
		goto out_nomem;
	v->epoch = in->nwins ? in->wins[0]->k : 0;
	*out = v;
	return 0;
out_nomem:
	sfs_view_free(v);
	return sfs_errorf(err, -ENOMEM, "out of memory");
}

/* (view_i.h) */
void sfs_view_follow_free(struct sfs_view_follow *f)
{
	if (!f)
		return;
	free((void *)f->wins);
	free((void *)f->readers);
	free((void *)f->ext);
	free(f);
}

/* Append the extents of reader r's bytes of window w to s, from s->size
 * on; no extent of no bytes. */
static void append(struct sfs_slice *s, const struct sfs_slice *bytes)
{
	size_t i;

	for (i = 0; i < bytes->nextents; i++) {
		struct sfs_extent *x = &s->extents[s->nextents];

		if (!bytes->extents[i].len)
			continue;
		*x = bytes->extents[i];
		x->pos = s->size;
		x->owned = false; /* the window's (static) */
		s->size += x->len;
		s->nextents++;
	}
}

/* Append w's trailer to s. */
static void append_trailer(struct sfs_slice *s, const struct sfs_window *w)
{
	if (!w->trailer_len)
		return;
	s->extents[s->nextents++] = (struct sfs_extent){ .pos = s->size,
							 .len = w->trailer_len,
							 .mem = w->trailer };
	s->size += w->trailer_len;
}

/* (view_i.h) */
int sfs_view_follow_slice(const struct sfs_view *v,
			  const struct sfs_view_node *n, struct sfs_slice **out,
			  struct sfs_error *err)
{
	const struct sfs_view_follow *f = v->follow;
	size_t node = (size_t)(n - v->nodes), r = n->file, from, to, i;
	const struct sfs_window *trailer = NULL;
	size_t count = 1; /* the trailer */
	struct sfs_slice *s;

	if (n->kind != SFS_NODE_FILE)
		return sfs_errorf(err, -EISDIR,
				  "follow view: node %zu (%s) is a directory",
				  node, n->name);
	if (n->gone)
		return sfs_errorf(
			err, -ESTALE,
			"%s of reader %u/%u: its window was consumed and its shards deleted: it is no longer served (docs/follow.md, \"Consumption\")",
			n->name, f->readers[r].rank, f->readers[r].worker);
	if (node < f->window_node) { /* a stream */
		from = 0;
		to = f->nwins;
		if (f->complete && f->nwins)
			trailer = f->wins[f->nwins - 1];
	} else {
		from = n->window;
		to = from + 1;
		trailer = f->wins[from];
	}
	for (i = from; i < to; i++)
		count += f->wins[i]->readers[r].bytes.nextents;
	s = calloc(1, sizeof(*s));
	if (s)
		s->extents = malloc(count * sizeof(*s->extents));
	if (!s || !s->extents) {
		sfs_slice_free(s);
		return sfs_errorf(err, -ENOMEM, "out of memory");
	}
	s->shared = true; /* no byte of it is its own */
	for (i = from; i < to; i++)
		append(s, &f->wins[i]->readers[r].bytes);
	if (trailer)
		append_trailer(s, trailer);
	*out = s;
	return 0;
}
