/* gateway.c — see gateway.h. */
#include "gateway/gateway.h"

#include "events/consumer.h"
#include "fuse/fs.h"
#include "gateway/config.h"
#include "gateway/ingest.h"
#include "gateway/log.h"
#include "gateway/stats.h"
#include "sync/s3.h"
#include "sync/stage.h"
#include "views/filter.h"
#include "views/index.h"
#include "views/scan.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct gateway {
	struct config cfg;
	struct stats st;
	struct view **views;
	size_t n_views;
	struct index *ix;
	struct s3 *s3;
	struct scanner *scan;
	struct stage *stage;
	struct consumer *cons;
	struct ingest *ing;
	struct fs *fs;
	int ready_fd;            /* pipe to the waiting parent, -1 in foreground */
};

/* ---------- .facetfs/ providers ---------- */

static char *gw_views_json(void *ctx)
{
	struct gateway *gw = ctx;
	cJSON *root = cJSON_CreateObject();
	if (!root)
		return NULL;
	for (size_t i = 0; i < gw->n_views; i++) {
		struct view *v = gw->views[i];
		cJSON *o = cJSON_AddObjectToObject(root, view_name(v));
		cJSON_AddStringToObject(o, "file", view_source(v));
		cJSON *buckets = cJSON_AddArrayToObject(o, "buckets");
		const char *state = "ready";
		for (size_t b = 0; b < view_n_buckets(v); b++) {
			struct index_scan_state ss;
			cJSON *bo = cJSON_CreateObject();
			cJSON_AddStringToObject(bo, "name", view_bucket(v, b));
			int rc = index_scan_state_get(gw->ix, view_bucket(v, b), &ss);
			const char *bs = rc < 0 ? "not scanned" : ss.done ? "scanned" : "scanning";
			if (rc < 0 || !ss.done)
				state = "scanning";
			cJSON_AddStringToObject(bo, "scan", bs);
			cJSON_AddNumberToObject(bo, "scanned_objects", rc < 0 ? 0 : (double)ss.objects);
			cJSON_AddItemToArray(buckets, bo);
		}
		cJSON_AddStringToObject(o, "state", state);
		cJSON_AddNumberToObject(o, "objects", (double)index_members(gw->ix, i));
		cJSON_AddStringToObject(o, "visibility", view_visibility(v));
		cJSON_AddBoolToObject(o, "writable", view_writable(v));
		cJSON_AddNullToObject(o, "last_error");
	}
	char *text = cJSON_Print(root);
	cJSON_Delete(root);
	return text;
}

static char *gw_control(void *ctx, const char *command)
{
	struct gateway *gw = ctx;
	char *answer = NULL;
	if (strcmp(command, "rescan") == 0 || strncmp(command, "rescan ", 7) == 0) {
		const char *view = command[6] ? command + 7 : NULL;
		int rc = scan_rescan_view(gw->scan, gw->views, gw->n_views, view, &answer);
		if (rc < 0 && !answer &&
		    asprintf(&answer, "error: rescan%s%s: %s\n", view ? " " : "",
			     view ? view : "", strerror(-rc)) < 0)
			answer = NULL;
	} else if (strcmp(command, "ping") == 0) {
		answer = strdup("ok\n");
	} else if (asprintf(&answer, "error: unknown command \"%s\" (known: ping, rescan [VIEW])\n",
			    command) < 0) {
		answer = NULL;
	}
	return answer;
}

