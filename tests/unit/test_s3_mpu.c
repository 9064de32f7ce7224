/* test_s3_mpu.c — unit tests of the multipart pieces of the S3 client that
 * need no server (sync/s3/s3_int.h): the ListMultipartUploads parser, the
 * CompleteMultipartUpload body and the "-N" ETag computed from the parts;
 * and the multipart calls of the fake store (sync/s3/s3_fake.h) and the fault
 * wrapper, which the staging tests build on. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sync/s3/s3_fake.h"
#include "sync/s3/s3_fault.h"
#include "sync/s3/s3_int.h"
#include "tests/unit/unit.h"

#include <fcntl.h>
#include <unistd.h>

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

static int count_upload(void *ctx, const char *key, const char *id, int64_t ns)
{
	(void)key;
	(void)id;
	(void)ns;
	(*(int *)ctx)++;
	return 0;
}

/* A temporary file of n bytes (byte i = i * 7 % 251); its fd. */
static int tmp_data(size_t n, unsigned char **copy)
{
	char path[] = "/tmp/facetfs-mpu-XXXXXX";
	int fd = mkstemp(path);
	unlink(path);
	unsigned char *b = malloc(n ? n : 1);
	for (size_t i = 0; i < n; i++)
		b[i] = (unsigned char)(i * 7 % 251);
	if (fd >= 0 && write(fd, b, n) != (ssize_t)n) {
		close(fd);
		fd = -1;
	}
	*copy = b;
	return fd;
}

