/*
 * test_ingest.c — gateway/ingest.c with hand-made decoded batches
 * (events/decoder.h's struct ev_batch), a temporary LevelDB index and the
 * fake S3 behind the fault wrapper (sync/s3/s3_fake.h, sync/s3/s3_fault.h): no
 * Kafka, no RGW.
 *
 * Views: "all" (bucket b), "black" (bucket m, metadata color=black: needs
 * metadata), "text" (bucket c, content_type "text/" types: needs the type).
 * 1. a batch over two partitions: every record applied (stats), visible in
 *    its views, both offsets stored in the same write, one latency sample
 *    per record; HEADs only for the two events lacking a field a view of
 *    their bucket reads, none for an event that carries its metadata or
 *    whose bucket no view enriches;
 * 2. the same versions again without metadata take it from the index (no
 *    HEAD); an event older than the stored record is ignored (stats), a
 *    newer delete applied;
 * 3. a HEAD that fails (injected -EIO): the batch is still applied, the
 *    event without the field (so outside the view that needs it), offsets
 *    stored; a HEAD of a missing object likewise;
 * 4. a batch with messages and no records (all malformed) stores its
 *    offsets; the consumer callbacks are ingest's (apply, stored_offset);
 * 5. event-to-visible latency: an event from an hour before its partition
 *    was assigned counts as backlog, not as an hour's latency; one from
 *    after the assignment is measured from its own time.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/s3.h"
#include "common/stats.h"
#include "events/consumer.h"
#include "events/decoder.h"
#include "gateway/ingest.h"
#include "sync/s3/s3_fake.h"
#include "sync/s3/s3_fault.h"
#include "views/filter.h"
#include "views/index.h"
#include "views/viewset.h"
#include "tests/unit/unit.h"
#include "tests/unit/unit_views.h"

#define T0_NS 1795000000000000000LL   /* event times: 2026-11 */

/* An event record as the decoder gives it (strings owned by the record). */
static struct obj_meta ev_put(const char *bucket, const char *key, const char *etag,
			      const char *seq, int64_t mtime_ns)
{
	struct obj_meta o = { 0 };
	o.bucket = strdup(bucket);
	o.key = strdup(key);
	o.size = 100;
	o.mtime_ns = mtime_ns;
	snprintf(o.etag, sizeof o.etag, "%s", etag);
	snprintf(o.seq, sizeof o.seq, "%s", seq);
	return o;
}

static struct obj_meta ev_del(const char *bucket, const char *key, const char *seq,
			      int64_t mtime_ns)
{
	struct obj_meta o = ev_put(bucket, key, "", seq, mtime_ns);
	o.size = 0;
	o.flags |= OBJ_DELETED;
	return o;
}

/* A batch over the records ev[0..n) with one Kafka timestamp for all and
 * no assignment time (since[i] 0) unless the caller sets one. */
struct batch {
	struct ev_batch b;
	struct obj_meta ev[8];
	int64_t ts[8], since[8];
	struct ev_pos pos[2];
};

static void batch_init(struct batch *t, size_t n_ev, size_t n_msgs)
{
	int64_t now_ms = (int64_t)time(NULL) * 1000;
	for (size_t i = 0; i < n_ev; i++) {
		t->ts[i] = now_ms;
		t->since[i] = 0;
	}
	t->b = (struct ev_batch){ .ev = t->ev, .ts_ms = t->ts, .since_ms = t->since,
				  .n_ev = n_ev, .pos = t->pos, .n_pos = 0, .n_msgs = n_msgs };
}

static void batch_pos(struct batch *t, int32_t partition, int64_t next)
{
	t->pos[t->b.n_pos++] = (struct ev_pos){ "events", partition, next };
}

static void batch_release(struct batch *t)
{
	for (size_t i = 0; i < t->b.n_ev; i++)
		obj_meta_release(&t->ev[i]);
}

static int64_t offset_of(struct index *ix, int32_t partition)
{
	int64_t next = -1;
	if (index_offset_get(ix, "events", partition, &next) < 0)
		return -1;
	return next;
}

