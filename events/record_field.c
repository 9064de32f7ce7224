/*
 * record_field.c — see record_int.h: the values of one record as both
 * decoders read them (record.c's cJSON tree path and record_fast.c's single
 * pass), so that the two give the same record: what an eventName means,
 * form-escaped keys, sequencers, eventTime, stored headers, tags, the eTag;
 * and releasing a decoded document. No JSON here: each function takes a
 * value already out of the document.
 */
#include "events/record_int.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* What an eventName means for the index. MinIO prefixes names with "s3:".
 * Lifecycle expiry of the current version (AWS, and RGW 18+) removes the
 * object as a DELETE does; expiry of non-current versions, restores,
 * replication, tagging, ACL events change nothing we index. */
enum record_kind record_kind_of(const char *name)
{
	if (strncmp(name, "s3:", 3) == 0)
		name += 3;
	if (strncmp(name, "ObjectCreated:", 14) == 0)
		return RECORD_KIND_PUT;
	if (strncmp(name, "ObjectRemoved:", 14) == 0)
		return RECORD_KIND_DELETE;
	if (strcmp(name, "LifecycleExpiration:Delete") == 0 ||
	    strcmp(name, "LifecycleExpiration:DeleteMarkerCreated") == 0 ||
	    strcmp(name, "ObjectLifecycle:Expiration:Current") == 0 ||
	    strcmp(name, "ObjectLifecycle:Expiration:DeleteMarker") == 0)
		return RECORD_KIND_DELETE;
	return RECORD_KIND_OTHER;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Undo form-URL encoding ('+' is a space, %XX a byte) into a new string.
 * 0, -EINVAL (bad escape or an escaped NUL), -ENOMEM. */
int record_form_decode(const char *s, char **out)
{
	size_t len = strlen(s);
	char *d = malloc(len + 1), *w = d;

	*out = NULL;
	if (!d)
		return -ENOMEM;
	for (const char *p = s; *p; p++) {
		if (*p == '+') {
			*w++ = ' ';
		} else if (*p == '%') {
			int hi = hexval(p[1]), lo = hi < 0 ? -1 : hexval(p[2]);
			if (lo < 0 || (hi == 0 && lo == 0)) {
				free(d);
				return -EINVAL;
			}
			*w++ = (char)(hi << 4 | lo);
			p += 2;
		} else {
			*w++ = *p;
		}
	}
	*w = '\0';
	*out = d;
	return 0;
}

int record_seq_normalise(const char *seq, int ceph, char *out, size_t outlen)
{
	static const char digit[] = "0123456789ABCDEF";
	size_t len = seq ? strlen(seq) : 0;

	if (outlen == 0)
		return -EINVAL;
	out[0] = '\0';
	if (len == 0)
		return -EINVAL;
	if (ceph) {
		uint8_t b[8];
		if (len != 16 || outlen < 17)
			return -EINVAL;
		for (int i = 0; i < 8; i++) {
			int hi = hexval(seq[2 * i]), lo = hexval(seq[2 * i + 1]);
			if (hi < 0 || lo < 0)
				return -EINVAL;
			b[i] = (uint8_t)(hi << 4 | lo);
		}
		uint32_t sec = (uint32_t)b[0] | (uint32_t)b[1] << 8 |
			       (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
		uint32_t nsec = (uint32_t)b[4] | (uint32_t)b[5] << 8 |
				(uint32_t)b[6] << 16 | (uint32_t)b[7] << 24;
		if (nsec >= 1000000000u)
			return -EINVAL;
		uint64_t v = (uint64_t)sec * 1000000000u + nsec;
		for (int i = 15; i >= 0; i--, v >>= 4)
			out[i] = digit[v & 15];
		out[16] = '\0';
		return 0;
	}
	if (len >= outlen)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		int v = hexval(seq[i]);
		if (v < 0) {
			out[0] = '\0';
			return -EINVAL;
		}
		out[i] = digit[v];
	}
	out[len] = '\0';
	return 0;
}

/* ---- eventTime ---- */

static int take_digits(const char **p, int n, int *v)
{
	int x = 0;

	for (int i = 0; i < n; i++) {
		char c = (*p)[i];
		if (c < '0' || c > '9')
			return -1;
		x = x * 10 + (c - '0');
	}
	*p += n;
	*v = x;
	return 0;
}

static bool is_leap(int y)
{
	return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

/* Leap years in 1..y, for y > 0. */
static int64_t leaps_upto(int y)
{
	return y / 4 - y / 100 + y / 400;
}

int record_time_parse(const char *s, int64_t *ns)
{
	static const int cum[12] = { 0, 31, 59, 90, 120, 151, 181, 212, 243,
				     273, 304, 334 };
	static const int mdays[12] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31,
				       30, 31 };
	int y, mo, d, h, mi, se, off = 0;
	int64_t frac = 0;
	const char *p = s;

	if (!s)
		return -EINVAL;
	if (take_digits(&p, 4, &y) || *p++ != '-' || take_digits(&p, 2, &mo) ||
	    *p++ != '-' || take_digits(&p, 2, &d))
		return -EINVAL;
	if (*p != 'T' && *p != 't' && *p != ' ')
		return -EINVAL;
	p++;
	if (take_digits(&p, 2, &h) || *p++ != ':' || take_digits(&p, 2, &mi) ||
	    *p++ != ':' || take_digits(&p, 2, &se))
		return -EINVAL;
	if (*p == '.' || *p == ',') {
		int64_t scale = 100000000;
		p++;
		if (*p < '0' || *p > '9')
			return -EINVAL;
		for (; *p >= '0' && *p <= '9'; p++, scale /= 10)
			frac += (*p - '0') * scale;   /* scale reaches 0 after 9 digits */
	}
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		int sign = *p++ == '-' ? -1 : 1, oh, om;
		if (take_digits(&p, 2, &oh))
			return -EINVAL;
		if (*p == ':')
			p++;
		if (take_digits(&p, 2, &om) || oh > 23 || om > 59)
			return -EINVAL;
		off = sign * (oh * 3600 + om * 60);
	} else {
		return -EINVAL;
	}
	if (*p != '\0')
		return -EINVAL;
	if (y < 1900 || y > 2261 || mo < 1 || mo > 12 || d < 1 ||
	    d > mdays[mo - 1] + (mo == 2 && is_leap(y)) || h > 23 || mi > 59 ||
	    se > 60)
		return -EINVAL;
	int64_t days = 365 * (int64_t)(y - 1970) + leaps_upto(y - 1) -
		       leaps_upto(1969) + cum[mo - 1] +
		       (mo > 2 && is_leap(y)) + d - 1;
	int64_t secs = days * 86400 + h * 3600 + mi * 60 + se - off;
	*ns = secs * 1000000000 + frac;
	return 0;
}

