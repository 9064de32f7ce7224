/*
 * s3_wire.c — what goes over the wire to S3 and back, as pure functions:
 * key encoding, the ListObjectsV2 XML, dates, ETags, which failures are
 * retried and the one mapping of failures to errnos. See s3_int.h.
 *
 * The XML reader is purpose-built for S3 answers, not a general parser: S3
 * escapes '<' and '&' in character data, so a literal "<Tag>" in the text
 * can only be markup, and finding elements by their tags is exact.
 */
#include "sync/s3/s3_int.h"

#include <curl/curl.h>
#include <openssl/evp.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int s3_url_encode(const char *in, bool keep_slash, char *out, size_t outlen)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;
	for (const unsigned char *p = (const unsigned char *)in; *p; p++) {
		unsigned char c = *p;
		bool keep = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
			    (c >= '0' && c <= '9') || c == '-' || c == '.' ||
			    c == '_' || c == '~' || (keep_slash && c == '/');
		if (keep) {
			if (o + 1 >= outlen)
				return -ENAMETOOLONG;
			out[o++] = (char)c;
		} else {
			if (o + 3 >= outlen)
				return -ENAMETOOLONG;
			out[o++] = '%';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 15];
		}
	}
	if (o >= outlen)
		return -ENAMETOOLONG;
	out[o] = '\0';
	return (int)o;
}

/* UTF-8 bytes of code point cp into out (room for 4); length or 0 if cp is
 * not a valid XML character. */
static size_t wire_utf8_put(unsigned long cp, char *out)
{
	if (cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
		return 0;
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xC0 | (cp >> 6));
		out[1] = (char)(0x80 | (cp & 0x3F));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (char)(0xE0 | (cp >> 12));
		out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
		out[2] = (char)(0x80 | (cp & 0x3F));
		return 3;
	}
	out[0] = (char)(0xF0 | (cp >> 18));
	out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
	out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
	out[3] = (char)(0x80 | (cp & 0x3F));
	return 4;
}

/* Decode the entity at in[0..n) (starting with '&'); *used = its length. */
static int wire_entity(const char *in, size_t n, char *out, size_t *used)
{
	static const struct { const char *name; char c; } named[] = {
		{ "amp;", '&' }, { "lt;", '<' }, { "gt;", '>' },
		{ "quot;", '"' }, { "apos;", '\'' },
	};
	const char *semi = memchr(in, ';', n < 16 ? n : 16);
	if (!semi)
		return -EINVAL;
	size_t elen = (size_t)(semi - in) + 1;
	*used = elen;
	if (elen >= 4 && in[1] == '#') {
		bool hexa = in[2] == 'x' || in[2] == 'X';
		const char *d = in + (hexa ? 3 : 2);
		if (d == semi)
			return -EINVAL;
		unsigned long cp = 0;
		for (; d < semi; d++) {
			unsigned v;
			if (*d >= '0' && *d <= '9')
				v = (unsigned)(*d - '0');
			else if (hexa && *d >= 'a' && *d <= 'f')
				v = (unsigned)(*d - 'a' + 10);
			else if (hexa && *d >= 'A' && *d <= 'F')
				v = (unsigned)(*d - 'A' + 10);
			else
				return -EINVAL;
			cp = cp * (hexa ? 16 : 10) + v;
			if (cp > 0x10FFFF)
				return -EINVAL;
		}
		size_t k = wire_utf8_put(cp, out);
		return k ? (int)k : -EINVAL;
	}
	for (size_t i = 0; i < sizeof named / sizeof named[0]; i++) {
		size_t l = strlen(named[i].name);
		if (elen == l + 1 && memcmp(in + 1, named[i].name, l) == 0) {
			out[0] = named[i].c;
			return 1;
		}
	}
	return -EINVAL;
}

