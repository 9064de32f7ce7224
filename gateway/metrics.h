/*
 * metrics.h — the gateway's Prometheus endpoint: GET /metrics on the
 * address of the config's "metrics": { "listen": "HOST:PORT" } answers the
 * text exposition format (version 0.0.4) that render() produces at that
 * moment; any other path is 404, any other method 405. Off unless
 * configured; the address is whatever the config says (loopback in the
 * examples: the endpoint has no authentication).
 *
 * Threads: libmicrohttpd's own polling thread calls render(ctx); render
 * must be safe to call from it at any time until metrics_stop() returns.
 * Ownership: render returns malloc'ed text that the endpoint frees.
 *
 * Tests: no unit test; t_metrics.sh.
 */
#ifndef FACETFS_METRICS_H
#define FACETFS_METRICS_H

struct metrics;

/* Listen on listen ("HOST:PORT", port 0: any free port). 0, -EINVAL (bad
 * address) or -EADDRINUSE/-EACCES (cannot listen), logged. */
int  metrics_start(const char *listen, char *(*render)(void *ctx), void *ctx,
		   struct metrics **out);
/* The port it listens on. */
unsigned metrics_port(const struct metrics *m);
/* Stop serving (waits for a request being answered) and free. NULL: no-op. */
void metrics_stop(struct metrics *m);

#endif
