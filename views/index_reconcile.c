/*
 * index_reconcile.c — see index_reconcile.h. The range walk finds the live
 * records the page does not list (candidates for removal, as tombstones);
 * page and candidates then go through ix_run_decided() (index_write.c),
 * whose decide callback (reconcile_decide) applies the rules of the header
 * to the record as stored at that moment, under the write lock.
 */
#include "views/index_int.h"
#include "views/index_reconcile.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/array.h"
#include "common/log.h"

struct rc_note { int what; const char *key; };

struct rc_ctx {
	int64_t t0_ns;
	struct index_reconcile_counts c;   /* this batch only */
	struct rc_note *notes;             /* keys point into the call's input */
	size_t n_notes;
};

/* Count and remember one decision (notes has room for every input). */
static bool decided(struct rc_ctx *x, uint64_t *counter, int what,
		    const struct obj_meta *o, bool write)
{
	(*counter)++;
	x->notes[x->n_notes++] = (struct rc_note){ what, o->key };
	return write;
}

static bool kv_same(const struct obj_kv *a, size_t na, const struct obj_kv *b, size_t nb)
{
	if (na != nb)
		return false;
	for (size_t i = 0; i < na; i++) {   /* a handful of pairs: quadratic is fine */
		size_t j = 0;
		while (j < nb && strcmp(a[i].name, b[j].name) != 0)
			j++;
		if (j == nb || strcmp(a[i].value ? a[i].value : "",
				      b[j].value ? b[j].value : "") != 0)
			return false;
	}
	return true;
}

/* Does the live stored record r show the listed object o as it is? */
static bool same_object(const struct obj_meta *r, const struct obj_meta *o)
{
	if (r->size != o->size || strcmp(r->etag, o->etag) != 0)
		return false;
	if ((r->flags & OBJ_FROM_SCAN) && r->mtime_ns != o->mtime_ns)
		return false;
	if ((o->flags & OBJ_HAS_TAGS) &&
	    (!(r->flags & OBJ_HAS_TAGS) || !kv_same(r->tags, r->n_tags, o->tags, o->n_tags)))
		return false;
	if ((o->flags & OBJ_HAS_META) &&
	    (!(r->flags & OBJ_HAS_META) || !kv_same(r->meta, r->n_meta, o->meta, o->n_meta)))
		return false;
	if ((o->flags & OBJ_HAS_CTYPE) &&
	    (!(r->flags & OBJ_HAS_CTYPE) || !r->content_type || !o->content_type ||
	     strcmp(r->content_type, o->content_type) != 0))
		return false;
	return true;
}

static bool reconcile_decide(void *dctx, const struct obj_meta *r, const struct obj_meta *o)
{
	struct rc_ctx *x = dctx;
	int64_t fresh = x->t0_ns - INDEX_TIME_SLACK_NS;
	bool r_live = r && !(r->flags & OBJ_DELETED);
	bool r_fresh_event = r_live && !(r->flags & OBJ_FROM_SCAN) && r->mtime_ns >= fresh;

	if (o->flags & OBJ_DELETED) {          /* a record the listing lacks */
		if (!r_live)
			return false;          /* gone meanwhile: nothing to do */
		if (r_fresh_event)
			return decided(x, &x->c.kept, IXR_KEPT, o, false);
		return decided(x, &x->c.removed, IXR_REMOVED, o, true);
	}
	if (!r)
		return decided(x, &x->c.added, IXR_ADDED, o, true);
	/* a tombstone or a fresh event record: what a scan page would do (a
	 * tombstone newer than the listing and an event record stay); an
	 * older event record is checked against the listing like a scan's */
	if (!r_live || r_fresh_event) {
		if (ix_scan_keeps_record(r, o))
			return decided(x, &x->c.kept, IXR_KEPT, o, false);
		return decided(x, &x->c.added, IXR_ADDED, o, true);
	}
	if (same_object(r, o)) {
		x->c.unchanged++;
		return false;
	}
	return decided(x, &x->c.updated, IXR_UPDATED, o, true);
}

static int key_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Byte order of a NUL-terminated listed key and a key of length kl. */
static int listed_cmp(const char *listed, const char *k, size_t kl)
{
	size_t ll = strlen(listed);
	int c = memcmp(listed, k, ll < kl ? ll : kl);
	return c ? c : (ll > kl) - (ll < kl);
}

struct cand {
	struct obj_meta *o;
	size_t n, cap;
};

static int cand_add(struct cand *c, const char *bucket, const char *key, size_t kl,
		    int64_t t0_ns)
{
	if (ARRAY_GROW(&c->o, &c->cap, c->n + 1) < 0)
		return -ENOMEM;
	struct obj_meta *o = &c->o[c->n];
	memset(o, 0, sizeof *o);
	o->bucket = (char *)bucket;        /* borrowed: never released */
	o->key = strndup(key, kl);
	if (!o->key)
		return -ENOMEM;
	o->flags = OBJ_DELETED;
	o->mtime_ns = t0_ns;
	c->n++;
	return 0;
}

/* Live records of bucket with keys in (after, upto] that are not in the
 * sorted listed[0..nl): one merge of the two sorted sequences. */
