/*
 * file.h — reading a whole (small) file into memory: configuration files,
 * filter files, the .facetfs/ files of a mount; making a directory and its
 * parents; writing all of a buffer, or of a pipe's bytes, at an offset.
 *
 * The size a file reports is only a hint (files under /proc or a FUSE mount
 * may report 0 or less than they hold): reading goes on to end of file,
 * and stops with -EFBIG once more than `max` bytes came. The text is
 * NUL-terminated (it may hold NULs of its own; *len says how long it is).
 * No state, any thread.
 *
 * Tests: test_common.c.
 */
#ifndef FACETFS_FILE_H
#define FACETFS_FILE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Read path. 0 with *out (malloc'ed, the caller frees it) and *len (bytes,
 * without the added NUL; len may be NULL), or a negative errno with *out
 * NULL: from open/read, -EISDIR for a directory, -EFBIG for more than max
 * bytes, -ENOMEM. */
int file_read_all(const char *path, size_t max, char **out, size_t *len);

/* mkdir -p path (missing parts made with mode): 0, -ENOTDIR when path is
 * there but not a directory, -ENAMETOOLONG, or mkdir's -errno. */
int file_mkdir_p(const char *path, mode_t mode);

/* Writes all len bytes of buf to fd at off (a short write goes on; EINTR
 * is retried): 0, or pwrite's -errno (-EIO for a write of 0 bytes). */
int file_pwrite_all(int fd, const void *buf, size_t len, uint64_t off);

/* Moves len bytes from the pipe pipe_fd into fd at off with splice(2):
 * the kernel puts the pipe's pages into fd's page cache, and no buffer of
 * ours sees them (through a 64 KiB buffer where fd's file system cannot
 * splice). 0; -EIO if the pipe holds fewer than len bytes; or -errno. On
 * error some bytes may be written and some left in the pipe. */
int file_splice_all(int pipe_fd, int fd, size_t len, uint64_t off);

#endif
