/* gateway.c — see gateway.h. */
#include "gateway/gateway.h"
#include "gateway/gateway_int.h"

#include "events/consumer.h"
#include "fuse/fs.h"
#include "gateway/config.h"
#include "gateway/creds.h"
#include "gateway/ingest.h"
#include "gateway/metrics.h"
#include "common/trace.h"
#include "common/array.h"
#include "common/file.h"
#include "common/lockfile.h"
#include "common/log.h"
#include "common/stats.h"
#include "gateway/viewwatch.h"
#include "sync/cache/bcache.h"
#include "sync/stage/copy.h"
#include "sync/cache/pins.h"
#include "sync/stage/probe.h"
#include "sync/cache/reader.h"
#include "sync/s3/s3_http.h"
#include "sync/stage/stage.h"
#include "sync/cache/warm.h"
#include "views/filter.h"
#include "views/index.h"
#include "views/scan.h"
#include "views/viewset.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---------- start-up steps ---------- */

/* The first view set, made current in gw->views (the index installs it
 * again in open_index). */
static int load_views(struct gateway *gw)
{
	struct diag d = { 0 };
	struct view **views = NULL;
	size_t n = 0;
	int rc = view_load_dir(gw->cfg.views_dir, &views, &n, &d);
	for (size_t i = 0; i < d.n; i++)
		fprintf(stderr, "%s\n", d.lines[i]);
	if (rc == 0 && d.n)
		rc = -EINVAL;
	diag_release(&d);
	if (rc < 0) {
		view_free_all(views, n);
		log_error("%s: invalid filter files; nothing mounted", gw->cfg.views_dir);
		return rc;
	}
	struct viewset *vs;
	rc = viewset_new(n, &vs);
	for (size_t i = 0; i < n; i++) {
		if (rc == 0)
			rc = viewset_add(vs, views[i]);   /* takes it, also on error */
		else
			view_free(views[i]);
	}
	free(views);
	if (rc == 0)
		rc = viewset_seal(vs);
	if (rc == 0)
		viewset_slot_swap(&gw->views, vs);
	viewset_unpin(vs);
	if (rc < 0) {
		log_error("%s: %s; nothing mounted", gw->cfg.views_dir, strerror(-rc));
		return rc;
	}
	if (n == 0)
		log_warn("%s: no filter files (*.json): the mount will be empty",
			 gw->cfg.views_dir);
	log_info("%zu view(s) from %s", n, gw->cfg.views_dir);
	return 0;
}

static int open_index(struct gateway *gw)
{
	char err[512] = "";
	int rc = file_mkdir_p(gw->cfg.state_dir, 0755);
	if (rc < 0) {
		log_error("state_dir %s: %s", gw->cfg.state_dir, strerror(-rc));
		return rc;
	}
	rc = index_open(gw->cfg.state_dir, &gw->st, &gw->ix, err, sizeof err);
	if (rc < 0) {
		log_error("index in %s: %s", gw->cfg.state_dir, err);
		return rc;
	}
	struct viewset *vs = viewset_slot_pin(&gw->views);
	rc = index_set_views(gw->ix, vs, &gw->views);
	viewset_unpin(vs);
	if (rc < 0)
		log_error("index: installing the views failed: %s", strerror(-rc));
	return rc;
}

