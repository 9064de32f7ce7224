/* test_index_rules.c — unit tests of the index's rules for records the
 * gateway learns outside the event stream (views/index.h): the stored
 * record of the same version (reuse instead of asking S3), the gateway's
 * own writes against their late events, a rescan's page against events
 * applied meanwhile, and a HEAD's version after a 412 (index_apply_newer).
 * LevelDB in a temporary directory, no services. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/stats.h"
#include "views/filter.h"
#include "views/index.h"
#include "views/index_reconcile.h"
#include "tests/unit/unit.h"
#include "tests/unit/unit_views.h"
#include "tests/unit/unit_index.h"

/* index_same_version: live, same ETag, Last-Modified within the slack; the
 * key filter's answer for keys never stored. */
static void test_same_version(void)
{
	char *dir = unit_tmpdir("index-sv");
	struct index *ix = unit_index_open(dir, NULL);
	for (int i = 0; i < 200 && !index_filter_ready(ix); i++)
		usleep(10000);
	CHECK(index_filter_ready(ix), "same version: the key filter is built");
	struct obj_meta ev[2] = { mk("b", "k", 10, 100, "e1", "0001"),
				  mk("b", "gone", 10, 100, "e2", "0001") };
	ev[0].meta = calloc(1, sizeof *ev[0].meta);
	ev[0].meta[0].name = strdup("color");
	ev[0].meta[0].value = strdup("red");
	ev[0].n_meta = 1;
	struct obj_meta del = mkdel("b", "gone", 101, "0002");
	CHECK(index_apply(ix, ev, 2, NULL, 0, NULL, NULL) == 0 &&
	      index_apply(ix, &del, 1, NULL, 0, NULL, NULL) == 0, "same version: records stored");

	struct obj_meta q = mk("b", "k", 10, 100, "e1", ""), r;
	q.mtime_ns += S / 2;
	int rc = index_same_version(ix, &q, &r);
	CHECK(rc == 0 && r.n_meta == 1 && strcmp(r.meta[0].value, "red") == 0 &&
	      strcmp(r.key, "k") == 0, "same version: same ETag, 0.5 s apart -> the record (%d)", rc);
	obj_meta_release(&r);
	q.mtime_ns = 100 * S - S / 2;
	CHECK(index_same_version(ix, &q, &r) == 0, "same version: 0.5 s earlier too");
	obj_meta_release(&r);
	q.mtime_ns = 100 * S + INDEX_TIME_SLACK_NS;
	CHECK(index_same_version(ix, &q, &r) == -ENOENT, "same version: the slack apart is another version");
	q.mtime_ns = 100 * S;
	snprintf(q.etag, sizeof q.etag, "e9");
	CHECK(index_same_version(ix, &q, &r) == -ENOENT, "same version: another ETag is not");
	q.etag[0] = '\0';
	CHECK(index_same_version(ix, &q, &r) == -ENOENT, "same version: no ETag, no answer");
	struct obj_meta g = mk("b", "gone", 10, 100, "e2", "");
	CHECK(index_same_version(ix, &g, &r) == -ENOENT, "same version: a tombstone is not");
	int absent = 0;
	for (int i = 0; i < 1000; i++) {
		char key[32];
		snprintf(key, sizeof key, "never-%d", i);
		struct obj_meta n = mk("b", key, 1, 100, "e", "");
		absent += index_same_version(ix, &n, &r) == -ENOENT &&
			  index_object_get(ix, "b", key, &r) == -ENOENT;
		obj_meta_release(&n);
	}
	CHECK(absent == 1000, "same version: keys never stored are absent (%d of 1000)", absent);
	obj_meta_release(&g);
	obj_meta_release(&q);
	obj_meta_release(&del);
	release_all(ev, 2);
	index_close(ix);
	unit_rmtree(dir);
	free(dir);
}

/* A record with one user-metadata value, m. */
static struct obj_meta mk_m(const char *key, const char *etag, const char *seq,
			    const char *m)
{
	struct obj_meta o = mk("b", key, 10, 100, etag, seq);
	o.meta = calloc(1, sizeof *o.meta);
	o.meta[0].name = strdup("m");
	o.meta[0].value = strdup(m);
	o.n_meta = 1;
	return o;
}

