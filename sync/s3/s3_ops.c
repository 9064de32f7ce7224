/* s3_ops.c — one function per S3 operation (GET, HEAD, tagging, LIST,
 * PUT, DELETE, COPY, bucket check) on the request engine of s3_req.h. The
 * contracts are in common/s3.h; s3_http.c's table of operations names
 * them. */
#include "sync/s3/s3_http.h"
#include "sync/s3/s3_int.h"
#include "sync/s3/s3_req.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/log.h"

/* ---- operations --------------------------------------------------------- */

/* A GET of [off, off+len) (len UINT64_MAX and off 0: no Range, the
 * whole object; off > 0: to its end) with If-Match if given: r set up. */
static int get_init(struct s3_req *r, const char *bucket, const char *key, uint64_t off,
		    uint64_t len, const char *if_match)
{
	int err = req_init(r, "GET", bucket, key);
	if (!key)
		err = -EINVAL;
	char range[64];
	if (len == UINT64_MAX)
		snprintf(range, sizeof range, "bytes=%" PRIu64 "-", off);
	else
		snprintf(range, sizeof range, "bytes=%" PRIu64 "-%" PRIu64, off,
			 len - 1 > UINT64_MAX - off ? UINT64_MAX : off + (len - 1));
	if (!err && (off || len != UINT64_MAX))
		err = req_header(r, "Range", range);
	if (!err && if_match && *if_match) {
		char q[80];
		snprintf(q, sizeof q, "\"%s\"", if_match);
		err = req_header(r, "If-Match", q);
	}
	return err;
}

int s3_http_get(struct s3 *iface, const char *bucket, const char *key, uint64_t off,
		size_t len, const char *if_match, void *buf, size_t *got)
{
	struct s3_http *s = (struct s3_http *)iface;
	*got = 0;
	if (len == 0)
		return 0;
	struct s3_req r;
	int err = get_init(&r, bucket, key, off, len, if_match);
	if (err)
		goto out;
	r.sink = SINK_BUF;
	r.buf = buf;
	r.len = len;
	r.off = off;
	S3_STAT(s, s3_get);
	err = s3_req_run(s, &r);
	if (err == -ERANGE) {            /* 416: wholly past the end */
		err = 0;
		r.got = 0;
	}
	if (!err) {
		*got = r.got;
		S3_STAT_ADD(s, s3_bytes_read, r.got);
	}
out:
	req_release(&r);
	return err;
}

/* One GET whose body goes to fn as curl receives it (SINK_FN). */
int s3_http_get_stream(struct s3 *iface, const char *bucket, const char *key,
		       uint64_t off, uint64_t len, const char *if_match,
		       s3_data_fn fn, void *ctx, uint64_t *got)
{
	struct s3_http *s = (struct s3_http *)iface;
	*got = 0;
	if (len == 0)
		return 0;
	struct s3_req r;
	int err = get_init(&r, bucket, key, off, len, if_match);
	if (err)
		goto out;
	r.sink = SINK_FN;
	r.out = fn;
	r.out_ctx = ctx;
	r.len = len > SIZE_MAX ? SIZE_MAX : (size_t)len;
	r.off = off;
	S3_STAT(s, s3_get);
	err = s3_req_run(s, &r);
	if (err == -ERANGE)              /* 416: wholly past the end */
		err = 0;
	*got = r.out_done;
	S3_STAT_ADD(s, s3_bytes_read, r.out_done);
out:
	req_release(&r);
	return err;
}

int s3_http_head(struct s3 *iface, const char *bucket, const char *key,
		 struct obj_meta *out)
{
	struct s3_http *s = (struct s3_http *)iface;
	memset(out, 0, sizeof *out);
	struct s3_req r;
	int err = req_init(&r, "HEAD", bucket, key);
	if (!key)
		err = -EINVAL;
	if (err)
		goto out;
	r.head = true;
	r.want_meta = true;
	S3_STAT(s, s3_head);
	err = s3_req_run(s, &r);
	if (err)
		goto out;
	out->bucket = strdup(bucket);
	out->key = strdup(key);
	if (!out->bucket || !out->key) {
		err = -ENOMEM;
		goto out;
	}
	out->size = r.clen;
	out->mtime_ns = r.mtime_ns;
	memcpy(out->etag, r.etag, sizeof out->etag);
	out->flags = OBJ_HAS_META;
	if (r.ctype) {
		out->content_type = r.ctype;
		r.ctype = NULL;
		out->flags |= OBJ_HAS_CTYPE;
	}
	out->meta = r.meta;              /* you now own them */
	out->n_meta = r.n_meta;
	r.meta = NULL;
	r.n_meta = 0;
	/* RGW sends x-amz-tagging-count on HEAD when an object has tags, and
	 * nothing when it has none; AWS never sends it on HEAD. So its absence
	 * means "no tags" only from a server seen sending it. */
	if (r.tag_count >= 0)
		atomic_store(&s->head_tags_count, true);
	if (r.tag_count == 0 ||
	    (r.tag_count < 0 && atomic_load(&s->head_tags_count)))
		out->flags |= OBJ_HAS_TAGS;      /* known: none */
out:
	if (err)
		obj_meta_release(out);
	req_release(&r);
	return err;
}

