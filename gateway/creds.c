/* creds.c — see creds.h. */
#include "gateway/creds.h"
#include "gateway/config.h"
#include "common/lock.h"
#include "common/log.h"

#include "sync/s3/s3_http.h"
#include "sync/s3/s3_idp.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define IDP_TIMEOUT_MS   1000      /* IMDS and container endpoints, as the SDKs */
#define STS_TIMEOUT_MS   10000
#define PROCESS_OUT_MAX  (64u * 1024)

static void wipe_free(char *s)
{
	if (s)
		memset(s, 0, strlen(s));
	free(s);
}

void creds_release(struct creds *c)
{
	wipe_free(c->access_key);
	wipe_free(c->secret_key);
	wipe_free(c->token);
	c->access_key = c->secret_key = c->token = NULL;
}

static bool str_eq(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

bool creds_equal(const struct creds *a, const struct creds *b)
{
	return str_eq(a->access_key, b->access_key) &&
	       str_eq(a->secret_key, b->secret_key) && str_eq(a->token, b->token);
}

static int creds_set(struct creds *out, const char *ak, const char *sk,
		     const char *token)
{
	out->access_key = strdup(ak);
	out->secret_key = strdup(sk);
	out->token = token && *token ? strdup(token) : NULL;
	if (!out->access_key || !out->secret_key || (token && *token && !out->token)) {
		creds_release(out);
		return -ENOMEM;
	}
	return 0;
}

/* out takes what an identity endpoint or a process gave. */
static int creds_from_idp(struct creds *out, struct s3_idp_creds *c)
{
	int rc = creds_set(out, c->access_key, c->secret_key, c->token);
	out->expires = c->expires;
	s3_idp_creds_release(c);
	return rc;
}

/* An identity endpoint answered rc (c is set on 0): out takes c, its
 * source named source. */
static int creds_took(int rc, struct s3_idp_creds *c, struct creds *out,
		      const char *source)
{
	if (rc < 0)
		return rc;
	rc = creds_from_idp(out, c);
	snprintf(out->source, sizeof out->source, "%.500s", source);
	return rc;
}

/* A secret in a file others may read: say so once per resolve. */
static void warn_if_readable(const char *path)
{
	struct stat sb;
	if (stat(path, &sb) == 0 && (sb.st_mode & 077))
		log_warn("%s holds a secret and is readable by group or others "
			 "(mode %03o): chmod 600 it", path, sb.st_mode & 0777);
}

/* Trim spaces and tabs at both ends, in place. */
static char *trim(char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	size_t n = strlen(s);
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' ||
		     s[n - 1] == '\n'))
		s[--n] = '\0';
	return s;
}

/* Run cmd with sh -c, its output into buf[cap] (*n bytes): its exit
 * status (as waitpid gives it), or -1 with errno. The child gets an empty
 * signal mask (the gateway blocks SIGHUP, SIGINT and SIGTERM in all its
 * threads) and /dev/null as its input. */
