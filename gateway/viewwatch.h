/*
 * viewwatch.h — notices changes to the filter files in views_dir (inotify)
 * and tells the gateway, which reloads the view set while mounted.
 *
 * Only names ending in ".json" and not starting with '.' count (editors'
 * temporary and swap files are ignored). Events are debounced: changed()
 * runs once a burst has been quiet for 100 ms, on the watcher's own thread,
 * never twice at once. viewwatch_stop() returns within about 200 ms.
 * The watcher thread must be started with SIGINT/SIGTERM/SIGHUP blocked.
 *
 * Tests: no unit test; t_liveviews.sh, t_reload.sh.
 */
#ifndef FACETFS_VIEWWATCH_H
#define FACETFS_VIEWWATCH_H

struct viewwatch;

int viewwatch_start(const char *dir, void (*changed)(void *ctx), void *ctx,
		    struct viewwatch **out);
void viewwatch_stop(struct viewwatch *w);

#endif
