/*
 * copy.h — one server-side copy of an object inside its bucket, of any
 * size: a single COPY up to copy_conf.threshold (5 GiB, S3's limit for
 * one COPY, unless configured lower), else a multipart copy
 * (CreateMultipartUpload, UploadPartCopy of each range, Complete) whose
 * parts are sized as uploads' are (upload_part_size) and copied at most
 * copy_conf.threads at once. The new object appears whole when this
 * returns 0; a failed multipart copy is aborted, so no parts stay.
 *
 * The source version: every copy names the version it copies by its ETag
 * (x-amz-copy-source-if-match), so a source changed since the caller read
 * its size, metadata and content type gives -ESTALE and nothing changes.
 * Threads: any thread; a multipart copy runs its part threads and joins
 * them before it returns; no lock is held across a request. Errors: as
 * common/s3.h; -EFBIG past S3_MAX_OBJECT.
 *
 * An upload a multipart copy may leave open (its creation failed in a way
 * that may have made one, or its abort failed) is reported to
 * copy_conf.left_open with the time taken before the creation, so that a
 * later start can find it and abort it (the gateway records it with
 * stage_upload_left, sync/stage/stage.h).
 *
 * Tests: test_fscore_copy.c, test_stage_orphans.c; t_copy.sh.
 */
#ifndef FACETFS_COPY_H
#define FACETFS_COPY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/object.h"
#include "common/s3.h"

#define COPY_THRESHOLD_DEFAULT S3_MAX_PART  /* 5 GiB: one COPY's limit */

struct copy_conf {
	uint64_t threshold;      /* larger objects go in parts; 0 -> default */
	uint64_t part_size;      /* as upload_conf.part_size; 0 -> 8 MiB */
	unsigned threads;        /* parts in flight per copy; 0 -> 4 */
	/* An upload of bucket/key created at or after since_ns (CLOCK_REALTIME
	 * ns) may stay open in the store; NULL: only logged. */
	void (*left_open)(void *ctx, const char *bucket, const char *key,
			  int64_t since_ns);
	void *left_ctx;
};

/* Copy bucket/src_key to bucket/dst_key (they may be the same key). src
 * is the source version as the caller knows it: size, etag (required),
 * content_type and meta (the source's whole user metadata: a multipart
 * copy writes it when meta is NULL). meta NULL keeps the source's user
 * metadata, else meta[0..n_meta) replaces it; the content type is always
 * src's (a single COPY with meta NULL keeps the stored one). etag: the
 * new object's ETag ("...-N" after a multipart copy). -EINVAL without
 * src->etag. */
int copy_object(struct s3 *s, const struct copy_conf *c, const char *bucket,
		const char *src_key, const char *dst_key,
		const struct obj_meta *src, const struct obj_kv *meta,
		size_t n_meta, char etag[72]);

/* Does an object of size bytes go in parts under c? */
bool copy_in_parts(const struct copy_conf *c, uint64_t size);

#endif
