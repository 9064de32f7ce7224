/*
 * s3_idp.h — temporary credentials from AWS's identity endpoints, over
 * HTTP, for the gateway's credential chain (gateway/creds.h):
 *   - the instance metadata service, IMDSv2 only: a session token by PUT,
 *     then the instance role's name, then its credentials;
 *   - a container endpoint (ECS task roles, EKS pod identity): one GET,
 *     with an Authorization header when one is given;
 *   - STS AssumeRoleWithWebIdentity (EKS service-account roles): one GET
 *     with the web-identity token, unsigned.
 * Each call is a short exchange with its own timeout (connect and whole),
 * follows no redirect and keeps nothing between calls. Answers are parsed
 * here: the JSON of IMDS, container endpoints and credential_process
 * (s3_idp_parse_json), the XML of STS.
 *
 * Secrets: values go only into *out; an error names the endpoint and what
 * was wrong (status, a missing field), never a value.
 * Threads: any; no shared state. Ownership: s3_idp_creds_release() frees
 * and wipes what a call put into *out (set only on success).
 * Errors: 0, or -ETIMEDOUT (no answer in time), -ECONNREFUSED / -EHOSTUNREACH
 * (nothing there), -EACCES (the endpoint refused), -EPROTO (an answer
 * without credentials), -ENOMEM; err[errlen] says which.
 *
 * Tests: test_creds.c (a fake IMDS, container endpoint and STS on the
 * loopback); t_creds.sh.
 */
#ifndef FACETFS_SYNC_S3_IDP_H
#define FACETFS_SYNC_S3_IDP_H

#include <stddef.h>
#include <stdint.h>

struct s3_idp_creds {
	char *access_key, *secret_key;
	char *token;                 /* NULL: none */
	int64_t expires;             /* Unix seconds; 0: none given */
	char role[128];              /* IMDS: the instance role's name */
};

/* IMDSv2 at endpoint (e.g. "http://169.254.169.254"). */
int s3_idp_imds(const char *endpoint, int timeout_ms, struct s3_idp_creds *out,
		char *err, size_t errlen);
/* GET url, with "Authorization: authorization" unless it is NULL. */
int s3_idp_container(const char *url, const char *authorization, int timeout_ms,
		     struct s3_idp_creds *out, char *err, size_t errlen);
/* AssumeRoleWithWebIdentity at the STS endpoint (e.g.
 * "https://sts.amazonaws.com"). */
int s3_idp_web_identity(const char *sts_endpoint, const char *role_arn,
			const char *session_name, const char *token, int timeout_ms,
			struct s3_idp_creds *out, char *err, size_t errlen);
/* The credentials of a JSON document: AccessKeyId, SecretAccessKey, Token
 * or SessionToken, Expiration (ISO 8601). -EPROTO when a key is missing. */
int s3_idp_parse_json(const char *body, size_t n, struct s3_idp_creds *out);
void s3_idp_creds_release(struct s3_idp_creds *c);

#endif
