/*
 * The view (include/shardfs/view.h): the tree a mount shows, its names,
 * and the promise that a name identifies its bytes wherever it appears.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "shardfs/digest.h"
#include "shardfs/view.h"
#include "view/view_i.h"

static struct sfs_view *build(const struct sfs_index *idx, const char *opts,
			      uint32_t epochs)
{
	struct sfs_error err = { 0 };
	struct sfs_view_opts vo = { .epochs = epochs, .symlinks = true };
	struct sfs_view *v = NULL;

	sfs_options_init(&vo.options);
	assert_int_equal(sfs_options_parse(&vo.options, opts, &err), 0);
	assert_int_equal(sfs_view_build(idx, &vo, &v, &err), 0);
	sfs_options_clear(&vo.options);
	return v;
}

/* "rank/worker/name" of node n, into out. */
static void node_path(const struct sfs_view *v, uint32_t n, char *out,
		      size_t len)
{
	uint32_t up[16];
	size_t depth = 0, at = 0;

	for (; n && depth < 16; n = v->nodes[n].parent)
		up[depth++] = n;
	out[0] = '\0';
	while (depth--) {
		int k = snprintf(out + at, len - at, "%s%s", at ? "/" : "",
				 v->nodes[up[depth]].name);

		assert_true(k > 0 && (size_t)k < len - at);
		at += (size_t)k;
	}
}

/* The children names of the directory at path ("" the root), joined. */
static char *listing(const struct sfs_view *v, const char *path)
{
	static char out[4096];
	uint32_t dir = 0, i;
	char part[64];

	while (*path) {
		size_t k = strcspn(path, "/");
		int64_t c;

		snprintf(part, sizeof(part), "%.*s", (int)k, path);
		c = sfs_view_lookup(v, dir, part);
		assert_true(c >= 0);
		dir = (uint32_t)c;
		path += k + (path[k] == '/');
	}
	out[0] = '\0';
	for (i = 0; i < v->nodes[dir].nchildren; i++) {
		const struct sfs_view_node *c =
			&v->nodes[v->children[v->nodes[dir].first_child + i]];

		strcat(out, i ? " " : "");
		strcat(out, c->name);
		strcat(out, c->kind == SFS_NODE_LINK ? "@" : "");
	}
	return out;
}

static void test_view_tree_names_and_order(void **state)
{
	const uint64_t counts[] = { 4, 4, 4 };
	struct sfs_index *idx = mkindex(counts, 3, NULL);
	struct sfs_view *v;
	int64_t a, b;

	(void)state;
	v = build(idx, "world=2,workers=1,shuffle=none", 1);
	assert_string_equal(listing(v, ""), "0 1");
	assert_string_equal(listing(v, "0"), "0");
	assert_string_equal(listing(v, "0/0"),
			    "000000-s0000.tar@ 000001-s0001.0-1.tar");
	assert_string_equal(listing(v, "1/0"),
			    "000000-s0001.2-3.tar 000001-s0002.tar@");
	a = sfs_view_lookup(v, (uint32_t)sfs_view_lookup(v, 0, "1"), "0");
	b = sfs_view_lookup(v, (uint32_t)a, "000000-s0001.2-3.tar");
	assert_true(b > 0);
	/* a slice: two samples of 10 bytes, then tar's two zero blocks */
	assert_int_equal(v->nodes[b].size, 20 + 1024);
	assert_string_equal(sfs_view_source_path(v, &v->nodes[b]), "s0001.tar");
	assert_int_equal(sfs_view_next(v, (uint32_t)b),
			 sfs_view_lookup(v, (uint32_t)a, "000001-s0002.tar"));
	assert_int_equal(sfs_view_lookup(v, (uint32_t)a, "000002-s0002.tar"),
			 -1);
	/* a link's size is the length of its target, /src/s0002.tar */
	assert_int_equal(v->nodes[sfs_view_next(v, (uint32_t)b)].size, 14);
	sfs_view_free(v);

	/* rank= shows only those ranks; epochs=2 prefixes the epoch */
	v = build(idx, "world=2,workers=1,shuffle=none,rank=1,epoch=9", 2);
	assert_string_equal(listing(v, ""), "1");
	assert_string_equal(
		listing(v, "1/0"),
		"09-000000-s0001.2-3.tar 09-000001-s0002.tar@ 10-000000-s0001.2-3.tar 10-000001-s0002.tar@");
	sfs_view_free(v);
	sfs_index_free(idx);
}

