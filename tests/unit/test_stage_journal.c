/*
 * test_stage_journal.c — the staging journal under both durability
 * settings (sync/stage/stage.h, cache.durability): the fsyncs a small file costs
 * (staging.syncs: 4 under POWER, 0 under PROCESS), an fsync that does not
 * commit (3 / 0: the data, the unsynced "dirty" journal and its
 * directory; then 1 / 0), what the journal holds
 * at each step (the commit's own metadata is not journaled before the
 * "commit" journal), the crash rule after a real SIGKILL of a child process
 * under each setting (same outcome), and the distrust of a PROCESS run's
 * files after a (simulated) reboot: all moved to recovered/, nothing
 * uploaded or deleted. The journal's writes: in place over a plain
 * "dirty" one (same inode), atomically over a "commit" one (a new inode).
 * Torn version-2 journals (cut at every offset, zeros past every cut, a
 * byte flipped at every offset, a new head over an older text) read as
 * "dirty" with no upload or intent, and recovery only moves their data to
 * recovered/; version-1 journals read and recover as before. The base
 * line of version 3, and version-2 texts without it. Store: the
 * in-memory fake behind the fault wrapper.
 */
#include "sync/stage/stage_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "sync/s3/s3_fake.h"
#include "sync/s3/s3_fault.h"
#include "tests/unit/unit.h"
#include "tests/unit/unit_stage.h"

static const char *const dname[] = { "power", "process" };

static struct stage *open_stage(const char *dir, enum stage_durability d,
				struct store *t)
{
	return stage_open_or_exit((struct stage_conf){ .dir = dir, .max_bytes = 64 << 20,
			.durability = d, .up = { .part_size = 1ull << 30 } }, t);
}

static uint64_t syncs(struct stage *st)
{
	struct stage_counters c;
	stage_counters_get(st, &c);
	return c.syncs;
}

/* The object's bytes equal want[0..len). */
static bool obj_is(struct store *t, const char *key, const void *want, size_t len)
{
	void *d = NULL;
	size_t n = 0;
	struct obj_meta m;
	if (s3_fake_object_read(t->fake, "bk", key, &d, &n, &m, NULL) != 0)
		return false;
	bool same = n == len && memcmp(d, want, len) == 0;
	free(d);
	obj_meta_release(&m);
	return same;
}

/* The value of meta NAME in the journal of f ("" if none, "?" if no
 * journal). */
static void jnl_meta(struct stage_file *f, const char *name, char *out, size_t len)
{
	struct stage_jnl j;
	snprintf(out, len, "?");
	if (stage_jnl_read(f->st, f->id, &j) != 0)
		return;
	snprintf(out, len, "%s", "");
	for (size_t i = 0; i < j.n_meta; i++)
		if (!strcmp(j.meta[i].name, name))
			snprintf(out, len, "%s", j.meta[i].value);
	stage_jnl_release(&j);
}

/* One small file as `cp` makes it: create, one write, the commit's mtime,
 * commit, release; then a file whose metadata changes while it is open. */
