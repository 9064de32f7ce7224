/* fs_ops.c — the low-level FUSE handlers: each decodes its request, calls
 * one function of the core (fuse/core.h) and replies exactly once
 * (fuse_reply_err(req, -rc) on error). Nothing here decides anything the
 * kernel could not see: timeouts, negative entries, what a reply carries.
 */
#include "fuse/fs_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <unistd.h>

/* The request's handle for the core (fuse/core.h "Views"): the current
 * view set, pinned from here to the handler's end, where the cleanup
 * attribute unpins it (after the reply, as the handler's last act). */
#define CORE_REQ(req, rq)                                                     \
	struct core_req rq __attribute__((cleanup(core_req_end)));             \
	core_req_begin(fs_of(req)->core, &rq)

static struct core_file *file_of(struct fuse_file_info *fi)
{
	return (struct core_file *)(uintptr_t)fi->fh;
}

static void entry_of(const struct core_entry *ce, struct fuse_entry_param *e)
{
	memset(e, 0, sizeof *e);
	e->ino = ce->ino;
	e->attr = ce->attr;
	e->attr_timeout = ce->attr_uncached ? 0 : FS_TIMEOUT;
	e->entry_timeout = FS_TIMEOUT;
}

static void reply_entry(fuse_req_t req, int rc, const struct core_entry *ce)
{
	struct fuse_entry_param e;
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	entry_of(ce, &e);
	fuse_reply_entry(req, &e);
}

/* ---------- names and attributes ---------- */

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	CORE_REQ(req, rq);
	struct core_entry ce;
	int rc = core_lookup(&rq, parent, name, &ce);
	if (rc == -ENOENT) {
		/* A negative entry, cached until an event adds the name (the
		 * change notifier invalidates it). */
		struct fuse_entry_param e;
		memset(&e, 0, sizeof e);
		e.entry_timeout = FS_TIMEOUT;
		fuse_reply_entry(req, &e);
		return;
	}
	reply_entry(req, rc, &ce);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)fi;
	CORE_REQ(req, rq);
	struct stat st;
	int rc = core_getattr(&rq, ino, &st);
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_attr(req, &st, core_ino_generated(ino) ? 0 : FS_TIMEOUT);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	CORE_REQ(req, rq);
	core_forget(&rq, ino, nlookup);
	fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count,
			    struct fuse_forget_data *forgets)
{
	CORE_REQ(req, rq);
	for (size_t i = 0; i < count; i++)
		core_forget(&rq, forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

/* truncate(2)/ftruncate(2) and the attribute changes that make sense here;
 * owner, mode and times are kept as S3 has them (answered, not stored). */
static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		       int to_set, struct fuse_file_info *fi)
{
	CORE_REQ(req, rq);
	static const struct { int fuse; unsigned core; } map[] = {
		{ FUSE_SET_ATTR_SIZE, CORE_SET_SIZE },
		{ FUSE_SET_ATTR_MODE, CORE_SET_MODE },
		{ FUSE_SET_ATTR_UID, CORE_SET_UID },
		{ FUSE_SET_ATTR_GID, CORE_SET_GID },
		{ FUSE_SET_ATTR_ATIME, CORE_SET_ATIME },
		{ FUSE_SET_ATTR_MTIME, CORE_SET_MTIME },
		{ FUSE_SET_ATTR_ATIME_NOW, CORE_SET_ATIME_NOW },
		{ FUSE_SET_ATTR_MTIME_NOW, CORE_SET_MTIME_NOW },
	};
	struct core_set set = {
		.size = (uint64_t)attr->st_size, .mode = attr->st_mode,
		.uid = attr->st_uid, .gid = attr->st_gid,
		.atime = attr->st_atim, .mtime = attr->st_mtim,
	};
	for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
		if (to_set & map[i].fuse)
			set.what |= map[i].core;
	struct stat st;
	struct fs *fs = fs_of(req);
	int rc = core_setattr(&rq, ino, fi ? file_of(fi) : NULL, &set, &st);
	if ((to_set & FUSE_SET_ATTR_SIZE) && FS_TRACING(fs))
		fs_trace_ino(req, &rq, TRACE_TRUNCATE, ino, fi ? file_of(fi) : NULL,
			     (uint64_t)attr->st_size, rc);
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_attr(req, &st, ino < INODE_FIRST_DYNAMIC ? 0 : FS_TIMEOUT);
}

/* .facetfs/recovered points at the local directory where staged data that
 * was never committed is put after a crash (sync/stage/stage.h). */
static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	CORE_REQ(req, rq);
	char target[PATH_MAX];
	int rc = core_readlink(&rq, ino, target, sizeof target);
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_readlink(req, target);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	(void)ino;
	struct statvfs sv;
	memset(&sv, 0, sizeof sv);
	sv.f_bsize = 4096;
	sv.f_frsize = 4096;
	sv.f_blocks = 1ULL << 40;  /* an object store has no fixed size */
	sv.f_bfree = sv.f_bavail = 1ULL << 40;
	sv.f_files = 1ULL << 32;
	sv.f_ffree = sv.f_favail = 1ULL << 32;
	sv.f_namemax = CORE_NAME_MAX;
	fuse_reply_statfs(req, &sv);
}

