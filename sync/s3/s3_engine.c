/*
 * s3_engine.c — the request engine of the S3 client (s3_req.h): one
 * request sent, with its attempts, retries and the one log line of its
 * failure.
 *
 * DESIGN. Every operation fills a struct s3_req (method, URL parts, extra
 * headers, where the body goes or comes from) and hands it to s3_req_run(),
 * which does the attempts: borrow a curl handle from the pool (s3_pool.c),
 * set it up with the callbacks of s3_callbacks.c, perform, return the
 * handle, classify the outcome (s3_retryable(), s3_errno_map() in
 * s3_wire.c), and sleep with jittered exponential backoff before the next
 * attempt. Attempts stop after S3_TRIES or when the next sleep would pass
 * S3_RETRY_BUDGET_MS since the first attempt, or since the last stall (a
 * request sent and then no byte for stall_s seconds). The final failure is
 * logged once, here, with method, bucket, key and HTTP status.
 *
 * Each attempt is signed afresh (SigV4, s3_sign.c) with the credentials
 * of the moment (s3_creds.c) over every header we add plus Host and
 * x-amz-date; the payload is never hashed (x-amz-content-sha256:
 * UNSIGNED-PAYLOAD). A 403 that refuses the credentials renews them once
 * (s3_cred_renew) and sends the request again.
 */
#include "sync/s3/s3_int.h"
#include "sync/s3/s3_req.h"

#include <curl/curl.h>
#include <errno.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/lock.h"
#include "common/log.h"

/* Bodies this large wait for "100 Continue" (req_signed_headers). */
#define S3_EXPECT_MIN (1u << 20)

/* May bucket be addressed as a host name (virtual-hosted style)? Lower-
 * case letters, digits and '-', 3 to 63 of them, not at the ends ('.'
 * would break TLS certificates of the form *.host). */
static bool bucket_dns_ok(const char *b)
{
	size_t n = strlen(b);
	if (n < 3 || n > 63 || b[0] == '-' || b[n - 1] == '-')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((b[i] >= 'a' && b[i] <= 'z') || (b[i] >= '0' && b[i] <= '9') ||
		      b[i] == '-'))
			return false;
	return true;
}

/* "BASE/bucket/key?query" with bucket and key encoded, or with
 * virtual_host "SCHEME://bucket.HOST/key?query"; *path points at the
 * "/bucket/key" (or "/key") part inside it (what is signed), *host at a
 * malloc'ed "Host: ..." line for it (the caller frees both). */
static char *req_url(const struct s3_http *s, const struct s3_req *r, size_t *path,
		     char **host)
{
	size_t kl = r->key ? strlen(r->key) : 0, bl = strlen(r->bucket);
	size_t cap = strlen(s->base) + 3 * (bl + kl) + 16 +
		     (r->query ? strlen(r->query) : 0);
	bool vh = s->vhost && bucket_dns_ok(r->bucket);
	char *u = malloc(cap);
	*host = NULL;
	if (!u)
		return NULL;
	size_t o;
	if (vh) {
		size_t sl = (size_t)(strstr(s->base, "://") - s->base) + 3;
		o = (size_t)snprintf(u, cap, "%.*s%s.%s", (int)sl, s->base, r->bucket,
				     s->hostport);
		*path = o;
		u[o++] = '/';
		if (asprintf(host, "Host: %s.%s", r->bucket, s->hostport) < 0) {
			*host = NULL;
			goto fail;
		}
	} else {
		*path = strlen(s->base);
		o = (size_t)snprintf(u, cap, "%s/", s->base);
		int k = s3_url_encode(r->bucket, false, u + o, cap - o);
		if (k < 0 || !(*host = strdup(s->host)))
			goto fail;
		o += (size_t)k;
		if (r->key)
			u[o++] = '/';
	}
	if (r->key) {
		int k = s3_url_encode(r->key, true, u + o, cap - o);
		if (k < 0)
			goto fail;
		o += (size_t)k;
	}
	u[o] = '\0';
	if (r->query)
		snprintf(u + o, cap - o, "?%s", r->query);
	return u;
fail:
	free(*host);
	*host = NULL;
	free(u);
	return NULL;
}

