/* inode.c — see inode.h.
 *
 * Memory: one node per inode the kernel holds, and nothing for one it
 * forgot. A node is a 39-byte header and its path inline (struct
 * inode_node); the view is a small number into the table's list
 * of view names, shared by every node of the view. What few inodes need
 * (a page-cache version, attributes after an unlink, an alias) lives in a
 * struct inode_extra hung on the node only while it is needed. With a
 * 14-byte name a node is one 64-byte malloc chunk, and the table adds 8
 * to 16 bytes of slot per node: about 80 bytes per inode held
 * (docs/operations.md "Memory").
 *
 * Finding a node: a chained hash map by inode number. A node's number is
 * normally the hash of its name (its "home", inode_number()), so a lookup
 * by name looks at the home number first. A node whose number is not its
 * name's home (a rename moved the name, or the home was taken) is an
 * alias: it is also in a second, small chained map by its name's hash.
 * Renamed-over, unlinked and retired nodes are unnamed: in neither name
 * path, found by number only.
 *
 * Freed nodes go back to malloc; after every INODE_TRIM_BYTES freed the
 * table asks malloc to return free pages to the system (malloc_trim,
 * outside the lock), so that an `echo 2 > /proc/sys/vm/drop_caches` after
 * a listing of a million names gives the memory back, not only to the
 * heap. The slot array shrinks again when a quarter of it is in use.
 */
#include "fuse/inode.h"

#include "common/lock.h"
#include "common/log.h"
#include "common/hash.h"

#include <errno.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define INODE_MIN_SLOTS 4096
#define INODE_TRIM_BYTES (1u << 20)

enum {
	N_DIR = 1,           /* a directory */
	N_LOOKED_UP_IN = 2,  /* a LOOKUP under this directory was answered: the
			      * kernel may hold negative entries in it */
	N_UNNAMED = 4,       /* renamed over, unlinked or retired: no name leads here */
	N_ALIAS = 8,         /* named, but not at its name's home number: in the
			      * alias map (x->name_hash) */
};

/* What a few nodes need, allocated only while they need it. */
struct inode_extra {
	struct inode_node *alias_next;  /* chain of the alias map (N_ALIAS) */
	uint64_t name_hash;             /* inode_number of the name (N_ALIAS) */
	char etag[72];                  /* version the page cache may hold */
	uint64_t ver_size;              /* its size (set with the first cached open) */
	int cached_opens;               /* open read descriptors using the page cache */
	bool has_gone;                  /* unlinked here (nlink 0) or retired: */
	struct stat gone;               /* its attributes then */
};

struct inode_node {
	struct inode_node *next;        /* chain by inode number */
	uint64_t ino;
	uint64_t nlookup;
	struct inode_extra *x;          /* NULL: none needed */
	uint32_t view;                  /* into the table's view names */
	uint16_t plen;
	uint8_t flags;                  /* N_* */
	char path[];                    /* plen bytes and a NUL; "" for a view's root */
};

struct vname {
	char *name;                     /* NULL: a free entry */
	size_t refs;                    /* nodes of this view */
};

struct inode_table {
	size_t (*resolve)(const void *ctx, const char *view_name);  /* set once */
	pthread_mutex_t lock;           /* protects everything below */
	struct inode_node **slots;      /* by inode number */
	size_t n_slots;                 /* power of two */
	size_t count;
	struct inode_node **aslots;     /* aliases by name hash */
	size_t n_aslots;                /* power of two */
	size_t n_alias;
	struct vname *vn;
	size_t n_vn;
	uint32_t vn_hint;               /* the view last found */
	size_t bytes;                   /* malloc chunks of nodes, extras, names */
	size_t extras;
	size_t freed;                   /* bytes freed since the last trim */
};

/* The chunk glibc's malloc uses for a request of n bytes (its usable size
 * plus the header, 16-byte steps, at least 32): what a node costs. */
static size_t chunk_of(size_t n)
{
	size_t c = (n + 8 + 15) & ~(size_t)15;
	return c < 32 ? 32 : c;
}

