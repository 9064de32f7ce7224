/*
 * test_consumer.c — events/consumer.c against librdkafka's mock cluster (the
 * real Kafka protocol over TCP on 127.0.0.1), with its decoder: apply()
 * gets decoded batches.
 *
 * 1. bad options are refused with a reason;
 * 2. N messages (S3 event documents, every 1000th one malformed) in each of
 *    2 partitions arrive exactly once, decoded, in partition order, with
 *    their timestamps and the time of their partition's assignment (after
 *    the consumer was made); every batch's positions cover its messages, the
 *    malformed ones included; counted in stats (consumed, malformed), lag 0
 *    at the end (also prints the consumer's messages/s);
 * 3. a new consumer in the same group, whose stored_offset() says "midpoint",
 *    resumes there (not at the group's committed offsets, which are at the
 *    end), and an apply() that fails once gets the same decoded batch again;
 *    consumer_barrier(), called while a slowed apply() works through the
 *    backlog, returns only once every record below the high-water marks
 *    it read was applied; caught up, consumer_freshness() says so, as of a
 *    poll after that;
 * 4. unreachable brokers: consumer_wait_ready() gives -ETIMEDOUT in time and
 *    consumer_stop() is quick; consumer_barrier() times out saying no
 *    partition is assigned.
 * The decode-ahead itself (post/finish/release) is test_decoder.c's.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include "events/consumer.h"
#include "common/log.h"
#include "common/stats.h"
#include "tests/unit/unit.h"

#define TOPIC   "t"
#define NPARTS  2
#define NMSG    10000             /* per partition (the mock keeps about 5 MB of each) */
#define BAD_EVERY 1000            /* offsets 999, 1999, ... are not event documents */

static int is_bad(int64_t offset)
{
	return offset % BAD_EVERY == BAD_EVERY - 1;
}

