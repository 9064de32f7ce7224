/*
 * test_viewset.c — the view-set snapshot (views/viewset.h) and how the
 * index installs and publishes it: lookups and derived data of a set, views
 * shared between consecutive sets, a pinned set outliving a swap, readers
 * pinning while a writer swaps (run under ASan/TSan by tests/run --unit),
 * and index_apply_for refusing a batch prepared for a set that is no
 * longer installed.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "views/filter.h"
#include "views/index.h"
#include "views/viewset.h"
#include "tests/unit/unit.h"
#include "tests/unit/unit_views.h"

static struct view *view_named(const char *name, const char *bucket, const char *match)
{
	char js[512];
	snprintf(js, sizeof js, "{\"name\":\"%s\",\"bucket\":\"%s\"%s%s}", name, bucket,
		 match ? ",\"match\":" : "", match ? match : "");
	return unit_view(js);
}

static struct viewset *sealed(struct view **v, size_t n)
{
	struct viewset *vs;
	int rc = viewset_new(n, &vs);
	for (size_t i = 0; i < n; i++)
		if (rc == 0)
			rc = viewset_add(vs, v[i]);
	if (rc == 0)
		rc = viewset_seal(vs);
	if (rc < 0) {
		printf("# building a set: %d\n", rc);
		exit(2);
	}
	return vs;
}

static void test_lookup_and_needs(void)
{
	struct view *v[3] = {
		view_named("all", "b1", NULL),
		view_named("black", "b1", "{\"metadata\":{\"color\":\"black\"}}"),
		view_named("typed", "b2", "{\"content_type\":\"text/plain\"}"),
	};
	struct viewset *vs = sealed(v, 3);
	CHECK(viewset_count(vs) == 3, "three views");
	CHECK(viewset_find(vs, "black") == 1 && viewset_find(vs, "typed") == 2 &&
	      viewset_find(vs, "all") == 0, "found by name at their index");
	CHECK(viewset_find(vs, "none") == VIEWSET_NONE, "unknown name: VIEWSET_NONE");
	CHECK(viewset_view(vs, 3) == NULL && viewset_view(vs, VIEWSET_NONE) == NULL,
	      "no view beyond the count");
	CHECK(viewset_bucket_needs(vs, "b1") == OBJ_HAS_META, "b1's views need metadata (%u)",
	      viewset_bucket_needs(vs, "b1"));
	CHECK(viewset_bucket_needs(vs, "b2") == OBJ_HAS_CTYPE, "b2's view needs the type (%u)",
	      viewset_bucket_needs(vs, "b2"));
	CHECK(viewset_bucket_needs(vs, "b3") == 0, "a bucket no view uses needs nothing");
	CHECK(viewset_holds(vs, v[1]) && !viewset_holds(vs, NULL), "holds its own views only");
	viewset_unpin(vs);

	struct viewset *empty = sealed(NULL, 0);
	CHECK(viewset_count(empty) == 0 && viewset_find(empty, "all") == VIEWSET_NONE,
	      "an empty set finds nothing");
	viewset_unpin(empty);
}

static void test_sharing_and_swap(void)
{
	struct view *a[2] = { view_named("keep", "b1", NULL), view_named("drop", "b1", NULL) };
	struct viewset *s1 = sealed(a, 2);
	struct viewset *s2;
	int rc = viewset_new(2, &s2);
	if (rc == 0)
		rc = viewset_add_shared(s2, s1, viewset_find(s1, "keep"));
	if (rc == 0)
		rc = viewset_add(s2, view_named("new", "b2", NULL));
	if (rc == 0)
		rc = viewset_seal(s2);
	CHECK(rc == 0, "second set: one view shared, one new");
	CHECK(viewset_view(s2, 0) == a[0], "the shared view is the same object");
	CHECK(viewset_add(s2, view_named("late", "b1", NULL)) == -ENOSPC,
	      "a sealed set takes no more views");

	struct viewset_slot slot;
	viewset_slot_init(&slot, s1);           /* the slot takes s1's reference */
	struct viewset *pinned = viewset_slot_pin(&slot);
	CHECK(pinned == s1, "pin gives the current set");
	viewset_slot_swap(&slot, s2);
	viewset_unpin(s2);                      /* the slot holds its own */
	CHECK(viewset_count(pinned) == 2 &&
	      strcmp(view_name(viewset_view(pinned, 1)), "drop") == 0,
	      "a pinned set stays whole after the swap");
	viewset_unpin(pinned);                  /* s1 dies here; "keep" lives on */
	struct viewset *cur = viewset_slot_pin(&slot);
	CHECK(cur == s2 && strcmp(view_name(viewset_view(cur, 0)), "keep") == 0,
	      "the shared view outlives the first set");
	viewset_unpin(cur);
	viewset_slot_release(&slot);
}

/* Readers pin and check the set they got while the main thread swaps. */
struct race {
	struct viewset_slot slot;
	atomic_bool stop;
	atomic_long pins, bad;
};

