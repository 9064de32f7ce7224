/* test_scan.c — unit tests of views/scan.h on the in-memory store
 * (sync/s3/s3_fake.h) behind the fault wrapper (sync/s3/s3_fault.h), no
 * services: paging, events interleaved with a scan, resume after an
 * interruption, no re-listing of a completed bucket, HEAD for metadata,
 * tags, and every S3 failure of a scan (LIST, HEAD, tagging) retried. */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <unistd.h>

#include "sync/s3/s3_fake.h"
#include "sync/s3/s3_fault.h"
#include "common/stats.h"
#include "views/filter.h"
#include "views/index.h"
#include "tests/unit/unit.h"
#include "tests/unit/unit_views.h"
#include "views/scan.h"


#define S 1000000000LL

/* ---- the bucket --------------------------------------------------------- */

/* Objects k00000 .. of bucket "bk": object i has obj_size(i) bytes,
 * Last-Modified 1000 s, user metadata color=green (even i) or black, type
 * text/plain. Listed 1,000 keys a page (the fake's default). */
struct bucket {
	struct s3 *fake;
	struct s3 *s3;           /* the fault wrapper the scanner gets */
};

static void obj_key(int i, char *out, size_t len)
{
	snprintf(out, len, "d%03d/k%05d", i / 100, i);
}

static uint64_t obj_size(int i)
{
	return (uint64_t)(i % 997);
}

static void bucket_make(struct bucket *b, int n)
{
	static char data[1000];
	if (s3_fake_new(&b->fake) || s3_fault_new(b->fake, true, &b->s3) ||
	    s3_fake_bucket_add(b->fake, "bk") || s3_fake_bucket_add(b->fake, "zz"))
		exit(2);
	s3_fake_clock_set(b->fake, 1000 * S);
	for (int i = 0; i < n; i++) {
		char key[64];
		obj_key(i, key, sizeof key);
		struct obj_kv color = { "color", i % 2 ? "black" : "green" };
		if (s3_fake_object_put(b->fake, "bk", key, data, (size_t)obj_size(i), &color, 1,
				       "text/plain"))
			exit(2);
	}
}

static void bucket_free(struct bucket *b)
{
	s3_free(b->s3);
}

/* Requests of a kind that reached the store. */
static int reached(struct bucket *b, enum s3_kind k)
{
	return (int)s3_fake_count(b->fake, k);
}

/* ---- helpers ---------------------------------------------------------- */

static atomic_int n_added;

static void on_change(void *ctx, const char *view, const char *path, int what)
{
	(void)ctx;
	(void)view;
	(void)path;
	if (what == INDEX_ADDED)
		atomic_fetch_add(&n_added, 1);
}

static int count_fn(void *ctx, const char *name, const struct index_attr *a)
{
	(void)name;
	(void)a;
	(*(int *)ctx)++;
	return 0;
}

static int ls_count(struct index *ix, const char *dir)
{
	int n = 0;
	index_readdir(ix, unit_v(0), dir, NULL, count_fn, &n);
	return n;
}

static struct obj_meta mk(const char *key, uint64_t size, int64_t t_s, bool del)
{
	struct obj_meta o;
	memset(&o, 0, sizeof o);
	o.bucket = strdup("bk");
	o.key = strdup(key);
	o.size = size;
	o.mtime_ns = t_s * S;
	o.flags = del ? OBJ_DELETED : OBJ_HAS_META;
	return o;
}

/* ---- tests ------------------------------------------------------------ */

struct hook_ctx { struct index *ix; struct bucket *b; int lists; };

/* Events arriving while page 2 is being listed (pages 0-1 already
 * listed, page 0 applied: the applier may be behind the listing, so the
 * hook waits for it): the fake's hook at the start of the 3rd LIST. */
static void events_during_scan(void *p, enum s3_kind k, const char *bucket,
			       const char *key)
{
	struct hook_ctx *h = p;
	(void)bucket;
	(void)key;
	if (k != S3K_LIST || ++h->lists != 3)
		return;
	struct index_attr a;
	for (int i = 0; i < 10000 && index_lookup(h->ix, unit_v(0), "d000/k00005", &a) < 0; i++)
		usleep(1000);
	struct obj_meta ev[4] = {
		mk("d021/k02100", 777777, 1500, false),  /* page 2: newer content */
		mk("d023/k02300", 0, 1500, true),        /* page 2: deleted after LIST time */
		mk("d000/k00005", 0, 1500, true),         /* already scanned: deleted */
		mk("new/only-event", 5, 1500, false),   /* never listed */
	};
	index_apply(h->ix, ev, 4, NULL, 0, NULL, NULL);
	for (int i = 0; i < 4; i++)
		obj_meta_release(&ev[i]);
}

