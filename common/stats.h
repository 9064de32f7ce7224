/*
 * stats.h — counters every module bumps, rendered as .facetfs/stats.
 *
 * One struct stats lives in the gateway context; modules get a pointer to
 * it. Counters are C11 atomics: any thread may bump them with
 * stats_inc()/stats_add() (relaxed ordering: they are statistics, not
 * synchronisation). The latency histogram and the per-partition lag table
 * have their own mutex inside; callers never lock anything.
 *
 * stats_to_json() returns a malloc'ed NUL-terminated JSON text (the caller
 * frees it) holding at least the fields DESIGN.md lists for .facetfs/stats.
 */
#ifndef FACETFS_STATS_H
#define FACETFS_STATS_H

#include <pthread.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>

#define STATS_LAT_BUCKETS 64     /* log2 buckets of microseconds */
#define STATS_MAX_PARTS   256    /* partitions whose lag is tracked */

struct stats_lag {
	char name[96];               /* "topic/partition" */
	int64_t lag;
};

struct stats {
	/* events/ */
	atomic_uint_fast64_t ev_consumed, ev_applied, ev_ignored, ev_malformed;
	/* events/: partitions assigned to this consumer now (a gauge) */
	atomic_uint_fast64_t kafka_partitions;
	/* sync/: S3 requests by kind, and failures after retries */
	atomic_uint_fast64_t s3_list, s3_head, s3_get, s3_put, s3_copy, s3_delete,
		s3_errors, s3_retries, s3_bytes_read;
	/* views/: bucket scans and keys that cannot be paths */
	atomic_uint_fast64_t scans_running, scans_completed, scan_objects,
		bad_keys;
	/* fuse/ */
	atomic_uint_fast64_t fuse_lookup, fuse_getattr, fuse_readdir, fuse_read,
		fuse_open, fuse_getxattr, fuse_inval;
	/* cache */
	atomic_uint_fast64_t cache_hits, cache_misses;

	pthread_mutex_t lock;        /* protects everything below */
	uint64_t lat_hist[STATS_LAT_BUCKETS];
	uint64_t lat_count;
	double lat_max_ms;
	struct stats_lag lag[STATS_MAX_PARTS];
	int n_lag;
};

#define stats_inc(st, field) \
	atomic_fetch_add_explicit(&(st)->field, 1, memory_order_relaxed)
#define stats_add(st, field, n) \
	atomic_fetch_add_explicit(&(st)->field, (n), memory_order_relaxed)
#define stats_sub(st, field, n) \
	atomic_fetch_sub_explicit(&(st)->field, (n), memory_order_relaxed)
#define stats_get(st, field) \
	atomic_load_explicit(&(st)->field, memory_order_relaxed)

void stats_init(struct stats *st);
void stats_release(struct stats *st);

/* Record n event-to-visible latencies (ms[0..n-1], milliseconds, negative
 * → 0) under one lock: a batch of events. */
void stats_latency_add_batch(struct stats *st, const double *ms, size_t n);
/* Percentile (0..100) of the recorded latencies, in ms; 0 when empty. */
double stats_latency_pct(struct stats *st, double pct);

/* Set the lag of one partition, named "topic/partition". */
void stats_lag_set(struct stats *st, const char *name, int64_t lag);

/* The whole state as JSON; NULL on allocation failure. Caller frees.
 * extra (may be NULL) adds sections of other owners to the cJSON object
 * before it is printed (the gateway adds the staging area's counters). */
struct cJSON;
char *stats_to_json(struct stats *st, void (*extra)(void *ctx, struct cJSON *root),
		    void *ctx);

#endif
