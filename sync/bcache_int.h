/*
 * bcache_int.h — private to the block cache (bcache.c: the table, the LRU
 * lists, the threads; bcache_disk.c: checksums, names, the block file
 * format, the start-up listing). Tests include it for the CRC and the
 * name hash.
 *
 * Block file (little-endian):
 *   0  magic "FBC1"      4  u16 version (1)    6  u16 header length (H)
 *   8  u64 block offset  16 u32 data length    20 u32 CRC-32C of the data
 *   24 u16 bucket len    26 u16 key len        28 u16 ETag len  30 u16 0
 *   32 u32 CRC-32C of bytes [0, H) with this field zero   36 u32 0
 *   40 bucket, key, ETag (no NULs)   H: the data
 * Nothing here takes a lock; the functions touch only their arguments and
 * the disk (the CRC tables are built once, under pthread_once).
 */
#ifndef FACETFS_SYNC_BCACHE_INT_H
#define FACETFS_SYNC_BCACHE_INT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "sync/bcache.h"

#define BCACHE_MAGIC       0x31434246u   /* "FBC1" read as little-endian */
#define BCACHE_VERSION     1u
#define BCACHE_HDR_FIXED   40u
#define BCACHE_STR_MAX     4096u         /* longest bucket, key or ETag */
#define BCACHE_CHARGE_UNIT 4096u
/* Length of a block file's name: 32 hex digits, '-', up to 16 hex digits. */
#define BCACHE_NAME_MAX    50u

/* CRC-32C (Castagnoli, reflected, init and final xor ~0): crc is the
 * value so far (0 to start). _sw: tables; _hw: the SSE4.2 instruction
 * (call it only when bcache_crc32c_hw_ok()); bcache_crc32c picks. */
uint32_t bcache_crc32c(uint32_t crc, const void *buf, size_t len);
uint32_t bcache_crc32c_sw(uint32_t crc, const void *buf, size_t len);
uint32_t bcache_crc32c_hw(uint32_t crc, const void *buf, size_t len);
bool bcache_crc32c_hw_ok(void);

/* The 128-bit name hash of one object version. */
struct bcache_hash {
	uint64_t h[2];
};
void bcache_hash_id(const struct bcache_id *id, struct bcache_hash *out);
/* "XX/HHHH...-N" (relative to DIR) into buf[BCACHE_NAME_MAX + 4]. */
void bcache_name_format(const struct bcache_hash *h, uint64_t blk, char *buf);
/* Parse a file name "HHHH...-N" (no directory): 0, or -EINVAL. */
int bcache_name_parse(const char *name, struct bcache_hash *h, uint64_t *blk);

/* A block file's header length for id, or 0 when a string is too long. */
size_t bcache_hdr_len(const struct bcache_id *id);
/* The bytes a block file of len data bytes takes on disk, charged. */
uint64_t bcache_charge(uint64_t file_size);

/* Write block file DIR/REL through a temporary name in the same directory
 * (tmp_seq makes it unique in the process). Makes DIR and DIR/XX when
 * missing (once; *dir_made: DIR itself was missing, so every block file
 * it held is gone). 0 or -errno; never leaves the temporary file. *size:
 * the file's length. */
int bcache_file_write(const char *dir, const char *rel, uint64_t tmp_seq,
		      const struct bcache_id *id, uint64_t off,
		      const void *data, uint32_t len, uint64_t *size,
		      bool *dir_made);

/* Read and check block file DIR/REL against id and off (the data must be
 * at most block_size): copy [boff, boff+len) of the data into buf. Returns
 * the count copied, -ENOENT when there is no file, -EBADMSG when the file
 * fails any check (the caller removes it), other -errno. *size: the file's
 * length when it was found. */
ssize_t bcache_file_read(const char *dir, const char *rel,
			 const struct bcache_id *id, uint64_t off,
			 uint32_t block_size, void *buf, size_t len,
			 uint32_t boff, uint64_t *size);

/* One block file found by the start-up listing. */
struct bcache_found {
	struct bcache_hash h;
	uint64_t blk;
	uint64_t size;
	struct timespec mtime;
};
/* List DIR/00 .. DIR/ff (readdir + fstatat, no block opened), removing
 * temporary files (counted in *tmp_removed). *out: malloc'ed, sorted by
 * mtime, oldest first. A subdirectory that cannot be opened (EIO,
 * EACCES, ELOOP...) is skipped: counted in *dirs_failed, the first one's
 * name and error in failed[] (may be NULL); all 256 failing, or one
 * failing with EMFILE/ENFILE, fails the listing. Stops early (returns
 * -ECANCELED) when *stop turns true. 0 or -errno. */
int bcache_dir_list(const char *dir, atomic_bool *stop,
		    struct bcache_found **out, size_t *n, size_t *tmp_removed,
		    unsigned *dirs_failed, char *failed, size_t failed_len);

#endif