static void test_small_file(enum stage_durability d)
{
	char *dir = unit_tmpdir("stage-jnl");
	struct store t;
	store_init(&t, 0);
	struct stage *st = open_stage(dir, d, &t);
	uint64_t s0 = syncs(st);
	char data[65536];
	for (size_t i = 0; i < sizeof data; i++)
		data[i] = (char)(i * 7 + 1);
	struct obj_kv m1[] = { { "mode", "644" } };
	struct obj_kv m2[] = { { "mode", "644" }, { "mtime", "1700000000" } };
	struct stage_file *f;
	char v[64];
	CHECK(stage_file_new(st, "bk", "small", m1, 1, NULL, &f) == 0 &&
	      stage_file_pwrite(f, data, sizeof data, 0) == (ssize_t)sizeof data,
	      "%s: create + 64 KiB write", dname[d]);
	jnl_meta(f, "mode", v, sizeof v);
	CHECK(!strcmp(v, "644"), "%s: the first write journals \"dirty\" with the "
	      "metadata (%s)", dname[d], v);
	CHECK(stage_file_set_commit_meta(f, m2, 2, NULL) == 0, "%s: commit metadata",
	      dname[d]);
	jnl_meta(f, "mtime", v, sizeof v);
	CHECK(!strcmp(v, ""), "%s: the commit's metadata is not journaled before "
	      "the commit (mtime '%s')", dname[d], v);
	CHECK(stage_file_commit(f, NULL) == 0 && obj_is(&t, "small", data, sizeof data),
	      "%s: committed, S3 has the bytes", dname[d]);
	uint64_t per_file = syncs(st) - s0;
	printf("# %s: %llu fsync/fdatasync calls for one small file\n", dname[d],
	       (unsigned long long)per_file);
	/* POWER: data + commit journal (file, dir) + removal (dir); the
	 * "dirty" journal is not synced. */
	CHECK(per_file == (d == STAGE_DURABLE_POWER ? 4 : 0),
	      "%s: %llu syncs per small file (want %d)", dname[d],
	      (unsigned long long)per_file, d == STAGE_DURABLE_POWER ? 4 : 0);
	CHECK(count_files(dir, ".jnl") == 0, "%s: no journal after the commit", dname[d]);
	stage_file_release(f);

	/* set_meta on an open dirty file is journaled at once (a crash keeps
	 * it in recovered/.journal), under both settings. */
	CHECK(stage_file_new(st, "bk", "meta", m1, 1, NULL, &f) == 0 &&
	      stage_file_pwrite(f, "x", 1, 0) == 1, "%s: second file written", dname[d]);
	/* fsync(2) under `session` (no commit): the data, and the "dirty"
	 * journal written unsynced at the first write, made durable under
	 * POWER only; a second fsync syncs the data alone. */
	s0 = syncs(st);
	CHECK(stage_file_sync(f) == 0 &&
	      syncs(st) - s0 == (d == STAGE_DURABLE_POWER ? 3 : 0),
	      "%s: fsync of a written file: %llu sync calls (want %d)", dname[d],
	      (unsigned long long)(syncs(st) - s0), d == STAGE_DURABLE_POWER ? 3 : 0);
	s0 = syncs(st);
	CHECK(stage_file_sync(f) == 0 &&
	      syncs(st) - s0 == (d == STAGE_DURABLE_POWER ? 1 : 0),
	      "%s: fsync again: %llu sync calls (want %d)", dname[d],
	      (unsigned long long)(syncs(st) - s0), d == STAGE_DURABLE_POWER ? 1 : 0);
	s0 = syncs(st);
	CHECK(stage_file_set_meta(f, m2, 2, NULL) == 0, "%s: set_meta", dname[d]);
	jnl_meta(f, "mtime", v, sizeof v);
	CHECK(!strcmp(v, "1700000000") && syncs(st) == s0,
	      "%s: set_meta rewrites the journal ('%s', %llu syncs, want 0)",
	      dname[d], v, (unsigned long long)(syncs(st) - s0));
	s0 = syncs(st);
	CHECK(stage_file_sync(f) == 0 &&
	      syncs(st) - s0 == (d == STAGE_DURABLE_POWER ? 3 : 0),
	      "%s: fsync after set_meta syncs the new journal: %llu sync calls "
	      "(want %d)", dname[d], (unsigned long long)(syncs(st) - s0),
	      d == STAGE_DURABLE_POWER ? 3 : 0);
	/* The rewrite exchanges the new text with the old journal (no rename
	 * onto it: see jnl_install) and removes the old text. */
	CHECK(count_files(dir, ".jnl") == 1 && count_files(dir, ".jnl.tmp") == 0,
	      "%s: one journal after the rewrite, no temporary left (%d, %d)",
	      dname[d], count_files(dir, ".jnl"), count_files(dir, ".jnl.tmp"));
	CHECK(stage_file_commit(f, NULL) == 0 && obj_is(&t, "meta", "x", 1),
	      "%s: second file committed", dname[d]);
	s0 = syncs(st);
	CHECK(stage_file_sync(f) == 0 && syncs(st) == s0,
	      "%s: fsync after the commit: nothing to sync", dname[d]);
	stage_file_release(f);
	stage_case_end(st, &t, dir);
}

/* ---- a real SIGKILL ------------------------------------------------------ */

struct killer {
	struct store *t;
	unsigned puts0;
};

/* Kills the process (SIGKILL, as kill -9) once a PUT has started. */
static void *killer_run(void *arg)
{
	struct killer *k = arg;
	while (s3_fault_seen(k->t->s3, S3K_PUT) == k->puts0)
		usleep(1000);
	kill(getpid(), SIGKILL);
	return NULL;
}

/* The child: A written and never committed; B's commit failed (S3 down);
 * C committed and released; D created only; F killed during its PUT. */
static void crash_child(const char *dir, enum stage_durability d)
{
	struct store t;
	store_init(&t, 0);
	struct stage *st = open_stage(dir, d, &t);
	struct stage_file *f;
	stage_file_new(st, "bk", "a", NULL, 0, NULL, &f);
	stage_file_pwrite(f, "AAAA", 4, 0);
	stage_file_new(st, "bk", "b", NULL, 0, NULL, &f);
	stage_file_pwrite(f, "BBBBBB", 6, 0);
	if (s3_fault_fail(t.s3, S3K_PUT, 1, 1, -EIO))
		_exit(5);
	if (stage_file_commit(f, NULL) != -EIO)
		_exit(6);
	stage_file_new(st, "bk", "c", NULL, 0, NULL, &f);
	stage_file_pwrite(f, "CC", 2, 0);
	stage_file_commit(f, NULL);
	stage_file_release(f);
	stage_file_new(st, "bk", "d", NULL, 0, NULL, &f);
	stage_file_new(st, "bk", "f", NULL, 0, NULL, &f);
	stage_file_pwrite(f, "FFFFFFFF", 8, 0);
	struct s3_fault_rule slow = { .kind = S3K_PUT, .type = S3F_DELAY,
				      .delay_ms = 60000 };
	s3_fault_add(t.s3, &slow);
	struct killer k = { &t, s3_fault_seen(t.s3, S3K_PUT) };
	pthread_t th;
	if (pthread_create(&th, NULL, killer_run, &k) != 0)
		_exit(4);
	stage_file_commit(f, NULL);
	_exit(3);    /* not reached: killed during the PUT */
}

