/* core_readdir.c — directory handles and readdir over the index (core.h).
 * Calls core_lookup.c (a .facetfs/ file's attributes), core_mkdir.c,
 * core_ofile.c and core.c.
 *
 * Readdir streams. A directory is listed in byte order of its names (the
 * index's key order, with the directories made here merged in; the root's
 * views and .facetfs/ sorted the same way) and no listing is ever held:
 * each reply seeks the index after the name it resumes from and reads on
 * until the caller's buffer is full.
 *
 * Offsets: "." is 1, ".." is 2, every other entry's offset is the cookie
 * of its name (dir_cookie: a 63-bit hash, as ext4's hashed directories
 * give), so an offset names a place in the order whatever was added or
 * removed before it. A readdir from an offset resumes after the name it
 * stands for, found (dir_resolve) in
 *   1. the entries of the handle's last reply (the kernel asks again from
 *      the last entry its caller took, inside the last reply);
 *   2. the names removed from the directory after this handle returned
 *      them (core_dir_removed, fed by the change callbacks; the last
 *      DIR_REMOVED_KEPT): a seekdir to a name deleted since its telldir;
 *   3. the directory itself, read from its start, cookie by cookie
 *      (seekdir to an older place: time, no memory).
 * An offset found in none of them is -EINVAL (a cookie never handed out,
 * or a name deleted with more than DIR_REMOVED_KEPT others since).
 * What a handle holds: its path, its last reply's names (at most
 * DIR_MARKS_MAX bytes) and the removed names: bounded, whatever the
 * directory's size.
 */
#include "fuse/core_int.h"

#include "common/hash.h"
#include "common/lock.h"
#include "common/log.h"
#include "common/stats.h"
#include "views/filter.h"
#include "views/index.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------- directories ---------- */

#define DIR_MARKS_MAX (64u * 1024)   /* bytes of one reply's names kept */
#define DIR_REMOVED_KEPT 16

/* Handles are listed in c->dirs under c->dir_lock (a leaf): the change
 * callbacks add removed names to them from any thread. Fields marked
 * (lock) are under it; the rest belong to the request using the handle
 * (the kernel runs one readdir of a handle at a time). */
struct core_dir {
	uint64_t ino;
	size_t view;                 /* INODE_NO_VIEW for fixed directories */
	char *vname;
	char *path;
	/* the last reply's entries: packed (u64 cookie, u8 length, name) */
	unsigned char *marks;
	size_t marks_len, marks_cap;
	/* (lock) names removed here after this handle returned them */
	struct { uint64_t cookie; char *name; } removed[DIR_REMOVED_KEPT];
	unsigned removed_next;
	char hw[CORE_NAME_MAX + 1];  /* (lock) the greatest name returned */
	bool busy;                   /* (lock) a reply is being made */
	size_t bytes;                /* (lock) what the handle holds */
	struct core_dir *prev, *next;   /* (lock) c->dirs */
};

uint64_t core_dir_cookie(const char *name)
{
	uint64_t h = hash_fnv_str(HASH_FNV_SEED, name);
	h ^= h >> 31;
	h *= 0x94d049bb133111ebULL;
	h ^= h >> 29;
	h &= INT64_MAX;              /* off_t is signed */
	return h < 3 ? h + 3 : h;
}

static size_t dir_bytes(const struct core_dir *d)
{
	size_t b = sizeof *d + d->marks_cap + (d->path ? strlen(d->path) + 1 : 0) +
		   (d->vname ? strlen(d->vname) + 1 : 0);
	for (unsigned i = 0; i < DIR_REMOVED_KEPT; i++)
		if (d->removed[i].name)
			b += strlen(d->removed[i].name) + 1;
	return b;
}

