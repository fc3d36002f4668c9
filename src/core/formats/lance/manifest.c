/*
 * Lance manifests: finding a dataset's newest one and decoding it.
 *
 * A manifest file (written by Lance; checked against pylance 14.0.2, see
 * tests/mount/lance/) is: other sections (the transaction, the index section),
 * the manifest as a u32 little-endian length and that many bytes of
 * protobuf `Manifest`, then a 16-byte footer: the u64 position of that
 * length, u16 major and u16 minor version, "LANC".  The fields read of
 * each message are in its table below (manifest_defs, ...); every other
 * field is skipped by its wire type.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats/format_i.h"
#include "formats/lance/lance_i.h"
#include "shardfs/lance.h"
#include "shardfs/util.h"

#define FOOTER_LEN 16
#define MAGIC "LANC"
#define REWRITE_FIX                                   \
	"rewrite the dataset with a current pylance " \
	"(lance.write_dataset(lance.dataset(old).to_table(), new))"

static void data_file_clear(struct sfs_lance_data_file *df)
{
	free(df->path);
	free(df->fields);
}

static void fragment_clear(struct sfs_lance_fragment *f)
{
	size_t i;

	for (i = 0; i < f->nfiles; i++)
		data_file_clear(&f->files[i]);
	free(f->files);
}

void sfs_lance_manifest_free(struct sfs_lance_manifest *m)
{
	size_t i;

	if (!m)
		return;
	for (i = 0; i < m->nfragments; i++)
		fragment_clear(&m->fragments[i]);
	free(m->fragments);
	free(m);
}

static int nomem(struct sfs_pb_reader *r)
{
	return sfs_errorf(r->err, -ENOMEM, "%s: out of memory", r->path);
}

/*
 * What a manifest has decoded to so far.  Every allocation is charged
 * before it is made, with its slack (an array's capacity, not its
 * count) and malloc's header, and refused past SFS_LANCE_DECODED_MAX: a
 * small message decodes to much more (a 9-byte fragment: its 88-byte
 * slot, 8 data-file slots, a path).
 */
struct decoded {
	uint64_t bytes;
	size_t nfragments;
	bool shallow; /* fragments' data files counted, not decoded */
};

static int spend(struct sfs_pb_reader *r, struct decoded *d, uint64_t n)
{
	if (n <= SFS_LANCE_DECODED_MAX - d->bytes) {
		d->bytes += n;
		return 0;
	}
	return sfs_errorf(
		r->err, -EFBIG,
		"%s: byte %llu: the manifest decodes to more than the %llu MiB shardfs decodes (%zu fragments so far): "
		"compact the dataset into fewer, larger fragments (lance.dataset(uri).optimize.compact_files())",
		r->path, (unsigned long long)(r->base + r->pos),
		(unsigned long long)(SFS_LANCE_DECODED_MAX >> 20),
		d->nfragments);
}

/* Room for need elements of size bytes in *arrayp (capacity *cap): what
 * sfs_grow allocates for it is charged first.  0, -EFBIG or -ENOMEM. */
static int grow(struct sfs_pb_reader *r, struct decoded *d, void *arrayp,
		size_t *cap, size_t need, size_t size)
{
	int rc = spend(r, d,
		       sfs_grow_cost(*cap, need, size, SFS_LANCE_DECODED_MAX));

	if (rc)
		return rc;
	return sfs_grow(arrayp, cap, need, size) ? nomem(r) : 0;
}

/*
 * One more element of size bytes at the end of *arrayp (count *n,
 * capacity *cap), its room charged by grow: zeroed, into *slot, and
 * counted in *n before it is read, so that what a failed read leaves in
 * it is freed with the rest.  0, -EFBIG or -ENOMEM.
 */
static int add_slot(struct sfs_pb_reader *r, struct decoded *d, void *arrayp,
		    size_t *cap, size_t *n, size_t size, void **slot)
{
	char *array;
	int rc = grow(r, d, arrayp, cap, *n + 1, size);

	if (rc)
		return rc;
	memcpy(&array, arrayp, sizeof(array));
	*slot = array + *n * size;
	memset(*slot, 0, size);
	(*n)++;
	return 0;
}

/*
 * ---- The messages, each described once ----
 *
 * A field of a message this decoder reads: its number, the wire type it
 * must have (ANY_WIRE: its call checks), its name in messages, and where
 * its varint goes (a uint64_t at off) or the call that decodes it; a
 * field that is a message (sub: its name) is opened first, and its call
 * gets a reader of that message's bytes.
 * read_message walks a table; every field it does not list is skipped by
 * its wire type.  A call gets the message's state: the budget, and the
 * count, capacity and position its repeated fields need.
 */