static int range_walk(struct index *ix, const char *bucket, const char *after,
		      const char *upto, char *const *listed, size_t nl,
		      int64_t t0_ns, struct cand *out)
{
	struct ibuf pfx = { 0 }, seek = { 0 };
	size_t li = 0;
	int rc = key_object(&pfx, bucket, "");
	if (rc == 0)
		rc = key_object(&seek, bucket, after ? after : "");
	if (rc < 0) {
		ibuf_release(&pfx);
		ibuf_release(&seek);
		return -ENOMEM;
	}
	size_t ul = upto ? strlen(upto) : 0;
	leveldb_iterator_t *it = leveldb_create_iterator(ix->db, ix->ro);
	for (leveldb_iter_seek(it, seek.p, seek.len); leveldb_iter_valid(it);
	     leveldb_iter_next(it)) {
		size_t kl, vl;
		const char *k = leveldb_iter_key(it, &kl);
		if (kl < pfx.len || memcmp(k, pfx.p, pfx.len) != 0)
			break;
		const char *key = k + pfx.len;
		size_t keyl = kl - pfx.len;
		if (keyl == 0)
			continue;
		if (after && *after && kl == seek.len && memcmp(k, seek.p, kl) == 0)
			continue;                  /* after itself is excluded */
		if (upto) {
			int c = memcmp(key, upto, keyl < ul ? keyl : ul);
			if (c > 0 || (c == 0 && keyl > ul))
				break;
		}
		int c = 1;
		while (li < nl && (c = listed_cmp(listed[li], key, keyl)) < 0)
			li++;
		if (li < nl && c == 0)
			continue;                  /* listed */
		const char *v = leveldb_iter_value(it, &vl);
		uint32_t flags;
		if (rec_flags(v, vl, &flags) < 0 || (flags & OBJ_DELETED))
			continue;
		rc = cand_add(out, bucket, key, keyl, t0_ns);
		if (rc < 0)
			break;
	}
	char *err = NULL;
	leveldb_iter_get_error(it, &err);
	if (err) {
		log_error("index: reading bucket %s for a rescan: %s", bucket, err);
		leveldb_free(err);
		rc = -EIO;
	}
	leveldb_iter_destroy(it);
	ibuf_release(&pfx);
	ibuf_release(&seek);
	return rc;
}

int index_reconcile_page(struct index *ix, const char *bucket,
			 const struct obj_meta *objs, size_t n,
			 const char *after, const char *upto, int64_t t0_ns,
			 struct index_reconcile_counts *c,
			 index_reconcile_fn note, void *note_ctx,
			 index_change_fn fn, void *ctx)
{
	if (!bucket || !*bucket)
		return -EINVAL;
	struct cand cand = { 0 };
	struct obj_meta *all = NULL;
	char **listed = calloc(n ? n : 1, sizeof *listed);
	int rc = listed ? 0 : -ENOMEM;
	size_t nl = 0;
	bool sorted = true;
	for (size_t i = 0; rc == 0 && i < n; i++) {
		if (!objs[i].key || !*objs[i].key)
			continue;
		if (nl && strcmp(listed[nl - 1], objs[i].key) >= 0)
			sorted = false;
		listed[nl++] = objs[i].key;
	}
	if (rc == 0) {
		if (!sorted)   /* a listing is in key order; never trusted blindly */
			qsort(listed, nl, sizeof *listed, key_cmp);
		rc = range_walk(ix, bucket, after, upto, listed, nl, t0_ns, &cand);
	}
	struct rc_ctx x = { .t0_ns = t0_ns };
	if (rc == 0 && n + cand.n > 0) {
		all = malloc((n + cand.n) * sizeof *all);
		x.notes = malloc((n + cand.n) * sizeof *x.notes);
		if (!all || !x.notes)
			rc = -ENOMEM;
	}
	if (rc == 0 && n + cand.n > 0) {
		/* shallow copies: the index copies what it keeps */
		for (size_t i = 0; i < n; i++) {
			all[i] = objs[i];
			if (!all[i].bucket)
				all[i].bucket = (char *)bucket;
			all[i].flags &= ~(uint32_t)OBJ_DELETED;
		}
		if (cand.n)
			memcpy(all + n, cand.o, cand.n * sizeof *all);
		int k = ix_run_decided(ix, all, n + cand.n, reconcile_decide, &x, fn, ctx);
		if (k < 0) {
			rc = k;
		} else {
			c->added += x.c.added;
			c->removed += x.c.removed;
			c->updated += x.c.updated;
			c->unchanged += x.c.unchanged;
			c->kept += x.c.kept;
			for (size_t i = 0; note && i < x.n_notes; i++)
				note(note_ctx, x.notes[i].what, x.notes[i].key);
		}
	}
	free(x.notes);
	for (size_t i = 0; i < cand.n; i++)
		free(cand.o[i].key);
	free(cand.o);
	free(all);
	free(listed);
	return rc;
}

/* index_apply_newer's rule, on the record as stored now. */
static bool newer_decide(void *dctx, const struct obj_meta *stored,
			 const struct obj_meta *o)
{
	(void)dctx;
	return stored && !(stored->flags & OBJ_DELETED) &&
	       o->mtime_ns > stored->mtime_ns + INDEX_TIME_SLACK_NS;
}

int index_apply_newer(struct index *ix, const struct obj_meta *o,
		      index_change_fn fn, void *ctx)
{
	int kept = ix_run_decided(ix, o, 1, newer_decide, NULL, fn, ctx);
	return kept < 0 ? kept : kept == 0;
}
