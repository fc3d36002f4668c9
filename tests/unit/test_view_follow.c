/*
 * The view of a source that grows (include/shardfs/view.h,
 * sfs_view_follow): a first view, copies as windows come with their node
 * numbers kept, windows consumed and deleted, lookups and listings in name
 * order, and the bytes of window files and streams, byte for byte what
 * the follow read path serves (src/fuse/follow_read.c).
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "helpers.h"
#include "shardfs/follow.h"
#include "shardfs/options.h"
#include "shardfs/view.h"
#include "shardfs/window.h"

/* ---- windows made in memory: node numbers, names, sizes ---- */

/* Window k for nr readers: reader r's bytes two extents of shard k (10 +
 * r bytes, then 5), the window's trailer "END!" (4 bytes). */
static struct sfs_window *mkwindow(uint64_t k, size_t nr)
{
	struct sfs_window *w = calloc(1, sizeof(*w));
	size_t r;

	assert_non_null(w);
	w->k = k;
	w->nreaders = nr;
	w->readers = calloc(nr, sizeof(*w->readers));
	assert_non_null(w->readers);
	w->trailer = "END!";
	w->trailer_len = 4;
	for (r = 0; r < nr; r++) {
		struct sfs_slice *s = &w->readers[r].bytes;

		s->extents = calloc(2, sizeof(*s->extents));
		assert_non_null(s->extents);
		s->nextents = 2;
		s->extents[0] = (struct sfs_extent){ .len = 10 + r,
						     .src = 100 * r,
						     .file = (uint32_t)k };
		s->extents[1] = (struct sfs_extent){
			.pos = 10 + r, .len = 5, .src = 7, .file = (uint32_t)k
		};
		s->size = 15 + r;
	}
	return w;
}

/* Windows first .. first + n - 1 appended to *wins (grown). */
static void add_windows(struct sfs_window ***wins, size_t *nwins,
			uint64_t first, size_t n, size_t nr)
{
	size_t i;

	*wins = realloc(*wins, (*nwins + n) * sizeof(**wins));
	assert_non_null(*wins);
	for (i = 0; i < n; i++)
		(*wins)[(*nwins)++] = mkwindow(first + i, nr);
}

static void free_windows(struct sfs_window **wins, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		sfs_window_free(wins[i]);
	free(wins);
}

/* ranks 3 and 5, workers 0 and 1 */
static const struct sfs_view_reader readers4[] = { { 3, 0 },
						   { 3, 1 },
						   { 5, 0 },
						   { 5, 1 } };

static struct sfs_view *follow(const struct sfs_view *prev,
			       struct sfs_window **wins, size_t nwins,
			       size_t hidden, const struct sfs_view_reader *rd,
			       size_t nr, bool complete)
{
	struct sfs_view_follow in = { .wins = wins,
				      .nwins = nwins,
				      .hidden = hidden,
				      .readers = rd,
				      .nreaders = nr,
				      .ext = "tar",
				      .complete = complete };
	struct sfs_error err = { 0 };
	struct sfs_view *v = NULL;
	int rc = sfs_view_follow(prev, &in, &v, &err);

	if (rc)
		fail_msg("sfs_view_follow: %d %s", rc, err.msg);
	return v;
}

/* The node of path ("3/1/stream.tar") in v, or -1. */
static int64_t walk(const struct sfs_view *v, const char *path)
{
	char buf[256], *save = NULL, *part;
	int64_t n = 0;

	snprintf(buf, sizeof(buf), "%s", path);
	for (part = strtok_r(buf, "/", &save); part && n >= 0;
	     part = strtok_r(NULL, "/", &save))
		n = sfs_view_lookup(v, (uint32_t)n, part);
	return n;
}

/* The names of dir's children, in listing order, joined by ' ' into
 * out. */
static void listing(const struct sfs_view *v, uint32_t dir, char *out,
		    size_t len)
{
	const struct sfs_view_node *d = sfs_view_node(v, dir);
	size_t at = 0;
	int64_t c;

	out[0] = '\0';
	c = d->nchildren ? (int64_t)v->children[d->first_child] : -1;
	for (; c >= 0; c = sfs_view_next(v, (uint32_t)c))
		at += (size_t)snprintf(out + at, len - at, "%s%s",
				       at ? " " : "",
				       sfs_view_node(v, c)->name);
}

/* The first view: directories, streams, a file per window per reader,
 * numbered as view.h says; the stream the windows end to end. */
