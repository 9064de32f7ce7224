/*
 * test_filter.c — unit tests of views/filter.h.
 *
 * argv[1]: tests/data/filters (bad/NAME.json with bad/NAME.expect holding the
 * exact diagnostics, good/NAME.json that must load, dupdir/ + dupdir.expect);
 * argv[2]: examples/views.d (must load with no diagnostics).
 *
 * Matching is checked over a generated set of objects: each object is built
 * from a tuple of small attribute indices, and the expected membership of
 * every filter is a predicate over those indices, not over the strings the
 * filter code looks at.
 */
#include "views/filter.h"
#include "tests/unit/unit.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static struct view *load_str(const char *text)
{
	struct view *v = NULL;
	struct diag d = { 0 };
	int rc = view_load_buf("inline.json", text, strlen(text), &v, &d);
	if (rc < 0) {
		printf("# load failed (%d) for %s\n", rc, text);
		for (size_t i = 0; i < d.n; i++)
			printf("#   %s\n", d.lines[i]);
	}
	diag_release(&d);
	return v;
}

/* ---- generated objects ---- */

struct attrs { int b, d, sub, ext, sc, mc, cc, meta, tg; };

static const char *dirs[] = { "runs/", "logs/", "runs-old/", "" };
static const char *subs[] = { "", "x/", "y/z/" };
static const char *exts[] = { ".fasta", ".txt", ".FASTA", "" };
static const uint64_t sizes[] = { 0, 999, 1000, 1048576, 10737418240ull };
/* 2025-12-31T23:59:59Z, 2026-01-01T00:00:00Z, 2026-06-15T12:00:00.5Z,
 * 2027-01-01T00:00:00Z, as seconds worked out by hand. */
static const int64_t mtimes[] = {
	1767225599LL * 1000000000, 1767225600LL * 1000000000,
	1781524800LL * 1000000000 + 500000000, 1798761600LL * 1000000000,
};
static const char *ctypes[] = { NULL, "text/plain", "application/json; charset=utf-8", "image/PNG" };

#define N_OBJ (2 * 4 * 3 * 4 * 5 * 4 * 4 * 4 * 3)

static void obj_make(size_t i, struct obj_meta *o, struct attrs *a)
{
	size_t r = i;
	a->b = (int)(r % 2); r /= 2;
	a->d = (int)(r % 4); r /= 4;
	a->sub = (int)(r % 3); r /= 3;
	a->ext = (int)(r % 4); r /= 4;
	a->sc = (int)(r % 5); r /= 5;
	a->mc = (int)(r % 4); r /= 4;
	a->cc = (int)(r % 4); r /= 4;
	a->meta = (int)(r % 4); r /= 4;
	a->tg = (int)(r % 3);
	memset(o, 0, sizeof *o);
	o->bucket = strdup(a->b ? "other" : "demo");
	if (asprintf(&o->key, "%s%sf%zu%s", dirs[a->d], subs[a->sub], i, exts[a->ext]) < 0)
		abort();
	o->size = sizes[a->sc];
	o->mtime_ns = mtimes[a->mc];
	if (a->cc) {
		o->flags |= OBJ_HAS_CTYPE;
		o->content_type = strdup(ctypes[a->cc]);
	}
	if (a->meta) {
		o->flags |= OBJ_HAS_META;
		if (a->meta == 2)
			obj_kv_add(&o->meta, &o->n_meta, "color", "black");
		if (a->meta == 3) {
			obj_kv_add(&o->meta, &o->n_meta, "owner", "ann");
			obj_kv_add(&o->meta, &o->n_meta, "color", "green");
		}
	}
	if (a->tg) {
		o->flags |= OBJ_HAS_TAGS;
		obj_kv_add(&o->tags, &o->n_tags, "stage", a->tg == 1 ? "raw" : "done");
	}
}

typedef bool (*pred_fn)(const struct attrs *a);

#define PRED(name, expr) \
	static bool name(const struct attrs *a) { (void)a; return (expr); }

