/*
 * filter_parse.c — JSON filter text -> struct view, with diagnostics: the
 * document and its top-level fields (a `match` object is
 * filter_parse_match.c's, single values filter_json.c's); view_free().
 *
 * Walks the cJSON tree in document order, so errors come out in the order
 * they appear in the file, and keeps going after an error so one run of
 * `facetfs check` shows every problem. A node with an error is still
 * released cleanly: the partially built view is freed at the end when any
 * error was reported. Lists (buckets, content types, values) are sorted and
 * de-duplicated by the parser, which makes view_explain() (and view_hash())
 * the same for every spelling of one definition.
 */
#include "views/filter_parse_int.h"
#include "common/posix.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME_MAX_LEN 255

/* ---- names ---- */

static void check_view_name(struct pctx *c, const char *name)
{
	if (!name[0])
		fl_perr(c, "name", "empty view name");
	else if (strlen(name) > NAME_MAX_LEN)
		fl_perr(c, "name", "view name longer than %d bytes", NAME_MAX_LEN);
	else if (strchr(name, '/'))
		fl_perr(c, "name", "view name \"%s\" contains '/'", name);
	else if (!strcmp(name, ".") || !strcmp(name, ".."))
		fl_perr(c, "name", "view name \"%s\" cannot be a directory name", name);
	else if (name[0] == '.')
		fl_perr(c, "name", "view name \"%s\" starts with '.' (reserved)", name);
}

/* ---- top level ---- */

static void parse_layout(struct pctx *c, const cJSON *j, struct view *v)
{
	char p[PATH_MAX_LEN];
	const cJSON *it;
	if (!fl_want(c, j, "layout", cJSON_IsObject, "an object"))
		return;
	cJSON_ArrayForEach(it, j) {
		fl_path_key(p, "layout", it->string);
		if (fl_dup_field(c, j, it, p))
			continue;
		if (!strcmp(it->string, "strip_prefix")) {
			char *s = NULL;
			fl_json_string(c, it, p, &s);
			if (s) {
				free(v->strip_prefix);
				v->strip_prefix = s;
			}
		} else if (!strcmp(it->string, "flat")) {
			fl_json_bool(c, it, p, &v->flat);
		} else {
			fl_perr(c, p, "unknown field");
		}
	}
}

static void parse_on_create(struct pctx *c, const cJSON *j, struct view *v)
{
	char p[PATH_MAX_LEN], q[PATH_MAX_LEN];
	const cJSON *it, *kv;
	if (!fl_want(c, j, "on_create", cJSON_IsObject, "an object"))
		return;
	cJSON_ArrayForEach(it, j) {
		fl_path_key(p, "on_create", it->string);
		if (fl_dup_field(c, j, it, p))
			continue;
		if (strcmp(it->string, "metadata")) {
			fl_perr(c, p, "unknown field");
			continue;
		}
		if (!fl_want(c, it, p, cJSON_IsObject, "an object like {\"color\": \"black\"}"))
			continue;
		cJSON_ArrayForEach(kv, it) {
			fl_path_key(q, p, kv->string);
			if (fl_dup_field(c, it, kv, q))
				continue;
			char lname[NAME_MAX_LEN + 1];
			snprintf(lname, sizeof lname, "%s", kv->string);
			fl_str_lower(lname);
			if (!fl_is_token(kv->string) || strlen(kv->string) > NAME_MAX_LEN) {
				fl_perr(c, q, "bad metadata name \"%s\"", kv->string);
				continue;
			}
			if (!strncmp(lname, "x-amz-meta-", 11)) {
				fl_perr(c, q, "write the metadata name without \"x-amz-meta-\"");
				continue;
			}
			if (posix_meta_reserved(lname)) {
				fl_perr(c, q, "\"%s\" is a file attribute (mtime, atime, ctime, mode, uid, gid), not user metadata",
					lname);
				continue;
			}
			if (!fl_want(c, kv, q, cJSON_IsString, "a string"))
				continue;
			bool dup = false;
			for (size_t i = 0; i < v->n_on_create; i++)
				dup |= !strcmp(v->on_create[i].name, lname);
			if (dup) {
				fl_perr(c, q, "duplicate metadata name (names ignore case)");
				continue;
			}
			if (obj_kv_add(&v->on_create, &v->n_on_create, lname, kv->valuestring) < 0)
				fl_oom(c);
		}
	}
}

