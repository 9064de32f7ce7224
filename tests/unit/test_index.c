/* test_index.c — unit tests of views/index.h (no services: LevelDB in a
 * temporary directory, real filter files from strings): the store itself
 * (round trips, tombstones and order, batches, memberships, views and
 * their changes, routing, kill -9, made directories). The rules for
 * records the gateway learns outside the event stream are in
 * test_index_rules.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/stats.h"
#include "views/filter.h"
#include "views/index.h"
#include "views/index_reconcile.h"
#include "tests/unit/unit.h"
#include "tests/unit/unit_views.h"
#include "tests/unit/unit_index.h"


/* ---- helpers ---------------------------------------------------------- */

struct changes { char log[8192]; size_t len; int n; };

static void on_change(void *ctx, const char *view, const char *path, int what)
{
	struct changes *c = ctx;
	const char *w = what == INDEX_ADDED ? "+" : what == INDEX_REMOVED ? "-" : "~";
	c->len += snprintf(c->log + c->len, sizeof c->log - c->len, "%s%ld:%s ", w,
			   unit_view_index(view), path);
	c->n++;
}

struct listing { char names[16384]; size_t len; int n; int stop_after; };

static int on_entry(void *ctx, const char *name, const struct index_attr *a)
{
	struct listing *l = ctx;
	if (l->len < sizeof l->names - 1) {
		int w = snprintf(l->names + l->len, sizeof l->names - l->len, "%s%s%s",
				 l->n ? " " : "", name, a->is_dir ? "/" : "");
		l->len += (size_t)w;
		if (l->len > sizeof l->names - 1)
			l->len = sizeof l->names - 1;
	}
	l->n++;
	return l->stop_after && l->n >= l->stop_after;
}

static const char *ls(struct index *ix, size_t vi, const char *dir, const char *after,
		      int *rc)
{
	static struct listing l;
	memset(&l, 0, sizeof l);
	*rc = index_readdir(ix, unit_v(vi), dir, after, on_entry, &l);
	return l.names;
}

/* ---- tests ------------------------------------------------------------ */

static void test_round_trip(void)
{
	char *dir = unit_tmpdir("index");
	struct stats st;
	stats_init(&st);
	struct index *ix = unit_index_open(dir, &st);
	struct view *v[2] = {
		unit_view("{\"name\":\"all\",\"bucket\":\"b1\"}"),
		unit_view("{\"name\":\"runs\",\"bucket\":\"b1\",\"match\":{\"prefix\":\"runs/\"},"
		     "\"layout\":{\"strip_prefix\":\"runs/\"}}"),
	};
	CHECK(unit_set_views(ix, v, 2) == 0, "set_views on an empty index");
	struct obj_meta ev[5] = {
		mk("b1", "runs/a/x.fa", 10, 100, "e1", NULL),
		mk("b1", "runs/a/y.fa", 20, 101, "e2", NULL),
		mk("b1", "runs/top.txt", 30, 102, "e3", NULL),
		mk("b1", "logs/l1", 40, 103, "e4", NULL),
		mk("b2", "other", 50, 104, "e5", NULL),
	};
	struct index_pos pos[2] = { { "s3events", 0, 17 }, { "s3events", 3, 5 } };
	struct changes c = { 0 };
	int rc = index_apply(ix, ev, 5, pos, 2, on_change, &c);
	CHECK(rc == 0, "apply 5 events: %d stale", rc);
	CHECK(c.n == 7, "7 membership changes reported (%d: %s)", c.n, c.log);
	CHECK(strstr(c.log, "+1:a/x.fa") && strstr(c.log, "+0:runs/a/x.fa") &&
	      strstr(c.log, "+0:logs/l1") && !strstr(c.log, "other"),
	      "changes name view and path: %s", c.log);
	CHECK(stats_value(&st, "events", "applied") == 5, "ev_applied counts applied events");
	CHECK(index_objects(ix) == 5, "5 live objects (%llu)", (unsigned long long)index_objects(ix));
	CHECK(index_members(ix, unit_v(0)) == 4 && index_members(ix, unit_v(1)) == 3, "member counts 4 and 3");

	int64_t off = -1;
	CHECK(index_offset_get(ix, "s3events", 0, &off) == 0 && off == 17, "offset p0 = 17");
	CHECK(index_offset_get(ix, "s3events", 3, &off) == 0 && off == 5, "offset p3 = 5");
	CHECK(index_offset_get(ix, "s3events", 1, &off) == -ENOENT, "offset p1 unknown");
	CHECK(index_offset_get(ix, "other", 0, &off) == -ENOENT, "offset of another topic unknown");

	struct index_attr a;
	CHECK(index_lookup(ix, unit_v(1), "a/x.fa", &a) == 0 && !a.is_dir && a.size == 10 &&
	      a.mtime_ns == 100 * S && strcmp(a.etag, "e1") == 0, "lookup file attrs");
	CHECK(index_lookup(ix, unit_v(1), "a", &a) == 0 && a.is_dir, "lookup implicit directory");
	CHECK(index_lookup(ix, unit_v(1), "", &a) == 0 && a.is_dir, "lookup root");
	CHECK(index_lookup(ix, unit_v(1), "b", &a) == -ENOENT, "lookup missing");
	CHECK(index_lookup(ix, unit_v(1), "a/x", &a) == -ENOENT, "lookup of a name prefix is not a hit");
	CHECK(index_lookup(ix, unit_v(1), "logs", &a) == -ENOENT, "other view's object not visible");
	CHECK(index_lookup(ix, unit_v(9), "a", &a) == -EINVAL, "bad view index");

	const char *l = ls(ix, 1, "", NULL, &rc);
	CHECK(rc == 0 && strcmp(l, "a/ top.txt") == 0, "readdir root: '%s'", l);
	l = ls(ix, 1, "a", NULL, &rc);
	CHECK(rc == 0 && strcmp(l, "x.fa y.fa") == 0, "readdir a: '%s'", l);
	l = ls(ix, 1, "a", "x.fa", &rc);
	CHECK(rc == 0 && strcmp(l, "y.fa") == 0, "readdir a after x.fa: '%s'", l);
	l = ls(ix, 1, "zz", NULL, &rc);
	CHECK(rc == -ENOENT, "readdir of a missing dir: -ENOENT");
	l = ls(ix, 0, "", NULL, &rc);
	CHECK(rc == 0 && strcmp(l, "logs/ runs/") == 0, "readdir root of view all: '%s'", l);

	struct obj_meta o;
	CHECK(index_object(ix, unit_v(1), "a/y.fa", &o) == 0 && strcmp(o.bucket, "b1") == 0 &&
	      strcmp(o.key, "runs/a/y.fa") == 0 && o.size == 20 && strcmp(o.etag, "e2") == 0,
	      "index_object gives the full record");
	obj_meta_release(&o);
	CHECK(index_object(ix, unit_v(1), "a", &o) == -ENOENT, "index_object of a directory");

	index_close(ix);
	view_free(v[0]);
	view_free(v[1]);
	release_all(ev, 5);
	stats_release(&st);
	unit_rmtree(dir);
	free(dir);
}

