/*
 * fs.h — the FUSE mount (libfuse3 low-level API): a thin adapter over the
 * file-system core (fuse/core.h), which holds the logic.
 *
 * The root holds one directory per view and .facetfs/ (stats, views,
 * control). A view's directory shows its index membership: listing and stat
 * are answered from the index alone (views/index.h), file data comes through
 * sync/visibility.h. Entry and attribute timeouts are long; correctness comes
 * from fs_notify_change(), which the event pipeline calls after each durable
 * index change and which invalidates exactly the kernel cache entries that
 * the kernel can hold (inodes it looked up).
 *
 * Threads: fs_run() runs the multi-threaded FUSE loop on the calling thread
 * (normally main) until unmount, SIGINT, SIGTERM or SIGHUP; fuse installs
 * the signal handlers, so every other thread must block those signals.
 * fs_notify_change() may be called from any thread: it only queues; one
 * notifier thread tells the kernel. The views array stays in use until the
 * next fs_views_set() (the core reads it), the providers in struct fs_deps
 * until fs_free().
 */
#ifndef FACETFS_FS_H
#define FACETFS_FS_H

#include <pthread.h>
#include <stddef.h>

struct index;
struct view;
struct s3;
struct stage;
struct stats;
struct fs;

struct fs_deps {
	struct index *ix;
	struct view *const *views;
	size_t n_views;
	struct s3 *s3;
	struct stage *stage;         /* write staging (sync/stage.h) */
	struct stats *st;
	/* Taken for reading around every request and by the event pipeline;
	 * the gateway takes it for writing to change the view set. */
	pthread_rwlock_t *views_lock;
	/* Providers of the .facetfs/ files: each returns malloc'ed text (the
	 * caller frees) or NULL. control() runs one command written to
	 * .facetfs/control and returns the answer. */
	void *ctx;
	char *(*stats_json)(void *ctx);
	char *(*views_json)(void *ctx);
	char *(*control)(void *ctx, const char *command);
};

/* Mount at mountpoint. fuse_opts is a comma-separated -o string or NULL.
 * A mountpoint left stale by a crashed gateway is unmounted first. */
int fs_mount(const char *mountpoint, const char *fuse_opts,
	     const struct fs_deps *deps, struct fs **out);
/* Serve requests until unmounted or signalled; 0 on a clean stop. */
int fs_run(struct fs *fs);
/* Unmount (if still mounted) and free. */
void fs_free(struct fs *fs);

/* Install a new view set (live view changes). The caller holds
 * views_lock for writing: no request is running. Inodes, open files and
 * made directories follow their view by name; those of views that are gone
 * answer ENOENT. Afterwards (lock released) call fs_view_changed() for every
 * view name added, removed or changed, so the kernel forgets what it cached. */
void fs_views_set(struct fs *fs, struct view *const *views, size_t n);
void fs_view_changed(struct fs *fs, const char *name);

/* A view's membership changed at path (what: INDEX_ADDED, INDEX_REMOVED,
 * INDEX_CHANGED from views/index.h). */
void fs_notify_change(struct fs *fs, size_t view, const char *path, int what);

#endif
