/*
 * probe.h — what a store honours of the conditions a PUT may carry
 * (s3_put_file_if, common/s3.h), asked once at mount by writing a key of
 * the gateway's own: stores differ (RGW 16 honours If-None-Match: * and
 * an unquoted If-Match; others ignore both and store the object anyway),
 * and a condition the store ignores protects nothing, so the publish path
 * sends only those the probe saw honoured and checks the others with a
 * HEAD before the upload.
 *
 * Threads: any thread; it makes its requests one after the other and
 * holds no lock. Nothing returned needs freeing.
 *
 * Tests: test_s3_cond.c; t_cond.sh.
 */
#ifndef FACETFS_PROBE_H
#define FACETFS_PROBE_H

#include "common/s3.h"

/* The key a gateway probes in a bucket: ".facetfs-probe/HOST-PID" into
 * out[outlen] (truncated to fit). */
#define PROBE_PREFIX ".facetfs-probe/"
void probe_key(char *out, size_t outlen);

/* Probes bucket/key (a key nobody else writes: probe_key's) with six
 * requests: DELETE (a leftover of a crash), PUT with If-None-Match: * on
 * the absent key (must store), again on the present key (must be
 * refused), PUT with an If-Match no version has (must be refused), PUT
 * with If-Match on the key's ETag (must store), DELETE. A condition is
 * honoured only if each of its answers was the one expected; any other
 * answer (a store that ignores it, refuses it always, or fails) counts as
 * not honoured, and the probe goes on. *out: what was found (both false
 * when the probe could not write: then that error, else 0). The key is
 * deleted at the end (a failed DELETE is logged). */
int  probe_cond_put(struct s3 *s, const char *bucket, const char *key,
		    struct s3_cond_caps *out);

#endif
