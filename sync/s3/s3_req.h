/*
 * s3_req.h — the internals of the real S3 client shared by its files and
 * the fuzz target of its answers. Not for other modules: only sync/ sees
 * curl.
 *
 * Layers, top first; each file calls only those below it:
 *   s3_http.c            the client: creation, table of operations, free
 *   s3_ops.c, s3_mpu.c   one function per S3 operation; the multipart ones
 *   s3_req.c             a request built and released; the pieces that
 *                        operations share (metadata and copy-source
 *                        headers, the body's ETag, a file's range sent
 *                        with its MD5 checked)
 *   s3_engine.c          s3_req_run: attempts, signing, retries, the
 *                        failure's one log line
 *   s3_callbacks.c,      curl's callbacks during an attempt; idle curl
 *   s3_pool.c,           handles; the credentials, their replacement and
 *   s3_creds.c           renewal
 *   s3_wire.c,           pure (s3_int.h): wire formats, error mapping;
 *   s3_sign.c            SigV4
 *
 * A request's life: req_init() (method, bucket, key; adds the
 * UNSIGNED-PAYLOAD header), req_header() for more headers, fill the request
 * fields the operation needs, s3_req_run() (signs, retries, maps the answer
 * to 0 or a negative errno, counts it in the stats), read the answer
 * fields, req_release().
 *
 * Locks, taken in s3_creds.c and s3_pool.c only (the process-wide order
 * is in docs/design.md "Lock order"): refresh_lock, one renewal at a time,
 * held across the refresh callback (which takes cred_lock through
 * s3_http_set_credentials); cred_lock and the pool's lock, leaves held
 * only to read or swap a pointer. None is held across a request.
 * Lock order (this module's; docs/design.md "Lock order" has the process's):
 *   S3 refresh_lock -> (refresh callback) S3 cred_lock
 *
 * Tests: test_s3.c, tests/fuzz/fuzz_s3_answer.c; t_s3.sh, t_multipart.sh.
 */
#ifndef FACETFS_S3_REQ_H
#define FACETFS_S3_REQ_H

#include "sync/s3/s3_http.h"

#include <curl/curl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/stats.h"

#define S3_POOL_MAX          32
#define S3_TRIES             5
#define S3_RETRY_BUDGET_MS   7000
#define S3_CONNECT_MS        2000
#define S3_STALL_S           15      /* no byte for this long: retry */
#define S3_CHECK_MS          2000    /* whole-attempt limit of a bucket check */
#define S3_ERRBODY_MAX       (64u << 10)
#define S3_BODY_MAX          (64u << 20)

/* One set of credentials, immutable once published; the client holds the
 * current one, each request attempt holds the one it signed with. */
struct s3_cred {
	atomic_int refs;
	uint64_t gen;                /* bumped by every replacement */
	char *access_key, *secret_key;
	char *token_line;            /* "x-amz-security-token: T", or NULL */
};

/* The client's counters (common/stats.h, rows in s3_http.c): requests by kind
 * (s3_head: HeadObject only; GetObjectTagging is s3_get_tagging), failures
 * after retries, retries, GET body bytes. */
struct s3_counters {
	stats_counter s3_list, s3_head, s3_get_tagging, s3_get, s3_put, s3_copy,
		      s3_delete, s3_errors, s3_retries, s3_bytes_read;
};

struct s3_http {
	struct s3 iface;             /* first: the interface (common/s3.h) */
	char *base;                  /* "http://host:port", no trailing '/' */
	char *host;                  /* "Host: host:port" as sent and signed */
	char *hostport;              /* "host:port" of the endpoint */
	struct curl_slist *connect_to; /* "::HOST:": virtual-host requests go to
				      * the endpoint's address (CURLOPT_CONNECT_TO) */
	bool vhost;                  /* s3_conf.virtual_host */
	char *region;
	pthread_mutex_t cred_lock;   /* protects cred (the pointer) */
	struct s3_cred *cred;
	pthread_mutex_t refresh_lock; /* one credentials refresh at a time */
	int (*refresh)(void *ctx, struct s3 *s);
	void *refresh_ctx;
	struct stats *st;            /* the S3 latency histogram's; may be NULL */
	struct s3_counters ctr;
	struct stats_group grp;      /* ctr, registered with st */
	long stall_s;                /* s3_conf.stall_s or S3_STALL_S */
	char *ca_file;               /* s3_conf.ca_file or NULL */
	bool insecure;               /* s3_conf.insecure */
	atomic_bool head_tags_count; /* a HEAD answer carried x-amz-tagging-count */
	pthread_mutex_t lock;        /* protects pool[] and n_pool */
	CURL *pool[S3_POOL_MAX];
	int n_pool;
};

enum s3_sink { SINK_NONE, SINK_BUF, SINK_GROW, SINK_FN };

