/*
 * test_s3.c — unit tests of the S3 client's request engine
 * (sync/s3/s3_http.h, s3_req.h) against a scripted HTTP server on a
 * loopback socket in this process (no S3 store): retries on 503, a 200 to a ranged GET, 416, 412, 404,
 * refused connections, a streamed GET retried after a broken body, a
 * request cancelled by its thread's flag; a conditional PUT's headers and
 * answers (a 412 after a retry checked by a HEAD); a store that names the
 * bucket's region (a 301's x-amz-bucket-region, a 400's <Region>): the
 * error line says it. Prints "ok - ..." /
 * "not ok - ..." lines.
 */
#include "sync/s3/s3_int.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/stats.h"
#include "tests/unit/unit.h"

/* ---- the engine against a scripted loopback server ---------------------- */

struct fake {
	int lfd, port;
	const char *const *answers;   /* one full response per connection;
	                                 NULL: read the request, answer nothing,
	                                 wait for the client to hang up */
	int n_answers, served;
	char last_req[4096];
	pthread_t th;
};

static void *fake_main(void *arg)
{
	struct fake *f = arg;
	for (int i = 0; i < f->n_answers; i++) {
		int c = accept(f->lfd, NULL, NULL);
		if (c < 0)
			break;
		size_t n = 0;
		char *req = f->last_req;
		while (n < sizeof f->last_req - 1) {
			ssize_t k = read(c, req + n, sizeof f->last_req - 1 - n);
			if (k <= 0)
				break;
			n += (size_t)k;
			req[n] = '\0';
			char *end = strstr(req, "\r\n\r\n");
			char *cl = strcasestr(req, "\r\nContent-Length:");
			if (end && (!cl || cl > end ||   /* and the whole body */
				    (size_t)(req + n - (end + 4)) >= strtoul(cl + 17, NULL, 10)))
				break;
		}
		const char *a = f->answers[i];
		if (a) {
			ssize_t w = write(c, a, strlen(a));
			(void)w;
		} else {
			char sink[512];
			while (read(c, sink, sizeof sink) > 0)
				;
		}
		close(c);
		f->served++;
	}
	return NULL;
}

static int fake_start(struct fake *f, const char *const *answers, int n)
{
	memset(f, 0, sizeof *f);
	f->answers = answers;
	f->n_answers = n;
	f->lfd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET };
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t sl = sizeof sa;
	if (f->lfd < 0 || bind(f->lfd, (struct sockaddr *)&sa, sizeof sa) ||
	    listen(f->lfd, 8) || getsockname(f->lfd, (struct sockaddr *)&sa, &sl))
		return -errno;
	f->port = ntohs(sa.sin_port);
	return pthread_create(&f->th, NULL, fake_main, f) ? -EAGAIN : 0;
}

static void fake_stop(struct fake *f)
{
	shutdown(f->lfd, SHUT_RDWR);
	pthread_join(f->th, NULL);
	close(f->lfd);
}

static struct s3 *client_for(int port, struct stats *st)
{
	char ep[64];
	snprintf(ep, sizeof ep, "127.0.0.1:%d", port);
	struct s3_conf c = { .endpoint = ep, .region = "default",
			     .access_key = "AK", .secret_key = "SK", .stall_s = 1 };
	struct s3 *s = NULL;
	return s3_http_new(&c, st, &s) ? NULL : s;
}

/* s3_mpu_complete of two parts against a fake store answering answers[0]
 * (the completion) and answers[1] (the HEAD after a NoSuchUpload). */
static int complete_against(struct fake *f, struct stats *st, const char **answers,
			    const struct s3_part *parts, char etag[72])
{
	stats_init(st);
	fake_start(f, answers, 2);
	struct s3 *s = client_for(f->port, st);
	int rc = s3_mpu_complete(s, "bkt", "k", "u1", parts, 2, etag);
	fake_stop(f);
	s3_free(s);
	return rc;
}

#define CLOSE "Connection: close\r\n"

/* A streamed GET's bytes gathered (s3_get_stream's callback); fail_at:
 * a call with at least this many bytes fails with -ENOSPC. */
struct sink_buf {
	char b[64];
	size_t n, fail_at;
};

static int sink_add(void *ctx, const void *p, size_t n)
{
	struct sink_buf *sb = ctx;
	if (sb->fail_at && n >= sb->fail_at)
		return -ENOSPC;
	if (sb->n + n > sizeof sb->b)
		return -EOVERFLOW;
	memcpy(sb->b + sb->n, p, n);
	sb->n += n;
	return 0;
}

