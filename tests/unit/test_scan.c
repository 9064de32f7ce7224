/* test_scan.c — unit tests of views/scan.h with a fake bucket listing
 * (no services): paging, events interleaved with a scan, resume after an
 * interruption, no re-listing of a completed bucket, HEAD for metadata. */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <unistd.h>

#include "views/filter.h"
#include "views/index.h"
#include "tests/unit/unit.h"
#include "tests/unit/unit_views.h"
#include "views/scan.h"


#define S 1000000000LL
#define PAGE 1000

/* ---- the fake bucket -------------------------------------------------- */

struct fake {
	const char *bucket;
	int n;                        /* objects k00000 .. */
	int fail_from_page;           /* -1: never; else pages >= this fail */
	atomic_int list_calls, heads;
	char first_token[64];
	/* called once, just before page `hook_page` is returned */
	int hook_page;
	void (*hook)(void *);
	void *hook_ctx;
};

static void fake_key(int i, char *out, size_t len)
{
	snprintf(out, len, "d%d/k%05d", i / 100, i);
}

static int fake_list(void *ctx, const char *bucket, const char *token, scan_obj_fn fn,
		     void *fnctx, char *next, size_t ntlen, bool *truncated)
{
	struct fake *f = ctx;
	if (strcmp(bucket, f->bucket) != 0)
		return -ENOENT;
	int calls = atomic_fetch_add(&f->list_calls, 1);
	if (calls == 0)
		snprintf(f->first_token, sizeof f->first_token, "%s", token ? token : "");
	int start = token && *token ? atoi(token + 3) : 0;   /* "tok%d" */
	int page = start / PAGE;
	if (f->fail_from_page >= 0 && page >= f->fail_from_page)
		return -EIO;
	if (f->hook && page == f->hook_page) {
		f->hook(f->hook_ctx);
		f->hook = NULL;
	}
	char key[64];
	for (int i = start; i < f->n && i < start + PAGE; i++) {
		struct obj_meta o;
		memset(&o, 0, sizeof o);
		fake_key(i, key, sizeof key);
		o.key = key;
		o.size = (uint64_t)i;
		o.mtime_ns = 1000 * S;   /* Last-Modified of every listed object */
		snprintf(o.etag, sizeof o.etag, "etag%d", i);
		o.flags = OBJ_FROM_SCAN;
		int rc = fn(fnctx, &o);
		if (rc)
			return rc;
	}
	*truncated = start + PAGE < f->n;
	snprintf(next, ntlen, "tok%d", start + PAGE);
	return 0;
}

