/*
 * The names of a view's files (docs/view.md, "The tree"): the sequence
 * prefix, the shard's path within its source, escaped and cut to 255
 * bytes, and what a slice's name says of its samples.
 */
#include <endian.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardfs/digest.h"
#include "shardfs/util.h"
#include "shardfs/view.h"

#include "view_i.h"

/* the longest name of the view, as its statfs says (f_namemax) */
#define NAME_MAX_BYTES 255
/* a shortened name keeps an extension of at most this many bytes */
#define EXT_KEPT_MAX 16

int sfs_view_digits(uint64_t n)
{
	int d = 1;

	while (n >= 10) {
		n /= 10;
		d++;
	}
	return d;
}

/*
 * Put n in decimal at p, zero-padded to width digits, as "%0*llu" does
 * (at most max(width, 20) bytes, no '\0'); returns the end.  A view of
 * one-sample slices names a file per sample: snprintf was a quarter of
 * the CPU of a stratified mixture's epoch switch (docs/benchmarks.md).
 */
static char *put_u64(char *p, uint64_t n, int width)
{
	int d = sfs_view_digits(n), i;

	for (i = d; i < width; i++)
		*p++ = '0';
	for (i = d; i-- > 0; n /= 10)
		p[i] = (char)('0' + n % 10);
	return p + d;
}

/* Append the NUL-terminated s at p; returns the end. */
static char *put_str(char *p, const char *s)
{
	size_t n = strlen(s);

	memcpy(p, s, n);
	return p + n;
}

/*
 * What a slice's name says of its samples, so that a name identifies its
 * bytes wherever it appears (another epoch, another mount): one run of
 * samples a..b is "a-b"; any other list of runs (samples shuffled inside a
 * unit, padding that wraps) is "r" and the first 16 hex digits of the
 * SHA-256 of the runs, each as (first, count) in little-endian u64s.
 */
int sfs_view_runs_name(struct sfs_digest *dg, const struct sfs_run *r,
		       size_t nruns, char *out, size_t len)
{
	unsigned char d[SFS_DIGEST_LEN], le[64 * 16];
	char hex[2 * SFS_DIGEST_LEN + 1];
	size_t i, at = 0;

	if (nruns == 1) {
		char one[2 * 20 + 1], *e = put_u64(one, r->first, 0);

		*e++ = '-';
		e = put_u64(e, r->first + r->count - 1, 0);
		/* cut to len as snprintf cuts */
		if (len) {
			i = (size_t)(e - one) < len - 1 ? (size_t)(e - one) :
							  len - 1;
			memcpy(out, one, i);
			out[i] = '\0';
		}
		return 0;
	}
	/* 64 runs per update (one-sample runs are the common case); the
	 * digest re-initialises itself at final, for the next name */
	for (i = 0; i < nruns; i++) {
		uint64_t v[2] = { htole64(r[i].first), htole64(r[i].count) };

		memcpy(le + at, v, sizeof(v));
		at += 16;
		if ((at == sizeof(le) || i + 1 == nruns) &&
		    sfs_digest_update(dg, le, at))
			return -ENOMEM;
		at = at == sizeof(le) ? 0 : at;
	}
	if (sfs_digest_final(dg, d))
		return -ENOMEM;
	sfs_digest_hex(d, hex);
	snprintf(out, len, "r%.16s", hex);
	return 0;
}

/* Append the n bytes at p to out at *at, '%' and '/' as "%25" and "%2F"
 * when escape (room for 3 n bytes reserved). */
static void put_path(char *out, size_t *at, const char *p, size_t n,
		     bool escape)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (escape && (p[i] == '%' || p[i] == '/')) {
			memcpy(out + *at, p[i] == '%' ? "%25" : "%2F", 3);
			*at += 3;
		} else {
			out[(*at)++] = p[i];
		}
	}
}

/* Where to cut the escaped e[0..len) at most n bytes in, so that the cut
 * falls neither inside an escape nor inside a UTF-8 character. */
static size_t cut_at(const char *e, size_t len, size_t n)
{
	if (n >= len)
		return len;
	if (n >= 1 && e[n - 1] == '%')
		n -= 1;
	else if (n >= 2 && e[n - 2] == '%')
		n -= 2;
	while (n && ((unsigned char)e[n] & 0xc0) == 0x80)
		n--;
	return n;
}

