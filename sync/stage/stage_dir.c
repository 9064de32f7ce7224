/*
 * stage_dir.c — the staging directory: its descriptors (made again when
 * the directory is removed under the gateway), the names of what it holds,
 * the syncs the durability setting asks for, the durability file, the
 * budget of the bytes staged in it, and each staged file's data
 * descriptor (parked, reopened for a use). The bottom of the stage's chain
 * (stage_int.h): it calls no other file of the module.
 */
#include "sync/stage/stage_int.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/file.h"
#include "common/lock.h"
#include "common/log.h"

/* ---- the budget ------------------------------------------------------- */

int stage_charge(struct stage *st, uint64_t n)
{
	int err = 0;
	mod_lock(&st->lock);
	if (st->used > st->max_bytes || n > st->max_bytes - st->used) {
		/* (used may be past max: a smaller budget at a start that
		 * found more staged; then nothing fits) */
		st->cnt.enospc++;
		err = -ENOSPC;
	} else {
		st->used += n;
	}
	mod_unlock(&st->lock);
	return err;
}

void stage_room_wait(struct stage *st, uint64_t n)
{
	if (!st->full_timeout_ns)
		return;
	mod_lock(&st->lock);
	struct timespec t0, now;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int64_t start = (int64_t)t0.tv_sec * 1000000000 + t0.tv_nsec, moved = start;
	uint64_t used = st->used;
	bool waited = false;
	while (st->cnt.sealed_bytes && st->used <= st->max_bytes &&
	       n > st->max_bytes - st->used) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		int64_t t = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
		if (st->used < used) {       /* an upload freed bytes: progress */
			moved = t;
			used = st->used;
		}
		if (t - moved >= st->full_timeout_ns)
			break;
		waited = true;
		struct timespec dl;
		clock_gettime(CLOCK_REALTIME, &dl);
		dl.tv_nsec += 200000000;
		if (dl.tv_nsec >= 1000000000) {
			dl.tv_sec++;
			dl.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&st->room, &st->lock, &dl);
	}
	if (waited) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		st->cnt.blocked_ms += (uint64_t)(((int64_t)now.tv_sec * 1000000000 +
						   now.tv_nsec - start) / 1000000);
	}
	mod_unlock(&st->lock);
}

void stage_grown(struct stage *st)
{
	if (st->grew)
		st->grew(st->grew_ctx);
}

void stage_uncharge(struct stage *st, uint64_t n)
{
	mod_lock(&st->lock);
	assert(st->used >= n);
	st->used -= n;
	pthread_cond_broadcast(&st->room);
	mod_unlock(&st->lock);
}

void stage_count_efbig(struct stage *st)
{
	mod_lock(&st->lock);
	st->cnt.efbig++;
	mod_unlock(&st->lock);
}

/* ---- names and syncs -------------------------------------------------- */

void stage_name(uint64_t id, const char *ext, char out[32])
{
	snprintf(out, 32, "%016" PRIx64 "%s", id, ext);
}

int stage_sync(struct stage *st, int fd, bool data)
{
	lock_assert_none("stage_sync");
	if (st->durability == STAGE_DURABLE_PROCESS)
		return 0;
	int err = (data ? fdatasync(fd) : fsync(fd)) == 0 ? 0 : -errno;
	mod_lock(&st->lock);
	st->cnt.syncs++;
	mod_unlock(&st->lock);
	return err;
}

void stage_kick(struct stage *st, int fd, uint64_t off, uint64_t end)
{
	lock_assert_none("stage_kick");
	uint64_t k = STAGE_KICK_BYTES;
	if (st->durability == STAGE_DURABLE_PROCESS || end / k == off / k)
		return;
	uint64_t to = end / k * k, from = to - k;
	/* Best effort: a failure shows at the sync that follows. */
	(void)sync_file_range(fd, (off64_t)from, (off64_t)k, SYNC_FILE_RANGE_WRITE);
}

/* ---- a staged file's data descriptor ---------------------------------- */

