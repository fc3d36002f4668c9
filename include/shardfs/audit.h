/*
 * The auditor's judgement: given what every reader was seen to read (from
 * the plan itself, from mounted views, or from reports of several nodes),
 * find every way it departs from the plan: a sample read by two readers
 * beyond the declared padding, a sample no reader read, bytes that are no
 * source sample, unequal counts, an order that is not the plan's, mounts
 * whose options disagree, ranks that no mount shows.
 *
 * An observation names samples by (shard number in the index, sample
 * number in the shard).  It can be written to JSON and read back (with the
 * shard list it refers to), so that per-node reports merge into the same
 * verdict as one audit of every mount.
 */
#ifndef SHARDFS_AUDIT_H
#define SHARDFS_AUDIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shardfs/error.h"
#include "shardfs/index.h"
#include "shardfs/options.h"
#include "shardfs/plan.h"

#define SFS_AUDIT_UNKNOWN UINT64_MAX /* bytes that are no source sample */

struct sfs_audit_sample {
	uint64_t shard; /* SFS_AUDIT_UNKNOWN: matched nothing */
	uint64_t sample;
};

struct sfs_audit_file {
	char *name;
	size_t first; /* its samples in reader->samples */
	size_t count;
};

/* What one reader of one mount read, in order. */
struct sfs_audit_reader {
	uint32_t rank, worker;
	size_t mount; /* in audit->mounts */
	struct sfs_audit_file *files;
	size_t nfiles, files_cap;
	struct sfs_audit_sample *samples;
	size_t nsamples, samples_cap;
};

struct sfs_audit_mount {
	char *path;
	struct sfs_plan_opts opts;
};

struct sfs_audit {
	struct sfs_audit_mount *mounts;
	size_t nmounts, mounts_cap;
	struct sfs_audit_reader *readers;
	size_t nreaders, readers_cap;
};

enum sfs_finding_kind {
	SFS_FIND_OPTIONS, /* mounts disagree on options */
	SFS_FIND_COVERAGE, /* a rank no mount shows, or shown twice */
	SFS_FIND_COUNT, /* unequal per-reader counts */
	SFS_FIND_BYTES, /* bytes that are not the planned sample */
	SFS_FIND_ORDER, /* the plan's samples, another order */
	SFS_FIND_OVERLAP, /* a sample read twice beyond padding */
	SFS_FIND_MISSING, /* a sample nobody read */
	SFS_FIND_SOURCE, /* the source differs from its index */
	SFS_FIND_KINDS
};

struct sfs_finding {
	enum sfs_finding_kind kind;
	char *msg;
};

/* What the readers read of one source of a mixture. */
struct sfs_verdict_source {
	char name[72];
	uint64_t planned, seen; /* sample reads, over every rank */
};

struct sfs_verdict {
	struct sfs_finding *findings;
	size_t nfindings, findings_cap;
	size_t nmore; /* findings past the cap, counted only */
	size_t kinds[SFS_FIND_KINDS]; /* every finding, by kind */
	uint64_t per_reader, padding, dropped, remaining;
	size_t readers_planned, readers_seen;
	struct sfs_verdict_source *sources; /* a mixture's, else NULL */
	size_t nsources;
};

/* The name of a finding kind ("overlap", "missing", ...). */
const char *sfs_finding_name(enum sfs_finding_kind k);

/* Free what a (filled) audit holds; the struct itself is the caller's. */
void sfs_audit_clear(struct sfs_audit *a);

/*
 * Add a mount (path copied) and its options; returns its number or a
 * negative errno.
 */
ssize_t sfs_audit_add_mount(struct sfs_audit *a, const char *path,
			    const struct sfs_plan_opts *opts);

/*
 * A new reader of mount m (returns it, NULL without memory); then append
 * its files and samples in reading order with the two calls below.
 */
struct sfs_audit_reader *sfs_audit_add_reader(struct sfs_audit *a, size_t m,
					      uint32_t rank, uint32_t worker);
int sfs_audit_add_file(struct sfs_audit_reader *r, const char *name);
int sfs_audit_add_sample(struct sfs_audit_reader *r, uint64_t shard,
			 uint64_t sample);

/*
 * Reader t's planned samples, in reading order: a heap array of *n (caller
 * frees), or NULL without memory.
 */
