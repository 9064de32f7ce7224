/*
 * s3.c — the request engine of the S3 client (s3_req.h); the operations
 * themselves are in s3_ops.c.
 *
 * DESIGN. Every operation fills a struct s3_req (method, URL parts, extra
 * headers, where the body goes or comes from) and hands it to s3_req_run(),
 * which does the attempts: borrow a curl handle from the pool, set it up,
 * perform, return the handle, classify the outcome (s3_retryable(),
 * s3_errno_map() in s3_wire.c), and sleep with jittered exponential backoff
 * before the next attempt. Attempts stop after S3_TRIES or when the next
 * sleep would pass S3_RETRY_BUDGET_MS since the first attempt, or since the
 * last stall (a request sent and then no byte for stall_s seconds). The final
 * failure is logged once, here, with method, bucket, key and HTTP status.
 *
 * Each attempt is signed afresh (SigV4, s3_sign.c) over every header we
 * add plus Host and x-amz-date; the payload is never hashed
 * (x-amz-content-sha256: UNSIGNED-PAYLOAD).
 *
 * The pool: up to S3_POOL_MAX idle curl handles under s->lock, taken LIFO so
 * the handle with the freshest keep-alive connection is reused. The lock is
 * held only to push or pop; never across a request. curl_easy_reset() at
 * each use clears options but keeps the handle's live connections.
 */
#include "sync/s3_http.h"
#include "sync/s3_int.h"
#include "sync/s3_req.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "common/lock.h"
#include "common/log.h"


/* Bodies this large wait for "100 Continue" (req_signed_headers). */
#define S3_EXPECT_MIN (1u << 20)

static pthread_once_t s3_curl_once = PTHREAD_ONCE_INIT;

