/*
 * s3_req.c — one request of the S3 client built and released (req_init,
 * req_header, req_release), and the pieces several operations build
 * requests and read answers with (s3_req.h): user metadata and copy-source
 * headers, the <ETag> of an answer body, a file's range sent as the body
 * with its MD5 checked against the ETag the store answers.
 */
#include "sync/s3/s3_int.h"
#include "sync/s3/s3_req.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/log.h"

void req_release(struct s3_req *r)
{
	req_meta_clear(r);
	free(r->body);
	r->body = NULL;
	curl_slist_free_all(r->hdrs);
	r->hdrs = NULL;
	if (r->md5)
		EVP_MD_CTX_free(r->md5);
	r->md5 = NULL;
}

/* Append "name: value" to the request's headers. */
int req_header(struct s3_req *r, const char *name, const char *value)
{
	char line[8192];
	int n = snprintf(line, sizeof line, "%s: %s", name, value);
	if (n < 0 || (size_t)n >= sizeof line)
		return -EINVAL;
	struct curl_slist *l = curl_slist_append(r->hdrs, line);
	if (!l)
		return -ENOMEM;
	r->hdrs = l;
	return 0;
}

int req_init(struct s3_req *r, const char *method, const char *bucket,
		    const char *key)
{
	memset(r, 0, sizeof *r);
	r->method = method;
	r->verb = strcmp(method, "LIST") == 0 ? "GET" :
		  strcmp(method, "COPY") == 0 ? "PUT" : method;
	r->bucket = bucket;
	r->key = key;
	r->fd = -1;
	if (!bucket || !*bucket || (key && !*key))
		return -EINVAL;
	return req_header(r, "x-amz-content-sha256", "UNSIGNED-PAYLOAD");
}

/* ---- pieces several operations build requests and read answers with -- */

int req_meta_headers(struct s3_req *r, const struct obj_kv *meta, size_t n,
		     const char *content_type)
{
	for (size_t i = 0; i < n; i++) {
		const char *k = meta[i].name, *v = meta[i].value ? meta[i].value : "";
		if (!k || !*k || strpbrk(k, ":\r\n \t") || strpbrk(v, "\r\n"))
			return -EINVAL;
		char name[300];
		int l = snprintf(name, sizeof name, "x-amz-meta-%s", k);
		if (l < 0 || (size_t)l >= sizeof name)
			return -EINVAL;
		int err = req_header(r, name, v);
		if (err)
			return err;
	}
	if (!content_type || !*content_type)
		return 0;
	if (strpbrk(content_type, "\r\n"))
		return -EINVAL;
	return req_header(r, "Content-Type", content_type);
}

int req_copy_source(struct s3_req *r, const char *bucket, const char *src_key,
		    const char *if_match)
{
	size_t cap = 3 * (strlen(bucket) + strlen(src_key)) + 4;
	char *src = malloc(cap);
	if (!src)
		return -ENOMEM;
	src[0] = '/';
	int err = 0;
	int k = s3_url_encode(bucket, false, src + 1, cap - 1);
	if (k >= 0) {
		src[1 + k] = '/';
		k = s3_url_encode(src_key, true, src + 2 + k, cap - 2 - (size_t)k);
	}
	if (k < 0)
		err = k;
	if (!err)
		err = req_header(r, "x-amz-copy-source", src);
	free(src);
	if (!err && if_match && *if_match) {
		char q[80];
		snprintf(q, sizeof q, "\"%s\"", if_match);
		err = req_header(r, "x-amz-copy-source-if-match", q);
	}
	return err;
}

void req_body_etag(const struct s3_req *r, char out[72])
{
	const char *t;
	size_t tl;
	out[0] = '\0';
	if (r->body && s3_xml_find(r->body, r->body_len, "ETag", &t, &tl)) {
		char raw[160];
		int n = s3_xml_decode(t, tl, raw, sizeof raw);
		if (n > 0)
			s3_etag_copy(out, raw, (size_t)n);
	}
}

static int req_upload_md5(struct s3_req *r, uint64_t size, char out[33])
{
	unsigned char d[16];
	unsigned dl = 0;
	out[0] = '\0';
	if (r->up_pos != size || !r->md5 ||
	    EVP_DigestFinal_ex(r->md5, d, &dl) != 1 || dl != 16) {
		log_error("s3: %s %s/%s: sent %" PRIu64 " of %" PRIu64 " bytes",
			  r->method, r->bucket, r->key ? r->key : "", r->up_pos,
			  size);
		return -EIO;
	}
	for (int i = 0; i < 16; i++)
		snprintf(out + 2 * i, 3, "%02x", d[i]);
	return 0;
}

int req_fd_md5(int fd, uint64_t off, uint64_t size, char out[33])
{
	unsigned char buf[64 << 10], d[16];
	unsigned dl = 0;
	int err = 0;
	out[0] = '\0';
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	if (!md || EVP_DigestInit_ex(md, EVP_md5(), NULL) != 1)
		err = -EIO;
	for (uint64_t pos = 0; !err && pos < size;) {
		size_t want = size - pos < sizeof buf ? (size_t)(size - pos) : sizeof buf;
		ssize_t k = pread(fd, buf, want, (off_t)(off + pos));
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0 || EVP_DigestUpdate(md, buf, (size_t)k) != 1)
			err = -EIO;
		else
			pos += (uint64_t)k;
	}
	if (!err && (EVP_DigestFinal_ex(md, d, &dl) != 1 || dl != 16))
		err = -EIO;
	EVP_MD_CTX_free(md);
	for (int i = 0; !err && i < 16; i++)
		snprintf(out + 2 * i, 3, "%02x", d[i]);
	return err;
}

int req_send_fd(struct s3_http *s, struct s3_req *r, int fd, uint64_t off,
		uint64_t size, char etag_out[72])
{
	etag_out[0] = '\0';
	r->md5 = EVP_MD_CTX_new();
	if (!r->md5)
		return -ENOMEM;
	r->upload = true;
	r->fd = fd;
	r->up_base = off;
	r->up_size = size;
	S3_STAT(s, s3_put);
	int err = s3_req_run(s, r);
	if (!err)
		err = req_upload_md5(r, size, etag_out);
	if (!err && r->etag[0] && strlen(r->etag) == 32 &&
	    strcasecmp(r->etag, etag_out)) {
		log_error("s3: %s %s/%s: server ETag %s, data MD5 %s", r->method,
			  r->bucket, r->key ? r->key : "", r->etag, etag_out);
		S3_STAT(s, s3_errors);
		etag_out[0] = '\0';
		err = -EIO;
	}
	return err;
}