static void test_view_follow_first(void **state)
{
	struct sfs_window **wins = NULL;
	struct sfs_view *v;
	size_t nwins = 0;
	char list[512];
	int64_t n;

	(void)state;
	/* a plain view's node costs what it cost before: the follow
	 * fields took padding */
	if (sizeof(void *) == 8)
		assert_int_equal(sizeof(struct sfs_view_node), 64);
	add_windows(&wins, &nwins, 0, 2, 4);
	v = follow(NULL, wins, nwins, 0, readers4, 4, false);
	/* root, 2 ranks, 4 workers, 4 streams, 2 x 4 windows */
	assert_int_equal(v->nnodes, 19);
	assert_int_equal(v->follow->stream_node, 7);
	assert_int_equal(v->follow->window_node, 11);
	listing(v, 0, list, sizeof(list));
	assert_string_equal(list, "3 5");
	assert_int_equal(walk(v, "3"), 1);
	assert_int_equal(walk(v, "3/0"), 2);
	assert_int_equal(walk(v, "3/1"), 3);
	assert_int_equal(walk(v, "5"), 4);
	assert_int_equal(walk(v, "5/1"), 6);
	assert_int_equal(sfs_view_node(v, 6)->file,
			 3); /* a worker's: its reader */
	assert_int_equal(walk(v, "4"), -1);
	assert_int_equal(walk(v, "3/2"), -1);
	listing(v, 6, list, sizeof(list));
	assert_string_equal(
		list, "stream.tar window-00000000.tar window-00000001.tar");
	n = walk(v, "5/1/stream.tar");
	assert_int_equal(n, 7 + 3);
	assert_int_equal(sfs_view_node(v, n)->kind, SFS_NODE_FILE);
	assert_int_equal(sfs_view_node(v, n)->file, 3);
	assert_true(sfs_view_node(v, n)->grows);
	assert_int_equal(sfs_view_node(v, n)->size,
			 2 * 18); /* no trailer yet */
	n = walk(v, "5/0/window-00000001.tar");
	assert_int_equal(n, 11 + 1 * 4 + 2);
	assert_int_equal(sfs_view_node(v, n)->window, 1);
	assert_int_equal(sfs_view_node(v, n)->file, 2);
	assert_false(sfs_view_node(v, n)->grows);
	assert_false(sfs_view_gone(v, n));
	assert_int_equal(sfs_view_node(v, n)->size, 17 + 4);
	assert_int_equal(walk(v, "5/0/window-00000002.tar"), -1);
	sfs_view_free(v);
	/* no window yet: the directories and streams */
	v = follow(NULL, wins, 0, 0, readers4, 4, false);
	assert_int_equal(v->nnodes, 11);
	listing(v, (uint32_t)walk(v, "3/0"), list, sizeof(list));
	assert_string_equal(list, "stream.tar");
	assert_int_equal(sfs_view_node(v, walk(v, "3/0/stream.tar"))->size, 0);
	sfs_view_free(v);
	free_windows(wins, nwins);
}

/* What every node of a is, in b: the same name, parent, kind, window and
 * reader under the same number. */
static void same_nodes(const struct sfs_view *a, const struct sfs_view *b)
{
	uint32_t i;

	assert_true(b->nnodes >= a->nnodes);
	for (i = 0; i < a->nnodes; i++) {
		assert_string_equal(sfs_view_node(a, i)->name,
				    sfs_view_node(b, i)->name);
		assert_int_equal(sfs_view_node(a, i)->parent,
				 sfs_view_node(b, i)->parent);
		assert_int_equal(sfs_view_node(a, i)->kind,
				 sfs_view_node(b, i)->kind);
		assert_int_equal(sfs_view_node(a, i)->window,
				 sfs_view_node(b, i)->window);
		assert_int_equal(sfs_view_node(a, i)->file,
				 sfs_view_node(b, i)->file);
	}
}

/* A copy grown by one window: the old view unchanged, the new files
 * numbered after every node of it, the stream longer. */
