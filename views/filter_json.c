/*
 * filter_json.c — the values of a filter file as the parser reads them
 * from the cJSON tree, each with a diagnostic naming its path when it is
 * not what it should be (the parser keeps going, so that one run of
 * `facetfs check` shows every problem): expected types, duplicate fields,
 * lists of strings (sorted and de-duplicated, so that view_explain() is
 * the same for every spelling), metadata names, sizes, times, booleans.
 * The bottom of the parser (filter_int.h gives the layers).
 */
#include "views/filter_parse_int.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void fl_perr(struct pctx *c, const char *path, const char *fmt, ...)
{
	char reason[768];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(reason, sizeof reason, fmt, ap);
	va_end(ap);
	diag_add(c->d, "%s: %s: %s", c->file, path, reason);
	c->n_err++;
}

void *fl_oom(struct pctx *c)
{
	c->n_oom++;
	return NULL;
}

char *fl_strdup(struct pctx *c, const char *s)
{
	char *r = strdup(s);
	return r ? r : fl_oom(c);
}

/* Paths longer than PATH_MAX_LEN end in "..." (only absurd files get there). */
static void path_fix(char *out, int n)
{
	if (n >= PATH_MAX_LEN)
		memcpy(out + PATH_MAX_LEN - 4, "...", 4);
}

void fl_path_key(char *out, const char *parent, const char *key)
{
	if (!parent[0])
		path_fix(out, snprintf(out, PATH_MAX_LEN, "%s", key));
	else
		path_fix(out, snprintf(out, PATH_MAX_LEN, "%s.%s", parent, key));
}

void fl_path_idx(char *out, const char *parent, size_t i)
{
	path_fix(out, snprintf(out, PATH_MAX_LEN, "%s[%zu]", parent, i));
}

const char *fl_json_type(const cJSON *j)
{
	if (cJSON_IsString(j))
		return "string";
	if (cJSON_IsNumber(j))
		return "number";
	if (cJSON_IsBool(j))
		return "boolean";
	if (cJSON_IsNull(j))
		return "null";
	if (cJSON_IsArray(j))
		return "array";
	if (cJSON_IsObject(j))
		return "object";
	return "invalid";
}

bool fl_want(struct pctx *c, const cJSON *j, const char *path,
	     cJSON_bool (*is)(const cJSON *const), const char *what)
{
	if (is(j))
		return true;
	fl_perr(c, path, "expected %s, got %s", what, fl_json_type(j));
	return false;
}

/* Reports a duplicate field (cJSON keeps both); returns true if `it` repeats
 * an earlier sibling's name. */
bool fl_dup_field(struct pctx *c, const cJSON *obj, const cJSON *it, const char *path)
{
	for (const cJSON *p = obj->child; p && p != it; p = p->next) {
		if (strcmp(p->string, it->string) == 0) {
			fl_perr(c, path, "duplicate field");
			return true;
		}
	}
	return false;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sort and drop repeats. */
void fl_str_list_normalise(char **v, size_t *n)
{
	if (*n < 2)
		return;
	qsort(v, *n, sizeof *v, cmp_str);
	size_t w = 1;
	for (size_t r = 1; r < *n; r++) {
		if (strcmp(v[r], v[w - 1]) == 0)
			free(v[r]);
		else
			v[w++] = v[r];
	}
	*n = w;
}

void fl_str_list_free(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

/* A string or a non-empty list of strings, in document order. */
int fl_json_str_list(struct pctx *c, const cJSON *j, const char *path,
		     char ***out, size_t *n)
{
	char p[PATH_MAX_LEN];
	*out = NULL;
	*n = 0;
	if (cJSON_IsString(j)) {
		*out = calloc(1, sizeof **out);
		if (!*out || !(**out = fl_strdup(c, j->valuestring))) {
			free(*out);
			*out = NULL;
			fl_oom(c);
			return -1;
		}
		*n = 1;
		return 0;
	}
	if (!cJSON_IsArray(j)) {
		fl_perr(c, path, "expected a string or a list of strings, got %s", fl_json_type(j));
		return -1;
	}
	int cnt = cJSON_GetArraySize(j);
	if (cnt == 0) {
		fl_perr(c, path, "empty list");
		return -1;
	}
	char **v = calloc((size_t)cnt, sizeof *v);
	if (!v) {
		fl_oom(c);
		return -1;
	}
	size_t i = 0;
	int bad = 0;
	const cJSON *e;
	cJSON_ArrayForEach(e, j) {
		fl_path_idx(p, path, i);
		if (!cJSON_IsString(e)) {
			fl_perr(c, p, "expected a string, got %s", fl_json_type(e));
			bad = 1;
		} else if (!(v[*n] = fl_strdup(c, e->valuestring))) {
			bad = 1;
		} else {
			(*n)++;
		}
		i++;
	}
	*out = v;
	return bad ? -1 : 0;
}


/* ---- names ---- */

/* An HTTP header token: what can follow "x-amz-meta-". */
bool fl_is_token(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if (!isalnum(ch) && !strchr("!#$%&'*+-.^_`|~", ch))
			return false;
	}
	return true;
}

void fl_str_lower(char *s)
{
	for (; *s; s++)
		*s = (char)tolower((unsigned char)*s);
}

/* ---- sizes and times (the text forms are in filter_value.c) ---- */

int fl_json_size(struct pctx *c, const cJSON *j, const char *path, uint64_t *out)
{
	if (cJSON_IsNumber(j)) {
		double x = j->valuedouble;
		if (x < 0) {
			fl_perr(c, path, "negative size");
			return -1;
		}
		if (!isfinite(x) || x >= 18446744073709551616.0) {
			fl_perr(c, path, "size too large");
			return -1;
		}
		if (x != (double)(uint64_t)x) {
			fl_perr(c, path, "not a whole number of bytes");
			return -1;
		}
		*out = (uint64_t)x;
		return 0;
	}
	if (!cJSON_IsString(j)) {
		fl_perr(c, path, "expected a number or a string like \"10GiB\", got %s", fl_json_type(j));
		return -1;
	}
	char why[160];
	if (fl_size_parse(j->valuestring, out, why, sizeof why) < 0) {
		fl_perr(c, path, "%s", why);
		return -1;
	}
	return 0;
}

int fl_json_time(struct pctx *c, const cJSON *j, const char *path, int64_t *out)
{
	if (!fl_want(c, j, path, cJSON_IsString, "a string"))
		return -1;
	if (fl_time_parse(j->valuestring, out) < 0) {
		fl_perr(c, path, "bad time \"%s\" (want UTC ISO-8601 like 2026-01-01T00:00:00Z)",
			j->valuestring);
		return -1;
	}
	return 0;
}

/* ---- strings and booleans ---- */

void fl_json_string(struct pctx *c, const cJSON *j, const char *path, char **out)
{
	if (fl_want(c, j, path, cJSON_IsString, "a string"))
		*out = fl_strdup(c, j->valuestring);
}

void fl_json_bool(struct pctx *c, const cJSON *j, const char *path, bool *out)
{
	if (fl_want(c, j, path, cJSON_IsBool, "true or false"))
		*out = cJSON_IsTrue(j);
}
