/*
 * shardfs-mkdata: write a deterministic synthetic dataset.  The same
 * options give the same bytes on every machine: every size, count and byte
 * comes from the plan's PRNG (include/shardfs/prng.h) keyed by the seed.
 */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "shardfs/crc32c.h"
#include "shardfs/format.h"
#include "shardfs/options.h"
#include "shardfs/prng.h"

#define FIXED_MTIME 1700000000
#define LONG_DIR                                                           \
	"a-directory-name-long-enough-that-every-member-path-needs-a-pax-" \
	"extended-header-because-ustar-stops-at-100-bytes"

static const char *prog = "shardfs-mkdata";
static const char *const member_ext[] = { ".jpg", ".cls", ".json" };

struct spec {
	const char *dir;
	const char *format;
	uint64_t shards;
	uint64_t samples_lo, samples_hi;
	uint64_t size_lo, size_hi;
	uint64_t members_lo, members_hi;
	uint64_t seed;
	bool long_names;
};

struct gen {
	const struct spec *s;
	unsigned char *buf; /* size_hi bytes of sample data */
	struct sfs_error err;
};

static uint64_t pick(struct sfs_prng *r, uint64_t lo, uint64_t hi)
{
	return lo + sfs_prng_below(r, hi - lo + 1);
}

static void fill(struct sfs_prng *r, unsigned char *p, uint64_t n)
{
	uint64_t i;

	for (i = 0; i < n; i += 8) {
		uint64_t v = sfs_prng_next(r);
		uint64_t k;

		for (k = 0; k < 8 && i + k < n; k++)
			p[i + k] = (unsigned char)(v >> (8 * k));
	}
}

static int write_file(const char *path, const void *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	const char *p = buf;

	if (fd < 0)
		return -errno;
	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0) {
			int e = errno;

			close(fd);
			return -e;
		}
		p += n;
		len -= (size_t)n;
	}
	return close(fd) < 0 ? -errno : 0;
}

static int make_tar(struct gen *g, uint64_t shard, const char *path)
{
	const struct spec *s = g->s;
	struct archive *a = archive_write_new();
	struct archive_entry *e = archive_entry_new();
	struct sfs_prng r;
	uint64_t n, i, m, nm, size;
	char name[PATH_MAX];
	int rc = -EIO;

	if (!a || !e)
		goto out_free;
	sfs_prng_init(&r, s->seed, shard, 1);
	archive_write_set_format_pax_restricted(a);
	archive_write_add_filter_none(a);
	archive_write_set_bytes_in_last_block(a, 1);
	if (archive_write_open_filename(a, path) != ARCHIVE_OK)
		goto out_err;
	n = pick(&r, s->samples_lo, s->samples_hi);
	for (i = 0; i < n; i++) {
		nm = pick(&r, s->members_lo, s->members_hi);
		for (m = 0; m < nm; m++) {
			size = pick(&r, s->size_lo, s->size_hi);
			fill(&r, g->buf, size);
			snprintf(name, sizeof(name), "%s%s%06llu_%06llu%s",
				 s->long_names ? LONG_DIR : "",
				 s->long_names ? "/" : "",
				 (unsigned long long)shard,
				 (unsigned long long)i, member_ext[m % 3]);
			archive_entry_clear(e);
			archive_entry_set_pathname(e, name);
			archive_entry_set_filetype(e, AE_IFREG);
			archive_entry_set_perm(e, 0644);
			archive_entry_set_size(e, (la_int64_t)size);
			archive_entry_set_mtime(e, FIXED_MTIME, 0);
			if (archive_write_header(a, e) != ARCHIVE_OK ||
			    archive_write_data(a, g->buf, size) !=
				    (la_ssize_t)size)
				goto out_err;
		}
	}
	if (archive_write_close(a) != ARCHIVE_OK)
		goto out_err;
	rc = 0;
	goto out_free;
out_err:
	sfs_errorf(&g->err, -EIO, "%s: %s", path, archive_error_string(a));
out_free:
	archive_entry_free(e);
	archive_write_free(a);
	return rc;
}

/* Append to a growable buffer. */
struct out {
	char *p;
	size_t len, cap;
};

static int out_put(struct out *o, const void *data, size_t n)
{
	if (o->len + n > o->cap) {
		size_t ncap = (o->len + n) * 2;
		char *np = realloc(o->p, ncap);

		if (!np)
			return -ENOMEM;
		o->p = np;
		o->cap = ncap;
	}
	memcpy(o->p + o->len, data, n);
	o->len += n;
	return 0;
}