static void test_view_follow_grow_one(void **state)
{
	struct sfs_window **wins = NULL;
	struct sfs_view *a, *b;
	size_t nwins = 0;
	char list[512];

	(void)state;
	add_windows(&wins, &nwins, 0, 2, 4);
	a = follow(NULL, wins, nwins, 0, readers4, 4, false);
	add_windows(&wins, &nwins, 2, 1, 4);
	b = follow(a, wins, nwins, 0, readers4, 4, false);
	assert_int_equal(a->nnodes, 19);
	assert_int_equal(b->nnodes, 23);
	same_nodes(a, b);
	assert_int_equal(walk(a, "3/1/window-00000002.tar"), -1);
	assert_int_equal(walk(b, "3/1/window-00000002.tar"), 19 + 1);
	listing(a, 3, list, sizeof(list));
	assert_string_equal(
		list, "stream.tar window-00000000.tar window-00000001.tar");
	listing(b, 3, list, sizeof(list));
	assert_string_equal(
		list,
		"stream.tar window-00000000.tar window-00000001.tar window-00000002.tar");
	assert_int_equal(sfs_view_node(a, walk(a, "3/1/stream.tar"))->size,
			 2 * 16);
	assert_int_equal(sfs_view_node(b, walk(b, "3/1/stream.tar"))->size,
			 3 * 16);
	/* a is freed first, as an old view when its last reader is done */
	sfs_view_free(a);
	assert_int_equal(walk(b, "5/1/window-00000000.tar"), 11 + 3);
	sfs_view_free(b);
	free_windows(wins, nwins);
}

/* 10 000 windows of 8 readers in one copy, and one more after them: every
 * file where view.h numbers it. */
static void test_view_follow_grow_many(void **state)
{
	struct sfs_view_reader rd[8];
	struct sfs_window **wins = NULL;
	struct sfs_view *a, *b, *c;
	size_t nwins = 0, r;
	char path[64];
	int64_t n;

	(void)state;
	for (r = 0; r < 8; r++)
		rd[r] = (struct sfs_view_reader){ 0, (uint32_t)r };
	add_windows(&wins, &nwins, 0, 1, 8);
	a = follow(NULL, wins, nwins, 0, rd, 8, false);
	add_windows(&wins, &nwins, 1, 9999, 8);
	b = follow(a, wins, nwins, 0, rd, 8, false);
	add_windows(&wins, &nwins, 10000, 1, 8);
	c = follow(b, wins, nwins, 0, rd, 8, false);
	/* root, a rank, 8 workers, 8 streams */
	assert_int_equal(b->follow->window_node, 18);
	assert_int_equal(b->nnodes, 18 + 10000 * 8);
	assert_int_equal(c->nnodes, 18 + 10001 * 8);
	same_nodes(a, c);
	same_nodes(b, c);
	for (r = 0; r < 8; r++) {
		snprintf(path, sizeof(path), "0/%zu/window-00009999.tar", r);
		assert_int_equal(walk(b, path), 18 + 9999 * 8 + r);
		snprintf(path, sizeof(path), "0/%zu/window-00010000.tar", r);
		assert_int_equal(walk(b, path), -1);
		assert_int_equal(walk(c, path), 18 + 10000 * 8 + r);
		snprintf(path, sizeof(path), "0/%zu/stream.tar", r);
		n = walk(c, path);
		assert_int_equal(sfs_view_node(c, n)->size, 10001 * (15 + r));
		assert_int_equal(sfs_view_node(c, walk(c, "0"))->nchildren, 8);
		snprintf(path, sizeof(path), "0/%zu", r);
		assert_int_equal(sfs_view_node(c, walk(c, path))->nchildren,
				 10002);
	}
	sfs_view_free(a);
	sfs_view_free(b);
	sfs_view_free(c);
	free_windows(wins, nwins);
}

/* Two copies grown from one view, each by a window of its own (the
 * windows' file nodes are shared between copies in chunks, the last of
 * them not full: each copy its own of it): each has its window, the view
 * they grew from neither; freed in any order. */
static void test_view_follow_branch(void **state)
{
	struct sfs_window **wins = NULL, *other, *mine;
	struct sfs_view_reader rd8[8];
	struct sfs_view *a, *b, *c;
	size_t nwins = 0, r;
	char path[64];

	(void)state;
	for (r = 0; r < 8; r++)
		rd8[r] = (struct sfs_view_reader){ 0, (uint32_t)r };
	add_windows(&wins, &nwins, 0, 100, 8);
	a = follow(NULL, wins, nwins, 0, rd8, 8, false);
	add_windows(&wins, &nwins, 100, 1, 8);
	b = follow(a, wins, nwins, 0, rd8, 8, false);
	other = mkwindow(100, 8);
	for (r = 0; r < 8; r++)
		other->readers[r].bytes.size = 1000 + r;
	mine = wins[100];
	wins[100] = other;
	c = follow(a, wins, nwins, 0, rd8, 8, false);
	wins[100] = mine;
	sfs_view_free(a);
	for (r = 0; r < 8; r++) {
		snprintf(path, sizeof(path), "0/%zu/window-00000100.tar", r);
		assert_int_equal(sfs_view_node(b, walk(b, path))->size,
				 15 + r + 4);
		assert_int_equal(sfs_view_node(c, walk(c, path))->size,
				 1000 + r + 4);
		snprintf(path, sizeof(path), "0/%zu/window-00000099.tar", r);
		assert_string_equal(sfs_view_node(b, walk(b, path))->name,
				    "window-00000099.tar");
		assert_int_equal(walk(c, path), walk(b, path));
	}
	same_nodes(b, c);
	sfs_view_free(c);
	sfs_view_free(b);
	sfs_window_free(other);
	free_windows(wins, nwins);
}

