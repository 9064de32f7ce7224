/*
 * test_stage_fds.c — a parked staged file holds no descriptor
 * (stage_file_park, sync/stage/stage.h), on the in-memory store behind the fault
 * wrapper: thousands of sealed files under a limit of 256 descriptors,
 * the process's count of open descriptors (/proc/self/fd) the same before
 * and after them, and their reads and commits giving the bytes written;
 * a park while an upload runs closes the descriptor when it ends; a write
 * after a park keeps one again; uploads in parts and streamed parts read
 * from a reopened descriptor; fsync, set-aside and drop of a parked file;
 * and the staging directory removed: a file with a descriptor keeps it
 * through a park (its only copy) and commits or is saved to recovered/,
 * a file parked before the removal fails with -EIO.
 */
#include "sync/stage/stage.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "common/log.h"
#include "tests/unit/unit.h"
#include "tests/unit/unit_stage.h"

#define MANY 3000                 /* files sealed and parked at once */
#define LIMIT 256                 /* soft descriptor limit meanwhile */

/* Descriptors the process holds now (/proc/self/fd, less the listing's);
 * -1 when not even the listing can be opened (EMFILE). */
static int fds_open(void)
{
	DIR *d = opendir("/proc/self/fd");
	if (!d) {
		printf("# cannot list /proc/self/fd: %s\n", strerror(errno));
		return -1;
	}
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n - 1;
}

static uint64_t data_fds(struct stage *st)
{
	struct stage_counters c;
	stage_counters_get(st, &c);
	return c.data_fds;
}

/* The bytes of file i: "file I" and a tail as long as i % 97. */
static size_t body_of(int i, char *buf, size_t len)
{
	int n = snprintf(buf, len, "file %d ", i);
	for (int k = 0; k < i % 97 && (size_t)n + 1 < len; k++)
		buf[n++] = (char)('a' + (i + k) % 26);
	buf[n] = '\0';
	return (size_t)n;
}

/* Does the store hold b/key with exactly len bytes of buf? */
static bool obj_is(struct store *t, const char *key, const char *buf, size_t len)
{
	size_t n = 0;
	char *o = obj_get(t, "b", key, &n, NULL, 0);
	bool ok = o && n == len && memcmp(o, buf, len) == 0;
	free(o);
	return ok;
}

/* MANY files written, sealed and parked with a soft limit of LIMIT
 * descriptors: none fails, the process holds no more descriptors than
 * before, and each reads and commits its own bytes. */