static int run_capture(const char *cmd, char *buf, size_t cap, size_t *n)
{
	int fds[2];
	*n = 0;
	if (pipe2(fds, O_CLOEXEC) < 0)
		return -1;
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t none;
	sigemptyset(&none);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawnattr_init(&at);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK);
	char *argv[] = { "sh", "-c", (char *)cmd, NULL };
	pid_t pid;
	int rc = posix_spawn(&pid, "/bin/sh", &fa, &at, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	close(fds[1]);
	if (rc != 0) {
		close(fds[0]);
		errno = rc;
		return -1;
	}
	ssize_t got;
	while (*n < cap && (got = read(fds[0], buf + *n, cap - *n)) != 0) {
		if (got < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		*n += (size_t)got;
	}
	close(fds[0]);
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return st;
}

/* Run a profile's credential_process (sh -c) and take the JSON it
 * prints (Version 1: AccessKeyId, SecretAccessKey, SessionToken,
 * Expiration), as the AWS SDKs do. */
static int creds_from_process(const char *cmd, const char *what, struct creds *out,
			      char *err, size_t errlen)
{
	char *buf = malloc(PROCESS_OUT_MAX + 1);
	if (!buf)
		return -ENOMEM;
	size_t n = 0;
	int st = run_capture(cmd, buf, PROCESS_OUT_MAX, &n);
	int rc = 0;
	struct s3_idp_creds c;
	if (st == -1) {
		snprintf(err, errlen, "%s: credential_process cannot start: %s", what,
			 strerror(errno));
		rc = -EINVAL;
	} else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		snprintf(err, errlen, "%s: credential_process failed (exit status %d)",
			 what, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
		rc = -EINVAL;
	} else if (s3_idp_parse_json(buf, n, &c) < 0) {
		snprintf(err, errlen, "%s: credential_process printed no AccessKeyId "
			 "and SecretAccessKey", what);
		rc = -EINVAL;
	} else {
		rc = creds_from_idp(out, &c);
		snprintf(out->source, sizeof out->source, "credential_process of %s", what);
	}
	memset(buf, 0, n);
	free(buf);
	return rc;
}

/* Section [section] of an INI-style shared file (credentials, or config
 * with "profile NAME" sections): its keys, or (config) its
 * credential_process. -ENOENT: no such section, or none of them in it. */
static int creds_from_file(const char *path, const char *section, const char *profile,
			   struct creds *out, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -ENOENT;
	}
	char line[8192], *ak = NULL, *sk = NULL, *tok = NULL, *proc = NULL;
	bool in = false, found = false, bad = false;
	unsigned lineno = 0;
	while (fgets(line, sizeof line, f)) {
		lineno++;
		if (!strchr(line, '\n') && !feof(f)) {
			snprintf(err, errlen, "%s:%u: line too long", path, lineno);
			bad = true;
			break;
		}
		char *l = trim(line);
		if (!*l || *l == '#' || *l == ';')
			continue;
		if (*l == '[') {
			char *end = strchr(l, ']');
			if (!end) {
				snprintf(err, errlen, "%s:%u: unclosed [", path, lineno);
				bad = true;
				break;
			}
			*end = '\0';
			in = strcmp(trim(l + 1), section) == 0;
			found |= in;
			continue;
		}
		if (!in)
			continue;
		char *eq = strchr(l, '=');
		if (!eq)
			continue;
		*eq = '\0';
		char *k = trim(l), *v = trim(eq + 1);
		char **slot = strcmp(k, "aws_access_key_id") == 0 ? &ak :
			      strcmp(k, "aws_secret_access_key") == 0 ? &sk :
			      strcmp(k, "aws_session_token") == 0 ? &tok :
			      strcmp(k, "credential_process") == 0 ? &proc : NULL;
		if (slot) {
			wipe_free(*slot);
			*slot = strdup(v);
		}
	}
	fclose(f);
	int rc = 0;
	char what[470];
	snprintf(what, sizeof what, "%.380s [profile %.60s]", path, profile);
	if (bad) {
		rc = -EINVAL;
	} else if (!found || (!ak && !sk && !proc)) {
		snprintf(err, errlen, found ? "%s: profile [%s] holds no credentials" :
			 "%s: no profile [%s]", path, profile);
		rc = -ENOENT;
	} else if (ak || sk) {
		if (!ak || !sk || !*ak || !*sk) {
			snprintf(err, errlen, "%s: profile [%s] lacks aws_access_key_id "
				 "or aws_secret_access_key", path, profile);
			rc = -EINVAL;
		} else {
			rc = creds_set(out, ak, sk, tok);
			snprintf(out->source, sizeof out->source, "%s", what);
			warn_if_readable(path);
		}
	} else {
		rc = creds_from_process(proc, what, out, err, errlen);
	}
	wipe_free(ak);
	wipe_free(sk);
	wipe_free(tok);
	wipe_free(proc);
	return rc;
}

static const char *env_nonempty(const char *name)
{
	const char *v = getenv(name);
	return v && *v ? v : NULL;
}

