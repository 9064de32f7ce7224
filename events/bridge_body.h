/*
 * bridge_body.h — what a body POSTed to facetfs-bridge is, and its records.
 *
 * The bridge accepts an S3 event document (record.h, either shape), or an
 * AWS SNS envelope: a Notification whose Message is such a document, or a
 * (Un)SubscriptionConfirmation, which is only noted. bridge_body_check()
 * decides which, and splits the document into one part per record.
 * Pure: no I/O, no logging (the caller logs with the peer's address), any
 * thread, the caller's buffer (no NUL needed). The caller owns *parts and
 * frees them with ev_parts_free(). Fuzzed by tests/fuzz/fuzz_bridge_body.c.
 *
 * Tests: test_bridge_body.c, tests/fuzz/fuzz_bridge_body.c; t_bridge.sh.
 */
#ifndef FACETFS_BRIDGE_BODY_H
#define FACETFS_BRIDGE_BODY_H

#include <stdbool.h>
#include <stddef.h>

#include "events/record.h"

enum bridge_body {
	BRIDGE_BODY_RECORDS,  /* *parts[0..*n) to produce (*n may be 0) */
	BRIDGE_BODY_TEST,     /* an AWS test event: err says so; answer 200 */
	BRIDGE_BODY_CONFIRM,  /* SNS confirmation: err has topic and URL; 200 */
	BRIDGE_BODY_BAD,      /* not an event document: err says why; 400 */
};

/* Classify and split body[0..len). Returns an enum bridge_body, or -ENOMEM.
 * *sns tells whether the document came inside an SNS Notification. *parts
 * and *n are set (non-empty) only for BRIDGE_BODY_RECORDS. */
int bridge_body_check(const char *body, size_t len, struct ev_part **parts,
		      size_t *n, bool *sns, char *err, size_t errlen);

/* An SNS (Un)SubscriptionConfirmation's fields (BRIDGE_BODY_CONFIRM). */
struct bridge_sns {
	bool subscribe;               /* SubscriptionConfirmation */
	char topic[256];              /* TopicArn */
	char url[2048];               /* SubscribeURL */
};
/* Parse body[0..len) as one: 0, or -EINVAL when it is not one or a field
 * is missing or too long. */
int bridge_sns_parse(const char *body, size_t len, struct bridge_sns *out);
/* Is url a confirmation URL the bridge may GET: one starting with prefix,
 * or with no prefix, https://sns.REGION.amazonaws.com[.cn]/...? */
bool bridge_sns_url_ok(const char *url, const char *prefix);

#endif