static bool crash(const char *dir, enum stage_durability d)
{
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0)
		crash_child(dir, d);
	int status = 0;
	waitpid(pid, &status, 0);
	return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
}

/* The recovered file whose name starts with prefix holds want. */
static bool recovered_has(const char *rd, const char *prefix, const char *want)
{
	DIR *d = opendir(rd);
	struct dirent *de;
	bool found = false;
	while (d && (de = readdir(d)) && !found) {
		if (strncmp(de->d_name, prefix, strlen(prefix)) || strstr(de->d_name, ".journal"))
			continue;
		char p[1024], buf[32] = "";
		snprintf(p, sizeof p, "%s/%s", rd, de->d_name);
		int fd = open(p, O_RDONLY);
		ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
		if (fd >= 0)
			close(fd);
		found = n == (ssize_t)strlen(want) && !strcmp(buf, want);
	}
	if (d)
		closedir(d);
	return found;
}

/* kill -9 under each setting: the same crash rule holds. */
static void test_kill9(enum stage_durability d)
{
	char *dir = unit_tmpdir("stage-kill");
	CHECK(crash(dir, d), "%s: child killed with SIGKILL during a PUT", dname[d]);
	struct store t;
	store_init(&t, 0);
	struct stage *st = open_stage(dir, d, &t);
	struct stage_recovery_report r;
	CHECK(stage_recover(st, &r) == 0, "%s: recovery after kill -9", dname[d]);
	printf("# %s: reuploaded %u, recovered %u, deleted %u\n", dname[d],
	       r.reuploaded, r.recovered, r.deleted);
	CHECK(r.reuploaded == 2 && r.recovered == 1 && r.deleted == 1 &&
	      obj_is(&t, "b", "BBBBBB", 6) && obj_is(&t, "f", "FFFFFFFF", 8) &&
	      s3_fake_object_count(t.fake, "bk") == 2,
	      "%s: after kill -9 the two commit-begun files are uploaded whole",
	      dname[d]);
	CHECK(recovered_has(stage_recovered_dir(st), "bk%2Fa@", "AAAA"),
	      "%s: the written, never committed file is in recovered/", dname[d]);
	CHECK(count_files(dir, ".data") == 0 && count_files(dir, ".jnl") == 0,
	      "%s: staging empty after recovery", dname[d]);
	stage_case_end(st, &t, dir);
}

/* Rewrites the boot line of DIR/durability (a reboot, as recovery sees it). */
static void fake_reboot(const char *dir)
{
	char p[512], text[256] = "";
	snprintf(p, sizeof p, "%s/durability", dir);
	FILE *fp = fopen(p, "r");
	size_t n = fp ? fread(text, 1, sizeof text - 1, fp) : 0;
	if (fp)
		fclose(fp);
	text[n] = '\0';
	char *b = strstr(text, "\nboot ");
	if (!b) {
		printf("# no boot line in %s: '%s'\n", p, text);
		exit(1);
	}
	snprintf(b, sizeof text - (size_t)(b - text), "\nboot another-boot\n");
	fp = fopen(p, "w");
	if (!fp || fputs(text, fp) < 0 || fclose(fp) != 0)
		exit(2);
}

static bool durability_says(const char *dir, const char *mode, bool this_boot)
{
	char p[512], text[256] = "", want[128], boot[64] = "";
	snprintf(p, sizeof p, "%s/durability", dir);
	FILE *fp = fopen(p, "r");
	size_t n = fp ? fread(text, 1, sizeof text - 1, fp) : 0;
	if (fp)
		fclose(fp);
	text[n] = '\0';
	fp = fopen("/proc/sys/kernel/random/boot_id", "r");
	if (fp && fgets(boot, sizeof boot, fp))
		boot[strcspn(boot, "\n")] = '\0';
	if (fp)
		fclose(fp);
	snprintf(want, sizeof want, "mode %s\nboot %s\n", mode, this_boot ? boot : "another-boot");
	return strstr(text, want) != NULL;
}

/* After a reboot: a PROCESS run's files are all kept for the user (none
 * uploaded from a journal that may be stale, none deleted); a POWER run's
 * follow the crash rule. */
