/* gateway_files.c — what .facetfs/ and /metrics show of the gateway: the
 * views, the control commands, the stats with the staging, cache and memory
 * sections (see gateway_int.h). */
#include "gateway/gateway_int.h"
#include "gateway/creds.h"

#include "common/lock.h"
#include "common/stats.h"
#include "fuse/fs.h"
#include "gateway/metrics_text.h"
#include "gateway/trace_ctl.h"
#include "sync/cache/bcache.h"
#include "sync/cache/reader.h"
#include "sync/stage/stage.h"
#include "sync/cache/warm.h"
#include "views/filter.h"
#include "views/index.h"
#include "views/scan.h"
#include "views/viewset.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The "memory" section (gw_memory in gateway_int.h). */
static const struct stats_def memory_stats[] = {
	STATS_GAUGE(struct gw_memory, rss, "memory", "rss_bytes"),
	STATS_GAUGE(struct gw_memory, inodes, "memory", "inodes"),
	STATS_GAUGE(struct gw_memory, inode_bytes, "memory", "inode_bytes"),
	STATS_GAUGE(struct gw_memory, dir_handles, "memory", "dir_handles"),
	STATS_GAUGE(struct gw_memory, dir_bytes, "memory", "dir_bytes"),
	STATS_GAUGE(struct gw_memory, index_bytes, "memory", "index_cache_bytes"),
	STATS_GAUGE(struct gw_memory, filter_bytes, "memory", "index_filter_bytes"),
	STATS_GAUGE(struct gw_memory, readahead_bytes, "memory", "readahead_bytes"),
};

char *gw_views_json(void *ctx)
{
	struct gateway *gw = ctx;
	cJSON *root = cJSON_CreateObject();
	if (!root)
		return NULL;
	struct viewset *vs = viewset_slot_pin(&gw->views);
	for (size_t i = 0; i < viewset_count(vs); i++) {
		const struct view *v = viewset_view(vs, i);
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
		struct gw_fresh f;
		gw_freshness(gw, v, &f);
		if (f.known) {
			cJSON_AddStringToObject(o, "fresh_as_of", f.text);
			cJSON_AddNumberToObject(o, "staleness_ms", (double)(gw_wall_ms() - f.fresh_ms));
		} else {
			cJSON_AddNullToObject(o, "fresh_as_of");
			cJSON_AddStringToObject(o, "freshness", f.text);
		}
		cJSON_AddNumberToObject(o, "objects", (double)index_members(gw->ix, v));
		cJSON_AddStringToObject(o, "visibility", view_visibility(v));
		cJSON_AddBoolToObject(o, "writable", view_writable(v));
		bool on_scan;
		uint64_t warm = view_warm(v, &on_scan);
		if (warm) {
			cJSON *w = cJSON_AddObjectToObject(o, "warm");
			cJSON_AddNumberToObject(w, "max_object", (double)warm);
			cJSON_AddBoolToObject(w, "on_scan", on_scan);
		} else {
			cJSON_AddBoolToObject(o, "warm", false);
		}
		const char *err = NULL;
		mod_lock(&gw->err_lock);
		for (size_t e = 0; e < gw->n_errors; e++)
			if (strcmp(gw->errors[e].file, view_source(v)) == 0)
				err = gw->errors[e].text;
		if (err)
			cJSON_AddStringToObject(o, "last_error", err);
		else
			cJSON_AddNullToObject(o, "last_error");
		mod_unlock(&gw->err_lock);
	}
	viewset_unpin(vs);
	/* Invalid filter files, with or without a running previous version;
	 * how long installing changed view sets took (".reloads", like
	 * ".errors", cannot be a view: names do not start with a dot). */
	mod_lock(&gw->err_lock);
	if (gw->n_errors) {
		cJSON *errs = cJSON_AddArrayToObject(root, ".errors");
		for (size_t e = 0; e < gw->n_errors; e++)
			cJSON_AddItemToArray(errs, cJSON_CreateString(gw->errors[e].text));
	}
	cJSON *rl = cJSON_AddObjectToObject(root, ".reloads");
	cJSON_AddNumberToObject(rl, "count", gw->reloads);
	cJSON_AddNumberToObject(rl, "last_ms", gw->reload_last_ms);
	cJSON_AddNumberToObject(rl, "max_ms", gw->reload_max_ms);
	cJSON_AddNumberToObject(rl, "last_at", gw->reload_last_at);
	mod_unlock(&gw->err_lock);
	char *text = cJSON_Print(root);
	cJSON_Delete(root);
	return text;
}

