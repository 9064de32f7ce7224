/*
 * gateway_int.h — the gateway's context, shared by its four files
 * (gateway.h has the whole contract). Calls go one way: gateway.c (start-up,
 * shut-down, the mount) calls into gateway_files.c (what .facetfs/ and
 * /metrics show) and gateway_views.c (live view changes); gateway.c and
 * gateway_files.c call gateway_fresh.c (how current the views are,
 * facetfs wait), which calls none of them; none calls back into
 * gateway.c, and gateway_views.c and gateway_files.c not into each other.
 *
 * Tests: no unit test (the pieces have theirs); t_mount.sh, t_writeback.sh,
 * t_wbrestart.sh.
 */
#ifndef FACETFS_GATEWAY_INT_H
#define FACETFS_GATEWAY_INT_H

#include "common/s3.h"
#include "common/stats.h"
#include "gateway/config.h"
#include "views/viewset.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* A filter file whose last edit is invalid: the previous version of its
 * view (if any) keeps running; the error shows in .facetfs/views. */
struct view_error {
	char *file;
	char *text;
};

/* The "memory" section of .facetfs/stats and /metrics: what the gateway
 * holds, part by part (docs/operations.md "Memory"), read from each
 * module when the stats are rendered (gw_gauges_read). */
struct gw_memory {
	stats_counter rss, inodes, inode_bytes, dir_handles, dir_bytes, index_bytes,
		      filter_bytes, readahead_bytes;
};


struct gateway {
	struct config cfg;
	struct stats st;
	struct gw_memory mem;        /* registered with st (mem_grp) */
	struct stats_group mem_grp;
	struct fs *_Atomic mem_fs;   /* the mount, for gw_gauges_read (another
				      * thread: /metrics) */
	/* The current view set: pinned by FUSE requests, event batches and
	 * the .facetfs/ providers; made current by index_set_views() (start-up,
	 * views_reload() on the watcher). */
	struct viewset_slot views;
	pthread_mutex_t err_lock;    /* protects errors and the reload figures */
	struct view_error *errors;
	size_t n_errors;
	unsigned reloads;            /* view sets installed by views_reload() */
	double reload_last_ms, reload_max_ms;
	double reload_last_at;       /* when the last one became current (epoch s) */
	struct viewwatch *watch;
	struct index *ix;
	struct s3 *s3;
	/* What the store honours of a PUT's conditions (sync/stage/probe.h), probed
	 * once at start on the first writable view's bucket; set before the
	 * mount, read-only after. */
	struct s3_cond_caps cond;
	int cond_probe;              /* 0 probed, 1 not (no writable view),
				      * -errno the probe could not write */
	struct scanner *scan;
	struct stage *stage;
	struct bcache *bc;           /* the burst buffer's clean blocks */
	int cache_lock_fd;           /* cache.dir/lock held (-1: none) */
	pthread_mutex_t cache_lock_mu; /* a retake of it after a removal */
	struct pins *pins;           /* versions open readers hold */
	struct reader_pool *rpool;   /* read-ahead bounds across readers */
	struct warm *warm;           /* warm on arrival */
	struct consumer *cons;
	struct ingest *ing;
	struct fs *fs;
	const char *config_path;
	struct creds_renewer *renew; /* credentials renewal (refused requests, SIGHUP, expiry) */
	struct metrics *metrics;     /* /metrics, when configured */
	struct trace *trace;         /* `facetfs trace` recorder (off until started) */
	int ready_fd;            /* pipe to the waiting parent, -1 in foreground */
	bool pid_written;        /* STATE_DIR/facetfs.pid is ours (background) */
};

/* ---- gateway_files.c: .facetfs/ providers and /metrics ---- */

/* Registers the "memory" section with gw->st (removed by
 * stats_group_remove(&gw->mem_grp)). */
void gw_memory_add(struct gateway *gw);
/* .facetfs/views, .facetfs/control, .facetfs/stats and /metrics: each
 * returns a malloc'ed text (NULL when memory is short); ctx is the
 * gateway. */
char *gw_views_json(void *ctx);
char *gw_control(void *ctx, const char *command);
char *gw_stats_text(void *ctx);
char *gw_metrics_text(void *ctx);
/* sync/stage/copy.h's left_open hook: the stage records the upload. */
void gw_copy_left_open(void *ctx, const char *bucket, const char *key, int64_t since_ns);

/* ---- gateway_fresh.c: how current the views are; facetfs wait ---- */

/* How fresh view v is: known, every event produced before fresh_ms (wall
 * clock) applied, text its ISO 8601 time (UTC, ms); else text says why
 * not ("scanning", "partitions 3 of 4 assigned", "no partition
 * assigned", "catching up"). */
struct gw_fresh {
	bool known;
	int64_t fresh_ms;
	char text[48];
};
struct view;
void gw_freshness(struct gateway *gw, const struct view *v, struct gw_fresh *out);
/* core_deps.fresh_as_of: user.facetfs.fresh_as_of of a view's directory. */
int  gw_fresh_as_of(void *ctx, const char *vname, char *out, size_t outlen);
int64_t gw_wall_ms(void);
/* The control command "wait TIMEOUT_MS [--probe] [VIEW...]" (args: what
 * follows "wait "): its answer, malloc'ed ("ok: ..." or "error: ..."). */
char *gw_control_wait(struct gateway *gw, const char *args);

/* ---- gateway_views.c: live view changes ---- */

/* The watcher's callback (viewwatch.h): the filter files changed. */
void gw_views_reload(void *ctx);
/* Replaces the errors of invalid filter files shown in .facetfs/views
 * (takes errs; NULL, 0 frees them). */
void gw_errors_set(struct gateway *gw, struct view_error *errs, size_t n);

#endif
