/*
 * fuzz_filter.c — the filter-file parser and validator (views/filter.h,
 * view_load_buf()) on any bytes, as a user may write a views.d file.
 * Refused: -EINVAL with at least one terminated diagnostic line naming
 * the file. Loaded: every bucket name is one S3 can have and a directory
 * name (not "", ".", "..", no '/', at most 63 bytes); the normalised form
 * (view_explain) loads again to the same hash and the same text; the
 * literal key prefix is one every matching key starts with; matching and
 * view_needs run on a few objects.
 */
#include "views/filter.h"
#include "tests/fuzz/fuzz.h"

#include <errno.h>

static void check_buckets(const struct view *v)
{
	FUZZ_CHECK(view_n_buckets(v) > 0, "a view without buckets");
	for (size_t i = 0; i < view_n_buckets(v); i++) {
		const char *b = view_bucket(v, i);
		size_t len = strlen(b);
		FUZZ_CHECK(len > 0 && len <= 63 && strcmp(b, ".") && strcmp(b, "..") &&
			   !strchr(b, '/'), "bucket name \"%s\" accepted", b);
		FUZZ_CHECK(view_uses_bucket(v, b), "view_uses_bucket(\"%s\") false", b);
	}
}

/* Does o match, and if so, does its key start with the view's literal
 * prefix? */
static void check_match(const struct view *v, struct obj_meta *o)
{
	size_t plen = 0;
	const char *pfx = view_key_prefix(v, &plen);
	for (size_t i = 0; i < view_n_buckets(v) && i < 2; i++) {
		o->bucket = (char *)view_bucket(v, i);
		if (view_match(v, o)) {
			FUZZ_CHECK(strncmp(o->key, pfx, plen) == 0,
				   "key \"%s\" matches without the prefix \"%.*s\"", o->key,
				   (int)plen, pfx);
			FUZZ_CHECK(view_key_can_match(v, o->key),
				   "key \"%s\" matches but view_key_can_match() is false", o->key);
		}
	}
	o->bucket = NULL;
	FUZZ_CHECK(!view_match(v, o), "an object without bucket matched");
}

static void check_loaded(struct view *v)
{
	FUZZ_CHECK(view_name(v) && view_name(v)[0], "a view without name");
	check_buckets(v);

	char *text = view_explain(v);
	if (!text)
		return;
	struct view *again = NULL;
	struct diag d = { 0 };
	int rc = view_load_buf("explain.json", text, strlen(text), &again, &d);
	FUZZ_CHECK(rc == 0 || rc == -ENOMEM, "view_explain's text does not load (%d): %s\n%s",
		   rc, d.n ? d.lines[0] : "", text);
	if (rc == 0) {
		FUZZ_CHECK(view_hash(again) == view_hash(v),
			   "the explained view hashes differently:\n%s", text);
		char *text2 = view_explain(again);
		FUZZ_CHECK(!text2 || strcmp(text, text2) == 0,
			   "explain is not stable:\n%s\n---\n%s", text, text2 ? text2 : "");
		free(text2);
		view_free(again);
	}
	diag_release(&d);
	free(text);

	size_t plen = 0;
	const char *pfx = view_key_prefix(v, &plen);
	char key[80];
	snprintf(key, sizeof key, "%.*sx/y.fa", (int)(plen < 60 ? plen : 60), pfx);
	struct obj_kv kv = { "color", "black" };
	struct obj_meta o = {
		.key = key, .size = 4096, .mtime_ns = 1795317752000000000LL,
		.content_type = "text/plain", .meta = &kv, .n_meta = 1,
		.tags = &kv, .n_tags = 1,
		.flags = OBJ_HAS_META | OBJ_HAS_TAGS | OBJ_HAS_CTYPE,
	};
	check_match(v, &o);
	o.key = "runs/2026/a.fasta";
	o.flags = 0;
	check_match(v, &o);
	FUZZ_CHECK((view_needs(v) & ~(unsigned)(OBJ_HAS_META | OBJ_HAS_TAGS | OBJ_HAS_CTYPE)) == 0,
		   "view_needs() flags");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct view *v = NULL;
	struct diag d = { 0 };
	int rc = view_load_buf("f.json", (const char *)data, size, &v, &d);
	FUZZ_CHECK(rc == 0 || rc == -EINVAL || rc == -ENOMEM, "rc %d", rc);
	if (rc == 0) {
		FUZZ_CHECK(v, "0 without a view");
		check_loaded(v);
		view_free(v);
	} else {
		FUZZ_CHECK(!v, "a view returned with rc %d", rc);
		FUZZ_CHECK(rc != -EINVAL || d.n > 0, "-EINVAL without a diagnostic");
		for (size_t i = 0; i < d.n; i++)
			FUZZ_CHECK(strncmp(d.lines[i], "f.json: ", 8) == 0,
				   "diagnostic without the file: '%s'", d.lines[i]);
	}
	diag_release(&d);
	return 0;
}
