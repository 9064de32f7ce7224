/*
 * test_record_fast.c — record_decode()'s fast path (events/record_fast.c)
 * must give exactly what the cJSON tree path gives (events/record_int.h).
 * Compared field by field, with the counts, return code and error text:
 * every sample document in the data directory (argv[1]), hand-made edge
 * cases (escapes, duplicate members, member order, numbers, whitespace,
 * nesting, metadata shapes), and ~200,000 random mutations of them (a byte
 * replaced by a JSON-significant one, a byte deleted, a cut, a range
 * repeated). Also checks that the fast path really takes the common
 * documents (else the comparison would prove nothing).
 *
 * Prints "ok - ..." / "not ok - ..." lines; exits 1 if any check failed.
 */
#include "events/record_int.h"
#include "tests/unit/unit.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static int str_same(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static int kv_same(const struct obj_kv *a, size_t na, const struct obj_kv *b, size_t nb)
{
	if (na != nb)
		return 0;
	for (size_t i = 0; i < na; i++)
		if (!str_same(a[i].name, b[i].name) || !str_same(a[i].value, b[i].value))
			return 0;
	return 1;
}

static int meta_same(const struct obj_meta *a, const struct obj_meta *b)
{
	return str_same(a->bucket, b->bucket) && str_same(a->key, b->key) &&
	       a->size == b->size && a->mtime_ns == b->mtime_ns &&
	       strcmp(a->etag, b->etag) == 0 && strcmp(a->seq, b->seq) == 0 &&
	       str_same(a->content_type, b->content_type) &&
	       kv_same(a->meta, a->n_meta, b->meta, b->n_meta) &&
	       kv_same(a->tags, a->n_tags, b->tags, b->n_tags) && a->flags == b->flags;
}

static int doc_same(int ra, const struct ev_doc *a, int rb, const struct ev_doc *b)
{
	if (ra != rb || a->n != b->n || a->n_malformed != b->n_malformed ||
	    a->n_ignored != b->n_ignored || strcmp(a->err, b->err) != 0)
		return 0;
	for (size_t i = 0; i < a->n; i++)
		if (!meta_same(&a->ev[i], &b->ev[i]))
			return 0;
	return 1;
}

static size_t n_docs, n_fast, n_diff;

/* Compare record_decode() and the fast path (when it takes the document)
 * with the tree path. Returns 1 when the fast path took it. */
static int compare(const char *what, const void *buf, size_t len, int verbose)
{
	struct ev_doc tree, pub, fast;
	int rt = record_decode_tree(buf, len, &tree);
	int rp = record_decode(buf, len, &pub);
	int rf = record_decode_fast(buf, len, &fast);
	int took = rf != RECORD_FAST_FALLBACK;
	int same = doc_same(rp, &pub, rt, &tree) && (!took || doc_same(rf, &fast, rt, &tree));
	n_docs++;
	n_fast += (size_t)took;
	if (!same) {
		n_diff++;
		if (n_diff <= 5)
			CHECK(0, "%s: fast %s, results differ (tree rc %d n %zu mal %zu ign %zu "
			      "'%s'; fast rc %d n %zu)", what, took ? "took it" : "fell back", rt,
			      tree.n, tree.n_malformed, tree.n_ignored, tree.err, rf, fast.n);
	} else if (verbose) {
		CHECK(1, "%s: same result (%s; rc %d, %zu decoded, %zu malformed, %zu ignored)",
		      what, took ? "fast path" : "tree path", rt, tree.n, tree.n_malformed,
		      tree.n_ignored);
	}
	ev_doc_release(&tree);
	ev_doc_release(&pub);
	if (took)
		ev_doc_release(&fast);
	return took;
}