/* .facetfs/stats: the counters, plus the staging area's. */
static char *gw_stats_text(void *ctx)
{
	struct gateway *gw = ctx;
	char *base = stats_to_json(&gw->st);
	if (!base || !gw->stage)
		return base;
	struct stage_counters c;
	stage_counters_get(gw->stage, &c);
	cJSON *root = cJSON_Parse(base);
	free(base);
	if (!root)
		return NULL;
	cJSON *sg = cJSON_AddObjectToObject(root, "staging");
	cJSON_AddNumberToObject(sg, "used_bytes", (double)c.used_bytes);
	cJSON_AddNumberToObject(sg, "max_bytes", (double)c.max_bytes);
	cJSON_AddNumberToObject(sg, "open_files", (double)c.open_files);
	cJSON_AddNumberToObject(sg, "pending_files", (double)c.pending_files);
	cJSON_AddNumberToObject(sg, "uploads", (double)c.uploads);
	cJSON_AddNumberToObject(sg, "upload_bytes", (double)c.upload_bytes);
	cJSON_AddNumberToObject(sg, "upload_errors", (double)c.upload_errors);
	cJSON_AddNumberToObject(sg, "enospc", (double)c.enospc);
	cJSON_AddNumberToObject(sg, "efbig", (double)c.efbig);
	cJSON_AddNumberToObject(sg, "recovered_files", (double)c.recovered_files);
	cJSON_AddNumberToObject(sg, "reuploaded_files", (double)c.reuploaded_files);
	cJSON_AddStringToObject(sg, "recovered_dir", stage_recovered_dir(gw->stage));
	char *text = cJSON_Print(root);
	cJSON_Delete(root);
	return text;
}

/* ---------- start-up steps ---------- */

static int load_views(struct gateway *gw)
{
	struct diag d = { 0 };
	int rc = view_load_dir(gw->cfg.views_dir, &gw->views, &gw->n_views, &d);
	for (size_t i = 0; i < d.n; i++)
		fprintf(stderr, "%s\n", d.lines[i]);
	if (rc == 0 && d.n)
		rc = -EINVAL;
	diag_release(&d);
	if (rc < 0) {
		log_error("%s: invalid filter files; nothing mounted", gw->cfg.views_dir);
		return rc;
	}
	if (gw->n_views == 0)
		log_warn("%s: no filter files (*.json): the mount will be empty",
			 gw->cfg.views_dir);
	log_info("%zu view(s) from %s", gw->n_views, gw->cfg.views_dir);
	return 0;
}

static int mkdir_p(const char *path)
{
	char buf[4096];
	snprintf(buf, sizeof buf, "%s", path);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0755) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, 0755) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

static int open_index(struct gateway *gw)
{
	char err[512] = "";
	int rc = mkdir_p(gw->cfg.state_dir);
	if (rc < 0) {
		log_error("state_dir %s: %s", gw->cfg.state_dir, strerror(-rc));
		return rc;
	}
	rc = index_open(gw->cfg.state_dir, &gw->st, &gw->ix, err, sizeof err);
	if (rc < 0) {
		log_error("index in %s: %s", gw->cfg.state_dir, err);
		return rc;
	}
	rc = index_set_views(gw->ix, gw->views, gw->n_views);
	if (rc < 0)
		log_error("index: installing the views failed: %s", strerror(-rc));
	return rc;
}

static int check_s3(struct gateway *gw)
{
	struct s3_conf sc = {
		.endpoint = gw->cfg.s3_endpoint, .region = gw->cfg.s3_region,
		.access_key = gw->cfg.s3_access_key, .secret_key = gw->cfg.s3_secret_key,
		.https = gw->cfg.s3_https,
	};
	int rc = s3_new(&sc, &gw->st, &gw->s3);
	if (rc < 0) {
		log_error("S3 client: %s", strerror(-rc));
		return rc;
	}
	for (size_t i = 0; i < gw->n_views; i++)
		for (size_t b = 0; b < view_n_buckets(gw->views[i]); b++) {
			const char *bucket = view_bucket(gw->views[i], b);
			rc = s3_bucket_check(gw->s3, bucket);
			if (rc == -ENOENT) {
				log_error("S3 %s: bucket \"%s\" (view %s) does not exist",
					  gw->cfg.s3_endpoint, bucket, view_name(gw->views[i]));
				return rc;
			}
			if (rc < 0) {
				log_error("S3 %s: cannot reach bucket \"%s\": %s",
					  gw->cfg.s3_endpoint, bucket, strerror(-rc));
				return rc;
			}
		}
	return 0;
}

/* Write staging under cache.dir, and the crash rule for what a previous
 * run left staged (sync/stage.h). */
