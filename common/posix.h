/*
 * posix.h — the POSIX attributes an object carries in its user metadata
 * (times, mode, owner), in the names and formats s3fs and rclone use, so
 * objects written by any of the three show the same attributes in all.
 *
 * Names (user metadata, i.e. x-amz-meta-NAME; checked in their sources):
 *   mtime  "SECONDS" or "SECONDS.NNNNNNNNN" (exactly 9 digits): s3fs writes
 *          this and reads the digits after '.' as nanoseconds; rclone
 *          writes a float with trailing zeros dropped ("…​.5") and reads
 *          the digits as a fraction. We read as rclone does (a fraction,
 *          right for both writers' output) and write as s3fs does (9
 *          digits or none, right for both readers).
 *   atime, ctime  the same format (s3fs); read, written only when set.
 *   mode   decimal st_mode with the file type bits (s3fs: "33188" for a
 *          0644 file, 4516 for a FIFO, 41471 for a symbolic link, whose
 *          target is the object's content); read with C's base prefixes
 *          ("0644" is octal).
 *   uid, gid  decimal (s3fs).
 * These names are POSIX attributes, not user metadata: never shown as
 * user.* xattrs, never matched by filters' `metadata` (posix_meta_reserved).
 * Pure functions: any thread; no state.
 *
 * Tests: test_common.c; test_fscore_cases.c, test_fscore_copy.c (modes and
 * times kept in S3); t_posix.sh.
 */
#ifndef FACETFS_POSIX_H
#define FACETFS_POSIX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/object.h"

enum posix_have {
	POSIX_MTIME = 1u << 0,
	POSIX_MODE  = 1u << 1,
	POSIX_UID   = 1u << 2,
	POSIX_GID   = 1u << 3,
	POSIX_ATIME = 1u << 4,
	POSIX_CTIME = 1u << 5,
};

struct obj_posix {
	uint32_t have;           /* enum posix_have: which fields are set */
	uint32_t mode;           /* st_mode as stored: permission bits (07777)
				  * and the file type (S_IFMT bits; 0: none
				  * given, a regular file) */
	uint32_t uid, gid;
	int64_t mtime_ns, atime_ns, ctime_ns;   /* ns since the epoch */
};

/* Is name (lower case, no prefix) one of the attribute names above? */
bool posix_meta_reserved(const char *name);
/* The attributes found in meta[] (unparsable values are left out). */
void posix_meta_parse(const struct obj_kv *meta, size_t n, struct obj_posix *px);
/* Set (replace or add) in *arr the pairs of the fields in px->have;
 * 0 or -ENOMEM (*arr may then hold some of them). */
int  posix_meta_put(struct obj_kv **arr, size_t *n, const struct obj_posix *px);
/* The times a write changes (what a staged file's upload must not carry
 * from before it). */
#define POSIX_WRITE_TIMES (POSIX_MTIME | POSIX_CTIME)
/* Remove from arr[0..*n) the pairs of the time fields in `which`
 * (POSIX_MTIME, _ATIME, _CTIME). */
void posix_meta_drop_times(struct obj_kv *arr, size_t *n, uint32_t which);
/* One time value in the written format; buf of at least 32 bytes. */
void posix_time_format(int64_t ns, char *buf, size_t len);
/* Parse one time value; false if it is not one. */
bool posix_time_parse(const char *s, int64_t *ns);

#endif
