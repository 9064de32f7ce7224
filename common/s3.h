/*
 * s3.h — the S3 interface: the one way every module talks to an object
 * store (GET, HEAD, tagging, LIST, PUT, COPY, DELETE, multipart uploads).
 * A struct s3 is a
 * table of operations (struct s3_ops) and whatever its implementation
 * keeps behind it; the functions below call through the table. Three
 * implementations stand behind it (mountpoint-s3's shape):
 *   sync/s3/s3_http.h   the real client (libcurl, SigV4), s3_http_new();
 *   sync/s3/s3_fake.h   an in-memory store for unit tests, deterministic;
 *   sync/s3/s3_fault.h  a wrapper around either that injects failures,
 *                    latency, changed ETags and short bodies.
 * Callers hold a struct s3 * and never know which one they have.
 *
 * Contract of every implementation (the real client documents its own
 * retries and logging in sync/s3/s3_http.h):
 * Threads: any thread may call any function at the same time, except
 * s3_free(), which no call may overlap.
 * Errors: 0 or a negative errno, the same set everywhere: -ENOENT no such
 * key or bucket, -EACCES refused, -ESTALE a condition failed (If-Match,
 * copy-source If-Match, a conditional PUT's If-Match or If-None-Match),
 * -EHOSTUNREACH the store is unreachable, -EINVAL a bad request,
 * -ENAMETOOLONG a key too long, -ECANCELED the calling thread's cancel
 * flag is set (s3_cancel_watch, at the end), -EIO the rest.
 * Ownership: results are copied into caller memory; nothing returned needs
 * freeing except what s3_head() puts into *out (obj_meta_release()) and
 * the tags s3_get_tagging() returns.
 *
 * Tests: test_s3_fake.c (the interface against the fake), test_s3.c,
 * test_s3_mpu.c, test_s3_cond.c; t_s3.sh, t_multipart.sh (the real client).
 */
#ifndef FACETFS_COMMON_S3_H
#define FACETFS_COMMON_S3_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/object.h"

struct s3;

/* Called once per listed object with bucket, key, size, mtime_ns, etag and
 * OBJ_FROM_SCAN; *o and its strings live only during the call (copy them).
 * A nonzero return stops the page; s3_list_page() then returns that value. */
typedef int (*s3_list_fn)(void *ctx, const struct obj_meta *o);

/* One part of a multipart upload, as CompleteMultipartUpload takes it. */
struct s3_part {
	unsigned number;             /* 1..S3_MAX_PARTS, ascending */
	char etag[72];               /* as the part's upload answered, no quotes */
};

#define S3_MAX_PARTS     10000u
#define S3_MIN_PART      (5ull << 20)    /* every part but the last, on AWS */
#define S3_MAX_PART      (5ull << 30)
#define S3_MAX_OBJECT    (5ull << 40)

/* Called once per multipart upload in progress (s3_mpu_list): key, upload
 * id and when it was initiated (ns since the epoch, -1 if unknown); the
 * strings live only during the call. Nonzero stops the listing. */
typedef int (*s3_upload_fn)(void *ctx, const char *key, const char *upload_id,
			    int64_t initiated_ns);

/* Given a GET's body as it arrives (s3_get_stream), n > 0 bytes at a
 * time, in order; nonzero (a negative errno) stops the GET with it. */
typedef int (*s3_data_fn)(void *ctx, const void *p, size_t n);

/* The operations an implementation provides; each has the contract of the
 * function of the same name below (get_stream may be NULL: s3_get_stream
 * then makes ranged GETs). */
struct s3_ops {
	int  (*get)(struct s3 *s, const char *bucket, const char *key,
		    uint64_t off, size_t len, const char *if_match, void *buf,
		    size_t *got);
	int  (*get_stream)(struct s3 *s, const char *bucket, const char *key,
			   uint64_t off, uint64_t len, const char *if_match,
			   s3_data_fn fn, void *ctx, uint64_t *got);
	int  (*head)(struct s3 *s, const char *bucket, const char *key,
		     struct obj_meta *out);
	int  (*get_tagging)(struct s3 *s, const char *bucket, const char *key,
			    struct obj_kv **tags, size_t *n);
	int  (*list_page)(struct s3 *s, const char *bucket, const char *prefix,
			  const char *token, s3_list_fn fn, void *ctx,
			  char *next_token, size_t ntlen, bool *truncated);
	/* base NULL: unconditional (s3_put_file); else s3_put_file_if's */
	int  (*put_file)(struct s3 *s, const char *bucket, const char *key,
			 int fd, uint64_t size, const struct obj_kv *meta,
			 size_t n_meta, const char *content_type,
			 const char *base, char etag_out[72]);
	int  (*del)(struct s3 *s, const char *bucket, const char *key);
	int  (*copy)(struct s3 *s, const char *bucket, const char *src_key,
		     const char *dst_key, const struct obj_kv *meta,
		     size_t n_meta, const struct obj_meta *src_head,
		     char etag_out[72]);
	int  (*bucket_check)(struct s3 *s, const char *bucket);
	int  (*mpu_create)(struct s3 *s, const char *bucket, const char *key,
			   const struct obj_kv *meta, size_t n_meta,
			   const char *content_type, char *upload_id,
			   size_t idlen);
	int  (*mpu_put_part)(struct s3 *s, const char *bucket, const char *key,
			     const char *upload_id, unsigned part, int fd,
			     uint64_t off, uint64_t size, char etag_out[72]);
	int  (*mpu_copy_part)(struct s3 *s, const char *bucket,
			      const char *key, const char *upload_id,
			      unsigned part, const char *src_key,
			      const char *src_if_match, uint64_t off,
			      uint64_t size, char etag_out[72]);
	int  (*mpu_complete)(struct s3 *s, const char *bucket, const char *key,
			     const char *upload_id, const struct s3_part *parts,
			     size_t n, char etag_out[72]);
	int  (*mpu_abort)(struct s3 *s, const char *bucket, const char *key,
			  const char *upload_id);
	int  (*mpu_list)(struct s3 *s, const char *bucket, const char *prefix,
			 s3_upload_fn fn, void *ctx);
	void (*free)(struct s3 *s);
};

