/*
 * test_drain.c — write-back's drain (fuse/core_drain.c) over the fake
 * store and the fault wrapper, through the file-system core: per key,
 * newest wins and order holds (PUTs and DELETEs counted by the fault
 * wrapper), a failure is retried and named, another client's version
 * wins a conflict; and after each step a crash image: the staging
 * directory copied as it is then, recovered by a fresh stage into an
 * empty store, which must receive exactly what the promise says (a closed
 * file is published, an unlinked one never, a renamed one under its new
 * name only).
 *
 * The drain runs with a delay of an hour, so nothing drains by itself:
 * core_drain_sync publishes, as `facetfs sync` does; a sync returns while
 * another thread closes a file again and again. Then, with no delay, a
 * burst of closes holds the drain until it pauses, or for a while; a
 * restart takes up what the first run left; a stop whose PUT the store
 * holds for 10 minutes returns after stop_drain and leaves the file
 * journaled; and a backlog of up to 100,000 files, under a limit of
 * 1,024 descriptors, is queued and published with the queue's work
 * counted (core_drain_steps), not its time.
 */
#include "unit.h"
#include "unit_views.h"
#include "unit_fscore.h"
#include "unit_stage.h"

#include "sync/s3/s3_fake.h"
#include "sync/s3/s3_fault.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const view_json[2] = {
	"{ \"name\": \"w\", \"bucket\": \"b\", \"match\": { \"prefix\": \"w/\" },"
	"  \"layout\": { \"strip_prefix\": \"w/\" }, \"writable\": true,"
	"  \"visibility\": \"eventual\", \"write_back\": true }",
	"{ \"name\": \"s\", \"bucket\": \"b\", \"match\": { \"prefix\": \"s/\" },"
	"  \"layout\": { \"strip_prefix\": \"s/\" }, \"writable\": true,"
	"  \"visibility\": \"session\" }",
};

static unsigned seen(struct store *t, enum s3_kind k)
{
	return (unsigned)s3_fault_seen(t->s3, k);
}

/* Create (or truncate) name in the write-back view with text, close it. */
static int put_file(struct gw *gw, const char *name, const char *text)
{
	struct core_req *rq = &gw->rq;
	struct core_entry e;
	struct core_file *f = NULL;
	struct core_open_cache cache;
	int rc = core_lookup(rq, gw->view_ino[0], name, &e);
	if (rc == 0)
		rc = core_open(rq, e.ino, O_WRONLY | O_TRUNC, &f, &cache);
	else if (rc == -ENOENT)
		rc = core_create(rq, gw->view_ino[0], name, NULL, &e, &f, &cache);
	ssize_t n = rc == 0 ? core_write(rq, f, text, strlen(text), 0) : rc;
	if (n >= 0 && (size_t)n != strlen(text))
		n = -EIO;
	rc = n < 0 ? (int)n : core_flush(rq, f);
	core_release(rq, f);
	return rc;
}

/* Read name through the core (from the staged copy while pending). */
static bool reads(struct gw *gw, const char *name, const char *want)
{
	struct core_req *rq = &gw->rq;
	struct core_entry e;
	struct core_file *f = NULL;
	struct core_open_cache cache;
	char buf[256] = "";
	ssize_t n = -1;
	if (core_lookup(rq, gw->view_ino[0], name, &e) == 0 &&
	    core_open(rq, e.ino, O_RDONLY, &f, &cache) == 0)
		n = core_read(rq, f, buf, sizeof buf - 1, 0);
	core_release(rq, f);
	return n == (ssize_t)strlen(want) && memcmp(buf, want, (size_t)n) == 0;
}

static int sync_all(struct gw *gw, char **report)
{
	return core_drain_sync(gw->core, NULL, NULL, 30, report);
}

/* A crash now: the staging directory copied, recovered by a fresh stage
 * into an empty store; *keys gets what that store holds under w/
 * ("k1=bytes;k2=bytes;"). */
static void crash_image(struct gw *gw, char *keys, size_t len)
{
	char staging[600];
	snprintf(staging, sizeof staging, "%s/staging", gw->dir);
	char *img = stage_crash_copy(staging, "drain-image");
	struct store t;
	struct stage *st = stage_crash_recover(img, &t);
	keys[0] = '\0';
	size_t used = 0;
	static const char *const names[] = { "w/a", "w/b", "w/gone", "w/old", "w/new",
					     "w/k", "w/x", "w/slow" };
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		size_t n = 0;
		char *o = obj_get(&t, "b", names[i], &n, NULL, 0);
		if (o && used < len)
			used += (size_t)snprintf(keys + used, len - used, "%s=%.*s;",
						 names[i] + 2, (int)n, o);
		free(o);
	}
	stage_case_end(st, &t, img);
}

