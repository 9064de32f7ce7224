/*
 * index_views.c — the view set of the index: index_set_views() installs a
 * new table of views, drops the memberships of views that are gone, and
 * rebuilds the memberships of new or changed views (their 'V' hash differs)
 * from the stored 'O' records: per affected bucket, one pass over the key
 * ranges of the rebuilt views' literal prefixes (the whole bucket when one
 * of them has none).
 *
 * Crash safety of a rebuild: the view's 'V' entry is deleted before its old
 * memberships are, and written again only after the last rebuilt batch, so
 * an interrupted rebuild is redone at the next start.
 */
#include "views/index_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/lock.h"
#include "common/log.h"
#include "views/route.h"

#define REBUILD_BATCH 10000

int ix_drop_prefix(struct index *ix, const char *prefix, size_t plen)
{
	leveldb_iterator_t *it = leveldb_create_iterator(ix->db, ix->ro);
	size_t pending = 0;
	int rc = 0;
	for (leveldb_iter_seek(it, prefix, plen); leveldb_iter_valid(it);
	     leveldb_iter_next(it)) {
		size_t kl;
		const char *k = leveldb_iter_key(it, &kl);
		if (kl < plen || memcmp(k, prefix, plen) != 0)
			break;
		leveldb_writebatch_delete(ix->wb, k, kl);
		if (++pending == REBUILD_BATCH) {
			rc = ix_write(ix, "membership drop");
			pending = 0;
			if (rc < 0)
				break;
		}
	}
	leveldb_iter_destroy(it);
	if (rc == 0 && pending)
		rc = ix_write(ix, "membership drop");
	return rc;
}

static int bucket_add(struct ixbucket **bs, size_t *nb, const char *name, size_t vi)
{
	struct ixbucket *b = NULL;
	for (size_t i = 0; i < *nb; i++)
		if (strcmp((*bs)[i].name, name) == 0)
			b = &(*bs)[i];
	if (!b) {
		struct ixbucket *g = realloc(*bs, (*nb + 1) * sizeof *g);
		if (!g)
			return -ENOMEM;
		*bs = g;
		b = &g[*nb];
		memset(b, 0, sizeof *b);
		b->name = strdup(name);
		if (!b->name)
			return -ENOMEM;
		(*nb)++;
	}
	for (size_t i = 0; i < b->n; i++)
		if (b->views[i] == vi)
			return 0;
	size_t *v = realloc(b->views, (b->n + 1) * sizeof *v);
	if (!v)
		return -ENOMEM;
	b->views = v;
	b->views[b->n++] = vi;
	return 0;
}

static int table_build(struct view *const *views, size_t n, struct ixview **out_v,
		       struct ixbucket **out_b, size_t *out_nb, struct route **out_r)
{
	struct ixview *tv = calloc(n ? n : 1, sizeof *tv);
	struct ixbucket *tb = NULL;
	struct route *r = NULL;
	size_t nb = 0;
	int rc = tv ? route_build((const struct view *const *)views, n, &r) : -ENOMEM;
	for (size_t i = 0; rc == 0 && i < n; i++) {
		const char *name = view_name(views[i]);
		size_t nl = strlen(name);
		tv[i].v = views[i];
		tv[i].name = strdup(name);
		tv[i].prefix = malloc(nl + 2);
		if (!tv[i].name || !tv[i].prefix) {
			rc = -ENOMEM;
			break;
		}
		tv[i].prefix[0] = 'M';
		memcpy(tv[i].prefix + 1, name, nl + 1);
		tv[i].plen = nl + 2;
		tv[i].multi = view_n_buckets(views[i]) > 1;
		atomic_init(&tv[i].members, 0);
		for (size_t j = 0; rc == 0 && j < view_n_buckets(views[i]); j++)
			rc = bucket_add(&tb, &nb, view_bucket(views[i], j), i);
	}
	if (rc == 0)
		rc = ix_table_rank(tv, n);
	if (rc < 0) {
		if (tv)
			ix_table_free(tv, n, tb, nb, r);
		return rc;
	}
	*out_v = tv;
	*out_b = tb;
	*out_nb = nb;
	*out_r = r;
	return 0;
}

/* Is the stored membership of view vi built from its current definition?
 * If so its member count is loaded. */
