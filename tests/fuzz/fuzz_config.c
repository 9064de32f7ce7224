/*
 * fuzz_config.c — the gateway configuration loader (gateway/config.h,
 * config_parse(): what config_load() does after reading the file) on any
 * bytes, as a user may type them: 0 with every required string set, or
 * -EINVAL with a terminated "f.json: PATH: reason" text and the struct
 * released; numbers are range-checked before conversion (UBSan reports a
 * float-to-integer overflow otherwise).
 */
#include "gateway/config.h"
#include "tests/fuzz/fuzz.h"

#include <errno.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct config c;
	char err[1024];
	int rc = config_parse("f.json", (const char *)data, size, &c, err, sizeof err);
	FUZZ_CHECK(rc == 0 || rc == -EINVAL || rc == -ENOMEM, "rc %d", rc);
	FUZZ_CHECK(memchr(err, '\0', sizeof err), "error text not terminated");
	if (rc < 0) {
		FUZZ_CHECK(rc != -EINVAL || strncmp(err, "f.json: ", 8) == 0,
			   "error without the file name: '%s'", err);
		FUZZ_CHECK(!c.s3_endpoint && !c.kafka_brokers && !c.kafka_options,
			   "a failed load kept strings");
		return 0;
	}
	FUZZ_CHECK(c.s3_endpoint && *c.s3_endpoint && c.s3_region &&
		   c.kafka_brokers && c.kafka_topic && c.kafka_group && c.state_dir &&
		   c.views_dir && c.cache_dir, "a loaded config misses a string");
	/* Credentials may be elsewhere (gateway/creds.h), but never half. */
	FUZZ_CHECK(!c.s3_access_key == !c.s3_secret_key, "half a key pair");
	FUZZ_CHECK(!c.s3_session_token || c.s3_access_key, "a token without keys");
	FUZZ_CHECK(c.n_kafka_options % 2 == 0, "odd kafka options");
	for (size_t i = 0; i < c.n_kafka_options; i++)
		FUZZ_CHECK(c.kafka_options[i], "kafka option %zu is NULL", i);
	FUZZ_CHECK(c.rescan_interval_s <= 10000000, "rescan_interval_s %u", c.rescan_interval_s);
	config_release(&c);
	return 0;
}