/* The stored record's m ("gone" for a tombstone, "none" without one). */
static const char *stored_m(struct index *ix, const char *key, char *buf, size_t len)
{
	struct obj_meta r;
	if (index_object_get(ix, "b", key, &r) < 0)
		return "none";
	const char *m = r.flags & OBJ_DELETED ? "gone" : obj_meta_get(&r, "m");
	snprintf(buf, len, "%s", m ? m : "(no m)");
	obj_meta_release(&r);
	return buf;
}

/* An event applied: its return (stale count) and the stored m after. */
static bool event_gives(struct index *ix, const struct obj_meta *ev, int want_rc,
			const char *key, const char *want_m, char *buf, size_t len)
{
	int rc = index_apply(ix, ev, 1, NULL, 0, NULL, NULL);
	return rc == want_rc && strcmp(stored_m(ix, key, buf, len), want_m) == 0;
}

/* index_apply_own (views/index_own.h): the late events of the gateway's
 * own writes do not replace its newer record; another client's do. */
static void test_own_writes(void)
{
	char *dir = unit_tmpdir("index-own");
	struct index *ix = unit_index_open(dir, NULL);
	char buf[64];
	/* The rsync case: a PUT, then a COPY onto itself (same bytes, same
	 * ETag, new time); the PUT's event arrives after the COPY returned. */
	struct obj_meta put = mk_m("f", "e1", "", "put"), copy = mk_m("f", "e1", "", "copy");
	CHECK(index_apply_own(ix, &put, NULL, NULL) == 0 &&
	      index_apply_own(ix, &copy, NULL, NULL) == 0, "own: PUT and COPY recorded");
	struct obj_meta ev_put = mk_m("f", "e1", "0001", "put");
	CHECK(index_apply(ix, &ev_put, 1, NULL, 0, NULL, NULL) == 1,
	      "own: the PUT's late event is skipped");
	CHECK(strcmp(stored_m(ix, "f", buf, sizeof buf), "copy") == 0,
	      "own: the COPY's metadata stays (%s)", buf);
	struct obj_meta ev_copy = mk_m("f", "e1", "0002", "copy");
	CHECK(event_gives(ix, &ev_copy, 1, "f", "copy", buf, sizeof buf),
	      "own: the COPY's own event is skipped too, the record stays (%s)", buf);
	/* Nothing of ours is awaited now: another client's write applies,
	 * and so does a redelivery of our old event after it (seq order). */
	struct obj_meta other = mk_m("f", "e2", "0003", "other");
	CHECK(event_gives(ix, &other, 0, "f", "other", buf, sizeof buf),
	      "own: another client's event applies (%s)", buf);
	CHECK(event_gives(ix, &ev_put, 1, "f", "other", buf, sizeof buf),
	      "own: an older event after it is stale by its sequencer (%s)", buf);

	/* A delete after a PUT: the PUT's late event does not bring it back. */
	struct obj_meta put2 = mk_m("g", "e3", "", "put"), del = mkdel("b", "g", 101, "");
	CHECK(index_apply_own(ix, &put2, NULL, NULL) == 0 &&
	      index_apply_own(ix, &del, NULL, NULL) == 0, "own: PUT and DELETE recorded");
	struct obj_meta ev_put2 = mk_m("g", "e3", "0001", "put");
	CHECK(event_gives(ix, &ev_put2, 1, "g", "gone", buf, sizeof buf),
	      "own: a deleted object's late PUT event does not resurrect it (%s)", buf);

	/* Another client's write (another ETag) while ours is awaited: its
	 * event applies; ours, arriving after, meets a record with a
	 * sequencer and is decided by it. */
	struct obj_meta put3 = mk_m("h", "e4", "", "ours");
	CHECK(index_apply_own(ix, &put3, NULL, NULL) == 0, "own: a PUT recorded");
	struct obj_meta theirs = mk_m("h", "e5", "0005", "theirs");
	CHECK(event_gives(ix, &theirs, 0, "h", "theirs", buf, sizeof buf),
	      "own: another ETag is another client's write: applied (%s)", buf);
	struct obj_meta ev_put3 = mk_m("h", "e4", "0004", "ours");
	CHECK(event_gives(ix, &ev_put3, 1, "h", "theirs", buf, sizeof buf),
	      "own: our older event after it stays stale by its sequencer (%s)", buf);

	/* Another client's copy of our bytes with other metadata while our
	 * write's event is awaited: not ours, applied. */
	struct obj_meta put4 = mk_m("c", "e8", "", "ours");
	struct obj_meta recopy = mk_m("c", "e8", "0009", "their metadata");
	CHECK(index_apply_own(ix, &put4, NULL, NULL) == 0 &&
	      event_gives(ix, &recopy, 0, "c", "their metadata", buf, sizeof buf),
	      "own: the same ETag with other metadata is another client's copy (%s)", buf);

	/* A version seen, not written (index_apply): no own write awaited,
	 * so the next event applies. */
	struct obj_meta seen = mk_m("s", "e6", "", "seen");
	struct obj_meta ev_s = mk_m("s", "e6", "0001", "event");
	CHECK(index_apply(ix, &seen, 1, NULL, 0, NULL, NULL) == 0 &&
	      event_gives(ix, &ev_s, 0, "s", "event", buf, sizeof buf),
	      "own: after a plain apply the event applies (%s)", buf);

	struct obj_meta *all[] = { &put, &copy, &ev_put, &ev_copy, &other, &put2, &del,
				   &ev_put2, &put3, &theirs, &ev_put3, &put4, &recopy, &seen,
				   &ev_s };
	for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
		obj_meta_release(all[i]);
	index_close(ix);
	unit_rmtree(dir);
	free(dir);
}

