/* fs.c — see fs.h. The top of the adapter: mount, the session loop,
 * unmount, the operation table (fs_ops.c's handlers, each making its
 * request's handle) and live view changes. fs_int.h lists the layers
 * below.
 */
#include "fuse/fs_int.h"

#include "common/log.h"
#include "sync/stage/stage.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---------- read-ahead ---------- */

/* Does a mountinfo path field (octal escapes: \040 for a space) name path? */
static bool mountinfo_path_is(const char *field, const char *path)
{
	for (; *field && *path; path++) {
		unsigned c = (unsigned char)*field;
		if (field[0] == '\\' && field[1] >= '0' && field[1] <= '3' &&
		    field[2] >= '0' && field[2] <= '7' && field[3] >= '0' && field[3] <= '7') {
			c = (unsigned)((field[1] - '0') * 64 + (field[2] - '0') * 8 + (field[3] - '0'));
			field += 4;
		} else {
			field++;
		}
		if (c != (unsigned char)*path)
			return false;
	}
	return !*field && !*path;
}

static void set_readahead(const char *abs_mountpoint, unsigned kib)
{
	/* The kernel caps a FUSE mount's read-ahead at its backing device's
	 * (128 KiB by default), whatever max_readahead the mount asks for;
	 * the per-device knob raises it: sequential reads then arrive as
	 * 1 MiB requests instead of 128 KiB ones. Best effort (root only).
	 * The device comes from /proc/self/mountinfo: a stat of the mount
	 * here, before the session loop runs, would wait for ourselves. */
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[4096], dev[32] = "";
	while (f && fgets(line, sizeof line, f)) {
		char mdev[32], mpath[PATH_MAX];
		if (sscanf(line, "%*s %*s %31s %*s %4095s", mdev, mpath) == 2 &&
		    mountinfo_path_is(mpath, abs_mountpoint))
			snprintf(dev, sizeof dev, "%s", mdev);   /* the last (top) one */
	}
	if (f)
		fclose(f);
	char path[96], val[16];
	snprintf(path, sizeof path, "/sys/class/bdi/%s/read_ahead_kb", dev);
	int fd = dev[0] ? open(path, O_WRONLY | O_CLOEXEC) : -1;
	int n = snprintf(val, sizeof val, "%u", kib);
	if (fd < 0 || write(fd, val, (size_t)n) != n)
		log_debug("%s: read-ahead stays at the default: %s", dev[0] ? path : abs_mountpoint,
			  dev[0] ? strerror(errno) : "not in /proc/self/mountinfo");
	if (fd >= 0)
		close(fd);
}

/* ---------- mount, run, unmount ---------- */

/* A gateway that died leaves its mountpoint answering ENOTCONN. */
static void unmount_stale(const char *mountpoint)
{
	struct stat st;
	if (stat(mountpoint, &st) == 0 || errno != ENOTCONN)
		return;
	log_warn("%s: stale mount of a stopped gateway; unmounting it", mountpoint);
	if (umount2(mountpoint, MNT_DETACH) == 0)
		return;
	char cmd[PATH_MAX + 64];
	snprintf(cmd, sizeof cmd, "fusermount3 -u -z '%s' 2>/dev/null", mountpoint);
	if (system(cmd) != 0)
		log_error("%s: could not unmount the stale mount", mountpoint);
}

/* The core's own changes reach the kernel like the events' do. */
static void core_changed(void *ctx, const char *view, const char *path, int what)
{
	fs_notify_change(ctx, view, path, what);
}

void fs_view_changed(struct fs *fs, const char *name)
{
	fs_notify_change(fs, NULL, name, 0);
}

/* The inode table's resolver: a view name in the set of the request
 * (struct core_req) the core gives as its context. */
static size_t fs_resolve_view(const void *ctx, const char *name)
{
	return core_view_find(ctx, name);
}

/* Split the -o string: uid=, gid=, umask=, file_mode=, dir_mode= go to the
 * core (decimal ids, octal modes), the rest to FUSE (*rest, malloc'ed, NULL
 * when nothing is left). -EINVAL (logged) for a bad value. */
