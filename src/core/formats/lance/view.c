/*
 * A reader's Lance dataset: the files that make a Lance dataset of exactly
 * some live rows of a source dataset, in a given order, without copying
 * data (lance.h, sfs_lance_view_build).
 *
 * Every run of the reader's rows is cut at fragment ends; each piece
 * becomes a fragment of the new manifest, numbered from 0 in run order,
 * whose data files are the source fragment's (the same paths below data/:
 * the view shows the source's files there) and whose deletion file, a
 * Roaring bitmap written here, deletes every row of those files but the
 * piece's.  The manifest keeps of the source's only the fields it knows
 * to be the same for the view, byte for byte: the schema and its
 * metadata, the timestamp, the writer, the data format, the config and
 * the table metadata; its fragments are the pieces, its version a number
 * naming the rest of its bytes (so is each deletion file's id: a name of
 * the view identifies its bytes, docs/view.md), its feature flags the
 * source's less stable row ids (the new fragments have no row id
 * sequences) and with deletion files.  Every other field is left
 * out: some are positions in the source's manifest file (the transaction,
 * the index section), others things the view has not (a branch, base
 * paths, tags).  Of a source fragment, its data files are copied byte for
 * byte.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "formats/format_i.h"
#include "formats/lance/lance_i.h"
#include "shardfs/digest.h"
#include "shardfs/lance.h"
#include "shardfs/shard.h"
#include "shardfs/util.h"

/* ---- output ---- */

struct out {
	unsigned char *p;
	size_t len, cap;
	int oom;
};

static void put(struct out *o, const void *data, size_t n)
{
	if (o->oom || !n)
		return;
	if (n > SIZE_MAX - o->len || sfs_grow(&o->p, &o->cap, o->len + n, 1)) {
		o->oom = 1;
		return;
	}
	memcpy(o->p + o->len, data, n);
	o->len += n;
}

static void put_varint(struct out *o, uint64_t v)
{
	unsigned char b[10];
	size_t n = 0;

	while (v >= 0x80) {
		b[n++] = (unsigned char)(v | 0x80);
		v >>= 7;
	}
	b[n++] = (unsigned char)v;
	put(o, b, n);
}

static void put_le(struct out *o, uint64_t v, unsigned n)
{
	unsigned char b[8];
	unsigned i;

	for (i = 0; i < n; i++)
		b[i] = (unsigned char)(v >> 8 * i);
	put(o, b, n);
}

static void put_vfield(struct out *o, unsigned field, uint64_t v)
{
	put_varint(o, (uint64_t)field << 3 | SFS_PB_VARINT);
	put_varint(o, v);
}

static void put_lfield(struct out *o, unsigned field, const void *p, size_t n)
{
	put_varint(o, (uint64_t)field << 3 | SFS_PB_LEN);
	put_varint(o, n);
	put(o, p, n);
}

/* ---- the rows of a piece ---- */

struct span {
	uint64_t first, count;
};

struct spans {
	struct span *s;
	size_t n, cap;
};

static int spans_add(void *arg, uint64_t first, uint64_t count)
{
	struct spans *sp = arg;

	if (SFS_GROW(sp->s, sp->cap, sp->n + 1))
		return -ENOMEM;
	sp->s[sp->n++] = (struct span){ first, count };
	return 0;
}

/*
 * The physical runs of live rows [lo, hi) (counted among the fragment's
 * live rows) of a fragment whose live rows are the runs live: into sel.
 */
static int select_live(const struct spans *live, uint64_t lo, uint64_t hi,
		       struct spans *sel)
{
	uint64_t seen = 0;
	size_t i;
	int rc = 0;

	sel->n = 0;
	for (i = 0; !rc && i < live->n && seen < hi; i++) {
		uint64_t a = seen, b = seen + live->s[i].count;
		uint64_t from = a > lo ? a : lo, to = b < hi ? b : hi;

		if (from < to)
			rc = spans_add(sel, live->s[i].first + (from - a),
				       to - from);
		seen = b;
	}
	return rc;
}

