/* creds.c — see creds.h. */
#include "gateway/creds.h"
#include "gateway/config.h"
#include "common/lock.h"
#include "common/log.h"

#include "sync/s3/s3_http.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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

/* The profile of an INI-style shared credentials file. */
static int creds_from_file(const char *path, const char *profile,
			   struct creds *out, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -ENOENT;
	}
	char line[8192], *ak = NULL, *sk = NULL, *tok = NULL;
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
			in = strcmp(trim(l + 1), profile) == 0;
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
			      strcmp(k, "aws_session_token") == 0 ? &tok : NULL;
		if (slot) {
			wipe_free(*slot);
			*slot = strdup(v);
		}
	}
	fclose(f);
	int rc = 0;
	if (bad) {
		rc = -EINVAL;
	} else if (!found) {
		snprintf(err, errlen, "%s: no profile [%s]", path, profile);
		rc = -ENOENT;
	} else if (!ak || !sk || !*ak || !*sk) {
		snprintf(err, errlen, "%s: profile [%s] lacks aws_access_key_id "
			 "or aws_secret_access_key", path, profile);
		rc = -EINVAL;
	} else {
		rc = creds_set(out, ak, sk, tok);
		snprintf(out->source, sizeof out->source, "%s [profile %s]", path,
			 profile);
		warn_if_readable(path);
	}
	wipe_free(ak);
	wipe_free(sk);
	wipe_free(tok);
	return rc;
}

static const char *env_nonempty(const char *name)
{
	const char *v = getenv(name);
	return v && *v ? v : NULL;
}

/* The shared credentials file: AWS_SHARED_CREDENTIALS_FILE, else
 * $HOME/.aws/credentials (into buf), else NULL. */
static const char *shared_file(char *buf, size_t len)
{
	const char *path = env_nonempty("AWS_SHARED_CREDENTIALS_FILE");
	if (!path && env_nonempty("HOME")) {
		snprintf(buf, len, "%s/.aws/credentials", getenv("HOME"));
		path = buf;
	}
	return path;
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
	if (c->s3_credentials_file || c->s3_profile) {
		char home[4096];
		const char *path = c->s3_credentials_file ? c->s3_credentials_file :
				   shared_file(home, sizeof home);
		if (!path) {
			snprintf(err, errlen, "s3.profile: no credentials file (set "
				 "s3.credentials_file, AWS_SHARED_CREDENTIALS_FILE or HOME)");
			return -ENOENT;
		}
		return creds_from_file(path, profile, out, err, errlen);
	}
	const char *ak = env_nonempty("AWS_ACCESS_KEY_ID");
	const char *sk = env_nonempty("AWS_SECRET_ACCESS_KEY");
	if (ak && sk) {
		snprintf(out->source, sizeof out->source, "environment");
		return creds_set(out, ak, sk, env_nonempty("AWS_SESSION_TOKEN"));
	}
	char home[4096], ferr[1024] = "";
	const char *path = shared_file(home, sizeof home);
	if (path) {
		int rc = creds_from_file(path, profile, out, ferr, sizeof ferr);
		if (rc != -ENOENT)
			return rc < 0 ? (snprintf(err, errlen, "%s", ferr), rc) : 0;
	}
	snprintf(err, errlen, "no credentials: none in the config (s3.access_key, "
		 "s3.secret_key), none in AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY"
		 "%s%s", path ? ", and " : "", path ? ferr : "");
	return -ENOENT;
}

/* ---- renewal ---------------------------------------------------------- */

struct creds_renewer {
	char *config_path;
	pthread_mutex_t lock;        /* protects cur; a leaf */
	struct creds cur;            /* what was installed last */
	struct s3 *s3;               /* the SIGHUP thread's client */
	pthread_t thread;
	bool running;
	atomic_bool stop;
};

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
	pthread_mutex_init(&r->lock, NULL);
	*out = r;
	return 0;
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
	if (!same) {
		rc = s3_http_set_credentials(s, fresh.access_key, fresh.secret_key,
					     fresh.token);
		if (rc == 0) {
			creds_release(&r->cur);
			r->cur = fresh;
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

static void *sighup_main(void *arg)
{
	struct creds_renewer *r = arg;
	sigset_t hup;
	sigemptyset(&hup);
	sigaddset(&hup, SIGHUP);
	while (!atomic_load(&r->stop)) {
		int sig = 0;
		if (sigwait(&hup, &sig) != 0 || atomic_load(&r->stop))
			continue;
		log_info("credentials: SIGHUP: re-reading them");
		creds_renew(r, r->s3);
	}
	return NULL;
}

int creds_renewer_start_sighup(struct creds_renewer *r, struct s3 *s)
{
	r->s3 = s;
	int rc = pthread_create(&r->thread, NULL, sighup_main, r);
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
