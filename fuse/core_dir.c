/* core_dir.c — lookup, getattr and readdir over the index (core.h).
 *
 * Readdir offsets: "." is 1, ".." is 2, the i-th entry after them is i + 3.
 * A directory handle remembers the name of the last entry it returned and
 * the offset after it, so the usual sequential readdir continues with an
 * index seek past that name; any other offset restarts and skips.
 */
#include "fuse/core_int.h"

#include "common/stats.h"
#include "views/filter.h"
#include "views/index.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct core_dir {
	uint64_t ino;
	size_t view;                 /* INODE_NO_VIEW for fixed directories */
	char *vname;
	char *path;
	off_t next_off;              /* offset after last_name */
	char last_name[CORE_NAME_MAX + 1];
	bool extra;                  /* index entries done; listing made dirs */
	size_t extra_pos;            /* made dirs already returned */
};

/* In name order: readdir resumes after a name. */
static const char *const meta_names[] = { "control", "pending", "recovered", "stats",
					  "views" };
static const uint64_t meta_inos[] = { INODE_META_CONTROL, INODE_META_PENDING,
				      INODE_META_RECOVERED, INODE_META_STATS,
				      INODE_META_VIEWS };

bool core_ino_generated(uint64_t ino)
{
	return (ino >= INODE_META_STATS && ino <= INODE_META_CONTROL) ||
	       ino == INODE_META_PENDING;
}

/* ---------- lookup, getattr, forget ---------- */

static int lookup(struct core *c, uint64_t parent, const char *name,
		  struct core_entry *e)
{
	memset(e, 0, sizeof *e);
	if (strlen(name) > CORE_NAME_MAX)
		return -ENAMETOOLONG;

	if (parent == INODE_ROOT) {
		if (strcmp(name, ".facetfs") == 0) {
			e->ino = INODE_META_DIR;
			return core_attr_of(c, e->ino, &e->attr);
		}
		size_t v = core_view_index(c, name);
		if (v == INODE_NO_VIEW)
			return -ENOENT;
		e->ino = inode_ref(c->d.it, name, "", true);
		if (!e->ino)
			return -ENOMEM;
		core_attr_view_dir(c, v, e->ino, &e->attr);
		return 0;
	}
	if (parent == INODE_META_DIR) {
		for (size_t i = 0; i < sizeof meta_names / sizeof meta_names[0]; i++)
			if (strcmp(name, meta_names[i]) == 0) {
				e->ino = meta_inos[i];
				/* Generated files: never cache their attributes. */
				e->attr_uncached = true;
				return core_attr_of(c, e->ino, &e->attr);
			}
		return -ENOENT;
	}

	size_t view;
	char path[PATH_MAX];
	int rc = core_child(c, parent, name, &view, path, sizeof path);
	if (rc < 0)
		return rc;
	/* The inode number does not depend on what the name is: compute the
	 * attributes first, then take the reference. */
	bool is_dir;
	const char *vname = view_name(core_view(c, view));
	uint64_t ino = inode_number(vname, path);
	rc = core_node_attr(c, view, path, ino, &e->attr, &is_dir);
	if (rc < 0)
		return rc;
	e->ino = inode_ref(c->d.it, vname, path, is_dir);
	if (!e->ino)
		return -ENOMEM;
	e->attr.st_ino = e->ino;
	return 0;
}

int core_lookup(struct core *c, uint64_t parent, const char *name,
		struct core_entry *e)
{
	stats_inc(&c->ctr.lookup);
	inode_note_lookup(c->d.it, parent);   /* before the index is read */
	return lookup(c, parent, name, e);
}

void core_forget(struct core *c, uint64_t ino, uint64_t nlookup)
{
	if (ino >= INODE_FIRST_DYNAMIC)
		inode_unref(c->d.it, ino, nlookup);
}

int core_getattr(struct core *c, uint64_t ino, struct stat *st)
{
	stats_inc(&c->ctr.getattr);
	return core_attr_of(c, ino, st);
}

