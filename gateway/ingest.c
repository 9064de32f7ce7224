/*
 * ingest.c — see ingest.h.
 *
 * DESIGN. Decoding runs ahead of applying (the consumer's two-stage
 * pipeline, events/consumer.h): ingest_prepare() posts a batch to a free
 * slot and wakes the decoder thread; ingest_apply() takes the batch's slot,
 * helps decode what is still unclaimed, waits for the rest, then counts
 * malformed records, enriches and applies in message order on the consumer
 * thread (per-key order and the offsets-in-the-same-WriteBatch rule are
 * index_apply's, unchanged). A batch apply() gets without prepare() (a
 * retry) is posted and finished the same way. Messages of a slot are read
 * only until its last message is decoded; apply()/forget() return after
 * that, so the consumer may destroy them then.
 *
 * Threads: the decoder thread and the consumer thread claim messages of a
 * slot with an atomic counter (each message decoded once, by either). Slot
 * state (msgs, n, seq, workers) changes under g->job_lock; a slot is reused
 * only when no decoder works on it (workers == 0). Everything else in
 * struct ingest is the consumer thread's. No global state.
 *
 * View sets: a batch pins the current set (views/viewset.h) for its
 * enrich and apply, with no lock held across the HEADs; the index applies
 * it only if that set is still the installed one (index_apply_for), else
 * the batch is enriched again for the new set (only the fields still
 * missing: at most the new views' needs) and applied then.
 */
#include "gateway/ingest.h"

#include "events/consumer.h"
#include "events/record.h"
#include "fuse/fs.h"
#include "common/log.h"
#include "common/stats.h"
#include "common/s3.h"
#include "views/filter.h"
#include "views/index.h"
#include "views/viewset.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Batches posted and not yet applied: the consumer keeps at most 2
 * prepared, plus one posted by apply() for a retry. */
#define INGEST_SLOTS 3

struct ingest_slot {
	const struct consumer_msg *msgs;  /* NULL: free */
	size_t n;
	uint64_t seq;                /* post order: the decoder takes the oldest */
	unsigned workers;            /* decoder threads inside the slot */
	atomic_size_t next;          /* next message to claim */
	atomic_size_t done;          /* messages decoded */
	struct ev_doc *docs;         /* per message; buffers reused */
	size_t docs_cap;
	int *rcs;                    /* record_decode result per message */
	size_t rcs_cap;
};

struct ingest {
	struct index *ix;
	struct s3 *s3;
	struct viewset_slot *views;  /* the current view set (gateway's) */
	struct stats *st;
	_Atomic(struct fs *) fs;

	/* Consumer thread only: buffers reused from batch to batch. */
	struct obj_meta *evs;
	size_t evs_cap;
	int64_t *ev_ts_ms;           /* Kafka timestamp per event */
	double *lat_ms;              /* visible latency per event */
	size_t ts_cap, lat_cap;
	struct index_pos *pos;
	size_t pos_cap;

	/* The decoder thread and the slots it decodes. */
	pthread_t helper;
	bool helper_running;
	pthread_mutex_t job_lock;    /* protects slot msgs/n/seq/workers, stop */
	pthread_cond_t job_cv;       /* a slot posted, or stop (decoder waits) */
	pthread_cond_t done_cv;      /* a slot fully decoded, or workers left */
	bool stop;
	uint64_t seq;
	struct ingest_slot slots[INGEST_SLOTS];
};

static int grow(void **arr, size_t *cap, size_t want, size_t elem)
{
	if (want <= *cap)
		return 0;
	size_t n = *cap ? *cap : 64;
	while (n < want)
		n *= 2;
	void *p = realloc(*arr, n * elem);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = n;
	return 0;
}

/* Claim and decode messages of s until none is left unclaimed; wakes the
 * waiters when this thread decoded the slot's last message. */