/* One descriptor more (n 1) or less (-1) held by the stage's files. */
static void data_fds_add(struct stage *st, int n)
{
	mod_lock(&st->lock);
	st->cnt.data_fds += (uint64_t)(int64_t)n;
	mod_unlock(&st->lock);
}

void stage_data_set(struct stage_file *f, int fd)
{
	mod_lock(&f->fd_lock);
	assert(f->data_fd < 0);
	f->data_fd = fd;
	mod_unlock(&f->fd_lock);
	data_fds_add(f->st, 1);
}

/* ID.data opened again for f (f->fd_lock held): the descriptor, or
 * -errno; a missing file makes f lost (logged once). */
static int data_reopen_locked(struct stage_file *f)
{
	struct stage *st = f->st;
	char name[32];
	stage_name(f->id, ".data", name);
	int fd = openat(st->dir_fd, name, O_RDWR | O_CLOEXEC);
	if (fd >= 0) {
		f->data_fd = fd;
		data_fds_add(st, 1);
		return fd;
	}
	int err = -errno;
	if (err == -ENOENT) {
		/* The id only: the names may change under f->lock meanwhile. */
		f->lost = true;
		log_error("stage: staged file %016" PRIx64 " is gone from %s (the "
			  "directory was removed while it waited with no descriptor "
			  "open): its data is lost", f->id, st->dir);
		return -EIO;
	}
	log_error("stage: cannot open staged file %s/%s again: %s", st->dir, name,
		  strerror(-err));
	return err;
}

int stage_data_get(struct stage_file *f, bool keep)
{
	mod_lock(&f->fd_lock);
	int fd = f->data_fd;
	if (f->lost)
		fd = -EIO;
	else if (fd < 0)
		fd = data_reopen_locked(f);
	if (fd >= 0) {
		f->fd_users++;
		if (keep)
			f->parked = false;
	}
	mod_unlock(&f->fd_lock);
	return fd;
}

/* Close f's descriptor unless it holds the file's only copy (f->fd_lock
 * held, no use in flight). */
static void data_close_locked(struct stage_file *f)
{
	struct stat sb;
	if (f->data_fd < 0)
		return;
	if (fstat(f->data_fd, &sb) == 0 && sb.st_nlink == 0) {
		f->parked = false;   /* ID.data went with the directory: kept */
		return;
	}
	close(f->data_fd);
	f->data_fd = -1;
	data_fds_add(f->st, -1);
}

void stage_data_put(struct stage_file *f)
{
	mod_lock(&f->fd_lock);
	assert(f->fd_users > 0);
	if (--f->fd_users == 0 && f->parked)
		data_close_locked(f);
	mod_unlock(&f->fd_lock);
}

void stage_data_park(struct stage_file *f)
{
	mod_lock(&f->fd_lock);
	f->parked = true;
	if (!f->fd_users)
		data_close_locked(f);
	mod_unlock(&f->fd_lock);
}

int stage_data_sync(struct stage_file *f)
{
	if (f->st->durability == STAGE_DURABLE_PROCESS)
		return 0;            /* no sync: no descriptor needed */
	int fd = stage_data_get(f, false);
	if (fd < 0)
		return fd;
	int err = stage_sync(f->st, fd, true);
	stage_data_put(f);
	return err;
}

void stage_data_close(struct stage_file *f)
{
	assert(!f->fd_users);
	if (f->data_fd < 0)
		return;
	close(f->data_fd);
	f->data_fd = -1;
	data_fds_add(f->st, -1);
}

/* ---- the directory ---------------------------------------------------- */

