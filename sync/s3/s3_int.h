/*
 * s3_int.h — the pure internals of the S3 client (s3_wire.c, what goes on
 * the wire; s3_sign.c, SigV4), the bottom layer of s3_req.h's list, used
 * by the files above them and by the unit tests. No other module includes
 * this. Every function here is pure: no I/O, no locks, no curl handles, so
 * any thread may call them.
 *
 * Tests: test_s3_wire.c, test_s3.c, test_s3_mpu.c, test_s3_tagging.c,
 * tests/fuzz/fuzz_s3_answer.c, fuzz_s3_list.c, fuzz_s3_tagging.c,
 * fuzz_s3_uploads.c.
 */
#ifndef FACETFS_S3_INT_H
#define FACETFS_S3_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sync/s3/s3_http.h"

/* AWS SigV4 (s3_sign.c): the Authorization value of a request. path is
 * the encoded path as sent, query the encoded query with parameters in
 * sorted order ("" for none); lines are the "Name: value" headers to sign
 * and must include Host, x-amz-date (amzdate, "YYYYMMDDTHHMMSSZ") and
 * x-amz-content-sha256 (its value is the payload hash signed). 0, -EINVAL,
 * -ENOMEM, -EOVERFLOW (auth too small) or -EIO. */
int s3_sign_v4(const char *method, const char *path, const char *query,
	       const char *const *lines, size_t n, const char *amzdate,
	       const char *region, const char *access_key,
	       const char *secret_key, char *auth, size_t authlen);

/* Percent-encode in (AWS rules: A-Za-z0-9-._~ kept, '/' kept when
 * keep_slash, every other byte %XX upper-case) into out, NUL-terminated.
 * Returns the length, or -ENAMETOOLONG if out is too small. */
int s3_url_encode(const char *in, bool keep_slash, char *out, size_t outlen);

/* Decode XML character data in[0..n) (&amp; &lt; &gt; &quot; &apos; &#N;
 * &#xH;) into out, NUL-terminated. Returns the length, -EOVERFLOW if out is
 * too small, -EINVAL on a malformed entity or a NUL byte in the input (so
 * the result never holds a NUL before its end). */
int s3_xml_decode(const char *in, size_t n, char *out, size_t outlen);

/* Find the first <tag>text</tag> in xml[0..len): *text points at the raw
 * (still encoded) text, *tlen its length. false if absent. */
bool s3_xml_find(const char *xml, size_t len, const char *tag,
		 const char **text, size_t *tlen);

/* Parse one ListObjectsV2 answer, calling fn per <Contents> (see s3.h).
 * Sets *truncated and next_token before the first call of fn. Returns 0,
 * fn's nonzero value, -EOVERFLOW (token too long), -EPROTO (bad document)
 * or -ENOMEM. */
int s3_xml_list_parse(const char *xml, size_t len, const char *bucket,
		      s3_list_fn fn, void *ctx, char *next_token, size_t ntlen,
		      bool *truncated);

/* Parse a GetObjectTagging answer (<Tagging><TagSet><Tag><Key>k</Key>
 * <Value>v</Value></Tag>...</TagSet></Tagging>) into a malloc'ed array of
 * decoded name/value pairs in document order (a missing or empty <Value>
 * gives ""). *tags and *n are set only on success (*tags NULL when there is no
 * tag); the caller frees each name and value and the array. 0, -EPROTO (not
 * a Tagging document, a Tag without Key, a bad entity) or -ENOMEM. */
int s3_xml_tagging_parse(const char *xml, size_t len, struct obj_kv **tags,
			 size_t *n);

/* Parse one ListMultipartUploads answer, calling fn per <Upload> (key,
 * upload id, initiated) in document order. Sets *truncated and the
 * markers of the next page (next_key, next_id; "" when absent) before the
 * first call. 0, fn's nonzero value, -EOVERFLOW (a marker or key too long),
 * -EPROTO (not such a document; truncated without markers) or -ENOMEM. */
int s3_xml_uploads_parse(const char *xml, size_t len, s3_upload_fn fn,
			 void *ctx, char *next_key, size_t nklen, char *next_id,
			 size_t nilen, bool *truncated);

/* The ETag S3 gives the object completed from parts[0..n): the hex MD5 of
 * the parts' binary MD5s, "-", n. out[72] is "" when a part's ETag is not
 * 32 hex digits (not an MD5: it cannot be known). */
void s3_mpu_etag(const struct s3_part *parts, size_t n, char out[72]);

/* The CompleteMultipartUpload request body for parts[0..n): malloc'ed
 * NUL-terminated XML (the caller frees), NULL on -ENOMEM. */
char *s3_xml_complete_body(const struct s3_part *parts, size_t n);

/* "Sat, 22 Nov 2026 01:40:52 GMT" (RFC 1123) -> ns since epoch, -1 if bad
 * (also for dates before 1970 or after 2262-04-11T23:47:15Z, which do not
 * fit: refused, not clamped) */
int64_t s3_time_http(const char *s, size_t n);
/* "2026-11-22T01:40:52.940Z" (ISO 8601, UTC) -> ns since epoch, -1 if bad
 * (same range) */
int64_t s3_time_iso(const char *s, size_t n);

/* Copy an ETag without surrounding quotes (and without a W/ prefix) into
 * out[72]; too long -> "" */
void s3_etag_copy(char out[72], const char *in, size_t n);

/* Whether an answer body is an S3 error document: its root element (after
 * any XML declaration and blanks) is <Error>. S3 answers some requests
 * (CopyObject, UploadPartCopy, CompleteMultipartUpload) with 200 and such a
 * body when they fail after the status line went out. */
bool s3_body_is_error(const char *body, size_t len);

/* What a finished attempt means. curl_code is a CURLcode (0 = a response
 * came), status the HTTP status, s3_code the <Code> of an error body ("" if
 * none). A 2xx status with a code is an error document in a 200 answer:
 * mapped and retried by its code alone. */
bool s3_retryable(int curl_code, long status, const char *s3_code);
/* The one place HTTP/curl failures become errnos: 0 for 2xx without a
 * code, else -errno (-ERANGE for 416, which s3_get() reads as "past the
 * end"; -EIO for a code in a 2xx answer that the table does not know). */
int  s3_errno_map(int curl_code, long status, const char *s3_code);

/* Delay before retry number attempt (0 = first retry): exponential from
 * S3_BACKOFF_BASE_MS, capped at S3_BACKOFF_CAP_MS, with jitter drawn from
 * *rng (any nonzero seed): the result is in [d/2, d]. */
#define S3_BACKOFF_BASE_MS 100u
#define S3_BACKOFF_CAP_MS  2000u
unsigned s3_backoff_ms(unsigned attempt, uint64_t *rng);

#endif
