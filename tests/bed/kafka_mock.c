/*
 * kafka-mock — a Kafka stand-in for the test bed, on librdkafka's mock cluster.
 *
 * Usage: kafka-mock [--topic T]... [--partitions N] [--brokers N]
 *                   [--bootstrap-file F]
 *
 * Creates one mock cluster (listening on 127.0.0.1, random ports), creates
 * each topic given (default "s3events") with N partitions (default 4), then
 * prints the bootstrap list "HOST:PORT,..." on stdout and, if asked, writes
 * it to F (atomically: written to F.tmp, then renamed, so a reader that sees
 * F sees it whole). Runs until SIGTERM or SIGINT, then exits 0.
 *
 * Threads: main only waits for a signal (sigwait); the cluster runs on
 * librdkafka's own threads, which inherit the blocked signal mask.
 * No persistence: topics, messages and offsets die with the process.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#define MOCK_MAX_TOPICS 32

struct mock_opts {
	const char *topics[MOCK_MAX_TOPICS];
	int n_topics;
	int partitions;
	int brokers;
	const char *bootstrap_file;
};

static void mock_usage(FILE *f)
{
	fprintf(f, "usage: kafka-mock [--topic T]... [--partitions N] "
		   "[--brokers N] [--bootstrap-file F]\n");
}

static int mock_parse_int(const char *s, int lo, int hi, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *s == '\0' || *end != '\0' || v < lo || v > hi)
		return -EINVAL;
	*out = (int)v;
	return 0;
}

static int mock_opts_parse(int argc, char **argv, struct mock_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->partitions = 4;
	o->brokers = 1;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			mock_usage(stdout);
			exit(0);
		}
		if (!v) {
			fprintf(stderr, "kafka-mock: %s needs a value\n", a);
			return -EINVAL;
		}
		i++;
		if (strcmp(a, "--topic") == 0) {
			if (o->n_topics == MOCK_MAX_TOPICS || *v == '\0') {
				fprintf(stderr, "kafka-mock: bad or too many topics\n");
				return -EINVAL;
			}
			o->topics[o->n_topics++] = v;
		} else if (strcmp(a, "--partitions") == 0) {
			if (mock_parse_int(v, 1, 1000, &o->partitions) < 0) {
				fprintf(stderr, "kafka-mock: bad --partitions %s\n", v);
				return -EINVAL;
			}
		} else if (strcmp(a, "--brokers") == 0) {
			if (mock_parse_int(v, 1, 16, &o->brokers) < 0) {
				fprintf(stderr, "kafka-mock: bad --brokers %s\n", v);
				return -EINVAL;
			}
		} else if (strcmp(a, "--bootstrap-file") == 0) {
			o->bootstrap_file = v;
		} else {
			fprintf(stderr, "kafka-mock: unknown option %s\n", a);
			return -EINVAL;
		}
	}
	if (o->n_topics == 0)
		o->topics[o->n_topics++] = "s3events";
	return 0;
}

static int mock_bootstrap_write(const char *path, const char *bootstraps)
{
	char tmp[4096];
	FILE *f;
	int rc = 0;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	f = fopen(tmp, "w");
	if (!f)
		return -errno;
	if (fprintf(f, "%s\n", bootstraps) < 0)
		rc = -EIO;
	if (fclose(f) != 0 && rc == 0)
		rc = -errno;
	if (rc == 0 && rename(tmp, path) != 0)
		rc = -errno;
	if (rc < 0)
		unlink(tmp);
	return rc;
}

int main(int argc, char **argv)
{
	struct mock_opts o;
	rd_kafka_conf_t *conf = NULL;
	rd_kafka_t *rk = NULL;
	rd_kafka_mock_cluster_t *mc = NULL;
	char errstr[512];
	sigset_t sigs;
	int sig, rc = 1;

	if (mock_opts_parse(argc, argv, &o) < 0) {
		mock_usage(stderr);
		return 2;
	}

	/* Block before librdkafka starts threads so they all inherit it. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);

	conf = rd_kafka_conf_new();
	if (rd_kafka_conf_set(conf, "log_level", "3", errstr, sizeof(errstr)) !=
	    RD_KAFKA_CONF_OK) {
		fprintf(stderr, "kafka-mock: %s\n", errstr);
		goto cleanup;
	}
	rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
	if (!rk) {
		fprintf(stderr, "kafka-mock: rd_kafka_new: %s\n", errstr);
		goto cleanup;
	}
	conf = NULL; /* rd_kafka_new() took ownership */

	mc = rd_kafka_mock_cluster_new(rk, o.brokers);
	if (!mc) {
		fprintf(stderr, "kafka-mock: cannot create the mock cluster\n");
		goto cleanup;
	}
	for (int i = 0; i < o.n_topics; i++) {
		rd_kafka_resp_err_t err = rd_kafka_mock_topic_create(
			mc, o.topics[i], o.partitions, 1);
		if (err) {
			fprintf(stderr, "kafka-mock: topic %s: %s\n", o.topics[i],
				rd_kafka_err2str(err));
			goto cleanup;
		}
	}

	const char *bootstraps = rd_kafka_mock_cluster_bootstraps(mc);
	if (o.bootstrap_file) {
		int err = mock_bootstrap_write(o.bootstrap_file, bootstraps);
		if (err < 0) {
			fprintf(stderr, "kafka-mock: %s: %s\n", o.bootstrap_file,
				strerror(-err));
			goto cleanup;
		}
	}
	printf("%s\n", bootstraps);
	fflush(stdout);

	if (sigwait(&sigs, &sig) != 0) {
		fprintf(stderr, "kafka-mock: sigwait failed\n");
		goto cleanup;
	}
	rc = 0;

cleanup:
	if (mc)
		rd_kafka_mock_cluster_destroy(mc);
	if (rk)
		rd_kafka_destroy(rk);
	if (conf)
		rd_kafka_conf_destroy(conf);
	if (o.bootstrap_file && rc == 0)
		unlink(o.bootstrap_file);
	return rc;
}
