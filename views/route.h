/*
 * route.h — which views can match an object, by its bucket and key, without
 * asking every view: the candidates for view_match().
 *
 * Built once from a view set: per bucket, the views that use it, grouped by
 * their literal key prefix (view_key_prefix(): strip_prefix, match.prefix,
 * the head of a glob, the common head of `any` branches) in a sorted table.
 * route_find() returns the views of the bucket whose prefix is a prefix of
 * the key (those with none included): a binary search over the bucket
 * names, one over the prefix table, then a walk up the chain of nested
 * prefixes — O(log n + nesting depth) per call, not O(views).
 * Invariant: for every object o, view_match(views[i], o) implies i is among
 * route_find(o->bucket, o->key); the caller still runs view_match.
 * Threads: a built router is immutable; any number of threads may call
 * route_find at once. It copies what it needs: the views may be freed first.
 * Ownership: route_build gives you a router you free with route_free.
 *
 * Tests: test_route.c.
 */
#ifndef FACETFS_ROUTE_H
#define FACETFS_ROUTE_H

#include <stddef.h>

#include "views/filter.h"

struct route;

/* Build the router of views[0..n). 0 or -ENOMEM (*out NULL). */
int  route_build(const struct view *const *views, size_t n, struct route **out);
/* NULL is a no-op. */
void route_free(struct route *r);

/* Candidate view indices for (bucket, key) into out, ascending, each once;
 * out must hold route_max(r) entries. Returns how many. */
size_t route_find(const struct route *r, const char *bucket, const char *key,
		  size_t key_len, size_t *out);
/* The most candidates one call can return (the view count of the busiest
 * bucket); 0 for an empty set. */
size_t route_max(const struct route *r);

#endif
