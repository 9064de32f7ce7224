/*
 * consumer.h — the gateway's Kafka consumer (librdkafka high-level consumer)
 * and its decoder: the caller gets DECODED batches of S3 event records.
 *
 * One consumer thread polls the topic into batches (up to
 * CONSUMER_BATCH_MAX messages, one poll round), has each decoded
 * (events/decoder.h: records, their produce timestamps, when their
 * partition was assigned to this consumer, each partition's next offset;
 * malformed and ignored records counted and logged there) and hands it to
 * cb->apply(). Decoding runs ahead on the decoder's thread:
 * batch N+1 is polled and decoded while apply() works on batch N. Batches
 * are applied strictly in poll order. The durable offsets are the
 * caller's, not Kafka's: on every partition assignment the consumer asks
 * cb->stored_offset() and starts there (or at the beginning of the
 * partition on -ENOENT). After apply() returns 0 the offsets are also
 * stored to Kafka (group commit), only so that Kafka tools see progress.
 * If apply() fails the same batch is retried after a backoff; it is never
 * skipped. A rebalance (assign or revoke) and the end of the thread first
 * apply every batch polled (in order), so offsets never move past an
 * unapplied batch; a batch polled after one that could not be applied
 * (the consumer stops) is dropped, never applied after a gap.
 *
 * Threads: consumer_start/wait_ready/stop/free from one controlling thread;
 * consumer_stop() returns within about 100 ms plus the apply() in
 * progress. All callbacks run on the consumer thread only. Ownership: the
 * consumer copies the strings of conf; the batch passed to apply() is valid
 * only during the call. The stats pointer, if not NULL, must outlive the
 * consumer.
 *
 * Tests: test_consumer.c; t_crash.sh, t_restart.sh.
 */
#ifndef FACETFS_CONSUMER_H
#define FACETFS_CONSUMER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "events/decoder.h"

struct stats;
struct consumer;

#define CONSUMER_BATCH_MAX 1000

struct consumer_conf {
	const char *brokers, *topic, *group;
	const char *const *options;   /* key, value, key, value, ... (librdkafka names) */
	size_t n_options;             /* number of pairs */
};

struct consumer_cb {
	void *ctx;
	/* Apply a decoded batch (one poll round, each partition's messages in
	   order). Must make the effects AND b->pos durable together before
	   returning 0. It may change the records (decoder.h); on error the
	   consumer logs, waits and calls it again with the same batch. */
	int (*apply)(void *ctx, struct ev_batch *b);
	/* Where to resume a partition: the stored next offset, or -ENOENT (then
	   the beginning of the partition). Other errors are retried. */
	int (*stored_offset)(void *ctx, const char *topic, int32_t partition, int64_t *next);
};

/* Create (not started), with its decoder thread. Options are validated
   here: -EINVAL with the reason in err; -ENOMEM. */
int  consumer_new(const struct consumer_conf *conf, const struct consumer_cb *cb,
                  struct stats *st, struct consumer **out, char *err, size_t errlen);
/* Subscribe and start the consumer thread. */
int  consumer_start(struct consumer *c);
/* 0 once the brokers answered metadata for the topic and, if assigned,
   partitions were assigned (a group join takes seconds: Kafka's initial
   rebalance delay); -ETIMEDOUT (logged, naming the brokers and the last
   error) if not within timeout_ms. */
int  consumer_wait_ready(struct consumer *c, int timeout_ms, bool assigned);
/* What a barrier waited for: the partitions assigned at its call, and the
   records their high-water marks then held (from their low marks). */
struct consumer_marks {
	unsigned partitions;
	uint64_t records;
};
/* A barrier between producers and this consumer: waits for the group's
   first assignment, asks the brokers for the high-water mark of every
   partition assigned then, and waits until apply() has returned for every
   record below them. 0; -ETIMEDOUT (also when a mark could not be read in
   time), -ENOENT (the assignment gave this consumer no partition) or
   -EIO, with what is missing in why. Any thread but the
   consumer's; no lock of the caller held. */
int  consumer_barrier(struct consumer *c, int timeout_ms, struct consumer_marks *out,
                      char *why, size_t whylen);
/* How fresh the consumer is: every record produced before fresh_ms (wall
   clock, ms) on each partition assigned has been applied (0: not known
   yet for some partition: none caught up since its assignment); how many
   partitions are assigned of the topic's (0: not known). A partition
   caught up with the high-water mark its last fetch cached is fresh as of
   the poll round that saw it; one behind, as of the produce time of the
   first record polled and not applied. Any thread. */
struct consumer_fresh {
	int64_t fresh_ms;
	unsigned assigned, partitions;
};
void consumer_freshness(struct consumer *c, struct consumer_fresh *out);
/* Stop polling, leave the group, join the thread. Idempotent. */
void consumer_stop(struct consumer *c);
/* Stops if needed and frees. NULL is fine. */
void consumer_free(struct consumer *c);

#endif