/* ---------- directories ---------- */

int core_opendir(struct core *c, uint64_t ino, struct core_dir **out)
{
	struct core_dir *d = calloc(1, sizeof *d);
	if (!d)
		return -ENOMEM;
	d->ino = ino;
	d->view = INODE_NO_VIEW;
	if (ino >= INODE_FIRST_DYNAMIC) {
		struct inode_info info;
		int rc = inode_get(c->d.it, ino, &info);
		if (rc == 0 && !info.is_dir) {
			free(info.path);
			rc = -ENOTDIR;
		}
		if (rc < 0) {
			free(d);
			return rc;
		}
		d->view = info.view;
		d->path = info.path;
		d->vname = strdup(view_name(core_view(c, info.view)));
	} else if (ino != INODE_ROOT && ino != INODE_META_DIR) {
		free(d);
		return -ENOTDIR;
	}
	*out = d;
	return 0;
}

void core_releasedir(struct core *c, struct core_dir *d)
{
	(void)c;
	if (!d)
		return;
	free(d->path);
	free(d->vname);
	free(d);
}

/* The state of one readdir being filled. */
struct rd {
	struct core *c;
	struct core_dir *d;
	bool plus;
	core_fill_fn fill;
	void *ctx;
	off_t off;                   /* offset of the next entry to add */
	off_t skip_until;            /* entries with offset below this are skipped */
	bool full;
};

/* Add one entry. Returns 1 when the buffer is full (entry not added).
 * child_path: the entry is in a view (readdirplus takes a lookup on it). */
static int rd_add(struct rd *r, const char *name, uint64_t ino, const struct stat *st,
		  const char *child_path, bool is_dir)
{
	off_t next = r->off + 1;
	if (r->off < r->skip_until) {
		r->off = next;
		return 0;
	}
	struct core_dirent e = { .name = name, .attr = *st, .next = next };
	bool counted = false;
	if (r->plus) {
		if (child_path) {
			e.ino = inode_ref(r->c->d.it, view_name(core_view(r->c, r->d->view)),
					  child_path, is_dir);
			e.attr.st_ino = e.ino;
			counted = true;
		} else if (ino >= INODE_FIRST_DYNAMIC) {
			/* a view directory listed in the root */
			e.ino = inode_ref(r->c->d.it, name, "", true);
			e.attr.st_ino = e.ino;
			counted = true;
		} else if (strcmp(name, ".") != 0 && strcmp(name, "..") != 0) {
			e.ino = ino;
		}
	}
	if (r->fill(r->ctx, &e)) {
		if (counted && e.ino)
			inode_unref(r->c->d.it, e.ino, 1);
		r->full = true;
		return 1;
	}
	r->off = next;
	snprintf(r->d->last_name, sizeof r->d->last_name, "%s", name);
	r->d->next_off = next;
	return 0;
}

static int rd_index_entry(void *ctx, const char *name, const struct index_attr *a)
{
	struct rd *r = ctx;
	char child[PATH_MAX];
	if (core_path_join(r->d->path, name, child, sizeof child) < 0)
		return 0;
	struct stat st;
	uint64_t ino = inode_number(view_name(core_view(r->c, r->d->view)), child);
	if (a->is_dir) {
		core_attr_dir_at(r->c, r->d->view, child, ino, &st);
	} else {
		core_attr_file(r->c, ino, a->size, a->mtime_ns,
			       core_file_perm(r->c, r->d->view), &st);
		core_attr_posix(r->c, r->d->view, &a->px, &st);
	}
	return rd_add(r, name, ino, &st, child, a->is_dir);
}

/* After the index's entries: directories made here with mkdir that hold
 * no object yet. */