static void test_reboot(enum stage_durability d)
{
	char *dir = unit_tmpdir("stage-boot");
	CHECK(crash(dir, d), "%s: child killed", dname[d]);
	CHECK(durability_says(dir, dname[d], true), "%s: the durability file names "
	      "the setting and this boot", dname[d]);
	fake_reboot(dir);
	struct store t;
	store_init(&t, 0);
	/* Restarted with the other setting: the previous run's decides. */
	enum stage_durability now = d == STAGE_DURABLE_POWER ? STAGE_DURABLE_PROCESS
							     : STAGE_DURABLE_POWER;
	struct stage *st = open_stage(dir, now, &t);
	struct stage_recovery_report r;
	CHECK(stage_recover(st, &r) == 0, "%s: recovery after a reboot", dname[d]);
	printf("# %s then reboot: reuploaded %u, recovered %u, deleted %u, PUTs %u\n",
	       dname[d], r.reuploaded, r.recovered, r.deleted,
	       (unsigned)s3_fault_seen(t.s3, S3K_PUT));
	const char *rd = stage_recovered_dir(st);
	if (d == STAGE_DURABLE_PROCESS) {
		CHECK(r.reuploaded == 0 && r.recovered == 4 && r.deleted == 0 &&
		      s3_fault_seen(t.s3, S3K_PUT) == 0,
		      "process, then reboot: a, b, d, f moved to recovered/, nothing "
		      "uploaded or deleted");
		CHECK(recovered_has(rd, "bk%2Fa@", "AAAA") &&
		      recovered_has(rd, "bk%2Fb@", "BBBBBB") &&
		      recovered_has(rd, "bk%2Ff@", "FFFFFFFF") &&
		      recovered_has(rd, "unknown-", ""),
		      "process, then reboot: recovered/ holds their bytes (d, never "
		      "journaled, as unknown-ID)");
	} else {
		CHECK(r.reuploaded == 2 && r.recovered == 1 && r.deleted == 1 &&
		      obj_is(&t, "b", "BBBBBB", 6) && obj_is(&t, "f", "FFFFFFFF", 8),
		      "power, then reboot: the crash rule (2 uploaded, 1 recovered, 1 deleted)");
	}
	CHECK(durability_says(dir, dname[now], true),
	      "%s: after recovery the durability file names this run's setting "
	      "and boot", dname[d]);
	stage_close(st);
	s3_free(t.s3);

	/* A PROCESS run killed on the same boot: the crash rule, trusted. */
	CHECK(crash(dir, STAGE_DURABLE_PROCESS), "%s: process child killed", dname[d]);
	store_init(&t, 0);
	st = open_stage(dir, STAGE_DURABLE_PROCESS, &t);
	CHECK(stage_recover(st, &r) == 0 && r.reuploaded == 2 && r.recovered == 1 &&
	      r.deleted == 1, "%s: then process, killed, same boot: the crash rule "
	      "(uploaded %u, recovered %u)", dname[d], r.reuploaded, r.recovered);
	stage_case_end(st, &t, dir);
}

/* ---- the journal's writes and torn journals ------------------------------ */

static void path_of(const char *dir, uint64_t id, const char *ext, char *out, size_t len)
{
	snprintf(out, len, "%s/%016llx%s", dir, (unsigned long long)id, ext);
}

/* DIR/ID.EXT holds exactly the n bytes at p; exits 2 when it cannot. */
static void file_put(const char *dir, uint64_t id, const char *ext, const void *p, size_t n)
{
	char path[600];
	path_of(dir, id, ext, path, sizeof path);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || write(fd, p, n) != (ssize_t)n || close(fd) != 0) {
		printf("# cannot write %s\n", path);
		exit(2);
	}
}

/* DIR/ID.data holding "DATA!", its mtime a second of its own (recovery
 * names a file in recovered/ by its name and mtime: no clash). */
static void data_put(const char *dir, uint64_t id)
{
	char path[600];
	file_put(dir, id, ".data", "DATA!", 5);
	path_of(dir, id, ".data", path, sizeof path);
	struct timespec ts[2] = { { .tv_sec = 1000000000 + (time_t)id },
				  { .tv_sec = 1000000000 + (time_t)id } };
	if (utimensat(AT_FDCWD, path, ts, 0) != 0)
		exit(2);
}

/* The bytes of DIR/ID.jnl (malloc'ed) and their count. */
static char *jnl_text(const char *dir, uint64_t id, size_t *len)
{
	char path[600];
	path_of(dir, id, ".jnl", path, sizeof path);
	FILE *fp = fopen(path, "r");
	char *buf = malloc(1 << 16);
	*len = fp && buf ? fread(buf, 1, (1 << 16) - 1, fp) : 0;
	if (fp)
		fclose(fp);
	if (!*len) {
		printf("# cannot read %s\n", path);
		exit(2);
	}
	buf[*len] = '\0';
	return buf;
}

static ino_t jnl_ino(const char *dir, uint64_t id)
{
	char path[600];
	struct stat sb;
	path_of(dir, id, ".jnl", path, sizeof path);
	return stat(path, &sb) == 0 ? sb.st_ino : 0;
}

