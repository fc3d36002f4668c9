/*
 * Internals of the observer (observe.c), shared with observe_dataset.c,
 * which reads a reader's dataset directory back and checks its data
 * files: the job a pass of the pool runs for one view file, one source
 * dataset or one reader's dataset, and what it found.
 */
#ifndef SHARDFS_OBSERVE_I_H
#define SHARDFS_OBSERVE_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shardfs/audit.h"
#include "shardfs/digest.h"
#include "shardfs/error.h"
#include "shardfs/format.h"
#include "shardfs/index.h"

/* A data file a reader's dataset shows as the source's, as found there. */
struct dfile {
	char *path; /* below the dataset's data/, as its manifest names it */
	uint64_t declared; /* the manifest's size, 0: none */
	size_t fragment; /* the first fragment naming it */
	int type; /* S_IFLNK, S_IFREG, or 0: missing or another kind */
	char *target; /* a symlink's */
	uint64_t size; /* a regular file's */
	bool hashed; /* --verify: digest is its SHA-256 */
	unsigned char digest[SFS_DIGEST_LEN];
};

/* Where a fragment's rows start among a dataset job's digests. */
struct dfrag {
	size_t f, first;
};

enum job_kind {
	JOB_FILE, /* a view file (or files sample): its format's samples */
	JOB_SCAN, /* a source dataset: its driver's scan hands the digests */
	JOB_DATASET, /* a reader's dataset directory, read back */
};

/* One file to read, or (files datasets) one sample of several files. */
struct job {
	enum job_kind kind;
	const struct sfs_index *idx; /* JOB_SCAN: the shard's index */
	size_t shard; /* JOB_SCAN */
	size_t reader; /* in the audit */
	char *name; /* as reported */
	char **paths; /* the file(s), in name order */
	size_t npaths, paths_cap;
	const struct sfs_format_ops *ops;
	/* the threads its scans' helpers take (NULL: any, up to a CPU each) */
	struct sfs_share *share;
	unsigned char (*digests)[SFS_DIGEST_LEN];
	size_t ndigests, digests_cap;
	uint64_t bytes;
	char *error;
	struct dfile *dfiles; /* JOB_DATASET: its data files */
	size_t ndfiles, dfiles_cap;
	struct dfrag *frags; /* JOB_DATASET: its fragments */
	size_t nfrags, frags_cap;
};

/* Hands a sample's digest to the job arg (an sfs_sample_fn). */
int sfs_observe_collect(void *arg, uint64_t sample, const unsigned char d[32]);

/*
 * Read file path (beneath dirfd, or AT_FDCWD): its samples' digests into
 * j by j->ops's samples op (sfs_format_samples, on j->share), or with d, the whole file into d (a sample of
 * several files); its size added to j->bytes.  Returns 0 or -errno with
 * a message naming the file shown.
 */
int sfs_observe_file(struct job *j, int dirfd, const char *path,
		     const char *shown, struct sfs_digest *d,
		     struct sfs_error *err);

/*
 * JOB_DATASET: read the reader's dataset directory j->paths[0] back with
 * its format's reader (rows into j->digests, fragments into j->frags,
 * data files into j->dfiles, each looked at: with verify, a regular one
 * hashed with d).  Returns 0 or -errno with a message.
 */
int sfs_observe_dataset_read(struct job *j, bool verify, struct sfs_digest *d,
			     struct sfs_error *err);

/*
 * JOB_SCAN: the digests of source dataset j->shard of j->idx, by its
 * driver's scan.  Returns 0 or -errno with a message.
 */
int sfs_observe_dataset_scan(struct job *j, struct sfs_error *err);

/*
 * Samples lo .. hi - 1 by their bytes: which one a digest is.  digest
 * and arg (borrowed) are the caller's: the digest of sample g, alive as
 * long as the table; slots is the table's (free it).
 */
struct sfs_observe_table {
	const unsigned char *(*digest)(const void *arg, uint64_t g);
	const void *arg;
	uint64_t mask;
	uint64_t *slots; /* a sample + 1, or 0: empty */
};

/* Fill t (digest and arg set) with samples lo .. hi - 1: 0 or -ENOMEM. */
int sfs_observe_table_build(struct sfs_observe_table *t, uint64_t lo,
			    uint64_t hi);

/* The sample whose digest is d: planned (UINT64_MAX: none) when it is,
 * else the first of t's that is, else UINT64_MAX. */
uint64_t sfs_observe_table_find(const struct sfs_observe_table *t,
				const unsigned char *d, uint64_t planned);

/* The SHA-256 of source data files, each hashed once (--verify). */
struct sfs_observe_hashes {
	char **paths;
	unsigned char (*digests)[SFS_DIGEST_LEN];
	size_t n, cap, digests_cap;
};

void sfs_observe_hashes_free(struct sfs_observe_hashes *h);

/*
 * The data files of reader r's dataset read by job j, whose rows are of
 * shard s of idx, must be s's: a symlink to the source's file, or a file
 * of its size (with verify, of its SHA-256, hashed once into h), of the
 * size the view's manifest says.  Each departure is a finding in v.
 * Returns 0 or -ENOMEM.
 */
int sfs_observe_data_files_check(const struct job *j,
				 const struct sfs_audit_reader *r,
				 const struct sfs_index *idx, size_t s,
				 bool verify, struct sfs_observe_hashes *h,
				 size_t max_findings, struct sfs_verdict *v);

#endif
