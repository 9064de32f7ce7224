/*
 * test_consumer.c — events/consumer.c against librdkafka's mock cluster (the
 * real Kafka protocol over TCP on 127.0.0.1).
 *
 * 1. bad options are refused with a reason;
 * 2. N messages in each of 2 partitions arrive exactly once, in partition
 *    order, with payload and timestamp, counted in stats, lag 0 at the end
 *    (also prints the consumer's messages/s);
 * 3. a new consumer in the same group, whose stored_offset() says "midpoint",
 *    resumes there (not at the group's committed offsets, which are at the
 *    end), and an apply() that fails once gets the same batch again;
 * 2 and 3 run with prepare()/forget() (the two-stage pipeline): every
 *    prepared batch reaches apply() in prepare order, at most 2 pending;
 * 4. unreachable brokers: consumer_wait_ready() gives -ETIMEDOUT in time and
 *    consumer_stop() is quick.
 */
#include <errno.h>
#include <inttypes.h>
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

#define TOPIC   "t"
#define NPARTS  2
#define NMSG    50000             /* per partition */

static int failures;

static void check(int ok, const char *what)
{
	printf("%s - %s\n", ok ? "ok" : "not ok", what);
	if (!ok)
		failures++;
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
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
	size_t total, calls;
	int bad;                      /* order/payload/timestamp errors */
	char first_bad[200];
	int fail_once;                /* fail the next apply() */
	int failed;                   /* a failure was injected */
	size_t fail_n;
	int32_t fail_part[2];
	int64_t fail_off[2];          /* first and last message of the failed batch */
	int retry_same;               /* -1 not seen, 0 different, 1 same batch */
	int64_t t_first, t_last;
	/* prepare(): the batches prepared and not yet applied, oldest first */
	const struct consumer_msg *prep_m[3];
	size_t prep_n[3], n_prep, prepared, prep_applied, prep_bad;
};

static void fake_prepare(void *ctx, const struct consumer_msg *m, size_t n)
{
	struct fake *f = ctx;

	pthread_mutex_lock(&f->lock);
	f->prepared++;
	if (f->n_prep == 2 || n == 0)
		f->prep_bad++;         /* more than two pending, or an empty batch */
	else {
		f->prep_m[f->n_prep] = m;
		f->prep_n[f->n_prep++] = n;
	}
	pthread_mutex_unlock(&f->lock);
}

/* apply() or forget() of m: if it was prepared it must be the oldest. */
static void fake_unprepare(struct fake *f, const struct consumer_msg *m, size_t n)
{
	for (size_t i = 0; i < f->n_prep; i++)
		if (f->prep_m[i] == m && f->prep_n[i] == n) {
			if (i != 0)
				f->prep_bad++;
			f->prep_applied++;
			memmove(&f->prep_m[i], &f->prep_m[i + 1], (f->n_prep - i - 1) * sizeof f->prep_m[0]);
			memmove(&f->prep_n[i], &f->prep_n[i + 1], (f->n_prep - i - 1) * sizeof f->prep_n[0]);
			f->n_prep--;
			return;
		}
}

static void fake_forget(void *ctx, const struct consumer_msg *m, size_t n)
{
	struct fake *f = ctx;

	pthread_mutex_lock(&f->lock);
	fake_unprepare(f, m, n);
	pthread_mutex_unlock(&f->lock);
}

