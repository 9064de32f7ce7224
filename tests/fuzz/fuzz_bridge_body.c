/*
 * fuzz_bridge_body.c — the bridge's check of a POSTed body
 * (events/bridge_body.h) on any bytes, as any HTTP client may send them:
 * the kind is one of the four or -ENOMEM, parts only come with RECORDS,
 * each part is a NUL-free JSON text of its stated length, and the reason
 * of a refusal or a confirmation is a terminated string. An SNS
 * confirmation's parse gives terminated fields, and an URL the bridge
 * accepts as SNS's begins with https://sns.
 */
#include "events/bridge_body.h"
#include "tests/fuzz/fuzz.h"

#include <errno.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ev_part *parts = NULL;
	size_t n = 0;
	bool sns = false;
	char err[512];
	memset(err, 'x', sizeof err);
	int rc = bridge_body_check((const char *)data, size, &parts, &n, &sns, err, sizeof err);
	FUZZ_CHECK(rc == BRIDGE_BODY_RECORDS || rc == BRIDGE_BODY_TEST ||
		   rc == BRIDGE_BODY_CONFIRM || rc == BRIDGE_BODY_BAD || rc == -ENOMEM,
		   "kind %d", rc);
	FUZZ_CHECK(rc == BRIDGE_BODY_RECORDS || (parts == NULL && n == 0),
		   "parts with kind %d", rc);
	FUZZ_CHECK(rc == BRIDGE_BODY_RECORDS || memchr(err, '\0', sizeof err),
		   "reason not terminated (kind %d)", rc);
	FUZZ_CHECK(rc != BRIDGE_BODY_CONFIRM || strncmp(err, "SNS ", 4) == 0,
		   "confirmation without its note: '%s'", err);
	for (size_t i = 0; i < n; i++) {
		FUZZ_CHECK(parts[i].json && strlen(parts[i].json) == parts[i].json_len,
			   "part %zu: json_len", i);
		FUZZ_CHECK(!parts[i].key || parts[i].key[0], "part %zu: empty key", i);
	}
	if (rc == BRIDGE_BODY_RECORDS)
		ev_parts_free(parts, n);
	struct bridge_sns c;
	if (bridge_sns_parse((const char *)data, size, &c) == 0) {
		FUZZ_CHECK(memchr(c.topic, '\0', sizeof c.topic) && memchr(c.url, '\0', sizeof c.url),
			   "confirmation fields not terminated");
		FUZZ_CHECK(!bridge_sns_url_ok(c.url, NULL) || strncmp(c.url, "https://sns.", 12) == 0,
			   "URL accepted as SNS's: '%s'", c.url);
	}
	return 0;
}
