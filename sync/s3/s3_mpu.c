/* s3_mpu.c — the multipart-upload operations of the real client
 * (CreateMultipartUpload, UploadPart, UploadPartCopy,
 * CompleteMultipartUpload, AbortMultipartUpload, ListMultipartUploads) on
 * the request engine of s3_req.h. The contracts are in common/s3.h.
 * Counted in the stats as the requests they resemble: parts, creations
 * and completions as PUTs, part copies as COPYs, aborts as DELETEs,
 * listings as LISTs. */
#include "sync/s3/s3_http.h"
#include "sync/s3/s3_int.h"
#include "sync/s3/s3_req.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <strings.h>

#include "common/log.h"
#include "common/object.h"
#include "common/s3.h"

/* "partNumber=N&uploadId=ID" (part 0: "uploadId=ID"), sorted and encoded
 * as the signature wants; NULL on -ENAMETOOLONG/-ENOMEM. */
static char *mpu_query(const char *upload_id, unsigned part)
{
	char enc[1024];
	if (!upload_id || !*upload_id ||
	    s3_url_encode(upload_id, false, enc, sizeof enc) < 0)
		return NULL;
	char *q = NULL;
	int n = part ? asprintf(&q, "partNumber=%u&uploadId=%s", part, enc) :
		       asprintf(&q, "uploadId=%s", enc);
	return n < 0 ? NULL : q;
}

int s3_http_mpu_create(struct s3 *iface, const char *bucket, const char *key,
		      const struct obj_kv *meta, size_t n_meta,
		      const char *content_type, char *upload_id, size_t idlen)
{
	struct s3_http *s = (struct s3_http *)iface;
	if (idlen)
		upload_id[0] = '\0';
	struct s3_req r;
	int err = req_init(&r, "MPU-CREATE", bucket, key);
	if (!key || !idlen)
		err = err ? err : -EINVAL;
	if (!err)
		err = req_meta_headers(&r, meta, n_meta, content_type);
	if (err)
		goto out;
	r.verb = "POST";
	r.query = "uploads=";
	r.post = true;
	r.no_resend = true;          /* a lost answer may hide an upload */
	r.error_in_200 = true;
	r.up_mem = "";
	r.up_size = 0;
	r.sink = SINK_GROW;
	S3_STAT(s, s3_put);
	err = s3_req_run(s, &r);
	if (err)
		goto out;
	const char *t;
	size_t tl;
	if (!r.body || !s3_xml_find(r.body, r.body_len, "UploadId", &t, &tl) ||
	    tl == 0) {
		log_error("s3: MPU-CREATE %s/%s: no UploadId in the answer",
			  bucket, key);
		err = -EPROTO;
		goto out;
	}
	if (s3_xml_decode(t, tl, upload_id, idlen) < 0)
		err = -EOVERFLOW;
out:
	req_release(&r);
	return err;
}

int s3_http_mpu_put_part(struct s3 *iface, const char *bucket, const char *key,
			const char *upload_id, unsigned part, int fd,
			uint64_t off, uint64_t size, char etag_out[72])
{
	struct s3_http *s = (struct s3_http *)iface;
	etag_out[0] = '\0';
	struct s3_req r;
	char *query = NULL;
	int err = req_init(&r, "MPU-PART", bucket, key);
	if (!key || fd < 0 || part < 1 || part > S3_MAX_PARTS ||
	    size > S3_MAX_PART)
		err = err ? err : -EINVAL;
	if (!err && !(query = mpu_query(upload_id, part)))
		err = -ENAMETOOLONG;
	if (err)
		goto out;
	r.verb = "PUT";
	r.query = query;
	err = req_send_fd(s, &r, fd, off, size, etag_out);
out:
	free(query);
	req_release(&r);
	return err;
}

