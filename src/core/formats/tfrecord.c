/*
 * TFRecord files: records of (u64 length, u32 masked CRC-32C of the length,
 * data, u32 masked CRC-32C of the data), little-endian.  One record is one
 * sample; a slice is the byte range of its records, nothing added.
 *
 * A scan reads only the 12-byte headers (from a buffer refilled in large
 * blocks), checks each length's CRC and that the record fits in the file.
 * The data CRCs are checked by verify (shardfs-index --verify), which reads
 * everything.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats/format_i.h"
#include "shardfs/crc32c.h"
#include "shardfs/digest.h"
#include "shardfs/shard.h"
#include "shardfs/util.h"

#define HEADER 12
#define FRAMING 16
#define READ_BLOCK (256 * 1024)

struct reader {
	int fd;
	unsigned char *buf;
	uint64_t start; /* file offset of buf[0] */
	size_t len; /* valid bytes in buf */
};

/*
 * Make bytes [off, off + n) available in r->buf and return a pointer to
 * them, or NULL after a read error (errno set) or at end of file.
 */
static const unsigned char *reader_at(struct reader *r, uint64_t off, size_t n)
{
	ssize_t got;

	if (off >= r->start && off + n <= r->start + r->len)
		return r->buf + (off - r->start);
	got = pread(r->fd, r->buf, READ_BLOCK, (off_t)off);
	if (got < 0)
		return NULL;
	r->start = off;
	r->len = (size_t)got;
	if (r->len < n) {
		errno = 0;
		return NULL;
	}
	return r->buf;
}

static int tfrecord_scan(const struct sfs_scan_in *in, struct sfs_scan *out,
			 struct sfs_error *err)
{
	struct reader r = { .fd = in->fd };
	uint64_t off = 0;
	size_t cap = 0;
	int rc = 0;

	r.buf = malloc(READ_BLOCK);
	if (!r.buf)
		return sfs_errorf(err, -ENOMEM, "%s: out of memory", in->path);
	while (off < in->size) {
		const unsigned char *h;
		uint64_t len;

		if (in->size - off < HEADER) {
			rc = sfs_errorf(
				err, -EINVAL,
				"%s: truncated TFRecord header at byte %llu: %llu bytes left, a header needs %d",
				in->path, (unsigned long long)off,
				(unsigned long long)(in->size - off), HEADER);
			goto out_free;
		}
		h = reader_at(&r, off, HEADER);
		if (!h) {
			rc = sfs_errorf(err, -EIO,
					"%s: read failed at byte %llu: %s",
					in->path, (unsigned long long)off,
					errno ? strerror(errno) :
						"unexpected end of file");
			goto out_free;
		}
		len = sfs_le64(h);
		if (sfs_le32(h + 8) != sfs_crc32c_masked(h, 8)) {
			rc = sfs_errorf(
				err, -EINVAL,
				"%s: bad TFRecord length CRC at byte %llu (not a TFRecord file, or corrupted)",
				in->path, (unsigned long long)off);
			goto out_free;
		}
		if (len > in->size - off - HEADER ||
		    in->size - off - HEADER - len < 4) {
			rc = sfs_errorf(
				err, -EINVAL,
				"%s: TFRecord at byte %llu claims %llu data bytes, only %llu remain in the file",
				in->path, (unsigned long long)off,
				(unsigned long long)len,
				(unsigned long long)(in->size - off - HEADER));
			goto out_free;
		}
		if (sfs_bounds_push(out, &cap, off))
			goto out_nomem;
		out->nsamples++;
		off += FRAMING + len;
	}
	if (sfs_bounds_push(out, &cap, off))
		goto out_nomem;
	out->sliceable = true;
	goto out_free;
out_nomem:
	rc = sfs_errorf(err, -ENOMEM, "%s: out of memory", in->path);
out_free:
	free(r.buf);
	return rc;
}

static int tfrecord_verify(int fd, const char *path, const struct sfs_shard *sh,
			   const uint64_t *bounds, struct sfs_error *err)
{
	unsigned char *data = NULL;
	size_t cap = 0;
	uint64_t i;
	int rc = 0;

	for (i = 0; i < sh->nsamples; i++) {
		uint64_t len = bounds[i + 1] - bounds[i];
		ssize_t got;

		if (sfs_grow(&data, &cap, (size_t)len, 1)) {
			rc = sfs_errorf(
				err, -ENOMEM,
				"%s: out of memory for a %llu-byte record",
				path, (unsigned long long)len);
			goto out_free;
		}
		got = sfs_pread_full(fd, data, (size_t)len, bounds[i]);
		if (got < 0 || (uint64_t)got != len) {
			rc = sfs_errorf(err, -EIO,
					"%s: read failed at byte %llu: %s",
					path, (unsigned long long)bounds[i],
					got < 0 ? strerror((int)-got) :
						  "unexpected end of file");
			goto out_free;
		}
		if (sfs_le32(data + len - 4) !=
		    sfs_crc32c_masked(data + HEADER, len - FRAMING)) {
			rc = sfs_errorf(
				err, -EINVAL,
				"%s: bad TFRecord data CRC in record %llu at byte %llu",
				path, (unsigned long long)i,
				(unsigned long long)bounds[i]);
			goto out_free;
		}
	}
out_free:
	free(data);
	return rc;
}

