/*
 * file.h — reading a whole (small) file into memory: configuration files,
 * filter files, the .facetfs/ files of a mount.
 *
 * The size a file reports is only a hint (files under /proc or a FUSE mount
 * may report 0 or less than they hold): reading goes on to end of file,
 * and stops with -EFBIG once more than `max` bytes came. The text is
 * NUL-terminated (it may hold NULs of its own; *len says how long it is).
 * No state, any thread.
 */
#ifndef FACETFS_FILE_H
#define FACETFS_FILE_H

#include <stddef.h>

/* Read path. 0 with *out (malloc'ed, the caller frees it) and *len (bytes,
 * without the added NUL; len may be NULL), or a negative errno with *out
 * NULL: from open/read, -EISDIR for a directory, -EFBIG for more than max
 * bytes, -ENOMEM. */
int file_read_all(const char *path, size_t max, char **out, size_t *len);

#endif