/* One file seen in some view: its path and what its bytes are made of. */
struct seen {
	char *path;
	char *bytes; /* "shard:first+count,..." or "shard:whole" */
};

static int seen_cmp(const void *a, const void *b)
{
	const struct seen *x = a, *y = b;
	int c = strcmp(x->path, y->path);

	return c ? c : strcmp(x->bytes, y->bytes);
}

static void record(const struct sfs_view *v, struct seen **all, size_t *n,
		   size_t *cap)
{
	uint32_t i;

	for (i = 0; i < v->nnodes; i++) {
		const struct sfs_view_node *nd = &v->nodes[i];
		const struct sfs_plan *p = v->plans[nd->plan];
		const struct sfs_plan_file *f;
		char path[512], bytes[4096];
		size_t at, r;

		if (nd->kind == SFS_NODE_DIR)
			continue;
		f = &p->files[nd->file];
		node_path(v, i, path, sizeof(path));
		at = (size_t)snprintf(bytes, sizeof(bytes), "%zu:", f->shard);
		if (f->whole)
			snprintf(bytes + at, sizeof(bytes) - at, "whole");
		for (r = 0; !f->whole && r < f->nruns; r++) {
			const struct sfs_run *run =
				&sfs_plan_file_runs(p, f)[r];

			at += (size_t)snprintf(bytes + at, sizeof(bytes) - at,
					       "%llu+%llu,",
					       (unsigned long long)run->first,
					       (unsigned long long)run->count);
			assert_true(at < sizeof(bytes));
		}
		if (*n == *cap) {
			*cap = *cap ? 2 * *cap : 1024;
			*all = realloc(*all, *cap * sizeof(**all));
		}
		(*all)[*n].path = strdup(path);
		(*all)[*n].bytes = strdup(bytes);
		(*n)++;
	}
}

/*
 * A path that appears again, in another epoch or under other options,
 * holds the same bytes: over 25 epochs of every shuffle, partition,
 * remainder, block and batch, the files of one name are one list of runs
 * of one shard.
 */
static void test_view_names_identify_bytes(void **state)
{
	static const char *const modes[] = {
		"shuffle=none",
		"shuffle=units",
		"shuffle=samples",
		"shuffle=samples,block=4",
		"shuffle=units,block=5,remainder=drop",
		"shuffle=samples,partition=interleaved,batch=3",
		"shuffle=units,partition=interleaved,batch=2,remainder=drop",
		"shuffle=samples,batch=4,start=7",
	};
	static const char *const sizes[] = { "world=1,workers=1",
					     "world=2,workers=2",
					     "world=3,workers=1" };
	const uint64_t counts[] = { 7, 13, 5, 22, 9, 16 };
	struct sfs_index *idx = mkindex(counts, 6, NULL);
	struct seen *all = NULL;
	size_t n = 0, cap = 0, i, m, s, again = 0, conflicts = 0;
	uint64_t e;

	(void)state;
	for (m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
		for (s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
			for (e = 0; e < 25; e++) {
				char opts[256];
				struct sfs_view *v;

				snprintf(opts, sizeof(opts), "%s,%s,epoch=%llu",
					 modes[m], sizes[s],
					 (unsigned long long)e);
				v = build(idx, opts, 1);
				record(v, &all, &n, &cap);
				sfs_view_free(v);
			}
		}
	}
	qsort(all, n, sizeof(*all), seen_cmp);
	for (i = 1; i < n; i++) {
		if (strcmp(all[i].path, all[i - 1].path))
			continue;
		again++;
		if (strcmp(all[i].bytes, all[i - 1].bytes)) {
			conflicts++;
			print_message("%s: %s and %s\n", all[i].path,
				      all[i - 1].bytes, all[i].bytes);
		}
	}
	assert_int_equal(conflicts, 0);
	/* the check means something: many paths do appear again */
	assert_true(again > 1000);
	for (i = 0; i < n; i++) {
		free(all[i].path);
		free(all[i].bytes);
	}
	free(all);
	sfs_index_free(idx);
}

