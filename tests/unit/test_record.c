/*
 * test_record.c — unit tests of events/record.h: every sample document in
 * the data directory (argv[1], default tests/data/events) decodes to the
 * expected fields; malformed documents and records are counted while their
 * neighbours decode; sequencers order as seq_cmp() needs; record_split()
 * round-trips; and a decode-rate figure for RGW-sized records.
 *
 * Prints "ok - ..." / "not ok - ..." lines; exits 1 if any check failed.
 */
#include "events/record.h"
#include "tests/unit/unit.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *data_dir = "tests/data/events";

static int streq(const char *a, const char *b)
{
	return a && b && strcmp(a, b) == 0;
}

/* The file's bytes in an exact-size buffer (no terminating NUL). */
static char *load(const char *name, size_t *len)
{
	char path[1024];
	FILE *f;
	char *buf;
	long sz;

	snprintf(path, sizeof path, "%s/%s", data_dir, name);
	f = fopen(path, "rb");
	if (!f) {
		CHECK(0, "open %s", path);
		exit(1);
	}
	fseek(f, 0, SEEK_END);
	sz = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc(sz > 0 ? (size_t)sz : 1);
	if (!buf || fread(buf, 1, (size_t)sz, f) != (size_t)sz) {
		CHECK(0, "read %s", path);
		exit(1);
	}
	fclose(f);
	*len = (size_t)sz;
	return buf;
}

/* Decode a sample file; checks rc 0 and the counts. */
static void decode_file(const char *name, struct ev_doc *d, size_t n,
			size_t n_ignored, size_t n_malformed)
{
	size_t len;
	char *buf = load(name, &len);
	int rc = record_decode(buf, len, d);

	CHECK(rc == 0 && d->n == n && d->n_ignored == n_ignored &&
	      d->n_malformed == n_malformed,
	      "%s: rc %d, %zu decoded (want %zu), %zu ignored (want %zu), "
	      "%zu malformed (want %zu)%s%s", name, rc, d->n, n, d->n_ignored,
	      n_ignored, d->n_malformed, n_malformed, d->err[0] ? ": " : "", d->err);
	free(buf);
}

static int64_t utc_ns(int y, int mo, int d, int h, int mi, int s, long ns)
{
	struct tm tm = { .tm_year = y - 1900, .tm_mon = mo - 1, .tm_mday = d,
			 .tm_hour = h, .tm_min = mi, .tm_sec = s };
	return (int64_t)timegm(&tm) * 1000000000 + ns;
}

static void seq_of(uint64_t sec, uint64_t ns, char out[17])
{
	snprintf(out, 17, "%016" PRIX64, sec * 1000000000u + ns);
}