static void test_fake(void)
{
	struct s3 *s, *w;
	CHECK(s3_fake_new(&s) == 0 && s3_fake_bucket_add(s, "b") == 0, "fake made");
	s3_fake_min_part_set(s, 1000);
	CHECK(s3_fault_new(s, false, &w) == 0, "fault wrapper made");
	unsigned char *want;
	size_t n = 2500;
	int fd = tmp_data(n, &want);
	char id[64], id2[64], etag[72];
	struct s3_part p[3] = { { 1, "" }, { 2, "" }, { 3, "" } };
	struct obj_kv meta = { "color", "green" };
	int rc = s3_mpu_create(w, "b", "k", &meta, 1, "text/plain", id, sizeof id);
	CHECK(rc == 0 && id[0], "fake: create (%d)", rc);
	CHECK(s3_fake_upload_count(s, "b") == 1, "fake: one upload in progress");
	for (unsigned i = 0; i < 3; i++) {
		uint64_t off = i * 1000ull, len = i < 2 ? 1000 : 500;
		rc = s3_mpu_put_part(w, "b", "k", id, i + 1, fd, off, len, p[i].etag);
		CHECK(rc == 0 && strlen(p[i].etag) == 32, "fake: part %u (%d)", i + 1, rc);
	}
	/* a part under the minimum that is not the last: refused */
	struct s3_part small[2] = { p[2], p[0] };
	small[0].number = 1;
	char e2[72];
	CHECK(s3_mpu_create(w, "b", "small", NULL, 0, NULL, id2, sizeof id2) == 0 &&
	      s3_mpu_put_part(w, "b", "small", id2, 1, fd, 0, 500, small[0].etag) == 0 &&
	      s3_mpu_put_part(w, "b", "small", id2, 2, fd, 0, 1000, small[1].etag) == 0,
	      "fake: a small first part uploaded");
	small[1].number = 2;
	rc = s3_mpu_complete(w, "b", "small", id2, small, 2, e2);
	CHECK(rc == -EIO, "fake: a small part that is not the last is refused (%d)", rc);
	CHECK(s3_mpu_abort(w, "b", "small", id2) == 0 &&
	      s3_mpu_abort(w, "b", "small", id2) == 0, "fake: abort twice is 0");
	/* a part with another ETag: refused */
	struct s3_part wrong[3] = { p[0], p[1], p[2] };
	wrong[1].etag[0] = wrong[1].etag[0] == '0' ? '1' : '0';
	rc = s3_mpu_complete(w, "b", "k", id, wrong, 3, etag);
	CHECK(rc == -EIO, "fake: a part with another ETag is refused (%d)", rc);
	/* a completion that fails in the wrapper leaves the upload there */
	CHECK(s3_fault_fail(w, S3K_MPU_COMPLETE, 1, 1, -EIO) == 0, "rule added");
	rc = s3_mpu_complete(w, "b", "k", id, p, 3, etag);
	CHECK(rc == -EIO && s3_fault_injected(w, S3K_MPU_COMPLETE) == 1,
	      "fault: the completion fails once (%d)", rc);
	int listed = 0;
	CHECK(s3_mpu_list(w, "b", "", count_upload, &listed) == 0 && listed == 1,
	      "fake: the upload is still listed (%d)", listed);
	rc = s3_mpu_complete(w, "b", "k", id, p, 3, etag);
	char want_etag[72];
	s3_mpu_etag(p, 3, want_etag);
	CHECK(rc == 0 && strcmp(etag, want_etag) == 0,
	      "fake: completed with the MD5-of-MD5s ETag (%s, %s)", etag, want_etag);
	void *data = NULL;
	size_t len = 0;
	struct obj_meta m = { 0 };
	rc = s3_fake_object_read(s, "b", "k", &data, &len, &m, NULL);
	CHECK(rc == 0 && len == n && memcmp(data, want, n) == 0,
	      "fake: the object is the parts' bytes in order");
	CHECK(m.n_meta == 1 && !strcmp(m.meta[0].value, "green") && m.content_type &&
	      !strcmp(m.content_type, "text/plain") && !strcmp(m.etag, etag),
	      "fake: metadata, content type and ETag of the completed object");
	obj_meta_release(&m);
	free(data);
	CHECK(s3_fake_upload_count(s, "b") == 0, "fake: no upload left after completion");
	rc = s3_mpu_put_part(w, "b", "k", id, 1, fd, 0, 10, etag);
	CHECK(rc == -ENOENT, "fake: a completed upload id is unknown (%d)", rc);

	/* server-side copy in parts, with the source's ETag */
	char cid[64], ce[72];
	struct s3_part cp[2] = { { 1, "" }, { 2, "" } };
	CHECK(s3_mpu_create(w, "b", "copy", NULL, 0, NULL, cid, sizeof cid) == 0, "copy upload");
	rc = s3_mpu_copy_part(w, "b", "copy", cid, 1, "k", "0123", 0, 1500, cp[0].etag);
	CHECK(rc == -ESTALE, "fake: a copy part of another version is -ESTALE (%d)", rc);
	rc = s3_mpu_copy_part(w, "b", "copy", cid, 1, "k", etag, 0, 1500, cp[0].etag);
	CHECK(rc == 0, "fake: copy part 1 (%d)", rc);
	rc = s3_mpu_copy_part(w, "b", "copy", cid, 2, "k", etag, 1500, 1001, cp[1].etag);
	CHECK(rc == -EINVAL, "fake: a range past the end is refused (%d)", rc);
	rc = s3_mpu_copy_part(w, "b", "copy", cid, 2, "k", etag, 1500, 1000, cp[1].etag);
	CHECK(rc == 0 && s3_mpu_complete(w, "b", "copy", cid, cp, 2, ce) == 0,
	      "fake: the copy completes (%d)", rc);
	CHECK(s3_fake_object_read(s, "b", "copy", &data, &len, NULL, NULL) == 0 &&
	      len == n && memcmp(data, want, n) == 0, "fake: the copy has the same bytes");
	free(data);
	CHECK(s3_fake_count(s, S3K_MPU_PART) == 6 && s3_fake_count(s, S3K_MPU_COPY) == 4,
	      "fake: counts by kind (%ju parts, %ju copies)",
	      (uintmax_t)s3_fake_count(s, S3K_MPU_PART),
	      (uintmax_t)s3_fake_count(s, S3K_MPU_COPY));
	close(fd);
	free(want);
	s3_free(w);
	s3_free(s);
}

int main(void)
{
	test_list_parse();
	test_complete_body();
	test_mpu_etag();
	test_fake();
	return unit_exit();
}
