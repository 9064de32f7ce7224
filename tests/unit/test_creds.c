/*
 * test_creds.c — the credential chain (gateway/creds.h) against fake
 * identity endpoints on the loopback (a thread of this test speaking
 * HTTP/1.1): the instance metadata service (IMDSv2: a token first, then
 * the role, then its credentials), a container endpoint with its
 * authorization token in a file, STS AssumeRoleWithWebIdentity, and a
 * profile's credential_process. Tokens rotated in their files are sent
 * again; a slow, absent or disabled IMDS gives a clear error; the order
 * of the sources holds; temporary credentials are renewed before they
 * expire, by the renewer thread, with no request refused; no secret
 * reaches the log (this test's stderr, redirected to a file) or what the
 * renewer describes.
 */
#include "unit.h"

#include "gateway/config.h"
#include "gateway/creds.h"
#include "common/log.h"
#include "sync/s3/s3_http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- the fake endpoints ---- */

struct fake {
	int lfd;
	int port;
	pthread_t tid;
	atomic_bool stop;
	atomic_int active;           /* connections being served */
	pthread_mutex_t mu;
	/* what it answers */
	int life_s;                  /* credentials' life (Expiration) */
	int delay_ms;                /* before each answer */
	char container_auth[64];     /* Authorization the container endpoint wants */
	char web_token[64];          /* the WebIdentityToken STS wants */
	/* what it saw */
	int gen;                     /* credentials handed out */
	int requests, token_puts, imds_gets_with_token, imds_gets_without;
	char last_auth[64], last_web_token[64];
};

static void answer(int fd, int status, const char *type, const char *body)
{
	char head[256];
	int n = snprintf(head, sizeof head, "HTTP/1.1 %d X\r\nContent-Type: %s\r\n"
			 "Content-Length: %zu\r\nConnection: close\r\n\r\n", status, type,
			 strlen(body));
	if (send(fd, head, (size_t)n, MSG_NOSIGNAL) < 0 ||
	    send(fd, body, strlen(body), MSG_NOSIGNAL) < 0)
		return;
}

