/*
 * The JSON forms of the plan layer's types, for the documents of the core
 * that embed them: plan.json (plan_json.c), the status file (status.c) and
 * the auditor's reports (audit_report.c).  Not public: jansson is how the
 * core writes those documents, not part of its interface; callers outside
 * the core get text (sfs_plan_json, sfs_status_json, sfs_audit_write).
 */
#ifndef SHARDFS_PLAN_JSON_I_H
#define SHARDFS_PLAN_JSON_I_H

#include <stddef.h>

#include <jansson.h>

#include "shardfs/error.h"
#include "shardfs/index.h"
#include "shardfs/mixture.h"
#include "shardfs/options.h"
#include "shardfs/plan.h"

/* ---- options (options.c) ---- */

/*
 * The plan inputs of o as a JSON object (plan.json, status, audit
 * reports): numbers as integers (u64 values above 2^63 - 1 travel as
 * negative json_int_t, read back by sfs_options_from_json), enums as
 * names.  Returns a new reference, or NULL without memory.
 */
json_t *sfs_options_to_json(const struct sfs_plan_opts *o);

/*
 * Read the plan inputs that sfs_options_to_json wrote from obj (borrowed)
 * into *o, each checked as sfs_options_set checks it, and together as
 * sfs_plan_opts_check does.  Returns 0, or
 * -EINVAL with a message that starts with where ("r0.json: options: ...")
 * naming the missing or bad option; *o is unchanged then.
 */
int sfs_options_from_json(json_t *obj, const char *where,
			  struct sfs_plan_opts *o, struct sfs_error *err);

/* ---- mixtures (mixture.c) ---- */

/*
 * m as JSON, all the plan needs (the auditor's reports carry it): file,
 * digest, weight kind, epoch_size, sampling, batching and per source its
 * name, path, scaled weight, shard range, prefix length and samples.  JSON
 * null when m is NULL.  Returns a new reference, NULL without memory.
 */
json_t *sfs_mix_to_json(const struct sfs_mix *m);

/*
 * Read what sfs_mix_to_json wrote (borrowed), for an index of nshards
 * shards: every range inside it, ranges disjoint, names usable.  JSON null
 * gives *out NULL.  Returns 0 or -EINVAL (nothing allocated), -ENOMEM.
 */
int sfs_mix_from_json(json_t *j, size_t nshards, struct sfs_mix **out);

/* ---- what a plan takes of each source (plan_json.c) ---- */

/*
 * What the plan takes of each source of idx's mixture, as JSON: the
 * mixture's file, digest, sampling and batching, and per source its name,
 * path, weight and the counts of struct sfs_plan_source.  JSON null for
 * the index of one directory.  Returns a new reference.
 */
json_t *sfs_plan_mixture_json(const struct sfs_plan *plan,
			      const struct sfs_index *idx);

#endif
