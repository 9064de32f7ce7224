/*
 * fuse_sink.c — what does a copy of many small files through FUSE cost
 * here before any S3 request?
 *
 * A benchmark program (bench_rw.sh section "small"), not part of facetfs.
 * It mounts a writable directory tree that keeps nothing: mkdir makes a
 * directory (kept, so that cp can go on into it), create makes a file
 * that is never found again, writes are thrown away, flush succeeds. The
 * mount carries the gateway's options (default_permissions, libfuse's
 * multi-threaded loop of at most 16 threads, 4 idle) and its timeouts
 * (1 h for entries and attributes, negative entries cached), so that the
 * kernel sends it the requests it sends the gateway per file (lookup,
 * create, getxattr, write, flush, release, the directory's getattr): a
 * `cp -r` into it is the floor of any FUSE file system here. It prints
 * the requests it answered, by kind, when unmounted.
 *
 *   fuse-sink MOUNTPOINT
 *
 * Runs in the foreground until unmounted (fusermount3 -u MOUNTPOINT).
 * At most MAX_DIRS directories; mkdir beyond them fails with ENOSPC.
 */
#define FUSE_USE_VERSION 314     /* as the gateway: the 3.14 loop config */
#include <fuse_lowlevel.h>

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_DIRS   4096
#define TIMEOUT    3600.0
#define SINK_BLKSIZE (1 << 20)   /* a file's st_blksize, as the gateway's */
#define FILE_BASE  ((fuse_ino_t)1 << 40)     /* files' inode numbers */

struct dir {
	fuse_ino_t parent;
	char name[NAME_MAX + 1];
};

/* The requests counted, printed at the unmount. */
enum { R_LOOKUP, R_GETATTR, R_MKDIR, R_CREATE, R_WRITE, R_GETXATTR, R_FLUSH,
       R_RELEASE, R_N };
static const char *const req_names[R_N] = {
	"lookup", "getattr", "mkdir", "create", "write", "getxattr", "flush", "release",
};

struct sink {
	pthread_mutex_t lock;        /* guards dirs, n_dirs */
	struct dir dirs[MAX_DIRS];   /* inode FUSE_ROOT_ID + 1 + i */
	size_t n_dirs;
	atomic_uint_fast64_t next_file;
	atomic_uint_fast64_t reqs[R_N];
};

/* The sink, the request of kind r counted. */
static struct sink *sink_of(fuse_req_t req, int r)
{
	struct sink *s = fuse_req_userdata(req);
	atomic_fetch_add(&s->reqs[r], 1);
	return s;
}

static void attr_of(fuse_ino_t ino, struct stat *st)
{
	memset(st, 0, sizeof *st);
	st->st_ino = ino;
	st->st_uid = getuid();
	st->st_gid = getgid();
	if (ino < FILE_BASE) {
		st->st_mode = S_IFDIR | 0755;
		st->st_nlink = 2;
	} else {
		st->st_mode = S_IFREG | 0644;
		st->st_nlink = 1;
	}
	st->st_blksize = SINK_BLKSIZE;
}

static void reply_new(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fuse_entry_param e = { .ino = ino, .attr_timeout = TIMEOUT,
				      .entry_timeout = TIMEOUT };
	attr_of(ino, &e.attr);
	if (fi)
		fuse_reply_create(req, &e, fi);
	else
		fuse_reply_entry(req, &e);
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct sink *s = sink_of(req, R_LOOKUP);
	fuse_ino_t ino = 0;
	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < s->n_dirs && !ino; i++)
		if (s->dirs[i].parent == parent && strcmp(s->dirs[i].name, name) == 0)
			ino = FUSE_ROOT_ID + 1 + i;
	pthread_mutex_unlock(&s->lock);
	if (ino) {
		reply_new(req, ino, NULL);
		return;
	}
	struct fuse_entry_param e = { .entry_timeout = TIMEOUT };   /* negative */
	fuse_reply_entry(req, &e);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)fi;
	sink_of(req, R_GETATTR);
	struct stat st;
	attr_of(ino, &st);
	fuse_reply_attr(req, &st, TIMEOUT);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	(void)mode;
	struct sink *s = sink_of(req, R_MKDIR);
	if (strlen(name) > NAME_MAX) {
		fuse_reply_err(req, ENAMETOOLONG);
		return;
	}
	pthread_mutex_lock(&s->lock);
	fuse_ino_t ino = 0;
	if (s->n_dirs < MAX_DIRS) {
		struct dir *d = &s->dirs[s->n_dirs];
		d->parent = parent;
		snprintf(d->name, sizeof d->name, "%s", name);
		ino = FUSE_ROOT_ID + 1 + s->n_dirs++;
	}
	pthread_mutex_unlock(&s->lock);
	if (!ino)
		fuse_reply_err(req, ENOSPC);
	else
		reply_new(req, ino, NULL);
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		      mode_t mode, struct fuse_file_info *fi)
{
	(void)parent, (void)name, (void)mode;
	reply_new(req, FILE_BASE + atomic_fetch_add(&sink_of(req, R_CREATE)->next_file, 1), fi);
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size,
		     off_t off, struct fuse_file_info *fi)
{
	(void)ino, (void)buf, (void)off, (void)fi;
	sink_of(req, R_WRITE);
	fuse_reply_write(req, size);
}

/* The kernel asks security.capability before each write; the gateway
 * answers "not supported" for that namespace. */
static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	(void)ino, (void)name, (void)size;
	sink_of(req, R_GETXATTR);
	fuse_reply_err(req, EOPNOTSUPP);
}

static void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino, (void)fi;
	sink_of(req, R_FLUSH);
	fuse_reply_err(req, 0);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino, (void)fi;
	sink_of(req, R_RELEASE);
	fuse_reply_err(req, 0);
}

static const struct fuse_lowlevel_ops ops = {
	.lookup = op_lookup, .getattr = op_getattr, .mkdir = op_mkdir,
	.create = op_create, .write = op_write, .getxattr = op_getxattr,
	.flush = op_flush, .release = op_release,
};

int main(int argc, char **argv)
{
	static struct sink s;        /* too big for the stack */
	if (argc != 2) {
		fprintf(stderr, "usage: fuse-sink MOUNTPOINT\n");
		return 2;
	}
	pthread_mutex_init(&s.lock, NULL);
	char *args_v[] = { "fuse-sink", "-o", "default_permissions", NULL };
	struct fuse_args args = FUSE_ARGS_INIT(3, args_v);
	struct fuse_session *se = fuse_session_new(&args, &ops, sizeof ops, &s);
	if (!se || fuse_session_mount(se, argv[1]) != 0) {
		fprintf(stderr, "fuse-sink: cannot mount %s\n", argv[1]);
		if (se)
			fuse_session_destroy(se);
		return 1;
	}
	struct fuse_loop_config *cfg = fuse_loop_cfg_create();   /* as the gateway's */
	int rc = 1;
	if (cfg) {
		fuse_loop_cfg_set_max_threads(cfg, 16);
		fuse_loop_cfg_set_idle_threads(cfg, 4);
		rc = fuse_session_loop_mt(se, cfg);
		fuse_loop_cfg_destroy(cfg);
	}
	fuse_session_unmount(se);
	fuse_session_destroy(se);
	fprintf(stderr, "fuse-sink: requests:");
	for (int r = 0; r < R_N; r++)
		fprintf(stderr, " %s %llu", req_names[r], (unsigned long long)s.reqs[r]);
	fprintf(stderr, "\n");
	return rc != 0;
}
