/*
 * scan.h — first listings of buckets into the index. The first time a view
 * references a bucket, a background thread lists it page by page
 * (ListObjectsV2, 1,000 keys a page) while an applier thread inserts the
 * pages listed so far, with the continuation token after the last of
 * them, in one index batch (index_scan_apply, whose keep rule makes events
 * that arrive during the scan neither lost nor undone). An interrupted scan resumes from the stored
 * token; a bucket whose scan completed is never listed again by scan_start.
 * When a view of the bucket needs metadata or the content type
 * (view_needs), every listed object is HEADed first, and when one needs
 * tags its tags are fetched (GetObjectTagging), by SCAN_HEAD_THREADS
 * threads: one HEAD and one tag request per object per scan, whatever the
 * number of views. A failing page is retried with backoff until it works
 * or the scanner is freed.
 * Rescans (scan_rescan, views/scan_rescan.c) list a scanned bucket again
 * and reconcile the index with it (rules: views/index_reconcile.h); they
 * run on the caller's thread or on the periodic rescan thread
 * (scan_set_rescan_interval), one at a time per bucket, never during the
 * bucket's first scan.
 *
 * S3: the S3 interface (common/s3.h): s3_list_page, s3_head and
 * s3_get_tagging, on a struct s3 the scanner borrows (unit tests give it
 * the in-memory store of sync/s3/s3_fake.h, wrapped in sync/s3/s3_fault.h to
 * fail). Threads: all functions may be called from any thread except
 * scan_free, which stops every scan and rescan and joins their threads.
 * Change callbacks run on scan and rescan threads (index.h says under which
 * lock).
 *
 * Tests: test_scan.c, test_rescan.c; t_scan.sh, t_rescan.sh, t_enrich.sh.
 */
#ifndef FACETFS_SCAN_H
#define FACETFS_SCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/object.h"
#include "common/s3.h"
#include "views/filter.h"
#include "views/index.h"

struct stats;

#define SCAN_HEAD_THREADS 8
/* Listed pages waiting for the applier, at most; the applier writes every
 * page waiting (up to SCAN_BATCH_OBJECTS objects) in one index batch. */
#define SCAN_QUEUE_PAGES 4
#define SCAN_BATCH_OBJECTS 4096

/* A bucket's first scan (0: not started); docs/design.md "Scans and
 * events" has the table of its transitions, done by scan.c's job_to. */
enum scan_state { SCAN_RUNNING = 1, SCAN_DONE, SCAN_STOPPED };

struct scan_info {
	char bucket[256];
	int state;              /* enum scan_state */
	uint64_t objects;       /* listed and inserted so far (all runs) */
	uint64_t pages;         /* pages inserted by this process */
	uint64_t heads;         /* HEAD requests made by this process */
	uint64_t tag_gets;      /* GetObjectTagging requests made by this process */
	int last_error;         /* last failure (0 if none); retried */
	bool rescanning;        /* a rescan of the bucket runs */
	uint64_t rescans;       /* rescans completed by this process */
};

struct scanner;

/* The scanner borrows ix and s3 (which must outlive it); st may be NULL.
 * 0, -EINVAL (no s3) or -ENOMEM. */
int  scan_new(struct index *ix, struct s3 *s3, struct stats *st,
	      index_change_fn fn, void *fnctx, struct scanner **out);
/* Stop every scan (they resume at the next start) and free. NULL: no-op. */
void scan_free(struct scanner *s);
/* Start scanning bucket unless its first scan completed (then 0 and nothing
 * is listed) or a scan of it runs. needs: OBJ_HAS_* fields to HEAD for. */
int  scan_start(struct scanner *s, const char *bucket, unsigned needs);
/* scan_start for every bucket of the views, with the needs of its views. */
int  scan_start_views(struct scanner *s, struct view *const *views, size_t n);
/* Wait until the bucket's scan is done: 0, -ETIMEDOUT, -ENOENT (never
 * started here), -ECANCELED (stopped). timeout_ms < 0 waits for ever. */
int  scan_wait(struct scanner *s, const char *bucket, int timeout_ms);
/* Per-bucket state; *out is malloc'ed (free it), *n entries. */
int  scan_status(struct scanner *s, struct scan_info **out, size_t *n);

/* Rescan (`facetfs rescan`): list bucket again (NULL: every bucket this
 * scanner started) and reconcile the index with the listing; blocks until
 * done. *report (malloc'ed, the caller frees it; may be NULL on -ENOMEM)
 * gets one line per bucket,
 *   "bucket B: listed N, added A, removed R, updated U, unchanged K,
 *    kept (newer events) E"
 * followed by "  added: KEY" / "  removed: KEY" / "  updated: KEY" lines
 * (at most SCAN_REPORT_NAMES per bucket, then "  ... and N more"), or
 * "bucket B: error: WHY". Returns 0 if every bucket was reconciled, else
 * the first error: -ENOENT (bucket never started here), -EBUSY (its first
 * scan or another rescan runs), -ECANCELED (scanner stopping), or the
 * listing's error after SCAN_RESCAN_TRIES attempts of a page. */
#define SCAN_REPORT_NAMES 100
#define SCAN_RESCAN_TRIES 5
int  scan_rescan(struct scanner *s, const char *bucket, char **report);
/* scan_rescan of every bucket of the view called name (NULL: of every
 * view) in views[0..n), each bucket once; -ENOENT (and a report saying so) if no view has
 * that name. */
int  scan_rescan_view(struct scanner *s, struct view *const *views, size_t n,
		      const char *name, char **report);
/* Rescan every completed bucket every interval_s seconds (0 stops it), on
 * one background thread; each report is logged at info level. */
int  scan_set_rescan_interval(struct scanner *s, unsigned interval_s);

#endif