/* An RGW record (as tests/bench/evgen makes them) with pieces replaced. */
static char *rgw(const char *event, const char *key, const char *size, const char *object_extra,
		 const char *record_extra)
{
	char *s = NULL;
	if (asprintf(&s,
		     "{\"Records\":[{\"eventVersion\":\"2.2\",\"eventSource\":\"ceph:s3\","
		     "\"awsRegion\":\"\",\"eventTime\":\"2026-11-22T01:40:52.940616Z\","
		     "\"eventName\":\"%s\",\"userIdentity\":{\"principalId\":\"tester\"},"
		     "\"responseElements\":{\"x-amz-request-id\":\"1b1f.4116\",\"n\":[1,-2.5e3,true,false,null,{}]},"
		     "\"s3\":{\"s3SchemaVersion\":\"1.0\",\"bucket\":{\"name\":\"b\",\"arn\":\"arn:aws:s3:::b\"},"
		     "\"object\":{\"key\":%s,\"size\":%s,\"eTag\":\"5e13651566e93b54a36abb78380b11a8\","
		     "\"versionId\":\"\",\"sequencer\":\"2448026B061C6238\",\"metadata\":"
		     "[{\"key\":\"x-amz-meta-tag\",\"val\":\"alpha\"},{\"key\":\"X-Amz-Meta-Tag\",\"val\":\"beta\"},"
		     "{\"key\":\"content-type\",\"val\":\"text/plain\"}],\"tags\":[{\"key\":\"k\",\"val\":\"v\"}]%s}}%s}]}",
		     event, key, size, object_extra, record_extra) < 0)
		exit(1);
	return s;
}

