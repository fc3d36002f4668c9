/*
 * WebDataset tar shards.
 *
 * A sample is a run of consecutive members whose key (the member path up
 * to the first dot of its basename) is equal.  Directory members belong to
 * the sample that follows them.  Headers are read with libarchive, which
 * seeks past member data on a regular file, so a scan reads little more
 * than the headers.
 *
 * A sample's bytes run from libarchive's header position of its first
 * member (which points at the member's first extension header: pax 'x',
 * GNU 'L'/'K') to the header position of the next sample; the last sample
 * ends at the end of the last member's padded data.  Global pax headers
 * ('g') at the start of the shard become the prefix of every slice, and
 * every slice ends with the two zero blocks of an end-of-archive marker.
 * Compressed tars are counted, never sliced.
 */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats/format_i.h"
#include "shardfs/digest.h"
#include "shardfs/util.h"

#define TAR_BLOCK 512
#define READ_BLOCK (64 * 1024)
#define GLOBAL_HEADER_MAX (1024 * 1024)

static const unsigned char end_of_archive[2 * TAR_BLOCK];

/* Parse an octal tar number field; returns -1 when it is not one. */
static int64_t parse_octal(const unsigned char *p, size_t n)
{
	int64_t v = 0;
	size_t i = 0;

	while (i < n && p[i] == ' ')
		i++;
	for (; i < n && p[i] >= '0' && p[i] <= '7'; i++) {
		if (v > (INT64_MAX >> 3))
			return -1;
		v = v << 3 | (p[i] - '0');
	}
	for (; i < n; i++)
		if (p[i] != ' ' && p[i] != '\0')
			return -1;
	return v;
}

/*
 * The length of the global pax headers ('g') that open the shard, which
 * every slice must repeat: 0 when there are none.
 */
static int global_prefix(const struct sfs_scan_in *in, uint64_t *len,
			 struct sfs_error *err)
{
	unsigned char h[TAR_BLOCK];
	uint64_t off = 0;

	for (;;) {
		ssize_t got = pread(in->fd, h, sizeof(h), (off_t)off);
		int64_t size;

		if (got < 0)
			return sfs_errorf(err, -EIO,
					  "%s: read failed at byte %llu: %s",
					  in->path, (unsigned long long)off,
					  strerror(errno));
		if (got < TAR_BLOCK || h[156] != 'g' ||
		    memcmp(h + 257, "ustar", 5))
			break;
		size = parse_octal(h + 124, 12);
		if (size < 0 || size > GLOBAL_HEADER_MAX)
			return sfs_errorf(
				err, -EINVAL,
				"%s: global pax header at byte %llu has a bad or too large size field (limit %d bytes)",
				in->path, (unsigned long long)off,
				GLOBAL_HEADER_MAX);
		if (off + TAR_BLOCK + sfs_tar_round((uint64_t)size) > in->size)
			return sfs_errorf(
				err, -EINVAL,
				"%s: truncated global pax header at byte %llu",
				in->path, (unsigned long long)off);
		off += TAR_BLOCK + sfs_tar_round((uint64_t)size);
	}
	*len = off;
	return 0;
}

/*
 * The extension headers of a member, [from, to) (to: its own header), hold
 * no global pax header: one after the first member applies to every
 * member after it, which a slice (or a followed stream) puts after other
 * samples, renaming them; only those that open the shard are kept, as the
 * prefix of every slice.
 */
static int no_global_between(const struct sfs_scan_in *in, uint64_t from,
			     uint64_t to, struct sfs_error *err)
{
	unsigned char h[TAR_BLOCK];

	while (from < to) {
		ssize_t got = pread(in->fd, h, sizeof(h), (off_t)from);
		int64_t size;

		if (got < 0)
			return sfs_errorf(err, -EIO,
					  "%s: read failed at byte %llu: %s",
					  in->path, (unsigned long long)from,
					  strerror(errno));
		if (got < TAR_BLOCK)
			break;
		if (h[156] == 'g')
			return sfs_errorf(
				err, -EINVAL,
				"%s: global pax header at byte %llu, after the first member: it would apply to the members after it wherever a slice puts them (renaming them); put global headers only at the start of the archive, or write none",
				in->path, (unsigned long long)from);
		size = parse_octal(h + 124, 12);
		if (size < 0)
			break; /* libarchive read it: not ours to judge */
		from += TAR_BLOCK + sfs_tar_round((uint64_t)size);
	}
	return 0;
}