int stage_dir_open(struct stage *st, DIR **out)
{
	int dfd = openat(st->dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	*out = dfd >= 0 ? fdopendir(dfd) : NULL;
	if (*out)
		return 0;
	int err = -errno;
	if (dfd >= 0)
		close(dfd);
	return err;
}

/* ---- spare files -------------------------------------------------------
 *
 * A staged file costs the directory two names (ID.data, ID.jnl), and a
 * journal replaced atomically a third for a moment (ID.jnl.tmp). Made with
 * O_CREAT and removed with unlink, each would take a new inode and free
 * one, and making an inode is slow where many were freed lately: ext4
 * without a journal skips, with a lookup each, every inode freed in the
 * last half minute or so, which made a create cost milliseconds and most
 * of the gateway's CPU during a cp -r of 1,000 files. So a removed name's
 * file is emptied and kept as "spare.N" (up to STAGE_SPARES_MAX), and a
 * name being made takes a spare by a rename: a steady flow of staged
 * files makes and frees no inode.
 *   A spare is empty whenever it is listed (st->spares, under st->lock):
 * stage_remove_at renames the file to spare.N, truncates it, and only then
 * lists it; a spare being filled is counted in n_filling so that the list
 * stays under the cap. A crash between the rename and the truncation
 * leaves a spare with bytes in it: dir_scan empties every spare it finds
 * (or removes it past the cap). Recovery reads only ID names. A renewal
 * forgets the list: the spares went with the directory.
 *   Only under PROCESS: there a crash is the gateway's death, after which
 * every rename and truncation done is in the directory. Under POWER a
 * power loss may keep a truncation and lose the rename before it (a
 * journal would come back empty, and recovery would set its file aside),
 * and the fsyncs, not the inodes, are the cost of a file there. */

static void spare_name(uint32_t n, char out[32])
{
	snprintf(out, 32, "spare.%" PRIu32, n);
}

/* A listed spare taken (its number in *n), or false. */
static bool spare_take(struct stage *st, uint32_t *n)
{
	mod_lock(&st->lock);
	bool got = st->n_spares > 0 && !st->spares_off;
	if (got)
		*n = st->spares[--st->n_spares];
	mod_unlock(&st->lock);
	return got;
}

/* Room for one more spare, reserved under the number *n; or false. */
static bool spare_reserve(struct stage *st, uint32_t *n)
{
	mod_lock(&st->lock);
	bool room = st->spares && !st->spares_off &&
		    st->durability == STAGE_DURABLE_PROCESS &&
		    st->n_spares + st->n_filling < STAGE_SPARES_MAX;
	if (room) {
		st->n_filling++;
		*n = st->spare_seq++;
	}
	mod_unlock(&st->lock);
	return room;
}

/* A reserved (filled: empty and named spare.n) or taken spare is listed;
 * otherwise its reservation ends. off: the file system cannot rename
 * without replacing: no spare is used again. */
static void spare_list(struct stage *st, uint32_t n, bool reserved, bool listed, bool off)
{
	mod_lock(&st->lock);
	if (reserved)
		st->n_filling--;
	if (off)
		st->spares_off = true;
	if (listed && st->n_spares < STAGE_SPARES_MAX)
		st->spares[st->n_spares++] = n;
	st->cnt.spare_files = st->n_spares;
	mod_unlock(&st->lock);
}

/* name made from a spare, opened with flags (no O_CREAT): the descriptor;
 * -EEXIST when name exists and flags hold O_EXCL; -ENOENT when no spare
 * could be used (the caller makes the file). */
static int spare_use(struct stage *st, const char *name, int flags)
{
	uint32_t n;
	if (!spare_take(st, &n))
		return -ENOENT;
	char sp[32];
	spare_name(n, sp);
	int dfd = st->dir_fd;
	if (renameat2(dfd, sp, dfd, name, RENAME_NOREPLACE) != 0) {
		int e = errno;
		/* EEXIST: name is there; the spare stays. ENOENT: it went
		 * (a removed directory): forgotten. */
		spare_list(st, n, false, e == EEXIST, e == EINVAL || e == ENOSYS);
		return e == EEXIST && (flags & O_EXCL) ? -EEXIST : -ENOENT;
	}
	int fd = openat(dfd, name, (flags & ~(O_CREAT | O_EXCL)) | O_CLOEXEC);
	if (fd >= 0) {
		spare_list(st, n, false, false, false);
		return fd;
	}
	int err = -errno;
	bool back = renameat(dfd, name, dfd, sp) == 0;
	spare_list(st, n, false, back, false);
	return err;
}

int stage_create_at(struct stage *st, const char *name, int flags)
{
	int fd = spare_use(st, name, flags);
	if (fd != -ENOENT)
		return fd;
	/* A directory removed under it: made again, and tried again; a few
	 * times, as it may be removed again meanwhile (renewals are bounded by
	 * STAGE_RENEW_MAX). */
	fd = openat(st->dir_fd, name, flags | O_CREAT | O_CLOEXEC, 0600);
	for (int i = 0; i < 3 && fd < 0 && errno == ENOENT && stage_dir_renew(st) == 0; i++)
		fd = openat(st->dir_fd, name, flags | O_CREAT | O_CLOEXEC, 0600);
	return fd < 0 ? -errno : fd;
}

int stage_remove_at(struct stage *st, const char *name)
{
	uint32_t n;
	int dfd = st->dir_fd;
	if (!spare_reserve(st, &n))
		return unlinkat(dfd, name, 0) == 0 ? 0 : -errno;
	char sp[32];
	spare_name(n, sp);
	if (renameat(dfd, name, dfd, sp) != 0) {
		int err = -errno;
		spare_list(st, n, true, false, false);
		if (err == -ENOENT)
			return err;
		return unlinkat(dfd, name, 0) == 0 ? 0 : -errno;
	}
	int fd = openat(dfd, sp, O_WRONLY | O_TRUNC | O_CLOEXEC);
	if (fd >= 0)
		close(fd);
	else
		unlinkat(dfd, sp, 0);
	spare_list(st, n, true, fd >= 0, false);
	return 0;
}

/* dir_scan's part: a spare found at the start, emptied and listed, or
 * removed past the cap. */
static void spare_found(struct stage *st, const char *name)
{
	char *end;
	unsigned long n = strtoul(name + 6, &end, 10);
	if (*end || end == name + 6 || n > UINT32_MAX)
		return;
	int fd = -1;
	if (st->n_spares < STAGE_SPARES_MAX && st->durability == STAGE_DURABLE_PROCESS)
		fd = openat(st->dir_fd, name, O_WRONLY | O_TRUNC | O_CLOEXEC);
	if (fd < 0) {
		unlinkat(st->dir_fd, name, 0);
		return;
	}
	close(fd);
	st->spares[st->n_spares++] = (uint32_t)n;
	if (n >= st->spare_seq)
		st->spare_seq = (uint32_t)n + 1;
	st->cnt.spare_files = st->n_spares;
}

/* Charges what is already staged and finds the next free id. */
static int dir_scan(struct stage *st)
{
	DIR *d;
	int err = stage_dir_open(st, &d);
	if (err)
		return err;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (strncmp(de->d_name, "spare.", 6) == 0) {
			spare_found(st, de->d_name);
			continue;
		}
		char *end;
		uint64_t id = strtoull(de->d_name, &end, 16);
		if (end != de->d_name + 16)
			continue;
		if (id >= st->next_id)
			st->next_id = id + 1;
		struct stat sb;
		if (strcmp(end, ".data") == 0 &&
		    fstatat(st->dir_fd, de->d_name, &sb, 0) == 0)
			st->used += (uint64_t)sb.st_size;
		char dn[32];
		if (strcmp(end, ".jnl") == 0) {
			st->cnt.pending_files++;
			stage_name(id, ".data", dn);
			if (fstatat(st->dir_fd, dn, &sb, 0) == 0)
				st->pending_bytes += (uint64_t)sb.st_size;
		}
	}
	closedir(d);
	return 0;
}

