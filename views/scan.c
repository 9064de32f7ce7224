/*
 * scan.c — see scan.h.
 *
 * DESIGN: one struct scan_job per bucket (never freed before scan_free, so
 * pointers stay valid); a job in SCAN_RUNNING owns one thread running
 * job_main(): list a page into a page buffer (deep copies), HEAD its
 * objects with a pool of short-lived threads if needed, then
 * index_scan_apply() the page together with the state after it. The
 * scanner's mutex guards the job list and each job's counters; `stop`
 * and the condition variable end backoff waits and wake scan_wait().
 * Rescans live in scan_rescan.c (scan_int.h holds what both share).
 */
#include "views/scan.h"
#include "views/scan_int.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/lock.h"
#include "common/array.h"
#include "common/log.h"

static int64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

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

/* ---- the scan thread -------------------------------------------------- */

bool scan_backoff(struct scanner *s, int ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	mod_lock(&s->mu);
	while (!atomic_load(&s->stop) &&
	       pthread_cond_timedwait(&s->cv, &s->mu, &ts) != ETIMEDOUT)
		;
	mod_unlock(&s->mu);
	return atomic_load(&s->stop);
}

/* Applying one listed page (HEADs where views need them, then one index
 * batch with the state after it), on its own thread while the next page
 * is listed. */
struct apply_task {
	struct scan_job *job;
	struct page *pg;
	struct index_scan_state next;
	int rc;
};

static void *apply_main(void *arg)
{
	struct apply_task *t = arg;
	struct scanner *s = t->job->s;
	pthread_setname_np(pthread_self(), "scan-apply");
	int rc = scan_page_enrich(t->job, t->pg, t->job->needs, true);
	if (rc == 0) {
		int k = index_scan_apply(s->ix, t->job->bucket, t->pg->o, t->pg->n, &t->next,
					 s->fn, s->fnctx);
		rc = k < 0 ? k : 0;
	}
	t->rc = rc;
	return NULL;
}

/* A failed page: note it, back off. True when the scanner is stopping. */
static bool page_failed(struct scan_job *job, int rc, int *fails)
{
	struct scanner *s = job->s;
	mod_lock(&s->mu);
	job->info.last_error = rc;
	mod_unlock(&s->mu);
	if ((*fails)++ == 0)
		log_warn("scan: bucket %s: page failed (%s); retrying", job->bucket,
			 strerror(-rc));
	int ms = 100 << (*fails < 9 ? *fails : 9);
	return scan_backoff(s, ms > 30000 ? 30000 : ms);
}

enum { TAKEN, RETRY, STOP };

/* The result of an applied page: on success the scan state moves past it;
 * on failure the listing restarts after the last applied page. */
static int take_result(struct scan_job *job, struct apply_task *t,
		       struct index_scan_state *cur, char *list_tok, int *fails)
{
	struct scanner *s = job->s;
	scan_page_clear(t->pg);
	if (t->rc < 0) {
		memcpy(list_tok, cur->token, sizeof cur->token);
		return page_failed(job, t->rc, fails) ? STOP : RETRY;
	}
	stats_add(&s->ctr.objects, t->next.objects - cur->objects);
	*cur = t->next;
	mod_lock(&s->mu);
	job->info.objects = cur->objects;
	job->info.pages++;
	job->info.last_error = 0;
	mod_unlock(&s->mu);
	*fails = 0;
	return TAKEN;
}

/* The listing, pipelined: page N+1 is listed while page N is applied.
 * Pages are applied one at a time and in order, each with the state after
 * it, so an interrupted scan resumes after the last applied page; after a
 * failure the listing restarts from there. */
