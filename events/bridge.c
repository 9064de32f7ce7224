/*
 * bridge.c — facetfs-bridge: S3 event notifications over HTTP -> Kafka.
 *
 * Ceph RGW push endpoints, MinIO webhooks and AWS SNS HTTP subscriptions POST
 * event documents here (any path). Each document is split with record_split()
 * into one message per record, produced keyed "bucket/key" (so one object's
 * events stay in one partition, in order), and the sender gets 200 only when
 * Kafka acknowledged every record (acks=all, idempotent producer); otherwise
 * 500, so a persistent RGW topic delivers again. Not an event document: 400;
 * body over --max-body: 413; AWS test event and SNS (un)subscription
 * confirmations: logged, 200.
 *
 * Threads: libmicrohttpd runs one thread per connection (a request blocks
 * until its deliveries are reported); one poll thread serves librdkafka's
 * delivery reports. Requests wait on their own counters under bridge.lock.
 * SIGTERM/SIGINT: stop accepting, finish requests, flush the producer, exit 0.
 * All state lives in struct bridge (bridge_int.h), owned by main(); the
 * producer is bridge_kafka.c.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <librdkafka/rdkafka.h>
#include <microhttpd.h>

#include "events/bridge_int.h"
#include "events/bridge_body.h"
#include "events/kafka.h"
#include "events/record.h"
#include "common/lock.h"
#include "common/log.h"
#include "common/version.h"

#define DEFAULT_MAX_BODY   (1024 * 1024)
#define PEM_MAX            (1024 * 1024)   /* --tls-cert, --tls-key */
#define CURL_WHY_MAX       512
#define DEFAULT_TIMEOUT_MS 10000
#define DEFAULT_LISTEN     "127.0.0.1:8099"
#define DEFAULT_MAX_RATE   1000          /* requests per second */
#define DEFAULT_MAX_PENDING 10000        /* records waiting for Kafka */
#define MAX_CONNECTIONS    256

/* One request's body (per connection, freed when the request completes). */
struct request {
	char *body;
	size_t len, cap;
	bool too_big;
};

static const char usage[] =
	"usage: facetfs-bridge --brokers HOST:PORT[,...] --topic TOPIC [--listen HOST:PORT]\n"
	"                      [--tls-cert FILE --tls-key FILE] [--sns-topic ARN]...\n"
	"                      [--sns-url-prefix PREFIX]\n"
	"                      [--token-file FILE] [--max-body BYTES] [--max-rate N]\n"
	"                      [--max-pending N] [--timeout-ms MS] [-X PROP=VALUE]... [-v]...\n"
	"       facetfs-bridge --help | --version\n"
	"\n"
	"Receives S3 event notifications (Ceph RGW http push endpoints, MinIO webhooks,\n"
	"AWS SNS HTTP subscriptions) as POSTs on any path, and produces each record of a\n"
	"document as one Kafka message keyed \"bucket/key\". Answers:\n"
	"  200  every record was acknowledged by Kafka (acks=all), or nothing to produce\n"
	"       (AWS test event, empty Records, SNS unsubscription: logged), or an SNS\n"
	"       subscription to a --sns-topic was confirmed\n"
	"  400  the body is not an S3 event document\n"
	"  403  --token-file is set and the request does not carry the token; an SNS\n"
	"       subscription to a topic not named by --sns-topic\n"
	"  405  not a POST\n"
	"  413  the body is larger than --max-body\n"
	"  429  more than --max-rate requests in a second\n"
	"  500  confirming an SNS subscription failed (SNS sends it again), or\n"
	"       Kafka did not acknowledge every record within --timeout-ms (the sender\n"
	"       should retry: RGW persistent topics do)\n"
	"  503  Kafka is slow: --max-pending records already wait for it (retry later)\n"
	"\n"
	"  --listen HOST:PORT   address to listen on (default 127.0.0.1:8099; port 0:\n"
	"                       any free port; the address used is printed on stdout)\n"
	"  --tls-cert FILE, --tls-key FILE\n"
	"                       serve HTTPS with this PEM certificate (chain) and key\n"
	"                       (AWS SNS subscriptions want an https endpoint)\n"
	"  --sns-topic ARN      confirm SNS subscriptions to this topic by GETting\n"
	"                       the SubscribeURL SNS sends (one of SNS's hosts);\n"
	"                       repeatable (16); others are refused (403) and logged\n"
	"  --sns-url-prefix P   confirmation URLs must start with P instead (an\n"
	"                       SNS-compatible service)\n"
	"  --token-file FILE    accept only POSTs whose path starts with /TOKEN/ (RGW\n"
	"                       push endpoints can carry it) or that carry\n"
	"                       Authorization: Bearer TOKEN; FILE holds the token\n"
	"                       (letters, digits, - _ . ~; 16 to 255 of them)\n"
	"  --max-rate N         requests per second before 429 (default 1000; 0: no limit)\n"
	"  --max-pending N      records waiting for Kafka before 503 (default 10000)\n"
	"  --brokers LIST       Kafka bootstrap servers\n"
	"  --topic TOPIC        Kafka topic to produce to\n"
	"  --max-body BYTES     largest accepted body (default 1048576)\n"
	"  --timeout-ms MS      how long Kafka may take to acknowledge (default 10000)\n"
	"  -X PROP=VALUE        extra librdkafka producer property (e.g. security.protocol)\n"
	"  -v                   log each request (-vv: librdkafka's informational lines too)\n"
	"  -h, --help           this text\n"
	"  --version            the version\n"
	"\n"
	"SIGTERM or SIGINT: finish pending requests, flush the producer, exit 0.\n";