/* ---------- directories ---------- */

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	CORE_REQ(req, rq);
	struct core_dir *d;
	int rc = core_opendir(&rq, ino, &d);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	fi->fh = (uintptr_t)d;
	fi->cache_readdir = 0;
	fuse_reply_open(req, fi);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	CORE_REQ(req, rq);
	core_releasedir(&rq, (struct core_dir *)(uintptr_t)fi->fh);
	fuse_reply_err(req, 0);
}

/* The reply buffer one readdir fills. */
struct dirbuf {
	fuse_req_t req;
	bool plus;
	char *buf;
	size_t size, pos;
};

static int dirbuf_fill(void *ctx, const struct core_dirent *ce)
{
	struct dirbuf *b = ctx;
	size_t room = b->size - b->pos, need;
	if (!b->plus) {
		need = fuse_add_direntry(b->req, b->buf + b->pos, room, ce->name,
					 &ce->attr, ce->next);
	} else {
		struct fuse_entry_param e;
		memset(&e, 0, sizeof e);
		e.ino = ce->ino;
		e.attr = ce->attr;
		e.attr_timeout = FS_TIMEOUT;
		e.entry_timeout = FS_TIMEOUT;
		need = fuse_add_direntry_plus(b->req, b->buf + b->pos, room, ce->name,
					      &e, ce->next);
	}
	if (need > room)
		return 1;
	b->pos += need;
	return 0;
}

static void do_readdir(fuse_req_t req, size_t size, off_t off,
		       struct fuse_file_info *fi, bool plus)
{
	CORE_REQ(req, rq);
	struct dirbuf b = { .req = req, .plus = plus, .size = size };
	if (!(b.buf = malloc(size ? size : 1))) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	int rc = core_readdir(&rq, (struct core_dir *)(uintptr_t)fi->fh,
			      off, plus, dirbuf_fill, &b);
	if (rc < 0 && b.pos == 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_buf(req, b.buf, b.pos);
	free(b.buf);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	(void)ino;
	do_readdir(req, size, off, fi, false);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	(void)ino;
	do_readdir(req, size, off, fi, true);
}

/* ---------- files ---------- */

static void open_flags(struct fuse_file_info *fi, const struct core_open_cache *cache)
{
	fi->direct_io = cache->direct_io;
	fi->keep_cache = cache->keep_cache;
	fi->noflush = cache->no_flush;   /* one round trip less per close */
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	CORE_REQ(req, rq);
	struct core_file *f;
	struct core_open_cache cache;
	int rc = core_open(&rq, ino, fi->flags, &f, &cache);
	if (FS_TRACING(fs_of(req)))
		fs_trace_ino(req, &rq, TRACE_OPEN, ino, rc < 0 ? NULL : f, (uint64_t)fi->flags, rc);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	open_flags(fi, &cache);
	fi->fh = (uintptr_t)f;
	if (fuse_reply_open(req, fi) == -ENOENT) {
		if (FS_TRACING(fs_of(req)))
			fs_trace_fh(req, TRACE_RELEASE, f, 0, 0, 0);
		core_release(&rq, f);          /* the open was interrupted */
	}
}

/* The caller of a create, mkdir or mknod, and the mode it asks for. */
static struct core_who who_of(fuse_req_t req, mode_t mode)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct core_who w = { mode, ctx->uid, ctx->gid };
	return w;
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		      mode_t mode, struct fuse_file_info *fi)
{
	CORE_REQ(req, rq);
	struct core_entry ce;
	struct core_file *f;
	struct core_open_cache cache;
	struct core_who who = who_of(req, S_IFREG | (mode & 07777));
	int rc = core_create(&rq, parent, name, &who, &ce, &f, &cache);
	if (FS_TRACING(fs_of(req)))
		fs_trace_child(req, &rq, TRACE_CREATE, parent, name, 0, NULL, rc < 0 ? NULL : f,
			       (uint64_t)fi->flags, rc);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	struct fuse_entry_param e;
	entry_of(&ce, &e);
	open_flags(fi, &cache);
	fi->fh = (uintptr_t)f;
	if (fuse_reply_create(req, &e, fi) == -ENOENT) {
		if (FS_TRACING(fs_of(req)))
			fs_trace_fh(req, TRACE_RELEASE, f, 0, 0, 0);
		core_release(&rq, f);
	}
}

