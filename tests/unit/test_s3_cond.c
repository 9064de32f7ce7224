/*
 * test_s3_cond.c — conditional PUTs, on the in-memory store (sync/s3/s3_fake.h)
 * behind the fault wrapper (sync/s3/s3_fault.h), at three layers:
 *   - the S3 interface (s3_put_file_if): If-Match with the key's ETag or
 *     another, If-None-Match: * on a present or absent key; the fault
 *     wrapper passes the condition on;
 *   - the probe at mount (sync/stage/probe.h): a store honouring both, either or
 *     neither, one refusing If-None-Match even on an absent key, one that
 *     cannot be written; the probe's key never stays;
 *   - the stage (stage_file_commit_if): the condition goes with a single
 *     PUT when the store honours it; a refusal is -ESTALE and leaves the
 *     file as a failed commit does (dirty, journaled "commit", its bytes
 *     uploaded by the next plain commit); an upload in parts, a streamed
 *     one or a condition the store does not honour is -EOPNOTSUPP with
 *     nothing sent and nothing changed.
 */
#include "sync/stage/probe.h"
#include "sync/s3/s3_fake.h"
#include "sync/s3/s3_fault.h"
#include "sync/stage/stage.h"

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

/* ---- the stage ---------------------------------------------------------- */

static const struct s3_cond_caps BOTH = { .if_none_match = true, .if_match = true };

/* Does the one journal in dir say state? */
static bool jnl_state(const char *dir, const char *state)
{
	char cmd[600], out[64] = "";
	snprintf(cmd, sizeof cmd, "cat '%s'/*.jnl 2>/dev/null | grep -m1 '^state '", dir);
	FILE *p = popen(cmd, "r");
	if (!p)
		return false;
	bool ok = fgets(out, sizeof out, p) != NULL;
	pclose(p);
	char want[32];
	snprintf(want, sizeof want, "state %s\n", state);
	return ok && strcmp(out, want) == 0 && count_files(dir, ".jnl") == 1;
}

/* A new staged file b/key holding the bytes of s. */
static struct stage_file *staged(struct stage *st, const char *key, const char *s)
{
	struct stage_file *f = NULL;
	if (stage_file_new(st, "b", key, NULL, 0, NULL, &f) ||
	    stage_file_pwrite(f, s, strlen(s), 0) != (ssize_t)strlen(s)) {
		printf("# cannot stage %s\n", key);
		exit(2);
	}
	return f;
}