struct msg {
	struct decoded *d;
	size_t cap; /* of the array its repeated field grows */
	size_t count; /* DataFragment: its data files, decoded or not */
	size_t flags_at; /* Manifest: where reader_feature_flags is */
};

typedef int pb_call(struct sfs_pb_reader *r, const struct sfs_pb_field *f,
		    void *obj, struct msg *st);

struct pb_def {
	uint32_t number;
	int wire;
	const char *name;
	size_t off; /* a varint into the uint64_t at off, when call is NULL */
	pb_call *call;
	const char *sub; /* the message the field is, or NULL */
};

#define ANY_WIRE (-1)

/* Where member m of struct sfs_lance_<s> is. */
#define AT(s, m) offsetof(struct sfs_lance_##s, m)

static pb_call read_fragments, read_reader_flags, read_files,
	read_deletion_file, read_path, read_field_ids, refuse_base_id,
	read_deletion_type, refuse_deletion_base_id;

/* Manifest */
static const struct pb_def manifest_defs[] = {
	{ 2, SFS_PB_LEN, "fragments", .call = read_fragments,
	  .sub = "DataFragment" },
	{ 3, SFS_PB_VARINT, "version", .off = AT(manifest, version) },
	{ 9, SFS_PB_VARINT, "reader_feature_flags", .call = read_reader_flags },
	{ 10, SFS_PB_VARINT, "writer_feature_flags",
	  .off = AT(manifest, writer_flags) },
	{ 0 },
};

/* DataFragment */
static const struct pb_def fragment_defs[] = {
	{ 1, SFS_PB_VARINT, "id", .off = AT(fragment, id) },
	{ 2, SFS_PB_LEN, "files", .call = read_files, .sub = "DataFile" },
	{ 3, SFS_PB_LEN, "deletion_file", .call = read_deletion_file,
	  .sub = "DeletionFile" },
	{ 4, SFS_PB_VARINT, "physical_rows",
	  .off = AT(fragment, physical_rows) },
	{ 0 },
};

/* DataFile */
static const struct pb_def data_file_defs[] = {
	{ 1, SFS_PB_LEN, "path", .call = read_path },
	{ 2, ANY_WIRE, "fields", .call = read_field_ids }, /* packed or not */
	{ 6, SFS_PB_VARINT, "file_size_bytes", .off = AT(data_file, size) },
	{ 7, SFS_PB_VARINT, "base_id", .call = refuse_base_id },
	{ 0 },
};

/*
 * DeletionFile: file_type (1), read_version (2), id (3), num_deleted_rows
 * (4), base_id (7); a wrong wire type is named by the message, not the
 * field, as it always was.
 */
static const struct pb_def deletion_defs[] = {
	{ 1, SFS_PB_VARINT, "DeletionFile", .call = read_deletion_type },
	{ 2, SFS_PB_VARINT, "DeletionFile", .off = AT(deletion, read_version) },
	{ 3, SFS_PB_VARINT, "DeletionFile", .off = AT(deletion, id) },
	{ 4, SFS_PB_VARINT, "DeletionFile", .off = AT(deletion, num_deleted) },
	{ 7, SFS_PB_VARINT, "DeletionFile", .call = refuse_deletion_base_id },
	{ 0 },
};

static const struct pb_def *find_def(const struct pb_def *defs, uint32_t number)
{
	for (; defs->name; defs++)
		if (defs->number == number)
			return defs;
	return NULL;
}

/* Known field f (defined by fd) into obj, as fd says. */
static int read_value(struct sfs_pb_reader *r, const struct pb_def *fd,
		      const struct sfs_pb_field *f, void *obj, struct msg *st)
{
	struct sfs_pb_reader sub;
	int rc = 0;

	if (fd->wire != ANY_WIRE)
		rc = sfs_pb_expect(r, f, fd->wire, fd->name);
	if (!rc && fd->sub)
		rc = sfs_pb_message(r, fd->sub, &sub);
	if (rc)
		return rc;
	if (fd->sub)
		return fd->call(&sub, f, obj, st);
	if (fd->call)
		return fd->call(r, f, obj, st);
	return sfs_pb_varint(r, (uint64_t *)((char *)obj + fd->off));
}