/* mkdir -p path, then open it. A parent removed between two steps (the
 * directory removed again while it is made again) makes the step fail with
 * ENOENT: it starts over, a few times. */
static int open_dir(const char *path, int *fd)
{
	int err = 0;
	for (int i = 0; i < 4; i++) {
		*fd = -1;
		err = file_mkdir_p(path, 0700);
		if (!err) {
			*fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			err = *fd < 0 ? -errno : 0;
		}
		if (err != -ENOENT)
			break;
	}
	return err;
}

/* Whether the directory st->dir_fd names was removed. renew_lock held. */
static bool dir_gone(struct stage *st)
{
	struct stat sb;
	return !(fstat(st->dir_fd, &sb) == 0 && sb.st_nlink > 0);
}

int stage_dir_renew(struct stage *st)
{
	mod_lock(&st->renew_lock);
	bool gone = dir_gone(st), spent = st->n_renewed == STAGE_RENEW_MAX;
	mod_unlock(&st->renew_lock);
	if (!gone)
		return 0;                    /* there (renewed meanwhile) */
	if (spent)
		return -ENOENT;
	/* Made with no lock held; installed below unless another thread's
	 * renewal came first. */
	int dfd = -1, rfd = -1;
	int err = open_dir(st->dir, &dfd);
	if (!err)
		err = open_dir(st->rec_dir, &rfd);
	if (err) {
		if (dfd >= 0)
			close(dfd);
		log_error("stage: %s was removed while in use and cannot be made "
			  "again: %s", st->dir, strerror(-err));
		return err;
	}
	mod_lock(&st->renew_lock);
	if (!dir_gone(st) || st->n_renewed == STAGE_RENEW_MAX) {
		err = dir_gone(st) ? -ENOENT : 0;
		mod_unlock(&st->renew_lock);
		close(dfd);
		close(rfd);
		return err;
	}
	st->retired[2 * st->n_renewed] = atomic_exchange(&st->dir_fd, dfd);
	st->retired[2 * st->n_renewed + 1] = atomic_exchange(&st->rec_fd, rfd);
	st->n_renewed++;
	/* Files released with uncommitted data went with the directory, and
	 * so did open files parked without a descriptor. */
	mod_lock(&st->lock);
	uint64_t lost = st->pending_bytes < st->used ? st->pending_bytes : st->used;
	uint64_t lost_files = st->cnt.pending_files;
	uint64_t parked = st->n_open > st->cnt.data_fds ? st->n_open - st->cnt.data_fds : 0;
	st->n_spares = 0;               /* they went with the directory */
	st->cnt.spare_files = 0;
	st->used -= lost;
	st->pending_bytes = 0;
	st->cnt.pending_files = 0;
	mod_unlock(&st->lock);
	mod_unlock(&st->renew_lock);
	if (lost_files)
		log_error("stage: %" PRIu64 " staged files released with uncommitted "
			  "data (%" PRIu64 " bytes) went with the removed %s", lost_files,
			  lost, st->dir);
	if (parked)
		log_error("stage: %" PRIu64 " staged files open with no descriptor "
			  "(parked: closed, e.g. waiting for a write-back upload) went "
			  "with the removed %s: their data is lost", parked, st->dir);
	log_warn("stage: %s was removed while in use: made again; files with a "
		 "descriptor open at that moment keep their data in it only (their "
		 "commits still upload it; a crash before would lose it)", st->dir);
	if (stage_durability_open(st) != 0)
		log_warn("stage: cannot write the durability file in %s", st->dir);
	if (st->renewed)
		st->renewed(st->grew_ctx);
	return 0;
}