/* The head of every implementation's struct (its first member). */
struct s3 {
	const struct s3_ops *ops;
};

/* Frees the store handle (the fault wrapper frees what it wraps only when
 * s3_fault_new was told to own it). NULL is a no-op. */
void s3_free(struct s3 *s);

/* Ranged GET of [off, off+len) into buf. *got = bytes stored, short at the
 * end of the object (a read wholly past the end gives 0 and returns 0).
 * len 0 makes no request. if_match (an ETag without quotes, or NULL) is
 * sent as If-Match: a changed object gives -ESTALE. */
int  s3_get(struct s3 *s, const char *bucket, const char *key, uint64_t off,
	    size_t len, const char *if_match, void *buf, size_t *got);

/* GET of [off, off+len) (len UINT64_MAX: to the end of the object) handed
 * to fn as it arrives, through a buffer of bounded size, never one of
 * the object's: one request where the implementation streams (the real
 * client: with off 0 and no len, a plain GET with no Range), ranged GETs
 * of S3_STREAM_UNIT otherwise. Each byte is given once, also across the
 * client's retries. *got: the bytes given. if_match as for s3_get. */
#define S3_STREAM_UNIT (8u << 20)
int  s3_get_stream(struct s3 *s, const char *bucket, const char *key, uint64_t off,
		   uint64_t len, const char *if_match, s3_data_fn fn, void *ctx,
		   uint64_t *got);

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

/* s3_put_file only if the key still holds the version the data was based
 * on: base an ETag (no quotes) sends If-Match with it, base "" (a new key)
 * sends If-None-Match: *. -ESTALE when the store refuses (412): the key
 * holds another version, or none (or, for "", one). base NULL: -EINVAL.
 * A store that ignores the condition stores the object whatever the key
 * holds: which ones each store honours is asked once with
 * probe_cond_put() (sync/stage/probe.h). The real client sends If-Match's ETag
 * without quotes (RGW 16 refuses a quoted one even when it matches), and
 * when a 412 follows a retry (the first attempt may have stored the
 * object and its answer was lost), it HEADs the key: the key holding
 * these very bytes is a success. */
int  s3_put_file_if(struct s3 *s, const char *bucket, const char *key, int fd,
		    uint64_t size, const struct obj_kv *meta, size_t n_meta,
		    const char *content_type, const char *base,
		    char etag_out[72]);

/* Which conditions on a PUT a store honours (s3_put_file_if), as the
 * probe at mount found them (sync/stage/probe.h); false: not sent, the caller
 * checks the key's version with a HEAD before an unconditional PUT. */
struct s3_cond_caps {
	bool if_none_match;          /* If-None-Match: * (a new key) */
	bool if_match;               /* If-Match: ETag (a key's next version) */
};

/* DELETE; deleting a missing key is not an error (S3 answers 204). */
int  s3_delete(struct s3 *s, const char *bucket, const char *key);

/* Server-side copy inside bucket. meta == NULL keeps the source's metadata
 * and content type. meta != NULL replaces the user metadata with meta[]
 * (n_meta may be 0 to clear it): a HEAD of the source first (skipped when
 * the caller passes what it knows of the source in src_head: its ETag and
 * content type, from a HEAD or the index), then a COPY with
 * x-amz-metadata-directive REPLACE that re-sends the source's content type
 * (none: the store's default). A src_head, with or without meta, makes
 * the COPY carry x-amz-copy-source-if-match on its ETag: -ESTALE if the
 * source is another version (a store that ignores the condition, as RGW
 * 16 does, has then copied that other version: the real client tells by
 * the answer's ETag for single-part sources and still says -ESTALE). etag_out: the new object's ETag. At most
 * S3_MAX_PART bytes (sync/stage/copy.h copies larger objects in parts). */
int  s3_copy(struct s3 *s, const char *bucket, const char *src_key,
	     const char *dst_key, const struct obj_kv *meta, size_t n_meta,
	     const struct obj_meta *src_head, char etag_out[72]);

