/* core_mkdir.c — the directories made here (core_int.h "Made
 * directories"): the list c->mkdirs, which the index stores under 'D' (an
 * entry is added with core_mkdir_remember, core.c), and the attributes the
 * index keeps for a directory: setattr of one, and its times when an entry
 * is made or removed in it. Calls core.c only.
 */
#include "fuse/core_int.h"

#include "common/lock.h"
#include "common/log.h"
#include "views/filter.h"
#include "views/index.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* ---------- the list ---------- */

bool core_mkdir_exists(struct core_req *rq, size_t view, const char *path)
{
	struct core *c = rq->c;
	const struct core_views *vs = core_views(rq);
	return view < vs->n && core_dir_made(c, view_name(vs->views[view]), path);
}

bool core_dir_made(struct core *c, const char *vname, const char *path)
{
	mod_lock(&c->ofile_lock);
	struct mkdir_ent *m = c->mkdirs;
	while (m && (strcmp(m->vname, vname) != 0 || strcmp(m->path, path) != 0))
		m = m->next;
	mod_unlock(&c->ofile_lock);
	return m != NULL;
}

static struct mkdir_ent *mkdir_find_locked(struct core_req *rq, size_t view, const char *path)
{
	struct core *c = rq->c;
	struct mkdir_ent *m = c->mkdirs;
	while (m && (!core_in_view(rq, m->vname, view) || strcmp(m->path, path) != 0))
		m = m->next;
	return m;
}

bool core_mkdir_attr(struct core_req *rq, size_t view, const char *path, struct obj_posix *px)
{
	struct core *c = rq->c;
	mod_lock(&c->ofile_lock);
	struct mkdir_ent *m = mkdir_find_locked(rq, view, path);
	bool found = m && m->px.have;
	if (found)
		*px = m->px;
	mod_unlock(&c->ofile_lock);
	return found;
}

bool core_mkdir_set_attr(struct core_req *rq, size_t view, const char *path,
			 const struct obj_posix *px)
{
	struct core *c = rq->c;
	mod_lock(&c->ofile_lock);
	struct mkdir_ent *m = mkdir_find_locked(rq, view, path);
	if (m)
		m->px = *px;
	mod_unlock(&c->ofile_lock);
	return m != NULL;
}

static void mkdir_unlink_locked(struct core_req *rq, size_t view, const char *path)
{
	struct core *c = rq->c;
	for (struct mkdir_ent **pp = &c->mkdirs; *pp; pp = &(*pp)->next)
		if (core_in_view(rq, (*pp)->vname, view) && strcmp((*pp)->path, path) == 0) {
			struct mkdir_ent *m = *pp;
			*pp = m->next;
			free(m->path);
			free(m->vname);
			free(m);
			return;
		}
}

void core_mkdir_forget(struct core_req *rq, size_t view, const char *path)
{
	struct core *c = rq->c;
	mod_lock(&c->ofile_lock);
	mkdir_unlink_locked(rq, view, path);
	mod_unlock(&c->ofile_lock);
}

void core_mkdir_move(struct core_req *rq, size_t view, const char *path, const char *npath)
{
	struct core *c = rq->c;
	char *p = strdup(npath);
	mod_lock(&c->ofile_lock);
	if (p) {
		/* the index keeps one key per name: so does the list */
		mkdir_unlink_locked(rq, view, npath);
		for (struct mkdir_ent *m = c->mkdirs; m; m = m->next)
			if (core_in_view(rq, m->vname, view) && strcmp(m->path, path) == 0) {
				free(m->path);
				m->path = p;
				p = NULL;
				break;
			}
	}
	mod_unlock(&c->ofile_lock);
	free(p);
}

static bool under(const char *path, const char *dir, size_t dlen)
{
	return strncmp(path, dir, dlen) == 0 && path[dlen] == '/';
}

