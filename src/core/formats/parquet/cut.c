/*
 * The cutter: a row group cut to rows, per column the pages inside the
 * rows copied and the pages a cut falls inside decoded and re-encoded.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "formats/parquet/parquet_i.h"
#include "shardfs/budget.h"
#include "shardfs/parquet.h"
#include "shardfs/util.h"

static int add_piece(struct sfs_parquet_cut_column *cc, size_t *cap,
		     uint64_t src, uint64_t len, unsigned char *mem)
{
	struct sfs_parquet_piece *last =
		cc->npieces ? &cc->pieces[cc->npieces - 1] : NULL;

	if (!mem && last && !last->mem && last->src + last->len == src) {
		last->len += len;
		return 0;
	}
	if (SFS_GROW(cc->pieces, *cap, cc->npieces + 1))
		return -ENOMEM;
	cc->pieces[cc->npieces++] = (struct sfs_parquet_piece){ .src = src,
								.len = len,
								.mem = mem };
	return 0;
}

/* Values k0 .. k1 of c's decoded page as the cut page writes them: the
 * dictionary indexes in the page's encoding, or PLAIN. */
static void encode_values(const struct sfs_pq_column *c, uint32_t k0,
			  uint32_t k1, struct sfs_thrift_out *val)
{
	const struct sfs_pq_page *pg = &c->pg;
	uint32_t i, j;

	if (pg->idx) {
		unsigned char w = (unsigned char)pg->bit_width;

		sfs_thrift_put(val, &w, 1);
		sfs_pq_hybrid_encode(val, pg->idx + k0, k1 - k0, w);
		return;
	}
	for (i = k0; i < k1; i += c->lf.type == SFS_PQ_T_BOOLEAN ? 8 : 1) {
		if (c->lf.type == SFS_PQ_T_BOOLEAN) {
			unsigned char bits = 0;

			for (j = 0; j < 8 && i + j < k1; j++)
				bits |= (unsigned char)((pg->vals[i + j].p[0] &
							 1)
							<< j);
			sfs_thrift_put(val, &bits, 1);
			continue;
		}
		if (c->lf.type == SFS_PQ_T_BYTE_ARRAY)
			sfs_thrift_put_le32(val, pg->vals[i].len);
		sfs_thrift_put(val, pg->vals[i].p, pg->vals[i].len);
	}
}

/*
 * Levels of entries e0 .. e0 + n of c's decoded page, repetition then
 * definition, as the RLE / bit-packed hybrid: each after its u32 length
 * in a v1 page, bare in a v2 page.  Sets *rep_len to the bytes of the
 * repetition levels.
 */
static void encode_levels(const struct sfs_pq_column *c, uint32_t e0,
			  uint32_t n, bool v1, struct sfs_thrift_out *lev,
			  size_t *rep_len)
{
	struct sfs_thrift_out one = { 0 };
	int which;

	*rep_len = 0;
	for (which = 0; which < 2; which++) {
		uint32_t max = which ? c->lf.max_def : c->lf.max_rep;
		const uint32_t *l = which ? c->pg.def : c->pg.rep;

		if (!max)
			continue;
		one.len = 0;
		sfs_pq_hybrid_encode(&one, l + e0, n, sfs_pq_bits_for(max));
		if (v1)
			sfs_thrift_put_le32(lev, (uint32_t)one.len);
		sfs_thrift_put(lev, one.p, one.len);
		if (!which)
			*rep_len = lev->len;
	}
	free(one.p);
	if (one.oom)
		lev->oom = 1;
}

/*
 * The values of c's decoded page before entry e (entries at max_def):
 * every entry's when the column is required, else counted from the
 * nearer end of the page, as a cut per row would otherwise walk half a
 * page for each.
 */
static uint32_t values_before(const struct sfs_pq_column *c, uint32_t e)
{
	const struct sfs_pq_page *pg = &c->pg;
	uint32_t i, k = 0;

	if (!c->lf.max_def)
		return e;
	if (e <= pg->n / 2) {
		for (i = 0; i < e; i++)
			k += pg->def[i] == c->lf.max_def;
		return k;
	}
	for (i = e; i < pg->n; i++)
		k += pg->def[i] == c->lf.max_def;
	return pg->nvals - k;
}