static void *reader_main(void *arg)
{
	struct race *r = arg;
	while (!atomic_load(&r->stop)) {
		struct viewset *vs = viewset_slot_pin(&r->slot);
		/* every set holds "gN" at 0 and "fixed" at 1 */
		const char *g = view_name(viewset_view(vs, 0));
		if (viewset_count(vs) != 2 || g[0] != 'g' || viewset_find(vs, g) != 0 ||
		    viewset_find(vs, "fixed") != 1)
			atomic_fetch_add(&r->bad, 1);
		viewset_unpin(vs);
		atomic_fetch_add(&r->pins, 1);
	}
	return NULL;
}

static void test_pin_while_swapping(void)
{
	struct race r;
	atomic_init(&r.stop, false);
	atomic_init(&r.pins, 0);
	atomic_init(&r.bad, 0);
	struct view *first[2] = { view_named("g0", "b", NULL), view_named("fixed", "b", NULL) };
	viewset_slot_init(&r.slot, sealed(first, 2));
	pthread_t th[3];
	int started = 0;
	for (int i = 0; i < 3; i++)
		started += pthread_create(&th[i], NULL, reader_main, &r) == 0;
	int swaps = 0;
	for (int n = 1; n <= 2000; n++) {
		struct viewset *prev = viewset_slot_pin(&r.slot);
		struct viewset *next;
		char name[16];
		snprintf(name, sizeof name, "g%d", n);
		int rc = viewset_new(2, &next);
		if (rc == 0)
			rc = viewset_add(next, view_named(name, "b", NULL));
		if (rc == 0)
			rc = viewset_add_shared(next, prev, 1);
		if (rc == 0)
			rc = viewset_seal(next);
		if (rc == 0) {
			viewset_slot_swap(&r.slot, next);
			swaps++;
		}
		viewset_unpin(next);
		viewset_unpin(prev);
	}
	atomic_store(&r.stop, true);
	for (int i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	CHECK(started == 3 && swaps == 2000, "3 readers, 2000 swaps");
	CHECK(atomic_load(&r.bad) == 0, "every pinned set was whole (%ld pins, %ld bad)",
	      atomic_load(&r.pins), atomic_load(&r.bad));
	viewset_slot_release(&r.slot);
}

static struct obj_meta ev(const char *key)
{
	struct obj_meta o;
	memset(&o, 0, sizeof o);
	o.bucket = strdup("b1");
	o.key = strdup(key);
	o.size = 1;
	o.mtime_ns = 1000000000LL;
	snprintf(o.etag, sizeof o.etag, "e-%s", key);
	return o;
}

static void test_index_install_and_apply_for(void)
{
	char *dir = unit_tmpdir("viewset");
	struct index *ix = unit_index_open(dir, NULL);
	struct viewset_slot slot;
	viewset_slot_init(&slot, NULL);
	struct view *va[1] = { view_named("x", "b1", "{\"prefix\":\"a/\"}") };
	struct viewset *a = sealed(va, 1);
	CHECK(index_set_views(ix, a, &slot) == 0, "install set A");
	struct viewset *cur = viewset_slot_pin(&slot);
	CHECK(cur == a, "installing publishes it in the slot");
	viewset_unpin(cur);

	struct obj_meta e1 = ev("a/1");
	CHECK(index_apply_for(ix, a, &e1, 1, NULL, 0, NULL, NULL) == 0,
	      "a batch prepared for the installed set applies");
	struct index_attr at;
	CHECK(index_lookup(ix, viewset_view(a, 0), "a/1", &at) == 0, "and is visible");

	/* B changes x (prefix b/) and adds y: a batch prepared for A is refused */
	struct view *vb[2] = { view_named("x", "b1", "{\"prefix\":\"b/\"}"),
			       view_named("y", "b1", NULL) };
	struct viewset *b = sealed(vb, 2);
	CHECK(index_set_views(ix, b, &slot) == 0, "install set B");
	struct obj_meta e2 = ev("b/2");
	CHECK(index_apply_for(ix, a, &e2, 1, NULL, 0, NULL, NULL) == -EAGAIN,
	      "a batch prepared for A after B came: -EAGAIN");
	CHECK(index_objects(ix) == 1, "and nothing written (%llu objects)",
	      (unsigned long long)index_objects(ix));
	CHECK(index_apply_for(ix, b, &e2, 1, NULL, 0, NULL, NULL) == 0,
	      "prepared again for B: applied");
	CHECK(index_lookup(ix, viewset_view(b, 0), "b/2", &at) == 0 &&
	      index_lookup(ix, viewset_view(b, 0), "a/1", &at) == -ENOENT,
	      "x shows its new definition");
	/* A reader still holding A names x: it reads x's membership by name */
	CHECK(index_lookup(ix, viewset_view(a, 0), "b/2", &at) == 0,
	      "a reader of the old set reads the view by its name");
	CHECK(index_members(ix, viewset_view(b, 1)) == 2, "y built from the records (%llu)",
	      (unsigned long long)index_members(ix, viewset_view(b, 1)));
	viewset_unpin(a);                       /* the index and slot let go of A */
	viewset_unpin(b);
	index_close(ix);
	viewset_slot_release(&slot);
	obj_meta_release(&e1);
	obj_meta_release(&e2);
	unit_rmtree(dir);
	free(dir);
}

int main(void)
{
	test_lookup_and_needs();
	test_sharing_and_swap();
	test_pin_while_swapping();
	test_index_install_and_apply_for();
	return unit_exit();
}