/* Poll up to 30 s until the store has seen n PUTs; the seconds waited. */
static double wait_puts(struct store *t, unsigned n)
{
	double t0 = unit_now_s();
	while (seen(t, S3K_PUT) < n && unit_now_s() - t0 < 30)
		usleep(10000);
	return unit_now_s() - t0;
}

/* A burst of closes holds the drain: with a quiet time of 2 s, files
 * closed one after another are not uploaded while the closes go on (each
 * close within the quiet time of the last), and all are once the closes
 * stop for it; with a hold of 1 s and closes that never pause, the
 * oldest are uploaded while the burst goes on. */
static void burst(struct view *const *views)
{
	struct store t;
	store_init(&t, 0);
	struct gw gw;
	gw_open(views, t.s3, &gw, "drain-burst");
	struct core_drain_conf dc = { .streams = 2, .stop_s = 5, .quiet_ms = 2000,
				      .hold_ms = 60000 };
	CHECK(core_drain_new(gw.core, &dc) == 0, "burst: the drain starts");
	unsigned p0 = seen(&t, S3K_PUT);
	char name[32];
	int bad = 0;
	double t0 = unit_now_s();
	for (int i = 0; i < 5; i++) {
		snprintf(name, sizeof name, "burst%d", i);
		bad += put_file(&gw, name, "b") != 0;
		usleep(200000);
	}
	double closes_s = unit_now_s() - t0;
	unsigned during = seen(&t, S3K_PUT) - p0;
	CHECK(!bad && during == 0, "5 closes 200 ms apart: no PUT while they go on "
	      "(%u PUTs, the closes took %.2f s)", during, closes_s);
	double waited = wait_puts(&t, p0 + 5);
	CHECK(seen(&t, S3K_PUT) == p0 + 5 && waited >= 1.5,
	      "all 5 PUT once the closes stopped for the quiet time (%.2f s after)", waited);
	core_drain_free(gw.core);
	gw_close(&gw);

	/* closes that never pause: the hold ends for the oldest */
	gw_open(views, t.s3, &gw, "drain-burst2");
	dc = (struct core_drain_conf){ .streams = 2, .stop_s = 5, .quiet_ms = 60000,
				       .hold_ms = 1000 };
	CHECK(core_drain_new(gw.core, &dc) == 0, "burst: the drain starts again");
	p0 = seen(&t, S3K_PUT);
	t0 = unit_now_s();
	int i = 0;
	while (seen(&t, S3K_PUT) == p0 && unit_now_s() - t0 < 30) {
		snprintf(name, sizeof name, "long%d", i++);
		bad += put_file(&gw, name, "l") != 0;
		usleep(50000);
	}
	double first = unit_now_s() - t0;
	CHECK(!bad && seen(&t, S3K_PUT) > p0 && first >= 1.0,
	      "closes every 50 ms for %.2f s: the first file PUT after its hold, "
	      "while the closes go on (%d closes)", first, i);
	core_drain_free(gw.core);
	gw_close(&gw);

	/* half the budget staged: the burst holds nothing */
	gw_open_budget(views, t.s3, &gw, "drain-burst3", NULL, 1u << 20);
	dc = (struct core_drain_conf){ .streams = 2, .stop_s = 5, .quiet_ms = 60000,
				       .hold_ms = 60000 };
	CHECK(core_drain_new(gw.core, &dc) == 0, "burst: the drain starts, 1 MiB budget");
	p0 = seen(&t, S3K_PUT);
	static char big[200 << 10];
	memset(big, 'h', sizeof big - 1);
	for (i = 0; i < 3; i++) {
		snprintf(name, sizeof name, "half%d", i);
		bad += put_file(&gw, name, big) != 0;
	}
	waited = wait_puts(&t, p0 + 1);
	CHECK(!bad && seen(&t, S3K_PUT) > p0, "3 x 200 KiB closed in a burst into a "
	      "1 MiB budget: PUT %.2f s after, with a hold of 60 s", waited);
	core_drain_free(gw.core);
	gw_close(&gw);
	store_release(&t);
}