static size_t node_size(size_t plen)
{
	return offsetof(struct inode_node, path) + plen + 1;
}

/* FNV-1a over "view\0path", mixed, kept above the fixed inode range. */
uint64_t inode_number(const char *view_name, const char *path)
{
	uint64_t h = hash_fnv_str(HASH_FNV_SEED, view_name);
	h = hash_fnv_str(hash_fnv_byte(h, 0xff), path);
	h ^= h >> 29;
	h *= 0xbf58476d1ce4e5b9ULL;
	h ^= h >> 32;
	if (h < INODE_FIRST_DYNAMIC)
		h += INODE_FIRST_DYNAMIC;
	return h;
}

int inode_table_new(size_t (*resolve)(const void *ctx, const char *view_name),
		    struct inode_table **out)
{
	struct inode_table *t = calloc(1, sizeof *t);
	if (!t)
		return -ENOMEM;
	t->resolve = resolve;
	t->n_slots = INODE_MIN_SLOTS;
	t->slots = calloc(t->n_slots, sizeof *t->slots);
	t->n_aslots = 64;
	t->aslots = calloc(t->n_aslots, sizeof *t->aslots);
	if (!t->slots || !t->aslots) {
		free(t->slots);
		free(t->aslots);
		free(t);
		return -ENOMEM;
	}
	pthread_mutex_init(&t->lock, NULL);
	*out = t;
	return 0;
}

void inode_table_free(struct inode_table *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->n_slots; i++) {
		struct inode_node *n = t->slots[i], *next;
		for (; n; n = next) {
			next = n->next;
			free(n->x);
			free(n);
		}
	}
	for (size_t i = 0; i < t->n_vn; i++)
		free(t->vn[i].name);
	free(t->vn);
	free(t->slots);
	free(t->aslots);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

/* ---- view names ---- */

/* The number of view name, or -1 when no node of it exists. */
static long vname_find(struct inode_table *t, const char *name)
{
	if (t->vn_hint < t->n_vn && t->vn[t->vn_hint].name &&
	    strcmp(t->vn[t->vn_hint].name, name) == 0)
		return t->vn_hint;
	for (size_t i = 0; i < t->n_vn; i++)
		if (t->vn[i].name && strcmp(t->vn[i].name, name) == 0) {
			t->vn_hint = (uint32_t)i;
			return (long)i;
		}
	return -1;
}

/* One more node of view name: its number, or -1 (no memory). */
static long vname_ref(struct inode_table *t, const char *name)
{
	long v = vname_find(t, name);
	if (v < 0) {
		size_t i = 0;
		while (i < t->n_vn && t->vn[i].name)
			i++;
		if (i == t->n_vn) {
			if (i >= UINT32_MAX)
				return -1;
			struct vname *g = realloc(t->vn, (t->n_vn + 1) * sizeof *g);
			if (!g)
				return -1;
			t->vn = g;
			t->vn[t->n_vn++] = (struct vname){ NULL, 0 };
		}
		if (!(t->vn[i].name = strdup(name)))
			return -1;
		t->bytes += chunk_of(strlen(name) + 1);
		v = (long)i;
	}
	t->vn[v].refs++;
	return v;
}

static void vname_unref(struct inode_table *t, uint32_t v)
{
	if (--t->vn[v].refs == 0) {
		t->bytes -= chunk_of(strlen(t->vn[v].name) + 1);
		free(t->vn[v].name);
		t->vn[v].name = NULL;
		while (t->n_vn && !t->vn[t->n_vn - 1].name)
			t->n_vn--;
		if (!t->n_vn) {
			free(t->vn);
			t->vn = NULL;
		}
	}
}

/* ---- the maps ---- */

static size_t slot_index(uint64_t h, size_t n_slots)
{
	return (size_t)((h * 0x9e3779b97f4a7c15ULL) >> 20) & (n_slots - 1);
}

static struct inode_node *node_by_ino(struct inode_table *t, uint64_t ino)
{
	for (struct inode_node *n = t->slots[slot_index(ino, t->n_slots)]; n; n = n->next)
		if (n->ino == ino)
			return n;
	return NULL;
}

