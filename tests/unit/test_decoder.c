/*
 * test_decoder.c — events/decoder.c, the consumer's decode-ahead, without
 * Kafka.
 *
 * 1. one batch of mixed messages (one record, two records, not JSON, the
 *    AWS test event, a bad record beside a good one, over two partitions):
 *    the batch holds exactly what record_decode() gives for each message,
 *    in message order, with each record's message timestamp and each
 *    partition's next offset; malformed and ignored records counted once
 *    however often decoder_finish() is called; what the caller stores in
 *    a record is freed with it;
 * 2. at most DECODER_JOBS jobs: a third post is refused, and accepted once
 *    one is released; a job released without decoder_finish() (a batch the
 *    consumer forgets) leaves its messages unread afterwards;
 * 3. 300 batches of 1,000 generated documents in the consumer's order
 *    (post N+1, finish N, release N): every record once, in order, every
 *    position right (the decoder thread and this one share the work).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/stats.h"
#include "events/decoder.h"
#include "events/record.h"
#include "tests/unit/unit.h"

#define PUT(key, size) "{\"eventVersion\":\"2.2\",\"eventSource\":\"ceph:s3\"," \
	"\"eventTime\":\"2026-11-22T01:40:52.940616Z\",\"eventName\":\"ObjectCreated:Put\"," \
	"\"s3\":{\"bucket\":{\"name\":\"b\"},\"object\":{\"key\":\"" key "\",\"size\":" \
	#size ",\"eTag\":\"e\",\"sequencer\":\"2448026B061C6238\"}}}"

static const char *const docs1[] = {
	"{\"Records\":[" PUT("one", 1) "]}",
	"{\"Records\":[" PUT("two-a", 2) "," PUT("two-b", 3) "]}",
	"this is not JSON",
	"{\"Service\":\"Amazon S3\",\"Event\":\"s3:TestEvent\",\"Bucket\":\"b\"}",
	"{\"Records\":[{\"eventName\":\"ObjectCreated:Put\",\"s3\":{\"bucket\":{\"name\":\"b\"},"
	"\"object\":{\"size\":1}}}," PUT("after-bad", 4) "]}",
};

/* Same record, field by field (what the index reads of it). */
static int same_record(const struct obj_meta *a, const struct obj_meta *b)
{
	return strcmp(a->bucket, b->bucket) == 0 && strcmp(a->key, b->key) == 0 &&
	       a->size == b->size && a->mtime_ns == b->mtime_ns &&
	       strcmp(a->etag, b->etag) == 0 && strcmp(a->seq, b->seq) == 0 &&
	       a->flags == b->flags && a->n_meta == b->n_meta && a->n_tags == b->n_tags;
}

static void test_mixed(struct decoder *d, struct stats *st)
{
	enum { N = sizeof docs1 / sizeof docs1[0] };
	static const int32_t part[N] = { 0, 1, 0, 1, 0 };
	static const int64_t off[N] = { 10, 5, 11, 6, 13 };
	struct decoder_msg m[N];
	struct ev_doc want[N];
	size_t n_want = 0, malformed = 0, ignored = 0, k = 0;
	struct ev_batch *b = NULL, *again = NULL;
	struct decoder_job *j;
	int same = 1;

	for (size_t i = 0; i < N; i++) {
		m[i] = (struct decoder_msg){ "topic", part[i], off[i], 1000 + (int64_t)i,
					     docs1[i], strlen(docs1[i]), 5000 + (int64_t)i };
		int rc = record_decode(docs1[i], strlen(docs1[i]), &want[i]);
		malformed += rc < 0 || want[i].n_malformed ?
			     (want[i].n_malformed ? want[i].n_malformed : 1) : 0;
		ignored += want[i].n_ignored;
		n_want += want[i].n;
	}
	j = decoder_post(d, m, N);
	CHECK(j != NULL, "post a batch of %d messages", N);
	if (!j)
		return;
	CHECK(decoder_finish(d, j, &b) == 0 && b, "finish it");
	if (!b)
		return;
	CHECK(b->n_msgs == N && b->n_ev == n_want && n_want == 4,
	      "the batch holds every record of its messages (%zu of %zu, 4 expected)",
	      b->n_ev, n_want);
	for (size_t i = 0; i < N; i++)
		for (size_t r = 0; r < want[i].n; r++, k++)
			same &= k < b->n_ev && same_record(&b->ev[k], &want[i].ev[r]) &&
				b->ts_ms[k] == m[i].timestamp_ms && b->since_ms[k] == m[i].since_ms;
	CHECK(same && k == b->n_ev, "records in message order, equal to record_decode's, "
	      "each with its message's timestamp and assignment time");
	CHECK(b->n_pos == 2 && b->pos[0].partition == 0 && b->pos[0].next == 14 &&
	      b->pos[1].partition == 1 && b->pos[1].next == 7 &&
	      strcmp(b->pos[0].topic, "topic") == 0,
	      "positions: partition 0 at 14, partition 1 at 7 (malformed and ignored "
	      "messages included)");
	CHECK(stats_value(st, "events", "malformed") == malformed && malformed == 2 &&
	      stats_value(st, "events", "ignored") == ignored && ignored == 1,
	      "stats: %llu malformed (2 expected), %llu ignored (1 expected)",
	      (unsigned long long)stats_value(st, "events", "malformed"),
	      (unsigned long long)stats_value(st, "events", "ignored"));
	/* The caller enriches a record: the batch frees what it stored. */
	b->ev[0].content_type = strdup("text/plain");
	b->ev[0].flags |= OBJ_HAS_CTYPE;
	CHECK(decoder_finish(d, j, &again) == 0 && again == b &&
	      stats_value(st, "events", "malformed") == malformed,
	      "a second finish gives the same batch and counts nothing again");
	decoder_release(d, j);
	for (size_t i = 0; i < N; i++)
		ev_doc_release(&want[i]);
}