static int check_s3(struct gateway *gw)
{
	struct creds cr;
	char err[4096];
	int rc = creds_resolve(&gw->cfg, gw->config_path, &cr, err, sizeof err);
	if (rc < 0) {
		log_error("S3 credentials: %s", err);
		return rc;
	}
	log_info("S3 credentials from %s%s", cr.source,
		 cr.token ? " (temporary: with a session token)" : "");
	rc = creds_renewer_new(gw->config_path, &cr, &gw->renew);
	struct s3_conf sc = {
		.endpoint = gw->cfg.s3_endpoint, .region = gw->cfg.s3_region,
		.access_key = cr.access_key, .secret_key = cr.secret_key,
		.session_token = cr.token,
		.https = gw->cfg.s3_https, .ca_file = gw->cfg.s3_ca_file,
		.insecure = gw->cfg.s3_insecure,
		.virtual_host = gw->cfg.s3_virtual_host,
		.refresh = creds_renew, .refresh_ctx = gw->renew,
	};
	if (sc.insecure)
		log_warn("S3 %s: TLS certificates are not verified (s3.insecure)",
			 gw->cfg.s3_endpoint);
	if (rc == 0)
		rc = s3_http_new(&sc, &gw->st, &gw->s3);
	creds_release(&cr);
	if (rc == 0)
		rc = creds_renewer_start(gw->renew, gw->s3);
	if (rc < 0) {
		log_error("S3 client: %s", strerror(-rc));
		return rc;
	}
	struct viewset *vs = viewset_slot_pin(&gw->views);
	for (size_t i = 0; rc == 0 && i < viewset_count(vs); i++) {
		const struct view *v = viewset_view(vs, i);
		for (size_t b = 0; rc == 0 && b < view_n_buckets(v); b++) {
			const char *bucket = view_bucket(v, b);
			rc = s3_bucket_check(gw->s3, bucket);
			if (rc == -ENOENT)
				log_error("S3 %s: bucket \"%s\" (view %s) does not exist",
					  gw->cfg.s3_endpoint, bucket, view_name(v));
			else if (rc < 0)
				log_error("S3 %s: cannot reach bucket \"%s\": %s",
					  gw->cfg.s3_endpoint, bucket, strerror(-rc));
		}
	}
	viewset_unpin(vs);
	return rc;
}

/* What the store honours of a PUT's conditions (gw->cond), asked once on
 * a key of this gateway's own in the first writable view's bucket (the
 * store is one endpoint: every bucket answers alike). Never fails the
 * start: a condition not seen honoured is not sent, and the publish path
 * checks with a HEAD instead. Before the first scans, so that they do
 * not list the probe's key. */
static void probe_store(struct gateway *gw)
{
	const char *bucket = NULL;
	struct viewset *vs = viewset_slot_pin(&gw->views);
	for (size_t i = 0; !bucket && i < viewset_count(vs); i++) {
		const struct view *v = viewset_view(vs, i);
		if (view_writable(v) && view_n_buckets(v) > 0)
			bucket = view_bucket(v, 0);
	}
	char key[512];
	probe_key(key, sizeof key);
	gw->cond_probe = bucket ? probe_cond_put(gw->s3, bucket, key, &gw->cond) : 1;
	if (gw->cond_probe < 0)
		log_warn("S3 %s: cannot probe conditional PUTs in bucket \"%s\": %s; "
			 "none will be sent (a HEAD checks each upload)",
			 gw->cfg.s3_endpoint, bucket, strerror(-gw->cond_probe));
	else if (bucket)
		log_info("S3 %s: conditional PUT: If-None-Match %s, If-Match %s (probed "
			 "on %s/%s)", gw->cfg.s3_endpoint, gw->cond.if_none_match ?
			 "yes" : "no", gw->cond.if_match ? "yes" : "no", bucket, key);
	viewset_unpin(vs);
}

static void gw_stage_grew(void *ctx);
static void gw_stage_renewed(void *ctx);

/* Write staging under cache.dir, and the crash rule for what a previous
 * run left staged (sync/stage/stage.h). */
static int open_stage(struct gateway *gw)
{
	char dir[4096];
	snprintf(dir, sizeof dir, "%s/staging", gw->cfg.cache_dir);
	int rc = file_mkdir_p(gw->cfg.cache_dir, 0755);
	struct stage_conf sc = { .dir = dir, .max_bytes = gw->cfg.cache_max_bytes,
				 .durability = gw->cfg.cache_durable_process ?
					STAGE_DURABLE_PROCESS : STAGE_DURABLE_POWER,
				 .s3 = gw->s3, .grew = gw_stage_grew, .grew_ctx = gw,
				 .renewed = gw_stage_renewed,
				 .up = { .part_size = gw->cfg.s3_part_size,
					 .threads = gw->cfg.s3_upload_streams },
				 .stream_threads = gw->cfg.s3_upload_streams,
				 .full_timeout_s = gw->cfg.cache_full_timeout_s,
				 .stream_off = gw->cfg.s3_stream_off,
				 .defer_commits = true };
	if (rc == 0)
		rc = stage_open(&sc, &gw->stage);
	if (rc < 0) {
		log_error("staging directory %s: %s", dir, strerror(-rc));
		return rc;
	}
	struct stage_recovery_report rep = { 0 };
	rc = stage_recover(gw->stage, &rep);
	if (rep.orphans_aborted)
		log_warn("staging: %u multipart uploads a crash left without a journaled "
			 "id found by listing and aborted", rep.orphans_aborted);
	if (rep.deferred || rep.reuploaded || rep.reupload_failed || rep.recovered)
		log_warn("staged data of an earlier run: %u to be published after the "
			 "mount (their commit had begun), %u kept staged, %u never "
			 "committed moved to %s", rep.deferred + rep.reuploaded,
			 rep.reupload_failed + rep.abort_failed, rep.recovered,
			 stage_recovered_dir(gw->stage));
	if (rc < 0)
		log_error("staging recovery in %s: %s", dir, strerror(-rc));
	return rc;
}

