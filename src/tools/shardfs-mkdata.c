/*
 * shardfs-mkdata: write a deterministic synthetic dataset.  The same
 * options give the same bytes on every machine: every size, count and byte
 * comes from the plan's PRNG (include/shardfs/prng.h) keyed by the seed.
 * Each format driver writes its own shards (its synthesize op).
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "shardfs/format.h"
#include "shardfs/options.h"

static const char *prog = "shardfs-mkdata";

struct spec {
	const char *dir;
	const struct sfs_format_ops *format;
	uint64_t shards;
	struct sfs_synth synth;
};

static int make(struct spec *s)
{
	struct sfs_error err = { 0 };
	char path[PATH_MAX];
	uint64_t i;
	int rc = 0;

	if (mkdir(s->dir, 0755) < 0 && errno != EEXIST) {
		fprintf(stderr, "%s: %s: %s\n", prog, s->dir, strerror(errno));
		return CLI_ERROR;
	}
	s->synth.buf = malloc(s->synth.size_hi + 8);
	if (!s->synth.buf) {
		cli_fail(prog, "out of memory");
		return CLI_ERROR;
	}
	for (i = 0; !rc && i < s->shards; i++) {
		if (s->format->tree)
			snprintf(path, sizeof(path), "%s/class-%03llu", s->dir,
				 (unsigned long long)i);
		else
			snprintf(path, sizeof(path), "%s/shard-%06llu%s",
				 s->dir, (unsigned long long)i,
				 s->format->suffixes[0]);
		rc = s->format->synthesize(&s->synth, i, path, &err);
	}
	free(s->synth.buf);
	if (rc) {
		cli_fail(prog, err.msg);
		return CLI_ERROR;
	}
	return CLI_OK;
}

/* The formats mkdata writes, "a, b or c", into buf. */
static const char *writable_formats(char *buf, size_t len)
{
	const struct sfs_format_ops *ops;
	size_t i, n = 0, k = 0, at = 0;

	for (i = 0; (ops = sfs_format_at(i)); i++)
		n += ops->synthesize != NULL;
	buf[0] = '\0';
	for (i = 0; (ops = sfs_format_at(i)); i++) {
		if (!ops->synthesize)
			continue;
		k++;
		at += (size_t)snprintf(buf + at, len - at, "%s%s",
				       k == 1 ? "" :
				       k == n ? " or " :
						", ",
				       ops->name);
		if (at >= len)
			break;
	}
	return buf;
}

static void usage(FILE *f)
{
	char formats[128];

	fprintf(f,
		"usage: shardfs-mkdata DIR [options]\n"
		"\n"
		"Write a deterministic synthetic dataset into DIR: the same options give\n"
		"the same bytes everywhere.\n"
		"\n"
		"  --format F       %s [tar]\n"
		"  --shards N       shards (for files: class directories) [8]\n"
		"  --samples A[-B]  samples per shard, drawn from A..B [100]\n"
		"  --size A[-B]     bytes per member (tar, files) or sample [100-1000]\n"
		"  --members A[-B]  files per sample, tar and files (.jpg .cls .json) [2-3]\n"
		"  --seed S         [0]\n"
		"  --long-names     put tar members under a long directory name, so\n"
		"                   every member needs a pax extended header\n"
		"  --help, --version\n",
		writable_formats(formats, sizeof(formats)));
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
		.format = sfs_format_by_name("tar"),
		.shards = 8,
		.synth = {
			.samples_lo = 100,
			.samples_hi = 100,
			.size_lo = 100,
			.size_hi = 1000,
			.members_lo = 2,
			.members_hi = 3,
		},
	};
	char formats[128];
	struct sfs_error err = { 0 };
	uint64_t unused;
	int c, rc = 0;

	while (!rc && (c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case OPT_FORMAT:
			s.format = sfs_format_by_name(optarg);
			if (!s.format || !s.format->synthesize)
				rc = sfs_errorf(
					&err, -EINVAL, "--format %s: use %s",
					optarg,
					writable_formats(formats,
							 sizeof(formats)));
			break;
		case OPT_SHARDS:
			rc = cli_range("shards", optarg, 1, 1000000, &s.shards,
				       &unused, &err);
			break;
		case OPT_SAMPLES:
			rc = cli_range("samples", optarg, 1, 10000000,
				       &s.synth.samples_lo, &s.synth.samples_hi,
				       &err);
			break;
		case OPT_SIZE:
			rc = cli_range("size", optarg, 0, 1 << 30,
				       &s.synth.size_lo, &s.synth.size_hi,
				       &err);
			break;
		case OPT_MEMBERS:
			rc = cli_range("members", optarg, 1, 3,
				       &s.synth.members_lo, &s.synth.members_hi,
				       &err);
			break;
		case OPT_SEED:
			rc = sfs_options_number("seed", optarg, 0, UINT64_MAX,
						&s.synth.seed, &err);
			break;
		case OPT_LONG:
			s.synth.long_names = true;
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