/* The fields of the message r reads, described by defs, into obj. */
static int read_message(struct sfs_pb_reader *r, const struct pb_def *defs,
			void *obj, struct msg *st)
{
	struct sfs_pb_field f;
	int rc;

	while ((rc = sfs_pb_next(r, &f)) > 0) {
		const struct pb_def *fd = find_def(defs, f.number);

		rc = fd ? read_value(r, fd, &f, obj, st) : sfs_pb_skip(r, &f);
		if (rc)
			return rc;
	}
	return rc;
}

/* ---- DataFile ---- */

/* A packed (or single, unpacked) int32 of DataFile.fields. */
static int read_field_ids(struct sfs_pb_reader *r, const struct sfs_pb_field *f,
			  void *obj, struct msg *st)
{
	struct sfs_lance_data_file *df = obj;
	struct sfs_pb_reader packed;
	int32_t v;
	int rc;

	if (f->wire == SFS_PB_VARINT) {
		rc = sfs_pb_int32(r, &v);
		if (rc)
			return rc;
		rc = grow(r, st->d, &df->fields, &st->cap, df->nfields + 1,
			  sizeof(*df->fields));
		if (rc)
			return rc;
		df->fields[df->nfields++] = v;
		return 0;
	}
	rc = sfs_pb_expect(r, f, SFS_PB_LEN, "fields");
	if (!rc)
		rc = sfs_pb_message(r, "DataFile.fields", &packed);
	while (!rc && packed.pos < packed.len) {
		rc = sfs_pb_int32(&packed, &v);
		if (rc)
			break;
		rc = grow(&packed, st->d, &df->fields, &st->cap,
			  df->nfields + 1, sizeof(*df->fields));
		if (rc)
			break;
		df->fields[df->nfields++] = v;
	}
	return rc;
}

static int read_path(struct sfs_pb_reader *r, const struct sfs_pb_field *f,
		     void *obj, struct msg *st)
{
	struct sfs_lance_data_file *df = obj;
	const unsigned char *p;
	size_t n;
	int rc = sfs_pb_bytes(r, &p, &n);

	if (rc)
		return rc;
	if (df->path)
		return sfs_pb_fail(r, f->at, "the path is given twice");
	if (memchr(p, 0, n))
		return sfs_pb_fail(r, f->at, "the path holds a NUL byte");
	rc = spend(r, st->d, (uint64_t)n + 1 + SFS_MALLOC_HEADER);
	if (rc)
		return rc;
	df->path = strndup((const char *)p, n);
	return df->path ? 0 : nomem(r);
}

static int refuse_base_id(struct sfs_pb_reader *r, const struct sfs_pb_field *f,
			  void *obj, struct msg *st)
{
	uint32_t base_id;
	int rc = sfs_pb_uint32(r, &base_id);

	(void)obj;
	(void)st;
	if (rc)
		return rc;
	return sfs_pb_fail(
		r, f->at,
		"the data file lives in another base path (base_id %u: a shallow clone or imported files): only data files inside the dataset are read; "
		"deep-copy the dataset first",
		base_id);
}

static int read_data_file(struct sfs_pb_reader *r,
			  struct sfs_lance_data_file *df, struct decoded *d)
{
	struct msg st = { .d = d };
	int rc;

	df->at = r->base;
	rc = read_message(r, data_file_defs, df, &st);
	if (rc)
		return rc;
	if (!df->path || !sfs_path_ok(df->path))
		return sfs_pb_fail(
			r, 0,
			"a data file path is missing, absolute or holds \"..\" (\"%s\"); the manifest is damaged: "
			"restore it, or write the dataset again",
			df->path ? df->path : "");
	return 0;
}

/* ---- DeletionFile ---- */

static int read_deletion_type(struct sfs_pb_reader *r,
			      const struct sfs_pb_field *f, void *obj,
			      struct msg *st)
{
	struct sfs_lance_deletion *del = obj;
	uint64_t v;
	int rc = sfs_pb_varint(r, &v);

	(void)st;
	if (rc)
		return rc;
	if (v != SFS_LANCE_DELETION_ARROW && v != SFS_LANCE_DELETION_BITMAP)
		return sfs_pb_fail(
			r, f->at,
			"deletion file type %llu is unknown (0 ARROW_ARRAY and 1 BITMAP are read): "
			"the dataset is newer than this shardfs",
			(unsigned long long)v);
	del->type = (uint32_t)v;
	return 0;
}