static void s3_curl_global(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

static void cred_put(struct s3_cred *c)
{
	if (!c || atomic_fetch_sub(&c->refs, 1) != 1)
		return;
	if (c->secret_key)
		memset(c->secret_key, 0, strlen(c->secret_key));
	if (c->token_line)
		memset(c->token_line, 0, strlen(c->token_line));
	free(c->access_key);
	free(c->secret_key);
	free(c->token_line);
	free(c);
}

static struct s3_cred *cred_get(struct s3_http *s)
{
	mod_lock(&s->cred_lock);
	struct s3_cred *c = s->cred;
	atomic_fetch_add(&c->refs, 1);
	mod_unlock(&s->cred_lock);
	return c;
}

static uint64_t cred_gen(struct s3_http *s)
{
	mod_lock(&s->cred_lock);
	uint64_t g = s->cred ? s->cred->gen : 0;
	mod_unlock(&s->cred_lock);
	return g;
}

int s3_http_set_credentials(struct s3 *iface, const char *access_key,
			    const char *secret_key, const char *token)
{
	struct s3_http *s = (struct s3_http *)iface;
	if (!access_key || !*access_key || !secret_key || !*secret_key ||
	    strpbrk(access_key, "\r\n") || strpbrk(secret_key, "\r\n") ||
	    (token && strpbrk(token, "\r\n")))
		return -EINVAL;
	struct s3_cred *c = calloc(1, sizeof *c);
	if (!c)
		return -ENOMEM;
	atomic_init(&c->refs, 1);
	c->access_key = strdup(access_key);
	c->secret_key = strdup(secret_key);
	if (token && *token &&
	    asprintf(&c->token_line, "x-amz-security-token: %s", token) < 0)
		c->token_line = NULL, c->access_key = (free(c->access_key), NULL);
	if (!c->access_key || !c->secret_key) {
		cred_put(c);
		return -ENOMEM;
	}
	mod_lock(&s->cred_lock);
	struct s3_cred *old = s->cred;
	c->gen = old ? old->gen + 1 : 1;
	s->cred = c;
	mod_unlock(&s->cred_lock);
	cred_put(old);
	return 0;
}

/* Requests by kind: one metric family, the kind as its label. */
#define S3_KIND(field, kind) \
	STATS_FAMILY(struct s3_counters, field, "s3", kind, \
		     "facetfs_s3_requests_total", "kind=\"" kind "\"")
static const struct stats_def s3_stats[] = {
	S3_KIND(s3_list, "list"),
	S3_KIND(s3_head, "head"),
	S3_KIND(s3_get_tagging, "get_tagging"),
	S3_KIND(s3_get, "get"),
	S3_KIND(s3_put, "put"),
	S3_KIND(s3_copy, "copy"),
	S3_KIND(s3_delete, "delete"),
	STATS_COUNTER(struct s3_counters, s3_errors, "s3", "errors"),
	STATS_COUNTER(struct s3_counters, s3_retries, "s3", "retries"),
	STATS_FAMILY(struct s3_counters, s3_bytes_read, "s3", "bytes_read",
		     "facetfs_s3_read_bytes_total", NULL),
};
#undef S3_KIND

int s3_http_new(const struct s3_conf *c, struct stats *st, struct s3 **out)
{
	*out = NULL;
	if (!c || !c->endpoint || !*c->endpoint || !c->access_key ||
	    !c->secret_key)
		return -EINVAL;
	pthread_once(&s3_curl_once, s3_curl_global);
	struct s3_http *s = calloc(1, sizeof *s);
	if (!s)
		return -ENOMEM;
	s->iface.ops = &s3_http_ops;
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&s->cred_lock, NULL);
	pthread_mutex_init(&s->refresh_lock, NULL);
	s->st = st;
	stats_group_add(st, &s->grp, s3_stats, sizeof s3_stats / sizeof s3_stats[0],
			&s->ctr);
	s->refresh = c->refresh;
	s->refresh_ctx = c->refresh_ctx;
	const char *scheme = strstr(c->endpoint, "://") ? "" :
			     c->https ? "https://" : "http://";
	const char *region = c->region && *c->region ? c->region : "us-east-1";
	int err = -ENOMEM;
	if (asprintf(&s->base, "%s%s", scheme, c->endpoint) < 0)
		s->base = NULL;
	s->region = strdup(region);
	s->stall_s = c->stall_s ? (long)c->stall_s : S3_STALL_S;
	s->insecure = c->insecure;
	if (c->ca_file && !(s->ca_file = strdup(c->ca_file)))
		goto fail;
	if (!s->base || !s->region)
		goto fail;
	err = s3_http_set_credentials(&s->iface, c->access_key, c->secret_key,
				      c->session_token);
	if (err)
		goto fail;
	err = -EINVAL;
	size_t bl = strlen(s->base);
	while (bl > 0 && s->base[bl - 1] == '/')
		s->base[--bl] = '\0';
	const char *hs = strstr(s->base, "://") + 3;
	if (strchr(hs, '/') || !*hs)
		goto fail;         /* a path after the host is not supported */
	err = -ENOMEM;
	if (asprintf(&s->host, "Host: %s", hs) < 0) {
		s->host = NULL;
		goto fail;
	}
	if (!(s->hostport = strdup(hs)))
		goto fail;
	s->vhost = c->virtual_host;
	if (s->vhost) {
		/* every connection to the endpoint's host, whatever the name */
		const char *colon = hs[0] == '[' ? strchr(hs, ']') : strrchr(hs, ':');
		size_t hl = colon && *colon == ':' ? (size_t)(colon - hs) :
			    colon ? (size_t)(colon - hs) + 1 : strlen(hs);
		char *line = NULL;
		if (asprintf(&line, "::%.*s:", (int)hl, hs) < 0)
			goto fail;
		s->connect_to = curl_slist_append(NULL, line);
		free(line);
		if (!s->connect_to)
			goto fail;
	}
	*out = &s->iface;
	return 0;
fail:
	s3_http_free(&s->iface);
	return err;
}

void s3_http_free(struct s3 *iface)
{
	struct s3_http *s = (struct s3_http *)iface;
	stats_group_remove(&s->grp);
	for (int i = 0; i < s->n_pool; i++)
		curl_easy_cleanup(s->pool[i]);
	pthread_mutex_destroy(&s->lock);
	pthread_mutex_destroy(&s->cred_lock);
	pthread_mutex_destroy(&s->refresh_lock);
	cred_put(s->cred);
	free(s->ca_file);
	free(s->base);
	free(s->host);
	free(s->hostport);
	curl_slist_free_all(s->connect_to);
	free(s->region);
	free(s);
}

