/*
 * scan_page.c — one listed page, as first scans (scan.c) and rescans
 * (scan_rescan.c) both take it: collected from a LIST (deep copies, the
 * bucket set, OBJ_FROM_SCAN), cleared, and enriched with what the views
 * need that a LIST does not tell (user metadata and content type by HEAD,
 * tags by GET ?tagging), from the index when it holds the same version,
 * else by a pool of SCAN_HEAD_THREADS short-lived threads. scan_int.h
 * gives the layers.
 */
#include "views/scan_int.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/lock.h"
#include "common/array.h"

/* ---- listing ---------------------------------------------------------- */

int scan_page_collect(void *ctx, const struct obj_meta *o)
{
	struct page *pg = ctx;
	if (!o->key || !*o->key)
		return 0;
	if (ARRAY_GROW(&pg->o, &pg->cap, pg->n + 1) < 0)
		return pg->err = -ENOMEM;
	struct obj_meta *d = &pg->o[pg->n];
	if (obj_meta_copy(d, o) < 0)
		return pg->err = -ENOMEM;
	if (!d->bucket && !(d->bucket = strdup(pg->bucket))) {
		obj_meta_release(d);
		return pg->err = -ENOMEM;
	}
	d->flags = (d->flags | OBJ_FROM_SCAN) & ~(uint32_t)OBJ_DELETED;
	pg->n++;
	return 0;
}

void scan_page_clear(struct page *pg)
{
	for (size_t i = 0; i < pg->n; i++)
		obj_meta_release(&pg->o[i]);
	pg->n = 0;
	pg->err = 0;
}

/* ---- HEAD and tag pool ------------------------------------------------- */

struct head_pool {
	struct scan_job *job;
	struct page *pg;
	bool do_head, do_tags, reuse_tags;
	unsigned head_wants;     /* of OBJ_HAS_META, OBJ_HAS_CTYPE */
	atomic_size_t next;
	atomic_int err;
	atomic_uint_fast64_t heads, tag_gets;
	bool *gone;              /* per object: it no longer exists */
};

/* HEAD one object: take everything HEAD knows, keep the listed identity
 * (and tags already taken from the index, unless HEAD knows better). */
static int head_one(struct head_pool *hp, struct obj_meta *o)
{
	struct obj_meta h;
	memset(&h, 0, sizeof h);
	int rc = s3_head(hp->job->s->s3, o->bucket, o->key, &h);
	atomic_fetch_add(&hp->heads, 1);
	if (rc < 0)
		return rc;
	free(h.bucket);
	free(h.key);
	h.bucket = o->bucket;
	h.key = o->key;
	o->bucket = o->key = NULL;
	if (!h.mtime_ns)
		h.mtime_ns = o->mtime_ns;
	if (!h.etag[0])
		memcpy(h.etag, o->etag, sizeof h.etag);
	h.flags = (h.flags | OBJ_FROM_SCAN) & ~(uint32_t)OBJ_DELETED;
	if (!(h.flags & OBJ_HAS_TAGS) && (o->flags & OBJ_HAS_TAGS)) {
		h.tags = o->tags;        /* taken from the index: keep them */
		h.n_tags = o->n_tags;
		h.flags |= OBJ_HAS_TAGS;
		o->tags = NULL;
		o->n_tags = 0;
	}
	obj_meta_release(o);
	*o = h;
	return 0;
}

/* What the index holds of this version of the object (same ETag, fetched
 * by an event or an earlier scan), out of `want`: the metadata group
 * (META and CTYPE as wanted, all of it or nothing) and TAGS, each taken
 * into o when present. At most one index read (none for a key the index
 * never stored). Returns the flags taken. */
