/*
 * scan_rescan.c — rescans of scanned buckets and the periodic rescan
 * thread (scan.h: scan_rescan, scan_rescan_view, scan_set_rescan_interval).
 *
 * DESIGN: rescan_claim() marks the bucket's job as rescanning (under s->mu;
 * refused while its first scan runs or another rescan of it does) and
 * counts the rescan in s->rescans_active, which scan_free waits for.
 * rescan_bucket() records T0 and lists the bucket page by page on the
 * caller's thread; each page is checked to be in key order, enriched
 * (HEAD and tags as the job's views need, once per object) and handed to
 * index_reconcile_page() with the key range it covers: (last key of the
 * previous page, last key of this page], the last page's range open-ended,
 * so every record of the bucket falls in exactly one range. A failing page
 * is retried SCAN_RESCAN_TRIES times with backoff; then the rescan stops
 * and reports why (what was fixed so far stays fixed: each page is one
 * batch). The report is built in a struct rbuf.
 */
#include "views/scan.h"
#include "views/scan_int.h"
#include "views/index_reconcile.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/lock.h"
#include "common/array.h"
#include "common/log.h"

/* ---- the report ------------------------------------------------------- */

struct rbuf {
	char *p;
	size_t len, cap;
	bool oom;
};

__attribute__((format(printf, 2, 3)))
static void rbuf_printf(struct rbuf *b, const char *fmt, ...)
{
	if (b->oom)
		return;
	for (;;) {
		va_list ap;
		va_start(ap, fmt);
		size_t room = b->cap - b->len;
		int k = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? room : 0, fmt, ap);
		va_end(ap);
		if (k < 0) {
			b->oom = true;
			return;
		}
		if (b->p && (size_t)k < room) {
			b->len += (size_t)k;
			return;
		}
		if (ARRAY_GROW(&b->p, &b->cap, b->len + (size_t)k + 1) < 0) {
			b->oom = true;
			return;
		}
	}
}

/* Hand the text over (NULL after a failed allocation). */
static char *rbuf_take(struct rbuf *b)
{
	if (b->oom || !b->p) {
		free(b->p);
		return b->oom ? NULL : strdup("");
	}
	return b->p;
}

/* ---- one bucket ------------------------------------------------------- */

struct rescan {
	struct scan_job *job;
	int64_t t0_ns;
	uint64_t listed;
	struct index_reconcile_counts c;
	struct rbuf names;          /* "  added: KEY\n" lines */
	size_t n_names;
	uint64_t more;              /* names left out */
};

static void rescan_note(void *ctx, int what, const char *key)
{
	struct rescan *r = ctx;
	static const char *const label[] = {
		[IXR_ADDED] = "added", [IXR_REMOVED] = "removed",
		[IXR_UPDATED] = "updated", [IXR_KEPT] = "kept (newer event)",
	};
	if (what < IXR_ADDED || what > IXR_KEPT)
		return;
	if (r->n_names >= SCAN_REPORT_NAMES) {
		r->more++;
		return;
	}
	rbuf_printf(&r->names, "  %s: %s\n", label[what], key);
	r->n_names++;
}

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The listing must be in byte order of keys and after the previous page. */
static int page_check_order(const struct page *pg, const char *last)
{
	const char *prev = last;
	for (size_t i = 0; i < pg->n; i++) {
		if (prev && strcmp(pg->o[i].key, prev) <= 0) {
			log_error("rescan: bucket %s: the listing is not in key order "
				  "(\"%s\" after \"%s\"); stopped", pg->bucket,
				  pg->o[i].key, prev);
			return -EPROTO;
		}
		prev = pg->o[i].key;
	}
	return 0;
}

/* List and reconcile one page; on success *upto_out is the page's last key
 * (malloc'ed; NULL for an empty page). */
static int rescan_page(struct scanner *s, struct rescan *r, struct page *pg,
		       unsigned needs, const char *token, const char *last,
		       char *next, size_t nlen, bool *truncated, char **upto_out)
{
	struct scan_job *job = r->job;
	char *upto = NULL;
	*upto_out = NULL;
	*truncated = false;
	next[0] = '\0';
	int rc = s3_list_page(s->s3, job->bucket, NULL, token, scan_page_collect, pg,
			      next, nlen, truncated);
	if (rc == 0 && pg->err)
		rc = pg->err;
	if (rc == 0)
		rc = page_check_order(pg, last);
	if (rc == 0 && pg->n && !(upto = strdup(pg->o[pg->n - 1].key)))
		rc = -ENOMEM;
	size_t listed = pg->n;
	if (rc == 0)
		rc = scan_page_enrich(job, pg, needs, false);
	if (rc == 0) {
		/* an empty page that is not the last covers nothing */
		const char *range_end = !*truncated ? NULL : upto ? upto : last ? last : "";
		rc = index_reconcile_page(s->ix, job->bucket, pg->o, pg->n, last, range_end,
					  r->t0_ns, &r->c, rescan_note, r, s->fn, s->fnctx);
	}
	scan_page_clear(pg);
	if (rc < 0) {
		free(upto);
		return rc;
	}
	r->listed += listed;
	stats_add(&s->ctr.objects, listed);
	*upto_out = upto;
	return 0;
}