static int view_is_current(struct index *ix, size_t vi, bool *current)
{
	struct ixview *xv = &ix->views[vi];
	char *v;
	size_t vl;
	*current = false;
	ix->tbuf.len = 0;
	if (key_vhash(&ix->tbuf, xv->name) < 0)
		return -ENOMEM;
	int rc = ix_get(ix, NULL, ix->tbuf.p, ix->tbuf.len, &v, &vl);
	if (rc == -ENOENT)
		return 0;
	if (rc < 0)
		return rc;
	*current = vl == 8 && be64_get(v) == view_hash(xv->v);
	leveldb_free(v);
	if (!*current)
		return 0;
	ix->tbuf.len = 0;
	if (key_count_view(&ix->tbuf, xv->name) < 0)
		return -ENOMEM;
	rc = ix_get(ix, NULL, ix->tbuf.p, ix->tbuf.len, &v, &vl);
	if (rc == 0) {
		if (vl == 8)
			atomic_store(&xv->members, be64_get(v));
		leveldb_free(v);
	}
	return rc == -ENOENT ? 0 : rc;
}

/* Forget a view by name: 'V', its count and its memberships. */
static int view_forget(struct index *ix, const char *name)
{
	ix->tbuf.len = 0;
	if (key_vhash(&ix->tbuf, name) < 0)
		return -ENOMEM;
	leveldb_writebatch_delete(ix->wb, ix->tbuf.p, ix->tbuf.len);
	ix->tbuf.len = 0;
	if (key_count_view(&ix->tbuf, name) < 0)
		return -ENOMEM;
	leveldb_writebatch_delete(ix->wb, ix->tbuf.p, ix->tbuf.len);
	int rc = ix_write(ix, "view removal");
	if (rc < 0)
		return rc;
	ix->tbuf.len = 0;
	if (key_view_prefix(&ix->tbuf, name) < 0)
		return -ENOMEM;
	char *prefix = strndup(ix->tbuf.p, ix->tbuf.len);
	if (!prefix)
		return -ENOMEM;
	rc = ix_drop_prefix(ix, prefix, ix->tbuf.len);
	free(prefix);
	return rc;
}

/* Drop the 'V' entries (and memberships) of names not in the table. */
static int drop_absent_views(struct index *ix)
{
	char **gone = NULL;
	size_t ngone = 0;
	int rc = 0;
	leveldb_iterator_t *it = leveldb_create_iterator(ix->db, ix->ro);
	for (leveldb_iter_seek(it, "V", 1); leveldb_iter_valid(it); leveldb_iter_next(it)) {
		size_t kl;
		const char *k = leveldb_iter_key(it, &kl);
		if (kl < 1 || k[0] != 'V')
			break;
		bool present = false;
		for (size_t i = 0; i < ix->n_views && !present; i++)
			present = strlen(ix->views[i].name) == kl - 1 &&
				  memcmp(ix->views[i].name, k + 1, kl - 1) == 0;
		if (present)
			continue;
		char **g = realloc(gone, (ngone + 1) * sizeof *g);
		char *nm = strndup(k + 1, kl - 1);
		if (!g || !nm) {
			free(nm);
			if (g)
				gone = g;
			rc = -ENOMEM;
			break;
		}
		gone = g;
		gone[ngone++] = nm;
	}
	leveldb_iter_destroy(it);
	for (size_t i = 0; i < ngone; i++) {
		if (rc == 0) {
			log_info("index: dropping the membership of removed view %s", gone[i]);
			rc = view_forget(ix, gone[i]);
		}
		free(gone[i]);
	}
	free(gone);
	return rc;
}

/* Membership of one stored record in the rebuilt views it may belong to. */
static int rebuild_record(struct index *ix, const bool *rebuild, struct obj_meta *o,
			  size_t key_len, size_t *pending)
{
	char path[IX_PATH_MAX];
	size_t nc = route_find(ix->route, o->bucket, o->key, key_len, ix->cand);
	for (size_t j = 0; j < nc; j++) {
		size_t vi = ix->cand[j];
		struct ixview *xv = &ix->views[vi];
		if (!rebuild[vi] || !view_match(xv->v, o))
			continue;
		int rc = ix_member_path(ix, vi, o->bucket, o->key, path, sizeof path);
		if (rc == -ENOENT)
			continue;
		if (rc < 0) {
			stats_inc(&ix->ctr.bad_keys);
			continue;
		}
		ix->tbuf.len = 0;
		ix->vbuf.len = 0;
		if (ibuf_add(&ix->tbuf, xv->prefix, xv->plen) < 0 ||
		    key_add_path(&ix->tbuf, path) < 0 || member_encode(&ix->vbuf, o) < 0)
			return -ENOMEM;
		leveldb_writebatch_put(ix->wb, ix->tbuf.p, ix->tbuf.len, ix->vbuf.p, ix->vbuf.len);
		atomic_fetch_add(&xv->members, 1);
		if (++*pending >= REBUILD_BATCH) {
			rc = ix_write(ix, "membership rebuild");
			*pending = 0;
			if (rc < 0)
				return rc;
		}
	}
	return 0;
}