int s3_http_mpu_copy_part(struct s3 *iface, const char *bucket, const char *key,
			 const char *upload_id, unsigned part,
			 const char *src_key, const char *src_if_match,
			 uint64_t off, uint64_t size, char etag_out[72])
{
	struct s3_http *s = (struct s3_http *)iface;
	etag_out[0] = '\0';
	struct s3_req r;
	char *query = NULL;
	int err = req_init(&r, "MPU-COPY", bucket, key);
	if (!key || !src_key || !*src_key || part < 1 || part > S3_MAX_PARTS ||
	    size == 0 || size > S3_MAX_PART)
		err = err ? err : -EINVAL;
	if (!err && !(query = mpu_query(upload_id, part)))
		err = -ENAMETOOLONG;
	if (!err)
		err = req_copy_source(&r, bucket, src_key, src_if_match);
	char range[64];
	snprintf(range, sizeof range, "bytes=%" PRIu64 "-%" PRIu64, off,
		 off + size - 1);
	if (!err)
		err = req_header(&r, "x-amz-copy-source-range", range);
	if (err)
		goto out;
	r.verb = "PUT";
	r.query = query;
	r.upload = true;                 /* a PUT with an empty body */
	r.up_size = 0;
	r.sink = SINK_GROW;
	r.stall_s = 5 * s->stall_s;      /* the server copies before answering */
	r.error_in_200 = true;
	S3_STAT(s, s3_copy);
	err = s3_req_run(s, &r);
	if (!err)
		req_body_etag(&r, etag_out);
	if (!err && !etag_out[0]) {
		log_error("s3: MPU-COPY %s/%s part %u: no ETag in the answer",
			  bucket, key, part);
		err = -EPROTO;
	}
	/* RGW 16 ignores x-amz-copy-source-if-match on UploadPartCopy (seen
	 * in t_multipart): the source's ETag is checked after the copy too,
	 * and after a refused range (a source that shrank since: another
	 * version, -ESTALE, not a range the caller got wrong). */
	if ((!err || err == -ERANGE) && src_if_match && *src_if_match) {
		struct obj_meta now = { 0 };
		int herr = iface->ops->head(iface, bucket, src_key, &now);
		if (herr)
			err = herr;
		else if (strcmp(now.etag, src_if_match) != 0) {
			log_debug("s3: MPU-COPY %s/%s part %u: source %s is %s, "
				  "not %s", bucket, key, part, src_key, now.etag,
				  src_if_match);
			err = -ESTALE;
		}
		obj_meta_release(&now);
	}
out:
	free(query);
	req_release(&r);
	return err;
}

/* NoSuchUpload at a completion: an earlier attempt whose answer was lost
 * (the request is sent again after a stall) may have completed it. If the
 * key now holds an object whose ETag is the one these parts make, and
 * that object was made since this completion began (its Last-Modified, in
 * the store's whole seconds, at or after since_s: the start less
 * COMPLETE_SKEW_S for a store clock behind ours), it did: 0 and that ETag.
 * Else -ENOENT as before. (The time matters: a copy of an object onto
 * itself in parts of the size it was uploaded in makes the ETag it already
 * has, so an upload aborted by someone else would otherwise pass for done,
 * its new metadata lost. Objects copied in parts are over 5 GiB: written
 * far longer than COMPLETE_SKEW_S before any copy of them completes.) */
#define COMPLETE_SKEW_S 5

static int complete_was_done(struct s3 *iface, const char *bucket, const char *key,
			     const struct s3_part *parts, size_t n, int64_t since_s,
			     char etag_out[72])
{
	char want[72];
	s3_mpu_etag(parts, n, want);
	struct obj_meta o = { 0 };
	int err = s3_head(iface, bucket, key, &o) == 0 && strcmp(o.etag, want) == 0 &&
		  o.mtime_ns / 1000000000 >= since_s ? 0 : -ENOENT;
	obj_meta_release(&o);
	if (err == 0) {
		log_info("s3: MPU-COMPLETE %s/%s: no such upload, but the object is "
			 "the one its parts make (%s): completed by an earlier attempt",
			 bucket, key, want);
		snprintf(etag_out, 72, "%s", want);
	}
	return err;
}

