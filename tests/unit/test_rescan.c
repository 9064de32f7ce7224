/* test_rescan.c — unit tests of rescans (views/scan.h: scan_rescan,
 * views/index_reconcile.h) and of tags in scans, on the in-memory store
 * (sync/s3/s3_fake.h) behind the fault wrapper (sync/s3/s3_fault.h), changed
 * between and during listings by the test as another client would (no
 * services): objects added, removed and changed behind the index's back
 * are fixed; events newer than the listing are never undone; tags are
 * fetched once per object per scan; failing LIST, HEAD and tag requests
 * are retried SCAN_RESCAN_TRIES times, then reported. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sync/s3/s3_fake.h"
#include "sync/s3/s3_fault.h"
#include "views/filter.h"
#include "views/index.h"
#include "tests/unit/unit.h"
#include "tests/unit/unit_views.h"
#include "views/index_reconcile.h"
#include "views/scan.h"


#define S 1000000000LL

/* ---- the bucket "bk", edited by the tests ------------------------------ */

struct bucket {
	struct s3 *fake;
	struct s3 *s3;           /* the fault wrapper the scanner gets */
	/* a hook run once, at the start of LIST number hook_list */
	int hook_list;
	void (*hook)(void *);
	void *hook_ctx;
};

static void bucket_hook(void *ctx, enum s3_kind k, const char *bucket, const char *key)
{
	struct bucket *b = ctx;
	(void)bucket;
	(void)key;
	if (k != S3K_LIST || !b->hook ||
	    (int)s3_fault_seen(b->s3, S3K_LIST) != b->hook_list)
		return;
	void (*h)(void *) = b->hook;
	b->hook = NULL;
	h(b->hook_ctx);
}

static void bucket_init(struct bucket *b, size_t page)
{
	memset(b, 0, sizeof *b);
	if (s3_fake_new(&b->fake) || s3_fault_new(b->fake, true, &b->s3) ||
	    s3_fake_bucket_add(b->fake, "bk"))
		exit(2);
	s3_fake_page_size_set(b->fake, page);
	s3_fake_hook_set(b->fake, bucket_hook, b);
}

static void bucket_free(struct bucket *b)
{
	s3_free(b->s3);
}

/* Run h at the start of the n-th LIST from now. */
static void hook_at_list(struct bucket *b, int n, void (*h)(void *), void *ctx)
{
	b->hook_list = (int)s3_fault_seen(b->s3, S3K_LIST) + n;
	b->hook_ctx = ctx;
	b->hook = h;
}

/* Write key with size bytes (content from size and time) at mtime_s, user
 * metadata color=green, and the tag "stage" unless stage is NULL. */
static void put(struct bucket *b, const char *key, uint64_t size, int64_t mtime_s,
		const char *stage)
{
	char data[4096];
	memset(data, 'a' + (int)(mtime_s % 26), sizeof data);
	struct obj_kv color = { "color", "green" };
	s3_fake_clock_set(b->fake, mtime_s * S);
	if (size > sizeof data ||
	    s3_fake_object_put(b->fake, "bk", key, data, (size_t)size, &color, 1, NULL))
		exit(2);
	struct obj_kv tag = { "stage", (char *)stage };
	if (stage && s3_fake_tags_set(b->fake, "bk", key, &tag, 1))
		exit(2);
}

/* Change the tags only (S3 keeps the object's ETag and Last-Modified). */
static void retag(struct bucket *b, const char *key, const char *stage)
{
	struct obj_kv tag = { "stage", (char *)stage };
	if (s3_fake_tags_set(b->fake, "bk", key, &tag, stage ? 1 : 0))
		exit(2);
}

static void del(struct bucket *b, const char *key)
{
	s3_fake_object_delete(b->fake, "bk", key);
}

static int keys_collect(void *ctx, const struct obj_meta *o)
{
	struct { char k[64][64]; int n; } *c = ctx;
	if (c->n < 64)
		snprintf(c->k[c->n++], sizeof c->k[0], "%s", o->key);
	return 0;
}

