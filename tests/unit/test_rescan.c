/* test_rescan.c — unit tests of rescans (views/scan.h: scan_rescan,
 * views/index_reconcile.h) and of tags in scans, with a fake bucket that
 * changes between and during listings (no services): objects added,
 * removed and changed behind the index's back are fixed; events newer than
 * the listing are never undone; tags are fetched once per object per scan. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "views/filter.h"
#include "views/index.h"
#include "tests/unit/unit.h"
#include "tests/unit/unit_views.h"
#include "views/index_reconcile.h"
#include "views/scan.h"


#define S 1000000000LL

/* ---- the fake bucket: a sorted table that tests edit ------------------- */

struct fobj {
	char key[64];
	uint64_t size;
	char etag[32];
	int64_t mtime_ns;
	char stage[16];          /* the tag "stage", "" = no tags */
};

struct fake {
	pthread_mutex_t mu;
	struct fobj o[256];
	int n;
	int page;                /* keys per page */
	atomic_int lists, heads, tag_gets;
	int fail_pages;          /* the next N list calls fail with -EIO */
	/* called once, before the page after key hook_after is returned */
	const char *hook_after;
	void (*hook)(void *);
	void *hook_ctx;
};

static int fobj_cmp(const void *a, const void *b)
{
	return strcmp(((const struct fobj *)a)->key, ((const struct fobj *)b)->key);
}

static void fake_put(struct fake *f, const char *key, uint64_t size, int64_t mtime_s,
		     const char *stage)
{
	pthread_mutex_lock(&f->mu);
	int i = 0;
	while (i < f->n && strcmp(f->o[i].key, key) != 0)
		i++;
	if (i == f->n)
		f->n++;
	struct fobj *o = &f->o[i];
	snprintf(o->key, sizeof o->key, "%s", key);
	o->size = size;
	snprintf(o->etag, sizeof o->etag, "e%llu-%lld", (unsigned long long)size,
		 (long long)mtime_s);
	o->mtime_ns = mtime_s * S;
	snprintf(o->stage, sizeof o->stage, "%s", stage ? stage : "");
	qsort(f->o, (size_t)f->n, sizeof *f->o, fobj_cmp);
	pthread_mutex_unlock(&f->mu);
}

static void fake_del(struct fake *f, const char *key)
{
	pthread_mutex_lock(&f->mu);
	for (int i = 0; i < f->n; i++) {
		if (strcmp(f->o[i].key, key) == 0) {
			f->o[i] = f->o[--f->n];
			break;
		}
	}
	qsort(f->o, (size_t)f->n, sizeof *f->o, fobj_cmp);
	pthread_mutex_unlock(&f->mu);
}

/* Tokens are "after:KEY" (the last key of the previous page). */
static int fake_list(void *ctx, const char *bucket, const char *token, scan_obj_fn fn,
		     void *fnctx, char *next, size_t ntlen, bool *truncated)
{
	struct fake *f = ctx;
	if (strcmp(bucket, "bk") != 0)
		return -ENOENT;
	atomic_fetch_add(&f->lists, 1);
	const char *after = token && *token ? token + 6 : "";
	if (f->hook && strcmp(after, f->hook_after) == 0) {
		void (*h)(void *) = f->hook;
		f->hook = NULL;
		h(f->hook_ctx);
	}
	pthread_mutex_lock(&f->mu);
	if (f->fail_pages > 0) {
		f->fail_pages--;
		pthread_mutex_unlock(&f->mu);
		return -EIO;
	}
	int i = 0, k = 0;
	while (i < f->n && strcmp(f->o[i].key, after) <= 0)
		i++;
	struct fobj page[64];
	for (; i < f->n && k < f->page; i++)
		page[k++] = f->o[i];
	*truncated = i < f->n;
	pthread_mutex_unlock(&f->mu);
	for (int j = 0; j < k; j++) {
		struct obj_meta o;
		memset(&o, 0, sizeof o);
		o.key = page[j].key;
		o.size = page[j].size;
		o.mtime_ns = page[j].mtime_ns;
		snprintf(o.etag, sizeof o.etag, "%s", page[j].etag);
		o.flags = OBJ_FROM_SCAN;
		int rc = fn(fnctx, &o);
		if (rc)
			return rc;
	}
	snprintf(next, ntlen, "after:%s", k ? page[k - 1].key : after);
	return 0;
}

