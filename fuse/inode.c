/* inode.c — see inode.h. Two chained hash maps over the same nodes: by
 * inode number (what the kernel asks about) and by name (view, path: what
 * a lookup asks about). A node's number stays when it is renamed; its name
 * moves to the chain of the new name, so a lookup of the new name finds
 * the node the kernel holds (and the old name is free for another node). */
#include "fuse/inode.h"

#include "common/lock.h"
#include "common/log.h"
#include "common/hash.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct inode_node {
	uint64_t ino;
	uint64_t nlookup;
	char *view_name;     /* the view by name: indexes change with the view set */
	char *path;
	bool is_dir;
	char etag[72];           /* version the page cache may hold */
	uint64_t ver_size;       /* its size (set with the first cached open) */
	int cached_opens;        /* open read descriptors using the page cache */
	bool looked_up_in;       /* a LOOKUP under this directory was answered:
				  * the kernel may hold negative entries in it */
	uint64_t name_hash;      /* inode_number(view_name, path) */
	bool unnamed;            /* renamed over: in no name chain */
	struct stat *gone;       /* unlinked here (nlink 0) or retired: its
				  * attributes then */
	struct inode_node *next;      /* chain by inode number */
	struct inode_node *name_next; /* chain by name */
};

struct inode_table {
	size_t (*resolve)(void *ctx, const char *view_name);  /* set once */
	void *resolve_ctx;
	pthread_mutex_t lock;    /* protects everything below */
	struct inode_node **slots;       /* by inode number */
	struct inode_node **name_slots;  /* by name_hash */
	size_t n_slots;          /* power of two, both maps */
	size_t count;
};

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

int inode_table_new(size_t (*resolve)(void *ctx, const char *view_name), void *ctx,
		    struct inode_table **out)
{
	struct inode_table *t = calloc(1, sizeof *t);
	if (!t)
		return -ENOMEM;
	t->resolve = resolve;
	t->resolve_ctx = ctx;
	t->n_slots = 4096;
	t->slots = calloc(t->n_slots, sizeof *t->slots);
	t->name_slots = calloc(t->n_slots, sizeof *t->name_slots);
	if (!t->slots || !t->name_slots) {
		free(t->slots);
		free(t->name_slots);
		free(t);
		return -ENOMEM;
	}
	pthread_mutex_init(&t->lock, NULL);
	*out = t;
	return 0;
}

static void node_free(struct inode_node *n)
{
	free(n->gone);
	free(n->view_name);
	free(n->path);
	free(n);
}

void inode_table_free(struct inode_table *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->n_slots; i++) {
		struct inode_node *n = t->slots[i], *next;
		for (; n; n = next) {
			next = n->next;
			node_free(n);
		}
	}
	free(t->slots);
	free(t->name_slots);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

static struct inode_node **slot_of(struct inode_table *t, uint64_t ino)
{
	return &t->slots[(ino * 0x9e3779b97f4a7c15ULL >> 20) & (t->n_slots - 1)];
}

static struct inode_node *node_by_ino(struct inode_table *t, uint64_t ino)
{
	for (struct inode_node *n = *slot_of(t, ino); n; n = n->next)
		if (n->ino == ino)
			return n;
	return NULL;
}

static struct inode_node **name_slot_of(struct inode_table *t, uint64_t name_hash)
{
	return &t->name_slots[(name_hash * 0x9e3779b97f4a7c15ULL >> 20) & (t->n_slots - 1)];
}

static void name_unlink(struct inode_table *t, struct inode_node *n)
{
	for (struct inode_node **pp = name_slot_of(t, n->name_hash); *pp; pp = &(*pp)->name_next)
		if (*pp == n) {
			*pp = n->name_next;
			return;
		}
}

static void name_link(struct inode_table *t, struct inode_node *n)
{
	struct inode_node **s = name_slot_of(t, n->name_hash);
	n->name_next = *s;
	*s = n;
}

/* The node holding (view, path), or NULL and, if free_ino is not NULL,
 * *free_ino set to the first number of its probe sequence not in use (a
 * node renamed away may still use the number this name hashes to). */