static void test_tombstones_and_order(void)
{
	char *dir = unit_tmpdir("index");
	struct stats st;
	stats_init(&st);
	struct index *ix = unit_index_open(dir, &st);
	struct view *v = unit_view("{\"name\":\"all\",\"bucket\":\"b\"}");
	unit_set_views(ix, &v, 1);
	struct index_attr a;
	int rc;

	/* put (seq 10), delete (seq 20), then a late put with seq 15 */
	struct obj_meta e1 = mk("b", "k", 1, 100, "e1", "0000000A");
	struct obj_meta e2 = mkdel("b", "k", 101, "14");
	struct obj_meta e3 = mk("b", "k", 3, 99, "e3", "0F");
	index_apply(ix, &e1, 1, NULL, 0, NULL, NULL);
	CHECK(index_lookup(ix, unit_v(0), "k", &a) == 0, "put visible");
	index_apply(ix, &e2, 1, NULL, 0, NULL, NULL);
	CHECK(index_lookup(ix, unit_v(0), "k", &a) == -ENOENT, "delete removes it");
	CHECK(index_objects(ix) == 0 && index_members(ix, unit_v(0)) == 0, "counts back to 0");
	rc = index_apply(ix, &e3, 1, NULL, 0, NULL, NULL);
	CHECK(rc == 1 && index_lookup(ix, unit_v(0), "k", &a) == -ENOENT,
	      "late older put does not resurrect (stale=%d)", rc);
	struct obj_meta o;
	CHECK(index_object_get(ix, "b", "k", &o) == 0 && (o.flags & OBJ_DELETED) &&
	      strcmp(o.seq, "14") == 0, "tombstone keeps seq");
	obj_meta_release(&o);

	/* a delete of a never-seen key still leaves a tombstone */
	struct obj_meta d2 = mkdel("b", "never", 200, "50");
	struct obj_meta p2 = mk("b", "never", 5, 199, "x", "40");
	index_apply(ix, &d2, 1, NULL, 0, NULL, NULL);
	rc = index_apply(ix, &p2, 1, NULL, 0, NULL, NULL);
	CHECK(rc == 1 && index_lookup(ix, unit_v(0), "never", &a) == -ENOENT,
	      "tombstone of an unseen key holds");

	/* Ceph-normalised sequencers (ns since epoch as hex): a newer one
	 * with the same length but a smaller first digit than a stale one
	 * would compare wrong as RGW's raw little-endian hex. */
	struct obj_meta c1 = mk("b", "ceph", 1, 300, "c1", "18E7A43F2B0A1C00");
	struct obj_meta c2 = mk("b", "ceph", 2, 301, "c2", "18E7A43F2B0A1C01");
	struct obj_meta c0 = mk("b", "ceph", 9, 299, "c0", "18E7A43F2B0A1BFF");
	index_apply(ix, &c1, 1, NULL, 0, NULL, NULL);
	index_apply(ix, &c2, 1, NULL, 0, NULL, NULL);
	rc = index_apply(ix, &c0, 1, NULL, 0, NULL, NULL);
	CHECK(rc == 1 && index_lookup(ix, unit_v(0), "ceph", &a) == 0 && a.size == 2,
	      "older sequencer skipped, newer kept");
	/* unknown sequencer: applied in partition order */
	struct obj_meta c3 = mk("b", "ceph", 3, 250, "c3", NULL);
	rc = index_apply(ix, &c3, 1, NULL, 0, NULL, NULL);
	CHECK(rc == 0 && index_lookup(ix, unit_v(0), "ceph", &a) == 0 && a.size == 3,
	      "event without sequencer applies");
	/* redelivery of the same event: applied, no change reported */
	struct changes ch = { 0 };
	rc = index_apply(ix, &c3, 1, NULL, 0, on_change, &ch);
	CHECK(rc == 0 && ch.n == 0, "identical redelivery changes nothing");
	CHECK(stats_value(&st, "events", "redelivered") == 1, "and is counted as redelivered (%llu)",
	      (unsigned long long)stats_value(&st, "events", "redelivered"));

	/* from-scan records: events >1 s older than Last-Modified are stale */
	struct obj_meta s1 = mk("b", "scanned", 7, 1000, "s", NULL);
	s1.flags |= OBJ_FROM_SCAN;
	struct index_scan_state ss = { .done = false, .objects = 1, .token = "t1" };
	index_scan_apply(ix, "b", &s1, 1, &ss, NULL, NULL);
	struct obj_meta old = mk("b", "scanned", 8, 998, "o", "AB");
	struct obj_meta nearly = mk("b", "scanned", 9, 999, "n", "AC");
	rc = index_apply(ix, &old, 1, NULL, 0, NULL, NULL);
	CHECK(rc == 1 && index_lookup(ix, unit_v(0), "scanned", &a) == 0 && a.size == 7,
	      "event 2 s older than the scanned Last-Modified is stale");
	rc = index_apply(ix, &nearly, 1, NULL, 0, NULL, NULL);
	CHECK(rc == 0 && index_lookup(ix, unit_v(0), "scanned", &a) == 0 && a.size == 9,
	      "event within 1 s of Last-Modified applies");
	CHECK(stats_value(&st, "events", "ignored") == 4, "ev_ignored counts stale events (%llu)",
	      (unsigned long long)stats_value(&st, "events", "ignored"));

	index_close(ix);
	view_free(v);
	struct obj_meta all[] = { e1, e2, e3, d2, p2, c1, c2, c0, c3, s1, old, nearly };
	release_all(all, sizeof all / sizeof all[0]);
	stats_release(&st);
	unit_rmtree(dir);
	free(dir);
}