PRED(p_demo, a->b == 0)
PRED(p_all, true)
PRED(p_prefix_runs_slash, a->b == 0 && a->d == 0)
PRED(p_prefix_runs, a->b == 0 && (a->d == 0 || a->d == 2))
PRED(p_suffix_fasta, a->b == 0 && a->ext == 0)
PRED(p_glob_top, a->b == 0 && a->d == 0 && a->sub == 0 && a->ext == 0)
PRED(p_glob_one, a->b == 0 && a->d == 0 && a->sub == 1)
PRED(p_regex_fasta_ci, a->b == 0 && a->d == 0 && (a->ext == 0 || a->ext == 2))
PRED(p_size_mid, a->b == 0 && (a->sc == 2 || a->sc == 3))
PRED(p_size_small, a->b == 0 && a->sc <= 1)
PRED(p_size_ge_kb, a->b == 0 && a->sc >= 2)
PRED(p_after, a->b == 0 && a->mc >= 1)
PRED(p_before_frac, a->b == 0 && a->mc <= 2)
PRED(p_before_sec, a->b == 0 && a->mc <= 1)
PRED(p_window, a->b == 0 && (a->mc == 1 || a->mc == 2))
PRED(p_ct_text, a->b == 0 && a->cc == 1)
PRED(p_ct_app, a->b == 0 && a->cc == 2)
PRED(p_ct_png_or_text, a->b == 0 && (a->cc == 3 || a->cc == 1))
PRED(p_meta_color, a->b == 0 && a->meta >= 2)
PRED(p_meta_green, a->b == 0 && a->meta == 3)
PRED(p_meta_black, a->b == 0 && a->meta == 2)
PRED(p_tags_raw, a->b == 0 && a->tg == 1)
PRED(p_not_runs, a->b == 0 && a->d != 0)
PRED(p_not_black, a->b == 0 && a->meta != 2)
PRED(p_any_txt_big, a->b == 0 && (a->ext == 1 || a->sc == 4))
PRED(p_five, a->b == 0 && a->d == 0 && a->ext == 0 && a->sc >= 1 && a->meta >= 2 && a->cc == 1)
PRED(p_nested, a->b == 0 && ((a->d != 1 && a->ext == 1) || a->tg == 2))
PRED(p_strip, a->b == 0 && a->d == 0)
PRED(p_strip_contradict, false)
PRED(p_none, false)
PRED(p_other, a->b == 1)
PRED(p_tags_any, a->b == 0 && a->tg >= 1)
PRED(p_regex_txt, a->b == 0 && a->ext == 1)
PRED(p_not_any, a->b == 0 && !(a->cc == 1 || a->tg == 1))

struct mcase {
	const char *what;
	const char *json;
	pred_fn expect;
	unsigned needs;
};

#define V(m) "{\"name\":\"t\",\"bucket\":\"demo\",\"match\":" m "}"

