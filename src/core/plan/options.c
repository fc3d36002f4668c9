#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan_json_i.h"
#include "shardfs/options.h"
#include "shardfs/util.h"

#define RANK_LIST_MAX SFS_WORLD_MAX

static const char *const shuffle_names[] = { "none", "units", "samples", NULL };
static const char *const remainder_names[] = { "pad", "drop", NULL };
static const char *const partition_names[] = { "contiguous", "interleaved",
					       NULL };
const char *const sfs_follow_formats[] = { "auto", "jsonl", "tfrecord", "tar",
					   NULL };

#define PLAN(field) offsetof(struct sfs_options, plan.field)
#define MOUNT(field) offsetof(struct sfs_mount_opts, field)

const struct sfs_opt sfs_plan_options[] = {
	{ "world", SFS_OPT_U32, PLAN(world), 1, SFS_WORLD_MAX, NULL, "W", "1",
	  "ranks, W", true },
	{ "workers", SFS_OPT_U32, PLAN(workers), 1, SFS_WORKERS_MAX, NULL, "K",
	  "1", "loader workers per rank, K", true },
	{ "replicas", SFS_OPT_U32, PLAN(replicas), 1, SFS_WORLD_MAX, NULL, "R",
	  "1",
	  "consecutive groups of R ranks read the same data\n"
	  "(tensor, sequence or context parallel groups);\n"
	  "R divides world",
	  true },
	{ "epoch", SFS_OPT_U64, PLAN(epoch), 0, UINT64_MAX, NULL, "E", "0",
	  "the epoch (a mount serves it first)", true },
	{ "seed", SFS_OPT_U64, PLAN(seed), 0, UINT64_MAX, NULL, "S", "0",
	  "shuffle seed", true },
	{ "shuffle", SFS_OPT_ENUM, PLAN(shuffle), 0, 0, shuffle_names, NULL,
	  "units", "what is permuted each epoch", true },
	{ "block", SFS_OPT_U64, PLAN(block), 0, UINT64_MAX, NULL, "B", "0",
	  "samples per unit, 0 = whole shards", true },
	{ "remainder", SFS_OPT_ENUM, PLAN(remainder), 0, 0, remainder_names,
	  NULL, "pad",
	  "equal counts by repeating samples, or by leaving out\n"
	  "the tail",
	  true },
	{ "batch", SFS_OPT_U64, PLAN(batch), 1, SFS_BATCH_MAX, NULL, "B", "1",
	  "every reader's count is a multiple of B", true },
	{ "start", SFS_OPT_U64, PLAN(start), 0, UINT64_MAX, NULL, "P", "0",
	  "skip the first P samples of the epoch (resume)", true },
	{ "epoch_size", SFS_OPT_U64, PLAN(epoch_size), 0, UINT64_MAX, NULL, "N",
	  "0",
	  "samples per epoch, 0 = the source's (a mixture's\n"
	  "epoch_size); fewer takes the next part of the\n"
	  "source each epoch, more repeats it",
	  true },
	{ "partition", SFS_OPT_ENUM, PLAN(partition), 0, 0, partition_names,
	  NULL, "contiguous",
	  "interleaved: batches dealt in loader step order, so\n"
	  "S steps of every rank read the first S*world*batch\n"
	  "samples (exact elastic resume)",
	  true },
	{ "rank", SFS_OPT_RANKS, offsetof(struct sfs_options, ranks), 0,
	  SFS_WORLD_MAX - 1, NULL, "R", "all", "ranks to show: 3, 0,2 or 0-7",
	  false },
	{ .key = NULL },
};