static void iso_in(int s, char *out, size_t len)
{
	time_t t = time(NULL) + s;
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(out, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* The value of header name (case as sent by curl) in req, into out. */
static void header_of(const char *req, const char *name, char *out, size_t len)
{
	out[0] = '\0';
	const char *p = strstr(req, name);
	if (!p)
		return;
	p += strlen(name);
	size_t l = strcspn(p, "\r\n");
	snprintf(out, len, "%.*s", (int)l, p);
}

static void serve(struct fake *f, int fd)
{
	char req[8192];
	size_t n = 0;
	ssize_t got;
	while (n < sizeof req - 1 && (got = read(fd, req + n, sizeof req - 1 - n)) > 0) {
		n += (size_t)got;
		req[n] = '\0';
		if (strstr(req, "\r\n\r\n"))
			break;
	}
	req[n] = '\0';
	pthread_mutex_lock(&f->mu);
	int delay = f->delay_ms, life = f->life_s;
	f->requests++;
	pthread_mutex_unlock(&f->mu);
	if (delay)
		usleep((useconds_t)delay * 1000);
	char body[2048], exp[32], tok[128];
	iso_in(life, exp, sizeof exp);
	pthread_mutex_lock(&f->mu);
	if (strncmp(req, "PUT /latest/api/token ", 22) == 0) {
		f->token_puts++;
		answer(fd, 200, "text/plain", "imds-session-token");
	} else if (strncmp(req, "GET /latest/meta-data/iam/security-credentials/", 47) == 0) {
		header_of(req, "X-aws-ec2-metadata-token: ", tok, sizeof tok);
		bool ok = strcmp(tok, "imds-session-token") == 0;
		f->imds_gets_with_token += ok;
		f->imds_gets_without += !ok;
		const char *rest = req + 47;
		if (!ok) {
			answer(fd, 401, "text/plain", "");
		} else if (rest[0] == ' ') {
			answer(fd, 200, "text/plain", "role-a");
		} else if (strncmp(rest, "role-a ", 7) == 0) {
			f->gen++;
			snprintf(body, sizeof body, "{\"Code\":\"Success\",\"Type\":\"AWS-HMAC\","
				 "\"AccessKeyId\":\"AKIMDS%d\",\"SecretAccessKey\":\"SECRET-IMDS-%d\","
				 "\"Token\":\"TOKEN-IMDS-%d\",\"Expiration\":\"%s\"}", f->gen, f->gen,
				 f->gen, exp);
			answer(fd, 200, "application/json", body);
		} else {
			answer(fd, 404, "text/plain", "");
		}
	} else if (strncmp(req, "GET /container/creds ", 21) == 0) {
		header_of(req, "Authorization: ", f->last_auth, sizeof f->last_auth);
		if (strcmp(f->last_auth, f->container_auth) != 0) {
			answer(fd, 403, "application/json", "{\"message\":\"denied\"}");
		} else {
			f->gen++;
			snprintf(body, sizeof body, "{\"AccessKeyId\":\"AKCONT%d\",\"SecretAccessKey\":"
				 "\"SECRET-CONT-%d\",\"Token\":\"TOKEN-CONT-%d\",\"Expiration\":\"%s\"}",
				 f->gen, f->gen, f->gen, exp);
			answer(fd, 200, "application/json", body);
		}
	} else if (strncmp(req, "GET /?Action=AssumeRoleWithWebIdentity&", 39) == 0) {
		const char *t = strstr(req, "WebIdentityToken=");
		size_t l = t ? strcspn(t + 17, "& ") : 0;
		snprintf(f->last_web_token, sizeof f->last_web_token, "%.*s", (int)l,
			 t ? t + 17 : "");
		if (!strstr(req, "RoleArn=arn%3Aaws%3Aiam%3A%3A123%3Arole%2Fweb") ||
		    strcmp(f->last_web_token, f->web_token) != 0) {
			answer(fd, 403, "text/xml", "<ErrorResponse><Error><Code>AccessDenied"
			       "</Code></Error></ErrorResponse>");
		} else {
			f->gen++;
			snprintf(body, sizeof body, "<AssumeRoleWithWebIdentityResponse><AssumeRole"
				 "WithWebIdentityResult><Credentials><AccessKeyId>AKWEB%d</AccessKeyId>"
				 "<SecretAccessKey>SECRET-WEB-%d</SecretAccessKey><SessionToken>"
				 "TOKEN-WEB-%d</SessionToken><Expiration>%s</Expiration></Credentials>"
				 "</AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>",
				 f->gen, f->gen, f->gen, exp);
			answer(fd, 200, "text/xml", body);
		}
	} else {
		answer(fd, 404, "text/plain", "");
	}
	pthread_mutex_unlock(&f->mu);
}

struct conn {
	struct fake *f;
	int fd;
};

/* One connection on a thread of its own: a slow answer (one the client
 * gave up on) holds up no other. */
static void *conn_main(void *arg)
{
	struct conn *c = arg;
	serve(c->f, c->fd);
	close(c->fd);
	atomic_fetch_sub(&c->f->active, 1);
	free(c);
	return NULL;
}

static void *fake_main(void *arg)
{
	struct fake *f = arg;
	while (!atomic_load(&f->stop)) {
		int fd = accept(f->lfd, NULL, NULL);
		if (fd < 0)
			continue;
		struct conn *c = malloc(sizeof *c);
		pthread_t t;
		if (atomic_load(&f->stop) || !c) {
			free(c);
			close(fd);
			continue;
		}
		*c = (struct conn){ f, fd };
		atomic_fetch_add(&f->active, 1);
		if (pthread_create(&t, NULL, conn_main, c) != 0) {
			atomic_fetch_sub(&f->active, 1);
			close(fd);
			free(c);
			continue;
		}
		pthread_detach(t);
	}
	return NULL;
}

static void fake_start(struct fake *f)
{
	memset(f, 0, sizeof *f);
	pthread_mutex_init(&f->mu, NULL);
	f->life_s = 3600;
	f->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof a;
	if (f->lfd < 0 || bind(f->lfd, (struct sockaddr *)&a, sizeof a) < 0 ||
	    listen(f->lfd, 16) < 0 || getsockname(f->lfd, (struct sockaddr *)&a, &al) < 0) {
		printf("# fake server: %s\n", strerror(errno));
		exit(2);
	}
	f->port = ntohs(a.sin_port);
	pthread_create(&f->tid, NULL, fake_main, f);
}

static void fake_stop(struct fake *f)
{
	atomic_store(&f->stop, true);
	int c = socket(AF_INET, SOCK_STREAM, 0);   /* wake accept() */
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)f->port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	connect(c, (struct sockaddr *)&a, sizeof a);
	close(c);
	pthread_join(f->tid, NULL);
	while (atomic_load(&f->active))
		usleep(10000);
	close(f->lfd);
	pthread_mutex_destroy(&f->mu);
}

/* ---- helpers ---- */

static const char *const chain_env[] = {
	"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
	"AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_ROLE_SESSION_NAME",
	"AWS_ENDPOINT_URL_STS", "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE",
	"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
	"AWS_CONTAINER_AUTHORIZATION_TOKEN", "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
	"AWS_EC2_METADATA_SERVICE_ENDPOINT", "AWS_EC2_METADATA_DISABLED",
};

/* No source set but HOME, an empty directory (no shared files). */
static void env_clear(const char *home)
{
	for (size_t i = 0; i < sizeof chain_env / sizeof chain_env[0]; i++)
		unsetenv(chain_env[i]);
	setenv("HOME", home, 1);
	setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
		printf("# cannot write %s\n", path);
		exit(2);
	}
}

