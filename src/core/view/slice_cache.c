/*
 * The cache of laid-out slices (include/shardfs/slice.h): kept in
 * memory within their bounds, past them in a file of the view's.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "shardfs/budget.h"
#include "shardfs/format.h"

#include "shardfs/slice.h"
#include "shardfs/util.h"
#include "slice_i.h"

/* An entry of a table: a kept slice or a shard's state. */
struct link {
	struct link *next;
	uint64_t key;
};

/* A chained hash table of links by key, grown as it fills. */
struct table {
	struct link **b;
	size_t nb, n;
};

/*
 * A slice laid out while sizing, and the shard as it was then: in memory
 * (slice), or in the cache's file (spilled): len bytes at at, a table of
 * nextents struct spilled_extent, then the bytes of those with mem set,
 * in order.
 */
struct kept {
	struct link link; /* key: the caller's */
	struct sfs_slice *slice; /* NULL: spilled */
	size_t mem; /* in memory: its bytes */
	uint64_t at, len; /* spilled */
	uint64_t bytes; /* spilled: the slice's size */
	size_t nextents; /* spilled */
	uint64_t size;
	int64_t mtime_ns;
	dev_t dev;
	ino_t ino;
};

/* What the driver read once of a shard (read_shard). */
struct held {
	struct link link; /* key: the shard's number in the index */
	void *state; /* NULL while reading is set, or after it failed */
	size_t mem; /* read_shard's: what it keeps is pages' */
	unsigned refs; /* slices being laid out from it */
	bool reading;
	uint64_t used; /* the tick of its last use */
};

struct sfs_slice_cache {
	const struct sfs_index *idx;
	size_t max;
	pthread_mutex_t lock;
	pthread_cond_t read; /* a shard's state was read (or failed) */
	struct table kept; /* lock: struct kept */
	size_t mem; /* lock: the bytes the kept slices hold */
	struct table held; /* lock: struct held */
	/* lock: the bytes the states hold, less what they keep for the
	 * slices that follow (charged to pages) */
	size_t held_mem;
	uint64_t tick; /* lock */
	/* what all the states keep for the slices that follow (Parquet's
	 * decoded pages), one bound for them all; reclaim_pages frees idle
	 * states for a state that finds no room.  Atomic: a state charges
	 * it under its own lock, never under ours.  Its parent is
	 * mem->all. */
	struct sfs_budget pages;
	/* the daemon's bound, shared with other caches (NULL: none): the
	 * kept slices (mem, above) are charged to mem->slices too */
	struct sfs_slice_mem *shared;
	/* the file of the slices kept past memory (-1: none), its
	 * directory (for messages), what its writes reserved and how many
	 * slices it holds (lock), whether a write failed (lock: no more
	 * go there) and trouble was noted (lock: once) */
	int spill_fd;
	char *spill_dir;
	uint64_t spill_end;
	size_t nspilled;
	bool spill_off, noted;
	void (*note)(void *arg, const char *msg);
	void *note_arg;
	/* opens that laid their slice out (not kept, or not readable) */
	atomic_uint_least64_t laid_out;
};

/* A spilled slice's extent, as its file holds it. */
struct spilled_extent {
	uint64_t pos, len, src;
	uint32_t file;
	uint32_t mem; /* 1: its bytes follow the table, in order */
};

static size_t slot(const struct table *t, uint64_t key)
{
	key ^= key >> 33;
	key *= 0xff51afd7ed558ccdULL;
	key ^= key >> 33;
	return (size_t)(key & (t->nb - 1));
}

static struct link *table_find(const struct table *t, uint64_t key)
{
	struct link *l;

	if (!t->nb)
		return NULL;
	for (l = t->b[slot(t, key)]; l && l->key != key; l = l->next)
		;
	return l;
}

/* Add l (its key not in t).  0 or -ENOMEM. */
static int table_add(struct table *t, struct link *l)
{
	if (t->n + 1 > t->nb) {
		size_t nb = t->nb ? 2 * t->nb : 64, i;
		struct link **b = calloc(nb, sizeof(*b)), *x;
		struct table nt = { .b = b, .nb = nb };

		if (!b)
			return -ENOMEM;
		for (i = 0; i < t->nb; i++)
			while ((x = t->b[i])) {
				t->b[i] = x->next;
				x->next = b[slot(&nt, x->key)];
				b[slot(&nt, x->key)] = x;
			}
		free(t->b);
		t->b = b;
		t->nb = nb;
	}
	l->next = t->b[slot(t, l->key)];
	t->b[slot(t, l->key)] = l;
	t->n++;
	return 0;
}

