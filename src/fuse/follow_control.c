/*
 * follow=1 (docs/follow.md): what a followed source tells its job and its
 * producer, the control files' side of the stream the watcher (follow.c)
 * builds: consumption (the acks of .shardfs/ack, the last shard
 * consumed, progress=DIR's files) and .shardfs/status's head, built
 * only when what it shows changed.  Under w->lock, as follow.c's
 * readers; follow_i.h: what they share.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "fs.h"
#include "shardfs/follow.h"
#include "shardfs/status.h"
#include "shardfs/util.h"

#include "follow_i.h"

/* ---- consumption ---- */

/* (fs.h) */
size_t follow_consumed_count(struct fw *w)
{
	size_t c;

	pthread_mutex_lock(&w->lock);
	c = w->consumed;
	pthread_mutex_unlock(&w->lock);
	return c;
}

/* (fs.h) */
uint64_t follow_status_gen(struct fw *w)
{
	uint64_t gen;

	pthread_mutex_lock(&w->lock);
	gen = w->status_gen;
	pthread_mutex_unlock(&w->lock);
	return gen;
}

/* (fs.h) */
char *follow_consumed_text(struct fw *w)
{
	char *s = NULL;
	int rc = 0;

	pthread_mutex_lock(&w->lock);
	if (w->consumed)
		rc = asprintf(&s, "%s\n", w->shards[w->consumed - 1].path);
	pthread_mutex_unlock(&w->lock);
	if (rc < 0)
		return NULL;
	return s ? s : strdup("");
}

/* Shards all of whose samples lie in the first done windows (from
 * first), in order. */
static size_t shards_done(const struct fw *w, uint64_t done)
{
	uint64_t upto = (w->first + done) * w->n;
	size_t c = w->consumed;

	if (done >= w->nwins && w->complete)
		upto = UINT64_MAX;
	if (done == 0)
		upto = w->first * w->n;
	while (c < w->nshards &&
	       w->shards[c].first_sample + w->shards[c].nsamples <= upto)
		c++;
	return c;
}

/* (follow_i.h) */
void follow_write_progress(struct fw *w)
{
	const char *dir = w->fs->mount.progress_dir;
	size_t r, i;

	for (r = 0; w->progress_fd >= 0 && r < w->nranks; r++) {
		uint64_t done = UINT64_MAX;
		char name[64], *text = NULL, *cons = NULL;
		size_t c;
		int rc = -ENOMEM;

		for (i = 0; i < w->nreaders; i++)
			if (w->readers[i].rank == w->ranks[r] &&
			    w->readers[i].done < done)
				done = w->readers[i].done;
		c = shards_done(w, done);
		/* the name as JSON holds it (sfs_name_escape) */
		cons = c ? sfs_name_escape(w->shards[c - 1].path, true) : NULL;
		if (!c || cons)
			text = sfs_status_follow_progress(w->ranks[r], cons,
							  w->first + done,
							  w->complete);
		free(cons);
		snprintf(name, sizeof(name), "rank-%u.json", w->ranks[r]);
		if (text)
			rc = sfs_write_beneath(w->progress_fd, name, text,
					       strlen(text), 0644);
		if (rc)
			fs_log(w->fs, LOG_WARNING,
			       "progress=%s: cannot write %s: %s", dir, name,
			       text ? strerror(-rc) :
				      "its JSON cannot be made (out of memory)");
		free(text);
	}
}

/* The decimal number at *p (digits only, at most 19 of them: no sign,
 * no overflow) into *v, *p past it.  0 or -EINVAL. */
static int ack_number(const char **p, const char *end, uint64_t *v)
{
	int n = 0;

	*v = 0;
	while (*p < end && **p >= '0' && **p <= '9' && n < 19) {
		*v = *v * 10 + (uint64_t)(**p - '0');
		(*p)++;
		n++;
	}
	return n && !(*p < end && **p >= '0' && **p <= '9') ? 0 : -EINVAL;
}

/* (fs.h) */
int follow_ack(struct fw *w, const char *buf, size_t size)
{
	const char *p = buf, *end = buf + size;
	uint64_t rank, worker, k, min = UINT64_MAX;
	char why[160], shown[72];
	struct freader *r = NULL;
	size_t i, c;

	if (size && end[-1] == '\n')
		end--;
	if (size > 64 || ack_number(&p, end, &rank) || p == end ||
	    *p++ != ' ' || ack_number(&p, end, &worker) || p == end ||
	    *p++ != ' ' || ack_number(&p, end, &k) || p != end) {
		snprintf(why, sizeof(why), "not three numbers");
		goto refuse;
	}
	pthread_mutex_lock(&w->lock);
	for (i = 0; i < w->nreaders; i++)
		if (w->readers[i].rank == rank &&
		    w->readers[i].worker == worker)
			r = &w->readers[i];
	if (!r) {
		pthread_mutex_unlock(&w->lock);
		snprintf(why, sizeof(why),
			 "rank %" PRIu64 " worker %" PRIu64
			 " is no reader this mount serves",
			 rank, worker);
		goto refuse;
	}
	if (k >= w->first + w->nwins) {
		snprintf(why, sizeof(why),
			 "window %" PRIu64 " is not complete (%s%" PRIu64 ")",
			 k,
			 w->nwins ? "the last complete one is " : "none is: ",
			 w->nwins ? w->first + w->nwins - 1 : w->first);
		pthread_mutex_unlock(&w->lock);
		goto refuse;
	}
	/* acks only move forward: one of a window acknowledged already, or
	 * before this mount's first (start=), changes nothing */
	if (k >= w->first && k + 1 - w->first > r->done) {
		r->done = k + 1 - w->first;
		w->status_gen++;
		for (i = 0; i < w->nreaders; i++)
			if (w->readers[i].done < min)
				min = w->readers[i].done;
		c = shards_done(w, min);
		if (c != w->consumed || (r->done == w->nwins && w->complete)) {
			w->consumed = c;
			follow_write_progress(w);
		}
	}
	pthread_mutex_unlock(&w->lock);
	return 0;
refuse:
	/* the write as it came (but its final newline), printable, short */
	size = (size_t)(end - buf);
	for (i = 0; i < size && i < sizeof(shown) - 4; i++)
		shown[i] = buf[i] >= ' ' && buf[i] < 127 ? buf[i] : '?';
	snprintf(shown + i, sizeof(shown) - i, "%s", i < size ? "..." : "");
	fs_log(w->fs, LOG_WARNING,
	       "refused a write to .shardfs/ack (\"%s\"): %s; write \"RANK WORKER WINDOW\\n\" (e.g. \"0 1 5\": rank 0's worker 1 has taken windows up to 5), a reader this mount serves and a complete window (docs/follow.md)",
	       shown, why);
	return -EINVAL;
}

