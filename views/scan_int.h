/*
 * scan_int.h — the inside of the scanner, shared by scan.c (first scans),
 * scan_rescan.c (rescans, the periodic rescan thread) and scan_page.c
 * (listed pages). Not for other modules. Layers, each calling only those
 * below it:
 *   scan_rescan.c  rescans, the periodic rescan thread
 *   scan.c         the scanner's life, first scans, and what rescans use
 *                  of it: the job of a bucket, the backoff wait
 *   scan_page.c    a listed page: collected, cleared, enriched (HEADs and
 *                  tags by a pool of threads)
 * All call the index (index_int.h gives its layers) and the filters.
 *
 * Locks: s->mu guards the job list, each job's info, `rescans_active` and
 * the periodic-thread fields; s->cv is broadcast on every state change
 * (scan or rescan done, stop, interval change). Jobs are never freed before
 * scan_free, so job pointers stay valid. A job in SCAN_RUNNING owns its
 * first-scan thread; a job with info.rescanning is being rescanned by
 * exactly one thread. scan_free waits until rescans_active is 0.
 *
 * Tests: test_scan.c, test_rescan.c (through scan.h).
 */
#ifndef FACETFS_SCAN_INT_H
#define FACETFS_SCAN_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "common/stats.h"
#include "views/scan.h"

struct scan_job {
	struct scanner *s;
	char *bucket;
	unsigned needs;
	pthread_t thread;
	bool has_thread;
	struct scan_info info;   /* under s->mu */
};

/* The scanner's counters (common/stats.h, rows in scan.c): scans (first
 * or rescans) running now, first scans completed, objects listed. */
struct scan_counters {
	stats_counter running, completed, objects;
};

struct scanner {
	struct index *ix;
	struct s3 *s3;           /* borrowed */
	struct scan_counters ctr;
	struct stats_group grp;  /* ctr, registered with scan_new's st */
	index_change_fn fn;
	void *fnctx;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	atomic_bool stop;
	struct scan_job **jobs;
	size_t n_jobs;
	/* rescans (scan_rescan.c), under mu */
	int rescans_active;
	unsigned interval_s;
	pthread_t periodic;
	bool has_periodic;
};

/* One listed page (deep copies, bucket set, OBJ_FROM_SCAN). */
struct page {
	struct obj_meta *o;
	size_t n, cap;
	const char *bucket;
	int err;
};

/* scan_page.c */
/* s3_list_fn that appends to a struct page. */
int  scan_page_collect(void *ctx, const struct obj_meta *o);
void scan_page_clear(struct page *pg);
/* HEAD (needs META/CTYPE) and fetch tags (needs TAGS) of every object of
 * the page, once each, with a pool of SCAN_HEAD_THREADS threads, unless
 * the index holds them for the same version (tags only if reuse_tags: a
 * rescan reads them again, since tag changes send no event); objects
 * found gone are dropped from the page. Counts requests into the job's
 * info. 0 or the first failure (then the page is partly enriched). */
int  scan_page_enrich(struct scan_job *job, struct page *pg, unsigned needs,
		      bool reuse_tags);

/* scan.c */
/* The job of bucket, or NULL; s->mu held. */
struct scan_job *scan_job_find(struct scanner *s, const char *bucket);
/* Sleep up to ms unless stopped; true if stopped. */
bool scan_backoff(struct scanner *s, int ms);

#endif