static void test_stage_new_key(void)
{
	struct store t;
	store_init(&t, 0);
	char *dir = unit_tmpdir("cond-new");
	struct stage *st = stage_open_whole(dir, 64 << 20, 0, &t);
	char etag[72], md5[33];
	struct stage_cond cond = { .base = "", .caps = BOTH };

	struct stage_file *f = staged(st, "new", "mine");
	unit_md5_hex("mine", 4, md5);
	CHECK(stage_file_commit_if(f, &cond, etag) == 0 && s3_has(&t, "new", "mine") &&
	      strcmp(etag, md5) == 0 && !stage_file_dirty(f) && count_files(dir, ".jnl") == 0,
	      "stage: a new key, If-None-Match: uploaded, clean, no journal");
	int puts0 = puts_tried(&t);
	CHECK(stage_file_commit_if(f, &cond, etag) == 0 && puts_tried(&t) == puts0 &&
	      strcmp(etag, md5) == 0, "stage: not dirty: 0 and the last ETag, nothing sent");
	stage_file_release(f);

	/* Another client made the key since: refused, kept as a failed commit. */
	f = staged(st, "taken", "ours");
	s3_fake_object_put(t.fake, "b", "taken", "theirs", 6, NULL, 0, NULL);
	struct stage_counters k0, k1;
	stage_counters_get(st, &k0);
	CHECK(stage_file_commit_if(f, &cond, etag) == -ESTALE && s3_has(&t, "taken", "theirs"),
	      "stage: a new key another client made: -ESTALE, theirs kept");
	stage_counters_get(st, &k1);
	CHECK(stage_file_dirty(f) && jnl_state(dir, "commit") &&
	      k1.upload_errors == k0.upload_errors && k1.uploads == k0.uploads,
	      "stage: … the file dirty, journaled \"commit\", not an upload error");
	char buf[8] = "";
	CHECK(stage_file_pread(f, buf, sizeof buf, 0) == 4 && memcmp(buf, "ours", 4) == 0,
	      "stage: … its bytes intact");
	CHECK(stage_file_commit(f, etag) == 0 && s3_has(&t, "taken", "ours") &&
	      count_files(dir, ".jnl") == 0,
	      "stage: … a plain commit after it uploads them (nothing lost)");
	stage_file_release(f);

	/* The store does not honour If-None-Match: nothing happens. */
	f = staged(st, "plain", "p");
	cond.caps.if_none_match = false;
	puts0 = puts_tried(&t);
	CHECK(stage_file_commit_if(f, &cond, etag) == -EOPNOTSUPP && puts_tried(&t) == puts0 &&
	      stage_file_dirty(f) && jnl_state(dir, "dirty") && s3_has(&t, "plain", NULL),
	      "stage: If-None-Match not honoured: -EOPNOTSUPP, nothing sent, still \"dirty\"");
	CHECK(stage_file_commit(f, etag) == 0 && s3_has(&t, "plain", "p"),
	      "stage: … then a plain commit uploads it");
	stage_file_release(f);
	CHECK(stage_file_commit_if(f = staged(st, "x", "x"), NULL, etag) == -EINVAL &&
	      stage_file_commit_if(f, &(struct stage_cond){ .base = NULL, .caps = BOTH },
				   etag) == -EINVAL && stage_file_dirty(f),
	      "stage: no condition or no base: -EINVAL");
	stage_file_commit(f, NULL);
	stage_file_release(f);
	stage_case_end(st, &t, dir);
}

static void test_stage_next_version(void)
{
	struct store t;
	store_init(&t, 0);
	char *dir = unit_tmpdir("cond-next");
	struct stage *st = stage_open_whole(dir, 64 << 20, 0, &t);
	char etag[72], base[72];
	s3_fake_object_put(t.fake, "b", "k", "v1", 2, NULL, 0, NULL);
	etag_of(&t, "k", base);
	struct stage_cond cond = { .base = base, .caps = BOTH };

	struct stage_file *f = staged(st, "k", "v2");
	CHECK(stage_file_commit_if(f, &cond, etag) == 0 && s3_has(&t, "k", "v2"),
	      "stage: If-Match on the base: the next version uploaded");
	/* The same file written again, its base not moved on: refused. */
	CHECK(stage_file_pwrite(f, "v3", 2, 0) == 2 &&
	      stage_file_commit_if(f, &cond, etag) == -ESTALE && s3_has(&t, "k", "v2") &&
	      stage_file_dirty(f) && jnl_state(dir, "commit"),
	      "stage: If-Match on a replaced base: -ESTALE, the store's kept, the file dirty");
	etag_of(&t, "k", base);
	CHECK(stage_file_commit_if(f, &cond, etag) == 0 && s3_has(&t, "k", "v3"),
	      "stage: with the base moved on to the store's ETag: uploaded");
	stage_file_release(f);

	/* A sealed file (write-back): still sealed after a refusal. */
	f = staged(st, "k", "sealed");
	CHECK(stage_file_seal(f) == 0 && stage_file_sealed(f), "stage: sealed");
	s3_fake_object_put(t.fake, "b", "k", "other", 5, NULL, 0, NULL);
	CHECK(stage_file_commit_if(f, &cond, etag) == -ESTALE && stage_file_sealed(f) &&
	      stage_file_dirty(f) && jnl_state(dir, "commit") && s3_has(&t, "k", "other"),
	      "stage: a sealed file refused: still sealed, dirty, journaled \"commit\"");
	etag_of(&t, "k", base);
	CHECK(stage_file_commit_if(f, &cond, etag) == 0 && s3_has(&t, "k", "sealed") &&
	      !stage_file_dirty(f) && count_files(dir, ".jnl") == 0,
	      "stage: … uploaded on the store's ETag, journal removed");
	stage_file_release(f);

	/* If-Match not honoured: nothing sent. */
	f = staged(st, "k", "nope");
	cond.caps.if_match = false;
	int puts0 = puts_tried(&t);
	CHECK(stage_file_commit_if(f, &cond, etag) == -EOPNOTSUPP && puts_tried(&t) == puts0 &&
	      s3_has(&t, "k", "sealed") && stage_file_dirty(f),
	      "stage: If-Match not honoured: -EOPNOTSUPP, nothing sent");
	stage_file_commit(f, NULL);
	stage_file_release(f);

	/* A one-shot file (mknod, symlink) refused: never journaled. */
	cond = (struct stage_cond){ .base = "", .caps = BOTH };
	f = NULL;
	stage_file_new(st, "b", "k", NULL, 0, NULL, &f);
	stage_file_oneshot(f);
	CHECK(stage_file_pwrite(f, "t", 1, 0) == 1 &&
	      stage_file_commit_if(f, &cond, etag) == -ESTALE && count_files(dir, ".jnl") == 0 &&
	      s3_has(&t, "k", "nope"), "stage: a one-shot file refused: -ESTALE, no journal");
	stage_file_release(f);
	stage_case_end(st, &t, dir);
}