/*
 * Entries [e0, e1) of c's decoded page as a new page (header and body)
 * in *out: levels re-encoded, values PLAIN or, dictionary-encoded, their
 * indexes in the page's encoding; compressed with the chunk's codec.
 */
static int reencode(struct sfs_pq_column *c, uint32_t e0, uint32_t e1,
		    struct sfs_thrift_out *out, int64_t *usize)
{
	const struct sfs_pq_page *pg = &c->pg;
	struct sfs_thrift_out lev = { 0 }, val = { 0 }, body = { 0 };
	uint32_t k0 = 0, k1, i, n = e1 - e0, rows = 0;
	int32_t enc = pg->idx ? pg->h.encoding : SFS_PQ_ENC_PLAIN;
	bool v1 = pg->h.type == SFS_PQ_PAGE_DATA;
	size_t rep_len;
	int last = 0, sub = 0, rc;

	k0 = values_before(c, e0);
	k1 = k0;
	for (i = e0; i < e1; i++) {
		k1 += pg->def[i] == c->lf.max_def;
		rows += pg->rep[i] == 0;
	}
	/* a cut page may be most of a page of up to SFS_PQ_PAGE_MAX: a v1
	 * page's values go straight after its levels, the page is
	 * compressed straight into body, and its uncompressed bytes are
	 * freed before body is copied after the header */
	encode_levels(c, e0, n, v1, &lev, &rep_len);
	if (v1) {
		/* levels and values compressed together */
		encode_values(c, k0, k1, &lev);
		*usize = (int64_t)lev.len;
		rc = lev.oom ? -ENOMEM :
			       sfs_pq_page_compress(c->ch->codec, lev.p,
						    lev.len, &body);
	} else {
		/* levels as they are, values compressed unless the page
		 * said not */
		encode_values(c, k0, k1, &val);
		*usize = (int64_t)(lev.len + val.len);
		sfs_thrift_put(&body, lev.p, lev.len);
		rc = lev.oom || val.oom || body.oom ?
			     -ENOMEM :
			     sfs_pq_page_compress(pg->h.compressed ?
							  c->ch->codec :
							  SFS_PQ_C_UNCOMPRESSED,
						  val.p, val.len, &body);
	}
	free(lev.p);
	free(val.p);
	lev.p = val.p = NULL; /* their lengths are still read */
	if (rc == -EINVAL)
		rc = sfs_pq_col_fail(
			c, pg->h.at,
			"the cut page cannot be compressed with %s",
			sfs_pq_codec_name(c->ch->codec));
	else if (rc)
		rc = sfs_pq_col_nomem(c);
	/* a page header says its sizes in i32: values built by a page's
	 * decoding are capped (SFS_PQ_PAGE_MAX) well under, but a cut page
	 * written PLAIN is bigger than what it was decoded from */
	if (!rc && (*usize > INT32_MAX || body.len > INT32_MAX))
		rc = sfs_pq_col_fail(
			c, pg->h.at,
			"the cut page would be %lld bytes (%zu compressed), over the 2 GiB a page header can say; rewrite the file with smaller pages or another encoding",
			(long long)*usize, body.len);
	if (rc)
		goto out;
	sfs_thrift_put_int(out, &last, 1, SFS_TC_I32, pg->h.type);
	sfs_thrift_put_int(out, &last, 2, SFS_TC_I32, *usize);
	sfs_thrift_put_int(out, &last, 3, SFS_TC_I32, (int64_t)body.len);
	sfs_thrift_put_field(out, &last, v1 ? 5 : 8, SFS_TC_STRUCT);
	sfs_thrift_put_int(out, &sub, 1, SFS_TC_I32, n);
	if (v1) {
		sfs_thrift_put_int(out, &sub, 2, SFS_TC_I32, enc);
		sfs_thrift_put_int(out, &sub, 3, SFS_TC_I32, SFS_PQ_ENC_RLE);
		sfs_thrift_put_int(out, &sub, 4, SFS_TC_I32, SFS_PQ_ENC_RLE);
	} else {
		sfs_thrift_put_int(out, &sub, 2, SFS_TC_I32, n - (k1 - k0));
		sfs_thrift_put_int(out, &sub, 3, SFS_TC_I32, rows);
		sfs_thrift_put_int(out, &sub, 4, SFS_TC_I32, enc);
		sfs_thrift_put_int(out, &sub, 5, SFS_TC_I32,
				   (int64_t)(lev.len - rep_len));
		sfs_thrift_put_int(out, &sub, 6, SFS_TC_I32, (int64_t)rep_len);
		sfs_thrift_put_field(out, &sub, 7,
				     pg->h.compressed ? SFS_TC_TRUE :
							SFS_TC_FALSE);
	}
	sfs_thrift_put_stop(out); /* the data page header */
	sfs_thrift_put_stop(out); /* the PageHeader */
	*usize += (int64_t)out->len;
	sfs_thrift_put(out, body.p, body.len);
	if (out->oom)
		rc = sfs_pq_col_nomem(c);
out:
	free(lev.p);
	free(val.p);
	free(body.p);
	return rc;
}