/* A shared file: the variable's value, else $HOME/NAME (into buf), else
 * NULL. */
static const char *shared_path(const char *var, const char *name, char *buf,
			       size_t len)
{
	const char *path = env_nonempty(var);
	if (!path && env_nonempty("HOME")) {
		snprintf(buf, len, "%s/%s", getenv("HOME"), name);
		path = buf;
	}
	return path;
}

/* The shared files for profile: the credentials file's [profile], else
 * the config file's [profile P] ([default] for default): keys or a
 * credential_process. creds_file: the config's s3.credentials_file, or
 * NULL for the environment's. -ENOENT when neither has the profile. */
static int creds_from_shared(const char *creds_file, const char *profile,
			     struct creds *out, char *err, size_t errlen)
{
	char home[4096], home2[4096], e1[1200] = "", e2[1200] = "";
	const char *path = creds_file ? creds_file :
			   shared_path("AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials",
				       home, sizeof home);
	int rc = path ? creds_from_file(path, profile, profile, out, e1, sizeof e1) : -ENOENT;
	if (rc != -ENOENT)
		return rc < 0 ? (snprintf(err, errlen, "%s", e1), rc) : 0;
	const char *cpath = shared_path("AWS_CONFIG_FILE", ".aws/config", home2,
					sizeof home2);
	char section[300];
	snprintf(section, sizeof section, strcmp(profile, "default") == 0 ? "%s" :
		 "profile %s", profile);
	rc = cpath ? creds_from_file(cpath, section, profile, out, e2, sizeof e2) : -ENOENT;
	if (rc != -ENOENT)
		return rc < 0 ? (snprintf(err, errlen, "%s", e2), rc) : 0;
	snprintf(err, errlen, "%s%s%s", path ? e1 : "no shared credentials file",
		 cpath ? "; " : "", cpath ? e2 : "");
	return -ENOENT;
}

/* Read a small file holding a token (web identity, container
 * authorization) into a new string, trailing newline cut. */
static char *token_file(const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return NULL;
	}
	char *buf = malloc(PROCESS_OUT_MAX + 1);
	size_t n = buf ? fread(buf, 1, PROCESS_OUT_MAX, f) : 0;
	fclose(f);
	if (!buf)
		return NULL;
	buf[n] = '\0';
	while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
		buf[--n] = '\0';
	if (!n) {
		snprintf(err, errlen, "%s: empty", path);
		free(buf);
		return NULL;
	}
	return buf;
}

/* STS AssumeRoleWithWebIdentity with the token of
 * AWS_WEB_IDENTITY_TOKEN_FILE (read again at each renewal). */
static int creds_from_web_identity(const struct config *c, const char *token_path,
				   const char *role, struct creds *out, char *err,
				   size_t errlen)
{
	char ferr[600] = "";
	char *token = token_file(token_path, ferr, sizeof ferr);
	if (!token) {
		snprintf(err, errlen, "web identity: %s", ferr[0] ? ferr : "no memory");
		return -EINVAL;
	}
	char sts[600], session[300], host[200] = "";
	const char *ep = env_nonempty("AWS_ENDPOINT_URL_STS");
	if (ep)
		snprintf(sts, sizeof sts, "%s", ep);
	else if (c->s3_region && *c->s3_region && strcmp(c->s3_region, "default") != 0)
		snprintf(sts, sizeof sts, "https://sts.%s.amazonaws.com", c->s3_region);
	else
		snprintf(sts, sizeof sts, "https://sts.amazonaws.com");
	const char *name = env_nonempty("AWS_ROLE_SESSION_NAME");
	if (!name) {
		gethostname(host, sizeof host - 1);
		snprintf(session, sizeof session, "facetfs-%.60s", host[0] ? host : "gateway");
		for (char *q = session; *q; q++)   /* [\w+=,.@-] only */
			if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
				    "0123456789+=,.@-_", *q))
				*q = '-';
		name = session;
	}
	struct s3_idp_creds ic;
	int rc = s3_idp_web_identity(sts, role, name, token, STS_TIMEOUT_MS, &ic, err,
				     errlen);
	wipe_free(token);
	char source[512];
	snprintf(source, sizeof source, "web identity (%.480s)", role);
	return creds_took(rc, &ic, out, source);
}