/*
 * Read exactly len bytes at off: -EIO with a message when the read fails,
 * -EINVAL naming the byte where the file ends when it is short.
 */
static int read_exact(int fd, const char *path, void *buf, size_t len,
		      uint64_t off, struct sfs_error *err)
{
	ssize_t got = sfs_pread_full(fd, buf, len, off);

	if (got < 0)
		return sfs_errorf(err, -EIO, "%s: %s at byte %llu", path,
				  strerror((int)-got), (unsigned long long)off);
	if ((size_t)got < len)
		return sfs_errorf(err, -EINVAL,
				  "%s: truncated TFRecord at byte %llu", path,
				  (unsigned long long)(off + (uint64_t)got));
	return 0;
}

static int tfrecord_samples(int fd, const char *path, sfs_sample_fn fn,
			    void *arg, struct sfs_error *err)
{
	unsigned char h[HEADER], t[4], digest[SFS_DIGEST_LEN];
	struct sfs_digest *d = sfs_digest_new();
	unsigned char *buf = malloc(READ_BLOCK);
	uint64_t off = 0, n = 0;
	int rc = 0;

	if (!d || !buf) {
		rc = sfs_errorf(err, -ENOMEM, "%s: out of memory", path);
		goto out_free;
	}
	for (;;) {
		uint64_t len, done = 0;
		uint32_t crc = 0;
		ssize_t got = pread(fd, h, 1, (off_t)off);

		if (got == 0)
			break;
		rc = read_exact(fd, path, h, HEADER, off, err);
		if (rc)
			break;
		len = sfs_le64(h);
		if (sfs_le32(h + 8) != sfs_crc32c_masked(h, 8)) {
			rc = sfs_errorf(
				err, -EINVAL,
				"%s: bad TFRecord length CRC at byte %llu",
				path, (unsigned long long)off);
			break;
		}
		while (!rc && done < len) {
			size_t k = len - done < READ_BLOCK ?
					   (size_t)(len - done) :
					   READ_BLOCK;

			rc = read_exact(fd, path, buf, k, off + HEADER + done,
					err);
			if (!rc) {
				crc = sfs_crc32c(crc, buf, k);
				sfs_digest_update(d, buf, k);
				done += k;
			}
		}
		if (!rc)
			rc = read_exact(fd, path, t, 4, off + HEADER + len,
					err);
		if (rc)
			break;
		if (sfs_le32(t) != sfs_crc32c_mask(crc)) {
			rc = sfs_errorf(
				err, -EINVAL,
				"%s: bad TFRecord data CRC in record %llu at byte %llu",
				path, (unsigned long long)n,
				(unsigned long long)off);
			break;
		}
		rc = sfs_digest_final(d, digest);
		if (!rc)
			rc = fn(arg, n++, digest);
		if (rc)
			break;
		off += FRAMING + len;
	}
out_free:
	free(buf);
	sfs_digest_free(d);
	return rc;
}

/* Little-endian v into p, n bytes. */
static void put_le(unsigned char *p, uint64_t v, unsigned n)
{
	unsigned k;

	for (k = 0; k < n; k++)
		p[k] = (unsigned char)(v >> (8 * k));
}

static int tfrecord_synthesize(const struct sfs_synth *s, uint64_t shard,
			       const char *path, struct sfs_error *err)
{
	struct sfs_synth_file f;
	struct sfs_prng r;
	unsigned char h[12], t[4];
	uint64_t n, i, size;
	int rc = sfs_synth_open(&f, path, err);

	if (rc)
		return rc;
	sfs_prng_init(&r, s->seed, shard, 3);
	n = sfs_synth_pick(&r, s->samples_lo, s->samples_hi);
	for (i = 0; i < n; i++) {
		size = sfs_synth_pick(&r, s->size_lo, s->size_hi);
		sfs_synth_fill(&r, s->buf, size);
		put_le(h, size, 8);
		put_le(h + 8, sfs_crc32c_masked(h, 8), 4);
		put_le(t, sfs_crc32c_masked(s->buf, size), 4);
		sfs_synth_put(&f, h, 12);
		sfs_synth_put(&f, s->buf, size);
		sfs_synth_put(&f, t, 4);
	}
	return sfs_synth_close(&f, 0, err);
}

static const char *const tfrecord_suffixes[] = { ".tfrecord", ".tfrecords",
						 NULL };

const struct sfs_format_ops sfs_format_tfrecord = {
	.name = "tfrecord",
	.concatenates = true,
	.suffixes = tfrecord_suffixes,
	.scan = tfrecord_scan,
	.verify = tfrecord_verify,
	.samples = tfrecord_samples,
	.synthesize = tfrecord_synthesize,
};
