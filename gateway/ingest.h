/*
 * ingest.h — the gateway's end of the event pipeline: what it does with
 * each batch the consumer decoded (events/consumer.h, events/decoder.h).
 * Enrich: fetch with one HEAD what an event lacks and a view needs (AWS
 * events carry no metadata), unless the index holds it for the same
 * version. Apply: the batch's records and its offsets in one index write
 * (so no event is applied twice or lost). Notify: invalidate the mount's
 * kernel caches for what changed, and record event-to-visible latency
 * (visible_latency_ms) of the events produced after the consumer was
 * assigned their partition; older ones only count as events.backlog.
 *
 * Threads: ingest_batch_apply() and the consumer callbacks run on the
 * consumer thread; ingest_change_fn() is also called by scan threads.
 * ingest_set_fs() may be called from main at any time (the fs pointer is
 * atomic): changes before the mount exists need no invalidation. No
 * thread of its own.
 *
 * View sets: each batch pins the current set of the slot (views/viewset.h)
 * for its enrich (HEADs, no lock held) and apply; the index applies it only
 * while that set is installed, otherwise the batch is enriched again for
 * the newer set (index_apply_for). A reload therefore never waits for a
 * batch, and no batch is applied with what an older set needed.
 *
 * Tests: test_ingest.c; t_crash.sh, t_restart.sh, t_malformed.sh.
 */
#ifndef FACETFS_INGEST_H
#define FACETFS_INGEST_H

#include <pthread.h>
#include <stddef.h>

struct index;
struct s3;
struct viewset_slot;
struct stats;
struct fs;
struct trace;
struct consumer_cb;
struct ev_batch;
struct ingest;

/* views: the slot holding the current set; it must outlive g. */
int ingest_new(struct index *ix, struct s3 *s3, struct viewset_slot *views,
	       struct stats *st, struct ingest **out);
/* The consumer must be stopped first. NULL is fine. */
void ingest_free(struct ingest *g);
/* Enrich, apply with its offsets, notify (the consumer's apply callback).
 * 0, or a negative errno when the index write failed: nothing of the batch
 * was applied, and it may be given again. */
int ingest_batch_apply(struct ingest *g, struct ev_batch *b);
/* Fill the consumer's callbacks (apply, stored_offset) bound to g. */
void ingest_callbacks(struct ingest *g, struct consumer_cb *out);
void ingest_set_fs(struct ingest *g, struct fs *fs);
/* Record each applied change (an event's or a scan's) in tr while it is
 * on (common/trace.h): `facetfs advise` needs when the gateway saw it.
 * Atomic like ingest_set_fs(); tr must outlive g or be unset first. */
void ingest_set_trace(struct ingest *g, struct trace *tr);
/* A barrier's probe (facetfs wait --probe): the event of bucket/key is
 * awaited from now on, before the caller writes the key. 0 with *slot;
 * -EBUSY when INGEST_PROBES are awaited already. Any thread. */
#define INGEST_PROBES 16
int ingest_probe_expect(struct ingest *g, const char *bucket, const char *key, int *slot);
/* Wait until an event of the probe's key was applied: 0, or -ETIMEDOUT
 * after timeout_ms. The slot is free again after either. */
int ingest_probe_wait(struct ingest *g, int slot, int timeout_ms);
/* An index_change_fn: forwards a membership change to the mount. */
void ingest_change_fn(void *ctx, const char *view, const char *path, int what);

#endif
