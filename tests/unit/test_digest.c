/*
 * SHA-256 (include/shardfs/digest.h) gives the known answers of FIPS
 * 180-2 whichever OpenSSL interface digest.c is built on (SHA256_CTX
 * where OpenSSL declares it, EVP where its deprecated calls are compiled
 * out: tests/build-matrix.sh runs this test built both ways), fed whole,
 * in pieces of every split, from a file, and again after a final.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "shardfs/digest.h"

struct kat {
	const char *msg;
	size_t repeat; /* msg this many times */
	const char *hex;
};

static const struct kat kats[] = {
	{ "", 1,
	  "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" },
	{ "abc", 1,
	  "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" },
	{ "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 1,
	  "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1" },
	{ "a", 1000000,
	  "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0" },
};

static char *expand(const struct kat *k, size_t *len)
{
	size_t n = strlen(k->msg), i;
	char *buf = malloc(n * k->repeat + 1);

	assert_non_null(buf);
	for (i = 0; i < k->repeat; i++)
		memcpy(buf + i * n, k->msg, n);
	*len = n * k->repeat;
	return buf;
}

static void expect_hex(const unsigned char d[SFS_DIGEST_LEN], const char *hex)
{
	char got[2 * SFS_DIGEST_LEN + 1];

	sfs_digest_hex(d, got);
	assert_string_equal(got, hex);
}

static void test_digest_known_answers(void **state)
{
	struct sfs_digest *d = sfs_digest_new();
	unsigned char out[SFS_DIGEST_LEN];
	size_t i, len;

	(void)state;
	assert_non_null(d);
	for (i = 0; i < sizeof(kats) / sizeof(kats[0]); i++) {
		char *buf = expand(&kats[i], &len);

		sfs_digest_buf(buf, len, out);
		expect_hex(out, kats[i].hex);
		/* the same digest again after a final: it starts afresh */
		assert_int_equal(sfs_digest_update(d, buf, len), 0);
		assert_int_equal(sfs_digest_final(d, out), 0);
		expect_hex(out, kats[i].hex);
		free(buf);
	}
	sfs_digest_free(d);
}

/* Every split of a message in two, and one byte at a time. */
static void test_digest_pieces(void **state)
{
	const struct kat *k = &kats[2];
	struct sfs_digest *d = sfs_digest_new();
	unsigned char out[SFS_DIGEST_LEN];
	size_t len = strlen(k->msg), at;

	(void)state;
	assert_non_null(d);
	for (at = 0; at <= len; at++) {
		assert_int_equal(sfs_digest_update(d, k->msg, at), 0);
		assert_int_equal(sfs_digest_update(d, k->msg + at, len - at),
				 0);
		assert_int_equal(sfs_digest_final(d, out), 0);
		expect_hex(out, k->hex);
	}
	for (at = 0; at < len; at++)
		assert_int_equal(sfs_digest_update(d, k->msg + at, 1), 0);
	assert_int_equal(sfs_digest_final(d, out), 0);
	expect_hex(out, k->hex);
	sfs_digest_free(d);
}

/* From a file: a million 'a', read in blocks. */
static void test_digest_fd(void **state)
{
	const struct kat *k = &kats[3];
	struct sfs_digest *d = sfs_digest_new();
	struct sfs_error err = { 0 };
	unsigned char out[SFS_DIGEST_LEN];
	char path[] = "/tmp/shardfs-digest-XXXXXX";
	size_t len;
	char *buf = expand(k, &len);
	int fd = mkstemp(path);

	(void)state;
	assert_non_null(d);
	assert_true(fd >= 0);
	unlink(path);
	assert_int_equal(write(fd, buf, len), (ssize_t)len);
	assert_int_equal(sfs_digest_fd(d, fd, len, path, &err), 0);
	assert_int_equal(sfs_digest_final(d, out), 0);
	expect_hex(out, k->hex);
	close(fd);
	free(buf);
	sfs_digest_free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_digest_known_answers),
		cmocka_unit_test(test_digest_pieces),
		cmocka_unit_test(test_digest_fd),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