/* ---- admission: token, rate ---- */

/* Equal without an early exit (the time does not tell how much matched). */
static bool bridge_token_eq(const char *a, size_t al, const char *b, size_t bl)
{
	unsigned diff = al != bl;

	for (size_t i = 0; i < al && i < bl; i++)
		diff |= (unsigned char)a[i] ^ (unsigned char)b[i];
	return diff == 0;
}

/* The path starts with /TOKEN/ (or is /TOKEN), or the request carries
 * Authorization: Bearer TOKEN; always true without --token-file. */
static bool bridge_authorized(struct bridge *b, struct MHD_Connection *conn, const char *url)
{
	if (!b->token_len)
		return true;
	if (url && url[0] == '/') {
		const char *seg = url + 1, *end = strchr(seg, '/');
		size_t len = end ? (size_t)(end - seg) : strlen(seg);

		if (bridge_token_eq(seg, len, b->token, b->token_len))
			return true;
	}
	const char *auth = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
	                                               MHD_HTTP_HEADER_AUTHORIZATION);
	if (auth && strncasecmp(auth, "Bearer ", 7) == 0) {
		const char *t = auth + 7;

		while (*t == ' ')
			t++;
		return bridge_token_eq(t, strlen(t), b->token, b->token_len);
	}
	return false;
}

/* The url as logged, into out (outlen bytes, cut short to fit): with
 * --token-file its first segment (where a token, or a near miss of one,
 * would be) becomes "***". */
static void bridge_url_for_log(struct bridge *b, const char *url,
                               char *out, size_t outlen)
{
	if (!b->token_len || !url || url[0] != '/') {
		snprintf(out, outlen, "%s", url ? url : "");
		return;
	}
	const char *end = strchr(url + 1, '/');

	snprintf(out, outlen, "/***%.400s", end ? end : "");
}

/* A token bucket of max_rate requests per second (bursts up to one
 * second's worth). */
static bool bridge_rate_ok(struct bridge *b)
{
	struct timespec now;
	bool ok;

	if (!b->max_rate)
		return true;
	clock_gettime(CLOCK_MONOTONIC, &now);
	mod_lock(&b->lock);
	double dt = (double)(now.tv_sec - b->rate_at.tv_sec) +
	            (double)(now.tv_nsec - b->rate_at.tv_nsec) / 1e9;
	b->rate_at = now;
	b->rate_tokens += dt * b->max_rate;
	if (b->rate_tokens > b->max_rate)
		b->rate_tokens = b->max_rate;
	ok = b->rate_tokens >= 1.0;
	if (ok)
		b->rate_tokens -= 1.0;
	mod_unlock(&b->lock);
	return ok;
}

