/*
 * consumer.c — Kafka consumer thread: poll, decode ahead, apply, resume
 * from the caller's offsets.
 *
 * DESIGN. One thread (consumer_main) loops over two batch buffers of raw
 * messages, "old" (polled last round, being decoded) and "new": collect up
 * to CONSUMER_BATCH_MAX messages into new (the first poll waits up to
 * POLL_WAIT_MS only when old is empty, later ones take only what
 * librdkafka already fetched), post new to the decoder (decoder.h), then
 * finish old's decoding and apply it with cb->apply(), retrying the same
 * decoded batch with a growing backoff until it succeeds or the consumer
 * is stopped, and swap. So batch N+1 is decoded (on the decoder thread)
 * while batch N is applied, and batches are applied in poll order. If old
 * cannot be applied (stopped), new is released, never applied after it
 * (it is consumed again after a restart). A batch's raw messages are
 * destroyed only after its decoder job was finished or released (the
 * decoder reads them until then). Rebalances are served by librdkafka inside
 * rd_kafka_consumer_poll() on this same thread: both an assignment and a
 * revocation first drain (apply old, then what new holds so far), so
 * nothing polled is lost or applied twice and no offset moves past an
 * unapplied batch; an assignment then asks cb->stored_offset() for each
 * partition and assigns with that offset. The thread drains before closing.
 * The fields under "consumer thread only" are never touched elsewhere,
 * except parts, which this thread alone writes, under c->lock, and
 * consumer_barrier() reads under it; the readiness flags and the last
 * error are shared with consumer_wait_ready() under c->lock.
 */
#include "events/consumer_int.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <librdkafka/rdkafka.h>

#include "common/lock.h"
#include "common/array.h"
#include "common/log.h"
#include "common/stats.h"
#include "events/decoder.h"
#include "events/kafka.h"

#define POLL_WAIT_MS      50      /* first poll of a round: bounds stop latency */

static const struct stats_def consumer_stats[] = {
	STATS_COUNTER(struct consumer_counters, consumed, "events", "consumed"),
	STATS_GAUGE(struct consumer_counters, partitions, "kafka", "partitions_assigned"),
};

/* Remember an error for consumer_wait_ready(); log it when it changes. */
static void consumer_note_error(struct consumer *c, bool fatal, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void consumer_note_error(struct consumer *c, bool fatal, const char *fmt, ...)
{
	char buf[sizeof c->last_err];
	va_list ap;
	bool changed;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	mod_lock(&c->lock);
	changed = strcmp(buf, c->last_err) != 0;
	if (changed)
		memcpy(c->last_err, buf, sizeof buf);
	mod_unlock(&c->lock);
	if (fatal)
		log_error("kafka %s: %s", c->brokers, buf);
	else if (changed)
		log_warn("kafka %s: %s", c->brokers, buf);
}

static void consumer_on_error(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
	struct consumer *c = opaque;

	(void)rk;
	consumer_note_error(c, err == RD_KAFKA_RESP_ERR__FATAL, "%s", reason);
}

/* ---- rebalancing (consumer thread, inside rd_kafka_consumer_poll) ---- */

/* The caller's next offset for a partition; false if stopped before one
   could be read (then the partition must not be assigned). */
static bool consumer_resume_offset(struct consumer *c, int32_t partition, int64_t *offset)
{
	unsigned backoff = BACKOFF_MIN_MS;

	for (;;) {
		int64_t next = 0;
		int rc = c->cb.stored_offset(c->cb.ctx, c->topic, partition, &next);

		if (rc == 0 && next >= 0) {
			*offset = next;
			return true;
		}
		if (rc == -ENOENT) {
			*offset = RD_KAFKA_OFFSET_BEGINNING;
			return true;
		}
		log_error("kafka: reading the stored offset of %s/%" PRId32 " failed: %s; "
		          "retrying in %u ms", c->topic, partition,
		          rc ? strerror(-rc) : "negative offset", backoff);
		if (!consumer_sleep(c, backoff))
			return false;
		backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
	}
}

static void consumer_assign(struct consumer *c, rd_kafka_topic_partition_list_t *parts, bool coop)
{
	rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR;
	rd_kafka_error_t *error = NULL;

	consumer_drain(c);            /* no batch in flight across a rebalance */
	for (int i = 0; i < parts->cnt; i++) {
		rd_kafka_topic_partition_t *tp = &parts->elems[i];

		if (!consumer_resume_offset(c, tp->partition, &tp->offset))
			return;
		log_info("kafka: %s/%" PRId32 " assigned, resuming at %s%" PRId64, tp->topic,
		         tp->partition, tp->offset < 0 ? "the beginning " : "offset ",
		         tp->offset < 0 ? (int64_t)0 : tp->offset);
	}
	KAFKA_GUARD("assign");
	if (coop)
		error = rd_kafka_incremental_assign(c->rk, parts);
	else
		err = rd_kafka_assign(c->rk, parts);
	if (error) {
		log_error("kafka: incremental assign: %s", rd_kafka_error_string(error));
		rd_kafka_error_destroy(error);
		return;
	}
	if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
		log_error("kafka: assign: %s", rd_kafka_err2str(err));
		return;
	}
	if (!coop)
		consumer_parts_clear(c);
	int64_t since = consumer_wall_ms();
	for (int i = 0; i < parts->cnt; i++) {
		consumer_part_set(c, parts->elems[i].partition,
		                  parts->elems[i].offset >= 0 ? parts->elems[i].offset : -1);
		consumer_part_since(c, parts->elems[i].partition, since);
	}
	c->lag_at_ns = 0;
	stats_set(&c->ctr.partitions, (uint_fast64_t)c->n_parts);
	mod_lock(&c->lock);
	c->assigned = true;
	pthread_cond_broadcast(&c->cond);
	mod_unlock(&c->lock);
}

