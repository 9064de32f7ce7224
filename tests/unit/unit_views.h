/*
 * unit_views.h — view and index helpers for the unit tests of views/ and
 * the modules above it (include after unit.h). A filter that does not
 * load or an index that does not open is a broken test, not a failed
 * check: both print why and exit 2.
 */
#ifndef FACETFS_TEST_UNIT_VIEWS_H
#define FACETFS_TEST_UNIT_VIEWS_H

#include "views/filter.h"
#include "views/index.h"
#include "views/viewset.h"

/* The view of a filter file's text (named "t.json" in messages). */
static inline struct view *unit_view(const char *json)
{
	struct view *v = NULL;
	struct diag d = { 0 };
	int rc = view_load_buf("t.json", json, strlen(json), &v, &d);
	if (rc < 0) {
		printf("# view load failed (%d): %s\n", rc, d.n ? d.lines[0] : "");
		exit(2);
	}
	diag_release(&d);
	return v;
}

/* index_open(dir, st) or exit 2. */
static inline struct index *unit_index_open(const char *dir, struct stats *st)
{
	struct index *ix;
	char err[256];
	if (index_open(dir, st, &ix, err, sizeof err) < 0) {
		printf("# index_open: %s\n", err);
		exit(2);
	}
	return ix;
}

/* The views last installed with unit_set_views (tests are one thread):
 * unit_v(i) is view i of them (NULL beyond), unit_view_index(name) the
 * index of a name (-1 if none), for tests written with view indexes. */
static struct view *const *unit_cur_views;
static size_t unit_cur_n;

static inline struct view *unit_v(size_t i)
{
	return i < unit_cur_n ? unit_cur_views[i] : NULL;
}

static inline long unit_view_index(const char *name)
{
	for (size_t i = 0; i < unit_cur_n; i++)
		if (strcmp(view_name(unit_cur_views[i]), name) == 0)
			return (long)i;
	return -1;
}

/* index_set_views with a set that borrows views[0..n) (the test frees
 * them, after the index let go: the next set or index_close), published
 * into slot when it is not NULL (the gateway's arrangement). */
static inline int unit_set_views_slot(struct index *ix, struct view *const *views,
				      size_t n, struct viewset_slot *slot)
{
	unit_cur_views = views;
	unit_cur_n = n;
	struct viewset *vs;
	int rc = viewset_new(n, &vs);
	for (size_t i = 0; rc == 0 && i < n; i++)
		rc = viewset_add_borrowed(vs, views[i]);
	if (rc == 0)
		rc = viewset_seal(vs);
	if (rc == 0)
		rc = index_set_views(ix, vs, slot);
	viewset_unpin(vs);
	return rc;
}

static inline int unit_set_views(struct index *ix, struct view *const *views, size_t n)
{
	return unit_set_views_slot(ix, views, n, NULL);
}

#endif