/* A container endpoint: AWS_CONTAINER_CREDENTIALS_RELATIVE_URI (on
 * 169.254.170.2) or _FULL_URI, with the token of
 * AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE (read again at each renewal) or
 * AWS_CONTAINER_AUTHORIZATION_TOKEN. */
static int creds_from_container(const char *rel, const char *full, struct creds *out,
				char *err, size_t errlen)
{
	char url[2048], ferr[600] = "";
	if (rel)
		snprintf(url, sizeof url, "http://169.254.170.2%s%s", *rel == '/' ? "" : "/",
			 rel);
	else
		snprintf(url, sizeof url, "%s", full);
	const char *tf = env_nonempty("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE");
	char *auth = NULL;
	if (tf && !(auth = token_file(tf, ferr, sizeof ferr))) {
		snprintf(err, errlen, "container credentials: %s", ferr[0] ? ferr : "no memory");
		return -EINVAL;
	}
	struct s3_idp_creds ic;
	int rc = s3_idp_container(url, auth ? auth : env_nonempty("AWS_CONTAINER_AUTHORIZATION_TOKEN"),
				  IDP_TIMEOUT_MS, &ic, err, errlen);
	wipe_free(auth);
	char source[512];
	snprintf(source, sizeof source, "container endpoint %.480s", url);
	return creds_took(rc, &ic, out, source);
}

/* The instance metadata service (IMDSv2), unless
 * AWS_EC2_METADATA_DISABLED=true. */
static int creds_from_imds(struct creds *out, char *err, size_t errlen)
{
	const char *off = env_nonempty("AWS_EC2_METADATA_DISABLED");
	if (off && strcasecmp(off, "true") == 0) {
		snprintf(err, errlen, "instance metadata: AWS_EC2_METADATA_DISABLED");
		return -ENOENT;
	}
	const char *ep = env_nonempty("AWS_EC2_METADATA_SERVICE_ENDPOINT");
	char base[1024];
	snprintf(base, sizeof base, "%s", ep ? ep : "http://169.254.169.254");
	size_t n = strlen(base);
	while (n && base[n - 1] == '/')
		base[--n] = '\0';
	struct s3_idp_creds ic;
	char ierr[1200];
	int rc = s3_idp_imds(base, IDP_TIMEOUT_MS, &ic, ierr, sizeof ierr);
	if (rc < 0) {
		snprintf(err, errlen, "instance metadata: %s", ierr);
		return rc;
	}
	char source[512];
	snprintf(source, sizeof source, "instance metadata %.300s (role %s)", base, ic.role);
	return creds_took(rc, &ic, out, source);
}

