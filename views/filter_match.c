/*
 * filter_match.c — does an object belong to a view; accessors; diagnostics.
 *
 * Matching reads only the immutable view, so any number of threads may match
 * at once. Conditions run cheapest first (string prefix/suffix, numbers,
 * content type, metadata, tags), then fnmatch, then the regex, then `not`
 * and `any`; the first failing condition ends the test.
 */
#include "views/filter_int.h"

#include <fnmatch.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- diagnostics ---- */

void diag_add(struct diag *d, const char *fmt, ...)
{
	if (!d)
		return;
	char *line = NULL;
	va_list ap;
	va_start(ap, fmt);
	int rc = vasprintf(&line, fmt, ap);
	va_end(ap);
	if (rc < 0)
		return;
	char **grown = realloc(d->lines, (d->n + 1) * sizeof *grown);
	if (!grown) {
		free(line);
		return;
	}
	d->lines = grown;
	d->lines[d->n++] = line;
}

void diag_release(struct diag *d)
{
	for (size_t i = 0; i < d->n; i++)
		free(d->lines[i]);
	free(d->lines);
	d->lines = NULL;
	d->n = 0;
}

/* ---- accessors ---- */

const char *view_name(const struct view *v) { return v->name; }
const char *view_source(const struct view *v) { return v->source; }
size_t view_n_buckets(const struct view *v) { return v->n_buckets; }
const char *view_visibility(const struct view *v)
{
	static const char *const names[] = { "session", "commit", "eventual" };
	return names[v->policy];
}

uint64_t view_warm(const struct view *v, bool *on_scan)
{
	if (on_scan)
		*on_scan = v->warm && v->warm_on_scan;
	return v->warm ? v->warm_max : 0;
}
bool view_writable(const struct view *v) { return v->writable; }
bool view_write_back(const struct view *v) { return v->write_back; }
const char *view_strip_prefix(const struct view *v) { return v->strip_prefix; }
bool view_flat(const struct view *v) { return v->flat; }
unsigned view_needs(const struct view *v) { return v->needs; }
uint64_t view_hash(const struct view *v) { return v->hash; }

const char *view_bucket(const struct view *v, size_t i)
{
	return i < v->n_buckets ? v->buckets[i] : NULL;
}

bool view_uses_bucket(const struct view *v, const char *bucket)
{
	for (size_t i = 0; i < v->n_buckets; i++)
		if (!strcmp(v->buckets[i], bucket))
			return true;
	return false;
}

const struct obj_kv *view_on_create(const struct view *v, size_t *n)
{
	*n = v->n_on_create;
	return v->n_on_create ? v->on_create : NULL;
}

unsigned fl_match_needs(const struct fl_match *m)
{
	unsigned f = 0;
	if (m->n_ctypes)
		f |= OBJ_HAS_CTYPE;
	if (m->n_meta)
		f |= OBJ_HAS_META;
	if (m->n_tags)
		f |= OBJ_HAS_TAGS;
	for (size_t i = 0; i < m->n_any; i++)
		f |= fl_match_needs(&m->any[i]);
	if (m->not_)
		f |= fl_match_needs(m->not_);
	return f;
}

/* ---- matching ---- */

/* "text/plain; charset=utf-8" against "text/plain" or "text/" + "*", ignoring
 * case and parameters. */
static bool ctype_matches(const char *ct, const char *pat)
{
	size_t n = strcspn(ct, "; \t");
	size_t pl = strlen(pat);
	if (pl >= 2 && pat[pl - 1] == '*')
		return n > pl - 1 && !strncasecmp(ct, pat, pl - 1);
	return n == pl && !strncasecmp(ct, pat, pl);
}

static const char *kv_get(const struct obj_kv *kv, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(kv[i].name, name))
			return kv[i].value;
	return NULL;
}

static bool kv_conds_hold(const struct fl_kv_cond *c, size_t nc,
			  const struct obj_kv *kv, size_t n)
{
	for (size_t i = 0; i < nc; i++) {
		const char *val = kv_get(kv, n, c[i].name);
		if (!val)
			return false;
		if (c[i].any_value)
			continue;
		bool one = false;
		for (size_t j = 0; j < c[i].n_values && !one; j++)
			one = !strcmp(c[i].values[j], val);
		if (!one)
			return false;
	}
	return true;
}

static bool regex_search(const pcre2_code *re, const char *key, size_t key_len)
{
	pcre2_match_data *md = pcre2_match_data_create(1, NULL);
	if (!md)
		return false;
	int rc = pcre2_match(re, (PCRE2_SPTR)key, key_len, 0, 0, md, NULL);
	pcre2_match_data_free(md);
	return rc >= 0;
}