static int fake_apply(void *ctx, const struct consumer_msg *m, size_t n)
{
	struct fake *f = ctx;

	pthread_mutex_lock(&f->lock);
	f->calls++;
	fake_unprepare(f, m, n);
	if (f->fail_once) {
		f->fail_once = 0;
		f->failed = 1;
		f->fail_n = n;
		f->fail_part[0] = m[0].partition;
		f->fail_off[0] = m[0].offset;
		f->fail_part[1] = m[n - 1].partition;
		f->fail_off[1] = m[n - 1].offset;
		pthread_mutex_unlock(&f->lock);
		return -EIO;
	}
	if (f->failed && f->retry_same < 0)
		f->retry_same = n == f->fail_n && m[0].partition == f->fail_part[0] &&
		                m[0].offset == f->fail_off[0] &&
		                m[n - 1].partition == f->fail_part[1] &&
		                m[n - 1].offset == f->fail_off[1];
	if (f->total == 0)
		f->t_first = now_ns();
	for (size_t i = 0; i < n; i++) {
		char want[64];
		int len = snprintf(want, sizeof want, "p%" PRId32 "-%" PRId64,
		                   m[i].partition, m[i].offset);
		int ok = m[i].partition >= 0 && m[i].partition < NPARTS &&
		         strcmp(m[i].topic, TOPIC) == 0 &&
		         m[i].offset == f->next[m[i].partition] &&
		         m[i].len == (size_t)len && memcmp(m[i].payload, want, (size_t)len) == 0 &&
		         m[i].timestamp_ms > 1500000000000LL;

		if (!ok) {
			if (!f->bad++)
				snprintf(f->first_bad, sizeof f->first_bad,
				         "partition %" PRId32 " offset %" PRId64 " (expected %" PRId64
				         ") len %zu ts %" PRId64, m[i].partition, m[i].offset,
				         m[i].partition >= 0 && m[i].partition < NPARTS ?
				         f->next[m[i].partition] : -1, m[i].len, m[i].timestamp_ms);
			continue;
		}
		f->next[m[i].partition]++;
		f->total++;
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
	f->retry_same = -1;
	f->n_prep = f->prepared = f->prep_applied = f->prep_bad = 0;
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
	                          .stored_offset = fake_stored_offset,
	                          .prepare = fake_prepare, .forget = fake_forget };
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
			char v[64];
			int len = snprintf(v, sizeof v, "p%" PRId32 "-%d", part, i);
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
	char err[256] = "", what[512];
	rd_kafka_conf_t *mconf;
	rd_kafka_t *mrk;
	rd_kafka_mock_cluster_t *mc;
	const char *brokers;
	struct consumer *c;
	int64_t t0;
	size_t got;

	log_init("test_consumer", 0);
	stats_init(&st);

	/* 1. options are validated */
	{
		static const char *const bad[] = { "no.such.option", "1" };
		struct consumer_conf conf = { "127.0.0.1:1", TOPIC, "g", bad, 1 };
		struct consumer_cb cb = { .ctx = &f, .apply = fake_apply,
		                          .stored_offset = fake_stored_offset };

		c = NULL;
		check(consumer_new(&conf, &cb, NULL, &c, err, sizeof err) == -EINVAL && !c &&
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
	check(rd_kafka_mock_topic_create(mc, TOPIC, NPARTS, 1) == RD_KAFKA_RESP_ERR_NO_ERROR,
	      "mock topic with 2 partitions");
	t0 = now_ns();
	check(produce_all(brokers) == 0, "produced 2 x 50000 messages");
	printf("# produced %d messages in %.2f s\n", NPARTS * NMSG, (double)(now_ns() - t0) / 1e9);

	/* 2. everything exactly once, in order */
	fake_reset(&f, -1, -1);
	c = consumer_make(brokers, &f, &st);
	check(c != NULL, "consumer_new");
	if (!c)
		return 1;
	t0 = now_ns();
	check(consumer_start(c) == 0, "consumer_start");
	check(consumer_wait_ready(c, 15000, true) == 0, "consumer_wait_ready on the mock");
	printf("# ready after %.2f s\n", (double)(now_ns() - t0) / 1e9);
	got = fake_wait(&f, NPARTS * NMSG, 20000);
	sleep_ms(300);                /* nothing more may come */
	pthread_mutex_lock(&f.lock);
	snprintf(what, sizeof what, "all %d messages applied once, in partition order "
	         "(got %zu, %d bad%s%s)", NPARTS * NMSG, f.total, f.bad,
	         f.bad ? ": first " : "", f.first_bad);
	check(got == NPARTS * NMSG && f.total == NPARTS * NMSG && f.bad == 0 &&
	      f.next[0] == NMSG && f.next[1] == NMSG, what);
	if (f.t_last > f.t_first)
		printf("# consumer: %zu messages in %zu batches, %.0f messages/s\n", f.total,
		       f.calls, (double)f.total * 1e9 / (double)(f.t_last - f.t_first));
	pthread_mutex_unlock(&f.lock);
	pthread_mutex_lock(&f.lock);
	snprintf(what, sizeof what, "pipeline: %zu batches prepared, %zu of them applied in "
	         "order, %zu pending, %zu out of order", f.prepared, f.prep_applied, f.n_prep,
	         f.prep_bad);
	check(f.prepared > 0 && f.prep_applied == f.prepared && f.n_prep == 0 &&
	      f.prep_bad == 0, what);
	pthread_mutex_unlock(&f.lock);
	check(stats_get(&st, ev_consumed) == NPARTS * NMSG, "stats: ev_consumed counts each message");
	sleep_ms(1200);               /* lag is refreshed about once a second */
	check(lag_of(&st, TOPIC "/0") == 0 && lag_of(&st, TOPIC "/1") == 0,
	      "stats: lag of t/0 and t/1 is 0 at the end");
	t0 = now_ns();
	consumer_stop(c);
	printf("# consumer_stop took %.0f ms\n", (double)(now_ns() - t0) / 1e6);
	check(now_ns() - t0 < 1000000000LL, "consumer_stop returns within 1 s");
	consumer_free(c);

	/* 3. resume where the caller's offsets are, and retry a failed batch */
	fake_reset(&f, NMSG / 2, NMSG / 4);
	pthread_mutex_lock(&f.lock);
	f.fail_once = 1;
	pthread_mutex_unlock(&f.lock);
	c = consumer_make(brokers, &f, NULL);
	check(c != NULL, "second consumer_new, same group");
	if (!c)
		return 1;
	t0 = now_ns();
	check(consumer_start(c) == 0 && consumer_wait_ready(c, 20000, true) == 0,
	      "second consumer ready");
	printf("# ready after %.2f s (group rejoin)\n", (double)(now_ns() - t0) / 1e9);
	got = fake_wait(&f, NMSG - NMSG / 2 + NMSG - NMSG / 4, 20000);
	sleep_ms(300);
	pthread_mutex_lock(&f.lock);
	snprintf(what, sizeof what, "resumed at the stored offsets %d and %d, not the group's "
	         "(got %zu, %d bad%s%s)", NMSG / 2, NMSG / 4, f.total, f.bad,
	         f.bad ? ": first " : "", f.first_bad);
	check(got == (size_t)(NMSG - NMSG / 2 + NMSG - NMSG / 4) && f.bad == 0 &&
	      f.total == got && f.next[0] == NMSG && f.next[1] == NMSG, what);
	check(f.failed && f.retry_same == 1, "a failed apply gets the same batch again");
	pthread_mutex_unlock(&f.lock);
	consumer_free(c);
	snprintf(what, sizeof what, "pipeline after a failed apply and stop: %zu prepared, "
	         "%zu applied or forgotten, %zu out of order", f.prepared, f.prep_applied,
	         f.prep_bad);
	check(f.prepared > 0 && f.prep_applied == f.prepared && f.n_prep == 0 &&
	      f.prep_bad == 0, what);

	/* 4. unreachable brokers */
	fake_reset(&f, -1, -1);
	c = consumer_make("127.0.0.1:1", &f, NULL);
	check(c != NULL && consumer_start(c) == 0, "consumer on unreachable brokers starts");
	if (c) {
		int rc;

		t0 = now_ns();
		rc = consumer_wait_ready(c, 1500, true);
		check(rc == -ETIMEDOUT && now_ns() - t0 < 2500000000LL,
		      "unreachable brokers: consumer_wait_ready gives -ETIMEDOUT in time");
		t0 = now_ns();
		consumer_stop(c);
		printf("# consumer_stop (no brokers) took %.0f ms\n", (double)(now_ns() - t0) / 1e6);
		check(now_ns() - t0 < 1000000000LL, "consumer_stop is quick without brokers");
		consumer_free(c);
	}

	rd_kafka_mock_cluster_destroy(mc);
	rd_kafka_destroy(mrk);
	stats_release(&st);
	printf("%s\n", failures ? "FAILED" : "PASSED");
	return failures ? 1 : 0;
}
