/*
 * s3_creds.c — the S3 client's credentials (s3_req.h): one immutable set
 * per generation, with counted references (each request attempt holds the
 * set it signs with; a replaced secret is wiped when its last holder lets
 * go), their replacement (s3_http_set_credentials, s3_http.h) and their
 * renewal when the store refuses them (the refresh callback of s3_conf,
 * one at a time under refresh_lock). cred_lock is held only to read or
 * swap the pointer.
 */
#include "sync/s3/s3_http.h"
#include "sync/s3/s3_req.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/lock.h"
#include "common/log.h"

void s3_cred_put(struct s3_cred *c)
{
	if (!c || atomic_fetch_sub(&c->refs, 1) != 1)
		return;
	if (c->secret_key)
		memset(c->secret_key, 0, strlen(c->secret_key));
	if (c->token_line)
		memset(c->token_line, 0, strlen(c->token_line));
	free(c->access_key);
	free(c->secret_key);
	free(c->token_line);
	free(c);
}

struct s3_cred *s3_cred_get(struct s3_http *s)
{
	mod_lock(&s->cred_lock);
	struct s3_cred *c = s->cred;
	atomic_fetch_add(&c->refs, 1);
	mod_unlock(&s->cred_lock);
	return c;
}

uint64_t s3_cred_gen(struct s3_http *s)
{
	mod_lock(&s->cred_lock);
	uint64_t g = s->cred ? s->cred->gen : 0;
	mod_unlock(&s->cred_lock);
	return g;
}

int s3_http_set_credentials(struct s3 *iface, const char *access_key,
			    const char *secret_key, const char *token)
{
	struct s3_http *s = (struct s3_http *)iface;
	if (!access_key || !*access_key || !secret_key || !*secret_key ||
	    strpbrk(access_key, "\r\n") || strpbrk(secret_key, "\r\n") ||
	    (token && strpbrk(token, "\r\n")))
		return -EINVAL;
	struct s3_cred *c = calloc(1, sizeof *c);
	if (!c)
		return -ENOMEM;
	atomic_init(&c->refs, 1);
	c->access_key = strdup(access_key);
	c->secret_key = strdup(secret_key);
	if (token && *token &&
	    asprintf(&c->token_line, "x-amz-security-token: %s", token) < 0)
		c->token_line = NULL, c->access_key = (free(c->access_key), NULL);
	if (!c->access_key || !c->secret_key) {
		s3_cred_put(c);
		return -ENOMEM;
	}
	mod_lock(&s->cred_lock);
	struct s3_cred *old = s->cred;
	c->gen = old ? old->gen + 1 : 1;
	s->cred = c;
	mod_unlock(&s->cred_lock);
	s3_cred_put(old);
	return 0;
}

/* After the store refused credentials of generation gen: let the refresh
 * callback install new ones (one refresh at a time; none if another
 * request already replaced gen). True if the credentials changed. */
bool s3_cred_renew(struct s3_http *s, uint64_t gen)
{
	if (!s->refresh)
		return false;
	pthread_mutex_lock(&s->refresh_lock);
	if (s3_cred_gen(s) == gen) {
		int rc = s->refresh(s->refresh_ctx, &s->iface);
		if (rc < 0)
			log_warn("s3: renewing the credentials failed: %s",
				 strerror(-rc));
	}
	pthread_mutex_unlock(&s->refresh_lock);
	bool changed = s3_cred_gen(s) != gen;
	if (changed)
		log_info("s3: credentials refused; sending again with renewed ones");
	return changed;
}