static struct inode_node *node_by_name(struct inode_table *t, const char *view_name,
				       const char *path, uint64_t *free_ino)
{
	uint64_t h = inode_number(view_name, path);
	for (struct inode_node *n = *name_slot_of(t, h); n; n = n->name_next)
		if (n->name_hash == h && strcmp(n->view_name, view_name) == 0 &&
		    strcmp(n->path, path) == 0)
			return n;
	if (!free_ino)
		return NULL;
	uint64_t ino = h;
	for (struct inode_node *n; (n = node_by_ino(t, ino)); ) {
		if (!n->unnamed)         /* a hash collision, not an old inode of the name */
			log_warn("inode %llu: in use by %s/%s; %s/%s gets the next number",
				 (unsigned long long)ino, n->view_name, n->path, view_name, path);
		ino++;
		if (ino < INODE_FIRST_DYNAMIC)
			ino = INODE_FIRST_DYNAMIC;
	}
	*free_ino = ino;
	return NULL;
}

static void table_grow(struct inode_table *t)
{
	size_t n_new = t->n_slots * 2;
	struct inode_node **slots = calloc(n_new, sizeof *slots);
	struct inode_node **name_slots = calloc(n_new, sizeof *name_slots);
	if (!slots || !name_slots) {
		free(slots);
		free(name_slots);
		return;              /* keep the longer chains; still correct */
	}
	struct inode_node **old = t->slots;
	size_t n_old = t->n_slots;
	free(t->name_slots);
	t->slots = slots;
	t->name_slots = name_slots;
	t->n_slots = n_new;
	for (size_t i = 0; i < n_old; i++) {
		struct inode_node *n = old[i], *next;
		for (; n; n = next) {
			next = n->next;
			struct inode_node **s = slot_of(t, n->ino);
			n->next = *s;
			*s = n;
			if (!n->unnamed)
				name_link(t, n);
		}
	}
	free(old);
}

uint64_t inode_ref(struct inode_table *t, const char *view_name,
		   const char *path, bool is_dir)
{
	uint64_t ino = 0;
	mod_lock(&t->lock);
	struct inode_node *n = node_by_name(t, view_name, path, &ino);
	if (n) {
		n->nlookup++;
		n->is_dir = is_dir;
		ino = n->ino;
		goto out;
	}
	n = calloc(1, sizeof *n);
	if (!n || !(n->view_name = strdup(view_name)) || !(n->path = strdup(path))) {
		if (n)
			node_free(n);
		ino = 0;
		goto out;
	}
	n->ino = ino;
	n->nlookup = 1;
	n->is_dir = is_dir;
	n->name_hash = inode_number(view_name, path);
	struct inode_node **s = slot_of(t, ino);
	n->next = *s;
	*s = n;
	name_link(t, n);
	if (++t->count > t->n_slots)
		table_grow(t);
out:
	mod_unlock(&t->lock);
	return ino;
}

void inode_unref(struct inode_table *t, uint64_t ino, uint64_t n)
{
	mod_lock(&t->lock);
	struct inode_node **pp = slot_of(t, ino);
	for (; *pp; pp = &(*pp)->next) {
		struct inode_node *node = *pp;
		if (node->ino != ino)
			continue;
		node->nlookup = node->nlookup > n ? node->nlookup - n : 0;
		if (node->nlookup == 0) {
			*pp = node->next;
			if (!node->unnamed)
				name_unlink(t, node);
			node_free(node);
			t->count--;
		}
		break;
	}
	mod_unlock(&t->lock);
}

int inode_get(struct inode_table *t, uint64_t ino, struct inode_info *out)
{
	int rc = -ENOENT;
	char *vname = NULL;
	mod_lock(&t->lock);
	struct inode_node *n = node_by_ino(t, ino);
	if (n) {
		out->path = strdup(n->path);
		vname = strdup(n->view_name);
		rc = out->path && vname ? 0 : -ENOMEM;
		out->is_dir = n->is_dir;
		out->gone = n->gone != NULL;
		if (n->gone)
			out->gone_st = *n->gone;
	}
	mod_unlock(&t->lock);
	/* Resolved outside the lock: the resolver is the caller's. */
	out->view = rc == 0 ? t->resolve(t->resolve_ctx, vname) : INODE_NO_VIEW;
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
	struct inode_node *n = node_by_name(t, view_name, path, NULL);
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
		n->looked_up_in = true;
	mod_unlock(&t->lock);
}

bool inode_find_dir(struct inode_table *t, const char *view_name, const char *path,
		    uint64_t *ino, bool *looked_up_in)
{
	mod_lock(&t->lock);
	struct inode_node *n = node_by_name(t, view_name, path, NULL);
	if (n) {
		*ino = n->ino;
		*looked_up_in = n->looked_up_in;
	}
	mod_unlock(&t->lock);
	return n != NULL;
}

void inode_set_etag(struct inode_table *t, uint64_t ino, const char *etag)
{
	mod_lock(&t->lock);
	struct inode_node *n = node_by_ino(t, ino);
	if (n)
		snprintf(n->etag, sizeof n->etag, "%s", etag);
	mod_unlock(&t->lock);
}

