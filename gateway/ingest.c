/*
 * ingest.c — see ingest.h.
 *
 * DESIGN. The consumer hands over a decoded batch (events/decoder.h:
 * records in message order, their Kafka timestamps, each partition's next
 * offset). ingest_batch_apply() enriches each record in place (the batch
 * owns what enrich stores), applies the records with the offsets in one
 * index_apply (per-key order and the offsets-in-the-same-WriteBatch rule
 * are index_apply's), whose change callback notifies the mount, then
 * records the latencies. A failed index write changes nothing, so the
 * consumer's retry with the same batch is safe (records already enriched
 * are not fetched again).
 *
 * Threads: everything in struct ingest but fs is the consumer thread's.
 * No global state.
 *
 * View sets: a batch pins the current set (views/viewset.h) for its
 * enrich and apply, with no lock held across the HEADs; the index applies
 * it only if that set is still the installed one (index_apply_for), else
 * the batch is enriched again for the new set (only the fields still
 * missing: at most the new views' needs) and applied then.
 */
#include "gateway/ingest.h"

#include "events/consumer.h"
#include "events/decoder.h"
#include "fuse/fs.h"
#include "common/array.h"
#include "common/lock.h"
#include "common/log.h"
#include "common/stats.h"
#include "common/trace.h"
#include "common/s3.h"
#include "views/filter.h"
#include "views/index.h"
#include "sync/stage/probe.h"
#include "views/viewset.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Ingest's counter (common/stats.h): events produced before this
 * consumer was assigned their partition, left out of the event-to-visible
 * latency (their wait includes the time no gateway was reading). */
struct ingest_counters {
	stats_counter backlog;
};

static const struct stats_def ingest_stats[] = {
	STATS_COUNTER(struct ingest_counters, backlog, "events", "backlog"),
};

struct ingest {
	struct index *ix;
	struct s3 *s3;
	struct viewset_slot *views;  /* the current view set (gateway's) */
	struct stats *st;
	struct ingest_counters ctr;
	struct stats_group grp;      /* ctr, registered with st */
	_Atomic(struct fs *) fs;
	_Atomic(struct trace *) tr;  /* records applied changes while on */

	/* The probes a barrier awaits (ingest_probe_*), under probe_lock;
	 * n_probes lets a batch skip the lock when none is. */
	pthread_mutex_t probe_lock;
	pthread_cond_t probe_cond;
	atomic_int n_probes;
	struct ingest_probe {
		bool used, seen;
		char bucket[256], key[256];
	} probes[INGEST_PROBES];

	/* Consumer thread only: buffers reused from batch to batch. */
	double *lat_ms;              /* visible latency per event */
	size_t lat_cap;
	struct index_pos *pos;
	size_t pos_cap;
};

int ingest_new(struct index *ix, struct s3 *s3, struct viewset_slot *views,
	       struct stats *st, struct ingest **out)
{
	struct ingest *g = calloc(1, sizeof *g);
	if (!g)
		return -ENOMEM;
	g->ix = ix;
	g->s3 = s3;
	g->views = views;
	g->st = st;
	atomic_init(&g->fs, NULL);
	atomic_init(&g->tr, NULL);
	atomic_init(&g->n_probes, 0);
	pthread_mutex_init(&g->probe_lock, NULL);
	pthread_cond_init(&g->probe_cond, NULL);
	stats_group_add(st, &g->grp, ingest_stats,
			sizeof ingest_stats / sizeof ingest_stats[0], &g->ctr);
	*out = g;
	return 0;
}

void ingest_free(struct ingest *g)
{
	if (!g)
		return;
	stats_group_remove(&g->grp);
	pthread_mutex_destroy(&g->probe_lock);
	pthread_cond_destroy(&g->probe_cond);
	free(g->lat_ms);
	free(g->pos);
	free(g);
}

void ingest_set_fs(struct ingest *g, struct fs *fs)
{
	if (g)
		atomic_store(&g->fs, fs);
}

void ingest_set_trace(struct ingest *g, struct trace *tr)
{
	if (g)
		atomic_store(&g->tr, tr);
}

