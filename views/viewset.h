/*
 * viewset.h — the view set as an immutable, reference-counted snapshot,
 * and the slot that holds the current one.
 *
 * A set is built (viewset_new, viewset_add*, viewset_seal), then never
 * changes: its views, their order and what is derived from them (name
 * lookup, what each bucket's views need from an event) stay as they were
 * while anyone holds a reference. A view index (0..viewset_count) means
 * something only together with the set it came from; what must outlive a
 * request (inodes, open files, made directories, queued invalidations)
 * keeps the view's NAME and finds it again in the set it pinned
 * (viewset_find). A view object may be shared by consecutive sets (an
 * unchanged filter file keeps its view); it is freed with the last set
 * that holds it.
 *
 * Threads and locks: a sealed set may be read by any number of threads.
 * viewset_pin/unpin are atomic. The slot's mutex is a leaf, held only to
 * copy the pointer and take a reference (viewset_slot_pin) or to swap it
 * (viewset_slot_swap): nobody waits for I/O behind it. A reload builds a
 * new set, swaps it in and returns; requests that pinned the old set
 * finish with it, and it dies when its last holder unpins.
 *
 * Tests: test_viewset.c; t_liveviews.sh, t_reload.sh.
 */
#ifndef FACETFS_VIEWSET_H
#define FACETFS_VIEWSET_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "views/filter.h"

#define VIEWSET_NONE ((size_t)-1)

struct viewset;

/* An empty set with room for cap views, one reference held by the caller.
 * 0 or -ENOMEM. */
int  viewset_new(size_t cap, struct viewset **out);
/* Append a view (before viewset_seal; at most cap). viewset_add takes
 * ownership of v (freed with the last set holding it, also if this call
 * fails); viewset_add_borrowed does not (the caller frees v after the last
 * set holding it is gone: tests and benchmarks); viewset_add_shared adds
 * view i of another set, shared with it. 0 or -ENOMEM/-ENOSPC. */
int  viewset_add(struct viewset *vs, struct view *v);
int  viewset_add_borrowed(struct viewset *vs, struct view *v);
int  viewset_add_shared(struct viewset *vs, const struct viewset *from, size_t i);
/* Build what is derived from the views; the set is read-only afterwards.
 * 0 or -ENOMEM (the set stays unsealed: unpin it). */
int  viewset_seal(struct viewset *vs);

/* Take / drop a reference. NULL is a no-op for both. */
struct viewset *viewset_pin(struct viewset *vs);
void viewset_unpin(struct viewset *vs);

size_t viewset_count(const struct viewset *vs);
struct view *const *viewset_views(const struct viewset *vs);
/* View i (< viewset_count), or NULL for VIEWSET_NONE or beyond. */
struct view *viewset_view(const struct viewset *vs, size_t i);
/* Index of the view called name, or VIEWSET_NONE. O(1). */
size_t viewset_find(const struct viewset *vs, const char *name);
/* Does the set hold this very view object (not just its name)? */
bool viewset_holds(const struct viewset *vs, const struct view *v);
/* What the views over bucket read that an event may lack (view_needs ORed
 * over the views that use bucket); 0 for a bucket no view uses. */
unsigned viewset_bucket_needs(const struct viewset *vs, const char *bucket);

/* The current set. Embedded by its owner (the gateway). */
struct viewset_slot {
	pthread_mutex_t lock;        /* protects cur; a leaf */
	struct viewset *cur;         /* one reference held by the slot */
};

/* Start with vs (the slot takes the caller's reference; NULL = empty). */
void viewset_slot_init(struct viewset_slot *s, struct viewset *vs);
/* Drop the slot's reference. */
void viewset_slot_release(struct viewset_slot *s);
/* The current set with a reference taken for the caller (unpin it). */
struct viewset *viewset_slot_pin(struct viewset_slot *s);
/* Make vs current (the slot takes a reference of its own) and drop the
 * slot's reference to the previous one. */
void viewset_slot_swap(struct viewset_slot *s, struct viewset *vs);

#endif