/*
 * What a slice's name says of runs r[0..n), between dots (docs/view.md):
 * "a-b" for one run, else "r" and the first 16 hex digits of the SHA-256
 * of the runs, each (first, count) as little-endian u64s.
 */
static void runs_name_part(const struct sfs_run *r, size_t n, char *out,
			   size_t len)
{
	unsigned char *le, sum[SFS_DIGEST_LEN];
	char hex[SFS_DIGEST_HEX];
	size_t i, k;

	if (n == 1) {
		snprintf(out, len, ".%llu-%llu.", (unsigned long long)r->first,
			 (unsigned long long)(r->first + r->count - 1));
		return;
	}
	le = malloc(16 * n);
	assert_non_null(le);
	for (i = 0; i < n; i++)
		for (k = 0; k < 8; k++) {
			le[16 * i + k] = (unsigned char)(r[i].first >> (8 * k));
			le[16 * i + 8 + k] =
				(unsigned char)(r[i].count >> (8 * k));
		}
	sfs_digest_buf(le, 16 * n, sum);
	sfs_digest_hex(sum, hex);
	snprintf(out, len, ".r%.16s.", hex);
	free(le);
}

/*
 * A shuffled slice's name is "r" and the hash of its runs: computed here
 * from the plan's runs, for units of 150 one-sample runs (more than one
 * buffer of the name's hashing).
 */
static void test_view_shuffled_name_is_hash_of_runs(void **state)
{
	const uint64_t counts[] = { 300, 17 };
	struct sfs_index *idx = mkindex(counts, 2, NULL);
	struct sfs_view *v = build(
		idx, "world=1,workers=1,shuffle=samples,block=150,epoch=3", 1);
	size_t checked = 0, most = 0;
	uint32_t i;

	(void)state;
	for (i = 0; i < v->nnodes; i++) {
		const struct sfs_view_node *n = &v->nodes[i];
		const struct sfs_plan_file *f;
		char want[32];

		if (n->kind != SFS_NODE_FILE)
			continue;
		f = sfs_view_file(v, n);
		if (f->nruns < 2)
			continue;
		runs_name_part(sfs_plan_file_runs(v->plans[n->plan], f),
			       f->nruns, want, sizeof(want));
		assert_non_null(strstr(n->name, want));
		most = f->nruns > most ? f->nruns : most;
		checked++;
	}
	assert_true(checked >= 2);
	assert_true(most > 64);
	sfs_view_free(v);
	sfs_index_free(idx);
}

/*
 * A view of thousands of slices, two epochs of them, is described on
 * several threads where the process may run on several CPUs: every
 * slice's name and size are those of its own runs.  Samples of unequal
 * sizes, so that a size tells whose it is.
 */
static void test_view_many_slices_named_and_sized(void **state)
{
	uint64_t counts[40], at = 0, k;
	struct sfs_index *idx;
	struct sfs_view *v;
	size_t i, files = 0, hashed = 0;

	(void)state;
	for (i = 0; i < 40; i++)
		counts[i] = 97 + i;
	idx = mkindex(counts, 40, NULL);
	for (i = 0; i < idx->nshards; i++) {
		const struct sfs_shard *sh = &idx->shards[i];

		for (k = 0; k <= sh->nsamples; k++) {
			idx->bounds_heap[sh->bounds_at + k] = at;
			at += 1 + (sh->first_sample + k) * 7 % 13;
		}
		/* a shard's boundaries end within it (index.h) */
		idx->shards[i].size = idx->bounds_heap[sh->bounds_at + k - 1];
	}
	v = build(idx, "world=2,workers=3,shuffle=samples,block=2,epoch=5", 2);
	for (i = 0; i < v->nnodes; i++) {
		const struct sfs_view_node *n = &v->nodes[i];
		const struct sfs_plan_file *f;
		const struct sfs_run *r;
		struct sfs_error err = { 0 };
		uint64_t size;
		char want[32];

		if (n->kind != SFS_NODE_FILE)
			continue;
		f = sfs_view_file(v, n);
		r = sfs_plan_file_runs(v->plans[n->plan], f);
		runs_name_part(r, f->nruns, want, sizeof(want));
		assert_non_null(strstr(n->name, want));
		assert_int_equal(sfs_slice_size(idx, NULL,
						&idx->shards[f->shard], -1, r,
						f->nruns, &size, &err),
				 0);
		assert_int_equal(n->size, size);
		files++;
		hashed += f->nruns > 1;
	}
	assert_true(files > 4000);
	assert_true(hashed > 1000 && hashed < files);
	sfs_view_free(v);
	sfs_index_free(idx);
}