const struct sfs_opt sfs_mount_options[] = {
	{ "epochs", SFS_OPT_U32, MOUNT(epochs), 1, SFS_EPOCHS_MAX, NULL, "N",
	  "1",
	  "epochs per worker directory, names prefixed by the\n"
	  "epoch, so a loader that lists once sees N epochs",
	  false },
	{ "index", SFS_OPT_PATH, MOUNT(index_dir), 0, 0, NULL, "DIR",
	  "SRC/.shardfs", "where the index is (shardfs-index --out)", false },
	{ "symlinks", SFS_OPT_FLAG, MOUNT(symlinks), 0, 1, NULL, NULL, "1",
	  "whole shards as symlinks to SRC; 0 serves them as\n"
	  "files (the reader cannot see SRC)",
	  false },
	{ "ahead", SFS_OPT_FLAG, MOUNT(ahead), 0, 1, NULL, NULL, "1",
	  "build the next epoch's view while this one is\n"
	  "served, so that switching to it only swaps views\n"
	  "(0: one view in memory, each switch builds its own;\n"
	  "none with epochs=N > 1)",
	  false },
	{ "prefetch", SFS_OPT_FLAG, MOUNT(prefetch), 0, 1, NULL, NULL, "1",
	  "read ahead the next file a reader will open", false },
	{ "splice", SFS_OPT_FLAG, MOUNT(splice), 0, 1, NULL, NULL, "1",
	  "answer reads by splicing from the source (0: read\n"
	  "into memory, then reply)",
	  false },
	{ "no_open", SFS_OPT_FLAG, MOUNT(no_open), 0, 1, NULL, NULL, "1",
	  "opens of files never reach the daemon (FUSE's\n"
	  "no_open); 0 answers each open, and reads of the\n"
	  "control files come from a snapshot taken at open",
	  false },
	{ "readahead", SFS_OPT_U32, MOUNT(readahead_kb), 0, 65536, NULL, "KB",
	  "1008",
	  "the mount's kernel read-ahead (root only; the\n"
	  "kernel's default, 128, sends 128 KiB reads; the\n"
	  "default is the largest whose reads splice through\n"
	  "a pipe of 1 MiB); 0 leaves it as it is",
	  false },
	{ "max_read", SFS_OPT_U32, MOUNT(max_read), 1, UINT32_MAX, NULL,
	  "BYTES", "-",
	  "the largest read request (FUSE's max_read); by\n"
	  "default the largest reply libfuse can splice:\n"
	  "pipe-max-size less 16 KiB (none with splice=0,\n"
	  "whose reads are copied)",
	  false },
	{ "prefetch_files", SFS_OPT_U32, MOUNT(prefetch_files), 1, 1024, NULL,
	  "N", "16",
	  "with prefetch=1: source files read ahead of a\n"
	  "reader, in its plan order, from its first read of a\n"
	  "file or lookup of a symlink (follow=1: its next\n"
	  "complete windows)",
	  false },
	{ "prefetch_mb", SFS_OPT_U32, MOUNT(prefetch_mb), 1, 65536, NULL, "MB",
	  "256",
	  "with prefetch=1: at most MB MiB read ahead of a\n"
	  "reader (page cache of the source, not the daemon's)",
	  false },
	{ "prefetch_threads", SFS_OPT_U32, MOUNT(prefetch_threads), 1, 64, NULL,
	  "T", "8",
	  "with prefetch=1: threads reading ahead, so requests\n"
	  "to the source at once (heap: 1 MiB each)",
	  false },
	{ "follow", SFS_OPT_FLAG, MOUNT(follow), 0, 1, NULL, NULL, "0",
	  "1: SRC grows while it is read: serve it in windows\n"
	  "(docs/follow.md)",
	  false },
	{ "window", SFS_OPT_U64, MOUNT(window), 1, 1ULL << 40, NULL, "N", "-",
	  "with follow=1: samples per window, a multiple of\n"
	  "world/replicas x workers x batch (required)",
	  false },
	{ "format", SFS_OPT_ENUM, MOUNT(format), 0, 0, sfs_follow_formats, NULL,
	  "auto",
	  "with follow=1: the shards' format, needed while SRC\n"
	  "holds none (auto: the first shard's)",
	  false },
	{ "follow_interval", SFS_OPT_U32, MOUNT(follow_interval), 1, 86400,
	  NULL, "S", "2",
	  "with follow=1: list SRC every S seconds (inotify\n"
	  "wakes the daemon at once where the kernel delivers\n"
	  "events; network file systems often do not)",
	  false },
	{ "follow_timeout", SFS_OPT_U32, MOUNT(follow_timeout), 1, 31536000,
	  NULL, "S", "600",
	  "with follow=1: a read that waits S seconds for its\n"
	  "window fails with EIO",
	  false },
	{ "progress", SFS_OPT_PATH, MOUNT(progress_dir), 0, 0, NULL, "DIR", "-",
	  "with follow=1: write DIR/rank-<R>.json, each rank's\n"
	  "consumed shard, for a producer elsewhere",
	  false },
	{ .key = NULL },
};