/* Over three copies (a window, many windows, the stream complete) a node
 * number names the same file in each. */
static void test_view_follow_numbers_stable(void **state)
{
	struct sfs_window **wins = NULL;
	struct sfs_view *v[4];
	size_t nwins = 0, i;
	int64_t n;

	(void)state;
	add_windows(&wins, &nwins, 4, 1, 4); /* a restart at window 4 */
	v[0] = follow(NULL, wins, nwins, 0, readers4, 4, false);
	add_windows(&wins, &nwins, 5, 1, 4);
	v[1] = follow(v[0], wins, nwins, 0, readers4, 4, false);
	add_windows(&wins, &nwins, 6, 5, 4);
	v[2] = follow(v[1], wins, nwins, 1, readers4, 4, false);
	v[3] = follow(v[2], wins, nwins, 1, readers4, 4, true);
	for (i = 0; i < 3; i++)
		same_nodes(v[i], v[i + 1]);
	for (i = 0; i < 4; i++) {
		n = walk(v[i], "5/0/stream.tar");
		assert_int_equal(n, 9);
		n = walk(v[i], "5/0/window-00000004.tar");
		/* hidden from v[2] on: its number is not reused */
		assert_int_equal(n, i < 2 ? 11 + 2 : -1);
		assert_string_equal(sfs_view_node(v[i], 11 + 2)->name,
				    "window-00000004.tar");
		assert_int_equal(sfs_view_gone(v[i], 11 + 2), i >= 2);
	}
	assert_int_equal(walk(v[3], "5/0/window-00000010.tar"), 11 + 6 * 4 + 2);
	assert_int_equal(v[3]->nnodes, 11 + 7 * 4);
	/* complete: the stream no longer grows, its trailer at its end */
	assert_true(v[2]->nodes[9].grows);
	assert_false(v[3]->nodes[9].grows);
	assert_int_equal(v[2]->nodes[9].size, 7 * 17);
	assert_int_equal(v[3]->nodes[9].size, 7 * 17 + 4);
	for (i = 0; i < 4; i++)
		sfs_view_free(v[i]);
	free_windows(wins, nwins);
}

/* Windows consumed and deleted: their nodes kept, gone; no lookup finds
 * them, no listing shows them, their bytes are ESTALE; the stream keeps
 * its offsets. */
static void test_view_follow_hidden(void **state)
{
	struct sfs_window **wins = NULL;
	struct sfs_error err = { 0 };
	struct sfs_slice *s = NULL;
	struct sfs_view *a, *b;
	size_t nwins = 0;
	char list[512];
	int64_t n;

	(void)state;
	add_windows(&wins, &nwins, 0, 3, 4);
	a = follow(NULL, wins, nwins, 0, readers4, 4, false);
	b = follow(a, wins, nwins, 2, readers4, 4, false);
	assert_int_equal(b->nnodes, a->nnodes);
	same_nodes(a, b);
	listing(b, 3, list, sizeof(list));
	assert_string_equal(list, "stream.tar window-00000002.tar");
	listing(a, 3, list, sizeof(list));
	assert_string_equal(
		list,
		"stream.tar window-00000000.tar window-00000001.tar window-00000002.tar");
	assert_int_equal(walk(b, "3/1/window-00000000.tar"), -1);
	assert_int_equal(walk(b, "3/1/window-00000001.tar"), -1);
	assert_int_equal(walk(b, "3/1/window-00000002.tar"), 11 + 8 + 1);
	assert_true(sfs_view_gone(b, 11 + 4 + 1));
	assert_false(sfs_view_gone(a, 11 + 4 + 1));
	assert_int_equal(sfs_view_slice(b, sfs_view_node(b, 11 + 4 + 1), -1, &s,
					&err),
			 -ESTALE);
	assert_null(s);
	assert_string_equal(
		err.msg,
		"window-00000001.tar of reader 3/1: its window was consumed and its shards deleted: it is no longer served (docs/follow.md, \"Consumption\")");
	/* the old view still serves it */
	assert_int_equal(sfs_view_slice(a, sfs_view_node(a, 11 + 4 + 1), -1, &s,
					&err),
			 0);
	assert_int_equal(s->size, 16 + 4);
	sfs_slice_free(s);
	/* the stream: every window, those gone too */
	n = walk(b, "3/1/stream.tar");
	assert_int_equal(sfs_view_node(b, n)->size, 3 * 16);
	assert_int_equal(sfs_view_slice(b, sfs_view_node(b, n), -1, &s, &err),
			 0);
	assert_int_equal(s->size, 3 * 16);
	assert_int_equal(s->nextents, 6);
	assert_int_equal(s->extents[2].pos, 16);
	assert_int_equal(s->extents[2].file, 1);
	assert_int_equal(s->extents[2].src, 100);
	sfs_slice_free(s);
	/* all of them */
	sfs_view_free(a);
	a = follow(b, wins, nwins, 3, readers4, 4, false);
	listing(a, 3, list, sizeof(list));
	assert_string_equal(list, "stream.tar");
	sfs_view_free(a);
	sfs_view_free(b);
	free_windows(wins, nwins);
}