static int rescan_bucket(struct scanner *s, struct scan_job *job, unsigned needs,
			 struct rbuf *out)
{
	struct rescan r = { .job = job, .t0_ns = now_ns() };
	struct page pg = { .bucket = job->bucket };
	char token[1024] = "", next[1024];
	char *last = NULL;
	int rc = 0, fails = 0;

	stats_inc(&s->ctr.running);
	log_info("rescan: bucket %s: listing", job->bucket);
	for (;;) {
		if (atomic_load(&s->stop)) {
			rc = -ECANCELED;
			break;
		}
		bool truncated;
		char *upto;
		rc = rescan_page(s, &r, &pg, needs, token, last, next, sizeof next,
				 &truncated, &upto);
		if (rc < 0) {
			if (rc == -EPROTO || rc == -ENOMEM || rc == -EOVERFLOW ||
			    ++fails >= SCAN_RESCAN_TRIES)
				break;
			log_warn("rescan: bucket %s: page failed (%s); retrying", job->bucket,
				 strerror(-rc));
			if (scan_backoff(s, 100 << fails)) {
				rc = -ECANCELED;
				break;
			}
			continue;
		}
		fails = 0;
		if (upto) {
			free(last);
			last = upto;
		}
		if (!truncated)
			break;
		snprintf(token, sizeof token, "%s", next);
	}
	free(pg.o);
	free(last);
	stats_sub(&s->ctr.running, 1);

	if (rc < 0)
		rbuf_printf(out, "bucket %s: error: %s after listing %llu (so far: added %llu, "
			    "removed %llu, updated %llu)\n", job->bucket, strerror(-rc),
			    (unsigned long long)r.listed, (unsigned long long)r.c.added,
			    (unsigned long long)r.c.removed, (unsigned long long)r.c.updated);
	else
		rbuf_printf(out, "bucket %s: listed %llu, added %llu, removed %llu, updated %llu, "
			    "unchanged %llu, kept (newer events) %llu\n", job->bucket,
			    (unsigned long long)r.listed, (unsigned long long)r.c.added,
			    (unsigned long long)r.c.removed, (unsigned long long)r.c.updated,
			    (unsigned long long)r.c.unchanged, (unsigned long long)r.c.kept);
	if (r.names.len)
		rbuf_printf(out, "%s", r.names.p);
	if (r.more)
		rbuf_printf(out, "  ... and %llu more\n", (unsigned long long)r.more);
	if (r.names.oom)
		out->oom = true;
	free(r.names.p);
	log_info("rescan: bucket %s: %s: listed %llu, added %llu, removed %llu, updated %llu, "
		 "kept %llu", job->bucket, rc < 0 ? strerror(-rc) : "done",
		 (unsigned long long)r.listed, (unsigned long long)r.c.added,
		 (unsigned long long)r.c.removed, (unsigned long long)r.c.updated,
		 (unsigned long long)r.c.kept);
	return rc;
}

/* Claim the bucket for a rescan (see DESIGN), run it, release it. */
static int rescan_one(struct scanner *s, const char *bucket, struct rbuf *out)
{
	mod_lock(&s->mu);
	struct scan_job *job = scan_job_find(s, bucket);
	const char *why = NULL;
	int rc = 0;
	if (atomic_load(&s->stop)) {
		why = "the gateway is stopping";
		rc = -ECANCELED;
	} else if (!job) {
		why = "never scanned by this gateway (no view uses it)";
		rc = -ENOENT;
	} else if (job->info.state == SCAN_RUNNING) {
		why = "its first scan is still running; rescan when it is done";
		rc = -EBUSY;
	} else if (job->info.state != SCAN_DONE) {
		why = "its first scan did not complete";
		rc = -EBUSY;
	} else if (job->info.rescanning) {
		why = "a rescan of it is already running";
		rc = -EBUSY;
	}
	if (rc < 0) {
		mod_unlock(&s->mu);
		rbuf_printf(out, "bucket %s: error: %s\n", bucket, why);
		return rc;
	}
	job->info.rescanning = true;
	s->rescans_active++;
	unsigned needs = job->needs;
	mod_unlock(&s->mu);

	rc = rescan_bucket(s, job, needs, out);

	mod_lock(&s->mu);
	job->info.rescanning = false;
	if (rc == 0)
		job->info.rescans++;
	else
		job->info.last_error = rc;
	s->rescans_active--;
	pthread_cond_broadcast(&s->cv);
	mod_unlock(&s->mu);
	return rc;
}

/* Copies of the names of the scanner's buckets (only completed ones if
 * done_only). */
