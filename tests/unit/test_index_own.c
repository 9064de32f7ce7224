/* test_index_own.c — unit tests of views/index_own.h: which events are taken
 * as the gateway's own, and the table's bounds (times passed in). */
#include "views/index_own.h"
#include "tests/unit/unit.h"

#define S 1000000000LL

static struct own_version put(const char *etag)
{
	return (struct own_version){ .etag = etag };
}

static const struct own_version del = { .deleted = true };

static bool note(struct own_table *t, const char *key, struct own_version v, int64_t ns)
{
	return own_note(t, "b", key, &v, ns);
}

static bool take(struct own_table *t, const char *bucket, const char *key,
		 struct own_version v, int64_t ns)
{
	return own_take(t, bucket, key, &v, ns);
}

static void test_order(void)
{
	struct own_table *t = own_new();
	CHECK(t && own_keys(t) == 0, "a new table is empty");
	CHECK(!take(t, "b", "k", put("e1"), 0), "nothing noted: no event is ours");
	note(t, "k", put("e1"), 1 * S);
	note(t, "k", put("e2"), 2 * S);
	note(t, "k", del, 3 * S);
	CHECK(own_keys(t) == 1, "three writes of one key: one key");
	CHECK(!take(t, "b", "k", put("e9"), 4 * S), "another ETag is not ours");
	CHECK(!take(t, "b", "other", put("e1"), 4 * S), "another key is not ours");
	CHECK(!take(t, "c", "k", put("e1"), 4 * S), "the same key in another bucket is not ours");
	/* the second write's event: the first is forgotten with it */
	CHECK(take(t, "b", "k", put("e2"), 4 * S), "the second write's event is ours");
	CHECK(!take(t, "b", "k", put("e1"), 4 * S), "the first, before it, is forgotten");
	CHECK(take(t, "b", "k", del, 4 * S), "the delete's event is ours");
	CHECK(own_keys(t) == 0, "all events came: the key is gone");
	/* unknown ETag: any create matches, a delete does not */
	note(t, "u", put(""), 5 * S);
	CHECK(!take(t, "b", "u", del, 5 * S), "a delete is not an unknown-ETag create");
	CHECK(take(t, "b", "u", put("e7"), 5 * S), "an unknown ETag matches a create");
	/* same bytes written three times: three events are ours */
	for (int i = 0; i < 3; i++)
		note(t, "s", put("e"), 6 * S);
	int taken = 0;
	for (int i = 0; i < 4; i++)
		taken += take(t, "b", "s", put("e"), 6 * S);
	CHECK(taken == 3, "three writes of the same ETag: three events ours (%d)", taken);
	/* the record replaced by another client's: our late events match
	 * (and are forgotten) but keep nothing */
	note(t, "r", del, 8 * S);
	note(t, "r", put("e1"), 8 * S);
	own_replaced(t, "b", "r");
	CHECK(!take(t, "b", "r", del, 8 * S), "a record replaced since: our delete's event keeps nothing");
	CHECK(!take(t, "b", "r", put("e1"), 8 * S) && own_keys(t) == 0,
	      "nor our PUT's (%zu keys)", own_keys(t));
	note(t, "r", put("e2"), 8 * S);
	CHECK(take(t, "b", "r", put("e2"), 8 * S), "a new write of ours keeps its record again");

	/* the same bytes with other metadata: another client's copy */
	struct own_version a = { .etag = "e", .has_meta = true, .meta_hash = 1 };
	struct own_version b = a;
	b.meta_hash = 2;
	own_note(t, "b", "m", &a, 7 * S);
	CHECK(!own_take(t, "b", "m", &b, 7 * S), "same ETag, other metadata: not ours");
	b.has_meta = false;
	CHECK(own_take(t, "b", "m", &b, 7 * S), "same ETag, metadata unknown: ours");
	own_free(t);
}

