/*
 * record.h — decoding S3 event notification documents (Ceph RGW, AWS, MinIO)
 * into struct obj_meta records, and splitting a document into one message
 * per record for the bridge.
 *
 * A document is {"Records":[...]} or MinIO's wrapper {"EventName","Key",
 * "Records"}; the AWS test event ({"Event":"s3:TestEvent"}) is ignored.
 * Keys come out decoded (AWS/MinIO escapes undone, Ceph's kept raw),
 * user-metadata names lower case without "x-amz-meta-", sequencers
 * normalised so seq_cmp() orders them (common/object.h).
 *
 * Errors: a bad record is counted in ev_doc (first reason in err) and the
 * rest of the document still decodes; the caller logs it with its offset
 * (this module does not log). Pure functions: any thread may call them on
 * its own buffers. The caller owns what is returned and frees it with
 * ev_doc_release() / ev_parts_free(). Buffers need no terminating NUL.
 *
 * Tests: test_record.c, test_record_fast.c, tests/fuzz/fuzz_record.c;
 * t_malformed.sh.
 */
#ifndef FACETFS_RECORD_H
#define FACETFS_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include "common/object.h"

struct ev_doc {
	struct obj_meta *ev;     /* decoded records in document order; deletes
				    have OBJ_DELETED; mtime_ns = eventTime */
	size_t n;
	size_t n_malformed;      /* records skipped as malformed */
	size_t n_ignored;        /* records of other event kinds, test events */
	char err[256];           /* first reason something was malformed, or "" */
};

/* Decode one document. 0 even when records were malformed or ignored (then
 * counted in *out); -EINVAL when the document itself is unusable (not JSON,
 * not an object, no Records array): then n_malformed = 1 and err says why;
 * -ENOMEM. *out is always initialised; release it with ev_doc_release(). */
int record_decode(const void *buf, size_t len, struct ev_doc *out);
void ev_doc_release(struct ev_doc *d);

/* One message per record, for the bridge: json is {"Records":[record]},
 * key is "bucket/key" with the key decoded, or NULL when the record has no
 * usable bucket name and key (the consumer will count it malformed). */
struct ev_part {
	char *key;
	char *json;
	size_t json_len;
};

/* Split a document (either shape). 0 with *parts and *n (possibly 0 parts for an
 * empty Records array); -EINVAL with a reason in err for a malformed
 * document or a test event (the reason then starts with "test event");
 * -ENOMEM. On error *parts = NULL, *n = 0. */
int record_split(const void *buf, size_t len, struct ev_part **parts, size_t *n,
		 char *err, size_t errlen);
void ev_parts_free(struct ev_part *parts, size_t n);

/* "YYYY-MM-DDThh:mm:ss[.fraction](Z|±hh:mm|±hhmm)" -> ns since the epoch
 * (years 1900..2261; fraction truncated to ns). 0 or -EINVAL. */
int record_time_parse(const char *iso, int64_t *ns);

/* Normalise a sequencer as record_decode() does: Ceph's (ceph = true) 16 hex
 * digits of little-endian (seconds, ns) become the 16 upper-case hex digits
 * of seconds * 1e9 + ns; others are upper-cased. out gets "" (and -EINVAL is
 * returned) when seq is not hex or does not fit. */
int record_seq_normalise(const char *seq, int ceph, char *out, size_t outlen);

#endif