/* ---------- the burst buffer ---------- */

static uint64_t gw_staged_bytes(void *ctx)
{
	struct gateway *gw = ctx;
	struct stage_counters c = { 0 };
	if (gw->stage)
		stage_counters_get(gw->stage, &c);
	return c.used_bytes;
}

static void gw_stage_grew(void *ctx)
{
	struct gateway *gw = ctx;
	if (gw->bc)
		bcache_trim(gw->bc);
}

/* cache.dir was removed while in use and its staging or blocks directory
 * made again: if the lock went with it, it is taken again (a second
 * gateway could start on the directory otherwise). */
static void gw_stage_renewed(void *ctx)
{
	struct gateway *gw = ctx;
	char err[512] = "";
	struct stat sb;
	pthread_mutex_lock(&gw->cache_lock_mu);
	int fd = -1;
	if (gw->cache_lock_fd < 0 ||
	    (fstat(gw->cache_lock_fd, &sb) == 0 && sb.st_nlink > 0)) {
		/* none taken (no cache), or still in place */
	} else if (lockfile_take(gw->cfg.cache_dir, "cache.dir", &fd, err,
				 sizeof err) < 0) {
		log_error("cache.dir %s was removed and made again, but its lock "
			  "cannot be taken again: %s", gw->cfg.cache_dir, err);
	} else {
		close(gw->cache_lock_fd);
		gw->cache_lock_fd = fd;
		log_warn("cache.dir %s was removed while in use: its lock is taken "
			 "again", gw->cfg.cache_dir);
	}
	pthread_mutex_unlock(&gw->cache_lock_mu);
}

/* An object's version came or went (index.h): release the old one's
 * blocks, fetch the new one ahead if a warm view wants it. */
static void gw_version(void *ctx, const struct index_version *v)
{
	struct gateway *gw = ctx;
	if (v->old_etag) {
		struct bcache_id id = { v->bucket, v->key, v->old_etag };
		pins_drop(gw->pins, &id, v->old_size);
	}
	if (v->new_etag && v->warm_max && gw->warm)
		warm_want(gw->warm, v->bucket, v->key, v->new_etag, v->new_size, v->warm_max);
}

/* Warm data not read yet may hold at most this share of the budget. */
#define WARM_SHARE_DIV 4

/* Clean blocks under cache.dir/blocks, sharing cache.max_bytes with
 * staging; warm on arrival on top of it; the index's version hook. */