int s3_xml_decode(const char *in, size_t n, char *out, size_t outlen)
{
	size_t o = 0, i = 0;
	/* XML has no U+0000, and a key or id cut at a NUL would name
	 * another object or upload (found by tests/fuzz/fuzz_s3_list.c). */
	if (memchr(in, '\0', n))
		return -EINVAL;
	while (i < n) {
		const char *amp = memchr(in + i, '&', n - i);
		size_t run = amp ? (size_t)(amp - (in + i)) : n - i;
		if (o + run >= outlen)
			return -EOVERFLOW;
		memcpy(out + o, in + i, run);
		o += run;
		i += run;
		if (!amp)
			break;
		char tmp[4];
		size_t used;
		int k = wire_entity(in + i, n - i, tmp, &used);
		if (k < 0)
			return k;
		if (o + (size_t)k >= outlen)
			return -EOVERFLOW;
		memcpy(out + o, tmp, (size_t)k);
		o += (size_t)k;
		i += used;
	}
	if (o >= outlen)
		return -EOVERFLOW;
	out[o] = '\0';
	return (int)o;
}

bool s3_xml_find(const char *xml, size_t len, const char *tag,
		 const char **text, size_t *tlen)
{
	char open[64], close[64];
	size_t tl = strlen(tag);
	if (tl + 3 >= sizeof close)
		return false;
	open[0] = '<';
	memcpy(open + 1, tag, tl);
	open[tl + 1] = '>';
	close[0] = '<';
	close[1] = '/';
	memcpy(close + 2, tag, tl + 1);
	close[tl + 2] = '>';
	const char *a = memmem(xml, len, open, tl + 2);
	if (!a)
		return false;
	a += tl + 2;
	const char *b = memchr(a, '<', len - (size_t)(a - xml));
	if (!b || (size_t)(xml + len - b) < tl + 3 || memcmp(b, close, tl + 3))
		return false;   /* character data holds no '<': it must close here */
	*text = a;
	*tlen = (size_t)(b - a);
	return true;
}

static bool wire_parse_u64(const char *s, size_t n, uint64_t *out)
{
	uint64_t v = 0;
	if (n == 0 || n > 20)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		uint64_t nv = v * 10 + (uint64_t)(s[i] - '0');
		if (nv / 10 != v)
			return false;
		v = nv;
	}
	*out = v;
	return true;
}

/* A growable buffer for decoded keys, on the stack until a key is long. */
struct wire_keybuf {
	char *p;
	size_t cap;
	char stack[2048];
};

static int wire_keybuf_fit(struct wire_keybuf *k, size_t need)
{
	if (need <= k->cap)
		return 0;
	char *nb = malloc(need);
	if (!nb)
		return -ENOMEM;
	if (k->p != k->stack)
		free(k->p);
	k->p = nb;
	k->cap = need;
	return 0;
}

/* The children of one <Contents>, from p (just after its open tag); one
 * pass over the bytes. *next is set after the closing tag. */
static int wire_list_entry(const char *p, const char *end, const char *bucket,
			   struct wire_keybuf *kb, s3_list_fn fn, void *ctx,
			   const char **next)
{
	struct obj_meta o = { .bucket = (char *)bucket, .flags = OBJ_FROM_SCAN };
	bool have_key = false;
	for (;;) {
		/* Short distances: plain loops beat memchr's call overhead. */
		const char *lt = p, *gt;
		while (lt < end && *lt != '<')
			lt++;
		for (gt = lt; gt < end && *gt != '>'; gt++)
			;
		if (gt >= end)
			return -EPROTO;
		const char *name = lt + 1;
		size_t nl = (size_t)(gt - name);
		p = gt + 1;
		if (nl == 9 && memcmp(name, "/Contents", 9) == 0)
			break;
		if (nl == 0 || name[0] == '/' || name[nl - 1] == '/')
			continue;            /* a closing or empty element */
		const char *t = p, *te = p;
		while (te < end && *te != '<')
			te++;
		if (te >= end)
			return -EPROTO;
		size_t tl = (size_t)(te - t);
		if (nl == 3 && memcmp(name, "Key", 3) == 0) {
			if (wire_keybuf_fit(kb, tl + 1) < 0)
				return -ENOMEM;
			if (s3_xml_decode(t, tl, kb->p, kb->cap) <= 0)
				return -EPROTO;
			have_key = true;
		} else if (nl == 4 && memcmp(name, "Size", 4) == 0) {
			if (!wire_parse_u64(t, tl, &o.size))
				return -EPROTO;
		} else if (nl == 12 && memcmp(name, "LastModified", 12) == 0) {
			int64_t ns = s3_time_iso(t, tl);
			o.mtime_ns = ns < 0 ? 0 : ns;
		} else if (nl == 4 && memcmp(name, "ETag", 4) == 0) {
			char raw[160];
			int n = s3_xml_decode(t, tl, raw, sizeof raw);
			if (n > 0)
				s3_etag_copy(o.etag, raw, (size_t)n);
		}
	}
	*next = p;
	if (!have_key)
		return -EPROTO;
	o.key = kb->p;
	return fn(ctx, &o);
}