static void test_ceph(void)
{
	struct ev_doc put, copy, del;
	char want[17];

	decode_file("ceph-put.json", &put, 1, 0, 0);
	if (put.n == 1) {
		const struct obj_meta *o = &put.ev[0];
		seq_of(1795311652u, 945953798u, want);
		CHECK(streq(o->bucket, "bucket2") && streq(o->key, "docs/report.txt"),
		      "ceph put: bucket/key %s/%s", o->bucket, o->key);
		CHECK(o->size == 10, "ceph put: size %" PRIu64, o->size);
		CHECK(streq(o->etag, "5e13651566e93b54a36abb78380b11a8"), "ceph put: etag %s", o->etag);
		CHECK(streq(o->seq, want), "ceph put: sequencer 2448026B061C6238 -> %s (want %s)", o->seq, want);
		CHECK(o->mtime_ns == utc_ns(2026, 11, 22, 1, 40, 52, 940616000),
		      "ceph put: mtime_ns %" PRId64, o->mtime_ns);
		CHECK(o->n_meta == 1 && streq(o->meta[0].name, "tag") &&
		      streq(o->meta[0].value, "alpha"), "ceph put: metadata tag=alpha");
		CHECK(o->flags == (OBJ_HAS_META | OBJ_HAS_TAGS) && o->n_tags == 0 &&
		      !o->content_type, "ceph put: flags HAS_META|HAS_TAGS (0x%x), no tags, no ctype",
		      o->flags);
	}
	decode_file("ceph-copy-new-metadata.json", &copy, 1, 0, 0);
	if (copy.n == 1) {
		const struct obj_meta *o = &copy.ev[0];
		seq_of(1795311667u, 112233000u, want);
		CHECK(streq(o->seq, want), "ceph copy: sequencer 3348026B288AB006 -> %s", o->seq);
		CHECK(o->n_meta == 1 && streq(obj_meta_get(o, "tag"), "beta") &&
		      !(o->flags & OBJ_DELETED), "ceph copy: a put with metadata tag=beta");
	}
	decode_file("ceph-delete.json", &del, 1, 0, 0);
	if (del.n == 1) {
		const struct obj_meta *o = &del.ev[0];
		CHECK((o->flags & OBJ_DELETED) && streq(o->key, "docs/report.txt") &&
		      o->size == 10 && o->n_meta == 0,
		      "ceph delete: OBJ_DELETED, key, size kept");
		CHECK(o->mtime_ns == utc_ns(2026, 11, 22, 1, 42, 0, 500100000),
		      "ceph delete: mtime_ns");
	}
	if (put.n && copy.n && del.n) {
		CHECK(seq_cmp(put.ev[0].seq, copy.ev[0].seq) < 0 &&
		      seq_cmp(copy.ev[0].seq, del.ev[0].seq) < 0 &&
		      seq_cmp(del.ev[0].seq, put.ev[0].seq) > 0 &&
		      seq_cmp(put.ev[0].seq, put.ev[0].seq) == 0,
		      "ceph: put < copy < delete by seq_cmp");
	}
	ev_doc_release(&put);
	ev_doc_release(&copy);
	ev_doc_release(&del);
	CHECK(put.ev == NULL && put.n == 0, "ev_doc_release zeroes the doc");

	struct ev_doc s;
	decode_file("ceph-put-size-string.json", &s, 1, 0, 0);
	if (s.n == 1) {
		const struct obj_meta *o = &s.ev[0];
		CHECK(streq(o->key, "raw dir/a+b%20c \xc3\xbc.txt"), "ceph: raw key kept as is (%s)", o->key);
		CHECK(o->size == 123456789012ull, "ceph: size as a string %" PRIu64, o->size);
		CHECK(streq(o->etag, "0123456789abcdef0123456789abcdef-3"), "ceph: eTag quotes removed (%s)", o->etag);
		CHECK(o->n_meta == 1 && streq(o->meta[0].name, "project") &&
		      streq(o->meta[0].value, "Facet FS"),
		      "ceph: X-AMZ-META-Project -> project (first wins; empty and non-meta names dropped; n_meta %zu)",
		      o->n_meta);
		CHECK(streq(o->content_type, "text/x-fasta") && (o->flags & OBJ_HAS_CTYPE),
		      "ceph: Content-Type header -> content_type");
		CHECK(o->n_tags == 2 && streq(o->tags[0].name, "Stage") && streq(o->tags[0].value, "raw") &&
		      streq(o->tags[1].name, "owner") && streq(o->tags[1].value, "Lab 2") &&
		      (o->flags & OBJ_HAS_TAGS), "ceph: tags list");
		CHECK(o->mtime_ns == utc_ns(2026, 11, 22, 0, 45, 0, 500000000),
		      "ceph: eventTime with +01:00 offset");
	}
	ev_doc_release(&s);
}

