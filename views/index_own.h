/*
 * index_own.h — the gateway's own writes whose events have not arrived yet.
 * Internal to views/ (the index keeps one table, made by index_open, used
 * by the write path, index_write.c, under its write mutex).
 *
 * The gateway records its own PUT, COPY or DELETE in the index when the
 * request returns (fuse/core.c's core_index_local). The store's answer has
 * no sequencer, so that record has none, and the event of that request, or
 * of an earlier one of the same key, arrives later with a sequencer that
 * cannot be compared with nothing. Applied, such an event would put back an
 * older version's metadata: a utimensat's COPY undone by the event of the
 * PUT before it, and the next chmod's COPY, made from the index's record,
 * then stores the PUT's time in the object (the rsync case).
 *
 * The table remembers, per key, the versions the gateway wrote (a 64-bit
 * hash of the ETag and one of the user metadata, or a delete) in the order it wrote them. An event that matches one of them is
 * taken as the event of that write: own_take forgets it and the ones before
 * it, and the index keeps its record while that record is still the
 * gateway's own (no other client's event or a listing replaced it). An
 * event that matches none is another client's and is applied as before.
 *
 * Bounded: OWN_MAX_KEYS keys, OWN_PER_KEY versions per key (the oldest
 * goes first), OWN_MAX_VERSIONS versions in all (32 bytes each; a key's
 * array grows by doubling; when all are taken a key gives up its oldest
 * for a new one, and a key with none remembers nothing), and a version
 * whose event has not come within OWN_TTL_NS is forgotten (the event was lost, or notifications are not configured for
 * that kind). When the table is full a new write is not remembered, and its
 * event is applied as if another client had made it: the behaviour without
 * the table. Times are CLOCK_MONOTONIC ns, passed in by the caller.
 *
 * What it cannot tell: another client's write of the same bytes and user
 * metadata within OWN_TTL_NS of one of ours is taken as ours and skipped
 * while our record stands (it changed nothing the index keeps but the
 * time); so is one of the same bytes when the event carries no metadata
 * (AWS's events).
 *
 * Not thread-safe: the caller serialises (the index's wmu).
 *
 * Tests: test_index_own.c; t_posix.sh.
 */
#ifndef FACETFS_INDEX_OWN_H
#define FACETFS_INDEX_OWN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/object.h"

#define OWN_MAX_KEYS 65536
/* 64: a file's writes before their events arrive, also while the mount
 * waits for Kafka to assign it partitions (pjdfstest's chown makes a
 * dozen writes of one name within a second of mounting). */
#define OWN_PER_KEY 64
#define OWN_MAX_VERSIONS 262144
#define OWN_TTL_NS (120LL * 1000000000LL)

struct own_table;

/* NULL when out of memory. */
struct own_table *own_new(void);
void own_free(struct own_table *t);

/* What a write made, or an event says it made. */
struct own_version {
	const char *etag;      /* NULL or "": not known, matches any create */
	bool deleted;
	bool has_meta;         /* meta_hash is known (own_meta_hash) */
	uint64_t meta_hash;
};

/* Remember a write of bucket/key. False when it was not remembered (the
 * table full or out of memory). */
bool own_note(struct own_table *t, const char *bucket, const char *key,
	      const struct own_version *v, int64_t now_ns);

/* Is this event of a remembered write of bucket/key, while the index's
 * record of the key is still the gateway's own (no other record replaced
 * it since: own_replaced)? A create matches a create of the same ETag
 * whose user metadata is the same when both know it (so another client's
 * copy of the same bytes with other metadata is not taken as ours); a
 * delete matches a delete. A matching write, and the ones noted before
 * it, are forgotten whatever the answer. */
bool own_take(struct own_table *t, const char *bucket, const char *key,
	      const struct own_version *ev, int64_t now_ns);

/* The index stored a record of bucket/key that is not the gateway's own
 * (an event applied, a listing): the writes still awaited stay, but their
 * events no longer keep a record. */
void own_replaced(struct own_table *t, const char *bucket, const char *key);

/* The version o describes (a record or an event; points into o). Its
 * metadata is known when o has OBJ_HAS_META, hashed the same whatever
 * the order of the pairs. */
void own_version_of(const struct obj_meta *o, struct own_version *out);

/* Keys remembered now (tests, and the bound). */
size_t own_keys(const struct own_table *t);

#endif