/* Window numbers past 8 digits sort before those of 8 ("window-1..." <
 * "window-9..."): each copy's children are sorted again, and lookups
 * find every one. */
static void test_view_follow_resort(void **state)
{
	struct sfs_window **wins = NULL;
	struct sfs_view *a, *b;
	size_t nwins = 0;
	char list[512];

	(void)state;
	add_windows(&wins, &nwins, 99999998, 2, 4);
	a = follow(NULL, wins, nwins, 0, readers4, 4, false);
	add_windows(&wins, &nwins, 100000000, 2, 4);
	b = follow(a, wins, nwins, 0, readers4, 4, false);
	listing(b, 2, list, sizeof(list));
	assert_string_equal(
		list,
		"stream.tar window-100000000.tar window-100000001.tar window-99999998.tar window-99999999.tar");
	assert_int_equal(walk(b, "3/0/window-99999998.tar"), 11);
	assert_int_equal(walk(b, "3/0/window-99999999.tar"), 15);
	assert_int_equal(walk(b, "3/0/window-100000000.tar"), 19);
	assert_int_equal(walk(b, "3/0/window-100000001.tar"), 23);
	assert_int_equal(walk(b, "3/0/window-100000002.tar"), -1);
	assert_int_equal(walk(b, "3/0/stream.tar"), 7);
	sfs_view_free(a);
	sfs_view_free(b);
	free_windows(wins, nwins);
}

/* What is refused, with a message naming it and the fix; *out untouched
 * then. */