static void test_scan_with_events(void)
{
	char *dir = unit_tmpdir("scan");
	struct stats st;
	stats_init(&st);
	struct index *ix = unit_index_open(dir, &st);
	struct view *v = unit_view("{\"name\":\"all\",\"bucket\":\"bk\"}");
	unit_set_views(ix, &v, 1);
	struct bucket b;
	bucket_make(&b, 2500);
	struct hook_ctx hc = { ix, &b, 0 };
	s3_fake_hook_set(b.fake, events_during_scan, &hc);
	struct scanner *sc;
	atomic_store(&n_added, 0);
	CHECK(scan_new(ix, b.s3, &st, on_change, NULL, &sc) == 0, "scanner created");
	CHECK(scan_start_views(sc, &v, 1) == 0, "scan started");
	CHECK(scan_wait(sc, "bk", 10000) == 0, "scan completed");
	CHECK(reached(&b, S3K_LIST) == 3, "3 pages listed (%d)", reached(&b, S3K_LIST));
	CHECK(reached(&b, S3K_HEAD) == 0 && reached(&b, S3K_TAGGING) == 0,
	      "no HEAD or tag request when no view needs them");
	CHECK(stats_value(&st, "scans", "completed") == 1 && stats_value(&st, "scans", "objects") == 2500 &&
	      stats_value(&st, "scans", "running") == 0, "stats: completed 1, objects 2500, running 0");
	struct index_attr a;
	CHECK(index_lookup(ix, unit_v(0), "d021/k02100", &a) == 0 && a.size == 777777,
	      "event during the scan not undone by the listing");
	CHECK(index_lookup(ix, unit_v(0), "d023/k02300", &a) == -ENOENT,
	      "delete during the scan: tombstone not resurrected");
	CHECK(index_lookup(ix, unit_v(0), "d000/k00005", &a) == -ENOENT, "delete of a scanned key");
	CHECK(index_lookup(ix, unit_v(0), "new/only-event", &a) == 0, "created by event only");
	CHECK(index_lookup(ix, unit_v(0), "d007/k00777", &a) == 0 && a.size == obj_size(777) &&
	      a.mtime_ns == 1000 * S, "listed object with listed attrs");
	CHECK(index_objects(ix) == 2500 - 2 + 1, "object count %llu",
	      (unsigned long long)index_objects(ix));
	CHECK(atomic_load(&n_added) == 2500 - 2, "one ADDED per member the scan inserted (%d)",
	      atomic_load(&n_added));
	struct scan_info *si;
	size_t n;
	CHECK(scan_status(sc, &si, &n) == 0 && n == 1 && si[0].state == SCAN_DONE &&
	      si[0].objects == 2500 && si[0].pages == 3, "status: done, 2500 objects, 3 pages");
	free(si);
	/* a late event older than Last-Modified - 1 s is stale */
	struct obj_meta old = mk("d009/k00900", 1, 998, false);
	CHECK(index_apply(ix, &old, 1, NULL, 0, NULL, NULL) == 1, "late older event is stale");
	obj_meta_release(&old);
	scan_free(sc);
	bucket_free(&b);
	index_close(ix);
	view_free(v);
	stats_release(&st);
	unit_rmtree(dir);
	free(dir);
}

/* The bucket's scan info (exactly one bucket). */
static struct scan_info info_of(struct scanner *sc)
{
	struct scan_info *si = NULL, r;
	size_t n = 0;
	memset(&r, 0, sizeof r);
	if (scan_status(sc, &si, &n) == 0 && n >= 1)
		r = si[0];
	free(si);
	return r;
}