static void test_jobs(struct decoder *d)
{
	static const char *doc = "{\"Records\":[" PUT("x", 1) "]}";
	struct decoder_msg m[3][4];
	char *payload[3];
	struct decoder_job *j[3];
	struct ev_batch *b = NULL;

	for (int i = 0; i < 3; i++) {
		payload[i] = strdup(doc);
		for (int k = 0; k < 4; k++)
			m[i][k] = (struct decoder_msg){ "t", 0, 4 * i + k, -1, payload[i],
							strlen(doc), 0 };
	}
	j[0] = decoder_post(d, m[0], 4);
	j[1] = decoder_post(d, m[1], 4);
	j[2] = decoder_post(d, m[2], 4);
	CHECK(j[0] && j[1] && !j[2], "%d jobs may be posted, not one more", DECODER_JOBS);
	CHECK(decoder_post(d, m[2], 0) == NULL, "an empty batch is not posted");
	/* forget the first: afterwards its messages are not read any more (a
	   read after the free is an error under ASan) */
	decoder_release(d, j[0]);
	free(payload[0]);
	payload[0] = NULL;
	j[2] = decoder_post(d, m[2], 4);
	CHECK(j[2] != NULL, "a released job makes room for the next post");
	CHECK(j[1] && decoder_finish(d, j[1], &b) == 0 && b->n_ev == 4 &&
	      b->n_pos == 1 && b->pos[0].next == 8,
	      "the batch posted after the forgotten one is whole (offsets 4-7)");
	if (j[1])
		decoder_release(d, j[1]);
	if (j[2]) {
		CHECK(decoder_finish(d, j[2], &b) == 0 && b->n_ev == 4 && b->pos[0].next == 12,
		      "and so is the one after it");
		decoder_release(d, j[2]);
	}
	for (int i = 0; i < 3; i++)
		free(payload[i]);
}

static void test_stream(struct decoder *d)
{
	enum { BATCHES = 300, PER = 1000 };
	size_t n = (size_t)BATCHES * PER, got = 0, bad = 0, pos_bad = 0;
	struct decoder_msg *m = calloc(n, sizeof *m);
	char **payload = calloc(n, sizeof *payload);
	struct decoder_job *j[2] = { NULL, NULL };

	if (!m || !payload) {
		printf("# out of memory\n");
		exit(2);
	}
	for (size_t i = 0; i < n; i++) {
		char key[32];
		snprintf(key, sizeof key, "k%07zu", i);
		if (asprintf(&payload[i], "{\"Records\":[{\"eventName\":\"ObjectCreated:Put\","
			     "\"eventTime\":\"2026-11-22T01:40:52Z\",\"s3\":{\"bucket\":"
			     "{\"name\":\"b\"},\"object\":{\"key\":\"%s\",\"size\":%zu}}}]}",
			     key, i) < 0)
			exit(2);
		/* two partitions, alternating: offsets i / 2 in each */
		m[i] = (struct decoder_msg){ "t", (int32_t)(i % 2), (int64_t)(i / 2), (int64_t)i,
					     payload[i], strlen(payload[i]), 0 };
	}
	double t0 = unit_now_s();
	j[0] = decoder_post(d, m, PER);
	for (size_t bn = 0; bn < BATCHES; bn++) {
		struct ev_batch *b = NULL;
		if (bn + 1 < BATCHES)
			j[(bn + 1) % 2] = decoder_post(d, &m[(bn + 1) * PER], PER);
		if (!j[bn % 2] || decoder_finish(d, j[bn % 2], &b) < 0) {
			bad++;
			continue;
		}
		for (size_t k = 0; k < b->n_ev; k++, got++) {
			char key[32];
			snprintf(key, sizeof key, "k%07zu", got);
			bad += strcmp(b->ev[k].key, key) != 0 || b->ev[k].size != got ||
			       b->ts_ms[k] != (int64_t)got;
		}
		size_t last = (bn + 1) * PER - 1;   /* last message of the batch */
		pos_bad += b->n_pos != 2 ||
			   b->pos[last % 2].next != (int64_t)(last / 2 + 1) ||
			   b->pos[(last - 1) % 2].next != (int64_t)((last - 1) / 2 + 1);
		decoder_release(d, j[bn % 2]);
	}
	double t = unit_now_s() - t0;
	CHECK(got == n && bad == 0, "%d batches of %d: %zu records in order (%zu wrong)",
	      BATCHES, PER, got, bad);
	CHECK(pos_bad == 0, "every batch's two positions are its last offsets + 1 (%zu wrong)",
	      pos_bad);
	printf("# %zu messages decoded in %.2f s wall (%.0f/s, two threads)\n", n, t,
	       (double)n / t);
	for (size_t i = 0; i < n; i++)
		free(payload[i]);
	free(payload);
	free(m);
}

int main(void)
{
	struct stats st;
	struct decoder *d = NULL;

	log_init("test_decoder", 0);
	stats_init(&st);
	if (decoder_new(&st, &d) < 0) {
		printf("not ok - decoder_new\n");
		return 2;
	}
	test_mixed(d, &st);
	test_jobs(d);
	test_stream(d);
	decoder_free(d);
	stats_release(&st);
	return unit_exit();
}