static int unsent_join(void *ctx, const char *bucket, const char *key)
{
	char *out = ctx;
	size_t n = strlen(out);
	snprintf(out + n, 256 - n, "%s%s/%s", n ? " " : "", bucket, key);
	return 0;
}

/* The keys index_unsent_each lists, joined by spaces ("" for none). */
static const char *unsent(struct index *ix, char out[256])
{
	out[0] = '\0';
	if (index_unsent_each(ix, unsent_join, out) < 0)
		snprintf(out, 256, "(error)");
	return out;
}

/* 'U' keys (index.h): a live record with no ETag is listed as unsent
 * from the batch that writes it until the one that gives it an ETag or
 * deletes it, through a reopen; an event of another client's version
 * ends it too, and the same record written again lists it once. */
static void test_unsent(void)
{
	char *dir = unit_tmpdir("index-unsent");
	struct index *ix = unit_index_open(dir, NULL);
	char out[256];
	struct obj_meta a = mk_m("a", "", "", "made"), b = mk_m("b", "", "", "made");
	struct obj_meta c = mk_m("c", "", "", "made"), a_up = mk_m("a", "e1", "", "sent");
	struct obj_meta b_del = mkdel("b", "b", 101, "");
	struct obj_meta c_ev = mk_m("c", "e2", "0001", "theirs");
	CHECK(strcmp(unsent(ix, out), "") == 0, "unsent: none in a new index (%s)", out);
	CHECK(index_apply_own(ix, &a, NULL, NULL) == 0 &&
	      index_apply_own(ix, &b, NULL, NULL) == 0 &&
	      index_apply_own(ix, &c, NULL, NULL) == 0 &&
	      index_apply_own(ix, &a, NULL, NULL) == 0, "unsent: three made, one twice");
	CHECK(strcmp(unsent(ix, out), "b/a b/b b/c") == 0, "unsent: the three (%s)", out);
	index_close(ix);
	ix = unit_index_open(dir, NULL);
	CHECK(strcmp(unsent(ix, out), "b/a b/b b/c") == 0,
	      "unsent: the three after a reopen (%s)", out);
	CHECK(index_apply_own(ix, &a_up, NULL, NULL) == 0 &&
	      index_apply_own(ix, &b_del, NULL, NULL) == 0, "unsent: a uploaded, b deleted");
	CHECK(strcmp(unsent(ix, out), "b/c") == 0, "unsent: c left (%s)", out);
	CHECK(index_apply(ix, &c_ev, 1, NULL, 0, NULL, NULL) == 0,
	      "unsent: another client's event for c applies");
	CHECK(strcmp(unsent(ix, out), "") == 0, "unsent: none left (%s)", out);
	CHECK(index_apply_own(ix, &a, NULL, NULL) == 0 &&
	      strcmp(unsent(ix, out), "b/a") == 0, "unsent: a rewritten here (%s)", out);
	struct obj_meta *all[] = { &a, &b, &c, &a_up, &b_del, &c_ev };
	for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
		obj_meta_release(all[i]);
	index_close(ix);
	unit_rmtree(dir);
	free(dir);
}

/* index_reconcile_page: a page in key order and the same page shuffled
 * give the same decisions (the merge walk, and the sort when needed). */