static void *job_main(void *arg)
{
	struct scan_job *job = arg;
	struct scanner *s = job->s;
	struct page pgs[2] = { { .bucket = job->bucket }, { .bucket = job->bucket } };
	int li = 0;                  /* page being listed into */
	struct index_scan_state cur; /* after the last applied page */
	char list_tok[sizeof cur.token];
	struct apply_task task;
	pthread_t applier;
	bool running = false;
	int fails = 0;
	bool done = false;
	int64_t list_ns = 0, wait_ns = 0, t_start = mono_ns();

	pthread_setname_np(pthread_self(), "scan-list");
	stats_inc(&s->ctr.running);
	if (index_scan_state_get(s->ix, job->bucket, &cur) < 0)
		memset(&cur, 0, sizeof cur);
	memcpy(list_tok, cur.token, sizeof list_tok);
	log_info("scan: bucket %s: %s", job->bucket,
		 cur.token[0] ? "resuming the listing" : "listing");
	while (!atomic_load(&s->stop)) {
		struct page *lp = &pgs[li];
		char next_tok[sizeof cur.token] = "";
		bool truncated = false;
		int64_t tl0 = mono_ns();
		int lrc = s3_list_page(s->s3, job->bucket, NULL, list_tok, scan_page_collect,
				       lp, next_tok, sizeof next_tok, &truncated);
		if (lrc == 0 && lp->err)
			lrc = lp->err;
		int64_t tl1 = mono_ns();
		list_ns += tl1 - tl0;

		if (running) {       /* the previous page's apply */
			pthread_join(applier, NULL);
			wait_ns += mono_ns() - tl1;
			running = false;
			int r = take_result(job, &task, &cur, list_tok, &fails);
			if (r != TAKEN) {
				scan_page_clear(lp);
				if (r == STOP)
					break;
				continue;
			}
		}
		if (lrc < 0) {
			scan_page_clear(lp);
			memcpy(list_tok, cur.token, sizeof list_tok);
			if (page_failed(job, lrc, &fails))
				break;
			continue;
		}

		memset(&task, 0, sizeof task);
		task.job = job;
		task.pg = lp;
		task.next.done = !truncated;
		task.next.objects = cur.objects + lp->n;
		if (truncated)
			memcpy(task.next.token, next_tok, sizeof task.next.token);
		if (pthread_create(&applier, NULL, apply_main, &task) != 0)
			apply_main(&task);      /* no thread: apply here */
		else
			running = true;
		li ^= 1;
		memcpy(list_tok, next_tok, sizeof list_tok);
		if (!truncated || !running) {
			/* the last page, or one applied here: its result now */
			if (running)
				pthread_join(applier, NULL);
			running = false;
			int r = take_result(job, &task, &cur, list_tok, &fails);
			if (r == STOP)
				break;
			if (r == TAKEN && !truncated) {
				done = true;
				break;
			}
		}
	}
	if (running)
		pthread_join(applier, NULL);
	free(pgs[0].o);
	free(pgs[1].o);
	if (done) {
		stats_inc(&s->ctr.completed);
		log_info("scan: bucket %s: complete, %llu objects in %.2f s (listing %.2f s, "
			 "then waiting %.2f s for pages to be applied)", job->bucket,
			 (unsigned long long)cur.objects, (double)(mono_ns() - t_start) / 1e9,
			 (double)list_ns / 1e9, (double)wait_ns / 1e9);
	}
	stats_sub(&s->ctr.running, 1);
	mod_lock(&s->mu);
	job->info.state = done ? SCAN_DONE : SCAN_STOPPED;
	pthread_cond_broadcast(&s->cv);
	mod_unlock(&s->mu);
	return NULL;
}

/* ---- public ----------------------------------------------------------- */

static const struct stats_def scan_stats[] = {
	STATS_GAUGE(struct scan_counters, running, "scans", "running"),
	STATS_COUNTER(struct scan_counters, completed, "scans", "completed"),
	STATS_COUNTER(struct scan_counters, objects, "scans", "objects"),
};

int scan_new(struct index *ix, struct s3 *s3, struct stats *st,
	     index_change_fn fn, void *fnctx, struct scanner **out)
{
	*out = NULL;
	if (!s3)
		return -EINVAL;
	struct scanner *s = calloc(1, sizeof *s);
	if (!s)
		return -ENOMEM;
	s->ix = ix;
	s->s3 = s3;
	stats_group_add(st, &s->grp, scan_stats,
			sizeof scan_stats / sizeof scan_stats[0], &s->ctr);
	s->fn = fn;
	s->fnctx = fnctx;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	atomic_init(&s->stop, false);
	*out = s;
	return 0;
}