int creds_resolve(const struct config *c, const char *config_path,
		  struct creds *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof *out);
	if (errlen)
		err[0] = '\0';
	if (c->s3_access_key && c->s3_secret_key) {
		snprintf(out->source, sizeof out->source, "config");
		if (config_path)         /* a secret key is in the file */
			warn_if_readable(config_path);
		return creds_set(out, c->s3_access_key, c->s3_secret_key,
				 c->s3_session_token);
	}
	const char *profile = c->s3_profile ? c->s3_profile :
			      env_nonempty("AWS_PROFILE");
	if (!profile)
		profile = "default";
	if (c->s3_credentials_file || c->s3_profile)
		return creds_from_shared(c->s3_credentials_file, profile, out, err, errlen);
	const char *ak = env_nonempty("AWS_ACCESS_KEY_ID");
	const char *sk = env_nonempty("AWS_SECRET_ACCESS_KEY");
	if (ak && sk) {
		snprintf(out->source, sizeof out->source, "environment");
		return creds_set(out, ak, sk, env_nonempty("AWS_SESSION_TOKEN"));
	}
	const char *wtf = env_nonempty("AWS_WEB_IDENTITY_TOKEN_FILE");
	const char *role = env_nonempty("AWS_ROLE_ARN");
	if (wtf && role)
		return creds_from_web_identity(c, wtf, role, out, err, errlen);
	char ferr[2500] = "";
	int rc = creds_from_shared(NULL, profile, out, ferr, sizeof ferr);
	if (rc != -ENOENT)
		return rc < 0 ? (snprintf(err, errlen, "%s", ferr), rc) : 0;
	const char *rel = env_nonempty("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
	const char *full = env_nonempty("AWS_CONTAINER_CREDENTIALS_FULL_URI");
	if (rel || full)
		return creds_from_container(rel, full, out, err, errlen);
	char ierr[1400] = "";
	rc = creds_from_imds(out, ierr, sizeof ierr);
	if (rc == 0)
		return 0;
	snprintf(err, errlen, "no credentials: none in the config (s3.access_key, "
		 "s3.secret_key), none in AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, "
		 "no AWS_WEB_IDENTITY_TOKEN_FILE with AWS_ROLE_ARN, %s, no "
		 "AWS_CONTAINER_CREDENTIALS_*_URI, and %s", ferr, ierr);
	return -ENOENT;
}

/* ---- renewal ---------------------------------------------------------- */

struct creds_renewer {
	char *config_path;
	pthread_mutex_t lock;        /* protects the fields below; a leaf */
	struct creds cur;            /* what was installed last */
	int64_t installed_at;        /* when (Unix s) */
	int64_t retry_at;            /* a failed or fruitless renewal: the next
				      * try (0: none) */
	bool expired_said;           /* the expiry was logged (once) */
	struct s3 *s3;               /* the renewer thread's client */
	pthread_t thread;
	bool running;
	atomic_bool stop;
};

static int64_t now_s(void)
{
	return (int64_t)time(NULL);
}

int creds_renewer_new(const char *config_path, const struct creds *initial,
		      struct creds_renewer **out)
{
	*out = NULL;
	struct creds_renewer *r = calloc(1, sizeof *r);
	if (!r || !(r->config_path = strdup(config_path)) ||
	    creds_set(&r->cur, initial->access_key, initial->secret_key,
		      initial->token) < 0) {
		if (r)
			free(r->config_path);
		free(r);
		return -ENOMEM;
	}
	snprintf(r->cur.source, sizeof r->cur.source, "%s", initial->source);
	r->cur.expires = initial->expires;
	r->installed_at = now_s();
	pthread_mutex_init(&r->lock, NULL);
	*out = r;
	return 0;
}

void creds_renewer_describe(struct creds_renewer *r, char *source, size_t len,
			    int64_t *expires)
{
	mod_lock(&r->lock);
	snprintf(source, len, "%s", r->cur.source);
	*expires = r->cur.expires;
	mod_unlock(&r->lock);
}

int creds_renew(void *ctx, struct s3 *s)
{
	struct creds_renewer *r = ctx;
	struct config cfg;
	char err[4096];
	int rc = config_load(r->config_path, &cfg, err, sizeof err);
	if (rc < 0) {
		log_warn("credentials: re-reading %s: %s", r->config_path, err);
		return rc;
	}
	struct creds fresh;
	rc = creds_resolve(&cfg, r->config_path, &fresh, err, sizeof err);
	config_release(&cfg);
	if (rc < 0) {
		log_warn("credentials: %s", err);
		return rc;
	}
	mod_lock(&r->lock);
	bool same = creds_equal(&fresh, &r->cur);
	if (same) {
		r->cur.expires = fresh.expires;
		snprintf(r->cur.source, sizeof r->cur.source, "%s", fresh.source);
	} else {
		rc = s3_http_set_credentials(s, fresh.access_key, fresh.secret_key,
					     fresh.token);
		if (rc == 0) {
			creds_release(&r->cur);
			r->cur = fresh;
			r->installed_at = now_s();
			r->retry_at = 0;
			r->expired_said = false;
			fresh = (struct creds){ 0 };
		}
	}
	mod_unlock(&r->lock);
	if (same) {
		log_info("credentials: %s gives the same ones", fresh.source);
		rc = 0;
	} else if (rc == 0) {
		log_info("credentials: renewed from %s", r->cur.source);
		rc = 1;
	} else {
		log_warn("credentials: installing those of %s: %s", fresh.source,
			 strerror(-rc));
	}
	creds_release(&fresh);
	return rc;
}

