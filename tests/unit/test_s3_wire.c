/*
 * test_s3_wire.c — unit tests of the S3 client's pure wire formats
 * (sync/s3/s3_int.h: s3_wire.c, s3_sign.c): key encoding, SigV4, XML
 * decoding and ListObjectsV2 parsing (and its speed), dates, ETags, the
 * errno mapping (curl's codes, HTTP statuses, S3's codes), retry
 * classification and backoff. No socket, no server.
 */
#include "sync/s3/s3_int.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "tests/unit/unit.h"

static void test_encode(void)
{
	char out[256];
	int n = s3_url_encode("a b+c%d(e)/\xc3\xbc~*&<", true, out, sizeof out);
	CHECK(n > 0 && strcmp(out, "a%20b%2Bc%25d%28e%29/%C3%BC~%2A%26%3C") == 0,
	      "encode: space %%20, '+' '%%' '(' '*' '&' '<' encoded, '/' '~' kept, UTF-8 bytes");
	s3_url_encode("a/b=c", false, out, sizeof out);
	CHECK(strcmp(out, "a%2Fb%3Dc") == 0, "encode: '/' and '=' encoded in query values");
	s3_url_encode("AZaz09-._~", false, out, sizeof out);
	CHECK(strcmp(out, "AZaz09-._~") == 0, "encode: unreserved characters kept");
	CHECK(s3_url_encode("abc", true, out, 4) == 3 &&
	      s3_url_encode("abc", true, out, 3) == -ENAMETOOLONG &&
	      s3_url_encode(" ", true, out, 3) == -ENAMETOOLONG,
	      "encode: exact fit works, one byte short is -ENAMETOOLONG");
}

static void test_sign(void)
{
	/* The GET example of AWS's SigV4-for-S3 documentation. */
	const char *lines[] = {
		"Host: examplebucket.s3.amazonaws.com",
		"Range: bytes=0-9",
		"x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		"X-Amz-Date: 20130524T000000Z",
	};
	char auth[512];
	int rc = s3_sign_v4("GET", "/test.txt", "", lines, 4, "20130524T000000Z",
			    "us-east-1", "AKIAIOSFODNN7EXAMPLE",
			    "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", auth, sizeof auth);
	CHECK(rc == 0 && strcmp(auth, "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/"
				"20130524/us-east-1/s3/aws4_request, SignedHeaders=host;"
				"range;x-amz-content-sha256;x-amz-date, Signature="
				"f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41") == 0,
	      "sign: AWS's documented GET example");
	/* Header order must not matter, and "a" sorts before "a-b" (curl 7.88
	 * gets this wrong). */
	const char *l1[] = { "Host: h", "x-amz-date: 20130524T000000Z",
			     "x-amz-meta-a: 1", "x-amz-meta-a-b:  2   3 " };
	const char *l2[] = { "x-amz-meta-a-b: 2 3", "X-Amz-Meta-A:1",
			     "x-amz-date: 20130524T000000Z", "host: h" };
	char a1[512], a2[512];
	int r1 = s3_sign_v4("PUT", "/b/k", "", l1, 4, "20130524T000000Z", "r", "AK", "SK", a1, sizeof a1);
	int r2 = s3_sign_v4("PUT", "/b/k", "", l2, 4, "20130524T000000Z", "r", "AK", "SK", a2, sizeof a2);
	CHECK(r1 == 0 && r2 == 0 && strcmp(a1, a2) == 0 &&
	      strstr(a1, "SignedHeaders=host;x-amz-date;x-amz-meta-a;x-amz-meta-a-b,"),
	      "sign: headers sorted by name, values trimmed and spaces collapsed");
	CHECK(s3_sign_v4("GET", "/", "", l1, 4, "20130524T000000Z", "r", "AK", "SK", a1, 40) == -EOVERFLOW,
	      "sign: small output is -EOVERFLOW");
}

