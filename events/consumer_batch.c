/*
 * consumer_batch.c — the consumer thread's batches and the positions of
 * its partitions (consumer_int.h): a batch filled, posted to the decoder,
 * applied with retries, released; each partition's next offset, its
 * assignment time, the lag table; the clocks and the stoppable sleep the
 * consumer's files share. consumer.c's DESIGN note says how batches flow.
 * Called by consumer.c and consumer_marks.c; calls neither.
 */
#include "events/consumer_int.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <librdkafka/rdkafka.h>

#include "common/array.h"
#include "common/lock.h"
#include "common/log.h"
#include "common/stats.h"
#include "events/decoder.h"
#include "events/kafka.h"

#define LAG_INTERVAL_NS   1000000000LL

int64_t consumer_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Wall clock in ms: comparable with event and produce times. */
int64_t consumer_wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Sleep ms in short slices; false if the consumer was stopped meanwhile. */
bool consumer_sleep(struct consumer *c, unsigned ms)
{
	while (ms > 0 && !atomic_load(&c->stop)) {
		unsigned slice = ms < 20 ? ms : 20;
		struct timespec ts = { 0, (long)slice * 1000000L };

		nanosleep(&ts, NULL);
		ms -= slice;
	}
	return !atomic_load(&c->stop);
}

/* ---- partition positions (consumer thread only) ---- */

struct part_pos *consumer_part_find(struct consumer *c, int32_t partition)
{
	for (size_t i = 0; i < c->n_parts; i++)
		if (c->parts[i].partition == partition)
			return &c->parts[i];
	return NULL;
}

/* The consumer thread is the only writer of parts, and writes under
   c->lock for consumer_barrier(); it reads them without the lock. */
void consumer_part_set(struct consumer *c, int32_t partition, int64_t next)
{
	mod_lock(&c->lock);
	struct part_pos *p = consumer_part_find(c, partition);

	if (!p && ARRAY_GROW(&c->parts, &c->cap_parts, c->n_parts + 1) == 0) {
		p = &c->parts[c->n_parts++];
		p->partition = partition;
		p->since_ms = 0;
		p->fresh_ms = 0;
	}
	if (p)                /* else only lag reporting and barriers suffer */
		p->next = next;
	pthread_cond_broadcast(&c->cond);     /* barriers waiting for it */
	mod_unlock(&c->lock);
}

void consumer_part_since(struct consumer *c, int32_t partition, int64_t since_ms)
{
	mod_lock(&c->lock);
	struct part_pos *p = consumer_part_find(c, partition);

	if (p)
		p->since_ms = since_ms;
	mod_unlock(&c->lock);
}

void consumer_part_drop(struct consumer *c, int32_t partition)
{
	mod_lock(&c->lock);
	struct part_pos *p = consumer_part_find(c, partition);

	if (p)
		*p = c->parts[--c->n_parts];
	mod_unlock(&c->lock);
}

void consumer_parts_clear(struct consumer *c)
{
	mod_lock(&c->lock);
	c->n_parts = 0;
	mod_unlock(&c->lock);
}

/* Per-partition lag from the cached high watermarks: no broker round trip. */
void consumer_lag_update(struct consumer *c)
{
	int64_t now = consumer_now_ns();

	if (!c->st || now - c->lag_at_ns < LAG_INTERVAL_NS)
		return;
	c->lag_at_ns = now;
	for (size_t i = 0; i < c->n_parts; i++) {
		int64_t lo = -1, hi = -1, next = c->parts[i].next, lag;
		char name[96];

		KAFKA_GUARD("get_watermark_offsets");
		if (rd_kafka_get_watermark_offsets(c->rk, c->topic, c->parts[i].partition,
		                                   &lo, &hi) != RD_KAFKA_RESP_ERR_NO_ERROR || hi < 0)
			continue;
		if (next < 0)
			next = lo;
		if (next < 0)
			continue;
		lag = hi > next ? hi - next : 0;
		snprintf(name, sizeof name, "%s/%" PRId32, c->topic, c->parts[i].partition);
		stats_lag_set(c->st, name, lag);
	}
}

/* ---- batches (consumer thread only) ---- */

/* Give the decoder job back (it finishes reading the messages first), then
   destroy the messages. */