/* Bitmaps larger than this without run containers are written with them
 * (cookie 12347) where they are smaller; below it, as Lance writes its
 * own (12346: arrays and bitsets only). */
#define RUNS_FROM ((uint64_t)64 << 10)

/* A container of a bitmap being written: its key, how many rows it
 * deletes in how many runs, the first deleted run in it, its form. */
struct container {
	uint32_t key, card, nruns;
	size_t first;
	enum { ARRAY, BITSET, RUN } form;
};

/* The bytes container c takes in form f. */
static uint64_t container_size(const struct container *c, int f)
{
	if (f == RUN)
		return 2 + 4 * (uint64_t)c->nruns;
	return c->card > 4096 ? 8192 : 2 * (uint64_t)c->card;
}

/* Container c's rows: the deleted runs del->s[c->first ...] within it. */
static void put_container(const struct container *c, const struct spans *del,
			  unsigned char *bits, struct out *o)
{
	uint64_t lo = (uint64_t)c->key << 16, hi = lo + 65536, a, e, r;
	size_t j;

	if (c->form == RUN)
		put_le(o, c->nruns, 2);
	if (c->form == BITSET)
		memset(bits, 0, 8192);
	for (j = c->first; j < del->n && del->s[j].first < hi; j++) {
		a = del->s[j].first > lo ? del->s[j].first : lo;
		e = del->s[j].first + del->s[j].count;
		e = e < hi ? e : hi;
		if (c->form == RUN) {
			put_le(o, a - lo, 2);
			put_le(o, e - a - 1, 2);
			continue;
		}
		for (r = a; r < e; r++) {
			if (c->form == ARRAY)
				put_le(o, r - lo, 2);
			else
				bits[(r - lo) >> 3] |=
					(unsigned char)(1 << (r & 7));
		}
	}
	if (c->form == BITSET)
		put(o, bits, 8192);
}

/* The rows of [0, rows) outside the sorted runs keep, as runs into del. */
static int deleted_runs(const struct spans *keep, uint64_t rows,
			struct spans *del)
{
	uint64_t cursor = 0;
	size_t i;
	int rc = 0;

	/* the gaps between the kept runs */
	for (i = 0; !rc && i <= keep->n; i++) {
		uint64_t next = i < keep->n ? keep->s[i].first : rows;

		if (next > cursor)
			rc = spans_add(del, cursor, next - cursor);
		if (i < keep->n)
			cursor = keep->s[i].first + keep->s[i].count;
	}
	return rc;
}

/* The containers the runs del touch, with their rows and runs, into
 * *cp (*np of them); the rows into *deleted.  0 or -ENOMEM. */
static int containers_of(const struct spans *del, struct container **cp,
			 size_t *np, uint64_t *deleted)
{
	struct container *c = NULL;
	size_t n = 0, cap = 0, j;
	int rc = 0;

	for (j = 0; !rc && j < del->n; j++) {
		uint64_t a = del->s[j].first, e = a + del->s[j].count, end;

		for (; a < e; a = end) {
			uint32_t key = (uint32_t)(a >> 16);

			end = ((uint64_t)key + 1) << 16;
			end = end < e ? end : e;
			if (!n || c[n - 1].key != key) {
				if (SFS_GROW(c, cap, n + 1)) {
					rc = -ENOMEM;
					break;
				}
				c[n++] = (struct container){ .key = key,
							     .first = j };
			}
			c[n - 1].card += (uint32_t)(end - a);
			c[n - 1].nruns++;
			*deleted += end - a;
		}
	}
	*cp = c;
	*np = n;
	return rc;
}

/*
 * Each container's form (see write_bitmap): the bitmap's size, *runs set
 * when some container is written as runs.
 */