static int open_cache(struct gateway *gw)
{
	char dir[4096], err[512] = "";
	snprintf(dir, sizeof dir, "%s/blocks", gw->cfg.cache_dir);
	int rc = file_mkdir_p(gw->cfg.cache_dir, 0755);
	if (rc < 0) {
		log_error("cache.dir %s: %s", gw->cfg.cache_dir, strerror(-rc));
		return rc;
	}
	/* One gateway per cache.dir, staging and blocks alike; the lock is
	 * on the top directory, so removing blocks/ (its own lock goes with
	 * it) does not let a second gateway in. */
	if ((rc = lockfile_take(gw->cfg.cache_dir, "cache.dir", &gw->cache_lock_fd,
				err, sizeof err)) < 0) {
		log_error("%s", err);
		return rc;
	}
	struct bcache_conf bc = {
		.dir = dir, .max_bytes = gw->cfg.cache_max_bytes,
		.block_size = gw->cfg.cache_block_size,
		.staged = gw_staged_bytes, .staged_ctx = gw, .st = &gw->st,
		.dir_made = gw_stage_renewed,
		.cold_min = gw->cfg.cache_cold_min,
	};
	rc = bcache_open(&bc, &gw->bc, err, sizeof err);
	if (rc < 0) {
		log_error("burst buffer %s: %s", dir, err[0] ? err : strerror(-rc));
		return rc;
	}
	if ((rc = pins_new(gw->bc, &gw->pins)) < 0)
		return rc;
	const struct reader_ra_conf ra = {
		gw->cfg.cache_ra_streams, gw->cfg.cache_ra_bytes,
		gw->cfg.cache_ra_total_streams, gw->cfg.cache_ra_total_bytes,
		0,                   /* kept between reads: READER_KEPT_TOTAL */
	};
	if ((rc = reader_pool_new(&ra, &gw->rpool)) < 0)
		return rc;
	struct warm_conf wc = {
		.s3 = gw->s3, .bc = gw->bc, .pins = gw->pins, .st = &gw->st,
		.max_unread = gw->cfg.cache_max_bytes / WARM_SHARE_DIV,
	};
	if ((rc = warm_new(&wc, &gw->warm)) < 0) {
		log_error("warm on arrival: %s", strerror(-rc));
		return rc;
	}
	index_set_version_hook(gw->ix, gw_version, gw);
	return 0;
}

static int start_consumer(struct gateway *gw)
{
	char err[512] = "";
	/* Defaults that make a consumer restart quick; config options win. */
	size_t n = gw->cfg.n_kafka_options / 2;
	const char **opts = calloc(2 * n + 1, sizeof *opts);
	if (!opts)
		return -ENOMEM;
	for (size_t i = 0; i < 2 * n; i++)
		opts[i] = gw->cfg.kafka_options[i];
	struct consumer_conf cc = {
		.brokers = gw->cfg.kafka_brokers, .topic = gw->cfg.kafka_topic,
		.group = gw->cfg.kafka_group, .options = opts, .n_options = n,
	};
	struct consumer_cb cb;
	ingest_callbacks(gw->ing, &cb);
	int rc = consumer_new(&cc, &cb, &gw->st, &gw->cons, err, sizeof err);
	free(opts);
	if (rc < 0) {
		log_error("kafka: %s", err);
		return rc;
	}
	rc = consumer_start(gw->cons);
	if (rc == 0)
		rc = consumer_wait_ready(gw->cons, (int)gw->cfg.kafka_ready_timeout_s * 1000,
					 false);
	if (rc < 0)
		log_error("kafka: brokers %s, topic %s not ready; nothing mounted",
			  gw->cfg.kafka_brokers, gw->cfg.kafka_topic);
	return rc;
}

static int start_scanner(struct gateway *gw)
{
	int rc = scan_new(gw->ix, gw->s3, &gw->st, ingest_change_fn, gw->ing, &gw->scan);
	if (rc < 0)
		log_error("scanner: %s", strerror(-rc));
	return rc;
}

/* Tell the waiting parent how start-up went (background mode). */
static void report_ready(struct gateway *gw, int status)
{
	if (gw->ready_fd < 0)
		return;
	char c = (char)status;
	ssize_t w = write(gw->ready_fd, &c, 1);
	(void)w;
	close(gw->ready_fd);
	gw->ready_fd = -1;
	if (status == 0) {
		int fd = open("/dev/null", O_RDWR);
		if (fd >= 0) {
			dup2(fd, STDIN_FILENO);
			dup2(fd, STDOUT_FILENO);
			close(fd);
		}
		char log[4096];
		snprintf(log, sizeof log, "%s/facetfs.log", gw->cfg.state_dir);
		fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
		if (fd >= 0) {
			dup2(fd, STDERR_FILENO);
			close(fd);
		}
		/* For service managers (PIDFile=) and tests that stop it. */
		char pidf[4096];
		snprintf(pidf, sizeof pidf, "%s/facetfs.pid", gw->cfg.state_dir);
		FILE *f = fopen(pidf, "w");
		if (!f || fprintf(f, "%ld\n", (long)getpid()) < 0 || fclose(f) != 0)
			log_warn("%s: cannot write the pid file", pidf);
		else
			gw->pid_written = true;
	}
}

/* The soft limit of descriptors raised to the hard one (systemd starts
 * services at 1,024 soft and 524,288 hard): LevelDB's tables, S3
 * connections, Kafka's sockets and the files being written each take
 * one (a file waiting for the write-back drain takes none: sync/stage/stage.h,
 * stage_file_park). Nothing in the process uses select(2), which the
 * raise would break past 1,024. Logged with the figure. */