static void test_many(void)
{
	struct store t;
	store_init(&t, 0);
	char *dir = unit_tmpdir("fds-many");
	struct stage *st = stage_open_or_exit((struct stage_conf){ .dir = dir,
			.durability = STAGE_DURABLE_PROCESS, .max_bytes = 1ull << 30,
			.up = { .part_size = 1ull << 30 } }, &t);
	struct rlimit was, low;
	getrlimit(RLIMIT_NOFILE, &was);
	low = was;
	low.rlim_cur = LIMIT < was.rlim_max ? LIMIT : was.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &low) != 0) {
		printf("# cannot lower the descriptor limit\n");
		exit(2);
	}
	struct stage_file **f = calloc(MANY, sizeof *f);
	char buf[256], key[32], back[256];
	int before = fds_open(), made = 0, bad = 0;
	for (int i = 0; i < MANY; i++) {
		size_t len = body_of(i, buf, sizeof buf);
		snprintf(key, sizeof key, "many/%d", i);
		if (stage_file_new(st, "b", key, NULL, 0, NULL, &f[i]) != 0)
			break;
		made++;
		bad += stage_file_pwrite(f[i], buf, len, 0) != (ssize_t)len;
		bad += stage_file_seal(f[i]) != 0;
		stage_file_park(f[i]);
	}
	int sealed = fds_open();
	struct stage_counters c;
	stage_counters_get(st, &c);
	CHECK(made == MANY && !bad && sealed == before && c.data_fds == 0 &&
	      c.sealed_files == MANY,
	      "%d files sealed and parked under a limit of %d descriptors: %d made, "
	      "%d failures; descriptors %d before, %d after; %llu held by files, "
	      "%llu sealed", MANY, (int)low.rlim_cur, made, bad, before, sealed,
	      (unsigned long long)c.data_fds, (unsigned long long)c.sealed_files);

	int wrong = 0;
	for (int i = 0; i < made; i++) {
		size_t len = body_of(i, buf, sizeof buf);
		ssize_t n = stage_file_pread(f[i], back, sizeof back, 0);
		wrong += n != (ssize_t)len || memcmp(back, buf, len) != 0;
	}
	CHECK(!wrong && fds_open() == before && data_fds(st) == 0,
	      "each parked file reads its own bytes (%d wrong); no descriptor "
	      "left open (%d)", wrong, fds_open());

	int failed = 0;
	for (int i = 0; i < made; i++)
		failed += stage_file_commit(f[i], NULL) != 0;
	wrong = 0;
	for (int i = 0; i < made; i++) {
		size_t len = body_of(i, buf, sizeof buf);
		snprintf(key, sizeof key, "many/%d", i);
		wrong += !obj_is(&t, key, buf, len);
	}
	stage_counters_get(st, &c);
	CHECK(!failed && !wrong && fds_open() == before && c.data_fds == 0 &&
	      c.sealed_files == 0,
	      "each parked file commits its own bytes (%d failed, %d wrong in the "
	      "store); descriptors %d", failed, wrong, fds_open());
	for (int i = 0; i < made; i++)
		stage_file_release(f[i]);
	stage_counters_get(st, &c);
	CHECK(c.open_files == 0 && c.used_bytes == 0 && c.data_fds == 0 &&
	      count_files(dir, ".data") == 0,
	      "released: nothing open, charged or left on disk");
	setrlimit(RLIMIT_NOFILE, &was);
	free(f);
	stage_case_end(st, &t, dir);
}

struct committer {
	struct stage_file *f;
	int rc;
};

static void *commit_main(void *arg)
{
	struct committer *cm = arg;
	cm->rc = stage_file_commit(cm->f, NULL);
	return NULL;
}

/* A park while the commit's PUT is held: the descriptor stays for the
 * upload and closes when it ends. Then a write after a park holds one
 * again, and a read of a parked file opens none for good. */
static void test_in_use(void)
{
	struct store t;
	store_init(&t, 0);
	char *dir = unit_tmpdir("fds-use");
	struct stage *st = stage_open_whole(dir, 1 << 20, 0, &t);
	struct stage_file *f;
	stage_file_new(st, "b", "use", NULL, 0, NULL, &f);
	stage_file_pwrite(f, "held", 4, 0);
	stage_file_seal(f);
	puts_delay(&t, 1500);
	int puts0 = puts_tried(&t);
	struct committer cm = { .f = f };
	pthread_t tid;
	pthread_create(&tid, NULL, commit_main, &cm);
	puts_wait_past(&t, puts0);
	stage_file_park(f);
	uint64_t during = data_fds(st);
	pthread_join(tid, NULL);
	CHECK(cm.rc == 0 && during == 1 && data_fds(st) == 0 && s3_has(&t, "use", "held"),
	      "parked while its PUT is held: the descriptor stays for it (%llu), "
	      "closes after (%llu); the object is there",
	      (unsigned long long)during, (unsigned long long)data_fds(st));

	ssize_t n = stage_file_pwrite(f, "HELD more", 9, 0);
	uint64_t writing = data_fds(st);
	char back[16] = "";
	stage_file_park(f);
	ssize_t r = stage_file_pread(f, back, sizeof back - 1, 0);
	uint64_t read_after = data_fds(st);
	int rc = stage_file_commit(f, NULL);
	CHECK(n == 9 && writing == 1 && r == 9 && !memcmp(back, "HELD more", 9) &&
	      read_after == 0 && rc == 0 && data_fds(st) == 0 &&
	      s3_has(&t, "use", "HELD more"),
	      "a write after the park holds a descriptor (%llu); parked again, a read "
	      "and a commit open one only for themselves (%llu, %llu)",
	      (unsigned long long)writing, (unsigned long long)read_after,
	      (unsigned long long)data_fds(st));
	stage_file_release(f);
	stage_case_end(st, &t, dir);
}