static int refuse_deletion_base_id(struct sfs_pb_reader *r,
				   const struct sfs_pb_field *f, void *obj,
				   struct msg *st)
{
	uint64_t v;
	int rc = sfs_pb_varint(r, &v);

	(void)obj;
	(void)st;
	if (rc)
		return rc;
	return sfs_pb_fail(
		r, f->at,
		"the deletion file lives in another base path (base_id %llu): only files inside the dataset are read; "
		"deep-copy the dataset first",
		(unsigned long long)v);
}

/* ---- DataFragment ---- */

static int read_files(struct sfs_pb_reader *r, const struct sfs_pb_field *f,
		      void *obj, struct msg *st)
{
	struct sfs_lance_fragment *fr = obj;
	void *df;
	int rc;

	(void)f;
	st->count++;
	if (st->d->shallow)
		return 0;
	rc = add_slot(r, st->d, &fr->files, &st->cap, &fr->nfiles,
		      sizeof(*fr->files), &df);
	return rc ? rc : read_data_file(r, df, st->d);
}

static int read_deletion_file(struct sfs_pb_reader *r,
			      const struct sfs_pb_field *f, void *obj,
			      struct msg *st)
{
	struct sfs_lance_fragment *fr = obj;

	(void)f;
	fr->deletion.present = true;
	fr->deletion.at = r->base;
	return read_message(r, deletion_defs, &fr->deletion, st);
}

/* What a fragment must say, checked once it is read. */
static int check_fragment(struct sfs_pb_reader *r,
			  const struct sfs_lance_fragment *fr, size_t nfiles)
{
	if (!nfiles)
		return sfs_pb_fail(
			r, 0,
			"fragment %llu has no data file; the manifest is damaged: restore it, or " REWRITE_FIX,
			(unsigned long long)fr->id);
	if (!fr->physical_rows)
		return sfs_pb_fail(
			r, 0,
			"fragment %llu does not say how many rows it holds (physical_rows; Lance before 0.8 did not write it), "
			"so they cannot be counted without reading its data: " REWRITE_FIX,
			(unsigned long long)fr->id);
	if (fr->physical_rows > SFS_LANCE_ROWS_MAX)
		return sfs_pb_fail(
			r, 0,
			"fragment %llu claims %llu rows, more than the 2^32 a fragment can address; the manifest is damaged",
			(unsigned long long)fr->id,
			(unsigned long long)fr->physical_rows);
	if (fr->deletion.present &&
	    fr->deletion.num_deleted > fr->physical_rows)
		return sfs_pb_fail(
			r, fr->deletion.at - r->base,
			"fragment %llu has %llu rows but its deletion file claims %llu deleted; the manifest is damaged",
			(unsigned long long)fr->id,
			(unsigned long long)fr->physical_rows,
			(unsigned long long)fr->deletion.num_deleted);
	return 0;
}

static int read_fragment(struct sfs_pb_reader *r, struct sfs_lance_fragment *fr,
			 struct decoded *d)
{
	struct msg st = { .d = d };
	int rc;

	fr->at = r->base;
	fr->len = r->len;
	rc = read_message(r, fragment_defs, fr, &st);
	if (rc)
		return rc;
	return check_fragment(r, fr, st.count);
}

/* ---- Manifest ---- */

static int read_fragments(struct sfs_pb_reader *r, const struct sfs_pb_field *f,
			  void *obj, struct msg *st)
{
	struct sfs_lance_manifest *m = obj;
	void *fr;
	int rc;

	(void)f;
	st->d->nfragments = m->nfragments;
	rc = add_slot(r, st->d, &m->fragments, &st->cap, &m->nfragments,
		      sizeof(*m->fragments), &fr);
	return rc ? rc : read_fragment(r, fr, st->d);
}

static int read_reader_flags(struct sfs_pb_reader *r,
			     const struct sfs_pb_field *f, void *obj,
			     struct msg *st)
{
	struct sfs_lance_manifest *m = obj;

	st->flags_at = f->at;
	return sfs_pb_varint(r, &m->reader_flags);
}