static void test_engine(void)
{
	struct stats st;
	struct fake f;
	char buf[64];
	size_t got = 99;
	double t0, dt;

	struct s3_conf bad = { .endpoint = NULL, .access_key = "a", .secret_key = "b" };
	struct s3 *s = NULL;
	CHECK(s3_http_new(&bad, NULL, &s) == -EINVAL && !s, "engine: s3_new without endpoint is -EINVAL");

	static const char *const retry503[] = {
		"HTTP/1.1 503 Service Unavailable\r\n" CLOSE "Content-Length: 54\r\n\r\n"
		"<Error><Code>SlowDown</Code><Message/></Error>        ",
		"HTTP/1.1 500 Internal Server Error\r\n" CLOSE "Content-Length: 0\r\n\r\n",
		"HTTP/1.1 206 Partial Content\r\n" CLOSE "Content-Length: 5\r\n"
		"Content-Range: bytes 3-7/10\r\n\r\nhello",
	};
	stats_init(&st);
	fake_start(&f, retry503, 3);
	s = client_for(f.port, &st);
	int rc = s3_get(s, "bkt", "dir/a b+c", 3, 5, "e1", buf, &got);
	fake_stop(&f);
	CHECK(rc == 0 && got == 5 && memcmp(buf, "hello", 5) == 0,
	      "engine: GET succeeds after a 503 SlowDown and a 500");
	CHECK(stats_value(&st, "s3", "retries") == 2 && stats_value(&st, "s3", "get") == 1 &&
	      stats_value(&st, "s3", "errors") == 0 && stats_value(&st, "s3", "bytes_read") == 5,
	      "engine: stats count 2 retries, 1 get, 5 bytes, no error");
	CHECK(strstr(f.last_req, "GET /bkt/dir/a%20b%2Bc HTTP/1.1") &&
	      strstr(f.last_req, "Range: bytes=3-7") &&
	      strstr(f.last_req, "If-Match: \"e1\"") &&
	      strstr(f.last_req, "x-amz-content-sha256: UNSIGNED-PAYLOAD") &&
	      strstr(f.last_req, "Authorization: AWS4-HMAC-SHA256 Credential=AK/") &&
	      strstr(f.last_req, "/default/s3/aws4_request"),
	      "engine: path-style encoded URL, Range, If-Match, SigV4 headers");
	s3_free(s);

	static const char *const whole[] = {   /* a server that ignores Range */
		"HTTP/1.1 200 OK\r\n" CLOSE "Content-Length: 10\r\n\r\n0123456789",
	};
	fake_start(&f, whole, 1);
	s = client_for(f.port, &st);
	rc = s3_get(s, "bkt", "k", 4, 3, NULL, buf, &got);
	fake_stop(&f);
	CHECK(rc == 0 && got == 3 && memcmp(buf, "456", 3) == 0,
	      "engine: a 200 to a ranged GET yields the asked range");
	s3_free(s);

	/* A streamed GET: the first answer breaks off after 6 of its 10
	 * bytes; the retry's answer gives all 10, of which only the 4 not
	 * given yet reach the callback. No Range for a whole object. */
	static const char *const broken[] = {
		"HTTP/1.1 200 OK\r\n" CLOSE "Content-Length: 10\r\n\r\n012345",
		"HTTP/1.1 200 OK\r\n" CLOSE "Content-Length: 10\r\n\r\n0123456789",
	};
	stats_init(&st);
	fake_start(&f, broken, 2);
	s = client_for(f.port, &st);
	struct sink_buf sb = { 0 };
	uint64_t sgot = 0;
	rc = s3_get_stream(s, "bkt", "k", 0, UINT64_MAX, NULL, sink_add, &sb, &sgot);
	fake_stop(&f);
	CHECK(rc == 0 && sgot == 10 && sb.n == 10 && !memcmp(sb.b, "0123456789", 10) &&
	      stats_value(&st, "s3", "retries") == 1,
	      "engine: a streamed GET retried after a broken body gives each byte once "
	      "(rc %d, %zu bytes '%.*s')", rc, sb.n, (int)sb.n, sb.b);
	CHECK(!strstr(f.last_req, "Range:"), "engine: a streamed whole GET sends no Range");
	s3_free(s);
	fake_start(&f, whole, 1);
	s = client_for(f.port, &st);
	sb.n = 0;
	rc = s3_get_stream(s, "bkt", "k", 2, 5, NULL, sink_add, &sb, &sgot);
	fake_stop(&f);
	CHECK(rc == 0 && sgot == 5 && sb.n == 5 && !memcmp(sb.b, "23456", 5),
	      "engine: a streamed ranged GET answered whole (200) gives the range");
	CHECK(strstr(f.last_req, "Range: bytes=2-6") != NULL, "engine: … asked with its Range");
	s3_free(s);
	fake_start(&f, whole, 1);
	s = client_for(f.port, &st);
	sb.n = 0;
	sb.fail_at = 3;
	rc = s3_get_stream(s, "bkt", "k", 0, UINT64_MAX, NULL, sink_add, &sb, &sgot);
	fake_stop(&f);
	CHECK(rc == -ENOSPC && sb.n == 0, "engine: the callback's error ends the GET (%d)", rc);
	s3_free(s);

	static const char *const codes[] = {
		"HTTP/1.1 416 Requested Range Not Satisfiable\r\n" CLOSE "Content-Length: 0\r\n\r\n",
		"HTTP/1.1 412 Precondition Failed\r\n" CLOSE "Content-Length: 0\r\n\r\n",
		"HTTP/1.1 404 Not Found\r\n" CLOSE "Content-Length: 40\r\n\r\n"
		"<Error><Code>NoSuchKey</Code></Error>   ",
		"HTTP/1.1 403 Forbidden\r\n" CLOSE "Content-Length: 0\r\n\r\n",
	};
	stats_init(&st);
	fake_start(&f, codes, 4);
	s = client_for(f.port, &st);
	got = 99;
	int r416 = s3_get(s, "bkt", "k", 100, 10, NULL, buf, &got);
	size_t got416 = got;
	int r412 = s3_get(s, "bkt", "k", 0, 10, "old", buf, &got);
	struct obj_meta o;
	int r404 = s3_get(s, "bkt", "k", 0, 10, NULL, buf, &got);
	int r403 = s3_head(s, "bkt", "k", &o);
	fake_stop(&f);
	CHECK(r416 == 0 && got416 == 0, "engine: 416 reads as 0 bytes at EOF");
	CHECK(r412 == -ESTALE, "engine: 412 is -ESTALE");
	CHECK(r404 == -ENOENT, "engine: 404 NoSuchKey is -ENOENT");
	CHECK(r403 == -EACCES && o.key == NULL, "engine: 403 is -EACCES, *out left empty");
	CHECK(stats_value(&st, "s3", "retries") == 0 && stats_value(&st, "s3", "errors") == 1,
	      "engine: no retries on 4xx; only the 403 counts as an error");
	got = 99;
	CHECK(s3_get(s, "bkt", "k", 0, 0, NULL, buf, &got) == 0 && got == 0,
	      "engine: len 0 returns 0 bytes without a request");
	s3_free(s);

	static const char *const head[] = {
		"HTTP/1.1 200 OK\r\n" CLOSE "Content-Length: 1234\r\n"
		"ETag: \"0123456789abcdef0123456789abcdef\"\r\n"
		"Last-Modified: Sun, 22 Nov 2026 03:22:32 GMT\r\n"
		"Content-Type: text/plain\r\nx-amz-meta-Color: black\r\n"
		"X-Amz-Meta-empty:\r\nx-amz-tagging-count: 1\r\n\r\n",
		"HTTP/1.1 200 OK\r\n" CLOSE "Content-Length: 3\r\n\r\n",
	};
	struct obj_meta o2;
	fake_start(&f, head, 2);
	s = client_for(f.port, &st);
	rc = s3_head(s, "bkt", "k", &o);
	int rc2 = s3_head(s, "bkt", "k2", &o2);
	fake_stop(&f);
	CHECK(rc == 0 && !(o.flags & OBJ_HAS_TAGS),
	      "engine: HEAD with a tag count: tags unknown (they need GetObjectTagging)");
	CHECK(rc2 == 0 && (o2.flags & OBJ_HAS_TAGS) && o2.n_tags == 0,
	      "engine: then a HEAD without one, from that server: known to have no tags");
	obj_meta_release(&o2);
	CHECK(rc == 0 && o.size == 1234 && o.mtime_ns == 1795317752LL * 1000000000 &&
	      strcmp(o.etag, "0123456789abcdef0123456789abcdef") == 0 &&
	      o.content_type && strcmp(o.content_type, "text/plain") == 0 &&
	      (o.flags & OBJ_HAS_CTYPE) && (o.flags & OBJ_HAS_META) &&
	      strcmp(o.bucket, "bkt") == 0 && strcmp(o.key, "k") == 0,
	      "engine: HEAD size, mtime, etag, content type, flags");
	CHECK(rc == 0 && o.n_meta == 2 && strcmp(o.meta[0].name, "color") == 0 &&
	      strcmp(o.meta[0].value, "black") == 0 &&
	      strcmp(o.meta[1].name, "empty") == 0 && o.meta[1].value[0] == '\0',
	      "engine: HEAD x-amz-meta-* to lower-case names");
	obj_meta_release(&o);
	s3_free(s);

	/* A server that takes a request and never answers (RGW 16 did this to
	 * one PUT in 10,000): after stall_s the request goes again, on a new
	 * connection, and succeeds; the stall does not use up the budget. */
	static const char *const swallow[] = {
		NULL, NULL,
		"HTTP/1.1 200 OK\r\n" CLOSE "Content-Length: 0\r\n"
		"ETag: \"900150983cd24fb0d6963f7d28e17f72\"\r\n\r\n",
	};
	stats_init(&st);
	fake_start(&f, swallow, 3);
	s = client_for(f.port, &st);
	char etag[72] = "";
	int mfd = memfd_create("body", 0);
	CHECK(mfd >= 0 && write(mfd, "abc", 3) == 3, "engine: a body to put");
	t0 = unit_now_s();
	rc = s3_put_file(s, "bkt", "k", mfd, 3, NULL, 0, NULL, etag);
	close(mfd);
	dt = unit_now_s() - t0;
	fake_stop(&f);
	printf("# swallowed twice: rc %d, %.2f s, %ju retries\n", rc, dt,
	       (uintmax_t)stats_value(&st, "s3", "retries"));
	CHECK(rc == 0 && f.served == 3 && stats_value(&st, "s3", "retries") == 2,
	      "engine: a request the server swallows is sent again after the stall");
	CHECK(strstr(f.last_req, "PUT /bkt/k HTTP/1.1") != NULL,
	      "engine: the retried request is the PUT");
	s3_free(s);

	/* A creation is not idempotent: swallowed once, it is not sent
	 * again (the store may have made an upload whose id was lost); the
	 * caller gets the error and keeps its intent. */
	static const char *const swallow_create[] = {
		NULL,
		"HTTP/1.1 200 OK\r\n" CLOSE "Content-Length: 86\r\n\r\n"
		"<InitiateMultipartUploadResult><UploadId>u2</UploadId></Initiate"
		"MultipartUploadResult>",
	};
	stats_init(&st);
	fake_start(&f, swallow_create, 2);
	s = client_for(f.port, &st);
	char uid[64] = "x";
	rc = s3_mpu_create(s, "bkt", "k", NULL, 0, NULL, uid, sizeof uid);
	fake_stop(&f);
	CHECK(rc == -EIO && f.served == 1 && stats_value(&st, "s3", "retries") == 0 &&
	      uid[0] == '\0',
	      "engine: a swallowed CreateMultipartUpload is not sent again: -EIO (rc %d, %d sent)",
	      rc, f.served);
	CHECK(strstr(f.last_req, "POST /bkt/k?uploads= HTTP/1.1") != NULL,
	      "engine: … and it was the POST");
	s3_free(s);
	static const char *const busy_create[] = {
		"HTTP/1.1 503 Service Unavailable\r\n" CLOSE "Content-Length: 0\r\n\r\n",
		"HTTP/1.1 200 OK\r\n" CLOSE "Content-Length: 86\r\n\r\n"
		"<InitiateMultipartUploadResult><UploadId>u3</UploadId></Initiate"
		"MultipartUploadResult>",
	};
	stats_init(&st);
	fake_start(&f, busy_create, 2);
	s = client_for(f.port, &st);
	rc = s3_mpu_create(s, "bkt", "k", NULL, 0, NULL, uid, sizeof uid);
	fake_stop(&f);
	CHECK(rc == 0 && !strcmp(uid, "u3") && stats_value(&st, "s3", "retries") == 1,
	      "engine: a creation the store refused with 503 is sent again (rc %d, id %s)",
	      rc, uid);
	s3_free(s);

	/* A completion whose answer was lost and that was sent again meets
	 * NoSuchUpload: the object the parts make is there, so it is done. */
	struct s3_part parts[2] = { { 1, "900150983cd24fb0d6963f7d28e17f72" },
				    { 2, "e2fc714c4727ee9395f324cd2e7f331f" } };
	char want[72], head_ok[320], head_old[320], head_other[256], now_http[64];
	s3_mpu_etag(parts, 2, want);
	time_t now = time(NULL);
	strftime(now_http, sizeof now_http, "%a, %d %b %Y %H:%M:%S GMT", gmtime(&now));
	snprintf(head_ok, sizeof head_ok, "HTTP/1.1 200 OK\r\n" CLOSE
		 "Content-Length: 7\r\nLast-Modified: %s\r\nETag: \"%s\"\r\n\r\n",
		 now_http, want);
	/* The same ETag on an object from before: a copy onto itself whose
	 * upload someone aborted (its parts make the ETag it had). */
	snprintf(head_old, sizeof head_old, "HTTP/1.1 200 OK\r\n" CLOSE
		 "Content-Length: 7\r\nLast-Modified: Wed, 01 Jan 2025 00:00:00 GMT\r\n"
		 "ETag: \"%s\"\r\n\r\n", want);
	snprintf(head_other, sizeof head_other, "HTTP/1.1 200 OK\r\n" CLOSE
		 "Content-Length: 7\r\nETag: \"0cc175b9c0f1b6a831c399e269772661\"\r\n\r\n");
	const char *gone[] = {
		"HTTP/1.1 404 Not Found\r\n" CLOSE "Content-Length: 59\r\n\r\n"
		"<Error><Code>NoSuchUpload</Code><Message></Message></Error>",
		head_ok,
	};
	char cetag[72] = "";
	rc = complete_against(&f, &st, gone, parts, cetag);
	CHECK(rc == 0 && !strcmp(cetag, want) && strstr(f.last_req, "HEAD /bkt/k HTTP/1.1"),
	      "engine: NoSuchUpload at a completion, the parts' object in place: done (rc %d, %s)",
	      rc, cetag);
	gone[1] = head_other;
	rc = complete_against(&f, &st, gone, parts, cetag);
	CHECK(rc == -ENOENT, "engine: … another object in place: -ENOENT (rc %d)", rc);
	gone[1] = head_old;
	rc = complete_against(&f, &st, gone, parts, cetag);
	CHECK(rc == -ENOENT,
	      "engine: … the parts' ETag on an object older than the completion: -ENOENT (rc %d)",
	      rc);

	/* S3 may answer a completion or a copy 200 and fail it in the body. */
	static const char *const late_fail[] = {
		"HTTP/1.1 200 OK\r\n" CLOSE "Content-Length: 73\r\n\r\n"
		"<?xml version=\"1.0\"?>\n<Error><Code>InternalError</Code><Message/></Error>",
		"HTTP/1.1 200 OK\r\n" CLOSE "Content-Length: 83\r\n\r\n"
		"<CompleteMultipartUploadResult><ETag>\"abc-2\"</ETag></CompleteMultipartUploadResult>",
	};
	rc = complete_against(&f, &st, (const char **)late_fail, parts, cetag);
	CHECK(rc == 0 && !strcmp(cetag, "abc-2") && f.served == 2 &&
	      strstr(f.last_req, "POST /bkt/k?uploadId=u1 HTTP/1.1"),
	      "engine: a completion answered 200 with InternalError is sent again "
	      "(rc %d, %s, %d served)", rc, cetag, f.served);
	static const char *const stale_copy[] = {
		"HTTP/1.1 200 OK\r\n" CLOSE "Content-Length: 65\r\n\r\n"
		"<Error><Code>PreconditionFailed</Code><Message></Message></Error>",
	};
	stats_init(&st);
	fake_start(&f, stale_copy, 1);
	s = client_for(f.port, &st);
	struct obj_meta src = { .size = 7 };
	snprintf(src.etag, sizeof src.etag, "0cc175b9c0f1b6a831c399e269772661");
	rc = s3_copy(s, "bkt", "a", "b", NULL, 0, &src, cetag);
	fake_stop(&f);
	s3_free(s);
	CHECK(rc == -ESTALE && f.served == 1 && stats_value(&st, "s3", "retries") == 0,
	      "engine: a COPY answered 200 with PreconditionFailed is -ESTALE, not sent again "
	      "(rc %d, %d served)", rc, f.served);

	/* A part copy refused for its range (RGW ignores the source's
	 * If-Match; a shorter version took the key): the source's HEAD says
	 * it changed. */
	static const char *const shrunk[] = {
		"HTTP/1.1 416 Requested Range Not Satisfiable\r\n" CLOSE
		"Content-Length: 54\r\n\r\n"
		"<Error><Code>InvalidRange</Code><Message/></Error>    ",
		"HTTP/1.1 200 OK\r\n" CLOSE "Content-Length: 3\r\n"
		"ETag: \"0cc175b9c0f1b6a831c399e269772661\"\r\n\r\n",
	};
	stats_init(&st);
	fake_start(&f, shrunk, 2);
	s = client_for(f.port, &st);
	rc = s3_mpu_copy_part(s, "bkt", "b", "u1", 2, "a",
			      "900150983cd24fb0d6963f7d28e17f72", 1 << 20, 1 << 20, cetag);
	fake_stop(&f);
	s3_free(s);
	CHECK(rc == -ESTALE && f.served == 2 && strstr(f.last_req, "HEAD /bkt/a HTTP/1.1"),
	      "engine: a part copy refused for its range, the source since changed: -ESTALE "
	      "(rc %d, %d served)", rc, f.served);

	/* A port nobody listens on: refused, retried, bounded. */
	fake_start(&f, NULL, 0);
	int port = f.port;
	fake_stop(&f);
	stats_init(&st);
	s = client_for(port, &st);
	t0 = unit_now_s();
	rc = s3_bucket_check(s, "bkt");
	dt = unit_now_s() - t0;
	printf("# refused endpoint: %.2f s, %ju retries\n", dt,
	       (uintmax_t)stats_value(&st, "s3", "retries"));
	CHECK(rc == -EHOSTUNREACH && dt < 10.0, "engine: refused endpoint is -EHOSTUNREACH within 10 s");
	CHECK(stats_value(&st, "s3", "retries") == 4 && stats_value(&st, "s3", "errors") == 1,
	      "engine: 5 attempts (4 retries), one error counted");
	s3_free(s);
}

