/*
 * test_stage_dir.c — unit tests of the staging directory removed while in
 * use (stage_dir_renew, sync/stage_int.h), on the in-memory store behind
 * the fault wrapper: the whole cache directory removed with files staged;
 * a new file makes it again; files open at that moment still commit from
 * their descriptors, and one whose commit fails, before or after the
 * removal, has its data saved to recovered/ at its release; nothing stays
 * charged.
 */
#include "sync/stage_int.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/log.h"
#include "tests/unit/unit.h"
#include "tests/unit/unit_stage.h"

/* The whole cache directory removed while files are staged: a new file
 * makes it again; the files open at that moment still commit (their data
 * is in their descriptors); the budget comes back to 0. */
static void test_dir_removed(void)
{
	struct store fk;
	store_init(&fk, 0);
	char *top = unit_tmpdir("stage-removed"), dir[700];
	char cache[620];
	snprintf(cache, sizeof cache, "%s/cache", top);
	snprintf(dir, sizeof dir, "%s/staging", cache);
	mkdir(cache, 0700);
	struct stage *st = stage_open_or_exit((struct stage_conf){ .dir = dir, .max_bytes = 8 << 20,
			.up = { .part_size = 1ull << 30 } }, &fk);
	struct stage_file *f, *g = NULL, *p;
	stage_file_new(st, "b", "k1", NULL, 0, NULL, &f);
	stage_file_pwrite(f, "one", 3, 0);
	stage_file_new(st, "b", "k0", NULL, 0, NULL, &p);   /* released dirty */
	stage_file_pwrite(p, "zero", 4, 0);
	stage_file_release(p);
	unit_rmtree(cache);
	int rc = stage_file_new(st, "b", "k2", NULL, 0, NULL, &g);
	ssize_t n = rc == 0 ? stage_file_pwrite(g, "two", 3, 0) : -1;
	int c2 = rc == 0 ? stage_file_commit(g, NULL) : -1;
	int c1 = stage_file_commit(f, NULL);
	struct stat sb;
	CHECK(rc == 0 && n == 3 && c2 == 0 && c1 == 0 && s3_has(&fk, "k2", "two") &&
	      s3_has(&fk, "k1", "one") && stat(dir, &sb) == 0,
	      "dir removed: made again; a new file and one open before both commit "
	      "(%d, %d, %d)", rc, c2, c1);
	stage_file_release(f);
	if (g)
		stage_file_release(g);
	struct stage_counters k;
	stage_counters_get(st, &k);
	CHECK(k.used_bytes == 0 && k.pending_files == 0,
	      "dir removed: nothing charged after the releases, the file released dirty "
	      "before the removal not counted either (%llu bytes, %llu pending)",
	      (unsigned long long)k.used_bytes, (unsigned long long)k.pending_files);
	/* One open at the removal whose commit fails: released, its data
	 * (only in its descriptor) are saved to recovered/, not lost. */
	stage_file_new(st, "b", "k3", NULL, 0, NULL, &f);
	stage_file_pwrite(f, "three", 5, 0);
	unit_rmtree(cache);
	puts_fail(&fk, 1, -EIO);
	int c3 = stage_file_commit(f, NULL);
	stage_file_release(f);
	/* The same with the removal after the failed commit: its release is
	 * the first to find the directory gone. */
	stage_file_new(st, "b", "k3", NULL, 0, NULL, &f);
	stage_file_pwrite(f, "three", 5, 0);
	puts_fail(&fk, 1, -EIO);
	stage_file_commit(f, NULL);
	unit_rmtree(cache);
	stage_file_release(f);
	stage_counters_get(st, &k);
	char back[16] = "", rd[720];
	DIR *d = NULL;
	snprintf(rd, sizeof rd, "%s/recovered", dir);
	d = opendir(rd);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (strncmp(de->d_name, "b%2Fk3@", 7) != 0)
			continue;
		char p[1024];
		snprintf(p, sizeof p, "%s/%s", rd, de->d_name);
		FILE *fp = fopen(p, "r");
		if (fp) {
			size_t got = fread(back, 1, sizeof back - 1, fp);
			back[got] = '\0';
			fclose(fp);
		}
	}
	if (d)
		closedir(d);
	CHECK(c3 == -EIO && !strcmp(back, "three") && k.used_bytes == 0 &&
	      k.pending_files == 0,
	      "dir removed before or after a failed commit: the data are saved to recovered/ at the "
	      "release (\"%s\", %llu charged, %llu pending)", back,
	      (unsigned long long)k.used_bytes, (unsigned long long)k.pending_files);
	stage_close(st);
	store_release(&fk);
	unit_rmtree(top);
	free(top);
}

int main(void)
{
	log_init("test_stage_dir", getenv("STAGE_DEBUG") ? 2 : 0);
	test_dir_removed();
	return unit_exit();
}