static void test_view_follow_bad_input(void **state)
{
	static const struct sfs_view_reader other[] = {
		{ 3, 0 }, { 3, 1 }, { 5, 0 }, { 6, 1 }
	};
	static const struct sfs_view_reader twice[] = { { 3, 0 }, { 3, 0 } };
	struct sfs_window **wins = NULL, *swap;
	struct sfs_error err = { 0 };
	struct sfs_view *a, *b, *v = NULL;
	struct sfs_view_follow in;
	size_t nwins = 0;

	(void)state;
	add_windows(&wins, &nwins, 0, 3, 4);
	a = follow(NULL, wins, 2, 0, readers4, 4, false);
	in = (struct sfs_view_follow){ .wins = wins,
				       .nwins = 1,
				       .readers = readers4,
				       .nreaders = 4,
				       .ext = "tar" };
#define REFUSED(want)                                                         \
	do {                                                                  \
		assert_int_equal(sfs_view_follow(a, &in, &v, &err), -EINVAL); \
		assert_null(v);                                               \
		assert_string_equal(err.msg, want);                           \
	} while (0)
	REFUSED("follow view: 1 windows given, fewer than the 2 of the view to grow: a view only grows; give every window built since the first, in order");
	in.nwins = 3;
	in.nreaders = 2;
	REFUSED("follow view: 2 readers of \"tar\" files given, the view to grow has 4 of \"tar\": a view grows with the readers and ending it was built with");
	in.nreaders = 4;
	in.readers = other;
	REFUSED("follow view: reader 3 is 6/1, in the view to grow 5/1: a view grows with the readers it was built with, in their order");
	in.readers = readers4;
	in.ext = "jsonl";
	REFUSED("follow view: 4 readers of \"jsonl\" files given, the view to grow has 4 of \"tar\": a view grows with the readers and ending it was built with");
	in.ext = "tar";
	in.hidden = 4;
	REFUSED("follow view: 4 windows hidden of 3 given (the view to grow hid 0): give the windows consumed and deleted, at most those given and never fewer than before");
	in.hidden = 0;
	/* a window laid out for other readers, one out of order, one not
	 * the view's */
	wins[2]->nreaders = 3;
	REFUSED("follow view: window 2 is laid out for 3 readers, the view shows 4: lay every window out for the readers shown, in their order");
	wins[2]->nreaders = 4;
	wins[2]->k = 7;
	REFUSED("follow view: window 7 follows window 1: give the windows consecutive, in stream order");
	wins[2]->k = 2;
	swap = wins[0];
	wins[0] = wins[2];
	REFUSED("follow view: window 0 given is not the view to grow's: give the same windows, in order, and the new ones after them");
	wins[0] = swap;
	/* fewer hidden than before */
	b = follow(a, wins, 3, 1, readers4, 4, false);
	sfs_view_free(a);
	a = b;
	REFUSED("follow view: 0 windows hidden of 3 given (the view to grow hid 1): give the windows consumed and deleted, at most those given and never fewer than before");
	/* complete: nothing more */
	b = follow(a, wins, 2 + 1, 1, readers4, 4, true);
	sfs_view_free(a);
	a = b;
	in.hidden = 1;
	REFUSED("follow view: the view to grow is complete (its stream ended, every window built): it takes no window more and stays complete");
	sfs_view_free(a);
	/* a view of a plan is not grown */
	a = &(struct sfs_view){ .nnodes = 1 };
	REFUSED("follow view: the view to grow is not a followed source's: grow a view sfs_view_follow built, or build a first one (prev NULL)");
	/* a first view: readers and ending */
	a = NULL;
	in.nwins = 0;
	in.hidden = 0;
	in.readers = twice;
	in.nreaders = 2;
	REFUSED("follow view: reader 3/0 given twice (readers 0 and 1): give each rank's worker once");
	in.nreaders = 0;
	REFUSED("follow view: no reader: give the readers shown, every worker of each rank shown");
	in.nreaders = 1;
	in.ext = "../x";
	REFUSED("follow view: the files' ending \"../x\" is not a short name (1 to 32 bytes, no '/'): give the format's ending without its dot (\"jsonl\")");
#undef REFUSED
	free_windows(wins, nwins);
}

/* ---- windows of a real source: the bytes ---- */

/* A tar chunk of n members key0.txt, ... of data "x<i>". */
static void tar_chunk(const char *dir, const char *name, const char *key, int n)
{
	struct buf b = { 0 };
	char member[64], data[16];
	int i;

	for (i = 0; i < n; i++) {
		snprintf(member, sizeof(member), "%.40s%d.txt", key, i);
		snprintf(data, sizeof(data), "x%d", i);
		tar_member(&b, member, '0', data, strlen(data));
	}
	tar_end(&b);
	free(write_at(dir, name, b.p, b.len));
	buf_free(&b);
}

/* The bytes of slice s of f's stream, each extent's from the shard it
 * names (an extent's file: its shard's number in the stream), into a new
 * buffer of s->size bytes. */
static unsigned char *read_slice(const struct sfs_follow *f,
				 const struct sfs_slice *s)
{
	unsigned char *out = calloc(1, s->size + 1);
	size_t i;

	assert_non_null(out);
	for (i = 0; i < s->nextents; i++) {
		const struct sfs_extent *e = &s->extents[i];
		char path[512];
		struct buf b;

		assert_int_equal(e->pos, i ? s->extents[i - 1].pos +
							 s->extents[i - 1].len :
					     0);
		if (e->mem) {
			memcpy(out + e->pos, e->mem, e->len);
			continue;
		}
		snprintf(path, sizeof(path), "%s/%s", f->source,
			 f->idx->shards[e->file].path);
		b = read_all(path);
		assert_true(e->src + e->len <= b.len);
		memcpy(out + e->pos, b.p + e->src, e->len);
		buf_free(&b);
	}
	return out;
}

/*
 * What follow_read.c serves of reader r's stream over wins[0 .. n) (a
 * window's bytes at the reader's offset of it, r->at; the last window's
 * trailer after them once complete), built from the windows' layout:
 * into *out, its length returned.
 */
