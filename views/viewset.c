/* viewset.c — see viewset.h.
 *
 * Each view sits in a box with its own count of the sets holding it, so
 * consecutive sets can share an unchanged view. Name lookup is an open-
 * addressing table built by viewset_seal (power-of-two size, at least twice
 * the view count, linear probing, slot value index + 1, 0 = empty).
 */
#include "views/viewset.h"

#include "common/lock.h"
#include "common/hash.h"
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct viewbox {
	atomic_uint sets;            /* sets holding this view */
	bool owned;                  /* free the view with the box */
	struct view *v;
};

struct bucket_needs {
	const char *bucket;          /* a view's own string */
	unsigned needs;
};

struct viewset {
	atomic_uint refs;
	bool sealed;
	size_t n, cap;
	struct viewbox **boxes;
	struct view **views;         /* boxes[i]->v, for callers wanting an array */
	uint32_t *names;             /* name table (see top) */
	size_t names_cap;
	struct bucket_needs *needs;
	size_t n_needs;
};

int viewset_new(size_t cap, struct viewset **out)
{
	struct viewset *vs = calloc(1, sizeof *vs);
	if (!vs)
		return -ENOMEM;
	vs->boxes = calloc(cap ? cap : 1, sizeof *vs->boxes);
	vs->views = calloc(cap ? cap : 1, sizeof *vs->views);
	if (!vs->boxes || !vs->views) {
		free(vs->boxes);
		free(vs->views);
		free(vs);
		return -ENOMEM;
	}
	vs->cap = cap;
	atomic_init(&vs->refs, 1);
	*out = vs;
	return 0;
}

static void box_put(struct viewbox *b)
{
	if (atomic_fetch_sub(&b->sets, 1) != 1)
		return;
	if (b->owned)
		view_free(b->v);
	free(b);
}

static int box_append(struct viewset *vs, struct viewbox *b)
{
	if (vs->sealed || vs->n == vs->cap)
		return -ENOSPC;
	vs->boxes[vs->n] = b;
	vs->views[vs->n] = b->v;
	vs->n++;
	return 0;
}

static int add_new_box(struct viewset *vs, struct view *v, bool owned)
{
	struct viewbox *b = calloc(1, sizeof *b);
	if (!b) {
		if (owned)
			view_free(v);
		return -ENOMEM;
	}
	atomic_init(&b->sets, 1);
	b->owned = owned;
	b->v = v;
	int rc = box_append(vs, b);
	if (rc < 0)
		box_put(b);
	return rc;
}

int viewset_add(struct viewset *vs, struct view *v)
{
	return add_new_box(vs, v, true);
}

int viewset_add_borrowed(struct viewset *vs, struct view *v)
{
	return add_new_box(vs, v, false);
}

int viewset_add_shared(struct viewset *vs, const struct viewset *from, size_t i)
{
	if (i >= from->n)
		return -EINVAL;
	struct viewbox *b = from->boxes[i];
	atomic_fetch_add(&b->sets, 1);
	int rc = box_append(vs, b);
	if (rc < 0)
		box_put(b);
	return rc;
}

static uint64_t name_hash(const char *s)
{
	return hash_fnv_str(HASH_FNV_SEED, s);
}

int viewset_seal(struct viewset *vs)
{
	if (vs->sealed)
		return 0;
	size_t cap = 8;
	while (cap < 2 * vs->n)
		cap *= 2;
	uint32_t *names = calloc(cap, sizeof *names);
	size_t nb = 0;
	for (size_t i = 0; i < vs->n; i++)
		nb += view_n_buckets(vs->views[i]);
	struct bucket_needs *needs = calloc(nb ? nb : 1, sizeof *needs);
	if (!names || !needs) {
		free(names);
		free(needs);
		return -ENOMEM;
	}
	for (size_t i = 0; i < vs->n; i++) {
		size_t s = (size_t)name_hash(view_name(vs->views[i])) & (cap - 1);
		while (names[s])
			s = (s + 1) & (cap - 1);
		names[s] = (uint32_t)(i + 1);
	}
	size_t n_needs = 0;
	for (size_t i = 0; i < vs->n; i++) {
		const struct view *v = vs->views[i];
		for (size_t b = 0; b < view_n_buckets(v); b++) {
			const char *name = view_bucket(v, b);
			size_t k = 0;
			while (k < n_needs && strcmp(needs[k].bucket, name) != 0)
				k++;
			if (k == n_needs)
				needs[n_needs++].bucket = name;
			needs[k].needs |= view_needs(v);
		}
	}
	vs->names = names;
	vs->names_cap = cap;
	vs->needs = needs;
	vs->n_needs = n_needs;
	vs->sealed = true;
	return 0;
}

struct viewset *viewset_pin(struct viewset *vs)
{
	if (vs)
		atomic_fetch_add(&vs->refs, 1);
	return vs;
}

void viewset_unpin(struct viewset *vs)
{
	if (!vs || atomic_fetch_sub(&vs->refs, 1) != 1)
		return;
	for (size_t i = 0; i < vs->n; i++)
		box_put(vs->boxes[i]);
	free(vs->boxes);
	free(vs->views);
	free(vs->names);
	free(vs->needs);
	free(vs);
}

size_t viewset_count(const struct viewset *vs)
{
	return vs ? vs->n : 0;
}

struct view *const *viewset_views(const struct viewset *vs)
{
	return vs->views;
}

struct view *viewset_view(const struct viewset *vs, size_t i)
{
	return vs && i < vs->n ? vs->views[i] : NULL;
}

size_t viewset_find(const struct viewset *vs, const char *name)
{
	if (!vs || !vs->sealed || !name)
		return VIEWSET_NONE;
	size_t mask = vs->names_cap - 1;
	for (size_t s = (size_t)name_hash(name) & mask; vs->names[s]; s = (s + 1) & mask) {
		size_t i = vs->names[s] - 1;
		if (strcmp(view_name(vs->views[i]), name) == 0)
			return i;
	}
	return VIEWSET_NONE;
}

bool viewset_holds(const struct viewset *vs, const struct view *v)
{
	for (size_t i = 0; vs && i < vs->n; i++)
		if (vs->views[i] == v)
			return true;
	return false;
}

unsigned viewset_bucket_needs(const struct viewset *vs, const char *bucket)
{
	for (size_t k = 0; vs && k < vs->n_needs; k++)
		if (strcmp(vs->needs[k].bucket, bucket) == 0)
			return vs->needs[k].needs;
	return 0;
}

void viewset_slot_init(struct viewset_slot *s, struct viewset *vs)
{
	pthread_mutex_init(&s->lock, NULL);
	s->cur = vs;
}

void viewset_slot_release(struct viewset_slot *s)
{
	viewset_unpin(s->cur);
	s->cur = NULL;
	pthread_mutex_destroy(&s->lock);
}

struct viewset *viewset_slot_pin(struct viewset_slot *s)
{
	mod_lock(&s->lock);
	struct viewset *vs = viewset_pin(s->cur);
	mod_unlock(&s->lock);
	return vs;
}

void viewset_slot_swap(struct viewset_slot *s, struct viewset *vs)
{
	viewset_pin(vs);
	mod_lock(&s->lock);
	struct viewset *old = s->cur;
	s->cur = vs;
	mod_unlock(&s->lock);
	viewset_unpin(old);          /* outside the lock: may free views */
}
