/*
 * test_wbcrash.c — crash points inside namespace and metadata operations
 * on a sealed write-back file: rename (onto a free name and onto another
 * pending file), chmod, utimensat, setxattr and unlink. The stage calls
 * back after every journal write and removal (stage_conf.jnl_changed);
 * each call copies the staging directory as it is then. Every copy is
 * then recovered by a fresh stage into an empty store, as the next start
 * would, and must publish the file under one of its names, with its
 * bytes (or, for an unlink, under its name or not at all), never lose it
 * and never publish it twice; once the operation returned, where it left
 * it (an unlinked file not at all).
 */
#include "unit.h"
#include "unit_views.h"
#include "unit_fscore.h"
#include "unit_stage.h"

#include "sync/s3/s3_fake.h"
#include "sync/s3/s3_fault.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const view_json[2] = {
	"{ \"name\": \"w\", \"bucket\": \"b\", \"match\": { \"prefix\": \"w/\" },"
	"  \"layout\": { \"strip_prefix\": \"w/\" }, \"writable\": true,"
	"  \"visibility\": \"eventual\", \"write_back\": true }",
	"{ \"name\": \"r\", \"bucket\": \"b\", \"match\": { \"prefix\": \"w/\" },"
	"  \"layout\": { \"strip_prefix\": \"w/\" }, \"writable\": false,"
	"  \"visibility\": \"eventual\" }",
};

#define MAX_IMAGES 64

struct images {
	const char *staging;         /* what is copied */
	bool on;
	char *dir[MAX_IMAGES];
	unsigned n;
};

static void take_image(void *ctx)
{
	struct images *im = ctx;
	if (!im->on || im->n >= MAX_IMAGES)
		return;
	im->dir[im->n++] = stage_crash_copy(im->staging, "wbcrash-image");
}

/* What recovery of image publishes under w/a and w/b (each "" when none);
 * the image is removed and dir freed. */
static void recover_image(char *dir, char *a, char *b, size_t len)
{
	struct store t;
	struct stage *st = stage_crash_recover(dir, &t);
	const char *keys[2] = { "w/a", "w/b" };
	char *out[2] = { a, b };
	for (int i = 0; i < 2; i++) {
		size_t n = 0;
		char *o = obj_get(&t, "b", keys[i], &n, NULL, 0);
		snprintf(out[i], len, "%.*s", o ? (int)n : 0, o ? o : "");
		free(o);
	}
	stage_case_end(st, &t, dir);
}

static int put_file(struct gw *gw, const char *name, const char *text)
{
	struct core_req *rq = &gw->rq;
	struct core_entry e;
	struct core_file *f = NULL;
	struct core_open_cache cache;
	int rc = core_create(rq, gw->view_ino[0], name, NULL, &e, &f, &cache);
	ssize_t n = rc == 0 ? core_write(rq, f, text, strlen(text), 0) : rc;
	rc = n < 0 ? (int)n : core_flush(rq, f);
	core_release(rq, f);
	core_forget(rq, e.ino, 1);
	return rc;
}

enum op { OP_RENAME, OP_RENAME_OVER, OP_CHMOD, OP_UTIMENS, OP_SETXATTR, OP_UNLINK };

static const char *const op_names[] = { "rename", "rename onto a pending file",
					"chmod", "utimensat", "setxattr", "unlink" };

static int run_op(struct gw *gw, enum op op)
{
	struct core_req *rq = &gw->rq;
	if (op == OP_RENAME || op == OP_RENAME_OVER)
		return core_rename(rq, gw->view_ino[0], "a", gw->view_ino[0], "b", 0);
	if (op == OP_UNLINK)
		return core_unlink(rq, gw->view_ino[0], "a");
	struct core_entry e;
	int rc = core_lookup(rq, gw->view_ino[0], "a", &e);
	if (rc < 0)
		return rc;
	struct core_set set = { 0 };
	struct stat st;
	if (op == OP_CHMOD) {
		set.what = CORE_SET_MODE;
		set.mode = 0600;
		rc = core_setattr(rq, e.ino, NULL, &set, &st);
	} else if (op == OP_UTIMENS) {
		set.what = CORE_SET_MTIME | CORE_SET_ATIME;
		set.mtime.tv_sec = set.atime.tv_sec = 1000000000;
		rc = core_setattr(rq, e.ino, NULL, &set, &st);
	} else {
		rc = core_setxattr(rq, e.ino, "user.colour", "blue", 4, 0);
	}
	core_forget(rq, e.ino, 1);
	return rc;
}

