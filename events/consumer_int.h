/*
 * consumer_int.h — the inside of struct consumer, shared by consumer.c
 * (the consumer thread, rebalances, start and stop), consumer_marks.c
 * (barriers and freshness, read by other threads under c->lock) and
 * consumer_batch.c (batches and partition positions), the bottom: both
 * others call it, it calls neither. Not for other modules.
 *
 * Tests: test_consumer.c (through consumer.h).
 */
#ifndef FACETFS_CONSUMER_INT_H
#define FACETFS_CONSUMER_INT_H

#include "events/consumer.h"

#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <stdatomic.h>

#include "common/stats.h"
#include "events/decoder.h"

struct part_pos {
	int32_t partition;
	int64_t next;                 /* next offset to apply; < 0: not known yet */
	int64_t since_ms;             /* wall clock of its assignment; 0: not known */
	int64_t fresh_ms;             /* every record produced before it applied
	                                 (consumer_fresh_update); 0: not known */
};

/* The consumer's counters (common/stats.h): messages polled, and the
 * partitions assigned now. */
struct consumer_counters {
	stats_counter consumed, partitions;
};

struct consumer {
	rd_kafka_t *rk;
	char *brokers, *topic, *group;
	struct consumer_cb cb;
	struct stats *st;             /* the lag table's; may be NULL */
	struct consumer_counters ctr;
	struct stats_group grp;       /* ctr, registered with st */
	struct decoder *dec;
	pthread_t thread;
	bool started;
	atomic_bool stop;

	/* consumer thread only */
	struct consumer_batch {
		rd_kafka_message_t *rkm[CONSUMER_BATCH_MAX];
		struct decoder_msg msgs[CONSUMER_BATCH_MAX];
		size_t n;
		struct decoder_job *job;  /* posted to the decoder, not yet released */
	} b[2];
	unsigned old;                 /* b[old] is applied before b[old ^ 1] */
	struct part_pos *parts;       /* written under lock (barriers read them) */
	size_t n_parts, cap_parts;
	int64_t lag_at_ns;

	pthread_mutex_t lock;         /* protects the fields below */
	pthread_cond_t cond;
	bool assigned;                /* a rebalance assigned partitions (maybe none) */
	int topic_parts;              /* the topic's partitions (metadata); 0: not known */
	char last_err[256];           /* last error librdkafka reported */
};

#define BACKOFF_MIN_MS    100      /* retries of a batch, of a stored offset */
#define BACKOFF_MAX_MS    5000

/* ---- consumer_batch.c ---- */

/* Monotonic clock, ns; wall clock, ms (comparable with event and produce
 * times). */
int64_t consumer_now_ns(void);
int64_t consumer_wall_ms(void);
/* Sleep ms in short slices; false if the consumer was stopped meanwhile. */
bool consumer_sleep(struct consumer *c, unsigned ms);
/* The position of partition (NULL: not assigned). The consumer thread
 * reads it without c->lock; any other thread holds the lock. */
struct part_pos *consumer_part_find(struct consumer *c, int32_t partition);
/* The consumer thread only, which writes the table under c->lock: the next
 * offset of partition (added when new: waking barriers), the wall time of
 * its assignment; one partition dropped, or all. */
void consumer_part_set(struct consumer *c, int32_t partition, int64_t next);
void consumer_part_since(struct consumer *c, int32_t partition, int64_t since_ms);
void consumer_part_drop(struct consumer *c, int32_t partition);
void consumer_parts_clear(struct consumer *c);
/* Each partition's lag into the stats' lag table, at most once a second
 * (from the cached high watermarks: no broker round trip). */
void consumer_lag_update(struct consumer *c);
/* A batch (consumer thread only): a polled message added; posted to the
 * decoder; applied, retried until it succeeds or the consumer stops (0,
 * or the last error: dropped, consumed again after a restart); released
 * (its decoder job given back, its messages destroyed). consumer_drain:
 * b[old], then b[old ^ 1] (dropped if old failed); both empty after. */
void consumer_batch_add(struct consumer *c, struct consumer_batch *b,
			rd_kafka_message_t *rkm);
void consumer_batch_post(struct consumer *c, struct consumer_batch *b);
int  consumer_batch_apply(struct consumer *c, struct consumer_batch *b);
void consumer_batch_release(struct consumer *c, struct consumer_batch *b);
int  consumer_drain(struct consumer *c);

#endif