/* S3 bucket names have 3 to 63 bytes. Shorter ones are kept (they are
 * safe directory names, and RGW test setups use them), except "." and
 * "..": a view over several buckets starts its paths with BUCKET/. */
#define BUCKET_MAX_LEN 63

static void parse_buckets(struct pctx *c, const cJSON *j, struct view *v)
{
	char p[PATH_MAX_LEN];
	if (fl_json_str_list(c, j, "bucket", &v->buckets, &v->n_buckets) < 0)
		return;
	for (size_t i = 0; i < v->n_buckets; i++) {
		const char *b = v->buckets[i];
		if (cJSON_IsArray(j))
			fl_path_idx(p, "bucket", i);
		else
			snprintf(p, sizeof p, "bucket");
		size_t len = strlen(b);
		if (!b[0])
			fl_perr(c, p, "empty bucket name");
		else if (len > BUCKET_MAX_LEN)
			fl_perr(c, p, "bucket name of %zu bytes (S3 bucket names have at most %d)",
				len, BUCKET_MAX_LEN);
		else if (!strcmp(b, ".") || !strcmp(b, ".."))
			fl_perr(c, p, "bucket name \"%s\" is no S3 bucket (and cannot be a directory name)", b);
		else if (strchr(b, '/'))
			fl_perr(c, p, "bucket name \"%s\" contains '/'", b);
	}
	fl_str_list_normalise(v->buckets, &v->n_buckets);
}

#define POLICIES "\"session\", \"commit\" or \"eventual\""

/* "warm": true | false | { "max_object": SIZE, "on_scan": BOOL } */
static void parse_warm(struct pctx *c, const cJSON *j, struct view *v)
{
	char p[PATH_MAX_LEN];
	const cJSON *it;
	v->warm_max = FL_WARM_MAX_DEFAULT;
	if (cJSON_IsBool(j)) {
		v->warm = cJSON_IsTrue(j);
		return;
	}
	if (!fl_want(c, j, "warm", cJSON_IsObject,
		     "true, false or an object like {\"max_object\": \"64MiB\"}"))
		return;
	v->warm = true;
	cJSON_ArrayForEach(it, j) {
		fl_path_key(p, "warm", it->string);
		if (fl_dup_field(c, j, it, p))
			continue;
		if (!strcmp(it->string, "max_object")) {
			if (fl_json_size(c, it, p, &v->warm_max) == 0 && v->warm_max == 0)
				fl_perr(c, p, "must be at least 1 byte (use \"warm\": false to turn warming off)");
		} else if (!strcmp(it->string, "on_scan")) {
			fl_json_bool(c, it, p, &v->warm_on_scan);
		} else {
			fl_perr(c, p, "unknown field");
		}
	}
}

static void parse_top(struct pctx *c, const cJSON *root, struct view *v)
{
	const cJSON *it;
	bool has_name = false, has_bucket = false;
	cJSON_ArrayForEach(it, root) {
		const char *k = it->string;
		if (fl_dup_field(c, root, it, k))
			continue;
		if (!strcmp(k, "name")) {
			has_name = true;
			fl_json_string(c, it, k, &v->name);
			if (v->name)
				check_view_name(c, v->name);
		} else if (!strcmp(k, "bucket")) {
			has_bucket = true;
			parse_buckets(c, it, v);
		} else if (!strcmp(k, "match")) {
			fl_parse_match(c, it, "match", &v->match);
		} else if (!strcmp(k, "layout")) {
			parse_layout(c, it, v);
		} else if (!strcmp(k, "visibility")) {
			if (!fl_want(c, it, k, cJSON_IsString, POLICIES))
				continue;
			if (!strcmp(it->valuestring, "commit"))
				v->policy = FL_COMMIT;
			else if (!strcmp(it->valuestring, "eventual"))
				v->policy = FL_EVENTUAL;
			else if (strcmp(it->valuestring, "session"))
				fl_perr(c, k, "bad visibility \"%s\" (want %s)",
					it->valuestring, POLICIES);
		} else if (!strcmp(k, "warm")) {
			parse_warm(c, it, v);
		} else if (!strcmp(k, "writable")) {
			fl_json_bool(c, it, k, &v->writable);
		} else if (!strcmp(k, "write_back")) {
			fl_json_bool(c, it, k, &v->write_back);
		} else if (!strcmp(k, "on_create")) {
			parse_on_create(c, it, v);
		} else {
			fl_perr(c, k, "unknown field");
		}
	}
	/* Write-back publishes after close: only a policy that promises
	 * other gateways nothing at close or fsync allows it. */
	if (v->write_back && v->policy != FL_EVENTUAL)
		fl_perr(c, "write_back", "needs \"visibility\": \"eventual\" (\"%s\" "
			"promises other gateways the data at %s)",
			v->policy == FL_COMMIT ? "commit" : "session",
			v->policy == FL_COMMIT ? "fsync and close" : "close");
	if (v->write_back && !v->writable)
		fl_perr(c, "write_back", "needs \"writable\": true");
	if (!has_name)
		fl_perr(c, "name", "missing required field");
	if (!has_bucket)
		fl_perr(c, "bucket", "missing required field");
}

