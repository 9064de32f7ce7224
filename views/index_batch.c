/*
 * index_batch.c — the batch overlay of one write (ix_run, index_write.c),
 * under the write lock with the scratch of struct index: the records of
 * the keys a call touches (struct ix_slot), found by 'O' key in an
 * open-addressing table so that a key met twice in one call sees its first
 * change, each loaded from LevelDB once, in key order; and the membership
 * writes (struct ix_op), kept to the end of the call and put into the
 * WriteBatch after the records, both in key order.
 */
#include "views/index_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/array.h"
#include "common/log.h"

size_t ix_tab_mask(size_t n)
{
	size_t tc = 16;
	while (tc < 2 * n)
		tc *= 2;
	return tc - 1;
}

int ix_scratch_prepare(struct index *ix, size_t n)
{
	arena_reset(&ix->ar);
	leveldb_writebatch_clear(ix->wb);
	ix->n_chg = 0;
	ix->n_vchg = 0;
	ix->n_ops = 0;
	/* evslot and order share ev_cap: it grows once both did */
	size_t ecap = ix->ev_cap, ocap = ix->ev_cap, tc = ix_tab_mask(n) + 1;
	int rc = ARRAY_GROW(&ix->evslot, &ecap, n);
	if (rc == 0)
		rc = ARRAY_GROW(&ix->order, &ocap, n);
	if (rc < 0)
		return rc;
	ix->ev_cap = ecap < ocap ? ecap : ocap;
	if (ARRAY_GROW(&ix->slots, &ix->slots_cap, n) < 0 ||
	    ARRAY_GROW(&ix->tab, &ix->tab_cap, tc) < 0 ||
	    ARRAY_GROW(&ix->mdelta, &ix->mdelta_cap, ix->n_views) < 0)
		return -ENOMEM;
	/* only the part sized for this call is used (and cleared) */
	memset(ix->tab, 0xff, tc * sizeof *ix->tab);
	if (ix->n_views)
		memset(ix->mdelta, 0, ix->n_views * sizeof *ix->mdelta);
	return 0;
}

/* A live record with no ETag: the gateway's own version, made or staged
 * here and not uploaded yet (index.h 'U'). */
static bool rec_unsent(const struct obj_meta *rec)
{
	return !(rec->flags & OBJ_DELETED) && !rec->etag[0];
}

/* The slot of the 'O' key in ix->kbuf, created (not loaded) if new. */
int ix_slot_find_add(struct index *ix, size_t mask, size_t *nslots, int32_t *out)
{
	const char *k = ix->kbuf.p;
	size_t kl = ix->kbuf.len;
	uint64_t h = ix_key_hash(k, kl);
	size_t i = h & mask;
	while (ix->tab[i] >= 0) {
		struct ix_slot *s = &ix->slots[ix->tab[i]];
		if (s->h == h && s->oklen == kl && memcmp(s->okey, k, kl) == 0) {
			*out = ix->tab[i];
			return 0;
		}
		i = (i + 1) & mask;
	}
	struct ix_slot *s = &ix->slots[*nslots];
	memset(s, 0, sizeof *s);
	s->okey = arena_dup(&ix->ar, k, kl);
	if (!s->okey)
		return -ENOMEM;
	s->oklen = kl;
	s->h = h;
	ix->tab[i] = (int32_t)*nslots;
	*out = (int32_t)(*nslots)++;
	return 0;
}

static int bytes_cmp(const char *a, size_t al, const char *b, size_t bl)
{
	int c = memcmp(a, b, al < bl ? al : bl);
	return c ? c : (al > bl) - (al < bl);
}

/* Sorting keys that share a long head (every 'O' key of a batch starts
 * with 'O' bucket \0, every 'M' key with 'M' and a view name) is mostly
 * memcmp over that head. So each key carries sk: its 8 bytes after the
 * batch's common head, big-endian, zero-padded; sk order is key order
 * except on ties, which the full comparison settles. */
static size_t common_head(size_t cp, const char *a, size_t al, const char *b, size_t bl)
{
	size_t n = cp < al ? cp : al;
	n = n < bl ? n : bl;
	size_t i = 0;
	while (i < n && a[i] == b[i])
		i++;
	return i;
}

static uint64_t key_head(const char *k, size_t kl, size_t cp)
{
	uint64_t h = 0;
	for (size_t i = 0; i < 8; i++)
		h = h << 8 | (cp + i < kl ? (unsigned char)k[cp + i] : 0);
	return h;
}