int s3_xml_list_parse(const char *xml, size_t len, const char *bucket,
		      s3_list_fn fn, void *ctx, char *next_token, size_t ntlen,
		      bool *truncated)
{
	const char *t;
	size_t tl;
	if (!memmem(xml, len, "<ListBucketResult", 17))
		return -EPROTO;
	*truncated = s3_xml_find(xml, len, "IsTruncated", &t, &tl) &&
		     tl == 4 && memcmp(t, "true", 4) == 0;
	if (ntlen)
		next_token[0] = '\0';
	if (s3_xml_find(xml, len, "NextContinuationToken", &t, &tl) &&
	    s3_xml_decode(t, tl, next_token, ntlen) < 0)
		return -EOVERFLOW;
	if (*truncated && (!ntlen || !next_token[0]))
		return -EPROTO;   /* truncated without a way to go on */

	struct wire_keybuf kb;
	kb.p = kb.stack;
	kb.cap = sizeof kb.stack;
	int rc = 0;
	const char *p = xml, *end = xml + len;
	for (;;) {
		const char *a = memmem(p, (size_t)(end - p), "<Contents>", 10);
		if (!a)
			break;
		rc = wire_list_entry(a + 10, end, bucket, &kb, fn, ctx, &p);
		if (rc != 0)
			break;
	}
	if (kb.p != kb.stack)
		free(kb.p);
	return rc;
}

/* Days since 1970-01-01 of a proleptic Gregorian date (m 1..12). */
static int64_t wire_days(int64_t y, int m, int d)
{
	y -= m <= 2;
	int64_t era = (y >= 0 ? y : y - 399) / 400;
	int64_t yoe = y - era * 400;
	int64_t mp = (m + 9) % 12;                   /* March = 0 */
	int64_t doy = (153 * mp + 2) / 5 + d - 1;
	int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

static bool wire_num(const char *s, size_t n, int *out)
{
	int v = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (s[i] - '0');
	}
	*out = v;
	return n > 0;
}

/* The last second whose every nanosecond fits in an int64_t of ns
 * (2262-04-11T23:47:15Z). */
#define WIRE_SECS_MAX ((INT64_MAX - 999999999) / 1000000000)

/* -1 for a bad field, a date before 1970 or after WIRE_SECS_MAX: such a
 * date is refused (the caller then has no mtime), not clamped, since an
 * endpoint that answers it is not telling a time the index can keep. */
static int64_t wire_make_ns(int y, int mo, int d, int h, int mi, int s,
			    int64_t frac_ns)
{
	if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || s > 60)
		return -1;
	int64_t secs = wire_days(y, mo, d) * 86400 + h * 3600 + mi * 60 + s;
	if (secs < 0 || secs > WIRE_SECS_MAX)
		return -1;
	return secs * 1000000000 + frac_ns;
}

int64_t s3_time_iso(const char *s, size_t n)
{
	/* YYYY-MM-DDTHH:MM:SS[.fff...](Z|+00:00) */
	int y, mo, d, h, mi, sec;
	if (n < 19 || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != ' ') ||
	    s[13] != ':' || s[16] != ':')
		return -1;
	if (!wire_num(s, 4, &y) || !wire_num(s + 5, 2, &mo) ||
	    !wire_num(s + 8, 2, &d) || !wire_num(s + 11, 2, &h) ||
	    !wire_num(s + 14, 2, &mi) || !wire_num(s + 17, 2, &sec))
		return -1;
	int64_t frac = 0;
	size_t i = 19;
	if (i < n && s[i] == '.') {
		int64_t scale = 100000000;
		for (i++; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
			frac += (s[i] - '0') * scale;
			scale /= 10;
		}
	}
	if (!(i == n || (i + 1 == n && s[i] == 'Z') ||
	      (i + 6 == n && memcmp(s + i, "+00:00", 6) == 0)))
		return -1;
	return wire_make_ns(y, mo, d, h, mi, sec, frac);
}

