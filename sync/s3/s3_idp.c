/* s3_idp.c — see s3_idp.h. One curl easy handle per exchange: these run
 * at start and at each renewal, a few times an hour at most. Calls
 * s3_wire.c (XML, ISO times) only. */
#include "sync/s3/s3_idp.h"
#include "sync/s3/s3_int.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define IDP_BODY_MAX (64u * 1024)   /* an answer is a few hundred bytes */

static pthread_once_t idp_curl_once = PTHREAD_ONCE_INIT;

static void idp_curl_global(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

static void wipe_free(char *s)
{
	if (s)
		memset(s, 0, strlen(s));
	free(s);
}

void s3_idp_creds_release(struct s3_idp_creds *c)
{
	wipe_free(c->access_key);
	wipe_free(c->secret_key);
	wipe_free(c->token);
	c->access_key = c->secret_key = c->token = NULL;
}

struct body {
	char *p;
	size_t n;
	bool over;
};

static size_t body_sink(char *data, size_t size, size_t nmemb, void *ctx)
{
	struct body *b = ctx;
	size_t len = size * nmemb;
	if (b->n + len > IDP_BODY_MAX) {
		b->over = true;
		return 0;
	}
	char *p = realloc(b->p, b->n + len + 1);
	if (!p)
		return 0;
	memcpy(p + b->n, data, len);
	b->p = p;
	b->n += len;
	b->p[b->n] = '\0';
	return len;
}

static void body_free(struct body *b)
{
	if (b->p)
		memset(b->p, 0, b->n);
	free(b->p);
	b->p = NULL;
	b->n = 0;
}

/* One exchange: method ("GET" or "PUT"), url, up to two headers (NULL
 * ends), the body into *b. 0 with *status, or a negative errno with err. */
static int idp_call(const char *method, const char *url, const char *h1,
		    const char *h2, int timeout_ms, struct body *b, long *status,
		    char *err, size_t errlen)
{
	pthread_once(&idp_curl_once, idp_curl_global);
	CURL *e = curl_easy_init();
	if (!e) {
		snprintf(err, errlen, "%s: no curl handle", url);
		return -ENOMEM;
	}
	struct curl_slist *hs = NULL, *t;
	const char *hdrs[] = { h1, h2 };
	for (int i = 0; i < 2 && hdrs[i]; i++) {
		if (!(t = curl_slist_append(hs, hdrs[i]))) {
			curl_slist_free_all(hs);
			curl_easy_cleanup(e);
			return -ENOMEM;
		}
		hs = t;
	}
	*b = (struct body){ 0 };
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
	if (strcmp(method, "PUT") == 0) {
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, "");
		curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, 0L);
	}
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, hs);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, body_sink);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, b);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)timeout_ms);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	CURLcode cc = curl_easy_perform(e);
	*status = 0;
	curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, status);
	curl_slist_free_all(hs);
	curl_easy_cleanup(e);
	if (cc == CURLE_OK)
		return 0;
	body_free(b);
	int rc = cc == CURLE_OPERATION_TIMEDOUT ? -ETIMEDOUT :
		 cc == CURLE_COULDNT_CONNECT ? -ECONNREFUSED :
		 cc == CURLE_WRITE_ERROR ? -EPROTO : -EHOSTUNREACH;
	snprintf(err, errlen, "%s: %s", url,
		 cc == CURLE_WRITE_ERROR ? "answer too long" : curl_easy_strerror(cc));
	return rc;
}

/* The string value of "key" in a flat JSON object, unescaped (\" \\ \/
 * only: credentials hold no other escape), into a new string; NULL if
 * absent or not a string. */
static char *json_str(const char *body, size_t n, const char *key)
{
	size_t klen = strlen(key);
	for (const char *p = body; p + klen + 2 <= body + n; p++) {
		if (p[0] != '"' || strncmp(p + 1, key, klen) != 0 || p[klen + 1] != '"')
			continue;
		const char *q = p + klen + 2, *end = body + n;
		while (q < end && (*q == ' ' || *q == '\t' || *q == '\r' || *q == '\n'))
			q++;
		if (q >= end || *q++ != ':')
			continue;
		while (q < end && (*q == ' ' || *q == '\t' || *q == '\r' || *q == '\n'))
			q++;
		if (q >= end || *q++ != '"')
			return NULL;
		char *out = malloc((size_t)(end - q) + 1);
		size_t o = 0;
		if (!out)
			return NULL;
		for (; q < end && *q != '"'; q++) {
			if (*q == '\\' && q + 1 < end &&
			    (q[1] == '"' || q[1] == '\\' || q[1] == '/'))
				q++;
			out[o++] = *q;
		}
		out[o] = '\0';
		if (q >= end) {
			wipe_free(out);
			return NULL;
		}
		return out;
	}
	return NULL;
}