static uint64_t choose_forms(struct container *c, size_t n, bool *runs)
{
	uint64_t plain = 8 + 8 * (uint64_t)n, size;
	size_t i, nrun = 0;

	*runs = false;
	for (i = 0; i < n; i++) {
		c[i].form = c[i].card > 4096 ? BITSET : ARRAY;
		plain += container_size(&c[i], c[i].form);
	}
	if (plain <= RUNS_FROM)
		return plain;
	size = 4 + (n + 7) / 8 + 4 * (uint64_t)n +
	       (n >= 4 ? 4 * (uint64_t)n : 0);
	for (i = 0; i < n; i++) {
		if (container_size(&c[i], RUN) <
		    container_size(&c[i], c[i].form)) {
			c[i].form = RUN;
			nrun++;
		}
		size += container_size(&c[i], c[i].form);
	}
	*runs = nrun > 0;
	return *runs ? size : plain;
}

/* The bitmap's cookie, its run flags, the containers' headers and their
 * offsets. */
static void put_roaring_header(struct out *o, const struct container *c,
			       size_t n, bool runs)
{
	uint64_t at;
	size_t i;

	if (runs) {
		unsigned char flags = 0;

		put_le(o, 12347 | (uint64_t)(n - 1) << 16, 4);
		for (i = 0; i < n; i++) {
			flags |= (unsigned char)((c[i].form == RUN) << (i % 8));
			if (i % 8 == 7 || i + 1 == n) {
				put(o, &flags, 1);
				flags = 0;
			}
		}
	} else {
		put_le(o, 12346, 4);
		put_le(o, n, 4);
	}
	for (i = 0; i < n; i++) {
		put_le(o, c[i].key, 2);
		put_le(o, c[i].card - 1, 2);
	}
	/* offsets count from the start of the bitmap, past the offsets */
	at = o->len + (!runs || n >= 4 ? 4 * (uint64_t)n : 0);
	for (i = 0; (!runs || n >= 4) && i < n; i++) {
		put_le(o, at, 4);
		at += container_size(&c[i], c[i].form);
	}
}

/*
 * A portable Roaring bitmap of every row of [0, rows) outside the sorted
 * runs keep: the piece's deletion file.  Without run containers, as
 * Lance writes them, up to RUNS_FROM bytes; past that a container whose
 * runs are smaller is written as runs (a fragment of 2^32 rows of which
 * a reader keeps a few: 65 536 full containers, 512 MiB as bitsets,
 * ~0.9 MB as runs).  Its size is known before anything is written: more
 * than budget is -EFBIG, *need set.  Sets *deleted.  Returns 0, -EFBIG or
 * -ENOMEM.
 */
static int write_bitmap(const struct spans *keep, uint64_t rows,
			uint64_t budget, struct out *o, uint64_t *deleted,
			uint64_t *need)
{
	struct spans del = { 0 };
	struct container *c = NULL;
	unsigned char *bits = NULL;
	size_t n = 0, i;
	bool runs;
	int rc;

	*deleted = 0;
	rc = deleted_runs(keep, rows, &del);
	if (!rc)
		rc = containers_of(&del, &c, &n, deleted);
	if (rc)
		goto out;
	*need = choose_forms(c, n, &runs);
	if (*need > budget) {
		rc = -EFBIG;
		goto out;
	}
	if (!(bits = malloc(8192))) {
		rc = -ENOMEM;
		goto out;
	}
	put_roaring_header(o, c, n, runs);
	for (i = 0; i < n; i++)
		put_container(&c[i], &del, bits, o);
	rc = o->oom ? -ENOMEM : 0;
out:
	free(bits);
	free(c);
	free(del.s);
	return rc;
}

/* ---- the view ---- */

/*
 * A number that names n bytes: the first 8 bytes of their SHA-256, below
 * limit, never 0.  The view's file names carry it, so that a name
 * identifies its bytes (docs/view.md): a deletion file's id, the
 * manifest's version.  Returns 0 or -ENOMEM.
 */
