/* core_lookup.c — lookup, getattr and forget (core.h), and what a name or
 * an inode is for this mount (core_node_attr, core_attr_of: a file staged
 * here, what the index shows, a directory made here, a .facetfs/ file);
 * the retire of an inode whose name an event changed
 * (core_retire_changed). Calls core_mkdir.c, core_ofile.c and core.c.
 */
#include "fuse/core_int.h"

#include "common/stats.h"
#include "views/filter.h"
#include "views/index.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* ---------- the files of .facetfs/ ---------- */

const char *const core_meta_names[CORE_META_FILES] = { "control", "pending", "recovered",
							"stats", "views" };
const uint64_t core_meta_inos[CORE_META_FILES] = { INODE_META_CONTROL, INODE_META_PENDING,
						   INODE_META_RECOVERED, INODE_META_STATS,
						   INODE_META_VIEWS };

bool core_ino_generated(uint64_t ino)
{
	return (ino >= INODE_META_STATS && ino <= INODE_META_CONTROL) ||
	       ino == INODE_META_PENDING;
}

/* ---------- what a node is ---------- */

int core_node_attr(struct core_req *rq, size_t view, const char *path, uint64_t ino,
		   struct stat *st, bool *is_dir)
{
	struct core *c = rq->c;
	*is_dir = true;
	if (!*path) {
		core_attr_view_dir(rq, view, ino, st);
		return 0;
	}
	struct ofile *of = core_ofile_find_path(rq, view, path);
	if (of) {
		core_ofile_attr(rq, view, of, ino, st);
		core_ofile_put(c, of);
		*is_dir = false;
		return 0;
	}
	struct index_attr a;
	int rc = index_lookup(c->d.ix, core_view(rq, view), path, &a);
	if (rc == 0) {
		if (a.is_dir) {
			core_attr_dir_at(rq, view, path, ino, st);
		} else {
			core_attr_file(c, ino, a.size, a.mtime_ns, core_file_perm(rq, view), st);
			core_attr_posix(rq, view, &a.px, st);
		}
		*is_dir = a.is_dir;
		return 0;
	}
	if (rc == -ENOENT && core_mkdir_exists(rq, view, path)) {
		core_attr_dir_at(rq, view, path, ino, st);
		return 0;
	}
	return rc;
}

int core_attr_of(struct core_req *rq, uint64_t ino, struct stat *st)
{
	struct core *c = rq->c;
	switch (ino) {
	case INODE_ROOT:
	case INODE_META_DIR:
		core_attr_dir(c, ino, st);
		return 0;
	case INODE_META_STATS:
	case INODE_META_VIEWS:
	case INODE_META_PENDING:
		core_attr_file(c, ino, 0, 0, 0444, st);
		st->st_mtim = st->st_ctim = st->st_atim = c->start;
		return 0;
	case INODE_META_CONTROL:
		core_attr_file(c, ino, 0, 0, 0600, st);
		st->st_mtim = st->st_ctim = st->st_atim = c->start;
		return 0;
	case INODE_META_RECOVERED:
		core_attr_file(c, ino, strlen(c->recovered), 0, 0777, st);
		st->st_mode = S_IFLNK | 0777;
		st->st_mtim = st->st_ctim = st->st_atim = c->start;
		return 0;
	}
	struct inode_info info;
	int rc = inode_get(c->d.it, ino, rq, &info);
	if (rc < 0)
		return rc;
	if (info.gone) {
		/* Unlinked here (nlink 0) or retired, still open: what it was
		 * then; a writer's staged copy as it is now. */
		struct ofile *of = core_ofile_find(rq, ino, true);
		if (of) {
			core_ofile_attr(rq, info.view, of, ino, st);
			st->st_nlink = info.gone_st.st_nlink;
		} else {
			*st = info.gone_st;
		}
		core_ofile_put(c, of);
		free(info.path);
		return 0;
	}
	bool is_dir;
	rc = core_node_attr(rq, info.view, info.path, ino, st, &is_dir);
	free(info.path);
	return rc;
}