char *gw_control(void *ctx, const char *command)
{
	struct gateway *gw = ctx;
	char *answer = NULL;
	if (strcmp(command, "rescan") == 0 || strncmp(command, "rescan ", 7) == 0) {
		const char *view = command[6] ? command + 7 : NULL;
		struct viewset *vs = viewset_slot_pin(&gw->views);  /* held while it lists */
		int rc = scan_rescan_view(gw->scan, viewset_views(vs), viewset_count(vs), view,
					  &answer);
		viewset_unpin(vs);
		if (rc < 0 && !answer &&
		    asprintf(&answer, "error: rescan%s%s: %s\n", view ? " " : "",
			     view ? view : "", strerror(-rc)) < 0)
			answer = NULL;
	} else if (strcmp(command, "trace") == 0 || strncmp(command, "trace ", 6) == 0) {
		answer = trace_control(gw->trace, command + 5);
	} else if (strcmp(command, "sync") == 0 || strncmp(command, "sync ", 5) == 0) {
		answer = gw->fs ? fs_sync(gw->fs, command[4] ? command + 5 : NULL)
				: strdup("error: not mounted\n");
	} else if (strncmp(command, "wait ", 5) == 0) {
		answer = gw_control_wait(gw, command + 5);
	} else if (strcmp(command, "ping") == 0) {
		answer = strdup("ok\n");
	} else if (asprintf(&answer, "error: unknown command \"%s\" (known: ping, rescan [VIEW], sync [PATH], trace ..., wait TIMEOUT_MS [--probe] [VIEW...])\n",
			    command) < 0) {
		answer = NULL;
	}
	return answer;
}

/* .facetfs/stats: the counters, plus the staging area's, what the store
 * honours (the probe at start), the burst buffer's. */
static void stats_staging(void *ctx, struct stats_writer *w)
{
	struct gateway *gw = ctx;
	struct stage_counters c;
	stage_counters_get(gw->stage, &c);
	stats_write_num(w, "used_bytes", (double)c.used_bytes);
	stats_write_num(w, "max_bytes", (double)c.max_bytes);
	stats_write_num(w, "open_files", (double)c.open_files);
	stats_write_num(w, "data_fds", (double)c.data_fds);
	stats_write_num(w, "pending_files", (double)c.pending_files);
	stats_write_num(w, "uploads", (double)c.uploads);
	stats_write_num(w, "upload_bytes", (double)c.upload_bytes);
	stats_write_num(w, "upload_errors", (double)c.upload_errors);
	stats_write_num(w, "enospc", (double)c.enospc);
	stats_write_num(w, "efbig", (double)c.efbig);
	stats_write_num(w, "recovered_files", (double)c.recovered_files);
	stats_write_num(w, "reuploaded_files", (double)c.reuploaded_files);
	stats_write_num(w, "syncs", (double)c.syncs);
	stats_write_str(w, "durability", gw->cfg.cache_durable_process ? "process" : "power");
	stats_write_num(w, "parts_streamed", (double)c.parts_streamed);
	stats_write_num(w, "parts_tail", (double)c.parts_tail);
	stats_write_num(w, "streams", (double)c.streams);
	stats_write_num(w, "stream_bytes", (double)c.stream_bytes);
	stats_write_num(w, "stream_fallbacks", (double)c.stream_fallbacks);
	stats_write_num(w, "stream_aborts", (double)c.stream_aborts);
	stats_write_num(w, "spare_files", (double)c.spare_files);
	stats_write_str(w, "recovered_dir", stage_recovered_dir(gw->stage));
	/* "store": what the probe at start found the store honours. */
	stats_write_section(w, "store");
	stats_write_str(w, "cond_probe", gw->cond_probe == 0 ? "done" :
			gw->cond_probe > 0 ? "no writable view" : strerror(-gw->cond_probe));
	stats_write_num(w, "if_none_match", gw->cond.if_none_match);
	stats_write_num(w, "if_match", gw->cond.if_match);
	/* "credentials": where they came from and when they expire (never a
	 * secret). */
	if (gw->renew) {
		char src[512];
		int64_t exp;
		creds_renewer_describe(gw->renew, src, sizeof src, &exp);
		stats_write_section(w, "credentials");
		stats_write_str(w, "source", src);
		stats_write_num(w, "expires", (double)exp);
	}
	if (!gw->bc)
		return;
	/* "cache": the burst buffer as a whole (hits and misses are counters
	 * of common/stats.h, already in the section). */
	struct bcache_counters b;
	struct warm_counters wc = { 0 };
	bcache_counters(gw->bc, &b);
	if (gw->warm)
		warm_counters(gw->warm, &wc);
	stats_write_section(w, "cache");
	stats_write_num(w, "max_bytes", (double)gw->cfg.cache_max_bytes);
	stats_write_num(w, "used_bytes", (double)(b.used_bytes + c.used_bytes));
	stats_write_num(w, "staged_bytes", (double)c.used_bytes);
	stats_write_num(w, "clean_bytes", (double)b.used_bytes);
	stats_write_num(w, "block_size", (double)gw->cfg.cache_block_size);
	stats_write_num(w, "blocks", (double)b.blocks);
	stats_write_num(w, "evictions", (double)b.evictions);
	stats_write_num(w, "corrupt", (double)b.corrupt);
	stats_write_num(w, "dropped", (double)b.dropped);
	stats_write_num(w, "put_skipped", (double)b.put_skipped);
	stats_write_num(w, "write_errors", (double)b.write_errors);
	stats_write_num(w, "loading", b.loading ? 1 : 0);
	stats_write_sub(w, "warm");
	stats_write_num(w, "fetched", (double)wc.fetched);
	stats_write_num(w, "fetched_bytes", (double)wc.fetched_bytes);
	stats_write_num(w, "queued", (double)wc.queued);
	stats_write_num(w, "unread_bytes", (double)b.warm_bytes);
	stats_write_num(w, "used", (double)b.warm_used);
	stats_write_num(w, "wasted", (double)b.warm_wasted);
	stats_write_num(w, "skipped", (double)wc.skipped);
	stats_write_num(w, "failed", (double)wc.failed);
	stats_write_num(w, "held", (double)wc.held);
}

