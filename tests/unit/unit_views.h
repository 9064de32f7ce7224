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

#endif