/*
 * Decode the data page h into c->pg unless it holds it (*have: the page
 * it holds, UINT64_MAX none), counted in *decoded.
 */
static int decode(struct sfs_pq_column *c, const struct sfs_pq_page_header *h,
		  uint64_t *have, uint64_t *decoded)
{
	int rc;

	if (*have == h->at)
		return 0;
	*have = UINT64_MAX;
	++*decoded;
	rc = sfs_pq_decode_page(c, h);
	if (!rc)
		*have = h->at;
	return rc;
}

/* Cut column c (opened on row group rg) to rows [first, end); *have and
 * *decoded as decode's. */
static int cut_column(struct sfs_pq_column *c, uint64_t *have,
		      uint64_t *decoded, int64_t first, int64_t end,
		      struct sfs_parquet_cut_column *cc)
{
	struct sfs_pq_page_header h;
	size_t cap = 0;
	int64_t row = 0; /* rows begun before the page */
	bool pre = false; /* what precedes the first data page is laid */
	int rc;

	while ((rc = sfs_pq_next_data_page(c, &h)) == 1) {
		uint64_t at = h.at, len = h.header_len + (uint64_t)h.csize;
		uint64_t start = (uint64_t)sfs_parquet_chunk_start(c->ch);
		int64_t lo, hi, starts;
		bool cont;

		if (!pre && at > start) {
			/* the dictionary page (whatever precedes the first
			 * data page), as it is */
			if (add_piece(cc, &cap, start, at - start, NULL))
				return sfs_pq_col_nomem(c);
			cc->total_compressed_size = (int64_t)(at - start);
			cc->total_uncompressed_size = (int64_t)c->pre_usize;
		}
		pre = true;
		/* the rows the page touches: [lo, hi) */
		if (!c->lf.max_rep || h.type == SFS_PQ_PAGE_DATA_V2) {
			starts = c->lf.max_rep ? h.num_rows : h.num_values;
			cont = false;
		} else {
			uint32_t i;

			rc = decode(c, &h, have, decoded);
			if (rc)
				return rc;
			for (starts = 0, i = 0; i < c->pg.n; i++)
				starts += c->pg.rep[i] == 0;
			cont = c->pg.n && c->pg.rep[0] != 0;
		}
		lo = cont ? row - 1 : row;
		hi = row + starts;
		row += starts;
		if (lo >= end)
			break;
		if (hi <= first || hi == lo)
			continue;
		if (lo >= first && hi <= end) {
			if (add_piece(cc, &cap, at, len, NULL))
				return sfs_pq_col_nomem(c);
			cc->total_compressed_size += (int64_t)len;
			cc->total_uncompressed_size +=
				(int64_t)h.header_len + h.usize;
			cc->num_values += h.num_values;
		} else {
			struct sfs_thrift_out out = { 0 };
			int64_t usize = 0, r = row - starts - 1;
			uint32_t i, e0 = UINT32_MAX, e1 = 0;

			rc = decode(c, &h, have, decoded);
			if (rc)
				return rc;
			if (!c->lf.max_rep) {
				/* entry i is row lo + i */
				e0 = (uint32_t)((first > lo ? first : lo) - lo);
				e1 = (uint32_t)((end < hi ? end : hi) - lo);
			}
			/* else entry i belongs to the row last begun (rep 0) */
			for (i = 0; c->lf.max_rep && i < c->pg.n; i++) {
				r += c->pg.rep[i] == 0;
				if (r >= first && r < end) {
					if (e0 == UINT32_MAX)
						e0 = i;
					e1 = i + 1;
				}
			}
			if (e0 == UINT32_MAX)
				continue;
			rc = reencode(c, e0, e1, &out, &usize);
			/* kept as long as the slice: its length, not the
			 * page's worth the buffer began with (shuffle=samples
			 * keeps a page of a row per row and column) */
			if (!rc && out.cap > out.len) {
				unsigned char *p = realloc(out.p, out.len);

				if (p)
					out.p = p;
			}
			if (!rc && add_piece(cc, &cap, 0, out.len, out.p))
				rc = sfs_pq_col_nomem(c);
			if (rc) {
				free(out.p);
				return rc;
			}
			cc->total_compressed_size += (int64_t)out.len;
			cc->total_uncompressed_size += usize;
			cc->num_values += e1 - e0;
		}
	}
	if (rc < 0)
		return rc;
	if (row < end)
		return sfs_pq_col_fail(
			c, c->pos,
			"the column chunk ends after %lld rows; the cut needs %lld",
			(long long)row, (long long)end);
	return 0;
}