static int fake_find(struct fake *f, const char *key, struct fobj *out)
{
	pthread_mutex_lock(&f->mu);
	int rc = -ENOENT;
	for (int i = 0; i < f->n; i++) {
		if (strcmp(f->o[i].key, key) == 0) {
			*out = f->o[i];
			rc = 0;
			break;
		}
	}
	pthread_mutex_unlock(&f->mu);
	return rc;
}

static int fake_head(void *ctx, const char *bucket, const char *key, struct obj_meta *out)
{
	struct fake *f = ctx;
	struct fobj fo;
	atomic_fetch_add(&f->heads, 1);
	if (fake_find(f, key, &fo) < 0)
		return -ENOENT;
	memset(out, 0, sizeof *out);
	out->bucket = strdup(bucket);
	out->key = strdup(key);
	out->size = fo.size;
	out->mtime_ns = fo.mtime_ns;
	snprintf(out->etag, sizeof out->etag, "%s", fo.etag);
	out->flags = OBJ_HAS_META;
	obj_kv_add(&out->meta, &out->n_meta, "color", "green");
	return 0;
}

static int fake_tags(void *ctx, const char *bucket, const char *key,
		     struct obj_kv **tags, size_t *n)
{
	struct fake *f = ctx;
	struct fobj fo;
	(void)bucket;
	atomic_fetch_add(&f->tag_gets, 1);
	if (fake_find(f, key, &fo) < 0)
		return -ENOENT;
	*tags = NULL;
	*n = 0;
	if (fo.stage[0])
		obj_kv_add(tags, n, "stage", fo.stage);
	return 0;
}

static void fake_init(struct fake *f, int page)
{
	memset(f, 0, sizeof *f);
	pthread_mutex_init(&f->mu, NULL);
	f->page = page;
}

/* ---- helpers ---------------------------------------------------------- */

static atomic_int n_chg[4];

static void on_change(void *ctx, const char *view, const char *path, int what)
{
	(void)ctx;
	(void)path;
	if (unit_view_index(view) == 0 && what >= 1 && what <= 3)
		atomic_fetch_add(&n_chg[what], 1);
}

static void chg_reset(void)
{
	for (int i = 0; i < 4; i++)
		atomic_store(&n_chg[i], 0);
}

static int64_t now_s(void)
{
	return (int64_t)time(NULL);
}

static struct obj_meta ev(const char *key, uint64_t size, int64_t t_s, bool del)
{
	struct obj_meta o;
	memset(&o, 0, sizeof o);
	o.bucket = strdup("bk");
	o.key = strdup(key);
	o.size = size;
	o.mtime_ns = t_s * S;
	snprintf(o.etag, sizeof o.etag, "ev%llu", (unsigned long long)size);
	o.flags = del ? OBJ_DELETED : 0;
	return o;
}

static void apply1(struct index *ix, struct obj_meta o)
{
	index_apply(ix, &o, 1, NULL, 0, on_change, NULL);
	obj_meta_release(&o);
}

static bool present(struct index *ix, size_t vi, const char *path, uint64_t *size)
{
	struct index_attr a;
	if (index_lookup(ix, unit_v(vi), path, &a) != 0)
		return false;
	if (size)
		*size = a.size;
	return true;
}

static bool has_line(const char *report, const char *line)
{
	size_t n = strlen(line);
	for (const char *p = report; p && *p;) {
		const char *e = strchr(p, '\n');
		size_t l = e ? (size_t)(e - p) : strlen(p);
		if (l == n && memcmp(p, line, n) == 0)
			return true;
		p = e ? e + 1 : p + l;
	}
	return false;
}