static char url_buf[128];
static const char *fake_url(const struct fake *f, const char *path)
{
	snprintf(url_buf, sizeof url_buf, "http://127.0.0.1:%d%s", f->port, path);
	return url_buf;
}

static int resolve(struct creds *out, char *err, size_t errlen)
{
	struct config c;
	memset(&c, 0, sizeof c);
	return creds_resolve(&c, NULL, out, err, errlen);
}

static bool has(const char *s, const char *part)
{
	return s && strstr(s, part) != NULL;
}

int main(void)
{
	char *dir = unit_tmpdir("creds");
	char home[600], path[700], path2[700], err[4096];
	snprintf(home, sizeof home, "%s/home", dir);
	mkdir(home, 0700);
	/* The log (this process's stderr) into a file, read at the end. */
	char logp[700];
	snprintf(logp, sizeof logp, "%s/log", dir);
	int lfd = open(logp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	int saved = dup(2);
	dup2(lfd, 2);
	log_init("test_creds", 1);
	struct fake f;
	fake_start(&f);
	struct creds c;
	int rc;

	/* IMDSv2: token first, then the role, then its credentials. */
	env_clear(home);
	unsetenv("AWS_EC2_METADATA_DISABLED");
	setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", fake_url(&f, ""), 1);
	rc = resolve(&c, err, sizeof err);
	CHECK(rc == 0 && has(c.source, "instance metadata") && has(c.source, "role-a") &&
	      strcmp(c.access_key, "AKIMDS1") == 0 && has(c.token, "TOKEN-IMDS-1") &&
	      c.expires > time(NULL) + 3000,
	      "IMDS: the role's credentials, with token and expiry (%d: %s; %s)", rc,
	      rc ? err : c.source, rc ? "" : c.access_key);
	CHECK(f.token_puts == 1 && f.imds_gets_with_token == 2 && f.imds_gets_without == 0,
	      "IMDS: v2 only: a session token by PUT, both GETs carry it (%d PUT, %d+%d GET)",
	      f.token_puts, f.imds_gets_with_token, f.imds_gets_without);
	if (rc == 0)
		creds_release(&c);

	/* Disabled: not asked at all. */
	setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
	int before = f.requests;
	rc = resolve(&c, err, sizeof err);
	CHECK(rc == -ENOENT && f.requests == before && has(err, "AWS_EC2_METADATA_DISABLED"),
	      "IMDS disabled: not asked, and the error says so (%d: %s)", rc, err);
	unsetenv("AWS_EC2_METADATA_DISABLED");

	/* Slow: its 1 s timeout, then a clear error. */
	f.delay_ms = 2500;
	rc = resolve(&c, err, sizeof err);
	CHECK(rc == -ENOENT && has(err, "instance metadata") && has(err, "Timeout"),
	      "IMDS slower than its timeout: no credentials, the error names it (%d: %.300s)",
	      rc, err);
	f.delay_ms = 0;

	/* Absent: nothing listens there. */
	int gone = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof a;
	bind(gone, (struct sockaddr *)&a, sizeof a);
	getsockname(gone, (struct sockaddr *)&a, &al);
	close(gone);
	snprintf(path, sizeof path, "http://127.0.0.1:%d", ntohs(a.sin_port));
	setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", path, 1);
	rc = resolve(&c, err, sizeof err);
	CHECK(rc == -ENOENT && has(err, "instance metadata") && has(err, path),
	      "IMDS absent: no credentials, the error names the endpoint (%d: %.300s)", rc, err);

	/* Container endpoint, its token in a file rotated between two calls. */
	env_clear(home);
	snprintf(path, sizeof path, "%s/container-token", dir);
	write_file(path, "auth-one\n");
	snprintf(f.container_auth, sizeof f.container_auth, "auth-one");
	setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", fake_url(&f, "/container/creds"), 1);
	setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", path, 1);
	rc = resolve(&c, err, sizeof err);
	CHECK(rc == 0 && has(c.source, "container endpoint") && has(c.access_key, "AKCONT") &&
	      c.expires > 0, "container endpoint: credentials (%d: %s)", rc, rc ? err : c.source);
	if (rc == 0)
		creds_release(&c);
	write_file(path, "auth-two\n");
	snprintf(f.container_auth, sizeof f.container_auth, "auth-two");
	rc = resolve(&c, err, sizeof err);
	CHECK(rc == 0 && strcmp(f.last_auth, "auth-two") == 0,
	      "container endpoint: the token rotated in its file is sent (%d, %s)", rc, f.last_auth);
	if (rc == 0)
		creds_release(&c);
	snprintf(f.container_auth, sizeof f.container_auth, "another");
	rc = resolve(&c, err, sizeof err);
	CHECK(rc == -EACCES && has(err, "403"),
	      "container endpoint refusing the token: an error, not skipped (%d: %.200s)", rc, err);

	/* Web identity, its token rotated in its file. */
	env_clear(home);
	snprintf(path, sizeof path, "%s/web-token", dir);
	write_file(path, "jwt-one\n");
	snprintf(f.web_token, sizeof f.web_token, "jwt-one");
	setenv("AWS_WEB_IDENTITY_TOKEN_FILE", path, 1);
	setenv("AWS_ROLE_ARN", "arn:aws:iam::123:role/web", 1);
	setenv("AWS_ENDPOINT_URL_STS", fake_url(&f, ""), 1);
	rc = resolve(&c, err, sizeof err);
	CHECK(rc == 0 && has(c.source, "web identity") && has(c.access_key, "AKWEB") &&
	      has(c.token, "TOKEN-WEB") && c.expires > 0,
	      "web identity: STS AssumeRoleWithWebIdentity (%d: %s)", rc, rc ? err : c.source);
	if (rc == 0)
		creds_release(&c);
	write_file(path, "jwt-two\n");
	snprintf(f.web_token, sizeof f.web_token, "jwt-two");
	rc = resolve(&c, err, sizeof err);
	CHECK(rc == 0 && strcmp(f.last_web_token, "jwt-two") == 0,
	      "web identity: the token rotated in its file is sent (%d, %s)", rc,
	      f.last_web_token);
	if (rc == 0)
		creds_release(&c);

	/* Order: environment keys before web identity; web identity before
	 * the instance metadata service (not asked). */
	setenv("AWS_ACCESS_KEY_ID", "AKENV", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "SECRET-ENV", 1);
	rc = resolve(&c, err, sizeof err);
	CHECK(rc == 0 && strcmp(c.source, "environment") == 0 && c.expires == 0,
	      "order: the environment's keys first (%s)", rc ? err : c.source);
	if (rc == 0)
		creds_release(&c);
	unsetenv("AWS_ACCESS_KEY_ID");
	unsetenv("AWS_SECRET_ACCESS_KEY");
	unsetenv("AWS_EC2_METADATA_DISABLED");
	setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", fake_url(&f, ""), 1);
	int puts_before = f.token_puts;
	rc = resolve(&c, err, sizeof err);
	CHECK(rc == 0 && has(c.source, "web identity") && f.token_puts == puts_before,
	      "order: web identity before the instance metadata service, not asked (%s)",
	      rc ? err : c.source);
	if (rc == 0)
		creds_release(&c);

	/* credential_process of a profile in the config file. */
	env_clear(home);
	snprintf(path, sizeof path, "%s/config", dir);
	snprintf(path2, sizeof path2, "[profile proc]\ncredential_process = printf "
		 "'{\"Version\": 1, \"AccessKeyId\": \"AKPROC\", \"SecretAccessKey\": "
		 "\"SECRET-PROC\", \"SessionToken\": \"TOKEN-PROC\", \"Expiration\": "
		 "\"2099-01-01T00:00:00Z\"}'\n[profile bad]\ncredential_process = exit 3\n"
		 "[profile mask]\ncredential_process = grep -q '^SigBlk:[[:space:]]*0*$' "
		 "/proc/self/status && printf '{\"AccessKeyId\": \"AKMASK\", "
		 "\"SecretAccessKey\": \"SECRET-MASK\"}' || exit 4\n");
	write_file(path, path2);
	setenv("AWS_CONFIG_FILE", path, 1);
	setenv("AWS_PROFILE", "proc", 1);
	rc = resolve(&c, err, sizeof err);
	CHECK(rc == 0 && has(c.source, "credential_process") && strcmp(c.access_key, "AKPROC") == 0 &&
	      has(c.token, "TOKEN-PROC") && c.expires == 4070908800,
	      "credential_process: its JSON (%d: %s)", rc, rc ? err : c.source);
	if (rc == 0)
		creds_release(&c);
	setenv("AWS_PROFILE", "bad", 1);
	rc = resolve(&c, err, sizeof err);
	CHECK(rc == -EINVAL && has(err, "exit status 3"),
	      "credential_process that fails: an error with its status (%d: %.200s)", rc, err);
	/* The gateway blocks SIGHUP, SIGINT and SIGTERM in every thread: the
	 * process must not inherit that. */
	sigset_t term, old;
	sigemptyset(&term);
	sigaddset(&term, SIGTERM);
	sigaddset(&term, SIGINT);
	pthread_sigmask(SIG_BLOCK, &term, &old);
	setenv("AWS_PROFILE", "mask", 1);
	rc = resolve(&c, err, sizeof err);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	CHECK(rc == 0 && strcmp(c.access_key, "AKMASK") == 0 && c.token == NULL && c.expires == 0,
	      "credential_process runs with no signal blocked, though the caller blocks "
	      "SIGTERM and SIGINT (%d: %.200s)", rc, rc ? err : c.source);
	if (rc == 0)
		creds_release(&c);

	/* Renewal before expiry: IMDS credentials that live 6 s are renewed
	 * by the renewer thread before they expire, and installed. */
	env_clear(home);
	unsetenv("AWS_EC2_METADATA_DISABLED");
	setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", fake_url(&f, ""), 1);
	snprintf(path, sizeof path, "%s/gateway.json", dir);
	write_file(path, "{ \"s3\": { \"endpoint\": \"127.0.0.1:1\" },"
		   " \"kafka\": { \"brokers\": \"127.0.0.1:1\" },"
		   " \"views_dir\": \"/nonexistent\", \"state_dir\": \"/nonexistent\" }");
	struct config cfg;
	rc = config_load(path, &cfg, err, sizeof err);
	if (rc < 0) {
		printf("# config: %s\n", err);
		return 2;
	}
	f.life_s = 6;
	rc = creds_resolve(&cfg, path, &c, err, sizeof err);
	config_release(&cfg);
	struct s3 *s3 = NULL;
	struct s3_conf sc = { .endpoint = "127.0.0.1:1", .access_key = c.access_key,
			      .secret_key = c.secret_key, .session_token = c.token };
	struct creds_renewer *r = NULL;
	sigset_t hup;
	sigemptyset(&hup);
	sigaddset(&hup, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &hup, NULL);
	if (rc < 0 || s3_http_new(&sc, NULL, &s3) < 0 || creds_renewer_new(path, &c, &r) < 0 ||
	    creds_renewer_start(r, s3) < 0) {
		printf("# renewer set-up: %s\n", err);
		return 2;
	}
	int64_t first = c.expires, now_exp = first;
	char src[512] = "";
	for (int i = 0; i < 200 && now_exp == first; i++) {   /* at most 20 s */
		usleep(100000);
		creds_renewer_describe(r, src, sizeof src, &now_exp);
	}
	int64_t renewed_at = (int64_t)time(NULL);
	CHECK(now_exp > first && renewed_at < first && has(src, "instance metadata"),
	      "renewal: the renewer fetched and installed new credentials before the old "
	      "ones expired (expiry %lld -> %lld, at %lld)", (long long)first,
	      (long long)now_exp, (long long)renewed_at);
	CHECK(!has(src, "SECRET") && !has(src, "TOKEN-"),
	      "renewal: what it describes names the source, no secret (%s)", src);
	creds_renewer_free(r);
	s3_free(s3);
	creds_release(&c);
	fake_stop(&f);

	/* No secret in the log. */
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	close(lfd);
	char *log = NULL;
	size_t ll = 0;
	FILE *lf = fopen(logp, "r");
	if (lf) {
		log = calloc(1, 1 << 20);
		ll = log ? fread(log, 1, (1 << 20) - 1, lf) : 0;
		fclose(lf);
	}
	CHECK(log && ll > 0 && !has(log, "SECRET-") && !has(log, "TOKEN-") &&
	      !has(log, "jwt-") && !has(log, "auth-one") && !has(log, "auth-two") &&
	      !has(log, "imds-session-token"),
	      "the log (%zu bytes) holds no secret key, session token, web-identity or "
	      "container token", ll);
	free(log);
	unit_rmtree(dir);
	free(dir);
	return unit_exit();
}
