/*
 * s3_callbacks.c — what curl calls during one attempt of a request of the
 * S3 client (s3_req.h): the body into the request's sink (s3_cb_write),
 * the answer's headers (s3_cb_header: status, ETag, length, dates, user
 * metadata), the upload's bytes from a file or from memory with their MD5
 * (s3_cb_read), the cancel flag (s3_cb_progress); and the clearing of what
 * an earlier answer left (req_answer_reset). They run on the thread inside
 * curl_easy_perform() and touch only the request they are given.
 */
#include "sync/s3/s3_int.h"
#include "sync/s3/s3_req.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/log.h"

void req_meta_clear(struct s3_req *r)
{
	obj_kv_free(r->meta, r->n_meta);
	r->meta = NULL;
	r->n_meta = 0;
	free(r->ctype);
	r->ctype = NULL;
}

/* Forget what a previous attempt (or a 100 Continue) left behind. */
void req_answer_reset(struct s3_req *r)
{
	r->got = 0;
	r->body_seen = 0;
	r->full = false;
	r->body_len = 0;
	r->etag[0] = '\0';
	r->clen = 0;
	r->has_clen = false;
	r->mtime_ns = 0;
	r->tag_count = -1;
	r->region[0] = '\0';
	req_meta_clear(r);
}

static bool req_grow(struct s3_req *r, const char *p, size_t n, size_t max)
{
	if (r->body_len + n > max)
		return false;
	if (r->body_len + n + 1 > r->body_cap) {
		size_t cap = r->body_cap ? r->body_cap : 16384;
		while (cap < r->body_len + n + 1)
			cap *= 2;
		char *nb = realloc(r->body, cap);
		if (!nb)
			return false;
		r->body = nb;
		r->body_cap = cap;
	}
	memcpy(r->body + r->body_len, p, n);
	r->body_len += n;
	r->body[r->body_len] = '\0';
	return true;
}

size_t s3_cb_write(char *p, size_t sz, size_t nm, void *ud)
{
	struct s3_req *r = ud;
	size_t n = sz * nm;
	if (r->status >= 300) {          /* an error document: keep its head */
		size_t room = S3_ERRBODY_MAX - r->body_len;
		req_grow(r, p, n < room ? n : room, S3_ERRBODY_MAX);
		return n;
	}
	if (r->sink == SINK_GROW) {
		if (!req_grow(r, p, n, S3_BODY_MAX)) {
			r->cb_err = -ENOMEM;
			return 0;
		}
		return n;
	}
	if (r->sink != SINK_BUF && r->sink != SINK_FN)
		return n;
	/* A 200 to a ranged GET is the whole object: skip up to off. */
	uint64_t skip = r->status == 200 ? r->off : 0;
	uint64_t pos = r->body_seen;
	r->body_seen += n;
	if (r->sink == SINK_FN) {
		/* Bytes given by an earlier attempt are skipped too. */
		skip += r->out_done;
		if (pos + n <= skip)
			return n;
		size_t from = pos < skip ? (size_t)(skip - pos) : 0;
		size_t take = n - from;
		if (take > r->len - r->out_done)
			take = (size_t)(r->len - r->out_done);
		int e = take ? r->out(r->out_ctx, p + from, take) : 0;
		if (e) {
			r->cb_err = e < 0 ? e : -EIO;
			return 0;
		}
		r->out_done += take;
		if (r->out_done == r->len && take < n - from) {
			r->full = true;
			return 0;
		}
		return n;
	}
	if (pos + n <= skip)
		return n;
	size_t from = pos < skip ? (size_t)(skip - pos) : 0;
	size_t take = n - from;
	if (take > r->len - r->got)
		take = r->len - r->got;
	memcpy(r->buf + r->got, p + from, take);
	r->got += take;
	if (r->got == r->len && take < n - from) {
		r->full = true;          /* more than asked for: stop here */
		return 0;
	}
	return n;
}

static void hdr_trim(const char **v, size_t *n)
{
	while (*n && (**v == ' ' || **v == '\t')) {
		(*v)++;
		(*n)--;
	}
	while (*n && ((*v)[*n - 1] == '\r' || (*v)[*n - 1] == '\n' ||
		      (*v)[*n - 1] == ' ' || (*v)[*n - 1] == '\t'))
		(*n)--;
}

static bool hdr_is(const char *line, size_t nlen, const char *name)
{
	return strlen(name) == nlen && strncasecmp(line, name, nlen) == 0;
}