static bool in_view(struct index *ix, size_t view, const char *path)
{
	struct index_attr a;
	return index_lookup(ix, unit_v(view), path, &a) == 0 && !a.is_dir;
}

enum { V_ALL, V_BLACK, V_TEXT, N_VIEWS };

/* An object written into the fake store as another client would; its ETag
 * into etag (what an event about it would carry). */
static void store_put(struct s3 *fake, const char *bucket, const char *key,
		      const char *color, const char *ctype, char etag[72])
{
	struct obj_kv kv = { (char *)"color", (char *)color };
	struct obj_meta h = { 0 };
	void *data = NULL;
	size_t len = 0;
	if (s3_fake_object_put(fake, bucket, key, key, strlen(key), &kv, color ? 1 : 0,
			       ctype) < 0 ||
	    s3_fake_object_read(fake, bucket, key, &data, &len, &h, NULL) < 0) {
		printf("# fake store: cannot put %s/%s\n", bucket, key);
		exit(2);
	}
	snprintf(etag, 72, "%s", h.etag);
	obj_meta_release(&h);
	free(data);
}

static uint64_t heads(struct s3 *s3)
{
	return s3_fault_seen(s3, S3K_HEAD);
}

int main(void)
{
	struct stats st;
	char *dir = unit_tmpdir("ingest");
	struct view *views[N_VIEWS];
	struct viewset_slot slot;
	struct ingest *g = NULL;
	struct batch t;
	struct index *ix;

	log_init("test_ingest", 0);
	stats_init(&st);
	views[V_ALL] = unit_view("{\"name\":\"all\",\"bucket\":\"b\",\"match\":{}}");
	views[V_BLACK] = unit_view("{\"name\":\"black\",\"bucket\":\"m\",\"match\":"
				   "{\"metadata\":{\"color\":\"black\"}}}");
	views[V_TEXT] = unit_view("{\"name\":\"text\",\"bucket\":\"c\",\"match\":"
				  "{\"content_type\":\"text/*\"}}");
	ix = unit_index_open(dir, &st);
	/* The gateway's arrangement: a slot holding the current set. */
	viewset_slot_init(&slot, NULL);
	if (unit_set_views_slot(ix, views, N_VIEWS, &slot) < 0) {
		printf("# index_set_views failed\n");
		return 2;
	}
	/* The fake store behind the fault wrapper: ingest gets the wrapper. */
	struct s3 *fake = NULL, *s3 = NULL;
	char etag_k1[72], etag_k3[72], etag_t1[72];
	if (s3_fake_new(&fake) < 0 || s3_fake_bucket_add(fake, "b") < 0 ||
	    s3_fake_bucket_add(fake, "m") < 0 || s3_fake_bucket_add(fake, "c") < 0 ||
	    s3_fault_new(fake, true, &s3) < 0) {
		printf("# fake store: out of memory\n");
		return 2;
	}
	store_put(fake, "m", "k1", "black", NULL, etag_k1);
	store_put(fake, "m", "k3", "black", NULL, etag_k3);
	store_put(fake, "c", "t1", NULL, "text/plain", etag_t1);
	if (ingest_new(ix, s3, &slot, &st, &g) < 0) {
		printf("# ingest_new failed\n");
		return 2;
	}

	/* 1. applied, visible, offsets, HEADs only where a view needs them */
	{
		t.ev[0] = ev_put("b", "x1", "e1", "0000000000000010", T0_NS);
		t.ev[1] = ev_put("b", "x2", "e2", "0000000000000010", T0_NS);
		t.ev[2] = ev_put("m", "k1", etag_k1, "0000000000000010", T0_NS);
		t.ev[3] = ev_put("c", "t1", etag_t1, "0000000000000010", T0_NS);
		t.ev[4] = ev_put("m", "k2", "e5", "0000000000000010", T0_NS);  /* not in S3 */
		obj_kv_add(&t.ev[4].meta, &t.ev[4].n_meta, "color", "black");
		t.ev[4].flags |= OBJ_HAS_META;   /* RGW puts metadata in the event */
		batch_init(&t, 5, 7);
		batch_pos(&t, 0, 10);
		batch_pos(&t, 1, 3);
		uint64_t heads0 = heads(s3);
		int rc = ingest_batch_apply(g, &t.b);
		CHECK(rc == 0, "batch 1 applied (%d)", rc);
		CHECK(stats_value(&st, "events", "applied") == 5 && stats_value(&st, "events", "ignored") == 0,
		      "stats: 5 applied, 0 ignored (%llu, %llu)",
		      (unsigned long long)stats_value(&st, "events", "applied"),
		      (unsigned long long)stats_value(&st, "events", "ignored"));
		CHECK(heads(s3) - heads0 == 2,
		      "2 HEADs: m/k1 (metadata) and c/t1 (content type), none for b/ or "
		      "m/k2 (got %llu)", (unsigned long long)(heads(s3) - heads0));
		CHECK(in_view(ix, V_ALL, "x1") && in_view(ix, V_ALL, "x2") &&
		      in_view(ix, V_BLACK, "k1") && in_view(ix, V_BLACK, "k2") &&
		      in_view(ix, V_TEXT, "t1"),
		      "every record is in its view (k1 and t1 through their HEAD)");
		CHECK(offset_of(ix, 0) == 10 && offset_of(ix, 1) == 3,
		      "offsets stored: events/0 at 10, events/1 at 3 (%lld, %lld)",
		      (long long)offset_of(ix, 0), (long long)offset_of(ix, 1));
		CHECK(st.visible.count == 5, "one latency sample per record (%llu)",
		      (unsigned long long)st.visible.count);
		batch_release(&t);
	}

	/* 2. same version from the index, older ignored, newer delete applied */
	{
		t.ev[0] = ev_put("m", "k1", etag_k1, "0000000000000011", T0_NS + 200000000);
		t.ev[1] = ev_put("b", "x1", "e0", "0000000000000005", T0_NS - 1000000000);
		t.ev[2] = ev_del("b", "x2", "0000000000000020", T0_NS + 1000000000);
		batch_init(&t, 3, 3);
		batch_pos(&t, 0, 13);
		uint64_t heads0 = heads(s3), applied0 = stats_value(&st, "events", "applied");
		int rc = ingest_batch_apply(g, &t.b);
		CHECK(rc == 0, "batch 2 applied (%d)", rc);
		CHECK(heads(s3) == heads0,
		      "no HEAD for a version whose metadata the index holds");
		CHECK(in_view(ix, V_BLACK, "k1") && (t.ev[0].flags & OBJ_HAS_META),
		      "the repeated event took its metadata from the index");
		CHECK(stats_value(&st, "events", "ignored") == 1 && stats_value(&st, "events", "applied") - applied0 == 2,
		      "the older event ignored, the other two applied (%llu ignored, %llu applied)",
		      (unsigned long long)stats_value(&st, "events", "ignored"),
		      (unsigned long long)(stats_value(&st, "events", "applied") - applied0));
		CHECK(in_view(ix, V_ALL, "x1") && !in_view(ix, V_ALL, "x2"),
		      "x1 kept, x2 deleted");
		CHECK(offset_of(ix, 0) == 13 && offset_of(ix, 1) == 3,
		      "offset of events/0 moved to 13, events/1 untouched");
		batch_release(&t);
	}

	/* 3. a failing HEAD: applied without the field */
	{
		if (s3_fault_fail(s3, S3K_HEAD, 1, 1, -EIO) < 0) {
			printf("# s3_fault_fail failed\n");
			return 2;
		}
		t.ev[0] = ev_put("m", "k3", etag_k3, "0000000000000010", T0_NS);
		t.ev[1] = ev_put("m", "gone", "e9", "0000000000000010", T0_NS);  /* -ENOENT */
		batch_init(&t, 2, 2);
		batch_pos(&t, 1, 5);
		uint64_t heads0 = heads(s3);
		int rc = ingest_batch_apply(g, &t.b);
		CHECK(rc == 0, "batch 3 applied although its HEADs failed (%d)", rc);
		CHECK(heads(s3) - heads0 == 2 && s3_fault_injected(s3, S3K_HEAD) == 1,
		      "both HEADs were tried, one failed by injection (%llu, %llu)",
		      (unsigned long long)(heads(s3) - heads0),
		      (unsigned long long)s3_fault_injected(s3, S3K_HEAD));
		struct obj_meta r = { 0 };
		CHECK(index_object_get(ix, "m", "k3", &r) == 0 && !(r.flags & OBJ_HAS_META) &&
		      !in_view(ix, V_BLACK, "k3"),
		      "k3 indexed without metadata, so not in the view that needs it");
		obj_meta_release(&r);
		CHECK(offset_of(ix, 1) == 5, "offset of events/1 stored (5)");
		batch_release(&t);
	}

	/* 4. no records, offsets still stored; the consumer callbacks */
	{
		struct consumer_cb cb;
		int64_t next = -1;
		ingest_callbacks(g, &cb);
		batch_init(&t, 0, 4);
		batch_pos(&t, 0, 17);
		CHECK(cb.apply(cb.ctx, &t.b) == 0 && offset_of(ix, 0) == 17,
		      "a batch of malformed messages only moves the offset (17)");
		CHECK(cb.stored_offset(cb.ctx, "events", 0, &next) == 0 && next == 17 &&
		      cb.stored_offset(cb.ctx, "events", 9, &next) == -ENOENT,
		      "stored_offset answers from the index, -ENOENT for a new partition");
	}

	/* 5. backlog out of the latency: a gateway of its own (fresh stats) */
	{
		struct stats st5;
		struct ingest *g5 = NULL;
		stats_init(&st5);
		if (ingest_new(ix, s3, &slot, &st5, &g5) < 0) {
			printf("# ingest_new failed\n");
			return 2;
		}
		int64_t now_ms = (int64_t)time(NULL) * 1000, hour = 3600 * 1000;
		/* Produced an hour ago, partition assigned 5 s ago. */
		t.ev[0] = ev_put("b", "old", "e1", "0000000000000010",
				 (now_ms - hour) * 1000000);
		/* Produced 2 s ago, an hour after its partition was assigned. */
		t.ev[1] = ev_put("b", "new", "e2", "0000000000000010",
				 (now_ms - 2000) * 1000000);
		batch_init(&t, 2, 2);
		t.ts[0] = now_ms - hour;
		t.ts[1] = now_ms - 2000;
		t.since[0] = now_ms - 5000;
		t.since[1] = now_ms - hour;
		batch_pos(&t, 0, 19);
		CHECK(ingest_batch_apply(g5, &t.b) == 0, "batch 5 applied");
		CHECK(st5.visible.count == 1 && stats_value(&st5, "events", "backlog") == 1,
		      "one latency sample, one backlog event (%llu, %llu)",
		      (unsigned long long)st5.visible.count,
		      (unsigned long long)stats_value(&st5, "events", "backlog"));
		CHECK(st5.visible.max_ms >= 2000 && st5.visible.max_ms < hour / 2,
		      "the sample is the later event's age, not the backlog's hour (%.0f ms)",
		      st5.visible.max_ms);
		char *json = stats_to_json(&st5, NULL, NULL, NULL);
		CHECK(json && strstr(json, "\"backlog\""), "events.backlog in the stats JSON");
		free(json);
		batch_release(&t);
		ingest_free(g5);
		CHECK(stats_value(&st5, "events", "backlog") == 0,
		      "the counter leaves the stats with the ingest");
		stats_release(&st5);
	}

	ingest_free(g);
	index_close(ix);
	viewset_slot_release(&slot);
	s3_free(s3);                  /* and the fake it owns */
	for (size_t i = 0; i < N_VIEWS; i++)
		view_free(views[i]);
	stats_release(&st);
	unit_rmtree(dir);
	free(dir);
	return unit_exit();
}