/* Requests of every kind the store has seen. */
static unsigned seen_all(struct store *t)
{
	unsigned n = 0;
	for (int k = 0; k < S3K_N; k++)
		n += seen(t, (enum s3_kind)k);
	return n;
}

/* Create (or truncate) name in view v with text and close it: the
 * close's result. */
static int put_in(struct gw *gw, int v, const char *name, const char *text)
{
	struct core_req *rq = &gw->rq;
	struct core_entry e;
	struct core_file *f = NULL;
	struct core_open_cache cache;
	int rc = core_lookup(rq, gw->view_ino[v], name, &e);
	if (rc == 0)
		rc = core_open(rq, e.ino, O_WRONLY | O_TRUNC, &f, &cache);
	else if (rc == -ENOENT)
		rc = core_create(rq, gw->view_ino[v], name, NULL, &e, &f, &cache);
	ssize_t n = rc == 0 ? core_write(rq, f, text, strlen(text), 0) : rc;
	rc = n < 0 ? (int)n : core_flush(rq, f);
	core_release(rq, f);
	return rc;
}

/* key, in t's store, applied to gw's index as its event would be. */
static void indexed(struct gw *gw, struct store *t, const char *key)
{
	struct obj_meta o = { 0 };
	void *data = NULL;
	size_t len;
	if (s3_fake_object_read(t->fake, "b", key, &data, &len, &o, NULL) < 0 ||
	    (!o.bucket && !(o.bucket = strdup("b"))) || (!o.key && !(o.key = strdup(key)))) {
		printf("# reading %s failed\n", key);
		exit(2);
	}
	o.flags |= OBJ_HAS_META;
	if (index_apply(gw->ix, &o, 1, NULL, 0, NULL, NULL) < 0)
		exit(2);
	free(data);
	obj_meta_release(&o);
}

/* A restart: what a gateway left pending at its stop (write-back files
 * sealed and not drained, a session file whose close failed) is taken up
 * by the next gateway's drain. Its recovery sends no request; the core
 * lists and reads those files from their staged bytes; they are due at
 * once (published with a drain delay of an hour and no sync); each is
 * checked against the version it was based on, which the journal's base
 * line carried across the restart: another client's write of one key
 * between the two runs wins, and ours goes to recovered/. */