/* HEAD: even objects have color=green, every 7th is gone */
static int fake_head(void *ctx, const char *bucket, const char *key, struct obj_meta *out)
{
	struct fake *f = ctx;
	atomic_fetch_add(&f->heads, 1);
	int i = atoi(strrchr(key, 'k') + 1);
	if (i % 7 == 3)
		return -ENOENT;
	memset(out, 0, sizeof *out);
	out->bucket = strdup(bucket);
	out->key = strdup(key);
	out->size = (uint64_t)i;
	out->mtime_ns = 1000 * S;
	out->flags = OBJ_HAS_META | OBJ_HAS_CTYPE;
	out->content_type = strdup("text/plain");
	obj_kv_add(&out->meta, &out->n_meta, "color", i % 2 ? "black" : "green");
	return 0;
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

struct hook_ctx { struct index *ix; };

/* Events arriving while page 2 is being listed (pages 0-1 already in). */
static void events_during_scan(void *p)
{
	struct hook_ctx *h = p;
	struct obj_meta ev[4] = {
		mk("d21/k02100", 777777, 1500, false),  /* page 2: newer content */
		mk("d23/k02300", 0, 1500, true),        /* page 2: deleted after LIST time */
		mk("d0/k00005", 0, 1500, true),         /* already scanned: deleted */
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
	struct hook_ctx hc = { ix };
	struct fake f = { .bucket = "bk", .n = 2500, .fail_from_page = -1,
			  .hook_page = 2, .hook = events_during_scan, .hook_ctx = &hc };
	struct scan_source src = { &f, fake_list, fake_head, NULL };
	struct scanner *sc;
	atomic_store(&n_added, 0);
	CHECK(scan_new(ix, &src, &st, on_change, NULL, &sc) == 0, "scanner created");
	CHECK(scan_start_views(sc, &v, 1) == 0, "scan started");
	CHECK(scan_wait(sc, "bk", 10000) == 0, "scan completed");
	CHECK(atomic_load(&f.list_calls) == 3, "3 pages listed (%d)", atomic_load(&f.list_calls));
	CHECK(atomic_load(&f.heads) == 0, "no HEAD when no view needs metadata");
	CHECK(stats_get(&st, scans_completed) == 1 && stats_get(&st, scan_objects) == 2500 &&
	      stats_get(&st, scans_running) == 0, "stats: completed 1, objects 2500, running 0");
	struct index_attr a;
	CHECK(index_lookup(ix, unit_v(0), "d21/k02100", &a) == 0 && a.size == 777777,
	      "event during the scan not undone by the listing");
	CHECK(index_lookup(ix, unit_v(0), "d23/k02300", &a) == -ENOENT,
	      "delete during the scan: tombstone not resurrected");
	CHECK(index_lookup(ix, unit_v(0), "d0/k00005", &a) == -ENOENT, "delete of a scanned key");
	CHECK(index_lookup(ix, unit_v(0), "new/only-event", &a) == 0, "created by event only");
	CHECK(index_lookup(ix, unit_v(0), "d7/k00777", &a) == 0 && a.size == 777 &&
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
	struct obj_meta old = mk("d9/k00900", 1, 998, false);
	CHECK(index_apply(ix, &old, 1, NULL, 0, NULL, NULL) == 1, "late older event is stale");
	obj_meta_release(&old);
	scan_free(sc);
	index_close(ix);
	view_free(v);
	stats_release(&st);
	unit_rmtree(dir);
	free(dir);
}

static void test_scan_resume(void)
{
	char *dir = unit_tmpdir("scan");
	struct index *ix = unit_index_open(dir, NULL);
	struct view *v = unit_view("{\"name\":\"all\",\"bucket\":\"bk\"}");
	unit_set_views(ix, &v, 1);
	struct fake f = { .bucket = "bk", .n = 3500, .fail_from_page = 2 };
	struct scan_source src = { &f, fake_list, NULL, NULL };
	struct scanner *sc;
	struct stats st1;
	stats_init(&st1);
	scan_new(ix, &src, &st1, NULL, NULL, &sc);
	scan_start(sc, "bk", 0);
	/* wait until page 2 failed at least once */
	struct scan_info *si = NULL;
	size_t n = 0;
	for (int i = 0; i < 200; i++) {
		free(si);
		si = NULL;
		scan_status(sc, &si, &n);
		if (n == 1 && si[0].last_error)
			break;
		usleep(10000);
	}
	CHECK(n == 1 && si[0].last_error == -EIO && si[0].state == SCAN_RUNNING &&
	      si[0].objects == 2000, "failing page retried, 2000 objects in (%llu)",
	      n ? (unsigned long long)si[0].objects : 0ULL);
	free(si);
	CHECK(stats_get(&st1, scans_running) == 1, "scans_running 1 during the scan");
	scan_free(sc);   /* the process stops mid-scan */
	CHECK(stats_get(&st1, scans_running) == 0 && stats_get(&st1, scans_completed) == 0,
	      "stopped: not running, not completed");
	index_close(ix);

	/* restart: resumes at page 2 */
	ix = unit_index_open(dir, NULL);
	unit_set_views(ix, &v, 1);
	struct fake g = { .bucket = "bk", .n = 3500, .fail_from_page = -1 };
	struct scan_source src2 = { &g, fake_list, NULL, NULL };
	struct stats st2;
	stats_init(&st2);
	scan_new(ix, &src2, &st2, NULL, NULL, &sc);
	scan_start(sc, "bk", 0);
	CHECK(scan_wait(sc, "bk", 10000) == 0, "resumed scan completed");
	CHECK(strcmp(g.first_token, "tok2000") == 0, "resumed from the stored token ('%s')",
	      g.first_token);
	CHECK(atomic_load(&g.list_calls) == 2, "only the 2 remaining pages listed");
	CHECK(stats_get(&st2, scan_objects) == 1500 && index_objects(ix) == 3500,
	      "1500 objects listed now, 3500 indexed");
	scan_status(sc, &si, &n);
	CHECK(n == 1 && si[0].objects == 3500, "status counts objects of both runs");
	free(si);
	scan_free(sc);
	index_close(ix);

	/* restart again: a completed bucket is not listed */
	ix = unit_index_open(dir, NULL);
	unit_set_views(ix, &v, 1);
	struct fake h = { .bucket = "bk", .n = 3500, .fail_from_page = -1 };
	struct scan_source src3 = { &h, fake_list, NULL, NULL };
	struct stats st3;
	stats_init(&st3);
	scan_new(ix, &src3, &st3, NULL, NULL, &sc);
	CHECK(scan_start_views(sc, &v, 1) == 0 && scan_wait(sc, "bk", 1000) == 0,
	      "completed bucket: scan_start returns done");
	CHECK(atomic_load(&h.list_calls) == 0 && stats_get(&st3, scans_completed) == 0 &&
	      stats_get(&st3, scan_objects) == 0, "and lists nothing");
	CHECK(ls_count(ix, "d34") == 100, "index intact: d34 has 100 entries");
	scan_free(sc);
	index_close(ix);
	view_free(v);
	stats_release(&st1);
	stats_release(&st2);
	stats_release(&st3);
	unit_rmtree(dir);
	free(dir);
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
	struct fake f = { .bucket = "bk", .n = 1400, .fail_from_page = -1 };
	struct scan_source src = { &f, fake_list, fake_head, NULL };
	struct scanner *sc;
	scan_new(ix, &src, NULL, NULL, NULL, &sc);
	scan_start_views(sc, v, 2);
	CHECK(scan_wait(sc, "bk", 10000) == 0, "scan with HEAD completed");
	CHECK(atomic_load(&f.heads) == 1400, "one HEAD per listed object (%d)",
	      atomic_load(&f.heads));
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
	CHECK(index_object(ix, unit_v(0), "d0/k00000", &o) == 0 && o.content_type &&
	      strcmp(o.content_type, "text/plain") == 0 && (o.flags & OBJ_FROM_SCAN),
	      "HEAD fields stored");
	obj_meta_release(&o);
	struct scan_info *si;
	size_t n;
	scan_status(sc, &si, &n);
	CHECK(n == 2 && si[0].heads == 1400, "status counts HEADs");
	free(si);
	scan_free(sc);
	index_close(ix);
	view_free(v[0]);
	view_free(v[1]);
	unit_rmtree(dir);
	free(dir);
}

struct reader { struct index *ix; atomic_bool stop; long reads; };

static void *reader_main(void *p)
{
	struct reader *r = p;
	while (!atomic_load(&r->stop)) {
		int n = 0;
		index_readdir(r->ix, unit_v(0), "", NULL, count_fn, &n);
		struct index_attr a;
		index_lookup(r->ix, unit_v(0), "d5/k00500", &a);
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
	struct fake f = { .bucket = "bk", .n = 20000, .fail_from_page = -1 };
	struct scan_source src = { &f, fake_list, NULL, NULL };
	struct scanner *sc;
	scan_new(ix, &src, NULL, NULL, NULL, &sc);
	struct reader rd = { .ix = ix };
	atomic_init(&rd.stop, false);
	pthread_t th;
	pthread_create(&th, NULL, reader_main, &rd);
	scan_start(sc, "bk", 0);
	/* events on every 10th key, newer than the listing: deletes on odd
	 * tens, size changes on even tens */
	char key[64];
	for (int i = 0; i < 20000; i += 10) {
		fake_key(i, key, sizeof key);
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
		fake_key(i, key, sizeof key);
		int rc = index_lookup(ix, unit_v(0), key, &a);
		bool want_gone = i % 10 == 0 && (i / 10) % 2 == 1;
		uint64_t want_size = i % 10 == 0 ? 5 : (uint64_t)i;
		if (want_gone ? rc != -ENOENT : (rc != 0 || a.size != want_size))
			bad++;
	}
	CHECK(bad == 0, "every key as its last event or the listing says (%d wrong)", bad);
	CHECK(index_objects(ix) == 19000 && index_members(ix, unit_v(0)) == 19000,
	      "counts agree: %llu objects", (unsigned long long)index_objects(ix));
	int n = 0;
	for (int d = 0; d < 200; d++) {
		char dd[16];
		snprintf(dd, sizeof dd, "d%d", d);
		n += ls_count(ix, dd);
	}
	CHECK(n == 19000, "listing agrees with the counters (%d)", n);
	CHECK(rd.reads > 0, "reader ran alongside (%ld listings)", rd.reads);
	scan_free(sc);
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
	return unit_exit();
}
