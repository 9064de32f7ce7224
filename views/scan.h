/*
 * scan.h — first listings of buckets into the index. The first time a view
 * references a bucket, a background thread lists it page by page
 * (ListObjectsV2, 1,000 keys a page) and inserts each page, with the
 * continuation token of the next page, in one index batch
 * (index_scan_apply, whose keep rule makes events that arrive during the
 * scan neither lost nor undone). An interrupted scan resumes from the stored
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
 * Seam: struct scan_source (sync/s3.h's s3_list_page/s3_head fit it; tests
 * use fakes). Threads: all functions may be called from any thread except
 * scan_free, which stops every scan and rescan and joins their threads.
 * Change callbacks run on scan and rescan threads (index.h says under which
 * lock).
 */
#ifndef FACETFS_SCAN_H
#define FACETFS_SCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/object.h"
#include "views/filter.h"
#include "views/index.h"

struct stats;

#define SCAN_HEAD_THREADS 8

/* Called per listed object (key, size, mtime_ns, etag; bucket may be NULL);
 * *o lives only during the call. Nonzero stops the page. */
typedef int (*scan_obj_fn)(void *fnctx, const struct obj_meta *o);

struct scan_source {
	void *ctx;
	/* One page after token (NULL or "" = the first). 0 with next_token
	 * and *truncated set, or a negative errno. */
	int (*list_page)(void *ctx, const char *bucket, const char *token,
			 scan_obj_fn fn, void *fnctx, char *next_token, size_t ntlen,
			 bool *truncated);
	/* HEAD: fills *out (caller releases it); -ENOENT if gone. */
	int (*head)(void *ctx, const char *bucket, const char *key, struct obj_meta *out);
	/* Tags of an object (NULL: tags cannot be fetched): a malloc'ed
	 * array the caller then owns; -ENOENT if gone. */
	int (*tags)(void *ctx, const char *bucket, const char *key,
		    struct obj_kv **tags, size_t *n);
};

/* The source for the real store: ListObjectsV2, HEAD and GetObjectTagging
 * through sync/s3.h (s3 is borrowed; it is thread-safe). */
struct s3;
void scan_source_s3(struct s3 *s3, struct scan_source *out);

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

/* The scanner borrows ix and src->ctx; st may be NULL. */
int  scan_new(struct index *ix, const struct scan_source *src, struct stats *st,
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
