/*
 * scan.c — see scan.h.
 *
 * DESIGN: one struct scan_job per bucket (never freed before scan_free, so
 * pointers stay valid); a job in SCAN_RUNNING owns one thread running
 * job_main(), which lists pages (deep copies) into a bounded queue, and
 * an applier thread which HEADs their objects with a pool of short-lived
 * threads if needed (scan_page.c), then index_scan_apply()s every page
 * queued, in one
 * batch with the state after the last (struct pipe). The scanner's mutex
 * guards the job list and each job's counters; `stop` and the condition
 * variable end backoff waits and wake scan_wait().
 * Rescans live in scan_rescan.c, which calls this file (scan_int.h holds
 * what both share); scan_free() stops its periodic thread.
 */
#include "views/scan.h"
#include "views/scan_int.h"

#include <assert.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/lock.h"
#include "common/log.h"

static int64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The job's state goes to `to`, asserting the table allows it (docs/
 * design.md "Scans and events"); s->mu held. 0: never started. */
static void job_to(struct scan_job *job, enum scan_state to)
{
	static const unsigned allowed[] = {
		[0] = 1u << SCAN_RUNNING | 1u << SCAN_DONE,
		[SCAN_RUNNING] = 1u << SCAN_DONE | 1u << SCAN_STOPPED,
		[SCAN_DONE] = 0,
		[SCAN_STOPPED] = 1u << SCAN_RUNNING | 1u << SCAN_DONE,
	};
	assert(allowed[job->info.state] & 1u << to);
	job->info.state = to;
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

/* The listing and the applier, pipelined (one struct pipe per run of a
 * job): the scan thread lists pages into a queue of at most
 * SCAN_QUEUE_PAGES, the applier thread takes every page queued (up to
 * SCAN_BATCH_OBJECTS objects), HEADs what views need, and writes them in
 * one index batch with the state after the last of them. So the listing
 * never waits for an apply unless the queue is full, and the index
 * writes grow with the applier's backlog. Pages are applied in order, each
 * batch with the state after it, so an interrupted scan resumes after
 * the last batch applied; after a failed batch the queue is dropped and
 * the listing restarts from there.
 *
 * p->mu guards every field below it (a state lock: nothing is listed,
 * HEADed or written under it); p->cv is broadcast on every change. */
struct queued {
	struct page *pg;
	struct index_scan_state next;   /* the state after this page */
};

struct pipe {
	struct scan_job *job;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct queued q[SCAN_QUEUE_PAGES];
	size_t head, n;
	struct index_scan_state cur;    /* after the last batch applied */
	int err;                        /* a batch failed: the lister restarts */
	bool busy;                      /* the applier has a batch */
	bool stop;
	uint64_t batches;
};

static void page_free(struct page *pg)
{
	if (!pg)
		return;
	scan_page_clear(pg);
	free(pg->o);
	free(pg);
}

/* Drop every queued page (p->mu held). */
static void queue_drop(struct pipe *p)
{
	for (; p->n; p->n--, p->head = (p->head + 1) % SCAN_QUEUE_PAGES)
		page_free(p->q[p->head].pg);
}

/* Enrich and write one batch of pages (no lock held). */
static int batch_apply(struct scan_job *job, struct queued *b, size_t k)
{
	struct scanner *s = job->s;
	size_t total = 0;
	int rc = 0;
	for (size_t i = 0; i < k && rc == 0; i++) {
		rc = scan_page_enrich(job, b[i].pg, job->needs, true);
		total += b[i].pg->n;
	}
	if (rc < 0)
		return rc;
	struct obj_meta *objs = b[0].pg->o, *merged = NULL;
	if (k > 1) {
		if (!(merged = malloc((total ? total : 1) * sizeof *merged)))
			return -ENOMEM;
		size_t at = 0;
		for (size_t i = 0; i < k; i++) {
			memcpy(merged + at, b[i].pg->o, b[i].pg->n * sizeof *merged);
			at += b[i].pg->n;
		}
		objs = merged;           /* a view of the pages' records */
	}
	int kept = index_scan_apply(s->ix, job->bucket, objs, total, &b[k - 1].next, s->fn,
				    s->fnctx);
	free(merged);
	return kept < 0 ? kept : 0;
}

static void *applier_main(void *arg)
{
	struct pipe *p = arg;
	struct scan_job *job = p->job;
	struct scanner *s = job->s;
	pthread_setname_np(pthread_self(), "scan-apply");
	struct queued b[SCAN_QUEUE_PAGES];
	mod_lock(&p->mu);
	for (;;) {
		while (!p->stop && (p->n == 0 || p->err))
			pthread_cond_wait(&p->cv, &p->mu);
		if (p->stop)
			break;
		size_t k = 0, objs = 0;
		while (p->n && (k == 0 || objs + p->q[p->head].pg->n <= SCAN_BATCH_OBJECTS)) {
			b[k] = p->q[p->head];
			objs += b[k++].pg->n;
			p->head = (p->head + 1) % SCAN_QUEUE_PAGES;
			p->n--;
		}
		p->busy = true;
		uint64_t before = p->cur.objects;
		pthread_cond_broadcast(&p->cv);     /* room in the queue */
		mod_unlock(&p->mu);

		int rc = batch_apply(job, b, k);
		if (rc == 0) {
			stats_add(&s->ctr.objects, b[k - 1].next.objects - before);
			mod_lock(&s->mu);
			job->info.objects = b[k - 1].next.objects;
			job->info.pages += k;
			job->info.last_error = 0;
			mod_unlock(&s->mu);
		}
		for (size_t i = 0; i < k; i++)
			page_free(b[i].pg);

		mod_lock(&p->mu);
		p->busy = false;
		if (rc == 0) {
			p->cur = b[k - 1].next;
			p->batches++;
		} else {
			p->err = rc;
		}
		pthread_cond_broadcast(&p->cv);
	}
	mod_unlock(&p->mu);
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

/* Wait on p->cv for at most 100 ms (p->mu held): the scanner's stop is
 * seen soon, whatever the applier does. */
static void pipe_wait(struct pipe *p)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += 100000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_cond_timedwait(&p->cv, &p->mu, &ts);
}

/* The scan thread: list pages into the pipe until the applier has written
 * the last one, restarting after the last batch applied when one fails. */
static void *job_main(void *arg)
{
	struct scan_job *job = arg;
	struct scanner *s = job->s;
	struct pipe p = { .job = job };
	pthread_mutex_init(&p.mu, NULL);
	pthread_cond_init(&p.cv, NULL);
	struct index_scan_state listed;  /* after the last page listed */
	char next_tok[sizeof listed.token];
	int fails = 0;
	bool done = false, all_listed = false;
	int64_t list_ns = 0, wait_ns = 0, t_start = mono_ns();

	pthread_setname_np(pthread_self(), "scan-list");
	stats_inc(&s->ctr.running);
	if (index_scan_state_get(s->ix, job->bucket, &p.cur) < 0)
		memset(&p.cur, 0, sizeof p.cur);
	listed = p.cur;
	uint64_t applied_seen = p.cur.objects;
	log_info("scan: bucket %s: %s", job->bucket,
		 p.cur.token[0] ? "resuming the listing" : "listing");
	pthread_t applier;
	bool has_applier = pthread_create(&applier, NULL, applier_main, &p) == 0;
	if (!has_applier)
		log_error("scan: bucket %s: no applier thread; retrying", job->bucket);
	while (!atomic_load(&s->stop)) {
		if (!has_applier) {
			if (scan_backoff(s, 1000))
				break;
			has_applier = pthread_create(&applier, NULL, applier_main, &p) == 0;
			continue;
		}
		mod_lock(&p.mu);
		int aerr = p.err;
		if (aerr) {              /* restart after the last batch applied */
			queue_drop(&p);
			p.err = 0;
			listed = p.cur;
			all_listed = false;
		}
		bool finished = p.cur.done;
		if (p.cur.objects != applied_seen) {
			applied_seen = p.cur.objects;
			fails = 0;
		}
		if (!aerr && !finished && all_listed) {
			int64_t w0 = mono_ns();
			pipe_wait(&p);   /* the applier has the rest */
			wait_ns += mono_ns() - w0;
		}
		mod_unlock(&p.mu);
		if (aerr) {
			if (page_failed(job, aerr, &fails))
				break;
			continue;
		}
		if (finished) {
			done = true;
			break;
		}
		if (all_listed)
			continue;

		struct page *pg = calloc(1, sizeof *pg);
		bool truncated = false;
		int64_t tl0 = mono_ns();
		if (pg)
			pg->bucket = job->bucket;
		int lrc = pg ? s3_list_page(s->s3, job->bucket, NULL, listed.token,
					    scan_page_collect, pg, next_tok, sizeof next_tok,
					    &truncated)
			     : -ENOMEM;
		if (lrc == 0 && pg->err)
			lrc = pg->err;
		list_ns += mono_ns() - tl0;
		if (lrc < 0) {
			page_free(pg);
			if (page_failed(job, lrc, &fails))
				break;
			continue;
		}
		struct queued qd = { .pg = pg };
		qd.next.done = !truncated;
		qd.next.objects = listed.objects + pg->n;
		if (truncated)
			memcpy(qd.next.token, next_tok, sizeof qd.next.token);

		int64_t w0 = mono_ns();
		mod_lock(&p.mu);
		while (p.n == SCAN_QUEUE_PAGES && !p.err && !atomic_load(&s->stop))
			pipe_wait(&p);
		bool queued = p.n < SCAN_QUEUE_PAGES && !p.err;
		if (queued) {
			p.q[(p.head + p.n) % SCAN_QUEUE_PAGES] = qd;
			p.n++;
			pthread_cond_broadcast(&p.cv);
		}
		mod_unlock(&p.mu);
		wait_ns += mono_ns() - w0;
		if (!queued) {           /* a failure or a stop: seen above */
			page_free(pg);
			continue;
		}
		listed = qd.next;
		all_listed = !truncated;
	}
	if (has_applier) {
		mod_lock(&p.mu);
		p.stop = true;
		pthread_cond_broadcast(&p.cv);
		mod_unlock(&p.mu);
		pthread_join(applier, NULL);
	}
	queue_drop(&p);
	if (done) {
		stats_inc(&s->ctr.completed);
		log_info("scan: bucket %s: complete, %llu objects in %.2f s (listing %.2f s, "
			 "then waiting %.2f s for pages to be applied; %llu index writes)",
			 job->bucket, (unsigned long long)p.cur.objects,
			 (double)(mono_ns() - t_start) / 1e9, (double)list_ns / 1e9,
			 (double)wait_ns / 1e9, (unsigned long long)p.batches);
	}
	pthread_cond_destroy(&p.cv);
	pthread_mutex_destroy(&p.mu);
	stats_sub(&s->ctr.running, 1);
	mod_lock(&s->mu);
	job_to(job, done ? SCAN_DONE : SCAN_STOPPED);
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

/* Stop and join the periodic rescan thread (scan_rescan.c starts it),
 * with mu not held. */
static void scan_rescan_stop(struct scanner *s)
{
	mod_lock(&s->mu);
	bool join = s->has_periodic;
	s->has_periodic = false;
	pthread_cond_broadcast(&s->cv);
	mod_unlock(&s->mu);
	if (join)
		pthread_join(s->periodic, NULL);
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
		job_to(job, SCAN_DONE);        /* never listed again */
		goto out;
	}
	if (job->has_thread) {   /* a stopped run: reap it first */
		pthread_join(job->thread, NULL);
		job->has_thread = false;
	}
	job_to(job, SCAN_RUNNING);
	rc = -pthread_create(&job->thread, NULL, job_main, job);
	if (rc < 0) {
		job_to(job, SCAN_STOPPED);
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
