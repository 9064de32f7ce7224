/*
 * test_route.c — unit tests of views/route.h and view_key_prefix().
 *
 * 1. view_key_prefix() on hand-written filters (expected heads written out).
 * 2. Random view sets (prefix, suffix, glob with wildcards and escapes,
 *    regex, any, not, strip_prefix, one to three buckets) against random
 *    keys over a small alphabet, so prefixes nest and collide: for every
 *    object, view_match over the routed candidates selects exactly the views
 *    view_match over all views selects; the candidates are ascending, unique
 *    and exactly the views of the bucket whose literal prefix heads the key
 *    (computed here by brute force).
 * 3. 1,000 prefix views: one key yields a handful of candidates, not 1,000.
 */
#include "views/route.h"
#include "tests/unit/unit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct view *load_quiet(const char *text)
{
	struct view *v = NULL;
	struct diag d = { 0 };
	if (view_load_buf("inline.json", text, strlen(text), &v, &d) < 0)
		v = NULL;
	diag_release(&d);
	return v;
}

/* ---- 1. literal prefixes of hand-written filters ---- */

static void check_prefix(const char *match, const char *layout, const char *want)
{
	char js[1024];
	snprintf(js, sizeof js, "{\"name\":\"v\",\"bucket\":\"b\",\"match\":%s%s%s}",
		 match, layout ? ",\"layout\":" : "", layout ? layout : "");
	struct view *v = load_quiet(js);
	if (!v) {
		CHECK(0, "filter loads: %s", js);
		return;
	}
	size_t n;
	const char *p = view_key_prefix(v, &n);
	CHECK(n == strlen(want) && memcmp(p, want, n) == 0,
	      "view_key_prefix(%s %s) = \"%.*s\" (want \"%s\")", match,
	      layout ? layout : "", (int)n, p, want);
	view_free(v);
}

static void test_key_prefix(void)
{
	check_prefix("{}", NULL, "");
	check_prefix("{\"prefix\":\"ab/\"}", NULL, "ab/");
	check_prefix("{\"suffix\":\".txt\"}", NULL, "");
	check_prefix("{\"glob\":\"ab/*.txt\"}", NULL, "ab/");
	check_prefix("{\"glob\":\"ab?c\"}", NULL, "ab");
	check_prefix("{\"glob\":\"a[bc]d\"}", NULL, "a");
	check_prefix("{\"glob\":\"a\\\\*b\"}", NULL, "a");
	check_prefix("{\"glob\":\"abc\"}", NULL, "abc");
	check_prefix("{\"prefix\":\"a\",\"glob\":\"abc/*\"}", NULL, "abc/");
	check_prefix("{\"regex\":\"^abc\"}", NULL, "");
	check_prefix("{\"not\":{\"prefix\":\"x\"}}", NULL, "");
	check_prefix("{\"any\":[{\"prefix\":\"abc\"},{\"prefix\":\"abd\"}]}", NULL, "ab");
	check_prefix("{\"any\":[{\"prefix\":\"abc\"},{\"glob\":\"*\"}]}", NULL, "");
	check_prefix("{\"any\":[{\"prefix\":\"abc\"}]}", NULL, "abc");
	check_prefix("{\"prefix\":\"a\",\"any\":[{\"prefix\":\"abc\"},{\"glob\":\"abd*\"}]}",
		     NULL, "ab");
	check_prefix("{\"any\":[{\"any\":[{\"prefix\":\"xy1\"},{\"prefix\":\"xy2\"}]},"
		     "{\"prefix\":\"xyz\"}]}", NULL, "xy");
	check_prefix("{}", "{\"strip_prefix\":\"data/\"}", "data/");
	check_prefix("{\"prefix\":\"data/raw/\"}", "{\"strip_prefix\":\"data/\"}", "data/raw/");
	check_prefix("{\"prefix\":\"d\"}", "{\"strip_prefix\":\"data/\"}", "data/");
}

/* ---- 2. random views and keys ---- */

static uint64_t rng = 0x9E3779B97F4A7C15ULL;

static unsigned rnd(unsigned n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (unsigned)(rng % n);
}

static const char alpha[] = "ab/";

static void rnd_lit(char *out, unsigned minlen, unsigned maxlen)
{
	unsigned n = minlen + rnd(maxlen - minlen + 1);
	for (unsigned i = 0; i < n; i++)
		out[i] = alpha[rnd(sizeof alpha - 1)];
	out[n] = '\0';
}

