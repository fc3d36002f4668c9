/*
 * Parquet's codecs: a page's bytes decompressed to exactly the size its
 * header says, and a cut page compressed with its chunk's codec.
 */
#include <brotli/decode.h>
#include <brotli/encode.h>
#include <errno.h>
#include <lz4.h>
#include <snappy-c.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#include "formats/parquet/parquet_i.h"

const char *sfs_pq_codec_name(int32_t codec)
{
	static const char *const names[] = { "UNCOMPRESSED", "SNAPPY", "GZIP",
					     "LZO",	     "BROTLI", "LZ4",
					     "ZSTD",	     "LZ4_RAW" };

	return codec >= 0 && codec < 8 ? names[codec] : "unknown";
}

static bool gunzip(const unsigned char *in, size_t n, unsigned char *out,
		   size_t un)
{
	z_stream z = { 0 };
	bool ok;

	if (inflateInit2(&z, 15 + 32) != Z_OK)
		return false;
	z.next_in = (unsigned char *)in;
	z.avail_in = (uInt)n;
	z.next_out = out;
	z.avail_out = (uInt)un;
	ok = inflate(&z, Z_FINISH) == Z_STREAM_END && z.total_out == un;
	inflateEnd(&z);
	return ok;
}

/* Hadoop's LZ4 framing: blocks of (u32 BE size, u32 BE compressed, LZ4). */
static bool lz4_hadoop(const unsigned char *in, size_t n, unsigned char *out,
		       size_t un)
{
	size_t done = 0;

	while (n >= 8) {
		uint32_t ul = (uint32_t)in[0] << 24 | (uint32_t)in[1] << 16 |
			      (uint32_t)in[2] << 8 | in[3];
		uint32_t cl = (uint32_t)in[4] << 24 | (uint32_t)in[5] << 16 |
			      (uint32_t)in[6] << 8 | in[7];
		int got;

		if (cl > n - 8 || ul > un - done || cl > INT32_MAX ||
		    ul > INT32_MAX)
			return false;
		got = LZ4_decompress_safe((const char *)in + 8,
					  (char *)out + done, (int)cl, (int)ul);
		if (got != (int)ul)
			return false;
		done += ul;
		in += 8 + cl;
		n -= 8 + cl;
	}
	return n == 0 && done == un;
}

/* Decompress n bytes of codec into exactly un bytes at out. */
bool sfs_pq_page_decompress(int32_t codec, const unsigned char *in, size_t n,
			    unsigned char *out, size_t un)
{
	size_t got = un;

	switch (codec) {
	case SFS_PQ_C_UNCOMPRESSED:
		if (n != un)
			return false;
		memcpy(out, in, n);
		return true;
	case SFS_PQ_C_SNAPPY:
		return snappy_uncompressed_length((const char *)in, n, &got) ==
			       SNAPPY_OK &&
		       got == un &&
		       snappy_uncompress((const char *)in, n, (char *)out,
					 &got) == SNAPPY_OK &&
		       got == un;
	case SFS_PQ_C_GZIP:
		return gunzip(in, n, out, un);
	case SFS_PQ_C_BROTLI:
		return BrotliDecoderDecompress(n, in, &got, out) ==
			       BROTLI_DECODER_RESULT_SUCCESS &&
		       got == un;
	case SFS_PQ_C_LZ4:
		if (lz4_hadoop(in, n, out, un))
			return true;
		/* some writers wrote bare LZ4 blocks */
		__attribute__((fallthrough));
	case SFS_PQ_C_LZ4_RAW:
		return n <= INT32_MAX && un <= INT32_MAX &&
		       LZ4_decompress_safe((const char *)in, (char *)out,
					   (int)n, (int)un) == (int)un;
	case SFS_PQ_C_ZSTD:
		got = ZSTD_decompress(out, un, in, n);
		return !ZSTD_isError(got) && got == un;
	default:
		return false;
	}
}

/* Compress in[0 .. n) with codec, appended to o (straight into its
 * buffer: a cut page may be a page's worth).  Returns 0, -EINVAL or
 * -ENOMEM. */
int sfs_pq_page_compress(int32_t codec, const unsigned char *in, size_t n,
			 struct sfs_thrift_out *o)
{
	size_t cap, got;
	unsigned char *p;
	bool ok = true;

	if (codec == SFS_PQ_C_UNCOMPRESSED) {
		sfs_thrift_put(o, in, n);
		return o->oom ? -ENOMEM : 0;
	}
	cap = n + n / 2 + 1024;
	if (codec == SFS_PQ_C_SNAPPY)
		cap = snappy_max_compressed_length(n);
	else if (codec == SFS_PQ_C_ZSTD)
		cap = ZSTD_compressBound(n);
	else if (codec == SFS_PQ_C_BROTLI)
		cap = BrotliEncoderMaxCompressedSize(n) + 1024;
	else if (codec == SFS_PQ_C_LZ4 || codec == SFS_PQ_C_LZ4_RAW)
		cap = (size_t)LZ4_compressBound((int)n) + 8;
	p = sfs_thrift_take(o, cap);
	if (!p)
		return -ENOMEM;
	got = cap;
	switch (codec) {
	case SFS_PQ_C_SNAPPY:
		ok = snappy_compress((const char *)in, n, (char *)p, &got) ==
		     SNAPPY_OK;
		break;
	case SFS_PQ_C_GZIP: {
		z_stream z = { 0 };

		ok = deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8,
				  Z_DEFAULT_STRATEGY) == Z_OK;
		if (ok) {
			z.next_in = (unsigned char *)in;
			z.avail_in = (uInt)n;
			z.next_out = p;
			z.avail_out = (uInt)cap;
			ok = deflate(&z, Z_FINISH) == Z_STREAM_END;
			got = z.total_out;
			deflateEnd(&z);
		}
		break;
	}
	case SFS_PQ_C_BROTLI:
		ok = BrotliEncoderCompress(BROTLI_DEFAULT_QUALITY,
					   BROTLI_DEFAULT_WINDOW,
					   BROTLI_DEFAULT_MODE, n, in, &got,
					   p) == BROTLI_TRUE;
		break;
	case SFS_PQ_C_LZ4: {
		/* Hadoop framing, one block: what arrow writes for LZ4 */
		int c = LZ4_compress_default((const char *)in, (char *)p + 8,
					     (int)n, (int)(cap - 8));

		ok = c > 0;
		got = (size_t)c + 8;
		p[0] = (unsigned char)(n >> 24);
		p[1] = (unsigned char)(n >> 16);
		p[2] = (unsigned char)(n >> 8);
		p[3] = (unsigned char)n;
		p[4] = (unsigned char)((unsigned)c >> 24);
		p[5] = (unsigned char)((unsigned)c >> 16);
		p[6] = (unsigned char)((unsigned)c >> 8);
		p[7] = (unsigned char)c;
		break;
	}
	case SFS_PQ_C_LZ4_RAW: {
		int c = LZ4_compress_default((const char *)in, (char *)p,
					     (int)n, (int)cap);

		ok = c > 0;
		got = (size_t)c;
		break;
	}
	case SFS_PQ_C_ZSTD:
		got = ZSTD_compress(p, cap, in, n, 3);
		ok = !ZSTD_isError(got);
		break;
	default:
		ok = false;
	}
	/* what was not written is given back (o->len - cap is where the
	 * compressed bytes begin) */
	ok = ok && got <= cap;
	o->len -= ok ? cap - got : cap;
	return ok ? 0 : -EINVAL;
}
