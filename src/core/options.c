#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "shardfs/options.h"

#define RANK_LIST_MAX SFS_WORLD_MAX

void sfs_options_init(struct sfs_options *o)
{
	memset(o, 0, sizeof(*o));
	o->plan.world = 1;
	o->plan.workers = 1;
	o->plan.shuffle = SFS_SHUFFLE_UNITS;
	o->plan.remainder = SFS_REMAINDER_PAD;
	o->plan.batch = 1;
}

void sfs_options_clear(struct sfs_options *o)
{
	free(o->ranks);
	sfs_options_init(o);
}

const char *sfs_shuffle_name(enum sfs_shuffle s)
{
	switch (s) {
	case SFS_SHUFFLE_NONE:
		return "none";
	case SFS_SHUFFLE_UNITS:
		return "units";
	case SFS_SHUFFLE_SAMPLES:
		return "samples";
	}
	return "?";
}

const char *sfs_remainder_name(enum sfs_remainder r)
{
	return r == SFS_REMAINDER_DROP ? "drop" : "pad";
}

const char *sfs_partition_name(enum sfs_partition p)
{
	return p == SFS_PARTITION_INTERLEAVED ? "interleaved" : "contiguous";
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

int sfs_options_set(struct sfs_options *o, const char *key, const char *value,
		    struct sfs_error *err)
{
	static const char *const shuffles[] = { "none", "units", "samples",
						NULL };
	static const char *const remainders[] = { "pad", "drop", NULL };
	static const char *const partitions[] = { "contiguous", "interleaved",
						  NULL };
	struct sfs_plan_opts *p = &o->plan;
	uint64_t v;
	int e = 0, rc;

	if (!strcmp(key, "rank")) {
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
	if (!strcmp(key, "shuffle")) {
		rc = parse_enum(key, value, shuffles, &e, err);
		if (!rc)
			p->shuffle = (enum sfs_shuffle)e;
		return rc;
	}
	if (!strcmp(key, "remainder")) {
		rc = parse_enum(key, value, remainders, &e, err);
		if (!rc)
			p->remainder = (enum sfs_remainder)e;
		return rc;
	}
	if (!strcmp(key, "partition")) {
		rc = parse_enum(key, value, partitions, &e, err);
		if (!rc)
			p->partition = (enum sfs_partition)e;
		return rc;
	}
	if (!strcmp(key, "world")) {
		rc = sfs_options_number(key, value, 1, SFS_WORLD_MAX, &v, err);
		if (!rc)
			p->world = (uint32_t)v;
	} else if (!strcmp(key, "workers")) {
		rc = sfs_options_number(key, value, 1, SFS_WORKERS_MAX, &v,
					err);
		if (!rc)
			p->workers = (uint32_t)v;
	} else if (!strcmp(key, "epoch")) {
		rc = sfs_options_number(key, value, 0, UINT64_MAX, &p->epoch,
					err);
	} else if (!strcmp(key, "seed")) {
		rc = sfs_options_number(key, value, 0, UINT64_MAX, &p->seed,
					err);
	} else if (!strcmp(key, "block")) {
		rc = sfs_options_number(key, value, 0, UINT64_MAX, &p->block,
					err);
	} else if (!strcmp(key, "batch")) {
		rc = sfs_options_number(key, value, 1, SFS_BATCH_MAX, &p->batch,
					err);
	} else if (!strcmp(key, "start")) {
		rc = sfs_options_number(key, value, 0, UINT64_MAX, &p->start,
					err);
	} else {
		return sfs_errorf(
			err, -ENOENT,
			"%s=%s: unknown option; the plan options are world, workers, epoch, seed, shuffle, block, remainder, batch, start, partition and rank",
			key, value);
	}
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

/* Append the n bytes at tok to the comma-separated list *rest. */
static int add_rest(char **rest, const char *tok, size_t n)
{
	size_t len = *rest ? strlen(*rest) : 0;
	char *r = realloc(*rest, len + n + 2);

	if (!r)
		return -ENOMEM;
	if (len)
		r[len++] = ',';
	memcpy(r + len, tok, n);
	r[len + n] = '\0';
	*rest = r;
	return 0;
}

int sfs_options_parse_known(struct sfs_options *o, const char *list,
			    char **rest, struct sfs_error *err)
{
	const char *p = list;
	int rc = 0;

	while (*p && !rc) {
		const char *end = p + strcspn(p, ",");
		const char *eq = memchr(p, '=', (size_t)(end - p));
		char *key, *value;

		if (!eq) {
			if (rest && end > p)
				rc = add_rest(rest, p, (size_t)(end - p));
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
			rc = add_rest(rest, p, (size_t)(end - p));
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

int sfs_options_check(const struct sfs_options *o, struct sfs_error *err)
{
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