/* One case: a (and for OP_RENAME_OVER b) sealed and pending, op with an
 * image after each journal write, each image recovered and checked. */
static void one_case(struct view *const *views, enum op op)
{
	struct store t;
	store_init(&t, 0);
	struct images im = { 0 };
	unit_fscore_jnl_hook = take_image;
	unit_fscore_jnl_ctx = &im;
	struct gw gw;
	gw_open(views, t.s3, &gw, "wbcrash");
	char staging[600];
	snprintf(staging, sizeof staging, "%s/staging", gw.dir);
	im.staging = staging;
	struct core_drain_conf dc = { .streams = 1, .delay_s = 3600, .stop_s = 5 };
	CHECK(core_drain_new(gw.core, &dc) == 0, "%s: the drain starts", op_names[op]);
	int rc = put_file(&gw, "a", "AAAA");
	if (rc == 0 && op == OP_RENAME_OVER)
		rc = put_file(&gw, "b", "BBBB");
	CHECK(rc == 0, "%s: the files are pending", op_names[op]);
	im.on = true;
	rc = run_op(&gw, op);
	take_image(&im);                     /* and once after it returned */
	im.on = false;
	CHECK(rc == 0, "%s of a sealed file: 0 (%s)", op_names[op], strerror(-rc));
	unsigned bad = 0;
	char why[512] = "";
	for (unsigned i = 0; i < im.n; i++) {
		char a[64], b[64];
		recover_image(im.dir[i], a, b, sizeof a);
		bool ok;
		if (op == OP_RENAME)        /* under one of its names, once */
			ok = (!strcmp(a, "AAAA") && !*b) || (!*a && !strcmp(b, "AAAA"));
		else if (op == OP_RENAME_OVER)   /* a's bytes survive; b's may */
			ok = (!strcmp(a, "AAAA") && (!strcmp(b, "BBBB") || !*b)) ||
			     (!*a && !strcmp(b, "AAAA"));
		else if (op == OP_UNLINK)
			ok = !strcmp(a, "AAAA") || !*a;
		else
			ok = !strcmp(a, "AAAA");
		if (i == im.n - 1)      /* after it returned: where it left it */
			ok = op == OP_UNLINK ? !*a && !*b
			     : op == OP_RENAME || op == OP_RENAME_OVER
			     ? !*a && !strcmp(b, "AAAA") : !strcmp(a, "AAAA");
		if (!ok && !bad++)
			snprintf(why, sizeof why, "image %u of %u: a=\"%s\" b=\"%s\"", i + 1,
				 im.n, a, b);
	}
	CHECK(!bad && im.n >= (op == OP_UNLINK ? 1u : 2u), "%s: %u crash points (after each journal write, and "
	      "after it returned) recover the file %s%s", op_names[op], im.n,
	      op == OP_UNLINK ? "or nothing (nothing once it returned)"
	      : "under one of its names", why);
	/* and the mount itself publishes it right */
	char *report = NULL;
	rc = core_drain_sync(gw.core, NULL, NULL, 30, &report);
	free(report);
	bool in_a = s3_has(&t, "w/a", "AAAA"), in_b = s3_has(&t, "w/b", "AAAA");
	CHECK(rc == 0 && (op == OP_UNLINK ? !in_a && !in_b
			  : op == OP_RENAME || op == OP_RENAME_OVER ? in_b && s3_has(&t, "w/a", NULL)
			  : in_a), "%s: the sync publishes it where the operation left it",
	      op_names[op]);
	core_drain_free(gw.core);
	gw_close(&gw);
	unit_fscore_jnl_hook = NULL;
	unit_fscore_jnl_ctx = NULL;
	store_release(&t);
}

int main(void)
{
	struct view *views[2] = { unit_view(view_json[0]), unit_view(view_json[1]) };
	for (enum op op = OP_RENAME; op <= OP_UNLINK; op++)
		one_case(views, op);
	view_free(views[0]);
	view_free(views[1]);
	return unit_exit();
}