static void test_scan_resume(void)
{
	char *dir = unit_tmpdir("scan");
	struct index *ix = unit_index_open(dir, NULL);
	struct view *v = unit_view("{\"name\":\"all\",\"bucket\":\"bk\"}");
	unit_set_views(ix, &v, 1);
	struct bucket b;
	bucket_make(&b, 3500);
	s3_fault_fail(b.s3, S3K_LIST, 3, 0, -EIO);   /* page 2 on, for ever */
	struct scanner *sc;
	struct stats st1;
	stats_init(&st1);
	scan_new(ix, b.s3, &st1, NULL, NULL, &sc);
	scan_start(sc, "bk", 0);
	/* wait until page 2 failed at least twice (it is retried) */
	struct scan_info si;
	for (int i = 0; i < 1000 && s3_fault_injected(b.s3, S3K_LIST) < 2; i++)
		usleep(10000);
	si = info_of(sc);
	CHECK(s3_fault_injected(b.s3, S3K_LIST) >= 2 && si.last_error == -EIO &&
	      si.state == SCAN_RUNNING && si.objects == 2000,
	      "failing LIST of page 2 retried (%llu tries), 2000 objects in (%llu)",
	      (unsigned long long)s3_fault_injected(b.s3, S3K_LIST),
	      (unsigned long long)si.objects);
	CHECK(stats_value(&st1, "scans", "running") == 1, "scans_running 1 during the scan");
	scan_free(sc);   /* the process stops mid-scan */
	CHECK(stats_value(&st1, "scans", "running") == 0 && stats_value(&st1, "scans", "completed") == 0,
	      "stopped: not running, not completed");
	struct index_scan_state state;
	CHECK(index_scan_state_get(ix, "bk", &state) == 0 && !state.done &&
	      strcmp(state.token, "d019/k01999") == 0,
	      "stored token: after the last key of page 1 ('%s')", state.token);
	index_close(ix);

	/* restart: resumes at page 2 */
	ix = unit_index_open(dir, NULL);
	unit_set_views(ix, &v, 1);
	s3_fault_clear(b.s3);
	int lists0 = reached(&b, S3K_LIST);
	struct stats st2;
	stats_init(&st2);
	scan_new(ix, b.s3, &st2, NULL, NULL, &sc);
	scan_start(sc, "bk", 0);
	CHECK(scan_wait(sc, "bk", 10000) == 0, "resumed scan completed");
	CHECK(reached(&b, S3K_LIST) - lists0 == 2, "only the 2 remaining pages listed");
	CHECK(stats_value(&st2, "scans", "objects") == 1500 && index_objects(ix) == 3500,
	      "1500 objects listed now, 3500 indexed");
	si = info_of(sc);
	CHECK(si.objects == 3500 && si.last_error == 0,
	      "status counts objects of both runs, no error left");
	scan_free(sc);
	index_close(ix);

	/* restart again: a completed bucket is not listed */
	ix = unit_index_open(dir, NULL);
	unit_set_views(ix, &v, 1);
	lists0 = reached(&b, S3K_LIST);
	struct stats st3;
	stats_init(&st3);
	scan_new(ix, b.s3, &st3, NULL, NULL, &sc);
	CHECK(scan_start_views(sc, &v, 1) == 0 && scan_wait(sc, "bk", 1000) == 0,
	      "completed bucket: scan_start returns done");
	CHECK(reached(&b, S3K_LIST) == lists0 && stats_value(&st3, "scans", "completed") == 0 &&
	      stats_value(&st3, "scans", "objects") == 0, "and lists nothing");
	CHECK(ls_count(ix, "d034") == 100, "index intact: d034 has 100 entries");
	scan_free(sc);
	bucket_free(&b);
	index_close(ix);
	view_free(v);
	stats_release(&st1);
	stats_release(&st2);
	stats_release(&st3);
	unit_rmtree(dir);
	free(dir);
}

/* Every 7th object (i % 7 == 3) is deleted by another client just before
 * its HEAD: the fake's hook. */
static void delete_before_head(void *p, enum s3_kind k, const char *bucket,
			       const char *key)
{
	struct bucket *b = p;
	if (k == S3K_HEAD && atoi(strrchr(key, 'k') + 1) % 7 == 3)
		s3_fake_object_delete(b->fake, bucket, key);
}