static const struct mcase mcases[] = {
	{ "no match object", "{\"name\":\"t\",\"bucket\":\"demo\"}", p_demo, 0 },
	{ "empty match", V("{}"), p_demo, 0 },
	{ "bucket list", "{\"name\":\"t\",\"bucket\":[\"other\",\"demo\"]}", p_all, 0 },
	{ "prefix runs/", V("{\"prefix\":\"runs/\"}"), p_prefix_runs_slash, 0 },
	{ "prefix runs", V("{\"prefix\":\"runs\"}"), p_prefix_runs, 0 },
	{ "suffix .fasta (case-sensitive)", V("{\"suffix\":\".fasta\"}"), p_suffix_fasta, 0 },
	{ "glob runs/*.fasta (* stays in one level)", V("{\"glob\":\"runs/*.fasta\"}"), p_glob_top, 0 },
	{ "glob runs/*/*", V("{\"glob\":\"runs/*/*\"}"), p_glob_one, 0 },
	{ "regex (?i) anchored", V("{\"regex\":\"(?i)^runs/.*\\\\.fasta$\"}"), p_regex_fasta_ci, 0 },
	{ "size 1000..1MiB inclusive", V("{\"size\":{\"min\":1000,\"max\":\"1MiB\"}}"), p_size_mid, 0 },
	{ "size max 999", V("{\"size\":{\"max\":999}}"), p_size_small, 0 },
	{ "size min \"1 KB\"", V("{\"size\":{\"min\":\"1 KB\"}}"), p_size_ge_kb, 0 },
	{ "size max 10GiB inclusive", V("{\"size\":{\"max\":\"10GiB\"}}"), p_demo, 0 },
	{ "size min 0.9765625KiB (= 1000 bytes exactly)",
	  V("{\"size\":{\"min\":\"0.9765625KiB\",\"max\":\"1.5MiB\"}}"), p_size_mid, 0 },
	{ "modified after (inclusive)", V("{\"modified\":{\"after\":\"2026-01-01T00:00:00Z\"}}"), p_after, 0 },
	{ "modified before with fraction (inclusive)",
	  V("{\"modified\":{\"before\":\"2026-06-15T12:00:00.5Z\"}}"), p_before_frac, 0 },
	{ "modified before whole second", V("{\"modified\":{\"before\":\"2026-06-15T12:00:00Z\"}}"), p_before_sec, 0 },
	{ "modified window, date only",
	  V("{\"modified\":{\"after\":\"2026-01-01\",\"before\":\"2026-12-31T23:59:59.999999999Z\"}}"), p_window, 0 },
	{ "content_type text/plain", V("{\"content_type\":\"text/plain\"}"), p_ct_text, OBJ_HAS_CTYPE },
	{ "content_type application/* with parameters", V("{\"content_type\":[\"application/*\"]}"), p_ct_app, OBJ_HAS_CTYPE },
	{ "content_type list, case-insensitive", V("{\"content_type\":[\"image/png\",\"text/*\"]}"), p_ct_png_or_text, OBJ_HAS_CTYPE },
	{ "metadata color *", V("{\"metadata\":{\"color\":\"*\"}}"), p_meta_color, OBJ_HAS_META },
	{ "metadata color one-of", V("{\"metadata\":{\"color\":[\"black\",\"green\"]}}"), p_meta_color, OBJ_HAS_META },
	{ "metadata two names", V("{\"metadata\":{\"owner\":\"ann\",\"color\":\"green\"}}"), p_meta_green, OBJ_HAS_META },
	{ "metadata name in upper case", V("{\"metadata\":{\"COLOR\":\"black\"}}"), p_meta_black, OBJ_HAS_META },
	{ "bucket other only", "{\"name\":\"t\",\"bucket\":[\"other\"]}", p_other, 0 },
	{ "regex searches (unanchored)", V("{\"regex\":\"f[0-9]+[.]txt\"}"), p_regex_txt, 0 },
	{ "tags stage *", V("{\"tags\":{\"stage\":\"*\"}}"), p_tags_any, OBJ_HAS_TAGS },
	{ "tags stage one-of", V("{\"tags\":{\"stage\":[\"raw\",\"done\"]}}"), p_tags_any, OBJ_HAS_TAGS },
	{ "tag names are case-sensitive", V("{\"tags\":{\"Stage\":\"*\"}}"), p_none, OBJ_HAS_TAGS },
	{ "metadata list holding * means present", V("{\"metadata\":{\"color\":[\"x\",\"*\"]}}"), p_meta_color, OBJ_HAS_META },
	{ "tags stage raw", V("{\"tags\":{\"stage\":\"raw\"}}"), p_tags_raw, OBJ_HAS_TAGS },
	{ "not prefix", V("{\"not\":{\"prefix\":\"runs/\"}}"), p_not_runs, 0 },
	{ "not metadata (unknown metadata: inner fails, not holds)",
	  V("{\"not\":{\"metadata\":{\"color\":\"black\"}}}"), p_not_black, OBJ_HAS_META },
	{ "any suffix or size", V("{\"any\":[{\"suffix\":\".txt\"},{\"size\":{\"min\":\"1GB\"}}]}"), p_any_txt_big, 0 },
	{ "five conditions",
	  V("{\"prefix\":\"runs/\",\"suffix\":\".fasta\",\"size\":{\"min\":1},\"metadata\":{\"color\":\"*\"},"
	    "\"content_type\":\"text/*\"}"), p_five, OBJ_HAS_META | OBJ_HAS_CTYPE },
	{ "nested any/not/tags",
	  V("{\"any\":[{\"not\":{\"prefix\":\"logs/\"},\"suffix\":\".txt\"},{\"tags\":{\"stage\":\"done\"}}]}"),
	  p_nested, OBJ_HAS_TAGS },
	{ "not any", V("{\"not\":{\"any\":[{\"content_type\":\"text/plain\"},{\"tags\":{\"stage\":\"raw\"}}]}}"),
	  p_not_any, OBJ_HAS_CTYPE | OBJ_HAS_TAGS },
	{ "strip_prefix limits the view",
	  "{\"name\":\"t\",\"bucket\":\"demo\",\"layout\":{\"strip_prefix\":\"runs/\"}}", p_strip, 0 },
	{ "strip_prefix contradicting prefix: empty view",
	  "{\"name\":\"t\",\"bucket\":\"demo\",\"match\":{\"prefix\":\"logs/\"},\"layout\":{\"strip_prefix\":\"runs/\"}}",
	  p_strip_contradict, 0 },
};