/* Whether a read of journal id is what a torn one must give: -EBADMSG,
 * "dirty", no upload, no intent, no size, no metadata, and bucket/key
 * "bk"/"torn" exactly when named, else none. */
static bool reads_torn(struct stage *st, uint64_t id, bool named)
{
	struct stage_jnl r;
	int rc = stage_jnl_read(st, id, &r);
	bool ok = rc == -EBADMSG && r.state == STAGE_JS_DIRTY && !r.upload_id &&
		  !r.upload_bucket && !r.upload_key && !r.intent.ns && !r.size &&
		  !r.n_meta && !r.ctype &&
		  (named ? r.bucket && r.key && !strcmp(r.bucket, "bk") &&
			   !strcmp(r.key, "torn")
			 : !r.bucket && !r.key);
	if (!ok)
		printf("# journal %llx: rc %d state %d upload %s bucket %s key %s\n",
		       (unsigned long long)id, rc, (int)r.state,
		       r.upload_id ? r.upload_id : "-", r.bucket ? r.bucket : "-",
		       r.key ? r.key : "-");
	stage_jnl_release(&r);
	return ok;
}

/* A version-2 "commit" journal, as the writer makes it, naming an upload
 * and an intent, with data of its size beside it; copies torn every way a
 * crash can tear an in-place write: cut at every offset, zeros past every
 * cut, a byte flipped at every offset, and the new text's head over an
 * older "dirty" text at every offset. Each reads as torn ("dirty", no
 * upload, no intent) or malformed, or as the older text; recovery moves
 * all their data to recovered/ and uploads and aborts nothing. The whole
 * text over a longer old one (its cut not done) reads as the new text. */