static size_t stream_expected(const struct sfs_follow *f,
			      struct sfs_window *const *wins, size_t n,
			      size_t r, bool complete, unsigned char **out)
{
	struct buf b = { 0 };
	unsigned char *p;
	size_t i;

	for (i = 0; i < n; i++) {
		const struct sfs_slice *s = &wins[i]->readers[r].bytes;

		p = read_slice(f, s);
		buf_put(&b, p, s->size);
		free(p);
	}
	if (complete && n)
		buf_put(&b, wins[n - 1]->trailer, wins[n - 1]->trailer_len);
	*out = b.p;
	return b.len;
}

/* The bytes of node n of v, read through sfs_view_slice. */
static unsigned char *node_bytes(const struct sfs_follow *f,
				 const struct sfs_view *v, int64_t n,
				 uint64_t *size)
{
	struct sfs_error err = { 0 };
	struct sfs_slice *s = NULL;
	unsigned char *p;

	assert_true(n >= 0);
	assert_int_equal(sfs_view_slice(v, sfs_view_node(v, n), -1, &s, &err),
			 0);
	assert_int_equal(s->size, sfs_view_node(v, n)->size);
	p = read_slice(f, s);
	*size = s->size;
	sfs_slice_free(s);
	return p;
}

/* One reader, no shuffle, windows of two samples of tar chunks: the
 * stream is the chunks' members in order, then one end-of-archive once
 * the stream is complete; a window file its two members and an
 * end-of-archive.  Built from the chunks, not from the windows. */
static void test_view_follow_tar_bytes(void **state)
{
	static const struct sfs_view_reader rd[] = { { 0, 0 } };
	const size_t plan_readers[] = { 0 };
	char *dir = tmpdir_new();
	struct sfs_window *wins[3] = { 0 };
	struct sfs_follow *f = NULL;
	struct sfs_error err = { 0 };
	struct sfs_view *a, *b;
	struct sfs_options o;
	struct buf want = { 0 }, one = { 0 };
	unsigned char *got;
	uint64_t size;
	size_t added, k;

	(void)state;
	tar_chunk(dir, "c0.tar", "a", 2);
	tar_chunk(dir, "c1.tar", "b", 3);
	assert_int_equal(sfs_follow_open(dir, NULL, false, NULL, NULL, NULL, &f,
					 &err),
			 0);
	assert_int_equal(sfs_follow_scan(f, &added, &err), 0);
	assert_int_equal(added, 2);
	sfs_options_init(&o);
	assert_int_equal(sfs_options_parse(&o, "shuffle=none", &err), 0);
	for (k = 0; k < 2; k++)
		assert_int_equal(sfs_window_build(f, &o.plan, 2, k, false,
						  plan_readers, 1, &wins[k],
						  &err),
				 0);
	a = follow(NULL, wins, 2, 0, rd, 1, false);
	/* a0 a1 b0 b1: no end-of-archive while the stream grows */
	tar_member(&want, "a0.txt", '0', "x0", 2);
	tar_member(&want, "a1.txt", '0', "x1", 2);
	tar_member(&want, "b0.txt", '0', "x0", 2);
	tar_member(&want, "b1.txt", '0', "x1", 2);
	got = node_bytes(f, a, walk(a, "0/0/stream.tar"), &size);
	assert_int_equal(size, want.len);
	assert_memory_equal(got, want.p, want.len);
	free(got);
	/* window 1: b0 b1 and an end-of-archive */
	tar_member(&one, "b0.txt", '0', "x0", 2);
	tar_member(&one, "b1.txt", '0', "x1", 2);
	tar_end(&one);
	got = node_bytes(f, a, walk(a, "0/0/window-00000001.tar"), &size);
	assert_int_equal(size, one.len);
	assert_memory_equal(got, one.p, one.len);
	free(got);
	/* the end: the last, partial window (b2), then the stream complete,
	 * its end-of-archive once, at its very end */
	f->ended = true;
	assert_int_equal(sfs_window_build(f, &o.plan, 2, 2, true, plan_readers,
					  1, &wins[2], &err),
			 0);
	b = follow(a, wins, 3, 0, rd, 1, true);
	tar_member(&want, "b2.txt", '0', "x2", 2);
	tar_end(&want);
	got = node_bytes(f, b, walk(b, "0/0/stream.tar"), &size);
	assert_int_equal(size, want.len);
	assert_memory_equal(got, want.p, want.len);
	free(got);
	sfs_view_free(a);
	sfs_view_free(b);
	for (k = 0; k < 3; k++)
		sfs_window_free(wins[k]);
	buf_free(&want);
	buf_free(&one);
	sfs_options_clear(&o);
	sfs_follow_free(f);
	tmpdir_remove(dir);
}