static void test_batch_duplicates(void)
{
	char *dir = unit_tmpdir("index");
	struct index *ix = unit_index_open(dir, NULL);
	struct view *v = unit_view("{\"name\":\"all\",\"bucket\":\"b\"}");
	unit_set_views(ix, &v, 1);
	struct obj_meta ev[6] = {
		mk("b", "k", 1, 10, "v1", "01"),
		mk("b", "k", 2, 11, "v2", "02"),
		mkdel("b", "k", 12, "03"),
		mk("b", "k", 4, 13, "v4", "02"),   /* older than the delete: stale */
		mk("b", "k", 5, 14, "v5", "04"),
		mk("b", "j", 6, 14, "j", NULL),
	};
	struct changes c = { 0 };
	int rc = index_apply(ix, ev, 6, NULL, 0, on_change, &c);
	struct index_attr a;
	CHECK(rc == 1, "one stale event inside the batch (%d)", rc);
	CHECK(index_lookup(ix, unit_v(0), "k", &a) == 0 && a.size == 5 && strcmp(a.etag, "v5") == 0,
	      "last event of the key wins");
	CHECK(strcmp(c.log, "+0:k ~0:k -0:k +0:k +0:j ") == 0,
	      "changes in order: '%s'", c.log);
	CHECK(index_objects(ix) == 2 && index_members(ix, unit_v(0)) == 2, "counts after the batch");
	index_close(ix);
	view_free(v);
	release_all(ev, 6);
	unit_rmtree(dir);
	free(dir);
}

/* Input already in key order takes a path without sorting (the ops are
 * grouped by view, index.c ops_group): several views whose index order is
 * not their name order, a key with several ops in one batch (the last
 * wins), and a page whose paths are out of order ('/' stored as \0). */
static void test_sorted_batches(void)
{
	char *dir = unit_tmpdir("index");
	struct index *ix = unit_index_open(dir, NULL);
	struct view *v[3] = {
		unit_view("{\"name\":\"zz\",\"bucket\":\"b\"}"),
		unit_view("{\"name\":\"aa\",\"bucket\":\"b\"}"),
		unit_view("{\"name\":\"mm\",\"bucket\":\"b\",\"match\":{\"size\":{\"max\":3}}}"),
	};
	unit_set_views(ix, v, 3);
	struct obj_meta ev[5] = {
		mk("b", "a", 1, 10, "a1", "01"),
		mkdel("b", "a", 11, "02"),
		mk("b", "b", 2, 12, "b2", "03"),
		mk("b", "b", 5, 13, "b5", "04"),
		mk("b", "c", 3, 14, "c3", "05"),
	};
	int rc = index_apply(ix, ev, 5, NULL, 0, NULL, NULL);
	struct index_attr a;
	CHECK(rc == 0, "sorted batch with repeated keys applied (%d)", rc);
	bool ok = true;
	for (size_t vi = 0; vi < 3; vi++) {
		ok = ok && index_lookup(ix, unit_v(vi), "a", &a) == -ENOENT;
		ok = ok && index_lookup(ix, unit_v(vi), "c", &a) == 0 && a.size == 3;
	}
	ok = ok && index_lookup(ix, unit_v(0), "b", &a) == 0 && a.size == 5 &&
	     index_lookup(ix, unit_v(1), "b", &a) == 0 && a.size == 5 &&
	     index_lookup(ix, unit_v(2), "b", &a) == -ENOENT;
	CHECK(ok, "the last op of each key wins in every view");
	CHECK(index_members(ix, unit_v(0)) == 2 && index_members(ix, unit_v(1)) == 2 &&
	      index_members(ix, unit_v(2)) == 1, "member counts %llu %llu %llu",
	      (unsigned long long)index_members(ix, unit_v(0)),
	      (unsigned long long)index_members(ix, unit_v(1)),
	      (unsigned long long)index_members(ix, unit_v(2)));

	/* a listed page: key order "a-b" < "a/b" < "a0", path order "a/b" first */
	struct obj_meta pg[4] = {
		mk("b", "a-b", 1, 20, "x", NULL),
		mk("b", "a/b", 1, 20, "y", NULL),
		mk("b", "a/c", 1, 20, "z", NULL),
		mk("b", "a0", 9, 20, "w", NULL),
	};
	struct index_scan_state ss = { .done = true, .objects = 4 };
	rc = index_scan_apply(ix, "b", pg, 4, &ss, NULL, NULL);
	CHECK(rc == 0, "page with paths out of key order applied (%d)", rc);
	const char *l = ls(ix, 1, "", NULL, &rc);
	CHECK(rc == 0 && strcmp(l, "a/ a-b a0 b c") == 0, "root of aa: '%s'", l);
	l = ls(ix, 2, "a", NULL, &rc);
	CHECK(rc == 0 && strcmp(l, "b c") == 0, "a/ of mm: '%s'", l);
	CHECK(index_members(ix, unit_v(1)) == 6 && index_members(ix, unit_v(2)) == 4,
	      "member counts after the page");
	index_close(ix);
	for (int i = 0; i < 3; i++)
		view_free(v[i]);
	release_all(ev, 5);
	release_all(pg, 4);
	unit_rmtree(dir);
	free(dir);
}