int64_t s3_time_http(const char *s, size_t n)
{
	/* "Sat, 22 Nov 2026 01:40:52 GMT" */
	static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
	int y, mo = 0, d, h, mi, sec;
	if (n != 29 || s[3] != ',' || s[4] != ' ' || s[7] != ' ' ||
	    s[11] != ' ' || s[16] != ' ' || s[19] != ':' || s[22] != ':' ||
	    memcmp(s + 25, " GMT", 4) != 0)
		return -1;
	for (int i = 0; i < 12; i++)
		if (memcmp(s + 8, months + 3 * i, 3) == 0)
			mo = i + 1;
	if (!mo || !wire_num(s + 5, 2, &d) || !wire_num(s + 12, 4, &y) ||
	    !wire_num(s + 17, 2, &h) || !wire_num(s + 20, 2, &mi) ||
	    !wire_num(s + 23, 2, &sec))
		return -1;
	return wire_make_ns(y, mo, d, h, mi, sec, 0);
}

void s3_etag_copy(char out[72], const char *in, size_t n)
{
	if (n >= 2 && in[0] == 'W' && in[1] == '/') {
		in += 2;
		n -= 2;
	}
	if (n >= 2 && in[0] == '"' && in[n - 1] == '"') {
		in++;
		n -= 2;
	}
	if (n >= 72)
		n = 0;
	memcpy(out, in, n);
	out[n] = '\0';
}

bool s3_body_is_error(const char *body, size_t len)
{
	const char *p = body, *end = body ? body + len : NULL;
	while (p && p < end) {
		if (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n') {
			p++;
		} else if ((size_t)(end - p) >= 2 && !memcmp(p, "<?", 2)) {
			const char *q = memmem(p, (size_t)(end - p), "?>", 2);
			p = q ? q + 2 : end;
		} else {
			size_t n = (size_t)(end - p);
			return n >= 7 && !memcmp(p, "<Error", 6) &&
			       (p[6] == '>' || p[6] == ' ' || p[6] == '\t' ||
				p[6] == '\r' || p[6] == '\n');
		}
	}
	return false;
}

bool s3_retryable(int curl_code, long status, const char *s3_code)
{
	switch (curl_code) {
	case CURLE_OK:
		break;
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_PARTIAL_FILE:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
		return true;
	default:
		return false;   /* our own aborts, bad options, TLS trust */
	}
	if (status == 500 || status == 502 || status == 503 || status == 504 ||
	    status == 429)
		return true;
	return s3_code && (strcmp(s3_code, "SlowDown") == 0 ||
			   strcmp(s3_code, "InternalError") == 0 ||
			   strcmp(s3_code, "RequestTimeout") == 0 ||
			   strcmp(s3_code, "ServiceUnavailable") == 0);
}

int s3_errno_map(int curl_code, long status, const char *s3_code)
{
	static const struct { const char *code; int err; } codes[] = {
		{ "NoSuchKey", ENOENT },        { "NoSuchBucket", ENOENT },
		{ "NoSuchUpload", ENOENT },     { "AccessDenied", EACCES },
		{ "SignatureDoesNotMatch", EACCES },
		{ "InvalidAccessKeyId", EACCES }, { "ExpiredToken", EACCES },
		{ "InvalidToken", EACCES },
		{ "PreconditionFailed", ESTALE }, { "InvalidRange", ERANGE },
		{ "KeyTooLongError", ENAMETOOLONG },
		{ "EntityTooLarge", EFBIG },    { "QuotaExceeded", EDQUOT },
		{ "NotImplemented", EOPNOTSUPP },
	};
	if (curl_code != CURLE_OK) {
		switch (curl_code) {
		case CURLE_COULDNT_CONNECT:
		case CURLE_COULDNT_RESOLVE_HOST:
		case CURLE_COULDNT_RESOLVE_PROXY:
			return -EHOSTUNREACH;
		case CURLE_OUT_OF_MEMORY:
			return -ENOMEM;
		default:
			return -EIO;
		}
	}
	bool coded = s3_code && *s3_code;
	if (status >= 200 && status < 300 && !coded)
		return 0;
	if (coded)
		for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
			if (strcmp(s3_code, codes[i].code) == 0)
				return -codes[i].err;
	switch (status) {
	case 400: return -EINVAL;
	case 403: return -EACCES;
	case 404: return -ENOENT;
	case 412: return -ESTALE;
	case 416: return -ERANGE;
	case 501: return -EOPNOTSUPP;
	default:  return -EIO;
	}
}

