/*
 * s3_fault.h — a wrapper around any struct s3 (the fake, the real client)
 * that injects failures by rule, for tests of error paths: fail requests
 * of a kind with an errno, add latency to a kind, answer a changed ETag
 * (HEAD and each listed object get an ETag that is not the object's), cut
 * a GET body short. Requests that no rule hits pass through unchanged.
 *
 * Rules: each rule watches one kind of request (enum s3_kind, s3_fake.h)
 * and counts the requests of that kind from when it was added; it hits
 * requests number `first` .. `first + times - 1` of them (1-based;
 * times 0 = every one from `first` on). A rule that failed a request does
 * not pass it on (the inner store never sees it); the other effects act on
 * the request passed on. s3_fault_injected() counts the hits per kind.
 * Cancellation (common/s3.h): a delay ends early once the calling
 * thread's cancel flag is set, and a request of that thread then fails
 * with -ECANCELED without being passed on.
 *
 * Ownership: the wrapper borrows the inner store unless s3_fault_new was
 * told to own it (then s3_free of the wrapper frees it too). Build: the
 * `s3test` library (s3_fake.h). Threads: as common/s3.h; one mutex guards
 * the rules and counters and is never held across a call to the inner
 * store or a sleep.
 *
 * Tests: test_s3_fake.c, test_s3_cond.c; test_stage*.c, test_reader.c
 * inject with it.
 */
#ifndef FACETFS_S3_FAULT_H
#define FACETFS_S3_FAULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/s3.h"
#include "sync/s3/s3_fake.h"

enum s3_fault_type {
	S3F_FAIL = 1,   /* return err without passing the request on */
	S3F_DELAY,      /* sleep delay_ms, then pass it on */
	S3F_ETAG,       /* HEAD, LIST: answer ETags changed (first digit) */
	S3F_SHORT,      /* GET: keep at most keep bytes of the body */
	S3F_LOST,       /* MPU_CREATE: pass it on, then return err as if the
			 * answer was lost (the store made the upload) */
};

struct s3_fault_rule {
	enum s3_kind kind;
	enum s3_fault_type type;
	unsigned first;         /* 1-based; 0 is taken as 1 */
	unsigned times;         /* consecutive requests hit; 0 = all after first */
	int err;                /* S3F_FAIL, S3F_LOST: a negative errno */
	unsigned delay_ms;      /* S3F_DELAY */
	size_t keep;            /* S3F_SHORT */
};

/* A wrapper around inner; own: s3_free of the wrapper frees inner too.
 * 0 or -ENOMEM. */
int  s3_fault_new(struct s3 *inner, bool own, struct s3 **out);
/* Add a rule (copied). 0, -EINVAL (S3F_FAIL or S3F_LOST with err >= 0,
 * S3F_SHORT not on a GET, S3F_ETAG not on a HEAD or LIST, S3F_LOST not on
 * an MPU_CREATE) or -ENOMEM. */
int  s3_fault_add(struct s3 *s, const struct s3_fault_rule *r);
/* Shorthand: fail requests first..first+times-1 of kind with err. */
int  s3_fault_fail(struct s3 *s, enum s3_kind kind, unsigned first,
		   unsigned times, int err);
/* Remove every rule (the injected counts stay). */
void s3_fault_clear(struct s3 *s);
/* Requests of kind that a rule hit so far. */
uint64_t s3_fault_injected(struct s3 *s, enum s3_kind kind);
/* Requests of kind seen so far (hit or not). */
uint64_t s3_fault_seen(struct s3 *s, enum s3_kind kind);

#endif
