/*
 * decoder.h — decode-ahead of Kafka message batches: raw messages in,
 * S3 event records out (record_decode, events/record.h), one batch while
 * the caller applies the previous one.
 *
 * A job's life: decoder_post() (the decoder thread starts decoding the
 * batch) -> decoder_finish() (helps decode what is still unclaimed, waits
 * for the rest, hands over the batch as one struct ev_batch) ->
 * decoder_release() (gives it back; its records are freed on the decoder
 * thread). decoder_release() without decoder_finish() forgets a batch that
 * will not be applied. Raw messages are read only until decoder_finish()
 * or decoder_release() returns: the caller may free them then.
 * decoder_finish() counts malformed and ignored records in stats
 * (events.malformed, events.ignored) and logs each malformed message with its
 * offset, once per job, in message order.
 *
 * Threads: post/finish/release from one thread (the consumer's); at most
 * DECODER_JOBS jobs posted and not released. The decoder thread and the
 * caller claim messages with an atomic counter (each decoded once, by
 * either); the job table is under the decoder's own lock, never held while
 * decoding or freeing. Without a decoder thread (it could not start) the
 * caller decodes in decoder_finish(): slower, same result.
 *
 * Tests: test_decoder.c; t_crash.sh.
 */
#ifndef FACETFS_DECODER_H
#define FACETFS_DECODER_H

#include <stddef.h>
#include <stdint.h>

#include "common/object.h"

struct stats;
struct decoder;
struct decoder_job;

#define DECODER_JOBS 2

/* One raw Kafka message: what the consumer polled. */
struct decoder_msg {
	const char *topic;
	int32_t partition;
	int64_t offset;
	int64_t timestamp_ms;         /* produce timestamp, -1 if none */
	const void *payload;
	size_t len;
	int64_t since_ms;             /* wall clock when the consumer was assigned
	                                 the partition (0: not known) */
};

/* How far a batch takes a partition: store next with the batch's effects. */
struct ev_pos {
	const char *topic;            /* the message's topic pointer */
	int32_t partition;
	int64_t next;                 /* last offset of the partition in the batch + 1 */
};

/* A decoded batch. Every message's offset is in pos, malformed and ignored
 * ones included (a batch may have messages and no records). The records
 * belong to the job: the caller may change them (enrichment), and what it
 * stores in them is freed with them at decoder_release(). */
struct ev_batch {
	struct obj_meta *ev;          /* every record, in message order */
	const int64_t *ts_ms;         /* per record: its message's timestamp_ms */
	const int64_t *since_ms;      /* per record: its message's since_ms */
	size_t n_ev;
	const struct ev_pos *pos;     /* one per partition in the batch */
	size_t n_pos;
	size_t n_msgs;
};

/* Start the decoder thread. 0 or -ENOMEM. st (NULL: no counting) must
 * outlive the decoder. */
int  decoder_new(struct stats *st, struct decoder **out);
/* Joins the thread. Every job must have been released. NULL is fine. */
void decoder_free(struct decoder *d);

/* Post n > 0 messages for decoding; they must stay valid until
 * decoder_finish() or decoder_release() returns. NULL when memory is short
 * (or DECODER_JOBS are posted already: a caller's bug). */
struct decoder_job *decoder_post(struct decoder *d, const struct decoder_msg *msgs,
				 size_t n);
/* Wait for the job to be decoded (decoding along) and hand over its batch,
 * valid until decoder_release(). 0, or -ENOMEM (then release the job and
 * post the messages again). May be called again: same batch, no recount. */
int  decoder_finish(struct decoder *d, struct decoder_job *j, struct ev_batch **out);
/* Give the job back: waits until no thread reads its messages, then frees
 * its records (later, on the decoder thread). */
void decoder_release(struct decoder *d, struct decoder_job *j);

#endif