static void table_remove(struct table *t, struct link *l)
{
	struct link **p;

	for (p = &t->b[slot(t, l->key)]; *p != l; p = &(*p)->next)
		;
	*p = l->next;
	t->n--;
}

static void reclaim_pages(void *arg, uint64_t need);

void sfs_slice_mem_init(struct sfs_slice_mem *m, uint64_t max,
			uint64_t slices_max)
{
	sfs_budget_init(&m->all, max ? max : SFS_SLICE_MEM_MAX, NULL, NULL);
	sfs_budget_init_within(
		&m->slices, slices_max ? slices_max : SFS_SLICE_MEM_SLICES_MAX,
		NULL, NULL, &m->all);
	atomic_init(&m->spilled, 0);
	atomic_init(&m->laid_out, 0);
}

int sfs_slice_cache_new_within(const struct sfs_index *idx, size_t max,
			       uint64_t pages_max, struct sfs_slice_mem *mem,
			       struct sfs_slice_cache **out)
{
	struct sfs_slice_cache *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->idx = idx;
	c->max = max ? max : SFS_SLICE_CACHE_MAX;
	/* half the slices of all views at most: the next epoch's view,
	 * built ahead, keeps as many as the one served */
	if (mem && c->max > mem->slices.max / 2)
		c->max = (size_t)(mem->slices.max / 2);
	c->shared = mem;
	c->spill_fd = -1;
	sfs_budget_init_within(&c->pages,
			       pages_max ? pages_max : SFS_SLICE_PAGES_MAX,
			       reclaim_pages, c, mem ? &mem->all : NULL);
	if (pthread_mutex_init(&c->lock, NULL)) {
		free(c);
		return -ENOMEM;
	}
	if (pthread_cond_init(&c->read, NULL)) {
		pthread_mutex_destroy(&c->lock);
		free(c);
		return -ENOMEM;
	}
	*out = c;
	return 0;
}

int sfs_slice_cache_new(const struct sfs_index *idx, size_t max,
			struct sfs_slice_cache **out)
{
	return sfs_slice_cache_new_within(idx, max, 0, NULL, out);
}

static void held_free(const struct sfs_slice_cache *c, struct held *h)
{
	const struct sfs_shard *sh = &c->idx->shards[h->link.key];

	if (h->state)
		sh->format->free_shard(h->state);
	free(h);
}

void sfs_slice_cache_end_build(struct sfs_slice_cache *c)
{
	struct link *l;
	bool states;
	size_t i;

	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	states = c->held.n > 0;
	for (i = 0; i < c->held.nb; i++)
		while ((l = c->held.b[i])) {
			c->held.b[i] = l->next;
			held_free(c, (struct held *)l);
		}
	free(c->held.b);
	c->held = (struct table){ 0 };
	c->held_mem = 0;
	pthread_mutex_unlock(&c->lock);
	/* the build's pages (up to 128 MiB each) were decoded and freed
	 * on several threads: what the allocator kept of them goes back */
	if (states && sfs_budget_peak(&c->pages))
		sfs_heap_give_back();
}