static void test_matching(void)
{
	struct obj_meta *objs = calloc(N_OBJ, sizeof *objs);
	struct attrs *as = calloc(N_OBJ, sizeof *as);
	for (size_t i = 0; i < N_OBJ; i++)
		obj_make(i, &objs[i], &as[i]);
	for (size_t c = 0; c < sizeof mcases / sizeof mcases[0]; c++) {
		const struct mcase *mc = &mcases[c];
		struct view *v = load_str(mc->json);
		if (!v) {
			CHECK(false, "match: %s: loads", mc->what);
			continue;
		}
		size_t wrong = 0, hits = 0, first_bad = SIZE_MAX;
		for (size_t i = 0; i < N_OBJ; i++) {
			bool got = view_match(v, &objs[i]), want = mc->expect(&as[i]);
			hits += got;
			if (got != want && !wrong++)
				first_bad = i;
		}
		CHECK(wrong == 0, "match: %s (%zu of %d objects selected, %zu wrong%s%s)", mc->what, hits,
		      N_OBJ, wrong, wrong ? ", first: " : "", wrong ? objs[first_bad].key : "");
		CHECK(view_needs(v) == mc->needs, "needs: %s (0x%x)", mc->what, view_needs(v));
		view_free(v);
	}

	/* A 5-condition filter, timed. */
	struct view *v = load_str(mcases[sizeof mcases / sizeof mcases[0] - 5].json);
	struct view *vr = load_str(V("{\"prefix\":\"runs/\",\"suffix\":\".fasta\",\"size\":{\"min\":1},"
				     "\"metadata\":{\"color\":\"*\"},\"regex\":\"/f[0-9]+\\\\.fasta$\"}"));
	struct view *vx = load_str(V("{\"regex\":\"^runs/([^/]+/)*f[0-9]+\\\\.fasta$\"}"));
	if (v && vr && vx) {
		struct view *which[3] = { v, vr, vx };
		const char *label[3] = { "prefix+suffix+size+metadata+content_type",
					 "prefix+suffix+size+metadata+regex", "regex alone" };
		for (int w = 0; w < 3; w++) {
			struct timespec t0, t1;
			size_t n = 0, hits = 0;
			clock_gettime(CLOCK_MONOTONIC, &t0);
			for (int round = 0; round < 20; round++)
				for (size_t i = 0; i < N_OBJ; i++, n++)
					hits += view_match(which[w], &objs[i]);
			clock_gettime(CLOCK_MONOTONIC, &t1);
			double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
			printf("# bench: %s: %.2f M matches/s (%zu objects, %zu selected)\n", label[w],
			       (double)n / s / 1e6, n, hits);
			CHECK(hits > 0 && hits < n, "bench: %s selects some but not all", label[w]);
		}
	}
	view_free(v);
	view_free(vr);
	view_free(vx);
	for (size_t i = 0; i < N_OBJ; i++)
		obj_meta_release(&objs[i]);
	free(objs);
	free(as);
}

static void test_unknown_fields(void)
{
	struct view *v = load_str(V("{\"metadata\":{\"color\":\"black\"},\"tags\":{\"stage\":\"raw\"},"
				    "\"content_type\":\"text/plain\"}"));
	if (!v) {
		CHECK(false, "unknown fields: loads");
		return;
	}
	struct obj_meta o = { 0 };
	o.bucket = strdup("demo");
	o.key = strdup("k");
	o.content_type = strdup("text/plain");
	obj_kv_add(&o.meta, &o.n_meta, "color", "black");
	obj_kv_add(&o.tags, &o.n_tags, "stage", "raw");
	o.flags = OBJ_HAS_META | OBJ_HAS_TAGS | OBJ_HAS_CTYPE;
	CHECK(view_match(v, &o), "unknown fields: all known -> match");
	unsigned drop[] = { OBJ_HAS_META, OBJ_HAS_TAGS, OBJ_HAS_CTYPE };
	for (int i = 0; i < 3; i++) {
		o.flags = (OBJ_HAS_META | OBJ_HAS_TAGS | OBJ_HAS_CTYPE) & ~drop[i];
		CHECK(!view_match(v, &o), "unknown fields: flag 0x%x unset -> no match", drop[i]);
	}
	o.flags = OBJ_HAS_META | OBJ_HAS_TAGS | OBJ_HAS_CTYPE;
	free(o.bucket);
	o.bucket = NULL;
	CHECK(!view_match(v, &o), "NULL bucket never matches");
	obj_meta_release(&o);
	view_free(v);
}

/* ---- diagnostics ---- */

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return NULL;
	char *buf = NULL;
	size_t cap = 0;
	ssize_t n = getdelim(&buf, &cap, '\0', f);
	fclose(f);
	if (n < 0) {
		free(buf);
		return strdup("");
	}
	return buf;
}

