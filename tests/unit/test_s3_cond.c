/*
 * test_s3_cond.c — conditional PUTs, on the in-memory store (sync/s3_fake.h)
 * behind the fault wrapper (sync/s3_fault.h):
 *   - the S3 interface (s3_put_file_if): If-Match with the key's ETag or
 *     another, If-None-Match: * on a present or absent key; the fault
 *     wrapper passes the condition on;
 *   - the probe at mount (sync/probe.h): a store honouring both, either or
 *     neither, one refusing If-None-Match even on an absent key, one that
 *     cannot be written; the probe's key never stays.
 */
#include "sync/probe.h"
#include "sync/s3_fake.h"
#include "sync/s3_fault.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/log.h"
#define UNIT_WITH_MD5
#include "tests/unit/unit.h"
#include "tests/unit/unit_stage.h"

/* A memory file holding the bytes of s (the body of a PUT). */
static int body_fd(const char *s)
{
	int fd = memfd_create("body", 0);
	if (fd < 0 || write(fd, s, strlen(s)) != (ssize_t)strlen(s)) {
		printf("# cannot make a body\n");
		exit(2);
	}
	return fd;
}

/* s3_put_file_if of the bytes of s at b/key. */
static int put_if(struct s3 *s3, const char *key, const char *s, const char *base,
		  char etag[72])
{
	int fd = body_fd(s);
	int rc = s3_put_file_if(s3, "b", key, fd, strlen(s), NULL, 0, NULL, base, etag);
	close(fd);
	return rc;
}

/* The ETag the store holds for b/key ("" when there is none). */
static void etag_of(struct store *t, const char *key, char out[72])
{
	struct obj_meta m;
	void *d;
	size_t n;
	out[0] = '\0';
	if (s3_fake_object_read(t->fake, "b", key, &d, &n, &m, NULL) == 0) {
		snprintf(out, 72, "%s", m.etag);
		obj_meta_release(&m);
		free(d);
	}
}

/* ---- the S3 interface --------------------------------------------------- */

static void test_interface(void)
{
	struct store t;
	store_init(&t, 0);
	char etag[72], md5[33], e1[72];

	/* If-None-Match: * */
	unit_md5_hex("one", 3, md5);
	CHECK(put_if(t.s3, "k", "one", "", etag) == 0 && s3_has(&t, "k", "one") &&
	      strcmp(etag, md5) == 0,
	      "If-None-Match on an absent key: stored, its ETag returned");
	CHECK(put_if(t.s3, "k", "two", "", etag) == -ESTALE && s3_has(&t, "k", "one") &&
	      etag[0] == '\0', "If-None-Match on a present key: -ESTALE, the object kept");

	/* If-Match */
	etag_of(&t, "k", e1);
	CHECK(put_if(t.s3, "k", "three", "0123456789abcdef0123456789abcdef", etag) == -ESTALE &&
	      s3_has(&t, "k", "one"), "If-Match with another ETag: -ESTALE, the object kept");
	unit_md5_hex("three", 5, md5);
	CHECK(put_if(t.s3, "k", "three", e1, etag) == 0 && s3_has(&t, "k", "three") &&
	      strcmp(etag, md5) == 0, "If-Match with the key's ETag: stored");
	CHECK(put_if(t.s3, "k", "four", e1, etag) == -ESTALE && s3_has(&t, "k", "three"),
	      "If-Match with the ETag of the version just replaced: -ESTALE");
	CHECK(put_if(t.s3, "absent", "x", e1, etag) == -ESTALE && s3_has(&t, "absent", NULL),
	      "If-Match on an absent key: -ESTALE, nothing stored");
	CHECK(put_if(t.s3, "k", "x", NULL, etag) == -EINVAL && s3_has(&t, "k", "three"),
	      "no condition given to s3_put_file_if: -EINVAL, nothing sent");

	/* The fault wrapper passes the condition on, and still fails PUTs. */
	CHECK(s3_fault_seen(t.s3, S3K_PUT) == 6 && s3_fake_count(t.fake, S3K_PUT) == 6,
	      "the wrapper passed each conditional PUT on to the store (%ju)",
	      (uintmax_t)s3_fake_count(t.fake, S3K_PUT));
	puts_fail(&t, 1, -EIO);
	CHECK(put_if(t.s3, "new", "x", "", etag) == -EIO && s3_has(&t, "new", NULL),
	      "a fault rule still fails a conditional PUT");

	/* A store that ignores the conditions stores whatever the key holds. */
	s3_fake_cond_ignore(t.fake, true, true);
	CHECK(put_if(t.s3, "k", "five", "", etag) == 0 && s3_has(&t, "k", "five") &&
	      put_if(t.s3, "k", "six", e1, etag) == 0 && s3_has(&t, "k", "six"),
	      "a store ignoring both conditions (s3_fake_cond_ignore) stores anyway");
	store_release(&t);
}