static CURL *s3_pool_get(struct s3_http *s)
{
	CURL *h = NULL;
	mod_lock(&s->lock);
	if (s->n_pool > 0)
		h = s->pool[--s->n_pool];
	mod_unlock(&s->lock);
	if (h)
		curl_easy_reset(h);
	else
		h = curl_easy_init();
	return h;
}

static void s3_pool_put(struct s3_http *s, CURL *h)
{
	mod_lock(&s->lock);
	if (s->n_pool < S3_POOL_MAX) {
		s->pool[s->n_pool++] = h;
		h = NULL;
	}
	mod_unlock(&s->lock);
	if (h)
		curl_easy_cleanup(h);
}


/* ---- callbacks ---------------------------------------------------------- */

static void req_meta_clear(struct s3_req *r)
{
	obj_kv_free(r->meta, r->n_meta);
	r->meta = NULL;
	r->n_meta = 0;
	free(r->ctype);
	r->ctype = NULL;
}

/* Forget what a previous attempt (or a 100 Continue) left behind. */
static void req_answer_reset(struct s3_req *r)
{
	r->got = 0;
	r->body_seen = 0;
	r->full = false;
	r->body_len = 0;
	r->etag[0] = '\0';
	r->clen = 0;
	r->has_clen = false;
	r->mtime_ns = 0;
	r->tag_count = -1;
	req_meta_clear(r);
}

static bool req_grow(struct s3_req *r, const char *p, size_t n, size_t max)
{
	if (r->body_len + n > max)
		return false;
	if (r->body_len + n + 1 > r->body_cap) {
		size_t cap = r->body_cap ? r->body_cap : 16384;
		while (cap < r->body_len + n + 1)
			cap *= 2;
		char *nb = realloc(r->body, cap);
		if (!nb)
			return false;
		r->body = nb;
		r->body_cap = cap;
	}
	memcpy(r->body + r->body_len, p, n);
	r->body_len += n;
	r->body[r->body_len] = '\0';
	return true;
}

static size_t s3_cb_write(char *p, size_t sz, size_t nm, void *ud)
{
	struct s3_req *r = ud;
	size_t n = sz * nm;
	if (r->status >= 300) {          /* an error document: keep its head */
		size_t room = S3_ERRBODY_MAX - r->body_len;
		req_grow(r, p, n < room ? n : room, S3_ERRBODY_MAX);
		return n;
	}
	if (r->sink == SINK_GROW) {
		if (!req_grow(r, p, n, S3_BODY_MAX)) {
			r->cb_err = -ENOMEM;
			return 0;
		}
		return n;
	}
	if (r->sink != SINK_BUF && r->sink != SINK_FN)
		return n;
	/* A 200 to a ranged GET is the whole object: skip up to off. */
	uint64_t skip = r->status == 200 ? r->off : 0;
	uint64_t pos = r->body_seen;
	r->body_seen += n;
	if (r->sink == SINK_FN) {
		/* Bytes given by an earlier attempt are skipped too. */
		skip += r->out_done;
		if (pos + n <= skip)
			return n;
		size_t from = pos < skip ? (size_t)(skip - pos) : 0;
		size_t take = n - from;
		if (take > r->len - r->out_done)
			take = (size_t)(r->len - r->out_done);
		int e = take ? r->out(r->out_ctx, p + from, take) : 0;
		if (e) {
			r->cb_err = e < 0 ? e : -EIO;
			return 0;
		}
		r->out_done += take;
		if (r->out_done == r->len && take < n - from) {
			r->full = true;
			return 0;
		}
		return n;
	}
	if (pos + n <= skip)
		return n;
	size_t from = pos < skip ? (size_t)(skip - pos) : 0;
	size_t take = n - from;
	if (take > r->len - r->got)
		take = r->len - r->got;
	memcpy(r->buf + r->got, p + from, take);
	r->got += take;
	if (r->got == r->len && take < n - from) {
		r->full = true;          /* more than asked for: stop here */
		return 0;
	}
	return n;
}

static void hdr_trim(const char **v, size_t *n)
{
	while (*n && (**v == ' ' || **v == '\t')) {
		(*v)++;
		(*n)--;
	}
	while (*n && ((*v)[*n - 1] == '\r' || (*v)[*n - 1] == '\n' ||
		      (*v)[*n - 1] == ' ' || (*v)[*n - 1] == '\t'))
		(*n)--;
}