/* Read the token (first line, surrounding blanks removed); 0 or -EINVAL
 * with a message on stderr. */
static int bridge_read_token(struct bridge *b, const char *path)
{
	FILE *f = fopen(path, "r");
	char line[TOKEN_MAX + 2] = "";

	if (!f) {
		fprintf(stderr, "facetfs-bridge: --token-file %s: %s\n", path, strerror(errno));
		return -EINVAL;
	}
	if (!fgets(line, sizeof line, f))
		line[0] = '\0';
	fclose(f);
	size_t n = strlen(line);
	while (n && (line[n - 1] == '\n' || line[n - 1] == '\r' || line[n - 1] == ' ' ||
	             line[n - 1] == '\t'))
		line[--n] = '\0';
	if (n < 16 || n >= TOKEN_MAX ||
	    strspn(line, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	                 "0123456789-_.~") != n) {
		fprintf(stderr, "facetfs-bridge: --token-file %s: the token must be 16 to %d "
		        "letters, digits, '-', '_', '.' or '~'\n", path, TOKEN_MAX - 1);
		return -EINVAL;
	}
	memcpy(b->token, line, n + 1);
	b->token_len = n;
	memset(line, 0, sizeof line);
	return 0;
}

/* A PEM file whole (at most 1 MiB), NUL-terminated, into *out (free it);
 * -EINVAL with the reason on stderr. */
static int bridge_read_pem(const char *opt, const char *path, char **out)
{
	FILE *f = fopen(path, "r");
	char *buf = malloc(PEM_MAX + 1);
	size_t n = 0;

	*out = NULL;
	if (f && buf)
		n = fread(buf, 1, PEM_MAX + 1, f);
	if (!f || !buf || ferror(f) || n == 0 || n > PEM_MAX || !strstr(buf, "-----BEGIN ")) {
		int e = errno;
		fprintf(stderr, "facetfs-bridge: --%s %s: %s\n", opt, path,
		        !f ? strerror(e) : !buf ? "out of memory" :
		        n > PEM_MAX ? "larger than 1 MiB" : "not a PEM file");
		if (f)
			fclose(f);
		free(buf);
		return -EINVAL;
	}
	fclose(f);
	buf[n] = '\0';
	*out = buf;
	return 0;
}

/* ---- HTTP ---- */

static enum MHD_Result bridge_reply(struct MHD_Connection *conn, unsigned status, const char *text)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), (void *)text,
	                                                         MHD_RESPMEM_MUST_COPY);
	enum MHD_Result ret;

	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain");
	ret = MHD_queue_response(conn, status, r);
	MHD_destroy_response(r);
	return ret;
}

static void bridge_peer(struct MHD_Connection *conn, char *out, size_t outlen)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	char host[NI_MAXHOST] = "?", port[NI_MAXSERV] = "?";

	if (ci && ci->client_addr) {
		socklen_t sl = ci->client_addr->sa_family == AF_INET6 ?
		               sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);

		getnameinfo(ci->client_addr, sl, host, sizeof host, port, sizeof port,
		            NI_NUMERICHOST | NI_NUMERICSERV);
	}
	snprintf(out, outlen, "%s:%s", host, port);
}

/* An SNS (un)subscription confirmation: a subscription to a topic named
 * by --sns-topic, whose URL is AWS's (or --sns-url-prefix's), is
 * confirmed with one GET (200; 500 when that failed: SNS sends it
 * again); any other is refused (403) and logged with its URL, so that an
 * operator may confirm it by hand. An unsubscription is only logged. */