static unsigned index_reuse(struct head_pool *hp, struct obj_meta *o, unsigned want)
{
	struct obj_meta r;
	if (!want || index_same_version(hp->job->s->ix, o, &r) < 0)
		return 0;
	unsigned taken = 0;
	unsigned mw = want & (OBJ_HAS_META | OBJ_HAS_CTYPE);
	if (mw && (r.flags & mw) == mw) {
		obj_kv_free(o->meta, o->n_meta);
		free(o->content_type);
		o->meta = r.meta;
		o->n_meta = r.n_meta;
		o->content_type = r.content_type;
		r.meta = NULL;
		r.n_meta = 0;
		r.content_type = NULL;
		taken |= r.flags & (OBJ_HAS_META | OBJ_HAS_CTYPE);
	}
	if ((want & OBJ_HAS_TAGS) && (r.flags & OBJ_HAS_TAGS)) {
		obj_kv_free(o->tags, o->n_tags);
		o->tags = r.tags;
		o->n_tags = r.n_tags;
		r.tags = NULL;
		r.n_tags = 0;
		taken |= OBJ_HAS_TAGS;
	}
	o->flags |= taken;
	obj_meta_release(&r);
	return taken;
}

static int tags_one(struct head_pool *hp, struct obj_meta *o)
{
	struct obj_kv *t = NULL;
	size_t n = 0;
	int rc = s3_get_tagging(hp->job->s->s3, o->bucket, o->key, &t, &n);
	atomic_fetch_add(&hp->tag_gets, 1);
	if (rc < 0)
		return rc;
	obj_kv_free(o->tags, o->n_tags);
	o->tags = t;             /* the object now owns them */
	o->n_tags = n;
	o->flags |= OBJ_HAS_TAGS;
	return 0;
}

static void *head_worker(void *arg)
{
	struct head_pool *hp = arg;
	for (;;) {
		size_t i = atomic_fetch_add(&hp->next, 1);
		if (i >= hp->pg->n || atomic_load(&hp->err) != 0)
			break;
		struct obj_meta *o = &hp->pg->o[i];
		/* Tags change without an event: a rescan reads them again. */
		unsigned taken = index_reuse(hp, o, (hp->do_head ? hp->head_wants : 0) |
					     (hp->do_tags && hp->reuse_tags ? OBJ_HAS_TAGS : 0));
		int rc = 0;
		if (hp->do_head && (taken & hp->head_wants) != hp->head_wants)
			rc = head_one(hp, o);
		if (rc == 0 && hp->do_tags && !(o->flags & OBJ_HAS_TAGS))
			rc = tags_one(hp, o);   /* HEAD and index did not tell them */
		if (rc == -ENOENT) {
			hp->gone[i] = true;
			continue;
		}
		if (rc < 0) {
			int zero = 0;
			atomic_compare_exchange_strong(&hp->err, &zero, rc);
			break;
		}
	}
	return NULL;
}

int scan_page_enrich(struct scan_job *job, struct page *pg, unsigned needs,
		     bool reuse_tags)
{
	struct head_pool hp = { .job = job, .pg = pg, .reuse_tags = reuse_tags };
	hp.head_wants = needs & (OBJ_HAS_META | OBJ_HAS_CTYPE);
	hp.do_head = hp.head_wants != 0;
	hp.do_tags = (needs & OBJ_HAS_TAGS) != 0;
	if (pg->n == 0 || (!hp.do_head && !hp.do_tags))
		return 0;
	atomic_init(&hp.next, 0);
	atomic_init(&hp.err, 0);
	atomic_init(&hp.heads, 0);
	atomic_init(&hp.tag_gets, 0);
	hp.gone = calloc(pg->n, sizeof *hp.gone);
	if (!hp.gone)
		return -ENOMEM;
	pthread_t th[SCAN_HEAD_THREADS];
	size_t nt = pg->n < SCAN_HEAD_THREADS ? pg->n : SCAN_HEAD_THREADS, started = 0;
	for (; started < nt; started++)
		if (pthread_create(&th[started], NULL, head_worker, &hp) != 0)
			break;
	if (started == 0)
		head_worker(&hp);
	for (size_t i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	int rc = atomic_load(&hp.err);
	mod_lock(&job->s->mu);
	job->info.heads += atomic_load(&hp.heads);
	job->info.tag_gets += atomic_load(&hp.tag_gets);
	mod_unlock(&job->s->mu);
	if (rc == 0) {   /* drop objects deleted since the listing */
		size_t w = 0;
		for (size_t i = 0; i < pg->n; i++) {
			if (hp.gone[i])
				obj_meta_release(&pg->o[i]);
			else
				pg->o[w++] = pg->o[i];
		}
		pg->n = w;
	}
	free(hp.gone);
	return rc;
}