int core_opendir(struct core_req *rq, uint64_t ino, struct core_dir **out)
{
	struct core *c = rq->c;
	struct core_dir *d = calloc(1, sizeof *d);
	if (!d)
		return -ENOMEM;
	d->ino = ino;
	d->view = INODE_NO_VIEW;
	if (ino >= INODE_FIRST_DYNAMIC) {
		struct inode_info info;
		int rc = inode_get(c->d.it, ino, rq, &info);
		if (rc == 0 && !info.is_dir) {
			free(info.path);
			rc = -ENOTDIR;
		}
		if (rc == 0) {
			d->view = info.view;
			d->path = info.path;
			if (!(d->vname = strdup(view_name(core_view(rq, info.view)))))
				rc = -ENOMEM;
		}
		if (rc < 0) {
			free(d->path);
			free(d);
			return rc;
		}
	} else if (ino != INODE_ROOT && ino != INODE_META_DIR) {
		free(d);
		return -ENOTDIR;
	}
	mod_lock(&c->dir_lock);
	d->bytes = dir_bytes(d);
	d->next = c->dirs;
	if (c->dirs)
		c->dirs->prev = d;
	c->dirs = d;
	c->n_dirs++;
	c->dirs_bytes += d->bytes;
	mod_unlock(&c->dir_lock);
	*out = d;
	return 0;
}

void core_releasedir(struct core_req *rq, struct core_dir *d)
{
	struct core *c = rq->c;
	if (!d)
		return;
	mod_lock(&c->dir_lock);
	if (d->prev)
		d->prev->next = d->next;
	else
		c->dirs = d->next;
	if (d->next)
		d->next->prev = d->prev;
	c->n_dirs--;
	c->dirs_bytes -= d->bytes;
	mod_unlock(&c->dir_lock);
	for (unsigned i = 0; i < DIR_REMOVED_KEPT; i++)
		free(d->removed[i].name);
	free(d->marks);
	free(d->path);
	free(d->vname);
	free(d);
}

void core_dir_removed(struct core *c, const char *vname, const char *path)
{
	mod_lock(&c->dir_lock);
	if (!c->dirs) {
		mod_unlock(&c->dir_lock);
		return;
	}
	for (struct core_dir *d = c->dirs; d; d = d->next) {
		/* The handle's directory is path's parent or an ancestor (the
		 * component below it may have gone with its last child). */
		if (!d->vname || strcmp(d->vname, vname) != 0)
			continue;
		size_t dlen = strlen(d->path);
		const char *name = path;
		if (dlen) {
			if (strncmp(path, d->path, dlen) != 0 || path[dlen] != '/')
				continue;
			name = path + dlen + 1;
		}
		size_t nlen = strcspn(name, "/");
		if (nlen == 0 || nlen > CORE_NAME_MAX)
			continue;
		char *copy = strndup(name, nlen);
		if (!copy)
			continue;
		/* only names this handle may have handed a cookie for */
		if (!d->busy && (!d->hw[0] || strcmp(copy, d->hw) > 0)) {
			free(copy);
			continue;
		}
		unsigned i = d->removed_next++ % DIR_REMOVED_KEPT;
		free(d->removed[i].name);
		d->removed[i].name = copy;
		d->removed[i].cookie = core_dir_cookie(copy);
		c->dirs_bytes -= d->bytes;
		d->bytes = dir_bytes(d);
		c->dirs_bytes += d->bytes;
	}
	mod_unlock(&c->dir_lock);
}

void core_dir_mem(struct core *c, size_t *handles, size_t *bytes)
{
	mod_lock(&c->dir_lock);
	*handles = c->n_dirs;
	*bytes = c->dirs_bytes;
	mod_unlock(&c->dir_lock);
}

/* ---- the names of a directory, in order ---- */

/* One name of the listing: attr for an index entry, NULL for a fixed
 * entry or a made directory (is_dir says which kind); ino for fixed
 * entries (0: in a view). Returns nonzero to stop. */