static void test_xml_decode(void)
{
	char out[64];
	const char *in = "a&amp;b&lt;c&gt;d&quot;e&apos;f&#38;g&#x3C;&#252;&#x1F600;";
	int n = s3_xml_decode(in, strlen(in), out, sizeof out);
	CHECK(n > 0 && strcmp(out, "a&b<c>d\"e'f&g<\xc3\xbc\xf0\x9f\x98\x80") == 0,
	      "xml: named, decimal and hex entities (to UTF-8)");
	CHECK(s3_xml_decode("a&foo;", 6, out, sizeof out) == -EINVAL &&
	      s3_xml_decode("a&amp", 5, out, sizeof out) == -EINVAL &&
	      s3_xml_decode("&#0;", 4, out, sizeof out) == -EINVAL &&
	      s3_xml_decode("&#xD800;", 8, out, sizeof out) == -EINVAL,
	      "xml: unknown, unterminated and invalid entities rejected");
	CHECK(s3_xml_decode("abcd", 4, out, 4) == -EOVERFLOW &&
	      s3_xml_decode("abcd", 4, out, 5) == 4, "xml: output bound respected");
	/* Found by fuzz_s3_list: a raw NUL decoded into a key "" (or "a" for
	 * "a\0b", another object's key). XML cannot hold U+0000. */
	CHECK(s3_xml_decode("a\0b", 3, out, sizeof out) == -EINVAL &&
	      s3_xml_decode("\0", 1, out, sizeof out) == -EINVAL,
	      "xml: a NUL byte in character data rejected");
}

struct collect {
	int n;
	char keys[8][64];
	uint64_t sizes[8];
	char etags[8][72];
	int64_t mtimes[8];
	int stop_at;
};

static int collect_fn(void *ctx, const struct obj_meta *o)
{
	struct collect *c = ctx;
	if (c->n == c->stop_at)
		return 42;
	if (c->n < 8 && (o->flags & OBJ_FROM_SCAN) && strcmp(o->bucket, "bkt") == 0) {
		snprintf(c->keys[c->n], 64, "%s", o->key);
		c->sizes[c->n] = o->size;
		snprintf(c->etags[c->n], 72, "%s", o->etag);
		c->mtimes[c->n] = o->mtime_ns;
	}
	c->n++;
	return 0;
}

static const char list_doc[] =
	"<?xml version=\"1.0\" encoding=\"UTF-8\"?><ListBucketResult "
	"xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Name>bkt</Name>"
	"<Prefix></Prefix><MaxKeys>1000</MaxKeys><IsTruncated>true</IsTruncated>"
	"<Contents><Key>a b&amp;c&lt;d&gt;&quot;&apos;</Key><LastModified>"
	"2026-11-22T03:22:32.449Z</LastModified><ETag>&quot;764efa883dda1e11db47671c4a3bbd9e&quot;"
	"</ETag><Size>3</Size><StorageClass>STANDARD</StorageClass></Contents>"
	"<Contents><Key>\xc3\xbc/&#252;</Key><LastModified>1970-01-01T00:00:01.000Z"
	"</LastModified><ETag>&quot;abc-2&quot;</ETag><Size>18446744073709551615</Size>"
	"<Owner><ID>t</ID><DisplayName>T</DisplayName></Owner></Contents>"
	"<Contents><Key>KeyCount</Key><Size>0</Size></Contents>"
	"<KeyCount>3</KeyCount><ContinuationToken>old</ContinuationToken>"
	"<NextContinuationToken>tok/+=&amp;x</NextContinuationToken></ListBucketResult>";