static void raise_nofile(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
		log_warn("descriptors: cannot read the limit: %s", strerror(errno));
		return;
	}
	rlim_t was = rl.rlim_cur;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
			log_warn("descriptors: cannot raise the limit from %llu to %llu: %s",
				 (unsigned long long)was, (unsigned long long)rl.rlim_max,
				 strerror(errno));
			return;
		}
	}
	if (rl.rlim_cur == was)
		log_info("descriptors: limit %llu (the hard limit: raise it with "
			 "LimitNOFILE= or ulimit -Hn for more)", (unsigned long long)was);
	else
		log_info("descriptors: limit raised from %llu to %llu (the hard limit)",
			 (unsigned long long)was, (unsigned long long)rl.rlim_cur);
}

/* Background mode: the parent waits until the child mounted (or failed),
 * so `facetfs mount` exits 0 only with a working mount. */
static int daemonize(struct gateway *gw)
{
	int p[2];
	if (pipe(p) < 0)
		return -errno;
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid > 0) {
		close(p[1]);
		char c = 1;
		ssize_t r = read(p[0], &c, 1);
		_exit(r == 1 ? c : 1);
	}
	close(p[0]);
	setsid();
	gw->ready_fd = p[1];
	return 0;
}

static void gateway_stop(struct gateway *gw)
{
	metrics_stop(gw->metrics);
	gw->metrics = NULL;
	viewwatch_stop(gw->watch);
	gw->watch = NULL;
	if (gw->cons)
		consumer_stop(gw->cons);
	scan_free(gw->scan);
	gw->scan = NULL;
	consumer_free(gw->cons);
	gw->cons = NULL;
	ingest_set_fs(gw->ing, NULL);
	atomic_store(&gw->mem_fs, NULL);
	fs_free(gw->fs);
	gw->fs = NULL;
	ingest_free(gw->ing);
	warm_free(gw->warm);
	gw->warm = NULL;
	trace_free(gw->trace);   /* after the mount and ingest: nothing records */
	gw->trace = NULL;
	stage_close(gw->stage);
	gw->stage = NULL;
	pins_free(gw->pins);
	gw->pins = NULL;
	reader_pool_free(gw->rpool);     /* after the mount: no reader is left */
	gw->rpool = NULL;
	bcache_close(gw->bc);
	gw->bc = NULL;
	if (gw->cache_lock_fd >= 0)      /* after staging and blocks let go */
		close(gw->cache_lock_fd);
	gw->cache_lock_fd = -1;
	index_close(gw->ix);
	creds_renewer_free(gw->renew);   /* its SIGHUP thread uses s3 */
	gw->renew = NULL;
	s3_free(gw->s3);
	viewset_slot_release(&gw->views);
	config_release(&gw->cfg);
	gw_errors_set(gw, NULL, 0);
	pthread_mutex_destroy(&gw->err_lock);
	pthread_mutex_destroy(&gw->cache_lock_mu);
	stats_group_remove(&gw->mem_grp);
	stats_release(&gw->st);
}

