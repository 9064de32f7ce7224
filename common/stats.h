/*
 * stats.h — counters every module bumps, rendered as .facetfs/stats.
 *
 * One struct stats lives in the gateway context; modules get a pointer to
 * it (a header that only passes the pointer declares `struct stats;`).
 * Every counter is named once, in STATS_COUNTERS below: its field (what
 * code bumps) and its place in the JSON (section.name). Counters are C11
 * atomics: any thread may bump them with stats_inc()/stats_add() (relaxed
 * ordering: they are statistics, not synchronisation). The latency
 * histogram and the per-partition lag table have their own mutex inside;
 * callers never lock anything.
 *
 * stats_to_json() returns a malloc'ed NUL-terminated JSON text (the caller
 * frees it) holding at least the fields DESIGN.md lists for .facetfs/stats;
 * a caller adds sections of its own through a stats_writer (no JSON library
 * in this interface).
 */
#ifndef FACETFS_STATS_H
#define FACETFS_STATS_H

#include <pthread.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>

#define STATS_LAT_BUCKETS 64     /* log2 buckets of microseconds */
#define STATS_MAX_PARTS   256    /* partitions whose lag is tracked */

/* X(field, "section", "name"), in the order the JSON shows them (a section
 * is written where its first counter is). Who bumps each: */
#define STATS_COUNTERS(X)                                                    \
	/* events/ consumes, views/ applies or skips as stale (redelivered:  \
	 * applied events that were the stored record already, a replay or a \
	 * duplicate message), gateway/ingest counts undecodable messages and \
	 * ignored records */                                               \
	X(ev_consumed,      "events", "consumed")                            \
	X(ev_applied,       "events", "applied")                             \
	X(ev_ignored,       "events", "ignored")                             \
	X(ev_malformed,     "events", "malformed")                           \
	X(ev_redelivered,   "events", "redelivered")                         \
	/* events/: partitions assigned to this consumer now (a gauge) */    \
	X(kafka_partitions, "kafka",  "partitions_assigned")                 \
	/* sync/: S3 requests by kind (head: HeadObject only; GetObjectTagging \
	 * is get_tagging), failures after retries, retries, GET body bytes */ \
	X(s3_list,          "s3",     "list")                                \
	X(s3_head,          "s3",     "head")                                \
	X(s3_get_tagging,   "s3",     "get_tagging")                         \
	X(s3_get,           "s3",     "get")                                 \
	X(s3_put,           "s3",     "put")                                 \
	X(s3_copy,          "s3",     "copy")                                \
	X(s3_delete,        "s3",     "delete")                              \
	X(s3_errors,        "s3",     "errors")                              \
	X(s3_retries,       "s3",     "retries")                             \
	X(s3_bytes_read,    "s3",     "bytes_read")                          \
	/* views/: bucket scans */                                           \
	X(scans_running,    "scans",  "running")                             \
	X(scans_completed,  "scans",  "completed")                           \
	X(scan_objects,     "scans",  "objects")                             \
	/* fuse/ requests and kernel cache invalidations */                  \
	X(fuse_lookup,      "fuse",   "lookup")                              \
	X(fuse_getattr,     "fuse",   "getattr")                             \
	X(fuse_readdir,     "fuse",   "readdir")                             \
	X(fuse_read,        "fuse",   "read")                                \
	X(fuse_open,        "fuse",   "open")                                \
	X(open_from_index,  "fuse",   "open_from_index")                     \
	X(fuse_getxattr,    "fuse",   "getxattr")                            \
	X(fuse_inval,       "fuse",   "invalidations")                       \
	/* sync/: burst buffer blocks read from it / not there (without one:   \
	 * the reader's window hits / misses) */                             \
	X(cache_hits,       "cache",  "hits")                                \
	X(cache_misses,     "cache",  "misses")                              \
	/* sync/reader: ranges fetched ahead of sequential readers, their    \
	 * bytes, bytes fetched ahead and never read (a random read, close),  \
	 * ranges not fetched ahead because the bound across readers was met */ \
	X(ra_ranges,        "readahead", "ranges")                           \
	X(ra_bytes,         "readahead", "bytes")                            \
	X(ra_wasted,        "readahead", "wasted_bytes")                     \
	X(ra_throttled,     "readahead", "throttled")                        \
	/* views/: keys that cannot be paths in a view that matches them */  \
	X(bad_keys,         "keys",   "not_a_path")

struct stats_lag {
	char name[96];               /* "topic/partition" */
	int64_t lag;
};

struct stats {
#define STATS_FIELD(field, section, name) atomic_uint_fast64_t field;
	STATS_COUNTERS(STATS_FIELD)
#undef STATS_FIELD

	pthread_mutex_t lock;        /* protects everything below */
	uint64_t lat_hist[STATS_LAT_BUCKETS];
	uint64_t lat_count;
	double lat_max_ms, lat_sum_ms;
	uint64_t s3_hist[STATS_LAT_BUCKETS];   /* S3 request latencies */
	uint64_t s3_count;
	double s3_sum_ms;
	struct stats_lag lag[STATS_MAX_PARTS];
	int n_lag;
};

#define stats_inc(st, field) \
	atomic_fetch_add_explicit(&(st)->field, 1, memory_order_relaxed)
#define stats_add(st, field, n) \
	atomic_fetch_add_explicit(&(st)->field, (n), memory_order_relaxed)
#define stats_sub(st, field, n) \
	atomic_fetch_sub_explicit(&(st)->field, (n), memory_order_relaxed)
#define stats_set(st, field, v) \
	atomic_store_explicit(&(st)->field, (v), memory_order_relaxed)
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
/* A copy of up to max partitions' lag; returns how many. */
int  stats_lag_get(struct stats *st, struct stats_lag *out, int max);

/* Record one S3 request's latency (ms, retries included). */
void stats_s3_latency_add(struct stats *st, double ms);

/* A histogram as Prometheus wants it: bucket b counts values of at most
 * 2^b microseconds (bucket 0: under 1 µs), not cumulative. */
enum stats_hist_kind { STATS_HIST_VISIBLE, STATS_HIST_S3 };
struct stats_hist {
	uint64_t bucket[STATS_LAT_BUCKETS];
	uint64_t count;
	double sum_ms;
};
void stats_hist_get(struct stats *st, enum stats_hist_kind k,
		    struct stats_hist *out);

/* One JSON object being written by a section callback: add members by name.
 * Running out of memory makes the whole text NULL, nothing else fails. */
struct stats_writer;
void stats_write_num(struct stats_writer *w, const char *name, double v);
void stats_write_str(struct stats_writer *w, const char *name, const char *s);
/* Go on writing into the top-level object section (made, or the one the
 * counters above already fill), or into the object name inside the
 * current one. */
void stats_write_section(struct stats_writer *w, const char *section);
void stats_write_sub(struct stats_writer *w, const char *name);
typedef void (*stats_section_fn)(void *ctx, struct stats_writer *w);

/* The whole state as JSON; NULL on allocation failure. Caller frees.
 * When section and fn are not NULL, fn(ctx, w) fills the top-level object
 * named section (the gateway adds the staging area's counters under
 * "staging") and may go on into others (stats_write_section); it runs on
 * the caller's thread with no lock held. */
char *stats_to_json(struct stats *st, const char *section, stats_section_fn fn,
		    void *ctx);

#endif