static void test_scan_head(void)
{
	char *dir = unit_tmpdir("scan");
	struct index *ix = unit_index_open(dir, NULL);
	struct view *v[2] = {
		unit_view("{\"name\":\"green\",\"bucket\":\"bk\",\"match\":{\"metadata\":{\"color\":\"green\"}}}"),
		unit_view("{\"name\":\"other\",\"bucket\":\"zz\"}"),
	};
	unit_set_views(ix, v, 2);
	struct bucket b;
	bucket_make(&b, 1400);
	s3_fake_hook_set(b.fake, delete_before_head, &b);
	struct scanner *sc;
	scan_new(ix, b.s3, NULL, NULL, NULL, &sc);
	scan_start_views(sc, v, 2);
	CHECK(scan_wait(sc, "bk", 10000) == 0, "scan with HEAD completed");
	CHECK(reached(&b, S3K_HEAD) == 1400, "one HEAD per listed object (%d)",
	      reached(&b, S3K_HEAD));
	int expect = 0, gone = 0;
	for (int i = 0; i < 1400; i++) {
		if (i % 7 == 3)
			gone++;
		else if (i % 2 == 0)
			expect++;
	}
	CHECK(index_members(ix, unit_v(0)) == (uint64_t)expect, "green members %llu == %d",
	      (unsigned long long)index_members(ix, unit_v(0)), expect);
	CHECK(index_objects(ix) == (uint64_t)(1400 - gone), "objects gone at HEAD time left out");
	struct obj_meta o;
	CHECK(index_object(ix, unit_v(0), "d000/k00000", &o) == 0 && o.content_type &&
	      strcmp(o.content_type, "text/plain") == 0 && (o.flags & OBJ_FROM_SCAN),
	      "HEAD fields stored");
	obj_meta_release(&o);
	struct scan_info *si;
	size_t n;
	scan_status(sc, &si, &n);
	CHECK(n == 2 && si[0].heads == 1400, "status counts HEADs");
	free(si);
	scan_free(sc);
	bucket_free(&b);
	index_close(ix);
	view_free(v[0]);
	view_free(v[1]);
	unit_rmtree(dir);
	free(dir);
}

/* S3 failures during a first scan: a LIST, a HEAD, a tag request failing
 * make the page fail; the scan notes the error, backs off, lists again
 * from the last batch applied and completes with everything. A failed
 * LIST is tried again by itself (lists LISTs in all); a failed HEAD or
 * tag request fails the batch its page was applied in, which may hold
 * the pages before it (SCAN_QUEUE_PAGES): from `lists` to `lists_max`
 * LISTs then, each page listed at most twice. */
static void scan_failing(enum s3_kind kind, unsigned first, unsigned times, int err,
			 int lists, int lists_max, const char *what)
{
	char *dir = unit_tmpdir("scan");
	struct index *ix = unit_index_open(dir, NULL);
	struct view *v = unit_view("{\"name\":\"g\",\"bucket\":\"bk\",\"match\":"
				   "{\"metadata\":{\"color\":\"green\"},\"tags\":{\"t\":\"1\"}}}");
	unit_set_views(ix, &v, 1);
	struct bucket b;
	bucket_make(&b, 2500);
	struct obj_kv tag = { "t", "1" };
	for (int i = 0; i < 2500; i += 2) {
		char key[64];
		obj_key(i, key, sizeof key);
		s3_fake_tags_set(b.fake, "bk", key, &tag, 1);
	}
	s3_fault_fail(b.s3, kind, first, times, err);
	struct stats st;
	stats_init(&st);
	struct scanner *sc;
	scan_new(ix, b.s3, &st, NULL, NULL, &sc);
	scan_start_views(sc, &v, 1);
	int rc = scan_wait(sc, "bk", 30000);
	struct scan_info si = info_of(sc);
	printf("# %s: %llu injected; %d LISTs, %d HEADs, %d tag requests reached the store\n",
	       what, (unsigned long long)s3_fault_injected(b.s3, kind), reached(&b, S3K_LIST),
	       reached(&b, S3K_HEAD), reached(&b, S3K_TAGGING));
	CHECK(rc == 0 && s3_fault_injected(b.s3, kind) == times && si.last_error == 0 &&
	      si.objects == 2500 && index_objects(ix) == 2500 && index_members(ix, unit_v(0)) == 1250,
	      "%s: retried, scan complete with 2500 objects and 1250 members", what);
	int tried = (int)s3_fault_seen(b.s3, S3K_LIST);
	CHECK(tried >= lists && tried <= lists_max && stats_value(&st, "scans", "completed") == 1,
	      "%s: %d LISTs tried (want %d to %d)", what, tried, lists, lists_max);
	scan_free(sc);
	bucket_free(&b);
	index_close(ix);
	view_free(v);
	stats_release(&st);
	unit_rmtree(dir);
	free(dir);
}