static int read_manifest(struct sfs_pb_reader *r, struct sfs_lance_manifest *m,
			 bool shallow)
{
	struct decoded d = { .shallow = shallow };
	struct msg st = { .d = &d };
	int rc;

	rc = read_message(r, manifest_defs, m, &st);
	if (rc)
		return rc;
	if (m->reader_flags & SFS_LANCE_FLAG_BASE_PATHS)
		return sfs_pb_fail(
			r, st.flags_at,
			"reader feature flag 16 (base paths: files outside the dataset directory, a shallow clone) is set: "
			"only datasets whose files are all inside their directory are read; deep-copy the dataset first");
	if (m->reader_flags & ~(uint64_t)SFS_LANCE_FLAGS_READ)
		return sfs_pb_fail(
			r, st.flags_at,
			"reader feature flags 0x%llx are set that this shardfs does not know (it reads 0x%x): "
			"the dataset needs a newer reader; upgrade shardfs, or write the dataset with the Lance version shardfs was tested with (docs/formats.md)",
			(unsigned long long)(m->reader_flags &
					     ~(uint64_t)SFS_LANCE_FLAGS_READ),
			SFS_LANCE_FLAGS_READ);
	return 0;
}

int sfs_lance_manifest_decode(const unsigned char *buf, size_t len,
			      const char *path, bool shallow,
			      struct sfs_lance_manifest **out,
			      struct sfs_error *err)
{
	struct sfs_lance_manifest *m;
	struct sfs_pb_reader r;
	uint64_t pos;
	uint32_t mlen;
	int rc;

	*out = NULL;
	if (len < FOOTER_LEN || memcmp(buf + len - 4, MAGIC, 4))
		return sfs_errorf(
			err, -EINVAL,
			"%s: byte %zu: no \"LANC\" magic at the end: not a Lance manifest, or truncated; restore it from the dataset's writer",
			path, len < 4 ? (size_t)0 : len - 4);
	pos = sfs_le64(buf + len - FOOTER_LEN);
	if (pos > len - FOOTER_LEN || len - FOOTER_LEN - pos < 4)
		return sfs_errorf(
			err, -EINVAL,
			"%s: byte %zu: the manifest position %llu is past the footer (byte %zu): the manifest is damaged or truncated",
			path, len - FOOTER_LEN, (unsigned long long)pos,
			len - FOOTER_LEN);
	mlen = sfs_le32(buf + pos);
	if (mlen > len - FOOTER_LEN - pos - 4)
		return sfs_errorf(
			err, -EINVAL,
			"%s: byte %llu: the manifest's length %u runs past the footer (%llu bytes left): the manifest is damaged or truncated",
			path, (unsigned long long)pos, mlen,
			(unsigned long long)(len - FOOTER_LEN - pos - 4));
	m = calloc(1, sizeof(*m));
	if (!m)
		return sfs_errorf(err, -ENOMEM, "%s: out of memory", path);
	sfs_pb_init(&r, buf + pos + 4, mlen, pos + 4, path, "Manifest", err);
	rc = read_manifest(&r, m, shallow);
	if (rc) {
		sfs_lance_manifest_free(m);
		return rc;
	}
	*out = m;
	return 0;
}

int sfs_lance_manifest_parse(const unsigned char *buf, size_t len,
			     const char *path, struct sfs_lance_manifest **out,
			     struct sfs_error *err)
{
	return sfs_lance_manifest_decode(buf, len, path, false, out, err);
}

int sfs_lance_fragment_decode(const unsigned char *buf, size_t len,
			      const char *path,
			      const struct sfs_lance_fragment *shallow,
			      struct sfs_lance_fragment *out,
			      struct sfs_error *err)
{
	struct decoded d = { 0 };
	struct sfs_pb_reader r;
	int rc;

	memset(out, 0, sizeof(*out));
	if (shallow->at > len || shallow->len > len - shallow->at)
		return sfs_errorf(
			err, -EINVAL,
			"%s: byte %llu: fragment %llu runs past the manifest's %zu bytes",
			path, (unsigned long long)shallow->at,
			(unsigned long long)shallow->id, len);
	/* one level down, as in the Manifest it was read from */
	sfs_pb_init(&r, buf + shallow->at, (size_t)shallow->len, shallow->at,
		    path, "DataFragment", err);
	r.depth = 1;
	rc = read_fragment(&r, out, &d);
	if (rc) {
		fragment_clear(out);
		memset(out, 0, sizeof(*out));
	}
	return rc;
}

/* The version a manifest name stands for: 1 and *version, or 0 when the
 * name is not one of a manifest. */