static int slot_cmp(const void *a, const void *b, void *ctx)
{
	const struct ix_slot *slots = ctx;
	const struct ix_slot *x = &slots[*(const int32_t *)a];
	const struct ix_slot *y = &slots[*(const int32_t *)b];
	if (x->sk != y->sk)
		return x->sk < y->sk ? -1 : 1;
	return bytes_cmp(x->okey, x->oklen, y->okey, y->oklen);
}

static int op_cmp(const void *a, const void *b)
{
	const struct ix_op *x = a, *y = b;
	if (x->sk != y->sk)
		return x->sk < y->sk ? -1 : 1;
	int c = bytes_cmp(x->k, x->kl, y->k, y->kl);
	return c ? c : (x->seq > y->seq) - (x->seq < y->seq);
}

/* Are the slots (first occurrences of the input's keys) in key order, as a
 * listed page is? Then neither they nor, mostly, the ops need a sort. */
static bool slots_in_order(const struct index *ix, size_t nslots)
{
	for (size_t i = 1; i < nslots; i++) {
		const struct ix_slot *a = &ix->slots[i - 1], *b = &ix->slots[i];
		if (bytes_cmp(a->okey, a->oklen, b->okey, b->oklen) >= 0)
			return false;
	}
	return true;
}

/* Read the stored record of every slot, in key order. *in_order: the
 * input was in key order already. */
int ix_slots_load(struct index *ix, size_t nslots, bool *in_order)
{
	for (size_t i = 0; i < nslots; i++)
		ix->order[i] = (int32_t)i;
	*in_order = slots_in_order(ix, nslots);
	if (!*in_order) {
		size_t cp = ix->slots[0].oklen;
		for (size_t i = 1; i < nslots; i++)
			cp = common_head(cp, ix->slots[0].okey, ix->slots[0].oklen,
					 ix->slots[i].okey, ix->slots[i].oklen);
		for (size_t i = 0; i < nslots; i++)
			ix->slots[i].sk = key_head(ix->slots[i].okey, ix->slots[i].oklen, cp);
		qsort_r(ix->order, nslots, sizeof *ix->order, slot_cmp, ix->slots);
	}
	for (size_t j = 0; j < nslots; j++) {
		struct ix_slot *s = &ix->slots[ix->order[j]];
		if (ix->bloom && !ix_bloom_maybe(ix->bloom, s->h))
			continue;   /* surely never stored */
		char *v;
		size_t vl;
		int rc = ix_get(ix, NULL, s->okey, s->oklen, &v, &vl);
		if (rc == -ENOENT)
			continue;
		if (rc < 0)
			return rc;
		char *copy = arena_dup(&ix->ar, v, vl);
		leveldb_free(v);
		if (!copy)
			return -ENOMEM;
		if (rec_decode(copy, vl, &ix->ar, &s->rec) == 0) {
			s->exists = true;
			s->was_unsent = rec_unsent(&s->rec);
			s->enc = copy;
			s->enclen = vl;
		} else {
			log_warn("index: undecodable record %.*s replaced",
				 (int)s->oklen - 1, s->okey + 1);
		}
	}
	return 0;
}

/* v is already in the arena (shared by the ops of one key) or NULL. */
int ix_op_add(struct index *ix, const struct ixview *xv, const char *k, size_t kl,
	      const char *v, size_t vl)
{
	if (ARRAY_GROW(&ix->ops, &ix->ops_cap, ix->n_ops + 1) < 0)
		return -ENOMEM;
	struct ix_op *op = &ix->ops[ix->n_ops];
	op->k = arena_dup(&ix->ar, k, kl);
	op->v = v;
	if (!op->k)
		return -ENOMEM;
	op->kl = kl;
	op->vl = vl;
	op->seq = (uint32_t)ix->n_ops++;
	op->rank = (uint32_t)xv->rank;
	return 0;
}

static int prefix_cmp(const void *a, const void *b, void *ctx)
{
	const struct ixview *views = ctx;
	const struct ixview *x = &views[*(const size_t *)a], *y = &views[*(const size_t *)b];
	return bytes_cmp(x->prefix, x->plen, y->prefix, y->plen);
}

