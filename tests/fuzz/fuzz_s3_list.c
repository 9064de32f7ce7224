/*
 * fuzz_s3_list.c — the ListObjectsV2 page parser (sync/s3/s3_int.h,
 * s3_xml_list_parse) on any bytes, as an S3 endpoint may answer: 0,
 * -EOVERFLOW, -EPROTO or -ENOMEM; a truncated page has a token; every
 * entry handed to the callback has the bucket asked for, a decoded key,
 * a terminated ETag and a non-negative mtime (LastModified dates that do
 * not fit in int64 ns are refused, not overflowed). Parsed twice: with the
 * engine's token buffer and with a tiny one.
 */
#include "sync/s3/s3_int.h"
#include "tests/fuzz/fuzz.h"

#include <errno.h>

struct seen {
	size_t n;
	uint64_t total;
};

static int on_entry(void *ctx, const struct obj_meta *o)
{
	struct seen *s = ctx;
	FUZZ_CHECK(o->bucket && strcmp(o->bucket, "bkt") == 0, "entry without its bucket");
	FUZZ_CHECK(o->key && o->key[0], "entry without a key");
	FUZZ_CHECK(memchr(o->etag, '\0', sizeof o->etag), "ETag not terminated");
	FUZZ_CHECK(o->mtime_ns >= 0, "mtime %lld", (long long)o->mtime_ns);
	FUZZ_CHECK(o->flags == OBJ_FROM_SCAN, "flags %u", (unsigned)o->flags);
	s->n++;
	s->total += o->size;
	return s->n == 1000 ? 7 : 0;   /* a callback may stop the page */
}

static void parse(const uint8_t *data, size_t size, size_t ntlen)
{
	char token[1024];
	bool truncated = false;
	struct seen s = { 0 };
	int rc = s3_xml_list_parse((const char *)data, size, "bkt", on_entry, &s,
				   token, ntlen, &truncated);
	FUZZ_CHECK(rc == 0 || rc == 7 || rc == -EOVERFLOW || rc == -EPROTO || rc == -ENOMEM,
		   "rc %d", rc);
	FUZZ_CHECK(rc != 7 || s.n == 1000, "the callback's stop came back wrong");
	if (rc == 0 && ntlen) {
		FUZZ_CHECK(memchr(token, '\0', ntlen), "token not terminated");
		FUZZ_CHECK(!truncated || token[0], "truncated without a token");
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	parse(data, size, 1024);
	parse(data, size, 4);
	return 0;
}