/* Rebuild from the records of bucket bk whose key starts with head[0..hl). */
static int rebuild_range(struct index *ix, const struct ixbucket *bk, const bool *rebuild,
			 const char *head, size_t hl)
{
	struct ibuf pre = { 0 };
	if (key_object(&pre, bk->name, "") < 0)
		return -ENOMEM;
	size_t base = pre.len;   /* 'O' bucket \0: the key follows */
	if (ibuf_add(&pre, head, hl) < 0) {
		ibuf_release(&pre);
		return -ENOMEM;
	}
	leveldb_readoptions_t *ro = leveldb_readoptions_create();
	leveldb_readoptions_set_fill_cache(ro, 0);
	leveldb_iterator_t *it = leveldb_create_iterator(ix->db, ro);
	size_t pending = 0, seen = 0;
	int rc = 0;
	for (leveldb_iter_seek(it, pre.p, pre.len); rc == 0 && leveldb_iter_valid(it);
	     leveldb_iter_next(it)) {
		size_t kl, vl;
		const char *k = leveldb_iter_key(it, &kl);
		if (kl < pre.len || memcmp(k, pre.p, pre.len) != 0)
			break;
		const char *v = leveldb_iter_value(it, &vl);
		if (++seen % 1024 == 0)
			arena_reset(&ix->ar);
		char *key = arena_dup(&ix->ar, k + base, kl - base);
		char *val = arena_dup(&ix->ar, v, vl);
		struct obj_meta o;
		if (!key || !val) {
			rc = -ENOMEM;
			break;
		}
		if (rec_decode(val, vl, &ix->ar, &o) < 0) {
			log_warn("index: undecodable record of %s/%s skipped", bk->name, key);
			continue;
		}
		if (o.flags & OBJ_DELETED)
			continue;
		o.bucket = bk->name;
		o.key = key;
		rc = rebuild_record(ix, rebuild, &o, kl - base, &pending);
	}
	leveldb_iter_destroy(it);
	leveldb_readoptions_destroy(ro);
	ibuf_release(&pre);
	if (rc == 0 && pending)
		rc = ix_write(ix, "membership rebuild");
	return rc;
}

struct head { const char *p; size_t n; };

static int head_cmp(const void *a, const void *b)
{
	const struct head *x = a, *y = b;
	int c = memcmp(x->p, y->p, x->n < y->n ? x->n : y->n);
	return c ? c : (x->n > y->n) - (x->n < y->n);
}

/* Only records under the literal key prefixes of the rebuilt views can join
 * them (view_key_prefix): walk those ranges, each once (a prefix inside
 * another's range is dropped), or the whole bucket if one has none. */
static int rebuild_bucket(struct index *ix, const struct ixbucket *bk, const bool *rebuild)
{
	struct head *h = malloc((bk->n ? bk->n : 1) * sizeof *h);
	if (!h)
		return -ENOMEM;
	size_t nh = 0;
	bool whole = false;
	for (size_t j = 0; j < bk->n; j++) {
		if (!rebuild[bk->views[j]])
			continue;
		h[nh].p = view_key_prefix(ix->views[bk->views[j]].v, &h[nh].n);
		whole |= h[nh++].n == 0;
	}
	int rc = 0;
	if (whole || nh == 0) {
		rc = rebuild_range(ix, bk, rebuild, "", 0);
	} else {
		qsort(h, nh, sizeof *h, head_cmp);
		const struct head *last = NULL;
		for (size_t i = 0; rc == 0 && i < nh; i++) {
			if (last && last->n <= h[i].n && memcmp(last->p, h[i].p, last->n) == 0)
				continue;   /* inside the range just walked */
			last = &h[i];
			rc = rebuild_range(ix, bk, rebuild, h[i].p, h[i].n);
		}
	}
	free(h);
	return rc;
}