int stage_dir_setup(struct stage *st)
{
	int dfd = -1, rfd = -1;
	int err = open_dir(st->dir, &dfd);
	st->dir_fd = dfd;
	if (!err)
		err = open_dir(st->rec_dir, &rfd);
	st->rec_fd = rfd;
	if (!err && !(st->spares = calloc(STAGE_SPARES_MAX, sizeof *st->spares)))
		err = -ENOMEM;
	if (!err)
		err = dir_scan(st);
	if (!err)
		err = stage_durability_open(st);
	return err;
}

void stage_dir_close(struct stage *st)
{
	free(st->spares);
	st->spares = NULL;
	if (st->dir_fd >= 0)
		close(st->dir_fd);
	if (st->rec_fd >= 0)
		close(st->rec_fd);
	for (unsigned i = 0; i < 2 * st->n_renewed; i++)
		if (st->retired[i] >= 0)
			close(st->retired[i]);
}

/* ---- the durability file ---------------------------------------------- */

#define DURABILITY_FILE "durability"

/* This boot's id ("" if the kernel does not say). */
static void boot_id(char out[64])
{
	out[0] = '\0';
	FILE *fp = fopen("/proc/sys/kernel/random/boot_id", "re");
	if (!fp)
		return;
	if (!fgets(out, 64, fp))
		out[0] = '\0';
	fclose(fp);
	out[strcspn(out, "\n")] = '\0';
}