int s3_http_mpu_complete(struct s3 *iface, const char *bucket, const char *key,
			const char *upload_id, const struct s3_part *parts,
			size_t n, char etag_out[72])
{
	struct s3_http *s = (struct s3_http *)iface;
	etag_out[0] = '\0';
	struct s3_req r;
	char *query = NULL, *body = NULL;
	int err = req_init(&r, "MPU-COMPLETE", bucket, key);
	if (!key || n == 0 || n > S3_MAX_PARTS)
		err = err ? err : -EINVAL;
	for (size_t i = 0; !err && i < n; i++)
		if (parts[i].number < 1 || parts[i].number > S3_MAX_PARTS ||
		    (i && parts[i].number <= parts[i - 1].number) ||
		    !parts[i].etag[0])
			err = -EINVAL;
	if (!err && !(query = mpu_query(upload_id, 0)))
		err = -ENAMETOOLONG;
	if (!err && !(body = s3_xml_complete_body(parts, n)))
		err = -ENOMEM;
	if (!err)
		err = req_header(&r, "Content-Type", "application/xml");
	if (err)
		goto out;
	r.verb = "POST";
	r.query = query;
	r.post = true;
	r.up_mem = body;
	r.up_size = strlen(body);
	r.sink = SINK_GROW;
	r.stall_s = 5 * s->stall_s;      /* the server assembles the parts */
	r.error_in_200 = true;           /* S3 may answer 200 and still fail */
	S3_STAT(s, s3_put);
	int64_t began_s = (int64_t)time(NULL) - COMPLETE_SKEW_S;
	err = s3_req_run(s, &r);
	if (!err)
		req_body_etag(&r, etag_out);
	/* RGW 16 answers <ETag></ETag>: the ETag is known from the parts. */
	if (!err && !etag_out[0])
		s3_mpu_etag(parts, n, etag_out);
	if (err == -ENOENT)
		err = complete_was_done(iface, bucket, key, parts, n, began_s, etag_out);
out:
	free(body);
	free(query);
	req_release(&r);
	return err;
}

int s3_http_mpu_abort(struct s3 *iface, const char *bucket, const char *key,
		     const char *upload_id)
{
	struct s3_http *s = (struct s3_http *)iface;
	struct s3_req r;
	char *query = NULL;
	int err = req_init(&r, "MPU-ABORT", bucket, key);
	if (!key)
		err = err ? err : -EINVAL;
	if (!err && !(query = mpu_query(upload_id, 0)))
		err = -ENAMETOOLONG;
	if (!err) {
		r.verb = "DELETE";
		r.query = query;
		r.del = true;
		S3_STAT(s, s3_delete);
		err = s3_req_run(s, &r);
		if (err == -ENOENT)
			err = 0;         /* already completed or aborted */
	}
	free(query);
	req_release(&r);
	return err;
}

int s3_http_mpu_list(struct s3 *iface, const char *bucket, const char *prefix,
		    s3_upload_fn fn, void *ctx)
{
	struct s3_http *s = (struct s3_http *)iface;
	char next_key[2048] = "", next_id[1024] = "";
	char ek[3 * sizeof next_key], ei[3 * sizeof next_id], ep[3 * 1024 + 1];
	if (s3_url_encode(prefix ? prefix : "", false, ep, sizeof ep) < 0)
		return -ENAMETOOLONG;
	bool truncated = true;
	int err = 0;
	while (!err && truncated) {
		char *query = NULL;
		int n;
		if (next_key[0]) {
			if (s3_url_encode(next_key, false, ek, sizeof ek) < 0 ||
			    s3_url_encode(next_id, false, ei, sizeof ei) < 0)
				return -ENAMETOOLONG;
			n = asprintf(&query, "key-marker=%s&prefix=%s"
				     "&upload-id-marker=%s&uploads=", ek, ep, ei);
		} else {
			n = asprintf(&query, "prefix=%s&uploads=", ep);
		}
		if (n < 0)
			return -ENOMEM;
		struct s3_req r;
		err = req_init(&r, "MPU-LIST", bucket, NULL);
		if (!err) {
			r.verb = "GET";
			r.query = query;
			r.sink = SINK_GROW;
			S3_STAT(s, s3_list);
			err = s3_req_run(s, &r);
		}
		if (!err && !r.body)
			err = -EPROTO;
		if (!err)
			err = s3_xml_uploads_parse(r.body, r.body_len, fn, ctx,
						   next_key, sizeof next_key,
						   next_id, sizeof next_id,
						   &truncated);
		if (err < 0 && err != -ENOENT && err != -EHOSTUNREACH)
			log_debug("s3: MPU-LIST %s: %s", bucket, strerror(-err));
		req_release(&r);
		free(query);
	}
	return err;
}
