/* test_s3_mpu.c — unit tests of the multipart pieces of the S3 client that
 * need no server (sync/s3_int.h): the ListMultipartUploads parser, the
 * CompleteMultipartUpload body and the "-N" ETag computed from the parts. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sync/s3_int.h"
#include "tests/unit/unit.h"

struct seen {
	char keys[8][64], ids[8][64];
	int64_t when[8];
	int n, stop_at;
};

static int on_upload(void *ctx, const char *key, const char *id, int64_t ns)
{
	struct seen *s = ctx;
	if (s->n < 8) {
		snprintf(s->keys[s->n], sizeof s->keys[0], "%s", key);
		snprintf(s->ids[s->n], sizeof s->ids[0], "%s", id);
		s->when[s->n] = ns;
	}
	s->n++;
	return s->stop_at && s->n == s->stop_at ? 7 : 0;
}

static int parse(const char *xml, struct seen *s, char *nk, char *ni,
		 bool *tr)
{
	return s3_xml_uploads_parse(xml, strlen(xml), on_upload, s, nk, 256,
				    ni, 256, tr);
}

static void test_list_parse(void)
{
	const char *xml =
		"<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
		"<ListMultipartUploadsResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
		"<Bucket>b</Bucket><NextKeyMarker>b&amp;c</NextKeyMarker>"
		"<NextUploadIdMarker>2~xyz</NextUploadIdMarker>"
		"<IsTruncated>true</IsTruncated>"
		"<Upload><Key>a b</Key><UploadId>2~abc</UploadId>"
		"<Initiated>2026-11-23T08:00:00.000Z</Initiated></Upload>"
		"<Upload><Key>b&amp;c</Key><UploadId>2~xyz</UploadId></Upload>"
		"</ListMultipartUploadsResult>";
	struct seen s = { 0 };
	char nk[256], ni[256];
	bool tr = false;
	int rc = parse(xml, &s, nk, ni, &tr);
	CHECK(rc == 0 && s.n == 2, "list: two uploads (rc %d, n %d)", rc, s.n);
	CHECK(strcmp(s.keys[0], "a b") == 0 && strcmp(s.ids[0], "2~abc") == 0,
	      "list: first key and id decoded (%s, %s)", s.keys[0], s.ids[0]);
	CHECK(s.when[0] == 1795420800LL * 1000000000LL,
	      "list: initiated parsed (%lld)", (long long)s.when[0]);
	CHECK(strcmp(s.keys[1], "b&c") == 0 && s.when[1] == -1,
	      "list: entity decoded, missing date is -1");
	CHECK(tr && strcmp(nk, "b&c") == 0 && strcmp(ni, "2~xyz") == 0,
	      "list: truncated with the next markers (%s, %s)", nk, ni);

	struct seen stop = { .stop_at = 1 };
	rc = parse(xml, &stop, nk, ni, &tr);
	CHECK(rc == 7 && stop.n == 1, "list: the callback's nonzero stops it (%d)", rc);

	struct seen none = { 0 };
	rc = parse("<ListMultipartUploadsResult><IsTruncated>false</IsTruncated>"
		   "</ListMultipartUploadsResult>", &none, nk, ni, &tr);
	CHECK(rc == 0 && none.n == 0 && !tr && !nk[0], "list: empty answer");

	rc = parse("<ListBucketResult></ListBucketResult>", &none, nk, ni, &tr);
	CHECK(rc == -EPROTO, "list: another document is -EPROTO (%d)", rc);
	rc = parse("<ListMultipartUploadsResult><IsTruncated>true</IsTruncated>"
		   "</ListMultipartUploadsResult>", &none, nk, ni, &tr);
	CHECK(rc == -EPROTO, "list: truncated without markers is -EPROTO (%d)", rc);
	rc = parse("<ListMultipartUploadsResult><Upload><Key>k</Key>"
		   "</Upload></ListMultipartUploadsResult>", &none, nk, ni, &tr);
	CHECK(rc == -EPROTO, "list: an upload without id is -EPROTO (%d)", rc);
	rc = parse("<ListMultipartUploadsResult><Upload><Key>k</Key>"
		   "<UploadId>1</UploadId>", &none, nk, ni, &tr);
	CHECK(rc == -EPROTO, "list: an unclosed upload is -EPROTO (%d)", rc);
}

static void test_complete_body(void)
{
	struct s3_part p[2] = { { 1, "aa" }, { 10000, "bb" } };
	char *b = s3_xml_complete_body(p, 2);
	CHECK(b && strcmp(b, "<CompleteMultipartUpload>"
			  "<Part><PartNumber>1</PartNumber><ETag>\"aa\"</ETag></Part>"
			  "<Part><PartNumber>10000</PartNumber><ETag>\"bb\"</ETag></Part>"
			  "</CompleteMultipartUpload>") == 0,
	      "complete body: %s", b ? b : "(null)");
	free(b);
}

static void test_mpu_etag(void)
{
	/* Two parts whose MD5s are those of "a" and "b"; the expected value is
	 * the MD5 of their 32 binary bytes (computed independently with
	 * python: hashlib.md5(md5(b"a").digest() + md5(b"b").digest())). */
	struct s3_part p[2] = {
		{ 1, "0cc175b9c0f1b6a831c399e269772661" },
		{ 2, "92EB5FFEE6AE2FEC3AD71C777531578F" },
	};
	char e[72];
	s3_mpu_etag(p, 2, e);
	CHECK(strcmp(e, "96e024ba2074fe77e8e965ba43a704be-2") == 0,
	      "etag: MD5 of the parts' MD5s, -2 (%s)", e);
	char again[72];
	s3_mpu_etag(p, 2, again);
	CHECK(strcmp(e, again) == 0 && strcmp(e + 32, "-2") == 0,
	      "etag: deterministic, ends in -2 (%s)", e);
	struct s3_part bad = { 1, "not-an-md5" };
	s3_mpu_etag(&bad, 1, e);
	CHECK(e[0] == '\0', "etag: unknown when a part's ETag is not an MD5");
}

int main(void)
{
	test_list_parse();
	test_complete_body();
	test_mpu_etag();
	return unit_exit();
}
