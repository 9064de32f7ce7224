/*
 * consumer_marks.c — the consumer seen from other threads
 * (consumer_int.h): barriers (consumer_barrier: the brokers' end offsets
 * now, then a wait until apply() passed them) and how fresh the assigned
 * partitions are (consumer_freshness), both read under c->lock.
 */
#include "events/consumer_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/lock.h"
#include "events/kafka.h"

/* ---- barriers (any thread) ---- */

struct barrier_mark {
	int32_t partition;
	int64_t lo, hi;
};

/* Wait on c->cond (c->lock held) until woken or the monotonic deadline
   (ns); false once the deadline has passed. */
static bool consumer_cond_wait(struct consumer *c, int64_t deadline)
{
	struct timespec ts;
	int64_t left = deadline - consumer_now_ns();

	if (left <= 0)
		return false;
	clock_gettime(CLOCK_REALTIME, &ts);
	left += ts.tv_nsec;
	ts.tv_sec += left / 1000000000LL;
	ts.tv_nsec = left % 1000000000LL;
	pthread_cond_timedwait(&c->cond, &c->lock, &ts);
	return true;
}

/* Is every record below mark m applied (c->lock held)? *why says what is
   missing when not. */
static bool consumer_mark_reached(struct consumer *c, const struct barrier_mark *m,
                                  char *why, size_t whylen)
{
	const struct part_pos *p = consumer_part_find(c, m->partition);

	if (m->hi <= m->lo)
		return true;                          /* nothing in it */
	if (!p) {
		snprintf(why, whylen, "%s/%" PRId32 " is no longer assigned to this gateway",
		         c->topic, m->partition);
		return false;
	}
	if (p->next >= m->hi)
		return true;
	snprintf(why, whylen, "%s/%" PRId32 " applied up to offset %" PRId64 " of %" PRId64,
	         c->topic, m->partition, p->next < 0 ? m->lo : p->next, m->hi);
	return false;
}

/* The offsets of the n partitions' first records (earliest, m->lo) or
   ends (the high-water marks, m->hi), by ListOffsets with Kafka's
   "timestamps" -2 and -1. */
static int consumer_marks_query(struct consumer *c, struct barrier_mark *m, size_t n,
                                int64_t deadline, char *why, size_t whylen)
{
	for (int end = 0; end < 2; end++) {
		rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new((int)n);
		int64_t left = (deadline - consumer_now_ns()) / 1000000LL;
		rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR__TIMED_OUT;

		for (size_t i = 0; i < n; i++)
			rd_kafka_topic_partition_list_add(l, c->topic, m[i].partition)->offset =
				end ? -1 : -2;
		if (left > 0) {
			KAFKA_GUARD("offsets_for_times");
			err = rd_kafka_offsets_for_times(c->rk, l, (int)left);
		}
		for (size_t i = 0; i < n && err == RD_KAFKA_RESP_ERR_NO_ERROR; i++) {
			rd_kafka_topic_partition_t *tp = &l->elems[i];

			if (tp->err != RD_KAFKA_RESP_ERR_NO_ERROR)
				err = tp->err;
			else if (end)
				m[i].hi = tp->offset;
			else
				m[i].lo = tp->offset;
		}
		rd_kafka_topic_partition_list_destroy(l);
		if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
			snprintf(why, whylen, "the %s offsets of %s: %s", end ? "end" : "first",
			         c->topic, rd_kafka_err2str(err));
			return err == RD_KAFKA_RESP_ERR__TIMED_OUT ? -ETIMEDOUT : -EIO;
		}
	}
	return 0;
}

int consumer_barrier(struct consumer *c, int timeout_ms, struct consumer_marks *out,
                     char *why, size_t whylen)
{
	int64_t deadline = consumer_now_ns() + (int64_t)timeout_ms * 1000000LL;
	struct barrier_mark *m = NULL;
	size_t n = 0;
	int rc = 0;

	memset(out, 0, sizeof *out);
	why[0] = '\0';
	mod_lock(&c->lock);
	while (!c->assigned && c->started && consumer_cond_wait(c, deadline))
		;                                     /* the group's first join */
	if (!c->assigned) {
		snprintf(why, whylen, "no partition of %s assigned yet (the group %s is joining)",
		         c->topic, c->group);
		rc = -ETIMEDOUT;
	} else if (c->n_parts && !(m = calloc(c->n_parts, sizeof *m)))
		rc = -ENOMEM;
	for (size_t i = 0; m && i < c->n_parts; i++)
		m[n++].partition = c->parts[i].partition;
	mod_unlock(&c->lock);
	if (rc == 0 && !n) {
		snprintf(why, whylen, "no partition of %s is assigned to this gateway", c->topic);
		rc = -ENOENT;
	}
	/* The low and high-water marks now, asked of the brokers (not the
	   ones the last fetch cached): one request per leader for all. */
	if (rc == 0)
		rc = consumer_marks_query(c, m, n, deadline, why, whylen);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		out->partitions++;
		out->records += m[i].hi > m[i].lo ? (uint64_t)(m[i].hi - m[i].lo) : 0;
	}
	/* Applied up to them: each apply() that returned moves a partition's
	   next offset and wakes the waiters. */
	mod_lock(&c->lock);
	for (size_t i = 0; rc == 0 && i < n;) {
		if (consumer_mark_reached(c, &m[i], why, whylen))
			i++;
		else if (!consumer_cond_wait(c, deadline))
			rc = -ETIMEDOUT;
	}
	mod_unlock(&c->lock);
	if (rc == 0)
		why[0] = '\0';
	free(m);
	return rc;
}

void consumer_freshness(struct consumer *c, struct consumer_fresh *out)
{
	memset(out, 0, sizeof *out);
	mod_lock(&c->lock);
	out->partitions = c->topic_parts > 0 ? (unsigned)c->topic_parts : 0;
	out->assigned = (unsigned)c->n_parts;
	for (size_t i = 0; i < c->n_parts; i++) {
		int64_t f = c->parts[i].fresh_ms;

		if (i == 0 || f < out->fresh_ms)
			out->fresh_ms = f;
	}
	mod_unlock(&c->lock);
}
