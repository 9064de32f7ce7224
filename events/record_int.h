/*
 * record_int.h — the inside of the event decoder, shared by record.c (the
 * cJSON tree path, the reference) and record_fast.c (the single-pass fast
 * path for well-formed documents). Not for other modules. Layers, each
 * calling only those below it:
 *   record.c        record_decode(), the tree path, record_split()
 *   record_fast.c   the single-pass path
 *   record_field.c  the values of one record as both paths read them;
 *                   ev_doc_release()
 *
 * Invariant: for every document record_decode_fast() accepts (returns
 * anything but RECORD_FAST_FALLBACK), its output equals, field by field,
 * what record_decode_tree() gives for the same bytes; on anything it does
 * not fully understand (a malformed record, an escaped object key, an
 * unusual number, deep nesting, odd whitespace, ...) it returns FALLBACK
 * and record_decode() hands the document to cJSON. tests/unit/
 * test_record_fast.c checks the invariant on the samples and on mutations.
 * Pure functions: any thread, caller's buffers.
 *
 * Tests: test_record_fast.c (fast path against the tree path),
 * tests/fuzz/fuzz_record.c.
 */
#ifndef FACETFS_RECORD_INT_H
#define FACETFS_RECORD_INT_H

#include "events/record.h"

enum record_kind { RECORD_KIND_OTHER, RECORD_KIND_PUT, RECORD_KIND_DELETE };

#define RECORD_FAST_FALLBACK 1

/* record_field.c (and record.h's record_time_parse, record_seq_normalise,
 * ev_doc_release). What an eventName means for the index. */
enum record_kind record_kind_of(const char *name);
/* Undo form-URL encoding: 0, -EINVAL, -ENOMEM (*out malloc'ed). */
int record_form_decode(const char *s, char **out);
/* One stored header (x-amz-meta-*, content-type) into o: 0 or -ENOMEM. */
int record_meta_add(struct obj_meta *o, const char *name, const char *val);
/* One tag into o: 0 or -ENOMEM. */
int record_tag_add(struct obj_meta *o, const char *name, const char *val);
/* eTag without surrounding quotes into o->etag: 0, or -1 when too long. */
int record_etag_set(struct obj_meta *o, const char *s);

/* record.c. The reference decoder: one cJSON tree per document (record.h's
 * contract). */
int record_decode_tree(const void *buf, size_t len, struct ev_doc *out);
/* record_fast.c. The fast path: record_decode()'s result (0, -ENOMEM), or
 * RECORD_FAST_FALLBACK with *out released (zeroed). */
int record_decode_fast(const void *buf, size_t len, struct ev_doc *out);

#endif
