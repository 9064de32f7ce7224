/*
 * s3.h — the S3 client of facetfs: the only code that talks to the object
 * store (GET/HEAD/LIST/PUT/COPY/DELETE, path-style URLs, AWS SigV4).
 *
 * Built on libcurl, which keeps connections alive; requests are signed
 * here (SigV4, sync/s3_sign.c, x-amz-content-sha256: UNSIGNED-PAYLOAD),
 * not with CURLOPT_AWS_SIGV4: curl 7.88 orders signed headers wrongly when
 * one name extends another ("x-amz-meta-a", "x-amz-meta-a-b"), and RGW
 * answers SignatureDoesNotMatch. Not libs3: Debian's libs3 2.0 encodes a
 * space in a key as '+' (RGW and MinIO take it literally), returns no ETag
 * for PUT and COPY, and has no tagging calls. Keys are percent-encoded
 * (A-Za-z0-9-._~ kept, '/' kept in the path, other UTF-8 bytes as %XX).
 *
 * Threads: any thread may call any function on one struct s3 at the same
 * time, except s3_free(). Each call borrows a curl handle from a small pool
 * (keep-alive connections are reused); no lock is held during a request.
 * Errors: 0 or a negative errno, mapped in one place (s3_errno_map()):
 * -ENOENT no such key or bucket, -EACCES refused (403), -ESTALE If-Match
 * failed (412), -EHOSTUNREACH endpoint unreachable (refused, no connect),
 * -EINVAL bad request (400), -ENAMETOOLONG key too long, -EIO the rest.
 * Connection errors, timeouts, 500/502/503/504, 429 and SlowDown are
 * retried (5 attempts, jittered exponential backoff, no new attempt after
 * 7 s). Failures are logged once here with bucket, key and HTTP status
 * (-ENOENT and -ESTALE only at debug level: callers expect them); stats
 * count requests by kind, retries, errors (not ENOENT/ESTALE), bytes read.
 * Ownership: results are copied into caller memory; nothing returned needs
 * freeing except what s3_head() puts into *out (obj_meta_release()) and
 * the tags s3_get_tagging() returns.
 */
#ifndef FACETFS_S3_H
#define FACETFS_S3_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gateway/stats.h"
#include "views/object.h"

struct s3;

struct s3_conf {
	const char *endpoint;    /* "host:port" or "http(s)://host:port" */
	const char *region;      /* SigV4 region; NULL -> "us-east-1" */
	const char *access_key;
	const char *secret_key;
	bool https;              /* scheme when endpoint has none */
	unsigned stall_s;        /* no byte for this long: retry; 0 -> 15 s */
};

/* The client; strings in *c are copied. st may be NULL (no counters).
 * 0, -EINVAL (missing endpoint or keys) or -ENOMEM. */
int  s3_new(const struct s3_conf *c, struct stats *st, struct s3 **out);
/* Frees the client; no call may be running on it. NULL is a no-op. */
void s3_free(struct s3 *s);

/* Ranged GET of [off, off+len) into buf. *got = bytes stored, short at the
 * end of the object (a read wholly past the end gives 0 and returns 0).
 * len 0 makes no request. if_match (an ETag without quotes, or NULL) is
 * sent as If-Match: a changed object gives -ESTALE. */
int  s3_get(struct s3 *s, const char *bucket, const char *key, uint64_t off,
	    size_t len, const char *if_match, void *buf, size_t *got);

/* HEAD: bucket, key, size, mtime_ns (Last-Modified), etag (no quotes),
 * content_type (OBJ_HAS_CTYPE), x-amz-meta-* into meta[] with lower-case
 * names without the prefix (OBJ_HAS_META, set even when there is none).
 * OBJ_HAS_TAGS with no tags when the answer says the object has none (a
 * tag count of 0, or no count from a server that sends one for tagged
 * objects, as RGW does); the tags themselves need s3_get_tagging().
 * *out is overwritten; on success the caller owns it (obj_meta_release). */
int  s3_head(struct s3 *s, const char *bucket, const char *key,
	     struct obj_meta *out);

/* GetObjectTagging (GET ?tagging=): the object's tags as a malloc'ed
 * array of name/value pairs (*tags NULL and *n 0 when it has none); the
 * caller frees each name and value and the array (or hands them to an
 * obj_meta, whose release frees them). *tags and *n are set only on success;
 * -ENOENT if the object is gone, -EPROTO for an unreadable answer. Counted
 * as a HEAD in the stats (it is the per-object metadata request of tags). */
int  s3_get_tagging(struct s3 *s, const char *bucket, const char *key,
		    struct obj_kv **tags, size_t *n);

/* Called once per listed object with bucket, key, size, mtime_ns, etag and
 * OBJ_FROM_SCAN; *o and its strings live only during the call (copy them).
 * A nonzero return stops the page; s3_list_page() then returns that value. */
typedef int (*s3_list_fn)(void *ctx, const struct obj_meta *o);

/* One ListObjectsV2 page (up to 1,000 keys) of bucket under prefix (NULL or
 * "" = all), continuing after token (NULL or "" = first page). On return 0,
 * *truncated says whether more pages follow and next_token holds the token
 * for the next call (NUL-terminated; -EOVERFLOW if ntlen is too small). */
int  s3_list_page(struct s3 *s, const char *bucket, const char *prefix,
		  const char *token, s3_list_fn fn, void *ctx,
		  char *next_token, size_t ntlen, bool *truncated);

/* PUT of size bytes read from fd at offsets 0..size-1 (pread: the file
 * offset is not used or moved). meta names are sent as x-amz-meta-NAME;
 * content_type may be NULL. etag_out gets the hex MD5 of the data as read,
 * checked against the ETag the server answers (-EIO if they differ).
 * Names or values holding CR/LF or a ':' in a name give -EINVAL. */
int  s3_put_file(struct s3 *s, const char *bucket, const char *key, int fd,
		 uint64_t size, const struct obj_kv *meta, size_t n_meta,
		 const char *content_type, char etag_out[72]);

/* DELETE; deleting a missing key is not an error (S3 answers 204). */
int  s3_delete(struct s3 *s, const char *bucket, const char *key);

/* Server-side copy inside bucket. meta == NULL keeps the source's metadata
 * and content type. meta != NULL replaces the user metadata with meta[]
 * (n_meta may be 0 to clear it): a HEAD of the source first (skipped when
 * the caller passes the one it has in src_head), then a COPY with
 * x-amz-metadata-directive REPLACE that re-sends the source's content type
 * and carries x-amz-copy-source-if-match (-ESTALE if the source changed in
 * between). src_head is not used when meta == NULL. etag_out: the new
 * object's ETag. */
int  s3_copy(struct s3 *s, const char *bucket, const char *src_key,
	     const char *dst_key, const struct obj_kv *meta, size_t n_meta,
	     const struct obj_meta *src_head, char etag_out[72]);

/* HEAD of the bucket: 0, -ENOENT (no such bucket), -EACCES, or
 * -EHOSTUNREACH (endpoint down) within about 10 s. */
int  s3_bucket_check(struct s3 *s, const char *bucket);

#endif