static char *diag_join(const struct diag *d)
{
	size_t len = 1;
	for (size_t i = 0; i < d->n; i++)
		len += strlen(d->lines[i]) + 1;
	char *s = calloc(1, len), *p = s;
	for (size_t i = 0; i < d->n; i++)
		p += sprintf(p, "%s\n", d->lines[i]);
	return s;
}

static int cmp_strp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted names of the files of dir ending in ext. */
static size_t list_dir(const char *dir, const char *ext, char ***out)
{
	DIR *dh = opendir(dir);
	char **names = NULL;
	size_t n = 0;
	struct dirent *de;
	while (dh && (de = readdir(dh))) {
		size_t l = strlen(de->d_name), el = strlen(ext);
		if (de->d_name[0] == '.' || l <= el || strcmp(de->d_name + l - el, ext))
			continue;
		names = realloc(names, (n + 1) * sizeof *names);
		names[n++] = strdup(de->d_name);
	}
	if (dh)
		closedir(dh);
	if (n)
		qsort(names, n, sizeof *names, cmp_strp);
	*out = names;
	return n;
}

static void test_diagnostics(void)
{
	char **names;
	size_t n = list_dir("bad", ".json", &names);
	CHECK(n >= 15, "diagnostics: %zu bad files found", n);
	for (size_t i = 0; i < n; i++) {
		char path[PATH_MAX], exp_path[PATH_MAX];
		snprintf(path, sizeof path, "bad/%s", names[i]);
		snprintf(exp_path, sizeof exp_path, "bad/%.*s.expect", (int)(strlen(names[i]) - 5), names[i]);
		char *want = slurp(exp_path);
		struct diag d = { 0 };
		struct view *v = NULL;
		int rc = view_load_file(path, &v, &d);
		char *got = diag_join(&d);
		bool same = want && !strcmp(want, got);
		CHECK(rc == -EINVAL && !v && want && want[0] && same, "diagnostics: %s (rc %d, %zu lines)",
		      names[i], rc, d.n);
		if (!same)
			printf("# want:\n%s# got:\n%s", want ? want : "(no .expect file)\n", got);
		free(want);
		free(got);
		diag_release(&d);
		view_free(v);
		free(names[i]);
	}
	free(names);

	n = list_dir("good", ".json", &names);
	CHECK(n >= 3, "good files: %zu found", n);
	for (size_t i = 0; i < n; i++) {
		char path[PATH_MAX];
		snprintf(path, sizeof path, "good/%s", names[i]);
		struct diag d = { 0 };
		struct view *v = NULL;
		int rc = view_load_file(path, &v, &d);
		CHECK(rc == 0 && v && d.n == 0, "good file %s loads (rc %d, %zu lines%s%s)", names[i], rc,
		      d.n, d.n ? ": " : "", d.n ? d.lines[0] : "");
		diag_release(&d);
		view_free(v);
		free(names[i]);
	}
	free(names);

	struct diag d = { 0 };
	struct view *v = NULL;
	int rc = view_load_file("bad/does-not-exist.json", &v, &d);
	CHECK(rc == -ENOENT && d.n == 1 &&
	      !strcmp(d.lines[0], "bad/does-not-exist.json: $: cannot read: No such file or directory"),
	      "missing file: -ENOENT and one line");
	diag_release(&d);

	struct view **vs = NULL;
	size_t nv = 0;
	rc = view_load_dir("dupdir", &vs, &nv, &d);
	char *got = diag_join(&d), *want = slurp("dupdir.expect");
	CHECK(rc == -EINVAL && nv == 2 && want && !strcmp(got, want),
	      "load_dir: duplicate names and bad files reported, good views kept (rc %d, %zu views)", rc, nv);
	if (want && strcmp(got, want))
		printf("# want:\n%s# got:\n%s", want, got);
	if (nv == 2)
		CHECK(!strcmp(view_name(vs[0]), "same") && !strcmp(view_name(vs[1]), "other") &&
		      !strcmp(view_source(vs[0]), "dupdir/a.json"),
		      "load_dir: file order, first definition wins");
	free(got);
	free(want);
	diag_release(&d);
	view_free_all(vs, nv);

	rc = view_load_dir("no-such-dir", &vs, &nv, &d);
	CHECK(rc == -ENOENT && vs == NULL && nv == 0 && d.n == 1, "load_dir: missing dir -> -ENOENT");
	diag_release(&d);
}