/* A build asked to stop fails with -ECANCELED (ASan: leaving nothing);
 * one whose flag stays down builds the view. */
static void test_view_build_cancelled(void **state)
{
	uint64_t counts[] = { 10, 20, 30 };
	struct sfs_index *idx = mkindex(counts, 3, NULL);
	struct sfs_error err = { 0 };
	atomic_bool cancel;
	struct sfs_view_opts vo = { .epochs = 2, .cancel = &cancel };
	struct sfs_view *v = NULL;

	(void)state;
	sfs_options_init(&vo.options);
	assert_int_equal(sfs_options_parse(&vo.options,
					   "world=2,shuffle=samples,block=3",
					   &err),
			 0);
	atomic_init(&cancel, true);
	assert_int_equal(sfs_view_build(idx, &vo, &v, &err), -ECANCELED);
	assert_null(v);
	assert_string_equal(err.msg, "the view's build was cancelled");
	atomic_store(&cancel, false);
	assert_int_equal(sfs_view_build(idx, &vo, &v, &err), 0);
	assert_int_equal(v->nplans, 2);
	sfs_view_free(v);
	sfs_options_clear(&vo.options);
	sfs_index_free(idx);
}

/* Give shard i of idx the path path (mkindex names them s0000.tar ...). */
static void rename_shard(struct sfs_index *idx, size_t i, const char *path)
{
	free(idx->shards[i].path);
	idx->shards[i].path = strdup(path);
}

/*
 * Two shards of one basename in two sub-directories: their files never
 * share a name, in any epoch (a name keyed only by the basename held
 * de/'s samples in one epoch, en/'s in another); the directory is part of
 * the name, '/' and '%' escaped.
 */
static void test_view_names_identify_bytes_across_directories(void **state)
{
	const uint64_t counts[] = { 40, 40, 20 };
	struct sfs_index *idx = mkindex(counts, 3, NULL);
	struct seen *all = NULL;
	size_t n = 0, cap = 0, i, again = 0, conflicts = 0;
	struct sfs_view *v;
	uint64_t e;

	(void)state;
	rename_shard(idx, 0, "de/shard-000000.tar");
	rename_shard(idx, 1, "en/shard-000000.tar");
	rename_shard(idx, 2, "x%2Fy/shard-000000.tar");
	for (e = 0; e < 20; e++) {
		char opts[128];

		snprintf(opts, sizeof(opts),
			 "world=1,workers=1,block=20,epoch=%llu",
			 (unsigned long long)e);
		v = build(idx, opts, 1);
		record(v, &all, &n, &cap);
		sfs_view_free(v);
	}
	qsort(all, n, sizeof(*all), seen_cmp);
	for (i = 1; i < n; i++) {
		if (strcmp(all[i].path, all[i - 1].path))
			continue;
		again++;
		if (strcmp(all[i].bytes, all[i - 1].bytes)) {
			conflicts++;
			print_message("%s: %s and %s\n", all[i].path,
				      all[i - 1].bytes, all[i].bytes);
		}
	}
	assert_int_equal(conflicts, 0);
	assert_true(again > 20);
	for (i = 0; i < n; i++) {
		free(all[i].path);
		free(all[i].bytes);
	}
	free(all);
	v = build(idx, "world=1,workers=1,block=20,shuffle=none", 1);
	assert_string_equal(
		listing(v, "0/0"),
		"000000-de%2Fshard-000000.0-19.tar 000001-de%2Fshard-000000.20-39.tar "
		"000002-en%2Fshard-000000.0-19.tar 000003-en%2Fshard-000000.20-39.tar "
		"000004-x%252Fy%2Fshard-000000.tar@");
	sfs_view_free(v);
	sfs_index_free(idx);
}