void consumer_batch_release(struct consumer *c, struct consumer_batch *b)
{
	if (b->job) {
		decoder_release(c->dec, b->job);
		b->job = NULL;
	}
	for (size_t i = 0; i < b->n; i++)
		rd_kafka_message_destroy(b->rkm[i]);
	b->n = 0;
}

void consumer_batch_add(struct consumer *c, struct consumer_batch *b,
                               rd_kafka_message_t *rkm)
{
	struct decoder_msg *m = &b->msgs[b->n];
	const struct part_pos *p = consumer_part_find(c, rkm->partition);
	rd_kafka_timestamp_type_t tstype;

	m->topic = c->topic;          /* the only topic subscribed */
	m->partition = rkm->partition;
	m->offset = rkm->offset;
	m->timestamp_ms = rd_kafka_message_timestamp(rkm, &tstype);
	m->since_ms = p ? p->since_ms : 0;
	m->payload = rkm->payload;
	m->len = rkm->len;
	b->rkm[b->n++] = rkm;
	stats_inc(&c->ctr.consumed);
}

/* Start decoding a batch on the decoder thread. If memory is short it is
   posted again when it is applied. */
void consumer_batch_post(struct consumer *c, struct consumer_batch *b)
{
	if (b->n && !b->job)
		b->job = decoder_post(c->dec, b->msgs, b->n);
}

/* Tell Kafka how far we got (for tools; our own offsets are already durable). */
static void consumer_batch_store(struct consumer *c, const struct ev_batch *eb)
{
	rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new((int)eb->n_pos);
	rd_kafka_resp_err_t err;

	for (size_t i = 0; i < eb->n_pos; i++) {
		rd_kafka_topic_partition_list_add(l, eb->pos[i].topic, eb->pos[i].partition)->offset =
			eb->pos[i].next;
		consumer_part_set(c, eb->pos[i].partition, eb->pos[i].next);
	}
	KAFKA_GUARD("offsets_store");
	err = rd_kafka_offsets_store(c->rk, l);
	if (err != RD_KAFKA_RESP_ERR_NO_ERROR)    /* e.g. partition revoked meanwhile */
		log_debug("kafka: storing offsets to the group: %s", rd_kafka_err2str(err));
	rd_kafka_topic_partition_list_destroy(l);
}

/* Decode (what the decoder has not yet) and apply a batch once. */
static int consumer_batch_try(struct consumer *c, struct consumer_batch *b)
{
	struct ev_batch *eb;
	int rc;

	consumer_batch_post(c, b);
	if (!b->job)
		return -ENOMEM;
	rc = decoder_finish(c->dec, b->job, &eb);
	if (rc < 0) {                 /* decoded again on the next try */
		decoder_release(c->dec, b->job);
		b->job = NULL;
		return rc;
	}
	rc = c->cb.apply(c->cb.ctx, eb);
	if (rc == 0)
		consumer_batch_store(c, eb);
	return rc;
}

/* Apply a batch, retrying until it succeeds. Returns 0, or the last error
   if the consumer was stopped first (the batch is then dropped: it was not
   applied, so it will be consumed again after a restart). The batch is
   empty afterwards. */
int consumer_batch_apply(struct consumer *c, struct consumer_batch *b)
{
	unsigned backoff = BACKOFF_MIN_MS;
	int rc = 0;

	while (b->n && (rc = consumer_batch_try(c, b)) < 0) {
		log_error("kafka %s: applying %zu messages from %s/%" PRId32 " offset %" PRId64
		          " failed: %s; retrying in %u ms", c->brokers, b->n, c->topic,
		          b->msgs[0].partition, b->msgs[0].offset, strerror(-rc), backoff);
		if (!consumer_sleep(c, backoff))
			break;
		backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
	}
	consumer_batch_release(c, b);
	return rc;
}

/* Apply old, then new (in poll order); if old cannot be applied, new is
   dropped rather than applied after a gap. Both are empty afterwards. */
int consumer_drain(struct consumer *c)
{
	struct consumer_batch *old = &c->b[c->old], *new = &c->b[c->old ^ 1];
	int rc = consumer_batch_apply(c, old);

	if (rc == 0)
		return consumer_batch_apply(c, new);
	consumer_batch_release(c, new);
	return rc;
}