static void test_stage_parts(void)
{
	struct store t;
	store_init(&t, 1024);
	char *dir = unit_tmpdir("cond-parts");
	struct stage *st = stage_open_or_exit((struct stage_conf){ .dir = dir,
			.max_bytes = 64 << 20, .up = { .part_size = 4096 },
			.stream_off = true }, &t);
	char etag[72];
	struct stage_cond cond = { .base = "", .caps = BOTH };
	char *big = malloc(10000);
	memset(big, 'p', 10000);
	big[9999] = '\0';
	struct stage_file *f = staged(st, "big", big);
	CHECK(!upload_single(&(struct upload_conf){ .part_size = 4096 }, 9999) &&
	      upload_single(&(struct upload_conf){ .part_size = 4096 }, 4096),
	      "upload_single: one PUT up to a part, parts above");
	CHECK(stage_file_commit_if(f, &cond, etag) == -EOPNOTSUPP && puts_tried(&t) == 0 &&
	      s3_fake_count(t.fake, S3K_MPU_CREATE) == 0 && stage_file_dirty(f),
	      "stage: an upload in parts: -EOPNOTSUPP, nothing sent");
	CHECK(stage_file_commit(f, etag) == 0 && s3_has(&t, "big", big) &&
	      strchr(etag, '-'), "stage: … the plain commit uploads it in parts");
	stage_file_release(f);
	f = staged(st, "small", "s");
	CHECK(stage_file_commit_if(f, &cond, etag) == 0 && s3_has(&t, "small", "s"),
	      "stage: a file under a part on the same stage: sent with the condition");
	stage_file_release(f);
	stage_close(st);
	unit_rmtree(dir);

	/* A streamed upload open: its completion carries no condition. */
	st = stage_open_or_exit((struct stage_conf){ .dir = dir, .max_bytes = 64 << 20,
			.up = { .part_size = 4096 } }, &t);
	f = staged(st, "streamed", big);
	for (int i = 0; i < 500 && !stage_file_streaming(f); i++)
		usleep(10000);
	uint64_t completes = s3_fake_count(t.fake, S3K_MPU_COMPLETE);
	CHECK(stage_file_streaming(f) &&
	      stage_file_commit_if(f, &cond, etag) == -EOPNOTSUPP && stage_file_streaming(f) &&
	      s3_fake_count(t.fake, S3K_MPU_COMPLETE) == completes,
	      "stage: a streamed upload open: -EOPNOTSUPP, the stream left as it was");
	CHECK(stage_file_commit(f, etag) == 0 && s3_has(&t, "streamed", big),
	      "stage: … the plain commit completes it");
	stage_file_release(f);
	free(big);
	stage_case_end(st, &t, dir);
}

int main(void)
{
	log_init("test_s3_cond", 0);
	test_interface();
	test_probe();
	test_stage_new_key();
	test_stage_next_version();
	test_stage_parts();
	return unit_exit();
}
