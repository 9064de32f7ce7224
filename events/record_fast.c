/*
 * record_fast.c — see record_int.h: record_decode()'s single-pass path.
 *
 * Building a cJSON tree of a whole RGW record (about 40 nodes, each a
 * malloc'ed node, name and value) and deleting it again was ~80 % of the
 * cost of decoding an event. Here one pass over a private copy of the
 * document checks its syntax (a strict subset of what cJSON accepts),
 * skips the members nobody reads, and takes the strings it needs in place
 * (their closing quote becomes a NUL). cJSON still decodes whatever has
 * non-trivial semantics: every string token with a backslash escape and
 * every number that is not a short run of digits is parsed by cJSON on
 * its own, so escapes and numbers mean exactly what they mean in the tree
 * path. Whatever is outside that subset, and every record the tree path
 * would count as malformed, makes the whole document go to the tree path
 * (RECORD_FAST_FALLBACK): malformed input is rare, and then the reasons
 * and counts come from one place.
 */
#include "events/record_int.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define FAST_DEPTH_MAX 64      /* deeper: the tree path (cJSON allows 1000) */
#define FAST_PAIRS_MAX 32      /* more metadata or tags: the tree path */
#define FAST_COPY_STACK 8192   /* documents up to this size are copied on the stack */

struct fscan {
	char *p, *end;         /* cursor and end of the private copy (end[0], end[1]: NUL) */
	int depth;
};

enum fv_type { FV_ABSENT, FV_NULL, FV_STR, FV_NUM, FV_OTHER };

struct fval {
	enum fv_type t;
	char *s;               /* FV_STR: decoded, NUL-terminated (in the copy) */
	const char *num;       /* FV_NUM: the token */
	size_t numlen;
};

struct fpairs {
	int state;             /* 0 absent or null, 1 read, -1 not a usable shape */
	size_t n;
	char *k[FAST_PAIRS_MAX], *v[FAST_PAIRS_MAX];
};

/* Bytes that end a plain run inside a string: the quote, the backslash,
 * and control characters (which the fast path does not accept). */
static const unsigned char str_special[256] = {
	[0] = 1, [1] = 1, [2] = 1, [3] = 1, [4] = 1, [5] = 1, [6] = 1, [7] = 1,
	[8] = 1, [9] = 1, [10] = 1, [11] = 1, [12] = 1, [13] = 1, [14] = 1,
	[15] = 1, [16] = 1, [17] = 1, [18] = 1, [19] = 1, [20] = 1, [21] = 1,
	[22] = 1, [23] = 1, [24] = 1, [25] = 1, [26] = 1, [27] = 1, [28] = 1,
	[29] = 1, [30] = 1, [31] = 1, ['"'] = 1, ['\\'] = 1,
};