/* ---- metadata, tags, eTag ---- */

static int kv_push(struct obj_kv **arr, size_t *n, char *name, char *value)
{
	struct obj_kv *grown;

	if (!name || !value)
		goto fail;
	grown = realloc(*arr, (*n + 1) * sizeof **arr);
	if (!grown)
		goto fail;
	*arr = grown;
	grown[*n].name = name;
	grown[*n].value = value;
	(*n)++;
	return 0;
fail:
	free(name);
	free(value);
	return -ENOMEM;
}

static char *dup_lower(const char *s)
{
	size_t len = strlen(s);
	char *d = malloc(len + 1);

	if (!d)
		return NULL;
	for (size_t i = 0; i <= len; i++)
		d[i] = (s[i] >= 'A' && s[i] <= 'Z') ? (char)(s[i] + 32) : s[i];
	return d;
}

/* One stored header: x-amz-meta-NAME is user metadata "name" (the first of
 * names equal but for case wins); content-type fills content_type unless the
 * record said it already. Anything else is not user metadata. */
int record_meta_add(struct obj_meta *o, const char *name, const char *val)
{
	static const char pfx[] = "x-amz-meta-";
	const size_t plen = sizeof pfx - 1;

	if (strncasecmp(name, pfx, plen) == 0) {
		const char *n = name + plen;
		if (!*n)
			return 0;
		for (size_t i = 0; i < o->n_meta; i++)
			if (strcasecmp(o->meta[i].name, n) == 0)
				return 0;
		return kv_push(&o->meta, &o->n_meta, dup_lower(n), strdup(val));
	}
	if (strcasecmp(name, "content-type") == 0 && !o->content_type) {
		o->content_type = strdup(val);
		if (!o->content_type)
			return -ENOMEM;
		o->flags |= OBJ_HAS_CTYPE;
	}
	return 0;
}

int record_etag_set(struct obj_meta *o, const char *s)
{
	size_t len = strlen(s);
	if (len >= 2 && s[0] == '"' && s[len - 1] == '"') {
		s++;
		len -= 2;
	}
	if (len >= sizeof o->etag)
		return -1;
	memcpy(o->etag, s, len);
	o->etag[len] = '\0';
	return 0;
}

int record_tag_add(struct obj_meta *o, const char *name, const char *val)
{
	return kv_push(&o->tags, &o->n_tags, strdup(name), strdup(val));
}

/* ---- documents ---- */

void ev_doc_release(struct ev_doc *d)
{
	for (size_t i = 0; i < d->n; i++)
		obj_meta_release(&d->ev[i]);
	free(d->ev);
	memset(d, 0, sizeof *d);
}