static void test_seq_wrap(void)
{
	struct ev_doc d;
	size_t len;
	char *buf = load("ceph-seq-wrap.json", &len);
	static const char *raw[4] = { "2448026BFF000000", "2448026B00010000",
				      "FF48026B00000000", "0049026B00000000" };

	CHECK(record_decode(buf, len, &d) == 0 && d.n == 4, "ceph-seq-wrap: 4 records");
	free(buf);
	if (d.n != 4)
		goto out;
	for (int i = 0; i < 3; i += 2) {
		CHECK(strcmp(raw[i], raw[i + 1]) > 0,
		      "raw hex %s > %s (would order backwards)", raw[i], raw[i + 1]);
		CHECK(seq_cmp(d.ev[i].seq, d.ev[i + 1].seq) < 0,
		      "normalised %s < %s (correct order)", d.ev[i].seq, d.ev[i + 1].seq);
	}
	for (int i = 0; i < 3; i++)
		CHECK(seq_cmp(d.ev[i].seq, d.ev[i + 1].seq) < 0 &&
		      d.ev[i].mtime_ns < d.ev[i + 1].mtime_ns,
		      "record %d before %d by sequencer and by eventTime", i, i + 1);
	char want[17];
	seq_of(0x6B024900u, 0, want);
	CHECK(streq(d.ev[3].seq, want), "ceph seq 0049026B00000000 -> %s", d.ev[3].seq);
out:
	ev_doc_release(&d);

	char out[40];
	CHECK(record_seq_normalise("2448026B061C6238", 1, out, sizeof out) == 0 &&
	      streq(out, "18EA3A6FB6F68406"), "normalise 2448026B061C6238 -> %s", out);
	CHECK(record_seq_normalise("2448026b061c6238", 1, out, sizeof out) == 0 &&
	      streq(out, "18EA3A6FB6F68406"), "normalise accepts lower-case ceph hex");
	CHECK(record_seq_normalise("2448026BFFFFFFFF", 1, out, sizeof out) == -EINVAL &&
	      out[0] == '\0', "normalise rejects ns >= 1e9");
	CHECK(record_seq_normalise("2448026B061C62", 1, out, sizeof out) == -EINVAL,
	      "normalise rejects a short ceph sequencer");
	CHECK(record_seq_normalise("0065a1b2c3d4e5f601", 0, out, sizeof out) == 0 &&
	      streq(out, "0065A1B2C3D4E5F601"), "normalise upper-cases AWS (%s)", out);
	CHECK(record_seq_normalise("00G5", 0, out, sizeof out) == -EINVAL && out[0] == '\0',
	      "normalise rejects non-hex");
	CHECK(record_seq_normalise("0123456789012345678901234567890123456789", 0, out,
				   sizeof out) == -EINVAL, "normalise rejects too long");
}

static void test_aws(void)
{
	struct ev_doc put, del, te;

	decode_file("aws-put.json", &put, 1, 0, 0);
	if (put.n == 1) {
		const struct obj_meta *o = &put.ev[0];
		CHECK(streq(o->bucket, "lab-data") &&
		      streq(o->key, "runs/2026/red flower! \xc3\xbc.fasta"),
		      "aws put: key form-decoded to '%s'", o->key);
		CHECK(o->size == 1048576 && streq(o->etag, "9b2cf535f27731c974343645a3985328"),
		      "aws put: size, etag");
		CHECK(streq(o->seq, "0065A1B2C3D4E5F601"), "aws put: seq %s", o->seq);
		CHECK(o->flags == 0 && o->n_meta == 0 && !o->content_type,
		      "aws put: no HAS_META/HAS_TAGS/HAS_CTYPE (0x%x)", o->flags);
		CHECK(o->mtime_ns == utc_ns(2026, 11, 22, 10, 15, 30, 123000000), "aws put: mtime_ns");
	}
	decode_file("aws-delete.json", &del, 1, 0, 0);
	if (del.n == 1) {
		const struct obj_meta *o = &del.ev[0];
		CHECK((o->flags & OBJ_DELETED) && o->size == 0 && o->etag[0] == '\0' &&
		      streq(o->key, "runs/2026/red flower! \xc3\xbc.fasta"),
		      "aws delete: OBJ_DELETED, no size, no etag, same key");
		if (put.n == 1)
			CHECK(seq_cmp(put.ev[0].seq, o->seq) < 0, "aws: put < delete by seq_cmp");
	}
	decode_file("aws-testevent.json", &te, 0, 1, 0);
	CHECK(te.err[0] == '\0', "aws test event: no error text");
	ev_doc_release(&put);
	ev_doc_release(&del);
	ev_doc_release(&te);
}