/* A glob over the alphabet with wildcards; "\\\\" is an escaped char in JSON. */
static void rnd_glob(char *out)
{
	static const char *tok[] = { "a", "b", "/", "a", "b", "*", "?", "[ab]", "\\\\a" };
	unsigned n = 1 + rnd(5);
	out[0] = '\0';
	for (unsigned i = 0; i < n; i++)
		strcat(out, tok[rnd(sizeof tok / sizeof *tok)]);
}

/* Append one random match object to js. */
static void rnd_match(char *js, size_t cap, int depth)
{
	char lit[16], part[256];
	size_t at = strlen(js);
	snprintf(js + at, cap - at, "{");
	bool first = true;
#define FIELD(...)                                                             \
	do {                                                                   \
		snprintf(part, sizeof part, __VA_ARGS__);                      \
		at = strlen(js);                                               \
		snprintf(js + at, cap - at, "%s%s", first ? "" : ",", part);   \
		first = false;                                                 \
	} while (0)
	if (rnd(3) == 0) {
		rnd_lit(lit, 1, 4);
		FIELD("\"prefix\":\"%s\"", lit);
	}
	if (rnd(6) == 0) {
		rnd_lit(lit, 1, 2);
		FIELD("\"suffix\":\"%s\"", lit);
	}
	if (rnd(4) == 0) {
		rnd_glob(lit);
		FIELD("\"glob\":\"%s\"", lit);
	}
	if (rnd(8) == 0)
		FIELD("\"regex\":\"%s\"", rnd(2) ? "^ab" : "b/a");
	if (depth < 2 && rnd(5) == 0) {
		FIELD("\"not\":");
		rnd_match(js, cap, depth + 1);
	}
	if (depth < 2 && rnd(4) == 0) {
		unsigned k = 1 + rnd(3);
		FIELD("\"any\":[");
		for (unsigned i = 0; i < k; i++) {
			if (i) {
				at = strlen(js);
				snprintf(js + at, cap - at, ",");
			}
			rnd_match(js, cap, depth + 1);
		}
		at = strlen(js);
		snprintf(js + at, cap - at, "]");
	}
#undef FIELD
	at = strlen(js);
	snprintf(js + at, cap - at, "}");
}

static struct view *rnd_view(int i)
{
	static const char *bks[] = { "bk1", "bk2", "bk3" };
	for (int tries = 0; tries < 100; tries++) {
		char js[8192];
		int b0 = (int)rnd(3), nb = 1 + (int)rnd(3);
		snprintf(js, sizeof js, "{\"name\":\"v%d\",\"bucket\":[", i);
		for (int b = 0; b < nb; b++) {
			size_t at = strlen(js);
			snprintf(js + at, sizeof js - at, "%s\"%s\"", b ? "," : "",
				 bks[(b0 + b) % 3]);
		}
		strcat(js, "],\"match\":");
		rnd_match(js, sizeof js, 0);
		if (rnd(4) == 0) {
			char lit[8];
			rnd_lit(lit, 1, 2);
			size_t at = strlen(js);
			snprintf(js + at, sizeof js - at, ",\"layout\":{\"strip_prefix\":\"%s\"}", lit);
		}
		strcat(js, "}");
		struct view *v = load_quiet(js);
		if (v)
			return v;
	}
	return NULL;
}