/*
 * A column of a row group parked after a cut, with its dictionary and the
 * page it decoded last, for the next cut of the same row group; or taken
 * by a cut (busy), which the other cuts of that column wait for rather
 * than decode the same page again.
 */
struct parked {
	struct sfs_pq_column c; /* valid when open */
	size_t rg, k;
	uint64_t have; /* the page c.pg holds */
	uint64_t used;
	bool busy; /* a cut has it */
	bool open; /* c holds a column */
};

struct sfs_parquet_pages {
	struct sfs_budget *budget; /* the parked columns are charged to it */
	struct sfs_budget own; /* budget's when no one else's was given */
	pthread_mutex_t lock;
	pthread_cond_t parked; /* lock: a busy column was parked or let go */
	struct parked *p[SFS_PARQUET_PAGES_COLUMNS]; /* lock */
	size_t n; /* lock */
	/* lock: the decoded bytes of the columns not busy, charged to
	 * budget; a cut's column is given back when it is taken, and held
	 * in budget while it is cut (sfs_pq_column's also) */
	uint64_t mem;
	uint64_t tick; /* lock */
	uint64_t decoded; /* lock: pages decoded through it */
};

struct sfs_parquet_pages *sfs_parquet_pages_new(struct sfs_budget *budget)
{
	struct sfs_parquet_pages *ps = calloc(1, sizeof(*ps));

	if (!ps)
		return NULL;
	sfs_budget_init(&ps->own, SFS_PARQUET_PAGES_MAX, NULL, NULL);
	ps->budget = budget ? budget : &ps->own;
	if (pthread_mutex_init(&ps->lock, NULL)) {
		free(ps);
		return NULL;
	}
	if (pthread_cond_init(&ps->parked, NULL)) {
		pthread_mutex_destroy(&ps->lock);
		free(ps);
		return NULL;
	}
	return ps;
}

/* Drop entry i (not busy) of ps, closing its column. */
static void drop_locked(struct sfs_parquet_pages *ps, size_t i)
{
	struct parked *p = ps->p[i];

	if (p->open) {
		ps->mem -= p->c.own;
		sfs_budget_give(ps->budget, p->c.own);
		sfs_pq_col_close(&p->c);
	}
	free(p);
	ps->p[i] = ps->p[--ps->n];
}

void sfs_parquet_pages_free(struct sfs_parquet_pages *ps)
{
	if (!ps)
		return;
	while (ps->n)
		drop_locked(ps, 0);
	pthread_cond_destroy(&ps->parked);
	pthread_mutex_destroy(&ps->lock);
	free(ps);
}

uint64_t sfs_parquet_pages_decoded(struct sfs_parquet_pages *ps)
{
	uint64_t n;

	pthread_mutex_lock(&ps->lock);
	n = ps->decoded;
	pthread_mutex_unlock(&ps->lock);
	return n;
}

