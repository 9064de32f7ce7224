/*
 * filter_parse_match.c — a `match` object of a filter file -> struct
 * fl_match (prefix, suffix, glob, regex, size, modified, content types,
 * metadata, tags, and the nested `any` and `not`), with every error; and
 * fl_match_release(), which frees what it built.
 */
#include "views/filter_parse_int.h"
#include "common/posix.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void parse_size_obj(struct pctx *c, const cJSON *j, const char *path, struct fl_match *m)
{
	char p[PATH_MAX_LEN];
	const cJSON *it;
	if (!fl_want(c, j, path, cJSON_IsObject, "an object like {\"min\": 1, \"max\": \"10GiB\"}"))
		return;
	cJSON_ArrayForEach(it, j) {
		fl_path_key(p, path, it->string);
		if (fl_dup_field(c, j, it, p))
			continue;
		if (!strcmp(it->string, "min"))
			m->has_size_min = fl_json_size(c, it, p, &m->size_min) == 0;
		else if (!strcmp(it->string, "max"))
			m->has_size_max = fl_json_size(c, it, p, &m->size_max) == 0;
		else
			fl_perr(c, p, "unknown field");
	}
	if (m->has_size_min && m->has_size_max && m->size_min > m->size_max)
		fl_perr(c, path, "min (%llu) is greater than max (%llu)",
			(unsigned long long)m->size_min, (unsigned long long)m->size_max);
}

static void parse_modified_obj(struct pctx *c, const cJSON *j, const char *path, struct fl_match *m)
{
	char p[PATH_MAX_LEN];
	const cJSON *it;
	if (!fl_want(c, j, path, cJSON_IsObject, "an object like {\"after\": \"2026-01-01T00:00:00Z\"}"))
		return;
	cJSON_ArrayForEach(it, j) {
		fl_path_key(p, path, it->string);
		if (fl_dup_field(c, j, it, p))
			continue;
		if (!strcmp(it->string, "after"))
			m->has_after = fl_json_time(c, it, p, &m->after_ns) == 0;
		else if (!strcmp(it->string, "before"))
			m->has_before = fl_json_time(c, it, p, &m->before_ns) == 0;
		else
			fl_perr(c, p, "unknown field");
	}
	if (m->has_after && m->has_before && m->after_ns > m->before_ns)
		fl_perr(c, path, "after is later than before");
}

static void parse_ctypes(struct pctx *c, const cJSON *j, const char *path, struct fl_match *m)
{
	char p[PATH_MAX_LEN];
	if (fl_json_str_list(c, j, path, &m->ctypes, &m->n_ctypes) < 0)
		return;
	for (size_t i = 0; i < m->n_ctypes; i++) {
		char *t = m->ctypes[i];
		const char *sl = strchr(t, '/');
		bool ok = sl && sl != t && sl[1] && !strchr(sl + 1, '/') &&
			  !strpbrk(t, " ;,\t") &&
			  (!strchr(t, '*') || (strchr(t, '*') == sl + 1 && !sl[2]));
		if (!ok) {
			if (cJSON_IsArray(j))
				fl_path_idx(p, path, i);
			else
				snprintf(p, sizeof p, "%s", path);
			fl_perr(c, p, "bad content type \"%s\" (want TYPE/SUBTYPE or TYPE/*)", t);
		}
		fl_str_lower(t);
	}
	fl_str_list_normalise(m->ctypes, &m->n_ctypes);
}

static int cmp_kv_cond(const void *a, const void *b)
{
	return strcmp(((const struct fl_kv_cond *)a)->name, ((const struct fl_kv_cond *)b)->name);
}

static void parse_kv_conds(struct pctx *c, const cJSON *j, const char *path, bool is_meta,
			   struct fl_kv_cond **out, size_t *n)
{
	char p[PATH_MAX_LEN];
	const cJSON *it;
	if (!fl_want(c, j, path, cJSON_IsObject,
		     is_meta ? "an object like {\"color\": [\"black\", \"green\"]}"
			     : "an object like {\"stage\": \"raw\"}"))
		return;
	int cnt = cJSON_GetArraySize(j);
	if (cnt == 0)
		return;
	struct fl_kv_cond *v = calloc((size_t)cnt, sizeof *v);
	if (!v) {
		fl_oom(c);
		return;
	}
	*out = v;
	cJSON_ArrayForEach(it, j) {
		fl_path_key(p, path, it->string);
		if (fl_dup_field(c, j, it, p))
			continue;
		struct fl_kv_cond *k = &v[*n];
		if (!(k->name = fl_strdup(c, it->string)))
			continue;
		(*n)++;
		if (is_meta) {
			fl_str_lower(k->name);
			if (!strncmp(k->name, "x-amz-meta-", 11)) {
				fl_perr(c, p, "write the metadata name without \"x-amz-meta-\"");
				continue;
			}
			if (!fl_is_token(k->name)) {
				fl_perr(c, p, "bad metadata name \"%s\"", it->string);
				continue;
			}
			if (posix_meta_reserved(k->name)) {
				fl_perr(c, p, "\"%s\" is a file attribute (mtime, atime, ctime, mode, uid, gid), not user metadata",
					k->name);
				continue;
			}
			for (size_t i = 0; i + 1 < *n; i++) {
				if (!strcmp(v[i].name, k->name)) {
					fl_perr(c, p, "duplicate metadata name (names ignore case)");
					break;
				}
			}
		} else if (!k->name[0]) {
			fl_perr(c, p, "empty tag name");
			continue;
		}
		if (fl_json_str_list(c, it, p, &k->values, &k->n_values) < 0)
			continue;
		fl_str_list_normalise(k->values, &k->n_values);
		for (size_t i = 0; i < k->n_values; i++)
			if (!strcmp(k->values[i], "*"))
				k->any_value = true;
		if (k->any_value) {
			fl_str_list_free(k->values, k->n_values);
			k->values = NULL;
			k->n_values = 0;
		}
	}
	qsort(v, *n, sizeof *v, cmp_kv_cond);
}

