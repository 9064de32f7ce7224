/*
 * gateway.h — the running gateway: the one context struct that owns every
 * module (config, views, index, S3 client, scanner, Kafka consumer, mount),
 * its start-up in dependency order and its shut-down in reverse.
 *
 * Start-up (gateway_mount): config -> filter files -> index -> S3 reachable
 * (every bucket of every view) -> what the store honours of a PUT's
 * conditions (sync/probe.h: never fatal) -> staging recovery -> first scans of
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
 * LOCK ORDER (the whole process; a lock may be taken while holding only
 * locks listed before it on one of these lines, never the reverse;
 * docs/design.md "Lock order" says what each lock protects):
 *   index wmu -> index vlock -> view-set slot mutex
 *   index wmu -> index bloom_mu
 *   index wmu -> (change callbacks) inode table lock, fs inval_lock,
 *     core dir_lock, trace recorder lock (common/trace.h)
 *   index wmu -> (version hook) pins lock, burst-buffer mu, warm lock
 *   trace control lock -> trace recorder lock
 *   S3 client refresh_lock -> (refresh callback) creds renewer lock ->
 *     S3 client cred_lock
 *   version lock (sync/visibility.c) -> reader lock -> reader pool lock
 *   version lock -> pins lock, burst-buffer mu, S3 connection pool lock,
 *     S3 client cred_lock, refresh_lock (a read under it sends GETs)
 *   stage_file.lock -> stage.lock
 *   stage_file.lock -> stage pool.lock
 *   stage_file.lock -> stage_file.fd_lock -> stage.lock
 *   stage renew_lock -> stage.lock
 *   stage kept_io -> stage renew_lock -> stage.lock
 *   stage kept_io -> stage.lock
 * (A staged file's journal is written by its owner with no lock held:
 * sync/stage_int.h.) State locks are taken with mod_lock and checked by
 * the lock guard; the I/O locks are those named below as held across I/O,
 * and the stage's kept_io and this gateway's cache_lock_mu (common/lock.h).
 * Every other lock is a leaf, taken with no other lock held and released
 * before any call out of its module: gateway err_lock, the core's
 * ofile_lock and file text lock, links, the decoder's job lock, scanner
 * mu, a scan's pipe lock, consumer and bridge locks, upload and copy part
 * locks. The stats
 * lock (its histograms, lag table and registry of counter groups) is a
 * leaf that may be taken under any lock above; modules add and remove
 * their group with no lock of theirs held. No lock is held across an S3
 * request or a wait for one, except: the index's wmu across its own
 * LevelDB writes (by design: it serialises writers), a commit or eventual
 * descriptor's version lock across its read (it serialises reads of that
 * one descriptor with its revalidation, sync/visibility.h), and the S3
 * client's refresh_lock across a credentials refresh (re-reading the
 * config and credentials files: it serialises renewals and nothing else
 * takes it). Nothing is held across a FUSE invalidation (the kernel may
 * wait for a request, fuse/fs_notify.c).
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