typedef int (*dir_name_fn)(void *ctx, const char *name, const struct index_attr *a,
			   bool is_dir, uint64_t ino);

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The root's entries (.facetfs and the views) in name order. */
static int root_each(struct core_req *rq, const char *after, dir_name_fn fn, void *ctx)
{
	size_t n = core_views(rq)->n;
	const char **names = malloc((n + 1) * sizeof *names);
	if (!names)
		return -ENOMEM;
	names[0] = ".facetfs";
	for (size_t v = 0; v < n; v++)
		names[v + 1] = view_name(core_view(rq, v));
	qsort(names, n + 1, sizeof *names, cmp_str);
	for (size_t i = 0; i <= n; i++) {
		if (after && strcmp(names[i], after) <= 0)
			continue;
		bool meta = strcmp(names[i], ".facetfs") == 0;
		if (fn(ctx, names[i], NULL, true, meta ? INODE_META_DIR : INODE_ROOT))
			break;
	}
	free(names);
	return 0;
}

/* Merging the directories made here (sorted, those the index lists
 * too left out) into the index's entries. */
struct merge {
	struct core *c;
	struct core_dir *d;
	char **made;
	size_t n_made, next;
	dir_name_fn fn;
	void *ctx;
	bool stop;
};

static int merge_index_entry(void *ctx, const char *name, const struct index_attr *a)
{
	struct merge *m = ctx;
	for (; m->next < m->n_made; m->next++) {
		int k = strcmp(m->made[m->next], name);
		if (k > 0)
			break;
		if (k == 0)
			continue;            /* the index lists it */
		if (m->fn(m->ctx, m->made[m->next], NULL, true, 0)) {
			m->next++;
			return m->stop = true;
		}
	}
	if (m->fn(m->ctx, name, a, a->is_dir, 0))
		return m->stop = true;
	return 0;
}

/* A view directory's names after `after` (NULL: all): 0, or -ENOENT when
 * the directory has no entry at all (and none is made here). */
static int view_dir_each(struct core_req *rq, struct core_dir *d, const char *after,
			 dir_name_fn fn, void *ctx)
{
	struct core *c = rq->c;
	struct merge m = { .c = c, .d = d, .fn = fn, .ctx = ctx };
	core_mkdir_children(rq, d->view, d->path, &m.made, &m.n_made);
	if (m.n_made)
		qsort(m.made, m.n_made, sizeof *m.made, cmp_str);
	while (after && m.next < m.n_made && strcmp(m.made[m.next], after) <= 0)
		m.next++;
	int rc = index_readdir(c->d.ix, core_view(rq, d->view), d->path, after,
			       merge_index_entry, &m);
	if (rc == -ENOENT && (m.n_made || core_mkdir_exists(rq, d->view, d->path)))
		rc = 0;              /* an empty directory made here */
	for (; rc == 0 && !m.stop && m.next < m.n_made; m.next++)
		if (fn(ctx, m.made[m.next], NULL, true, 0)) {
			m.next++;
			break;
		}
	for (size_t i = 0; i < m.n_made; i++)
		free(m.made[i]);
	free(m.made);
	return rc;
}

/* Every name of d after `after`, in order, until fn stops. */
static int dir_each(struct core_req *rq, struct core_dir *d, const char *after,
		    dir_name_fn fn, void *ctx)
{
	if (d->ino == INODE_ROOT)
		return root_each(rq, after, fn, ctx);
	if (d->ino == INODE_META_DIR) {
		for (size_t i = 0; i < CORE_META_FILES; i++)
			if ((!after || strcmp(core_meta_names[i], after) > 0) &&
			    fn(ctx, core_meta_names[i], NULL, false, core_meta_inos[i]))
				break;
		return 0;
	}
	return view_dir_each(rq, d, after, fn, ctx);
}

/* ---- resuming from an offset ---- */

struct seek {
	uint64_t cookie;
	char *name;                  /* found: a copy */
	int err;
};