/* Delete every object (as another client would). */
static void bucket_empty(struct bucket *b)
{
	struct { char k[64][64]; int n; } c = { .n = 0 };
	char tok[256] = "", next[256];
	bool more = true;
	while (more && s3_list_page(b->fake, "bk", NULL, tok, keys_collect, &c, next,
				    sizeof next, &more) == 0)
		memcpy(tok, next, sizeof tok);
	for (int i = 0; i < c.n; i++)
		del(b, c.k[i]);
}

static int lists(struct bucket *b)
{
	return (int)s3_fault_seen(b->s3, S3K_LIST);
}

static int reached(struct bucket *b, enum s3_kind k)
{
	return (int)s3_fake_count(b->fake, k);
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
	struct bucket f;
	bucket_init(&f, 3);
	char key[32];
	for (int i = 0; i < 10; i++) {
		snprintf(key, sizeof key, "m%02d", i);
		put(&f, key, (uint64_t)i, 1000, NULL);
	}
	struct scanner *sc;
	scan_new(ix, f.s3, NULL, on_change, NULL, &sc);
	scan_start_views(sc, &v, 1);
	CHECK(scan_wait(sc, "bk", 10000) == 0 && index_objects(ix) == 10, "first scan: 10 objects");

	/* behind the index's back (events lost) */
	put(&f, "a-first", 1, 1100, NULL);    /* before every key */
	put(&f, "m04x", 2, 1100, NULL);       /* inside a page */
	put(&f, "z-last", 3, 1100, NULL);     /* after every key */
	del(&f, "m00");                       /* the first key */
	del(&f, "m05");                       /* a page boundary (m03 m04 m05) */
	del(&f, "m09");                       /* the last key */
	put(&f, "m07", 777, 1100, NULL);      /* changed */
	chg_reset();
	int lists0 = lists(&f);
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
	CHECK(lists(&f) - lists0 == 4, "10 keys in pages of 3: 4 LISTs (%d)",
	      lists(&f) - lists0);
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
	CHECK(reached(&f, S3K_HEAD) == 0 && reached(&f, S3K_TAGGING) == 0,
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
	bucket_empty(&f);
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
	put(&f, "back", 1, 1200, NULL);
	s3_fault_fail(f.s3, S3K_LIST, 1, 2, -EIO);
	lists0 = lists(&f);
	rc = scan_rescan_view(sc, &v, 1, "all", &rep);
	CHECK(rc == 0 && has_line(rep, "  added: back") && lists(&f) - lists0 == 3,
	      "rescan by view name; a LIST failing twice is retried (rc %d, %d LISTs)", rc,
	      lists(&f) - lists0);
	free(rep);
	s3_fault_clear(f.s3);
	s3_fault_fail(f.s3, S3K_LIST, 1, 0, -EIO);
	lists0 = lists(&f);
	rc = scan_rescan(sc, "bk", &rep);
	CHECK(rc == -EIO && rep && strstr(rep, "bucket bk: error: Input/output error") &&
	      lists(&f) - lists0 == SCAN_RESCAN_TRIES,
	      "a LIST failing every time: -EIO reported after %d tries (rc %d)",
	      lists(&f) - lists0, rc);
	comment(rep);
	free(rep);
	s3_fault_clear(f.s3);

	scan_free(sc);
	bucket_free(&f);
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
	struct bucket f;
	bucket_init(&f, 3);
	char key[32];
	for (int i = 0; i < 9; i++) {
		snprintf(key, sizeof key, "k%02d", i);
		put(&f, key, (uint64_t)i, 1000, NULL);
	}
	struct scanner *sc;
	scan_new(ix, f.s3, NULL, on_change, NULL, &sc);
	scan_start(sc, "bk", 0);
	CHECK(scan_wait(sc, "bk", 10000) == 0, "first scan done");

	/* before the rescan: a lost delete of an object last written by an
	 * old event, an old delete of an object re-created later (create
	 * event lost), an event-written object that the bucket still has
	 * with other content (update event lost) */
	apply1(ix, ev("k03x", 9, 1500, false));   /* old event; object gone from S3 */
	apply1(ix, ev("k08", 0, 1500, true));     /* deleted at 1500 ... */
	put(&f, "k08", 8, 1600, NULL);            /* ... re-created at 1600 */
	apply1(ix, ev("k02", 2222, 1500, false)); /* old event; S3 still has size 2 */
	CHECK(!present(ix, 0, "k08", NULL) && present(ix, 0, "k03x", NULL),
	      "before: k08 tombstoned, k03x present");

	struct during d = { ix, now_s() };
	hook_at_list(&f, 2, events_during, &d);   /* the page after k02 */
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
	bucket_free(&f);
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
	struct bucket f;
	bucket_init(&f, 4);
	char key[32];
	for (int i = 0; i < 10; i++) {
		snprintf(key, sizeof key, "t%02d", i);
		put(&f, key, (uint64_t)i, 1000, i < 6 ? "raw" : i < 8 ? "cooked" : NULL);
	}
	struct scanner *sc;
	scan_new(ix, f.s3, NULL, on_change, NULL, &sc);
	scan_start_views(sc, v, 2);
	CHECK(scan_wait(sc, "bk", 10000) == 0, "first scan with tags done");
	CHECK(reached(&f, S3K_TAGGING) == 10 && reached(&f, S3K_HEAD) == 0,
	      "two tag views: one tag request per object (%d), no HEAD (%d)",
	      reached(&f, S3K_TAGGING), reached(&f, S3K_HEAD));
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
	retag(&f, "t00", "cooked");    /* same content, new tags */
	retag(&f, "t09", "raw");
	retag(&f, "t05", NULL);
	int tags0 = reached(&f, S3K_TAGGING);
	char *rep;
	int rc = scan_rescan(sc, "bk", &rep);
	comment(rep);
	CHECK(rc == 0 && has_line(rep, "bucket bk: listed 10, added 0, removed 0, updated 3, "
				   "unchanged 7, kept (newer events) 0"), "rescan: 3 updated tags");
	free(rep);
	CHECK(reached(&f, S3K_TAGGING) - tags0 == 10, "rescan: one tag request per object (%d)",
	      reached(&f, S3K_TAGGING) - tags0);
	CHECK(!present(ix, 0, "t00", NULL) && present(ix, 1, "t00", NULL) &&
	      present(ix, 0, "t09", NULL) && !present(ix, 0, "t05", NULL),
	      "memberships follow the new tags");
	CHECK(index_members(ix, unit_v(0)) == 5 && index_members(ix, unit_v(1)) == 3, "raw 5, cooked 3");
	scan_free(sc);
	bucket_free(&f);

	/* a metadata view too: HEAD and tags, each once per object */
	unit_set_views(ix, v, 3);
	struct bucket g;
	bucket_init(&g, 4);
	for (int i = 0; i < 7; i++) {
		snprintf(key, sizeof key, "u%02d", i);
		put(&g, key, (uint64_t)i, 1000, "raw");
	}
	scan_new(ix, g.s3, NULL, NULL, NULL, &sc);
	/* a fresh state dir would scan again; here the bucket is scanned, so
	 * a rescan does the work */
	scan_start_views(sc, v, 3);
	scan_wait(sc, "bk", 10000);
	rc = scan_rescan(sc, "bk", &rep);
	CHECK(rc == 0 && reached(&g, S3K_HEAD) == 7 && reached(&g, S3K_TAGGING) == 7,
	      "meta and tag views: one HEAD (%d) and one tag request (%d) per object",
	      reached(&g, S3K_HEAD), reached(&g, S3K_TAGGING));
	CHECK(present(ix, 0, "u03", NULL) && present(ix, 2, "u03", NULL),
	      "the object is in the tag view and the metadata view");
	comment(rep);
	free(rep);
	scan_free(sc);
	bucket_free(&g);
	index_close(ix);
	for (int i = 0; i < 3; i++)
		view_free(v[i]);
	unit_rmtree(dir);
	free(dir);
}

/* A rescan's HEAD and tag requests failing: the page is retried like a
 * failed LIST (SCAN_RESCAN_TRIES attempts), except -EPROTO (an answer
 * that cannot be read), reported at once. */
static void test_rescan_failures(void)
{
	char *dir = unit_tmpdir("rescan");
	struct index *ix = unit_index_open(dir, NULL);
	struct view *v = unit_view("{\"name\":\"gr\",\"bucket\":\"bk\",\"match\":"
				   "{\"metadata\":{\"color\":\"green\"},\"tags\":{\"stage\":\"raw\"}}}");
	unit_set_views(ix, &v, 1);
	struct bucket f;
	bucket_init(&f, 4);
	char key[32];
	for (int i = 0; i < 7; i++) {
		snprintf(key, sizeof key, "f%02d", i);
		put(&f, key, (uint64_t)i, 1000, "raw");
	}
	struct scanner *sc;
	scan_new(ix, f.s3, NULL, NULL, NULL, &sc);
	scan_start_views(sc, &v, 1);
	CHECK(scan_wait(sc, "bk", 10000) == 0 && index_members(ix, unit_v(0)) == 7,
	      "failures: first scan, 7 members");
	static const struct {
		enum s3_kind kind;
		unsigned first, times;
		int err, rc, lists;
		const char *what;
	} c[] = {
		{ S3K_HEAD, 5, 1, -EIO, 0, 3, "a HEAD of page 1 failing once: page 1 again" },
		{ S3K_TAGGING, 2, 1, -EACCES, 0, 3, "a tag request refused once: page 0 again" },
		{ S3K_HEAD, 1, 0, -EHOSTUNREACH, -EHOSTUNREACH, SCAN_RESCAN_TRIES,
		  "every HEAD failing: reported after the tries" },
		{ S3K_TAGGING, 6, 1, -EPROTO, -EPROTO, 2,
		  "an unreadable tag answer: reported at once" },
	};
	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
		/* new content everywhere: the rescan must HEAD every object */
		for (int k = 0; k < 7; k++) {
			snprintf(key, sizeof key, "f%02d", k);
			put(&f, key, (uint64_t)k, 2000 + (int64_t)i, "raw");
		}
		s3_fault_fail(f.s3, c[i].kind, c[i].first, c[i].times, c[i].err);
		int lists0 = lists(&f);
		char *rep = NULL;
		int rc = scan_rescan(sc, "bk", &rep);
		int nl = lists(&f) - lists0;
		char want[128];
		snprintf(want, sizeof want, "bucket bk: error: %s", strerror(-c[i].err));
		bool said = c[i].rc == 0 ? rep && has_line(rep, "bucket bk: listed 7, added 0, "
				"removed 0, updated 7, unchanged 0, kept (newer events) 0")
			  : rep && strstr(rep, want) != NULL;
		CHECK(rc == c[i].rc && nl == c[i].lists && said &&
		      s3_fault_injected(f.s3, c[i].kind) >= 1,
		      "failures: %s (rc %d, %d LISTs)", c[i].what, rc, nl);
		comment(rep);
		free(rep);
		s3_fault_clear(f.s3);
	}
	scan_free(sc);
	bucket_free(&f);
	index_close(ix);
	view_free(v);
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
	struct bucket f;
	bucket_init(&f, 2);
	put(&f, "b1", 1, 1000, NULL);
	put(&f, "b2", 1, 1000, NULL);
	put(&f, "b3", 1, 1000, NULL);
	atomic_store(&release_scan, false);
	hook_at_list(&f, 2, block_until_released, NULL);   /* the page after b2 */
	struct scanner *sc;
	scan_new(ix, f.s3, NULL, NULL, NULL, &sc);
	scan_start(sc, "bk", 0);
	while (lists(&f) < 2)
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
	bucket_free(&f);
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
	struct bucket f;
	bucket_init(&f, 5);
	put(&f, "p1", 1, 1000, NULL);
	struct scanner *sc;
	scan_new(ix, f.s3, NULL, NULL, NULL, &sc);
	scan_start(sc, "bk", 0);
	scan_wait(sc, "bk", 10000);
	put(&f, "p2", 2, 1100, NULL);
	CHECK(scan_set_rescan_interval(sc, 1) == 0, "periodic rescan every 1 s");
	bool seen = false;
	for (int i = 0; i < 60 && !seen; i++) {
		usleep(50000);
		seen = present(ix, 0, "p2", NULL);
	}
	CHECK(seen, "lost object found by the periodic rescan");
	scan_free(sc);   /* joins the periodic thread */
	bucket_free(&f);
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
	test_rescan_failures();
	test_busy();
	test_periodic();
	return unit_exit();
}