/* The reply is written from where the bytes lie (the reader's ranges):
 * the one copy left here is the kernel's, into the page cache or, with
 * direct I/O, the caller's buffer. fuse_reply_data() sends one memory
 * buffer as it is; libfuse 3.14 would first copy a vector of several into
 * one, so several pieces go by fuse_reply_iov(), which writes them as
 * they are. */
static void reply_rdata(fuse_req_t req, const struct core_rdata *d)
{
	if (d->n == 0) {
		fuse_reply_buf(req, NULL, 0);
	} else if (d->n == 1) {
		struct fuse_bufvec bv = FUSE_BUFVEC_INIT(d->iov[0].len);
		bv.buf[0].mem = (void *)d->iov[0].base;
		fuse_reply_data(req, &bv, FUSE_BUF_NO_SPLICE);
	} else {
		struct iovec iov[CORE_READ_IOV];
		for (unsigned i = 0; i < d->n; i++)
			iov[i] = (struct iovec){ (void *)d->iov[i].base, d->iov[i].len };
		fuse_reply_iov(req, iov, (int)d->n);
	}
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	(void)ino;
	CORE_REQ(req, rq);
	struct fs *fs = fs_of(req);
	struct core_rdata d;
	ssize_t n = core_read_data(&rq, file_of(fi), size, off, &d);
	if (FS_TRACING(fs))
		fs_trace_fh(req, TRACE_READ, file_of(fi), (uint64_t)off, size, n);
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else
		reply_rdata(req, &d);
	core_read_done(&d);
}

/* The bytes of a WRITE that libfuse left in its pipe, read into memory
 * (mem, malloc'd) for a file that wants them there: 0 or -errno (-EIO if
 * the pipe held fewer than size). bufv is advanced past what was read. */
static int write_to_memory(struct fuse_bufvec *bufv, size_t size, void **mem)
{
	if (!(*mem = malloc(size ? size : 1)))
		return -ENOMEM;
	struct fuse_bufvec dst = FUSE_BUFVEC_INIT(size);
	dst.buf[0].mem = *mem;
	ssize_t got = fuse_buf_copy(&dst, bufv, 0);
	return got < 0 ? (int)got : (size_t)got < size ? -EIO : 0;
}

/* WRITE. op_init asks for FUSE_CAP_SPLICE_READ: libfuse then splices a
 * large WRITE out of /dev/fuse into a pipe of the worker thread and hands
 * over the pipe (FUSE_BUF_IS_FD) instead of reading it into memory, and
 * core_write_pipe splices its bytes on into the staged file. That is one
 * copy per byte fewer than read() into memory and pwrite() out of it;
 * the copy left is the kernel's, from the request's pages into the page
 * cache of the staged file. Small WRITEs come in memory (libfuse reads
 * them out of the pipe itself) and go to core_write as they are; so do a
 * pipe's bytes for a file that wants them in memory (.facetfs/control),
 * read with fuse_buf_copy first.
 * The pipe is empty again after the request: bufv is advanced past what
 * was taken out of it; a write that failed with bytes still in it leaves
 * bufv short, and libfuse then drops the thread's pipe and makes a new
 * one (the handler's contract in fuse_lowlevel.h: bufv->off reflects the
 * bytes read), so no byte of this request is read as the next one. */
