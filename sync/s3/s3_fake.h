/*
 * s3_fake.h — an in-memory object store behind the S3 interface
 * (common/s3.h), for unit tests: buckets, objects with their bytes, ETags
 * (hex MD5 of the bytes, as a single-part PUT gives), user metadata (names
 * lower-cased), content type, tags, Last-Modified from a clock the test
 * sets, and a version counter per key. Deterministic: nothing depends on
 * the wall clock or on timing. It answers as the real client does against
 * RGW (sync/s3/s3_http.h): HEAD sets OBJ_HAS_META and OBJ_HAS_CTYPE, and
 * OBJ_HAS_TAGS with no tags when the object is untagged; a PUT without a
 * content type stores "binary/octet-stream"; a PUT stores no tags, a COPY
 * keeps the source's (S3's default tagging directive).
 * Last-Modified is the clock at the write, in whole seconds for HEAD (an
 * HTTP date) and whole milliseconds in listings (as RGW lists).
 *
 * Build: the fake and the fault wrapper (s3_fault.h) are the `s3test`
 * static library of sync/meson.build (s3test_dep); tests link it, the
 * gateway does not.
 * Test-side calls (s3_fake_*) act as another S3 client would and are not
 * counted as requests. Threads: every call may run on any thread at the
 * same time (one mutex inside; the list callback is called without it),
 * except s3_free(). Errors: as common/s3.h; -ENOENT for an unknown bucket.
 *
 * Tests: test_s3_fake.c; every unit test that needs a store runs on it.
 */
#ifndef FACETFS_S3_FAKE_H
#define FACETFS_S3_FAKE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/object.h"
#include "common/s3.h"

/* Kinds of request, for the fake's counters and the fault wrapper's rules. */
enum s3_kind {
	S3K_GET, S3K_HEAD, S3K_TAGGING, S3K_LIST, S3K_PUT, S3K_DELETE,
	S3K_COPY, S3K_BUCKET_CHECK,
	/* multipart uploads */
	S3K_MPU_CREATE, S3K_MPU_PART, S3K_MPU_COPY, S3K_MPU_COMPLETE,
	S3K_MPU_ABORT, S3K_MPU_LIST,
	S3K_N
};

/* Starting time of the clock: 2023-11-14T22:13:20Z. */
#define S3_FAKE_CLOCK_START_NS (1700000000LL * 1000000000LL)

/* An empty store with no bucket (free it with s3_free). 0 or -ENOMEM. */
int  s3_fake_new(struct s3 **out);
/* Add a bucket (0 if it exists). 0 or -ENOMEM. */
int  s3_fake_bucket_add(struct s3 *s, const char *bucket);
/* The clock, ns since the epoch, stamped as Last-Modified on each write. */
void s3_fake_clock_set(struct s3 *s, int64_t ns);
void s3_fake_clock_advance(struct s3 *s, int64_t ns);
/* A conditional PUT (s3_put_file_if) is refused with -ESTALE when the
 * key does not hold the version named (If-Match) or holds one
 * (If-None-Match: *), as S3 does; a test makes the store ignore either
 * condition, as some stores do (true: ignored; both false at start). */
void s3_fake_cond_ignore(struct s3 *s, bool if_none_match, bool if_match);
/* Keys per ListObjectsV2 page (0 -> the default, 1000). */
void s3_fake_page_size_set(struct s3 *s, size_t n);
/* Requests answered so far of a kind (a COPY that HEADs its source counts
 * one COPY, as the fault wrapper sees it). */
uint64_t s3_fake_count(struct s3 *s, enum s3_kind k);

/* A hook called at the start of every request, before it is answered
 * (on the requesting thread, without the store's lock: it may call any
 * s3_fake_* function, to act as another client between two requests);
 * key is NULL for LIST and bucket checks. fn NULL removes it. */
typedef void (*s3_fake_hook_fn)(void *ctx, enum s3_kind kind,
				const char *bucket, const char *key);
void s3_fake_hook_set(struct s3 *s, s3_fake_hook_fn fn, void *ctx);

/* Write an object as another client would: len bytes of data, metadata
 * (names lower-cased; n_meta may be 0), content type (NULL ->
 * binary/octet-stream); no tags. 0, -ENOENT (no bucket) or -ENOMEM. */
int  s3_fake_object_put(struct s3 *s, const char *bucket, const char *key,
			const void *data, size_t len, const struct obj_kv *meta,
			size_t n_meta, const char *content_type);
/* Replace an object's tags (n 0 removes them); bumps its version but not
 * Last-Modified (as S3). 0, -ENOENT or -ENOMEM. */
int  s3_fake_tags_set(struct s3 *s, const char *bucket, const char *key,
		      const struct obj_kv *tags, size_t n);
/* Delete an object; 0 or -ENOENT (no such key). */
int  s3_fake_object_delete(struct s3 *s, const char *bucket, const char *key);
/* An object's bytes (malloc'ed; the caller frees *data; non-NULL even when
 * empty) and, when out is not NULL, what a HEAD would answer plus its tags
 * (release it with obj_meta_release) and, when version is not NULL, its
 * version (1 for the first write of a key, +1 for each later write, tag
 * change or delete). 0, -ENOENT or -ENOMEM. */
int  s3_fake_object_read(struct s3 *s, const char *bucket, const char *key,
			 void **data, size_t *len, struct obj_meta *out,
			 uint64_t *version);
/* A bucket whose listing shows count objects, generated page by page as
 * they are listed and never stored, so that a bucket of ten million
 * objects costs no memory: keys prefix + a 10-digit number from 0 in
 * order, 100 bytes each, Last-Modified the clock's start + i ms, ETag the
 * number in hex. Only LIST knows them (HEAD and GET: -ENOENT). 0 or
 * -ENOMEM. */
int  s3_fake_bucket_generate(struct s3 *s, const char *bucket, const char *prefix,
			     uint64_t count);
/* Number of objects in a bucket (0 if there is no such bucket). */
size_t s3_fake_object_count(struct s3 *s, const char *bucket);

/* Multipart uploads (s3_fake_mpu.c) behave as S3's: parts 1..10,000,
 * each part's ETag the MD5 of its bytes, a completion refused (-EIO, as
 * the real client reports InvalidPart/EntityTooSmall) when a listed part
 * is missing, has another ETag, or is smaller than the minimum part size
 * and not the last; the completed object's ETag is "MD5-of-MD5s-N"; an
 * upload id is unknown (-ENOENT) once completed or aborted, and abort of
 * an unknown one is 0. The minimum part size is S3_MIN_PART (5 MiB) unless
 * a test lowers it (a test bed's RGW can too). */
void s3_fake_min_part_set(struct s3 *s, uint64_t bytes);
/* Uploads in progress in bucket (0 if there is no such bucket). */
size_t s3_fake_upload_count(struct s3 *s, const char *bucket);

#endif