static int open_stage(struct gateway *gw)
{
	char dir[4096];
	snprintf(dir, sizeof dir, "%s/staging", gw->cfg.cache_dir);
	int rc = mkdir_p(gw->cfg.cache_dir);
	struct stage_conf sc = { .dir = dir, .max_bytes = gw->cfg.cache_max_bytes,
				 .up = stage_uploader_s3(gw->s3) };
	if (rc == 0)
		rc = stage_open(&sc, &gw->stage);
	if (rc < 0) {
		log_error("staging directory %s: %s", dir, strerror(-rc));
		return rc;
	}
	struct stage_recovery_report rep = { 0 };
	rc = stage_recover(gw->stage, &rep);
	if (rep.reuploaded || rep.reupload_failed || rep.recovered)
		log_warn("staged data of an earlier run: %u uploaded (their commit had begun), "
			 "%u still failing to upload, %u never committed moved to %s",
			 rep.reuploaded, rep.reupload_failed, rep.recovered,
			 stage_recovered_dir(gw->stage));
	if (rc < 0)
		log_error("staging recovery in %s: %s", dir, strerror(-rc));
	return rc;
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
		rc = consumer_wait_ready(gw->cons, 25000);
	if (rc < 0)
		log_error("kafka: brokers %s, topic %s not ready; nothing mounted",
			  gw->cfg.kafka_brokers, gw->cfg.kafka_topic);
	return rc;
}

static int start_scanner(struct gateway *gw)
{
	struct scan_source src;
	scan_source_s3(gw->s3, &src);   /* LIST, HEAD and GetObjectTagging */
	int rc = scan_new(gw->ix, &src, &gw->st, ingest_change_fn, gw->ing, &gw->scan);
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
	}
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
	if (gw->cons)
		consumer_stop(gw->cons);
	scan_free(gw->scan);
	gw->scan = NULL;
	consumer_free(gw->cons);
	gw->cons = NULL;
	ingest_set_fs(gw->ing, NULL);
	fs_free(gw->fs);
	gw->fs = NULL;
	ingest_free(gw->ing);
	stage_close(gw->stage);
	index_close(gw->ix);
	s3_free(gw->s3);
	view_free_all(gw->views, gw->n_views);
	config_release(&gw->cfg);
	stats_release(&gw->st);
}

int gateway_mount(const struct mount_opts *o)
{
	struct gateway gw = { .ready_fd = -1 };
	stats_init(&gw.st);
	char err[4096] = "";
	if (config_load(o->config_path, &gw.cfg, err, sizeof err) < 0) {
		fprintf(stderr, "%s\n", err);
		stats_release(&gw.st);
		return 2;
	}
	int code = 2;
	if (load_views(&gw) < 0)
		goto out;
	code = 1;
	if (!o->foreground && daemonize(&gw) < 0)
		goto out;

	/* Only the FUSE loop on this thread may take these signals. */
	sigset_t sigs, old;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &sigs, &old);

	if (open_index(&gw) < 0 || check_s3(&gw) < 0 || open_stage(&gw) < 0)
		goto out;
	if (ingest_new(gw.ix, gw.s3, gw.views, gw.n_views, &gw.st, &gw.ing) < 0 ||
	    start_scanner(&gw) < 0)
		goto out;
	if (start_consumer(&gw) < 0)
		goto out;

	struct fs_deps deps = {
		.ix = gw.ix, .views = gw.views, .n_views = gw.n_views, .s3 = gw.s3,
		.stage = gw.stage,
		.st = &gw.st, .ctx = &gw, .stats_json = gw_stats_text,
		.views_json = gw_views_json, .control = gw_control,
	};
	if (fs_mount(o->mountpoint, o->fuse_opts, &deps, &gw.fs) < 0)
		goto out;
	ingest_set_fs(gw.ing, gw.fs);
	scan_start_views(gw.scan, gw.views, gw.n_views);
	if (gw.cfg.rescan_interval_s)
		scan_set_rescan_interval(gw.scan, gw.cfg.rescan_interval_s);
	log_info("mounted %s: %zu view(s), kafka %s topic %s group %s", o->mountpoint,
		 gw.n_views, gw.cfg.kafka_brokers, gw.cfg.kafka_topic, gw.cfg.kafka_group);
	report_ready(&gw, 0);

	pthread_sigmask(SIG_SETMASK, &old, NULL);
	code = fs_run(gw.fs) < 0 ? 1 : 0;
	log_info("unmounting %s", o->mountpoint);
out:
	report_ready(&gw, code ? code : 1);
	gateway_stop(&gw);
	return code;
}