static int name_of(const void *p, size_t n, uint64_t limit, uint64_t *out)
{
	unsigned char d[SFS_DIGEST_LEN];
	struct sfs_digest *dg = sfs_digest_new();

	if (!dg)
		return -ENOMEM;
	sfs_digest_update(dg, p, n);
	if (sfs_digest_final(dg, d)) {
		sfs_digest_free(dg);
		return -ENOMEM;
	}
	sfs_digest_free(dg);
	*out = sfs_le64(d) % (limit - 1) + 1;
	return 0;
}

static int add_file(struct sfs_dataset_view *v, size_t *cap, char *path,
		    struct out *bytes, char *source)
{
	if (!path || (bytes && bytes->oom) ||
	    SFS_GROW(v->files, *cap, v->nfiles + 1)) {
		free(path);
		free(source);
		if (bytes)
			free(bytes->p);
		return -ENOMEM;
	}
	v->files[v->nfiles++] = (struct sfs_dataset_file){
		.path = path,
		.bytes = bytes ? bytes->p : NULL,
		.len = bytes ? bytes->len : 0,
		.source = source,
	};
	return 0;
}

/* The raw DataFile fields (2) of source fragment fr (its message at
 * fr->at in the manifest file buf), in order, appended to frag. */
static int copy_data_files(const unsigned char *buf, size_t len,
			   const char *path,
			   const struct sfs_lance_fragment *fr,
			   struct out *frag, struct sfs_error *err)
{
	struct sfs_pb_reader m, df;
	struct sfs_pb_field fl;
	int rc;

	if (fr->at > len || fr->len > len - fr->at)
		return -EINVAL;
	sfs_pb_init(&m, buf + fr->at, (size_t)fr->len, fr->at, path,
		    "DataFragment", err);
	m.depth = 1;
	while ((rc = sfs_pb_next(&m, &fl)) > 0) {
		if (fl.number == 2) {
			size_t start = fl.at;

			rc = sfs_pb_message(&m, "DataFile", &df);
			if (!rc)
				put(frag, m.buf + start, m.pos - start);
		} else {
			rc = sfs_pb_skip(&m, &fl);
		}
		if (rc)
			return rc;
	}
	return rc;
}

/* The source Manifest's fields a view keeps, byte for byte. */
static int copy_manifest_fields(const unsigned char *buf, size_t len,
				const char *path, struct out *o,
				uint64_t *reader_flags, uint64_t *writer_flags,
				struct sfs_error *err)
{
	struct sfs_pb_reader r;
	struct sfs_pb_field f;
	uint64_t pos = sfs_le64(buf + len - 16), v;
	int rc;

	sfs_pb_init(&r, buf + pos + 4, sfs_le32(buf + pos), pos + 4, path,
		    "Manifest", err);
	while ((rc = sfs_pb_next(&r, &f)) > 0) {
		size_t start = f.at;

		switch (f.number) {
		case 9:
		case 10:
			rc = sfs_pb_varint(&r, &v);
			*(f.number == 9 ? reader_flags : writer_flags) = v;
			continue;
		case 1: /* fields: the schema */
		case 5: /* schema_metadata */
		case 7: /* timestamp */
		case 13: /* writer_version */
		case 15: /* data_format */
		case 16: /* config */
		case 19: /* table_metadata */
			rc = sfs_pb_skip(&r, &f);
			if (!rc)
				put(o, r.buf + start, r.pos - start);
			break;
		default:
			/* the fragments and version are the view's own; the
			 * rest may be positions in the source's manifest file
			 * (the transaction, 21 or 23 by Lance's version; the
			 * index section) or things the view has not */
			rc = sfs_pb_skip(&r, &f);
		}
		if (rc)
			return rc;
	}
	return rc;
}

/*
 * The data files of source fragment f of ds that a view serves, each
 * checked as sfs_lance_open checks them (the dataset's open for a view
 * did not: sfs_lance_open_view), added to v as the source's files with
 * their size and mtime now: a view serves them only as they are.
 * Returns 0, -EINVAL (the message names the file) or -ENOMEM.
 */