void sfs_options_init(struct sfs_options *o)
{
	memset(o, 0, sizeof(*o));
	o->plan.world = 1;
	o->plan.workers = 1;
	o->plan.replicas = 1;
	o->plan.shuffle = SFS_SHUFFLE_UNITS;
	o->plan.remainder = SFS_REMAINDER_PAD;
	o->plan.batch = 1;
}

void sfs_options_clear(struct sfs_options *o)
{
	free(o->ranks);
	sfs_options_init(o);
}

void sfs_mount_opts_init(struct sfs_mount_opts *m)
{
	memset(m, 0, sizeof(*m));
	m->epochs = 1;
	m->symlinks = true;
	m->ahead = true;
	m->prefetch = true;
	m->splice = true;
	m->no_open = true;
	m->readahead_kb = 1008;
	m->prefetch_files = 16;
	m->prefetch_mb = 256;
	m->prefetch_threads = 8;
	m->follow_interval = 2;
	m->follow_timeout = 600;
}

void sfs_mount_opts_clear(struct sfs_mount_opts *m)
{
	free(m->index_dir);
	free(m->progress_dir);
	sfs_mount_opts_init(m);
}

const char *sfs_shuffle_name(enum sfs_shuffle s)
{
	return s <= SFS_SHUFFLE_SAMPLES ? shuffle_names[s] : "?";
}

const char *sfs_remainder_name(enum sfs_remainder r)
{
	return remainder_names[r == SFS_REMAINDER_DROP];
}

const char *sfs_partition_name(enum sfs_partition p)
{
	return partition_names[p == SFS_PARTITION_INTERLEAVED];
}

int sfs_options_number(const char *key, const char *value, uint64_t min,
		       uint64_t max, uint64_t *out, struct sfs_error *err)
{
	const char *p = value;
	uint64_t v = 0;

	if (!*p)
		return sfs_errorf(err, -EINVAL,
				  "%s= is empty: use an integer in %llu..%llu",
				  key, (unsigned long long)min,
				  (unsigned long long)max);
	for (; *p; p++) {
		unsigned d = (unsigned)(*p - '0');

		if (!isdigit((unsigned char)*p))
			return sfs_errorf(
				err, -EINVAL,
				"%s=%s is not a number: use an integer in %llu..%llu",
				key, value, (unsigned long long)min,
				(unsigned long long)max);
		if (v > (UINT64_MAX - d) / 10) {
			v = UINT64_MAX;
			break;
		}
		v = v * 10 + d;
	}
	if (*p || v < min || v > max)
		return sfs_errorf(
			err, -EINVAL,
			"%s=%s is out of range: use an integer in %llu..%llu",
			key, value, (unsigned long long)min,
			(unsigned long long)max);
	*out = v;
	return 0;
}

/* Parse "3", "0,2", "0-7", "0-3,8" into a sorted set of ranks. */
static int parse_ranks(const char *value, uint32_t **out, size_t *nout,
		       struct sfs_error *err)
{
	char *copy = strdup(value), *tok, *save = NULL;
	bool *seen = NULL;
	uint32_t *ranks = NULL;
	size_t n = 0, r;
	int rc = 0;

