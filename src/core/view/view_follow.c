/*
 * The view of a source that grows (view.h, sfs_view_follow): built once,
 * then copied as windows come, each copy a new immutable view whose node
 * numbers are those of the one it grew from, and a window's more.
 *
 * The nodes of the windows' files never change once made: they are kept
 * in chunks (struct sfs_view_chunk) of CHUNK_NODES nodes and the windows'
 * names, which every copy after shares, counting its holders.  A copy
 * costs the directories' and streams' nodes (those before window_node:
 * their sizes and children change), a pointer a chunk, the last chunk of
 * the view it grew from when not full (copied, so that the one before
 * stays as it was), the windows' array and the children of the live
 * nodes grouped again (sfs_view_group_children: not those of the windows
 * consumed and deleted).  A window's file is gone when its window is
 * hidden: its node says nothing of it (sfs_view_gone).  The windows
 * themselves are borrowed.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
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
/* the windows' file nodes a chunk holds at most: 32 KiB of them */
#define CHUNK_NODES 512

/*
 * The file nodes of some consecutive windows, wpc of them (chunk_wins),
 * each window's nreaders in order, and their names (WINDOW_NAME_MAX
 * bytes each) after the nodes: shared by every copy of a view that has
 * all those windows.
 */
struct sfs_view_chunk {
	atomic_size_t refs; /* the views holding it */
	struct sfs_view_node nodes[];
};

/* The windows a chunk holds for nr readers. */
static size_t chunk_wins(size_t nr)
{
	return nr < CHUNK_NODES ? CHUNK_NODES / nr : 1;
}

/* Where chunk c's names start. */
static char *chunk_names(struct sfs_view_chunk *c, size_t nr)
{
	return (char *)&c->nodes[chunk_wins(nr) * nr];
}

/* A new chunk for nr readers, its windows' first used of them copied from
 * old (NULL: none), their names' pointers moved; one holder.  NULL: out
 * of memory. */
static struct sfs_view_chunk *chunk_new(struct sfs_view_chunk *old, size_t used,
					size_t nr)
{
	size_t wpc = chunk_wins(nr), i;
	struct sfs_view_chunk *c =
		malloc(sizeof(*c) + wpc * nr * sizeof(c->nodes[0]) +
		       wpc * WINDOW_NAME_MAX);
	char *names;

	if (!c)
		return NULL;
	atomic_init(&c->refs, 1);
	if (!old)
		return c;
	names = chunk_names(c, nr);
	memcpy(c->nodes, old->nodes, used * nr * sizeof(c->nodes[0]));
	memcpy(names, chunk_names(old, nr), used * WINDOW_NAME_MAX);
	for (i = 0; i < used * nr; i++)
		c->nodes[i].name = names + (i / nr) * WINDOW_NAME_MAX;
	return c;
}

static void chunk_put(struct sfs_view_chunk *c)
{
	if (c && atomic_fetch_sub(&c->refs, 1) == 1)
		free(c);
}

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
	f->chunks = NULL;
	f->nchunks = 0;
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

/*
 * The chunks of v's windows (in->nwins of them): those of prev (NULL: none)
 * it fills shared, its last one copied when not full, new ones after.
 * 0 or -ENOMEM (the chunks taken so far are v's to put).
 */
static int take_chunks(struct sfs_view *v, const struct sfs_view *prev,
		       const struct sfs_view_follow *in)
{
	struct sfs_view_follow *f = v->follow;
	const struct sfs_view_follow *p = prev ? prev->follow : NULL;
	size_t wpc = chunk_wins(in->nreaders), n = (in->nwins + wpc - 1) / wpc;
	size_t from = p ? p->nwins : 0, c;

	f->chunks = calloc(n ? n : 1, sizeof(*f->chunks));
	if (!f->chunks)
		return -ENOMEM;
	for (c = 0; c < n; c++, f->nchunks++) {
		if ((c + 1) * wpc <= from) {
			f->chunks[c] = p->chunks[c];
			atomic_fetch_add(&f->chunks[c]->refs, 1);
			continue;
		}
		f->chunks[c] = chunk_new(c * wpc < from ? p->chunks[c] : NULL,
					 c * wpc < from ? from - c * wpc : 0,
					 in->nreaders);
		if (!f->chunks[c])
			return -ENOMEM;
	}
	return 0;
}

/* (view.h) */
const struct sfs_view_node *sfs_view_follow_node(const struct sfs_view *v,
						 uint32_t n)
{
	const struct sfs_view_follow *f = v->follow;
	size_t cn = chunk_wins(f->nreaders) * f->nreaders, at;

	if (n < f->window_node)
		return &v->nodes[n];
	at = n - f->window_node;
	return &f->chunks[at / cn]->nodes[at % cn];
}

bool sfs_view_gone(const struct sfs_view *v, uint32_t n)
{
	const struct sfs_view_follow *f = v->follow;

	return f && n >= f->window_node &&
	       (n - f->window_node) / f->nreaders < f->hidden;
}

/* The nodes of windows from .. in->nwins, in their chunks (there
 * already), the streams' sizes.  Every node before those windows' is in
 * v already. */