/* Two workers of two ranks, shuffled windows over several chunks: each
 * reader's stream, before and after the stream is complete, is byte for
 * byte its windows' bytes end to end as follow_read.c lays them, and a
 * window file its part of the window with the window's trailer. */
static void test_view_follow_stream_bytes(void **state)
{
	static const struct sfs_view_reader rd[] = {
		{ 0, 0 }, { 0, 1 }, { 1, 0 }, { 1, 1 }
	};
	const size_t plan_readers[] = { 0, 1, 2, 3 };
	char *dir = tmpdir_new(), name[32], path[64];
	struct sfs_window *wins[4] = { 0 };
	struct sfs_follow *f = NULL;
	struct sfs_error err = { 0 };
	struct sfs_view *v[2];
	struct sfs_options o;
	unsigned char *got, *want;
	uint64_t size;
	size_t added, k, r, len, i;

	(void)state;
	for (i = 0; i < 5; i++) {
		snprintf(name, sizeof(name), "c%zu.tar", i);
		snprintf(path, sizeof(path), "k%zu_", i);
		tar_chunk(dir, name, path, 3 + (int)i);
	}
	assert_int_equal(sfs_follow_open(dir, NULL, false, NULL, NULL, NULL, &f,
					 &err),
			 0);
	assert_int_equal(sfs_follow_scan(f, &added, &err), 0);
	assert_int_equal(f->idx->nsamples, 25);
	sfs_options_init(&o);
	assert_int_equal(
		sfs_options_parse(&o, "world=2,workers=2,seed=7", &err), 0);
	/* windows of 8: three complete, then one of 1 sample, padded */
	f->ended = true;
	for (k = 0; k < 4; k++)
		assert_int_equal(sfs_window_build(f, &o.plan, 8, k, k == 3,
						  plan_readers, 4, &wins[k],
						  &err),
				 0);
	assert_true(wins[0]->trailer_len > 0);
	v[0] = follow(NULL, wins, 3, 0, rd, 4, false);
	v[1] = follow(v[0], wins, 4, 0, rd, 4, true);
	for (i = 0; i < 2; i++) {
		for (r = 0; r < 4; r++) {
			snprintf(path, sizeof(path), "%u/%u/stream.tar",
				 rd[r].rank, rd[r].worker);
			len = stream_expected(f, wins, 3 + i, r, i == 1, &want);
			got = node_bytes(f, v[i], walk(v[i], path), &size);
			assert_int_equal(size, len);
			assert_memory_equal(got, want, len);
			free(got);
			free(want);
			for (k = 0; k < 3 + i; k++) {
				snprintf(path, sizeof(path),
					 "%u/%u/window-%08zu.tar", rd[r].rank,
					 rd[r].worker, k);
				len = stream_expected(f, wins + k, 1, r, true,
						      &want);
				got = node_bytes(f, v[i], walk(v[i], path),
						 &size);
				assert_int_equal(size, len);
				assert_memory_equal(got, want, len);
				free(got);
				free(want);
			}
		}
	}
	/* the trailer: only at the end of the complete stream */
	len = stream_expected(f, wins, 3, 0, false, &want);
	got = node_bytes(f, v[0], walk(v[0], "0/0/stream.tar"), &size);
	assert_int_equal(size, len);
	free(got);
	free(want);
	got = node_bytes(f, v[1], walk(v[1], "0/0/stream.tar"), &size);
	assert_int_equal(size, len + wins[3]->readers[0].bytes.size +
				       wins[3]->trailer_len);
	for (i = 0; i < wins[3]->trailer_len; i++)
		assert_int_equal(got[size - wins[3]->trailer_len + i], 0);
	free(got);
	sfs_view_free(v[0]);
	sfs_view_free(v[1]);
	for (k = 0; k < 4; k++)
		sfs_window_free(wins[k]);
	sfs_options_clear(&o);
	sfs_follow_free(f);
	tmpdir_remove(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_view_follow_first),
		cmocka_unit_test(test_view_follow_grow_one),
		cmocka_unit_test(test_view_follow_grow_many),
		cmocka_unit_test(test_view_follow_branch),
		cmocka_unit_test(test_view_follow_numbers_stable),
		cmocka_unit_test(test_view_follow_hidden),
		cmocka_unit_test(test_view_follow_resort),
		cmocka_unit_test(test_view_follow_bad_input),
		cmocka_unit_test(test_view_follow_tar_bytes),
		cmocka_unit_test(test_view_follow_stream_bytes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