struct key {
	char *buf;
	size_t len, cap;
	bool set;
};

/* Remember path's key; returns 1 when it differs from the one before. */
static int key_next(struct key *k, const char *path)
{
	size_t n = sfs_format_key_len(path);

	if (k->set && n == k->len && !memcmp(k->buf, path, n))
		return 0;
	if (SFS_GROW(k->buf, k->cap, n + 1))
		return -ENOMEM;
	memcpy(k->buf, path, n);
	k->len = n;
	k->set = true;
	return 1;
}

/* Finish the sample being hashed, if any, and hand it to fn. */
static int sample_done(const struct sfs_scan_in *in, struct sfs_digest *d,
		       bool *open, uint64_t *n)
{
	unsigned char digest[SFS_DIGEST_LEN];

	if (!*open)
		return 0;
	*open = false;
	if (sfs_digest_final(d, digest))
		return -EIO;
	return in->digest_fn(in->digest_arg, (*n)++, digest);
}

/* Feed a member to the sample digest: path, NUL, size, data. */
static int hash_member(struct archive *a, struct archive_entry *e,
		       const char *name, struct sfs_digest *d,
		       const struct sfs_scan_in *in, struct sfs_error *err)
{
	uint64_t size = (uint64_t)archive_entry_size(e);
	unsigned char le[8];
	const void *block;
	la_int64_t at;
	size_t len;
	int i, r;

	for (i = 0; i < 8; i++)
		le[i] = (unsigned char)(size >> (8 * i));
	sfs_digest_update(d, name, strlen(name) + 1);
	sfs_digest_update(d, le, sizeof(le));
	/* libarchive's own blocks: no copy */
	while ((r = archive_read_data_block(a, &block, &len, &at)) ==
	       ARCHIVE_OK)
		sfs_digest_update(d, block, len);
	if (r != ARCHIVE_EOF)
		return sfs_errorf(
			err, -EINVAL,
			"%s: tar member \"%s\" cannot be read at byte %llu of the %s: %s",
			in->path, name,
			(unsigned long long)archive_filter_bytes(a, 0),
			archive_filter_count(a) > 1 ? "decompressed stream" :
						      "file",
			archive_error_string(a));
	return 0;
}

/* A tar being scanned (tar_scan's state). */
struct tar_walk {
	const struct sfs_scan_in *in;
	struct sfs_scan *out;
	struct sfs_error *err;
	struct archive *a;
	struct sfs_digest *d; /* NULL: no digests asked */
	struct key key; /* the current sample's key */
	size_t cap; /* of out->bounds */
	uint64_t pending; /* first unassigned directory member */
	uint64_t data_end, nmembers, ndigests;
	bool compressed, open;
};

static int walk_nomem(struct tar_walk *w)
{
	return sfs_errorf(w->err, -ENOMEM, "%s: out of memory", w->in->path);
}

/* Member e (header at pos): its size within the file, and no global
 * header between its own and its data. */
static int check_member(struct tar_walk *w, struct archive_entry *e,
			uint64_t pos)
{
	const struct sfs_scan_in *in = w->in;
	int64_t size = archive_entry_size(e);
	uint64_t data_at = (uint64_t)archive_filter_bytes(w->a, 0);

	/* only an uncompressed archive's sizes are bounded by the file; a
	 * compressed one's truncation is libarchive's error */
	if (size < 0 || (!w->compressed && (uint64_t)size > in->size))
		return sfs_errorf(
			w->err, -EINVAL,
			"%s: tar member \"%s\" at byte %llu has a bad size field",
			in->path, archive_entry_pathname(e),
			(unsigned long long)pos);
	if (w->compressed)
		return 0;
	w->data_end = data_at + sfs_tar_round((uint64_t)size);
	if (w->data_end > in->size)
		return sfs_errorf(
			w->err, -EINVAL,
			"%s: truncated tar member \"%s\" at byte %llu: its data needs %llu bytes up to byte %llu, the file has %llu",
			in->path, archive_entry_pathname(e),
			(unsigned long long)pos, (unsigned long long)size,
			(unsigned long long)w->data_end,
			(unsigned long long)in->size);
	/* its own header ends where its data starts */
	if (data_at > pos + TAR_BLOCK)
		return no_global_between(in, pos, data_at - TAR_BLOCK, w->err);
	return 0;
}