	if (!copy || !(seen = calloc(RANK_LIST_MAX, sizeof(*seen)))) {
		rc = sfs_errorf(err, -ENOMEM, "out of memory");
		goto out_free;
	}
	if (!*value || value[strlen(value) - 1] == ',') {
		rc = sfs_errorf(
			err, -EINVAL,
			"rank=%s is not a rank list: use a number (3), a list (0,2) or a range (0-7)",
			value);
		goto out_free;
	}
	for (tok = strtok_r(copy, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		char *dash = strchr(tok, '-');
		uint64_t lo, hi;

		if (dash)
			*dash = '\0';
		rc = sfs_options_number("rank", tok, 0, SFS_WORLD_MAX - 1, &lo,
					err);
		if (!rc)
			rc = dash ? sfs_options_number("rank", dash + 1, 0,
						       SFS_WORLD_MAX - 1, &hi,
						       err) :
				    0;
		if (!dash)
			hi = lo;
		if (rc || hi < lo) {
			rc = sfs_errorf(
				err, -EINVAL,
				"rank=%s is not a rank list: use a number (3), a list (0,2) or a range (0-7) of ranks in 0..%d",
				value, SFS_WORLD_MAX - 1);
			goto out_free;
		}
		for (r = lo; r <= hi; r++)
			seen[r] = true;
	}
	for (r = 0; r < RANK_LIST_MAX; r++)
		n += seen[r];
	ranks = malloc(n * sizeof(*ranks));
	if (!ranks) {
		rc = sfs_errorf(err, -ENOMEM, "out of memory");
		goto out_free;
	}
	for (r = 0, n = 0; r < RANK_LIST_MAX; r++)
		if (seen[r])
			ranks[n++] = (uint32_t)r;
	*out = ranks;
	*nout = n;
out_free:
	free(seen);
	free(copy);
	return rc;
}

static int parse_enum(const char *key, const char *value,
		      const char *const *names, int *out, struct sfs_error *err)
{
	char list[128] = "";
	int i;

	for (i = 0; names[i]; i++) {
		if (!strcmp(value, names[i])) {
			*out = i;
			return 0;
		}
		strcat(list, i ? " | " : "");
		strcat(list, names[i]);
	}
	return sfs_errorf(err, -EINVAL, "%s=%s is not valid: use %s", key,
			  value, list);
}

static const struct sfs_opt *find(const struct sfs_opt *table, const char *key)
{
	for (; table->key; table++)
		if (!strcmp(table->key, key))
			return table;
	return NULL;
}

/*
 * Set key of table in the struct at base.  Returns 0, -EINVAL for a bad
 * value (base unchanged, message names the option, the value and what is
 * allowed), -ENOENT when table has no such key (message unset), -ENOMEM.
 */
static int opt_set(const struct sfs_opt *table, void *base, const char *key,
		   const char *value, struct sfs_error *err)
{
	const struct sfs_opt *opt = find(table, key);
	char *field, *copy;
	uint64_t v;
	int e = 0, rc;

	if (!opt)
		return -ENOENT;
	field = (char *)base + opt->offset;
	switch (opt->type) {
	case SFS_OPT_U32:
	case SFS_OPT_U64:
	case SFS_OPT_FLAG:
		rc = sfs_options_number(key, value, opt->min, opt->max, &v,
					err);
		if (rc)
			return rc;
		if (opt->type == SFS_OPT_U32)
			*(uint32_t *)field = (uint32_t)v;
		else if (opt->type == SFS_OPT_U64)
			*(uint64_t *)field = v;
		else
			*(bool *)field = v;
		return 0;
	case SFS_OPT_ENUM:
		rc = parse_enum(key, value, opt->names, &e, err);
		if (!rc)
			*(int *)field = e;
		return rc;
	case SFS_OPT_RANKS: {
		struct sfs_options *o = base;
		uint32_t *ranks = NULL;
		size_t n = 0;

		rc = parse_ranks(value, &ranks, &n, err);
		if (rc)
			return rc;
		free(o->ranks);
		o->ranks = ranks;
		o->nranks = n;
		return 0;
	}
	case SFS_OPT_PATH:
		if (!*value)
			return sfs_errorf(err, -EINVAL,
					  "%s= is empty: give the %s directory",
					  key, key);
		copy = strdup(value);
		if (!copy)
			return sfs_errorf(err, -ENOMEM, "out of memory");
		free(*(char **)field);
		*(char **)field = copy;
		return 0;
	}
	return -ENOENT;
}

/* Levenshtein distance of a and b, capped at 3 (enough to say "far"). */
static size_t edits(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), i, j;
	size_t row[64], prev, tmp;

	if (lb >= sizeof(row) / sizeof(row[0]) ||
	    (la > lb ? la - lb : lb - la) > 2)
		return 3;
	for (j = 0; j <= lb; j++)
		row[j] = j;
	for (i = 1; i <= la; i++) {
		prev = row[0];
		row[0] = i;
		for (j = 1; j <= lb; j++) {
			size_t best = prev + (a[i - 1] != b[j - 1]);

			if (row[j] + 1 < best)
				best = row[j] + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			tmp = row[j];
			row[j] = best;
			prev = tmp;
		}
	}
	return row[lb] < 3 ? row[lb] : 3;
}

