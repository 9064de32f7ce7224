/*
 * upload.h — one local file to one S3 object, whole: a single PUT when it
 * fits in one part, else a multipart upload whose parts go up in parallel
 * (at most upload_conf.threads at once per upload, each read with pread
 * straight from the file: no buffer of the upload's own). The object
 * appears whole when this returns 0 (S3 shows no object until the
 * completion), and a failed multipart upload is aborted so that no parts
 * stay behind.
 *
 * Part sizes grow with the file: part_size (8 MiB by default) while that
 * needs at most S3_MAX_PARTS parts, else the size divided by S3_MAX_PARTS
 * rounded up to a MiB, so every object up to S3_MAX_OBJECT (5 TiB) fits.
 * A single PUT may carry a condition on the key's version (If-Match,
 * If-None-Match); an upload in parts cannot: its caller checks with a
 * HEAD instead.
 * Threads: any thread; one call runs its part threads and joins them
 * before it returns; no lock is held. Errors: as common/s3.h, -EFBIG past
 * S3_MAX_OBJECT; the failing part's error when a part fails.
 *
 * Tests: test_stage_stream.c, test_s3_cond.c, test_config.c (part sizes),
 * and through stage.h the test_stage*.c files; t_stream.sh, t_multipart.sh.
 */
#ifndef FACETFS_UPLOAD_H
#define FACETFS_UPLOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/object.h"
#include "common/s3.h"

#define UPLOAD_PART_DEFAULT (8ull << 20)
#define UPLOAD_THREADS_DEFAULT 4

struct upload_conf {
	uint64_t part_size;      /* 0 -> UPLOAD_PART_DEFAULT */
	unsigned threads;        /* parts in flight per upload; 0 -> default */
};

/* The part size used for an object of size bytes. */
uint64_t upload_part_size(const struct upload_conf *c, uint64_t size);

/* The size of part number n (1-based) of a streamed upload, whose final
 * size is not known when its parts go up: part_size for parts 1..1000,
 * doubling every 1000 parts after (2x for 1001..2000, 4x, ...), capped at
 * S3_MAX_PART, and S3_MAX_PART from part 8001 on. So the first 1000 parts
 * cover 1000 x part_size (8 GiB at 8 MiB), and 10,000 parts always reach
 * past S3_MAX_OBJECT (parts 8001..10000 alone hold 10,000 GiB). */
uint64_t upload_stream_part_size(const struct upload_conf *c, unsigned n);

/* Called around the creation of a multipart upload (each may be NULL):
 * creating just before CreateMultipartUpload (the stage journals that an
 * upload may be about to exist: a crash before started can then still
 * find it), started with the upload id once it exists, before its first
 * part (the stage journals the id, so that a crash can abort it). A
 * nonzero return of creating is returned with no upload made; of
 * started, aborts the upload and is returned. abandoned: the upload
 * failed and so did its abort: it still exists, and the caller keeps
 * its id to abort it later. */
struct upload_hooks {
	int (*creating)(void *ctx);
	int (*started)(void *ctx, const char *upload_id);
	void (*abandoned)(void *ctx, const char *upload_id);
	void *ctx;
};

/* Whether upload_file sends an object of size bytes in one PUT (else in
 * parts): only then can it carry a condition. */
bool upload_single(const struct upload_conf *c, uint64_t size);

/* Upload size bytes of fd (offsets 0..size-1) as bucket/key with meta and
 * content type; hooks may be NULL. etag: the new object's ETag ("...-N"
 * for multipart). base: NULL, or the condition of s3_put_file_if (an
 * ETag the key must hold; "": no object there), sent with a single PUT
 * (-ESTALE when refused); an upload in parts cannot carry one:
 * -EOPNOTSUPP, nothing sent (check upload_single first). */
int upload_file(struct s3 *s, const struct upload_conf *c, const char *bucket,
		const char *key, int fd, uint64_t size, const struct obj_kv *meta,
		size_t n_meta, const char *content_type, const char *base,
		const struct upload_hooks *hooks, char etag[72]);

#endif
