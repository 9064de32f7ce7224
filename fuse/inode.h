/*
 * inode.h — the mount's inode table: which (view, path) each inode number
 * the kernel holds stands for, and how many lookups it holds.
 *
 * Inode numbers are stable across restarts: they are a 64-bit hash of the
 * view name and the path inside the view (inode_number()), so a kernel or an
 * NFS client that remembers one finds the same file after a remount. The
 * fixed inodes of the root and of .facetfs/ are below INODE_FIRST_DYNAMIC.
 * On the (astronomically rare) hash collision the next free number is used
 * and the collision is logged; so is a name whose number a renamed inode
 * still uses (the inode keeps its number after a rename).
 *
 * Lookup counts follow the FUSE rule: every entry reply adds one
 * (inode_ref()), forget subtracts (inode_unref()), the node is freed at zero.
 * All functions take the table's own mutex; none calls out while holding it.
 * Returned paths are copies the caller frees.
 *
 * Views: a node keeps its view's NAME, never an index (indexes belong to a
 * view set, and the set changes while the kernel holds the inode);
 * inode_get() turns the name into an index with the table's resolver,
 * given the caller's context (the mount's: the request being served, whose
 * view set it answers for).
 *
 * Memory: the table holds what the kernel holds and nothing else. A node
 * keeps the number, the lookup count, the view (a small number naming it)
 * and the path; attributes are read from the index on demand. A node the
 * kernel forgot is freed at once; about 80 bytes per inode held, more for
 * the few open with the page cache, unlinked or renamed (inode.c).
 *
 * Tests: test_inode.c (against a model), test_fscore.c; t_bigdir.sh,
 * t_cache.sh.
 */
#ifndef FACETFS_INODE_H
#define FACETFS_INODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

enum {
	INODE_ROOT = 1,
	INODE_META_DIR,      /* .facetfs/ */
	INODE_META_STATS,    /* .facetfs/stats */
	INODE_META_VIEWS,    /* .facetfs/views */
	INODE_META_CONTROL,  /* .facetfs/control */
	INODE_META_RECOVERED, /* .facetfs/recovered: a symlink to staging's recovered/ */
	INODE_META_PENDING,  /* .facetfs/pending: write-back files not in S3 yet */
	INODE_FIRST_DYNAMIC = 64,
};

#define INODE_NO_VIEW ((size_t)-1)

struct inode_table;

struct inode_info {
	size_t view;         /* index of the view, as the resolver says */
	char *path;          /* path inside the view, "" for the view's root; caller frees */
	bool is_dir;
	bool gone;           /* unlinked with attributes (inode_unname_gone) or
			      * retired (inode_retire): gone_st is what it shows */
	struct stat gone_st;
};

/* resolve(ctx, view name): the view's index, or INODE_NO_VIEW when there
 * is no such view (any thread that calls inode_get, with the ctx given
 * to it; no table lock held). */
int inode_table_new(size_t (*resolve)(const void *ctx, const char *view_name),
		    struct inode_table **out);
void inode_table_free(struct inode_table *t);

/* The stable number for (view name, path); does not touch the table. */
uint64_t inode_number(const char *view_name, const char *path);

/* Add one lookup to the inode of (view, path), creating it; returns the
 * inode number actually used (0 on allocation failure). */
uint64_t inode_ref(struct inode_table *t, const char *view_name,
		   const char *path, bool is_dir);
/* Subtract n lookups; the node is freed at zero. */
void inode_unref(struct inode_table *t, uint64_t ino, uint64_t n);

/* Copy out what ino stands for: 0, or -ENOENT if the kernel holds no such
 * inode or the resolver (given resolve_ctx) knows no view of its name
 * (gone). Fixed inodes are
 * not in the table. */
int inode_get(struct inode_table *t, uint64_t ino, const void *resolve_ctx,
	      struct inode_info *out);
/* Is (view, path) currently known to the kernel? Sets *ino. */
bool inode_find(struct inode_table *t, const char *view_name, const char *path,
		uint64_t *ino);
/* A LOOKUP under directory `parent` is about to be answered (call it
 * before reading the index, so a name added after this call is seen by
 * that LOOKUP): from now on the kernel may cache negative entries there.
 * inode_find_dir() is inode_find() that also says whether that happened
 * since the kernel last got the directory's inode; if not, a name added
 * in it needs no invalidation (the kernel cannot hold a negative entry). */
void inode_note_lookup(struct inode_table *t, uint64_t parent);
bool inode_find_dir(struct inode_table *t, const char *view_name, const char *path,
		    uint64_t *ino, bool *looked_up_in);
/* The page cache of ino now holds version etag (this mount just wrote and
 * uploaded it). */
void inode_set_etag(struct inode_table *t, uint64_t ino, const char *etag);

/* After a rename: ino now stands for new_path (its number stays, as the
 * kernel's inode does) and a lookup of new_path finds it; a node that held
 * new_path before keeps its number and path but no lookup finds it again. */
int inode_rename(struct inode_table *t, uint64_t ino, const char *new_path);

/* After an unlink through this mount: the inode of (view, path), if the
 * kernel holds one, keeps its number and path for its open descriptors,
 * but no lookup finds it again: a file made later under that name is
 * another inode (the next free number). */
void inode_unname(struct inode_table *t, const char *view_name, const char *path);
/* inode_unname(), keeping st (copied, st_nlink set to 0) as the inode's
 * attributes for its open descriptors (fstat after unlink; st NULL: none). */
void inode_unname_gone(struct inode_table *t, const char *view_name, const char *path,
		       const struct stat *st);

/* The kernel page cache of an inode is shared by all its descriptors; it
 * must never hold pages of two versions. A read-only descriptor of version
 * etag: inode_open_read() says whether it may use the page cache (*direct
 * false) and whether what the cache holds may be kept (*keep): while
 * descriptors of another version use the cache, the new one gets direct
 * I/O. inode_close_read() with the same `direct` when it closes. */
void inode_open_read(struct inode_table *t, uint64_t ino, const char *etag,
		     uint64_t size, bool *direct, bool *keep);
void inode_close_read(struct inode_table *t, uint64_t ino, bool direct);

/* One size per kernel inode: when (view, path) changes to another version
 * while descriptors read the old one through the page cache, the old
 * inode is retired rather than invalidated: it keeps its number, path and
 * pages for those descriptors, and the attributes st with the size of the
 * version it holds (getattr answers them from then on, whatever becomes of
 * the name), and no lookup finds it again, so the name's next lookup makes
 * a new inode for the new version (the caller invalidates the kernel's
 * entry). inode_cached_version(): is (view, path) an inode with cached
 * readers, and of which version (*ino, etag)? inode_retire(): retire ino
 * if it still holds version etag with cached readers; true if done.
 * inode_etag_moved(): the same bytes now carry ETag `to` (a metadata copy):
 * if ino's pages are of `from`, they are of `to`. */
bool inode_cached_version(struct inode_table *t, const char *view_name, const char *path,
			  uint64_t *ino, char etag[72]);
bool inode_retire(struct inode_table *t, uint64_t ino, const char *etag,
		  const struct stat *st);
void inode_etag_moved(struct inode_table *t, uint64_t ino, const char *from, const char *to);

size_t inode_count(struct inode_table *t);

/* What the table holds now: inodes, those with extra state (page-cache
 * version, attributes after an unlink, renamed), and the bytes of it all
 * (nodes as malloc chunks, slot arrays, view names). */
struct inode_mem {
	size_t inodes, extras, aliases, bytes;
};
void inode_mem(struct inode_table *t, struct inode_mem *out);

#endif
