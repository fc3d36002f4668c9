/*
 * A running digest is OpenSSL's SHA256_CTX where OpenSSL still declares
 * it: in OpenSSL 3.0 every EVP_DigestInit_ex frees the provider's context
 * and allocates a new one, which costs twice the hash of a small sample
 * (a Parquet row, a JSONL line), and the indexer digests one per sample.
 * The bytes are SHA-256 either way; an OpenSSL built without its 3.0
 * deprecated interfaces gets the EVP calls.
 */
#define OPENSSL_SUPPRESS_DEPRECATED

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/sha.h>

#include "shardfs/digest.h"

#define READ_BLOCK (1 << 20)

#ifndef OPENSSL_NO_DEPRECATED_3_0
#define SHA256_CTX_CALLS 1
#endif

struct sfs_digest {
#ifdef SHA256_CTX_CALLS
	SHA256_CTX ctx;
#else
	EVP_MD_CTX *ctx;
#endif
	unsigned char *buf; /* READ_BLOCK bytes for sfs_digest_fd */
};

/*
 * SHA-256 fetched from OpenSSL's provider once: EVP_sha256() makes every
 * init look the algorithm up again, under a lock the threads that hash
 * small buffers (boundary blocks, slice names) contend on.  Held for the
 * life of the process.
 */
static EVP_MD *fetched;
static pthread_once_t fetch_once = PTHREAD_ONCE_INIT;

static void fetch_sha256(void)
{
	fetched = EVP_MD_fetch(NULL, "SHA256", NULL);
}

static const EVP_MD *sha256(void)
{
	pthread_once(&fetch_once, fetch_sha256);
	return fetched ? fetched : EVP_sha256();
}

#ifdef SHA256_CTX_CALLS
struct sfs_digest *sfs_digest_new(void)
{
	struct sfs_digest *d = calloc(1, sizeof(*d));

	if (d && !SHA256_Init(&d->ctx)) {
		free(d);
		return NULL;
	}
	return d;
}

void sfs_digest_free(struct sfs_digest *d)
{
	if (!d)
		return;
	OPENSSL_cleanse(&d->ctx, sizeof(d->ctx));
	free(d->buf);
	free(d);
}

int sfs_digest_update(struct sfs_digest *d, const void *buf, size_t len)
{
	return SHA256_Update(&d->ctx, buf, len) ? 0 : -EIO;
}

int sfs_digest_final(struct sfs_digest *d, unsigned char out[SFS_DIGEST_LEN])
{
	if (!SHA256_Final(out, &d->ctx))
		return -EIO;
	return SHA256_Init(&d->ctx) ? 0 : -EIO;
}
#else
struct sfs_digest *sfs_digest_new(void)
{
	struct sfs_digest *d = calloc(1, sizeof(*d));

	if (!d)
		return NULL;
	d->ctx = EVP_MD_CTX_new();
	if (!d->ctx || !EVP_DigestInit_ex(d->ctx, sha256(), NULL)) {
		sfs_digest_free(d);
		return NULL;
	}
	return d;
}

void sfs_digest_free(struct sfs_digest *d)
{
	if (!d)
		return;
	EVP_MD_CTX_free(d->ctx);
	free(d->buf);
	free(d);
}

int sfs_digest_update(struct sfs_digest *d, const void *buf, size_t len)
{
	return EVP_DigestUpdate(d->ctx, buf, len) ? 0 : -EIO;
}

int sfs_digest_final(struct sfs_digest *d, unsigned char out[SFS_DIGEST_LEN])
{
	unsigned int n = 0;

	if (!EVP_DigestFinal_ex(d->ctx, out, &n) || n != SFS_DIGEST_LEN)
		return -EIO;
	return EVP_DigestInit_ex(d->ctx, sha256(), NULL) ? 0 : -EIO;
}

#endif

int sfs_digest_fd(struct sfs_digest *d, int fd, uint64_t size, const char *path,
		  struct sfs_error *err)
{
	return sfs_digest_fd_range(d, fd, 0, size, path, err);
}

int sfs_digest_fd_range(struct sfs_digest *d, int fd, uint64_t off,
			uint64_t len, const char *path, struct sfs_error *err)
{
	uint64_t end = off + len;

	if (!d->buf) {
		d->buf = malloc(READ_BLOCK);
		if (!d->buf)
			return sfs_errorf(err, -ENOMEM, "%s: out of memory",
					  path);
	}
	while (off < end) {
		size_t want = end - off < READ_BLOCK ? end - off : READ_BLOCK;
		ssize_t got = pread(fd, d->buf, want, (off_t)off);

		if (got < 0) {
			int e = errno;

			if (e == EINTR)
				continue;
			return sfs_errorf(err, -EIO,
					  "%s: read failed at byte %llu: %s",
					  path, (unsigned long long)off,
					  strerror(e));
		}
		if (got == 0)
			return sfs_errorf(
				err, -EIO,
				"%s: file ends at byte %llu, the index says %llu bytes; rebuild the index with shardfs-index",
				path, (unsigned long long)off,
				(unsigned long long)end);
		if (sfs_digest_update(d, d->buf, (size_t)got))
			return sfs_errorf(err, -EIO, "%s: SHA-256 failed",
					  path);
		off += (uint64_t)got;
	}
	return 0;
}

void sfs_digest_buf(const void *buf, size_t len,
		    unsigned char out[SFS_DIGEST_LEN])
{
	unsigned int n = 0;

	EVP_Digest(buf, len, out, &n, sha256(), NULL);
}

void sfs_digest_hex(const unsigned char d[SFS_DIGEST_LEN], char *out)
{
	static const char hex[] = "0123456789abcdef";
	int i;

	for (i = 0; i < SFS_DIGEST_LEN; i++) {
		out[2 * i] = hex[d[i] >> 4];
		out[2 * i + 1] = hex[d[i] & 15];
	}
	out[2 * SFS_DIGEST_LEN] = '\0';
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

int sfs_digest_parse(const char *hex, unsigned char out[SFS_DIGEST_LEN])
{
	int i;

	if (strlen(hex) != 2 * SFS_DIGEST_LEN)
		return -EINVAL;
	for (i = 0; i < SFS_DIGEST_LEN; i++) {
		int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return -EINVAL;
		out[i] = (unsigned char)(hi << 4 | lo);
	}
	return 0;
}