static void restart(struct view *const *views)
{
	struct store ta, tb;
	store_init(&ta, 0);
	store_init(&tb, 0);
	/* w/b and w/c exist (the same bytes, so the same ETag, in both) */
	for (int i = 0; i < 2; i++) {
		struct store *t = i ? &tb : &ta;
		if (s3_fake_object_put(t->fake, "b", "w/b", "b v1", 4, NULL, 0, NULL) ||
		    s3_fake_object_put(t->fake, "b", "w/c", "c v1", 4, NULL, 0, NULL))
			exit(2);
	}
	struct gw a;
	gw_open(views, ta.s3, &a, "drain-run1");
	indexed(&a, &ta, "w/b");
	indexed(&a, &ta, "w/c");
	struct core_drain_conf dc = { .streams = 2, .delay_s = 3600, .stop_s = 0 };
	CHECK(core_drain_new(a.core, &dc) == 0, "restart: the first run's drain starts");
	CHECK(put_in(&a, 0, "a", "alpha") == 0 && put_in(&a, 0, "b", "b v2") == 0 &&
	      put_in(&a, 0, "c", "c v2") == 0, "first run: a new file and two "
	      "rewrites closed, pending");
	puts_fail(&ta, 1, -EIO);
	CHECK(put_in(&a, 1, "f", "fff") == -EIO, "first run: a session file's "
	      "close fails (EIO), its data kept");
	char from[600];
	snprintf(from, sizeof from, "%s/staging", a.dir);

	/* between the runs, another client writes w/c */
	CHECK(s3_fake_object_put(tb.fake, "b", "w/c", "c theirs", 8, NULL, 0, NULL) == 0,
	      "another client writes w/c before the next start");
	struct stage_recovery_report rep;
	struct gw_start start = { .from = from, .rep = &rep };
	struct gw b;
	unsigned r0 = seen_all(&tb);
	gw_open_start(views, tb.s3, &b, "drain-run2", NULL, 1ull << 30, &start);
	CHECK(rep.deferred == 4 && rep.reuploaded == 0 && rep.recovered == 0,
	      "next start: recovery leaves the 4 files for the drain (%u deferred, "
	      "%u uploaded, %u moved)", rep.deferred, rep.reuploaded, rep.recovered);
	CHECK(seen_all(&tb) == r0, "recovery sent no request (%u)", seen_all(&tb) - r0);
	core_drain_free(a.core);     /* the first run ends (its store is another) */
	gw_close(&a);

	/* the lookups below come before the uploads: hold the first two */
	if (s3_fault_add(tb.s3, &(struct s3_fault_rule){ .kind = S3K_PUT,
			 .type = S3F_DELAY, .first = 1, .times = 2, .delay_ms = 300 }))
		exit(2);
	CHECK(core_drain_new(b.core, &dc) == 0, "next start: the drain starts");
	int n = core_drain_adopt_all(b.core);
	CHECK(n == 4, "the 4 files queued (%d)", n);
	CHECK(reads(&b, "a", "alpha") && reads(&b, "b", "b v2"),
	      "the core reads them, new file and rewrite, from the staged bytes");
	struct core_entry e;
	CHECK(core_lookup(&b.rq, b.view_ino[1], "f", &e) == 0 && e.attr.st_size == 3,
	      "the session view's file is there too (size %lld)",
	      (long long)e.attr.st_size);
	double waited = wait_puts(&tb, 3);
	CHECK(seen(&tb, S3K_PUT) == 3, "due at once: 3 PUTs with a delay of an hour, "
	      "no sync (%.2f s)", waited);
	char *report = NULL;
	CHECK(sync_all(&b, &report) == 0, "sync: 0 (%s)", report ? report : "");
	free(report);
	bool same = s3_has(&tb, "w/a", "alpha") && s3_has(&tb, "w/b", "b v2") &&
		    s3_has(&tb, "s/f", "fff");
	CHECK(same, "S3 has the three with their bytes");
	CHECK(s3_has(&tb, "w/c", "c theirs") && seen(&tb, S3K_PUT) == 3,
	      "w/c, written by another client since its base: theirs stays, no PUT");
	char rec[600];
	snprintf(rec, sizeof rec, "%s/staging/recovered", b.dir);
	CHECK(count_files(rec, ".journal") == 1, "our w/c is in recovered/");
	struct stage_counters sc;
	stage_counters_get(b.stage, &sc);
	CHECK(sc.reuploaded_files == 3 && sc.pending_files == 0 && sc.sealed_files == 0,
	      "counted: 3 re-uploaded, none pending or sealed (%llu, %llu, %llu)",
	      (unsigned long long)sc.reuploaded_files,
	      (unsigned long long)sc.pending_files, (unsigned long long)sc.sealed_files);
	snprintf(rec, sizeof rec, "%s/staging", b.dir);
	CHECK(count_files(rec, ".jnl") == 0 && count_files(rec, ".data") == 0,
	      "nothing left staged");
	CHECK(reads(&b, "b", "b v2"), "after the upload the core reads the new version");
	core_drain_free(b.core);
	gw_close(&b);
	store_release(&ta);
	store_release(&tb);
}

/* Open name for writing without truncating it, write text over its
 * start, close it. */
static int rewrite_file(struct gw *gw, const char *name, const char *text)
{
	struct core_req *rq = &gw->rq;
	struct core_entry e;
	struct core_file *f = NULL;
	struct core_open_cache cache;
	int rc = core_lookup(rq, gw->view_ino[0], name, &e);
	if (rc == 0)
		rc = core_open(rq, e.ino, O_WRONLY, &f, &cache);
	ssize_t n = rc == 0 ? core_write(rq, f, text, strlen(text), 0) : rc;
	if (n >= 0 && (size_t)n != strlen(text))
		n = -EIO;
	rc = n < 0 ? (int)n : core_flush(rq, f);
	core_release(rq, f);
	return rc;
}

/* Closes "hot" again and again until stop (a thread of its own, with
 * the test's request, gw->rq); closes counts the ones done, each
 * writing "v<its number>" in 8 digits over the last (no truncation: an
 * upload that meets a write still carries one whole number). */
struct hot {
	struct gw *gw;
	atomic_bool stop;
	atomic_uint closes;
	int bad;
};

