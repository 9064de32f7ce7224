/* bridge_body.c — see bridge_body.h. */
#include "events/bridge_body.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An SNS envelope? BRIDGE_BODY_CONFIRM (err filled), BRIDGE_BODY_RECORDS
 * with *message (malloc'ed) for a Notification whose Message is a string,
 * BRIDGE_BODY_BAD when the body is not SNS, -ENOMEM. */
static int body_sns(const char *body, size_t len, char **message, char *err,
		    size_t errlen)
{
	cJSON *root = cJSON_ParseWithLength(body, len);
	const cJSON *type = cJSON_GetObjectItemCaseSensitive(root, "Type");
	int rc = BRIDGE_BODY_BAD;

	*message = NULL;
	if (!cJSON_IsString(type))
		goto out;
	if (strcmp(type->valuestring, "SubscriptionConfirmation") == 0 ||
	    strcmp(type->valuestring, "UnsubscribeConfirmation") == 0) {
		const cJSON *topic = cJSON_GetObjectItemCaseSensitive(root, "TopicArn");
		const cJSON *url = cJSON_GetObjectItemCaseSensitive(root, "SubscribeURL");

		snprintf(err, errlen, "SNS %s for %s acknowledged; to confirm, GET %s",
			 type->valuestring, cJSON_IsString(topic) ? topic->valuestring : "?",
			 cJSON_IsString(url) ? url->valuestring : "(no SubscribeURL)");
		rc = BRIDGE_BODY_CONFIRM;
	} else if (strcmp(type->valuestring, "Notification") == 0) {
		const cJSON *msg = cJSON_GetObjectItemCaseSensitive(root, "Message");

		if (cJSON_IsString(msg)) {
			*message = strdup(msg->valuestring);
			rc = *message ? BRIDGE_BODY_RECORDS : -ENOMEM;
		}
	}
out:
	cJSON_Delete(root);
	return rc;
}

/* record_split()'s answer as an enum bridge_body. */
static int body_split(const char *doc, size_t len, struct ev_part **parts,
		      size_t *n, char *err, size_t errlen)
{
	int rc = record_split(doc, len, parts, n, err, errlen);
	if (rc == -EINVAL)
		return strncmp(err, "test event", 10) == 0 ? BRIDGE_BODY_TEST : BRIDGE_BODY_BAD;
	return rc < 0 ? rc : BRIDGE_BODY_RECORDS;
}

int bridge_body_check(const char *body, size_t len, struct ev_part **parts,
		      size_t *n, bool *sns, char *err, size_t errlen)
{
	char why[512] = "";
	char *inner = NULL;

	*sns = false;
	int rc = body_split(body, len, parts, n, err, errlen);
	if (rc != BRIDGE_BODY_BAD)
		return rc;
	/* Keep record_split's reason: a body that is no SNS either is a bad
	 * event document first. */
	rc = body_sns(body, len, &inner, why, sizeof why);
	if (rc == BRIDGE_BODY_CONFIRM)
		snprintf(err, errlen, "%s", why);
	if (rc != BRIDGE_BODY_RECORDS)
		return rc;
	*sns = true;
	if (errlen)
		err[0] = '\0';
	rc = body_split(inner, strlen(inner), parts, n, err, errlen);
	free(inner);
	return rc;
}