uint64_t sfs_parquet_pages_mem(struct sfs_parquet_pages *ps)
{
	uint64_t mem;

	if (!ps)
		return 0;
	pthread_mutex_lock(&ps->lock);
	mem = ps->mem;
	pthread_mutex_unlock(&ps->lock);
	return mem;
}

/* Drop the least recently used column no cut has, of a row group other
 * than but (SIZE_MAX: any).  False when none can go. */
static bool drop_lru_locked(struct sfs_parquet_pages *ps, size_t but)
{
	size_t i, lru = SIZE_MAX;

	for (i = 0; i < ps->n; i++)
		if (!ps->p[i]->busy && ps->p[i]->rg != but &&
		    (lru == SIZE_MAX || ps->p[i]->used < ps->p[lru]->used))
			lru = i;
	if (lru == SIZE_MAX)
		return false;
	drop_locked(ps, lru);
	return true;
}

/*
 * Charge own bytes of a column of row group rg to park to ps's budget.
 * While it has no room: ps's least recently used parked columns of other
 * row groups go, when letting go of them makes room (dropping them for
 * nothing would only decode them again; and the columns of rg are cut
 * in turn by every cut of it, so that dropping one to keep the next
 * would decode each again at every cut, where keeping those that fit
 * decodes only the others); else the budget's owner is asked, once, to
 * free what idle holders keep, ps->lock let go meanwhile (the owner
 * takes its lock, then those of the pages it frees).  False: no room,
 * the column is not kept.
 */
static bool charge_locked(struct sfs_parquet_pages *ps, size_t rg, uint64_t own)
{
	struct sfs_budget *b = ps->budget;
	bool asked = false;

	if (own > sfs_budget_max(b))
		return false;
	while (!sfs_budget_take(b, own)) {
		/* ps's pages are charged to b and its parents: letting go
		 * of them all gives room for ps->mem more */
		if (ps->mem && ps->mem >= sfs_budget_short(b, own) &&
		    drop_lru_locked(ps, rg))
			continue;
		if (asked)
			return false;
		pthread_mutex_unlock(&ps->lock);
		asked = sfs_budget_reclaim(b, own);
		pthread_mutex_lock(&ps->lock);
		if (!asked)
			return false;
	}
	return true;
}

/*
 * Column k of row group rg from ps for a cut: *p the entry the cut has
 * now (NULL: none, the table being full of busy columns), and true with
 * the column parked there in *c, rewound, or false when the cut opens
 * it.  Waits while another cut has the column.
 */
static bool take(struct sfs_parquet_pages *ps, size_t rg, size_t k, int fd,
		 struct sfs_error *err, struct sfs_pq_column *c, uint64_t *have,
		 struct parked **out)
{
	struct parked *p = NULL;
	size_t i;

	*out = NULL;
	if (!ps)
		return false;
	pthread_mutex_lock(&ps->lock);
	for (;;) {
		for (i = 0; i < ps->n; i++)
			if (ps->p[i]->rg == rg && ps->p[i]->k == k)
				break;
		if (i == ps->n || !ps->p[i]->busy)
			break;
		pthread_cond_wait(&ps->parked, &ps->lock);
	}
	if (i < ps->n) {
		p = ps->p[i];
	} else if ((ps->n < SFS_PARQUET_PAGES_COLUMNS ||
		    drop_lru_locked(ps, SIZE_MAX)) &&
		   (p = calloc(1, sizeof(*p)))) {
		*p = (struct parked){ .rg = rg, .k = k };
		ps->p[ps->n++] = p;
	}
	if (p) {
		p->busy = true;
		p->used = ++ps->tick;
		if (p->open) {
			/* kept no more, held while it is cut */
			ps->mem -= p->c.own;
			sfs_budget_hold(ps->budget, p->c.own);
			sfs_budget_give(ps->budget, p->c.own);
		}
	}
	pthread_mutex_unlock(&ps->lock);
	*out = p;
	if (!p || !p->open)
		return false;
	*c = p->c;
	c->also = ps->budget;
	*have = p->have;
	sfs_pq_col_rewind(c, fd, err);
	return true;
}

/*
 * Give back entry p (the cut's, NULL: none) with column c (taken; NULL:
 * the cut failed), parked if its budget has room for it (charge_locked),
 * else closed; decoded: the pages the cut decoded.
 */
