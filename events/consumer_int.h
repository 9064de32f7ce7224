/*
 * consumer_int.h — the inside of struct consumer, shared by consumer.c
 * (the consumer thread, rebalances, start and stop) and consumer_marks.c
 * (barriers and freshness, read by other threads under c->lock), which
 * calls consumer.c's two helpers below and nothing else. Not for other
 * modules.
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

/* Monotonic clock, ns. */
int64_t consumer_now_ns(void);
/* The position of partition (NULL: not assigned). The consumer thread
 * reads it without c->lock; any other thread holds the lock. */
struct part_pos *consumer_part_find(struct consumer *c, int32_t partition);

#endif