static void test_reconcile_order(void)
{
	for (int shuffled = 0; shuffled < 2; shuffled++) {
		char *dir = unit_tmpdir("index-rc");
		struct index *ix = unit_index_open(dir, NULL);
		struct obj_meta st[5];
		const char *keys[5] = { "a", "b", "c", "d", "e" };
		for (int i = 0; i < 5; i++)
			st[i] = mk("b", keys[i], 5, 100, "e", "");
		struct index_scan_state ss = { .done = true };
		CHECK(index_scan_apply(ix, "b", st, 5, &ss, NULL, NULL) == 0,
		      "reconcile: five scan records");
		/* listed: a, c (changed), e; b and d are gone */
		struct obj_meta pg[3] = { mk("b", "a", 5, 100, "e", ""),
					  mk("b", "c", 6, 100, "e2", ""),
					  mk("b", "e", 5, 100, "e", "") };
		if (shuffled) {
			struct obj_meta t = pg[0];
			pg[0] = pg[2];
			pg[2] = t;
		}
		struct index_reconcile_counts c = { 0 };
		int rc = index_reconcile_page(ix, "b", pg, 3, NULL, NULL, 200 * S, &c, NULL, NULL,
					      NULL, NULL);
		CHECK(rc == 0 && c.removed == 2 && c.updated == 1 && c.unchanged == 2 &&
		      c.added == 0 && c.kept == 0,
		      "reconcile (%s page): removed 2, updated 1, unchanged 2 (%llu %llu %llu)",
		      shuffled ? "shuffled" : "sorted", (unsigned long long)c.removed,
		      (unsigned long long)c.updated, (unsigned long long)c.unchanged);
		CHECK(index_objects(ix) == 3, "reconcile: three objects left");
		release_all(pg, 3);
		release_all(st, 5);
		index_close(ix);
		unit_rmtree(dir);
		free(dir);
	}
}

/* A HEAD's version (index_apply_newer): written only over a live record
 * it is provably newer than, as a scan record. */
static void test_apply_newer(void)
{
	char *dir = unit_tmpdir("index-newer");
	struct index *ix = unit_index_open(dir, NULL);
	struct obj_meta ev[2] = { mk("b", "k", 10, 100, "e3", "0003"),
				  mk("b", "gone", 10, 100, "e1", "0001") };
	struct obj_meta del = mkdel("b", "gone", 101, "0002");
	index_apply(ix, ev, 2, NULL, 0, NULL, NULL);
	index_apply(ix, &del, 1, NULL, 0, NULL, NULL);
	struct obj_meta older = mk("b", "k", 7, 95, "e2", ""),
			near = mk("b", "k", 7, 100, "e9", ""),
			newer = mk("b", "k", 12, 110, "e4", ""),
			back = mk("b", "gone", 7, 120, "e5", ""), r;
	int a = index_apply_newer(ix, &older, NULL, NULL);
	int b = index_apply_newer(ix, &near, NULL, NULL);
	bool kept = index_object_get(ix, "b", "k", &r) == 0 && !strcmp(r.etag, "e3");
	obj_meta_release(&r);
	CHECK(a == 0 && b == 0 && kept,
	      "apply newer: an older or same-second HEAD answer keeps the event's record (%d, %d)",
	      a, b);
	int c = index_apply_newer(ix, &newer, NULL, NULL);
	bool took = index_object_get(ix, "b", "k", &r) == 0 && !strcmp(r.etag, "e4") &&
		    r.size == 12 && (r.flags & OBJ_FROM_SCAN);
	obj_meta_release(&r);
	CHECK(c == 1 && took, "apply newer: a provably newer one is written as a scan record (%d)",
	      c);
	int d = index_apply_newer(ix, &back, NULL, NULL);
	bool gone = index_object_get(ix, "b", "gone", &r) == 0 && (r.flags & OBJ_DELETED);
	obj_meta_release(&r);
	CHECK(d == 0 && gone, "apply newer: a tombstone stays (%d)", d);
	release_all(ev, 2);
	obj_meta_release(&del);
	obj_meta_release(&older);
	obj_meta_release(&near);
	obj_meta_release(&newer);
	obj_meta_release(&back);
	index_close(ix);
	unit_rmtree(dir);
	free(dir);
}

int main(void)
{
	test_same_version();
	test_own_writes();
	test_unsent();
	test_reconcile_order();
	test_apply_newer();
	return unit_exit();
}