const char *sfs_opt_suggest(const struct sfs_opt *const *tables,
			    const char *key)
{
	const char *best = NULL;
	size_t best_d = 3, len = strlen(key);

	for (; *tables; tables++) {
		const struct sfs_opt *opt;

		for (opt = *tables; opt->key; opt++) {
			size_t d = edits(key, opt->key);

			if (d < best_d && 2 * d < len) {
				best = opt->key;
				best_d = d;
			}
		}
	}
	return best;
}

/* "a, b and c": the keys of table, into buf. */
static const char *key_list(const struct sfs_opt *table, char *buf, size_t len)
{
	const struct sfs_opt *opt;
	size_t at = 0;

	buf[0] = '\0';
	for (opt = table; opt->key && at < len; opt++)
		at += (size_t)snprintf(buf + at, len - at, "%s%s",
				       opt == table ? "" :
				       opt[1].key   ? ", " :
						      " and ",
				       opt->key);
	return buf;
}

int sfs_options_set(struct sfs_options *o, const char *key, const char *value,
		    struct sfs_error *err)
{
	static const struct sfs_opt *const tables[] = { sfs_plan_options,
							NULL };
	char list[256];
	const char *near;
	int rc = opt_set(sfs_plan_options, o, key, value, err);

	if (rc != -ENOENT)
		return rc;
	near = sfs_opt_suggest(tables, key);
	if (near)
		return sfs_errorf(
			err, -ENOENT,
			"unknown option \"%s\" (did you mean \"%s\"?)", key,
			near);
	return sfs_errorf(err, -ENOENT,
			  "%s=%s: unknown option; the plan options are %s", key,
			  value,
			  key_list(sfs_plan_options, list, sizeof(list)));
}

int sfs_mount_opts_set(struct sfs_mount_opts *m, const char *key,
		       const char *value, struct sfs_error *err)
{
	return opt_set(sfs_mount_options, m, key, value, err);
}

/* "key=ARG" or "key=a|b|c" of opt, into buf. */
static const char *synopsis(const struct sfs_opt *opt, char *buf, size_t len)
{
	size_t at = (size_t)snprintf(buf, len, "%s=", opt->key);
	size_t i;

	if (opt->type == SFS_OPT_FLAG)
		snprintf(buf + at, len - at, "1|0");
	else if (opt->type == SFS_OPT_ENUM)
		for (i = 0; opt->names[i] && at < len; i++)
			at += (size_t)snprintf(buf + at, len - at, "%s%s",
					       i ? "|" : "", opt->names[i]);
	else
		snprintf(buf + at, len - at, "%s", opt->arg);
	return buf;
}

void sfs_opt_help(const struct sfs_opt *table, FILE *f, int indent)
{
	enum { COLUMN = 24 };
	char syn[128], left[192];

	for (; table->key; table++) {
		const char *h = table->help;
		int n;

		snprintf(left, sizeof(left), "%s [%s]",
			 synopsis(table, syn, sizeof(syn)), table->def);
		n = fprintf(f, "%*s%s", indent, "", left) - indent;
		if (n >= COLUMN)
			fprintf(f, "\n%*s", indent + COLUMN, "");
		else
			fprintf(f, "%*s", COLUMN - n, "");
		while (*h) {
			size_t k = strcspn(h, "\n");

			fprintf(f, "%.*s\n", (int)k, h);
			h += k;
			if (*h && *++h)
				fprintf(f, "%*s", indent + COLUMN, "");
		}
	}
}

void sfs_opt_markdown(const struct sfs_opt *table, FILE *f)
{
	char syn[128];

	for (; table->key; table++) {
		const char *h;

		fputs("| `", f);
		for (h = synopsis(table, syn, sizeof(syn)); *h; h++)
			fprintf(f, *h == '|' ? "\\|" : "%c", *h);
		fprintf(f, "` | %s | ", table->def);
		for (h = table->help; *h; h++)
			fputc(*h == '\n' ? ' ' : *h, f);
		if ((table->type == SFS_OPT_U32 ||
		     table->type == SFS_OPT_U64) &&
		    table->max < UINT64_MAX)
			fprintf(f, " (%llu..%llu)",
				(unsigned long long)table->min,
				(unsigned long long)table->max);
		fputs(" |\n", f);
	}
}