int s3_http_get_tagging(struct s3 *iface, const char *bucket, const char *key,
			struct obj_kv **tags, size_t *n)
{
	struct s3_http *s = (struct s3_http *)iface;
	struct s3_req r;
	int err = req_init(&r, "GET", bucket, key);
	if (!key)
		err = -EINVAL;
	if (err)
		goto out;
	r.query = "tagging=";            /* RGW refuses a valueless "?tagging" */
	r.sink = SINK_GROW;
	S3_STAT(s, s3_get_tagging);
	err = s3_req_run(s, &r);
	if (err)
		goto out;
	err = s3_xml_tagging_parse(r.body ? r.body : "", r.body_len, tags, n);
	if (err == -EPROTO)
		log_error("s3: GET %s/%s?tagging: cannot read the answer", bucket, key);
out:
	req_release(&r);
	return err;
}

int s3_http_list_page(struct s3 *iface, const char *bucket, const char *prefix,
		      const char *token, s3_list_fn fn, void *ctx,
		      char *next_token, size_t ntlen, bool *truncated)
{
	struct s3_http *s = (struct s3_http *)iface;
	*truncated = false;
	if (ntlen)
		next_token[0] = '\0';
	struct s3_req r;
	char *query = NULL;
	int err = req_init(&r, "LIST", bucket, NULL);
	if (err)
		goto out;
	/* Parameters in sorted order: curl 7.88 signs the query as given. */
	size_t tl = token ? strlen(token) : 0, pl = prefix ? strlen(prefix) : 0;
	size_t cap = 3 * (tl + pl) + 96;
	query = malloc(cap);
	if (!query) {
		err = -ENOMEM;
		goto out;
	}
	size_t o = 0;
	if (tl) {
		o += (size_t)snprintf(query, cap, "continuation-token=");
		o += (size_t)s3_url_encode(token, false, query + o, cap - o);
		query[o++] = '&';
	}
	o += (size_t)snprintf(query + o, cap - o, "list-type=2&max-keys=1000");
	if (pl) {
		o += (size_t)snprintf(query + o, cap - o, "&prefix=");
		s3_url_encode(prefix, false, query + o, cap - o);
	}
	r.query = query;
	r.sink = SINK_GROW;
	S3_STAT(s, s3_list);
	err = s3_req_run(s, &r);
	if (err)
		goto out;
	err = s3_xml_list_parse(r.body ? r.body : "", r.body_len, bucket, fn,
				ctx, next_token, ntlen, truncated);
	if (err < 0 && err != -EOVERFLOW)
		log_error("s3: LIST %s prefix '%s': cannot read the answer: %s",
			  bucket, prefix ? prefix : "", strerror(-err));
out:
	free(query);
	req_release(&r);
	return err;
}

/* A conditional PUT of fd's size bytes answered 412 after a retry: the
 * attempt whose answer was lost may have stored them. 0 with etag_out
 * when the key holds exactly those bytes (logged), else -ESTALE. */
static int put_landed(struct s3_http *s, const char *bucket, const char *key,
		      int fd, uint64_t size, char etag_out[72])
{
	char md5[33];
	struct obj_meta cur;
	int err = req_fd_md5(fd, 0, size, md5);
	if (!err)
		err = s3_http_head(&s->iface, bucket, key, &cur);
	if (err)
		return -ESTALE;
	bool ours = cur.size == size && strcasecmp(cur.etag, md5) == 0;
	obj_meta_release(&cur);
	if (!ours)
		return -ESTALE;
	log_info("s3: PUT %s/%s: refused after a retry, but the key holds the "
		 "bytes sent (ETag %s): the earlier attempt stored them", bucket,
		 key, md5);
	snprintf(etag_out, 72, "%s", md5);
	return 0;
}

/* PUT, with If-Match: base (sent without quotes: RGW 16 refuses a quoted
 * ETag) or, base "", If-None-Match: *; base NULL: no condition. */