void sfs_slice_cache_free(struct sfs_slice_cache *c)
{
	struct link *l;
	size_t i;

	if (!c)
		return;
	sfs_slice_cache_end_build(c);
	for (i = 0; i < c->kept.nb; i++)
		while ((l = c->kept.b[i])) {
			c->kept.b[i] = l->next;
			sfs_slice_free(((struct kept *)l)->slice);
			free(l);
		}
	free(c->kept.b);
	if (c->shared)
		sfs_budget_give(&c->shared->slices, c->mem);
	if (c->spill_fd >= 0)
		close(c->spill_fd);
	free(c->spill_dir);
	pthread_cond_destroy(&c->read);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

/* The bytes slice s holds: its extents and the bytes it owns. */
static size_t slice_mem(const struct sfs_slice *s)
{
	size_t mem = sizeof(*s) + s->nextents * sizeof(s->extents[0]), i;

	for (i = 0; i < s->nextents; i++)
		if (s->extents[i].owned)
			mem += (size_t)s->extents[i].len;
	return mem;
}

/*
 * The least recently used state no slice is laid out from (NULL: none);
 * only those that keep something for the slices that follow (shard_mem)
 * when keeping is set.
 */
static struct held *idle_lru_locked(struct sfs_slice_cache *c, bool keeping)
{
	struct held *victim = NULL, *h;
	size_t i;

	for (i = 0; i < c->held.nb; i++)
		for (h = (struct held *)c->held.b[i]; h;
		     h = (struct held *)h->link.next) {
			const struct sfs_format_ops *ops =
				c->idx->shards[h->link.key].format;

			if (h->refs || h->reading ||
			    (victim && h->used >= victim->used))
				continue;
			if (keeping && (!h->state || !ops->shard_mem ||
					!ops->shard_mem(h->state)))
				continue;
			victim = h;
		}
	return victim;
}

static void drop_held_locked(struct sfs_slice_cache *c, struct held *h)
{
	table_remove(&c->held, &h->link);
	c->held_mem -= h->mem;
	held_free(c, h);
}

/*
 * Free the least recently used states no slice is laid out from while
 * the states hold more than SFS_SLICE_STATES_MAX, not counting what they
 * keep for the slices that follow: that is the pages budget's, and
 * counting it here too would free a state that keeps big pages at every
 * slice put back, only to decode them again at the next (the pages'
 * bound, not this trim, decides when kept pages go: reclaim_pages).
 */
static void trim_held_locked(struct sfs_slice_cache *c)
{
	struct held *victim;

	while (c->held_mem > SFS_SLICE_STATES_MAX &&
	       (victim = idle_lru_locked(c, false)))
		drop_held_locked(c, victim);
}

/*
 * The pages budget's reclaim, for a state that wants to keep need bytes
 * more and has let go of its own least recently used ones, or a column
 * being cut that is held past the bound (need 0): free the least
 * recently used states no slice is laid out from that keep some, until
 * need fits.  Called with no lock of a state held (budget.h): the
 * order is our lock, then a state's.
 */
static void reclaim_pages(void *arg, uint64_t need)
{
	struct sfs_slice_cache *c = arg;
	struct held *victim;

	pthread_mutex_lock(&c->lock);
	while (sfs_budget_short(&c->pages, need) &&
	       (victim = idle_lru_locked(c, true)))
		drop_held_locked(c, victim);
	pthread_mutex_unlock(&c->lock);
}

/*
 * The state of shard sh (read from fd by the first slice that needs it;
 * the slices that come meanwhile wait for that read), held: put it back
 * with put_held.
 */
static int get_held(struct sfs_slice_cache *c, const struct sfs_shard *sh,
		    int fd, struct held **out, struct sfs_error *err)
{
	uint64_t key = (uint64_t)(sh - c->idx->shards);
	struct held *h;
	void *state;
	size_t mem;
	int rc;

	pthread_mutex_lock(&c->lock);
	for (;;) {
		h = (struct held *)table_find(&c->held, key);
		if (!h || !h->reading)
			break;
		pthread_cond_wait(&c->read, &c->lock);
	}
	if (h && h->state) {
		h->refs++;
		h->used = ++c->tick;
		pthread_mutex_unlock(&c->lock);
		*out = h;
		return 0;
	}
	if (!h) {
		h = calloc(1, sizeof(*h));
		if (h)
			h->link.key = key;
		if (!h || table_add(&c->held, &h->link)) {
			free(h);
			pthread_mutex_unlock(&c->lock);
			return sfs_errorf(err, -ENOMEM, "out of memory");
		}
	}
	h->reading = true;
	h->refs++;
	pthread_mutex_unlock(&c->lock);

	rc = sh->format->read_shard(fd, sh, &c->pages, &state, &mem, err);

	pthread_mutex_lock(&c->lock);
	h->reading = false;
	if (rc) {
		h->refs--;
	} else {
		h->state = state;
		h->mem = mem;
		h->used = ++c->tick;
		c->held_mem += mem;
	}
	pthread_cond_broadcast(&c->read);
	pthread_mutex_unlock(&c->lock);
	if (rc)
		return rc;
	*out = h;
	return 0;
}

static void put_held(struct sfs_slice_cache *c, struct held *h)
{
	pthread_mutex_lock(&c->lock);
	h->refs--;
	trim_held_locked(c);
	pthread_mutex_unlock(&c->lock);
}

/* Tell c's note of trouble with its file (what could not be done, and
 * why), the first time only. */
static void note_spill(struct sfs_slice_cache *c, const char *what,
		       const char *why)
{
	char msg[1024];
	bool first;

	pthread_mutex_lock(&c->lock);
	first = !c->noted;
	c->noted = true;
	pthread_mutex_unlock(&c->lock);
	if (!first || !c->note)
		return;
	snprintf(
		msg, sizeof(msg),
		"%s: cannot %s the file of the laid-out slices that do not fit in memory (%s): the view's slices not kept are laid out again at each open (for Parquet's big pages, a decode each); set TMPDIR to a directory the daemon can write, with room",
		c->spill_dir, what, why);
	c->note(c->note_arg, msg);
}

/*
 * Whether c's file may grow by bytes: its file system keeps at least a
 * tenth of its size free after it (the file is the daemon's alone, the
 * directory everyone's: /var/tmp by default).  Yes when the file system
 * cannot tell.
 */
static bool spill_room(const struct sfs_slice_cache *c, uint64_t bytes)
{
	struct statvfs sv;
	uint64_t avail, keep;

	if (fstatvfs(c->spill_fd, &sv) < 0)
		return true;
	avail = (uint64_t)sv.f_bavail * sv.f_frsize;
	keep = (uint64_t)sv.f_blocks * sv.f_frsize / 10;
	return avail >= bytes && avail - bytes >= keep;
}

/*
 * Write slice s to c's file for k: its table of extents, then its
 * synthesized bytes.  0, or -1 when c has no file (or a write failed,
 * or its file system would keep less than a tenth free: noted).
 */
static int spill(struct sfs_slice_cache *c, struct kept *k,
		 const struct sfs_slice *s)
{
	struct spilled_extent *t =
		calloc(s->nextents ? s->nextents : 1, sizeof(*t));
	uint64_t bytes = s->nextents * sizeof(*t), at;
	size_t i;
	int rc = 0;

	for (i = 0; i < s->nextents; i++) {
		const struct sfs_extent *x = &s->extents[i];

		if (t)
			t[i] = (struct spilled_extent){ .pos = x->pos,
							.len = x->len,
							.src = x->src,
							.file = x->file,
							.mem = x->mem != NULL };
		if (x->mem)
			bytes += x->len;
	}
	pthread_mutex_lock(&c->lock);
	if (t && c->spill_fd < 0 && c->spill_dir && !c->spill_off) {
		bool linkable;

		rc = sfs_open_unlinked(c->spill_dir, "shardfs-slices", 0600,
				       &linkable);
		c->spill_fd = rc < 0 ? -1 : rc;
		c->spill_off = rc < 0;
		rc = rc < 0 ? rc : 0;
	}
	if (t && c->spill_fd >= 0 && !c->spill_off && !spill_room(c, bytes)) {
		c->spill_off = true;
		rc = -ENOSPC;
	}
	if (!t || c->spill_fd < 0 || c->spill_off) {
		pthread_mutex_unlock(&c->lock);
		free(t);
		if (rc == -ENOSPC)
			note_spill(
				c, "grow",
				"its file system would keep less than a tenth of its size free");
		else if (rc)
			note_spill(c, "make", strerror(-rc));
		return -1;
	}
	k->at = at = c->spill_end;
	c->spill_end += bytes;
	pthread_mutex_unlock(&c->lock);
	/* the range is this slice's alone: written without the lock */
	rc = sfs_pwrite_full(c->spill_fd, t, s->nextents * sizeof(*t), at);
	at += s->nextents * sizeof(*t);
	for (i = 0; !rc && i < s->nextents; i++) {
		const struct sfs_extent *x = &s->extents[i];

		if (!x->mem)
			continue;
		rc = sfs_pwrite_full(c->spill_fd, x->mem, (size_t)x->len, at);
		at += x->len;
	}
	free(t);
	if (rc) {
		pthread_mutex_lock(&c->lock);
		c->spill_off = true;
		pthread_mutex_unlock(&c->lock);
		note_spill(c, "write", strerror(-rc));
		return -1;
	}
	k->len = bytes;
	k->bytes = s->size;
	k->nextents = s->nextents;
	k->mem = sizeof(*k);
	return 0;
}

/*
 * Keep slice s (taken) under key, laid out from fd: in memory if there
 * is room, else in c's file if it has one.  A spilled slice's record
 * (struct kept) is not charged to the bounds: one a file of the view,
 * as its nodes are.
 */
static void keep(struct sfs_slice_cache *c, uint64_t key, int fd,
		 struct sfs_slice *s)
{
	struct kept *k = malloc(sizeof(*k));
	struct stat st;

	if (!k || fstat(fd, &st) < 0) {
		free(k);
		sfs_slice_free(s);
		return;
	}
	*k = (struct kept){ .link.key = key,
			    .slice = s,
			    .mem = sizeof(*k) + slice_mem(s),
			    .size = (uint64_t)st.st_size,
			    .mtime_ns = sfs_mtime_ns(&st),
			    .dev = st.st_dev,
			    .ino = st.st_ino };
	pthread_mutex_lock(&c->lock);
	if (table_find(&c->kept, key))
		goto out_unlock;
	/* within the cache's bound and the daemon's, for all its views */
	if (c->mem + k->mem <= c->max &&
	    (!c->shared || sfs_budget_take(&c->shared->slices, k->mem))) {
		if (table_add(&c->kept, &k->link)) {
			if (c->shared)
				sfs_budget_give(&c->shared->slices, k->mem);
			goto out_unlock;
		}
		c->mem += k->mem;
		pthread_mutex_unlock(&c->lock);
		return;
	}
	pthread_mutex_unlock(&c->lock);
	if (spill(c, k, s))
		goto out;
	sfs_slice_free(s);
	s = k->slice = NULL;
	pthread_mutex_lock(&c->lock);
	if (table_find(&c->kept, key) || table_add(&c->kept, &k->link))
		goto out_unlock;
	c->nspilled++;
	pthread_mutex_unlock(&c->lock);
	if (c->shared)
		atomic_fetch_add(&c->shared->spilled, 1);
	return;
out_unlock:
	pthread_mutex_unlock(&c->lock);
out:
	sfs_slice_free(s);
	free(k);
}

int sfs_slice_cache_size(struct sfs_slice_cache *c, const struct sfs_shard *sh,
			 int fd, uint64_t key, const struct sfs_run *runs,
			 size_t nruns, uint64_t *size, struct sfs_error *err)
{
	struct sfs_slice *s = NULL;
	struct held *h = NULL;
	int rc;

	if (!sh->format->read_shard)
		return sfs_slice_size(c->idx, NULL, sh, fd, runs, nruns, size,
				      err);
	rc = get_held(c, sh, fd, &h, err);
	if (!rc) {
		rc = slice_build_state(c->idx, sh, fd, h->state, runs, nruns,
				       &s, err);
		put_held(c, h);
	}
	if (rc)
		return rc;
	*size = s->size;
	keep(c, key, fd, s);
	return 0;
}

/* A new slice of the extents of k, sharing its bytes. */
static int share(const struct sfs_slice *k, struct sfs_slice **out)
{
	struct sfs_slice *s = calloc(1, sizeof(*s));
	size_t i;

	if (!s)
		return -ENOMEM;
	s->extents = malloc((k->nextents + 1) * sizeof(*s->extents));
	if (!s->extents) {
		free(s);
		return -ENOMEM;
	}
	s->size = k->size;
	s->nextents = k->nextents;
	/* owned stays as it is: the read path copies a slice's own bytes
	 * rather than splice them, and goes on doing so */
	s->shared = true;
	for (i = 0; i < k->nextents; i++)
		s->extents[i] = k->extents[i];
	*out = s;
	return 0;
}

/*
 * The slice k holds in c's file, read back into a new slice that owns its
 * bytes.  0, -ENOMEM, or -EIO when the file does not give back what was
 * written.
 */
static int read_back(struct sfs_slice_cache *c, const struct kept *k,
		     struct sfs_slice **out)
{
	uint64_t tb = k->nextents * sizeof(struct spilled_extent), pos = 0;
	uint64_t at = k->at + tb, end = k->at + k->len;
	struct spilled_extent *t = malloc(tb ? tb : 1);
	struct sfs_slice *s = calloc(1, sizeof(*s));
	size_t i;
	int rc = -ENOMEM;

	if (s)
		s->extents = calloc(k->nextents ? k->nextents : 1,
				    sizeof(*s->extents));
	if (!t || !s || !s->extents)
		goto out;
	rc = -EIO;
	if (sfs_pread_full(c->spill_fd, t, tb, k->at) != (ssize_t)tb)
		goto out;
	for (i = 0; i < k->nextents; i++) {
		struct sfs_extent *x = &s->extents[i];
		void *mem;

		if (t[i].pos != pos || t[i].len > k->bytes - pos ||
		    (t[i].mem && t[i].len > end - at))
			goto out;
		*x = (struct sfs_extent){ .pos = pos,
					  .len = t[i].len,
					  .src = t[i].src,
					  .file = t[i].file };
		s->nextents = i + 1;
		pos += t[i].len;
		if (!t[i].mem)
			continue;
		mem = malloc(t[i].len ? (size_t)t[i].len : 1);
		if (!mem) {
			rc = -ENOMEM;
			goto out;
		}
		x->mem = mem;
		x->owned = true;
		if (sfs_pread_full(c->spill_fd, mem, (size_t)t[i].len, at) !=
		    (ssize_t)t[i].len)
			goto out;
		at += t[i].len;
	}
	if (pos != k->bytes || at != end)
		goto out;
	s->size = pos;
	*out = s;
	s = NULL;
	rc = 0;
out:
	free(t);
	sfs_slice_free(s);
	return rc;
}

int sfs_slice_cache_build(struct sfs_slice_cache *c, const struct sfs_shard *sh,
			  int fd, uint64_t key, const struct sfs_run *runs,
			  size_t nruns, struct sfs_slice **out,
			  struct sfs_error *err)
{
	struct kept *k;
	struct stat st;
	int rc;

	pthread_mutex_lock(&c->lock);
	k = (struct kept *)table_find(&c->kept, key);
	pthread_mutex_unlock(&c->lock);
	if (!k)
		goto lay_out;
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		return sfs_errorf(err, rc, "%s: %s", sh->path, strerror(-rc));
	}
	if ((uint64_t)st.st_size != k->size || sfs_mtime_ns(&st) != k->mtime_ns)
		return sfs_errorf(
			err, -ESTALE,
			"%s: the shard changed since its slices were laid out; rebuild the index with shardfs-index",
			sh->path);
	if (st.st_dev != k->dev || st.st_ino != k->ino)
		goto lay_out;
	if (k->slice) {
		if (share(k->slice, out))
			return sfs_errorf(err, -ENOMEM, "out of memory");
		return 0;
	}
	rc = read_back(c, k, out);
	if (rc == -ENOMEM)
		return sfs_errorf(err, rc, "out of memory");
	if (!rc)
		return 0;
	/* never other bytes: laid out from the shard instead */
	note_spill(c, "read back", strerror(-rc));
lay_out:
	/* counted where the cache would keep it: a slice of a driver that
	 * reads a shard once for all its slices (others cost little) */
	if (sh->format->read_shard) {
		atomic_fetch_add(&c->laid_out, 1);
		if (c->shared)
			atomic_fetch_add(&c->shared->laid_out, 1);
	}
	return sfs_slice_build(c->idx, sh, fd, runs, nruns, out, err);
}