static void ws_skip(struct fscan *f)
{
	while (f->p < f->end && (*f->p == ' ' || *f->p == '\n' || *f->p == '\r' ||
				 *f->p == '\t'))
		f->p++;
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* At '"': the content [*start, *start + *len) and whether it holds an
 * escape; the cursor moves past the closing quote. false: the tree path. */
static bool str_scan(struct fscan *f, char **start, size_t *len, bool *esc)
{
	char *q = f->p + 1;
	*esc = false;
	for (;;) {
		while (!str_special[(unsigned char)*q])   /* stops at the NULs at the end */
			q++;
		if (q >= f->end)
			return false;
		if (*q == '"')
			break;
		if (*q != '\\')
			return false;              /* a raw control character */
		*esc = true;
		q += 2;        /* at most end + 1: the copy ends in two NULs */
	}
	*start = f->p + 1;
	*len = (size_t)(q - *start);
	f->p = q + 1;
	return true;
}

/* A string token with escapes, decoded by cJSON into out (its content,
 * which the decoded text never outgrows) when out is not NULL; else only
 * checked. false: the tree path. */
static bool str_unescape(const char *tok, size_t toklen, char *out, size_t room)
{
	cJSON *s = cJSON_ParseWithLength(tok, toklen);
	bool ok = s && cJSON_IsString(s) && s->valuestring;
	if (ok && out) {
		size_t n = strlen(s->valuestring);
		ok = n <= room;
		if (ok) {
			memmove(out, s->valuestring, n);
			out[n] = '\0';
		}
	}
	cJSON_Delete(s);
	return ok;
}

/* A string value taken in place: *out NUL-terminated in the copy. */
static bool str_take(struct fscan *f, char **out)
{
	char *tok = f->p, *s;
	size_t len;
	bool esc;
	if (!str_scan(f, &s, &len, &esc))
		return false;
	if (esc && !str_unescape(tok, len + 2, s, len))
		return false;
	if (!esc)
		s[len] = '\0';                     /* the closing quote, already passed */
	*out = s;
	return true;
}

/* A number in strict JSON syntax (a subset of cJSON's); cursor after it. */
static bool num_scan(struct fscan *f)
{
	char *p = f->p, *e = f->end;
	if (p < e && *p == '-')
		p++;
	if (p < e && *p == '0') {
		p++;
	} else if (p < e && *p >= '1' && *p <= '9') {
		while (p < e && is_digit(*p))
			p++;
	} else {
		return false;
	}
	if (p < e && *p == '.') {
		p++;
		if (!(p < e && is_digit(*p)))
			return false;
		while (p < e && is_digit(*p))
			p++;
	}
	if (p < e && (*p == 'e' || *p == 'E')) {
		p++;
		if (p < e && (*p == '+' || *p == '-'))
			p++;
		if (!(p < e && is_digit(*p)))
			return false;
		while (p < e && is_digit(*p))
			p++;
	}
	if (p - f->p > 60)                         /* cJSON reads at most 63 bytes */
		return false;
	f->p = p;
	return true;
}

static bool lit_scan(struct fscan *f, const char *lit, size_t n)
{
	if ((size_t)(f->end - f->p) < n || memcmp(f->p, lit, n) != 0)
		return false;
	f->p += n;
	return true;
}

/* Containers: open at '{' / '['; next returns 1 with the cursor at the
 * next value (for objects *name, *nlen: the member's raw name, which holds
 * no escape), 0 after the closing bracket, -1 for the tree path. */
static bool cont_open(struct fscan *f, char c)
{
	if (f->p >= f->end || *f->p != c || f->depth >= FAST_DEPTH_MAX)
		return false;
	f->p++;
	f->depth++;
	return true;
}

static int cont_sep(struct fscan *f, bool *first, char close)
{
	ws_skip(f);
	if (f->p >= f->end)
		return -1;
	if (*f->p == close) {
		f->p++;
		f->depth--;
		return 0;
	}
	if (*first) {
		*first = false;
	} else {
		if (*f->p != ',')
			return -1;
		f->p++;
		ws_skip(f);
	}
	return 1;
}

static int obj_next(struct fscan *f, bool *first, const char **name, size_t *nlen)
{
	int rc = cont_sep(f, first, '}');
	if (rc <= 0)
		return rc;
	char *s;
	bool esc;
	if (f->p >= f->end || *f->p != '"' || !str_scan(f, &s, nlen, &esc) || esc)
		return -1;
	*name = s;
	ws_skip(f);
	if (f->p >= f->end || *f->p != ':')
		return -1;
	f->p++;
	ws_skip(f);
	return f->p < f->end ? 1 : -1;
}

static int arr_next(struct fscan *f, bool *first)
{
	int rc = cont_sep(f, first, ']');
	return rc == 1 && f->p >= f->end ? -1 : rc;
}

#define NAME_IS(n, nl, lit) ((nl) == sizeof(lit) - 1 && memcmp((n), (lit), (nl)) == 0)

/* Check and pass over one value. */
static bool value_skip(struct fscan *f)
{
	const char *name;
	size_t nlen;
	bool first = true;
	int rc;
	if (f->p >= f->end)
		return false;
	switch (*f->p) {
	case '"': {
		char *tok = f->p, *s;
		size_t len;
		bool esc;
		return str_scan(f, &s, &len, &esc) &&
		       (!esc || str_unescape(tok, len + 2, NULL, 0));
	}
	case '{':
		if (!cont_open(f, '{'))
			return false;
		while ((rc = obj_next(f, &first, &name, &nlen)) == 1)
			if (!value_skip(f))
				return false;
		return rc == 0;
	case '[':
		if (!cont_open(f, '['))
			return false;
		while ((rc = arr_next(f, &first)) == 1)
			if (!value_skip(f))
				return false;
		return rc == 0;
	case 't':
		return lit_scan(f, "true", 4);
	case 'f':
		return lit_scan(f, "false", 5);
	case 'n':
		return lit_scan(f, "null", 4);
	default:
		return num_scan(f);
	}
}

/* A value that should be a string: its type, and the string or number. */
static bool value_read(struct fscan *f, struct fval *v)
{
	if (*f->p == '"') {
		v->t = FV_STR;
		return str_take(f, &v->s);
	}
	if (*f->p == 'n') {
		v->t = FV_NULL;
		return lit_scan(f, "null", 4);
	}
	if (*f->p == '-' || is_digit(*f->p)) {
		v->t = FV_NUM;
		v->num = f->p;
		if (!num_scan(f))
			return false;
		v->numlen = (size_t)(f->p - v->num);
		return true;
	}
	v->t = FV_OTHER;
	return value_skip(f);
}

/* Read the first member of each name only (as cJSON_GetObjectItem does). */
static bool member_read(struct fscan *f, struct fval *v)
{
	return v->t != FV_ABSENT ? value_skip(f) : value_read(f, v);
}

/* metadata / userMetadata / tags: a list of {"key","val"} (RGW) or a map
 * of strings (MinIO); null is "absent". Any other shape: state -1. */
static bool pairs_read(struct fscan *f, struct fpairs *pp)
{
	const char *name;
	size_t nlen;
	bool first = true;
	int rc;
	if (*f->p == 'n' && lit_scan(f, "null", 4)) {
		pp->state = 0;
		return true;
	}
	pp->state = 1;
	if (*f->p == '[') {
		if (!cont_open(f, '['))
			return false;
		while ((rc = arr_next(f, &first)) == 1) {
			struct fval k = { 0 }, val = { 0 };
			bool efirst = true;
			int erc;
			if (*f->p != '{') {
				pp->state = -1;
				if (!value_skip(f))
					return false;
				continue;
			}
			if (!cont_open(f, '{'))
				return false;
			while ((erc = obj_next(f, &efirst, &name, &nlen)) == 1) {
				bool ok = NAME_IS(name, nlen, "key") ? member_read(f, &k)
					: NAME_IS(name, nlen, "val") ? member_read(f, &val)
					: value_skip(f);
				if (!ok)
					return false;
			}
			if (erc < 0)
				return false;
			if (k.t != FV_STR || val.t != FV_STR || pp->n == FAST_PAIRS_MAX) {
				pp->state = -1;
				continue;
			}
			pp->k[pp->n] = k.s;
			pp->v[pp->n++] = val.s;
		}
		return rc == 0;
	}
	if (*f->p == '{') {
		if (!cont_open(f, '{'))
			return false;
		while ((rc = obj_next(f, &first, &name, &nlen)) == 1) {
			struct fval val = { 0 };
			if (!value_read(f, &val))
				return false;
			if (val.t != FV_STR || pp->n == FAST_PAIRS_MAX) {
				pp->state = -1;
				continue;
			}
			((char *)name)[nlen] = '\0';       /* its closing quote */
			pp->k[pp->n] = (char *)name;
			pp->v[pp->n++] = val.s;
		}
		return rc == 0;
	}
	pp->state = -1;
	return value_skip(f);
}

/* What one record holds that the index reads. */
struct frec {
	struct fval name, source, time;
	int s3, bucket, object;        /* 0 absent, 1 an object, -1 something else */
	struct fval bname;
	struct fval key, size, etag, seq, ctype;
	bool meta_seen[2], tags_seen;
	struct fpairs meta[2], tags;
};

static bool object_read(struct fscan *f, struct frec *r)
{
	const char *n;
	size_t nl;
	bool first = true, ok;
	int rc;
	while ((rc = obj_next(f, &first, &n, &nl)) == 1) {
		if (NAME_IS(n, nl, "key"))
			ok = member_read(f, &r->key);
		else if (NAME_IS(n, nl, "size"))
			ok = member_read(f, &r->size);
		else if (NAME_IS(n, nl, "eTag"))
			ok = member_read(f, &r->etag);
		else if (NAME_IS(n, nl, "sequencer"))
			ok = member_read(f, &r->seq);
		else if (NAME_IS(n, nl, "contentType"))
			ok = member_read(f, &r->ctype);
		else if (NAME_IS(n, nl, "metadata") || NAME_IS(n, nl, "userMetadata")) {
			int i = n[0] == 'u';
			ok = r->meta_seen[i] ? value_skip(f) : pairs_read(f, &r->meta[i]);
			r->meta_seen[i] = true;
		} else if (NAME_IS(n, nl, "tags")) {
			ok = r->tags_seen ? value_skip(f) : pairs_read(f, &r->tags);
			r->tags_seen = true;
		} else {
			ok = value_skip(f);
		}
		if (!ok)
			return false;
	}
	return rc == 0;
}

/* A member that should be an object, the first of its name: descend with
 * fn, or note it as something else. */
static bool sub_read(struct fscan *f, int *seen, struct frec *r,
		     bool (*fn)(struct fscan *, struct frec *))
{
	if (*seen)
		return value_skip(f);
	if (*f->p != '{') {
		*seen = -1;
		return value_skip(f);
	}
	*seen = 1;
	return cont_open(f, '{') && fn(f, r);
}

static bool bucket_read(struct fscan *f, struct frec *r)
{
	const char *n;
	size_t nl;
	bool first = true;
	int rc;
	while ((rc = obj_next(f, &first, &n, &nl)) == 1)
		if (!(NAME_IS(n, nl, "name") ? member_read(f, &r->bname) : value_skip(f)))
			return false;
	return rc == 0;
}

static bool s3_read(struct fscan *f, struct frec *r)
{
	const char *n;
	size_t nl;
	bool first = true, ok;
	int rc;
	while ((rc = obj_next(f, &first, &n, &nl)) == 1) {
		if (NAME_IS(n, nl, "bucket"))
			ok = sub_read(f, &r->bucket, r, bucket_read);
		else if (NAME_IS(n, nl, "object"))
			ok = sub_read(f, &r->object, r, object_read);
		else
			ok = value_skip(f);
		if (!ok)
			return false;
	}
	return rc == 0;
}

static bool record_read(struct fscan *f, struct frec *r)
{
	const char *n;
	size_t nl;
	bool first = true, ok;
	int rc;
	if (!cont_open(f, '{'))
		return false;
	while ((rc = obj_next(f, &first, &n, &nl)) == 1) {
		if (NAME_IS(n, nl, "eventName"))
			ok = member_read(f, &r->name);
		else if (NAME_IS(n, nl, "eventSource"))
			ok = member_read(f, &r->source);
		else if (NAME_IS(n, nl, "eventTime"))
			ok = member_read(f, &r->time);
		else if (NAME_IS(n, nl, "s3"))
			ok = sub_read(f, &r->s3, r, s3_read);
		else
			ok = value_skip(f);
		if (!ok)
			return false;
	}
	return rc == 0;
}

static bool str_or_absent(const struct fval *v)
{
	return v->t == FV_ABSENT || v->t == FV_NULL || v->t == FV_STR;
}

/* size as the tree path reads it (a JSON number exact up to 2^53 or a
 * decimal string); false for anything it would call malformed. */
static bool size_get(const struct fval *v, uint64_t *out)
{
	*out = 0;
	if (v->t == FV_ABSENT || v->t == FV_NULL)
		return true;
	if (v->t == FV_NUM && v->numlen <= 15 && v->num[0] != '-') {
		uint64_t x = 0;
		size_t i;
		for (i = 0; i < v->numlen && is_digit(v->num[i]); i++)
			x = x * 10 + (uint64_t)(v->num[i] - '0');
		if (i == v->numlen) {            /* digits only: exact in a double */
			*out = x;
			return true;
		}
	}
	if (v->t == FV_NUM) {
		cJSON *it = cJSON_ParseWithLength(v->num, v->numlen);
		bool ok = it && cJSON_IsNumber(it);
		double d = ok ? it->valuedouble : 0;
		cJSON_Delete(it);
		if (!ok || !(d >= 0 && d <= 9007199254740992.0) || d != (double)(uint64_t)d)
			return false;
		*out = (uint64_t)d;
		return true;
	}
	if (v->t != FV_STR || !v->s[0])
		return false;
	uint64_t x = 0;
	for (const char *p = v->s; *p; p++) {
		if (!is_digit(*p))
			return false;
		unsigned dig = (unsigned)(*p - '0');
		if (x > (UINT64_MAX - dig) / 10)
			return false;
		x = x * 10 + dig;
	}
	*out = x;
	return true;
}

/* Fill o (zeroed) from r as record.c's record_fill() would: 0 (o filled),
 * 1 (a kind that is ignored), FILL_FALLBACK (the tree path would call the
 * record malformed: it decides), -ENOMEM. */
#define FILL_FALLBACK 2
static int record_build(const struct frec *r, struct obj_meta *o)
{
	int rc;
	if (r->name.t != FV_STR)
		return FILL_FALLBACK;
	enum record_kind kind = record_kind_of(r->name.s);
	if (kind == RECORD_KIND_OTHER)
		return 1;
	if (!str_or_absent(&r->source) || r->s3 != 1 || r->bucket != 1 || r->object != 1 ||
	    r->bname.t != FV_STR || !r->bname.s[0] || r->key.t != FV_STR || !r->key.s[0] ||
	    !str_or_absent(&r->time) || !str_or_absent(&r->etag) ||
	    !str_or_absent(&r->seq) || !str_or_absent(&r->ctype) ||
	    r->meta[0].state < 0 || r->meta[1].state < 0 || r->tags.state < 0)
		return FILL_FALLBACK;
	bool ceph = r->source.t == FV_STR && strcmp(r->source.s, "ceph:s3") == 0;
	if (ceph) {
		if (!(o->key = strdup(r->key.s)))
			return -ENOMEM;
	} else if ((rc = record_form_decode(r->key.s, &o->key)) != 0) {
		return rc == -EINVAL ? FILL_FALLBACK : rc;
	}
	if (!(o->bucket = strdup(r->bname.s)))
		return -ENOMEM;
	if (kind == RECORD_KIND_DELETE)
		o->flags |= OBJ_DELETED;
	if (r->time.t == FV_STR && record_time_parse(r->time.s, &o->mtime_ns))
		return FILL_FALLBACK;
	if (!size_get(&r->size, &o->size))
		return FILL_FALLBACK;
	if (r->etag.t == FV_STR && record_etag_set(o, r->etag.s))
		return FILL_FALLBACK;
	if (r->seq.t == FV_STR)
		(void)record_seq_normalise(r->seq.s, ceph, o->seq, sizeof o->seq);
	if (r->ctype.t == FV_STR) {
		if (!(o->content_type = strdup(r->ctype.s)))
			return -ENOMEM;
		o->flags |= OBJ_HAS_CTYPE;
	}
	for (int i = 0; i < 2; i++) {
		if (r->meta[i].state != 1)
			continue;
		for (size_t j = 0; j < r->meta[i].n; j++)
			if ((rc = record_meta_add(o, r->meta[i].k[j], r->meta[i].v[j])))
				return rc;
		o->flags |= OBJ_HAS_META;
	}
	if (r->tags.state == 1) {
		for (size_t j = 0; j < r->tags.n; j++)
			if ((rc = record_tag_add(o, r->tags.k[j], r->tags.v[j])))
				return rc;
		o->flags |= OBJ_HAS_TAGS;
	}
	return 0;
}

/* The Records array, cursor at its '['. */
static int records_read(struct fscan *f, struct ev_doc *out)
{
	size_t cap = 0;
	bool first = true;
	int rc;
	if (!cont_open(f, '['))
		return RECORD_FAST_FALLBACK;
	while ((rc = arr_next(f, &first)) == 1) {
		struct frec r;
		memset(&r, 0, sizeof r);
		if (*f->p != '{' || !record_read(f, &r))
			return RECORD_FAST_FALLBACK;
		if (out->n == cap) {
			size_t nc = cap ? 2 * cap : 4;
			struct obj_meta *ev = realloc(out->ev, nc * sizeof *ev);
			if (!ev)
				return -ENOMEM;
			out->ev = ev;
			cap = nc;
		}
		struct obj_meta *o = &out->ev[out->n];
		memset(o, 0, sizeof *o);
		int b = record_build(&r, o);
		if (b == 0) {
			out->n++;
			continue;
		}
		obj_meta_release(o);
		if (b < 0)
			return b;
		if (b == FILL_FALLBACK)
			return RECORD_FAST_FALLBACK;
		out->n_ignored++;
	}
	return rc == 0 ? 0 : RECORD_FAST_FALLBACK;
}

static int doc_read(struct fscan *f, struct ev_doc *out)
{
	const char *n;
	size_t nl;
	bool first = true, seen = false;
	int rc;
	ws_skip(f);
	if (!cont_open(f, '{'))
		return RECORD_FAST_FALLBACK;
	while ((rc = obj_next(f, &first, &n, &nl)) == 1) {
		if (!seen && NAME_IS(n, nl, "Records")) {
			seen = true;
			int r = records_read(f, out);
			if (r != 0)
				return r;
		} else if (!value_skip(f)) {
			return RECORD_FAST_FALLBACK;
		}
	}
	if (rc < 0 || !seen)
		return RECORD_FAST_FALLBACK;
	for (; f->p < f->end; f->p++)
		if (*f->p != ' ' && *f->p != '\t' && *f->p != '\r' && *f->p != '\n' &&
		    *f->p != '\0')
			return RECORD_FAST_FALLBACK;
	if (!out->ev && !(out->ev = calloc(1, sizeof *out->ev)))
		return -ENOMEM;
	return 0;
}

int record_decode_fast(const void *buf, size_t len, struct ev_doc *out)
{
	char stack[FAST_COPY_STACK], *copy = stack;
	memset(out, 0, sizeof *out);
	if (!buf || len == 0)
		return RECORD_FAST_FALLBACK;
	if (len + 2 > sizeof stack && !(copy = malloc(len + 2)))
		return -ENOMEM;
	memcpy(copy, buf, len);
	copy[len] = copy[len + 1] = '\0';   /* sentinels: str_scan stops there */
	struct fscan f = { copy, copy + len, 0 };
	int rc = doc_read(&f, out);
	if (copy != stack)
		free(copy);
	if (rc != 0)
		ev_doc_release(out);
	return rc;
}