/* Sets *flag after 300 ms (a thread of its own). */
static void *cancel_later(void *arg)
{
	usleep(300000);
	atomic_store((atomic_bool *)arg, true);
	return NULL;
}

/* A server that takes requests and never answers: a thread watching a
 * cancel flag (common/s3.h) gets -ECANCELED once it is set, with no
 * retry, and sends nothing after it. */
static void test_cancel(void)
{
	static const char *const answers[] = { NULL, NULL, NULL, NULL, NULL, NULL };
	struct fake f;
	struct stats st;
	stats_init(&st);
	fake_start(&f, answers, 6);
	char ep[64];
	snprintf(ep, sizeof ep, "127.0.0.1:%d", f.port);
	struct s3_conf c = { .endpoint = ep, .region = "default", .access_key = "AK",
			     .secret_key = "SK", .stall_s = 30 };
	struct s3 *s = NULL;
	CHECK(s3_http_new(&c, &st, &s) == 0, "cancel: client made");
	atomic_bool flag;
	atomic_init(&flag, false);
	s3_cancel_watch(&flag);
	pthread_t th;
	pthread_create(&th, NULL, cancel_later, &flag);
	char buf[8];
	size_t got = 0;
	double t0 = unit_now_s();
	int rc = s3_get(s, "bkt", "k", 0, 2, NULL, buf, &got);
	double dt = unit_now_s() - t0;
	pthread_join(th, NULL);
	printf("# a GET with no answer, cancelled after 0.3 s, returned after %.2f s\n", dt);
	CHECK(rc == -ECANCELED && stats_value(&st, "s3", "retries") == 0,
	      "cancel: a GET the server never answers ends -ECANCELED, not retried (%d)", rc);
	rc = s3_get(s, "bkt", "k", 0, 2, NULL, buf, &got);
	s3_cancel_watch(NULL);
	s3_free(s);
	fake_stop(&f);
	CHECK(rc == -ECANCELED && f.served == 1,
	      "cancel: the thread's next request is not sent (%d, %d connections)",
	      rc, f.served);
	stats_release(&st);
}