static void test_list_parse(void)
{
	struct collect c = { .stop_at = -1 };
	char tok[64];
	bool tr = false;
	int rc = s3_xml_list_parse(list_doc, strlen(list_doc), "bkt", collect_fn,
				   &c, tok, sizeof tok, &tr);
	CHECK(rc == 0 && c.n == 3, "list: three entries");
	CHECK(strcmp(c.keys[0], "a b&c<d>\"'") == 0 &&
	      strcmp(c.keys[1], "\xc3\xbc/\xc3\xbc") == 0 &&
	      strcmp(c.keys[2], "KeyCount") == 0, "list: keys decoded");
	CHECK(c.sizes[0] == 3 && c.sizes[1] == UINT64_MAX && c.sizes[2] == 0,
	      "list: sizes");
	CHECK(strcmp(c.etags[0], "764efa883dda1e11db47671c4a3bbd9e") == 0 &&
	      strcmp(c.etags[1], "abc-2") == 0 && c.etags[2][0] == '\0',
	      "list: ETags without quotes");
	CHECK(c.mtimes[0] == 1795317752449000000LL && c.mtimes[1] == 1000000000LL,
	      "list: LastModified in ns");
	CHECK(tr && strcmp(tok, "tok/+=&x") == 0,
	      "list: IsTruncated and NextContinuationToken (not ContinuationToken)");

	struct collect c2 = { .stop_at = 1 };
	rc = s3_xml_list_parse(list_doc, strlen(list_doc), "bkt", collect_fn,
			       &c2, tok, sizeof tok, &tr);
	CHECK(rc == 42 && c2.n == 1, "list: callback's nonzero return stops the page");
	rc = s3_xml_list_parse(list_doc, strlen(list_doc), "bkt", collect_fn,
			       &c, tok, 4, &tr);
	CHECK(rc == -EOVERFLOW, "list: token longer than the buffer is -EOVERFLOW");
	const char *bad = "<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>";
	CHECK(s3_xml_list_parse(bad, strlen(bad), "bkt", collect_fn, &c, tok,
				sizeof tok, &tr) == -EPROTO,
	      "list: truncated without a token is -EPROTO");
	const char *err = "<Error><Code>NoSuchBucket</Code></Error>";
	CHECK(s3_xml_list_parse(err, strlen(err), "bkt", collect_fn, &c, tok,
				sizeof tok, &tr) == -EPROTO,
	      "list: an error document is -EPROTO");
	static const char nul[] = "<ListBucketResult><Contents><Key>\0\0a</Key><Size>1</Size>"
				  "</Contents></ListBucketResult>";
	struct collect c4 = { .stop_at = -1 };
	CHECK(s3_xml_list_parse(nul, sizeof nul - 1, "bkt", collect_fn, &c4, tok,
				sizeof tok, &tr) == -EPROTO && c4.n == 0,
	      "list: a key with a NUL byte is -EPROTO (no empty or cut key)");
	const char *cut = "<ListBucketResult><Contents><Key>a</Key>";
	CHECK(s3_xml_list_parse(cut, strlen(cut), "bkt", collect_fn, &c, tok,
				sizeof tok, &tr) == -EPROTO,
	      "list: a cut document is -EPROTO");
	const char *empty = "<ListBucketResult><IsTruncated>false</IsTruncated><KeyCount>0</KeyCount></ListBucketResult>";
	struct collect c3 = { .stop_at = -1 };
	CHECK(s3_xml_list_parse(empty, strlen(empty), "bkt", collect_fn, &c3,
				tok, sizeof tok, &tr) == 0 && c3.n == 0 && !tr &&
	      tok[0] == '\0', "list: empty page");
}

static int count_fn(void *ctx, const struct obj_meta *o)
{
	(*(size_t *)ctx) += o->key[0] != '\0';
	return 0;
}

static void test_list_speed(void)
{
	size_t cap = 1000 * 400 + 256, o = 0;
	char *doc = malloc(cap);
	o += (size_t)snprintf(doc + o, cap - o, "<ListBucketResult><IsTruncated>false</IsTruncated>");
	for (int i = 0; i < 1000; i++)
		o += (size_t)snprintf(doc + o, cap - o,
			"<Contents><Key>dir/sub dir/file-%06d &amp; more.txt</Key>"
			"<LastModified>2026-11-22T03:22:32.449Z</LastModified>"
			"<ETag>&quot;764efa883dda1e11db47671c4a3bbd9e&quot;</ETag>"
			"<Size>%d</Size><StorageClass>STANDARD</StorageClass>"
			"<Owner><ID>tester</ID><DisplayName>T</DisplayName></Owner></Contents>",
			i, i);
	o += (size_t)snprintf(doc + o, cap - o, "</ListBucketResult>");
	char tok[64];
	bool tr;
	size_t n = 0;
	double t0 = unit_now_s();
	int rounds = 200, rc = 0;
	for (int r = 0; r < rounds && !rc; r++)
		rc = s3_xml_list_parse(doc, o, "bkt", count_fn, &n, tok, sizeof tok, &tr);
	double dt = unit_now_s() - t0;
	double rate = n / dt;
	/* A figure, not a check: a time depends on the machine's load (RGW
	 * itself serves about 19K keys/s). */
	printf("# list parse: %.0f keys/s (%d pages of 1,000)\n", rate, rounds);
	CHECK(rc == 0 && n == (size_t)rounds * 1000,
	      "list: %d pages of 1,000 keys parsed, every key counted (%zu)", rounds, n);
	free(doc);
}

