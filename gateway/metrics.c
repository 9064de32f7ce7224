/* metrics.c — see metrics.h. */
#include "gateway/metrics.h"
#include "common/log.h"

#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <microhttpd.h>

struct metrics {
	struct MHD_Daemon *httpd;
	char *(*render)(void *ctx);
	void *ctx;
	unsigned port;
};

static enum MHD_Result metrics_reply(struct MHD_Connection *conn, unsigned status,
				     char *text, bool owned, const char *type)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(
		strlen(text), text, owned ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
	if (!r) {
		if (owned)
			free(text);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	enum MHD_Result ret = MHD_queue_response(conn, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result metrics_on_request(void *cls, struct MHD_Connection *conn,
					  const char *url, const char *method,
					  const char *version, const char *upload,
					  size_t *upload_size, void **con_cls)
{
	struct metrics *m = cls;
	(void)version;
	(void)upload;
	(void)upload_size;
	(void)con_cls;
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 &&
	    strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
		return metrics_reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED,
				     "GET only\n", false, "text/plain");
	if (strcmp(url, "/metrics") != 0)
		return metrics_reply(conn, MHD_HTTP_NOT_FOUND,
				     "see /metrics\n", false, "text/plain");
	char *text = m->render(m->ctx);
	if (!text)
		return metrics_reply(conn, MHD_HTTP_INTERNAL_SERVER_ERROR,
				     "out of memory\n", false, "text/plain");
	return metrics_reply(conn, MHD_HTTP_OK, text, true,
			     "text/plain; version=0.0.4; charset=utf-8");
}

static void metrics_on_httpd_log(void *cls, const char *fmt, va_list ap)
{
	char buf[512];
	(void)cls;
	vsnprintf(buf, sizeof buf, fmt, ap);
	size_t n = strlen(buf);
	while (n && buf[n - 1] == '\n')
		buf[--n] = '\0';
	log_warn("metrics: %s", buf);
}

int metrics_start(const char *listen, char *(*render)(void *ctx), void *ctx,
		  struct metrics **out)
{
	*out = NULL;
	char host[256];
	const char *colon = listen ? strrchr(listen, ':') : NULL;
	size_t hl = colon ? (size_t)(colon - listen) : 0;
	if (!colon || !hl || hl >= sizeof host || !colon[1]) {
		log_error("metrics.listen %s: expected HOST:PORT", listen ? listen : "");
		return -EINVAL;
	}
	if (listen[0] == '[' && listen[hl - 1] == ']') {
		memcpy(host, listen + 1, hl - 2);
		host[hl - 2] = '\0';
	} else {
		memcpy(host, listen, hl);
		host[hl] = '\0';
	}
	struct addrinfo hints = { .ai_flags = AI_NUMERICSERV | AI_PASSIVE,
				  .ai_socktype = SOCK_STREAM };
	struct addrinfo *ai = NULL;
	int e = getaddrinfo(host, colon + 1, &hints, &ai);
	if (e) {
		log_error("metrics.listen %s: %s", listen, gai_strerror(e));
		return -EINVAL;
	}
	struct metrics *m = calloc(1, sizeof *m);
	if (!m) {
		freeaddrinfo(ai);
		return -ENOMEM;
	}
	m->render = render;
	m->ctx = ctx;
	m->httpd = MHD_start_daemon(
		MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG |
			(ai->ai_family == AF_INET6 ? MHD_USE_IPv6 : 0),
		0, NULL, NULL, metrics_on_request, m,
		MHD_OPTION_EXTERNAL_LOGGER, metrics_on_httpd_log, NULL,
		MHD_OPTION_SOCK_ADDR, ai->ai_addr,
		MHD_OPTION_CONNECTION_LIMIT, (unsigned)32,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)30,
		MHD_OPTION_END);
	freeaddrinfo(ai);
	if (!m->httpd) {
		int err = errno ? -errno : -EADDRINUSE;
		log_error("metrics: cannot listen on %s: %s", listen, strerror(-err));
		free(m);
		return err;
	}
	const union MHD_DaemonInfo *di =
		MHD_get_daemon_info(m->httpd, MHD_DAEMON_INFO_BIND_PORT);
	m->port = di ? di->port : 0;
	log_info("metrics: serving http://%s:%u/metrics", host, m->port);
	*out = m;
	return 0;
}

unsigned metrics_port(const struct metrics *m)
{
	return m->port;
}

void metrics_stop(struct metrics *m)
{
	if (!m)
		return;
	MHD_stop_daemon(m->httpd);
	free(m);
}