/*
 * No name is longer than statfs's f_namemax (255): a longer one keeps the
 * start of its path, then '~' and 16 hex digits of the SHA-256 of the
 * path, its samples part and extension.
 */
static void test_view_long_names_shortened(void **state)
{
	const uint64_t counts[] = { 4, 4 };
	struct sfs_index *idx = mkindex(counts, 2, NULL);
	unsigned char d[SFS_DIGEST_LEN];
	char path[2][300], hex[SFS_DIGEST_HEX], want[600];
	struct sfs_view *v;
	uint32_t i;
	int k;

	(void)state;
	/* 246 bytes (263-byte names, untouched); 244 (255, they fit) */
	memset(path[0], 'a', 242);
	strcpy(path[0] + 242, ".tar");
	memset(path[1], 'a', 240);
	strcpy(path[1] + 240, ".tar");
	for (k = 0; k < 2; k++)
		rename_shard(idx, (size_t)k, path[k]);
	v = build(idx, "world=1,workers=1,block=3,shuffle=none", 1);
	for (i = 0; i < v->nnodes; i++)
		assert_true(strlen(v->nodes[i].name) <= 255);
	/* 000000- + 223 bytes of the path + ~hash + .0-2 + .tar: 255 */
	sfs_digest_buf(path[0], strlen(path[0]), d);
	sfs_digest_hex(d, hex);
	snprintf(want, sizeof(want), "000000-%.223s~%.16s.0-2.tar", path[0],
		 hex);
	assert_int_equal(strlen(want), 255);
	assert_non_null(strstr(listing(v, "0/0"), want));
	/* a name that fits stays as it was */
	snprintf(want, sizeof(want), "000002-%.240s.0-2.tar", path[1]);
	assert_int_equal(strlen(want), 255);
	assert_non_null(strstr(listing(v, "0/0"), want));
	sfs_view_free(v);
	sfs_index_free(idx);
}

/* What a name's start says is where the file stands in its directory. */
/* sfs_view_name_prefix against the snprintf it replaces. */
static void expect_prefix_as_printf(bool with, uint64_t epoch, int ew,
				    size_t seq, int sw, size_t len)
{
	char got[64], want[64];
	int rc = sfs_view_name_prefix(got, len, with, epoch, ew, seq, sw);
	int n = with ? snprintf(want, len, "%0*llu-%0*zu-", ew,
				(unsigned long long)epoch, sw, seq) :
		       snprintf(want, len, "%0*zu-", sw, seq);

	if ((size_t)n >= len) {
		assert_int_equal(rc, -ENAMETOOLONG);
		return;
	}
	assert_int_equal(rc, 0);
	assert_string_equal(got, want);
}

/*
 * The numbers of names, formatted by hand: the bytes snprintf gives
 * ("%0*llu-%0*zu-", "%llu-%llu"), the same refusals and cuts.
 */
static void test_view_name_numbers_as_printf(void **state)
{
	const uint64_t nums[] = { 0,	      1,	  9,
				  10,	      99,	  100,
				  999999,     1000000,	  123456789,
				  UINT32_MAX, 1ULL << 53, UINT64_MAX - 1,
				  UINT64_MAX };
	const size_t lens[] = { 1, 2, 5, 8, 12, 22, 42, 64 };
	size_t a, b, l, n = sizeof(nums) / sizeof(*nums);
	char got[64], want[64];
	int w, ew;

	(void)state;
	for (a = 0; a < n; a++)
		for (b = 0; b < n; b++)
			for (w = 0; w <= 22; w += 1 + (w > 8))
				for (ew = 1; ew <= 21; ew += 4)
					for (l = 0; l < 8; l++) {
						expect_prefix_as_printf(
							true, nums[a], ew,
							(size_t)nums[b], w,
							lens[l]);
						expect_prefix_as_printf(
							false, nums[a], ew,
							(size_t)nums[b], w,
							lens[l]);
					}
	for (a = 0; a < n; a++)
		for (b = a; b < n; b++)
			for (l = 0; l < 8; l++) {
				struct sfs_run r = { .first = nums[a],
						     .count = nums[b] + 1 -
							      nums[a] };

				assert_int_equal(sfs_view_runs_name(NULL, &r, 1,
								    got,
								    lens[l]),
						 0);
				snprintf(want, lens[l], "%llu-%llu",
					 (unsigned long long)nums[a],
					 (unsigned long long)nums[b]);
				assert_string_equal(got, want);
			}
}