bool core_retire_changed(struct core *c, const char *vname, const char *path,
			 uint64_t *ino)
{
	char held[72];
	/* Most changes meet no cached reader: no pin, no index read then. */
	if (!inode_cached_version(c->d.it, vname, path, ino, held))
		return false;
	struct core_req rq;
	core_req_begin(c, &rq);
	bool done = false;
	size_t view = core_view_find(&rq, vname);
	struct ofile *of = view != INODE_NO_VIEW ? core_ofile_find_path(&rq, view, path) : NULL;
	core_ofile_put(c, of);
	if (of)
		view = INODE_NO_VIEW;        /* written here: its page cache is the writer's */
	struct obj_meta o = { 0 };
	struct stat st;
	/* What the kernel's inode shows from now on: the name's attributes
	 * (the new version's mode, owner, times) with the held version's size
	 * (inode_retire sets it). */
	if (view != INODE_NO_VIEW &&
	    index_object(c->d.ix, core_view(&rq, view), path, &o) == 0 && o.etag[0] &&
	    strcmp(o.etag, held) != 0 && core_attr_of(&rq, *ino, &st) == 0 &&
	    !S_ISDIR(st.st_mode))
		done = inode_retire(c->d.it, *ino, held, &st);
	obj_meta_release(&o);
	core_req_end(&rq);
	return done;
}

/* ---------- lookup, getattr, forget ---------- */

static int lookup(struct core_req *rq, uint64_t parent, const char *name,
		  struct core_entry *e)
{
	struct core *c = rq->c;
	memset(e, 0, sizeof *e);
	if (strlen(name) > CORE_NAME_MAX)
		return -ENAMETOOLONG;

	if (parent == INODE_ROOT) {
		if (strcmp(name, ".facetfs") == 0) {
			e->ino = INODE_META_DIR;
			return core_attr_of(rq, e->ino, &e->attr);
		}
		size_t v = core_view_find(rq, name);
		if (v == INODE_NO_VIEW)
			return -ENOENT;
		e->ino = inode_ref(c->d.it, name, "", true);
		if (!e->ino)
			return -ENOMEM;
		core_attr_view_dir(rq, v, e->ino, &e->attr);
		return 0;
	}
	if (parent == INODE_META_DIR) {
		for (size_t i = 0; i < CORE_META_FILES; i++)
			if (strcmp(name, core_meta_names[i]) == 0) {
				e->ino = core_meta_inos[i];
				/* Generated files: never cache their attributes. */
				e->attr_uncached = true;
				return core_attr_of(rq, e->ino, &e->attr);
			}
		return -ENOENT;
	}

	size_t view;
	char path[PATH_MAX];
	int rc = core_child(rq, parent, name, &view, path, sizeof path);
	if (rc < 0)
		return rc;
	/* The inode number does not depend on what the name is: compute the
	 * attributes first, then take the reference. */
	bool is_dir;
	const char *vname = view_name(core_view(rq, view));
	uint64_t ino = inode_number(vname, path);
	rc = core_node_attr(rq, view, path, ino, &e->attr, &is_dir);
	if (rc < 0)
		return rc;
	e->ino = inode_ref(c->d.it, vname, path, is_dir);
	if (!e->ino)
		return -ENOMEM;
	e->attr.st_ino = e->ino;
	return 0;
}

int core_lookup(struct core_req *rq, uint64_t parent, const char *name,
		struct core_entry *e)
{
	struct core *c = rq->c;
	stats_inc(&c->ctr.lookup);
	inode_note_lookup(c->d.it, parent);   /* before the index is read */
	return lookup(rq, parent, name, e);
}

void core_forget(struct core_req *rq, uint64_t ino, uint64_t nlookup)
{
	struct core *c = rq->c;
	if (ino >= INODE_FIRST_DYNAMIC)
		inode_unref(c->d.it, ino, nlookup);
}

int core_getattr(struct core_req *rq, uint64_t ino, struct stat *st)
{
	struct core *c = rq->c;
	stats_inc(&c->ctr.getattr);
	return core_attr_of(rq, ino, st);
}