static bool hdr_is(const char *line, size_t nlen, const char *name)
{
	return strlen(name) == nlen && strncasecmp(line, name, nlen) == 0;
}

static int hdr_meta(struct s3_req *r, const char *name, size_t nlen,
		    const char *v, size_t vn)
{
	char *k = strndup(name, nlen), *val = strndup(v, vn);
	struct obj_kv *m = realloc(r->meta, (r->n_meta + 1) * sizeof *m);
	if (!k || !val || !m) {
		free(k);
		free(val);
		if (m)
			r->meta = m;
		return -ENOMEM;
	}
	for (char *c = k; *c; c++)
		if (*c >= 'A' && *c <= 'Z')
			*c = (char)(*c - 'A' + 'a');
	r->meta = m;
	m[r->n_meta].name = k;
	m[r->n_meta].value = val;
	r->n_meta++;
	return 0;
}

static size_t s3_cb_header(char *line, size_t sz, size_t nm, void *ud)
{
	struct s3_req *r = ud;
	size_t n = sz * nm;
	if (n >= 5 && memcmp(line, "HTTP/", 5) == 0) {
		const char *sp = memchr(line, ' ', n);
		r->status = sp ? strtol(sp + 1, NULL, 10) : 0;
		req_answer_reset(r);     /* a new response (after 100 Continue) */
		return n;
	}
	const char *colon = memchr(line, ':', n);
	if (!colon)
		return n;
	size_t nlen = (size_t)(colon - line);
	const char *v = colon + 1;
	size_t vn = n - nlen - 1;
	hdr_trim(&v, &vn);
	if (hdr_is(line, nlen, "etag")) {
		s3_etag_copy(r->etag, v, vn);
	} else if (hdr_is(line, nlen, "content-length")) {
		char tmp[24];
		if (vn < sizeof tmp) {
			memcpy(tmp, v, vn);
			tmp[vn] = '\0';
			r->clen = strtoull(tmp, NULL, 10);
			r->has_clen = true;
		}
	} else if (hdr_is(line, nlen, "last-modified")) {
		int64_t ns = s3_time_http(v, vn);
		r->mtime_ns = ns < 0 ? 0 : ns;
	} else if (r->want_meta && hdr_is(line, nlen, "content-type")) {
		free(r->ctype);
		r->ctype = strndup(v, vn);
		if (!r->ctype)
			r->cb_err = -ENOMEM;
	} else if (r->want_meta && hdr_is(line, nlen, "x-amz-tagging-count")) {
		r->tag_count = vn && vn < 12 ? strtol(v, NULL, 10) : 0;
	} else if (r->want_meta && nlen > 11 &&
		   strncasecmp(line, "x-amz-meta-", 11) == 0) {
		if (hdr_meta(r, line + 11, nlen - 11, v, vn) < 0)
			r->cb_err = -ENOMEM;
	}
	return n;
}

static size_t s3_cb_read(char *p, size_t sz, size_t nm, void *ud)
{
	struct s3_req *r = ud;
	size_t n = sz * nm;
	if ((r->fd < 0 && !r->up_mem) || r->up_pos >= r->up_size)
		return 0;
	if (n > r->up_size - r->up_pos)
		n = (size_t)(r->up_size - r->up_pos);
	ssize_t k;
	if (r->up_mem) {
		memcpy(p, r->up_mem + r->up_pos, n);
		k = (ssize_t)n;
	} else {
		do
			k = pread(r->fd, p, n, (off_t)(r->up_base + r->up_pos));
		while (k < 0 && errno == EINTR);
	}
	if (k <= 0) {
		r->cb_err = k < 0 ? -errno : -EIO;   /* file shrank under us */
		log_error("s3: PUT %s/%s: reading the source at %" PRIu64 ": %s",
			  r->bucket, r->key, r->up_pos,
			  k < 0 ? strerror(errno) : "unexpected end of file");
		return CURL_READFUNC_ABORT;
	}
	if (r->md5 && EVP_DigestUpdate(r->md5, p, (size_t)k) != 1) {
		r->cb_err = -EIO;
		return CURL_READFUNC_ABORT;
	}
	r->up_pos += (uint64_t)k;
	return (size_t)k;
}

