/*
 * fuzz_record.c — the S3 event decoder (events/record.h) on any bytes, as a
 * Kafka producer may write them: the cJSON tree path, the single-pass fast
 * path and record_decode() must give the same records, counts, return code
 * and reason (record_int.h's invariant, the one test_record_fast checks on
 * mutations of the samples); every record has a bucket and a key, a
 * NUL-terminated etag and sequencer; record_split() on the same bytes.
 */
#include "events/record_int.h"
#include "tests/fuzz/fuzz.h"

#include <errno.h>

static int str_eq(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

static int kvs_eq(const struct obj_kv *a, size_t na, const struct obj_kv *b, size_t nb)
{
	if (na != nb)
		return 0;
	for (size_t i = 0; i < na; i++)
		if (!str_eq(a[i].name, b[i].name) || !str_eq(a[i].value, b[i].value))
			return 0;
	return 1;
}

/* Which field of two records differs, or NULL. */
static const char *rec_diff(const struct obj_meta *a, const struct obj_meta *b)
{
	if (!str_eq(a->bucket, b->bucket))
		return "bucket";
	if (!str_eq(a->key, b->key))
		return "key";
	if (a->size != b->size)
		return "size";
	if (a->mtime_ns != b->mtime_ns)
		return "mtime_ns";
	if (strcmp(a->etag, b->etag))
		return "etag";
	if (strcmp(a->seq, b->seq))
		return "seq";
	if (!str_eq(a->content_type, b->content_type))
		return "content_type";
	if (!kvs_eq(a->meta, a->n_meta, b->meta, b->n_meta))
		return "meta";
	if (!kvs_eq(a->tags, a->n_tags, b->tags, b->n_tags))
		return "tags";
	if (a->flags != b->flags)
		return "flags";
	return NULL;
}

static void doc_agree(const char *what, int ra, const struct ev_doc *a, int rb,
		      const struct ev_doc *b)
{
	FUZZ_CHECK(ra == rb, "%s: rc %d vs tree %d", what, ra, rb);
	FUZZ_CHECK(a->n == b->n && a->n_malformed == b->n_malformed &&
		   a->n_ignored == b->n_ignored,
		   "%s: n %zu/%zu malformed %zu/%zu ignored %zu/%zu vs tree", what,
		   a->n, b->n, a->n_malformed, b->n_malformed, a->n_ignored, b->n_ignored);
	FUZZ_CHECK(strcmp(a->err, b->err) == 0, "%s: err '%s' vs tree '%s'", what,
		   a->err, b->err);
	for (size_t i = 0; i < a->n; i++) {
		const char *f = rec_diff(&a->ev[i], &b->ev[i]);
		FUZZ_CHECK(!f, "%s: record %zu differs from the tree path in %s", what, i, f);
	}
}

static void doc_sane(const struct ev_doc *d, int rc)
{
	FUZZ_CHECK(rc == 0 || rc == -EINVAL || rc == -ENOMEM, "rc %d", rc);
	FUZZ_CHECK(rc != -EINVAL || (d->n == 0 && d->n_malformed == 1 && d->err[0]),
		   "-EINVAL without its counts and reason");
	FUZZ_CHECK(memchr(d->err, '\0', sizeof d->err), "err not terminated");
	for (size_t i = 0; i < d->n; i++) {
		const struct obj_meta *o = &d->ev[i];
		FUZZ_CHECK(o->bucket && o->key, "record %zu without bucket or key", i);
		FUZZ_CHECK(memchr(o->etag, '\0', sizeof o->etag) &&
			   memchr(o->seq, '\0', sizeof o->seq), "record %zu: etag/seq", i);
		for (size_t k = 0; k < o->n_meta; k++)
			FUZZ_CHECK(o->meta[k].name && o->meta[k].value, "record %zu meta %zu", i, k);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ev_doc tree, pub, fast;
	int rt = record_decode_tree(data, size, &tree);
	int rp = record_decode(data, size, &pub);
	int rf = record_decode_fast(data, size, &fast);

	doc_sane(&tree, rt);
	doc_agree("record_decode", rp, &pub, rt, &tree);
	if (rf != RECORD_FAST_FALLBACK) {
		doc_agree("fast path", rf, &fast, rt, &tree);
		ev_doc_release(&fast);
	} else {
		FUZZ_CHECK(fast.n == 0 && fast.ev == NULL, "fallback left records behind");
	}
	ev_doc_release(&tree);
	ev_doc_release(&pub);

	struct ev_part *parts = NULL;
	size_t n = 0;
	char err[256];
	int rs = record_split(data, size, &parts, &n, err, sizeof err);
	FUZZ_CHECK(rs == 0 || rs == -EINVAL || rs == -ENOMEM, "record_split rc %d", rs);
	FUZZ_CHECK(rs == 0 || (parts == NULL && n == 0), "record_split failed with parts");
	for (size_t i = 0; i < n; i++)
		FUZZ_CHECK(parts[i].json && strlen(parts[i].json) == parts[i].json_len,
			   "part %zu: json_len", i);
	ev_parts_free(parts, n);
	return 0;
}
