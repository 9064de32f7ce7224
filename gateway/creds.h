/*
 * creds.h — where the gateway's S3 credentials come from.
 *
 * creds_resolve() takes the first source that has them, in this order:
 *   1. the config's s3.access_key + s3.secret_key (+ s3.session_token);
 *   2. a shared credentials file named by the config (s3.credentials_file
 *      or s3.profile given): that profile of that file;
 *   3. AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN);
 *   4. the shared credentials file AWS_SHARED_CREDENTIALS_FILE, else
 *      $HOME/.aws/credentials, profile AWS_PROFILE, else "default"
 *      (aws_access_key_id, aws_secret_access_key, aws_session_token).
 * Renewal (the gateway, on a refused request or SIGHUP) re-reads the
 * config file and resolves again: temporary credentials replaced in the
 * config or the credentials file are picked up without a remount.
 * A file holding a secret that group or others may read gets a warning.
 *
 * Secrets are never logged: messages name the source, not the values.
 * Threads: creds_resolve/release/equal: any, no shared state. The renewer:
 * creds_renew() runs on whichever S3 request was refused (the S3 client
 * calls it one at a time) and on the renewer's SIGHUP thread; its lock
 * is a leaf, never held across S3 I/O (installing credentials is not I/O).
 * Ownership: creds_release() frees (and wipes) what creds_resolve() put
 * into *out; the renewer owns its copies.
 *
 * Tests: no unit test; t_creds.sh.
 */
#ifndef FACETFS_CREDS_H
#define FACETFS_CREDS_H

#include <stdbool.h>
#include <stddef.h>

struct config;

struct creds {
	char *access_key, *secret_key, *token;   /* token may be NULL */
	char source[512];        /* "config", "environment", "FILE [profile P]" */
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
/* A thread that renews on SIGHUP. SIGHUP must be blocked in every thread
 * of the process before this is called (the gateway blocks it on main
 * before any thread starts); it is then taken by sigwait() here only. */
int  creds_renewer_start_sighup(struct creds_renewer *r, struct s3 *s);
/* Stops the thread (if any) and frees. NULL: no-op. */
void creds_renewer_free(struct creds_renewer *r);

#endif