/* curl's progress callback, set when the thread watches a cancel flag:
 * nonzero ends the transfer (CURLE_ABORTED_BY_CALLBACK). */
static int s3_cb_progress(void *ud, curl_off_t dlt, curl_off_t dln,
			  curl_off_t ult, curl_off_t uln)
{
	(void)dlt, (void)dln, (void)ult, (void)uln;
	return atomic_load((const atomic_bool *)ud) ? 1 : 0;
}

/* ---- the engine --------------------------------------------------------- */

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

void req_release(struct s3_req *r)
{
	req_meta_clear(r);
	free(r->body);
	r->body = NULL;
	curl_slist_free_all(r->hdrs);
	r->hdrs = NULL;
	if (r->md5)
		EVP_MD_CTX_free(r->md5);
	r->md5 = NULL;
}

/* Append "name: value" to the request's headers. */
int req_header(struct s3_req *r, const char *name, const char *value)
{
	char line[8192];
	int n = snprintf(line, sizeof line, "%s: %s", name, value);
	if (n < 0 || (size_t)n >= sizeof line)
		return -EINVAL;
	struct curl_slist *l = curl_slist_append(r->hdrs, line);
	if (!l)
		return -ENOMEM;
	r->hdrs = l;
	return 0;
}

int req_init(struct s3_req *r, const char *method, const char *bucket,
		    const char *key)
{
	memset(r, 0, sizeof *r);
	r->method = method;
	r->verb = strcmp(method, "LIST") == 0 ? "GET" :
		  strcmp(method, "COPY") == 0 ? "PUT" : method;
	r->bucket = bucket;
	r->key = key;
	r->fd = -1;
	if (!bucket || !*bucket || (key && !*key))
		return -EINVAL;
	return req_header(r, "x-amz-content-sha256", "UNSIGNED-PAYLOAD");
}

/* ---- pieces several operations build requests and read answers with -- */

int req_meta_headers(struct s3_req *r, const struct obj_kv *meta, size_t n,
		     const char *content_type)
{
	for (size_t i = 0; i < n; i++) {
		const char *k = meta[i].name, *v = meta[i].value ? meta[i].value : "";
		if (!k || !*k || strpbrk(k, ":\r\n \t") || strpbrk(v, "\r\n"))
			return -EINVAL;
		char name[300];
		int l = snprintf(name, sizeof name, "x-amz-meta-%s", k);
		if (l < 0 || (size_t)l >= sizeof name)
			return -EINVAL;
		int err = req_header(r, name, v);
		if (err)
			return err;
	}
	if (!content_type || !*content_type)
		return 0;
	if (strpbrk(content_type, "\r\n"))
		return -EINVAL;
	return req_header(r, "Content-Type", content_type);
}

int req_copy_source(struct s3_req *r, const char *bucket, const char *src_key,
		    const char *if_match)
{
	size_t cap = 3 * (strlen(bucket) + strlen(src_key)) + 4;
	char *src = malloc(cap);
	if (!src)
		return -ENOMEM;
	src[0] = '/';
	int err = 0;
	int k = s3_url_encode(bucket, false, src + 1, cap - 1);
	if (k >= 0) {
		src[1 + k] = '/';
		k = s3_url_encode(src_key, true, src + 2 + k, cap - 2 - (size_t)k);
	}
	if (k < 0)
		err = k;
	if (!err)
		err = req_header(r, "x-amz-copy-source", src);
	free(src);
	if (!err && if_match && *if_match) {
		char q[80];
		snprintf(q, sizeof q, "\"%s\"", if_match);
		err = req_header(r, "x-amz-copy-source-if-match", q);
	}
	return err;
}

void req_body_etag(const struct s3_req *r, char out[72])
{
	const char *t;
	size_t tl;
	out[0] = '\0';
	if (r->body && s3_xml_find(r->body, r->body_len, "ETag", &t, &tl)) {
		char raw[160];
		int n = s3_xml_decode(t, tl, raw, sizeof raw);
		if (n > 0)
			s3_etag_copy(out, raw, (size_t)n);
	}
}