/* Line and column (1-based, columns in bytes) of offset `off` in buf. */
static void line_col(const char *buf, size_t off, size_t *line, size_t *col)
{
	*line = 1;
	*col = 1;
	for (size_t i = 0; i < off; i++) {
		if (buf[i] == '\n') {
			(*line)++;
			*col = 1;
		} else {
			(*col)++;
		}
	}
}

int view_load_buf(const char *file, const char *buf, size_t len,
		  struct view **out, struct diag *d)
{
	struct pctx c = { .file = file, .d = d };
	struct view *v = NULL;
	cJSON *root = NULL;
	int rc = -EINVAL;
	*out = NULL;

	size_t i = 0;
	while (i < len && strchr(" \t\r\n", buf[i]))
		i++;
	if (i == len) {
		fl_perr(&c, "$", "not JSON: empty file");
		goto out;
	}
	const char *end = NULL;
	root = cJSON_ParseWithLengthOpts(buf, len, &end, false);
	if (root) { /* only white space may follow */
		size_t off = (size_t)(end - buf);
		while (off < len && (strchr(" \t\r\n", buf[off]) || !buf[off]))
			off++;
		if (off < len) {
			size_t ln, col;
			line_col(buf, off, &ln, &col);
			fl_perr(&c, "$", "not JSON: unexpected text after the document at line %zu, column %zu",
				ln, col);
			goto out;
		}
	} else {
		size_t ln, col;
		line_col(buf, end ? (size_t)(end - buf) : 0, &ln, &col);
		fl_perr(&c, "$", "not JSON: syntax error at line %zu, column %zu", ln, col);
		goto out;
	}
	if (!cJSON_IsObject(root)) {
		fl_perr(&c, "$", "expected an object, got %s", fl_json_type(root));
		goto out;
	}
	v = calloc(1, sizeof *v);
	if (!v || !(v->source = strdup(file)) || !(v->strip_prefix = strdup(""))) {
		rc = -ENOMEM;
		goto out;
	}
	parse_top(&c, root, v);
	if (c.n_oom) {
		rc = -ENOMEM;
		goto out;
	}
	if (c.n_err)
		goto out;
	v->strip_len = strlen(v->strip_prefix);
	v->needs = fl_match_needs(&v->match);
	char *compact = fl_explain(v, false);
	if (!compact) {
		rc = -ENOMEM;
		goto out;
	}
	uint64_t h = 0xcbf29ce484222325ull;
	for (const unsigned char *p = (const unsigned char *)compact; *p; p++) {
		h ^= *p;
		h *= 0x100000001b3ull;
	}
	free(compact);
	v->hash = h;
	*out = v;
	v = NULL;
	rc = 0;
out:
	if (rc == -ENOMEM)
		diag_add(d, "%s: $: out of memory", file);
	cJSON_Delete(root);
	view_free(v);
	return rc;
}

void view_free(struct view *v)
{
	if (!v)
		return;
	free(v->name);
	free(v->source);
	fl_str_list_free(v->buckets, v->n_buckets);
	fl_match_release(&v->match);
	free(v->strip_prefix);
	obj_kv_free(v->on_create, v->n_on_create);
	free(v);
}