static void test_membership_moves(void)
{
	char *dir = unit_tmpdir("index");
	struct index *ix = unit_index_open(dir, NULL);
	struct view *v[2] = {
		unit_view("{\"name\":\"black\",\"bucket\":\"b\",\"match\":{\"metadata\":{\"color\":\"black\"}}}"),
		unit_view("{\"name\":\"green\",\"bucket\":\"b\",\"match\":{\"metadata\":{\"color\":\"green\"}}}"),
	};
	unit_set_views(ix, v, 2);
	struct obj_meta e1 = mk("b", "d/f", 1, 10, "x", "01");
	obj_kv_add(&e1.meta, &e1.n_meta, "color", "black");
	struct obj_meta e2 = mk("b", "d/f", 1, 11, "y", "02");
	obj_kv_add(&e2.meta, &e2.n_meta, "color", "green");
	struct obj_meta e3 = mk("b", "d/f", 1, 12, "z", "03");
	e3.flags = 0;   /* metadata unknown (AWS event): matches neither */
	struct changes c = { 0 };
	struct index_attr a;
	index_apply(ix, &e1, 1, NULL, 0, on_change, &c);
	CHECK(index_lookup(ix, unit_v(0), "d/f", &a) == 0 && index_lookup(ix, unit_v(1), "d/f", &a) == -ENOENT,
	      "black object in view black only");
	index_apply(ix, &e2, 1, NULL, 0, on_change, &c);
	CHECK(index_lookup(ix, unit_v(0), "d/f", &a) == -ENOENT && index_lookup(ix, unit_v(1), "d/f", &a) == 0,
	      "after the metadata change it moved to view green");
	CHECK(index_lookup(ix, unit_v(0), "d", &a) == -ENOENT, "its directory left view black too");
	index_apply(ix, &e3, 1, NULL, 0, on_change, &c);
	CHECK(index_lookup(ix, unit_v(1), "d/f", &a) == -ENOENT, "unknown metadata matches neither");
	CHECK(strcmp(c.log, "+0:d/f -0:d/f +1:d/f -1:d/f ") == 0, "changes: '%s'", c.log);
	struct obj_meta o;
	index_apply(ix, &e2, 1, NULL, 0, NULL, NULL);   /* stale now (seq 02 < 03) */
	CHECK(index_object_get(ix, "b", "d/f", &o) == 0 && o.n_meta == 0 &&
	      !(o.flags & OBJ_HAS_META), "record replaced wholesale");
	obj_meta_release(&o);
	index_close(ix);
	view_free(v[0]);
	view_free(v[1]);
	obj_meta_release(&e1);
	obj_meta_release(&e2);
	obj_meta_release(&e3);
	unit_rmtree(dir);
	free(dir);
}

