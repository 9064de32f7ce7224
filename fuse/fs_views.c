/* fs_views.c — the mount's side of the view set: every request runs with
 * the current set pinned (views/viewset.h) for as long as it runs, through
 * the core (core_req_begin/core_req_end): a reload swaps the gateway's slot
 * and never waits for a request, and a request never sees two sets. Live
 * view changes need nothing else from the mount but the invalidations of
 * fs_view_changed(). See fs.h and fs_int.h.
 */
#include "fuse/fs_int.h"

void fs_view_changed(struct fs *fs, const char *name)
{
	fs_notify_change(fs, NULL, name, 0);
}

/* Every request runs with the view set pinned. */
#define RD(req) struct fs *fs_ = fuse_req_userdata(req); core_req_begin(fs_->core)
#define UN() core_req_end(fs_->core)

static void w_forget(fuse_req_t req, fuse_ino_t ino, uint64_t n)
{ RD(req); fs_->real.forget(req, ino, n); UN(); }
static void w_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *f)
{ RD(req); fs_->real.forget_multi(req, count, f); UN(); }
static void w_readlink(fuse_req_t req, fuse_ino_t ino)
{ RD(req); fs_->real.readlink(req, ino); UN(); }
static void w_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{ RD(req); fs_->real.releasedir(req, ino, fi); UN(); }
static void w_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{ RD(req); fs_->real.release(req, ino, fi); UN(); }
static void w_lookup(fuse_req_t req, fuse_ino_t p, const char *name)
{ RD(req); fs_->real.lookup(req, p, name); UN(); }
static void w_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{ RD(req); fs_->real.getattr(req, ino, fi); UN(); }
static void w_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{ RD(req); fs_->real.opendir(req, ino, fi); UN(); }
static void w_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		      struct fuse_file_info *fi)
{ RD(req); fs_->real.readdir(req, ino, size, off, fi); UN(); }
static void w_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			  struct fuse_file_info *fi)
{ RD(req); fs_->real.readdirplus(req, ino, size, off, fi); UN(); }
static void w_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{ RD(req); fs_->real.open(req, ino, fi); UN(); }
static void w_create(fuse_req_t req, fuse_ino_t p, const char *name, mode_t mode,
		     struct fuse_file_info *fi)
{ RD(req); fs_->real.create(req, p, name, mode, fi); UN(); }
static void w_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		   struct fuse_file_info *fi)
{ RD(req); fs_->real.read(req, ino, size, off, fi); UN(); }
static void w_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *bufv,
			off_t off, struct fuse_file_info *fi)
{ RD(req); fs_->real.write_buf(req, ino, bufv, off, fi); UN(); }
static void w_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{ RD(req); fs_->real.flush(req, ino, fi); UN(); }
static void w_fsync(fuse_req_t req, fuse_ino_t ino, int ds, struct fuse_file_info *fi)
{ RD(req); fs_->real.fsync(req, ino, ds, fi); UN(); }
static void w_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		      struct fuse_file_info *fi)
{ RD(req); fs_->real.setattr(req, ino, attr, to_set, fi); UN(); }
static void w_mkdir(fuse_req_t req, fuse_ino_t p, const char *name, mode_t mode)
{ RD(req); fs_->real.mkdir(req, p, name, mode); UN(); }
static void w_mknod(fuse_req_t req, fuse_ino_t p, const char *name, mode_t mode,
		    dev_t rdev)
{ RD(req); fs_->real.mknod(req, p, name, mode, rdev); UN(); }
static void w_symlink(fuse_req_t req, const char *link, fuse_ino_t p, const char *name)
{ RD(req); fs_->real.symlink(req, link, p, name); UN(); }
static void w_rmdir(fuse_req_t req, fuse_ino_t p, const char *name)
{ RD(req); fs_->real.rmdir(req, p, name); UN(); }
static void w_unlink(fuse_req_t req, fuse_ino_t p, const char *name)
{ RD(req); fs_->real.unlink(req, p, name); UN(); }
static void w_rename(fuse_req_t req, fuse_ino_t p, const char *name, fuse_ino_t np,
		     const char *nname, unsigned int flags)
{ RD(req); fs_->real.rename(req, p, name, np, nname, flags); UN(); }
static void w_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{ RD(req); fs_->real.getxattr(req, ino, name, size); UN(); }
static void w_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{ RD(req); fs_->real.listxattr(req, ino, size); UN(); }
static void w_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
		       const char *value, size_t size, int flags)
{ RD(req); fs_->real.setxattr(req, ino, name, value, size, flags); UN(); }
static void w_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{ RD(req); fs_->real.removexattr(req, ino, name); UN(); }

void fs_wrap_ops(struct fuse_lowlevel_ops *ops)
{
	ops->forget = w_forget;
	ops->forget_multi = w_forget_multi;
	ops->readlink = w_readlink;
	ops->releasedir = w_releasedir;
	ops->release = w_release;
	ops->lookup = w_lookup;
	ops->getattr = w_getattr;
	ops->opendir = w_opendir;
	ops->readdir = w_readdir;
	ops->readdirplus = w_readdirplus;
	ops->open = w_open;
	ops->create = w_create;
	ops->read = w_read;
	ops->write_buf = w_write_buf;
	ops->flush = w_flush;
	ops->fsync = w_fsync;
	ops->setattr = w_setattr;
	ops->mkdir = w_mkdir;
	ops->mknod = w_mknod;
	ops->symlink = w_symlink;
	ops->rmdir = w_rmdir;
	ops->unlink = w_unlink;
	ops->rename = w_rename;
	ops->getxattr = w_getxattr;
	ops->listxattr = w_listxattr;
	ops->setxattr = w_setxattr;
	ops->removexattr = w_removexattr;
}