/* Write what o holds to path (unless rc already says it failed), free it. */
static int out_finish(struct gen *g, struct out *o, const char *path, int rc)
{
	if (!rc)
		rc = write_file(path, o->p, o->len);
	free(o->p);
	if (rc)
		sfs_errorf(&g->err, rc, "%s: %s", path, strerror(-rc));
	return rc;
}

static int make_jsonl(struct gen *g, uint64_t shard, const char *path)
{
	static const char hex[] = "0123456789abcdef";
	const struct spec *s = g->s;
	struct out o = { 0 };
	struct sfs_prng r;
	uint64_t n, i, k, size;
	char head[96];
	int rc = 0;

	sfs_prng_init(&r, s->seed, shard, 2);
	n = pick(&r, s->samples_lo, s->samples_hi);
	for (i = 0; !rc && i < n; i++) {
		size = pick(&r, s->size_lo, s->size_hi);
		fill(&r, g->buf, size);
		snprintf(head, sizeof(head),
			 "{\"key\": \"%06llu_%06llu\", \"data\": \"",
			 (unsigned long long)shard, (unsigned long long)i);
		rc = out_put(&o, head, strlen(head));
		for (k = 0; !rc && k < size; k++) {
			char h[2] = { hex[g->buf[k] >> 4],
				      hex[g->buf[k] & 15] };

			rc = out_put(&o, h, 2);
		}
		if (!rc)
			rc = out_put(&o, "\"}\n", 3);
	}
	return out_finish(g, &o, path, rc);
}

static int make_tfrecord(struct gen *g, uint64_t shard, const char *path)
{
	const struct spec *s = g->s;
	struct out o = { 0 };
	struct sfs_prng r;
	unsigned char h[12], t[4];
	uint64_t n, i, k, size;
	uint32_t crc;
	int rc = 0;

	sfs_prng_init(&r, s->seed, shard, 3);
	n = pick(&r, s->samples_lo, s->samples_hi);
	for (i = 0; !rc && i < n; i++) {
		size = pick(&r, s->size_lo, s->size_hi);
		fill(&r, g->buf, size);
		for (k = 0; k < 8; k++)
			h[k] = (unsigned char)(size >> (8 * k));
		crc = sfs_crc32c_masked(h, 8);
		for (k = 0; k < 4; k++)
			h[8 + k] = (unsigned char)(crc >> (8 * k));
		crc = sfs_crc32c_masked(g->buf, size);
		for (k = 0; k < 4; k++)
			t[k] = (unsigned char)(crc >> (8 * k));
		rc = out_put(&o, h, 12);
		if (!rc)
			rc = out_put(&o, g->buf, size);
		if (!rc)
			rc = out_put(&o, t, 4);
	}
	return out_finish(g, &o, path, rc);
}

/* `files`: one directory per "shard" (a class), files grouped by key. */
static int make_files(struct gen *g, uint64_t shard, const char *dir)
{
	const struct spec *s = g->s;
	struct sfs_prng r;
	uint64_t n, i, m, nm, size;
	char path[PATH_MAX];
	int rc = 0;

	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		return sfs_errorf(&g->err, -errno, "%s: %s", dir,
				  strerror(errno));
	sfs_prng_init(&r, s->seed, shard, 4);
	n = pick(&r, s->samples_lo, s->samples_hi);
	for (i = 0; !rc && i < n; i++) {
		nm = pick(&r, s->members_lo, s->members_hi);
		for (m = 0; !rc && m < nm; m++) {
			size = pick(&r, s->size_lo, s->size_hi);
			fill(&r, g->buf, size);
			if ((size_t)snprintf(path, sizeof(path),
					     "%s/%06llu_%06llu%s", dir,
					     (unsigned long long)shard,
					     (unsigned long long)i,
					     member_ext[m % 3]) >= sizeof(path))
				return sfs_errorf(&g->err, -ENAMETOOLONG,
						  "%s: path too long", dir);
			rc = write_file(path, g->buf, size);
			if (rc)
				sfs_errorf(&g->err, rc, "%s: %s", path,
					   strerror(-rc));
		}
	}
	return rc;
}