static void test_torn(void)
{
	char *dir = unit_tmpdir("stage-torn");
	struct store t;
	store_init(&t, 0);
	struct stage *st = open_stage(dir, STAGE_DURABLE_POWER, &t);
	struct obj_kv meta[] = { { "mode", "644" } };
	struct stage_jnl j = { .state = STAGE_JS_COMMIT, .size = 5, .bucket = "bk",
			       .key = "torn", .ctype = "text/plain", .upload_id = "UP-1",
			       .meta = meta, .n_meta = 1, .base = "etag-of-v1",
			       .intent = { .ns = 1700000000000000000, .bucket = "bk",
					   .key = "torn" } };
	CHECK(stage_jnl_write(st, 1, &j, false) == 0, "torn: a commit journal written");
	size_t len;
	char *text = jnl_text(dir, 1, &len);
	struct stage_jnl old = { .state = STAGE_JS_DIRTY, .bucket = "bk",
				 .key = "torn-older-name-of-it" };
	CHECK(stage_jnl_write(st, 2, &old, false) == 0, "torn: an older dirty journal");
	size_t olen;
	char *otext = jnl_text(dir, 2, &olen);
	CHECK(!strncmp(text, "facetfs-stage 3\n", 16) && strstr(text, "\nend ") &&
	      strstr(text, "\nbase :etag-of-v1\n") && text[len - 1] == '\n',
	      "torn: version 3 with a base line and an end line");
	struct stage_jnl r;
	CHECK(stage_jnl_read(st, 1, &r) == 0 && r.state == STAGE_JS_COMMIT &&
	      r.size == 5 && r.upload_id && !strcmp(r.upload_id, "UP-1") &&
	      r.intent.ns == j.intent.ns && r.n_meta == 1 && r.base &&
	      !strcmp(r.base, "etag-of-v1"), "torn: the whole text reads back");
	stage_jnl_release(&r);
	stage_jnl_remove(st, 1);
	stage_jnl_remove(st, 2);
	const char *kl = strstr(text, "\nkey :torn\n");
	size_t named_from = kl ? (size_t)(kl - text) + strlen("\nkey :torn\n") : len;

	/* The whole new text over a longer old one: its ftruncate not done. */
	char *longer = malloc(len + olen + 1);
	memcpy(longer, text, len);
	memcpy(longer + len, otext, olen);
	file_put(dir, 3, ".jnl", longer, len + olen);
	CHECK(stage_jnl_read(st, 3, &r) == 0 && r.state == STAGE_JS_COMMIT &&
	      r.upload_id, "torn: the whole text over an older one's tail reads as "
	      "the new text");
	stage_jnl_release(&r);
	stage_jnl_remove(st, 3);
	/* The torn copies are there when the stage opens, as after a crash
	 * (it counts their data against its budget then). */
	stage_close(st);
	uint64_t id = 0x100;
	char *buf = malloc(len + olen + 1);
	for (size_t k = 0; k < len; k++, id++) {
		data_put(dir, id);
		file_put(dir, id, ".jnl", text, k);
	}
	for (size_t k = 0; k < len; k++, id++) {
		memcpy(buf, text, k);
		memset(buf + k, 0, len - k);
		data_put(dir, id);
		file_put(dir, id, ".jnl", buf, len);
	}
	for (size_t i = 0; i < len; i++, id++) {
		memcpy(buf, text, len);
		buf[i] ^= 0x01;
		data_put(dir, id);
		file_put(dir, id, ".jnl", buf, len);
	}
	for (size_t k = 1; k < len; k++, id++) {
		memcpy(buf, otext, olen);
		memcpy(buf, text, k);
		data_put(dir, id);
		file_put(dir, id, ".jnl", buf, olen > k ? olen : k);
	}
	st = open_stage(dir, STAGE_DURABLE_POWER, &t);

	int bad_cut = 0, bad_zero = 0, bad_flip = 0, bad_mix = 0, n = 0;
	long first_cut = -1, first_flip = -1, first_mix = -1;
	id = 0x100;
	for (size_t k = 0; k < len; k++, id++, n++)
		if (!reads_torn(st, id, k >= named_from) && bad_cut++ == 0)
			first_cut = (long)k;
	for (size_t k = 0; k < len; k++, id++, n++)
		if (!reads_torn(st, id, k >= named_from))
			bad_zero++;
	for (size_t i = 0; i < len; i++, id++, n++) {
		int rc = stage_jnl_read(st, id, &r);
		if (rc != -EBADMSG && rc != -EINVAL && bad_flip++ == 0)
			first_flip = (long)i;
		stage_jnl_release(&r);
	}
	/* The new text's first k bytes over the older one (shorter or
	 * longer: its tail stays). The older text whole is a "dirty" journal:
	 * that state too is safe. */
	for (size_t k = 1; k < len; k++, id++, n++) {
		int rc = stage_jnl_read(st, id, &r);
		bool ok = (rc == -EBADMSG || rc == 0) && r.state == STAGE_JS_DIRTY &&
			  !r.upload_id && !r.intent.ns;
		if (!ok && bad_mix++ == 0)
			first_mix = (long)k;
		stage_jnl_release(&r);
	}
	printf("# torn: a %zu-byte journal, %d torn copies\n", len, n);
	CHECK(bad_cut == 0, "torn: cut at each of %zu offsets: read as \"dirty\", no "
	      "upload, no intent, named once bucket and key are whole (%d wrong, "
	      "first at %ld)", len, bad_cut, first_cut);
	CHECK(bad_zero == 0, "torn: zeros past each cut: the same (%d wrong)", bad_zero);
	CHECK(bad_flip == 0, "torn: a byte flipped at each offset: torn or malformed "
	      "(%d read as valid, first at %ld)", bad_flip, first_flip);
	CHECK(bad_mix == 0, "torn: the new head over an older text: torn or the older "
	      "\"dirty\" text, never the new (%d wrong, first at %ld)", bad_mix,
	      first_mix);

	struct stage_recovery_report rep;
	CHECK(stage_recover(st, &rep) == 0, "torn: recovery");
	printf("# torn: recovered %u, reuploaded %u, aborted %u, abort_failed %u, "
	       "PUTs %d, objects %zu\n", rep.recovered, rep.reuploaded, rep.aborted,
	       rep.abort_failed, puts_tried(&t), s3_fake_object_count(t.fake, "bk"));
	CHECK(rep.recovered == (unsigned)n && rep.reuploaded == 0 && rep.aborted == 0 &&
	      rep.abort_failed == 0 && rep.orphans_aborted == 0 && puts_tried(&t) == 0 &&
	      s3_fake_object_count(t.fake, "bk") == 0,
	      "torn: every torn journal's data moved to recovered/, none uploaded, "
	      "no upload aborted");
	const char *rd = stage_recovered_dir(st);
	CHECK(recovered_has(rd, "bk%2Ftorn@", "DATA!") &&
	      recovered_has(rd, "unknown-", "DATA!") &&
	      count_files(rd, ".journal") == n,
	      "torn: named bk/torn when the name was whole, unknown-ID when not, "
	      "each with its torn journal beside it");
	CHECK(count_files(dir, ".data") == 0 && count_files(dir, ".jnl") == 0,
	      "torn: staging empty after recovery");
	free(buf);
	free(longer);
	free(otext);
	free(text);
	stage_case_end(st, &t, dir);
}

/* A journal of format 1 (always renamed into place: no check line) is
 * read, and recovery follows it: "commit" is uploaded, "dirty" moved to
 * recovered/. */
