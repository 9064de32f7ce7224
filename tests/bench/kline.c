/*
 * kline — a line-at-a-time Kafka producer for latency probes
 * (tests/bench/bench_events.sh). kcat -P reading a pipe holds lines until
 * its input ends, which makes it useless for "produce one event, time how
 * long until it is visible".
 *
 *   kline BROKERS TOPIC [-X name=value]...
 *
 * Reads lines "KEY<TAB>VALUE" from stdin; produces each at once (linger.ms=0
 * unless -X says otherwise), waits for the broker's acknowledgement and then
 * writes "ok" (or "error: REASON") and a newline to stdout, flushed. So a
 * driver writes one line and reads one answer: when it arrives, the record
 * is in Kafka. Exits 0 at end of input if every record was acknowledged.
 */
#include <librdkafka/rdkafka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
	(void)rk;
	(void)opaque;
	int *state = m->_private;
	*state = m->err ? -(int)m->err - 1 : 1;
}

static int conf_set(rd_kafka_conf_t *conf, const char *name, const char *value)
{
	char err[256];
	if (rd_kafka_conf_set(conf, name, value, err, sizeof err) != RD_KAFKA_CONF_OK) {
		fprintf(stderr, "kline: %s=%s: %s\n", name, value, err);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: kline BROKERS TOPIC [-X name=value]...\n");
		return 2;
	}
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	if (conf_set(conf, "bootstrap.servers", argv[1]) < 0 ||
	    conf_set(conf, "linger.ms", "0") < 0)
		return 2;
	for (int i = 3; i < argc; i++) {
		if (strcmp(argv[i], "-X") != 0 || i + 1 >= argc) {
			fprintf(stderr, "kline: unknown argument %s\n", argv[i]);
			return 2;
		}
		char *eq = strchr(argv[++i], '=');
		if (!eq) {
			fprintf(stderr, "kline: -X %s: want name=value\n", argv[i]);
			return 2;
		}
		*eq = '\0';
		if (conf_set(conf, argv[i], eq + 1) < 0)
			return 2;
	}
	rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
	char err[256];
	rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
	if (!rk) {
		fprintf(stderr, "kline: %s\n", err);
		return 1;
	}
	int failed = 0;
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	while ((len = getline(&line, &cap, stdin)) > 0) {
		if (line[len - 1] == '\n')
			line[--len] = '\0';
		char *tab = memchr(line, '\t', (size_t)len);
		size_t klen = tab ? (size_t)(tab - line) : 0;
		char *val = tab ? tab + 1 : line;
		int state = 0;
		rd_kafka_resp_err_t e = rd_kafka_producev(
			rk, RD_KAFKA_V_TOPIC(argv[2]), RD_KAFKA_V_KEY(line, klen),
			RD_KAFKA_V_VALUE(val, (size_t)(line + len - val)),
			RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_OPAQUE(&state),
			RD_KAFKA_V_END);
		if (e) {
			printf("error: %s\n", rd_kafka_err2str(e));
		} else {
			while (state == 0)
				rd_kafka_poll(rk, 1);
			if (state > 0)
				printf("ok\n");
			else
				printf("error: %s\n", rd_kafka_err2str((rd_kafka_resp_err_t)(-state - 1)));
		}
		if (e || state < 0)
			failed++;
		fflush(stdout);
	}
	free(line);
	rd_kafka_flush(rk, 5000);
	rd_kafka_destroy(rk);
	return failed ? 1 : 0;
}