static void op_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *bufv,
			 off_t off, struct fuse_file_info *fi)
{
	(void)ino;
	CORE_REQ(req, rq);
	struct fs *fs = fs_of(req);
	struct core_file *f = file_of(fi);
	const struct fuse_buf *b = &bufv->buf[bufv->idx];
	size_t size = fuse_buf_size(bufv) - bufv->off;
	void *mem = NULL;
	ssize_t n;
	if (!(b->flags & FUSE_BUF_IS_FD) && bufv->count - bufv->idx == 1) {
		n = core_write(&rq, f, (const char *)b->mem + bufv->off, size, off);
	} else if ((b->flags & FUSE_BUF_IS_FD) && !core_write_in_memory(f)) {
		n = core_write_pipe(&rq, f, b->fd, size, off);
		if (n == (ssize_t)size) {      /* all of it left the pipe */
			bufv->idx = bufv->count;
			bufv->off = 0;
		}
	} else {
		n = write_to_memory(bufv, size, &mem);
		if (n == 0)
			n = core_write(&rq, f, mem, size, off);
	}
	free(mem);
	if (FS_TRACING(fs))
		fs_trace_fh(req, TRACE_WRITE, f, (uint64_t)off, size, n);
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else
		fuse_reply_write(req, (size_t)n);
}

static void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	CORE_REQ(req, rq);
	struct fs *fs = fs_of(req);
	int rc = core_flush(&rq, file_of(fi));
	if (FS_TRACING(fs))
		fs_trace_fh(req, TRACE_FLUSH, file_of(fi), 0, 0, rc);
	fuse_reply_err(req, -rc);
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
		     struct fuse_file_info *fi)
{
	(void)ino;
	CORE_REQ(req, rq);
	struct fs *fs = fs_of(req);
	int rc = core_fsync(&rq, file_of(fi));
	if (FS_TRACING(fs))
		fs_trace_fh(req, TRACE_FSYNC, file_of(fi), (uint64_t)datasync, 0, rc);
	fuse_reply_err(req, -rc);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	CORE_REQ(req, rq);
	struct fs *fs = fs_of(req);
	if (FS_TRACING(fs))   /* before: the handle's address may be reused after */
		fs_trace_fh(req, TRACE_RELEASE, file_of(fi), 0, 0, 0);
	core_release(&rq, file_of(fi));
	fuse_reply_err(req, 0);
}

/* ---------- namespace ---------- */

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	CORE_REQ(req, rq);
	struct core_entry ce;
	struct core_who who = who_of(req, S_IFDIR | (mode & 07777));
	reply_entry(req, core_mkdir(&rq, parent, name, &who, &ce), &ce);
}

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		     dev_t rdev)
{
	CORE_REQ(req, rq);
	struct core_entry ce;
	struct core_who who = who_of(req, mode);
	reply_entry(req, core_mknod(&rq, parent, name, &who, rdev, &ce), &ce);
}

/* What S3 cannot hold (README, "POSIX behaviour"): a second name for one
 * object. */
static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
		    const char *newname)
{
	(void)ino;
	(void)newparent;
	(void)newname;
	fuse_reply_err(req, EPERM);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
		       const char *name)
{
	CORE_REQ(req, rq);
	struct core_entry ce;
	struct core_who who = who_of(req, S_IFLNK | 0777);
	reply_entry(req, core_symlink(&rq, parent, name, link, &who, &ce), &ce);
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	CORE_REQ(req, rq);
	fuse_reply_err(req, -core_rmdir(&rq, parent, name));
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	CORE_REQ(req, rq);
	struct fs *fs = fs_of(req);
	int rc = core_unlink(&rq, parent, name);
	if (FS_TRACING(fs))
		fs_trace_child(req, &rq, TRACE_UNLINK, parent, name, 0, NULL, NULL, 0, rc);
	fuse_reply_err(req, -rc);
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		      fuse_ino_t newparent, const char *newname, unsigned int flags)
{
	CORE_REQ(req, rq);
	struct fs *fs = fs_of(req);
	int rc = core_rename(&rq, parent, name, newparent, newname, flags);
	if (FS_TRACING(fs))
		fs_trace_child(req, &rq, TRACE_RENAME, parent, name, newparent, newname, NULL,
			       flags, rc);
	fuse_reply_err(req, -rc);
}

/* ---------- xattrs ---------- */

/* A getxattr/listxattr answer: the length asked for (size 0) or the bytes. */
static void reply_xattr(fuse_req_t req, ssize_t n, const char *buf, size_t size)
{
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)n);
	else
		fuse_reply_buf(req, buf, (size_t)n);
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	CORE_REQ(req, rq);
	char *buf = size ? malloc(size) : NULL;
	if (size && !buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	reply_xattr(req, core_getxattr(&rq, ino, name, buf, size), buf, size);
	free(buf);
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	CORE_REQ(req, rq);
	char *buf = size ? malloc(size) : NULL;
	if (size && !buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	reply_xattr(req, core_listxattr(&rq, ino, buf, size), buf, size);
	free(buf);
}

static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			const char *value, size_t size, int flags)
{
	CORE_REQ(req, rq);
	fuse_reply_err(req, -core_setxattr(&rq, ino, name, value, size, flags));
}

