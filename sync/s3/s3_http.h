/*
 * s3_http.h — the real S3 client of facetfs: the implementation of the S3
 * interface (common/s3.h) that talks to an object store over HTTP
 * (GET/HEAD/LIST/PUT/COPY/DELETE, path-style URLs, AWS SigV4).
 *
 * Built on libcurl, which keeps connections alive; requests are signed
 * here (SigV4, sync/s3/s3_sign.c, x-amz-content-sha256: UNSIGNED-PAYLOAD),
 * not with CURLOPT_AWS_SIGV4: curl 7.88 orders signed headers wrongly when
 * one name extends another ("x-amz-meta-a", "x-amz-meta-a-b"), and RGW
 * answers SignatureDoesNotMatch. Not libs3: Debian's libs3 2.0 encodes a
 * space in a key as '+' (RGW and MinIO take it literally), returns no ETag
 * for PUT and COPY, and has no tagging calls. Keys are percent-encoded
 * (A-Za-z0-9-._~ kept, '/' kept in the path, other UTF-8 bytes as %XX).
 *
 * Threads: as common/s3.h says. Each call borrows a curl handle from a small pool
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
 *
 * Tests: test_s3.c; t_s3.sh, t_multipart.sh, t_tls.sh, t_vhost.sh,
 * t_creds.sh.
 */
#ifndef FACETFS_S3_HTTP_H
#define FACETFS_S3_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/object.h"
#include "common/s3.h"

struct s3;
struct stats;

struct s3_conf {
	const char *endpoint;    /* "host:port" or "http(s)://host:port" */
	const char *region;      /* SigV4 region; NULL -> "us-east-1" */
	const char *access_key;
	const char *secret_key;
	bool https;              /* scheme when endpoint has none */
	const char *ca_file;     /* CA bundle to verify the server (NULL: the
				  * system's store) */
	bool insecure;           /* no certificate verification at all */
	bool virtual_host;       /* BUCKET.host/KEY instead of host/BUCKET/KEY
				  * (buckets whose names DNS takes; the
				  * connection still goes to the endpoint's
				  * address, so no wildcard DNS is needed) */
	unsigned stall_s;        /* no byte for this long: retry; 0 -> 15 s */
	const char *session_token; /* temporary credentials' token, or NULL */
	/* Called (never two at once) when the store refuses the credentials
	 * (403: ExpiredToken, InvalidToken, InvalidAccessKeyId, AccessDenied,
	 * SignatureDoesNotMatch): it may install new ones with
	 * s3_http_set_credentials(), and the request is then sent once more
	 * with them. NULL: no renewal. */
	int (*refresh)(void *ctx, struct s3 *s);
	void *refresh_ctx;
};

/* The client; strings in *c are copied. st may be NULL (no counters).
 * 0, -EINVAL (missing endpoint or keys) or -ENOMEM. */
int  s3_http_new(const struct s3_conf *c, struct stats *st, struct s3 **out);

/* Replace the credentials (token may be NULL): requests signed from now
 * on use them; any thread. 0, -EINVAL (a key missing, a token with CR or
 * LF) or -ENOMEM. The strings are copied; the old secret is wiped when
 * the last request using it ends. Secrets are never logged. */
int  s3_http_set_credentials(struct s3 *s, const char *access_key,
			     const char *secret_key, const char *token);

#endif
