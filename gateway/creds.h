/*
 * creds.h — where the gateway's S3 credentials come from: the chain of
 * the AWS SDKs.
 *
 * creds_resolve() takes the first source that has them, in this order:
 *   1. the config's s3.access_key + s3.secret_key (+ s3.session_token);
 *   2. shared files named by the config (s3.credentials_file or
 *      s3.profile given): that profile, as in 5;
 *   3. AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN);
 *   4. web identity: AWS_WEB_IDENTITY_TOKEN_FILE + AWS_ROLE_ARN
 *      (AWS_ROLE_SESSION_NAME, else facetfs-HOST): STS
 *      AssumeRoleWithWebIdentity at AWS_ENDPOINT_URL_STS, else the
 *      region's STS (s3.region), else sts.amazonaws.com; the token file is
 *      read again at each renewal;
 *   5. the shared files: AWS_SHARED_CREDENTIALS_FILE (else
 *      $HOME/.aws/credentials), profile AWS_PROFILE else "default"
 *      (aws_access_key_id, aws_secret_access_key, aws_session_token); else
 *      AWS_CONFIG_FILE (else $HOME/.aws/config), section [profile P]
 *      ([default]): keys, or a credential_process whose JSON it prints;
 *   6. a container endpoint: AWS_CONTAINER_CREDENTIALS_RELATIVE_URI (on
 *      169.254.170.2) or _FULL_URI, with AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE
 *      (read again at each renewal) or _TOKEN;
 *   7. the instance metadata service, IMDSv2 only, at
 *      AWS_EC2_METADATA_SERVICE_ENDPOINT else 169.254.169.254, unless
 *      AWS_EC2_METADATA_DISABLED=true; 1 s timeouts (sync/s3/s3_idp.h).
 * A source that is set up but fails (a web-identity token file, a
 * container endpoint, a credential_process) is an error, not skipped.
 * Renewal re-reads the config file and resolves again: on a refused
 * request (the S3 client's refresh), on SIGHUP, and before temporary
 * credentials expire (the renewer thread: 5 minutes ahead, or half their
 * life when shorter; retried every 1-30 s while the source gives none or
 * the same ones). A file holding a secret that group or others may read
 * gets a warning.
 *
 * Secrets are never logged: messages name the source, not the values.
 * Threads: creds_resolve/release/equal: any, no shared state. The renewer:
 * creds_renew() runs on whichever S3 request was refused (the S3 client
 * calls it one at a time) and on the renewer's thread; its lock is a leaf,
 * never held across S3 or HTTP I/O (installing credentials is not I/O).
 * Ownership: creds_release() frees (and wipes) what creds_resolve() put
 * into *out; the renewer owns its copies.
 *
 * Tests: test_creds.c (every source, against fake endpoints on the
 * loopback; renewal before expiry); t_creds.sh.
 */
#ifndef FACETFS_CREDS_H
#define FACETFS_CREDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct config;

struct creds {
	char *access_key, *secret_key, *token;   /* token may be NULL */
	int64_t expires;         /* Unix seconds; 0: does not expire (static keys) */
	char source[512];        /* "config", "environment", "FILE [profile P]",
				  * "web identity (ARN)", ... never a secret */
};

/* 0, or -ENOENT / -EINVAL with a message in err (naming the sources
 * tried or the file and line that is wrong). *out is set only on 0. */
int  creds_resolve(const struct config *c, const char *config_path,
		   struct creds *out, char *err, size_t errlen);
void creds_release(struct creds *c);
/* Whether a and b are the same credentials. */
bool creds_equal(const struct creds *a, const struct creds *b);

/* Renewal: re-reads config_path and resolves again; installs the result
 * into the S3 client when it differs from what it installed last. */
struct creds_renewer;
struct s3;
/* initial: the credentials the client was made with (copied). */
int  creds_renewer_new(const char *config_path, const struct creds *initial,
		       struct creds_renewer **out);
/* The S3 client's refresh callback (sync/s3/s3_http.h s3_conf.refresh):
 * 1 if new credentials were installed, 0 if the sources give the same
 * ones, or a negative errno (logged). ctx is the renewer. */
int  creds_renew(void *ctx, struct s3 *s);
/* The renewer thread: renews on SIGHUP and before the credentials expire.
 * SIGHUP must be blocked in every thread of the process before this is
 * called (the gateway blocks it on main before any thread starts); it is
 * then taken by sigwait() here only. */
int  creds_renewer_start(struct creds_renewer *r, struct s3 *s);
/* Where the installed credentials came from (never a secret) and when
 * they expire (Unix s; 0: never). Any thread. */
void creds_renewer_describe(struct creds_renewer *r, char *source, size_t len,
			    int64_t *expires);
/* Stops the thread (if any) and frees. NULL: no-op. */
void creds_renewer_free(struct creds_renewer *r);

#endif