/*
 * The name of a file into *buf (grown as needed, *cap bytes) (docs/view.md, "The tree"): prefix, the
 * source's name and a dot (a mixture's), the shard's path within its
 * source up to its extension, then a slice's samples part after a dot,
 * then the extension.  The path keeps its sub-directories with '/' and
 * '%' escaped ("%2F", "%25"), so that en/shard-000000.tar and
 * de/shard-000000.tar never share a name; a tree format's sub-directories
 * are directories of the view and its name is the base alone.  A name
 * longer than NAME_MAX_BYTES has its path cut and followed by '~' and the
 * first 16 hex digits of the SHA-256 of the path within the source, the
 * extension kept when it has at most EXT_KEPT_MAX bytes.
 */
int sfs_view_file_name(char **buf, size_t *cap, const char *prefix,
		       const char *sname, const char *path, bool tree,
		       const char *samples)
{
	const char *base = strrchr(path, '/'), *shown, *ext;
	size_t fixed, at = 0, n, stem_len, ext_len, kept, room, cut;
	unsigned char d[SFS_DIGEST_LEN];
	char hex[SFS_DIGEST_HEX];
	char *stem;

	base = base ? base + 1 : path;
	shown = tree ? base : path;
	ext = strrchr(base, '.');
	if (!ext || ext == base)
		ext = base + strlen(base);
	fixed = strlen(prefix) + strlen(sname) + 1 +
		(samples ? strlen(samples) + 1 : 0);
	n = strlen(shown);
	/* the name, and the escaped stem past it for a cut */
	if (n > (SIZE_MAX - fixed - 32) / 6 ||
	    sfs_grow(buf, cap, fixed + 6 * n + 32, 1))
		return -ENOMEM;
	at = (size_t)(put_str(put_str(*buf, prefix), sname) - *buf);
	if (*sname)
		(*buf)[at++] = '.';
	fixed = at;
	put_path((*buf), &at, shown, (size_t)(ext - shown), !tree);
	stem_len = at - fixed;
	if (samples) {
		(*buf)[at++] = '.';
		at = (size_t)(put_str(*buf + at, samples) - *buf);
	}
	ext_len = strlen(ext);
	kept = at;
	put_path((*buf), &at, ext, ext_len, !tree);
	/* what the extension takes escaped, when kept */
	kept = ext_len <= EXT_KEPT_MAX ? at - kept : 0;
	(*buf)[at] = '\0';
	if (at <= NAME_MAX_BYTES)
		return 0;
	/* too long: keep the escaped stem past the name, cut it there */
	stem = (*buf) + at + 1;
	memcpy(stem, (*buf) + fixed, stem_len);
	ext_len = ext_len <= EXT_KEPT_MAX ? ext_len : 0;
	at = fixed;
	room = NAME_MAX_BYTES - fixed - 17 -
	       (samples ? strlen(samples) + 1 : 0) - kept;
	cut = cut_at(stem, stem_len, room);
	memmove((*buf) + at, stem, cut);
	at += cut;
	sfs_digest_buf(path, strlen(path), d);
	sfs_digest_hex(d, hex);
	at += (size_t)sprintf((*buf) + at, "~%.16s", hex);
	if (samples)
		at += (size_t)sprintf((*buf) + at, ".%s", samples);
	put_path((*buf), &at, ext, ext_len, !tree);
	(*buf)[at] = '\0';
	return 0;
}

/*
 * The start of a file's name: its sequence number in the reader's order,
 * zero-padded to the width of the largest (view.c: at least 6), after
 * its epoch (padded alike) when a directory holds several epochs.
 * sfs_view_name_seq reads it back.
 */
int sfs_view_name_prefix(char *out, size_t len, bool with_epoch, uint64_t epoch,
			 int epoch_width, size_t seq, int seq_width)
{
	int ed = sfs_view_digits(epoch), sd = sfs_view_digits(seq);
	size_t need =
		(size_t)(sd > seq_width ? sd : seq_width) + 1 +
		(with_epoch ?
			 (size_t)(ed > epoch_width ? ed : epoch_width) + 1 :
			 0);
	char *p = out;

	if (need >= len)
		return -ENAMETOOLONG;
	if (with_epoch) {
		p = put_u64(p, epoch, epoch_width);
		*p++ = '-';
	}
	p = put_u64(p, seq, seq_width);
	*p++ = '-';
	*p = '\0';
	return 0;
}

size_t sfs_view_name_seq(const char *name, bool with_epoch, uint64_t *seq)
{
	const char *p = name;
	size_t n;

	if (with_epoch) {
		n = strspn(p, "0123456789");
		if (!n || p[n] != '-')
			return 0;
		p += n + 1;
	}
	n = strspn(p, "0123456789");
	if (!n || n > 19 || p[n] != '-')
		return 0;
	*seq = strtoull(p, NULL, 10);
	return (size_t)(p - name) + n + 1;
}