static void comment(const char *report)
{
	for (const char *p = report; p && *p;) {
		const char *e = strchr(p, '\n');
		int l = e ? (int)(e - p) : (int)strlen(p);
		printf("#   %.*s\n", l, p);
		p += l + (e ? 1 : 0);
	}
}

/* ---- tests ------------------------------------------------------------ */

/* Objects added, removed and changed between scans, over several pages,
 * including before the first and after the last listed key. */
static void test_rescan_fixes(void)
{
	char *dir = unit_tmpdir("rescan");
	struct index *ix = unit_index_open(dir, NULL);
	struct view *v = unit_view("{\"name\":\"all\",\"bucket\":\"bk\"}");
	unit_set_views(ix, &v, 1);
	struct fake f;
	fake_init(&f, 3);
	char key[32];
	for (int i = 0; i < 10; i++) {
		snprintf(key, sizeof key, "m%02d", i);
		fake_put(&f, key, (uint64_t)i, 1000, NULL);
	}
	struct scan_source src = { &f, fake_list, fake_head, fake_tags };
	struct scanner *sc;
	scan_new(ix, &src, NULL, on_change, NULL, &sc);
	scan_start_views(sc, &v, 1);
	CHECK(scan_wait(sc, "bk", 10000) == 0 && index_objects(ix) == 10, "first scan: 10 objects");

	/* behind the index's back (events lost) */
	fake_put(&f, "a-first", 1, 1100, NULL);    /* before every key */
	fake_put(&f, "m04x", 2, 1100, NULL);       /* inside a page */
	fake_put(&f, "z-last", 3, 1100, NULL);     /* after every key */
	fake_del(&f, "m00");                       /* the first key */
	fake_del(&f, "m05");                       /* a page boundary (m03 m04 m05) */
	fake_del(&f, "m09");                       /* the last key */
	fake_put(&f, "m07", 777, 1100, NULL);      /* changed */
	chg_reset();
	int lists0 = atomic_load(&f.lists);
	char *rep = NULL;
	int rc = scan_rescan(sc, "bk", &rep);
	CHECK(rc == 0 && rep, "rescan returns 0 with a report (rc %d)", rc);
	comment(rep);
	CHECK(has_line(rep, "bucket bk: listed 10, added 3, removed 3, updated 1, unchanged 6, "
		       "kept (newer events) 0"), "report counts: listed 10, added 3, removed 3, "
	      "updated 1, unchanged 6");
	CHECK(has_line(rep, "  added: a-first") && has_line(rep, "  added: m04x") &&
	      has_line(rep, "  added: z-last"), "report names the added keys");
	CHECK(has_line(rep, "  removed: m00") && has_line(rep, "  removed: m05") &&
	      has_line(rep, "  removed: m09") && has_line(rep, "  updated: m07"),
	      "report names the removed and updated keys");
	free(rep);
	CHECK(atomic_load(&f.lists) - lists0 == 4, "10 keys in pages of 3: 4 LISTs (%d)",
	      atomic_load(&f.lists) - lists0);
	uint64_t sz = 0;
	CHECK(present(ix, 0, "a-first", NULL) && present(ix, 0, "m04x", NULL) &&
	      present(ix, 0, "z-last", NULL), "added objects are in the view");
	CHECK(!present(ix, 0, "m00", NULL) && !present(ix, 0, "m05", NULL) &&
	      !present(ix, 0, "m09", NULL), "removed objects are gone from the view");
	CHECK(present(ix, 0, "m07", &sz) && sz == 777, "changed object has its new size");
	CHECK(index_objects(ix) == 10 && index_members(ix, unit_v(0)) == 10, "counters: 10 objects");
	CHECK(atomic_load(&n_chg[INDEX_ADDED]) == 3 && atomic_load(&n_chg[INDEX_REMOVED]) == 3 &&
	      atomic_load(&n_chg[INDEX_CHANGED]) == 1,
	      "change callback: 3 added, 3 removed, 1 changed (%d %d %d)",
	      atomic_load(&n_chg[INDEX_ADDED]), atomic_load(&n_chg[INDEX_REMOVED]),
	      atomic_load(&n_chg[INDEX_CHANGED]));
	CHECK(atomic_load(&f.heads) == 0 && atomic_load(&f.tag_gets) == 0,
	      "no HEAD or tag request when no view needs them");

	/* nothing changed: nothing done */
	chg_reset();
	rc = scan_rescan(sc, NULL, &rep);
	CHECK(rc == 0 && has_line(rep, "bucket bk: listed 10, added 0, removed 0, updated 0, "
				   "unchanged 10, kept (newer events) 0"),
	      "second rescan (all buckets): all unchanged");
	free(rep);
	CHECK(atomic_load(&n_chg[1]) + atomic_load(&n_chg[2]) + atomic_load(&n_chg[3]) == 0,
	      "and no change callback");

	/* an emptied bucket: everything removed */
	pthread_mutex_lock(&f.mu);
	f.n = 0;
	pthread_mutex_unlock(&f.mu);
	rc = scan_rescan(sc, "bk", &rep);
	CHECK(rc == 0 && has_line(rep, "bucket bk: listed 0, added 0, removed 10, updated 0, "
				   "unchanged 0, kept (newer events) 0") &&
	      index_objects(ix) == 0 && index_members(ix, unit_v(0)) == 0, "emptied bucket: all removed");
	free(rep);

	/* errors */
	rc = scan_rescan(sc, "nope", &rep);
	CHECK(rc == -ENOENT && has_line(rep, "bucket nope: error: never scanned by this gateway "
				       "(no view uses it)"), "unknown bucket: -ENOENT, said why");
	free(rep);
	rc = scan_rescan_view(sc, &v, 1, "nosuchview", &rep);
	CHECK(rc == -ENOENT && has_line(rep, "error: no view named \"nosuchview\""),
	      "unknown view: -ENOENT, said why");
	free(rep);
	fake_put(&f, "back", 1, 1200, NULL);
	f.fail_pages = 2;
	rc = scan_rescan_view(sc, &v, 1, "all", &rep);
	CHECK(rc == 0 && has_line(rep, "  added: back"), "rescan by view name; a failing page "
	      "is retried (rc %d)", rc);
	free(rep);
	f.fail_pages = 100;
	rc = scan_rescan(sc, "bk", &rep);
	CHECK(rc == -EIO && strstr(rep, "bucket bk: error: Input/output error"),
	      "a page failing every time: -EIO reported (rc %d)", rc);
	comment(rep);
	free(rep);
	f.fail_pages = 0;

	scan_free(sc);
	index_close(ix);
	view_free(v);
	unit_rmtree(dir);
	free(dir);
}