/* ---- the status ---- */

/* What the status shows of the stream and its readers, taken under
 * w->lock (copies: nothing of it changes under the build). */
struct status_snap {
	uint64_t nshards, nsamples, bytes, nwins, padding, dropped;
	bool ended, complete;
	char *last, *cons, *logp; /* escaped (sfs_name_escape) or NULL */
	struct sfs_status_follow_reader *r;
};

static void snap_free(struct status_snap *sn)
{
	free(sn->last);
	free(sn->cons);
	free(sn->logp);
	free(sn->r);
}

/* sn from w now; with w->lock.  0 or -ENOMEM. */
static int snap_take(struct fw *w, struct status_snap *sn)
{
	size_t i;

	*sn = (struct status_snap){ .nshards = w->nshards,
				    .nsamples = w->nsamples,
				    .nwins = w->nwins,
				    .padding = w->padding,
				    .dropped = w->dropped,
				    .ended = w->ended,
				    .complete = w->complete };
	for (i = 0; i < w->nshards; i++)
		sn->bytes += w->shards[i].size;
	/* names as JSON holds them (sfs_name_escape, docs/follow.md) */
	if (w->nshards)
		sn->last =
			sfs_name_escape(w->shards[w->nshards - 1].path, true);
	if (w->consumed)
		sn->cons =
			sfs_name_escape(w->shards[w->consumed - 1].path, true);
	if (w->log_kept && w->log_path)
		sn->logp = sfs_name_escape(w->log_path, false);
	sn->r = calloc(w->nreaders, sizeof(*sn->r));
	if (!sn->r || (w->nshards && !sn->last) || (w->consumed && !sn->cons) ||
	    (w->log_kept && w->log_path && !sn->logp)) {
		snap_free(sn);
		return -ENOMEM;
	}
	for (i = 0; i < w->nreaders; i++) {
		const struct freader *r = &w->readers[i];

		sn->r[i] = (struct sfs_status_follow_reader){
			.rank = r->rank,
			.worker = r->worker,
			.window = r->window,
			.windows_read = w->first + r->done,
			.waiting = r->waiting
		};
	}
	return 0;
}

/* The status of sn but its counters (sfs_status_follow_head), built
 * without w->lock: the rest of what it shows never changes after the
 * mount. */
static char *status_head(struct fw *w, const struct status_snap *sn,
			 const struct sfs_status_in *in)
{
	struct sfs_status_follow f = {
		.format = w->ext,
		.last_shard = sn->last,
		.consumed = sn->cons,
		.log = sn->logp,
		.window = w->n,
		.shards = sn->nshards,
		.samples = sn->nsamples,
		.bytes = sn->bytes,
		.first_window = w->first,
		.windows = sn->nwins,
		.per_window = w->n / w->nreaders_all,
		.padding = sn->padding,
		.dropped = sn->dropped,
		.ended = sn->ended,
		.complete = sn->complete,
		.readers = sn->r,
		.nreaders = w->nreaders,
	};
	char *src, *idx = NULL, *s = NULL;

	src = sfs_name_escape(w->f->source, false);
	if (in->index_dir)
		idx = sfs_name_escape(in->index_dir, false);
	f.source = src;
	f.index_dir = idx;
	if (src && (!in->index_dir || idx))
		s = sfs_status_follow_head(in, &f);
	free(src);
	free(idx);
	return s;
}

/*
 * (fs.h) The head is built only when what it shows changed
 * (w->status_gen: a window, an ack, a wait) and kept, under w->text_lock,
 * which the join is made under too (the head is not copied): the lock
 * reads take is held only to copy what it shows, never to build it.
 */
char *follow_status_text(struct fw *w, const struct sfs_status_in *in,
			 const struct sfs_status_counters *c)
{
	struct status_snap sn;
	uint64_t gen;
	char *t = NULL;

	pthread_mutex_lock(&w->text_lock);
	pthread_mutex_lock(&w->lock);
	gen = w->status_gen;
	if (w->status_text && w->status_text_gen == gen) {
		pthread_mutex_unlock(&w->lock);
		goto join;
	}
	if (snap_take(w, &sn)) {
		pthread_mutex_unlock(&w->lock);
		goto out;
	}
	pthread_mutex_unlock(&w->lock);
	t = status_head(w, &sn, in);
	snap_free(&sn);
	if (!t)
		goto out;
	free(w->status_text);
	w->status_text = t;
	w->status_text_gen = gen;
join:
	t = sfs_status_json_join(w->status_text, c);
out:
	pthread_mutex_unlock(&w->text_lock);
	return t;
}