static void test_examples(const char *dir)
{
	struct view **vs = NULL;
	size_t nv = 0;
	struct diag d = { 0 };
	char **names;
	size_t n = list_dir(dir, ".json", &names);
	int rc = view_load_dir(dir, &vs, &nv, &d);
	CHECK(rc == 0 && d.n == 0 && nv == n && n >= 3, "examples: %zu of %zu load with no error", nv, n);
	for (size_t i = 0; i < d.n; i++)
		printf("#   %s\n", d.lines[i]);
	for (size_t i = 0; i < nv; i++)
		CHECK(view_uses_bucket(vs[i], "demo"), "example %s uses bucket demo", view_name(vs[i]));
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	diag_release(&d);
	view_free_all(vs, nv);
}

/* ---- key <-> path ---- */

struct kp { const char *key; int rc; const char *path; };

static void kp_cases(const char *what, struct view *v, const struct kp *c, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char out[1024] = "";
		int rc = view_key_path(v, c[i].key, out, sizeof out);
		bool ok = rc == c[i].rc && (rc < 0 || !strcmp(out, c[i].path));
		if (ok && rc == 0) { /* and back */
			char key[1024];
			ok = view_path_key(v, out, key, sizeof key) == 0 && !strcmp(key, c[i].key);
		}
		CHECK(ok, "key_path %s: \"%.40s%s\" -> %d \"%s\"", what, c[i].key,
		      strlen(c[i].key) > 40 ? "..." : "", rc, rc == 0 ? out : "");
	}
}

static void test_paths(void)
{
	char c255[256], c256[257], c300[301], longflat[200], out[1024], k[512];
	memset(c255, 'a', 255); c255[255] = 0;
	memset(c256, 'b', 256); c256[256] = 0;
	memset(c300, 'c', 300); c300[300] = 0;
	for (int i = 0; i < 100; i++)
		longflat[i] = '/';
	longflat[100] = 0;
	char k255[300], k256[300], k300[320], k85[100];
	snprintf(k255, sizeof k255, "d/%s", c255);
	snprintf(k256, sizeof k256, "d/%s", c256);
	snprintf(k300, sizeof k300, "%s/x", c300);
	memset(k85, '/', 85); k85[85] = 0; /* 255 bytes once escaped */

	struct view *v = load_str("{\"name\":\"t\",\"bucket\":\"demo\"}");
	struct kp tree[] = {
		{ "a/b/c", 0, "a/b/c" }, { "a", 0, "a" }, { "a//b", -EINVAL, NULL },
		{ "/a", -EINVAL, NULL }, { "a/", -EINVAL, NULL }, { "", -EINVAL, NULL },
		{ "../x", -EINVAL, NULL }, { "./y", -EINVAL, NULL }, { "a/../b", -EINVAL, NULL },
		{ "a/.", -EINVAL, NULL }, { "..", -EINVAL, NULL }, { "a/.../b", 0, "a/.../b" },
		{ ".hidden/x", 0, ".hidden/x" }, { "a%2Fb", 0, "a%2Fb" },
		{ k255, 0, k255 }, { k256, -EINVAL, NULL }, { k300, -EINVAL, NULL },
	};
	kp_cases("tree", v, tree, sizeof tree / sizeof tree[0]);
	CHECK(view_key_path(v, "a/b/c", out, 5) == -ENAMETOOLONG, "key_path: small buffer -> -ENAMETOOLONG");
	CHECK(view_path_key(v, "a//b", k, sizeof k) == -EINVAL && view_path_key(v, "../x", k, sizeof k) == -EINVAL &&
	      view_path_key(v, "", k, sizeof k) == -EINVAL, "path_key tree: bad paths refused");
	view_free(v);

	v = load_str("{\"name\":\"t\",\"bucket\":\"demo\",\"layout\":{\"strip_prefix\":\"runs/\"}}");
	struct kp strip[] = {
		{ "runs/a/b", 0, "a/b" }, { "logs/a", -ENOENT, NULL }, { "runs", -ENOENT, NULL },
		{ "runs/", -EINVAL, NULL }, { "runs//a", -EINVAL, NULL }, { "runs/../a", -EINVAL, NULL },
	};
	kp_cases("strip_prefix", v, strip, sizeof strip / sizeof strip[0]);
	view_free(v);

	v = load_str("{\"name\":\"t\",\"bucket\":\"demo\",\"layout\":{\"flat\":true,\"strip_prefix\":\"p/\"}}");
	struct kp flat[] = {
		{ "p/a/b%c", 0, "a%2Fb%25c" }, { "p/%", 0, "%25" }, { "p//", 0, "%2F" },
		{ "p/../x", 0, "..%2Fx" }, { "p/.", -EINVAL, NULL }, { "p/..", -EINVAL, NULL },
		{ "p/", -EINVAL, NULL }, { "q/a", -ENOENT, NULL },
	};
	kp_cases("flat", v, flat, sizeof flat / sizeof flat[0]);
	snprintf(k, sizeof k, "p/%s", longflat);
	CHECK(view_key_path(v, k, out, sizeof out) == -EINVAL, "flat: 100 '/' escape to 300 bytes -> -EINVAL");
	snprintf(k, sizeof k, "p/%s", k85);
	CHECK(view_key_path(v, k, out, sizeof out) == 0 && strlen(out) == 255, "flat: 85 '/' escape to 255 bytes");
	CHECK(view_path_key(v, "a%2fb", k, sizeof k) == -EINVAL && view_path_key(v, "a%zz", k, sizeof k) == -EINVAL &&
	      view_path_key(v, "a%2", k, sizeof k) == -EINVAL && view_path_key(v, "a/b", k, sizeof k) == -EINVAL,
	      "path_key flat: lower-case escape, bad escape, '/' refused");

	/* Round trips over random keys and paths from a nasty alphabet. */
	struct view *tv = load_str("{\"name\":\"t\",\"bucket\":\"demo\"}");
	static const char alpha[] = "a/%.2F5";
	unsigned seed = 12345;
	size_t tried = 0, mapped[2] = { 0, 0 }, bad = 0;
	for (int i = 0; i < 200000; i++) {
		char s[16];
		int len = (int)(rand_r(&seed) % 12);
		for (int j = 0; j < len; j++)
			s[j] = alpha[rand_r(&seed) % (sizeof alpha - 1)];
		s[len] = 0;
		struct view *w = (i & 1) ? v : tv;
		char key[64], path[64], back[64];
		snprintf(key, sizeof key, "%s%s", (i & 1) ? "p/" : "", s);
		tried++;
		if (view_key_path(w, key, path, sizeof path) == 0) {
			mapped[i & 1]++;
			if (view_path_key(w, path, back, sizeof back) || strcmp(back, key))
				bad++;
		}
		if (view_path_key(w, s, key, sizeof key) == 0 &&
		    (view_key_path(w, key, back, sizeof back) || strcmp(back, s)))
			bad++;
	}
	CHECK(bad == 0 && mapped[0] > 1000 && mapped[1] > 1000,
	      "round trips: %zu random keys/paths, %zu tree + %zu flat mapped, %zu broken", tried, mapped[0],
	      mapped[1], bad);
	view_free(tv);
	view_free(v);
}

