/*
 * kafka.h — the librdkafka set-up the consumer (consumer.c) and the bridge's
 * producer (bridge.c) share: a configuration with the common callbacks,
 * options set from name/value lists with the reason of a refusal, and the
 * client created from it. Internal to events/ (only events/ sees rd_kafka_*).
 *
 * Usage: kafka_conf_new(), kafka_conf_set() once per list of options (a
 * later list overrides an earlier one), the caller's own callbacks
 * (rebalance, delivery), then kafka_client_new(), which takes the
 * configuration in every case. librdkafka's log lines go to common/log.h:
 * levels 0-2 as errors, 4 as warnings, 5 as info, the rest (errors
 * included: they reach the caller's error callback, which logs them) as
 * debug. Any thread; no state of its own. Every Kafka call is preceded by
 * KAFKA_GUARD.
 *
 * Tests: test_consumer.c (the consumer's set-up); t_bridge.sh, t_check.sh
 * (the brokers' deadline).
 */
#ifndef FACETFS_KAFKA_H
#define FACETFS_KAFKA_H

#include <stddef.h>

#include <librdkafka/rdkafka.h>

#include "common/lock.h"

/* Before every call that may talk to the brokers or wait (poll, produce,
 * flush, assign, commit, metadata, close, destroy): no state lock may be
 * held (the lock guard of common/lock.h checks it in its build). */
#define KAFKA_GUARD(call) lock_assert_none("kafka " call)

typedef void kafka_error_fn(rd_kafka_t *rk, int err, const char *reason, void *opaque);

/* A configuration whose callbacks get opaque: on_error for the client's
 * errors, the shared log callback. Never NULL (librdkafka aborts on OOM). */
rd_kafka_conf_t *kafka_conf_new(void *opaque, kafka_error_fn *on_error);
/* Set n name/value pairs (kv[2i], kv[2i+1]) in order. 0, or -EINVAL with
 * "kafka option NAME=VALUE: reason" in err (pairs before it stay set). */
int kafka_conf_set(rd_kafka_conf_t *kc, const char *const *kv, size_t n, char *err,
		   size_t errlen);
/* The client; takes ownership of kc whatever happens. 0, or -EINVAL with
 * "kafka: creating the consumer|producer: reason" in err. */
int kafka_client_new(rd_kafka_type_t type, rd_kafka_conf_t *kc, rd_kafka_t **out,
		     char *err, size_t errlen);

#endif