static void test_version1(void)
{
	char *dir = unit_tmpdir("stage-v1");
	struct store t;
	store_init(&t, 0);
	const char *c = "facetfs-stage 1\nstate commit\nsize 6\nbucket :bk\n"
			"key :old%20one\nctype :text/plain\nmeta :mode :600\n";
	const char *d = "facetfs-stage 1\nstate dirty\nsize 0\nbucket :bk\nkey :old-dirty\n";
	file_put(dir, 0x10, ".jnl", c, strlen(c));
	file_put(dir, 0x10, ".data", "v1 ok!", 6);
	file_put(dir, 0x11, ".jnl", d, strlen(d));
	file_put(dir, 0x11, ".data", "dirty", 5);
	struct stage *st = open_stage(dir, STAGE_DURABLE_POWER, &t);
	struct stage_jnl r;
	CHECK(stage_jnl_read(st, 0x10, &r) == 0 && r.state == STAGE_JS_COMMIT &&
	      r.size == 6 && !strcmp(r.key, "old one") && r.n_meta == 1 &&
	      !strcmp(r.ctype, "text/plain"), "v1: a version-1 commit journal reads");
	stage_jnl_release(&r);
	struct stage_recovery_report rep;
	CHECK(stage_recover(st, &rep) == 0 && rep.reuploaded == 1 && rep.recovered == 1 &&
	      obj_is(&t, "old one", "v1 ok!", 6) &&
	      recovered_has(stage_recovered_dir(st), "bk%2Fold-dirty@", "dirty"),
	      "v1: recovery uploads its \"commit\" and moves its \"dirty\" (%u, %u)",
	      rep.reuploaded, rep.recovered);
	stage_case_end(st, &t, dir);
}

/* text followed by the "end" line a version-2 or -3 journal closes with
 * (its length and SHA-256), as DIR/ID.jnl. */
static void jnl_put_checked(const char *dir, uint64_t id, const char *text)
{
	unsigned char d[EVP_MAX_MD_SIZE];
	unsigned dl = 0;
	size_t n = strlen(text);
	char buf[4096];
	if (EVP_Digest(text, n, d, &dl, EVP_sha256(), NULL) != 1 || dl != 32 ||
	    n > 3000)
		exit(2);
	int at = snprintf(buf, sizeof buf, "%send %zu ", text, n);
	for (unsigned i = 0; i < 32; i++)
		at += snprintf(buf + at, sizeof buf - (size_t)at, "%02x", d[i]);
	buf[at++] = '\n';
	file_put(dir, id, ".jnl", buf, (size_t)at);
}

/* The base line (version 3): the version a file is based on, set on the
 * open file (stage_file_set_base) and journaled by its seal and its
 * commit, "" (a new key) as ":", none at all when not set; read back as
 * written. A version-2 text reads with no base (not known); a base line
 * in a version-2 text is malformed. Recovery's re-upload keeps the base in
 * the journals it writes (a multipart upload's id). */
static void test_base(void)
{
	char *dir = unit_tmpdir("stage-base");
	struct store t;
	store_init(&t, 0);
	struct stage *st = open_stage(dir, STAGE_DURABLE_POWER, &t);
	struct stage_file *f[3];
	const char *base[3] = { "0123abcd-2", "", NULL };
	for (int i = 0; i < 3; i++) {
		char key[16];
		snprintf(key, sizeof key, "base%d", i);
		CHECK(stage_file_new(st, "bk", key, NULL, 0, NULL, &f[i]) == 0 &&
		      stage_file_pwrite(f[i], "bytes", 5, 0) == 5, "base: %s written", key);
		if (base[i])
			stage_file_set_base(f[i], base[i]);
		CHECK(stage_file_seal(f[i]) == 0, "base: %s sealed", key);
	}
	struct stage_jnl r;
	size_t len;
	char *text = jnl_text(dir, f[0]->id, &len);
	CHECK(strstr(text, "\nbase :0123abcd-2\n") != NULL,
	      "base: the seal's journal holds the line");
	free(text);
	CHECK(stage_jnl_read(st, f[0]->id, &r) == 0 && r.version == 3 && r.base &&
	      !strcmp(r.base, "0123abcd-2"), "base: read back");
	stage_jnl_release(&r);
	text = jnl_text(dir, f[1]->id, &len);
	CHECK(strstr(text, "\nbase :\n") != NULL, "base: none (a new key) as \":\"");
	free(text);
	CHECK(stage_jnl_read(st, f[1]->id, &r) == 0 && r.base && !*r.base,
	      "base: none read back as \"\"");
	stage_jnl_release(&r);
	text = jnl_text(dir, f[2]->id, &len);
	CHECK(!strstr(text, "\nbase "), "base: not set, no line");
	free(text);
	CHECK(stage_jnl_read(st, f[2]->id, &r) == 0 && !r.base, "base: not set, read "
	      "as not known");
	stage_jnl_release(&r);
	/* a change of base alone leaves the seal standing */
	stage_file_set_base(f[2], "later");
	CHECK(stage_file_sealed(f[2]) && stage_file_dirty(f[2]),
	      "base: setting it changes nothing else");
	for (int i = 0; i < 3; i++) {
		CHECK(stage_file_commit(f[i], NULL) == 0, "base: file %d committed", i);
		stage_file_release(f[i]);
	}

	const char *v2 = "facetfs-stage 2\nstate commit\nsize 2\nbucket :bk\n"
			 "key :old\n";
	const char *v2b = "facetfs-stage 2\nstate commit\nsize 2\nbucket :bk\n"
			  "key :old\nbase :e1\n";
	jnl_put_checked(dir, 0x50, v2);
	jnl_put_checked(dir, 0x51, v2b);
	CHECK(stage_jnl_read(st, 0x50, &r) == 0 && r.version == 2 && !r.base &&
	      r.state == STAGE_JS_COMMIT && !strcmp(r.key, "old"),
	      "base: a version-2 journal reads, its base not known");
	stage_jnl_release(&r);
	CHECK(stage_jnl_read(st, 0x51, &r) == -EINVAL,
	      "base: a base line in a version-2 text is malformed");
	stage_jnl_remove(st, 0x50);
	stage_jnl_remove(st, 0x51);

	/* recovery's own upload in parts journals its id with the base kept */
	stage_close(st);
	st = stage_open_or_exit((struct stage_conf){ .dir = dir, .max_bytes = 64 << 20,
		.up = { .part_size = 5 << 20, .threads = 1 } }, &t);
	static char big[11 << 20];
	memset(big, 'p', sizeof big);
	file_put(dir, 0x60, ".data", big, sizeof big);
	struct stage_jnl c = { .state = STAGE_JS_COMMIT, .size = sizeof big,
			       .bucket = "bk", .key = "parts", .base = "b-0" };
	CHECK(stage_jnl_write(st, 0x60, &c, false) == 0, "base: a commit journal of "
	      "11 MiB");
	s3_fault_fail(t.s3, S3K_MPU_PART, 2, 1, -EIO);
	struct stage_recovery_report rep;
	CHECK(stage_recover(st, &rep) == 0 && rep.reupload_failed == 1,
	      "base: its re-upload fails at the second part");
	CHECK(stage_jnl_read(st, 0x60, &r) == 0 && r.base && !strcmp(r.base, "b-0") &&
	      r.upload_id, "base: the journal naming the upload keeps the base");
	stage_jnl_release(&r);
	stage_case_end(st, &t, dir);
}