static void park(struct sfs_parquet_pages *ps, struct parked *p,
		 struct sfs_pq_column *c, uint64_t have, uint64_t decoded)
{
	size_t i;

	if (!ps) {
		if (c)
			sfs_pq_col_close(c);
		return;
	}
	pthread_mutex_lock(&ps->lock);
	ps->decoded += decoded;
	if (c) {
		/* held no more: kept, or closed */
		sfs_budget_unhold(ps->budget, c->own);
		c->also = NULL;
	}
	/* a column kept when the cut took it, no page decoded since, has
	 * its room still: what was held meanwhile was held beside it */
	if (p && c &&
	    (p->open && !decoded ? sfs_budget_take_back(ps->budget, c->own) :
				   charge_locked(ps, p->rg, c->own))) {
		p->c = *c;
		p->c.held = &p->c.own;
		p->c.err = NULL;
		p->have = have;
		p->open = true;
		p->busy = false;
		ps->mem += p->c.own;
		c = NULL;
	} else if (p) {
		for (i = 0; ps->p[i] != p; i++)
			;
		p->open = false;
		p->busy = false;
		drop_locked(ps, i);
	}
	pthread_cond_broadcast(&ps->parked);
	pthread_mutex_unlock(&ps->lock);
	if (c)
		sfs_pq_col_close(c);
}

void sfs_parquet_cut_free(struct sfs_parquet_cut *c)
{
	size_t i, k;

	if (!c)
		return;
	for (i = 0; i < c->ncolumns; i++) {
		for (k = 0; k < c->columns[i].npieces; k++)
			free(c->columns[i].pieces[k].mem);
		free(c->columns[i].pieces);
	}
	free(c->columns);
	free(c);
}

int sfs_parquet_cut(int fd, const struct sfs_parquet_meta *m, size_t rg,
		    int64_t first, int64_t count, struct sfs_parquet_cut **out,
		    struct sfs_error *err)
{
	return sfs_parquet_cut_pages(fd, m, NULL, rg, first, count, out, err);
}

int sfs_parquet_cut_pages(int fd, const struct sfs_parquet_meta *m,
			  struct sfs_parquet_pages *pages, size_t rg,
			  int64_t first, int64_t count,
			  struct sfs_parquet_cut **out, struct sfs_error *err)
{
	struct sfs_parquet_cut *cut = calloc(1, sizeof(*cut));
	struct sfs_pq_leaf *lf =
		calloc(m->nleaves ? m->nleaves : 1, sizeof(*lf));
	size_t k;
	int rc;

	if (!cut || !lf ||
	    !(cut->columns = calloc(m->nleaves ? m->nleaves : 1,
				    sizeof(*cut->columns)))) {
		rc = sfs_errorf(err, -ENOMEM, "%s: out of memory", m->path);
		goto out;
	}
	if (rg >= m->nrow_groups || first < 0 || count < 1 ||
	    count > m->row_groups[rg].num_rows - first) {
		rc = sfs_errorf(err, -EINVAL,
				"%s: rows %lld..+%lld are not in row group %zu",
				m->path, (long long)first, (long long)count,
				rg);
		goto out;
	}
	cut->ncolumns = m->nleaves;
	rc = sfs_pq_leaves(m, lf, err);
	for (k = 0; !rc && k < m->nleaves; k++) {
		struct sfs_pq_column c;
		struct parked *p;
		uint64_t have = UINT64_MAX, decoded = 0;

		if (!take(pages, rg, k, fd, err, &c, &have, &p)) {
			rc = sfs_pq_col_open(&c, fd, m, rg, k, &lf[k], err);
			/* what it decodes is held in the pages' budget */
			c.also = pages ? pages->budget : NULL;
		}
		if (!rc)
			rc = cut_column(&c, &have, &decoded, first,
					first + count, &cut->columns[k]);
		if (rc)
			sfs_pq_col_close(&c);
		park(pages, p, rc ? NULL : &c, have, decoded);
	}
out:
	free(lf);
	if (rc) {
		sfs_parquet_cut_free(cut);
		return rc;
	}
	*out = cut;
	return 0;
}
