/*
 * metrics_text.h — the gateway's counters in the Prometheus text format
 * (for gateway/metrics.h's /metrics). Names follow Prometheus's
 * conventions: facetfs_SECTION_NAME_total for counters, base units
 * (seconds, bytes), S3 requests by kind and FUSE requests by op as labels.
 * Threads: any (stats and stage counters are read with their own locks).
 * Ownership: the text is malloc'ed, the caller frees it; NULL on -ENOMEM.
 *
 * Tests: no unit test; t_metrics.sh.
 */
#ifndef FACETFS_METRICS_TEXT_H
#define FACETFS_METRICS_TEXT_H

#include <stddef.h>

struct stats;
struct bcache;
struct stage;

/* A view's staleness: seconds since the time it is fresh as of (< 0:
 * not known: scanning, partitions unassigned or not caught up yet). */
struct metrics_view {
	const char *name;
	double staleness_s;
};

/* stage and bc may be NULL (no staging / burst buffer families); views[n]
 * give facetfs_view_staleness_seconds (known ones only). */
char *metrics_text(struct stats *st, struct stage *stage, struct bcache *bc,
		   const struct metrics_view *views, size_t n);

#endif