static void *hot_main(void *arg)
{
	struct hot *h = arg;
	char text[32];
	while (!atomic_load(&h->stop)) {
		snprintf(text, sizeof text, "v%08u", atomic_load(&h->closes) + 1);
		h->bad += rewrite_file(h->gw, "hot", text) != 0;
		atomic_fetch_add(&h->closes, 1);
	}
	return NULL;
}

/* A sync meets a file closed again and again by another thread: it
 * returns once what was pending when it began is in S3 (the file's
 * version of then, or a newer one), not when the file stops changing;
 * or, if the file is open for writing when nothing else is left, with
 * -EIO naming it alone (a writer's file is published after its close). */
static void sync_meets_hot(struct gw *gw, struct store *t)
{
	CHECK(put_file(gw, "b", "before") == 0 && put_file(gw, "hot", "v00000000") == 0,
	      "sync vs rewrites: two files pending");
	/* each upload's HEAD (the conflict check) takes 100 ms: the closes
	 * of hot land during its uploads */
	CHECK(s3_fault_add(t->s3, &(struct s3_fault_rule){ .kind = S3K_HEAD,
			   .type = S3F_DELAY, .delay_ms = 100 }) == 0,
	      "every HEAD delayed 100 ms");
	struct hot h = { .gw = gw };
	atomic_init(&h.stop, false);
	atomic_init(&h.closes, 0);
	pthread_t th;
	CHECK(pthread_create(&th, NULL, hot_main, &h) == 0, "a thread closes hot in a loop");
	while (atomic_load(&h.closes) < 5)
		usleep(1000);
	unsigned before = atomic_load(&h.closes);
	char *report = NULL;
	int rc = core_drain_sync(gw->core, NULL, NULL, 20, &report);
	unsigned after = atomic_load(&h.closes);
	size_t n = 0;
	char *o = obj_get(t, "b", "w/hot", &n, NULL, 0);
	unsigned v = o && n > 1 && o[0] == 'v' ? (unsigned)strtoul(o + 1, NULL, 10) : 0;
	/* 0; or -EIO when hot alone is left and a writer has it open then (a
	 * file open for writing is not published: its close queues it) */
	bool only_hot = rc == -EIO && report && !strcmp(report, "b/w/hot: open for writing\n");
	CHECK(rc == 0 || only_hot, "the sync returns while hot is closed again and again "
	      "(%d: %s; %u closes during it)", rc, report ? report : "", after - before);
	CHECK(s3_has(t, "w/b", "before") && (only_hot || v >= before),
	      "S3 has what was pending when the sync began: b, and hot's close %u "
	      "or a later one (%u)", before, v);
	free(o);
	free(report);
	atomic_store(&h.stop, true);
	pthread_join(th, NULL);
	s3_fault_clear(t->s3);
	CHECK(!h.bad, "every close of hot returned 0");
	char last[32];
	snprintf(last, sizeof last, "v%08u", atomic_load(&h.closes));
	report = NULL;
	CHECK(core_drain_sync(gw->core, NULL, NULL, 30, &report) == 0 &&
	      s3_has(t, "w/hot", last), "the closes stopped: the next sync publishes "
	      "hot's last close (%s)", last);
	free(report);
}

/* A stop while S3 holds a PUT far longer than stop_drain: the stop
 * cancels it at its end and returns; the file stays journaled for the
 * next start, which publishes it. */
static void slow_stop(struct view *const *views)
{
	struct store t;
	store_init(&t, 0);
	struct gw gw;
	gw_open(views, t.s3, &gw, "drain-stop");
	struct core_drain_conf dc = { .streams = 2, .stop_s = 1 };
	CHECK(core_drain_new(gw.core, &dc) == 0, "slow stop: the drain starts");
	puts_delay(&t, 600000);
	int p0 = puts_tried(&t);
	CHECK(put_file(&gw, "slow", "late") == 0, "slow stop: a file closed");
	puts_wait_past(&t, p0);
	CHECK(puts_tried(&t) == p0 + 1, "its PUT is under way, held 600 s by the store");
	double t0 = unit_now_s();
	core_drain_free(gw.core);
	double took = unit_now_s() - t0;
	char keys[512];
	crash_image(&gw, keys, sizeof keys);
	CHECK(s3_has(&t, "w/slow", NULL) && !strcmp(keys, "slow=late;"),
	      "the stop returned (after %.2f s, stop_drain 1 s): the PUT cancelled, "
	      "not in S3; the next start publishes the file (%s)", took, keys);
	gw_close(&gw);
	store_release(&t);
}