static int opts_split(const char *opts, struct core_owner *o, char **rest)
{
	*rest = NULL;
	memset(o, 0, sizeof *o);
	if (!opts || !*opts)
		return 0;
	char *copy = strdup(opts), *out = calloc(1, strlen(opts) + 1), *save = NULL;
	if (!copy || !out) {
		free(copy);
		free(out);
		return -ENOMEM;
	}
	int rc = 0;
	for (char *t = strtok_r(copy, ",", &save); t && !rc; t = strtok_r(NULL, ",", &save)) {
		static const char *const names[] = { "uid=", "gid=", "umask=",
						     "file_mode=", "dir_mode=" };
		int k = -1;
		for (int i = 0; i < 5 && k < 0; i++)
			if (strncmp(t, names[i], strlen(names[i])) == 0)
				k = i;
		if (k < 0) {
			if (*out)
				strcat(out, ",");
			strcat(out, t);
			continue;
		}
		const char *v = t + strlen(names[k]);
		char *end;
		errno = 0;
		unsigned long n = strtoul(v, &end, k < 2 ? 10 : 8);
		if (!*v || *end || errno || (k < 2 && n > 0xfffffffeul) ||
		    (k >= 2 && n > 07777)) {
			log_error("mount option %s: expected %s", t,
				  k < 2 ? "a number" : "an octal mode (e.g. 0640)");
			rc = -EINVAL;
		} else if (k == 0) {
			o->uid = (uid_t)n;
			o->has_uid = true;
		} else if (k == 1) {
			o->gid = (gid_t)n;
			o->has_gid = true;
		} else if (k == 2) {
			o->umask = (mode_t)n;
		} else if (k == 3) {
			o->file_mode = (mode_t)n;
		} else {
			o->dir_mode = (mode_t)n;
		}
	}
	free(copy);
	if (rc || !*out)
		free(out);
	else
		*rest = out;
	return rc;
}

/* The mount's own counter: kernel cache invalidations (fs_notify.c). */
static const struct stats_def fs_stats[] = {
	STATS_COUNTER(struct fs, inval, "fuse", "invalidations"),
};

/* .facetfs/pending: the drain's list. */
static char *fs_pending_text(void *ctx)
{
	struct fs *fs = ctx;
	return core_drain_list(fs->core);
}

static int core_make(struct fs *fs, const struct core_owner *owner)
{
	struct core_deps cd = {
		.owner = *owner,
		.copy = fs->d.copy ? *fs->d.copy : (struct copy_conf){ 0 },
		.ix = fs->d.ix, .s3 = fs->d.s3, .stage = fs->d.stage, .st = fs->d.st,
		.bc = fs->d.bc, .pins = fs->d.pins, .rpool = fs->d.rpool,
		.cold_direct = fs->d.cold_direct, .views = fs->d.views, .it = fs->it,
		.cond = fs->d.cond,
		.changed = core_changed, .changed_ctx = fs,
		.ctx = fs->d.ctx, .stats_json = fs->d.stats_json,
		.views_json = fs->d.views_json, .control = fs->d.control,
		.fresh_as_of = fs->d.fresh_as_of,
		.pending_text = fs_pending_text, .pending_ctx = fs,
	};
	int rc = core_new(&cd, &fs->core);
	if (rc == 0 && fs->d.stage) {
		struct core_drain_conf dc = { .streams = fs->d.drain_streams,
					      .delay_s = fs->d.drain_delay_s,
					      .stop_s = fs->d.stop_drain_s };
		rc = core_drain_new(fs->core, &dc);
	}
	return rc;
}

/* Staged files released with their data not in S3 and in no queue:
 * kept by the start's recovery (an upload it could not abort), or a
 * failed commit's; the next start takes them up. */
static uint64_t stage_left(struct fs *fs)
{
	struct stage_counters sc = { 0 };
	if (fs->d.stage)
		stage_counters_get(fs->d.stage, &sc);
	return sc.pending_files;
}

char *fs_sync(struct fs *fs, const char *path)
{
	char vname[256] = "";
	const char *rest = "";
	if (path) {
		while (*path == '/')
			path++;
		size_t n = strcspn(path, "/");
		if (n >= sizeof vname)
			n = sizeof vname - 1;
		memcpy(vname, path, n);
		vname[n] = '\0';
		rest = path[n] ? path + n + 1 : "";
	}
	char *report = NULL, *answer = NULL;
	/* A day at most: the caller may interrupt it; what is left stays
	 * pending and the drain goes on. */
	int rc = core_drain_sync(fs->core, path ? vname : NULL, rest, 86400, &report);
	uint64_t left = rc == 0 && !path ? stage_left(fs) : 0;
	if (left) {
		if (asprintf(&answer, "error: not all in S3: %" PRIu64 " staged file(s) "
			     "outside the drain (a failed close, or kept by the start's "
			     "recovery: see the log) wait for the next start\n", left) < 0)
			answer = NULL;
	} else if (rc == 0) {
		answer = strdup("synced\n");
	} else if (asprintf(&answer, "error: not all in S3 (%s):\n%s", strerror(-rc),
			    report ? report : "") < 0) {
		answer = NULL;
	}
	free(report);
	return answer;
}

void fs_pending(struct fs *fs, uint64_t *files, uint64_t *bytes)
{
	core_drain_pending(fs->core, files, bytes);
}