struct during { struct index *ix; int64_t now; };

/* Events while the rescan lists the second page (first page done). */
static void events_during(void *p)
{
	struct during *d = p;
	apply1(d->ix, ev("k01x", 5, d->now, false));      /* created in page 1's range */
	apply1(d->ix, ev("k05", 0, d->now, true));        /* deleted, listed later */
	apply1(d->ix, ev("k06", 666, d->now, false));     /* rewritten, listed later */
	apply1(d->ix, ev("k07x", 7, d->now, false));      /* created, not in the listing */
}

static void test_rescan_events(void)
{
	char *dir = unit_tmpdir("rescan");
	struct index *ix = unit_index_open(dir, NULL);
	struct view *v = unit_view("{\"name\":\"all\",\"bucket\":\"bk\"}");
	unit_set_views(ix, &v, 1);
	struct fake f;
	fake_init(&f, 3);
	char key[32];
	for (int i = 0; i < 9; i++) {
		snprintf(key, sizeof key, "k%02d", i);
		fake_put(&f, key, (uint64_t)i, 1000, NULL);
	}
	struct scan_source src = { &f, fake_list, NULL, NULL };
	struct scanner *sc;
	scan_new(ix, &src, NULL, on_change, NULL, &sc);
	scan_start(sc, "bk", 0);
	CHECK(scan_wait(sc, "bk", 10000) == 0, "first scan done");

	/* before the rescan: a lost delete of an object last written by an
	 * old event, an old delete of an object re-created later (create
	 * event lost), an event-written object that the bucket still has
	 * with other content (update event lost) */
	apply1(ix, ev("k03x", 9, 1500, false));   /* old event; object gone from S3 */
	apply1(ix, ev("k08", 0, 1500, true));     /* deleted at 1500 ... */
	fake_put(&f, "k08", 8, 1600, NULL);       /* ... re-created at 1600 */
	apply1(ix, ev("k02", 2222, 1500, false)); /* old event; S3 still has size 2 */
	CHECK(!present(ix, 0, "k08", NULL) && present(ix, 0, "k03x", NULL),
	      "before: k08 tombstoned, k03x present");

	struct during d = { ix, now_s() };
	f.hook_after = "k02";
	f.hook = events_during;
	f.hook_ctx = &d;
	char *rep = NULL;
	int rc = scan_rescan(sc, "bk", &rep);
	comment(rep);
	uint64_t sz = 0;
	CHECK(rc == 0, "rescan with events during it");
	CHECK(present(ix, 0, "k01x", &sz) && sz == 5,
	      "created during the rescan in an already listed range: kept");
	CHECK(present(ix, 0, "k07x", &sz) && sz == 7,
	      "created during the rescan, not in the later listing: kept");
	CHECK(!present(ix, 0, "k05", NULL), "deleted during the rescan: not resurrected");
	CHECK(present(ix, 0, "k06", &sz) && sz == 666, "rewritten during the rescan: not undone");
	CHECK(!present(ix, 0, "k03x", NULL), "old event record of a vanished object: removed");
	CHECK(present(ix, 0, "k08", &sz) && sz == 8, "re-created after an old delete: added");
	CHECK(present(ix, 0, "k02", &sz) && sz == 2, "old event record that differs: updated");
	CHECK(has_line(rep, "bucket bk: listed 9, added 1, removed 1, updated 1, unchanged 5, "
		       "kept (newer events) 3"), "report: added 1, removed 1, updated 1, "
	      "unchanged 5, kept 3");
	CHECK(has_line(rep, "  kept (newer event): k07x") &&
	      has_line(rep, "  kept (newer event): k05") &&
	      has_line(rep, "  kept (newer event): k06"), "report names the kept keys");
	free(rep);

	/* index_reconcile_page directly: a fresh event record not listed is
	 * kept, an old one removed, a tombstone not listed stays as it is */
	apply1(ix, ev("q-fresh", 1, now_s(), false));
	apply1(ix, ev("q-old", 1, 1500, false));
	struct index_reconcile_counts c = { 0 };
	rc = index_reconcile_page(ix, "bk", NULL, 0, "q", "q\x7f", now_s() * S, &c, NULL,
				  NULL, NULL, NULL);
	CHECK(rc == 0 && c.kept == 1 && c.removed == 1 && present(ix, 0, "q-fresh", NULL) &&
	      !present(ix, 0, "q-old", NULL), "range (q, q\\x7f]: fresh kept, old removed");
	CHECK(present(ix, 0, "k00", NULL) && present(ix, 0, "k07x", NULL),
	      "records outside the range untouched");

	scan_free(sc);
	index_close(ix);
	view_free(v);
	unit_rmtree(dir);
	free(dir);
}