static int bucket_names(struct scanner *s, bool done_only, char ***out, size_t *n)
{
	*out = NULL;
	*n = 0;
	mod_lock(&s->mu);
	char **a = calloc(s->n_jobs ? s->n_jobs : 1, sizeof *a);
	int rc = a ? 0 : -ENOMEM;
	for (size_t i = 0; rc == 0 && i < s->n_jobs; i++) {
		if (done_only && s->jobs[i]->info.state != SCAN_DONE)
			continue;
		if (!(a[*n] = strdup(s->jobs[i]->bucket)))
			rc = -ENOMEM;
		else
			(*n)++;
	}
	mod_unlock(&s->mu);
	if (rc < 0) {
		for (size_t i = 0; i < *n; i++)
			free(a[i]);
		free(a);
		*n = 0;
		return rc;
	}
	*out = a;
	return 0;
}

static int rescan_list(struct scanner *s, char **names, size_t n, struct rbuf *out)
{
	int first = 0;
	for (size_t i = 0; i < n; i++) {
		int rc = rescan_one(s, names[i], out);
		if (rc < 0 && !first)
			first = rc;
	}
	return first;
}

static void names_free(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

int scan_rescan(struct scanner *s, const char *bucket, char **report)
{
	struct rbuf out = { 0 };
	int rc;
	if (bucket) {
		rc = rescan_one(s, bucket, &out);
	} else {
		char **names;
		size_t n;
		rc = bucket_names(s, false, &names, &n);
		if (rc == 0 && n == 0)
			rbuf_printf(&out, "no bucket to rescan (no view)\n");
		if (rc == 0)
			rc = rescan_list(s, names, n, &out);
		names_free(names, n);
	}
	*report = rbuf_take(&out);
	return *report ? rc : (rc ? rc : -ENOMEM);
}

int scan_rescan_view(struct scanner *s, struct view *const *views, size_t n,
		     const char *name, char **report)
{
	char **names = calloc(1, sizeof *names);
	size_t nn = 0, cap = 1;
	bool found = name == NULL;
	int rc = names ? 0 : -ENOMEM;
	for (size_t i = 0; rc == 0 && i < n; i++) {
		if (name && strcmp(view_name(views[i]), name) != 0)
			continue;
		found = true;
		for (size_t b = 0; rc == 0 && b < view_n_buckets(views[i]); b++) {
			const char *bk = view_bucket(views[i], b);
			size_t j = 0;
			while (j < nn && strcmp(names[j], bk) != 0)
				j++;
			if (j < nn)
				continue;     /* listed once, whatever the number of views */
			if (ARRAY_GROW(&names, &cap, nn + 1) < 0) {
				rc = -ENOMEM;
				break;
			}
			if (!(names[nn] = strdup(bk)))
				rc = -ENOMEM;
			else
				nn++;
		}
	}
	struct rbuf out = { 0 };
	if (rc == 0 && !found) {
		rbuf_printf(&out, "error: no view named \"%s\"\n", name);
		rc = -ENOENT;
	} else if (rc == 0) {
		if (nn == 0)
			rbuf_printf(&out, "no bucket to rescan (no view)\n");
		rc = rescan_list(s, names, nn, &out);
	}
	names_free(names, nn);
	*report = rbuf_take(&out);
	return *report ? rc : (rc ? rc : -ENOMEM);
}

/* ---- the periodic rescan thread --------------------------------------- */

static void rescan_all_logged(struct scanner *s)
{
	char **names;
	size_t n;
	if (bucket_names(s, true, &names, &n) < 0)
		return;
	struct rbuf out = { 0 };
	rescan_list(s, names, n, &out);   /* rescan_bucket logs each result */
	names_free(names, n);
	free(out.p);
}

static void *periodic_main(void *arg)
{
	struct scanner *s = arg;
	mod_lock(&s->mu);
	while (!atomic_load(&s->stop)) {
		unsigned iv = s->interval_s;
		if (iv == 0) {
			pthread_cond_wait(&s->cv, &s->mu);
			continue;
		}
		struct timespec dl;
		clock_gettime(CLOCK_REALTIME, &dl);
		dl.tv_sec += iv;
		int w = 0;
		while (!atomic_load(&s->stop) && s->interval_s == iv && w != ETIMEDOUT)
			w = pthread_cond_timedwait(&s->cv, &s->mu, &dl);
		if (atomic_load(&s->stop) || s->interval_s != iv)
			continue;
		mod_unlock(&s->mu);
		rescan_all_logged(s);
		mod_lock(&s->mu);
	}
	mod_unlock(&s->mu);
	return NULL;
}

int scan_set_rescan_interval(struct scanner *s, unsigned interval_s)
{
	int rc = 0;
	mod_lock(&s->mu);
	s->interval_s = interval_s;
	if (interval_s && !s->has_periodic && !atomic_load(&s->stop)) {
		rc = -pthread_create(&s->periodic, NULL, periodic_main, s);
		if (rc == 0)
			s->has_periodic = true;
		else
			log_error("rescan: cannot start the periodic rescan thread: %s",
				  strerror(-rc));
	}
	pthread_cond_broadcast(&s->cv);
	mod_unlock(&s->mu);
	if (rc == 0 && interval_s)
		log_info("rescan: every %u s", interval_s);
	return rc;
}