static int add_data_files(int dirfd, const struct sfs_lance_dataset *ds,
			  size_t f, const char *root,
			  struct sfs_dataset_view *v, size_t *cap,
			  struct sfs_error *err)
{
	const struct sfs_lance_fragment *fr = &ds->m->fragments[f];
	struct sfs_lance_fragment whole = { 0 };
	size_t k;
	int rc = 0;

	if (!fr->files) { /* opened for a view: decode it now */
		rc = sfs_lance_fragment_decode(
			ds->buf, ds->len, ds->manifest_path, fr, &whole, err);
		if (rc)
			return rc;
		whole.deleted = fr->deleted;
		fr = &whole;
	}
	for (k = 0; !rc && k < fr->nfiles; k++) {
		const char *name = fr->files[k].path;
		char *p = NULL, *s = NULL;
		struct stat st;

		rc = sfs_lance_check_data_file(dirfd, root, ds->manifest_path,
					       fr, &fr->files[k], &st, err);
		if (rc)
			break;
		if (asprintf(&p, "data/%s", name) < 0) {
			rc = -ENOMEM;
			break;
		}
		if (asprintf(&s, "%s%sdata/%s", root, *root ? "/" : "", name) <
		    0) {
			free(p);
			rc = -ENOMEM;
			break;
		}
		rc = add_file(v, cap, p, NULL, s);
		if (!rc) {
			v->files[v->nfiles - 1].size = (uint64_t)st.st_size;
			v->files[v->nfiles - 1].mtime_ns = sfs_mtime_ns(&st);
			v->files[v->nfiles - 1].uid = st.st_uid;
			v->files[v->nfiles - 1].gid = st.st_gid;
			v->files[v->nfiles - 1].mode =
				(uint16_t)(st.st_mode & 0777);
		}
	}
	if (rc == -ENOMEM)
		rc = sfs_errorf(err, rc, "out of memory");
	for (k = 0; k < whole.nfiles; k++) {
		free(whole.files[k].path);
		free(whole.files[k].fields);
	}
	free(whole.files);
	return rc;
}

/* The fragment of ds whose live rows [first[f], first[f + 1]) hold row a
 * (a below the dataset's rows). */
static size_t fragment_of(const uint64_t *first, size_t nfragments, uint64_t a)
{
	return SFS_PARTITION_POINT(i, 1, nfragments, first[i] <= a) - 1;
}

/* A reader's dataset being built (sfs_lance_view_build's state). */
struct builder {
	int dirfd;
	const struct sfs_lance_dataset *ds;
	struct sfs_dataset_view *v;
	size_t cap; /* of v->files */
	char *root; /* the dataset's directory */
	uint64_t *first; /* fragment f's live rows begin at first[f] */
	unsigned char *used; /* fragment f's data files are in v */
	struct spans live, sel; /* fragment live_of's live rows; the run's */
	size_t live_of;
	struct out man, file; /* the manifest; the deletion file being made */
	uint64_t nfrag; /* the view's fragments so far */
	uint64_t held, need; /* bytes of the bitmaps written; the last's */
	struct sfs_error *err;
};

/* The dataset's directory: the manifest path less _versions/<name>. */
static void strip_versions(char *root)
{
	char *slash = strrchr(root, '/');

	*slash = '\0';
	slash = strrchr(root, '/');
	if (slash)
		*slash = '\0';
	else
		*root = '\0';
}

/* The deletion file of the view's fragment frag (deleted rows of it, in
 * b->file): its DeletionFile message, and the file added to the view. */
