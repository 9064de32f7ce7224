/*
 * config.h — the gateway configuration file (JSON; docs/design.md
 * "Gateway configuration"; "//" outside a string starts a comment that
 * runs to the end of its line).
 *
 * config_load() reads and validates the whole file and reports every
 * problem as "FILE: JSON.PATH: reason" lines in the error buffer (several
 * lines separated by '\n'). Credentials missing from the file are found
 * by gateway/creds.h (environment, shared credentials file). Sizes are
 * strings with units ("20GiB") or whole JSON numbers below 2^64 (1e20, -1
 * or 1.5 is an error, never a converted value). Defaults: region
 * "default", https false, group "facetfs-<hostname>", topic "s3events",
 * cache.max_bytes 1 GiB, cache.block_size 1 MiB, cache.readahead_streams 4
 * (0..16, GETs ahead per reader), cache.readahead_bytes 64 MiB (per reader),
 * cache.readahead_total_streams 16, cache.readahead_total_bytes 256 MiB
 * (across readers), rescan_interval_s 0 (no periodic reconcile;
 * `facetfs rescan` still works), s3.ca_file none (the system's CA store),
 * s3.insecure false (certificates are verified unless the config says
 * otherwise, explicitly),
 * cache.durability "power" (the staging journal fsyncs; "process" does not
 * and survives only the gateway's own death: README, sync/stage/stage.h).
 * The struct owns all its strings; config_release() frees them.
 *
 * Tests: test_config.c, tests/fuzz/fuzz_config.c; t_check.sh, t_tour.sh.
 */
#ifndef FACETFS_CONFIG_H
#define FACETFS_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CONFIG_PART_MIN  (4ull << 10)
#define CONFIG_PART_MAX  (5ull << 30)
#define CONFIG_BLOCK_MIN (64ull << 10)
#define CONFIG_BLOCK_MAX (64ull << 20)
#define CONFIG_RA_STREAMS_MAX 16u
#define CONFIG_UPLOAD_STREAMS_DEFAULT 4u   /* s3.upload_streams */
#define CONFIG_UPLOAD_STREAMS_MAX 16u      /* the stage's pool holds 16 */

struct config {
	char *s3_endpoint, *s3_region;
	/* Credentials as the file gives them (NULL when absent; creds.h
	 * resolves the environment and the shared credentials file). */
	char *s3_access_key, *s3_secret_key, *s3_session_token;
	char *s3_profile, *s3_credentials_file;
	bool s3_https;
	char *s3_ca_file;            /* CA bundle for https (NULL: the system's) */
	bool s3_insecure;            /* https without certificate checks */
	bool s3_virtual_host;        /* s3.addressing "virtual" (default "path") */
	uint64_t s3_part_size;       /* multipart part size; 0: the default (8 MiB) */
	uint64_t s3_copy_threshold;  /* larger objects are copied in parts; 0: 5 GiB */
	unsigned s3_upload_streams;  /* parts sent at once: streaming threads, and
				      * parts in flight per upload (default 4) */
	bool s3_stream_off;          /* s3.stream_parts false: upload at the commit */
	char *kafka_brokers, *kafka_topic, *kafka_group;
	unsigned kafka_ready_timeout_s;  /* start-up waits this long for the
				      * brokers to answer for the topic */
	char **kafka_options;        /* key, value, key, value, ... */
	size_t n_kafka_options;      /* number of strings (2 per option) */
	char *state_dir, *views_dir;
	char *cache_dir;
	uint64_t cache_max_bytes;    /* the burst buffer: staging + blocks */
	uint32_t cache_block_size;   /* a power of two, 64 KiB..64 MiB */
	bool cache_durable_process;  /* cache.durability "process" (else "power") */
	unsigned cache_drain_streams;    /* write-back uploads in parallel (1..64) */
	unsigned cache_drain_delay_s;    /* a closed file waits this long first */
	unsigned cache_stop_drain_s;     /* a stop drains for up to this long */
	unsigned cache_full_timeout_s;   /* a write waits this long for room */
	unsigned cache_ra_streams;   /* read-ahead GETs in flight per reader */
	uint64_t cache_ra_bytes;     /* read-ahead bytes held per reader */
	unsigned cache_ra_total_streams; /* the same across all readers */
	uint64_t cache_ra_total_bytes;
	uint64_t cache_cold_min;     /* objects not stored at their first open
				      * (sync/cache/bcache.h bcache_admit); 0: none */
	bool cache_cold_direct;      /* such a first open gets direct I/O */
	unsigned rescan_interval_s;  /* periodic reconcile, 0 = never */
	char *metrics_listen;        /* "HOST:PORT" of /metrics, NULL = off */
};

int config_load(const char *path, struct config *out, char *err, size_t errlen);
/* The same from text[0..len) (no NUL needed); path is FILE in the errors.
 * 0, or -EINVAL with the errors in err; *out is then released. */
int config_parse(const char *path, const char *text, size_t len,
		 struct config *out, char *err, size_t errlen);
void config_release(struct config *c);

#endif