static void test_key_can_match(void)
{
	struct view *v = load_str("{\"name\":\"t\",\"bucket\":\"demo\",\"writable\":true,"
				  "\"match\":{\"prefix\":\"runs/\",\"suffix\":\".fasta\",\"metadata\":{\"color\":\"black\"},"
				  "\"not\":{\"prefix\":\"runs/tmp/\"},"
				  "\"any\":[{\"glob\":\"runs/*.fasta\"},{\"size\":{\"min\":1}}]},"
				  "\"layout\":{\"strip_prefix\":\"runs/\"},"
				  "\"on_create\":{\"metadata\":{\"Color\":\"black\"}}}");
	if (!v) {
		CHECK(false, "key_can_match: loads");
		return;
	}
	CHECK(view_key_can_match(v, "runs/a.fasta"), "key_can_match: runs/a.fasta yes");
	CHECK(view_key_can_match(v, "runs/x/a.fasta"), "key_can_match: runs/x/a.fasta maybe (size in any)");
	CHECK(!view_key_can_match(v, "runs/a.txt"), "key_can_match: wrong suffix no");
	CHECK(!view_key_can_match(v, "logs/a.fasta"), "key_can_match: outside strip_prefix no");
	CHECK(!view_key_can_match(v, "runs/tmp/a.fasta"), "key_can_match: not prefix no");
	size_t n;
	const struct obj_kv *kv = view_on_create(v, &n);
	CHECK(n == 1 && !strcmp(kv[0].name, "color") && !strcmp(kv[0].value, "black"),
	      "on_create metadata, name lower-cased");
	CHECK(view_writable(v) && !strcmp(view_visibility(v), "session") && !view_flat(v) &&
	      !strcmp(view_strip_prefix(v), "runs/"), "accessors and defaults");
	view_free(v);
	bool on_scan = true;
	v = load_str("{\"name\":\"t\",\"bucket\":\"demo\"}");
	CHECK(v && view_warm(v, &on_scan) == 0 && !on_scan, "warm: off by default");
	view_free(v);
	v = load_str("{\"name\":\"t\",\"bucket\":\"demo\",\"visibility\":\"eventual\",\"warm\":true}");
	CHECK(v && !strcmp(view_visibility(v), "eventual") && view_warm(v, &on_scan) == 64ull << 20 &&
	      !on_scan, "eventual; warm: true is 64 MiB, not on scans");
	view_free(v);
	v = load_str("{\"name\":\"t\",\"bucket\":\"demo\",\"warm\":{\"max_object\":\"1KiB\",\"on_scan\":true}}");
	CHECK(v && view_warm(v, &on_scan) == 1024 && on_scan, "warm: max_object and on_scan");
	char *ex = v ? view_explain(v) : NULL;
	CHECK(ex && strstr(ex, "\"warm\"") && strstr(ex, "1024"), "explain shows warm");
	free(ex);
	view_free(v);
	v = load_str("{\"name\":\"t\",\"bucket\":\"demo\",\"warm\":false}");
	CHECK(v && view_warm(v, NULL) == 0, "warm: false");
	view_free(v);
	v = load_str("{\"name\":\"t\",\"bucket\":\"demo\",\"match\":{\"not\":{\"size\":{\"min\":5}},"
		     "\"any\":[{\"regex\":\"^a\"},{\"regex\":\"^b\"}]}}");
	CHECK(v && view_key_can_match(v, "b1") && !view_key_can_match(v, "c1"), "key_can_match: any of regexes");
	view_free(v);
}