/* LISTs expected: 3 pages, plus each failed LIST again. A page whose HEAD
 * or tag request fails is listed again, and so is each page the listing
 * (one page ahead) had fetched before the failure was seen: 3 + 1 when it
 * was seen before the next LIST (a busy machine's timing), 3 + 2 or 3 + 3
 * after. */
static void test_scan_failures(void)
{
	scan_failing(S3K_LIST, 1, 2, -EHOSTUNREACH, 5, 5, "the first 2 LISTs unreachable");
	scan_failing(S3K_LIST, 2, 1, -EIO, 4, 4, "the LIST of page 1 failing");
	scan_failing(S3K_HEAD, 1500, 1, -EIO, 4, 6, "a HEAD of page 1 failing");
	scan_failing(S3K_TAGGING, 10, 1, -EACCES, 4, 6, "a tag request of page 0 refused");
}

struct reader { struct index *ix; atomic_bool stop; long reads; };

static void *reader_main(void *p)
{
	struct reader *r = p;
	while (!atomic_load(&r->stop)) {
		int n = 0;
		index_readdir(r->ix, unit_v(0), "", NULL, count_fn, &n);
		struct index_attr a;
		index_lookup(r->ix, 0, "d005/k00500", &a);
		r->reads++;
	}
	return NULL;
}

/* A scan thread, the applying thread and a reader at the same time. */
static void test_scan_concurrent(void)
{
	char *dir = unit_tmpdir("scan");
	struct index *ix = unit_index_open(dir, NULL);
	struct view *v = unit_view("{\"name\":\"all\",\"bucket\":\"bk\"}");
	unit_set_views(ix, &v, 1);
	struct bucket b;
	bucket_make(&b, 20000);
	struct scanner *sc;
	scan_new(ix, b.s3, NULL, NULL, NULL, &sc);
	struct reader rd = { .ix = ix };
	atomic_init(&rd.stop, false);
	pthread_t th;
	pthread_create(&th, NULL, reader_main, &rd);
	scan_start(sc, "bk", 0);
	/* events on every 10th key, newer than the listing: deletes on odd
	 * tens, size changes on even tens */
	char key[64];
	for (int i = 0; i < 20000; i += 10) {
		obj_key(i, key, sizeof key);
		struct obj_meta e = mk(key, 5, 2000, (i / 10) % 2 == 1);
		index_apply(ix, &e, 1, NULL, 0, NULL, NULL);
		obj_meta_release(&e);
	}
	CHECK(scan_wait(sc, "bk", 30000) == 0, "concurrent scan completed");
	atomic_store(&rd.stop, true);
	pthread_join(th, NULL);
	int bad = 0;
	struct index_attr a;
	for (int i = 0; i < 20000; i++) {
		obj_key(i, key, sizeof key);
		int rc = index_lookup(ix, unit_v(0), key, &a);
		bool want_gone = i % 10 == 0 && (i / 10) % 2 == 1;
		uint64_t want_size = i % 10 == 0 ? 5 : obj_size(i);
		if (want_gone ? rc != -ENOENT : (rc != 0 || a.size != want_size))
			bad++;
	}
	CHECK(bad == 0, "every key as its last event or the listing says (%d wrong)", bad);
	CHECK(index_objects(ix) == 19000 && index_members(ix, unit_v(0)) == 19000,
	      "counts agree: %llu objects", (unsigned long long)index_objects(ix));
	int n = 0;
	for (int d = 0; d < 200; d++) {
		char dd[16];
		snprintf(dd, sizeof dd, "d%03d", d);
		n += ls_count(ix, dd);
	}
	CHECK(n == 19000, "listing agrees with the counters (%d)", n);
	CHECK(rd.reads > 0, "reader ran alongside (%ld listings)", rd.reads);
	scan_free(sc);
	bucket_free(&b);
	index_close(ix);
	view_free(v);
	unit_rmtree(dir);
	free(dir);
}

int main(void)
{
	test_scan_with_events();
	test_scan_resume();
	test_scan_head();
	test_scan_concurrent();
	test_scan_failures();
	return unit_exit();
}