int inode_rename(struct inode_table *t, uint64_t ino, const char *new_path)
{
	char *p = strdup(new_path);
	if (!p)
		return -ENOMEM;
	int rc = -ENOENT;
	mod_lock(&t->lock);
	struct inode_node *n = node_by_ino(t, ino);
	if (n) {
		/* Another node may hold new_path (looked up before the rename):
		 * it keeps its number and path (what the kernel may still ask
		 * about) but the name now leads to the moved node. */
		struct inode_node *other = node_by_name(t, n->view_name, new_path, NULL);
		if (other && other != n) {
			name_unlink(t, other);
			other->unnamed = true;
		}
		if (!n->unnamed)
			name_unlink(t, n);
		n->unnamed = false;
		free(n->path);
		n->path = p;
		p = NULL;
		n->name_hash = inode_number(n->view_name, new_path);
		name_link(t, n);
		n->etag[0] = '\0';
		rc = 0;
	}
	mod_unlock(&t->lock);
	free(p);
	return rc;
}

void inode_unname(struct inode_table *t, const char *view_name, const char *path)
{
	inode_unname_gone(t, view_name, path, NULL);
}

void inode_unname_gone(struct inode_table *t, const char *view_name, const char *path,
		       const struct stat *st)
{
	struct stat *copy = st ? malloc(sizeof *copy) : NULL;
	if (copy) {
		*copy = *st;
		copy->st_nlink = 0;
	}
	mod_lock(&t->lock);
	struct inode_node *n = node_by_name(t, view_name, path, NULL);
	if (n) {
		name_unlink(t, n);
		n->unnamed = true;
		if (copy && !n->gone) {
			n->gone = copy;
			copy = NULL;
		}
	}
	mod_unlock(&t->lock);
	free(copy);
}

void inode_open_read(struct inode_table *t, uint64_t ino, const char *etag,
		     uint64_t size, bool *direct, bool *keep)
{
	*direct = true;          /* unknown inode: the safe answer */
	*keep = false;
	mod_lock(&t->lock);
	struct inode_node *n = node_by_ino(t, ino);
	if (n) {
		bool same = n->etag[0] && strcmp(n->etag, etag) == 0;
		if (n->cached_opens > 0 && !same) {
			*direct = true;  /* others read another version from the cache */
			*keep = true;    /* and must keep it */
		} else {
			*direct = false;
			*keep = same;
			snprintf(n->etag, sizeof n->etag, "%s", etag);
			n->ver_size = size;
			n->cached_opens++;
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
	if (n && n->cached_opens > 0)
		n->cached_opens--;
	mod_unlock(&t->lock);
}

bool inode_cached_version(struct inode_table *t, const char *view_name, const char *path,
			  uint64_t *ino, char etag[72])
{
	mod_lock(&t->lock);
	struct inode_node *n = node_by_name(t, view_name, path, NULL);
	bool any = n && n->cached_opens > 0 && n->etag[0];
	if (any) {
		*ino = n->ino;
		snprintf(etag, 72, "%s", n->etag);
	}
	mod_unlock(&t->lock);
	return any;
}

bool inode_retire(struct inode_table *t, uint64_t ino, const char *etag,
		  const struct stat *st)
{
	struct stat *copy = malloc(sizeof *copy);
	if (!copy)
		return false;            /* invalidated as before */
	*copy = *st;
	mod_lock(&t->lock);
	struct inode_node *n = node_by_ino(t, ino);
	bool done = n && !n->unnamed && !n->gone && n->cached_opens > 0 &&
		    strcmp(n->etag, etag) == 0;
	if (done) {
		name_unlink(t, n);
		n->unnamed = true;
		copy->st_size = (off_t)n->ver_size;
		copy->st_blocks = (blkcnt_t)((n->ver_size + 511) / 512);
		n->gone = copy;
		copy = NULL;
	}
	mod_unlock(&t->lock);
	free(copy);
	return done;
}

void inode_etag_moved(struct inode_table *t, uint64_t ino, const char *from, const char *to)
{
	mod_lock(&t->lock);
	struct inode_node *n = node_by_ino(t, ino);
	if (n && strcmp(n->etag, from) == 0)
		snprintf(n->etag, sizeof n->etag, "%s", to);
	mod_unlock(&t->lock);
}

size_t inode_count(struct inode_table *t)
{
	mod_lock(&t->lock);
	size_t n = t->count;
	mod_unlock(&t->lock);
	return n;
}