/* The link pointing at n in its number chain. */
static struct inode_node **ino_link(struct inode_table *t, struct inode_node *n)
{
	struct inode_node **pp = &t->slots[slot_index(n->ino, t->n_slots)];
	while (*pp != n)
		pp = &(*pp)->next;
	return pp;
}

/* Rebuild the number map with n_new slots; false (nothing changed) when
 * there is no memory: longer chains stay correct. */
static bool slots_resize(struct inode_table *t, size_t n_new)
{
	struct inode_node **s = calloc(n_new, sizeof *s);
	if (!s)
		return false;
	for (size_t i = 0; i < t->n_slots; i++) {
		struct inode_node *n = t->slots[i], *next;
		for (; n; n = next) {
			next = n->next;
			struct inode_node **d = &s[slot_index(n->ino, n_new)];
			n->next = *d;
			*d = n;
		}
	}
	free(t->slots);
	t->slots = s;
	t->n_slots = n_new;
	return true;
}

static void alias_resize(struct inode_table *t, size_t n_new)
{
	struct inode_node **s = calloc(n_new, sizeof *s);
	if (!s)
		return;
	for (size_t i = 0; i < t->n_aslots; i++) {
		struct inode_node *n = t->aslots[i], *next;
		for (; n; n = next) {
			next = n->x->alias_next;
			struct inode_node **d = &s[slot_index(n->x->name_hash, n_new)];
			n->x->alias_next = *d;
			*d = n;
		}
	}
	free(t->aslots);
	t->aslots = s;
	t->n_aslots = n_new;
}

static struct inode_extra *extra_of(struct inode_table *t, struct inode_node *n)
{
	if (!n->x && (n->x = calloc(1, sizeof *n->x))) {
		t->bytes += chunk_of(sizeof *n->x);
		t->extras++;
	}
	return n->x;
}

/* Put n in the alias map under its name's hash h (n->x exists). */
static void alias_link(struct inode_table *t, struct inode_node *n, uint64_t h)
{
	n->x->name_hash = h;
	struct inode_node **s = &t->aslots[slot_index(h, t->n_aslots)];
	n->x->alias_next = *s;
	*s = n;
	n->flags |= N_ALIAS;
	if (++t->n_alias > t->n_aslots)
		alias_resize(t, t->n_aslots * 2);
}

static void alias_unlink(struct inode_table *t, struct inode_node *n)
{
	if (!(n->flags & N_ALIAS))
		return;
	struct inode_node **pp = &t->aslots[slot_index(n->x->name_hash, t->n_aslots)];
	while (*pp != n)
		pp = &(*pp)->x->alias_next;
	*pp = n->x->alias_next;
	n->x->alias_next = NULL;
	n->flags &= (uint8_t)~N_ALIAS;
	t->n_alias--;
}

/* No name leads to n any more. */
static void unname(struct inode_table *t, struct inode_node *n)
{
	alias_unlink(t, n);
	n->flags |= N_UNNAMED;
}

static bool node_is(const struct inode_node *n, long v, const char *path, size_t plen)
{
	return n->view == (uint32_t)v && n->plen == plen && memcmp(n->path, path, plen) == 0;
}

/* The named node of (view v, path) whose home number is h, or NULL. */
static struct inode_node *node_by_name(struct inode_table *t, long v, const char *path,
				       uint64_t h)
{
	if (v < 0)
		return NULL;
	size_t plen = strlen(path);
	struct inode_node *n = node_by_ino(t, h);
	if (n && !(n->flags & (N_UNNAMED | N_ALIAS)) && node_is(n, v, path, plen))
		return n;
	if (t->n_alias == 0)
		return NULL;
	for (n = t->aslots[slot_index(h, t->n_aslots)]; n; n = n->x->alias_next)
		if (n->x->name_hash == h && node_is(n, v, path, plen))
			return n;
	return NULL;
}

static struct inode_node *find_named(struct inode_table *t, const char *view_name,
				     const char *path)
{
	return node_by_name(t, vname_find(t, view_name), path, inode_number(view_name, path));
}