/* Good (decodable) offsets in [from, to). */
static size_t good_between(int64_t from, int64_t to)
{
	size_t n = 0;

	for (int64_t o = from; o < to; o++)
		n += !is_bad(o);
	return n;
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* The fake gateway: records what apply() saw. */
struct fake {
	pthread_mutex_t lock;
	int64_t stored[NPARTS];       /* what stored_offset() answers; -1: -ENOENT */
	int64_t next[NPARTS];         /* next offset expected per partition */
	size_t total, calls;          /* records applied, apply() calls */
	int bad;                      /* order/key/size/timestamp/position errors */
	char first_bad[200];
	int fail_once;                /* fail the next apply() */
	int failed;                   /* a failure was injected */
	const struct ev_batch *fail_b;
	size_t fail_n;
	char fail_key[2][64];         /* first and last record of the failed batch */
	int retry_same;               /* -1 not seen, 0 different, 1 same batch */
	int64_t t_first, t_last;
	int64_t reset_ms;             /* wall clock at fake_reset: before the
	                                 consumer starts, so before any assignment */
	int slow_ms;                  /* each apply() sleeps this long first */
};

static void fake_bad(struct fake *f, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void fake_bad(struct fake *f, const char *fmt, ...)
{
	va_list ap;

	if (f->bad++)
		return;
	va_start(ap, fmt);
	vsnprintf(f->first_bad, sizeof f->first_bad, fmt, ap);
	va_end(ap);
}

/* The next good offset of a partition from f->next (malformed ones are
   skipped by the decoder: only the positions show them). */
static int64_t fake_expect(struct fake *f, int32_t p)
{
	while (is_bad(f->next[p]))
		f->next[p]++;
	return f->next[p];
}

static int fake_apply(void *ctx, struct ev_batch *b)
{
	struct fake *f = ctx;

	pthread_mutex_lock(&f->lock);
	int slow = f->slow_ms;
	pthread_mutex_unlock(&f->lock);
	if (slow)
		sleep_ms(slow);
	pthread_mutex_lock(&f->lock);
	f->calls++;
	if (f->fail_once && b->n_ev > 0) {
		f->fail_once = 0;
		f->failed = 1;
		f->fail_b = b;
		f->fail_n = b->n_ev;
		snprintf(f->fail_key[0], sizeof f->fail_key[0], "%s", b->ev[0].key);
		snprintf(f->fail_key[1], sizeof f->fail_key[1], "%s", b->ev[b->n_ev - 1].key);
		pthread_mutex_unlock(&f->lock);
		return -EIO;
	}
	if (f->failed && f->retry_same < 0)
		f->retry_same = b == f->fail_b && b->n_ev == f->fail_n &&
		                strcmp(b->ev[0].key, f->fail_key[0]) == 0 &&
		                strcmp(b->ev[b->n_ev - 1].key, f->fail_key[1]) == 0;
	if (f->total == 0)
		f->t_first = now_ns();
	for (size_t i = 0; i < b->n_ev; i++) {
		const struct obj_meta *o = &b->ev[i];
		int32_t p = -1;
		int64_t off = -1;

		if (sscanf(o->key, "p%" SCNd32 "-%" SCNd64, &p, &off) != 2 || p < 0 || p >= NPARTS) {
			fake_bad(f, "record key %s", o->key);
			continue;
		}
		if (off != fake_expect(f, p) || o->size != (uint64_t)off ||
		    strcmp(o->bucket, "b") != 0 || b->ts_ms[i] < 1500000000000LL ||
		    b->since_ms[i] < f->reset_ms) {
			fake_bad(f, "partition %" PRId32 " offset %" PRId64 " (expected %" PRId64
			         ") size %" PRIu64 " ts %" PRId64 " assigned at %" PRId64, p, off,
			         f->next[p], o->size, b->ts_ms[i], b->since_ms[i]);
			continue;
		}
		f->next[p]++;
		f->total++;
	}
	/* every message of the batch is behind its partition's position */
	for (size_t i = 0; i < b->n_pos; i++) {
		int32_t p = b->pos[i].partition;

		if (p < 0 || p >= NPARTS || strcmp(b->pos[i].topic, TOPIC) != 0) {
			fake_bad(f, "position of partition %" PRId32, p);
			continue;
		}
		while (f->next[p] < b->pos[i].next && is_bad(f->next[p]))
			f->next[p]++;
		if (f->next[p] != b->pos[i].next)
			fake_bad(f, "partition %" PRId32 ": batch position %" PRId64 ", records up "
			         "to %" PRId64, p, b->pos[i].next, f->next[p]);
	}
	f->t_last = now_ns();
	pthread_mutex_unlock(&f->lock);
	return 0;
}

static int fake_stored_offset(void *ctx, const char *topic, int32_t partition, int64_t *next)
{
	struct fake *f = ctx;
	int rc = -ENOENT;

	if (strcmp(topic, TOPIC) != 0 || partition < 0 || partition >= NPARTS)
		return -EINVAL;
	pthread_mutex_lock(&f->lock);
	if (f->stored[partition] >= 0) {
		*next = f->stored[partition];
		rc = 0;
	}
	pthread_mutex_unlock(&f->lock);
	return rc;
}

static void fake_reset(struct fake *f, int64_t s0, int64_t s1)
{
	pthread_mutex_lock(&f->lock);
	f->stored[0] = s0;
	f->stored[1] = s1;
	f->next[0] = s0 < 0 ? 0 : s0;
	f->next[1] = s1 < 0 ? 0 : s1;
	f->total = f->calls = 0;
	f->bad = 0;
	f->first_bad[0] = '\0';
	f->fail_once = f->failed = 0;
	f->fail_b = NULL;
	f->retry_same = -1;
	f->reset_ms = wall_ms();
	f->slow_ms = 0;
	pthread_mutex_unlock(&f->lock);
}

/* Wait until apply() saw want messages (or timeout); returns the count. */
static size_t fake_wait(struct fake *f, size_t want, int timeout_ms)
{
	int64_t end = now_ns() + (int64_t)timeout_ms * 1000000LL;
	size_t got;

	for (;;) {
		pthread_mutex_lock(&f->lock);
		got = f->total;
		pthread_mutex_unlock(&f->lock);
		if (got >= want || now_ns() > end)
			return got;
		sleep_ms(10);
	}
}

static const char *const opts[] = {
	"fetch.wait.max.ms", "10",
	"session.timeout.ms", "6000",
	"heartbeat.interval.ms", "1000",
};

static struct consumer *consumer_make(const char *brokers, struct fake *f, struct stats *st)
{
	struct consumer_conf conf = { brokers, TOPIC, "g1", opts, 3 };
	struct consumer_cb cb = { .ctx = f, .apply = fake_apply,
	                          .stored_offset = fake_stored_offset };
	struct consumer *c = NULL;
	char err[256] = "";

	if (consumer_new(&conf, &cb, st, &c, err, sizeof err) != 0)
		printf("# consumer_new: %s\n", err);
	return c;
}

static int produce_all(const char *brokers)
{
	char err[256];
	rd_kafka_conf_t *kc = rd_kafka_conf_new();
	rd_kafka_t *p;
	int rc = 0;

	if (rd_kafka_conf_set(kc, "bootstrap.servers", brokers, err, sizeof err) ||
	    rd_kafka_conf_set(kc, "linger.ms", "5", err, sizeof err)) {
		rd_kafka_conf_destroy(kc);
		return -1;
	}
	p = rd_kafka_new(RD_KAFKA_PRODUCER, kc, err, sizeof err);
	if (!p) {
		printf("# producer: %s\n", err);
		rd_kafka_conf_destroy(kc);
		return -1;
	}
	for (int i = 0; i < NMSG && rc == 0; i++)
		for (int32_t part = 0; part < NPARTS; part++) {
			char v[512];
			int len = is_bad(i) ? snprintf(v, sizeof v, "not an event p%" PRId32 "-%d", part, i)
			        : snprintf(v, sizeof v, "{\"Records\":[{\"eventVersion\":\"2.2\","
			                   "\"eventSource\":\"ceph:s3\",\"eventTime\":"
			                   "\"2026-11-22T01:40:52.940616Z\",\"eventName\":"
			                   "\"ObjectCreated:Put\",\"s3\":{\"bucket\":{\"name\":\"b\"},"
			                   "\"object\":{\"key\":\"p%" PRId32 "-%d\",\"size\":%d,"
			                   "\"eTag\":\"e%d\"}}}]}", part, i, i, i);
			rd_kafka_resp_err_t e;

			while ((e = rd_kafka_producev(p, RD_KAFKA_V_TOPIC(TOPIC),
			                              RD_KAFKA_V_PARTITION(part),
			                              RD_KAFKA_V_VALUE(v, (size_t)len),
			                              RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
			                              RD_KAFKA_V_END)) == RD_KAFKA_RESP_ERR__QUEUE_FULL)
				rd_kafka_poll(p, 10);
			if (e) {
				printf("# produce: %s\n", rd_kafka_err2str(e));
				rc = -1;
			}
		}
	if (rd_kafka_flush(p, 20000) != RD_KAFKA_RESP_ERR_NO_ERROR)
		rc = -1;
	rd_kafka_destroy(p);
	return rc;
}

static int64_t lag_of(struct stats *st, const char *name)
{
	int64_t lag = -1;

	pthread_mutex_lock(&st->lock);
	for (int i = 0; i < st->n_lag; i++)
		if (strcmp(st->lag[i].name, name) == 0)
			lag = st->lag[i].lag;
	pthread_mutex_unlock(&st->lock);
	return lag;
}

int main(void)
{
	static struct fake f = { .lock = PTHREAD_MUTEX_INITIALIZER };
	struct stats st;
	char err[256] = "";
	rd_kafka_conf_t *mconf;
	rd_kafka_t *mrk;
	rd_kafka_mock_cluster_t *mc;
	const char *brokers;
	struct consumer *c;
	int64_t t0;
	size_t got, want;

	log_init("test_consumer", 0);
	stats_init(&st);

	/* 1. options are validated */
	{
		static const char *const bad[] = { "no.such.option", "1" };
		struct consumer_conf conf = { "127.0.0.1:1", TOPIC, "g", bad, 1 };
		struct consumer_cb cb = { .ctx = &f, .apply = fake_apply,
		                          .stored_offset = fake_stored_offset };

		c = NULL;
		CHECK(consumer_new(&conf, &cb, NULL, &c, err, sizeof err) == -EINVAL && !c &&
		      strstr(err, "no.such.option"), "an unknown kafka option is refused with its name");
		printf("# %s\n", err);
	}

	/* the mock cluster */
	mconf = rd_kafka_conf_new();
	mrk = rd_kafka_new(RD_KAFKA_PRODUCER, mconf, err, sizeof err);
	if (!mrk) {
		printf("not ok - mock handle: %s\n", err);
		return 1;
	}
	mc = rd_kafka_mock_cluster_new(mrk, 1);
	if (!mc) {
		printf("not ok - mock cluster\n");
		return 1;
	}
	brokers = rd_kafka_mock_cluster_bootstraps(mc);
	CHECK(rd_kafka_mock_topic_create(mc, TOPIC, NPARTS, 1) == RD_KAFKA_RESP_ERR_NO_ERROR,
	      "mock topic with 2 partitions");
	t0 = now_ns();
	CHECK(produce_all(brokers) == 0, "produced 2 x %d messages", NMSG);
	printf("# produced %d messages in %.2f s\n", NPARTS * NMSG, (double)(now_ns() - t0) / 1e9);

	/* 2. everything exactly once, in order; a barrier meets the backlog */
	fake_reset(&f, -1, -1);
	pthread_mutex_lock(&f.lock);
	f.slow_ms = 20;               /* about 20 batches: 0.4 s of applying */
	pthread_mutex_unlock(&f.lock);
	c = consumer_make(brokers, &f, &st);
	CHECK(c != NULL, "consumer_new");
	if (!c)
		return 1;
	t0 = now_ns();
	CHECK(consumer_start(c) == 0, "consumer_start");
	CHECK(consumer_wait_ready(c, 15000, true) == 0, "consumer_wait_ready on the mock");
	printf("# ready after %.2f s\n", (double)(now_ns() - t0) / 1e9);
	want = NPARTS * good_between(0, NMSG);
	{
		struct consumer_marks mk;
		char why[256];
		size_t before, after;

		pthread_mutex_lock(&f.lock);
		before = f.total;
		pthread_mutex_unlock(&f.lock);
		int rc = consumer_barrier(c, 20000, &mk, why, sizeof why);
		pthread_mutex_lock(&f.lock);
		after = f.total;
		pthread_mutex_unlock(&f.lock);
		CHECK(rc == 0 && before < want && after == want && mk.partitions == NPARTS &&
		      mk.records == (uint64_t)NPARTS * NMSG,
		      "consumer_barrier called with %zu of %zu records applied returns with all "
		      "of them (%zu; rc %d, %u partitions, %llu records%s%s)", before, want, after,
		      rc, mk.partitions, (unsigned long long)mk.records, why[0] ? ": " : "", why);
	}
	got = fake_wait(&f, want, 20000);
	sleep_ms(300);                /* nothing more may come */
	pthread_mutex_lock(&f.lock);
	CHECK(got == want && f.total == want && f.bad == 0 && f.next[0] == NMSG &&
	      f.next[1] == NMSG, "all %zu records of %d messages applied once, decoded, in "
	      "partition order, positions past the malformed ones (got %zu, %d bad%s%s)",
	      want, NPARTS * NMSG, f.total, f.bad, f.bad ? ": first " : "", f.first_bad);
	if (f.t_last > f.t_first)
		printf("# consumer: %zu records in %zu batches, %.0f records/s\n", f.total,
		       f.calls, (double)f.total * 1e9 / (double)(f.t_last - f.t_first));
	pthread_mutex_unlock(&f.lock);
	{
		struct consumer_fresh cf;
		int64_t before = wall_ms();

		consumer_freshness(c, &cf);
		for (int i = 0; i < 50 && cf.fresh_ms < before; i++) {
			sleep_ms(20);     /* a poll round or two */
			consumer_freshness(c, &cf);
		}
		CHECK(cf.assigned == NPARTS && cf.partitions == NPARTS && cf.fresh_ms >= before,
		      "consumer_freshness: caught up, fresh as of a poll after everything "
		      "was applied (%u of %u partitions, %" PRId64 " ms after)", cf.assigned,
		      cf.partitions, cf.fresh_ms - before);
	}
	CHECK(stats_value(&st, "events", "consumed") == NPARTS * NMSG, "stats: ev_consumed counts each message");
	CHECK(stats_value(&st, "events", "malformed") == NPARTS * NMSG - want,
	      "stats: ev_malformed counts each malformed message once (%llu of %zu)",
	      (unsigned long long)stats_value(&st, "events", "malformed"), NPARTS * NMSG - want);
	sleep_ms(1200);               /* lag is refreshed about once a second */
	CHECK(lag_of(&st, TOPIC "/0") == 0 && lag_of(&st, TOPIC "/1") == 0,
	      "stats: lag of t/0 and t/1 is 0 at the end");
	t0 = now_ns();
	consumer_stop(c);
	printf("# consumer_stop took %.0f ms\n", (double)(now_ns() - t0) / 1e6);
	CHECK(now_ns() - t0 < 1000000000LL, "consumer_stop returns within 1 s");
	consumer_free(c);

	/* 3. resume where the caller's offsets are, and retry a failed batch */
	fake_reset(&f, NMSG / 2, NMSG / 4);
	pthread_mutex_lock(&f.lock);
	f.fail_once = 1;
	pthread_mutex_unlock(&f.lock);
	c = consumer_make(brokers, &f, NULL);
	CHECK(c != NULL, "second consumer_new, same group");
	if (!c)
		return 1;
	t0 = now_ns();
	CHECK(consumer_start(c) == 0 && consumer_wait_ready(c, 20000, true) == 0,
	      "second consumer ready");
	printf("# ready after %.2f s (group rejoin)\n", (double)(now_ns() - t0) / 1e9);
	want = good_between(NMSG / 2, NMSG) + good_between(NMSG / 4, NMSG);
	got = fake_wait(&f, want, 20000);
	sleep_ms(300);
	pthread_mutex_lock(&f.lock);
	CHECK(got == want && f.bad == 0 && f.total == got && f.next[0] == NMSG &&
	      f.next[1] == NMSG, "resumed at the stored offsets %d and %d, not the group's "
	      "(got %zu, %d bad%s%s)", NMSG / 2, NMSG / 4, f.total, f.bad,
	      f.bad ? ": first " : "", f.first_bad);
	CHECK(f.failed && f.retry_same == 1, "a failed apply gets the same decoded batch again");
	pthread_mutex_unlock(&f.lock);
	consumer_free(c);

	/* 4. unreachable brokers */
	fake_reset(&f, -1, -1);
	c = consumer_make("127.0.0.1:1", &f, NULL);
	CHECK(c != NULL && consumer_start(c) == 0, "consumer on unreachable brokers starts");
	if (c) {
		int rc;

		t0 = now_ns();
		rc = consumer_wait_ready(c, 1500, true);
		CHECK(rc == -ETIMEDOUT && now_ns() - t0 < 2500000000LL,
		      "unreachable brokers: consumer_wait_ready gives -ETIMEDOUT in time");
		struct consumer_marks mk;
		char why[256];
		rc = consumer_barrier(c, 300, &mk, why, sizeof why);
		CHECK(rc == -ETIMEDOUT && strstr(why, "no partition"),
		      "unreachable brokers: consumer_barrier times out: %s", why);
		t0 = now_ns();
		consumer_stop(c);
		printf("# consumer_stop (no brokers) took %.0f ms\n", (double)(now_ns() - t0) / 1e6);
		CHECK(now_ns() - t0 < 1000000000LL, "consumer_stop is quick without brokers");
		consumer_free(c);
	}

	rd_kafka_mock_cluster_destroy(mc);
	rd_kafka_destroy(mrk);
	stats_release(&st);
	return unit_exit();
}