static int make(const struct spec *s)
{
	struct gen g = { .s = s };
	char path[PATH_MAX];
	uint64_t i;
	int rc = 0;

	if (mkdir(s->dir, 0755) < 0 && errno != EEXIST) {
		fprintf(stderr, "%s: %s: %s\n", prog, s->dir, strerror(errno));
		return CLI_ERROR;
	}
	g.buf = malloc(s->size_hi + 8);
	if (!g.buf) {
		cli_fail(prog, "out of memory");
		return CLI_ERROR;
	}
	for (i = 0; !rc && i < s->shards; i++) {
		if (!strcmp(s->format, "files")) {
			snprintf(path, sizeof(path), "%s/class-%03llu", s->dir,
				 (unsigned long long)i);
			rc = make_files(&g, i, path);
			continue;
		}
		snprintf(path, sizeof(path), "%s/shard-%06llu.%s", s->dir,
			 (unsigned long long)i, s->format);
		if (!strcmp(s->format, "tar"))
			rc = make_tar(&g, i, path);
		else if (!strcmp(s->format, "jsonl"))
			rc = make_jsonl(&g, i, path);
		else
			rc = make_tfrecord(&g, i, path);
	}
	free(g.buf);
	if (rc) {
		cli_fail(prog, g.err.msg);
		return CLI_ERROR;
	}
	return CLI_OK;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: shardfs-mkdata DIR [options]\n"
		"\n"
		"Write a deterministic synthetic dataset into DIR: the same options give\n"
		"the same bytes everywhere.\n"
		"\n"
		"  --format F       tar, jsonl, tfrecord or files [tar]\n"
		"  --shards N       shards (for files: class directories) [8]\n"
		"  --samples A[-B]  samples per shard, drawn from A..B [100]\n"
		"  --size A[-B]     bytes per member (tar, files) or sample [100-1000]\n"
		"  --members A[-B]  files per sample, tar and files (.jpg .cls .json) [2-3]\n"
		"  --seed S         [0]\n"
		"  --long-names     put tar members under a long directory name, so\n"
		"                   every member needs a pax extended header\n"
		"  --help, --version\n");
}

int main(int argc, char **argv)
{
	enum {
		OPT_FORMAT = 256,
		OPT_SHARDS,
		OPT_SAMPLES,
		OPT_SIZE,
		OPT_MEMBERS,
		OPT_SEED,
		OPT_LONG,
		OPT_HELP,
		OPT_VERSION
	};
	static const struct option longopts[] = {
		{ "format", required_argument, NULL, OPT_FORMAT },
		{ "shards", required_argument, NULL, OPT_SHARDS },
		{ "samples", required_argument, NULL, OPT_SAMPLES },
		{ "size", required_argument, NULL, OPT_SIZE },
		{ "members", required_argument, NULL, OPT_MEMBERS },
		{ "seed", required_argument, NULL, OPT_SEED },
		{ "long-names", no_argument, NULL, OPT_LONG },
		{ "help", no_argument, NULL, OPT_HELP },
		{ "version", no_argument, NULL, OPT_VERSION },
		{ NULL, 0, NULL, 0 },
	};
	struct spec s = {
		.format = "tar",
		.shards = 8,
		.samples_lo = 100,
		.samples_hi = 100,
		.size_lo = 100,
		.size_hi = 1000,
		.members_lo = 2,
		.members_hi = 3,
	};
	struct sfs_error err = { 0 };
	uint64_t unused;
	int c, rc = 0;

	while (!rc && (c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case OPT_FORMAT:
			s.format = optarg;
			if (strcmp(optarg, "tar") && strcmp(optarg, "jsonl") &&
			    strcmp(optarg, "tfrecord") &&
			    strcmp(optarg, "files"))
				rc = sfs_errorf(
					&err, -EINVAL,
					"--format %s: use tar, jsonl, tfrecord or files",
					optarg);
			break;
		case OPT_SHARDS:
			rc = cli_range("shards", optarg, 1, 1000000, &s.shards,
				       &unused, &err);
			break;
		case OPT_SAMPLES:
			rc = cli_range("samples", optarg, 1, 10000000,
				       &s.samples_lo, &s.samples_hi, &err);
			break;
		case OPT_SIZE:
			rc = cli_range("size", optarg, 0, 1 << 30, &s.size_lo,
				       &s.size_hi, &err);
			break;
		case OPT_MEMBERS:
			rc = cli_range("members", optarg, 1, 3, &s.members_lo,
				       &s.members_hi, &err);
			break;
		case OPT_SEED:
			rc = sfs_options_number("seed", optarg, 0, UINT64_MAX,
						&s.seed, &err);
			break;
		case OPT_LONG:
			s.long_names = true;
			break;
		case OPT_HELP:
			usage(stdout);
			return CLI_OK;
		case OPT_VERSION:
			printf("shardfs-mkdata %s\n", SHARDFS_VERSION);
			return CLI_OK;
		default:
			usage(stderr);
			return CLI_ERROR;
		}
	}
	if (rc) {
		cli_fail(prog, err.msg);
		return CLI_ERROR;
	}
	if (optind != argc - 1) {
		usage(stderr);
		return CLI_ERROR;
	}
	s.dir = argv[optind];
	return make(&s);
}