static bool match_eval(const struct fl_match *m, const struct obj_meta *o,
		       const char *key, size_t key_len)
{
	if (m->prefix && strncmp(key, m->prefix, m->prefix_len))
		return false;
	if (m->suffix && (key_len < m->suffix_len ||
			  memcmp(key + key_len - m->suffix_len, m->suffix, m->suffix_len)))
		return false;
	if ((m->has_size_min && o->size < m->size_min) ||
	    (m->has_size_max && o->size > m->size_max))
		return false;
	if ((m->has_after && o->mtime_ns < m->after_ns) ||
	    (m->has_before && o->mtime_ns > m->before_ns))
		return false;
	if (m->n_ctypes) {
		if (!(o->flags & OBJ_HAS_CTYPE) || !o->content_type)
			return false;
		bool one = false;
		for (size_t i = 0; i < m->n_ctypes && !one; i++)
			one = ctype_matches(o->content_type, m->ctypes[i]);
		if (!one)
			return false;
	}
	if (m->n_meta && (!(o->flags & OBJ_HAS_META) ||
			  !kv_conds_hold(m->meta, m->n_meta, o->meta, o->n_meta)))
		return false;
	if (m->n_tags && (!(o->flags & OBJ_HAS_TAGS) ||
			  !kv_conds_hold(m->tags, m->n_tags, o->tags, o->n_tags)))
		return false;
	if (m->glob && fnmatch(m->glob, key, FNM_PATHNAME))
		return false;
	if (m->regex && !regex_search(m->regex, key, key_len))
		return false;
	if (m->not_ && match_eval(m->not_, o, key, key_len))
		return false;
	if (m->has_any) {
		for (size_t i = 0; i < m->n_any; i++)
			if (match_eval(&m->any[i], o, key, key_len))
				return true;
		return false;
	}
	return true;
}

bool view_match(const struct view *v, const struct obj_meta *o)
{
	if (!o->bucket || !o->key || !view_uses_bucket(v, o->bucket))
		return false;
	if (strncmp(o->key, v->strip_prefix, v->strip_len))
		return false;
	return match_eval(&v->match, o, o->key, strlen(o->key));
}

/* Three-valued evaluation of the key conditions only. */
enum tri { T_NO, T_MAYBE, T_YES };

static enum tri key_eval(const struct fl_match *m, const char *key, size_t key_len)
{
	if (m->prefix && strncmp(key, m->prefix, m->prefix_len))
		return T_NO;
	if (m->suffix && (key_len < m->suffix_len ||
			  memcmp(key + key_len - m->suffix_len, m->suffix, m->suffix_len)))
		return T_NO;
	if (m->glob && fnmatch(m->glob, key, FNM_PATHNAME))
		return T_NO;
	if (m->regex && !regex_search(m->regex, key, key_len))
		return T_NO;
	enum tri r = T_YES;
	if (m->has_size_min || m->has_size_max || m->has_after || m->has_before ||
	    m->n_ctypes || m->n_meta || m->n_tags)
		r = T_MAYBE;
	if (m->not_) {
		enum tri n = key_eval(m->not_, key, key_len);
		if (n == T_YES)
			return T_NO;
		if (n == T_MAYBE)
			r = T_MAYBE;
	}
	if (m->has_any) {
		enum tri best = T_NO;
		for (size_t i = 0; i < m->n_any && best != T_YES; i++) {
			enum tri a = key_eval(&m->any[i], key, key_len);
			if (a > best)
				best = a;
		}
		if (best == T_NO)
			return T_NO;
		if (best == T_MAYBE)
			r = T_MAYBE;
	}
	return r;
}

bool view_key_can_match(const struct view *v, const char *key)
{
	if (strncmp(key, v->strip_prefix, v->strip_len))
		return false;
	return key_eval(&v->match, key, strlen(key)) != T_NO;
}

/* ---- literal key prefix (for routing events to candidate views) ---- */

struct lit { const char *p; size_t n; };

static void lit_longer(struct lit *best, const char *p, size_t n)
{
	if (n > best->n) {
		best->p = p;
		best->n = n;
	}
}

/* Longest literal prefix implied by the conditions of one match node. Any
 * of them is implied on its own; when two disagree the node matches nothing
 * and either is still true of every key it matches. */
static struct lit node_prefix(const struct fl_match *m)
{
	struct lit best = { "", 0 };
	if (m->prefix)
		lit_longer(&best, m->prefix, m->prefix_len);
	if (m->glob)
		lit_longer(&best, m->glob, strcspn(m->glob, "*?[\\"));
	if (m->has_any && m->n_any) {
		struct lit c = node_prefix(&m->any[0]);
		for (size_t i = 1; i < m->n_any && c.n; i++) {
			struct lit b = node_prefix(&m->any[i]);
			size_t k = 0;
			while (k < c.n && k < b.n && c.p[k] == b.p[k])
				k++;
			c.n = k;
		}
		lit_longer(&best, c.p, c.n);
	}
	return best;
}

const char *view_key_prefix(const struct view *v, size_t *len)
{
	struct lit best = node_prefix(&v->match);
	lit_longer(&best, v->strip_prefix, v->strip_len);
	*len = best.n;
	return best.p;
}
