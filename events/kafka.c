/*
 * kafka.c — see kafka.h.
 */
#include "events/kafka.h"

#include <errno.h>
#include <stdio.h>

#include "common/log.h"

/* librdkafka's syslog levels into ours. */
static void kafka_on_log(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
	(void)rk;
	if (level <= 2)
		log_error("librdkafka %s: %s", fac, buf);
	else if (level == 4)
		log_warn("librdkafka %s: %s", fac, buf);
	else if (level == 5)
		log_info("librdkafka %s: %s", fac, buf);
	else
		log_debug("librdkafka %s: %s", fac, buf);
}

rd_kafka_conf_t *kafka_conf_new(void *opaque, kafka_error_fn *on_error)
{
	rd_kafka_conf_t *kc = rd_kafka_conf_new();

	rd_kafka_conf_set_opaque(kc, opaque);
	rd_kafka_conf_set_error_cb(kc, on_error);
	rd_kafka_conf_set_log_cb(kc, kafka_on_log);
	return kc;
}

int kafka_conf_set(rd_kafka_conf_t *kc, const char *const *kv, size_t n, char *err,
		   size_t errlen)
{
	char why[256];

	for (size_t i = 0; i < n; i++)
		if (rd_kafka_conf_set(kc, kv[2 * i], kv[2 * i + 1], why, sizeof why) !=
		    RD_KAFKA_CONF_OK) {
			snprintf(err, errlen, "kafka option %s=%s: %s", kv[2 * i], kv[2 * i + 1],
				 why);
			return -EINVAL;
		}
	return 0;
}

int kafka_client_new(rd_kafka_type_t type, rd_kafka_conf_t *kc, rd_kafka_t **out,
		     char *err, size_t errlen)
{
	char why[256];

	KAFKA_GUARD("new");
	*out = rd_kafka_new(type, kc, why, sizeof why);
	if (!*out) {
		rd_kafka_conf_destroy(kc);   /* rd_kafka_new() took it only on success */
		snprintf(err, errlen, "kafka: creating the %s: %s",
			 type == RD_KAFKA_CONSUMER ? "consumer" : "producer", why);
		return -EINVAL;
	}
	return 0;
}