int core_mkdir_children(struct core_req *rq, size_t view, const char *dir,
			char ***names_out, size_t *n_out)
{
	struct core *c = rq->c;
	char **names = NULL;
	size_t n = 0, cap = 0;
	size_t plen = strlen(dir);
	int rc = 0;
	mod_lock(&c->ofile_lock);
	for (struct mkdir_ent *m = c->mkdirs; m; m = m->next) {
		if (!core_in_view(rq, m->vname, view))
			continue;
		const char *rest = m->path;
		if (plen) {
			if (!under(m->path, dir, plen))
				continue;
			rest = m->path + plen + 1;
		}
		if (strchr(rest, '/'))
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 8;
			char **g = realloc(names, cap * sizeof *names);
			if (!g) {
				rc = -ENOMEM;
				break;
			}
			names = g;
		}
		if (!(names[n] = strdup(rest))) {
			rc = -ENOMEM;
			break;
		}
		n++;
	}
	mod_unlock(&c->ofile_lock);
	/* What was gathered is still listed (as before: a failed allocation
	 * shortens the list, it does not fail the readdir). */
	*names_out = names;
	*n_out = n;
	return rc;
}

bool core_tables_have_child(struct core_req *rq, size_t view, const char *path)
{
	struct core *c = rq->c;
	bool any = false;
	size_t plen = strlen(path);
	mod_lock(&c->ofile_lock);
	for (struct mkdir_ent *m = c->mkdirs; m && !any; m = m->next)
		any = core_in_view(rq, m->vname, view) && under(m->path, path, plen);
	for (size_t i = 0; i < CORE_OFILE_SLOTS && !any; i++)
		for (struct ofile *o = c->ofiles_by_key[i]; o && !any; o = o->next)
			any = core_in_view(rq, o->vname, view) && under(o->path, path, plen);
	mod_unlock(&c->ofile_lock);
	return any;
}

/* ---------- attributes of made directories ---------- */

void core_attr_dir_at(struct core_req *rq, size_t view, const char *path, uint64_t ino,
		      struct stat *st)
{
	core_attr_view_dir(rq, view, ino, st);
	struct obj_posix px;
	if (*path && core_mkdir_attr(rq, view, path, &px))
		core_attr_posix(rq, view, &px, st);
}

int core_dir_setattr(struct core_req *rq, size_t view, const char *path,
		     const struct core_set *set)
{
	struct core *c = rq->c;
	if (!*path)
		return -EPERM;               /* a view's root is the view */
	if (!view_writable(core_view(rq, view)))
		return -EROFS;
	struct obj_posix px = { 0 };
	bool made = core_mkdir_exists(rq, view, path);
	core_mkdir_attr(rq, view, path, &px);
	if ((px.have & POSIX_MTIME) && !(px.have & POSIX_ATIME)) {
		px.have |= POSIX_ATIME;
		px.atime_ns = px.mtime_ns;
	}
	core_set_posix(set, &px);
	px.mode &= 07777;
	const char *vname = view_name(core_view(rq, view));
	int rc = index_dir_add(c->d.ix, vname, path, &px);
	if (rc == 0 && made && !core_mkdir_set_attr(rq, view, path, &px))
		made = false;                /* removed meanwhile: remember again */
	if (rc == 0 && !made)
		rc = core_mkdir_remember(c, vname, path, &px);
	return rc;
}

void core_dir_touch(struct core_req *rq, size_t view, const char *path)
{
	const char *slash = strrchr(path, '/');
	char dir[PATH_MAX];
	size_t len = slash ? (size_t)(slash - path) : 0;
	if (!slash || len >= sizeof dir)
		return;                      /* in a view's root: it keeps no times */
	memcpy(dir, path, len);
	dir[len] = '\0';
	if (!core_mkdir_exists(rq, view, dir))
		return;                      /* known from keys only: no attributes */
	const struct core_set now = { .what = CORE_SET_MTIME_NOW };   /* and ctime */
	int rc = core_dir_setattr(rq, view, dir, &now);
	if (rc < 0)
		log_warn("directory %s/%s: its times not kept: %s",
			 view_name(core_view(rq, view)), dir, strerror(-rc));
}
