/*
 * consumer.h — the gateway's Kafka consumer (librdkafka high-level consumer).
 *
 * One consumer thread polls the topic and hands batches (up to
 * CONSUMER_BATCH_MAX messages, one poll round) to cb->apply(). The durable
 * offsets are the caller's, not Kafka's: on every partition assignment the
 * consumer asks cb->stored_offset() and starts there (or at the beginning of
 * the partition on -ENOENT). After apply() returns 0 the offsets are also
 * stored to Kafka (group commit), only so that Kafka tools see progress.
 * If apply() fails the same batch is retried after a backoff; it is never
 * skipped. All callbacks run on the consumer thread only.
 *
 * Two-stage pipeline (when cb->prepare is set): the consumer polls batch
 * N+1 and hands it to cb->prepare() (which may start decoding it on another
 * thread) BEFORE it calls cb->apply() for batch N, so that the next batch is
 * decoded while this one is applied. Batches are applied strictly in poll
 * order; at most two batches are prepared and not yet applied. Every
 * prepared batch is later either given to apply() (same msgs pointer and n)
 * or to forget() (when an earlier batch could not be applied because the
 * consumer stops); its messages stay valid until that call returns. A
 * rebalance (assign or revoke) and the end of the thread first apply every
 * batch polled (in order), so offsets never move past an unapplied batch.
 *
 * Threads: consumer_start/wait_ready/stop/free from one controlling thread;
 * consumer_stop() returns within about 100 ms. Ownership: the consumer copies
 * the strings of conf; messages passed to apply() are valid only during the
 * call (prepared ones: from prepare() until apply() or forget() returns). The stats pointer, if not NULL, must outlive the consumer.
 */
#ifndef FACETFS_CONSUMER_H
#define FACETFS_CONSUMER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct stats;
struct consumer;

#define CONSUMER_BATCH_MAX 1000

struct consumer_conf {
	const char *brokers, *topic, *group;
	const char *const *options;   /* key, value, key, value, ... (librdkafka names) */
	size_t n_options;             /* number of pairs */
};

struct consumer_msg {
	const char *topic;
	int32_t partition;
	int64_t offset;
	int64_t timestamp_ms;         /* message timestamp, -1 if none */
	const void *payload;
	size_t len;
};

struct consumer_cb {
	void *ctx;
	/* Apply a batch (one poll round, each partition's messages in order).
	   Must make the effects AND next offsets durable before returning 0. On
	   error the consumer logs, waits and retries the same batch. */
	int (*apply)(void *ctx, const struct consumer_msg *msgs, size_t n);
	/* Where to resume a partition: the stored next offset, or -ENOENT (then
	   the beginning of the partition). Other errors are retried. */
	int (*stored_offset)(void *ctx, const char *topic, int32_t partition, int64_t *next);
	/* Optional (both or neither): start preparing (decoding) a batch that
	   apply() will get next but one; forget a prepared batch that will not
	   be applied. forget() returns only once no thread reads its messages. */
	void (*prepare)(void *ctx, const struct consumer_msg *msgs, size_t n);
	void (*forget)(void *ctx, const struct consumer_msg *msgs, size_t n);
};

/* Create (not started). Options are validated here: -EINVAL with the reason
   in err. */
int  consumer_new(const struct consumer_conf *conf, const struct consumer_cb *cb,
                  struct stats *st, struct consumer **out, char *err, size_t errlen);
/* Subscribe and start the consumer thread. */
int  consumer_start(struct consumer *c);
/* 0 once the brokers answered metadata for the topic and, if assigned,
   partitions were assigned (a group join takes seconds: Kafka's initial
   rebalance delay); -ETIMEDOUT (logged, naming the brokers and the last
   error) if not within timeout_ms. */
int  consumer_wait_ready(struct consumer *c, int timeout_ms, bool assigned);
/* Stop polling, leave the group, join the thread. Idempotent. */
void consumer_stop(struct consumer *c);
/* Stops if needed and frees. NULL is fine. */
void consumer_free(struct consumer *c);

#endif