static void test_minio(void)
{
	struct ev_doc put, del;

	decode_file("minio-put.json", &put, 1, 0, 0);
	if (put.n == 1) {
		const struct obj_meta *o = &put.ev[0];
		CHECK(streq(o->bucket, "lab-data") && streq(o->key, "runs/2026/sample one.fasta"),
		      "minio put: key query-unescaped to '%s'", o->key);
		CHECK(o->size == 2048 && streq(o->etag, "5d41402abc4b2a76b9719d911017c592") &&
		      streq(o->seq, "1798B2F1A3C4D5E6"), "minio put: size, etag, seq");
		CHECK(o->n_meta == 1 && streq(o->meta[0].name, "color") &&
		      streq(o->meta[0].value, "black"),
		      "minio put: only X-Amz-Meta-Color is user metadata (n_meta %zu)", o->n_meta);
		CHECK(streq(o->content_type, "text/plain") &&
		      o->flags == (OBJ_HAS_META | OBJ_HAS_CTYPE),
		      "minio put: content_type, flags HAS_META|HAS_CTYPE (0x%x)", o->flags);
		CHECK(o->mtime_ns == utc_ns(2026, 11, 22, 10, 20, 0, 0), "minio put: mtime_ns");
	}
	decode_file("minio-delete.json", &del, 1, 0, 0);
	if (del.n == 1) {
		const struct obj_meta *o = &del.ev[0];
		CHECK((o->flags & OBJ_DELETED) && streq(o->key, "runs/2026/sample one.fasta") &&
		      streq(o->seq, "1798B2F1A3C4D5F0"), "minio delete: s3:ObjectRemoved, seq upper-cased");
		if (put.n == 1)
			CHECK(seq_cmp(put.ev[0].seq, o->seq) < 0, "minio: put < delete by seq_cmp");
	}
	ev_doc_release(&put);
	ev_doc_release(&del);
}

static void test_mixed(void)
{
	struct ev_doc d;

	decode_file("mixed-batch.json", &d, 4, 2, 10);
	CHECK(strncmp(d.err, "Records[1]: ", 12) == 0 && strstr(d.err, "key"),
	      "mixed: first reason names record 1 and the key (%s)", d.err);
	if (d.n == 4) {
		CHECK(streq(d.ev[0].key, "docs/report.txt") && !(d.ev[0].flags & OBJ_DELETED),
		      "mixed: ceph put decoded");
		CHECK(streq(d.ev[1].key, "runs/2026/red flower! \xc3\xbc.fasta"), "mixed: aws put decoded");
		CHECK(streq(d.ev[2].key, "docs/report.txt") && (d.ev[2].flags & OBJ_DELETED),
		      "mixed: ObjectRemoved:DeleteMarkerCreated -> OBJ_DELETED");
		CHECK((d.ev[3].flags & OBJ_DELETED) && streq(d.ev[3].bucket, "lab-data"),
		      "mixed: aws delete decoded");
	}
	ev_doc_release(&d);
}

static void expect_invalid(const char *what, const void *buf, size_t len)
{
	struct ev_doc d;
	int rc = record_decode(buf, len, &d);

	CHECK(rc == -EINVAL && d.n == 0 && d.n_malformed == 1 && d.n_ignored == 0 &&
	      d.err[0] && d.ev == NULL, "invalid document (%s): rc %d, err '%s'", what, rc, d.err);
	ev_doc_release(&d);
}