static CURLcode req_setup(const struct s3_http *s, CURL *h, struct s3_req *r,
			  const char *url,
			  struct curl_slist *hdrs, char *errbuf)
{
	CURLcode c = CURLE_OK;
#define SET(opt, val) do { if (!c) c = curl_easy_setopt(h, opt, val); } while (0)
	SET(CURLOPT_URL, url);
	SET(CURLOPT_PATH_AS_IS, 1L);         /* keys may hold "./" or "../" */
	SET(CURLOPT_NOSIGNAL, 1L);
	SET(CURLOPT_TCP_NODELAY, 1L);
	SET(CURLOPT_TCP_KEEPALIVE, 1L);
	if (s->connect_to)
		SET(CURLOPT_CONNECT_TO, s->connect_to);
	if (s->ca_file)
		SET(CURLOPT_CAINFO, s->ca_file);
	if (s->insecure) {
		SET(CURLOPT_SSL_VERIFYPEER, 0L);
		SET(CURLOPT_SSL_VERIFYHOST, 0L);
	}
	SET(CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	SET(CURLOPT_CONNECTTIMEOUT_MS, (long)S3_CONNECT_MS);
	SET(CURLOPT_LOW_SPEED_LIMIT, 1L);
	SET(CURLOPT_LOW_SPEED_TIME, r->stall_s);
	if (r->timeout_ms)
		SET(CURLOPT_TIMEOUT_MS, r->timeout_ms);
	SET(CURLOPT_HTTPHEADER, hdrs);
	SET(CURLOPT_ERRORBUFFER, errbuf);
	if (r->cancel) {
		SET(CURLOPT_NOPROGRESS, 0L);
		SET(CURLOPT_XFERINFOFUNCTION, s3_cb_progress);
		SET(CURLOPT_XFERINFODATA, (void *)r->cancel);
	}
	SET(CURLOPT_HEADERFUNCTION, s3_cb_header);
	SET(CURLOPT_HEADERDATA, r);
	SET(CURLOPT_WRITEFUNCTION, s3_cb_write);
	SET(CURLOPT_WRITEDATA, r);
	if ((r->sink == SINK_BUF || r->sink == SINK_FN) && r->len >= (256u << 10))
		SET(CURLOPT_BUFFERSIZE, 512L << 10);
	if (r->head)
		SET(CURLOPT_NOBODY, 1L);
	if (r->del)
		SET(CURLOPT_CUSTOMREQUEST, "DELETE");
	if (r->post) {
		SET(CURLOPT_POST, 1L);
		SET(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->up_size);
		SET(CURLOPT_READFUNCTION, s3_cb_read);
		SET(CURLOPT_READDATA, r);
		SET(CURLOPT_EXPECT_100_TIMEOUT_MS, 300L);
	}
	if (r->upload) {
		SET(CURLOPT_UPLOAD, 1L);
		SET(CURLOPT_INFILESIZE_LARGE, (curl_off_t)r->up_size);
		SET(CURLOPT_READFUNCTION, s3_cb_read);
		SET(CURLOPT_READDATA, r);
		SET(CURLOPT_EXPECT_100_TIMEOUT_MS, 300L);
		if (r->up_size >= (256u << 10))
			SET(CURLOPT_UPLOAD_BUFFERSIZE, 512L << 10);
	}
#undef SET
	return c;
}

static int req_attempt_reset(struct s3_req *r)
{
	req_answer_reset(r);
	r->status = 0;
	r->cb_err = 0;
	r->up_pos = 0;
	r->s3code[0] = '\0';
	if (r->md5 && EVP_DigestInit_ex(r->md5, EVP_md5(), NULL) != 1)
		return -EIO;
	return 0;
}

static int64_t s3_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The headers of one attempt: r->hdrs, Host, x-amz-date and the SigV4
 * Authorization over all of them. NULL on failure (logged). */
static struct curl_slist *req_signed_headers(const struct s3_http *s,
					     const struct s3_cred *cred,
					     const struct s3_req *r,
					     const char *path, const char *host)
{
	char date[40], amzdate[17], auth[1024];
	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(amzdate, sizeof amzdate, "%Y%m%dT%H%M%SZ", &tm);
	snprintf(date, sizeof date, "x-amz-date: %s", amzdate);

	size_t n = cred->token_line ? 3 : 2;
	for (const struct curl_slist *l = r->hdrs; l; l = l->next)
		n++;
	const char **lines = malloc(n * sizeof *lines);
	struct curl_slist *out = NULL;
	if (!lines)
		return NULL;
	size_t i = 0;
	lines[i++] = host;
	lines[i++] = date;
	if (cred->token_line)
		lines[i++] = cred->token_line;
	for (const struct curl_slist *l = r->hdrs; l; l = l->next)
		lines[i++] = l->data;
	int err = s3_sign_v4(r->verb, path, r->query ? r->query : "", lines, n,
			     amzdate, s->region, cred->access_key,
			     cred->secret_key, auth, sizeof auth - 16);
	if (err) {
		log_error("s3: %s %s%s%s: cannot sign: %s", r->method, r->bucket,
			  r->key ? "/" : "", r->key ? r->key : "", strerror(-err));
		free(lines);
		return NULL;
	}
	char authline[1040];
	snprintf(authline, sizeof authline, "Authorization: %s", auth);
	for (i = 0; i < n + 1; i++) {
		struct curl_slist *l = curl_slist_append(out, i < n ? lines[i] : authline);
		if (!l) {
			curl_slist_free_all(out);
			out = NULL;
			break;
		}
		out = l;
	}
	free(lines);
	/* curl asks a body's PUT or POST to wait for "100 Continue" first: a
	 * round trip, and for RGW a wake-up, per request. Worth it only where
	 * a refusal saves sending much (parts); a small body goes at once.
	 * (Not signed: an empty header is one curl does not send.) */
	if (out && (r->upload || r->post) && r->up_size < S3_EXPECT_MIN) {
		struct curl_slist *l = curl_slist_append(out, "Expect:");
		if (!l) {
			curl_slist_free_all(out);
			return NULL;
		}
		out = l;
	}
	return out;
}

/* Sleep ms before the next attempt, in steps of at most 100 ms when a
 * cancel flag is watched (the next attempt then sees it set). */
static void req_pause(const struct s3_req *r, unsigned ms)
{
	while (ms && !(r->cancel && atomic_load(r->cancel))) {
		unsigned step = r->cancel && ms > 100 ? 100 : ms;
		struct timespec ts = { step / 1000, (long)(step % 1000) * 1000000 };
		while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
			;
		ms -= step;
	}
}

/* Perform r with retries; 0 or -errno (already logged; a missing key or a
 * failed If-Match only as a debug line: callers expect those). */
int s3_req_run(struct s3_http *s, struct s3_req *r)
{
	lock_assert_none("s3_req_run");
	char errbuf[CURL_ERROR_SIZE];
	size_t path_at = 0;
	char *hostline = NULL;
	char *url = req_url(s, r, &path_at, &hostline);
	if (!url) {
		log_error("s3: %s %s%s%s: key too long or out of memory",
			  r->method, r->bucket, r->key ? "/" : "", r->key ? r->key : "");
		return -ENAMETOOLONG;
	}
	if (!r->stall_s)
		r->stall_s = s->stall_s;
	r->cancel = s3_cancel_flag();
	struct timespec t_begin;     /* the latency's start, to the µs */
	clock_gettime(CLOCK_MONOTONIC, &t_begin);
	int64_t t0 = (int64_t)t_begin.tv_sec * 1000 + t_begin.tv_nsec / 1000000;
	uint64_t rng = (uint64_t)t0 * 0x9E3779B97F4A7C15ull ^ (uintptr_t)r;
	int err = 0, attempt;
	bool refreshed = false;
	CURLcode cc = CURLE_OK;
	for (attempt = 0;; attempt++) {
		errbuf[0] = '\0';
		if (r->cancel && atomic_load(r->cancel)) {
			err = -ECANCELED;    /* not sent (again) */
			cc = CURLE_OK;
			break;
		}
		err = req_attempt_reset(r);
		if (err)
			break;
		r->tries++;
		/* The path ends where the query begins: sign it alone. */
		char *q = strchr(url + path_at, '?');
		if (q)
			*q = '\0';
		struct s3_cred *cred = s3_cred_get(s);
		uint64_t signed_gen = cred->gen;
		struct curl_slist *hdrs = req_signed_headers(s, cred, r, url + path_at,
							     hostline);
		s3_cred_put(cred);   /* the headers hold copies */
		if (q)
			*q = '?';
		CURL *h = hdrs ? s3_pool_get(s) : NULL;
		if (!h) {
			curl_slist_free_all(hdrs);
			err = -ENOMEM;
			break;
		}
		cc = req_setup(s, h, r, url, hdrs, errbuf);
		if (cc == CURLE_OK)
			cc = curl_easy_perform(h);
		long status = 0, sent = 0;
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
		/* A reused connection reports a connect time of 0, so whether
		 * the request left is told by the bytes of it that were sent. */
		curl_easy_getinfo(h, CURLINFO_REQUEST_SIZE, &sent);
		s3_pool_put(s, h);
		bool stalled = false;
		if (cc == CURLE_OPERATION_TIMEDOUT && sent == 0)
			cc = CURLE_COULDNT_CONNECT;  /* never connected: unreachable */
		else if (cc == CURLE_OPERATION_TIMEDOUT && !r->timeout_ms)
			stalled = true;              /* sent, then nothing came */
		curl_slist_free_all(hdrs);
		r->status = status;
		if (cc == CURLE_ABORTED_BY_CALLBACK && r->cancel &&
		    atomic_load(r->cancel)) {
			err = -ECANCELED;
			cc = CURLE_OK;
			break;
		}
		if (cc == CURLE_WRITE_ERROR && r->full)
			cc = CURLE_OK;           /* we stopped it: buffer full */
		if (r->cb_err) {                 /* our side failed: no retry */
			err = r->cb_err;
			break;
		}
		const char *t;
		size_t tl;
		bool failed_200 = cc == CURLE_OK && status >= 200 && status < 300 &&
				  r->error_in_200 &&
				  s3_body_is_error(r->body, r->body_len);
		if ((status >= 300 || failed_200) && r->body_len &&
		    s3_xml_find(r->body, r->body_len, "Code", &t, &tl) &&
		    tl > 0 && tl < sizeof r->s3code) {
			memcpy(r->s3code, t, tl);
			r->s3code[tl] = '\0';
		}
		if (failed_200 && !r->s3code[0])   /* an <Error> with no code */
			snprintf(r->s3code, sizeof r->s3code, "Error");
		if (status >= 300 && !r->region[0] && r->body_len &&
		    s3_xml_find(r->body, r->body_len, "Region", &t, &tl) &&
		    tl > 0 && tl < sizeof r->region) {
			memcpy(r->region, t, tl);
			r->region[tl] = '\0';
		}
		err = s3_errno_map((int)cc, status, r->s3code);
		if (err == -EACCES && !refreshed && s3_cred_renew(s, signed_gen)) {
			refreshed = true;    /* new credentials: send it again now */
			attempt--;
			continue;
		}
		if (!err || !s3_retryable((int)cc, status, r->s3code))
			break;
		/* The request left and no answer came back: the store may have
		 * done it. A creation sent again would make a second one and
		 * leave the first unseen; the caller is told instead. */
		if (r->no_resend && cc != CURLE_OK && cc != CURLE_COULDNT_CONNECT &&
		    cc != CURLE_COULDNT_RESOLVE_HOST && sent > 0) {
			log_debug("s3: %s %s%s%s: the answer was lost (%s); not sent again",
				 r->method, r->bucket, r->key ? "/" : "",
				 r->key ? r->key : "", curl_easy_strerror(cc));
			break;
		}
		unsigned delay = s3_backoff_ms((unsigned)attempt, &rng);
		/* A server that swallowed one request (seen on RGW 16: a PUT
		 * on a busy keep-alive connection never answered) is retried
		 * on a new connection (curl closes a timed-out one), with the
		 * budget counted from now: the stall alone would use it up. */
		if (stalled)
			t0 = s3_now_ms();
		if (attempt + 1 >= S3_TRIES ||
		    s3_now_ms() - t0 + delay > S3_RETRY_BUDGET_MS)
			break;
		S3_STAT(s, s3_retries);
		log_debug("s3: %s %s%s%s: HTTP %ld %s%s, retry in %u ms",
			  r->method, r->bucket, r->key ? "/" : "", r->key ? r->key : "", status,
			  r->s3code, cc ? curl_easy_strerror(cc) : "", delay);
		req_pause(r, delay);
	}
	free(url);
	free(hostline);
	if (s->st) {
		struct timespec t_end;
		clock_gettime(CLOCK_MONOTONIC, &t_end);
		stats_s3_latency_add(s->st, (double)(t_end.tv_sec - t_begin.tv_sec) * 1e3 +
					    (double)(t_end.tv_nsec - t_begin.tv_nsec) / 1e6);
	}
	if (err == 0 || err == -ERANGE)
		return err;
	const char *why = cc ? (errbuf[0] ? errbuf : curl_easy_strerror(cc)) : "";
	if (err == -ECANCELED) {
		log_info("s3: %s %s%s%s: cancelled (the caller stops)", r->method,
			 r->bucket, r->key ? "/" : "", r->key ? r->key : "");
		return err;
	}
	if (err == -ENOENT || err == -ESTALE) {
		log_debug("s3: %s %s%s%s: HTTP %ld %s", r->method, r->bucket,
			  r->key ? "/" : "", r->key ? r->key : "", r->status, r->s3code);
		return err;
	}
	S3_STAT(s, s3_errors);
	char what[CURL_ERROR_SIZE + 96];
	if (cc)
		snprintf(what, sizeof what, "%s", why);
	else
		snprintf(what, sizeof what, "HTTP %ld%s%s", r->status,
			 r->s3code[0] ? " " : "", r->s3code);
	/* A store that names the bucket's region (AWS: a 301, or a 400
	 * AuthorizationHeaderMalformed) says why the request failed better
	 * than its code does. */
	char hint[128] = "";
	if (r->region[0] && strcmp(r->region, s->region) != 0)
		snprintf(hint, sizeof hint, "; the bucket is in region %s, not %s "
			 "(s3.region)", r->region, s->region);
	log_error("s3: %s %s%s%s: %s (%s) after %d attempt%s%s", r->method,
		  r->bucket, r->key ? "/" : "", r->key ? r->key : "", what,
		  strerror(-err), attempt + 1, attempt ? "s" : "", hint);
	return err;
}
