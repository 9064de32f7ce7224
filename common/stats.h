/*
 * stats.h — the shared machinery behind .facetfs/stats and /metrics:
 * a registry of the modules' counter groups, the event-to-visible and S3
 * latency histograms, the per-partition Kafka lag table, and a small JSON
 * writer for sections of their own (no JSON library in this interface).
 *
 * One struct stats lives in the gateway context; modules get a pointer to
 * it (a header that only passes the pointer declares `struct stats;`) and
 * may be given NULL (then they count for nobody).
 *
 * Counters belong to their module: it keeps them in its own object (a
 * struct of stats_counter fields), describes them in a static table of
 * struct stats_def (JSON section and name; metric family, label, gauge),
 * registers the group with stats_group_add() when the object is made and
 * removes it with stats_group_remove() before the object is freed. Several
 * groups may fill one section; counters with the same section and name in
 * several groups are shown as their sum (e.g. events.ignored: the decoder's
 * and the index's).
 *
 * Threads and locks: counters are C11 atomics, bumped by any thread with
 * stats_inc()/stats_add() (relaxed: statistics, not synchronisation). The
 * registry, the histograms and the lag table are under st->lock, a leaf:
 * nothing else is taken while it is held, and rendering only reads atomics
 * under it. Callers never lock anything.
 *
 * How a module adds a counter (also how to port one from the old
 * STATS_COUNTERS list):
 *   1. a stats_counter field in the module's counter struct (e.g.
 *      `struct scan_counters` in views/scan_int.h);
 *   2. a row in the module's stats_def table, next to the struct:
 *      STATS_COUNTER(struct scan_counters, objects, "scans", "objects"),
 *      STATS_GAUGE(...) for a value now, STATS_FAMILY(..., family, label)
 *      for one sample of a labelled metric family;
 *   3. bump it: stats_inc(&s->ctr.objects), stats_add(&..., n).
 * The JSON member is section.name; the metric is facetfs_SECTION_NAME_total
 * (gauge: facetfs_SECTION_NAME) unless the row names a family. A new
 * member adds itself to both renderings; tests read it by name with
 * stats_value(st, "scans", "objects").
 *
 * Tests: test_stats.c; t_metrics.sh (the counters against .facetfs/stats).
 */
#ifndef FACETFS_STATS_H
#define FACETFS_STATS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>

#define STATS_LAT_BUCKETS 64     /* log2 buckets of microseconds */
#define STATS_MAX_PARTS   256    /* partitions whose lag is tracked */

typedef atomic_uint_fast64_t stats_counter;

#define stats_inc(c)    atomic_fetch_add_explicit((c), 1, memory_order_relaxed)
#define stats_add(c, n) atomic_fetch_add_explicit((c), (n), memory_order_relaxed)
#define stats_sub(c, n) atomic_fetch_sub_explicit((c), (n), memory_order_relaxed)
#define stats_set(c, v) atomic_store_explicit((c), (v), memory_order_relaxed)
#define stats_get(c)    atomic_load_explicit((c), memory_order_relaxed)

/* One counter as the renderings show it. */
struct stats_def {
	const char *section, *name;  /* .facetfs/stats: section.name */
	size_t off;                  /* offset of its stats_counter in the group */
	const char *family;          /* metric family; NULL: from section, name */
	const char *label;           /* `k="v"` within the family; NULL: none */
	bool gauge;                  /* a value now, not a running count */
	bool ms;                     /* milliseconds: /metrics shows seconds */
};

#define STATS_COUNTER(type, field, section, name) \
	{ section, name, offsetof(type, field), NULL, NULL, false, false }
#define STATS_GAUGE(type, field, section, name) \
	{ section, name, offsetof(type, field), NULL, NULL, true, false }
#define STATS_FAMILY(type, field, section, name, family, label) \
	{ section, name, offsetof(type, field), family, label, false, false }
/* A running count of milliseconds, section.name in .facetfs/stats; in
 * /metrics the counter family (in seconds, Prometheus's base unit). */
#define STATS_MS(type, field, section, name, family) \
	{ section, name, offsetof(type, field), family, NULL, false, true }

/* A module's registration: embedded in the module's object, zeroed (or
 * untouched by a failed add) until stats_group_add(). */
struct stats_group {
	const struct stats_def *defs;
	size_t n;
	const void *base;            /* the counters defs[].off is relative to */
	struct stats *st;            /* set while registered */
	struct stats_group *next;    /* the registry's link (under st->lock) */
};

struct stats_lag {
	char name[96];               /* "topic/partition" */
	int64_t lag;
};

/* Latencies: log2 buckets of microseconds (stats_hist says which), their
 * count, sum and largest. */
struct stats_lat {
	uint64_t hist[STATS_LAT_BUCKETS];
	uint64_t count;
	double sum_ms, max_ms;
};

struct stats {
	pthread_mutex_t lock;        /* protects everything below */
	struct stats_group *groups;  /* in the order added */
	struct stats_lat visible;    /* event → visible */
	struct stats_lat s3;         /* S3 requests, retries included */
	struct stats_lag lag[STATS_MAX_PARTS];
	int n_lag;
};

void stats_init(struct stats *st);
/* Every group must have been removed. */
void stats_release(struct stats *st);

/* Show the n counters defs describes, at base (a struct the caller owns
 * and keeps until stats_group_remove(g)), in st. st NULL: nothing (g stays
 * unregistered). g must not be registered already. */
void stats_group_add(struct stats *st, struct stats_group *g,
		     const struct stats_def *defs, size_t n, const void *base);
/* Stop showing g's counters; nothing when g is not registered (a zeroed
 * group). After it returns no renderer reads base. */
void stats_group_remove(struct stats_group *g);

/* One counter of the registry, summed over the groups that name it. */
struct stats_sample {
	const struct stats_def *def; /* the first group's row */
	uint64_t v;
};
/* Every registered counter, in the order first registered, into a
 * malloc'ed array *out (the caller frees); returns the count or -ENOMEM. */
int stats_samples(struct stats *st, struct stats_sample **out);
/* The value of section.name (summed over groups); 0 when none has it. */
uint64_t stats_value(struct stats *st, const char *section, const char *name);

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

/* The whole state as JSON: every registered counter, kafka.lag, and
 * visible_latency_ms; NULL on allocation failure. Caller frees. When
 * section and fn are not NULL, fn(ctx, w) fills the top-level object
 * named section (the gateway adds the staging area's counters under
 * "staging") and may go on into others (stats_write_section); it runs on
 * the caller's thread with no lock held. */
char *stats_to_json(struct stats *st, const char *section, stats_section_fn fn,
		    void *ctx);

#endif