/* The value of a number or enum option of the struct at base, as text. */
static const char *value_text(const struct sfs_opt *opt, const void *base,
			      char *buf, size_t len)
{
	const char *field = (const char *)base + opt->offset;

	if (opt->type == SFS_OPT_ENUM)
		return opt->names[*(const int *)field];
	snprintf(buf, len, "%llu",
		 opt->type == SFS_OPT_U32 ?
			 (unsigned long long)*(const uint32_t *)field :
			 (unsigned long long)*(const uint64_t *)field);
	return buf;
}

size_t sfs_plan_opts_diff(const struct sfs_plan_opts *a,
			  const struct sfs_plan_opts *b, char *out, size_t len)
{
	struct sfs_options x = { .plan = *a }, y = { .plan = *b };
	const struct sfs_opt *opt;
	char va[32], vb[32];
	size_t n = 0, at = 0;

	if (len)
		out[0] = '\0';
	for (opt = sfs_plan_options; opt->key; opt++) {
		const char *s, *t;

		if (!opt->plan_input)
			continue;
		s = value_text(opt, &x, va, sizeof(va));
		t = value_text(opt, &y, vb, sizeof(vb));
		if (!strcmp(s, t))
			continue;
		if (at < len)
			at += (size_t)snprintf(out + at, len - at,
					       "%s%s=%s vs %s=%s",
					       n ? ", " : "", opt->key, s,
					       opt->key, t);
		n++;
	}
	return n;
}

json_t *sfs_options_to_json(const struct sfs_plan_opts *o)
{
	struct sfs_options all = { .plan = *o };
	const struct sfs_opt *opt;
	json_t *obj = json_object();

	for (opt = sfs_plan_options; obj && opt->key; opt++) {
		const char *field = (const char *)&all + opt->offset;
		json_t *v;

		if (!opt->plan_input)
			continue;
		if (opt->type == SFS_OPT_U32)
			v = json_integer(*(const uint32_t *)field);
		else if (opt->type == SFS_OPT_U64)
			/* wraps above 2^63 - 1; from_json casts it back */
			v = json_integer((json_int_t) *
					 (const uint64_t *)field);
		else
			v = json_string(opt->names[*(const int *)field]);
		if (json_object_set_new(obj, opt->key, v)) {
			json_decref(obj);
			obj = NULL;
		}
	}
	return obj;
}

int sfs_options_from_json(json_t *obj, const char *where,
			  struct sfs_plan_opts *o, struct sfs_error *err)
{
	struct sfs_error bad = { 0 };
	struct sfs_options all;
	const struct sfs_opt *opt;
	int rc = 0;

	sfs_options_init(&all);
	for (opt = sfs_plan_options; !rc && opt->key; opt++) {
		json_t *v = json_object_get(obj, opt->key);
		char text[32];

		if (!opt->plan_input)
			continue;
		if (json_is_integer(v) && opt->type != SFS_OPT_ENUM)
			snprintf(text, sizeof(text), "%llu",
				 (unsigned long long)json_integer_value(v));
		else if (json_is_string(v) && opt->type == SFS_OPT_ENUM)
			snprintf(text, sizeof(text), "%s",
				 json_string_value(v));
		else
			return sfs_errorf(err, -EINVAL, "%s: options: %s is %s",
					  where, opt->key,
					  v ? "of the wrong type" : "missing");
		rc = sfs_options_set(&all, opt->key, text, &bad);
		if (rc)
			sfs_errorf(err, rc, "%s: options: %s", where, bad.msg);
	}
	if (!rc && (rc = sfs_plan_opts_check(&all.plan, &bad)))
		sfs_errorf(err, rc, "%s: options: %s", where, bad.msg);
	if (!rc)
		*o = all.plan;
	return rc;
}