/* Seconds until the next renewal is due (0: now), -1: none (credentials
 * that do not expire). Due a margin before the expiry: 5 minutes, or half
 * the credentials' life when that is shorter; after a failed or fruitless
 * try, at the retry time. */
static int64_t renew_wait_s(struct creds_renewer *r, int64_t *expires)
{
	mod_lock(&r->lock);
	int64_t exp = r->cur.expires, life = exp - r->installed_at, retry = r->retry_at;
	mod_unlock(&r->lock);
	*expires = exp;
	if (!exp)
		return -1;
	int64_t margin = life / 2 < 300 ? life / 2 : 300;
	int64_t due = exp - (margin < 1 ? 1 : margin);
	if (retry && retry > due)
		due = retry;
	int64_t now = now_s();
	return due > now ? due - now : 0;
}

/* The renewer thread: on SIGHUP, and before temporary credentials expire. */
static void *renew_main(void *arg)
{
	struct creds_renewer *r = arg;
	sigset_t hup;
	sigemptyset(&hup);
	sigaddset(&hup, SIGHUP);
	while (!atomic_load(&r->stop)) {
		int64_t exp;
		int64_t wait = renew_wait_s(r, &exp);
		int sig;
		if (wait < 0) {
			if (sigwait(&hup, &sig) != 0)
				continue;
		} else {
			struct timespec ts = { (time_t)(wait > 3600 ? 3600 : wait), 0 };
			sig = sigtimedwait(&hup, NULL, &ts);
			if (sig < 0 && errno != EAGAIN)
				continue;
		}
		if (atomic_load(&r->stop))
			break;
		if (sig == SIGHUP) {
			log_info("credentials: SIGHUP: re-reading them");
			creds_renew(r, r->s3);
			continue;
		}
		if (renew_wait_s(r, &exp) != 0)
			continue;                /* an hour's wait, or renewed meanwhile */
		int64_t left = exp - now_s();
		log_info("credentials: they expire in %lld s: renewing", (long long)left);
		int rc = creds_renew(r, r->s3);
		if (rc <= 0) {
			/* Failed, or the source gives the same ones still: again
			 * in a quarter of what is left, 1 to 30 s. */
			int64_t again = left / 4 < 1 ? 1 : left / 4 > 30 ? 30 : left / 4;
			char src[sizeof r->cur.source];
			mod_lock(&r->lock);
			r->retry_at = now_s() + again;
			bool say = left <= 0 && !r->expired_said;
			r->expired_said |= say;
			snprintf(src, sizeof src, "%s", r->cur.source);
			mod_unlock(&r->lock);
			if (say)
				log_error("credentials: those of %s have expired and none "
					  "could be renewed: S3 refuses requests until they "
					  "are", src);
		}
	}
	return NULL;
}

int creds_renewer_start(struct creds_renewer *r, struct s3 *s)
{
	r->s3 = s;
	int rc = pthread_create(&r->thread, NULL, renew_main, r);
	if (rc)
		return -rc;
	r->running = true;
	return 0;
}

void creds_renewer_free(struct creds_renewer *r)
{
	if (!r)
		return;
	if (r->running) {
		atomic_store(&r->stop, true);
		pthread_kill(r->thread, SIGHUP);
		pthread_join(r->thread, NULL);
	}
	creds_release(&r->cur);
	pthread_mutex_destroy(&r->lock);
	free(r->config_path);
	free(r);
}