/* Virtual-hosted-style addressing: the bucket in the Host name, the key
 * alone in the path (and signed so), the connection still to the
 * endpoint's own address; a bucket name DNS cannot take stays path-style. */
static void test_virtual_host(void)
{
	static const char *const answers[] = {
		"HTTP/1.1 206 Partial Content\r\n" CLOSE "Content-Length: 2\r\n"
		"Content-Range: bytes 0-1/2\r\n\r\nok",
		"HTTP/1.1 206 Partial Content\r\n" CLOSE "Content-Length: 2\r\n"
		"Content-Range: bytes 0-1/2\r\n\r\nok",
	};
	struct fake f;
	char ep[64], buf[8], req1[4096];
	size_t got = 0;
	fake_start(&f, answers, 2);
	snprintf(ep, sizeof ep, "localhost:%d", f.port);
	struct s3_conf c = { .endpoint = ep, .region = "default", .access_key = "AK",
			     .secret_key = "SK", .stall_s = 1, .virtual_host = true };
	struct s3 *s = NULL;
	CHECK(s3_http_new(&c, NULL, &s) == 0, "vhost: client made");
	int rc = s3_get(s, "my-bucket", "dir/a b", 0, 2, NULL, buf, &got);
	memcpy(req1, f.last_req, sizeof req1);
	int rc2 = s3_get(s, "Upper_Case", "k", 0, 2, NULL, buf, &got);
	fake_stop(&f);
	char host[96];
	snprintf(host, sizeof host, "Host: my-bucket.localhost:%d\r\n", f.port);
	CHECK(rc == 0 && strstr(req1, "GET /dir/a%20b HTTP/1.1") && strstr(req1, host),
	      "vhost: GET /KEY with Host: BUCKET.host:port, to the endpoint's address");
	CHECK(strstr(req1, "SignedHeaders=host;"), "vhost: the Host name is signed");
	CHECK(rc2 == 0 && strstr(f.last_req, "GET /Upper_Case/k HTTP/1.1"),
	      "vhost: a bucket name DNS cannot take goes path-style");
	s3_free(s);
}