/* The first number from h on that no node uses. A node renamed away may
 * still use the number this name hashes to (logged: a real collision of
 * two names is astronomically rare). */
static uint64_t free_number(struct inode_table *t, uint64_t h, const char *view_name,
			    const char *path)
{
	uint64_t ino = h;
	for (struct inode_node *n; (n = node_by_ino(t, ino)); ) {
		if (!(n->flags & N_UNNAMED))
			log_warn("inode %llu: in use by %s/%s; %s/%s gets the next number",
				 (unsigned long long)ino, t->vn[n->view].name, n->path,
				 view_name, path);
		ino++;
		if (ino < INODE_FIRST_DYNAMIC)
			ino = INODE_FIRST_DYNAMIC;
	}
	return ino;
}

/* Take n out of the table and free it; true when the caller should trim. */
static bool node_drop(struct inode_table *t, struct inode_node **link)
{
	struct inode_node *n = *link;
	*link = n->next;
	alias_unlink(t, n);
	size_t b = chunk_of(node_size(n->plen));
	if (n->x) {
		b += chunk_of(sizeof *n->x);
		t->extras--;
		free(n->x);
	}
	vname_unref(t, n->view);
	free(n);
	t->bytes -= b;
	t->count--;
	if (t->n_slots > INODE_MIN_SLOTS && t->count < t->n_slots / 4)
		slots_resize(t, t->n_slots / 2);
	t->freed += b;
	if (t->freed < INODE_TRIM_BYTES)
		return false;
	t->freed = 0;
	return true;
}

/* Give free heap pages back to the system (no lock held). */
static void trim(void)
{
#ifdef __GLIBC__
	malloc_trim(0);
#endif
}

/* ---- the interface ---- */

uint64_t inode_ref(struct inode_table *t, const char *view_name,
		   const char *path, bool is_dir)
{
	size_t plen = strlen(path);
	if (plen > UINT16_MAX)
		return 0;
	uint64_t h = inode_number(view_name, path), ino = 0;
	mod_lock(&t->lock);
	struct inode_node *n = node_by_name(t, vname_find(t, view_name), path, h);
	if (n) {
		n->nlookup++;
		n->flags = (uint8_t)(is_dir ? n->flags | N_DIR : n->flags & ~N_DIR);
		ino = n->ino;
		goto out;
	}
	long v = vname_ref(t, view_name);
	if (v < 0)
		goto out;
	if (!(n = malloc(node_size(plen)))) {
		vname_unref(t, (uint32_t)v);
		goto out;
	}
	*n = (struct inode_node){ .ino = free_number(t, h, view_name, path), .nlookup = 1,
				  .view = (uint32_t)v, .plen = (uint16_t)plen,
				  .flags = is_dir ? N_DIR : 0 };
	memcpy(n->path, path, plen + 1);
	if (n->ino != h) {
		if (!extra_of(t, n)) {
			vname_unref(t, (uint32_t)v);
			free(n);
			goto out;
		}
		alias_link(t, n, h);
	}
	struct inode_node **s = &t->slots[slot_index(n->ino, t->n_slots)];
	n->next = *s;
	*s = n;
	t->bytes += chunk_of(node_size(plen));
	if (++t->count > t->n_slots)
		slots_resize(t, t->n_slots * 2);
	ino = n->ino;
out:
	mod_unlock(&t->lock);
	return ino;
}

void inode_unref(struct inode_table *t, uint64_t ino, uint64_t n)
{
	bool do_trim = false;
	mod_lock(&t->lock);
	struct inode_node **pp = &t->slots[slot_index(ino, t->n_slots)];
	for (; *pp; pp = &(*pp)->next) {
		struct inode_node *node = *pp;
		if (node->ino != ino)
			continue;
		node->nlookup = node->nlookup > n ? node->nlookup - n : 0;
		if (node->nlookup == 0)
			do_trim = node_drop(t, pp);
		break;
	}
	mod_unlock(&t->lock);
	if (do_trim)
		trim();
}