static void test_times(void)
{
	CHECK(s3_time_iso("2026-11-22T03:22:32.449Z", 24) == 1795317752449000000LL,
	      "time: ISO 8601 with milliseconds");
	CHECK(s3_time_iso("2026-11-22T03:22:32.449000+00:00", 32) == 1795317752449000000LL,
	      "time: ISO 8601 with +00:00");
	CHECK(s3_time_iso("2000-02-29T00:00:00Z", 20) == 951782400LL * 1000000000,
	      "time: leap day");
	CHECK(s3_time_iso("2026-13-22T03:22:32Z", 20) == -1 &&
	      s3_time_iso("2026-11-22", 10) == -1, "time: bad ISO dates rejected");
	CHECK(s3_time_http("Sun, 22 Nov 2026 03:22:32 GMT", 29) == 1795317752LL * 1000000000,
	      "time: RFC 1123");
	CHECK(s3_time_http("Sun, 22 Foo 2026 03:22:32 GMT", 29) == -1,
	      "time: bad RFC 1123 rejected");
	/* Past 2262-04-11T23:47:16Z a time does not fit in int64 ns: refused
	 * (-1, the caller keeps no mtime), not clamped. The inputs the
	 * fuzzer found (a signed overflow before): */
	CHECK(s3_time_iso("4052-11-22T03:22:34", 19) == -1 &&
	      s3_time_http("Sat, 22 Nov 9999 01:40:52 GMT", 29) == -1,
	      "time: years past 2262 refused (no overflow)");
	CHECK(s3_time_iso("2262-04-11T23:47:15.999999999Z", 30) ==
	      9223372035999999999LL &&
	      s3_time_iso("2262-04-11T23:47:16Z", 20) == -1,
	      "time: the last representable second kept, the next one refused");
	const char *far = "<ListBucketResult><Contents><Key>k</Key><LastModified>"
			  "4052-11-22T03:22:34</LastModified><Size>1</Size>"
			  "</Contents></ListBucketResult>";
	struct collect c = { .stop_at = -1 };
	char tok[8];
	bool tr;
	CHECK(s3_xml_list_parse(far, strlen(far), "bkt", collect_fn, &c, tok,
				sizeof tok, &tr) == 0 && c.n == 1 && c.mtimes[0] == 0 &&
	      c.sizes[0] == 1, "time: a listing dated 4052 gives the entry without mtime");
}

static void test_etag(void)
{
	char e[72];
	s3_etag_copy(e, "\"abc\"", 5);
	bool a = strcmp(e, "abc") == 0;
	s3_etag_copy(e, "W/\"abc-3\"", 9);
	bool b = strcmp(e, "abc-3") == 0;
	s3_etag_copy(e, "plain", 5);
	bool c = strcmp(e, "plain") == 0;
	char big[100];
	memset(big, 'x', sizeof big);
	s3_etag_copy(e, big, sizeof big);
	CHECK(a && b && c && e[0] == '\0', "etag: quotes and W/ stripped, too long -> empty");
}

static void test_errno_map(void)
{
	CHECK(s3_errno_map(CURLE_OK, 200, "") == 0 && s3_errno_map(CURLE_OK, 206, "") == 0 &&
	      s3_errno_map(CURLE_OK, 204, "") == 0, "errno: 2xx is success");
	CHECK(s3_errno_map(CURLE_OK, 404, "NoSuchKey") == -ENOENT &&
	      s3_errno_map(CURLE_OK, 404, "NoSuchBucket") == -ENOENT &&
	      s3_errno_map(CURLE_OK, 404, "") == -ENOENT, "errno: 404 ENOENT");
	CHECK(s3_errno_map(CURLE_OK, 403, "AccessDenied") == -EACCES &&
	      s3_errno_map(CURLE_OK, 403, "") == -EACCES &&
	      s3_errno_map(CURLE_OK, 403, "SignatureDoesNotMatch") == -EACCES,
	      "errno: 403 EACCES");
	CHECK(s3_errno_map(CURLE_OK, 412, "") == -ESTALE &&
	      s3_errno_map(CURLE_OK, 412, "PreconditionFailed") == -ESTALE,
	      "errno: 412 ESTALE");
	CHECK(s3_errno_map(CURLE_OK, 416, "InvalidRange") == -ERANGE,
	      "errno: 416 ERANGE (read past the end)");
	CHECK(s3_errno_map(CURLE_OK, 500, "") == -EIO && s3_errno_map(CURLE_OK, 503, "SlowDown") == -EIO &&
	      s3_errno_map(CURLE_OK, 409, "BucketNotEmpty") == -EIO &&
	      s3_errno_map(CURLE_OPERATION_TIMEDOUT, 0, "") == -EIO &&
	      s3_errno_map(CURLE_RECV_ERROR, 0, "") == -EIO, "errno: 5xx, timeouts, others EIO");
	CHECK(s3_errno_map(CURLE_COULDNT_CONNECT, 0, "") == -EHOSTUNREACH &&
	      s3_errno_map(CURLE_COULDNT_RESOLVE_HOST, 0, "") == -EHOSTUNREACH,
	      "errno: refused / unresolvable EHOSTUNREACH");
	CHECK(s3_errno_map(CURLE_OK, 400, "KeyTooLongError") == -ENAMETOOLONG &&
	      s3_errno_map(CURLE_OK, 400, "") == -EINVAL, "errno: 400s");
	CHECK(s3_errno_map(CURLE_OK, 200, "InternalError") == -EIO &&
	      s3_errno_map(CURLE_OK, 200, "NoSuchUpload") == -ENOENT &&
	      s3_errno_map(CURLE_OK, 200, "PreconditionFailed") == -ESTALE &&
	      s3_errno_map(CURLE_OK, 200, "Error") == -EIO,
	      "errno: an error document in a 200 answer maps by its code");
	static const char *const errs[] = {
		"<Error><Code>InternalError</Code></Error>",
		"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\n  <Error>\n<Code>SlowDown</Code></Error>",
		"\r\n   <Error xmlns=\"x\"><Code>A</Code></Error>",
	};
	static const char *const oks[] = {
		"<?xml version=\"1.0\"?><CopyObjectResult><ETag>\"e\"</ETag></CopyObjectResult>",
		"<CompleteMultipartUploadResult><Errors><Error>x</Error></Errors>"
		"</CompleteMultipartUploadResult>",
		"<ErrorDocument/>", "", "   ", "<?xml version=\"1.0\"",
	};
	bool all = true;
	for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++)
		all &= s3_body_is_error(errs[i], strlen(errs[i]));
	for (size_t i = 0; i < sizeof oks / sizeof oks[0]; i++)
		all &= !s3_body_is_error(oks[i], strlen(oks[i]));
	CHECK(all && !s3_body_is_error(NULL, 0),
	      "error body: told by its root element, after a declaration and blanks");
}