struct sfs_audit_sample *sfs_audit_planned(const struct sfs_plan *p, size_t t,
					   size_t *n);

/* How a reader's samples depart from its plan's (sfs_audit_compare). */
enum sfs_audit_departure {
	SFS_AUDIT_AS_PLANNED, /* every sample both hold is the plan's */
	SFS_AUDIT_REORDERED, /* the plan's samples, in another order */
	SFS_AUDIT_OTHER, /* other samples (or bytes that are none) */
};

/*
 * The departure of a reader's samples got[0 .. ngot) from its plan's
 * want[0 .. nwant) (a count that differs is the caller's to judge), the
 * first sample that is not the plan's in *at; or -ENOMEM.
 */
int sfs_audit_compare(const struct sfs_audit_sample *want, size_t nwant,
		      const struct sfs_audit_sample *got, size_t ngot,
		      size_t *at);

/*
 * A reader's samples read, as sfs_audit_judge_reading judges them against
 * its plan's: the plain auditor's (sfs_audit_judge) and a followed
 * window's (observe.h, sfs_observe_follow).  The strings and arrays are
 * borrowed.
 */
struct sfs_audit_reading {
	const char *prefix; /* before every finding ("window 3: "), or "" */
	uint32_t rank, worker;
	const char *mount;
	const struct sfs_index *idx; /* the samples' shards */
	const char *unknown; /* what bytes that are no sample are */
	const struct sfs_audit_file *files; /* what holds the samples */
	size_t nfiles;
	const struct sfs_audit_sample *want, *got;
	size_t nwant, ngot;
	/* a bytes finding for every sample not the plan's, those past the
	 * plan's too; false: for the first only */
	bool every;
};

/*
 * Judge rd into v (at most max findings kept, sfs_verdict_add): a count
 * finding when it read another number of samples than planned, then an
 * order finding when it read the plan's samples in another order (but
 * for each of its datasets, format.h's dataset_view, in the plan's: a
 * dataset is a directory of its own), or bytes findings where it read
 * other samples (or bytes that are none).  Returns 0 or -ENOMEM.
 */
int sfs_audit_judge_reading(const struct sfs_audit_reading *rd, size_t max,
			    struct sfs_verdict *v);

/*
 * The coverage findings of shown (world x workers counts, rank by rank:
 * how many mounts show each reader) into v: a rank no mount shows, a
 * worker of a rank shown that none shows, a worker several show; the
 * readers shown added to v->readers_seen.  Returns 0 or -ENOMEM.
 */
int sfs_audit_judge_coverage(const uint32_t *shown, uint32_t world,
			     uint32_t workers, size_t max,
			     struct sfs_verdict *v);

/* Fill an audit with what the plan says every reader reads. */
int sfs_audit_from_plan(struct sfs_audit *a, const struct sfs_plan *plan,
			const char *label);

/*
 * Judge the audit against the plan of the first mount's options over idx
 * (every mount's readers are compared with their own mount's plan, the
 * sample counts across mounts with the first one's).  At most max_findings
 * messages are kept, the rest counted.  Returns 0 with *out filled (a
 * verdict with no finding is a pass), or a negative errno.
 */
int sfs_audit_judge(const struct sfs_audit *a, const struct sfs_index *idx,
		    size_t max_findings, struct sfs_verdict *out,
		    struct sfs_error *err);

/* Add a finding to a verdict (for checks made outside the judge). */
int sfs_verdict_add(struct sfs_verdict *v, size_t max_findings,
		    enum sfs_finding_kind kind, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

void sfs_verdict_clear(struct sfs_verdict *v);

/*
 * Write the audit as a report (JSON text, heap string) that holds the
 * shard list of idx (path, samples, sliceable: what the plan needs), so
 * that sfs_audit_read can judge it where the source is not.
 */
char *sfs_audit_write(const struct sfs_audit *a, const struct sfs_index *idx);

/*
 * Read a report and merge it into a (mounts and readers appended).  The
 * first report also fills *idx with a plan-only index (no boundaries, no
 * hashes); later ones must list the same shards, else -EINVAL with a
 * message naming the report.
 */
int sfs_audit_read(struct sfs_audit *a, const char *path,
		   struct sfs_index **idx, struct sfs_error *err);

#endif