static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	CORE_REQ(req, rq);
	fuse_reply_err(req, -core_removexattr(&rq, ino, name));
}

/* libfuse reads a request into a buffer of max_write bytes and one page
 * of headers, and splices a request out of /dev/fuse only into a pipe at
 * least that large; when it may not make one (F_SETPIPE_SZ past
 * /proc/sys/fs/pipe-max-size needs CAP_SYS_RESOURCE) it reads every
 * request into memory from then on. */
#define FS_REQ_HEADER 4096u

/* Whether this process may make a pipe of bytes. */
static bool pipe_can_hold(unsigned bytes)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) != 0)
		return false;
	bool ok = bytes <= INT_MAX && fcntl(p[0], F_SETPIPE_SZ, (int)bytes) >= 0;
	close(p[0]);
	close(p[1]);
	return ok;
}

/* Whether WRITEs can be spliced: libfuse can make the pipe its buffer
 * needs. max_write is not lowered to fit a smaller pipe: libfuse derives
 * the kernel's max_pages from it, which bounds READs too, and a 1 MiB
 * read would then be two requests (1020 KiB and 4 KiB), as a cold read
 * of 512 MiB showed (1,027 FUSE reads, not 514). Where the process may
 * not make that pipe (no CAP_SYS_RESOURCE past pipe-max-size), WRITEs
 * stay in memory. */
static bool splice_fits(const struct fuse_conn_info *conn)
{
	return pipe_can_hold(conn->max_write + FS_REQ_HEADER);
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	/* readdirplus for every listing: `ls -l` then needs no lookups. */
	if (conn->capable & FUSE_CAP_READDIRPLUS)
		conn->want |= FUSE_CAP_READDIRPLUS;
	conn->want &= ~FUSE_CAP_READDIRPLUS_AUTO;
	if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
		conn->want |= FUSE_CAP_PARALLEL_DIROPS;
	/* A symbolic link's target is kept in the kernel's page cache of its
	 * inode, like a file's data: a readlink then costs no open (no HEAD,
	 * no GET). An event that changes or removes the object invalidates
	 * the inode (fs_notify.c), as it does a file's pages. */
	if (conn->capable & FUSE_CAP_CACHE_SYMLINKS)
		conn->want |= FUSE_CAP_CACHE_SYMLINKS;
	/* WRITE data in a pipe, spliced on into the staged file (op_write_buf),
	 * when libfuse can make its pipe (else in memory, as libfuse would
	 * fall back to anyway). Replies are not spliced (FUSE_CAP_SPLICE_WRITE
	 * stays off): a read's reply is written from the reader's buffers
	 * (reply_rdata). */
	if ((conn->capable & FUSE_CAP_SPLICE_READ) && splice_fits(conn))
		conn->want |= FUSE_CAP_SPLICE_READ;
	else
		conn->want &= ~FUSE_CAP_SPLICE_READ;
	/* Page cache contents stay until we invalidate them explicitly. */
	conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
	conn->max_readahead = FS_READAHEAD;
}

void fs_ops_init(struct fuse_lowlevel_ops *ops)
{
	memset(ops, 0, sizeof *ops);
	ops->init = op_init;
	ops->readlink = op_readlink;
	ops->lookup = op_lookup;
	ops->forget = op_forget;
	ops->forget_multi = op_forget_multi;
	ops->getattr = op_getattr;
	ops->setattr = op_setattr;
	ops->statfs = op_statfs;
	ops->opendir = op_opendir;
	ops->readdir = op_readdir;
	ops->readdirplus = op_readdirplus;
	ops->releasedir = op_releasedir;
	ops->open = op_open;
	ops->create = op_create;
	ops->read = op_read;
	ops->write_buf = op_write_buf;
	ops->flush = op_flush;
	ops->fsync = op_fsync;
	ops->release = op_release;
	ops->mkdir = op_mkdir;
	ops->mknod = op_mknod;
	ops->link = op_link;
	ops->symlink = op_symlink;
	ops->rmdir = op_rmdir;
	ops->unlink = op_unlink;
	ops->rename = op_rename;
	ops->getxattr = op_getxattr;
	ops->listxattr = op_listxattr;
	ops->setxattr = op_setxattr;
	ops->removexattr = op_removexattr;
}
