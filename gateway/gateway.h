/*
 * gateway.h — the running gateway: the one context struct that owns every
 * module (config, views, index, S3 client, scanner, Kafka consumer, mount),
 * its start-up in dependency order and its shut-down in reverse.
 *
 * Start-up (gateway_mount): config -> filter files -> index -> S3 reachable
 * (every bucket of every view) -> staging recovery -> first scans of
 * never-scanned buckets start -> Kafka brokers answer for the topic ->
 * mount -> serve (filter files watched; partitions are assigned meanwhile). Any failure before the mount is
 * reported on stderr and returns non-zero: nothing is mounted.
 *
 * Threads: gateway_mount() runs on main; it blocks SIGINT/SIGTERM/SIGHUP
 * before starting any thread so that only the FUSE loop on main sees them.
 * The event pipeline: events/ polls and decodes (the consumer thread and
 * its decoder thread, events/consumer.h); ingest.c enriches, applies and
 * notifies each decoded batch on the consumer thread.
 */
#ifndef FACETFS_GATEWAY_H
#define FACETFS_GATEWAY_H

#include <stdbool.h>

struct mount_opts {
	const char *config_path;
	const char *mountpoint;
	const char *fuse_opts;   /* -o string or NULL */
	bool foreground;
	int verbosity;
};

/* Run a gateway until unmounted or signalled. Returns the process exit
 * code: 0 after a clean stop, 1 on a runtime failure, 2 on bad input. */
int gateway_mount(const struct mount_opts *o);

#endif
