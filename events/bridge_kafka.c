/*
 * bridge_kafka.c — facetfs-bridge's Kafka producer (bridge_int.h): its
 * set-up (acks=all, idempotent, one message timeout), the thread serving
 * delivery reports, and bridge_produce(), which produces a document's
 * records and waits until Kafka acknowledged or refused each one, with a
 * bound on the records in flight so that a slow Kafka is told to the
 * sender (503) instead of queued without end.
 */
#include "events/bridge_int.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "events/kafka.h"
#include "common/lock.h"
#include "common/log.h"

/* One request's outstanding deliveries (under bridge.lock). */
struct delivery {
	size_t pending, failed;
	char err[256];                /* first failure: key and reason */
};

static void bridge_on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
	struct bridge *b = opaque;
	struct delivery *d = m->_private;

	(void)rk;
	if (!d)
		return;
	mod_lock(&b->lock);
	if (m->err) {
		if (d->failed++ == 0)
			snprintf(d->err, sizeof d->err, "record %.*s: %s",
			         m->key ? (int)(m->key_len > 120 ? 120 : m->key_len) : 6,
			         m->key ? (const char *)m->key : "(none)", rd_kafka_err2str(m->err));
	}
	d->pending--;
	pthread_cond_broadcast(&b->cond);
	mod_unlock(&b->lock);
}

static void bridge_on_kafka_error(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
	struct bridge *b = opaque;
	char why[256];

	if (err == RD_KAFKA_RESP_ERR__FATAL) {
		rd_kafka_fatal_error(rk, why, sizeof why);
		log_error("kafka %s: fatal producer error, exiting: %s", b->brokers, why);
		atomic_store(&b->fatal, true);
		kill(getpid(), SIGTERM);
		return;
	}
	log_warn("kafka %s: %s", b->brokers, reason);
}

void *bridge_poll_main(void *arg)
{
	struct bridge *b = arg;

	while (!atomic_load(&b->stop_poll)) {
		KAFKA_GUARD("poll");
		rd_kafka_poll(b->rk, 100);
	}
	return NULL;
}

int bridge_producer_new(struct bridge *b, char **props, size_t n_props)
{
	char why[512], tmo[32];
	rd_kafka_conf_t *kc = kafka_conf_new(b, bridge_on_kafka_error);
	const char *const set[] = {
		"client.id", "facetfs-bridge",
		"linger.ms", "0",
		"acks", "all",
		"enable.idempotence", "true",
		"message.timeout.ms", tmo,
	};
	const char *const servers[] = { "bootstrap.servers", b->brokers };

	snprintf(tmo, sizeof tmo, "%d", b->timeout_ms);
	if (kafka_conf_set(kc, set, sizeof set / sizeof set[0] / 2, why, sizeof why) < 0)
		goto bad;
	for (size_t i = 0; i < n_props; i++) {
		char *eq = strchr(props[i], '=');

		if (!eq) {
			snprintf(why, sizeof why, "-X %s: expected PROP=VALUE", props[i]);
			goto bad;
		}
		*eq = '\0';
		if (kafka_conf_set(kc, (const char *const[]){ props[i], eq + 1 }, 1,
		                   why, sizeof why) < 0)
			goto bad;
	}
	if (kafka_conf_set(kc, servers, 1, why, sizeof why) < 0)
		goto bad;
	rd_kafka_conf_set_dr_msg_cb(kc, bridge_on_delivery);
	if (kafka_client_new(RD_KAFKA_PRODUCER, kc, &b->rk, why, sizeof why) < 0) {
		log_error("%s", why);
		return -EINVAL;
	}
	return 0;                     /* kafka_client_new() took ownership of kc */
bad:
	log_error("kafka producer: %s", why);
	rd_kafka_conf_destroy(kc);
	return -EINVAL;
}

/* Produce every part and wait for all delivery reports. 0, or -EIO with the
   reason in err. */
int bridge_produce(struct bridge *b, const struct ev_part *parts, size_t n,
                   char *err, size_t errlen)
{
	struct delivery d = { 0, 0, "" };
	size_t i;
	int rc = 0;

	/* Never queue without bound: past max_pending the sender hears 503. */
	mod_lock(&b->lock);
	if (b->pending + n > b->max_pending) {
		size_t now = b->pending;

		mod_unlock(&b->lock);
		snprintf(err, errlen, "%zu records already wait for Kafka (--max-pending %zu)",
		         now, b->max_pending);
		return -EAGAIN;
	}
	b->pending += n;
	mod_unlock(&b->lock);
	for (i = 0; i < n; i++) {
		rd_kafka_resp_err_t e;

		mod_lock(&b->lock);
		d.pending++;
		mod_unlock(&b->lock);
		KAFKA_GUARD("producev");
		e = rd_kafka_producev(b->rk, RD_KAFKA_V_TOPIC(b->topic),
		                      RD_KAFKA_V_KEY(parts[i].key,
		                                     parts[i].key ? strlen(parts[i].key) : 0),
		                      RD_KAFKA_V_VALUE(parts[i].json, parts[i].json_len),
		                      RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
		                      RD_KAFKA_V_OPAQUE(&d), RD_KAFKA_V_END);
		if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
			mod_lock(&b->lock);
			d.pending--;
			mod_unlock(&b->lock);
			snprintf(err, errlen, "producing record %s: %s",
			         parts[i].key ? parts[i].key : "(no key)", rd_kafka_err2str(e));
			/* librdkafka's own queue is full: Kafka is slow. */
			rc = e == RD_KAFKA_RESP_ERR__QUEUE_FULL ? -EAGAIN : -EIO;
			break;
		}
	}
	/* Every produced message gets exactly one report (message.timeout.ms). */
	mod_lock(&b->lock);
	while (d.pending > 0)
		pthread_cond_wait(&b->cond, &b->lock);
	b->pending -= n;
	mod_unlock(&b->lock);
	if (rc == 0 && d.failed) {
		snprintf(err, errlen, "%zu of %zu records not acknowledged, first %s",
		         d.failed, n, d.err);
		rc = -EIO;
	}
	return rc;
}