static enum MHD_Result bridge_confirm(struct bridge *b, struct MHD_Connection *conn,
                                      const char *who, const struct request *req)
{
	struct bridge_sns c;
	char why[CURL_WHY_MAX] = "";
	bool named = false;

	if (bridge_sns_parse(req->body, req->len, &c) < 0) {
		log_warn("%s: 400, an SNS confirmation without TopicArn or SubscribeURL", who);
		return bridge_reply(conn, MHD_HTTP_BAD_REQUEST, "not an SNS confirmation\n");
	}
	if (!c.subscribe) {
		log_info("%s: 200, SNS unsubscription of %s noted", who, c.topic);
		return bridge_reply(conn, MHD_HTTP_OK, "unsubscription noted\n");
	}
	for (size_t i = 0; i < b->n_sns_topics && !named; i++)
		named = strcmp(b->sns_topics[i], c.topic) == 0;
	if (!named || !bridge_sns_url_ok(c.url, b->sns_url_prefix)) {
		log_warn("%s: 403, SNS subscription to %s refused (%s); to confirm it by "
		         "hand, GET %s", who, c.topic,
		         named ? "its SubscribeURL is not one of SNS's" :
		                 "not a topic of --sns-topic", c.url);
		return bridge_reply(conn, MHD_HTTP_FORBIDDEN, "SNS subscription refused\n");
	}
	if (bridge_sns_confirm(&c, why, sizeof why) < 0) {
		log_error("%s: 500, confirming the SNS subscription to %s failed: %s", who,
		          c.topic, why);
		return bridge_reply(conn, MHD_HTTP_INTERNAL_SERVER_ERROR,
		                    "confirmation failed; send it again\n");
	}
	/* Logged whatever -v says: a new source of events is worth a line. */
	log_warn("%s: 200, SNS subscription to %s confirmed", who, c.topic);
	return bridge_reply(conn, MHD_HTTP_OK, "subscription confirmed\n");
}

static enum MHD_Result bridge_handle(struct bridge *b, struct MHD_Connection *conn,
                                     const char *url, struct request *req)
{
	char who[600], err[1024] = "", peer[128], shown[440];
	struct ev_part *parts = NULL;
	size_t n = 0;
	bool sns;
	enum MHD_Result ret;
	int rc;

	bridge_peer(conn, peer, sizeof peer);
	bridge_url_for_log(b, url, shown, sizeof shown);
	snprintf(who, sizeof who, "POST %.400s from %s", shown, peer);
	rc = bridge_body_check(req->body, req->len, &parts, &n, &sns, err, sizeof err);
	if (rc == BRIDGE_BODY_TEST) {
		log_info("%s: 200, ignored%s: %s", who, sns ? " (in an SNS notification)" : "", err);
		return bridge_reply(conn, MHD_HTTP_OK, "test event ignored\n");
	}
	if (rc == BRIDGE_BODY_CONFIRM)
		return bridge_confirm(b, conn, who, req);
	if (rc == BRIDGE_BODY_BAD) {
		log_warn("%s: 400, not an S3 event document (%zu bytes): %s", who, req->len, err);
		return bridge_reply(conn, MHD_HTTP_BAD_REQUEST, "not an S3 event document\n");
	}
	if (rc < 0) {
		log_error("%s: 500, splitting the document: %s", who, strerror(-rc));
		return bridge_reply(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
	}
	if (n == 0) {
		log_info("%s: 200, no records", who);
		ev_parts_free(parts, n);
		return bridge_reply(conn, MHD_HTTP_OK, "no records\n");
	}
	rc = bridge_produce(b, parts, n, err, sizeof err);
	if (rc == -EAGAIN) {
		log_warn("%s: 503, %s", who, err);
		ret = bridge_reply(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "kafka is slow, retry later\n");
	} else if (rc < 0) {
		log_error("%s: 500, %s", who, err);
		ret = bridge_reply(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "kafka did not acknowledge\n");
	} else {
		log_info("%s: 200, %zu record%s produced to %s (first key %s)", who, n,
		         n == 1 ? "" : "s", b->topic, parts[0].key ? parts[0].key : "(none)");
		ret = bridge_reply(conn, MHD_HTTP_OK, "ok\n");
	}
	ev_parts_free(parts, n);
	return ret;
}

static enum MHD_Result bridge_on_request(void *cls, struct MHD_Connection *conn,
                                         const char *url, const char *method,
                                         const char *version, const char *upload,
                                         size_t *upload_size, void **con_cls)
{
	struct bridge *b = cls;
	struct request *req = *con_cls;

	(void)version;
	if (!req) {
		const char *cl;
		char peer[128], shown[440];

		if (strcmp(method, MHD_HTTP_METHOD_POST) != 0) {
			bridge_peer(conn, peer, sizeof peer);
			bridge_url_for_log(b, url, shown, sizeof shown);
			log_warn("%s %.400s from %s: 405, only POST is accepted", method,
			         shown, peer);
			return bridge_reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "POST only\n");
		}
		if (!bridge_authorized(b, conn, url)) {
			bridge_peer(conn, peer, sizeof peer);
			bridge_url_for_log(b, url, shown, sizeof shown);
			log_warn("POST %.400s from %s: 403, no valid token", shown, peer);
			return bridge_reply(conn, MHD_HTTP_FORBIDDEN, "forbidden\n");
		}
		if (!bridge_rate_ok(b)) {
			bridge_peer(conn, peer, sizeof peer);
			log_debug("POST from %s: 429, over %u requests/s", peer, b->max_rate);
			return bridge_reply(conn, MHD_HTTP_TOO_MANY_REQUESTS, "too many requests\n");
		}
		req = calloc(1, sizeof *req);
		if (!req)
			return MHD_NO;
		*con_cls = req;
		cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
		                                 MHD_HTTP_HEADER_CONTENT_LENGTH);
		if (cl && strtoull(cl, NULL, 10) > b->max_body)
			req->too_big = true;
		return MHD_YES;
	}
	if (*upload_size) {
		if (!req->too_big && req->len + *upload_size > b->max_body)
			req->too_big = true;
		if (!req->too_big) {
			if (req->len + *upload_size > req->cap) {
				size_t cap = req->cap ? req->cap : 4096;
				char *nb;

				while (cap < req->len + *upload_size)
					cap *= 2;
				nb = realloc(req->body, cap);
				if (!nb)
					return MHD_NO;
				req->body = nb;
				req->cap = cap;
			}
			memcpy(req->body + req->len, upload, *upload_size);
			req->len += *upload_size;
		}
		*upload_size = 0;     /* consumed (or discarded when too big) */
		return MHD_YES;
	}
	if (req->too_big) {
		char peer[128];

		bridge_peer(conn, peer, sizeof peer);
		log_warn("POST %.400s from %s: 413, body over %zu bytes", url, peer, b->max_body);
		return bridge_reply(conn, MHD_HTTP_CONTENT_TOO_LARGE, "body too large\n");
	}
	return bridge_handle(b, conn, url, req);
}