int fs_adopt(struct fs *fs)
{
	int n = core_drain_adopt_all(fs->core);
	core_mend_unsent(fs->core);
	return n;
}

int fs_mount(const char *mountpoint, const char *fuse_opts,
	     const struct fs_deps *deps, struct fs **out)
{
	int rc = -ENOMEM;
	struct core_owner owner;
	char *fopts = NULL;          /* the -o string without our own options */
	struct fs *fs = calloc(1, sizeof *fs);
	if (!fs)
		return -ENOMEM;
	fs->d = *deps;
	pthread_mutex_init(&fs->inval_lock, NULL);
	pthread_cond_init(&fs->inval_cond, NULL);
	fs->mountpoint = strdup(mountpoint);
	if (!fs->mountpoint || inode_table_new(fs_resolve_view, &fs->it) < 0)
		goto fail;
	if ((rc = opts_split(fuse_opts, &owner, &fopts)) < 0)
		goto fail;
	fuse_opts = fopts;           /* what FUSE gets */
	if ((rc = core_make(fs, &owner)) < 0)
		goto fail;
	stats_group_add(fs->d.st, &fs->grp, fs_stats, 1, fs);

	unmount_stale(mountpoint);
	struct stat st;
	if (stat(mountpoint, &st) < 0 || !S_ISDIR(st.st_mode)) {
		rc = stat(mountpoint, &st) < 0 ? -errno : -ENOTDIR;
		log_error("%s: not a directory: %s", mountpoint, strerror(-rc));
		goto fail;
	}
	char abs[PATH_MAX];          /* before mounting: later it would ask us */
	if (!realpath(mountpoint, abs))
		abs[0] = '\0';

	char *argv[] = { "facetfs", "-o",
			 "fsname=facetfs,subtype=facetfs,default_permissions",
			 fuse_opts ? "-o" : NULL, (char *)fuse_opts, NULL };
	struct fuse_args args = FUSE_ARGS_INIT(fuse_opts ? 5 : 3, argv);
	struct fuse_lowlevel_ops ops;
	fs_ops_init(&ops);
	fs->se = fuse_session_new(&args, &ops, sizeof ops, fs);
	fuse_opt_free_args(&args);
	if (!fs->se) {
		rc = -EINVAL;
		log_error("bad FUSE options: %s", fuse_opts ? fuse_opts : "");
		goto fail;
	}
	free(fopts);
	fopts = NULL;
	fuse_opts = NULL;
	if (fuse_set_signal_handlers(fs->se) != 0) {
		rc = -EIO;
		goto fail;
	}
	if (fuse_session_mount(fs->se, mountpoint) != 0) {
		rc = -EIO;
		log_error("%s: mount failed (is /dev/fuse there, and fuse3 installed?)",
			  mountpoint);
		goto fail;
	}
	fs->mounted = true;
	if (abs[0])
		set_readahead(abs, FS_READAHEAD >> 10);
	if ((rc = fs_notify_start(fs)) < 0)
		goto fail;
	*out = fs;
	return 0;
fail:
	free(fopts);
	fs_free(fs);
	return rc;
}

void fs_memory(struct fs *fs, struct fs_mem *out)
{
	struct inode_mem im;
	inode_mem(fs->it, &im);
	out->inodes = im.inodes;
	out->inode_bytes = im.bytes;
	core_dir_mem(fs->core, &out->dir_handles, &out->dir_bytes);
}

void fs_gauges(struct fs *fs)
{
	core_drain_gauges(fs->core);
}

int fs_run(struct fs *fs)
{
	struct fuse_loop_config *cfg = fuse_loop_cfg_create();
	if (!cfg)
		return -ENOMEM;
	fuse_loop_cfg_set_max_threads(cfg, 16);
	fuse_loop_cfg_set_idle_threads(cfg, 4);
	int rc = fuse_session_loop_mt(fs->se, cfg);
	fuse_loop_cfg_destroy(cfg);
	return rc < 0 ? rc : 0;
}

void fs_free(struct fs *fs)
{
	if (!fs)
		return;
	fs_notify_stop(fs);
	if (fs->se) {
		if (fs->mounted)
			fuse_session_unmount(fs->se);
		fs->mounted = false;
		fuse_remove_signal_handlers(fs->se);
		fuse_session_destroy(fs->se);
	}
	stats_group_remove(&fs->grp);
	if (fs->core)
		core_drain_free(fs->core);   /* a stop drains (stop_drain_s) */
	core_free(fs->core);
	inode_table_free(fs->it);
	pthread_mutex_destroy(&fs->inval_lock);
	pthread_cond_destroy(&fs->inval_cond);
	free(fs->mountpoint);
	free(fs);
}