static int manifest_version(const char *name, uint64_t *version)
{
	size_t n = strlen(name), digits = n - strlen(".manifest"), i;
	uint64_t v = 0;

	if (n <= strlen(".manifest") || strcmp(name + digits, ".manifest") ||
	    digits > 20)
		return 0;
	for (i = 0; i < digits; i++) {
		unsigned d = (unsigned)(name[i] - '0');

		if (name[i] < '0' || name[i] > '9' || v > (UINT64_MAX - d) / 10)
			return 0;
		v = v * 10 + d;
	}
	/* V2 names count down from 2^64 - 1 so that they list newest first */
	*version = digits == 20 ? UINT64_MAX - v : v;
	return 1;
}

/*
 * The versions vs[0 .. n) (sorted, repeats allowed) as "1-5, 7, 9-12",
 * ranges past the first 16 left out ("..."), into buf.
 */
static void list_versions(const uint64_t *vs, size_t n, char *buf, size_t len)
{
	size_t i = 0, j, ranges = 0, at = 0;
	int k;

	buf[0] = '\0';
	while (i < n && at < len) {
		for (j = i; j + 1 < n && vs[j + 1] <= vs[j] + 1; j++)
			;
		if (ranges++ == 16) {
			snprintf(buf + at, len - at, ", ...");
			return;
		}
		k = vs[j] == vs[i] ?
			    snprintf(buf + at, len - at, "%s%llu",
				     at ? ", " : "",
				     (unsigned long long)vs[i]) :
			    snprintf(buf + at, len - at, "%s%llu-%llu",
				     at ? ", " : "", (unsigned long long)vs[i],
				     (unsigned long long)vs[j]);
		if (k < 0)
			return;
		at += (size_t)k;
		i = j + 1;
	}
}

int sfs_lance_find(int dirfd, const char *rel, uint64_t want, char **name,
		   uint64_t *version, struct sfs_error *err)
{
	char path[4096], have[512];
	struct dirent *de;
	uint64_t v, best = 0, *vs = NULL;
	size_t nvs = 0, vs_cap = 0;
	char *found = NULL;
	int fd, rc;
	DIR *d;

	*name = NULL;
	if ((size_t)snprintf(path, sizeof(path), "%s%s%s", rel, *rel ? "/" : "",
			     SFS_LANCE_VERSIONS) >= sizeof(path))
		return sfs_errorf(err, -ENAMETOOLONG, "%s: path too long", rel);
	fd = sfs_open_beneath(dirfd, path, O_RDONLY | O_DIRECTORY | O_NONBLOCK,
			      0);
	/* no _versions/, or a symlink of that name (the walk skips those) */
	if (fd == -ENOENT || fd == -ENOTDIR || fd == -ELOOP || fd == -EXDEV)
		return 0;
	if (fd < 0 || !(d = fdopendir(fd))) {
		rc = fd < 0 ? fd : -errno;
		if (fd >= 0)
			close(fd);
		return sfs_errorf(err, -EIO,
				  "%s: cannot read the directory: %s", path,
				  strerror(-rc));
	}
	rc = 0;
	while (!rc && (de = readdir(d))) {
		if (!manifest_version(de->d_name, &v))
			continue;
		/* every version, for the message when want is not one */
		if (want && SFS_GROW(vs, vs_cap, nvs + 1)) {
			rc = -ENOMEM;
			break;
		}
		if (want)
			vs[nvs++] = v;
		/* the same version under both names: either is the same
		 * manifest (Lance writes V2 names when it migrates) */
		if (want ? v == want && !found : !found || v > best) {
			free(found);
			found = strdup(de->d_name);
			if (!found)
				rc = -ENOMEM;
			best = v;
		}
	}
	closedir(d);
	if (rc) {
		free(found);
		free(vs);
		return sfs_errorf(err, rc, "out of memory");
	}
	/* a directory that happens to be called _versions is not a dataset */
	if (!found && (!want || !nvs)) {
		free(vs);
		return 0;
	}
	if (!found) {
		qsort(vs, nvs, sizeof(*vs), sfs_cmp_u64);
		list_versions(vs, nvs, have, sizeof(have));
		free(vs);
		return sfs_errorf(
			err, -ENOENT,
			"%s: the dataset has no version %llu (no %llu.manifest, no %020llu.manifest); its versions are %s: index one of those (shardfs-index --dataset-version N), or leave the option out for the newest",
			path, (unsigned long long)want,
			(unsigned long long)want,
			(unsigned long long)(UINT64_MAX - want), have);
	}
	free(vs);
	*name = found;
	*version = best;
	return 1;
}

int sfs_lance_latest(int dirfd, const char *rel, char **name, uint64_t *version,
		     struct sfs_error *err)
{
	return sfs_lance_find(dirfd, rel, 0, name, version, err);
}