/* Member e (header at pos) into the samples: a new key starts a sample
 * (its boundary, the last one's digest); its bytes to the digest. */
static int add_member(struct tar_walk *w, struct archive_entry *e, uint64_t pos)
{
	const char *name = archive_entry_pathname(e);
	int isnew, rc;

	if (archive_entry_filetype(e) == AE_IFDIR) {
		if (w->pending == UINT64_MAX)
			w->pending = pos;
		return 0;
	}
	if (!name)
		name = "";
	isnew = key_next(&w->key, name);
	if (isnew < 0)
		return walk_nomem(w);
	if (isnew) {
		if (!w->compressed &&
		    sfs_bounds_push(w->out, &w->cap,
				    w->pending != UINT64_MAX ? w->pending :
							       pos))
			return walk_nomem(w);
		w->out->nsamples++;
		if (w->d &&
		    (rc = sample_done(w->in, w->d, &w->open, &w->ndigests)))
			return rc;
	}
	w->pending = UINT64_MAX;
	if (!w->d)
		return 0;
	w->open = true;
	return hash_member(w->a, e, name, w->d, w->in, w->err);
}

/* The next header could not be read (libarchive's r): the message.
 * libarchive forgets the position once it fails: the bad header starts
 * where the last good member ended. */
static int bad_header(struct tar_walk *w)
{
	const struct sfs_scan_in *in = w->in;

	if (w->nmembers == 0)
		return sfs_errorf(w->err, -EINVAL,
				  "%s: not a tar archive at byte %llu (%s)",
				  in->path,
				  (unsigned long long)w->out->prefix_len,
				  archive_error_string(w->a));
	if (w->compressed)
		return sfs_errorf(
			w->err, -EINVAL,
			"%s: truncated or corrupt compressed tar after member %llu, at byte %llu of the decompressed stream (%s)",
			in->path, (unsigned long long)w->nmembers,
			(unsigned long long)archive_filter_bytes(w->a, 0),
			archive_error_string(w->a));
	return sfs_errorf(w->err, -EINVAL,
			  "%s: malformed tar header at byte %llu (%s)",
			  in->path, (unsigned long long)w->data_end,
			  archive_error_string(w->a));
}

/* Every member, then the last sample's digest and the end boundary. */
static int walk_members(struct tar_walk *w)
{
	struct sfs_scan *out = w->out;
	struct archive_entry *e;
	int rc, r;

	while ((r = archive_read_next_header(w->a, &e)) == ARCHIVE_OK ||
	       r == ARCHIVE_WARN) {
		uint64_t pos = (uint64_t)archive_read_header_position(w->a);

		w->nmembers++;
		if (pos < out->prefix_len)
			pos = out->prefix_len;
		rc = check_member(w, e, pos);
		if (!rc)
			rc = add_member(w, e, pos);
		if (rc)
			return rc;
	}
	if (r != ARCHIVE_EOF)
		return bad_header(w);
	if (w->d && (rc = sample_done(w->in, w->d, &w->open, &w->ndigests)))
		return rc;
	out->digested = w->d != NULL;
	out->sliceable = !w->compressed;
	if (w->compressed) {
		free(out->bounds);
		out->bounds = NULL;
		out->prefix_len = 0;
		return 0;
	}
	if (sfs_bounds_push(out, &w->cap,
			    w->data_end > out->prefix_len ? w->data_end :
							    out->prefix_len))
		return walk_nomem(w);
	return 0;
}

static int tar_scan(const struct sfs_scan_in *in, struct sfs_scan *out,
		    struct sfs_error *err)
{
	struct tar_walk w = {
		.in = in, .out = out, .err = err, .pending = UINT64_MAX
	};
	int rc;

