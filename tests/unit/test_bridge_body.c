/*
 * test_bridge_body.c — the bridge's body check (events/bridge_body.h):
 * a plain S3 event document, an AWS test event, SNS confirmations and
 * notifications (with a document, a test event, no Message), and bodies
 * that are neither. Prints "ok - ..." / "not ok - ..." lines.
 */
#include "events/bridge_body.h"
#include "tests/unit/unit.h"

#include <string.h>

#define REC "{\"Records\":[{\"eventName\":\"ObjectCreated:Put\",\"s3\":{\"bucket\":" \
	    "{\"name\":\"demo\"},\"object\":{\"key\":\"a/b\",\"size\":3}}}]}"

/* Check one body: the kind, *sns, the number of parts, and (if want_err)
 * that err contains it. */
static void body(const char *what, const char *b, int want, bool want_sns,
		 size_t want_n, const char *want_err)
{
	struct ev_part *parts = NULL;
	size_t n = 0;
	bool sns = true;
	char err[512] = "";
	int rc = bridge_body_check(b, strlen(b), &parts, &n, &sns, err, sizeof err);
	bool ok = rc == want && sns == want_sns && n == want_n &&
		  (!want_err || strstr(err, want_err));
	if (ok && want_n)
		ok = parts[0].key && strcmp(parts[0].key, "demo/a/b") == 0;
	CHECK(ok, "%s (rc %d sns %d n %zu err '%s')", what, rc, sns, n, err);
	if (rc == BRIDGE_BODY_RECORDS)
		ev_parts_free(parts, n);
}

int main(void)
{
	body("a document: its records", REC, BRIDGE_BODY_RECORDS, false, 1, NULL);
	body("empty Records: no parts", "{\"Records\":[]}", BRIDGE_BODY_RECORDS, false, 0, NULL);
	body("AWS test event", "{\"Service\":\"Amazon S3\",\"Event\":\"s3:TestEvent\"}",
	     BRIDGE_BODY_TEST, false, 0, "test event");
	body("SNS confirmation noted with its URL",
	     "{\"Type\":\"SubscriptionConfirmation\",\"TopicArn\":\"arn:t\","
	     "\"SubscribeURL\":\"https://x/confirm\"}",
	     BRIDGE_BODY_CONFIRM, false, 0, "SubscriptionConfirmation for arn:t "
	     "acknowledged; to confirm, GET https://x/confirm");
	body("SNS notification: the records of its Message",
	     "{\"Type\":\"Notification\",\"Message\":\"{\\\"Records\\\":[{\\\"eventName\\\":"
	     "\\\"ObjectCreated:Put\\\",\\\"s3\\\":{\\\"bucket\\\":{\\\"name\\\":\\\"demo\\\"},"
	     "\\\"object\\\":{\\\"key\\\":\\\"a/b\\\"}}}]}\"}",
	     BRIDGE_BODY_RECORDS, true, 1, NULL);
	body("SNS notification of a test event",
	     "{\"Type\":\"Notification\",\"Message\":\"{\\\"Event\\\":\\\"s3:TestEvent\\\"}\"}",
	     BRIDGE_BODY_TEST, true, 0, "test event");
	body("SNS notification whose Message is no document",
	     "{\"Type\":\"Notification\",\"Message\":\"hello\"}", BRIDGE_BODY_BAD, true, 0, NULL);
	body("SNS notification without Message", "{\"Type\":\"Notification\"}",
	     BRIDGE_BODY_BAD, false, 0, NULL);
	body("not JSON", "<html>", BRIDGE_BODY_BAD, false, 0, NULL);
	body("empty body", "", BRIDGE_BODY_BAD, false, 0, NULL);
	return unit_exit();
}
