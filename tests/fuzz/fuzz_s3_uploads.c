/*
 * fuzz_s3_uploads.c — the multipart answers (sync/s3/s3_int.h): the
 * ListMultipartUploads page parser (s3_xml_uploads_parse) on any bytes,
 * and the completed object's ETag (s3_mpu_etag) over part ETags taken
 * from the answer's UploadIds, as UploadPart answers would give them.
 * 0 with terminated markers (a truncated page has a next key), fn's
 * value, -EOVERFLOW, -EPROTO or -ENOMEM; every upload has a key and an
 * id; the ETag is "" or 32 hex digits, '-' and the part count.
 */
#include "sync/s3/s3_int.h"
#include "tests/fuzz/fuzz.h"

#include <ctype.h>
#include <errno.h>

#define MAX_PARTS 16

struct seen {
	struct s3_part parts[MAX_PARTS];
	size_t n;
};

static int on_upload(void *ctx, const char *key, const char *id, int64_t initiated_ns)
{
	struct seen *s = ctx;
	FUZZ_CHECK(key && id, "upload without key or id");
	FUZZ_CHECK(initiated_ns >= -1, "initiated %lld", (long long)initiated_ns);
	if (s->n == MAX_PARTS)
		return 9;
	struct s3_part *p = &s->parts[s->n];
	p->number = (unsigned)++s->n;
	s3_etag_copy(p->etag, id, strlen(id));
	return 0;
}

static void check_etag(const struct seen *s)
{
	char etag[72];
	memset(etag, 'x', sizeof etag);
	s3_mpu_etag(s->parts, s->n, etag);
	FUZZ_CHECK(memchr(etag, '\0', sizeof etag), "mpu ETag not terminated");
	if (!etag[0])
		return;
	for (int i = 0; i < 32; i++)
		FUZZ_CHECK(isxdigit((unsigned char)etag[i]), "mpu ETag '%s'", etag);
	char tail[24];
	snprintf(tail, sizeof tail, "-%zu", s->n);
	FUZZ_CHECK(strcmp(etag + 32, tail) == 0, "mpu ETag '%s' for %zu parts", etag, s->n);
	char *body = s3_xml_complete_body(s->parts, s->n);
	FUZZ_CHECK(!body || strstr(body, "</CompleteMultipartUpload>"), "complete body cut");
	free(body);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char next_key[1024], next_id[1024];
	bool truncated = false;
	struct seen s = { .n = 0 };
	int rc = s3_xml_uploads_parse((const char *)data, size, on_upload, &s, next_key,
				      sizeof next_key, next_id, sizeof next_id, &truncated);
	FUZZ_CHECK(rc == 0 || rc == 9 || rc == -EOVERFLOW || rc == -EPROTO || rc == -ENOMEM,
		   "rc %d", rc);
	if (rc == 0) {
		FUZZ_CHECK(memchr(next_key, '\0', sizeof next_key) &&
			   memchr(next_id, '\0', sizeof next_id), "markers not terminated");
		FUZZ_CHECK(!truncated || next_key[0], "truncated without a next key");
	}
	check_etag(&s);
	return 0;
}