static int hdr_meta(struct s3_req *r, const char *name, size_t nlen,
		    const char *v, size_t vn)
{
	char *k = strndup(name, nlen), *val = strndup(v, vn);
	struct obj_kv *m = realloc(r->meta, (r->n_meta + 1) * sizeof *m);
	if (!k || !val || !m) {
		free(k);
		free(val);
		if (m)
			r->meta = m;
		return -ENOMEM;
	}
	for (char *c = k; *c; c++)
		if (*c >= 'A' && *c <= 'Z')
			*c = (char)(*c - 'A' + 'a');
	r->meta = m;
	m[r->n_meta].name = k;
	m[r->n_meta].value = val;
	r->n_meta++;
	return 0;
}

size_t s3_cb_header(char *line, size_t sz, size_t nm, void *ud)
{
	struct s3_req *r = ud;
	size_t n = sz * nm;
	if (n >= 5 && memcmp(line, "HTTP/", 5) == 0) {
		const char *sp = memchr(line, ' ', n);
		r->status = sp ? strtol(sp + 1, NULL, 10) : 0;
		req_answer_reset(r);     /* a new response (after 100 Continue) */
		return n;
	}
	const char *colon = memchr(line, ':', n);
	if (!colon)
		return n;
	size_t nlen = (size_t)(colon - line);
	const char *v = colon + 1;
	size_t vn = n - nlen - 1;
	hdr_trim(&v, &vn);
	if (hdr_is(line, nlen, "etag")) {
		s3_etag_copy(r->etag, v, vn);
	} else if (hdr_is(line, nlen, "content-length")) {
		char tmp[24];
		if (vn < sizeof tmp) {
			memcpy(tmp, v, vn);
			tmp[vn] = '\0';
			r->clen = strtoull(tmp, NULL, 10);
			r->has_clen = true;
		}
	} else if (hdr_is(line, nlen, "x-amz-bucket-region")) {
		if (vn < sizeof r->region) {
			memcpy(r->region, v, vn);
			r->region[vn] = '\0';
		}
	} else if (hdr_is(line, nlen, "last-modified")) {
		int64_t ns = s3_time_http(v, vn);
		r->mtime_ns = ns < 0 ? 0 : ns;
	} else if (r->want_meta && hdr_is(line, nlen, "content-type")) {
		free(r->ctype);
		r->ctype = strndup(v, vn);
		if (!r->ctype)
			r->cb_err = -ENOMEM;
	} else if (r->want_meta && hdr_is(line, nlen, "x-amz-tagging-count")) {
		r->tag_count = vn && vn < 12 ? strtol(v, NULL, 10) : 0;
	} else if (r->want_meta && nlen > 11 &&
		   strncasecmp(line, "x-amz-meta-", 11) == 0) {
		if (hdr_meta(r, line + 11, nlen - 11, v, vn) < 0)
			r->cb_err = -ENOMEM;
	}
	return n;
}

size_t s3_cb_read(char *p, size_t sz, size_t nm, void *ud)
{
	struct s3_req *r = ud;
	size_t n = sz * nm;
	if ((r->fd < 0 && !r->up_mem) || r->up_pos >= r->up_size)
		return 0;
	if (n > r->up_size - r->up_pos)
		n = (size_t)(r->up_size - r->up_pos);
	ssize_t k;
	if (r->up_mem) {
		memcpy(p, r->up_mem + r->up_pos, n);
		k = (ssize_t)n;
	} else {
		do
			k = pread(r->fd, p, n, (off_t)(r->up_base + r->up_pos));
		while (k < 0 && errno == EINTR);
	}
	if (k <= 0) {
		r->cb_err = k < 0 ? -errno : -EIO;   /* file shrank under us */
		log_error("s3: PUT %s/%s: reading the source at %" PRIu64 ": %s",
			  r->bucket, r->key, r->up_pos,
			  k < 0 ? strerror(errno) : "unexpected end of file");
		return CURL_READFUNC_ABORT;
	}
	if (r->md5 && EVP_DigestUpdate(r->md5, p, (size_t)k) != 1) {
		r->cb_err = -EIO;
		return CURL_READFUNC_ABORT;
	}
	r->up_pos += (uint64_t)k;
	return (size_t)k;
}

/* curl's progress callback, set when the thread watches a cancel flag:
 * nonzero ends the transfer (CURLE_ABORTED_BY_CALLBACK). */
int s3_cb_progress(void *ud, curl_off_t dlt, curl_off_t dln,
		   curl_off_t ult, curl_off_t uln)
{
	(void)dlt, (void)dln, (void)ult, (void)uln;
	return atomic_load((const atomic_bool *)ud) ? 1 : 0;
}