/* One request and, after s3_req_run(), its answer. */
struct s3_req {
	/* what to send */
	const char *method;          /* for logs: GET HEAD LIST PUT COPY DELETE */
	const char *verb;            /* HTTP method: GET HEAD PUT DELETE */
	const char *bucket, *key;    /* key NULL: a bucket request */
	const char *query;           /* encoded, sorted; NULL for none */
	struct curl_slist *hdrs;     /* "Name: value" lines, all signed */
	bool head, del, upload, post;
	int fd;                      /* upload source (-1: empty body) */
	uint64_t up_base;            /* file offset of the body's first byte */
	const char *up_mem;          /* body in memory instead of fd (or NULL) */
	uint64_t up_size;
	long stall_s;                /* 0: the client's */
	long timeout_ms;             /* whole attempt; 0: none (stall_s only) */
	enum s3_sink sink;
	char *buf;                   /* SINK_BUF: [off, off+len) of the object */
	size_t len;                  /* (also SINK_FN's) */
	uint64_t off;
	s3_data_fn out;              /* SINK_FN: given the bytes as they come */
	void *out_ctx;
	uint64_t out_done;           /* SINK_FN: bytes given, kept across
				      * attempts (a retry skips them) */
	bool want_meta;              /* collect x-amz-meta-* */
	bool no_resend;              /* not idempotent (a creation): never
				      * sent again once it may have reached
				      * the store; a store's own error answer
				      * is still retried */
	bool error_in_200;           /* a 200 answer may carry an <Error>
				      * document (COPY, UploadPartCopy,
				      * CompleteMultipartUpload): it is then a
				      * failure of its <Code>, mapped and
				      * retried as one */
	const atomic_bool *cancel;   /* the calling thread's (s3_cancel_watch),
				      * set by s3_req_run */

	/* what came back; cleared at every attempt by req_attempt_reset() */
	long status;
	size_t got;                  /* SINK_BUF: bytes stored */
	uint64_t body_seen;
	bool full;                   /* SINK_BUF filled; we stopped curl */
	char *body;                  /* SINK_GROW body, or an error body */
	size_t body_len, body_cap;
	char etag[72];
	uint64_t clen;
	bool has_clen;
	int64_t mtime_ns;
	char *ctype;
	struct obj_kv *meta;
	size_t n_meta;
	long tag_count;              /* x-amz-tagging-count; -1: not sent */
	int cb_err;                  /* a callback's own failure (-errno) */
	uint64_t up_pos;
	EVP_MD_CTX *md5;             /* upload digest, NULL unless upload */
	char s3code[64];
	char region[40];             /* the bucket's region the answer named
				      * (x-amz-bucket-region, or <Region> of
				      * an error), "" when none */
	unsigned tries;              /* attempts sent so far (not cleared per
				      * attempt): > 1, an earlier one may have
				      * done what a later one's answer denies */
};


/* Bump a counter of the client (a field of struct s3_counters). */
#define S3_STAT(s, f) stats_inc(&(s)->ctr.f)
#define S3_STAT_ADD(s, f, n) stats_add(&(s)->ctr.f, (n))

/* ---- s3_ops.c: one function per operation, as common/s3.h's s3_* -------- */

int  s3_http_get(struct s3 *iface, const char *bucket, const char *key,
		 uint64_t off, size_t len, const char *if_match, void *buf,
		 size_t *got);
int  s3_http_get_stream(struct s3 *iface, const char *bucket, const char *key,
			uint64_t off, uint64_t len, const char *if_match,
			s3_data_fn fn, void *ctx, uint64_t *got);
int  s3_http_head(struct s3 *iface, const char *bucket, const char *key,
		  struct obj_meta *out);
int  s3_http_get_tagging(struct s3 *iface, const char *bucket, const char *key,
			 struct obj_kv **tags, size_t *n);
int  s3_http_list_page(struct s3 *iface, const char *bucket, const char *prefix,
		       const char *token, s3_list_fn fn, void *ctx,
		       char *next_token, size_t ntlen, bool *truncated);
int  s3_http_put_file(struct s3 *iface, const char *bucket, const char *key,
		      int fd, uint64_t size, const struct obj_kv *meta,
		      size_t n_meta, const char *content_type, const char *base,
		      char etag_out[72]);
int  s3_http_del(struct s3 *iface, const char *bucket, const char *key);
int  s3_http_copy(struct s3 *iface, const char *bucket, const char *src_key,
		  const char *dst_key, const struct obj_kv *meta, size_t n_meta,
		  const struct obj_meta *src_head, char etag_out[72]);
int  s3_http_bucket_check(struct s3 *iface, const char *bucket);

/* ---- s3_mpu.c: the multipart operations, as common/s3.h's s3_mpu_* ------ */

int  s3_http_mpu_create(struct s3 *iface, const char *bucket, const char *key,
			const struct obj_kv *meta, size_t n_meta,
			const char *content_type, char *upload_id, size_t idlen);