/* own_version_of: metadata hashed whatever the order. */
static void test_version_of(void)
{
	struct obj_kv kv1[2] = { { "mode", "33188" }, { "mtime", "5" } };
	struct obj_kv kv2[2] = { { "mtime", "5" }, { "mode", "33188" } };
	struct obj_kv kv3[2] = { { "mtime", "6" }, { "mode", "33188" } };
	struct obj_meta o = { .etag = "e", .flags = OBJ_HAS_META, .meta = kv1, .n_meta = 2 };
	struct own_version v1, v2, v3;
	own_version_of(&o, &v1);
	o.meta = kv2;
	own_version_of(&o, &v2);
	o.meta = kv3;
	own_version_of(&o, &v3);
	CHECK(v1.has_meta && v1.meta_hash == v2.meta_hash, "the order of the pairs does not count");
	CHECK(v1.meta_hash != v3.meta_hash, "another value does");
	o.flags = OBJ_DELETED;
	own_version_of(&o, &v3);
	CHECK(v3.deleted && !v3.has_meta, "a delete carries no metadata");
}

static void test_bounds(void)
{
	struct own_table *t = own_new();
	note(t, "old", put("e"), 0);
	CHECK(!take(t, "b", "old", put("e"), OWN_TTL_NS + 1),
	      "a write older than the TTL is forgotten");
	CHECK(own_keys(t) == 0, "and its key with it");
	for (int i = 0; i < OWN_PER_KEY + 2; i++) {
		char etag[16];
		snprintf(etag, sizeof etag, "e%d", i);
		note(t, "many", put(etag), 1 * S);
	}
	CHECK(!take(t, "b", "many", put("e0"), 1 * S) &&
	      !take(t, "b", "many", put("e1"), 1 * S),
	      "past %d writes of a key the oldest go", OWN_PER_KEY);
	CHECK(take(t, "b", "many", put("e2"), 1 * S), "the newer ones stay");
	own_free(t);

	t = own_new();
	char key[32];
	int noted = 0;
	for (int i = 0; i < OWN_MAX_KEYS + 10; i++) {
		snprintf(key, sizeof key, "k%d", i);
		noted += note(t, key, put("e"), 1 * S);
	}
	CHECK(noted == OWN_MAX_KEYS && own_keys(t) == OWN_MAX_KEYS,
	      "the table holds at most %d keys (%d noted)", OWN_MAX_KEYS, noted);
	CHECK(!take(t, "b", key, put("e"), 1 * S), "a write not noted is not ours");
	CHECK(note(t, "late", put("e"), 1 * S + OWN_TTL_NS + S),
	      "once the others expire a new key is noted");
	CHECK(own_keys(t) == 1, "the expired keys were swept (%zu left)", own_keys(t));
	own_free(t);

	/* All versions taken: a key with some gives up its oldest, a new
	 * key is not remembered. */
	t = own_new();
	int keys = OWN_MAX_VERSIONS / OWN_PER_KEY, ok = 0;
	for (int i = 0; i < keys; i++)
		for (int j = 0; j < OWN_PER_KEY; j++) {
			char etag[16];
			snprintf(key, sizeof key, "v%d", i);
			snprintf(etag, sizeof etag, "e%d", j);
			ok += note(t, key, put(etag), 1 * S);
		}
	CHECK(ok == OWN_MAX_VERSIONS, "%d versions noted in %d keys", ok, keys);
	CHECK(!note(t, "fresh", put("e"), 1 * S) && own_keys(t) == (size_t)keys,
	      "all %d versions taken: a new key is not remembered", OWN_MAX_VERSIONS);
	CHECK(note(t, "v0", put("new"), 1 * S) && !take(t, "b", "v0", put("e0"), 1 * S) &&
	      take(t, "b", "v0", put("e1"), 1 * S),
	      "… a key that has some gives up its oldest for the new one");
	own_free(t);
}

int main(void)
{
	test_order();
	test_version_of();
	test_bounds();
	return unit_exit();
}