/* s3_put_file_if of "abc" with base against a server answering
 * answers[0..n): its result; the server's last request in f. */
static int cond_put_against(struct fake *f, const char *const *answers, int n,
			    const char *base, char etag[72])
{
	struct stats st;
	stats_init(&st);
	fake_start(f, answers, n);
	struct s3 *s = client_for(f->port, &st);
	int fd = memfd_create("body", 0);
	int rc = fd >= 0 && write(fd, "abc", 3) == 3 ?
		 s3_put_file_if(s, "bkt", "k", fd, 3, NULL, 0, NULL, base, etag) : -EIO;
	if (fd >= 0)
		close(fd);
	fake_stop(f);
	s3_free(s);
	stats_release(&st);
	return rc;
}

#define MD5_ABC "900150983cd24fb0d6963f7d28e17f72"

static void test_cond_put(void)
{
	static const char *const stored[] = {
		"HTTP/1.1 200 OK\r\n" CLOSE "Content-Length: 0\r\n"
		"ETag: \"" MD5_ABC "\"\r\n\r\n",
	};
	static const char *const refused[] = {
		"HTTP/1.1 412 Precondition Failed\r\n" CLOSE "Content-Length: 47\r\n\r\n"
		"<Error><Code>PreconditionFailed</Code></Error>\n",
	};
	static const char *const aws_absent[] = {
		"HTTP/1.1 404 Not Found\r\n" CLOSE "Content-Length: 38\r\n\r\n"
		"<Error><Code>NoSuchKey</Code></Error>\n",
	};
	/* The first answer lost (a 503 after the store may have stored it),
	 * the retry refused, then the HEAD: the key holds "abc" or not. */
	static const char *const lost_ours[] = {
		"HTTP/1.1 503 Service Unavailable\r\n" CLOSE "Content-Length: 0\r\n\r\n",
		"HTTP/1.1 412 Precondition Failed\r\n" CLOSE "Content-Length: 0\r\n\r\n",
		"HTTP/1.1 200 OK\r\n" CLOSE "Content-Length: 3\r\n"
		"ETag: \"" MD5_ABC "\"\r\n\r\n",
	};
	static const char *const lost_theirs[] = {
		"HTTP/1.1 503 Service Unavailable\r\n" CLOSE "Content-Length: 0\r\n\r\n",
		"HTTP/1.1 412 Precondition Failed\r\n" CLOSE "Content-Length: 0\r\n\r\n",
		"HTTP/1.1 200 OK\r\n" CLOSE "Content-Length: 3\r\n"
		"ETag: \"0123456789abcdef0123456789abcdef\"\r\n\r\n",
	};
	struct fake f;
	char etag[72];
	int rc = cond_put_against(&f, stored, 1, "0123456789abcdef0123456789abcdef", etag);
	CHECK(rc == 0 && strcmp(etag, MD5_ABC) == 0 &&
	      strstr(f.last_req, "\r\nIf-Match: 0123456789abcdef0123456789abcdef\r\n") &&
	      !strstr(f.last_req, "If-None-Match"),
	      "cond PUT: If-Match sent without quotes (RGW 16 refuses quoted ones)");
	CHECK(strstr(f.last_req, "SignedHeaders=") && strstr(f.last_req, ";if-match;"),
	      "cond PUT: … and signed");
	rc = cond_put_against(&f, stored, 1, "", etag);
	CHECK(rc == 0 && strstr(f.last_req, "\r\nIf-None-Match: *\r\n") &&
	      !strstr(f.last_req, "If-Match:"), "cond PUT: base \"\": If-None-Match: *");
	rc = cond_put_against(&f, refused, 1, "", etag);
	CHECK(rc == -ESTALE && f.served == 1 && etag[0] == '\0',
	      "cond PUT: 412 is -ESTALE, not retried");
	rc = cond_put_against(&f, aws_absent, 1, MD5_ABC, etag);
	CHECK(rc == -ESTALE, "cond PUT: If-Match answered 404 NoSuchKey (AWS): -ESTALE");
	rc = cond_put_against(&f, lost_ours, 3, "", etag);
	CHECK(rc == 0 && f.served == 3 && strcmp(etag, MD5_ABC) == 0 &&
	      strstr(f.last_req, "HEAD /bkt/k HTTP/1.1"),
	      "cond PUT: 412 after a retry, the key holds our bytes (HEAD): stored (rc %d)", rc);
	rc = cond_put_against(&f, lost_theirs, 3, "", etag);
	CHECK(rc == -ESTALE && f.served == 3 && etag[0] == '\0',
	      "cond PUT: 412 after a retry, the key holds other bytes: -ESTALE (rc %d)", rc);
}