/* A parked file uploaded in parts, and one parked while its streamed
 * parts go up: every part read from a reopened descriptor. */
static void test_parts(void)
{
	struct store t;
	store_init(&t, 4096);
	char *dir = unit_tmpdir("fds-parts");
	struct stage *st = stage_open_or_exit((struct stage_conf){ .dir = dir,
			.max_bytes = 64 << 20, .up = { .part_size = 64 << 10, .threads = 3 },
			.stream_threads = 2 }, &t);
	size_t size = (5 << 16) + 321;
	char *buf = malloc(size);
	for (size_t i = 0; i < size; i++)
		buf[i] = (char)(i * 7 + i / 4096);
	struct stage_file *f, *g;
	stage_file_new(st, "b", "whole", NULL, 0, NULL, &f);
	stage_file_nostream(f);
	stage_file_pwrite(f, buf, size, 0);
	stage_file_seal(f);
	stage_file_park(f);
	int rc = stage_file_commit(f, NULL);
	CHECK(rc == 0 && obj_is(&t, "whole", buf, size) && data_fds(st) == 0 &&
	      s3_fault_seen(t.s3, S3K_MPU_PART) >= 6,
	      "a parked file uploaded in %llu parts: the object is what was written",
	      (unsigned long long)s3_fault_seen(t.s3, S3K_MPU_PART));
	stage_file_release(f);

	stage_file_new(st, "b", "stream", NULL, 0, NULL, &g);
	for (size_t off = 0; off < size; off += 4096) {
		size_t n = size - off < 4096 ? size - off : 4096;
		stage_file_pwrite(g, buf + off, n, off);
	}
	stage_file_park(g);
	rc = stage_file_commit(g, NULL);
	struct stage_counters c;
	stage_counters_get(st, &c);
	CHECK(rc == 0 && obj_is(&t, "stream", buf, size) && c.streams == 1 &&
	      c.data_fds == 0,
	      "parked while streamed: the object is what was written (%llu streamed "
	      "upload), no descriptor after", (unsigned long long)c.streams);
	stage_file_release(g);
	free(buf);
	stage_case_end(st, &t, dir);
}

/* fsync, set-aside and drop of parked files (under POWER: the syncs run
 * on a reopened descriptor). */
static void test_paths(void)
{
	struct store t;
	store_init(&t, 0);
	char *dir = unit_tmpdir("fds-paths");
	struct stage *st = stage_open_whole(dir, 1 << 20, 0, &t);
	struct stage_file *f, *g, *h;
	stage_file_new(st, "b", "synced", NULL, 0, NULL, &f);
	stage_file_pwrite(f, "sync me", 7, 0);
	stage_file_park(f);
	int rs = stage_file_sync(f);
	int rl = stage_file_seal(f);
	uint64_t after_seal = data_fds(st);

	stage_file_new(st, "b", "aside", NULL, 0, NULL, &g);
	stage_file_pwrite(g, "set aside", 9, 0);
	stage_file_seal(g);
	stage_file_park(g);
	int ra = stage_file_set_aside(g, "note\n");
	stage_file_new(st, "b", "dropped", NULL, 0, NULL, &h);
	stage_file_pwrite(h, "drop", 4, 0);
	stage_file_seal(h);
	stage_file_park(h);
	stage_file_drop(h);
	CHECK(rs == 0 && rl == 0 && after_seal == 0 && ra == 0 &&
	      stage_recovered_count(dir) == 2 && !stage_file_dirty(g) &&
	      !stage_file_dirty(h) && data_fds(st) == 0,
	      "parked: fsync and seal (%d, %d), set-aside into recovered/ (%d files), "
	      "drop; no descriptor left (%llu)", rs, rl, stage_recovered_count(dir),
	      (unsigned long long)data_fds(st));
	stage_file_release(f);
	stage_file_release(g);
	stage_file_release(h);
	struct stage_counters c;
	stage_counters_get(st, &c);
	CHECK(count_files(dir, ".data") == 1 && c.pending_files == 1 && c.data_fds == 0,
	      "released: the sealed one kept for recovery, the others gone");
	stage_case_end(st, &t, dir);
}