static int64_t expiry_of(const char *iso)
{
	int64_t ns = iso ? s3_time_iso(iso, strlen(iso)) : -1;
	return ns < 0 ? 0 : ns / 1000000000;
}

int s3_idp_parse_json(const char *body, size_t n, struct s3_idp_creds *out)
{
	struct s3_idp_creds c = { 0 };
	c.access_key = json_str(body, n, "AccessKeyId");
	c.secret_key = json_str(body, n, "SecretAccessKey");
	c.token = json_str(body, n, "Token");
	if (!c.token)
		c.token = json_str(body, n, "SessionToken");
	if (c.token && !*c.token) {
		free(c.token);
		c.token = NULL;
	}
	char *exp = json_str(body, n, "Expiration");
	c.expires = expiry_of(exp);
	free(exp);
	if (!c.access_key || !c.secret_key || !*c.access_key || !*c.secret_key) {
		s3_idp_creds_release(&c);
		return -EPROTO;
	}
	*out = c;
	return 0;
}

/* Credentials of a JSON answer that must be 200. */
static int json_answer(const char *what, long status, struct body *b,
		       struct s3_idp_creds *out, char *err, size_t errlen)
{
	int rc;
	if (status != 200) {
		snprintf(err, errlen, "%s: HTTP %ld", what, status);
		rc = status == 401 || status == 403 ? -EACCES : -EPROTO;
	} else if ((rc = s3_idp_parse_json(b->p ? b->p : "", b->n, out)) < 0) {
		snprintf(err, errlen, "%s: the answer holds no AccessKeyId and "
			 "SecretAccessKey", what);
	}
	body_free(b);
	return rc;
}

int s3_idp_imds(const char *endpoint, int timeout_ms, struct s3_idp_creds *out,
		char *err, size_t errlen)
{
	char url[1024], hdr[1200];
	struct body b;
	long status;
	snprintf(url, sizeof url, "%s/latest/api/token", endpoint);
	int rc = idp_call("PUT", url, "X-aws-ec2-metadata-token-ttl-seconds: 21600",
			  NULL, timeout_ms, &b, &status, err, errlen);
	if (rc < 0)
		return rc;
	if (status != 200 || !b.p || !b.n || b.n > 1000 || strpbrk(b.p, "\r\n")) {
		snprintf(err, errlen, "%s: HTTP %ld, no session token (IMDSv2)", url, status);
		body_free(&b);
		return status == 403 ? -EACCES : -EPROTO;
	}
	snprintf(hdr, sizeof hdr, "X-aws-ec2-metadata-token: %s", b.p);
	body_free(&b);
	snprintf(url, sizeof url, "%s/latest/meta-data/iam/security-credentials/", endpoint);
	rc = idp_call("GET", url, hdr, NULL, timeout_ms, &b, &status, err, errlen);
	if (rc == 0 && (status != 200 || !b.p || !b.n)) {
		snprintf(err, errlen, "%s: HTTP %ld: no instance role", url, status);
		rc = status == 404 ? -ENOENT : -EPROTO;
	}
	char role[128] = "";
	if (rc == 0) {
		size_t l = strcspn(b.p, "\r\n");
		if (l == 0 || l >= sizeof role || strchr(b.p, '/')) {
			snprintf(err, errlen, "%s: not a role name", url);
			rc = -EPROTO;
		} else {
			memcpy(role, b.p, l);
			role[l] = '\0';
		}
	}
	body_free(&b);
	if (rc < 0) {
		memset(hdr, 0, sizeof hdr);
		return rc;
	}
	snprintf(url, sizeof url, "%s/latest/meta-data/iam/security-credentials/%s",
		 endpoint, role);
	rc = idp_call("GET", url, hdr, NULL, timeout_ms, &b, &status, err, errlen);
	memset(hdr, 0, sizeof hdr);
	if (rc < 0)
		return rc;
	rc = json_answer(url, status, &b, out, err, errlen);
	if (rc == 0)
		snprintf(out->role, sizeof out->role, "%s", role);
	return rc;
}