int sfs_slice_cache_spill(struct sfs_slice_cache *c, const char *dir,
			  void (*note)(void *arg, const char *msg), void *arg,
			  struct sfs_error *err)
{
	c->spill_dir = strdup(dir);
	if (!c->spill_dir)
		return sfs_errorf(err, -ENOMEM, "out of memory");
	c->note = note;
	c->note_arg = arg;
	return 0;
}

void sfs_slice_cache_stats(struct sfs_slice_cache *c,
			   struct sfs_slice_cache_stats *st)
{
	pthread_mutex_lock(&c->lock);
	st->kept = c->kept.n - c->nspilled;
	st->kept_mem = c->mem;
	st->spilled = c->nspilled;
	st->spilled_bytes = c->spill_end;
	pthread_mutex_unlock(&c->lock);
	st->laid_out = atomic_load(&c->laid_out);
}

struct sfs_budget *sfs_slice_cache_pages(struct sfs_slice_cache *c)
{
	return &c->pages;
}

size_t sfs_slice_cache_mem(struct sfs_slice_cache *c)
{
	size_t mem;

	pthread_mutex_lock(&c->lock);
	mem = c->mem;
	pthread_mutex_unlock(&c->lock);
	return mem;
}

size_t sfs_slice_cache_count(struct sfs_slice_cache *c)
{
	size_t n;

	pthread_mutex_lock(&c->lock);
	n = c->kept.n - c->nspilled;
	pthread_mutex_unlock(&c->lock);
	return n;
}
