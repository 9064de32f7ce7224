/*
 * pins.h — object versions in use by open readers, so that the burst
 * buffer keeps their blocks: a `session` descriptor opened on version 1
 * keeps reading it from the buffer after an event replaced or deleted the
 * object (docs/design.md "Visibility policies").
 *
 * A reader pins its version (bucket, key, ETag) for its lifetime. A drop
 * of a version's blocks (the index's version hook: the object changed or
 * went away) is done at once when nobody pins it, otherwise deferred to
 * the last unpin. Eviction for room is not held back: a pinned version's
 * blocks may still be evicted (the reader then needs S3, -ESTALE if S3
 * has moved on), so pins never grow the buffer past its budget.
 *
 * Bounds: one entry per pinned version (at most the open descriptors).
 * Threads: any; one mutex (a leaf), never held across bcache_drop().
 * Ownership: strings are copied.
 *
 * Tests: test_readcache.c (named after the read cache, not this file);
 * t_cache.sh.
 */
#ifndef FACETFS_SYNC_PINS_H
#define FACETFS_SYNC_PINS_H

#include <stdint.h>

#include "sync/cache/bcache.h"

struct pins;

int  pins_new(struct bcache *bc, struct pins **out);
void pins_free(struct pins *p);
int  pins_pin(struct pins *p, const struct bcache_id *id);
void pins_unpin(struct pins *p, const struct bcache_id *id);
/* Release the blocks of version id (size bytes): now, or at the last
 * unpin. */
void pins_drop(struct pins *p, const struct bcache_id *id, uint64_t size);

#endif
