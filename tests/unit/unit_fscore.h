/*
 * unit_fscore.h — the "gateway" the tests of the file-system core drive
 * (include after unit.h and unit_views.h): a LevelDB index, a staging
 * directory (on tmpfs when there is one: the staging journal fsyncs at
 * every step), an inode table and a core (fuse/core.h) over a given S3
 * (the fake, or the fault wrapper around it), with two writable views on
 * one bucket: "s" (session, keys s/...) and "c" (commit, keys c/...), in
 * a view-set slot as the gateway keeps them. Each gateway's core runs one
 * long request, gw->rq: gw_open() pins its view set (core_req_begin)
 * until gw_close() (the tests change no view set).
 * gw_open_start() starts one on a copy of an earlier one's staging
 * directory, recovered as the gateway does (defer_commits). A set-up
 * that fails prints why and exits 2.
 */
#ifndef FACETFS_TEST_UNIT_FSCORE_H
#define FACETFS_TEST_UNIT_FSCORE_H

#include "common/stats.h"
#include "fuse/core.h"
#include "fuse/inode.h"
#include "sync/stage/stage.h"
#include "views/viewset.h"

#include <stdint.h>

#define BUCKET "b"

struct gw {                      /* one gateway */
	char *dir;
	struct stats st;
	struct index *ix;
	struct stage *stage;
	struct inode_table *it;
	struct viewset_slot slot;
	struct core *core;
	struct core_req rq;              /* the one long request (gw_open) */
	uint64_t view_ino[2];            /* the views' directories, looked up */
};

static const char *const unit_fscore_view_json[2] __attribute__((unused)) = {
	"{ \"name\": \"s\", \"bucket\": \"" BUCKET "\", \"match\": { \"prefix\": \"s/\" },"
	"  \"layout\": { \"strip_prefix\": \"s/\" }, \"writable\": true,"
	"  \"visibility\": \"session\" }",
	"{ \"name\": \"c\", \"bucket\": \"" BUCKET "\", \"match\": { \"prefix\": \"c/\" },"
	"  \"layout\": { \"strip_prefix\": \"c/\" }, \"writable\": true,"
	"  \"visibility\": \"commit\" }",
};

static inline char *unit_fscore_tmpdir(const char *tag)
{
	char *t = NULL;
	/* tmpfs when there is one: the staging journal fsyncs at every step */
	if (asprintf(&t, "/dev/shm/facetfs-test-%s-XXXXXX", tag) >= 0 && mkdtemp(t))
		return t;
	free(t);
	return unit_tmpdir(tag);
}

/* What the gateways opened next take the store to honour of conditional
 * PUTs (core_deps.cond): none unless a test says so. */
static struct s3_cond_caps unit_fscore_cond __attribute__((unused));

/* Called after each journal write of the stages opened next (a crash
 * point, sync/stage/stage.h jnl_changed): none unless a test says so. */
static void (*unit_fscore_jnl_hook)(void *ctx) __attribute__((unused));
static void *unit_fscore_jnl_ctx __attribute__((unused));

/* The inode table's resolver: a view name in the set of the request the
 * core gives as its context. */
static inline size_t gw_resolve(const void *ctx, const char *name)
{
	return core_view_find(ctx, name);
}

/* A gateway started after another one stopped: its staging directory
 * is a copy of from (NULL: empty), recovered with defer_commits as the
 * gateway recovers it (rep: what recovery did; NULL when from is). */
struct gw_start {
	const char *from;
	struct stage_recovery_report *rep;
};

/* views: the two views of unit_fscore_view_json, loaded; cc: when copies
 * go in parts (sync/stage/copy.h), NULL for the defaults; max_bytes: the
 * staging budget; start: NULL, or the staging of an earlier run. */
static inline void gw_open_start(struct view *const *views, struct s3 *s3,
				 struct gw *gw, const char *tag,
				 const struct copy_conf *cc, uint64_t max_bytes,
				 const struct gw_start *start)
{
	gw->dir = unit_fscore_tmpdir(tag);
	stats_init(&gw->st);
	char path[512];
	snprintf(path, sizeof path, "%s/state", gw->dir);
	gw->ix = unit_index_open(path, &gw->st);
	viewset_slot_init(&gw->slot, NULL);
	if (unit_set_views_slot(gw->ix, views, 2, &gw->slot) < 0) {
		printf("# index_set_views failed\n");
		exit(2);
	}
	snprintf(path, sizeof path, "%s/staging", gw->dir);
	if (start && start->from) {
		char cmd[1400];
		snprintf(cmd, sizeof cmd, "mkdir -p '%s' && cp -a '%s/.' '%s/'", path,
			 start->from, path);
		if (system(cmd) != 0) {
			printf("# cannot copy %s\n", start->from);
			exit(2);
		}
	}
	struct stage_conf sc = { .dir = path, .max_bytes = max_bytes, .s3 = s3,
				 .defer_commits = start && start->from,
				 .jnl_changed = unit_fscore_jnl_hook,
				 .jnl_ctx = unit_fscore_jnl_ctx };
	int rc = stage_open(&sc, &gw->stage);
	if (rc == 0 && start && start->from)
		rc = stage_recover(gw->stage, start->rep);
	if (rc == 0)
		rc = inode_table_new(gw_resolve, &gw->it);
	struct core_deps deps = { .ix = gw->ix, .s3 = s3, .stage = gw->stage,
				  .st = &gw->st, .views = &gw->slot, .it = gw->it,
				  .cond = unit_fscore_cond };
	if (cc)
		deps.copy = *cc;
	if (rc == 0)
		rc = core_new(&deps, &gw->core);
	if (rc == 0)
		core_req_begin(gw->core, &gw->rq);
	struct core_entry e;
	for (int v = 0; rc == 0 && v < 2; v++) {
		rc = core_lookup(&gw->rq, INODE_ROOT, view_name(views[v]), &e);
		gw->view_ino[v] = e.ino;
	}
	if (rc < 0) {
		printf("# gateway set-up: %s\n", strerror(-rc));
		exit(2);
	}
}

static inline void gw_open_budget(struct view *const *views, struct s3 *s3,
				  struct gw *gw, const char *tag,
				  const struct copy_conf *cc, uint64_t max_bytes)
{
	gw_open_start(views, s3, gw, tag, cc, max_bytes, NULL);
}

static inline void gw_open_copy(struct view *const *views, struct s3 *s3,
				struct gw *gw, const char *tag,
				const struct copy_conf *cc)
{
	gw_open_budget(views, s3, gw, tag, cc, 1ull << 30);
}

static inline void gw_open(struct view *const *views, struct s3 *s3, struct gw *gw,
			   const char *tag)
{
	gw_open_copy(views, s3, gw, tag, NULL);
}

static inline void gw_close(struct gw *gw)
{
	core_req_end(&gw->rq);
	core_free(gw->core);
	inode_table_free(gw->it);
	stage_close(gw->stage);
	index_close(gw->ix);
	viewset_slot_release(&gw->slot);
	stats_release(&gw->st);
	unit_rmtree(gw->dir);
	free(gw->dir);
}

#endif