static int seek_name(void *ctx, const char *name, const struct index_attr *a,
		     bool is_dir, uint64_t ino)
{
	(void)a;
	(void)is_dir;
	(void)ino;
	struct seek *s = ctx;
	if (core_dir_cookie(name) != s->cookie)
		return 0;
	if (!(s->name = strdup(name)))
		s->err = -ENOMEM;
	return 1;
}

/* The name offset `off` stands for, into *name (malloc'ed): 0, -EINVAL
 * when it stands for none (see the top of this file). */
static int dir_resolve(struct core_req *rq, struct core_dir *d, uint64_t off, char **name)
{
	struct core *c = rq->c;
	*name = NULL;
	for (size_t p = 0; p + 9 <= d->marks_len; ) {
		uint64_t ck;
		memcpy(&ck, d->marks + p, 8);
		size_t len = d->marks[p + 8];
		if (ck == off) {
			if (!(*name = malloc(len + 1)))
				return -ENOMEM;
			memcpy(*name, d->marks + p + 9, len);   /* not NUL-terminated */
			(*name)[len] = '\0';
			return 0;
		}
		p += 9 + len;
	}
	mod_lock(&c->dir_lock);
	for (unsigned i = 0; i < DIR_REMOVED_KEPT && !*name; i++)
		if (d->removed[i].name && d->removed[i].cookie == off)
			*name = strdup(d->removed[i].name);
	mod_unlock(&c->dir_lock);
	if (*name)
		return 0;
	struct seek s = { .cookie = off };
	int rc = dir_each(rq, d, NULL, seek_name, &s);
	if (s.err || rc < 0) {
		free(s.name);
		return s.err ? s.err : rc;
	}
	*name = s.name;
	return s.name ? 0 : -EINVAL;
}

/* ---- filling a reply ---- */

/* The state of one readdir being filled. */
struct rd {
	struct core_req *rq;
	struct core *c;
	struct core_dir *d;
	bool plus;
	core_fill_fn fill;
	void *ctx;
	bool full;
	bool marked;                 /* this reply's first entry went in: the
				      * last reply's marks are dropped */
	char hw[CORE_NAME_MAX + 1];  /* the greatest name of this reply */
};

/* Keep (cookie, name) as an entry of this reply; past DIR_MARKS_MAX the
 * rest is found by reading the directory again. */
static void rd_mark(struct rd *r, uint64_t cookie, const char *name)
{
	struct core_dir *d = r->d;
	if (!r->marked) {
		d->marks_len = 0;
		r->marked = true;
	}
	size_t len = strlen(name);
	size_t need = d->marks_len + 9 + len;
	if (need > d->marks_cap) {
		size_t cap = d->marks_cap ? d->marks_cap : 1024;
		while (cap < need)
			cap *= 2;
		if (cap > DIR_MARKS_MAX)
			return;
		unsigned char *g = realloc(d->marks, cap);
		if (!g)
			return;
		d->marks = g;
		d->marks_cap = cap;
	}
	memcpy(d->marks + d->marks_len, &cookie, 8);
	d->marks[d->marks_len + 8] = (unsigned char)len;
	memcpy(d->marks + d->marks_len + 9, name, len);
	d->marks_len = need;
	if (strcmp(name, r->hw) > 0)
		snprintf(r->hw, sizeof r->hw, "%s", name);
}

/* Add one entry with offset next. Returns 1 when the buffer is full
 * (entry not added). child_path: the entry is in a view (readdirplus
 * takes a lookup on it). */