static void test_malformed_docs(void)
{
	static const char *docs[][2] = {
		{ "not JSON", "this is not json" },
		{ "array", "[{\"Records\":[]}]" },
		{ "string", "\"Records\"" },
		{ "no Records", "{\"foo\":1}" },
		{ "Records an object", "{\"Records\":{}}" },
		{ "Records a string", "{\"Records\":\"x\"}" },
		{ "Records null", "{\"Records\":null}" },
		{ "Event not a test", "{\"Event\":\"s3:Other\"}" },
		{ "trailing garbage", "{\"Records\":[]} xyz" },
		{ "unterminated", "{\"Records\":[{\"eventName\":" },
	};
	for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++)
		expect_invalid(docs[i][0], docs[i][1], strlen(docs[i][1]));
	expect_invalid("empty", "", 0);

	/* 1 MiB of garbage: random bytes with JSON-ish punctuation */
	size_t big = 1 << 20;
	char *g = malloc(big);
	uint32_t x = 12345;
	for (size_t i = 0; i < big; i++) {
		x = x * 1103515245u + 12345u;
		g[i] = "{[\"Records:,]}ab\\\x01\xff"[(x >> 16) % 16];
	}
	g[0] = '{';
	expect_invalid("1 MiB garbage", g, big);
	memset(g, '[', big);
	expect_invalid("1 MiB of '['", g, big);
	/* 1 MiB document truncated mid-way */
	size_t len;
	char *b = load("mixed-batch.json", &len);
	expect_invalid("truncated document", b, len / 2);
	free(b);
	free(g);

	/* A 1 MiB string where a record should be: counted, neighbours decode. */
	{
		size_t rl;
		char *r = load("ceph-put.json", &rl);
		const char *s = memchr(r, '[', rl), *e = r + rl;
		while (e > s && *--e != ']')
			;
		size_t one = (size_t)(e - s - 1);
		char *doc = malloc(2 * one + big + 64), *w = doc;
		w += sprintf(w, "{\"Records\":[");
		memcpy(w, s + 1, one);
		w += one;
		w += sprintf(w, ",\"");
		memset(w, 'x', big);
		w += big;
		w += sprintf(w, "\",");
		memcpy(w, s + 1, one);
		w += one;
		w += sprintf(w, "]}");
		struct ev_doc d;
		int rc = record_decode(doc, (size_t)(w - doc), &d);
		CHECK(rc == 0 && d.n == 2 && d.n_malformed == 1 && d.n_ignored == 0 &&
		      strstr(d.err, "Records[1]"), "1 MiB string record: malformed, 2 neighbours decode (%s)", d.err);
		ev_doc_release(&d);
		free(doc);
		free(r);
	}

	/* Duplicate member names: the first wins, as cJSON_GetObjectItem(). */
	{
		static const char dup[] = "{\"Records\":[{\"eventName\":\"ObjectCreated:Put\","
			"\"eventSource\":\"ceph:s3\",\"s3\":{\"bucket\":{\"name\":\"b\"},"
			"\"object\":{\"key\":\"k1\",\"size\":5,\"key\":\"k2\",\"size\":7}}}]}";
		struct ev_doc d;
		CHECK(record_decode(dup, sizeof dup - 1, &d) == 0 && d.n == 1 &&
		      streq(d.ev[0].key, "k1") && d.ev[0].size == 5 && d.ev[0].mtime_ns == 0 &&
		      d.ev[0].seq[0] == '\0' && d.ev[0].flags == 0,
		      "duplicate members: first wins; no eventTime/sequencer -> 0/\"\"");
		ev_doc_release(&d);
	}

	/* Lifecycle expiry of the current version deletes; of others is ignored. */
	{
		static const char *names[] = { "LifecycleExpiration:Delete",
			"ObjectLifecycle:Expiration:Current", "ObjectLifecycle:Expiration:NonCurrent",
			"s3:ObjectAccessed:Head", "ObjectTagging:Put" };
		int good = 1;
		for (size_t i = 0; i < 5; i++) {
			char doc[512];
			int n = snprintf(doc, sizeof doc, "{\"Records\":[{\"eventName\":\"%s\","
					 "\"s3\":{\"bucket\":{\"name\":\"b\"},\"object\":{\"key\":\"k\"}}}]}",
					 names[i]);
			struct ev_doc d;
			if (record_decode(doc, (size_t)n, &d) != 0 ||
			    (i < 2 ? !(d.n == 1 && (d.ev[0].flags & OBJ_DELETED)) : !(d.n == 0 && d.n_ignored == 1)))
				good = 0;
			ev_doc_release(&d);
		}
		CHECK(good, "lifecycle expiry of the current version -> OBJ_DELETED; other kinds ignored");
	}

	/* A valid document followed by NULs and whitespace is fine. */
	struct ev_doc d;
	const char ok[] = "{\"Records\":[]}\n\0\0";
	CHECK(record_decode(ok, sizeof ok - 1, &d) == 0 && d.n == 0 && d.n_malformed == 0,
	      "empty Records with trailing newline/NULs: 0 records, not malformed");
	ev_doc_release(&d);
}