static int req_upload_md5(struct s3_req *r, uint64_t size, char out[33])
{
	unsigned char d[16];
	unsigned dl = 0;
	out[0] = '\0';
	if (r->up_pos != size || !r->md5 ||
	    EVP_DigestFinal_ex(r->md5, d, &dl) != 1 || dl != 16) {
		log_error("s3: %s %s/%s: sent %" PRIu64 " of %" PRIu64 " bytes",
			  r->method, r->bucket, r->key ? r->key : "", r->up_pos,
			  size);
		return -EIO;
	}
	for (int i = 0; i < 16; i++)
		snprintf(out + 2 * i, 3, "%02x", d[i]);
	return 0;
}

int req_fd_md5(int fd, uint64_t off, uint64_t size, char out[33])
{
	unsigned char buf[64 << 10], d[16];
	unsigned dl = 0;
	int err = 0;
	out[0] = '\0';
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	if (!md || EVP_DigestInit_ex(md, EVP_md5(), NULL) != 1)
		err = -EIO;
	for (uint64_t pos = 0; !err && pos < size;) {
		size_t want = size - pos < sizeof buf ? (size_t)(size - pos) : sizeof buf;
		ssize_t k = pread(fd, buf, want, (off_t)(off + pos));
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0 || EVP_DigestUpdate(md, buf, (size_t)k) != 1)
			err = -EIO;
		else
			pos += (uint64_t)k;
	}
	if (!err && (EVP_DigestFinal_ex(md, d, &dl) != 1 || dl != 16))
		err = -EIO;
	EVP_MD_CTX_free(md);
	for (int i = 0; !err && i < 16; i++)
		snprintf(out + 2 * i, 3, "%02x", d[i]);
	return err;
}

int req_send_fd(struct s3_http *s, struct s3_req *r, int fd, uint64_t off,
		uint64_t size, char etag_out[72])
{
	etag_out[0] = '\0';
	r->md5 = EVP_MD_CTX_new();
	if (!r->md5)
		return -ENOMEM;
	r->upload = true;
	r->fd = fd;
	r->up_base = off;
	r->up_size = size;
	S3_STAT(s, s3_put);
	int err = s3_req_run(s, r);
	if (!err)
		err = req_upload_md5(r, size, etag_out);
	if (!err && r->etag[0] && strlen(r->etag) == 32 &&
	    strcasecmp(r->etag, etag_out)) {
		log_error("s3: %s %s/%s: server ETag %s, data MD5 %s", r->method,
			  r->bucket, r->key ? r->key : "", r->etag, etag_out);
		S3_STAT(s, s3_errors);
		etag_out[0] = '\0';
		err = -EIO;
	}
	return err;
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

/* After the store refused credentials of generation gen: let the refresh
 * callback install new ones (one refresh at a time; none if another
 * request already replaced gen). True if the credentials changed. */
static bool req_renew_creds(struct s3_http *s, uint64_t gen)
{
	if (!s->refresh)
		return false;
	pthread_mutex_lock(&s->refresh_lock);
	if (cred_gen(s) == gen) {
		int rc = s->refresh(s->refresh_ctx, &s->iface);
		if (rc < 0)
			log_warn("s3: renewing the credentials failed: %s",
				 strerror(-rc));
	}
	pthread_mutex_unlock(&s->refresh_lock);
	bool changed = cred_gen(s) != gen;
	if (changed)
		log_info("s3: credentials refused; sending again with renewed ones");
	return changed;
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
		struct s3_cred *cred = cred_get(s);
		uint64_t signed_gen = cred->gen;
		struct curl_slist *hdrs = req_signed_headers(s, cred, r, url + path_at,
							     hostline);
		cred_put(cred);   /* the headers hold copies */
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
		err = s3_errno_map((int)cc, status, r->s3code);
		if (err == -EACCES && !refreshed && req_renew_creds(s, signed_gen)) {
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
	log_error("s3: %s %s%s%s: %s (%s) after %d attempt%s", r->method,
		  r->bucket, r->key ? "/" : "", r->key ? r->key : "", what,
		  strerror(-err), attempt + 1, attempt ? "s" : "");
	return err;
}
