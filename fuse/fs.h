/*
 * fs.h — the FUSE mount (libfuse3 low-level API): a thin adapter over the
 * file-system core (fuse/core.h), which holds the logic.
 *
 * The root holds one directory per view and .facetfs/ (stats, views,
 * control). A view's directory shows its index membership: listing and stat
 * are answered from the index alone (views/index.h), file data comes through
 * sync/cache/visibility.h. Entry and attribute timeouts are long; correctness comes
 * from fs_notify_change(), which the event pipeline calls after each durable
 * index change and which invalidates exactly the kernel cache entries that
 * the kernel can hold (inodes it looked up).
 *
 * Threads: fs_run() runs the multi-threaded FUSE loop on the calling thread
 * (normally main) until unmount, SIGINT, SIGTERM or SIGHUP; fuse installs
 * the signal handlers, so every other thread must block those signals.
 * fs_notify_change() and fs_view_changed() may be called from any thread,
 * also with the index's write mutex held (change callbacks) or from a FUSE
 * worker (the mount's own changes): they only queue the work, under a leaf
 * lock; the notifier thread tells the kernel, holding no lock.
 *
 * The view set: every request pins the slot's current set (views/viewset.h)
 * when it starts and unpins it when it ends, so a request sees one set from
 * start to end and a reload never waits for a request (nor for its S3
 * calls). View indexes are only ever used inside the request that pinned
 * their set; inodes, open files, made directories, descriptors and queued
 * invalidations keep the view's name and find it again in the set of the
 * request that reads them (a view that is gone: ENOENT). A request that
 * began before a reload ends with the old set: its index reads go by view
 * name (a changed view shows its rebuilt membership, a removed one
 * nothing), and what it writes to the index (a flush's own change) is
 * applied for the set installed by then, as an event would be. An open
 * descriptor keeps the bucket and key it opened; the view's properties
 * (visibility, writable) come from each request's set. The slot and the
 * providers in struct fs_deps must outlive the fs. Locks: docs/design.md
 * "Lock order".
 *
 * Tests: no unit test (the libfuse adapter); t_mount.sh, t_write.sh,
 * t_owner.sh, t_bigdir.sh, tests/posix (pjdfstest).
 */
#ifndef FACETFS_FS_H
#define FACETFS_FS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/s3.h"

struct index;
struct viewset_slot;
struct s3;
struct stage;
struct stats;
struct fs;
struct trace;
struct copy_conf;

struct bcache;
struct pins;
struct reader_pool;

struct fs_deps {
	struct index *ix;
	struct viewset_slot *views;  /* the current view set, pinned per request */
	struct s3 *s3;
	struct stage *stage;         /* write staging (sync/stage/stage.h) */
	struct bcache *bc;           /* the burst buffer's blocks; NULL: none */
	struct pins *pins;           /* versions open readers hold (with bc) */
	struct reader_pool *rpool;   /* read-ahead bounds across readers; NULL: none */
	bool cold_direct;            /* direct I/O for cold streams (fuse/core.h) */
	struct stats *st;
	struct copy_conf *copy;      /* server-side copies (sync/stage/copy.h); NULL: defaults */
	/* Providers of the .facetfs/ files: each returns malloc'ed text (the
	 * caller frees) or NULL. control() runs one command written to
	 * .facetfs/control and returns the answer. */
	void *ctx;
	char *(*stats_json)(void *ctx);
	char *(*views_json)(void *ctx);
	char *(*control)(void *ctx, const char *command);
	/* user.facetfs.fresh_as_of of a view's directory (core.h); NULL: none. */
	int (*fresh_as_of)(void *ctx, const char *vname, char *out, size_t outlen);
	/* The I/O recorder (common/trace.h), or NULL: each file request is
	 * recorded while it is on; off, it costs one relaxed atomic load. */
	struct trace *trace;
	/* Write-back views' drain: uploads in parallel (0: 8), seconds a
	 * closed file waits, seconds a stop keeps draining. */
	unsigned drain_streams, drain_delay_s, stop_drain_s;
	/* What the store honours of a PUT's conditions (sync/stage/probe.h). */
	struct s3_cond_caps cond;
};

/* Mount at mountpoint. fuse_opts is a comma-separated -o string or NULL.
 * A mountpoint left stale by a crashed gateway is unmounted first. */
int fs_mount(const char *mountpoint, const char *fuse_opts,
	     const struct fs_deps *deps, struct fs **out);
/* After fs_mount, before fs_run: the files the stage's recovery left
 * (stage_conf.defer_commits) join write-back's drain, due at once, so
 * that the mount shows them from its first request and publishes them
 * behind it (core_drain_adopt_all); then the names a crash left in the
 * index as unsent, held by no pending file, get S3's version of their
 * key (core_mend_unsent). The number queued. */
int fs_adopt(struct fs *fs);
/* Serve requests until unmounted or signalled; 0 on a clean stop. */
int fs_run(struct fs *fs);
/* Unmount (if still mounted) and free. */
void fs_free(struct fs *fs);

/* `facetfs sync`: publish what write-back views hold pending (path:
 * "VIEW" or "VIEW/DIR..." or NULL for all) and wait; the answer text
 * (malloc'ed): "synced\n", or "error: ..." with one line per key left.
 * For all (NULL), also an error while staged files outside the drain
 * wait for the next start (stage_counters.pending_files). */
char *fs_sync(struct fs *fs, const char *path);
/* The drain's pending files and bytes now (0 without write-back). */
void fs_pending(struct fs *fs, uint64_t *files, uint64_t *bytes);

/* After a new view set was made current in the slot: call it for every
 * view name added, removed or changed, so the kernel forgets what it
 * cached of it (queued; no lock held by the caller is needed). */
void fs_view_changed(struct fs *fs, const char *name);

/* What the mount holds in memory now (fuse/inode.h, fuse/core.h): inodes
 * the kernel holds and the inode table's bytes; open directory handles
 * and their bytes. Any thread. */
struct fs_mem {
	size_t inodes, inode_bytes;
	size_t dir_handles, dir_bytes;
};
void fs_memory(struct fs *fs, struct fs_mem *out);
/* Brings the gauges computed when read (the drain's) up to date, before
 * the stats are rendered. Any thread. */
void fs_gauges(struct fs *fs);

/* The membership of the view called view changed at path (what:
 * INDEX_ADDED, INDEX_REMOVED, INDEX_CHANGED from views/index.h). */
void fs_notify_change(struct fs *fs, const char *view, const char *path, int what);
/* Wait until the kernel was told every change queued before the call:
 * 0, or -ETIMEDOUT after timeout_ms. From a request too (the notifier
 * takes no lock a request holds). */
int  fs_settle(struct fs *fs, int timeout_ms);

#endif
