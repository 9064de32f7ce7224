/*
 * bridge_int.h — the inside of facetfs-bridge (bridge.c), not for other
 * programs: struct bridge, all of its state, owned by main(); and the
 * producer (bridge_kafka.c) that the HTTP side calls. Calls go one way:
 * bridge.c (command line, HTTP, admission) -> bridge_kafka.c -> kafka.c.
 *
 * Threads: libmicrohttpd's connection threads call bridge_produce(), which
 * blocks until every record it produced is reported; one poll thread
 * (bridge_poll_main) serves librdkafka's delivery reports. b->lock guards
 * the fields marked "under lock" and every struct delivery (a leaf: no
 * Kafka call is made under it).
 *
 * Tests: no unit test (the bridge program); t_bridge.sh, t_bed.sh.
 */
#ifndef FACETFS_BRIDGE_INT_H
#define FACETFS_BRIDGE_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include <librdkafka/rdkafka.h>

#include "events/record.h"

#define TOKEN_MAX          256
#define BRIDGE_SNS_TOPICS  16         /* --sns-topic given at most */

struct MHD_Daemon;

struct bridge {
	const char *listen, *brokers, *topic;
	size_t max_body;
	int timeout_ms;
	char token[TOKEN_MAX];        /* --token-file: "" when none */
	size_t token_len;
	unsigned max_rate;            /* requests per second, 0: unbounded */
	size_t max_pending;           /* records in flight to Kafka */
	size_t pending;               /* under lock: records in flight now */
	double rate_tokens;           /* under lock: the rate bucket */
	struct timespec rate_at;      /* under lock: when it was last filled */
	rd_kafka_t *rk;
	pthread_t poller;
	atomic_bool stop_poll;
	atomic_bool fatal;            /* the producer hit a fatal error */
	pthread_mutex_t lock;         /* protects every struct delivery */
	pthread_cond_t cond;          /* a delivery report arrived */
	struct MHD_Daemon *httpd;
	const char *sns_topics[BRIDGE_SNS_TOPICS];   /* --sns-topic ARNs */
	size_t n_sns_topics;
	const char *sns_url_prefix;   /* --sns-url-prefix, or NULL: AWS's hosts */
};

struct bridge_sns;
/* Confirm an SNS subscription (bridge_sns.c): GET its SubscribeURL (no
 * redirect, 10 s, the answer's first 64 KiB read). 0 on a 2xx, else -EIO
 * with the reason in why. Any thread; no lock held. */
int  bridge_sns_confirm(const struct bridge_sns *c, char *why, size_t whylen);
/* libcurl's global set-up, once, before any thread starts: 0 or -EIO. */
int  bridge_sns_init(void);

/* The producer for b->brokers with the -X properties props (PROP=VALUE,
 * split in place) into b->rk. 0, or -EINVAL (logged). */
int  bridge_producer_new(struct bridge *b, char **props, size_t n_props);
/* The delivery-report thread: polls b->rk until b->stop_poll. */
void *bridge_poll_main(void *arg);
/* Produce every part keyed by its key and wait for all delivery reports.
 * 0; -EAGAIN when Kafka is slow (over b->max_pending records in flight,
 * or librdkafka's queue full); -EIO when a record was not acknowledged.
 * On error the reason is in err. */
int  bridge_produce(struct bridge *b, const struct ev_part *parts, size_t n,
		    char *err, size_t errlen);

#endif