static void test_bad_keys_and_dirs(void)
{
	char *dir = unit_tmpdir("index");
	struct stats st;
	stats_init(&st);
	struct index *ix = unit_index_open(dir, &st);
	struct view *v[2] = {
		unit_view("{\"name\":\"all\",\"bucket\":\"b\"}"),
		unit_view("{\"name\":\"multi\",\"bucket\":[\"b\",\"c\"]}"),
	};
	unit_set_views(ix, v, 2);
	char big[300];
	memset(big, 'x', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	char longkey[320];
	snprintf(longkey, sizeof longkey, "d/%s", big);
	struct obj_meta ev[] = {
		mk("b", "a//b", 1, 1, "", NULL),
		mk("b", "a/../b", 1, 1, "", NULL),
		mk("b", "dir/", 1, 1, "", NULL),
		mk("b", longkey, 1, 1, "", NULL),
		mk("b", "same", 1, 1, "file", NULL),       /* both a file ... */
		mk("b", "same/inner", 2, 1, "", NULL),     /* ... and a directory */
		mk("b", "same.txt", 3, 1, "", NULL),
		mk("b", "same0", 4, 1, "", NULL),
		mk("c", "same", 5, 1, "", NULL),
	};
	size_t n = sizeof ev / sizeof ev[0];
	index_apply(ix, ev, n, NULL, 0, NULL, NULL);
	CHECK(stats_value(&st, "keys", "not_a_path") == 8, "4 bad keys x 2 views counted (%llu)",
	      (unsigned long long)stats_value(&st, "keys", "not_a_path"));
	int rc;
	const char *l = ls(ix, 0, "", NULL, &rc);
	CHECK(strcmp(l, "same/ same.txt same0") == 0, "bad keys left out; dir wins: '%s'", l);
	struct index_attr a;
	CHECK(index_lookup(ix, unit_v(0), "same", &a) == 0 && a.is_dir, "lookup agrees: directory");
	l = ls(ix, 1, "", NULL, &rc);
	CHECK(strcmp(l, "b/ c/") == 0, "multi-bucket view shows bucket dirs: '%s'", l);
	l = ls(ix, 1, "c", NULL, &rc);
	CHECK(strcmp(l, "same") == 0, "multi-bucket view bucket c: '%s'", l);
	CHECK(index_lookup(ix, unit_v(1), "b/same.txt", &a) == 0 && a.size == 3, "multi lookup");
	CHECK(index_objects(ix) == 9, "bad-key objects are still recorded (%llu)",
	      (unsigned long long)index_objects(ix));

	/* a directory of 5,000 subdirectories of 20 files: listing stays
	 * one entry per subdirectory */
	struct obj_meta *many = calloc(100000, sizeof *many);
	char key[64];
	for (int i = 0; i < 100000; i++) {
		snprintf(key, sizeof key, "big/s%04d/f%02d", i / 20, i % 20);
		many[i] = mk("b", key, 1, 1, "", NULL);
	}
	CHECK(index_apply(ix, many, 100000, NULL, 0, NULL, NULL) == 0, "apply 100K objects");
	struct listing lst = { 0 };
	rc = index_readdir(ix, unit_v(0), "big", NULL, on_entry, &lst);
	CHECK(rc == 0 && lst.n == 5000, "readdir big: 5000 subdirs (%d)", lst.n);
	memset(&lst, 0, sizeof lst);
	lst.stop_after = 3;
	index_readdir(ix, unit_v(0), "big", "s0100", on_entry, &lst);
	CHECK(strcmp(lst.names, "s0101/ s0102/ s0103/") == 0, "resume after s0100 + stop: '%s'",
	      lst.names);
	memset(&lst, 0, sizeof lst);
	index_readdir(ix, unit_v(0), "big/s0042", NULL, on_entry, &lst);
	CHECK(lst.n == 20, "a subdirectory lists its 20 files");
	release_all(many, 100000);
	free(many);

	index_close(ix);
	view_free(v[0]);
	view_free(v[1]);
	release_all(ev, n);
	stats_release(&st);
	unit_rmtree(dir);
	free(dir);
}

static void test_view_changes_and_reopen(void)
{
	char *dir = unit_tmpdir("index");
	struct index *ix = unit_index_open(dir, NULL);
	struct view *v1 = unit_view("{\"name\":\"fa\",\"bucket\":\"b\",\"match\":{\"suffix\":\".fa\"}}");
	unit_set_views(ix, &v1, 1);
	struct obj_meta ev[4] = {
		mk("b", "x/1.fa", 1, 1, "", NULL),
		mk("b", "x/2.fa", 2, 1, "", NULL),
		mk("b", "x/3.txt", 3, 1, "", NULL),
		mkdel("b", "x/4.txt", 1, "05"),
	};
	struct index_pos pos = { "t", 0, 4 };
	index_apply(ix, ev, 4, &pos, 1, NULL, NULL);
	CHECK(index_members(ix, unit_v(0)) == 2, "view fa has 2 members");
	int rc;

	/* same name, new definition; plus a new view; no events, no scan */
	struct view *v2[2] = {
		unit_view("{\"name\":\"fa\",\"bucket\":\"b\",\"match\":{\"suffix\":\".txt\"}}"),
		unit_view("{\"name\":\"x\",\"bucket\":\"b\",\"layout\":{\"strip_prefix\":\"x/\"}}"),
	};
	CHECK(unit_set_views(ix, v2, 2) == 0, "set_views with a changed and a new view");
	view_free(v1);
	const char *l = ls(ix, 0, "x", NULL, &rc);
	CHECK(strcmp(l, "3.txt") == 0, "changed view rebuilt from records: '%s'", l);
	l = ls(ix, 1, "", NULL, &rc);
	CHECK(strcmp(l, "1.fa 2.fa 3.txt") == 0, "new view built from records: '%s'", l);
	CHECK(index_members(ix, unit_v(0)) == 1 && index_members(ix, unit_v(1)) == 3, "rebuilt member counts");
	index_close(ix);

	/* reopen: everything is still there, nothing is rebuilt */
	ix = unit_index_open(dir, NULL);
	CHECK(unit_set_views(ix, v2, 2) == 0, "reopen + same views");
	CHECK(index_objects(ix) == 3, "objects count survives (%llu)",
	      (unsigned long long)index_objects(ix));
	CHECK(index_members(ix, unit_v(0)) == 1 && index_members(ix, unit_v(1)) == 3, "member counts survive");
	int64_t off = 0;
	CHECK(index_offset_get(ix, "t", 0, &off) == 0 && off == 4, "offset survives");
	l = ls(ix, 1, "", NULL, &rc);
	CHECK(strcmp(l, "1.fa 2.fa 3.txt") == 0, "membership survives: '%s'", l);
	for (int i = 0; i < 500 && !index_filter_ready(ix); i++)
		usleep(10000);
	CHECK(index_filter_ready(ix), "key filter built after reopen");
	struct obj_meta late = mk("b", "x/4.txt", 9, 0, "", "04");
	rc = index_apply(ix, &late, 1, NULL, 0, NULL, NULL);
	CHECK(rc == 1, "tombstone survives reopen (key filter knows it)");
	struct obj_meta again = mk("b", "x/1.fa", 1, 1, "", NULL);
	struct changes ch = { 0 };
	rc = index_apply(ix, &again, 1, NULL, 0, on_change, &ch);
	CHECK(rc == 0 && ch.n == 0, "stored record found after reopen: redelivery is a no-op");
	obj_meta_release(&again);

	/* a view removed: its membership goes, the view that stays keeps its */
	struct view *only = v2[1];
	CHECK(unit_set_views(ix, &only, 1) == 0, "set_views with one view removed");
	l = ls(ix, 0, "", NULL, &rc);
	CHECK(strcmp(l, "1.fa 2.fa 3.txt") == 0, "remaining view intact (now index 0)");
	/* re-adding the removed view rebuilds it (its V entry was dropped) */
	CHECK(unit_set_views(ix, v2, 2) == 0 && index_members(ix, unit_v(0)) == 1,
	      "re-added view rebuilt");
	index_close(ix);
	view_free(v2[0]);
	view_free(v2[1]);
	obj_meta_release(&late);
	release_all(ev, 4);
	unit_rmtree(dir);
	free(dir);
}

/* Routing (views/route.h) in applies and in rebuilds: nested prefixes,
 * globs, `any`, strip_prefix, views without a prefix, two buckets. After
 * random puts and deletes, and after installing new views (rebuilt from the
 * records over their prefix ranges), every view's member count equals
 * view_match over the live objects, counted here by brute force. */
#define RT_POOL 300
struct rt_obj { char bucket[4]; char key[32]; bool live; uint64_t size; };

static int rt_expected(const struct view *v, const struct rt_obj *pool)
{
	int n = 0;
	for (int i = 0; i < RT_POOL; i++) {
		if (!pool[i].live)
			continue;
		struct obj_meta o = { 0 };
		o.bucket = (char *)pool[i].bucket;
		o.key = (char *)pool[i].key;
		o.size = pool[i].size;
		o.flags = OBJ_HAS_META;
		n += view_match(v, &o);
	}
	return n;
}

static int rt_check(struct index *ix, struct view **v, size_t n, const struct rt_obj *pool)
{
	int bad = 0;
	for (size_t i = 0; i < n; i++) {
		int want = rt_expected(v[i], pool);
		if (index_members(ix, unit_v(i)) != (uint64_t)want) {
			printf("# view %s: %llu members, %d expected\n", view_name(v[i]),
			       (unsigned long long)index_members(ix, unit_v(i)), want);
			bad++;
		}
	}
	return bad;
}

static void test_routing(void)
{
	static const char *heads[] = { "a/", "ab/", "ab/c/", "ab/d", "b/", "abc", "", "a" };
	static const char *tails[] = { "f.txt", "g.fa", "x/y.txt", "z" };
	struct rt_obj pool[RT_POOL];
	uint64_t r = 0x2545F4914F6CDD1DULL;
	for (int i = 0; i < RT_POOL; i++) {
		r ^= r << 13; r ^= r >> 7; r ^= r << 17;
		snprintf(pool[i].bucket, sizeof pool[i].bucket, "%s", r % 4 ? "b" : "b2");
		snprintf(pool[i].key, sizeof pool[i].key, "%s%d%s", heads[(r >> 8) % 8],
			 i, tails[(r >> 16) % 4]);
		pool[i].live = false;
	}
	char *dir = unit_tmpdir("index");
	struct index *ix = unit_index_open(dir, NULL);
	const char *set_a[] = {
		"{\"name\":\"v0\",\"bucket\":\"b\",\"match\":{\"prefix\":\"a\"}}",
		"{\"name\":\"v1\",\"bucket\":\"b\",\"match\":{\"prefix\":\"ab/\"}}",
		"{\"name\":\"v2\",\"bucket\":\"b\",\"match\":{\"glob\":\"ab/*/*\"}}",
		"{\"name\":\"v3\",\"bucket\":\"b\",\"match\":{\"suffix\":\".fa\"}}",
		"{\"name\":\"v4\",\"bucket\":\"b\",\"match\":{\"any\":[{\"prefix\":\"ab/c/\"},"
		"{\"prefix\":\"ab/d\"}]}}",
		"{\"name\":\"v5\",\"bucket\":\"b\",\"layout\":{\"strip_prefix\":\"b/\"}}",
		"{\"name\":\"v6\",\"bucket\":[\"b\",\"b2\"],\"match\":{\"prefix\":\"a/\"}}",
		"{\"name\":\"v7\",\"bucket\":\"b\",\"match\":{\"not\":{\"prefix\":\"a\"}}}",
		"{\"name\":\"v8\",\"bucket\":\"b2\",\"match\":{\"size\":{\"min\":500}}}",
	};
	enum { NA = sizeof set_a / sizeof *set_a };
	struct view *va[NA];
	for (size_t i = 0; i < NA; i++)
		va[i] = unit_view(set_a[i]);
	CHECK(unit_set_views(ix, va, NA) == 0, "routing: first view set");

	/* random puts and deletes, in batches, increasing sequencers */
	struct obj_meta ev[100];
	int seq = 1, bad_rc = 0;
	for (int b = 0; b < 30; b++) {
		for (int i = 0; i < 100; i++) {
			r ^= r << 13; r ^= r >> 7; r ^= r << 17;
			struct rt_obj *o = &pool[r % RT_POOL];
			char sq[24];
			snprintf(sq, sizeof sq, "%016X", seq++);
			if ((r >> 20) % 5 == 0) {
				ev[i] = mkdel(o->bucket, o->key, 1, sq);
				o->live = false;
			} else {
				o->size = (r >> 24) % 1000;
				ev[i] = mk(o->bucket, o->key, o->size, 1, "e", sq);
				o->live = true;
			}
		}
		struct index_pos pos = { "t", 0, seq };
		bad_rc += index_apply(ix, ev, 100, &pos, 1, NULL, NULL) != 0;
		release_all(ev, 100);
	}
	CHECK(bad_rc == 0, "routing: 30 batches applied, none stale");
	CHECK(rt_check(ix, va, NA, pool) == 0, "routing: applied memberships = brute force");

	/* new views next to the old: rebuilt over their prefix ranges (ab
	 * holds ab/c/, whose range is not walked twice) */
	const char *set_b[] = {
		"{\"name\":\"w0\",\"bucket\":\"b\",\"match\":{\"prefix\":\"ab\"}}",
		"{\"name\":\"w1\",\"bucket\":\"b\",\"match\":{\"prefix\":\"ab/c/\"}}",
		"{\"name\":\"w2\",\"bucket\":\"b\",\"match\":{\"glob\":\"b/*.txt\"}}",
		"{\"name\":\"w3\",\"bucket\":[\"b\",\"b2\"],\"match\":{\"prefix\":\"a\"},"
		"\"layout\":{\"strip_prefix\":\"ab/\"}}",
	};
	enum { NB = sizeof set_b / sizeof *set_b };
	struct view *vb[NA + NB];
	memcpy(vb, va, sizeof va);
	for (size_t i = 0; i < NB; i++)
		vb[NA + i] = unit_view(set_b[i]);
	CHECK(unit_set_views(ix, vb, NA + NB) == 0, "routing: prefix views added");
	CHECK(rt_check(ix, vb, NA + NB, pool) == 0, "routing: rebuilt prefix views = brute force");

	/* a new view with no literal prefix: the whole bucket is walked */
	struct view *vc[2] = {
		vb[NA],
		unit_view("{\"name\":\"u0\",\"bucket\":\"b\",\"match\":{\"suffix\":\".txt\"}}"),
	};
	CHECK(unit_set_views(ix, vc, 2) == 0, "routing: a view without prefix added");
	CHECK(rt_check(ix, vc, 2, pool) == 0, "routing: rebuilt whole-bucket view = brute force");
	index_close(ix);
	view_free(vc[1]);
	for (size_t i = 0; i < NA + NB; i++)
		view_free(vb[i]);
	unit_rmtree(dir);
	free(dir);
}

/* A batch acknowledged (index_apply returned) survives kill -9 of the
 * process right after, without fsync. */
static void test_kill9(void)
{
	char *dir = unit_tmpdir("index");
	int p[2];
	if (pipe(p) < 0)
		exit(2);
	pid_t pid = fork();
	if (pid == 0) {
		close(p[0]);
		struct index *ix = unit_index_open(dir, NULL);
		struct view *v = unit_view("{\"name\":\"all\",\"bucket\":\"b\"}");
		unit_set_views(ix, &v, 1);
		struct obj_meta *ev = calloc(1000, sizeof *ev);
		char key[32];
		for (int i = 0; i < 1000; i++) {
			snprintf(key, sizeof key, "d/k%04d", i);
			ev[i] = mk("b", key, (uint64_t)i, 1, "", NULL);
		}
		struct index_pos pos = { "t", 2, 1000 };
		int rc = index_apply(ix, ev, 1000, &pos, 1, NULL, NULL);
		char ack = rc == 0 ? 'y' : 'n';
		if (write(p[1], &ack, 1) != 1)
			_exit(3);
		for (;;)
			pause();
	}
	close(p[1]);
	char ack = 0;
	if (read(p[0], &ack, 1) != 1)
		ack = 0;
	kill(pid, SIGKILL);
	int status;
	waitpid(pid, &status, 0);
	close(p[0]);
	CHECK(ack == 'y' && WIFSIGNALED(status), "child applied a batch and was killed -9");
	struct index *ix = unit_index_open(dir, NULL);
	struct view *v = unit_view("{\"name\":\"all\",\"bucket\":\"b\"}");
	unit_set_views(ix, &v, 1);
	int64_t off = 0;
	struct index_attr a;
	CHECK(index_offset_get(ix, "t", 2, &off) == 0 && off == 1000, "offset survived kill -9");
	CHECK(index_objects(ix) == 1000 && index_members(ix, unit_v(0)) == 1000 &&
	      index_lookup(ix, unit_v(0), "d/k0999", &a) == 0 && a.size == 999,
	      "records and membership survived kill -9");
	index_close(ix);
	view_free(v);
	unit_rmtree(dir);
	free(dir);
}

/* Directories made with mkdir: stored, listed after a reopen, removed. */
static int collect_dir(void *ctx, const char *view, const char *path,
		       const struct obj_posix *px)
{
	char *acc = ctx;
	size_t n = strlen(acc);
	if (px->have)
		snprintf(acc + n, 256 - n, "%s%s:%s(%o,%u,%u,%lld)", n ? " " : "", view, path,
			 (unsigned)px->mode, (unsigned)px->uid, (unsigned)px->gid,
			 (long long)px->mtime_ns);
	else
		snprintf(acc + n, 256 - n, "%s%s:%s", n ? " " : "", view, path);
	return 0;
}

static int find_dir_t(void *ctx, const char *view, const char *path,
		      const struct obj_posix *px)
{
	if (strcmp(view, "w") == 0 && strcmp(path, "t") == 0)
		*(struct obj_posix *)ctx = *px;
	return 0;
}

/* Does this process map a file whose name contains dir and ends with
 * ".ldb" (a LevelDB table)? */
static bool maps_table_of(const char *dir)
{
	FILE *fp = fopen("/proc/self/maps", "r");
	CHECK(fp != NULL, "open /proc/self/maps");
	char line[4096];
	bool found = false;
	while (fp && fgets(line, sizeof line, fp)) {
		line[strcspn(line, "\n")] = '\0';
		size_t n = strlen(line);
		if (strstr(line, dir) && n > 4 && strcmp(line + n - 4, ".ldb") == 0)
			found = true;
	}
	if (fp)
		fclose(fp);
	return found;
}

/* The index reads its tables, it does not map them (index_env.h): after
 * a reopen (which writes the log into a table) and reads of the table,
 * no table file is mapped, and the reads are right. */
static void test_tables_not_mapped(void)
{
	char *dir = unit_tmpdir("index");
	struct index *ix = unit_index_open(dir, NULL);
	struct view *v = unit_view("{\"name\":\"all\",\"bucket\":\"b\"}");
	unit_set_views(ix, &v, 1);
	struct obj_meta ev[3] = {
		mk("b", "t/1", 1, 1, "", NULL),
		mk("b", "t/2", 2, 1, "", NULL),
		mk("b", "t/3", 3, 1, "", NULL),
	};
	struct index_pos pos = { "t", 0, 3 };
	index_apply(ix, ev, 3, &pos, 1, NULL, NULL);
	index_close(ix);

	ix = unit_index_open(dir, NULL);
	CHECK(unit_set_views(ix, &v, 1) == 0, "reopen with the same view");
	char cmd[4200];
	snprintf(cmd, sizeof cmd, "ls %s/index/*.ldb >/dev/null 2>&1", dir);
	CHECK(system(cmd) == 0, "the reopen wrote a table file");
	int rc;
	const char *l = ls(ix, 0, "t", NULL, &rc);
	CHECK(rc == 0 && strcmp(l, "1 2 3") == 0, "listing read from the table: '%s'", l);
	struct obj_meta m;
	CHECK(index_object_get(ix, "b", "t/2", &m) == 0, "a record read from the table");
	obj_meta_release(&m);
	CHECK(!maps_table_of(dir), "no table file of %s is mapped", dir);
	index_close(ix);
	view_free(v);
	release_all(ev, 3);
	unit_rmtree(dir);
	free(dir);
}

static void test_made_dirs(void)
{
	char *dir = unit_tmpdir("index");
	struct index *ix = unit_index_open(dir, NULL);
	struct obj_posix px = { .have = POSIX_MODE | POSIX_UID | POSIX_GID | POSIX_MTIME,
				.mode = 0750, .uid = 1001, .gid = 1002,
				.mtime_ns = 1700000000123456789LL };
	CHECK(index_dir_add(ix, "w", "a/b", NULL) == 0 && index_dir_add(ix, "w", "c", &px) == 0 &&
	      index_dir_add(ix, "x", "a", NULL) == 0, "made dirs: stored");
	index_close(ix);
	ix = unit_index_open(dir, NULL);
	char acc[256] = "";
	CHECK(index_dirs_each(ix, collect_dir, acc) == 0 &&
	      strcmp(acc, "w:a/b w:c(750,1001,1002,1700000000123456789) x:a") == 0,
	      "made dirs: listed with their attributes after a reopen (%s)", acc);
	acc[0] = '\0';
	px.mode = 0700;
	CHECK(index_dir_remove(ix, "w", "a/b") == 0 && index_dir_add(ix, "w", "c", &px) == 0 &&
	      index_dirs_each(ix, collect_dir, acc) == 0 &&
	      strcmp(acc, "w:c(700,1001,1002,1700000000123456789) x:a") == 0,
	      "made dirs: removed, attributes replaced (%s)", acc);

	/* atime and ctime are kept too (pjdfstest's chown/utimensat compare a
	 * directory's ctime and atime after each change) */
	struct obj_posix all = px, got = { 0 };
	all.have |= POSIX_ATIME | POSIX_CTIME;
	all.atime_ns = -5;               /* before the epoch */
	all.ctime_ns = 1800000000000000001LL;
	CHECK(index_dir_add(ix, "w", "t", &all) == 0, "made dirs: stored with atime and ctime");
	index_close(ix);
	ix = unit_index_open(dir, NULL);
	CHECK(index_dirs_each(ix, find_dir_t, &got) == 0 && got.have == all.have &&
	      got.atime_ns == -5 && got.ctime_ns == 1800000000000000001LL &&
	      got.mtime_ns == px.mtime_ns && got.mode == 0700,
	      "made dirs: atime and ctime read back after a reopen (have %x, atime %lld, ctime %lld)",
	      (unsigned)got.have, (long long)got.atime_ns, (long long)got.ctime_ns);
	index_close(ix);
	unit_rmtree(dir);
	free(dir);
}

int main(void)
{
	test_round_trip();
	test_tombstones_and_order();
	test_batch_duplicates();
	test_sorted_batches();
	test_membership_moves();
	test_bad_keys_and_dirs();
	test_view_changes_and_reopen();
	test_routing();
	test_kill9();
	test_made_dirs();
	test_tables_not_mapped();
	return unit_exit();
}