unsigned s3_backoff_ms(unsigned attempt, uint64_t *rng)
{
	uint64_t x = *rng ? *rng : 0x9E3779B97F4A7C15ull;   /* xorshift64 */
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*rng = x;
	unsigned d = S3_BACKOFF_CAP_MS;
	if (attempt < 16 && (S3_BACKOFF_BASE_MS << attempt) < S3_BACKOFF_CAP_MS)
		d = S3_BACKOFF_BASE_MS << attempt;
	return d / 2 + (unsigned)(x % (d / 2 + 1));
}

/* ---- GetObjectTagging ---------------------------------------------------- */

/* Decode the text of the first <tag> inside [p, end) into a new string;
 * absent -> "" (a <Value/> written as an empty element). */
static int wire_tag_text(const char *p, const char *end, const char *tag,
			 bool required, char **out)
{
	const char *t;
	size_t tl;
	*out = NULL;
	if (!s3_xml_find(p, (size_t)(end - p), tag, &t, &tl)) {
		if (required)
			return -EPROTO;
		t = "";
		tl = 0;
	}
	char *s = malloc(tl + 1);
	if (!s)
		return -ENOMEM;
	int k = s3_xml_decode(t, tl, s, tl + 1);   /* decoding never grows */
	if (k < 0 || (required && k == 0)) {
		free(s);
		return -EPROTO;
	}
	*out = s;
	return 0;
}

int s3_xml_tagging_parse(const char *xml, size_t len, struct obj_kv **tags,
			 size_t *n)
{
	if (!memmem(xml, len, "<Tagging", 8))
		return -EPROTO;
	struct obj_kv *a = NULL;
	size_t na = 0;
	int rc = 0;
	const char *p = xml, *end = xml + len;
	for (;;) {
		const char *open = memmem(p, (size_t)(end - p), "<Tag>", 5);
		if (!open)
			break;
		open += 5;
		const char *close = memmem(open, (size_t)(end - open), "</Tag>", 6);
		if (!close) {
			rc = -EPROTO;
			break;
		}
		struct obj_kv kv = { 0 };
		rc = wire_tag_text(open, close, "Key", true, &kv.name);
		if (rc == 0)
			rc = wire_tag_text(open, close, "Value", false, &kv.value);
		struct obj_kv *g = rc == 0 ? realloc(a, (na + 1) * sizeof *a) : NULL;
		if (!g) {
			free(kv.name);
			free(kv.value);
			if (rc == 0)
				rc = -ENOMEM;
			break;
		}
		a = g;
		a[na++] = kv;
		p = close + 6;
	}
	if (rc < 0) {
		obj_kv_free(a, na);
		return rc;
	}
	*tags = a;
	*n = na;
	return 0;
}

/* ---- multipart answers and bodies ---------------------------------------- */

/* The decoded text of <tag> inside [a, end) into out; false if absent or
 * too long. */
static bool wire_field(const char *a, const char *end, const char *tag,
		       char *out, size_t outlen)
{
	const char *t;
	size_t tl;
	out[0] = '\0';
	return s3_xml_find(a, (size_t)(end - a), tag, &t, &tl) &&
	       s3_xml_decode(t, tl, out, outlen) >= 0;
}