/* A backlog of 100,000 closed files (25,000 under ASan: unit_trials;
 * pending files hold no descriptor), then one sync publishes them: the
 * queue's work (core_drain_steps) stays within a few times n log2 n
 * entries visited, where a walk of the queue per close or per upload
 * would visit about n^2 / 2. */
static void backlog(struct view *const *views)
{
	struct store t;
	store_init(&t, 0);
	struct gw gw;
	gw_open_budget(views, t.s3, &gw, "drain-backlog", NULL, 4ull << 30);
	struct core_drain_conf dc = { .streams = 2, .delay_s = 3600, .stop_s = 5 };
	CHECK(core_drain_new(gw.core, &dc) == 0, "backlog: the drain starts");
	unsigned n = unit_trials(100000), done = 0;
	char name[32];
	int bad = 0;
	/* under systemd's default limit of descriptors, as a service runs */
	struct rlimit was, lim;
	int lrc = getrlimit(RLIMIT_NOFILE, &was);
	lim = was;
	if (lrc == 0 && lim.rlim_cur > 1024)
		lim.rlim_cur = 1024;
	CHECK(lrc == 0 && setrlimit(RLIMIT_NOFILE, &lim) == 0,
	      "backlog: a limit of %llu descriptors", (unsigned long long)lim.rlim_cur);
	double t0 = unit_now_s();
	for (; done < n && !bad; done++) {
		snprintf(name, sizeof name, "q%06u", done);
		bad = put_file(&gw, name, "q");
	}
	double closes_s = unit_now_s() - t0;
	uint64_t files = 0, bytes = 0, steps_closed = core_drain_steps(gw.core);
	core_drain_pending(gw.core, &files, &bytes);
	CHECK(!bad && files == n && bytes == n,
	      "backlog: %u files closed in %.1f s, all pending (%llu files, %llu bytes)",
	      n, closes_s, (unsigned long long)files, (unsigned long long)bytes);
	char *report = NULL;
	t0 = unit_now_s();
	int rc = core_drain_sync(gw.core, NULL, NULL, 600, &report);
	double sync_s = unit_now_s() - t0;
	core_drain_pending(gw.core, &files, &bytes);
	CHECK(rc == 0 && files == 0 && seen(&t, S3K_PUT) == n,
	      "backlog: one sync publishes them in %.1f s (%d, %u PUTs, %llu left)",
	      sync_s, rc, seen(&t, S3K_PUT), (unsigned long long)files);
	free(report);
	double log2n = 0;
	for (unsigned m = n; m > 1; m /= 2)
		log2n++;
	uint64_t steps = core_drain_steps(gw.core);
	double bound = 8.0 * n * (log2n + 1);
	CHECK(steps <= bound, "backlog: the queue visited %llu entries (%llu to "
	      "queue them), within 8 n (log2 n + 1) = %.0f; n^2 / 2 = %.0f",
	      (unsigned long long)steps, (unsigned long long)steps_closed, bound,
	      (double)n * n / 2);
	core_drain_free(gw.core);
	gw_close(&gw);
	store_release(&t);
	if (lrc == 0)
		setrlimit(RLIMIT_NOFILE, &was);
}

