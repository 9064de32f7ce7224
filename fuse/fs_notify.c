/* fs_notify.c — kernel-cache invalidation (fs.h fs_notify_change): the
 * event pipeline and the core queue changes; one notifier thread tells the
 * kernel, never inside a FUSE request (a related request could deadlock
 * with it) and with no lock of ours held.
 */
#include "fuse/fs_int.h"

#include "common/lock.h"
#include "common/log.h"
#include "common/stats.h"
#include "views/index.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct inval {
	uint64_t parent;         /* 0: invalidate inode `ino` instead */
	uint64_t ino;
	char name[CORE_NAME_MAX + 1];
};

/* A whole view appeared, changed or went away: its name in the root, and
 * with it everything the kernel cached below. */
static void invalidate_view(struct fs *fs, const char *name)
{
	uint64_t ino;
	fuse_lowlevel_notify_inval_entry(fs->se, INODE_ROOT, name, strlen(name));
	if (inode_find(fs->it, name, "", &ino))
		fuse_lowlevel_notify_inval_inode(fs->se, ino, 0, 0);
	fuse_lowlevel_notify_inval_inode(fs->se, INODE_ROOT, 0, 0);
	stats_inc(&fs->inval);
}

/* Is the directory path[0, len) of view vname one made with mkdir here? */
static bool dir_made(struct fs *fs, const char *vname, const char *path, size_t len)
{
	char dir[PATH_MAX];
	if (len >= sizeof dir)
		return false;
	memcpy(dir, path, len);
	dir[len] = '\0';
	return core_dir_made(fs->core, vname, dir);
}

/* Invalidate what the kernel may cache of (view, path); the job names its
 * view: nothing to look up in a view set, which may have changed since the
 * job was queued (the inodes go by name too). */
static void invalidate(struct fs *fs, const char *vname, const char *path, int what)
{
	/* A name made here: the kernel has its entry from our reply (and
	 * dropping it would make the kernel forget the fresh inode). */
	bool replied = what & CORE_CHANGE_REPLIED;
	what &= ~CORE_CHANGE_REPLIED;
	if (!vname) {
		invalidate_view(fs, path);
		return;
	}
	char prefix[PATH_MAX];
	size_t plen = strlen(path);
	if (plen >= sizeof prefix)
		return;
	struct inval todo[64];
	size_t n = 0;

	/* Each level (parent dir, component) the kernel may have cached. For
	 * a change of contents only the leaf matters; names appear and vanish
	 * at every level when objects are added or removed (implicit dirs),
	 * but not a directory made with mkdir (its entry stays right; and
	 * invalidating it would make the kernel drop everything it cached
	 * below it). */
	size_t start = 0;
	bool leaf_queued = false;        /* the name's own entry is in todo */
	for (;;) {
		const char *slash = strchr(path + start, '/');
		size_t end = slash ? (size_t)(slash - path) : plen;
		bool leaf = !slash;
		if (what != INDEX_CHANGED || leaf) {
			memcpy(prefix, path, start ? start - 1 : 0);
			prefix[start ? start - 1 : 0] = '\0';
			uint64_t parent;
			bool looked_up_in = false;
			/* A name added where no LOOKUP was ever answered cannot
			 * be a cached negative entry: nothing to invalidate (a
			 * first scan adds 100,000s of names) */
			if (n < 64 && end - start <= CORE_NAME_MAX && !(leaf && replied) &&
			    inode_find_dir(fs->it, vname, prefix, &parent, &looked_up_in) &&
			    (what != INDEX_ADDED || looked_up_in) &&
			    (leaf || !dir_made(fs, vname, path, end))) {
				todo[n].parent = parent;
				memcpy(todo[n].name, path + start, end - start);
				todo[n].name[end - start] = '\0';
				n++;
				leaf_queued = leaf;
			}
		}
		if (leaf)
			break;
		start = end + 1;
	}
	uint64_t ino;
	/* A new version while readers of the old one use the inode's pages:
	 * they keep that inode (and its size); the name gets a new one. */
	bool retired = false;
	if (what == INDEX_CHANGED && leaf_queued)   /* else it could not be unnamed */
		retired = core_retire_changed(fs->core, vname, path, &ino);
	if (!retired && what != INDEX_ADDED && n < 64 && inode_find(fs->it, vname, path, &ino)) {
		todo[n].parent = 0;
		todo[n].ino = ino;
		n++;
	}
	/* No lock is held here: the kernel may call back into us. */
	for (size_t i = 0; i < n; i++) {
		int rc;
		if (todo[i].parent && what == INDEX_CHANGED && !retired)
			continue;    /* the name itself did not change */
		if (todo[i].parent)
			rc = fuse_lowlevel_notify_inval_entry(fs->se, todo[i].parent,
							      todo[i].name,
							      strlen(todo[i].name));
		else
			rc = fuse_lowlevel_notify_inval_inode(fs->se, todo[i].ino, 0, 0);
		if (rc == 0)
			stats_inc(&fs->inval);
		else if (rc != -ENOENT)
			log_debug("invalidate %s/%s: %s", vname, path, strerror(-rc));
	}
}

