/*
 * links.h — the targets of symbolic links, by the ETag of the object
 * version that holds them.
 *
 * A link is an object whose bytes are its target (as s3fs stores it), so
 * an ETag names one target wherever the object lives: a readlink of a
 * version this mount made or read costs no request, whatever became of
 * the inode the kernel had for the link (an event of the link that beats
 * the reply to symlink() makes the kernel drop its fresh entry, and so
 * forget that inode). The caller checks the ETag against the index and
 * the size against the indexed size before it trusts a target.
 *
 * Bounded: LINKS_SLOTS slots, direct-mapped by a hash of the ETag, a new
 * target replacing the one in its slot. One mutex; nothing called out
 * while it is held.
 *
 * Tests: test_links.c; t_posix.sh.
 */
#ifndef FACETFS_LINKS_H
#define FACETFS_LINKS_H

#include <stdbool.h>
#include <stddef.h>

#define LINKS_SLOTS 1024u

struct links;

int  links_new(struct links **out);
void links_free(struct links *l);      /* NULL: a no-op */
/* Keep target as the bytes of version etag (not kept when it cannot be
 * allocated: the next readlink reads the object). */
void links_put(struct links *l, const char *etag, const char *target);
/* Copy the target of version etag into buf (size bytes, NUL-terminated)
 * when one is kept, is len bytes long and fits: true. */
bool links_get(struct links *l, const char *etag, size_t len, char *buf, size_t size);

#endif