static void bridge_on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                                enum MHD_RequestTerminationCode why)
{
	struct request *req = *con_cls;

	(void)cls;
	(void)conn;
	(void)why;
	if (req) {
		free(req->body);
		free(req);
		*con_cls = NULL;
	}
}

static void bridge_on_httpd_log(void *cls, const char *fmt, va_list ap)
{
	char buf[512];
	size_t len;

	(void)cls;
	vsnprintf(buf, sizeof buf, fmt, ap);
	len = strlen(buf);
	while (len && buf[len - 1] == '\n')
		buf[--len] = '\0';
	log_warn("http: %s", buf);
}

/* "HOST:PORT" or "[V6]:PORT" -> address; 0 or -EINVAL (logged). */
static int bridge_parse_listen(const char *spec, struct sockaddr_storage *ss, socklen_t *sl)
{
	char host[256];
	const char *colon = strrchr(spec, ':');
	struct addrinfo hints = { .ai_flags = AI_NUMERICSERV | AI_PASSIVE, .ai_socktype = SOCK_STREAM };
	struct addrinfo *ai = NULL;
	size_t hl;
	int e;

	if (!colon || colon == spec || !colon[1] || (size_t)(colon - spec) >= sizeof host) {
		log_error("--listen %s: expected HOST:PORT", spec);
		return -EINVAL;
	}
	hl = (size_t)(colon - spec);
	if (spec[0] == '[' && spec[hl - 1] == ']') {
		memcpy(host, spec + 1, hl - 2);
		host[hl - 2] = '\0';
	} else {
		memcpy(host, spec, hl);
		host[hl] = '\0';
	}
	e = getaddrinfo(host, colon + 1, &hints, &ai);
	if (e) {
		log_error("--listen %s: %s", spec, gai_strerror(e));
		return -EINVAL;
	}
	memcpy(ss, ai->ai_addr, ai->ai_addrlen);
	*sl = ai->ai_addrlen;
	freeaddrinfo(ai);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "listen", required_argument, NULL, 'l' },
		{ "brokers", required_argument, NULL, 'b' },
		{ "topic", required_argument, NULL, 't' },
		{ "max-body", required_argument, NULL, 'm' },
		{ "timeout-ms", required_argument, NULL, 'T' },
		{ "token-file", required_argument, NULL, 'k' },
		{ "max-rate", required_argument, NULL, 'r' },
		{ "max-pending", required_argument, NULL, 'p' },
		{ "tls-cert", required_argument, NULL, 'C' },
		{ "tls-key", required_argument, NULL, 'K' },
		{ "sns-topic", required_argument, NULL, 'S' },
		{ "sns-url-prefix", required_argument, NULL, 'U' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct bridge b = { .max_body = DEFAULT_MAX_BODY, .timeout_ms = DEFAULT_TIMEOUT_MS,
	                    .listen = DEFAULT_LISTEN, .max_rate = DEFAULT_MAX_RATE,
	                    .max_pending = DEFAULT_MAX_PENDING };
	char *props[64];
	size_t n_props = 0;
	int verbosity = 0, opt, sig, rc = 1;
	struct sockaddr_storage ss;
	socklen_t sl;
	sigset_t sigs;
	char *end;
	const union MHD_DaemonInfo *di;
	const char *cert_path = NULL, *key_path = NULL;
	char *cert = NULL, *key = NULL;

	while ((opt = getopt_long(argc, argv, "hvX:", longopts, NULL)) != -1) {
		switch (opt) {
		case 'l': b.listen = optarg; break;
		case 'b': b.brokers = optarg; break;
		case 't': b.topic = optarg; break;
		case 'm':
			errno = 0;
			b.max_body = strtoull(optarg, &end, 10);
			if (errno || *end || b.max_body == 0) {
				fprintf(stderr, "facetfs-bridge: --max-body %s: expected a byte count\n", optarg);
				return 2;
			}
			break;
		case 'T':
			b.timeout_ms = atoi(optarg);
			if (b.timeout_ms <= 0) {
				fprintf(stderr, "facetfs-bridge: --timeout-ms %s: expected milliseconds\n", optarg);
				return 2;
			}
			break;
		case 'k':
			if (bridge_read_token(&b, optarg) < 0)
				return 2;
			break;
		case 'C': cert_path = optarg; break;
		case 'S':
			if (b.n_sns_topics == BRIDGE_SNS_TOPICS ||
			    strncmp(optarg, "arn:", 4) != 0) {
				fprintf(stderr, "facetfs-bridge: --sns-topic %s: %s\n", optarg,
				        b.n_sns_topics == BRIDGE_SNS_TOPICS ?
				        "more than 16 topics" : "not a topic ARN (arn:...)");
				return 2;
			}
			b.sns_topics[b.n_sns_topics++] = optarg;
			break;
		case 'U': b.sns_url_prefix = optarg; break;
		case 'K': key_path = optarg; break;
		case 'r':
		case 'p': {
			unsigned long long v;

			errno = 0;
			v = strtoull(optarg, &end, 10);
			if (errno || *end || optarg[0] == '-' || (opt == 'p' && v == 0) ||
			    v > 1000000000ull) {
				fprintf(stderr, "facetfs-bridge: --%s %s: expected a count%s\n",
				        opt == 'r' ? "max-rate" : "max-pending", optarg,
				        opt == 'p' ? " above 0" : "");
				return 2;
			}
			if (opt == 'r')
				b.max_rate = (unsigned)v;
			else
				b.max_pending = (size_t)v;
			break;
		}
		case 'X':
			if (n_props == sizeof props / sizeof props[0]) {
				fprintf(stderr, "facetfs-bridge: too many -X options\n");
				return 2;
			}
			props[n_props++] = optarg;
			break;
		case 'v': verbosity++; break;
		case 'h': fputs(usage, stdout); return 0;
		case 'V': printf("facetfs-bridge %s\n", FACETFS_VERSION); return 0;
		default: fputs(usage, stderr); return 2;
		}
	}
	if (optind < argc || !b.brokers || !b.topic) {
		fprintf(stderr, "facetfs-bridge: --brokers and --topic are required\n%s", usage);
		return 2;
	}
	if (!cert_path != !key_path) {
		fprintf(stderr, "facetfs-bridge: --tls-cert and --tls-key go together\n");
		return 2;
	}
	if (cert_path && MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
		fprintf(stderr, "facetfs-bridge: this libmicrohttpd has no TLS\n");
		return 2;
	}
	if (b.n_sns_topics && bridge_sns_init() < 0) {
		fprintf(stderr, "facetfs-bridge: libcurl's set-up failed\n");
		return 2;
	}
	if (cert_path && (bridge_read_pem("tls-cert", cert_path, &cert) < 0 ||
	                  bridge_read_pem("tls-key", key_path, &key) < 0)) {
		free(cert);
		return 2;
	}
	b.rate_tokens = b.max_rate;
	clock_gettime(CLOCK_MONOTONIC, &b.rate_at);
	log_init("facetfs-bridge", verbosity);
	if (bridge_parse_listen(b.listen, &ss, &sl) < 0)
		return 2;

	/* Signals go to main's sigwait(), never to the worker threads. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	pthread_mutex_init(&b.lock, NULL);
	pthread_cond_init(&b.cond, NULL);
	atomic_init(&b.stop_poll, false);
	atomic_init(&b.fatal, false);

	if (bridge_producer_new(&b, props, n_props) < 0)
		goto out;
	if (pthread_create(&b.poller, NULL, bridge_poll_main, &b)) {
		log_error("starting the delivery-report thread failed");
		goto out_rk;
	}
	struct MHD_OptionItem tls[] = {
		{ cert ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0, cert },
		{ MHD_OPTION_HTTPS_MEM_KEY, 0, key },
		{ MHD_OPTION_END, 0, NULL },
	};
	b.httpd = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
	                           MHD_USE_ERROR_LOG | (ss.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0) |
	                           (cert ? MHD_USE_TLS : 0),
	                           0, NULL, NULL, bridge_on_request, &b,
	                           MHD_OPTION_ARRAY, tls,
	                           MHD_OPTION_EXTERNAL_LOGGER, bridge_on_httpd_log, NULL,
	                           MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
	                           MHD_OPTION_NOTIFY_COMPLETED, bridge_on_completed, NULL,
	                           MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120,
	                           MHD_OPTION_CONNECTION_LIMIT, (unsigned)MAX_CONNECTIONS,
	                           MHD_OPTION_END);
	if (!b.httpd) {
		log_error("cannot listen on %s: %s", b.listen, strerror(errno));
		goto out_poll;
	}
	di = MHD_get_daemon_info(b.httpd, MHD_DAEMON_INFO_BIND_PORT);
	{
		char host[NI_MAXHOST] = "?";

		getnameinfo((struct sockaddr *)&ss, sl, host, sizeof host, NULL, 0, NI_NUMERICHOST);
		printf("facetfs-bridge listening on %s%s%s%s:%u, producing to %s at %s\n",
		       cert ? "https://" : "",
		       ss.ss_family == AF_INET6 ? "[" : "", host, ss.ss_family == AF_INET6 ? "]" : "",
		       di ? (unsigned)di->port : 0u, b.topic, b.brokers);
		fflush(stdout);
	}

	sig = 0;
	sigwait(&sigs, &sig);
	log_info("signal %d: stopping", sig);
	rc = atomic_load(&b.fatal) ? 1 : 0;
	MHD_stop_daemon(b.httpd);     /* joins the connection threads */
out_poll:
	KAFKA_GUARD("flush");
	if (rd_kafka_flush(b.rk, b.timeout_ms) != RD_KAFKA_RESP_ERR_NO_ERROR) {
		log_error("kafka %s: %d messages not delivered at exit", b.brokers,
		          rd_kafka_outq_len(b.rk));
		rc = 1;
	}
	atomic_store(&b.stop_poll, true);
	pthread_join(b.poller, NULL);
out_rk:
	KAFKA_GUARD("destroy");
	rd_kafka_destroy(b.rk);
out:
	pthread_cond_destroy(&b.cond);
	pthread_mutex_destroy(&b.lock);
	if (key)
		memset(key, 0, strlen(key));
	free(key);
	free(cert);
	return rc;
}
