/*
 * file.h — reading a whole (small) file into memory: configuration files,
 * filter files, the .facetfs/ files of a mount; making a directory and its
 * parents.
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
#include <sys/types.h>

/* Read path. 0 with *out (malloc'ed, the caller frees it) and *len (bytes,
 * without the added NUL; len may be NULL), or a negative errno with *out
 * NULL: from open/read, -EISDIR for a directory, -EFBIG for more than max
 * bytes, -ENOMEM. */
int file_read_all(const char *path, size_t max, char **out, size_t *len);

/* mkdir -p path (missing parts made with mode): 0, -ENOTDIR when path is
 * there but not a directory, -ENAMETOOLONG, or mkdir's -errno. */
int file_mkdir_p(const char *path, mode_t mode);

#endif
