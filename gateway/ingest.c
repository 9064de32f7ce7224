/* ingest.c — see ingest.h. */
#include "gateway/ingest.h"

#include "events/consumer.h"
#include "events/record.h"
#include "fuse/fs.h"
#include "gateway/log.h"
#include "gateway/stats.h"
#include "sync/s3.h"
#include "views/filter.h"
#include "views/index.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct ingest {
	struct index *ix;
	struct s3 *s3;
	struct view *const *views;
	size_t n_views;
	struct stats *st;
	pthread_rwlock_t *views_lock;
	_Atomic(struct fs *) fs;

	/* Consumer thread only: buffers reused from batch to batch. */
	struct ev_doc *docs;
	size_t docs_cap;
	struct obj_meta *evs;
	size_t evs_cap;
	int64_t *ev_ts_ms;           /* Kafka timestamp per event */
	struct index_pos *pos;
	size_t pos_cap;
	int *rcs;                    /* record_decode result per message */
	size_t rcs_cap;

	/* What the views over a bucket read (view_needs), per bucket: filled
	 * on first use, emptied by ingest_set_views. Consumer thread only. */
	struct { char *bucket; unsigned needs; } needs[64];
	size_t n_needs;

	/* The decode helper: decodes the second half of a batch while the
	 * consumer thread decodes the first (decoding is most of the cost). */
	pthread_t helper;
	bool helper_running;
	pthread_mutex_t job_lock;    /* protects the job fields below */
	pthread_cond_t job_cv;
	bool job_posted, job_done, stop;
	const struct consumer_msg *job_msgs;
	size_t job_from, job_to;
};

/* Decode messages [from, to) into g->docs / g->rcs. */
static void decode_range(struct ingest *g, const struct consumer_msg *msgs,
			 size_t from, size_t to)
{
	for (size_t i = from; i < to; i++) {
		memset(&g->docs[i], 0, sizeof g->docs[i]);
		g->rcs[i] = record_decode(msgs[i].payload, msgs[i].len, &g->docs[i]);
	}
}

static void *helper_main(void *arg)
{
	struct ingest *g = arg;
	pthread_mutex_lock(&g->job_lock);
	for (;;) {
		while (!g->job_posted && !g->stop)
			pthread_cond_wait(&g->job_cv, &g->job_lock);
		if (g->stop)
			break;
		g->job_posted = false;
		pthread_mutex_unlock(&g->job_lock);
		decode_range(g, g->job_msgs, g->job_from, g->job_to);
		pthread_mutex_lock(&g->job_lock);
		g->job_done = true;
		pthread_cond_broadcast(&g->job_cv);
	}
	pthread_mutex_unlock(&g->job_lock);
	return NULL;
}

/* Decode a whole batch, on two threads when it is big enough. */
static void decode_batch(struct ingest *g, const struct consumer_msg *msgs, size_t n)
{
	if (!g->helper_running || n < 64) {
		decode_range(g, msgs, 0, n);
		return;
	}
	size_t half = n / 2;
	pthread_mutex_lock(&g->job_lock);
	g->job_msgs = msgs;
	g->job_from = half;
	g->job_to = n;
	g->job_done = false;
	g->job_posted = true;
	pthread_cond_broadcast(&g->job_cv);
	pthread_mutex_unlock(&g->job_lock);
	decode_range(g, msgs, 0, half);
	pthread_mutex_lock(&g->job_lock);
	while (!g->job_done)
		pthread_cond_wait(&g->job_cv, &g->job_lock);
	pthread_mutex_unlock(&g->job_lock);
}

int ingest_new(struct index *ix, struct s3 *s3, struct view *const *views,
	       size_t n_views, pthread_rwlock_t *views_lock, struct stats *st,
	       struct ingest **out)
{
	struct ingest *g = calloc(1, sizeof *g);
	if (!g)
		return -ENOMEM;
	g->ix = ix;
	g->s3 = s3;
	g->views = views;
	g->n_views = n_views;
	g->st = st;
	g->views_lock = views_lock;
	atomic_init(&g->fs, NULL);
	pthread_mutex_init(&g->job_lock, NULL);
	pthread_cond_init(&g->job_cv, NULL);
	/* Without the helper, batches are decoded on one thread: slower, same. */
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
	pthread_mutex_destroy(&g->job_lock);
	pthread_cond_destroy(&g->job_cv);
	for (size_t i = 0; i < g->n_needs; i++)
		free(g->needs[i].bucket);
	free(g->rcs);
	free(g->docs);
	free(g->evs);
	free(g->ev_ts_ms);
	free(g->pos);
	free(g);
}

void ingest_set_views(struct ingest *g, struct view *const *views, size_t n)
{
	g->views = views;
	g->n_views = n;
	for (size_t i = 0; i < g->n_needs; i++)
		free(g->needs[i].bucket);
	g->n_needs = 0;
}