/* A token that continues a rank list: digits and at most one dash. */
static bool rank_continuation(const char *tok, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (!isdigit((unsigned char)tok[i]) && tok[i] != '-')
			return false;
	return len > 0;
}

/* Append the n bytes at tok to the comma-separated list *rest, of
 * capacity *cap. */
static int add_rest(char **rest, size_t *cap, const char *tok, size_t n)
{
	size_t len = *rest ? strlen(*rest) : 0;
	char *r;

	if (sfs_grow(rest, cap, len + n + 2, 1))
		return -ENOMEM;
	r = *rest;
	if (len)
		r[len++] = ',';
	memcpy(r + len, tok, n);
	r[len + n] = '\0';
	return 0;
}

int sfs_options_parse_known(struct sfs_options *o, const char *list,
			    char **rest, struct sfs_error *err)
{
	const char *p = list;
	size_t rest_cap = 0;
	int rc = 0;

	while (*p && !rc) {
		const char *end = p + strcspn(p, ",");
		const char *eq = memchr(p, '=', (size_t)(end - p));
		char *key, *value;

		if (!eq) {
			if (rest && end > p)
				rc = add_rest(rest, &rest_cap, p,
					      (size_t)(end - p));
			else
				rc = sfs_errorf(
					err, -EINVAL,
					"\"%.*s\" is not an option: write key=value",
					(int)(end - p), p);
			if (rc == -ENOMEM)
				sfs_errorf(err, rc, "out of memory");
			p = *end ? end + 1 : end;
			continue;
		}
		if (eq - p == 4 && !strncmp(p, "rank", 4))
			while (*end == ',' &&
			       rank_continuation(end + 1,
						 strcspn(end + 1, ",")))
				end += 1 + strcspn(end + 1, ",");
		key = strndup(p, (size_t)(eq - p));
		value = strndup(eq + 1, (size_t)(end - eq - 1));
		if (!key || !value)
			rc = sfs_errorf(err, -ENOMEM, "out of memory");
		else
			rc = sfs_options_set(o, key, value, err);
		if (rc == -ENOENT && rest) {
			rc = add_rest(rest, &rest_cap, p, (size_t)(end - p));
			if (rc)
				sfs_errorf(err, rc, "out of memory");
		}
		free(key);
		free(value);
		p = *end ? end + 1 : end;
	}
	return rc;
}

int sfs_options_parse(struct sfs_options *o, const char *list,
		      struct sfs_error *err)
{
	return sfs_options_parse_known(o, list, NULL, err);
}

int sfs_plan_opts_check(const struct sfs_plan_opts *o, struct sfs_error *err)
{
	if (o->replicas == 0 || o->world % o->replicas)
		return sfs_errorf(
			err, -EINVAL,
			"replicas=%u does not divide world=%u: every group of replicas holds the same number of ranks; use a divisor of %u",
			o->replicas, o->world, o->world);
	return 0;
}

int sfs_options_check(const struct sfs_options *o, struct sfs_error *err)
{
	int rc = sfs_plan_opts_check(&o->plan, err);

	if (rc)
		return rc;
	if (o->nranks && o->ranks[o->nranks - 1] >= o->plan.world)
		return sfs_errorf(
			err, -EINVAL,
			"rank=%u is out of range for world=%u: ranks are 0..%u",
			o->ranks[o->nranks - 1], o->plan.world,
			o->plan.world - 1);
	return 0;
}

int sfs_options_parse_epoch(const char *buf, size_t len, uint64_t *epoch,
			    struct sfs_error *err)
{
	char text[32];
	size_t a = 0, b = len;

	while (a < b && (buf[a] == ' ' || buf[a] == '\t'))
		a++;
	while (b > a && (buf[b - 1] == '\n' || buf[b - 1] == ' ' ||
			 buf[b - 1] == '\t' || buf[b - 1] == '\r'))
		b--;
	if (b - a >= sizeof(text) || memchr(buf + a, '\0', b - a))
		return sfs_errorf(
			err, -EINVAL,
			"write one epoch number, e.g. echo 3 > .shardfs/epoch");
	memcpy(text, buf + a, b - a);
	text[b - a] = '\0';
	return sfs_options_number("epoch", text, 0, UINT64_MAX, epoch, err);
}