static void add_windows(struct sfs_view *v, const struct sfs_view *prev,
			const struct sfs_view_follow *in, size_t from)
{
	const struct sfs_view_follow *f = v->follow;
	size_t nr = in->nreaders, wpc = chunk_wins(nr), i, r;
	struct sfs_view_chunk *c;
	char *name;

	for (i = from; i < in->nwins; i++) {
		const struct sfs_window *w = in->wins[i];

		c = f->chunks[i / wpc];
		name = chunk_names(c, nr) + (i % wpc) * WINDOW_NAME_MAX;
		snprintf(name, WINDOW_NAME_MAX, "window-%08" PRIu64 ".%s", w->k,
			 in->ext);
		for (r = 0; r < nr; r++)
			c->nodes[(i % wpc) * nr + r] = (struct sfs_view_node){
				.name = name,
				/* a stream's directory is its reader's */
				.parent = v->nodes[f->stream_node + r].parent,
				.kind = SFS_NODE_FILE,
				.window = (uint32_t)i,
				.file = r,
				.size = w->readers[r].bytes.size +
					w->trailer_len,
			};
		v->nnodes += (uint32_t)nr;
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
}

/* The bytes of a followed source's view's names (its directories' and
 * streams'): its last stream's name is the last added. */
static size_t names_len(const struct sfs_view *v)
{
	const struct sfs_view_node *last =
		&v->nodes[v->follow->window_node - 1];

	return (size_t)(last->name - v->names) + strlen(last->name) + 1;
}

/* prev's directories' and streams' nodes and names into v, the names'
 * pointers moved to v's copy; its windows' nodes are in the chunks. */
static void copy_prev(struct sfs_view *v, const struct sfs_view *prev)
{
	uint32_t i, wn = prev->follow->window_node;

	memcpy(v->names, prev->names, names_len(prev));
	memcpy(v->nodes, prev->nodes, wn * sizeof(*v->nodes));
	for (i = 0; i < wn; i++)
		v->nodes[i].name =
			v->names + (prev->nodes[i].name - prev->names);
	v->nnodes = prev->nnodes;
}

int sfs_view_follow(const struct sfs_view *prev,
		    const struct sfs_view_follow *in, struct sfs_view **out,
		    struct sfs_error *err)
{
	size_t nr = in->nreaders, from, names, len = 0;
	uint64_t nnodes, head;
	uint32_t stream_node;
	struct sfs_view *v;
	int rc;

	rc = check(prev, in, err);
	if (rc)
		return rc;
	from = prev ? prev->follow->nwins : 0;
	/* the nodes: prev's, or the root, at most a directory for each
	 * reader's rank, a worker directory and a stream each; then a file
	 * per reader of each new window, in the chunks */
	if (prev) {
		nnodes = prev->nnodes;
		head = prev->follow->window_node;
		names = names_len(prev);
		stream_node = prev->follow->stream_node;
	} else {
		nnodes = head = 1 + 3 * (uint64_t)nr;
		names = 1 + 2 * nr * 11 + 8 + EXT_MAX + 1;
		stream_node = 0; /* known once the directories are in */
	}
	if (nnodes > UINT32_MAX - 1 ||
	    (uint64_t)(in->nwins - from) > (UINT32_MAX - 1 - nnodes) / nr)
		return sfs_errorf(
			err, -EOVERFLOW,
			"follow view: %zu windows of %zu readers are more files than a view numbers (2^32 - 1 nodes): use a larger window= (fewer, larger windows)",
			in->nwins, nr);
	v = calloc(1, sizeof(*v));
	if (!v)
		return sfs_errorf(err, -ENOMEM, "out of memory");
	v->nodes = malloc((size_t)head * sizeof(*v->nodes));
	v->names = malloc(names);
	if (!v->nodes || !v->names)
		goto out_nomem;
	if (prev) {
		copy_prev(v, prev);
	} else {
		rc = add_dirs(v, in, &len);
		if (rc)
			goto out_nomem;
		stream_node = v->nnodes - (uint32_t)nr;
	}
	if (copy_in(v, in, stream_node) || take_chunks(v, prev, in))
		goto out_nomem;
	add_windows(v, prev, in, from);
	/* the children of the live nodes only: not the windows' hidden */
	if (sfs_view_group_children(
		    v, v->follow->window_node, v->follow->window_node,
		    v->follow->window_node + (uint32_t)(in->hidden * nr)))
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
	size_t c;

	if (!f)
		return;
	for (c = 0; c < f->nchunks; c++)
		chunk_put(f->chunks[c]);
	free(f->chunks);
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
	size_t r = n->file, from, to, i;
	bool stream;
	const struct sfs_window *trailer = NULL;
	size_t count = 1; /* the trailer */
	struct sfs_slice *s;

	if (n->kind != SFS_NODE_FILE)
		return sfs_errorf(err, -EISDIR,
				  "follow view: %s is a directory", n->name);
	stream = n == &v->nodes[f->stream_node + r];
	if (!stream && n->window < f->hidden)
		return sfs_errorf(
			err, -ESTALE,
			"%s of reader %u/%u: its window was consumed and its shards deleted: it is no longer served (docs/follow.md, \"Consumption\")",
			n->name, f->readers[r].rank, f->readers[r].worker);
	if (stream) {
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