static void slot_decode(struct ingest *g, struct ingest_slot *s)
{
	for (;;) {
		size_t i = atomic_fetch_add(&s->next, 1);
		if (i >= s->n)
			return;
		memset(&s->docs[i], 0, sizeof s->docs[i]);
		s->rcs[i] = record_decode(s->msgs[i].payload, s->msgs[i].len, &s->docs[i]);
		if (atomic_fetch_add(&s->done, 1) + 1 == s->n) {
			pthread_mutex_lock(&g->job_lock);
			pthread_cond_broadcast(&g->done_cv);
			pthread_mutex_unlock(&g->job_lock);
		}
	}
}

/* The oldest posted slot with messages left to claim; job_lock held. */
static struct ingest_slot *slot_next_job(struct ingest *g)
{
	struct ingest_slot *best = NULL;
	for (size_t i = 0; i < INGEST_SLOTS; i++) {
		struct ingest_slot *s = &g->slots[i];
		if (s->msgs && atomic_load(&s->next) < s->n && (!best || s->seq < best->seq))
			best = s;
	}
	return best;
}

static void *helper_main(void *arg)
{
	struct ingest *g = arg;
	pthread_mutex_lock(&g->job_lock);
	for (;;) {
		struct ingest_slot *s = NULL;
		while (!g->stop && !(s = slot_next_job(g)))
			pthread_cond_wait(&g->job_cv, &g->job_lock);
		if (g->stop)
			break;
		s->workers++;
		pthread_mutex_unlock(&g->job_lock);
		slot_decode(g, s);
		pthread_mutex_lock(&g->job_lock);
		if (--s->workers == 0)
			pthread_cond_broadcast(&g->done_cv);
	}
	pthread_mutex_unlock(&g->job_lock);
	return NULL;
}

/* Post a batch for decoding (consumer thread). NULL when no slot is free or
 * memory is short: the caller then decodes on its own. */
static struct ingest_slot *slot_post(struct ingest *g, const struct consumer_msg *msgs,
				     size_t n)
{
	struct ingest_slot *s = NULL;
	pthread_mutex_lock(&g->job_lock);
	for (size_t i = 0; i < INGEST_SLOTS && !s; i++)
		if (!g->slots[i].msgs)
			s = &g->slots[i];
	while (s && s->workers)      /* a decoder still leaving its last batch */
		pthread_cond_wait(&g->done_cv, &g->job_lock);
	if (s && (grow((void **)&s->docs, &s->docs_cap, n, sizeof *s->docs) < 0 ||
		  grow((void **)&s->rcs, &s->rcs_cap, n, sizeof *s->rcs) < 0))
		s = NULL;
	if (s) {
		s->msgs = msgs;
		s->n = n;
		s->seq = ++g->seq;
		atomic_store(&s->next, 0);
		atomic_store(&s->done, 0);
		pthread_cond_signal(&g->job_cv);
	}
	pthread_mutex_unlock(&g->job_lock);
	return s;
}

/* The slot holding this batch, or NULL (consumer thread). */
static struct ingest_slot *slot_find(struct ingest *g, const struct consumer_msg *msgs,
				     size_t n)
{
	for (size_t i = 0; i < INGEST_SLOTS; i++)
		if (g->slots[i].msgs == msgs && g->slots[i].n == n)
			return &g->slots[i];
	return NULL;
}

/* Help decode s, then wait until every message is decoded: the messages
 * are not read any more afterwards (consumer thread). */
static void slot_finish(struct ingest *g, struct ingest_slot *s)
{
	slot_decode(g, s);
	pthread_mutex_lock(&g->job_lock);
	while (atomic_load(&s->done) < s->n)
		pthread_cond_wait(&g->done_cv, &g->job_lock);
	pthread_mutex_unlock(&g->job_lock);
}

/* Release the decoded records and free the slot (consumer thread, after
 * slot_finish). */
static void slot_free(struct ingest *g, struct ingest_slot *s)
{
	for (size_t i = 0; i < s->n; i++)
		ev_doc_release(&s->docs[i]);
	pthread_mutex_lock(&g->job_lock);
	s->msgs = NULL;              /* n stays: a decoder may still read it */
	pthread_mutex_unlock(&g->job_lock);
}

