/*
 * test_bridge_body.c — the bridge's body check (events/bridge_body.h):
 * a plain S3 event document, an AWS test event, SNS confirmations and
 * notifications (with a document, a test event, no Message), and bodies
 * that are neither; an SNS confirmation's fields, and which confirmation
 * URLs the bridge may GET. Prints "ok - ..." / "not ok - ..." lines.
 */
#include "events/bridge_body.h"
#include "tests/unit/unit.h"

#include <errno.h>
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

static void sns(void)
{
	struct bridge_sns c;
	const char *conf = "{\"Type\":\"SubscriptionConfirmation\",\"TopicArn\":"
			   "\"arn:aws:sns:eu-west-1:1:t\",\"SubscribeURL\":"
			   "\"https://sns.eu-west-1.amazonaws.com/?Action=ConfirmSubscription\"}";
	CHECK(bridge_sns_parse(conf, strlen(conf), &c) == 0 && c.subscribe &&
	      !strcmp(c.topic, "arn:aws:sns:eu-west-1:1:t") &&
	      !strcmp(c.url, "https://sns.eu-west-1.amazonaws.com/?Action=ConfirmSubscription"),
	      "sns: a SubscriptionConfirmation's topic and URL");
	const char *unsub = "{\"Type\":\"UnsubscribeConfirmation\",\"TopicArn\":\"arn:t\","
			    "\"SubscribeURL\":\"https://x/\"}";
	CHECK(bridge_sns_parse(unsub, strlen(unsub), &c) == 0 && !c.subscribe,
	      "sns: an UnsubscribeConfirmation is no subscription");
	const char *nourl = "{\"Type\":\"SubscriptionConfirmation\",\"TopicArn\":\"arn:t\"}";
	CHECK(bridge_sns_parse(nourl, strlen(nourl), &c) == -EINVAL,
	      "sns: a confirmation without SubscribeURL is refused");
	const char *notif = "{\"Type\":\"Notification\",\"TopicArn\":\"arn:t\","
			    "\"SubscribeURL\":\"https://x/\"}";
	CHECK(bridge_sns_parse(notif, strlen(notif), &c) == -EINVAL,
	      "sns: a Notification is no confirmation");
	struct { const char *url, *prefix; bool ok; } u[] = {
		{ "https://sns.eu-west-1.amazonaws.com/?Action=X", NULL, true },
		{ "https://sns.cn-north-1.amazonaws.com.cn/?Action=X", NULL, true },
		{ "https://sns.eu-west-1.amazonaws.com", NULL, true },
		{ "http://sns.eu-west-1.amazonaws.com/", NULL, false },
		{ "https://sns.eu-west-1.amazonaws.com.evil.example/", NULL, false },
		{ "https://sns.eu-west-1.amazonaws.com:444/", NULL, false },
		{ "https://user@sns.eu-west-1.amazonaws.com/", NULL, false },
		{ "https://evil.example/sns.x.amazonaws.com/", NULL, false },
		{ "https://sqs.eu-west-1.amazonaws.com/", NULL, false },
		{ "http://127.0.0.1:9/confirm", "http://127.0.0.1:9/", true },
		{ "http://127.0.0.2:9/confirm", "http://127.0.0.1:9/", false },
	};
	for (size_t i = 0; i < sizeof u / sizeof u[0]; i++)
		CHECK(bridge_sns_url_ok(u[i].url, u[i].prefix) == u[i].ok,
		      "sns: %s %s%s%s", u[i].url, u[i].ok ? "may be confirmed" : "is refused",
		      u[i].prefix ? " with the prefix " : "", u[i].prefix ? u[i].prefix : "");
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
	sns();
	return unit_exit();
}