void scan_free(struct scanner *s)
{
	if (!s)
		return;
	mod_lock(&s->mu);
	atomic_store(&s->stop, true);
	pthread_cond_broadcast(&s->cv);
	mod_unlock(&s->mu);
	scan_rescan_stop(s);
	mod_lock(&s->mu);
	while (s->rescans_active > 0)   /* rescans on callers' threads end soon */
		pthread_cond_wait(&s->cv, &s->mu);
	mod_unlock(&s->mu);
	for (size_t i = 0; i < s->n_jobs; i++) {
		if (s->jobs[i]->has_thread)
			pthread_join(s->jobs[i]->thread, NULL);
		free(s->jobs[i]->bucket);
		free(s->jobs[i]);
	}
	free(s->jobs);
	stats_group_remove(&s->grp);
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

struct scan_job *scan_job_find(struct scanner *s, const char *bucket)
{
	for (size_t i = 0; i < s->n_jobs; i++)
		if (strcmp(s->jobs[i]->bucket, bucket) == 0)
			return s->jobs[i];
	return NULL;
}

int scan_start(struct scanner *s, const char *bucket, unsigned needs)
{
	if (!bucket || !*bucket || strlen(bucket) >= sizeof ((struct scan_info *)0)->bucket)
		return -EINVAL;
	struct index_scan_state ss;
	int rc = index_scan_state_get(s->ix, bucket, &ss);
	if (rc < 0 && rc != -ENOENT)
		return rc;
	mod_lock(&s->mu);
	rc = 0;
	struct scan_job *job = scan_job_find(s, bucket);
	if (job && (job->info.state == SCAN_RUNNING || job->info.state == SCAN_DONE))
		goto out;
	if (atomic_load(&s->stop)) {
		rc = -ECANCELED;
		goto out;
	}
	if (!job) {
		struct scan_job **g = realloc(s->jobs, (s->n_jobs + 1) * sizeof *g);
		job = calloc(1, sizeof *job);
		if (!g || !job || !(job->bucket = strdup(bucket))) {
			if (g)
				s->jobs = g;
			free(job);
			rc = -ENOMEM;
			goto out;
		}
		s->jobs = g;
		s->jobs[s->n_jobs++] = job;
		job->s = s;
		strcpy(job->info.bucket, bucket);
	}
	job->needs = needs;
	job->info.objects = ss.objects;
	if (ss.done) {
		job->info.state = SCAN_DONE;   /* never listed again */
		goto out;
	}
	if (job->has_thread) {   /* a stopped run: reap it first */
		pthread_join(job->thread, NULL);
		job->has_thread = false;
	}
	job->info.state = SCAN_RUNNING;
	rc = -pthread_create(&job->thread, NULL, job_main, job);
	if (rc < 0) {
		job->info.state = SCAN_STOPPED;
		log_error("scan: cannot start the scan of bucket %s: %s", bucket, strerror(-rc));
	} else {
		job->has_thread = true;
	}
out:
	mod_unlock(&s->mu);
	return rc;
}

int scan_start_views(struct scanner *s, struct view *const *views, size_t n)
{
	int first_err = 0;
	for (size_t i = 0; i < n; i++) {
		for (size_t b = 0; b < view_n_buckets(views[i]); b++) {
			const char *bucket = view_bucket(views[i], b);
			unsigned needs = 0;
			for (size_t j = 0; j < n; j++)
				if (view_uses_bucket(views[j], bucket))
					needs |= view_needs(views[j]);
			int rc = scan_start(s, bucket, needs);
			if (rc < 0 && !first_err)
				first_err = rc;
		}
	}
	return first_err;
}

int scan_wait(struct scanner *s, const char *bucket, int timeout_ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	if (timeout_ms >= 0) {
		ts.tv_sec += timeout_ms / 1000;
		ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
	}
	int rc;
	mod_lock(&s->mu);
	struct scan_job *job = scan_job_find(s, bucket);
	for (;;) {
		if (!job) {
			rc = -ENOENT;
			break;
		}
		if (job->info.state == SCAN_DONE) {
			rc = 0;
			break;
		}
		if (job->info.state == SCAN_STOPPED) {
			rc = -ECANCELED;
			break;
		}
		int w = timeout_ms < 0 ? pthread_cond_wait(&s->cv, &s->mu)
				       : pthread_cond_timedwait(&s->cv, &s->mu, &ts);
		if (w == ETIMEDOUT) {
			rc = -ETIMEDOUT;
			break;
		}
	}
	mod_unlock(&s->mu);
	return rc;
}

int scan_status(struct scanner *s, struct scan_info **out, size_t *n)
{
	mod_lock(&s->mu);
	struct scan_info *a = calloc(s->n_jobs ? s->n_jobs : 1, sizeof *a);
	if (!a) {
		mod_unlock(&s->mu);
		return -ENOMEM;
	}
	for (size_t i = 0; i < s->n_jobs; i++)
		a[i] = s->jobs[i]->info;
	*n = s->n_jobs;
	mod_unlock(&s->mu);
	*out = a;
	return 0;
}
