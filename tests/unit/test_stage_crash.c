/*
 * test_stage_crash.c — crash recovery of write staging (sync/stage/stage.h) on
 * the in-memory store behind the fault wrapper: a child process stages
 * files in every state (written and never committed, a failed commit,
 * committed, never written, written again after a commit, dying during
 * the upload) and dies without closing anything; stage_recover() in the
 * parent must re-upload, delete or move to recovered/ each as the crash
 * rule says, with its metadata; a malformed journal goes to recovered/.
 */
#include "sync/stage/stage_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/log.h"
#include "sync/s3/s3_fake.h"
#include "sync/s3/s3_fault.h"
#include "tests/unit/unit.h"
#include "tests/unit/unit_stage.h"

static const char *const crash_key_dirty = "a/dirty file%.txt";

/* Ends the process as soon as a PUT has begun (while it sleeps in the
 * delay the fault wrapper adds): a crash during the upload. */
struct crash_watch {
	struct store *t;
	int puts0;
};

static void *crash_watcher(void *arg)
{
	struct crash_watch *w = arg;
	while (puts_tried(w->t) == w->puts0)
		usleep(1000);
	_exit(0);
}

/* The child: stage files in every state, then crash (no release, no close). */
static void crash_child(const char *dir)
{
	struct store fk;
	store_init(&fk, 0);
	struct stage *st = stage_open_whole(dir, 64 << 20, 0, &fk);
	struct stage_file *f;
	struct obj_kv meta[] = { { "color", "black and white" }, { "note", "100% sure" },
				 { "empty", "" } };
	/* A: written, never committed -> recovered/ */
	stage_file_new(st, "bk", crash_key_dirty, meta, 3, NULL, &f);
	stage_file_pwrite(f, "AAAA", 4, 0);
	/* B: commit began and failed -> re-upload, with its metadata */
	stage_file_new(st, "bk", "b", meta, 3, "text/plain; charset=utf-8", &f);
	stage_file_pwrite(f, "BBBBBB", 6, 0);
	puts_fail(&fk, 1, -EIO);
	stage_file_commit(f, NULL);
	/* C: committed -> deleted */
	stage_file_new(st, "bk", "c", NULL, 0, NULL, &f);
	stage_file_pwrite(f, "CC", 2, 0);
	stage_file_commit(f, NULL);
	/* D: never written -> deleted */
	stage_file_new(st, "bk", "d", NULL, 0, NULL, &f);
	/* E: committed, then written again -> recovered/ */
	stage_file_new(st, "bk", "e", NULL, 0, NULL, &f);
	stage_file_pwrite(f, "EEE", 3, 0);
	stage_file_commit(f, NULL);
	stage_file_pwrite(f, "e", 1, 3);
	/* F: the process dies during the upload -> re-upload */
	stage_file_new(st, "bk", "f", NULL, 0, NULL, &f);
	stage_file_pwrite(f, "FFFFFFFF", 8, 0);
	struct s3_fault_rule slow = { .kind = S3K_PUT, .type = S3F_DELAY, .delay_ms = 60000 };
	s3_fault_add(fk.s3, &slow);
	struct crash_watch cw = { &fk, puts_tried(&fk) };
	pthread_t th;
	if (pthread_create(&th, NULL, crash_watcher, &cw) != 0)
		_exit(4);
	stage_file_commit(f, NULL);
	_exit(3);   /* not reached: the watcher ends the process during the PUT */
}