/* ---- the probe ---------------------------------------------------------- */

/* probe_cond_put on b/KEY of a store set up by the caller: its answer,
 * and whether the key is gone after it. */
static int probe(struct store *t, struct s3_cond_caps *caps, bool *gone)
{
	int rc = probe_cond_put(t->s3, "b", PROBE_PREFIX "host-1", caps);
	*gone = s3_has(t, PROBE_PREFIX "host-1", NULL);
	return rc;
}

static void test_probe(void)
{
	static const struct { bool ign_inm, ign_im; const char *what; } stores[] = {
		{ false, false, "honouring both" },
		{ true, false, "ignoring If-None-Match" },
		{ false, true, "ignoring If-Match" },
		{ true, true, "ignoring both" },
	};
	struct s3_cond_caps c;
	bool gone;
	for (size_t i = 0; i < sizeof stores / sizeof stores[0]; i++) {
		struct store t;
		store_init(&t, 0);
		s3_fake_cond_ignore(t.fake, stores[i].ign_inm, stores[i].ign_im);
		int rc = probe(&t, &c, &gone);
		CHECK(rc == 0 && c.if_none_match == !stores[i].ign_inm &&
		      c.if_match == !stores[i].ign_im && gone,
		      "probe: a store %s: If-None-Match %s, If-Match %s; the key deleted",
		      stores[i].what, c.if_none_match ? "yes" : "no",
		      c.if_match ? "yes" : "no");
		CHECK(s3_fake_count(t.fake, S3K_PUT) == 4 &&
		      s3_fake_count(t.fake, S3K_DELETE) == 2,
		      "probe: … in 4 PUTs and 2 DELETEs (%ju, %ju)",
		      (uintmax_t)s3_fake_count(t.fake, S3K_PUT),
		      (uintmax_t)s3_fake_count(t.fake, S3K_DELETE));
		store_release(&t);
	}

	/* A leftover of an earlier probe with the same name (a crash, the
	 * same pid): deleted first, the answers unchanged. */
	struct store t;
	store_init(&t, 0);
	s3_fake_object_put(t.fake, "b", PROBE_PREFIX "host-1", "old", 3, NULL, 0, NULL);
	CHECK(probe(&t, &c, &gone) == 0 && c.if_none_match && c.if_match && gone,
	      "probe: a leftover key does not change the answers, and goes");
	store_release(&t);

	/* A store refusing If-None-Match even on an absent key: not honoured
	 * (every new file would conflict), and the rest still probed. */
	store_init(&t, 0);
	puts_fail(&t, 1, -ESTALE);
	CHECK(probe(&t, &c, &gone) == 0 && !c.if_none_match && c.if_match && gone,
	      "probe: If-None-Match refused on an absent key: not honoured; If-Match yes");
	store_release(&t);

	/* A store answering an error to a condition: not honoured. */
	store_init(&t, 0);
	if (s3_fault_fail(t.s3, S3K_PUT, 4, 1, -EINVAL))
		exit(2);
	CHECK(probe(&t, &c, &gone) == 0 && c.if_none_match && !c.if_match && gone,
	      "probe: an error (400) to If-Match with the right ETag: If-Match not honoured");
	store_release(&t);

	/* Nothing can be written: the error, nothing honoured. */
	store_init(&t, 0);
	puts_fail(&t, 0, -EACCES);
	CHECK(probe(&t, &c, &gone) == -EACCES && !c.if_none_match && !c.if_match && gone,
	      "probe: PUTs refused (403): -EACCES, nothing honoured");
	store_release(&t);
	store_init(&t, 0);
	if (s3_fault_fail(t.s3, S3K_DELETE, 1, 1, -EHOSTUNREACH))
		exit(2);
	CHECK(probe(&t, &c, &gone) == -EHOSTUNREACH && !c.if_none_match && !c.if_match &&
	      s3_fake_count(t.fake, S3K_PUT) == 0,
	      "probe: the store unreachable: its error, no PUT made");
	store_release(&t);

	char key[300];
	probe_key(key, sizeof key);
	char want[64];
	snprintf(want, sizeof want, "-%ld", (long)getpid());
	CHECK(strncmp(key, ".facetfs-probe/", 15) == 0 && strlen(key) > 15 + strlen(want) &&
	      strcmp(key + strlen(key) - strlen(want), want) == 0,
	      "probe_key: .facetfs-probe/HOST-PID (%s)", key);
}

int main(void)
{
	log_init("test_s3_cond", 0);
	test_interface();
	test_probe();
	return unit_exit();
}
