/*
 * test_drain_fds.c — the files a write-back drain holds hold no
 * descriptor (the core parks a staged file when a writable descriptor of
 * it is released: fuse/core_io.c core_file_close, sync/stage/stage.h
 * stage_file_park), through the file-system core over the fake store:
 * files created, written and closed in a write-back view while the drain
 * waits an hour, under a soft limit of descriptors a hundred above what
 * the process holds, all close without error, the process holds no more
 * descriptors than before, each reads its bytes, and a sync publishes
 * each with its bytes.
 */
#include "unit.h"
#include "unit_views.h"
#include "unit_fscore.h"
#include "unit_stage.h"

#include "common/log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#define FILES 600                /* closed into the write-back view */
#define ROOM 100                 /* descriptors allowed above the start */

static const char *const view_json[2] = {
	"{ \"name\": \"w\", \"bucket\": \"b\", \"match\": { \"prefix\": \"w/\" },"
	"  \"layout\": { \"strip_prefix\": \"w/\" }, \"writable\": true,"
	"  \"visibility\": \"eventual\", \"write_back\": true }",
	"{ \"name\": \"s\", \"bucket\": \"b\", \"match\": { \"prefix\": \"s/\" },"
	"  \"layout\": { \"strip_prefix\": \"s/\" }, \"writable\": true,"
	"  \"visibility\": \"session\" }",
};

/* Descriptors the process holds (/proc/self/fd, less the listing's), or
 * -1 when the listing cannot be opened (EMFILE). */
static int fds_open(void)
{
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return -1;
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n - 1;
}

static void body_of(int i, char *buf, size_t len)
{
	snprintf(buf, len, "pending file %d, %*s", i, i % 50, "");
}

/* Create name in the write-back view with text and close it: 0 or -errno. */
static int put_file(struct gw *gw, const char *name, const char *text)
{
	struct core_req *rq = &gw->rq;
	struct core_entry e;
	struct core_file *f = NULL;
	struct core_open_cache cache;
	int rc = core_create(rq, gw->view_ino[0], name, NULL, &e, &f, &cache);
	ssize_t n = rc == 0 ? core_write(rq, f, text, strlen(text), 0) : rc;
	if (n >= 0 && (size_t)n != strlen(text))
		n = -EIO;
	rc = n < 0 ? (int)n : core_flush(rq, f);
	core_release(rq, f);
	return rc;
}

/* Whether name reads text through the core (the staged copy). */
static bool reads(struct gw *gw, const char *name, const char *text)
{
	struct core_req *rq = &gw->rq;
	struct core_entry e;
	struct core_file *f = NULL;
	struct core_open_cache cache;
	char buf[128] = "";
	ssize_t n = -1;
	if (core_lookup(rq, gw->view_ino[0], name, &e) == 0 &&
	    core_open(rq, e.ino, O_RDONLY, &f, &cache) == 0)
		n = core_read(rq, f, buf, sizeof buf - 1, 0);
	core_release(rq, f);
	return n == (ssize_t)strlen(text) && memcmp(buf, text, (size_t)n) == 0;
}

int main(void)
{
	log_init("test_drain_fds", getenv("STAGE_DEBUG") ? 2 : 0);
	struct view *views[2] = { unit_view(view_json[0]), unit_view(view_json[1]) };
	struct store t;
	store_init(&t, 0);
	struct gw gw;
	gw_open(views, t.s3, &gw, "drain-fds");
	struct core_drain_conf dc = { .streams = 2, .delay_s = 3600, .stop_s = 5 };
	CHECK(core_drain_new(gw.core, &dc) == 0, "the drain starts");

	int before = fds_open();
	struct rlimit was, low;
	getrlimit(RLIMIT_NOFILE, &was);
	low = was;
	low.rlim_cur = (rlim_t)(before + ROOM) < was.rlim_max ? (rlim_t)(before + ROOM)
							      : was.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &low) != 0) {
		printf("# cannot lower the descriptor limit\n");
		exit(2);
	}
	char name[32], text[128];
	int bad = 0, first_bad = -1;
	for (int i = 0; i < FILES; i++) {
		snprintf(name, sizeof name, "f%d", i);
		body_of(i, text, sizeof text);
		int rc = put_file(&gw, name, text);
		if (rc && first_bad < 0)
			first_bad = i;
		bad += rc != 0;
	}
	int after = fds_open();
	uint64_t files, bytes;
	core_drain_pending(gw.core, &files, &bytes);
	struct stage_counters sc;
	stage_counters_get(gw.stage, &sc);
	CHECK(!bad && files == FILES && after == before && sc.data_fds == 0,
	      "%d files closed into a write-back view under a limit of %d descriptors: "
	      "%d failed (the first: %d), %llu pending; descriptors %d before, %d "
	      "after, %llu held by staged files", FILES, (int)low.rlim_cur, bad,
	      first_bad, (unsigned long long)files, before, after,
	      (unsigned long long)sc.data_fds);

	int wrong = 0;
	for (int i = 0; i < FILES; i++) {
		snprintf(name, sizeof name, "f%d", i);
		body_of(i, text, sizeof text);
		wrong += !reads(&gw, name, text);
	}
	CHECK(!wrong && fds_open() == before, "each pending file reads its bytes "
	      "(%d wrong); descriptors %d", wrong, fds_open());

	char *report = NULL;
	int rc = core_drain_sync(gw.core, NULL, NULL, 60, &report);
	wrong = 0;
	for (int i = 0; i < FILES; i++) {
		char key[32];
		snprintf(key, sizeof key, "w/f%d", i);
		body_of(i, text, sizeof text);
		wrong += !s3_has(&t, key, text);
	}
	stage_counters_get(gw.stage, &sc);
	CHECK(rc == 0 && !wrong && fds_open() == before && sc.data_fds == 0,
	      "sync: %s; each file in the store with its bytes (%d wrong); "
	      "descriptors %d", rc ? strerror(-rc) : "0", wrong, fds_open());
	free(report);
	setrlimit(RLIMIT_NOFILE, &was);
	core_drain_free(gw.core);
	gw_close(&gw);
	store_release(&t);
	view_free(views[0]);
	view_free(views[1]);
	return unit_exit();
}