int gateway_mount(const struct mount_opts *o)
{
	/* Absolute: credentials renewal re-reads it after the fork. */
	char conf_abs[PATH_MAX];
	struct gateway gw = { .ready_fd = -1, .cache_lock_fd = -1, .config_path =
		realpath(o->config_path, conf_abs) ? conf_abs : o->config_path };
	stats_init(&gw.st);
	gw_memory_add(&gw);
	viewset_slot_init(&gw.views, NULL);
	pthread_mutex_init(&gw.err_lock, NULL);
	pthread_mutex_init(&gw.cache_lock_mu, NULL);
	char err[4096] = "";
	if (config_load(o->config_path, &gw.cfg, err, sizeof err) < 0) {
		fprintf(stderr, "%s\n", err);
		stats_group_remove(&gw.mem_grp);
		stats_release(&gw.st);
		return 2;
	}
	int code = 2;
	if (load_views(&gw) < 0)
		goto out;
	code = 1;
	if (!o->foreground && daemonize(&gw) < 0)
		goto out;
	raise_nofile();

	/* Only the FUSE loop on this thread may take these signals. */
	sigset_t sigs, old;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &sigs, &old);

	/* The cache first: its lock keeps a second gateway away from
	 * cache.dir before staging recovery touches anything there. */
	if (open_index(&gw) < 0 || check_s3(&gw) < 0)
		goto out;
	probe_store(&gw);
	if (open_cache(&gw) < 0 || open_stage(&gw) < 0)
		goto out;
	bcache_trim(gw.bc);          /* staging's recovered bytes count too */
	if (ingest_new(gw.ix, gw.s3, &gw.views, &gw.st, &gw.ing) < 0 ||
	    start_scanner(&gw) < 0)
		goto out;
	/* First scans start now: they need neither Kafka nor the mount. The
	 * mount does not wait for the consumer group's join either (seconds:
	 * Kafka's initial rebalance delay), only for the brokers to answer for
	 * the topic; events are applied from the stored offsets once the
	 * partitions are assigned (.facetfs/stats: kafka.partitions_assigned). */
	struct viewset *vs = viewset_slot_pin(&gw.views);
	scan_start_views(gw.scan, viewset_views(vs), viewset_count(vs));
	size_t n_views = viewset_count(vs);
	viewset_unpin(vs);
	if (start_consumer(&gw) < 0)
		goto out;
	if (gw.cfg.metrics_listen &&
	    metrics_start(gw.cfg.metrics_listen, gw_metrics_text, &gw, &gw.metrics) < 0)
		goto out;

	char tdir[PATH_MAX];
	snprintf(tdir, sizeof tdir, "%s/traces", gw.cfg.state_dir);
	if (trace_new(tdir, &gw.trace) < 0)
		goto out;
	ingest_set_trace(gw.ing, gw.trace);
	struct copy_conf copy = { .threshold = gw.cfg.s3_copy_threshold,
				  .part_size = gw.cfg.s3_part_size,
				  .left_open = gw_copy_left_open, .left_ctx = &gw };
	struct fs_deps deps = {
		.copy = &copy,
		.trace = gw.trace,
		.ix = gw.ix, .views = &gw.views, .s3 = gw.s3, .stage = gw.stage,
		.bc = gw.bc, .pins = gw.pins, .rpool = gw.rpool,
		.cold_direct = gw.cfg.cache_cold_direct,
		.st = &gw.st, .ctx = &gw, .stats_json = gw_stats_text,
		.views_json = gw_views_json, .control = gw_control,
		.fresh_as_of = gw_fresh_as_of,
		.cond = gw.cond,
		.drain_streams = gw.cfg.cache_drain_streams,
		.drain_delay_s = gw.cfg.cache_drain_delay_s,
		.stop_drain_s = gw.cfg.cache_stop_drain_s,
	};
	if (fs_mount(o->mountpoint, o->fuse_opts, &deps, &gw.fs) < 0)
		goto out;
	/* What recovery left: queued before the first request is served,
	 * published behind it by the drain. */
	fs_adopt(gw.fs);
	ingest_set_fs(gw.ing, gw.fs);
	atomic_store(&gw.mem_fs, gw.fs);
	if (gw.cfg.rescan_interval_s)
		scan_set_rescan_interval(gw.scan, gw.cfg.rescan_interval_s);
	if (viewwatch_start(gw.cfg.views_dir, gw_views_reload, &gw, &gw.watch) < 0)
		log_warn("views: changes to %s need a remount", gw.cfg.views_dir);
	log_info("mounted %s: %zu view(s), kafka %s topic %s group %s", o->mountpoint,
		 n_views, gw.cfg.kafka_brokers, gw.cfg.kafka_topic, gw.cfg.kafka_group);
	report_ready(&gw, 0);

	/* SIGHUP stays blocked: the renewer's thread takes it (credentials). */
	sigdelset(&sigs, SIGHUP);
	pthread_sigmask(SIG_UNBLOCK, &sigs, NULL);
	code = fs_run(gw.fs) < 0 ? 1 : 0;
	log_info("unmounting %s", o->mountpoint);
out:
	report_ready(&gw, code ? code : 1);
	if (gw.pid_written) {
		char pidf[4096];
		snprintf(pidf, sizeof pidf, "%s/facetfs.pid", gw.cfg.state_dir);
		unlink(pidf);
	}
	gateway_stop(&gw);
	return code;
}