static void consumer_revoke(struct consumer *c, rd_kafka_topic_partition_list_t *parts, bool coop)
{
	rd_kafka_error_t *error = NULL;

	consumer_drain(c);            /* what was polled before the revocation */
	if (coop) {
		KAFKA_GUARD("incremental_unassign");
		error = rd_kafka_incremental_unassign(c->rk, parts);
		if (error) {
			log_error("kafka: incremental unassign: %s", rd_kafka_error_string(error));
			rd_kafka_error_destroy(error);
		}
		for (int i = 0; i < parts->cnt; i++)
			consumer_part_drop(c, parts->elems[i].partition);
	} else {
		KAFKA_GUARD("assign");
		rd_kafka_assign(c->rk, NULL);
		consumer_parts_clear(c);
	}
	stats_set(&c->ctr.partitions, (uint_fast64_t)c->n_parts);
}

static void consumer_on_rebalance(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                                  rd_kafka_topic_partition_list_t *parts, void *opaque)
{
	struct consumer *c = opaque;
	bool coop = strcmp(rd_kafka_rebalance_protocol(rk), "COOPERATIVE") == 0;

	switch (err) {
	case RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS:
		consumer_assign(c, parts, coop);
		break;
	case RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS:
		consumer_revoke(c, parts, coop);
		break;
	default:
		log_error("kafka: rebalance failed: %s", rd_kafka_err2str(err));
		consumer_revoke(c, parts, false);
		break;
	}
}

/* ---- the thread ---- */

/* Fill the new batch: wait a little for the first message unless the old
   batch is waiting to be applied, then take only what is already fetched.
   A rebalance inside the poll drains both batches (then new is empty). */