/* Tags: fetched once per object per scan whatever the number of views
 * needing them; a rescan refreshes them; HEAD only when metadata is needed. */
static void test_tags(void)
{
	char *dir = unit_tmpdir("rescan");
	struct index *ix = unit_index_open(dir, NULL);
	struct view *v[3] = {
		unit_view("{\"name\":\"raw\",\"bucket\":\"bk\",\"match\":{\"tags\":{\"stage\":\"raw\"}}}"),
		unit_view("{\"name\":\"cooked\",\"bucket\":\"bk\",\"match\":{\"tags\":{\"stage\":\"cooked\"}}}"),
		unit_view("{\"name\":\"green\",\"bucket\":\"bk\",\"match\":{\"metadata\":{\"color\":\"green\"}}}"),
	};
	unit_set_views(ix, v, 2);   /* first: tags only */
	struct fake f;
	fake_init(&f, 4);
	char key[32];
	for (int i = 0; i < 10; i++) {
		snprintf(key, sizeof key, "t%02d", i);
		fake_put(&f, key, (uint64_t)i, 1000, i < 6 ? "raw" : i < 8 ? "cooked" : NULL);
	}
	struct scan_source src = { &f, fake_list, fake_head, fake_tags };
	struct scanner *sc;
	scan_new(ix, &src, NULL, on_change, NULL, &sc);
	scan_start_views(sc, v, 2);
	CHECK(scan_wait(sc, "bk", 10000) == 0, "first scan with tags done");
	CHECK(atomic_load(&f.tag_gets) == 10 && atomic_load(&f.heads) == 0,
	      "two tag views: one tag request per object (%d), no HEAD (%d)",
	      atomic_load(&f.tag_gets), atomic_load(&f.heads));
	CHECK(index_members(ix, unit_v(0)) == 6 && index_members(ix, unit_v(1)) == 2,
	      "raw has 6 members, cooked 2 (%llu, %llu)",
	      (unsigned long long)index_members(ix, unit_v(0)), (unsigned long long)index_members(ix, unit_v(1)));
	struct obj_meta o;
	CHECK(index_object(ix, unit_v(0), "t00", &o) == 0 && (o.flags & OBJ_HAS_TAGS) && o.n_tags == 1 &&
	      !strcmp(o.tags[0].name, "stage") && !strcmp(o.tags[0].value, "raw"),
	      "tags stored with the record");
	obj_meta_release(&o);
	struct scan_info *si;
	size_t n;
	scan_status(sc, &si, &n);
	CHECK(n == 1 && si[0].tag_gets == 10 && si[0].heads == 0, "status counts tag requests");
	free(si);

	/* tags change later (no event): a rescan refreshes them */
	fake_put(&f, "t00", 0, 1000, "cooked");    /* same content, new tags */
	fake_put(&f, "t09", 9, 1000, "raw");
	fake_put(&f, "t05", 5, 1000, NULL);
	atomic_store(&f.tag_gets, 0);
	char *rep;
	int rc = scan_rescan(sc, "bk", &rep);
	comment(rep);
	CHECK(rc == 0 && has_line(rep, "bucket bk: listed 10, added 0, removed 0, updated 3, "
				   "unchanged 7, kept (newer events) 0"), "rescan: 3 updated tags");
	free(rep);
	CHECK(atomic_load(&f.tag_gets) == 10, "rescan: one tag request per object (%d)",
	      atomic_load(&f.tag_gets));
	CHECK(!present(ix, 0, "t00", NULL) && present(ix, 1, "t00", NULL) &&
	      present(ix, 0, "t09", NULL) && !present(ix, 0, "t05", NULL),
	      "memberships follow the new tags");
	CHECK(index_members(ix, unit_v(0)) == 5 && index_members(ix, unit_v(1)) == 3, "raw 5, cooked 3");
	scan_free(sc);

	/* a metadata view too: HEAD and tags, each once per object */
	unit_set_views(ix, v, 3);
	struct fake g;
	fake_init(&g, 4);
	for (int i = 0; i < 7; i++) {
		snprintf(key, sizeof key, "u%02d", i);
		fake_put(&g, key, (uint64_t)i, 1000, "raw");
	}
	struct scan_source src2 = { &g, fake_list, fake_head, fake_tags };
	scan_new(ix, &src2, NULL, NULL, NULL, &sc);
	/* a fresh state dir would scan again; here the bucket is scanned, so
	 * a rescan does the work */
	scan_start_views(sc, v, 3);
	scan_wait(sc, "bk", 10000);
	rc = scan_rescan(sc, "bk", &rep);
	CHECK(rc == 0 && atomic_load(&g.heads) == 7 && atomic_load(&g.tag_gets) == 7,
	      "meta and tag views: one HEAD (%d) and one tag request (%d) per object",
	      atomic_load(&g.heads), atomic_load(&g.tag_gets));
	CHECK(present(ix, 0, "u03", NULL) && present(ix, 2, "u03", NULL),
	      "the object is in the tag view and the metadata view");
	comment(rep);
	free(rep);
	scan_free(sc);
	index_close(ix);
	for (int i = 0; i < 3; i++)
		view_free(v[i]);
	unit_rmtree(dir);
	free(dir);
}

