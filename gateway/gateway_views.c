/* gateway_views.c — live view changes: the filter files changed, the next
 * view set is built, installed in the index and made current (see
 * gateway_int.h). */
#include "gateway/gateway_int.h"

#include "common/lock.h"
#include "common/log.h"
#include "fuse/fs.h"
#include "views/filter.h"
#include "views/index.h"
#include "views/scan.h"
#include "views/viewset.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void gw_errors_set(struct gateway *gw, struct view_error *errs, size_t n)
{
	mod_lock(&gw->err_lock);
	struct view_error *old = gw->errors;
	size_t nold = gw->n_errors;
	gw->errors = errs;
	gw->n_errors = n;
	mod_unlock(&gw->err_lock);
	for (size_t i = 0; i < nold; i++) {
		free(old[i].file);
		free(old[i].text);
	}
	free(old);
}

/* Does the (maybe unsealed) set hold a view called name? */
static bool has_name(const struct viewset *vs, const char *name)
{
	for (size_t i = 0; i < viewset_count(vs); i++)
		if (strcmp(view_name(viewset_view(vs, i)), name) == 0)
			return true;
	return false;
}

static double ms_since(const struct timespec *t0)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t0->tv_sec) * 1e3 + (double)(t.tv_nsec - t0->tv_nsec) / 1e6;
}

/* The next set from the filter files: a valid file gives its view (the
 * running one, shared, when the definition is the same); an invalid one
 * keeps its previous view (if its file still exists). Errors go to
 * .facetfs/views. NULL when memory is short (the old set stays). */
static struct viewset *next_set(struct gateway *gw, struct viewset *old)
{
	struct diag d = { 0 };
	struct view **loaded = NULL;
	size_t n_loaded = 0;
	view_load_dir(gw->cfg.views_dir, &loaded, &n_loaded, &d);

	/* Errors by file ("FILE: PATH: reason"). */
	struct view_error *errs = calloc(d.n + 1, sizeof *errs);
	size_t n_errs = 0;
	for (size_t i = 0; errs && i < d.n; i++) {
		log_warn("views: %s", d.lines[i]);
		const char *colon = strstr(d.lines[i], ": ");
		if (!colon)
			continue;
		errs[n_errs].file = strndup(d.lines[i], (size_t)(colon - d.lines[i]));
		errs[n_errs].text = strdup(d.lines[i]);
		n_errs++;
	}
	diag_release(&d);

	struct viewset *next = NULL;
	int rc = errs ? viewset_new(n_loaded + viewset_count(old), &next) : -ENOMEM;
	for (size_t i = 0; i < n_loaded; i++) {
		struct view *v = loaded[i];
		size_t oi = viewset_find(old, view_name(v));
		const struct view *ov = viewset_view(old, oi);
		if (rc < 0) {
			view_free(v);
		} else if (ov && view_hash(ov) == view_hash(v) &&
			   strcmp(view_source(ov), view_source(v)) == 0) {
			rc = viewset_add_shared(next, old, oi);   /* unchanged: keep it */
			view_free(v);
		} else {
			rc = viewset_add(next, v);               /* takes v, also on error */
		}
	}
	free(loaded);
	/* Invalid edits keep the previous version of their file's view. */
	for (size_t i = 0; rc == 0 && i < viewset_count(old); i++) {
		const struct view *ov = viewset_view(old, i);
		bool file_has_error = false;
		for (size_t e = 0; e < n_errs; e++)
			file_has_error |= strcmp(errs[e].file, view_source(ov)) == 0;
		if (file_has_error && !has_name(next, view_name(ov)) &&
		    access(view_source(ov), F_OK) == 0)
			rc = viewset_add_shared(next, old, i);
	}
	gw_errors_set(gw, errs, n_errs);
	if (rc == 0)
		rc = viewset_seal(next);
	if (rc < 0) {
		log_error("views: out of memory reloading %s; keeping the views", gw->cfg.views_dir);
		viewset_unpin(next);
		return NULL;
	}
	return next;
}

/* The filter files changed: build the next set, install it in the index
 * (membership of new or changed views rebuilt from the index; no bucket is
 * listed again unless it is new), which makes it current, then start first
 * scans and tell the mount what changed. Requests in flight keep the set
 * they pinned: nothing here waits for them. Runs on the watcher thread
 * (never twice at once), the only thread that changes the current set. */
void gw_views_reload(void *ctx)
{
	struct gateway *gw = ctx;
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	struct viewset *old = viewset_slot_pin(&gw->views);
	struct viewset *next = next_set(gw, old);
	if (!next) {
		viewset_unpin(old);
		return;
	}
	size_t n_old = viewset_count(old), n_next = viewset_count(next);
	bool changed = n_next != n_old;
	for (size_t i = 0; i < n_next && !changed; i++)
		changed = !viewset_holds(old, viewset_view(next, i));
	if (!changed) {
		viewset_unpin(next);
		viewset_unpin(old);
		log_info("views: filter files changed, view set unchanged");
		return;
	}
	int rc = index_set_views(gw->ix, next, &gw->views);
	if (rc < 0) {
		/* put the index (and with it the current set) back to the old set */
		int rc2 = index_set_views(gw->ix, old, &gw->views);
		log_error("views: installing the new view set failed: %s; %s", strerror(-rc),
			  rc2 < 0 ? "going back to the old one failed too" : "keeping the old one");
		viewset_unpin(next);
		viewset_unpin(old);
		return;
	}
	double ms = ms_since(&t0);
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);

	/* New buckets get their first scan. */
	scan_start_views(gw->scan, viewset_views(next), n_next);
	unsigned added = 0, removed = 0, updated = 0;
	for (size_t i = 0; i < n_next; i++) {
		const struct view *v = viewset_view(next, i);
		if (viewset_holds(old, v))
			continue;
		viewset_find(old, view_name(v)) != VIEWSET_NONE ? updated++ : added++;
		if (gw->fs)
			fs_view_changed(gw->fs, view_name(v));
	}
	for (size_t i = 0; i < n_old; i++) {
		const struct view *v = viewset_view(old, i);
		if (viewset_find(next, view_name(v)) == VIEWSET_NONE) {
			removed++;
			if (gw->fs)
				fs_view_changed(gw->fs, view_name(v));
		}
	}
	mod_lock(&gw->err_lock);
	gw->reloads++;
	gw->reload_last_ms = ms;
	gw->reload_last_at = (double)now.tv_sec + (double)now.tv_nsec / 1e9;
	if (ms > gw->reload_max_ms)
		gw->reload_max_ms = ms;
	mod_unlock(&gw->err_lock);
	log_info("views: %u added, %u changed, %u removed (%zu now) in %.1f ms", added,
		 updated, removed, n_next, ms);
	viewset_unpin(next);
	viewset_unpin(old);          /* freed here or by the last request holding it */
}
