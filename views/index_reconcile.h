/*
 * index_reconcile.h — reconciling the index with a fresh listing of a
 * bucket (`facetfs rescan`, views/scan_rescan.c). The rescan records its
 * start time T0 and hands the listing over page by page, each page with the
 * key range it covers; index_reconcile_page() compares page and index in
 * one write-locked batch and fixes what differs. Rules (T0 less
 * INDEX_TIME_SLACK_NS is "fresh"):
 *   listed, no record                      -> inserted             (added)
 *   listed, tombstone at/after its L-M     -> kept                 (kept)
 *   listed, tombstone older than its L-M   -> inserted             (added)
 *   listed, live record from an event
 *           whose time is fresh            -> kept                 (kept)
 *   listed, other live record: same etag, size (and, for scan records,
 *           Last-Modified; tags/metadata/content type when the listing
 *           carries them)                  -> left alone           (unchanged)
 *           otherwise                      -> replaced             (updated)
 *   in range, not listed, live record from a scan or from an event
 *           older than fresh               -> tombstone at T0      (removed)
 *   in range, not listed, live event record that is fresh -> kept (kept)
 * So an event newer than the listing is never undone: a create during the
 * rescan is kept, a delete during it leaves a tombstone newer than the
 * listed Last-Modified. Membership changes reach the change callback like
 * every other write (the mount's kernel caches get invalidated).
 * Threads: any; it takes the index's write lock for the batch only (the
 * range walk reads an implicit snapshot; decisions are re-made under the
 * lock). Ranges rely on the listing being in byte order of keys
 * (ListObjectsV2 is); the caller checks that, and a page that is not is
 * sorted here rather than trusted.
 *
 * Tests: test_rescan.c, test_index_rules.c; t_rescan.sh.
 */
#ifndef FACETFS_INDEX_RECONCILE_H
#define FACETFS_INDEX_RECONCILE_H

#include <stddef.h>
#include <stdint.h>

#include "views/index.h"

struct index_reconcile_counts {
	uint64_t added, removed, updated, unchanged, kept;
};

/* What was done to one key (for reports); key lives only during the call. */
enum index_reconcile_what { IXR_ADDED = 1, IXR_REMOVED, IXR_UPDATED, IXR_KEPT };
typedef void (*index_reconcile_fn)(void *ctx, int what, const char *key);

/* Reconcile the listed objects objs[0..n) (live, bucket set or NULL) of
 * bucket, which cover the keys in (after, upto]: after NULL or "" = from
 * the first key, upto NULL = to the last. t0_ns: when the rescan started
 * (ns since the epoch, this host's clock). Adds what it did to *c and
 * calls note (if not NULL) per key added, removed, updated or kept, both
 * only after the batch was written (note with no lock held). 0 or a
 * negative errno (nothing written, nothing counted). */
int index_reconcile_page(struct index *ix, const char *bucket,
			 const struct obj_meta *objs, size_t n,
			 const char *after, const char *upto, int64_t t0_ns,
			 struct index_reconcile_counts *c,
			 index_reconcile_fn note, void *note_ctx,
			 index_change_fn fn, void *ctx);

#endif