/* A server-side copy in parts may have left its upload open: the stage
 * records it for the next start (sync/stage/copy.h). */
void gw_copy_left_open(void *ctx, const char *bucket, const char *key,
			      int64_t since_ns)
{
	struct gateway *gw = ctx;
	stage_upload_left(gw->stage, bucket, key, since_ns);
}

/* Fill the "memory" gauges from the modules, and bring the mount's
 * gauges computed when read up to date (any thread). */
static void gw_gauges_read(struct gateway *gw)
{
	long pages = 0, resident = 0;
	FILE *f = fopen("/proc/self/statm", "r");
	if (f) {
		if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
			resident = 0;
		fclose(f);
	}
	stats_set(&gw->mem.rss, (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE));
	struct fs *fs = atomic_load(&gw->mem_fs);
	if (fs) {
		struct fs_mem m;
		fs_gauges(fs);
		fs_memory(fs, &m);
		stats_set(&gw->mem.inodes, m.inodes);
		stats_set(&gw->mem.inode_bytes, m.inode_bytes);
		stats_set(&gw->mem.dir_handles, m.dir_handles);
		stats_set(&gw->mem.dir_bytes, m.dir_bytes);
	}
	if (gw->ix) {
		struct index_mem m;
		index_mem(gw->ix, &m);
		stats_set(&gw->mem.index_bytes, m.store_bytes);
		stats_set(&gw->mem.filter_bytes, m.filter_bytes);
	}
	if (gw->rpool) {
		struct reader_pool_counters r;
		reader_pool_counters(gw->rpool, &r);
		stats_set(&gw->mem.readahead_bytes, r.bytes + r.kept);
	}
}

char *gw_stats_text(void *ctx)
{
	struct gateway *gw = ctx;
	gw_gauges_read(gw);
	return stats_to_json(&gw->st, gw->stage ? "staging" : NULL, stats_staging, gw);
}

char *gw_metrics_text(void *ctx)
{
	struct gateway *gw = ctx;
	gw_gauges_read(gw);
	struct viewset *vs = viewset_slot_pin(&gw->views);
	size_t n = viewset_count(vs);
	struct metrics_view *mv = calloc(n ? n : 1, sizeof *mv);
	int64_t now = gw_wall_ms();
	for (size_t i = 0; mv && i < n; i++) {
		const struct view *v = viewset_view(vs, i);
		struct gw_fresh f;
		gw_freshness(gw, v, &f);
		mv[i].name = view_name(v);
		mv[i].staleness_s = f.known ? (double)(now - f.fresh_ms) / 1000.0 : -1;
	}
	char *text = metrics_text(&gw->st, gw->stage, gw->bc, mv, mv ? n : 0);
	viewset_unpin(vs);
	free(mv);
	return text;
}

void gw_memory_add(struct gateway *gw)
{
	stats_group_add(&gw->st, &gw->mem_grp, memory_stats,
			sizeof memory_stats / sizeof memory_stats[0], &gw->mem);
}