static void consumer_collect(struct consumer *c)
{
	struct consumer_batch *new = &c->b[c->old ^ 1];

	while (new->n < CONSUMER_BATCH_MAX && !atomic_load(&c->stop)) {
		int wait = new->n || c->b[c->old].n ? 0 : POLL_WAIT_MS;
		KAFKA_GUARD("consumer_poll");
		rd_kafka_message_t *rkm = rd_kafka_consumer_poll(c->rk, wait);

		if (!rkm)
			return;
		if (rkm->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
			consumer_batch_add(c, new, rkm);
			continue;
		}
		if (rkm->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
			consumer_note_error(c, rkm->err == RD_KAFKA_RESP_ERR__FATAL,
			                    "%s/%" PRId32 ": %s",
			                    rkm->rkt ? rd_kafka_topic_name(rkm->rkt) : c->topic,
			                    rkm->partition, rd_kafka_message_errstr(rkm));
		rd_kafka_message_destroy(rkm);
		if (new->n == 0)
			return;
	}
}

/* One round: poll new, post it to the decoder, apply old (new is decoded
   meanwhile), swap. If old could not be applied (stopped), new is dropped. */
static void consumer_round(struct consumer *c)
{
	struct consumer_batch *new;

	consumer_collect(c);
	new = &c->b[c->old ^ 1];
	consumer_batch_post(c, new);
	if (consumer_batch_apply(c, &c->b[c->old]) < 0)
		consumer_batch_release(c, new);
	c->old ^= 1;
}

/* How fresh each partition is after a round that began at round_ms
   (wall clock): caught up to the high-water mark its last fetch cached,
   with nothing polled and not applied, it is fresh as of the round's
   start; with records polled and not applied, as of the produce time of
   the first of them; otherwise as it was. */
static void consumer_fresh_update(struct consumer *c, int64_t round_ms)
{
	const struct consumer_batch *pend = &c->b[c->old];   /* applied next round */

	for (size_t i = 0; i < c->n_parts; i++) {
		int32_t part = c->parts[i].partition;
		int64_t lo = -1, hi = -1, fresh = c->parts[i].fresh_ms, first = -1;

		for (size_t m = 0; m < pend->n && first < 0; m++)
			if (pend->msgs[m].partition == part)
				first = pend->msgs[m].timestamp_ms;
		KAFKA_GUARD("get_watermark_offsets");
		if (first >= 0)
			fresh = first;
		else if (rd_kafka_get_watermark_offsets(c->rk, c->topic, part, &lo, &hi) ==
		                 RD_KAFKA_RESP_ERR_NO_ERROR && hi >= 0 &&
		         (c->parts[i].next >= hi || (c->parts[i].next < 0 && hi <= lo)))
			fresh = round_ms;
		if (fresh > c->parts[i].fresh_ms) {
			mod_lock(&c->lock);
			c->parts[i].fresh_ms = fresh;
			mod_unlock(&c->lock);
		}
	}
}

static void *consumer_main(void *arg)
{
	struct consumer *c = arg;
	rd_kafka_resp_err_t err;

	while (!atomic_load(&c->stop)) {
		int64_t round_ms = consumer_wall_ms();

		consumer_round(c);
		consumer_fresh_update(c, round_ms);
		consumer_lag_update(c);
	}
	consumer_drain(c);            /* stopped: what was polled, in order */
	KAFKA_GUARD("consumer_close");
	err = rd_kafka_consumer_close(c->rk);
	if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
		log_warn("kafka %s: closing the consumer: %s", c->brokers, rd_kafka_err2str(err));
	return NULL;
}

/* ---- public ---- */

int consumer_new(const struct consumer_conf *conf, const struct consumer_cb *cb,
                 struct stats *st, struct consumer **out, char *err, size_t errlen)
{
	/* Ours: defaults first (the user's options override them), then what
	   the consumer relies on, set after the user's options so that it wins. */
	static const char *const defaults[] = {
		"client.id", "facetfs",
		"auto.offset.reset", "earliest",
	};
	static const char *const forced[] = {
		"enable.auto.offset.store", "false",
		"enable.partition.eof", "false",
	};
	struct consumer *c;
	rd_kafka_conf_t *kc;
	int rc;

	*out = NULL;
	if (!conf->brokers || !conf->topic || !conf->group || !cb->apply || !cb->stored_offset) {
		snprintf(err, errlen, "kafka: brokers, topic, group, apply and stored_offset "
		         "are required");
		return -EINVAL;
	}
	c = calloc(1, sizeof *c);
	if (!c) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->cond, NULL);
	atomic_init(&c->stop, false);
	c->cb = *cb;
	c->st = st;
	stats_group_add(st, &c->grp, consumer_stats,
			sizeof consumer_stats / sizeof consumer_stats[0], &c->ctr);
	c->brokers = strdup(conf->brokers);
	c->topic = strdup(conf->topic);
	c->group = strdup(conf->group);
	if (!c->brokers || !c->topic || !c->group || decoder_new(st, &c->dec) < 0) {
		snprintf(err, errlen, "out of memory");
		rc = -ENOMEM;
		goto fail;
	}

	kc = kafka_conf_new(c, consumer_on_error);
	rc = kafka_conf_set(kc, defaults, sizeof defaults / sizeof defaults[0] / 2, err, errlen);
	if (rc == 0)
		rc = kafka_conf_set(kc, conf->options, conf->n_options, err, errlen);
	if (rc == 0)
		rc = kafka_conf_set(kc, forced, sizeof forced / sizeof forced[0] / 2, err, errlen);
	if (rc == 0)
		rc = kafka_conf_set(kc, (const char *const[]){ "bootstrap.servers", c->brokers,
		                                              "group.id", c->group }, 2,
		                    err, errlen);
	if (rc < 0) {
		rd_kafka_conf_destroy(kc);
		goto fail;
	}
	rd_kafka_conf_set_rebalance_cb(kc, consumer_on_rebalance);
	rc = kafka_client_new(RD_KAFKA_CONSUMER, kc, &c->rk, err, errlen);
	kc = NULL;                    /* kafka_client_new() took ownership */
	if (rc < 0)
		goto fail;
	rd_kafka_poll_set_consumer(c->rk);
	*out = c;
	return 0;

fail:
	consumer_free(c);
	return rc;
}