static void test_random(void)
{
	enum { ROUNDS = 40, VIEWS = 60, KEYS = 400 };
	static const char *bks[] = { "bk1", "bk2", "bk3", "other" };
	size_t bad_routed = 0, bad_cands = 0, bad_order = 0, matches = 0;
	size_t cands_total = 0, pairs = 0, load_fail = 0;
	for (int round = 0; round < ROUNDS; round++) {
		struct view *views[VIEWS];
		int n = 0;
		for (int i = 0; i < VIEWS; i++) {
			struct view *v = rnd_view(i);
			if (v)
				views[n++] = v;
			else
				load_fail++;
		}
		struct route *r;
		if (route_build((const struct view *const *)views, (size_t)n, &r) < 0) {
			CHECK(0, "route_build of %d random views", n);
			return;
		}
		size_t *cand = malloc((route_max(r) + 1) * sizeof *cand);
		for (int k = 0; k < KEYS; k++) {
			char key[16];
			rnd_lit(key, 0, 7);
			struct obj_meta o = { 0 };
			o.bucket = (char *)bks[rnd(4)];
			o.key = key;
			size_t kl = strlen(key);
			size_t nc = route_find(r, o.bucket, key, kl, cand);
			cands_total += nc;
			pairs += (size_t)n;
			for (size_t c = 1; c < nc; c++)
				bad_order += cand[c - 1] >= cand[c];
			size_t ci = 0;
			for (int i = 0; i < n; i++) {
				bool in = ci < nc && cand[ci] == (size_t)i;
				if (in)
					ci++;
				bool all = view_match(views[i], &o);
				bool routed = in && all;
				matches += all;
				bad_routed += routed != all;
				size_t pl;
				const char *p = view_key_prefix(views[i], &pl);
				bool want = view_uses_bucket(views[i], o.bucket) && pl <= kl &&
					    memcmp(p, key, pl) == 0;
				bad_cands += want != in;
			}
		}
		free(cand);
		route_free(r);
		for (int i = 0; i < n; i++)
			view_free(views[i]);
	}
	CHECK(load_fail == 0, "every random view loads (%zu did not)", load_fail);
	CHECK(bad_routed == 0, "routed matching = matching all views (%zu differences, "
	      "%zu matches over %zu view/object pairs)", bad_routed, matches, pairs);
	CHECK(matches > pairs / 100, "the random sets match often enough to mean something "
	      "(%zu of %zu)", matches, pairs);
	CHECK(bad_cands == 0, "candidates = views of the bucket whose prefix heads the key "
	      "(%zu differences)", bad_cands);
	CHECK(bad_order == 0, "candidates ascending and unique (%zu out of order)", bad_order);
	CHECK(cands_total < pairs / 2, "routing prunes: %zu candidates for %zu pairs",
	      cands_total, pairs);
}

/* ---- 3. a thousand prefix views ---- */

static void test_many(void)
{
	enum { N = 1000 };
	struct view **views = calloc(N, sizeof *views);
	int ok = 1;
	for (int i = 0; i < N && ok; i++) {
		char js[256];
		/* p000/.. p999/, plus every tenth view nested one level deeper,
		 * and every hundredth a view over the whole bucket */
		if (i % 100 == 99)
			snprintf(js, sizeof js, "{\"name\":\"v%d\",\"bucket\":\"bench\"}", i);
		else if (i % 10 == 9)
			snprintf(js, sizeof js, "{\"name\":\"v%d\",\"bucket\":\"bench\","
				 "\"match\":{\"prefix\":\"p%03d/deep/\"}}", i, i - 1);
		else
			snprintf(js, sizeof js, "{\"name\":\"v%d\",\"bucket\":\"bench\","
				 "\"match\":{\"glob\":\"p%03d/*/*\"}}", i, i);
		ok = (views[i] = load_quiet(js)) != NULL;
	}
	CHECK(ok, "1000 views load");
	if (!ok)
		return;
	struct route *r;
	CHECK(route_build((const struct view *const *)views, N, &r) == 0, "route_build(1000)");
	size_t *cand = malloc(route_max(r) * sizeof *cand);
	size_t nc = route_find(r, "bench", "p008/deep/x", 11, cand);
	/* p008/ (view 8), p008/deep/ (view 9), and the ten whole-bucket views */
	CHECK(nc == 12 && cand[0] == 8 && cand[1] == 9 && cand[2] == 99,
	      "p008/deep/x: views 8, 9 and the ten whole-bucket views (%zu)", nc);
	nc = route_find(r, "bench", "p123/run/x", 10, cand);
	CHECK(nc == 11 && cand[0] == 99 && cand[1] == 123,
	      "p123/run/x: view 123 and the ten whole-bucket views (%zu)", nc);
	nc = route_find(r, "bench", "", 0, cand);
	CHECK(nc == 10, "empty key: the whole-bucket views only (%zu)", nc);
	nc = route_find(r, "nope", "p123/run/x", 10, cand);
	CHECK(nc == 0, "unknown bucket: none (%zu)", nc);
	CHECK(route_max(r) == N, "route_max = %zu", route_max(r));
	free(cand);
	route_free(r);
	view_free_all(views, N);

	struct route *e;
	CHECK(route_build(NULL, 0, &e) == 0 && route_max(e) == 0 &&
	      route_find(e, "b", "k", 1, NULL) == 0, "an empty view set routes nothing");
	route_free(e);
}

int main(void)
{
	test_key_prefix();
	test_random();
	test_many();
	return unit_exit();
}
