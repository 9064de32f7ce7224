/* core_xattr.c — user metadata as xattrs (core.h): get and list read the
 * staged copy's metadata of a file open for writing here, else the
 * index's record (no request); set and remove of user.* change it through
 * core_meta_change (core_metadata.c: the staged copy's metadata, or a
 * COPY of the object onto itself). The POSIX attribute names
 * (common/posix.h) are not user.* xattrs: chmod, chown and utimensat set
 * them. Calls core_metadata.c, core_ofile.c and core.c.
 */
#include "fuse/core_int.h"

#include "common/stats.h"
#include "views/filter.h"
#include "views/index.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

static bool is_user_xattr(const char *name)
{
	return strncmp(name, "user.", 5) == 0;
}

/* user.mtime, user.mode...: POSIX attributes, not user metadata. */
static bool is_posix_xattr(const char *name)
{
	return is_user_xattr(name) && posix_meta_reserved(name + 5);
}

/* user.facetfs.fresh_as_of of a view's directory (the gateway's answer);
 * -ENODATA on anything else. */
static ssize_t view_fresh(struct core_req *rq, uint64_t ino, char *buf, size_t size)
{
	struct core *c = rq->c;
	struct inode_info info;
	if (ino < INODE_FIRST_DYNAMIC || !c->d.fresh_as_of || inode_get(c->d.it, ino, rq, &info) < 0)
		return -ENODATA;
	const struct view *v = core_view(rq, info.view);
	bool top = info.is_dir && !info.path[0] && v;
	free(info.path);
	char text[64];
	if (!top || c->d.fresh_as_of(c->d.ctx, view_name(v), text, sizeof text) < 0)
		return -ENODATA;
	size_t len = strlen(text);
	if (size && size < len)
		return -ERANGE;
	if (size)
		memcpy(buf, text, len);
	return (ssize_t)len;
}

/* The metadata of an object inode: its staged copy's if open for writing
 * here, else the index's record. Released by the caller. */
static int xattr_object(struct core_req *rq, uint64_t ino, struct obj_meta *o)
{
	struct core *c = rq->c;
	if (ino < INODE_FIRST_DYNAMIC)
		return -ENOENT;
	struct ofile *of = core_ofile_find(rq, ino, true);
	if (of) {
		int rc = obj_meta_copy(o, &of->meta);
		core_ofile_put(c, of);
		return rc;
	}
	struct inode_info info;
	int rc = inode_get(c->d.it, ino, rq, &info);
	if (rc < 0)
		return rc;
	rc = info.is_dir ? -ENOENT : index_object(c->d.ix, core_view(rq, info.view), info.path, o);
	free(info.path);
	return rc;
}

ssize_t core_getxattr(struct core_req *rq, uint64_t ino, const char *name, char *buf,
		      size_t size)
{
	struct core *c = rq->c;
	stats_inc(&c->ctr.getxattr);
	/* security.*, system.*, trusted.*: not supported. ls -l asks for them
	 * on every entry; EOPNOTSUPP is much cheaper for it than ENODATA
	 * (TESTBED.md). */
	if (!is_user_xattr(name))
		return -EOPNOTSUPP;
	if (is_posix_xattr(name))
		return -ENODATA;
	if (strcmp(name, CORE_XATTR_FRESH) == 0)
		return view_fresh(rq, ino, buf, size);
	struct obj_meta o = { 0 };
	int rc = xattr_object(rq, ino, &o);
	const char *val = rc == 0 ? obj_meta_get(&o, name + 5) : NULL;
	ssize_t n;
	if (rc == -ENOENT || (rc == 0 && !val)) {
		n = -ENODATA;
	} else if (rc < 0) {
		n = rc;
	} else {
		size_t len = strlen(val);
		n = size && size < len ? -ERANGE : (ssize_t)len;
		if (size && size >= len)
			memcpy(buf, val, len);
	}
	obj_meta_release(&o);
	return n;
}

ssize_t core_listxattr(struct core_req *rq, uint64_t ino, char *buf, size_t size)
{
	struct obj_meta o = { 0 };
	int rc = xattr_object(rq, ino, &o);
	if (rc < 0 && rc != -ENOENT)
		return rc;
	size_t total = 0;
	bool fresh = rc == -ENOENT && view_fresh(rq, ino, NULL, 0) > 0;
	if (fresh)
		total += sizeof CORE_XATTR_FRESH;
	for (size_t i = 0; i < o.n_meta; i++)
		if (!posix_meta_reserved(o.meta[i].name))
			total += 5 + strlen(o.meta[i].name) + 1;
	ssize_t n = (ssize_t)total;
	if (size && size < total) {
		n = -ERANGE;
	} else if (size) {
		char *p = buf;
		if (fresh)
			p += sprintf(p, "%s", CORE_XATTR_FRESH) + 1;
		for (size_t i = 0; i < o.n_meta; i++)
			if (!posix_meta_reserved(o.meta[i].name))
				p += sprintf(p, "user.%s", o.meta[i].name) + 1;
	}
	obj_meta_release(&o);
	return n;
}

/* One user.* xattr set (value) or removed (NULL). */
struct xattr_edit {
	const char *name;            /* without "user." */
	const char *value;
	size_t vlen;
	int flags;
};

static int xattr_apply(void *ctx, struct obj_meta *o, struct ofile *of)
{
	(void)of;
	const struct xattr_edit *x = ctx;
	bool present = obj_meta_get(o, x->name) != NULL;
	if ((x->flags & XATTR_CREATE) && present)
		return -EEXIST;
	if (((x->flags & XATTR_REPLACE) || !x->value) && !present)
		return -ENODATA;
	struct obj_kv *kv = NULL;
	size_t n = 0;
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < o->n_meta; i++)
		if (strcmp(o->meta[i].name, x->name) != 0)
			rc = obj_kv_add(&kv, &n, o->meta[i].name, o->meta[i].value);
	char *val = NULL;
	if (rc == 0 && x->value && !(val = strndup(x->value, x->vlen)))
		rc = -ENOMEM;
	if (rc == 0 && val)
		rc = obj_kv_add(&kv, &n, x->name, val);
	free(val);
	if (rc < 0) {
		obj_kv_free(kv, n);
		return rc;
	}
	obj_kv_free(o->meta, o->n_meta);
	o->meta = kv;
	o->n_meta = n;
	return 0;
}

static int set_metadata(struct core_req *rq, uint64_t ino, const char *name,
			const char *value, size_t vlen, int flags)
{
	struct xattr_edit x = { name + 5, value, vlen, flags };
	return core_meta_change(rq, ino, xattr_apply, &x);
}

int core_setxattr(struct core_req *rq, uint64_t ino, const char *name,
		  const char *value, size_t size, int flags)
{
	if (!is_user_xattr(name) || !name[5])
		return -EOPNOTSUPP;
	if (is_posix_xattr(name))
		return -EPERM;              /* chmod, chown, touch set them */
	if (memchr(value, '\0', size) || memchr(value, '\n', size) ||
	    memchr(value, '\r', size))
		return -EINVAL;             /* not representable in an HTTP header */
	return set_metadata(rq, ino, name, value, size, flags);
}

int core_removexattr(struct core_req *rq, uint64_t ino, const char *name)
{
	if (is_posix_xattr(name))
		return -EPERM;
	return is_user_xattr(name) ? set_metadata(rq, ino, name, NULL, 0, 0) : -EOPNOTSUPP;
}