int consumer_start(struct consumer *c)
{
	rd_kafka_topic_partition_list_t *l;
	rd_kafka_resp_err_t err;
	int rc;

	if (c->started || atomic_load(&c->stop))
		return -EALREADY;         /* a stopped consumer is not restarted: make a new one */
	l = rd_kafka_topic_partition_list_new(1);
	rd_kafka_topic_partition_list_add(l, c->topic, RD_KAFKA_PARTITION_UA);
	KAFKA_GUARD("subscribe");
	err = rd_kafka_subscribe(c->rk, l);
	rd_kafka_topic_partition_list_destroy(l);
	if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
		log_error("kafka %s: subscribing to %s: %s", c->brokers, c->topic,
		          rd_kafka_err2str(err));
		return -EINVAL;
	}
	rc = pthread_create(&c->thread, NULL, consumer_main, c);
	if (rc) {
		log_error("kafka: starting the consumer thread: %s", strerror(rc));
		return -rc;
	}
	c->started = true;
	return 0;
}

int consumer_wait_ready(struct consumer *c, int timeout_ms, bool assigned)
{
	int64_t deadline = consumer_now_ns() + (int64_t)timeout_ms * 1000000LL;
	rd_kafka_topic_t *rkt = rd_kafka_topic_new(c->rk, c->topic, NULL);
	const char *stage = "metadata";
	char last[sizeof c->last_err];
	bool ready = false;

	if (!rkt) {
		log_error("kafka: topic %s: %s", c->topic, rd_kafka_err2str(rd_kafka_last_error()));
		return -EINVAL;
	}
	for (;;) {
		const struct rd_kafka_metadata *md = NULL;
		int64_t left = (deadline - consumer_now_ns()) / 1000000LL;
		rd_kafka_resp_err_t err;

		if (left <= 0)
			break;
		KAFKA_GUARD("metadata");
		err = rd_kafka_metadata(c->rk, 0, rkt, &md, (int)left);
		if (err == RD_KAFKA_RESP_ERR_NO_ERROR) {
			err = md->topic_cnt == 1 ? md->topics[0].err : RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC;
			if (err == RD_KAFKA_RESP_ERR_NO_ERROR) {
				mod_lock(&c->lock);
				c->topic_parts = md->topics[0].partition_cnt;
				mod_unlock(&c->lock);
			}
			rd_kafka_metadata_destroy(md);
			if (err == RD_KAFKA_RESP_ERR_NO_ERROR)
				break;
			stage = "topic";
			consumer_note_error(c, false, "topic %s: %s", c->topic, rd_kafka_err2str(err));
		}
		consumer_sleep(c, 100);
	}
	rd_kafka_topic_destroy(rkt);
	if (!assigned && consumer_now_ns() < deadline)
		return 0;

	mod_lock(&c->lock);
	if (consumer_now_ns() < deadline) {
		struct timespec ts;
		int64_t dl_rt;

		stage = "assignment";
		clock_gettime(CLOCK_REALTIME, &ts);
		dl_rt = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec +
		        (deadline - consumer_now_ns());
		ts.tv_sec = dl_rt / 1000000000LL;
		ts.tv_nsec = dl_rt % 1000000000LL;
		while (!c->assigned && c->started &&
		       pthread_cond_timedwait(&c->cond, &c->lock, &ts) == 0)
			;
		ready = c->assigned;
	}
	memcpy(last, c->last_err, sizeof last);
	mod_unlock(&c->lock);
	if (ready)
		return 0;
	if (strcmp(stage, "metadata") == 0)
		log_error("kafka brokers %s unreachable: no metadata for topic %s within %d ms%s%s",
		          c->brokers, c->topic, timeout_ms, last[0] ? "; last error: " : "", last);
	else if (strcmp(stage, "topic") == 0)
		log_error("kafka brokers %s: topic %s not available within %d ms: %s",
		          c->brokers, c->topic, timeout_ms, last);
	else
		log_error("kafka brokers %s: no partitions of %s assigned to group %s within %d ms%s%s",
		          c->brokers, c->topic, c->group, timeout_ms,
		          last[0] ? "; last error: " : "", last);
	return -ETIMEDOUT;
}

void consumer_stop(struct consumer *c)
{
	if (!c || !c->started)
		return;
	atomic_store(&c->stop, true);
	pthread_join(c->thread, NULL);
	c->started = false;
	mod_lock(&c->lock);
	c->assigned = false;
	pthread_cond_broadcast(&c->cond);
	mod_unlock(&c->lock);
}

void consumer_free(struct consumer *c)
{
	if (!c)
		return;
	consumer_stop(c);
	KAFKA_GUARD("destroy_flags");
	if (c->rk)
		rd_kafka_destroy_flags(c->rk, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
	decoder_free(c->dec);         /* the thread released every job it posted */
	free(c->parts);
	free(c->brokers);
	free(c->topic);
	free(c->group);
	stats_group_remove(&c->grp);
	pthread_cond_destroy(&c->cond);
	pthread_mutex_destroy(&c->lock);
	free(c);
}