int inode_get(struct inode_table *t, uint64_t ino, const void *resolve_ctx,
	      struct inode_info *out)
{
	int rc = -ENOENT;
	char *vname = NULL;
	out->path = NULL;
	mod_lock(&t->lock);
	struct inode_node *n = node_by_ino(t, ino);
	if (n) {
		out->path = strdup(n->path);
		vname = strdup(t->vn[n->view].name);
		rc = out->path && vname ? 0 : -ENOMEM;
		out->is_dir = (n->flags & N_DIR) != 0;
		out->gone = n->x && n->x->has_gone;
		if (out->gone)
			out->gone_st = n->x->gone;
	}
	mod_unlock(&t->lock);
	/* Resolved outside the lock: the resolver is the caller's. */
	out->view = rc == 0 ? t->resolve(resolve_ctx, vname) : INODE_NO_VIEW;
	if (rc == 0 && out->view == INODE_NO_VIEW)
		rc = -ENOENT;            /* its view is gone */
	free(vname);
	if (rc < 0) {
		free(out->path);
		out->path = NULL;
	}
	return rc;
}

bool inode_find(struct inode_table *t, const char *view_name, const char *path,
		uint64_t *ino)
{
	mod_lock(&t->lock);
	struct inode_node *n = find_named(t, view_name, path);
	if (n)
		*ino = n->ino;
	mod_unlock(&t->lock);
	return n != NULL;
}

void inode_note_lookup(struct inode_table *t, uint64_t parent)
{
	mod_lock(&t->lock);
	struct inode_node *n = node_by_ino(t, parent);
	if (n)
		n->flags |= N_LOOKED_UP_IN;
	mod_unlock(&t->lock);
}

bool inode_find_dir(struct inode_table *t, const char *view_name, const char *path,
		    uint64_t *ino, bool *looked_up_in)
{
	mod_lock(&t->lock);
	struct inode_node *n = find_named(t, view_name, path);
	if (n) {
		*ino = n->ino;
		*looked_up_in = (n->flags & N_LOOKED_UP_IN) != 0;
	}
	mod_unlock(&t->lock);
	return n != NULL;
}

void inode_set_etag(struct inode_table *t, uint64_t ino, const char *etag)
{
	mod_lock(&t->lock);
	struct inode_node *n = node_by_ino(t, ino);
	if (n && extra_of(t, n))
		snprintf(n->x->etag, sizeof n->x->etag, "%s", etag);
	mod_unlock(&t->lock);
}

int inode_rename(struct inode_table *t, uint64_t ino, const char *new_path)
{
	size_t plen = strlen(new_path);
	if (plen > UINT16_MAX)
		return -ENAMETOOLONG;
	int rc = -ENOENT;
	mod_lock(&t->lock);
	struct inode_node *n = node_by_ino(t, ino);
	if (!n)
		goto out;
	const char *vname = t->vn[n->view].name;
	uint64_t h = inode_number(vname, new_path);
	/* Another node may hold new_path (looked up before the rename): it
	 * keeps its number and path (what the kernel may still ask about) but
	 * the name now leads to the moved node. */
	rc = -ENOMEM;
	if (h != n->ino && !extra_of(t, n))
		goto out;
	struct inode_node *m = malloc(node_size(plen));
	if (!m)
		goto out;
	struct inode_node *other = node_by_name(t, n->view, new_path, h);
	if (other && other != n)
		unname(t, other);
	alias_unlink(t, n);
	struct inode_node **link = ino_link(t, n);
	*m = *n;
	m->plen = (uint16_t)plen;
	memcpy(m->path, new_path, plen + 1);
	m->flags &= (uint8_t)~N_UNNAMED;
	*link = m;
	t->bytes += chunk_of(node_size(plen));
	t->bytes -= chunk_of(node_size(n->plen));
	free(n);
	if (h != m->ino)
		alias_link(t, m, h);
	if (m->x)
		m->x->etag[0] = '\0';
	rc = 0;
out:
	mod_unlock(&t->lock);
	return rc;
}