int s3_idp_container(const char *url, const char *authorization, int timeout_ms,
		     struct s3_idp_creds *out, char *err, size_t errlen)
{
	char hdr[4200];
	if (authorization && (strpbrk(authorization, "\r\n") ||
			      strlen(authorization) > sizeof hdr - 32)) {
		snprintf(err, errlen, "%s: the authorization token is not one line "
			 "of at most 4 KiB", url);
		return -EINVAL;
	}
	if (authorization)
		snprintf(hdr, sizeof hdr, "Authorization: %s", authorization);
	struct body b;
	long status;
	int rc = idp_call("GET", url, authorization ? hdr : NULL, NULL, timeout_ms,
			  &b, &status, err, errlen);
	memset(hdr, 0, sizeof hdr);
	if (rc < 0)
		return rc;
	return json_answer(url, status, &b, out, err, errlen);
}

/* What s3_xml_find found, decoded, as a new string; NULL if absent. */
static char *xml_str(const char *xml, size_t n, const char *tag)
{
	const char *t;
	size_t tl;
	if (!s3_xml_find(xml, n, tag, &t, &tl))
		return NULL;
	char *out = malloc(tl + 1);
	if (out && s3_xml_decode(t, tl, out, tl + 1) < 0) {
		wipe_free(out);
		out = NULL;
	}
	return out;
}

int s3_idp_web_identity(const char *sts_endpoint, const char *role_arn,
			const char *session_name, const char *token, int timeout_ms,
			struct s3_idp_creds *out, char *err, size_t errlen)
{
	size_t tl = strlen(token), need = strlen(sts_endpoint) + 3 * (strlen(role_arn) +
		    strlen(session_name) + tl) + 200;
	char *url = malloc(need), *ea = malloc(3 * strlen(role_arn) + 1),
	     *es = malloc(3 * strlen(session_name) + 1), *et = malloc(3 * tl + 1);
	int rc = url && ea && es && et ? 0 : -ENOMEM;
	if (rc == 0 && (s3_url_encode(role_arn, false, ea, 3 * strlen(role_arn) + 1) < 0 ||
			s3_url_encode(session_name, false, es, 3 * strlen(session_name) + 1) < 0 ||
			s3_url_encode(token, false, et, 3 * tl + 1) < 0))
		rc = -EINVAL;
	if (rc == 0)
		snprintf(url, need, "%s/?Action=AssumeRoleWithWebIdentity&DurationSeconds=3600"
			 "&RoleArn=%s&RoleSessionName=%s&Version=2011-06-15&WebIdentityToken=%s",
			 sts_endpoint, ea, es, et);
	free(ea);
	free(es);
	if (et)
		memset(et, 0, strlen(et));
	free(et);
	struct body b = { 0 };
	long status = 0;
	char what[600];
	snprintf(what, sizeof what, "%s AssumeRoleWithWebIdentity (%s)", sts_endpoint,
		 role_arn);
	if (rc == 0) {
		rc = idp_call("GET", url, "Accept: application/xml", NULL, timeout_ms,
			      &b, &status, err, errlen);
		if (rc < 0)           /* the URL holds the token: name the endpoint */
			snprintf(err, errlen, "%s: %s", what,
				 rc == -ETIMEDOUT ? "no answer in time" : "no answer");
	} else {
		snprintf(err, errlen, "%s: %s", what, strerror(-rc));
	}
	if (url)
		memset(url, 0, strlen(url));
	free(url);
	if (rc < 0)
		return rc;
	if (status != 200) {
		const char *code;
		size_t cl = 0;
		bool has = b.p && s3_xml_find(b.p, b.n, "Code", &code, &cl) && cl < 100;
		snprintf(err, errlen, "%s: HTTP %ld%s%.*s", what, status, has ? " " : "",
			 has ? (int)cl : 0, has ? code : "");
		body_free(&b);
		return status == 401 || status == 403 ? -EACCES : -EPROTO;
	}
	struct s3_idp_creds c = { 0 };
	const char *p = b.p ? b.p : "";
	c.access_key = xml_str(p, b.n, "AccessKeyId");
	c.secret_key = xml_str(p, b.n, "SecretAccessKey");
	c.token = xml_str(p, b.n, "SessionToken");
	char *exp = xml_str(p, b.n, "Expiration");
	c.expires = expiry_of(exp);
	free(exp);
	body_free(&b);
	if (!c.access_key || !c.secret_key || !*c.access_key || !*c.secret_key) {
		s3_idp_creds_release(&c);
		snprintf(err, errlen, "%s: the answer holds no AccessKeyId and "
			 "SecretAccessKey", what);
		return -EPROTO;
	}
	*out = c;
	return 0;
}