static atomic_bool release_scan;

static void block_until_released(void *p)
{
	(void)p;
	while (!atomic_load(&release_scan))
		usleep(1000);
}

/* No rescan while the bucket's first scan runs. */
static void test_busy(void)
{
	char *dir = unit_tmpdir("rescan");
	struct index *ix = unit_index_open(dir, NULL);
	struct view *v = unit_view("{\"name\":\"all\",\"bucket\":\"bk\"}");
	unit_set_views(ix, &v, 1);
	struct fake f;
	fake_init(&f, 2);
	fake_put(&f, "b1", 1, 1000, NULL);
	fake_put(&f, "b2", 1, 1000, NULL);
	fake_put(&f, "b3", 1, 1000, NULL);
	atomic_store(&release_scan, false);
	f.hook_after = "b2";
	f.hook = block_until_released;
	struct scan_source src = { &f, fake_list, NULL, NULL };
	struct scanner *sc;
	scan_new(ix, &src, NULL, NULL, NULL, &sc);
	scan_start(sc, "bk", 0);
	while (atomic_load(&f.lists) < 2)
		usleep(1000);
	char *rep;
	int rc = scan_rescan(sc, "bk", &rep);
	CHECK(rc == -EBUSY && has_line(rep, "bucket bk: error: its first scan is still running; "
				       "rescan when it is done"), "rescan during the first scan: -EBUSY");
	free(rep);
	atomic_store(&release_scan, true);
	CHECK(scan_wait(sc, "bk", 10000) == 0, "first scan then completes");
	rc = scan_rescan(sc, "bk", &rep);
	CHECK(rc == 0 && has_line(rep, "bucket bk: listed 3, added 0, removed 0, updated 0, "
				   "unchanged 3, kept (newer events) 0"), "and a rescan then works");
	free(rep);
	scan_free(sc);
	index_close(ix);
	view_free(v);
	unit_rmtree(dir);
	free(dir);
}