static void test_time(void)
{
	int64_t ns;

	CHECK(record_time_parse("2026-11-22T01:40:52.940616Z", &ns) == 0 &&
	      ns == utc_ns(2026, 11, 22, 1, 40, 52, 940616000), "time: microseconds");
	CHECK(record_time_parse("1970-01-01T00:00:00Z", &ns) == 0 && ns == 0, "time: epoch");
	CHECK(record_time_parse("2024-02-29T23:59:59.123456789123Z", &ns) == 0 &&
	      ns == utc_ns(2024, 2, 29, 23, 59, 59, 123456789), "time: leap day, > 9 digits truncated");
	CHECK(record_time_parse("1901-03-01T00:00:00-0530", &ns) == 0 &&
	      ns == utc_ns(1901, 3, 1, 5, 30, 0, 0), "time: before the epoch, -0530 offset");
	static const char *bad[] = { "", "2026-11-22", "2026-11-22T01:40:52", "2026-13-01T00:00:00Z",
				     "2023-02-29T00:00:00Z", "2026-11-22T24:00:00Z", "2026-11-22T01:40:52.Z",
				     "2026-11-22T01:40:52Zjunk", "1800-01-01T00:00:00Z", "2026/11/22T01:40:52Z",
				     "2026-11-22T01:40:52+2500" };
	int bad_ok = 1;
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		if (record_time_parse(bad[i], &ns) != -EINVAL) {
			bad_ok = 0;
			printf("# accepted bad time '%s'\n", bad[i]);
		}
	CHECK(bad_ok, "time: %zu malformed times rejected", sizeof bad / sizeof bad[0]);

	/* against timegm(): pseudo-random instants 1900..2261 */
	uint64_t x = 88172645463325252ull;
	int mism = 0;
	for (int i = 0; i < 20000; i++) {
		x ^= x << 13; x ^= x >> 7; x ^= x << 17;
		int64_t lo = utc_ns(1900, 1, 1, 0, 0, 0, 0) / 1000000000;
		int64_t hi = utc_ns(2261, 12, 31, 23, 59, 59, 0) / 1000000000;
		time_t t = (time_t)(lo + (int64_t)(x % (uint64_t)(hi - lo)));
		struct tm tm;
		char s[64];
		gmtime_r(&t, &tm);
		strftime(s, sizeof s, "%Y-%m-%dT%H:%M:%S.5Z", &tm);
		if (record_time_parse(s, &ns) != 0 || ns != (int64_t)t * 1000000000 + 500000000) {
			if (mism++ < 3)
				printf("# mismatch on %s\n", s);
		}
	}
	CHECK(mism == 0, "time: 20000 random instants agree with timegm (%d mismatches)", mism);
}