static void edge_cases(void)
{
	static const char *const docs[] = {
		"{\"Records\":[]}",
		" \r\n\t{\"Records\" : [ ] } \n",
		"{\"Records\":[]}\0\0",
		"{\"Records\":[]} x",
		"\xef\xbb\xbf{\"Records\":[]}",
		"\x0b{\"Records\":[]}",
		"{\"Event\":\"s3:TestEvent\"}",
		"{\"Records\":5}",
		"{\"Records\":[5]}",
		"{\"Records\":[{}]}",
		"{\"Records\":[{\"eventName\":\"s3:ObjectAccessed:Get\"}]}",
		"{\"Records\":[{\"eventName\":\"ObjectTagging:Put\",\"s3\":5}]}",
		"{\"Records\":[],\"Records\":5}",
		"{\"EventName\":\"s3:ObjectCreated:Put\",\"Key\":\"b/k\",\"Records\":[{\"eventName\":"
		"\"s3:ObjectCreated:Put\",\"eventSource\":\"minio:s3\",\"s3\":{\"bucket\":{\"name\":\"b\"},"
		"\"object\":{\"key\":\"a%2Fb+c\",\"size\":3,\"userMetadata\":{\"X-Amz-Meta-A\":\"1\","
		"\"content-type\":\"x/y\",\"x-amz-meta-a\":\"2\"},\"contentType\":\"t/u\"}}}]}",
		"{\"Records\":[{\"eventName\":\"ObjectRemoved:Delete\",\"eventSource\":\"aws:s3\","
		"\"eventTime\":\"2026-01-01T00:00:00+01:30\",\"s3\":{\"object\":{\"key\":\"%41\","
		"\"sequencer\":\"00abCD\"},\"bucket\":{\"name\":\"bb\",\"name\":\"cc\"}}}]}",
		"{\"Records\":[{\"eventName\":\"ObjectCreated:Put\",\"s3\":{\"bucket\":{\"name\":\"b\"},"
		"\"object\":{\"key\":\"%zz\"}}}]}",
		"{\"Records\":[{\"eventName\":\"ObjectCreated:Put\",\"s3\":{\"bucket\":{\"name\":\"b\"},"
		"\"object\":{\"key\":\"k\",\"tags\":{\"a\":\"1\",\"a\":\"2\"},\"metadata\":null,"
		"\"userMetadata\":{}}}}]}",
		"{\"Records\":[{\"eventName\":\"ObjectCreated:Put\",\"s3\":{\"bucket\":{\"name\":\"b\"},"
		"\"object\":{\"key\":\"k\",\"tags\":{\"a\":null}}}}]}",
		"{\"Records\":[{\"ev\\u0065ntName\":\"ObjectCreated:Put\",\"s3\":{\"bucket\":{\"name\":\"b\"},"
		"\"object\":{\"key\":\"k\"}}}]}",
		"{\"Records\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
		"]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}",
	};
	for (size_t i = 0; i < sizeof docs / sizeof *docs; i++) {
		char what[32];
		snprintf(what, sizeof what, "edge case %zu", i);
		size_t len = strlen(docs[i]) + (i == 2 ? 2 : 0);
		compare(what, docs[i], len, 1);
	}
	struct { const char *ev, *key, *size, *obj, *rec; } v[] = {
		{ "ObjectCreated:Put", "\"docs/r.txt\"", "10", "", "" },
		{ "ObjectCreated:Put", "\"d\\u00e9j\\u00e0/\\\"q\\\"\\/x\"", "10", "", "" },
		{ "ObjectCreated:Put", "\"a\\ud83d\\ude00b\"", "0", "", "" },
		{ "ObjectCreated:Put", "\"a\\ud83db\"", "0", "", "" },
		{ "ObjectCreated:Put", "\"a\\qb\"", "0", "", "" },
		{ "ObjectCreated:Put", "\"a\\u0000b\"", "0", "", "" },
		{ "ObjectCreated:Put", "\"k\"", "1e3", "", "" },
		{ "ObjectCreated:Put", "\"k\"", "1.5", "", "" },
		{ "ObjectCreated:Put", "\"k\"", "1.0", "", "" },
		{ "ObjectCreated:Put", "\"k\"", "-1", "", "" },
		{ "ObjectCreated:Put", "\"k\"", "-0", "", "" },
		{ "ObjectCreated:Put", "\"k\"", "01", "", "" },
		{ "ObjectCreated:Put", "\"k\"", "+1", "", "" },
		{ "ObjectCreated:Put", "\"k\"", "999999999999999", "", "" },
		{ "ObjectCreated:Put", "\"k\"", "9007199254740993", "", "" },
		{ "ObjectCreated:Put", "\"k\"", "18446744073709551615", "", "" },
		{ "ObjectCreated:Put", "\"k\"", "\"18446744073709551615\"", "", "" },
		{ "ObjectCreated:Put", "\"k\"", "\"18446744073709551616\"", "", "" },
		{ "ObjectCreated:Put", "\"k\"", "\"\"", "", "" },
		{ "ObjectCreated:Put", "\"k\"", "null", "", "" },
		{ "ObjectCreated:Put", "\"k\"", "true", "", "" },
		{ "ObjectCreated:Put", "\"k\"", "10", ",\"contentType\":\"a/b\"", "" },
		{ "ObjectCreated:Put", "\"k\"", "10", ",\"contentType\":null,\"contentType\":\"a/b\"", "" },
		{ "ObjectCreated:Put", "\"k\"", "10", ",\"contentType\":5", "" },
		{ "ObjectCreated:Put", "\"k\"", "10", ",\"key\":\"second\",\"size\":7", "" },
		{ "ObjectCreated:Put", "\"k\"", "10", ",\"userMetadata\":{\"x-amz-meta-tag\":\"u\",\"x-amz-meta-v\":\"w\"}", "" },
		{ "ObjectCreated:Put", "\"k\"", "10", ",\"metadata\":[]", "" },
		{ "ObjectCreated:Put", "\"k\"", "10", ",\"eTag\":\"\\\"q\\\"\"", "" },
		{ "ObjectCreated:Put", "\"k\"", "10", ",\"sequencer\":\"zz\"", "" },
		{ "ObjectCreated:Put", "\"k\"", "10", "", ",\"eventName\":\"ObjectRemoved:Delete\"" },
		{ "ObjectCreated:Put", "\"k\"", "10", "", ",\"eventSource\":\"aws:s3\"" },
		{ "ObjectCreated:Put", "\"k\"", "10", "", ",\"s3\":{}" },
		{ "ObjectCreated:Put", "\"k\"", "10", "", ",\"eventTime\":5" },
		{ "ObjectCreated:Put", "\"\"", "10", "", "" },
		{ "ObjectCreated:Put", "null", "10", "", "" },
		{ "LifecycleExpiration:Delete", "\"k\"", "10", "", "" },
		{ "ObjectLifecycle:Transition", "\"k\"", "10", "", "" },
	};
	for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
		char what[32];
		char *d = rgw(v[i].ev, v[i].key, v[i].size, v[i].obj, v[i].rec);
		snprintf(what, sizeof what, "rgw variant %zu", i);
		compare(what, d, strlen(d), 1);
		free(d);
	}
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;