static void test_explain_hash(void)
{
	const char *a = "{\"name\":\"n\",\"bucket\":\"demo\",\"match\":{\"size\":{\"min\":\"1KiB\"},"
			"\"content_type\":[\"text/plain\",\"Image/*\"],\"metadata\":{\"Color\":[\"b\",\"a\"]},"
			"\"modified\":{\"after\":\"2026-01-01\"}}}";
	const char *b = "{\"match\":{\"modified\":{\"after\":\"2026-01-01T00:00:00.000Z\"},"
			"\"metadata\":{\"color\":[\"a\",\"b\",\"a\"]},\"content_type\":[\"image/*\",\"text/plain\"],"
			"\"size\":{\"min\":1024}},\"bucket\":[\"demo\",\"demo\"],\"name\":\"n\",\"visibility\":\"session\","
			"\"writable\":false,\"layout\":{\"flat\":false,\"strip_prefix\":\"\"}}";
	const char *c = "{\"name\":\"n\",\"bucket\":\"demo\",\"match\":{\"size\":{\"min\":\"1KB\"},"
			"\"content_type\":[\"text/plain\",\"Image/*\"],\"metadata\":{\"Color\":[\"b\",\"a\"]},"
			"\"modified\":{\"after\":\"2026-01-01\"}}}";
	struct view *va = load_str(a), *vb = load_str(b), *vc = load_str(c);
	CHECK(va && vb && vc, "explain: three spellings load");
	if (!va || !vb || !vc)
		goto out;
	CHECK(view_hash(va) == view_hash(vb), "hash: same definition spelled differently hashes equal");
	CHECK(view_hash(va) != view_hash(vc), "hash: 1KiB vs 1KB hashes differ");
	char *ea = view_explain(va), *eb = view_explain(vb);
	CHECK(ea && eb && !strcmp(ea, eb), "explain: same normal form");
	struct view *back = ea ? load_str(ea) : NULL;
	CHECK(back && view_hash(back) == view_hash(va), "explain: output loads back to the same hash");
	if (ea)
		printf("# explain:\n%s\n", ea);
	view_free(back);
	free(ea);
	free(eb);

	/* Every example file: explain -> load -> same hash; huge sizes survive. */
	struct view *big = load_str(V("{\"size\":{\"max\":\"16777215TiB\",\"min\":9007199254740993},"
				      "\"modified\":{\"before\":\"2030-02-03T04:05:06.000000007Z\"}}"));
	char *eg = big ? view_explain(big) : NULL;
	struct view *big2 = eg ? load_str(eg) : NULL;
	CHECK(big2 && view_hash(big2) == view_hash(big), "explain: sizes above 2^53 and ns times round-trip");
	if (eg && !(big2 && view_hash(big2) == view_hash(big)))
		printf("# %s\n", eg);
	free(eg);
	view_free(big);
	view_free(big2);
out:
	view_free(va);
	view_free(vb);
	view_free(vc);
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s DATA_DIR EXAMPLES_DIR\n", argv[0]);
		return 2;
	}
	test_matching();
	test_unknown_fields();
	test_paths();
	test_key_can_match();
	test_explain_hash();
	test_examples(argv[2]);
	if (chdir(argv[1]) < 0) {
		perror(argv[1]);
		return 2;
	}
	test_diagnostics();
	return unit_exit();
}