/* "facetfs-stage-durability 1\nmode power|process\nboot ID\n", written
 * durably whatever the setting (once per start). */
static int durability_write(struct stage *st, const char *boot)
{
	char text[160];
	int len = snprintf(text, sizeof text,
			   "facetfs-stage-durability 1\nmode %s\nboot %s\n",
			   st->durability == STAGE_DURABLE_PROCESS ? "process" : "power",
			   boot);
	int err = 0;
	int fd = openat(st->dir_fd, DURABILITY_FILE ".tmp",
			O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (write(fd, text, (size_t)len) != len)
		err = -EIO;
	if (!err && fsync(fd) != 0)
		err = -errno;
	close(fd);
	if (!err && renameat(st->dir_fd, DURABILITY_FILE ".tmp", st->dir_fd,
			     DURABILITY_FILE) != 0)
		err = -errno;
	if (!err && fsync(st->dir_fd) != 0)
		err = -errno;
	if (err)
		log_error("stage: cannot write %s/%s: %s", st->dir, DURABILITY_FILE,
			  strerror(-err));
	return err;
}

int stage_durability_open(struct stage *st)
{
	lock_assert_none("stage_durability_open");
	char boot[64], text[160] = "", mode[16] = "", was[64] = "";
	boot_id(boot);
	int fd = openat(st->dir_fd, DURABILITY_FILE, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t n = read(fd, text, sizeof text - 1);
		text[n > 0 ? n : 0] = '\0';
		close(fd);
		if (sscanf(text, "facetfs-stage-durability 1\nmode %15s\nboot %63s",
			   mode, was) < 1)
			mode[0] = '\0';
	}
	/* No file: a first start, or a run before the setting (POWER). */
	bool was_process = strcmp(mode, "process") == 0;
	if (fd >= 0 && !was_process && strcmp(mode, "power") != 0) {
		log_warn("stage: %s/%s is malformed: trusting the staged files as "
			 "written with fsync", st->dir, DURABILITY_FILE);
	}
	if (was_process && (!*boot || strcmp(boot, was) != 0)) {
		/* Written without fsync, and the machine restarted since: what
		 * is on disk may be stale or torn. Keep the file until the
		 * recovery that moves it all is done (stage_recover). */
		st->distrust = true;
		log_warn("stage: the staged files in %s were written with "
			 "cache.durability \"process\" before the machine restarted: "
			 "recovery moves them all to %s, uploading nothing", st->dir,
			 st->rec_dir);
		return 0;
	}
	/* From PROCESS to POWER on the same boot: make the earlier run's
	 * files durable before saying they are. */
	if (was_process && st->durability == STAGE_DURABLE_POWER &&
	    syncfs(st->dir_fd) != 0)
		return -errno;
	if (was_process && st->durability == STAGE_DURABLE_PROCESS &&
	    strcmp(boot, was) == 0)
		return 0;    /* the file already says so */
	return durability_write(st, boot);
}

int stage_durability_trust(struct stage *st)
{
	char boot[64];
	boot_id(boot);
	int err = durability_write(st, boot);
	if (!err)
		st->distrust = false;
	return err;
}