static int add_deletion(struct builder *b, struct out *frag, uint64_t deleted)
{
	struct out del = { 0 };
	uint64_t id = 0;
	char *path = NULL;
	int rc;

	rc = b->file.oom ? -ENOMEM :
			   name_of(b->file.p, b->file.len, UINT64_MAX, &id);
	if (rc)
		return rc;
	put_vfield(&del, 1, SFS_LANCE_DELETION_BITMAP);
	put_vfield(&del, 2, 1);
	put_vfield(&del, 3, id);
	put_vfield(&del, 4, deleted);
	put_lfield(frag, 3, del.p, del.len);
	free(del.p);
	if (asprintf(&path, "_deletions/%llu-1-%llu.bin",
		     (unsigned long long)b->nfrag, (unsigned long long)id) < 0)
		path = NULL;
	rc = add_file(b->v, &b->cap, path, &b->file, NULL);
	memset(&b->file, 0, sizeof(b->file));
	return rc;
}

/*
 * Live rows [a, hi) of fragment f as a fragment of the view: the source's
 * data files, a deletion file for the rows it leaves out, its message in
 * the view's manifest.
 */
static int view_fragment(struct builder *b, size_t f, uint64_t a, uint64_t hi)
{
	const struct sfs_lance_dataset *ds = b->ds;
	const struct sfs_lance_fragment *fr = &ds->m->fragments[f];
	uint64_t deleted = 0;
	struct out frag = { 0 };
	int rc = 0;

	/* its data files first: checked against the rows the manifest
	 * claims before a bitmap is sized by them */
	if (!b->used[f])
		rc = add_data_files(b->dirfd, ds, f, b->root, b->v, &b->cap,
				    b->err);
	b->used[f] = 1;
	if (!rc && b->live_of != f) {
		b->live.n = 0;
		rc = sfs_lance_live_runs(b->dirfd, ds, f, spans_add, &b->live,
					 b->err);
		b->live_of = f;
	}
	if (!rc)
		rc = select_live(&b->live, a - b->first[f], hi - b->first[f],
				 &b->sel);
	b->file.len = 0;
	if (!rc)
		rc = write_bitmap(&b->sel, fr->physical_rows,
				  SFS_LANCE_VIEW_MAX - b->held, &b->file,
				  &deleted, &b->need);
	if (rc == -EFBIG)
		rc = sfs_errorf(
			b->err, rc,
			"%s: fragment %llu (%llu rows): the deletion file a reader's rows of it need takes %llu bytes, past the %llu left of the %llu a reader's dataset may hold (SFS_LANCE_VIEW_MAX): give each reader fewer, longer runs (a larger block, shuffle=units), or rewrite the dataset in smaller fragments",
			ds->manifest_path, (unsigned long long)fr->id,
			(unsigned long long)fr->physical_rows,
			(unsigned long long)b->need,
			(unsigned long long)(SFS_LANCE_VIEW_MAX - b->held),
			(unsigned long long)SFS_LANCE_VIEW_MAX);
	b->held += b->file.len;
	put_vfield(&frag, 1, b->nfrag);
	if (!rc)
		rc = copy_data_files(ds->buf, ds->len, ds->manifest_path, fr,
				     &frag, b->err);
	if (!rc && deleted)
		rc = add_deletion(b, &frag, deleted);
	put_vfield(&frag, 4, fr->physical_rows);
	put_lfield(&b->man, 2, frag.p, frag.len);
	free(frag.p);
	b->v->rows += hi - a;
	b->nfrag++;
	return rc;
}

/* The dataset's live rows [a, e): a view fragment for each fragment they
 * touch. */
static int view_run(struct builder *b, uint64_t a, uint64_t e)
{
	const struct sfs_lance_dataset *ds = b->ds;
	size_t f;
	int rc = 0;

	if (e < a || e > ds->rows)
		return sfs_errorf(b->err, -EINVAL,
				  "%s: rows %llu..%llu are past its %llu",
				  ds->manifest_path, (unsigned long long)a,
				  (unsigned long long)e,
				  (unsigned long long)ds->rows);
	f = fragment_of(b->first, ds->m->nfragments, a);
	while (!rc && a < e) {
		uint64_t hi = e < b->first[f + 1] ? e : b->first[f + 1];

		if (hi != a) /* else a fragment without live rows */
			rc = view_fragment(b, f, a, hi);
		a = hi;
		f++;
	}
	return rc;
}