static void test_crash(void)
{
	char *dir = unit_tmpdir("stage-crash");
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0)
		crash_child(dir);
	int status = 0;
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "crash: child staged files in every state and died mid-upload");
	CHECK(count_files(dir, ".data") == 6 && count_files(dir, ".jnl") == 4,
	      "crash: 6 data files, 4 journals left behind");

	struct store fk;
	store_init(&fk, 0);
	struct stage *st = stage_open_whole(dir, 64 << 20, 0, &fk);
	struct stage_counters c;
	stage_counters_get(st, &c);
	CHECK(c.used_bytes == 4 + 6 + 2 + 0 + 4 + 8 && c.pending_files == 4,
	      "crash: reopen charges what is staged; 4 pending");
	/* A new file opened before recovery is left alone by it. */
	struct stage_file *n;
	CHECK(stage_file_new(st, "bk", "new", NULL, 0, NULL, &n) == 0 &&
	      stage_file_pwrite(n, "N", 1, 0) == 1, "crash: new file gets a fresh id");
	struct stage_recovery_report r;
	CHECK(stage_recover(st, &r) == 0, "crash: stage_recover");
	printf("# reuploaded %u, failed %u, recovered %u (%llu bytes), deleted %u\n",
	       r.reuploaded, r.reupload_failed, r.recovered,
	       (unsigned long long)r.recovered_bytes, r.deleted);
	CHECK(r.reuploaded == 2 && r.reupload_failed == 0 && r.recovered == 2 &&
	      r.recovered_bytes == 8 && r.deleted == 2,
	      "crash: 2 re-uploaded, 2 moved to recovered/, 2 deleted");
	size_t blen = 0, flen = 0;
	char bmeta[512] = "";
	char *b = obj_get(&fk, "bk", "b", &blen, bmeta, sizeof bmeta);
	char *ff = obj_get(&fk, "bk", "f", &flen, NULL, 0);
	CHECK(s3_fake_object_count(fk.fake, "bk") == 2 && b && ff && blen == 6 &&
	      !memcmp(b, "BBBBBB", 6) && flen == 8 && !memcmp(ff, "FFFFFFFF", 8),
	      "crash: commit-begun files re-uploaded with their bytes");
	CHECK(strcmp(bmeta, "color=black and white;note=100% sure;empty=;"
			    "ct=text/plain; charset=utf-8") == 0,
	      "crash: re-upload carries the journaled metadata and content type");
	free(b);
	free(ff);
	char rd[512];
	snprintf(rd, sizeof rd, "%s", stage_recovered_dir(st));
	printf("# recovered/*.journal %d, *.jnl %d, *.data %d\n", count_files(rd, ".journal"),
	       count_files(dir, ".jnl"), count_files(dir, ".data"));
	CHECK(count_files(rd, ".journal") == 2 && count_files(dir, ".jnl") == 1 &&
	      count_files(dir, ".data") == 1, "crash: staging holds only the open file");
	/* The recovered name says bucket/key and time; its bytes are intact. */
	DIR *d = opendir(rd);
	struct dirent *de;
	bool found_a = false, found_e = false;
	while (d && (de = readdir(d))) {
		char p[1024], buf[16] = "";
		snprintf(p, sizeof p, "%s/%s", rd, de->d_name);
		if (strstr(de->d_name, ".journal"))
			continue;
		int fd = open(p, O_RDONLY);
		ssize_t got = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
		if (fd >= 0)
			close(fd);
		printf("# recovered: %s\n", de->d_name);
		if (!strncmp(de->d_name, "bk%2Fa%2Fdirty file%25.txt@20", 29) &&
		    got == 4 && !strcmp(buf, "AAAA"))
			found_a = true;
		if (!strncmp(de->d_name, "bk%2Fe@20", 9) && got == 4 && !strcmp(buf, "EEEe"))
			found_e = true;
	}
	if (d)
		closedir(d);
	CHECK(found_a && found_e,
	      "crash: recovered/BUCKET%%2FKEY@TIME files hold the uncommitted bytes");
	stage_counters_get(st, &c);
	CHECK(c.used_bytes == 1 && c.pending_files == 0 && c.recovered_files == 2 &&
	      c.reuploaded_files == 2, "crash: counters after recovery");
	stage_file_commit(n, NULL);
	stage_file_release(n);
	stage_close(st);
	store_release(&fk);

	/* Re-upload failing at start: kept, and done by a later recovery. */
	store_init(&fk, 0);
	st = stage_open_whole(dir, 64 << 20, 0, &fk);
	stage_file_new(st, "bk", "g", NULL, 0, NULL, &n);
	stage_file_pwrite(n, "GG", 2, 0);
	puts_fail(&fk, 1, -EIO);
	stage_file_commit(n, NULL);
	stage_file_release(n);
	puts_fail(&fk, 1, -EHOSTUNREACH);
	CHECK(stage_recover(st, &r) == 0 && r.reupload_failed == 1 &&
	      count_files(dir, ".data") == 1, "crash: S3 down during recovery keeps the file");
	size_t glen = 0;
	bool again = stage_recover(st, &r) == 0 && r.reuploaded == 1;
	char *g = obj_get(&fk, "bk", "g", &glen, NULL, 0);
	CHECK(again && g && glen == 2 && count_files(dir, ".data") == 0,
	      "crash: next recovery uploads it");
	free(g);
	/* A malformed journal: data goes to recovered/ as unknown-ID. */
	stage_file_new(st, "bk", "h", NULL, 0, NULL, &n);
	stage_file_pwrite(n, "H", 1, 0);
	uint64_t id = n->id;
	char jp[512];
	snprintf(jp, sizeof jp, "%s/%016llx.jnl", dir, (unsigned long long)id);
	n->js = STAGE_JS_NONE;   /* as if crashed: release deletes nothing ... */
	int fd = open(jp, O_WRONLY | O_TRUNC);
	CHECK(fd >= 0 && write(fd, "garbage\n", 8) == 8, "crash: journal overwritten with garbage");
	if (fd >= 0)
		close(fd);
	n->js = STAGE_JS_DIRTY;  /* ... so keep it: release leaves it on disk */
	stage_file_release(n);
	CHECK(stage_recover(st, &r) == 0 && r.recovered == 1 &&
	      count_files(rd, ".journal") == 3, "crash: malformed journal -> recovered/unknown-ID");
	stage_case_end(st, &fk, dir);
}

int main(void)
{
	log_init("test_stage_crash", getenv("STAGE_DEBUG") ? 2 : 0);
	test_crash();
	return unit_exit();
}