int s3_xml_uploads_parse(const char *xml, size_t len, s3_upload_fn fn,
			 void *ctx, char *next_key, size_t nklen, char *next_id,
			 size_t nilen, bool *truncated)
{
	const char *t, *end = xml + len;
	size_t tl;
	if (!memmem(xml, len, "<ListMultipartUploadsResult", 27))
		return -EPROTO;
	*truncated = s3_xml_find(xml, len, "IsTruncated", &t, &tl) &&
		     tl == 4 && memcmp(t, "true", 4) == 0;
	if (!nklen || !nilen)
		return -EOVERFLOW;
	next_key[0] = next_id[0] = '\0';
	if (s3_xml_find(xml, len, "NextKeyMarker", &t, &tl) &&
	    s3_xml_decode(t, tl, next_key, nklen) < 0)
		return -EOVERFLOW;
	if (s3_xml_find(xml, len, "NextUploadIdMarker", &t, &tl) &&
	    s3_xml_decode(t, tl, next_id, nilen) < 0)
		return -EOVERFLOW;
	if (*truncated && !next_key[0])
		return -EPROTO;   /* truncated without a way to go on */
	size_t kcap = 4096;
	char *key = malloc(kcap), id[1024], when[64];
	if (!key)
		return -ENOMEM;
	int rc = 0;
	const char *p = xml;
	for (;;) {
		const char *a = memmem(p, (size_t)(end - p), "<Upload>", 8);
		if (!a)
			break;
		const char *z = memmem(a, (size_t)(end - a), "</Upload>", 9);
		if (!z) {
			rc = -EPROTO;
			break;
		}
		if (!wire_field(a, z, "Key", key, kcap) ||
		    !wire_field(a, z, "UploadId", id, sizeof id)) {
			rc = -EPROTO;
			break;
		}
		int64_t ns = wire_field(a, z, "Initiated", when, sizeof when) ?
			     s3_time_iso(when, strlen(when)) : -1;
		rc = fn(ctx, key, id, ns);
		if (rc)
			break;
		p = z + 9;
	}
	free(key);
	return rc;
}

char *s3_xml_complete_body(const struct s3_part *parts, size_t n)
{
	static const char head[] = "<CompleteMultipartUpload>";
	static const char tail[] = "</CompleteMultipartUpload>";
	/* per part: the tags, a number of up to 10 digits, an ETag of < 72 */
	size_t cap = sizeof head + sizeof tail + n * 160;
	char *b = malloc(cap);
	if (!b)
		return NULL;
	size_t o = (size_t)snprintf(b, cap, "%s", head);
	for (size_t i = 0; i < n; i++)
		o += (size_t)snprintf(b + o, cap - o,
				      "<Part><PartNumber>%u</PartNumber>"
				      "<ETag>\"%s\"</ETag></Part>",
				      parts[i].number, parts[i].etag);
	snprintf(b + o, cap - o, "%s", tail);
	return b;
}

static int wire_hex(char c)
{
	return c >= '0' && c <= '9' ? c - '0' :
	       c >= 'a' && c <= 'f' ? c - 'a' + 10 :
	       c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

void s3_mpu_etag(const struct s3_part *parts, size_t n, char out[72])
{
	out[0] = '\0';
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	if (!md || EVP_DigestInit_ex(md, EVP_md5(), NULL) != 1)
		goto out;
	for (size_t i = 0; i < n; i++) {
		unsigned char bin[16];
		const char *e = parts[i].etag;
		if (strlen(e) != 32)
			goto out;
		for (int j = 0; j < 16; j++) {
			int hi = wire_hex(e[2 * j]), lo = wire_hex(e[2 * j + 1]);
			if (hi < 0 || lo < 0)
				goto out;
			bin[j] = (unsigned char)(hi << 4 | lo);
		}
		if (EVP_DigestUpdate(md, bin, sizeof bin) != 1)
			goto out;
	}
	unsigned char d[16];
	unsigned dl = 0;
	if (EVP_DigestFinal_ex(md, d, &dl) != 1 || dl != 16)
		goto out;
	for (int j = 0; j < 16; j++)
		snprintf(out + 2 * j, 3, "%02x", d[j]);
	snprintf(out + 32, 72 - 32, "-%zu", n);
out:
	EVP_MD_CTX_free(md);
}
