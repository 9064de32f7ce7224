/*
 * gateway.h — the running gateway: the one context struct that owns every
 * module (config, views, index, S3 client, scanner, Kafka consumer, mount),
 * its start-up in dependency order and its shut-down in reverse.
 *
 * Start-up (gateway_mount): config -> filter files -> index -> S3 reachable
 * (every bucket of every view) -> what the store honours of a PUT's
 * conditions (sync/stage/probe.h: never fatal) -> staging recovery -> first scans of
 * never-scanned buckets start -> Kafka brokers answer for the topic ->
 * mount -> serve (filter files watched; partitions are assigned meanwhile). Any failure before the mount is
 * reported on stderr and returns non-zero: nothing is mounted.
 *
 * Threads: gateway_mount() runs on main; it blocks SIGINT/SIGTERM/SIGHUP
 * before starting any thread so that only the FUSE loop on main sees
 * SIGINT and SIGTERM, and only the credentials renewer's thread SIGHUP
 * (creds.h: it re-reads the credentials).
 * The event pipeline: events/ polls and decodes (the consumer thread and
 * its decoder thread, events/consumer.h); ingest.c enriches, applies and
 * notifies each decoded batch on the consumer thread.
 *
 * View sets (views/viewset.h): the gateway owns the slot holding the
 * current set. FUSE requests, event batches and the .facetfs/ providers pin
 * it for as long as they run, with no lock held; a reload builds the next
 * set, index_set_views() installs it and makes it current, and the old set
 * dies when its last holder unpins. A reload never waits for a request, an
 * upload or a HEAD; what waits for a reload is only the index's writers
 * (event batches, scan pages, a mount's own changes) while it rebuilds the
 * membership of new or changed views.
 *
 * Locks: this module's own are err_lock (reload errors and figures, a
 * leaf) and cache_lock_mu (an I/O lock: retaking the cache.dir lock after
 * the directory was removed, from the stage's renewed callback), both in
 * gateway_int.h. The order of every lock of the process, and which locks
 * may be held across I/O, are kept in one place: docs/design.md
 * "Lock order".
 *
 * Tests: no unit test (the pieces have theirs); t_mount.sh, t_writeback.sh,
 * t_wbrestart.sh.
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