static void test_view_name_seq_round_trip(void **state)
{
	const uint64_t counts[] = { 7, 13, 5, 22, 9 };
	struct sfs_index *idx = mkindex(counts, 5, NULL);
	uint32_t epochs, i, k;
	uint64_t seq = 0;

	(void)state;
	for (epochs = 1; epochs <= 3; epochs += 2) {
		struct sfs_view *v = build(
			idx,
			"world=2,workers=2,block=2,shuffle=samples,epoch=8",
			epochs);

		for (i = 0; i < v->nnodes; i++) {
			const struct sfs_view_node *d = &v->nodes[i];
			uint64_t want = 0, epoch = UINT64_MAX;

			for (k = 0; d->kind == SFS_NODE_DIR && k < d->nchildren;
			     k++) {
				const struct sfs_view_node *c =
					&v->nodes[v->children[d->first_child +
							      k]];
				uint64_t e = strtoull(c->name, NULL, 10);
				size_t n;

				if (c->kind == SFS_NODE_DIR)
					continue;
				n = sfs_view_name_seq(c->name, epochs > 1,
						      &seq);
				assert_true(n > 0);
				assert_int_equal(c->name[n - 1], '-');
				/* each epoch numbers its files from 0 */
				if (epochs > 1 && e != epoch) {
					epoch = e;
					want = 0;
				}
				assert_int_equal(seq, want++);
			}
		}
		sfs_view_free(v);
	}
	assert_int_equal(sfs_view_name_seq("000012-shard-3.tar", false, &seq),
			 7);
	assert_int_equal(seq, 12);
	assert_int_equal(sfs_view_name_seq("08-000012-x.tar", true, &seq), 10);
	assert_int_equal(seq, 12);
	assert_int_equal(sfs_view_name_seq("shard-3.tar", false, &seq), 0);
	assert_int_equal(sfs_view_name_seq("12x-a", false, &seq), 0);
	assert_int_equal(sfs_view_name_seq("000012-x", true, &seq), 0);
	sfs_index_free(idx);
}

/* user.shardfs.range: each run its first sample and, when longer, its
 * last; over SFS_XATTR_MAX bytes E2BIG, whatever the numbers' widths. */
static void test_view_xattr_range(void **state)
{
	const struct sfs_run runs[] = { { 3, 7 }, { 12, 1 }, { 20, 2 } };
	struct sfs_run *many;
	size_t i, n;
	char *s = NULL;

	(void)state;
	assert_int_equal(sfs_view_xattr_range(runs, 3, &s), 0);
	assert_string_equal(s, "3-9,12,20-21");
	free(s);
	assert_int_equal(sfs_view_xattr_range(runs, 0, &s), 0);
	assert_string_equal(s, "");
	free(s);
	/* "0" and 32767 ",0": 65535 bytes, one short of the limit, then a
	 * run of the widest numbers, which must not be written past it */
	n = 1 + 32767 + 1;
	many = calloc(n, sizeof(*many));
	assert_non_null(many);
	for (i = 0; i < n - 1; i++)
		many[i] = (struct sfs_run){ 0, 1 };
	many[n - 1] = (struct sfs_run){ UINT64_MAX - 1, 2 };
	assert_int_equal(sfs_view_xattr_range(many, n - 1, &s), 0);
	assert_int_equal(strlen(s), 65535);
	free(s);
	assert_int_equal(sfs_view_xattr_range(many, n, &s), -E2BIG);
	free(many);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_view_name_numbers_as_printf),
		cmocka_unit_test(test_view_name_seq_round_trip),
		cmocka_unit_test(test_view_tree_names_and_order),
		cmocka_unit_test(test_view_names_identify_bytes),
		cmocka_unit_test(
			test_view_names_identify_bytes_across_directories),
		cmocka_unit_test(test_view_long_names_shortened),
		cmocka_unit_test(test_view_shuffled_name_is_hash_of_runs),
		cmocka_unit_test(test_view_many_slices_named_and_sized),
		cmocka_unit_test(test_view_build_cancelled),
		cmocka_unit_test(test_view_xattr_range),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