	if (in->digest_fn && !(w.d = sfs_digest_new()))
		return walk_nomem(&w);
	rc = global_prefix(in, &out->prefix_len, err);
	if (!rc && lseek(in->fd, 0, SEEK_SET) < 0)
		rc = sfs_errorf(err, -EIO, "%s: cannot seek: %s", in->path,
				strerror(errno));
	w.a = rc ? NULL : archive_read_new();
	if (!w.a) {
		sfs_digest_free(w.d);
		return rc ? rc : walk_nomem(&w);
	}
	archive_read_support_filter_all(w.a);
	archive_read_support_format_tar(w.a);
	if (archive_read_open_fd(w.a, in->fd, READ_BLOCK) != ARCHIVE_OK) {
		rc = sfs_errorf(err, -EINVAL,
				"%s: not a tar archive at byte 0 (%s)",
				in->path, archive_error_string(w.a));
	} else {
		w.compressed = archive_filter_count(w.a) > 1;
		rc = walk_members(&w);
	}
	free(w.key.buf);
	sfs_digest_free(w.d);
	archive_read_free(w.a);
	return rc;
}

/* A loader's view of a tar: the scan, hashing as it goes. */
static int tar_samples(int fd, const char *path, sfs_sample_fn fn, void *arg,
		       struct sfs_error *err)
{
	return sfs_format_scan_samples(&sfs_format_tar, fd, path, fn, arg, err);
}

static size_t tar_slice_suffix(const struct sfs_shard *sh, const void **bytes)
{
	(void)sh;
	*bytes = end_of_archive;
	return sizeof(end_of_archive);
}

#define SYNTH_MTIME 1700000000
#define SYNTH_LONG_DIR                                                     \
	"a-directory-name-long-enough-that-every-member-path-needs-a-pax-" \
	"extended-header-because-ustar-stops-at-100-bytes"

/* Samples of 1..3 members (.jpg .cls .json), written by libarchive as pax
 * (restricted: headers only where ustar falls short). */
static int tar_synthesize(const struct sfs_synth *s, uint64_t shard,
			  const char *path, struct sfs_error *err)
{
	static const char *const ext[] = { ".jpg", ".cls", ".json" };
	struct archive *a = archive_write_new();
	struct archive_entry *e = archive_entry_new();
	struct sfs_prng r;
	uint64_t n, i, m, nm, size;
	char name[sizeof(SYNTH_LONG_DIR) + 64];
	int rc = -EIO;

	if (!a || !e) {
		rc = sfs_errorf(err, -ENOMEM, "%s: out of memory", path);
		goto out_free;
	}
	sfs_prng_init(&r, s->seed, shard, 1);
	archive_write_set_format_pax_restricted(a);
	archive_write_add_filter_none(a);
	archive_write_set_bytes_in_last_block(a, 1);
	if (archive_write_open_filename(a, path) != ARCHIVE_OK)
		goto out_err;
	n = sfs_synth_pick(&r, s->samples_lo, s->samples_hi);
	for (i = 0; i < n; i++) {
		nm = sfs_synth_pick(&r, s->members_lo, s->members_hi);
		for (m = 0; m < nm; m++) {
			size = sfs_synth_pick(&r, s->size_lo, s->size_hi);
			sfs_synth_fill(&r, s->buf, size);
			snprintf(name, sizeof(name), "%s%s%06llu_%06llu%s",
				 s->long_names ? SYNTH_LONG_DIR : "",
				 s->long_names ? "/" : "",
				 (unsigned long long)shard,
				 (unsigned long long)i, ext[m % 3]);
			archive_entry_clear(e);
			archive_entry_set_pathname(e, name);
			archive_entry_set_filetype(e, AE_IFREG);
			archive_entry_set_perm(e, 0644);
			archive_entry_set_size(e, (la_int64_t)size);
			archive_entry_set_mtime(e, SYNTH_MTIME, 0);
			if (archive_write_header(a, e) != ARCHIVE_OK ||
			    archive_write_data(a, s->buf, size) !=
				    (la_ssize_t)size)
				goto out_err;
		}
	}
	if (archive_write_close(a) != ARCHIVE_OK)
		goto out_err;
	rc = 0;
	goto out_free;
out_err:
	rc = sfs_errorf(err, -EIO, "%s: %s", path, archive_error_string(a));
out_free:
	archive_entry_free(e);
	archive_write_free(a);
	return rc;
}

static const char *const tar_suffixes[] = {
	".tar", ".tar.gz", ".tgz", ".tar.zst", ".tar.xz", ".tar.bz2", NULL,
};

const struct sfs_format_ops sfs_format_tar = {
	.name = "tar",
	.concatenates = true,
	.suffixes = tar_suffixes,
	.scan = tar_scan,
	.slice_suffix = tar_slice_suffix,
	.samples = tar_samples,
	.synthesize = tar_synthesize,
};