static int meta_equal(const struct obj_meta *a, const struct obj_meta *b)
{
	if (!streq(a->bucket, b->bucket) || !streq(a->key, b->key) || a->size != b->size ||
	    a->mtime_ns != b->mtime_ns || strcmp(a->etag, b->etag) || strcmp(a->seq, b->seq) ||
	    a->flags != b->flags || a->n_meta != b->n_meta || a->n_tags != b->n_tags ||
	    (a->content_type || b->content_type ? !streq(a->content_type, b->content_type) : 0))
		return 0;
	for (size_t i = 0; i < a->n_meta; i++)
		if (!streq(a->meta[i].name, b->meta[i].name) || !streq(a->meta[i].value, b->meta[i].value))
			return 0;
	for (size_t i = 0; i < a->n_tags; i++)
		if (!streq(a->tags[i].name, b->tags[i].name) || !streq(a->tags[i].value, b->tags[i].value))
			return 0;
	return 1;
}

/* Split a file and decode each part: the same records, the same counts. */
static void split_roundtrip(const char *name, size_t want_parts)
{
	size_t len, np = 0;
	char *buf = load(name, &len), err[256] = "";
	struct ev_part *parts = NULL;
	struct ev_doc whole, one;
	size_t got = 0, mal = 0, ign = 0;
	int same = 1, keys = 1;

	int rc = record_split(buf, len, &parts, &np, err, sizeof err);
	CHECK(rc == 0 && np == want_parts, "split %s: %zu parts (want %zu) %s", name, np, want_parts, err);
	record_decode(buf, len, &whole);
	for (size_t i = 0; i < np; i++) {
		if (strlen(parts[i].json) != parts[i].json_len ||
		    strncmp(parts[i].json, "{\"Records\":[", 12) != 0)
			same = 0;
		if (record_decode(parts[i].json, parts[i].json_len, &one) != 0 ||
		    one.n + one.n_ignored + one.n_malformed != 1)
			same = 0;
		if (one.n == 1) {
			char k[2048];
			snprintf(k, sizeof k, "%s/%s", one.ev[0].bucket, one.ev[0].key);
			if (got >= whole.n || !meta_equal(&one.ev[0], &whole.ev[got]))
				same = 0;
			if (!streq(parts[i].key, k))
				keys = 0;
			got++;
		}
		mal += one.n_malformed;
		ign += one.n_ignored;
		ev_doc_release(&one);
	}
	CHECK(same && got == whole.n && mal == whole.n_malformed && ign == whole.n_ignored,
	      "split %s: parts decode to the same %zu records, %zu ignored, %zu malformed",
	      name, got, ign, mal);
	CHECK(keys, "split %s: part keys are bucket/key of the decoded records", name);
	ev_doc_release(&whole);
	ev_parts_free(parts, np);
	free(buf);
}

