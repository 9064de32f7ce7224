/*
 * bridge_sns.c — facetfs-bridge's confirmation of an AWS SNS subscription
 * (bridge_int.h): one GET of the SubscribeURL SNS sent, which the caller
 * has checked (a topic named by --sns-topic, a URL of AWS's SNS hosts or
 * of --sns-url-prefix).
 */
#include "events/bridge_int.h"
#include "events/bridge_body.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#define SNS_ANSWER_MAX (64 * 1024)

/* The answer is read and dropped (SNS's XML says the subscription ARN,
 * which the log does not need), up to SNS_ANSWER_MAX. */
static size_t sns_sink(char *p, size_t sz, size_t nm, void *ud)
{
	size_t *seen = ud;
	(void)p;
	*seen += sz * nm;
	return *seen > SNS_ANSWER_MAX ? 0 : sz * nm;
}

int bridge_sns_init(void)
{
	return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -EIO;
}

int bridge_sns_confirm(const struct bridge_sns *c, char *why, size_t whylen)
{
	CURL *h = curl_easy_init();
	size_t seen = 0;
	long status = 0;
	char errbuf[CURL_ERROR_SIZE] = "";

	if (!h) {
		snprintf(why, whylen, "out of memory");
		return -EIO;
	}
	curl_easy_setopt(h, CURLOPT_URL, c->url);
	curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
	curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 10000L);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sns_sink);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &seen);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
	CURLcode cc = curl_easy_perform(h);
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_cleanup(h);
	if (cc == CURLE_OK && status >= 200 && status < 300)
		return 0;
	if (cc != CURLE_OK)
		snprintf(why, whylen, "%s", errbuf[0] ? errbuf : curl_easy_strerror(cc));
	else
		snprintf(why, whylen, "HTTP %ld", status);
	return -EIO;
}