void fs_notify_change(struct fs *fs, const char *view, const char *path, int what)
{
	if (!fs->mounted)
		return;
	if (view && what == INDEX_REMOVED)
		core_dir_removed(fs->core, view, path);
	/* The change is in the index already: while the kernel holds no inode
	 * of any view, it caches nothing below one, and what it looks up from
	 * now on is read after the change. A first scan before any listing
	 * then queues nothing. */
	if (view && inode_count(fs->it) == 0)
		return;
	struct inval_job *j = calloc(1, sizeof *j);
	if (!j || !(j->path = strdup(path)) || (view && !(j->view = strdup(view)))) {
		if (j)
			free(j->path);
		free(j);
		log_error("invalidate %s: out of memory; the kernel may show it stale "
			  "for up to %.0f s", path, FS_TIMEOUT);
		return;
	}
	j->what = what;
	j->next = NULL;
	mod_lock(&fs->inval_lock);
	if (fs->inval_tail)
		fs->inval_tail->next = j;
	else
		fs->inval_head = j;
	fs->inval_tail = j;
	fs->inval_queued++;
	pthread_cond_broadcast(&fs->inval_cond);
	mod_unlock(&fs->inval_lock);
}

int fs_settle(struct fs *fs, int timeout_ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	int64_t ns = ts.tv_nsec + (int64_t)timeout_ms * 1000000LL;
	ts.tv_sec += ns / 1000000000LL;
	ts.tv_nsec = ns % 1000000000LL;
	int rc = 0;
	mod_lock(&fs->inval_lock);
	uint64_t target = fs->inval_queued;
	while (fs->inval_done < target && fs->inval_running && rc == 0)
		rc = pthread_cond_timedwait(&fs->inval_cond, &fs->inval_lock, &ts);
	bool done = fs->inval_done >= target || !fs->inval_running;
	mod_unlock(&fs->inval_lock);
	return done ? 0 : -ETIMEDOUT;
}

static void *notifier_main(void *arg)
{
	struct fs *fs = arg;
	pthread_setname_np(pthread_self(), "fs-notify");
	mod_lock(&fs->inval_lock);
	for (;;) {
		while (!fs->inval_head && !fs->inval_stop)
			pthread_cond_wait(&fs->inval_cond, &fs->inval_lock);
		struct inval_job *j = fs->inval_head;
		if (!j)
			break;       /* stopping, queue drained */
		fs->inval_head = j->next;
		if (!fs->inval_head)
			fs->inval_tail = NULL;
		mod_unlock(&fs->inval_lock);
		invalidate(fs, j->view, j->path, j->what);
		free(j->view);
		free(j->path);
		free(j);
		mod_lock(&fs->inval_lock);
		fs->inval_done++;
		pthread_cond_broadcast(&fs->inval_cond);   /* fs_settle */
	}
	mod_unlock(&fs->inval_lock);
	return NULL;
}

int fs_notify_start(struct fs *fs)
{
	if (pthread_create(&fs->inval_thread, NULL, notifier_main, fs) != 0)
		return -EAGAIN;
	fs->inval_running = true;
	return 0;
}

void fs_notify_stop(struct fs *fs)
{
	if (fs->inval_running) {
		mod_lock(&fs->inval_lock);
		fs->inval_stop = true;
		pthread_cond_signal(&fs->inval_cond);
		mod_unlock(&fs->inval_lock);
		pthread_join(fs->inval_thread, NULL);
		fs->inval_running = false;
	}
	for (struct inval_job *j = fs->inval_head, *n; j; j = n) {
		n = j->next;
		free(j->view);
		free(j->path);
		free(j);
	}
	fs->inval_head = fs->inval_tail = NULL;
}