void ingest_change_fn(void *ctx, const char *view, const char *path, int what)
{
	struct ingest *g = ctx;
	struct trace *tr = atomic_load_explicit(&g->tr, memory_order_relaxed);
	if (trace_on(tr))
		trace_record(tr, TRACE_EVENT, 0, 0, 0, 0, what, view, path, NULL);
	struct fs *fs = atomic_load(&g->fs);
	if (fs)
		fs_notify_change(fs, view, path, what);
}

/* What the views over the event's bucket read and the event does not
 * carry (per bucket, built with the set: viewset_bucket_needs). */
static unsigned missing_fields(const struct viewset *vs, const struct obj_meta *o)
{
	return viewset_bucket_needs(vs, o->bucket) & ~o->flags & (OBJ_HAS_META | OBJ_HAS_CTYPE);
}

/* Take what the event lacks from the stored record of the same version: a
 * scan or an earlier event already fetched it. */
static unsigned from_index(struct ingest *g, struct obj_meta *o, unsigned missing)
{
	struct obj_meta r;
	if (index_same_version(g->ix, o, &r) < 0)
		return missing;
	if ((missing & OBJ_HAS_META) && (r.flags & OBJ_HAS_META)) {
		o->meta = r.meta;
		o->n_meta = r.n_meta;
		r.meta = NULL;
		r.n_meta = 0;
		o->flags |= OBJ_HAS_META;
		missing &= ~OBJ_HAS_META;
	}
	if ((missing & OBJ_HAS_CTYPE) && (r.flags & OBJ_HAS_CTYPE)) {
		o->content_type = r.content_type;
		r.content_type = NULL;
		o->flags |= OBJ_HAS_CTYPE;
		missing &= ~OBJ_HAS_CTYPE;
	}
	obj_meta_release(&r);
	return missing;
}

/* One HEAD fills in metadata and content type (AWS events have neither;
 * RGW events no content type), once per object version: what the index
 * already holds for the same ETag is reused. A failed HEAD leaves the event
 * as it is: views that need the field then do not match it. */
static void enrich(struct ingest *g, const struct viewset *vs, struct obj_meta *o)
{
	if (o->flags & OBJ_DELETED)
		return;
	unsigned missing = missing_fields(vs, o);
	if (!missing || !(missing = from_index(g, o, missing)))
		return;
	struct obj_meta h = { 0 };
	int rc = s3_head(g->s3, o->bucket, o->key, &h);
	if (rc < 0) {
		if (rc != -ENOENT)
			log_warn("HEAD %s/%s for its metadata: %s", o->bucket, o->key,
				 strerror(-rc));
		return;
	}
	if (!(o->flags & OBJ_HAS_META) && (h.flags & OBJ_HAS_META)) {
		o->meta = h.meta;
		o->n_meta = h.n_meta;
		h.meta = NULL;
		h.n_meta = 0;
		o->flags |= OBJ_HAS_META;
	}
	if (!(o->flags & OBJ_HAS_CTYPE) && h.content_type) {
		o->content_type = h.content_type;
		h.content_type = NULL;
		o->flags |= OBJ_HAS_CTYPE;
	}
	obj_meta_release(&h);
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Visible now: latency from the event's time (or, when that is missing or
 * later, the Kafka timestamp) to this moment, one stats lock per batch.
 * An event from before its partition was assigned to this consumer (a
 * backlog read at start-up or after a rebalance) is counted as backlog
 * instead: its age is not a latency of this gateway. */
static void batch_latency(struct ingest *g, const struct ev_batch *b)
{
	int64_t now = now_ms();
	size_t k = 0, backlog = 0;
	for (size_t i = 0; i < b->n_ev; i++) {
		int64_t t = b->ev[i].mtime_ns ? b->ev[i].mtime_ns / 1000000 : b->ts_ms[i];
		if (b->ts_ms[i] > 0 && b->ts_ms[i] < t)
			t = b->ts_ms[i];
		if (t <= 0)
			continue;
		if (b->since_ms && b->since_ms[i] > t)
			backlog++;
		else
			g->lat_ms[k++] = (double)(now - t);
	}
	stats_latency_add_batch(g->st, g->lat_ms, k);
	if (backlog)
		stats_add(&g->ctr.backlog, backlog);
}

