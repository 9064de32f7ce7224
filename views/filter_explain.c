/*
 * filter_explain.c — the normalised definition of a view as JSON text, for
 * `facetfs check --explain` and, compact, as the input of view_hash().
 *
 * Normal form: every field present with its default; `bucket`,
 * `content_type` and metadata/tag values as sorted lists without repeats
 * (a "*" value alone as the string "*"); sizes in bytes; times in UTC with
 * nanoseconds only when non-zero; match fields in a fixed order.
 */
#include "views/filter_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

static bool add_str_list(cJSON *obj, const char *name, char *const *v, size_t n)
{
	cJSON *a = cJSON_AddArrayToObject(obj, name);
	if (!a)
		return false;
	for (size_t i = 0; i < n; i++) {
		cJSON *s = cJSON_CreateString(v[i]);
		if (!s || !cJSON_AddItemToArray(a, s)) {
			cJSON_Delete(s);
			return false;
		}
	}
	return true;
}

/* A size as a JSON number while a double holds it exactly, else as a
 * string of bytes (which the parser reads back exactly). */
static bool add_u64(cJSON *obj, const char *name, uint64_t x)
{
	char buf[32];
	snprintf(buf, sizeof buf, "%llu", (unsigned long long)x);
	if (x <= (1ull << 53))
		return cJSON_AddRawToObject(obj, name, buf) != NULL;
	return cJSON_AddStringToObject(obj, name, buf) != NULL;
}

static bool add_time(cJSON *obj, const char *name, int64_t ns)
{
	char buf[48];
	fl_time_format(ns, buf, sizeof buf);
	return cJSON_AddStringToObject(obj, name, buf) != NULL;
}

static bool add_kv_conds(cJSON *obj, const char *name, const struct fl_kv_cond *c, size_t n)
{
	cJSON *o = cJSON_AddObjectToObject(obj, name);
	if (!o)
		return false;
	for (size_t i = 0; i < n; i++) {
		bool ok = c[i].any_value ? cJSON_AddStringToObject(o, c[i].name, "*") != NULL
					 : add_str_list(o, c[i].name, c[i].values, c[i].n_values);
		if (!ok)
			return false;
	}
	return true;
}

static cJSON *match_json(const struct fl_match *m)
{
	cJSON *o = cJSON_CreateObject();
	bool ok = o != NULL;
	if (ok && m->prefix)
		ok = cJSON_AddStringToObject(o, "prefix", m->prefix) != NULL;
	if (ok && m->suffix)
		ok = cJSON_AddStringToObject(o, "suffix", m->suffix) != NULL;
	if (ok && m->glob)
		ok = cJSON_AddStringToObject(o, "glob", m->glob) != NULL;
	if (ok && m->regex_src)
		ok = cJSON_AddStringToObject(o, "regex", m->regex_src) != NULL;
	if (ok && (m->has_size_min || m->has_size_max)) {
		cJSON *s = cJSON_AddObjectToObject(o, "size");
		ok = s && (!m->has_size_min || add_u64(s, "min", m->size_min)) &&
		     (!m->has_size_max || add_u64(s, "max", m->size_max));
	}
	if (ok && (m->has_after || m->has_before)) {
		cJSON *t = cJSON_AddObjectToObject(o, "modified");
		ok = t && (!m->has_after || add_time(t, "after", m->after_ns)) &&
		     (!m->has_before || add_time(t, "before", m->before_ns));
	}
	if (ok && m->n_ctypes)
		ok = add_str_list(o, "content_type", m->ctypes, m->n_ctypes);
	if (ok && m->n_meta)
		ok = add_kv_conds(o, "metadata", m->meta, m->n_meta);
	if (ok && m->n_tags)
		ok = add_kv_conds(o, "tags", m->tags, m->n_tags);
	if (ok && m->not_) {
		cJSON *n = match_json(m->not_);
		ok = n && cJSON_AddItemToObject(o, "not", n);
		if (!ok)
			cJSON_Delete(n);
	}
	if (ok && m->has_any) {
		cJSON *a = cJSON_AddArrayToObject(o, "any");
		ok = a != NULL;
		for (size_t i = 0; ok && i < m->n_any; i++) {
			cJSON *s = match_json(&m->any[i]);
			ok = s && cJSON_AddItemToArray(a, s);
			if (!ok)
				cJSON_Delete(s);
		}
	}
	if (!ok) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

static int cmp_kv(const void *a, const void *b)
{
	return strcmp(((const struct obj_kv *)a)->name, ((const struct obj_kv *)b)->name);
}

char *fl_explain(const struct view *v, bool pretty)
{
	char *text = NULL;
	cJSON *root = cJSON_CreateObject();
	if (!root)
		return NULL;
	if (!cJSON_AddStringToObject(root, "name", v->name) ||
	    !add_str_list(root, "bucket", v->buckets, v->n_buckets))
		goto out;
	cJSON *m = match_json(&v->match);
	if (!m || !cJSON_AddItemToObject(root, "match", m)) {
		cJSON_Delete(m);
		goto out;
	}
	cJSON *l = cJSON_AddObjectToObject(root, "layout");
	if (!l || !cJSON_AddStringToObject(l, "strip_prefix", v->strip_prefix) ||
	    !cJSON_AddBoolToObject(l, "flat", v->flat) ||
	    !cJSON_AddStringToObject(root, "visibility", view_visibility(v)) ||
	    !cJSON_AddBoolToObject(root, "writable", v->writable) ||
	    (v->write_back && !cJSON_AddBoolToObject(root, "write_back", true)))
		goto out;
	if (v->warm) {   /* only when set: older definitions keep their hash */
		cJSON *w = cJSON_AddObjectToObject(root, "warm");
		if (!w || !cJSON_AddNumberToObject(w, "max_object", (double)v->warm_max) ||
		    !cJSON_AddBoolToObject(w, "on_scan", v->warm_on_scan))
			goto out;
	}
	cJSON *oc = cJSON_AddObjectToObject(root, "on_create");
	cJSON *md = oc ? cJSON_AddObjectToObject(oc, "metadata") : NULL;
	if (!md)
		goto out;
	struct obj_kv *sorted = NULL;
	if (v->n_on_create) {
		sorted = malloc(v->n_on_create * sizeof *sorted);
		if (!sorted)
			goto out;
		memcpy(sorted, v->on_create, v->n_on_create * sizeof *sorted);
		qsort(sorted, v->n_on_create, sizeof *sorted, cmp_kv);
	}
	bool ok = true;
	for (size_t i = 0; ok && i < v->n_on_create; i++)
		ok = cJSON_AddStringToObject(md, sorted[i].name, sorted[i].value) != NULL;
	free(sorted);
	if (ok)
		text = pretty ? cJSON_Print(root) : cJSON_PrintUnformatted(root);
out:
	cJSON_Delete(root);
	return text;
}

char *view_explain(const struct view *v)
{
	return fl_explain(v, true);
}