static void test_retry(void)
{
	CHECK(s3_retryable(CURLE_COULDNT_CONNECT, 0, "") &&
	      s3_retryable(CURLE_OPERATION_TIMEDOUT, 0, "") &&
	      s3_retryable(CURLE_RECV_ERROR, 0, "") &&
	      s3_retryable(CURLE_GOT_NOTHING, 0, ""), "retry: connection errors, timeouts");
	CHECK(s3_retryable(CURLE_OK, 500, "") && s3_retryable(CURLE_OK, 502, "") &&
	      s3_retryable(CURLE_OK, 503, "") && s3_retryable(CURLE_OK, 504, "") &&
	      s3_retryable(CURLE_OK, 429, "") && s3_retryable(CURLE_OK, 400, "RequestTimeout") &&
	      s3_retryable(CURLE_OK, 503, "SlowDown") &&
	      s3_retryable(CURLE_OK, 200, "InternalError"),
	      "retry: 5xx, 429, SlowDown, InternalError in a 200 answer");
	CHECK(!s3_retryable(CURLE_OK, 404, "NoSuchKey") && !s3_retryable(CURLE_OK, 403, "") &&
	      !s3_retryable(CURLE_OK, 412, "") && !s3_retryable(CURLE_OK, 200, "") &&
	      !s3_retryable(CURLE_OK, 200, "NoSuchUpload") &&
	      !s3_retryable(CURLE_WRITE_ERROR, 0, "") &&
	      !s3_retryable(CURLE_ABORTED_BY_CALLBACK, 0, ""),
	      "retry: not on 4xx, success or our own aborts");
	uint64_t rng = 12345;
	bool bounded = true, jitter = false;
	unsigned total = 0;
	for (unsigned a = 0; a < 20; a++) {
		unsigned d = S3_BACKOFF_BASE_MS << (a < 8 ? a : 8);
		if (d > S3_BACKOFF_CAP_MS)
			d = S3_BACKOFF_CAP_MS;
		unsigned x = s3_backoff_ms(a, &rng), y = s3_backoff_ms(a, &rng);
		bounded &= x >= d / 2 && x <= d && y >= d / 2 && y <= d;
		jitter |= x != y;
		if (a < 4)
			total += x;
	}
	CHECK(bounded && jitter, "backoff: exponential, capped, jittered within [d/2, d]");
	CHECK(total <= 1500, "backoff: four retries sleep at most 1.5 s");
}

int main(void)
{
	log_init("test_s3_wire", 0);
	test_encode();
	test_sign();
	test_xml_decode();
	test_list_parse();
	test_list_speed();
	test_times();
	test_etag();
	test_errno_map();
	test_retry();
	return unit_exit();
}