static void parse_regex(struct pctx *c, const cJSON *j, const char *path, struct fl_match *m)
{
	if (!fl_want(c, j, path, cJSON_IsString, "a string"))
		return;
	int errcode;
	PCRE2_SIZE off;
	m->regex_src = fl_strdup(c, j->valuestring);
	if (!m->regex_src)
		return;
	m->regex = pcre2_compile((PCRE2_SPTR)m->regex_src, PCRE2_ZERO_TERMINATED,
				 PCRE2_UTF | PCRE2_MATCH_INVALID_UTF, &errcode, &off, NULL);
	if (!m->regex) {
		PCRE2_UCHAR msg[256];
		if (pcre2_get_error_message(errcode, msg, sizeof msg) < 0)
			snprintf((char *)msg, sizeof msg, "error %d", errcode);
		fl_perr(c, path, "bad regex at offset %zu: %s", (size_t)off, (char *)msg);
		return;
	}
	/* JIT is an optimisation: without it pcre2_match() interprets. */
	(void)pcre2_jit_compile(m->regex, PCRE2_JIT_COMPLETE);
}

static void parse_any(struct pctx *c, const cJSON *j, const char *path, struct fl_match *m)
{
	char p[PATH_MAX_LEN];
	if (!fl_want(c, j, path, cJSON_IsArray, "a list of match objects"))
		return;
	m->has_any = true;
	int cnt = cJSON_GetArraySize(j);
	if (cnt == 0) {
		fl_perr(c, path, "empty list (needs at least one match object)");
		return;
	}
	m->any = calloc((size_t)cnt, sizeof *m->any);
	if (!m->any) {
		fl_oom(c);
		return;
	}
	const cJSON *e;
	cJSON_ArrayForEach(e, j) {
		fl_path_idx(p, path, m->n_any);
		fl_parse_match(c, e, p, &m->any[m->n_any++]);
	}
}

void fl_parse_match(struct pctx *c, const cJSON *j, const char *path, struct fl_match *m)
{
	char p[PATH_MAX_LEN];
	const cJSON *it;
	if (!fl_want(c, j, path, cJSON_IsObject, "an object"))
		return;
	cJSON_ArrayForEach(it, j) {
		const char *k = it->string;
		fl_path_key(p, path, k);
		if (fl_dup_field(c, j, it, p))
			continue;
		if (!strcmp(k, "prefix")) {
			fl_json_string(c, it, p, &m->prefix);
			m->prefix_len = m->prefix ? strlen(m->prefix) : 0;
		} else if (!strcmp(k, "suffix")) {
			fl_json_string(c, it, p, &m->suffix);
			m->suffix_len = m->suffix ? strlen(m->suffix) : 0;
		} else if (!strcmp(k, "glob")) {
			fl_json_string(c, it, p, &m->glob);
		} else if (!strcmp(k, "regex")) {
			parse_regex(c, it, p, m);
		} else if (!strcmp(k, "size")) {
			parse_size_obj(c, it, p, m);
		} else if (!strcmp(k, "modified")) {
			parse_modified_obj(c, it, p, m);
		} else if (!strcmp(k, "content_type")) {
			parse_ctypes(c, it, p, m);
		} else if (!strcmp(k, "metadata")) {
			parse_kv_conds(c, it, p, true, &m->meta, &m->n_meta);
		} else if (!strcmp(k, "tags")) {
			parse_kv_conds(c, it, p, false, &m->tags, &m->n_tags);
		} else if (!strcmp(k, "any")) {
			parse_any(c, it, p, m);
		} else if (!strcmp(k, "not")) {
			if (!(m->not_ = calloc(1, sizeof *m->not_)))
				fl_oom(c);
			else
				fl_parse_match(c, it, p, m->not_);
		} else {
			fl_perr(c, p, "unknown field");
		}
	}
}

/* ---- freeing ---- */

static void kv_cond_free(struct fl_kv_cond *k, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(k[i].name);
		fl_str_list_free(k[i].values, k[i].n_values);
	}
	free(k);
}

void fl_match_release(struct fl_match *m)
{
	free(m->prefix);
	free(m->suffix);
	free(m->glob);
	free(m->regex_src);
	pcre2_code_free(m->regex);
	fl_str_list_free(m->ctypes, m->n_ctypes);
	kv_cond_free(m->meta, m->n_meta);
	kv_cond_free(m->tags, m->n_tags);
	for (size_t i = 0; i < m->n_any; i++)
		fl_match_release(&m->any[i]);
	free(m->any);
	if (m->not_) {
		fl_match_release(m->not_);
		free(m->not_);
	}
	memset(m, 0, sizeof *m);
}
