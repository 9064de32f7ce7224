/*
 * fuzz_s3_answer.c — the small S3 answers on any bytes, the way the
 * request engine reads them (sync/s3/s3_engine.c, s3_req.c, s3_mpu.c): an
 * error body's <Code> into the errno mapping and the retry decision
 * (also as an error document in a 200 answer: s3_body_is_error), the
 * <ETag> of a CopyObject or CompleteMultipartUpload answer
 * (req_body_etag), and the <UploadId> of CreateMultipartUpload; then the
 * header values a GET or HEAD answer carries, from the same bytes: ETag
 * (s3_etag_copy) and Last-Modified (s3_time_http, refused past 2262), and
 * the ISO dates of listings (s3_time_iso).
 */
#include "sync/s3/s3_int.h"
#include "sync/s3/s3_req.h"
#include "tests/fuzz/fuzz.h"

#include <errno.h>

static void error_body(const char *body, size_t len)
{
	static const long statuses[] = { 200, 206, 304, 400, 403, 404, 409, 412, 416,
					  500, 503 };
	const char *t;
	size_t tl;
	char code[64] = "";
	if (s3_xml_find(body, len, "Code", &t, &tl)) {
		FUZZ_CHECK(t >= body && t + tl <= body + len, "<Code> outside the body");
		if (tl < sizeof code) {
			memcpy(code, t, tl);
			code[tl] = '\0';
		}
	}
	for (size_t i = 0; i < sizeof statuses / sizeof statuses[0]; i++) {
		int e = s3_errno_map(0, statuses[i], code);
		FUZZ_CHECK(e <= 0, "errno %d", e);
		/* A 2xx with a code is an error document in a 200 answer. */
		FUZZ_CHECK((e == 0) == (statuses[i] < 300 && !code[0]), "status %ld, code "
			   "\"%s\" -> %d", statuses[i], code, e);
		(void)s3_retryable(0, statuses[i], code);
	}
	/* The engine's test for an <Error> document in a 200 answer: it
	 * reads only the body, and says yes only to one that has "<Error". */
	if (s3_body_is_error(body, len))
		FUZZ_CHECK(len >= 7 && memmem(body, len, "<Error", 6), "an error body "
			   "without <Error");
}

static void etag_body(const char *body, size_t len)
{
	struct s3_req r;
	memset(&r, 0, sizeof r);
	r.body = (char *)body;
	r.body_len = len;
	char etag[72];
	memset(etag, 'x', sizeof etag);
	req_body_etag(&r, etag);
	FUZZ_CHECK(memchr(etag, '\0', sizeof etag), "ETag not terminated");

	const char *t;
	size_t tl;
	char id[1024];
	if (s3_xml_find(body, len, "UploadId", &t, &tl)) {
		int n = s3_xml_decode(t, tl, id, sizeof id);
		FUZZ_CHECK(n == -EOVERFLOW || n == -EINVAL || (n >= 0 && (size_t)n == strlen(id)),
			   "decoded UploadId: %d", n);
	}
}

static void header_values(const char *v, size_t n)
{
	char etag[72];
	s3_etag_copy(etag, v, n);
	FUZZ_CHECK(strlen(etag) < sizeof etag, "header ETag");
	int64_t ns = s3_time_http(v, n);
	FUZZ_CHECK(ns == -1 || ns >= 0, "Last-Modified %lld", (long long)ns);
	ns = s3_time_iso(v, n);
	FUZZ_CHECK(ns == -1 || ns >= 0, "ISO date %lld", (long long)ns);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* The engine hands bodies over as they came; without a body it
	 * passes "" and 0. */
	const char *body = size ? (const char *)data : "";
	error_body(body, size);
	etag_body(body, size);
	header_values(body, size);
	return 0;
}