/* The staging directory removed: a file parked before loses its data
 * (-EIO); one with a descriptor at the removal keeps it through a park
 * and commits, or, released after a failed commit, is saved to
 * recovered/ from it; nothing stays charged. */
static void test_removed(void)
{
	struct store t;
	store_init(&t, 0);
	char *top = unit_tmpdir("fds-removed"), cache[620], dir[700];
	snprintf(cache, sizeof cache, "%s/cache", top);
	snprintf(dir, sizeof dir, "%s/staging", cache);
	mkdir(cache, 0700);
	struct stage *st = stage_open_whole(dir, 1 << 20, 0, &t);
	struct stage_file *lost, *kept, *failed;
	stage_file_new(st, "b", "lost", NULL, 0, NULL, &lost);
	stage_file_pwrite(lost, "gone", 4, 0);
	stage_file_seal(lost);
	stage_file_park(lost);
	stage_file_new(st, "b", "kept", NULL, 0, NULL, &kept);
	stage_file_pwrite(kept, "kept", 4, 0);
	stage_file_seal(kept);
	stage_file_new(st, "b", "failed", NULL, 0, NULL, &failed);
	stage_file_pwrite(failed, "saved", 5, 0);
	puts_fail(&t, 1, -EIO);
	int rf = stage_file_commit(failed, NULL);
	unit_rmtree(cache);
	stage_file_park(kept);
	stage_file_park(failed);
	uint64_t held = data_fds(st);
	int rl = stage_file_commit(lost, NULL);
	char back[8];
	ssize_t rr = stage_file_pread(lost, back, sizeof back, 0);
	int rk = stage_file_commit(kept, NULL);
	CHECK(rf == -EIO && held == 2 && rl == -EIO && rr == -EIO && rk == 0 &&
	      s3_has(&t, "kept", "kept") && s3_has(&t, "lost", NULL),
	      "directory removed: the two with a descriptor keep it through a park "
	      "(%llu); the one parked before fails (commit %d, read %zd); the other "
	      "commits (%d)", (unsigned long long)held, rl, rr, rk);
	stage_file_release(lost);
	stage_file_release(kept);
	stage_file_release(failed);
	char rd[720], p[1024], got[16] = "";
	snprintf(rd, sizeof rd, "%s/recovered", dir);
	DIR *d = opendir(rd);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (strncmp(de->d_name, "b%2Ffailed@", 11) != 0 || strstr(de->d_name, ".journal"))
			continue;
		snprintf(p, sizeof p, "%s/%s", rd, de->d_name);
		FILE *fp = fopen(p, "r");
		if (fp) {
			got[fread(got, 1, sizeof got - 1, fp)] = '\0';
			fclose(fp);
		}
	}
	if (d)
		closedir(d);
	struct stage_counters c;
	stage_counters_get(st, &c);
	CHECK(!strcmp(got, "saved") && c.used_bytes == 0 && c.data_fds == 0 &&
	      c.open_files == 0,
	      "released: the failed one saved to recovered/ from its descriptor "
	      "(\"%s\"); nothing charged (%llu), no descriptor (%llu)", got,
	      (unsigned long long)c.used_bytes, (unsigned long long)c.data_fds);
	stage_close(st);
	store_release(&t);
	unit_rmtree(top);
	free(top);
}

int main(void)
{
	log_init("test_stage_fds", getenv("STAGE_DEBUG") ? 2 : 0);
	test_many();
	test_in_use();
	test_parts();
	test_paths();
	test_removed();
	return unit_exit();
}
