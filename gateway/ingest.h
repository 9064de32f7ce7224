/*
 * ingest.h — the event pipeline between the Kafka consumer and the index:
 * decode each message (events/record.h), fetch with one HEAD what an event
 * lacks and a view needs (AWS events carry no metadata), apply the batch and
 * its offsets in one index write, then invalidate the mount's kernel caches
 * for what changed and record event-to-visible latency.
 *
 * Batches are decoded ahead on a decoder thread of ingest's own (the
 * consumer's prepare/forget callbacks, events/consumer.h) while the previous
 * batch is applied; malformed records are counted and skipped in message
 * order at apply time, and only applied batches' offsets are written.
 *
 * Threads: the consumer callbacks run on the consumer thread;
 * ingest_change_fn() is also called by scan threads. ingest_set_fs() may be
 * called from main at any time (the fs pointer is atomic): changes before
 * the mount exists need no invalidation.
 *
 * View sets: each batch pins the current set of the slot (views/viewset.h)
 * for its enrich (HEADs, no lock held) and apply; the index applies it only
 * while that set is installed, otherwise the batch is enriched again for
 * the newer set (index_apply_for). A reload therefore never waits for a
 * batch, and no batch is applied with what an older set needed.
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
struct consumer_cb;
struct ingest;

/* views: the slot holding the current set; it must outlive g. */
int ingest_new(struct index *ix, struct s3 *s3, struct viewset_slot *views,
	       struct stats *st, struct ingest **out);
/* Stops the decoder thread. The consumer must be stopped first. */
void ingest_free(struct ingest *g);
/* Fill the consumer's callbacks (prepare, apply, forget, stored_offset)
 * bound to g. */
void ingest_callbacks(struct ingest *g, struct consumer_cb *out);
void ingest_set_fs(struct ingest *g, struct fs *fs);
/* An index_change_fn: forwards a membership change to the mount. */
void ingest_change_fn(void *ctx, const char *view, const char *path, int what);

#endif