static int rd_add(struct rd *r, const char *name, uint64_t ino, const struct stat *st,
		  const char *child_path, bool is_dir, off_t next)
{
	struct core_dirent e = { .name = name, .attr = *st, .next = next };
	bool counted = false;
	if (r->plus) {
		if (child_path) {
			e.ino = inode_ref(r->c->d.it, view_name(core_view(r->rq, r->d->view)),
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
	if (next > 2)
		rd_mark(r, (uint64_t)next, name);
	return 0;
}

static int rd_name(void *ctx, const char *name, const struct index_attr *a, bool is_dir,
		   uint64_t ino)
{
	struct rd *r = ctx;
	struct core_req *rq = r->rq;
	struct core *c = r->c;
	off_t next = (off_t)core_dir_cookie(name);
	struct stat st;
	if (r->d->ino == INODE_ROOT) {
		if (ino == INODE_META_DIR) {
			core_attr_dir(c, INODE_META_DIR, &st);
			return rd_add(r, name, INODE_META_DIR, &st, NULL, true, next);
		}
		uint64_t vino = inode_number(name, "");
		core_attr_dir(c, vino, &st);
		return rd_add(r, name, vino, &st, NULL, true, next);
	}
	if (r->d->ino == INODE_META_DIR) {
		if (core_attr_of(rq, ino, &st) < 0)
			return 0;
		return rd_add(r, name, ino, &st, NULL, false, next);
	}
	char child[PATH_MAX];
	if (core_path_join(r->d->path, name, child, sizeof child) < 0)
		return 0;
	uint64_t cino = inode_number(view_name(core_view(rq, r->d->view)), child);
	/* readdirplus sets the kernel's attributes of each entry: a file
	 * staged here shows its staged size and attributes, as getattr does
	 * (the index's record is its last seal; a writer may have gone on) */
	struct ofile *of = r->plus && !is_dir ? core_ofile_find_path(rq, r->d->view, child)
					      : NULL;
	if (is_dir) {
		core_attr_dir_at(rq, r->d->view, child, cino, &st);
	} else if (of) {
		core_ofile_attr(rq, r->d->view, of, cino, &st);
		core_ofile_put(c, of);
	} else {
		core_attr_file(c, cino, a->size, a->mtime_ns, core_file_perm(rq, r->d->view), &st);
		core_attr_posix(rq, r->d->view, &a->px, &st);
	}
	return rd_add(r, name, cino, &st, child, is_dir, next);
}

int core_readdir(struct core_req *rq, struct core_dir *d, off_t off, bool plus,
		 core_fill_fn fill, void *ctx)
{
	struct core *c = rq->c;
	stats_inc(&c->ctr.readdir);
	core_view_follow(rq, &d->view, d->vname);
	if (d->vname && d->view == INODE_NO_VIEW)
		return -ENOENT;
	if (off < 0)
		return -EINVAL;
	struct rd r = { .rq = rq, .c = c, .d = d, .plus = plus, .fill = fill, .ctx = ctx };
	char *after = NULL;
	int rc = 0;
	if (off > 2 && (rc = dir_resolve(rq, d, (uint64_t)off, &after)) < 0) {
		if (rc == -EINVAL)
			log_debug("readdir of inode %llu: offset %lld stands for no name",
				  (unsigned long long)d->ino, (long long)off);
		return rc;
	}
	mod_lock(&c->dir_lock);
	d->busy = true;
	mod_unlock(&c->dir_lock);

	struct stat st;
	if (off < 1) {
		core_attr_dir(c, d->ino, &st);
		rd_add(&r, ".", d->ino, &st, NULL, true, 1);
	}
	if (off < 2 && !r.full) {
		core_attr_dir(c, INODE_ROOT, &st);
		rd_add(&r, "..", INODE_ROOT, &st, NULL, true, 2);
	}
	if (!r.full)
		rc = dir_each(rq, d, after, rd_name, &r);
	free(after);

	mod_lock(&c->dir_lock);
	d->busy = false;
	if (strcmp(r.hw, d->hw) > 0)
		memcpy(d->hw, r.hw, sizeof d->hw);
	c->dirs_bytes -= d->bytes;
	d->bytes = dir_bytes(d);
	c->dirs_bytes += d->bytes;
	mod_unlock(&c->dir_lock);
	return rc < 0 ? rc : 0;
}