/* What the client logs while fn runs (stderr read back from a file). */
static void logged_during(void (*fn)(void *), void *arg, char *out, size_t outlen)
{
	FILE *tmp = tmpfile();
	int saved = dup(STDERR_FILENO);
	out[0] = '\0';
	if (!tmp || saved < 0)
		return;
	fflush(stderr);
	dup2(fileno(tmp), STDERR_FILENO);
	fn(arg);
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	rewind(tmp);
	size_t n = fread(out, 1, outlen - 1, tmp);
	out[n] = '\0';
	fclose(tmp);
}

struct region_call {
	struct s3 *s;
	bool get;
	int rc;
};

static void region_call_run(void *arg)
{
	struct region_call *c = arg;
	char buf[8];
	size_t got;
	c->rc = c->get ? s3_get(c->s, "bkt", "k", 0, 4, NULL, buf, &got)
		       : s3_bucket_check(c->s, "bkt");
}

static void test_region(void)
{
	static const char *const moved[] = {
		"HTTP/1.1 301 Moved Permanently\r\n" CLOSE
		"x-amz-bucket-region: eu-west-1\r\nContent-Length: 0\r\n\r\n",
	};
	static const char *const malformed[] = {
		"HTTP/1.1 400 Bad Request\r\n" CLOSE "Content-Length: 83\r\n\r\n"
		"<Error><Code>AuthorizationHeaderMalformed</Code><Region>ap-south-1</Region>"
		"</Error>",
	};
	static const char *const same[] = {
		"HTTP/1.1 403 Forbidden\r\n" CLOSE
		"x-amz-bucket-region: default\r\nContent-Length: 0\r\n\r\n",
	};
	struct { const char *const *script; bool get; const char *want; const char *what; }
	cases[] = {
		{ moved, false, "the bucket is in region eu-west-1, not default (s3.region)",
		  "a HEAD of the bucket answered 301 with x-amz-bucket-region" },
		{ malformed, true, "the bucket is in region ap-south-1, not default (s3.region)",
		  "a GET answered 400 AuthorizationHeaderMalformed with <Region>" },
		{ same, false, NULL, "a refusal naming the configured region" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct stats st;
		struct fake f;
		char log[4096];
		stats_init(&st);
		fake_start(&f, cases[i].script, 1);
		struct region_call c = { client_for(f.port, &st), cases[i].get, 0 };
		logged_during(region_call_run, &c, log, sizeof log);
		fake_stop(&f);
		bool named = strstr(log, "the bucket is in region") != NULL;
		CHECK(c.rc < 0 && (cases[i].want ? strstr(log, cases[i].want) != NULL : !named),
		      "region: %s: the error line %s (rc %d): %.*s", cases[i].what,
		      cases[i].want ? "names the bucket's region" : "names no other region",
		      c.rc, (int)strcspn(log, "\n"), log);
		s3_free(c.s);
		stats_release(&st);
	}
}

int main(void)
{
	log_init("test_s3", 0);
	test_engine();
	test_cancel();
	test_virtual_host();
	test_cond_put();
	test_region();
	return unit_exit();
}