/* A small file's journals: made at the first write, then written over in
 * place (same inode, no temporary) by a metadata change and by the seal;
 * once it holds a promise ("commit") the next one replaces it atomically
 * (a new inode), and the one after that, plain "dirty", is again written
 * in place. */
static void test_inplace(enum stage_durability d)
{
	char *dir = unit_tmpdir("stage-inplace");
	struct store t;
	store_init(&t, 0);
	struct stage *st = open_stage(dir, d, &t);
	struct obj_kv m[] = { { "mode", "600" } };
	struct stage_file *f;
	CHECK(stage_file_new(st, "bk", "ip", NULL, 0, NULL, &f) == 0 &&
	      stage_file_pwrite(f, "abc", 3, 0) == 3, "%s: in place: written", dname[d]);
	ino_t i0 = jnl_ino(dir, f->id);
	CHECK(stage_file_set_meta(f, m, 1, NULL) == 0 && jnl_ino(dir, f->id) == i0 &&
	      i0 != 0, "%s: in place: a metadata change rewrites the same inode",
	      dname[d]);
	CHECK(stage_file_seal(f) == 0 && jnl_ino(dir, f->id) == i0,
	      "%s: in place: the seal's \"commit\" written over it", dname[d]);
	struct stage_jnl r;
	CHECK(stage_jnl_read(st, f->id, &r) == 0 && r.state == STAGE_JS_COMMIT &&
	      r.size == 3 && r.n_meta == 1, "%s: in place: it reads \"commit\"", dname[d]);
	stage_jnl_release(&r);
	CHECK(stage_file_pwrite(f, "d", 1, 3) == 1 && jnl_ino(dir, f->id) != i0 &&
	      jnl_ino(dir, f->id) != 0,
	      "%s: in place: \"dirty\" over a \"commit\" replaces it (new inode)",
	      dname[d]);
	ino_t i1 = jnl_ino(dir, f->id);
	CHECK(stage_file_rename(f, "bk", "ip2") == 0 && jnl_ino(dir, f->id) == i1,
	      "%s: in place: then a rename rewrites it in place again", dname[d]);
	CHECK(count_files(dir, ".jnl.tmp") == 0, "%s: in place: no temporary left",
	      dname[d]);
	CHECK(stage_file_commit(f, NULL) == 0 && obj_is(&t, "ip2", "abcd", 4) &&
	      count_files(dir, ".jnl") == 0, "%s: in place: committed", dname[d]);
	stage_file_release(f);
	stage_case_end(st, &t, dir);
}

int main(void)
{
	for (int d = STAGE_DURABLE_POWER; d <= STAGE_DURABLE_PROCESS; d++) {
		test_small_file(d);
		test_kill9(d);
		test_reboot(d);
		test_inplace(d);
	}
	test_torn();
	test_version1();
	test_base();
	return unit_exit();
}