static void test_split(void)
{
	static const char *one[] = { "ceph-put.json", "ceph-copy-new-metadata.json", "ceph-delete.json",
				     "aws-put.json", "aws-delete.json", "minio-put.json",
				     "minio-delete.json", "ceph-put-size-string.json" };
	for (size_t i = 0; i < sizeof one / sizeof one[0]; i++)
		split_roundtrip(one[i], 1);
	split_roundtrip("ceph-seq-wrap.json", 4);
	split_roundtrip("mixed-batch.json", 16);

	size_t len, np;
	char *buf = load("minio-put.json", &len), err[256];
	struct ev_part *parts;
	if (record_split(buf, len, &parts, &np, err, sizeof err) == 0 && np == 1) {
		CHECK(streq(parts[0].key, "lab-data/runs/2026/sample one.fasta"),
		      "split minio: key is the wrapper's Key (%s)", parts[0].key);
		CHECK(!strstr(parts[0].json, "EventName"), "split minio: wrapper dropped");
		ev_parts_free(parts, np);
	}
	free(buf);
	buf = load("aws-put.json", &len);
	if (record_split(buf, len, &parts, &np, err, sizeof err) == 0 && np == 1) {
		CHECK(streq(parts[0].key, "lab-data/runs/2026/red flower! \xc3\xbc.fasta"),
		      "split aws: decoded key %s", parts[0].key);
		ev_parts_free(parts, np);
	}
	free(buf);
	buf = load("mixed-batch.json", &len);
	if (record_split(buf, len, &parts, &np, err, sizeof err) == 0 && np == 16) {
		CHECK(parts[1].key == NULL && parts[2].key == NULL && parts[0].key != NULL,
		      "split mixed: records without bucket/key get a NULL key");
		ev_parts_free(parts, np);
	}
	free(buf);

	buf = load("aws-testevent.json", &len);
	parts = (struct ev_part *)1;
	np = 7;
	int rc = record_split(buf, len, &parts, &np, err, sizeof err);
	CHECK(rc == -EINVAL && parts == NULL && np == 0 && strncmp(err, "test event", 10) == 0,
	      "split test event: -EINVAL '%s'", err);
	free(buf);
	rc = record_split("{\"Records\":5}", 13, &parts, &np, err, sizeof err);
	CHECK(rc == -EINVAL && parts == NULL && np == 0 && err[0], "split malformed: -EINVAL '%s'", err);
	rc = record_split("{\"Records\":[]}", 14, &parts, &np, err, sizeof err);
	CHECK(rc == 0 && np == 0, "split empty Records: 0 parts");
	ev_parts_free(parts, np);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);   /* CPU time: a per-core figure */
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Records decoded per second from doc (n records each), over ~0.4 s. */
static double rate(const char *doc, size_t len, size_t n, int split)
{
	size_t rounds = 0;
	double t0 = now_s(), t;

	do {
		for (int i = 0; i < 200; i++, rounds++) {
			if (split) {
				struct ev_part *p;
				size_t np;
				char err[64];
				if (record_split(doc, len, &p, &np, err, sizeof err) != 0 || np != n)
					return 0;
				ev_parts_free(p, np);
			} else {
				struct ev_doc d;
				if (record_decode(doc, len, &d) != 0 || d.n != n)
					return 0;
				ev_doc_release(&d);
			}
		}
		t = now_s() - t0;
	} while (t < 0.4);
	return (double)(rounds * n) / t;
}

static void test_rate(void)
{
	size_t len;
	char *one = load("ceph-put.json", &len);
	double r1 = rate(one, len, 1, 0);

	/* 100 copies of the RGW record in one document */
	const char *s = memchr(one, '[', len), *e = one + len;
	while (e > s && *--e != ']')
		;
	size_t rlen = (size_t)(e - s - 1);
	char *many = malloc(100 * (rlen + 1) + 32), *w = many;
	w += sprintf(w, "{\"Records\":[");
	for (int i = 0; i < 100; i++) {
		if (i)
			*w++ = ',';
		memcpy(w, s + 1, rlen);
		w += rlen;
	}
	w += sprintf(w, "]}");
	double r100 = rate(many, (size_t)(w - many), 100, 0);
	double rs = rate(many, (size_t)(w - many), 100, 1);

	printf("# decode: %.0f records/s (1-record RGW docs of %zu bytes), "
	       "%.0f records/s (100-record doc); split: %.0f records/s\n", r1, len, r100, rs);
	/* A figure, not a check: speed is judged by benchmarks, never by
	   timed assertions on a shared machine. */
	free(many);
	free(one);
}

int main(int argc, char **argv)
{
	if (argc > 1)
		data_dir = argv[1];
	test_ceph();
	test_seq_wrap();
	test_aws();
	test_minio();
	test_mixed();
	test_malformed_docs();
	test_time();
	test_split();
	test_rate();
	return unit_exit();
}