static void rd_made_dirs(struct rd *r)
{
	struct core *c = r->c;
	char **names;
	size_t n;
	core_mkdir_children(c, r->d->view, r->d->path, &names, &n);
	for (size_t i = r->d->extra_pos; i < n && !r->full; i++) {
		char child[PATH_MAX];
		struct index_attr a;
		if (core_path_join(r->d->path, names[i], child, sizeof child) < 0 ||
		    index_lookup(c->d.ix, core_view(c, r->d->view), child, &a) == 0) {
			r->d->extra_pos++;
			continue;    /* the index lists it already */
		}
		struct stat st;
		uint64_t ino = inode_number(view_name(core_view(c, r->d->view)), child);
		core_attr_dir_at(c, r->d->view, child, ino, &st);
		if (rd_add(r, names[i], ino, &st, child, true) == 0)
			r->d->extra_pos++;
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

static void rd_root(struct rd *r, bool resume, const char *after)
{
	struct core *c = r->c;
	struct stat st;
	/* .facetfs, then the views in their configured order. */
	size_t first = 0;
	if (!resume || strcmp(after, ".facetfs") == 0) {
		if (!resume) {
			core_attr_dir(c, INODE_META_DIR, &st);
			if (rd_add(r, ".facetfs", INODE_META_DIR, &st, NULL, true))
				return;
		}
	} else {
		size_t v = core_view_index(c, after);
		if (v != INODE_NO_VIEW)
			first = v + 1;
	}
	for (size_t v = first; v < core_views(c)->n; v++) {
		const char *name = view_name(core_view(c, v));
		core_attr_dir(c, inode_number(name, ""), &st);
		if (rd_add(r, name, INODE_FIRST_DYNAMIC + v, &st, NULL, true))
			break;
	}
}

int core_readdir(struct core *c, struct core_dir *d, off_t off, bool plus,
		 core_fill_fn fill, void *ctx)
{
	stats_inc(&c->ctr.readdir);
	core_view_follow(c, &d->view, d->vname);
	if (d->vname && d->view == INODE_NO_VIEW)
		return -ENOENT;
	struct rd r = { .c = c, .d = d, .plus = plus, .fill = fill, .ctx = ctx };
	/* Continue after the remembered name, or restart and skip. */
	bool resume = off > 2 && off == d->next_off && d->last_name[0];
	char after[CORE_NAME_MAX + 1] = "";
	if (resume) {
		r.off = off;
		snprintf(after, sizeof after, "%s", d->last_name);
	} else {
		r.off = 0;
		r.skip_until = off;
	}

	struct stat st;
	int rc = 0;
	if (!resume) {
		core_attr_dir(c, d->ino, &st);
		if (rd_add(&r, ".", d->ino, &st, NULL, true) == 0) {
			core_attr_dir(c, INODE_ROOT, &st);
			rd_add(&r, "..", INODE_ROOT, &st, NULL, true);
		}
	}
	if (r.full)
		return 0;

	if (d->ino == INODE_ROOT) {
		rd_root(&r, resume, after);
	} else if (d->ino == INODE_META_DIR) {
		for (size_t i = 0; i < sizeof meta_names / sizeof meta_names[0]; i++) {
			if (resume && strcmp(meta_names[i], after) <= 0)
				continue;
			if (core_attr_of(c, meta_inos[i], &st) == 0 &&
			    rd_add(&r, meta_names[i], meta_inos[i], &st, NULL, false))
				break;
		}
	} else {
		if (!resume) {
			d->extra = false;
			d->extra_pos = 0;
		}
		if (!d->extra) {
			rc = index_readdir(c->d.ix, core_view(c, d->view), d->path, resume ? after : NULL,
					   rd_index_entry, &r);
			if (rc == -ENOENT && core_mkdir_exists(c, d->view, d->path))
				rc = 0;      /* an empty directory made here */
			if (rc >= 0 && !r.full) {
				rc = 0;
				d->extra = true;
			}
		}
		if (d->extra && !r.full)
			rd_made_dirs(&r);
	}
	return rc < 0 ? rc : 0;
}
