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

int bridge_sns_parse(const char *body, size_t len, struct bridge_sns *out)
{
	cJSON *root = cJSON_ParseWithLength(body, len);
	const cJSON *type = cJSON_GetObjectItemCaseSensitive(root, "Type");
	const cJSON *topic = cJSON_GetObjectItemCaseSensitive(root, "TopicArn");
	const cJSON *url = cJSON_GetObjectItemCaseSensitive(root, "SubscribeURL");
	int rc = -EINVAL;

	memset(out, 0, sizeof *out);
	if (cJSON_IsString(type) && cJSON_IsString(topic) && cJSON_IsString(url) &&
	    strlen(topic->valuestring) < sizeof out->topic &&
	    strlen(url->valuestring) < sizeof out->url &&
	    (strcmp(type->valuestring, "SubscriptionConfirmation") == 0 ||
	     strcmp(type->valuestring, "UnsubscribeConfirmation") == 0)) {
		out->subscribe = type->valuestring[0] == 'S';
		snprintf(out->topic, sizeof out->topic, "%s", topic->valuestring);
		snprintf(out->url, sizeof out->url, "%s", url->valuestring);
		rc = 0;
	}
	cJSON_Delete(root);
	return rc;
}

static bool ends_with(const char *s, size_t n, const char *tail)
{
	size_t t = strlen(tail);
	return n >= t && memcmp(s + n - t, tail, t) == 0;
}

bool bridge_sns_url_ok(const char *url, const char *prefix)
{
	if (prefix)
		return strncmp(url, prefix, strlen(prefix)) == 0;
	static const char scheme[] = "https://sns.";
	if (strncmp(url, scheme, sizeof scheme - 1) != 0)
		return false;
	const char *host = url + strlen("https://");
	size_t n = strcspn(host, "/?#:@");
	if (host[n] != '/' && host[n] != '\0')
		return false;            /* no user@, no port */
	for (size_t i = 0; i < n; i++)
		if (!((host[i] >= 'a' && host[i] <= 'z') || (host[i] >= '0' && host[i] <= '9') ||
		      host[i] == '-' || host[i] == '.'))
			return false;
	return ends_with(host, n, ".amazonaws.com") || ends_with(host, n, ".amazonaws.com.cn");
}
