/*
 * Line-per-sample text (JSONL, NDJSON): every line ending in '\n' is one
 * sample, blank lines included, bytes kept as they are (a CRLF line keeps
 * its '\r').  A last line without '\n' is a sample too; a slice that ends
 * with it gets the '\n' it lacks, so that a line reader sees every sample
 * as a whole line.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats/format_i.h"
#include "shardfs/digest.h"
#include "shardfs/shard.h"

#define READ_BLOCK (1 << 20)

/* Finish the line being hashed and hand its digest to the caller. */
static int line_done(const struct sfs_scan_in *in, struct sfs_digest *d,
		     uint64_t sample)
{
	unsigned char digest[SFS_DIGEST_LEN];

	if (sfs_digest_final(d, digest))
		return -EIO;
	return in->digest_fn(in->digest_arg, sample, digest);
}

static int jsonl_scan(const struct sfs_scan_in *in, struct sfs_scan *out,
		      struct sfs_error *err)
{
	char *buf = malloc(READ_BLOCK);
	struct sfs_digest *d = in->digest_fn ? sfs_digest_new() : NULL;
	uint64_t off = 0, line = 0;
	size_t cap = 0;
	int rc = 0;

	if (!buf || (in->digest_fn && !d))
		goto out_nomem;
	while (off < in->size) {
		size_t want = in->size - off < READ_BLOCK ? in->size - off :
							    READ_BLOCK;
		ssize_t got = pread(in->fd, buf, want, (off_t)off);
		const char *p = buf, *end, *nl;

		if (got <= 0) {
			rc = sfs_errorf(err, -EIO,
					"%s: read failed at byte %llu: %s",
					in->path, (unsigned long long)off,
					got < 0 ? strerror(errno) :
						  "unexpected end of file");
			goto out_free;
		}
		end = buf + got;
		while ((nl = memchr(p, '\n', (size_t)(end - p)))) {
			if (sfs_bounds_push(out, &cap, line))
				goto out_nomem;
			if (d) {
				/* a sample's digest leaves out its '\n' */
				sfs_digest_update(d, p, (size_t)(nl - p));
				rc = line_done(in, d, out->nsamples);
				if (rc)
					goto out_free;
			}
			out->nsamples++;
			p = nl + 1;
			line = off + (uint64_t)(p - buf);
		}
		if (d)
			sfs_digest_update(d, p, (size_t)(end - p));
		off += (uint64_t)got;
	}
	if (line < in->size) {
		if (sfs_bounds_push(out, &cap, line))
			goto out_nomem;
		if (d && (rc = line_done(in, d, out->nsamples)))
			goto out_free;
		out->nsamples++;
		out->newline_missing = true;
	}
	if (sfs_bounds_push(out, &cap, in->size))
		goto out_nomem;
	out->sliceable = true;
	out->digested = d != NULL;
	goto out_free;
out_nomem:
	rc = sfs_errorf(err, -ENOMEM, "%s: out of memory", in->path);
out_free:
	sfs_digest_free(d);
	free(buf);
	return rc;
}

static int jsonl_samples(int fd, const char *path, sfs_sample_fn fn, void *arg,
			 struct sfs_error *err)
{
	return sfs_format_scan_samples(&sfs_format_jsonl, fd, path, fn, arg,
				       err);
}

static size_t jsonl_run_suffix(const struct sfs_shard *sh, uint64_t end,
			       const void **bytes)
{
	if (!sh->newline_missing || end != sh->nsamples)
		return 0;
	*bytes = "\n";
	return 1;
}

/* Lines {"key": "<shard>_<sample>", "data": "<hex>"}. */
static int jsonl_synthesize(const struct sfs_synth *s, uint64_t shard,
			    const char *path, struct sfs_error *err)
{
	static const char hex[] = "0123456789abcdef";
	struct sfs_synth_file f;
	struct sfs_prng r;
	uint64_t n, i, k, size;
	char head[96];
	int rc = sfs_synth_open(&f, path, err);

	if (rc)
		return rc;
	sfs_prng_init(&r, s->seed, shard, 2);
	n = sfs_synth_pick(&r, s->samples_lo, s->samples_hi);
	for (i = 0; i < n; i++) {
		size = sfs_synth_pick(&r, s->size_lo, s->size_hi);
		sfs_synth_fill(&r, s->buf, size);
		snprintf(head, sizeof(head),
			 "{\"key\": \"%06llu_%06llu\", \"data\": \"",
			 (unsigned long long)shard, (unsigned long long)i);
		sfs_synth_put(&f, head, strlen(head));
		for (k = 0; k < size; k++) {
			char h[2] = { hex[s->buf[k] >> 4],
				      hex[s->buf[k] & 15] };

			sfs_synth_put(&f, h, 2);
		}
		sfs_synth_put(&f, "\"}\n", 3);
	}
	return sfs_synth_close(&f, 0, err);
}

static const char *const jsonl_suffixes[] = { ".jsonl", ".ndjson", NULL };

const struct sfs_format_ops sfs_format_jsonl = {
	.name = "jsonl",
	.concatenates = true,
	.suffixes = jsonl_suffixes,
	.scan = jsonl_scan,
	.run_suffix = jsonl_run_suffix,
	.samples = jsonl_samples,
	.synthesize = jsonl_synthesize,
};