/* The periodic rescan finds a lost object by itself. */
static void test_periodic(void)
{
	char *dir = unit_tmpdir("rescan");
	struct index *ix = unit_index_open(dir, NULL);
	struct view *v = unit_view("{\"name\":\"all\",\"bucket\":\"bk\"}");
	unit_set_views(ix, &v, 1);
	struct fake f;
	fake_init(&f, 5);
	fake_put(&f, "p1", 1, 1000, NULL);
	struct scan_source src = { &f, fake_list, NULL, NULL };
	struct scanner *sc;
	scan_new(ix, &src, NULL, NULL, NULL, &sc);
	scan_start(sc, "bk", 0);
	scan_wait(sc, "bk", 10000);
	fake_put(&f, "p2", 2, 1100, NULL);
	CHECK(scan_set_rescan_interval(sc, 1) == 0, "periodic rescan every 1 s");
	bool seen = false;
	for (int i = 0; i < 60 && !seen; i++) {
		usleep(50000);
		seen = present(ix, 0, "p2", NULL);
	}
	CHECK(seen, "lost object found by the periodic rescan");
	scan_free(sc);   /* joins the periodic thread */
	index_close(ix);
	view_free(v);
	unit_rmtree(dir);
	free(dir);
}

int main(void)
{
	test_rescan_fixes();
	test_rescan_events();
	test_tags();
	test_busy();
	test_periodic();
	return unit_exit();
}