void ingest_set_fs(struct ingest *g, struct fs *fs)
{
	if (g)
		atomic_store(&g->fs, fs);
}

void ingest_change_fn(void *ctx, size_t view, const char *path, int what)
{
	struct ingest *g = ctx;
	struct fs *fs = atomic_load(&g->fs);
	if (fs)
		fs_notify_change(fs, view, path, what);
}

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

/* What the views over this bucket read that the event does not carry. */
static unsigned bucket_needs(struct ingest *g, const char *bucket)
{
	for (size_t i = 0; i < g->n_needs; i++)
		if (strcmp(g->needs[i].bucket, bucket) == 0)
			return g->needs[i].needs;
	unsigned needs = 0;
	for (size_t i = 0; i < g->n_views; i++)
		if (view_uses_bucket(g->views[i], bucket))
			needs |= view_needs(g->views[i]);
	/* Remember it while there is room (a view set names few buckets). */
	char *copy = g->n_needs < 64 ? strdup(bucket) : NULL;
	if (copy) {
		g->needs[g->n_needs].bucket = copy;
		g->needs[g->n_needs].needs = needs;
		g->n_needs++;
	}
	return needs;
}

static unsigned missing_fields(struct ingest *g, const struct obj_meta *o)
{
	return bucket_needs(g, o->bucket) & ~o->flags & (OBJ_HAS_META | OBJ_HAS_CTYPE);
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
static void enrich(struct ingest *g, struct obj_meta *o)
{
	if (o->flags & OBJ_DELETED)
		return;
	unsigned missing = missing_fields(g, o);
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

static int apply_locked(struct ingest *g, const struct consumer_msg *msgs, size_t n);

static int ingest_apply(void *ctx, const struct consumer_msg *msgs, size_t n)
{
	struct ingest *g = ctx;
	pthread_rwlock_rdlock(g->views_lock);
	int rc = apply_locked(g, msgs, n);
	pthread_rwlock_unlock(g->views_lock);
	return rc;
}

static int apply_locked(struct ingest *g, const struct consumer_msg *msgs, size_t n)
{
	if (grow((void **)&g->docs, &g->docs_cap, n, sizeof *g->docs) < 0 ||
	    grow((void **)&g->rcs, &g->rcs_cap, n, sizeof *g->rcs) < 0 ||
	    grow((void **)&g->pos, &g->pos_cap, n, sizeof *g->pos) < 0)
		return -ENOMEM;

	/* Decode every message; count what is skipped, in order. */
	decode_batch(g, msgs, n);
	size_t nev = 0, npos = 0;
	for (size_t i = 0; i < n; i++) {
		struct ev_doc *d = &g->docs[i];
		int rc = g->rcs[i];
		if (rc < 0 || d->n_malformed) {
			stats_add(g->st, ev_malformed, d->n_malformed ? d->n_malformed : 1);
			log_warn("%s/%d offset %lld: malformed event skipped: %s",
				 msgs[i].topic, (int)msgs[i].partition,
				 (long long)msgs[i].offset, d->err[0] ? d->err : "not an S3 event");
		}
		if (d->n_ignored)
			stats_add(g->st, ev_ignored, d->n_ignored);
		nev += d->n;
		note_position(g, &npos, &msgs[i]);
	}
	int rc = 0;
	if (grow((void **)&g->evs, &g->evs_cap, nev ? nev : 1, sizeof *g->evs) < 0) {
		rc = -ENOMEM;
		goto out;
	}
	int64_t *ts = realloc(g->ev_ts_ms, (g->evs_cap) * sizeof *ts);
	if (!ts) {
		rc = -ENOMEM;
		goto out;
	}
	g->ev_ts_ms = ts;
	/* Borrow the decoded records (shallow copies; docs keep ownership). */
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < g->docs[i].n; j++) {
			enrich(g, &g->docs[i].ev[j]);
			g->evs[k] = g->docs[i].ev[j];
			g->ev_ts_ms[k] = msgs[i].timestamp_ms;
			k++;
		}

	rc = index_apply(g->ix, g->evs, nev, g->pos, npos, ingest_change_fn, g);
	if (rc >= 0) {
		/* Visible now: latency from the event's time (or, when that is
		 * missing, the Kafka timestamp) to this moment. */
		int64_t now = now_ms();
		for (size_t i = 0; i < nev; i++) {
			int64_t t = g->evs[i].mtime_ns ? g->evs[i].mtime_ns / 1000000
						       : g->ev_ts_ms[i];
			if (g->ev_ts_ms[i] > 0 && g->ev_ts_ms[i] < t)
				t = g->ev_ts_ms[i];
			if (t > 0)
				stats_latency_add(g->st, (double)(now - t));
		}
		rc = 0;
	}
out:
	for (size_t i = 0; i < n; i++)
		ev_doc_release(&g->docs[i]);
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
}