int  s3_http_mpu_put_part(struct s3 *iface, const char *bucket,
			  const char *key, const char *upload_id, unsigned part,
			  int fd, uint64_t off, uint64_t size, char etag_out[72]);
int  s3_http_mpu_copy_part(struct s3 *iface, const char *bucket,
			   const char *key, const char *upload_id,
			   unsigned part, const char *src_key,
			   const char *src_if_match, uint64_t off,
			   uint64_t size, char etag_out[72]);
int  s3_http_mpu_complete(struct s3 *iface, const char *bucket,
			  const char *key, const char *upload_id,
			  const struct s3_part *parts, size_t n,
			  char etag_out[72]);
int  s3_http_mpu_abort(struct s3 *iface, const char *bucket, const char *key,
		       const char *upload_id);
int  s3_http_mpu_list(struct s3 *iface, const char *bucket, const char *prefix,
		      s3_upload_fn fn, void *ctx);

/* ---- s3_req.c: a request built and released, pieces operations share */

int  req_header(struct s3_req *r, const char *name, const char *value);
int  req_init(struct s3_req *r, const char *method, const char *bucket,
	      const char *key);
void req_release(struct s3_req *r);

/* x-amz-meta-NAME headers for meta[0..n) and Content-Type (NULL: none);
 * -EINVAL for names or values that cannot be headers. */
int  req_meta_headers(struct s3_req *r, const struct obj_kv *meta, size_t n,
		      const char *content_type);
/* x-amz-copy-source for bucket/src_key (encoded), with
 * x-amz-copy-source-if-match when if_match is an ETag. */
int  req_copy_source(struct s3_req *r, const char *bucket, const char *src_key,
		     const char *if_match);
/* The ETag in an answer body's <ETag> (quotes and entities removed) into
 * out[72]; "" when there is none. */
void req_body_etag(const struct s3_req *r, char out[72]);
/* Send r (method, URL and headers set) with [off, off+size) of fd as its
 * body, counted as a PUT: etag_out is the hex MD5 of the bytes sent,
 * checked against the ETag the server answers (-EIO if they differ or if
 * fewer bytes were sent; logged). */
int  req_send_fd(struct s3_http *s, struct s3_req *r, int fd, uint64_t off,
		 uint64_t size, char etag_out[72]);

/* The hex MD5 of [off, off+size) of fd, read with pread, into out[33]:
 * 0, or -EIO when the file is shorter or unreadable. */
int  req_fd_md5(int fd, uint64_t off, uint64_t size, char out[33]);

/* ---- s3_engine.c: the request engine ---------------------------------- */

/* Perform r with retries; 0 or -errno (already logged; a missing key or a
 * failed If-Match only as a debug line: callers expect those). No lock of
 * ours may be held (lock_assert_none). */
int  s3_req_run(struct s3_http *s, struct s3_req *r);

/* ---- s3_callbacks.c: curl's callbacks during one attempt --------------- */

/* curl's CURLOPT_WRITEFUNCTION, HEADERFUNCTION, READFUNCTION and
 * XFERINFOFUNCTION; ud is the struct s3_req (the cancel flag for
 * progress). A callback's own failure is left in r->cb_err. */
size_t s3_cb_write(char *p, size_t sz, size_t nm, void *ud);
size_t s3_cb_header(char *line, size_t sz, size_t nm, void *ud);
size_t s3_cb_read(char *p, size_t sz, size_t nm, void *ud);
int    s3_cb_progress(void *ud, curl_off_t dlt, curl_off_t dln,
		      curl_off_t ult, curl_off_t uln);
/* Forget the answer a previous attempt (or a 100 Continue) left behind;
 * req_meta_clear() frees only its user metadata and content type. */
void   req_answer_reset(struct s3_req *r);
void   req_meta_clear(struct s3_req *r);

/* ---- s3_pool.c: idle curl handles --------------------------------------- */

/* A handle, reset, from the pool or new; NULL if curl cannot make one. */
CURL  *s3_pool_get(struct s3_http *s);
/* Give h back (cleaned up when the pool is full). */
void   s3_pool_put(struct s3_http *s, CURL *h);

/* ---- s3_creds.c: credentials -------------------------------------------- */

/* The current set with a reference taken; s3_cred_put() drops one (the
 * last wipes the secret). s3_cred_gen(): the current generation (0: none). */
struct s3_cred *s3_cred_get(struct s3_http *s);
void     s3_cred_put(struct s3_cred *c);
uint64_t s3_cred_gen(struct s3_http *s);
/* After the store refused credentials of generation gen: let the refresh
 * callback install new ones (one refresh at a time; none if another
 * request already replaced gen). True if the credentials changed. */
bool     s3_cred_renew(struct s3_http *s, uint64_t gen);

#endif