/* HEAD of the bucket: 0, -ENOENT (no such bucket), -EACCES, or
 * -EHOSTUNREACH (endpoint down) within about 10 s. */
int  s3_bucket_check(struct s3 *s, const char *bucket);

/* ---- multipart uploads ----
 * An object of up to S3_MAX_OBJECT bytes is sent as up to S3_MAX_PARTS
 * parts (each at most S3_MAX_PART; all but the last at least the store's
 * minimum, S3_MIN_PART on AWS) and appears whole, at once, when
 * s3_mpu_complete() returns 0: no reader ever sees a partial object. An
 * upload that will not be completed must be aborted, or its parts stay in
 * the bucket (s3_mpu_list() finds them). Its ETag has the form
 * "<hex MD5 of the parts' MD5s>-N". */

/* CreateMultipartUpload: the new upload's id into upload_id[idlen]
 * (-EOVERFLOW if too small, -EPROTO for an unreadable answer). meta and
 * content_type as s3_put_file() takes them: they go with the object.
 * Never sent twice: when the request left and its answer was lost
 * (a stall, a dropped connection) the error comes back at once, and the
 * store may hold an upload the caller has no id of (the stage's intents,
 * sync/stage/stage_orphans.c, find it). */
int  s3_mpu_create(struct s3 *s, const char *bucket, const char *key,
		   const struct obj_kv *meta, size_t n_meta,
		   const char *content_type, char *upload_id, size_t idlen);
/* Is err, from a creation, the store's own refusal (an error document:
 * nothing was made)? Timeouts, lost connections and 5xx may follow a
 * creation that happened: false for those. */
bool s3_mpu_create_refused(int err);

/* UploadPart number part (1..S3_MAX_PARTS) of size bytes read (pread)
 * from fd at [off, off+size). etag_out: the hex MD5 of the bytes sent,
 * checked against the store's answer (-EIO if they differ). Uploading a
 * part number again replaces that part. -ENOENT if the upload is gone. */
int  s3_mpu_put_part(struct s3 *s, const char *bucket, const char *key,
		     const char *upload_id, unsigned part, int fd, uint64_t off,
		     uint64_t size, char etag_out[72]);

/* UploadPartCopy: part number part from [off, off+size) of the existing
 * object bucket/src_key (server-side), only if its ETag is src_if_match
 * (when not NULL: -ESTALE otherwise; the real client also HEADs the source
 * after the copy, since RGW 16 ignores the condition). etag_out: the
 * part's ETag. */
int  s3_mpu_copy_part(struct s3 *s, const char *bucket, const char *key,
		      const char *upload_id, unsigned part,
		      const char *src_key, const char *src_if_match,
		      uint64_t off, uint64_t size, char etag_out[72]);

/* CompleteMultipartUpload with parts[0..n) (ascending numbers, n >= 1):
 * the object appears; etag_out its ETag. -EINVAL for an empty or unordered
 * list; -EIO if the store refuses (a part missing or too small: logged).
 * NoSuchUpload with the key already holding the object these parts make
 * (an earlier attempt completed it, its answer lost) is 0: the real
 * client checks by a HEAD; other NoSuchUpload is -ENOENT. */
int  s3_mpu_complete(struct s3 *s, const char *bucket, const char *key,
		     const char *upload_id, const struct s3_part *parts,
		     size_t n, char etag_out[72]);

/* AbortMultipartUpload: the parts are dropped. An upload already gone
 * (completed or aborted) gives 0: aborting is idempotent. */
int  s3_mpu_abort(struct s3 *s, const char *bucket, const char *key,
		  const char *upload_id);

/* ListMultipartUploads of bucket under prefix (NULL or "": all), every
 * page, calling fn per upload in key order. 0, fn's nonzero value, or an
 * error. */
int  s3_mpu_list(struct s3 *s, const char *bucket, const char *prefix,
		 s3_upload_fn fn, void *ctx);

/* ---- cancellation ----
 * A thread may name a flag that its requests watch. Once the flag is set,
 * a request of that thread that is waiting ends with -ECANCELED within
 * about a second (the real client: in curl's progress callback and in
 * the pause between retries; the fault wrapper: in its delays), and the
 * real client and the fault wrapper send none of that thread's requests
 * any more (-ECANCELED at once); the in-memory fake never waits and
 * ignores the flag. A request so ended may have been done by the store
 * (its answer was on the way): the caller treats it as a lost answer.
 * The flag is the caller's and must outlive the thread's requests. A
 * call that starts threads for its requests (the parts of upload_file and
 * copy_object) hands them the caller's flag. Used by write-back's drain
 * to end a stop on time (fuse/core_drain.c). */
/* From now on, the calling thread's requests watch flag (NULL: none, as
 * at every thread's start). */
void s3_cancel_watch(const atomic_bool *flag);
/* The flag the calling thread watches, or NULL. */
const atomic_bool *s3_cancel_flag(void);
/* Is the calling thread's flag set? */
bool s3_cancelled(void);

#endif