/* consumer_cb.prepare: start decoding a batch on the decoder thread. */
static void ingest_prepare(void *ctx, const struct consumer_msg *msgs, size_t n)
{
	struct ingest *g = ctx;
	if (g->helper_running && n)
		slot_post(g, msgs, n);
}

/* consumer_cb.forget: the batch will not be applied; returns once no
 * thread reads its messages. */
static void ingest_forget(void *ctx, const struct consumer_msg *msgs, size_t n)
{
	struct ingest *g = ctx;
	struct ingest_slot *s = slot_find(g, msgs, n);
	if (!s)
		return;
	slot_finish(g, s);
	slot_free(g, s);
}

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
	pthread_mutex_init(&g->job_lock, NULL);
	pthread_cond_init(&g->job_cv, NULL);
	pthread_cond_init(&g->done_cv, NULL);
	for (size_t i = 0; i < INGEST_SLOTS; i++) {
		atomic_init(&g->slots[i].next, 0);
		atomic_init(&g->slots[i].done, 0);
	}
	/* Without the helper, batches are decoded on the consumer thread when
	 * applied: slower, same result. */
	g->helper_running = pthread_create(&g->helper, NULL, helper_main, g) == 0;
	*out = g;
	return 0;
}

void ingest_free(struct ingest *g)
{
	if (!g)
		return;
	if (g->helper_running) {
		pthread_mutex_lock(&g->job_lock);
		g->stop = true;
		pthread_cond_broadcast(&g->job_cv);
		pthread_mutex_unlock(&g->job_lock);
		pthread_join(g->helper, NULL);
	}
	/* The consumer applied or forgot every batch it prepared (it is freed
	 * first); a slot still posted holds decoded records up to its claims. */
	for (size_t i = 0; i < INGEST_SLOTS; i++) {
		struct ingest_slot *s = &g->slots[i];
		size_t claimed = atomic_load(&s->next);
		for (size_t j = 0; s->msgs && j < s->n && j < claimed; j++)
			ev_doc_release(&s->docs[j]);
		free(s->docs);
		free(s->rcs);
	}
	pthread_mutex_destroy(&g->job_lock);
	pthread_cond_destroy(&g->job_cv);
	pthread_cond_destroy(&g->done_cv);
	free(g->evs);
	free(g->ev_ts_ms);
	free(g->lat_ms);
	free(g->pos);
	free(g);
}

void ingest_set_fs(struct ingest *g, struct fs *fs)
{
	if (g)
		atomic_store(&g->fs, fs);
}