int ix_table_rank(struct ixview *views, size_t n)
{
	size_t *ord = malloc((n ? n : 1) * sizeof *ord);
	if (!ord)
		return -ENOMEM;
	for (size_t v = 0; v < n; v++)
		ord[v] = v;
	qsort_r(ord, n, sizeof *ord, prefix_cmp, views);
	for (size_t r = 0; r < n; r++)
		views[ord[r]].rank = r;
	free(ord);
	return 0;
}

/* The ops of a page in key order, without comparing keys in a sort: every
 * key of a view starts with its prefix ('M' name \0, so the prefixes of two
 * views order all their keys), so a stable counting sort by the rank of the
 * view's prefix (ixview.rank, set once per view set) puts them in key
 * order when each view's ops came in key order, as a listed page's mostly
 * do ('/' stored as \0 can reorder paths); this is checked, and false (ops
 * untouched) means: sort them. */
static bool ops_group(struct index *ix)
{
	size_t nv = ix->n_views, n = ix->n_ops;
	if (ARRAY_GROW(&ix->vstart, &ix->vstart_cap, nv + 1) < 0 ||
	    ARRAY_GROW(&ix->ops_tmp, &ix->ops_tmp_cap, n) < 0)
		return false;
	size_t *start = ix->vstart;
	memset(start, 0, (nv + 1) * sizeof *start);
	for (size_t i = 0; i < n; i++)
		start[ix->ops[i].rank + 1]++;
	for (size_t r = 0; r < nv; r++)
		start[r + 1] += start[r];
	struct ix_op *out = ix->ops_tmp;
	for (size_t i = 0; i < n; i++)
		out[start[ix->ops[i].rank]++] = ix->ops[i];
	for (size_t i = 1; i < n; i++)
		if (out[i].rank == out[i - 1].rank &&
		    bytes_cmp(out[i - 1].k, out[i - 1].kl, out[i].k, out[i].kl) > 0)
			return false;
	ix->ops_tmp = ix->ops;
	ix->ops = out;
	size_t cap = ix->ops_tmp_cap;
	ix->ops_tmp_cap = ix->ops_cap;
	ix->ops_cap = cap;
	return true;
}

/* s's 'U' key follows its record: written when the record becomes
 * unsent, deleted when it stops being so. */
static int unsent_mark(struct index *ix, const struct ix_slot *s)
{
	bool now = rec_unsent(&s->rec);
	if (now == s->was_unsent)
		return 0;
	char *k = arena_dup(&ix->ar, s->okey, s->oklen);
	if (!k)
		return -ENOMEM;
	k[0] = 'U';
	if (now)
		leveldb_writebatch_put(ix->wb, k, s->oklen, "", 0);
	else
		leveldb_writebatch_delete(ix->wb, k, s->oklen);
	return 0;
}

/* Records and memberships into the batch, both in key order. */
int ix_ops_flush(struct index *ix, size_t nslots, bool in_order)
{
	for (size_t j = 0; j < nslots; j++) {
		const struct ix_slot *s = &ix->slots[ix->order[j]];
		if (!s->dirty)
			continue;
		leveldb_writebatch_put(ix->wb, s->okey, s->oklen, s->enc, s->enclen);
		if (unsent_mark(ix, s) < 0)
			return -ENOMEM;
		if (ix->bloom)
			ix_bloom_add(ix->bloom, s->h);
		if (ix->bloom_building)
			ix_bloom_add(ix->bloom_building, s->h);
	}
	if (ix->n_ops > 1 && !(in_order && ops_group(ix))) {
		size_t cp = ix->ops[0].kl;
		for (size_t i = 1; i < ix->n_ops; i++)
			cp = common_head(cp, ix->ops[0].k, ix->ops[0].kl, ix->ops[i].k,
					 ix->ops[i].kl);
		for (size_t i = 0; i < ix->n_ops; i++)
			ix->ops[i].sk = key_head(ix->ops[i].k, ix->ops[i].kl, cp);
		qsort(ix->ops, ix->n_ops, sizeof *ix->ops, op_cmp);
	}
	for (size_t i = 0; i < ix->n_ops; i++) {
		const struct ix_op *op = &ix->ops[i];
		/* of several ops on one key only the last matters */
		if (i + 1 < ix->n_ops && op->kl == op[1].kl && memcmp(op->k, op[1].k, op->kl) == 0)
			continue;
		if (op->v)
			leveldb_writebatch_put(ix->wb, op->k, op->kl, op->v, op->vl);
		else
			leveldb_writebatch_delete(ix->wb, op->k, op->kl);
	}
	return 0;
}