int s3_http_put_file(struct s3 *iface, const char *bucket, const char *key, int fd,
		     uint64_t size, const struct obj_kv *meta, size_t n_meta,
		     const char *content_type, const char *base, char etag_out[72])
{
	struct s3_http *s = (struct s3_http *)iface;
	etag_out[0] = '\0';
	struct s3_req r;
	int err = req_init(&r, "PUT", bucket, key);
	if (!key || fd < 0 || (base && strpbrk(base, "\r\n")))
		err = err ? err : -EINVAL;
	if (!err)
		err = req_meta_headers(&r, meta, n_meta, content_type);
	if (!err && base)
		err = *base ? req_header(&r, "If-Match", base)
			    : req_header(&r, "If-None-Match", "*");
	if (err)
		goto out;
	err = req_send_fd(s, &r, fd, 0, size, etag_out);
	/* AWS answers If-Match on a missing key with 404 NoSuchKey. */
	if (err == -ENOENT && base && *base && strcmp(r.s3code, "NoSuchKey") == 0)
		err = -ESTALE;
	if (err == -ESTALE && base && r.tries > 1)
		err = put_landed(s, bucket, key, fd, size, etag_out);
out:
	req_release(&r);
	return err;
}

int s3_http_del(struct s3 *iface, const char *bucket, const char *key)
{
	struct s3_http *s = (struct s3_http *)iface;
	struct s3_req r;
	int err = req_init(&r, "DELETE", bucket, key);
	if (!key)
		err = -EINVAL;
	if (!err) {
		r.del = true;
		S3_STAT(s, s3_delete);
		err = s3_req_run(s, &r);
	}
	req_release(&r);
	return err;
}

int s3_http_copy(struct s3 *iface, const char *bucket, const char *src_key,
		 const char *dst_key, const struct obj_kv *meta, size_t n_meta,
		 const struct obj_meta *src_head, char etag_out[72])
{
	struct s3_http *s = (struct s3_http *)iface;
	etag_out[0] = '\0';
	struct s3_req r;
	struct obj_meta src_meta = { 0 };
	int err = req_init(&r, "COPY", bucket, dst_key);
	if (!dst_key || !src_key || !*src_key)
		err = err ? err : -EINVAL;
	if (err)
		goto out;
	if (meta && !src_head) {
		/* REPLACE would drop the content type too: keep the source's,
		 * and copy only the version whose content type we read (the
		 * caller's HEAD when it has one). */
		err = s3_http_head(&s->iface, bucket, src_key, &src_meta);
		src_head = &src_meta;
	}
	if (!err)
		err = req_copy_source(&r, bucket, src_key,
				      src_head ? src_head->etag : NULL);
	if (!err && meta)
		err = req_header(&r, "x-amz-metadata-directive", "REPLACE");
	if (!err && meta)
		err = req_meta_headers(&r, meta, n_meta, src_head->content_type);
	if (err)
		goto out;
	r.upload = true;                 /* a PUT with an empty body */
	r.up_size = 0;
	r.sink = SINK_GROW;
	r.stall_s = 5 * s->stall_s;      /* the server copies before answering */
	r.error_in_200 = true;           /* S3 may answer 200 and still fail */
	S3_STAT(s, s3_copy);
	err = s3_req_run(s, &r);
	if (!err)
		req_body_etag(&r, etag_out);
	/* RGW 16 ignores x-amz-copy-source-if-match (seen on the bed): the
	 * copy of a single-part source has the source's ETag (the MD5 of the
	 * bytes), so another one means another version was copied. */
	if (!err && src_head && src_head->etag[0] && etag_out[0] &&
	    !strchr(src_head->etag, '-') && !strchr(etag_out, '-') &&
	    strcmp(src_head->etag, etag_out) != 0) {
		log_warn("s3: COPY %s/%s to %s: the store copied version %s, not %s "
			 "(it ignored x-amz-copy-source-if-match)", bucket, src_key,
			 dst_key, etag_out, src_head->etag);
		err = -ESTALE;
	}
out:
	obj_meta_release(&src_meta);
	req_release(&r);
	return err;
}

int s3_http_bucket_check(struct s3 *iface, const char *bucket)
{
	struct s3_http *s = (struct s3_http *)iface;
	struct s3_req r;
	int err = req_init(&r, "HEAD", bucket, NULL);
	if (!err) {
		r.head = true;
		r.timeout_ms = S3_CHECK_MS;  /* start-up must fail in ~10 s */
		err = s3_req_run(s, &r);
	}
	req_release(&r);
	return err;
}