void ingest_change_fn(void *ctx, const char *view, const char *path, int what)
{
	struct ingest *g = ctx;
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
	struct obj_meta r = { 0 };
	if (!o->etag[0] || index_object_get(g->ix, o->bucket, o->key, &r) < 0)
		return missing;
	/* Same version: same ETag and the same time to the second (a copy
	 * with new metadata keeps the ETag but not the time). */
	int64_t dt = r.mtime_ns - o->mtime_ns;
	if (!(r.flags & OBJ_DELETED) && strcmp(r.etag, o->etag) == 0 &&
	    dt < 1000000000 && dt > -1000000000) {
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

static void note_position(struct ingest *g, size_t *npos, const struct consumer_msg *m)
{
	for (size_t i = 0; i < *npos; i++)
		if (g->pos[i].partition == m->partition &&
		    strcmp(g->pos[i].topic, m->topic) == 0) {
			if (m->offset + 1 > g->pos[i].next_offset)
				g->pos[i].next_offset = m->offset + 1;
			return;
		}
	g->pos[*npos].topic = m->topic;
	g->pos[*npos].partition = m->partition;
	g->pos[*npos].next_offset = m->offset + 1;
	(*npos)++;
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Count and log what the decoder skipped, in message order, note each
 * message's offset (only for messages in this batch, all of which are
 * applied or skipped) and return the number of events. */
static size_t batch_scan(struct ingest *g, struct ingest_slot *s, size_t *npos)
{
	size_t nev = 0;
	*npos = 0;
	for (size_t i = 0; i < s->n; i++) {
		const struct consumer_msg *m = &s->msgs[i];
		struct ev_doc *d = &s->docs[i];
		if (s->rcs[i] < 0 || d->n_malformed) {
			stats_add(g->st, ev_malformed, d->n_malformed ? d->n_malformed : 1);
			log_warn("%s/%d offset %lld: malformed event skipped: %s",
				 m->topic, (int)m->partition, (long long)m->offset,
				 d->err[0] ? d->err : "not an S3 event");
		}
		if (d->n_ignored)
			stats_add(g->st, ev_ignored, d->n_ignored);
		nev += d->n;
		note_position(g, npos, m);
	}
	return nev;
}

static int events_reserve(struct ingest *g, size_t nev)
{
	size_t want = nev ? nev : 1;    /* each array knows its own size */
	if (grow((void **)&g->evs, &g->evs_cap, want, sizeof *g->evs) < 0 ||
	    grow((void **)&g->ev_ts_ms, &g->ts_cap, want, sizeof *g->ev_ts_ms) < 0 ||
	    grow((void **)&g->lat_ms, &g->lat_cap, want, sizeof *g->lat_ms) < 0)
		return -ENOMEM;
	return 0;
}

/* Visible now: latency from the event's time (or, when that is missing or
 * later, the Kafka timestamp) to this moment, one stats lock per batch. */
static void batch_latency(struct ingest *g, size_t nev)
{
	int64_t now = now_ms();
	size_t k = 0;
	for (size_t i = 0; i < nev; i++) {
		int64_t t = g->evs[i].mtime_ns ? g->evs[i].mtime_ns / 1000000 : g->ev_ts_ms[i];
		if (g->ev_ts_ms[i] > 0 && g->ev_ts_ms[i] < t)
			t = g->ev_ts_ms[i];
		if (t > 0)
			g->lat_ms[k++] = (double)(now - t);
	}
	stats_latency_add_batch(g->st, g->lat_ms, k);
}

/* Enrich and apply a decoded batch with its offsets in one index write. */
static int batch_apply(struct ingest *g, struct ingest_slot *s)
{
	if (grow((void **)&g->pos, &g->pos_cap, s->n, sizeof *g->pos) < 0)
		return -ENOMEM;
	size_t npos;
	size_t nev = batch_scan(g, s, &npos);
	if (events_reserve(g, nev) < 0)
		return -ENOMEM;
	int rc;
	do {
		/* Borrow the decoded records (shallow copies; docs keep
		 * ownership), enriched for the set pinned for this try. */
		struct viewset *vs = viewset_slot_pin(g->views);
		size_t k = 0;
		for (size_t i = 0; i < s->n; i++)
			for (size_t j = 0; j < s->docs[i].n; j++) {
				enrich(g, vs, &s->docs[i].ev[j]);
				g->evs[k] = s->docs[i].ev[j];
				g->ev_ts_ms[k] = s->msgs[i].timestamp_ms;
				k++;
			}
		rc = index_apply_for(g->ix, vs, g->evs, nev, g->pos, npos, ingest_change_fn, g);
		viewset_unpin(vs);
	} while (rc == -EAGAIN);     /* a view set came in between: again for it */
	if (rc < 0)
		return rc;
	batch_latency(g, nev);
	return 0;
}

static int ingest_apply(void *ctx, const struct consumer_msg *msgs, size_t n)
{
	struct ingest *g = ctx;
	/* Prepared: decoded (or being decoded) already; else a retry or no
	 * decoder: post it now and decode it here (with the decoder's help). */
	struct ingest_slot *s = slot_find(g, msgs, n);
	if (!s && !(s = slot_post(g, msgs, n)))
		return -ENOMEM;
	slot_finish(g, s);
	int rc = batch_apply(g, s);
	slot_free(g, s);
	return rc;
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
	out->prepare = ingest_prepare;
	out->forget = ingest_forget;
}