/* Enrich and apply a decoded batch with its offsets in one index write. */
static int batch_apply(struct ingest *g, struct ev_batch *b)
{
	if (ARRAY_GROW(&g->pos, &g->pos_cap, b->n_pos) < 0 ||
	    ARRAY_GROW(&g->lat_ms, &g->lat_cap, b->n_ev) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < b->n_pos; i++)
		g->pos[i] = (struct index_pos){ b->pos[i].topic, b->pos[i].partition,
						b->pos[i].next };
	int rc;
	do {
		/* Enriched for the set pinned for this try (only the fields
		 * still missing are fetched again after a set change). */
		struct viewset *vs = viewset_slot_pin(g->views);
		for (size_t i = 0; i < b->n_ev; i++)
			enrich(g, vs, &b->ev[i]);
		rc = index_apply_for(g->ix, vs, b->ev, b->n_ev, g->pos, b->n_pos,
				     ingest_change_fn, g);
		viewset_unpin(vs);
	} while (rc == -EAGAIN);     /* a view set came in between: again for it */
	if (rc < 0)
		return rc;
	batch_latency(g, b);
	return 0;
}

/* The awaited probes among b's records: seen. */
static void probes_seen(struct ingest *g, const struct ev_batch *b)
{
	mod_lock(&g->probe_lock);
	for (size_t i = 0; i < b->n_ev; i++) {
		const struct obj_meta *o = &b->ev[i];
		if (!o->key || strncmp(o->key, PROBE_PREFIX, strlen(PROBE_PREFIX)) != 0)
			continue;
		for (int p = 0; p < INGEST_PROBES; p++)
			if (g->probes[p].used && !strcmp(g->probes[p].key, o->key) &&
			    o->bucket && !strcmp(g->probes[p].bucket, o->bucket))
				g->probes[p].seen = true;
	}
	pthread_cond_broadcast(&g->probe_cond);
	mod_unlock(&g->probe_lock);
}

int ingest_batch_apply(struct ingest *g, struct ev_batch *b)
{
	int rc = batch_apply(g, b);
	if (rc == 0 && atomic_load(&g->n_probes) > 0)
		probes_seen(g, b);
	return rc;
}

int ingest_probe_expect(struct ingest *g, const char *bucket, const char *key, int *slot)
{
	if (strlen(bucket) >= sizeof g->probes[0].bucket ||
	    strlen(key) >= sizeof g->probes[0].key)
		return -ENAMETOOLONG;
	int rc = -EBUSY;
	mod_lock(&g->probe_lock);
	for (int p = 0; p < INGEST_PROBES && rc; p++) {
		struct ingest_probe *pr = &g->probes[p];
		if (pr->used)
			continue;
		pr->used = true;
		pr->seen = false;
		snprintf(pr->bucket, sizeof pr->bucket, "%s", bucket);
		snprintf(pr->key, sizeof pr->key, "%s", key);
		atomic_fetch_add(&g->n_probes, 1);
		*slot = p;
		rc = 0;
	}
	mod_unlock(&g->probe_lock);
	return rc;
}

int ingest_probe_wait(struct ingest *g, int slot, int timeout_ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	int64_t ns = ts.tv_nsec + (int64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000LL;
	ts.tv_sec += ns / 1000000000LL;
	ts.tv_nsec = ns % 1000000000LL;
	struct ingest_probe *pr = &g->probes[slot];
	mod_lock(&g->probe_lock);
	int w = 0;
	while (!pr->seen && w == 0)
		w = pthread_cond_timedwait(&g->probe_cond, &g->probe_lock, &ts);
	bool seen = pr->seen;
	pr->used = false;
	atomic_fetch_sub(&g->n_probes, 1);
	mod_unlock(&g->probe_lock);
	return seen ? 0 : -ETIMEDOUT;
}

/* consumer_cb.apply */
static int ingest_apply(void *ctx, struct ev_batch *b)
{
	return ingest_batch_apply(ctx, b);
}

static int ingest_stored_offset(void *ctx, const char *topic, int32_t partition,
				int64_t *next)
{
	struct ingest *g = ctx;
	return index_offset_get(g->ix, topic, partition, next);
}

void ingest_callbacks(struct ingest *g, struct consumer_cb *out)
{
	memset(out, 0, sizeof *out);
	out->ctx = g;
	out->apply = ingest_apply;
	out->stored_offset = ingest_stored_offset;
}