void inode_unname(struct inode_table *t, const char *view_name, const char *path)
{
	inode_unname_gone(t, view_name, path, NULL);
}

void inode_unname_gone(struct inode_table *t, const char *view_name, const char *path,
		       const struct stat *st)
{
	mod_lock(&t->lock);
	struct inode_node *n = find_named(t, view_name, path);
	if (n) {
		unname(t, n);
		if (st && !(n->x && n->x->has_gone) && extra_of(t, n)) {
			n->x->gone = *st;
			n->x->gone.st_nlink = 0;
			n->x->has_gone = true;
		}
	}
	mod_unlock(&t->lock);
}

void inode_open_read(struct inode_table *t, uint64_t ino, const char *etag,
		     uint64_t size, bool *direct, bool *keep)
{
	*direct = true;          /* unknown inode: the safe answer */
	*keep = false;
	mod_lock(&t->lock);
	struct inode_node *n = node_by_ino(t, ino);
	if (n && extra_of(t, n)) {
		struct inode_extra *x = n->x;
		bool same = x->etag[0] && strcmp(x->etag, etag) == 0;
		if (x->cached_opens > 0 && !same) {
			*direct = true;  /* others read another version from the cache */
			*keep = true;    /* and must keep it */
		} else {
			*direct = false;
			*keep = same;
			snprintf(x->etag, sizeof x->etag, "%s", etag);
			x->ver_size = size;
			x->cached_opens++;
		}
	}
	mod_unlock(&t->lock);
}

void inode_close_read(struct inode_table *t, uint64_t ino, bool direct)
{
	if (direct)
		return;
	mod_lock(&t->lock);
	struct inode_node *n = node_by_ino(t, ino);
	if (n && n->x && n->x->cached_opens > 0)
		n->x->cached_opens--;
	mod_unlock(&t->lock);
}

bool inode_cached_version(struct inode_table *t, const char *view_name, const char *path,
			  uint64_t *ino, char etag[72])
{
	mod_lock(&t->lock);
	struct inode_node *n = find_named(t, view_name, path);
	bool any = n && n->x && n->x->cached_opens > 0 && n->x->etag[0];
	if (any) {
		*ino = n->ino;
		snprintf(etag, 72, "%s", n->x->etag);
	}
	mod_unlock(&t->lock);
	return any;
}

bool inode_retire(struct inode_table *t, uint64_t ino, const char *etag,
		  const struct stat *st)
{
	mod_lock(&t->lock);
	struct inode_node *n = node_by_ino(t, ino);
	struct inode_extra *x = n ? n->x : NULL;
	bool done = x && !(n->flags & N_UNNAMED) && !x->has_gone && x->cached_opens > 0 &&
		    strcmp(x->etag, etag) == 0;
	if (done) {
		unname(t, n);
		x->gone = *st;
		x->gone.st_size = (off_t)x->ver_size;
		x->gone.st_blocks = (blkcnt_t)((x->ver_size + 511) / 512);
		x->has_gone = true;
	}
	mod_unlock(&t->lock);
	return done;
}

void inode_etag_moved(struct inode_table *t, uint64_t ino, const char *from, const char *to)
{
	mod_lock(&t->lock);
	struct inode_node *n = node_by_ino(t, ino);
	if (n && n->x && strcmp(n->x->etag, from) == 0)
		snprintf(n->x->etag, sizeof n->x->etag, "%s", to);
	mod_unlock(&t->lock);
}

size_t inode_count(struct inode_table *t)
{
	mod_lock(&t->lock);
	size_t n = t->count;
	mod_unlock(&t->lock);
	return n;
}

void inode_mem(struct inode_table *t, struct inode_mem *out)
{
	mod_lock(&t->lock);
	out->inodes = t->count;
	out->extras = t->extras;
	out->aliases = t->n_alias;
	out->bytes = t->bytes + (t->n_slots + t->n_aslots) * sizeof *t->slots +
		     t->n_vn * sizeof *t->vn + sizeof *t;
	mod_unlock(&t->lock);
}