static uint64_t rnd(void)
{
	uint64_t x = rng_state;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return rng_state = x;
}

/* One random mutation of src into dst (room for 2 * len + 16 bytes). */
static size_t mutate(const char *src, size_t len, char *dst)
{
	static const char sig[] = "\"\\{}[],: 0-e.nutfx/\t\n\001\377";
	size_t at = len ? rnd() % len : 0;
	memcpy(dst, src, len);
	switch (rnd() % 4) {
	case 0:
		dst[at] = sig[rnd() % (sizeof sig)];   /* includes the NUL */
		return len;
	case 1:
		memmove(dst + at, dst + at + 1, len - at - 1);
		return len ? len - 1 : 0;
	case 2:
		return at;
	default: {
		size_t n = 1 + rnd() % 16;
		if (at + n > len)
			n = len - at;
		memmove(dst + at + n, src + at, len - at);
		return len + n;
	}
	}
}

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : "tests/data/events";
	char *bufs[64];
	size_t lens[64], nb = 0;

	edge_cases();
	DIR *d = opendir(dir);
	CHECK(d != NULL, "open %s", dir);
	struct dirent *de;
	while (d && (de = readdir(d)) && nb < 60) {
		size_t l = strlen(de->d_name);
		if (l < 6 || strcmp(de->d_name + l - 5, ".json") != 0)
			continue;
		char path[1024];
		snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
		if (!(bufs[nb] = unit_read_file(path, &lens[nb])))
			continue;
		compare(de->d_name, bufs[nb], lens[nb], 1);
		nb++;
	}
	if (d)
		closedir(d);
	CHECK(nb >= 5, "%zu sample documents read", nb);
	bufs[nb] = rgw("ObjectCreated:Put", "\"p07/obj0000007\"", "107",
		       ",\"userMetadata\":{\"x-amz-meta-b\":\"c\"}", "");
	lens[nb] = strlen(bufs[nb]);
	nb++;
	size_t fast_before = n_fast, docs_before = n_docs;
	char *m = malloc(1 << 20);
	int rounds = (int)unit_trials(200000);
	for (int round = 0; round < rounds && n_diff <= 5; round++) {
		size_t i = rnd() % nb;
		if (lens[i] * 2 + 16 > (1 << 20))
			continue;
		size_t ml = mutate(bufs[i], lens[i], m);
		if (rnd() % 3 == 0 && ml)   /* sometimes a second mutation */
			ml = mutate(memcpy(m + (1 << 19), m, ml), ml, m);
		compare("mutation", m, ml, 0);
	}
	free(m);
	CHECK(n_diff == 0, "%zu documents: fast path and tree path agree (%zu differ)", n_docs,
	      n_diff);
	CHECK(n_fast - fast_before > (n_docs - docs_before) / 10,
	      "mutations: the fast path took %zu of %zu (the rest fell back)",
	      n_fast - fast_before, n_docs - docs_before);
	for (size_t i = 0; i < nb; i++)
		free(bufs[i]);
	return unit_exit();
}