int main(void)
{
	struct view *views[2] = { unit_view(view_json[0]), unit_view(view_json[1]) };
	struct store t;
	store_init(&t, 0);
	struct gw gw;
	gw_open(views, t.s3, &gw, "drain");
	struct core_drain_conf dc = { .streams = 2, .delay_s = 3600, .stop_s = 5 };
	CHECK(core_drain_new(gw.core, &dc) == 0, "the drain starts");
	char keys[512], *report = NULL;
	uint64_t files, bytes;

	/* A close returns with nothing in S3; the core reads the file. */
	unsigned p0 = seen(&t, S3K_PUT);
	CHECK(put_file(&gw, "a", "one") == 0, "close of a new file: 0");
	core_drain_pending(gw.core, &files, &bytes);
	CHECK(files == 1 && bytes == 3 && seen(&t, S3K_PUT) == p0 && s3_has(&t, "w/a", NULL),
	      "pending: 1 file, 3 bytes; no PUT, no object (%llu, %llu)",
	      (unsigned long long)files, (unsigned long long)bytes);
	CHECK(reads(&gw, "a", "one"), "the core reads the pending file's bytes");
	crash_image(&gw, keys, sizeof keys);
	CHECK(!strcmp(keys, "a=one;"), "crash image after the close: recovery "
	      "publishes it (%s)", keys);

	/* Rewritten twice before its upload: one PUT, the newest bytes. */
	CHECK(put_file(&gw, "a", "two") == 0 && put_file(&gw, "a", "three") == 0,
	      "closed twice more before the drain");
	crash_image(&gw, keys, sizeof keys);
	CHECK(!strcmp(keys, "a=three;"), "crash image: the newest bytes (%s)", keys);
	CHECK(sync_all(&gw, &report) == 0, "sync: 0");
	CHECK(seen(&t, S3K_PUT) == p0 + 1 && s3_has(&t, "w/a", "three"),
	      "one PUT for three closes, the newest bytes (%u PUTs)", seen(&t, S3K_PUT) - p0);
	crash_image(&gw, keys, sizeof keys);
	CHECK(!strcmp(keys, ""), "crash image after the upload: nothing left to "
	      "publish (%s)", keys);

	/* Unlink of a pending file: no PUT, no object, before or after a crash. */
	p0 = seen(&t, S3K_PUT);
	CHECK(put_file(&gw, "gone", "x") == 0 &&
	      core_unlink(&gw.rq, gw.view_ino[0], "gone") == 0,
	      "a pending file unlinked");
	crash_image(&gw, keys, sizeof keys);
	CHECK(!strstr(keys, "gone="), "crash image after the unlink: not "
	      "published (%s)", keys);
	CHECK(sync_all(&gw, &report) == 0 && seen(&t, S3K_PUT) == p0 &&
	      s3_has(&t, "w/gone", NULL), "sync: no PUT, no object");

	/* Rename of a pending file: one PUT under the new name, no COPY. */
	p0 = seen(&t, S3K_PUT);
	unsigned c0 = seen(&t, S3K_COPY);
	CHECK(put_file(&gw, "old", "moved") == 0 &&
	      core_rename(&gw.rq, gw.view_ino[0], "old", gw.view_ino[0], "new", 0) == 0,
	      "a pending file renamed");
	crash_image(&gw, keys, sizeof keys);
	CHECK(!strcmp(keys, "new=moved;"), "crash image after the rename: the new "
	      "name only (%s)", keys);
	CHECK(sync_all(&gw, &report) == 0, "sync: 0");
	CHECK(seen(&t, S3K_PUT) == p0 + 1 && seen(&t, S3K_COPY) == c0 &&
	      s3_has(&t, "w/new", "moved") && s3_has(&t, "w/old", NULL),
	      "one PUT under the new name, no COPY, nothing under the old one");

	/* A failure: kept, named by sync, published by the next try. */
	puts_fail(&t, 1, -EIO);
	CHECK(put_file(&gw, "k", "kept") == 0, "close while the PUT will fail: 0");
	int rc = sync_all(&gw, &report);
	CHECK(rc == -EIO && report && strstr(report, "b/w/k: "),
	      "sync: -EIO naming the key (%d: %s)", rc, report ? report : "");
	free(report);
	report = NULL;
	core_drain_pending(gw.core, &files, &bytes);
	CHECK(files == 1, "still pending after the failure");
	CHECK(sync_all(&gw, &report) == 0 && s3_has(&t, "w/k", "kept"),
	      "the next sync publishes it");

	/* Another client's version wins a conflict; ours is set aside. */
	CHECK(put_file(&gw, "x", "ours") == 0, "a new file pending");
	CHECK(s3_fake_object_put(t.fake, "b", "w/x", "theirs", 6, NULL, 0, NULL) == 0,
	      "another client writes the key before the drain");
	p0 = seen(&t, S3K_PUT);
	CHECK(sync_all(&gw, &report) == 0 && seen(&t, S3K_PUT) == p0 &&
	      s3_has(&t, "w/x", "theirs"), "sync: no PUT, the other client's bytes stay");
	char rec[600];
	snprintf(rec, sizeof rec, "%s/staging/recovered", gw.dir);
	CHECK(count_files(rec, ".journal") == 1, "our bytes and both versions in recovered/");

	sync_meets_hot(&gw, &t);

	core_drain_free(gw.core);
	gw_close(&gw);
	store_release(&t);
	burst(views);
	restart(views);
	slow_stop(views);
	backlog(views);
	view_free(views[0]);
	view_free(views[1]);
	return unit_exit();
}