static int views_rebuild(struct index *ix, const bool *rebuild)
{
	int rc = 0;
	for (size_t vi = 0; rc == 0 && vi < ix->n_views; vi++) {
		if (!rebuild[vi])
			continue;
		log_info("index: building the membership of view %s", ix->views[vi].name);
		rc = view_forget(ix, ix->views[vi].name);
		atomic_store(&ix->views[vi].members, 0);
	}
	for (size_t b = 0; rc == 0 && b < ix->n_buckets; b++) {
		bool any = false;
		for (size_t j = 0; j < ix->buckets[b].n; j++)
			any |= rebuild[ix->buckets[b].views[j]];
		if (any)
			rc = rebuild_bucket(ix, &ix->buckets[b], rebuild);
	}
	for (size_t vi = 0; rc == 0 && vi < ix->n_views; vi++) {
		if (!rebuild[vi])
			continue;
		char v[8];
		ix->tbuf.len = 0;
		if (key_count_view(&ix->tbuf, ix->views[vi].name) < 0)
			return -ENOMEM;
		be64_put(v, atomic_load(&ix->views[vi].members));
		leveldb_writebatch_put(ix->wb, ix->tbuf.p, ix->tbuf.len, v, 8);
		ix->tbuf.len = 0;
		if (key_vhash(&ix->tbuf, ix->views[vi].name) < 0)
			return -ENOMEM;
		be64_put(v, view_hash(ix->views[vi].v));
		leveldb_writebatch_put(ix->wb, ix->tbuf.p, ix->tbuf.len, v, 8);
		rc = ix_write(ix, "view hash");
	}
	return rc;
}

int index_set_views(struct index *ix, struct viewset *vs, struct viewset_slot *publish)
{
	struct ixview *tv;
	struct ixbucket *tb;
	struct route *tr;
	size_t nb, n = viewset_count(vs);
	int rc = table_build(viewset_views(vs), n, &tv, &tb, &nb, &tr);
	if (rc < 0)
		return rc;
	bool *rebuild = calloc(n ? n : 1, sizeof *rebuild);
	size_t *cand = malloc((route_max(tr) + 1) * sizeof *cand);
	if (!rebuild || !cand) {
		free(rebuild);
		free(cand);
		ix_table_free(tv, n, tb, nb, tr);
		return -ENOMEM;
	}
	pthread_mutex_lock(&ix->wmu);
	mod_wrlock(&ix->vlock);
	struct ixview *ov = ix->views;
	struct ixbucket *ob = ix->buckets;
	struct route *orr = ix->route;
	struct viewset *os = ix->set;
	size_t onv = ix->n_views, onb = ix->n_buckets;
	ix->set = viewset_pin(vs);
	ix->views = tv;
	ix->n_views = n;
	ix->buckets = tb;
	ix->n_buckets = nb;
	ix->route = tr;
	mod_rwunlock(&ix->vlock);
	ix_table_free(ov, onv, ob, onb, orr);
	free(ix->cand);
	ix->cand = cand;
	ix->cand_cap = route_max(tr) + 1;
	leveldb_writebatch_clear(ix->wb);
	arena_reset(&ix->ar);

	for (size_t vi = 0; rc == 0 && vi < n; vi++) {
		bool cur;
		rc = view_is_current(ix, vi, &cur);
		rebuild[vi] = !cur;
	}
	if (rc == 0)
		rc = drop_absent_views(ix);
	if (rc == 0)
		rc = views_rebuild(ix, rebuild);
	arena_reset(&ix->ar);
	/* Published while no writer can run, also when the rebuild failed
	 * (vs is installed all the same): a writer holding wmu always finds
	 * the slot's set installed (index_apply_for). */
	if (publish)
		viewset_slot_swap(publish, vs);
	pthread_mutex_unlock(&ix->wmu);
	viewset_unpin(os);
	free(rebuild);
	if (rc == -ENOMEM)
		log_error("index: out of memory installing %zu views", n);
	return rc;
}

uint64_t index_members(struct index *ix, const struct view *v)
{
	uint64_t m = 0;
	if (!v)
		return 0;
	const char *name = view_name(v);
	mod_rdlock(&ix->vlock);
	for (size_t i = 0; i < ix->n_views; i++)
		if (strcmp(ix->views[i].name, name) == 0) {
			m = atomic_load(&ix->views[i].members);
			break;
		}
	mod_rwunlock(&ix->vlock);
	return m;
}

size_t index_n_views(struct index *ix)
{
	mod_rdlock(&ix->vlock);
	size_t n = ix->n_views;
	mod_rwunlock(&ix->vlock);
	return n;
}