/*
 * The view's manifest file: the source's fields kept, its flags, its
 * fragments' count, its version (named by its bytes), the footer.
 */
static int add_manifest(struct builder *b, uint64_t rflags, uint64_t wflags)
{
	const unsigned char *src = b->ds->buf;
	size_t len = b->ds->len;
	struct out file = { 0 };
	uint64_t version = 0;
	char *mname = NULL;
	int rc;

	rflags &= ~(uint64_t)SFS_LANCE_FLAG_STABLE_ROW_IDS;
	wflags &= ~(uint64_t)SFS_LANCE_FLAG_STABLE_ROW_IDS;
	put_vfield(&b->man, 9, rflags | SFS_LANCE_FLAG_DELETION_FILES);
	put_vfield(&b->man, 10, wflags | SFS_LANCE_FLAG_DELETION_FILES);
	if (b->nfrag)
		put_vfield(&b->man, 11, b->nfrag - 1);
	/* its version names the rest of its bytes; below 10^18, so that the
	 * name "{version}.manifest" is one of Lance's V1 names (a V2 name
	 * has 20 digits) */
	rc = b->man.oom ? -ENOMEM :
			  name_of(b->man.p, b->man.len, 1000000000000000000ULL,
				  &version);
	put_vfield(&b->man, 3, version);
	/* the file: the length, the manifest, the footer */
	put_le(&file, b->man.len, 4);
	put(&file, b->man.p, b->man.len);
	put_le(&file, 0, 8);
	put(&file, src + len - 8, 8); /* the source's versions and LANC */
	if (!rc && asprintf(&mname, "_versions/%llu.manifest",
			    (unsigned long long)version) < 0)
		rc = -ENOMEM;
	if (!rc)
		rc = add_file(b->v, &b->cap, mname, &file, NULL);
	else
		free(file.p);
	if (rc)
		rc = sfs_errorf(b->err, rc, "out of memory");
	return rc;
}

int sfs_lance_view_build(int dirfd, const struct sfs_lance_dataset *ds,
			 const struct sfs_run *runs, size_t nruns,
			 struct sfs_dataset_view **out, struct sfs_error *err)
{
	struct builder b = {
		.dirfd = dirfd, .ds = ds, .live_of = SIZE_MAX, .err = err
	};
	uint64_t rflags = 0, wflags = 0;
	size_t f, i;
	int rc;

	*out = NULL;
	b.v = calloc(1, sizeof(*b.v));
	if (!b.v ||
	    !(b.first = calloc(ds->m->nfragments + 1, sizeof(*b.first))) ||
	    !(b.used = calloc(ds->m->nfragments + 1, 1)) ||
	    !(b.root = strdup(ds->manifest_path))) {
		rc = sfs_errorf(err, -ENOMEM, "out of memory");
		goto out;
	}
	strip_versions(b.root);
	for (f = 0; f < ds->m->nfragments; f++)
		b.first[f + 1] = b.first[f] +
				 ds->m->fragments[f].physical_rows -
				 ds->m->fragments[f].deleted;
	rc = copy_manifest_fields(ds->buf, ds->len, ds->manifest_path, &b.man,
				  &rflags, &wflags, err);
	for (i = 0; !rc && i < nruns; i++)
		rc = view_run(&b, runs[i].first, runs[i].first + runs[i].count);
	free(b.file.p);
	if (rc == -ENOMEM && !err->msg[0])
		rc = sfs_errorf(err, rc, "out of memory");
	if (!rc)
		rc = add_manifest(&b, rflags, wflags);
	if (!rc) { /* the view's: where the dataset is */
		b.v->root = b.root;
		b.root = NULL;
	}
out:
	free(b.man.p);
	free(b.live.s);
	free(b.sel.s);
	free(b.first);
	free(b.used);
	free(b.root);
	if (rc)
		sfs_dataset_view_free(b.v);
	else
		*out = b.v;
	return rc;
}
