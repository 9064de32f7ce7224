/*
 * test_stage_dir.c — unit tests of the staging directory removed while in
 * use (stage_dir_renew, sync/stage/stage_int.h), on the in-memory store behind
 * the fault wrapper: the whole cache directory removed with files staged;
 * a new file makes it again; files open at that moment still commit from
 * their descriptors, and one whose commit fails, before or after the
 * removal, has its data saved to recovered/ at its release; nothing stays
 * charged. Spare files: under PROCESS a removed name's file is kept empty
 * and the next name made takes it (the same inode, none of the old bytes);
 * a spare a crash left with bytes is emptied at the next open; a removed
 * directory takes its spares with it; under POWER none is kept. Threads
 * that stage, commit and release files meet removals of the directory:
 * every file commits its own bytes, and every spare left is empty.
 */
#include "sync/stage/stage_int.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* The spare files in dir: how many, the sum of their sizes, and their
 * inode numbers (up to 64). */
static size_t spares_in(const char *dir, off_t *bytes, ino_t inos[64])
{
	size_t n = 0;
	*bytes = 0;
	DIR *d = opendir(dir);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (strncmp(de->d_name, "spare.", 6) != 0)
			continue;
		char p[1024];
		struct stat sb;
		snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
		if (stat(p, &sb) != 0)
			continue;
		*bytes += sb.st_size;
		if (n < 64)
			inos[n] = sb.st_ino;
		n++;
	}
	if (d)
		closedir(d);
	return n;
}

/* One staged file of key with text, committed and released. */
static int cycle(struct stage *st, const char *key, const char *text)
{
	struct stage_file *f;
	int rc = stage_file_new(st, "b", key, NULL, 0, NULL, &f);
	if (rc)
		return rc;
	ssize_t n = stage_file_pwrite(f, text, strlen(text), 0);
	rc = n == (ssize_t)strlen(text) ? stage_file_commit(f, NULL) : -EIO;
	stage_file_release(f);
	return rc;
}

/* The inode of the one ID.data in dir (0: none or more than one). */
static ino_t data_ino(const char *dir)
{
	ino_t ino = 0;
	int n = 0;
	DIR *d = opendir(dir);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		size_t l = strlen(de->d_name);
		if (l < 5 || strcmp(de->d_name + l - 5, ".data") != 0)
			continue;
		char p[1024];
		struct stat sb;
		snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
		if (stat(p, &sb) == 0) {
			ino = sb.st_ino;
			n++;
		}
	}
	if (d)
		closedir(d);
	return n == 1 ? ino : 0;
}

/* A new temporary directory (returned: free it) holding cache/ (made)
 * and the path cache/staging of a PROCESS stage, whose config is *conf
 * (pointing at dir). */
static char *spare_dirs(const char *name, char cache[400], char dir[480],
			struct stage_conf *conf)
{
	char *top = unit_tmpdir(name);
	snprintf(cache, 400, "%s/cache", top);
	snprintf(dir, 480, "%s/staging", cache);
	mkdir(cache, 0700);
	*conf = (struct stage_conf){ .dir = dir, .max_bytes = 8 << 20,
				     .durability = STAGE_DURABLE_PROCESS,
				     .up = { .part_size = 1ull << 30 } };
	return top;
}

static void test_spares(void)
{
	struct store fk;
	store_init(&fk, 0);
	char dir[480], cache[400];
	struct stage_conf conf;
	char *top = spare_dirs("stage-spares", cache, dir, &conf);
	struct stage *st = stage_open_or_exit(conf, &fk);
	int rc = 0;
	for (int i = 0; i < 3 && !rc; i++)
		rc = cycle(st, "old", "old bytes, more of them than the new");
	off_t bytes;
	ino_t inos[64];
	size_t n = spares_in(dir, &bytes, inos);
	CHECK(rc == 0 && n >= 2 && bytes == 0,
	      "spares: files removed after their upload are kept, empty (%zu, %lld bytes)",
	      n, (long long)bytes);
	struct stage_counters k;
	stage_counters_get(st, &k);
	CHECK(k.spare_files == n, "spares: counted in spare_files (%llu, %zu on disk)",
	      (unsigned long long)k.spare_files, n);
	/* A new file takes one: the same inode, none of the old bytes. */
	struct stage_file *f;
	rc = stage_file_new(st, "b", "new", NULL, 0, NULL, &f);
	ino_t ino = rc == 0 ? data_ino(dir) : 0;
	bool reused = false;
	for (size_t i = 0; i < n && i < 64; i++)
		reused |= ino != 0 && inos[i] == ino;
	ssize_t w = rc == 0 ? stage_file_pwrite(f, "new", 3, 0) : -1;
	int c = w == 3 ? stage_file_commit(f, NULL) : -1;
	if (rc == 0)
		stage_file_release(f);
	CHECK(reused && c == 0 && s3_has(&fk, "new", "new"),
	      "spares: a new file's data is a spare's inode and holds its own bytes only "
	      "(inode %llu reused %d, commit %d)", (unsigned long long)ino, reused, c);
	stage_close(st);
	/* A spare a crash left with bytes in it is emptied at the next open. */
	n = spares_in(dir, &bytes, inos);
	char p[800];
	snprintf(p, sizeof p, "%s/spare.999", dir);
	FILE *fp = fopen(p, "w");
	if (fp) {
		fputs("bytes a crash left", fp);
		fclose(fp);
	}
	st = stage_open_or_exit(conf, &fk);
	size_t n2 = spares_in(dir, &bytes, inos);
	CHECK(n2 == n + 1 && bytes == 0,
	      "spares: found at the open and emptied (%zu, was %zu; %lld bytes)",
	      n2, n, (long long)bytes);
	for (int i = 0; i < 20 && !rc; i++)
		rc = cycle(st, "again", "again");
	CHECK(rc == 0 && s3_has(&fk, "again", "again"),
	      "spares: 20 more files through them (%d)", rc);
	/* The directory removed: its spares went with it; files are made. */
	unit_rmtree(cache);
	rc = cycle(st, "after", "after");
	CHECK(rc == 0 && s3_has(&fk, "after", "after"),
	      "spares: the directory removed, the next file is made (%d)", rc);
	stage_close(st);
	unit_rmtree(cache);
	mkdir(cache, 0700);
	/* Under POWER none is kept. */
	conf.durability = STAGE_DURABLE_POWER;
	st = stage_open_or_exit(conf, &fk);
	rc = cycle(st, "power", "power");
	n = spares_in(dir, &bytes, inos);
	CHECK(rc == 0 && n == 0, "spares: none under power (%zu)", n);
	stage_close(st);
	store_release(&fk);
	unit_rmtree(top);
	free(top);
}

/* ---- spares and removals of the directory, on several threads ---- */

#define MEET_THREADS 4
#define MEET_CYCLES 250
#define MEET_REMOVALS 3          /* below STAGE_RENEW_MAX */

struct meet {
	struct stage *st;
	struct store *fk;
	const char *cache;
	atomic_bool removed;         /* the remover is done */
	atomic_bool hold;            /* workers wait between two cycles */
	atomic_int cycles;           /* files cycled, by all workers */
	atomic_int bad;              /* cycles that failed or lost bytes */
	char first_bad[160];
	pthread_mutex_t lock;
};

struct meet_worker {
	struct meet *m;
	int id;
};

static void *meet_work(void *arg)
{
	struct meet_worker *w = arg;
	struct meet *m = w->m;
	for (int i = 0; i < MEET_CYCLES || !atomic_load(&m->removed); i++) {
		while (atomic_load(&m->hold))
			sched_yield();
		atomic_fetch_add(&m->cycles, 1);
		char key[32], text[64];
		snprintf(key, sizeof key, "t%d/%d", w->id, i % 16);
		snprintf(text, sizeof text, "thread %d, cycle %d", w->id, i);
		int rc = cycle(m->st, key, text);
		if (rc == 0 && s3_has(m->fk, key, text))
			continue;
		atomic_fetch_add(&m->bad, 1);
		pthread_mutex_lock(&m->lock);
		if (!m->first_bad[0])
			snprintf(m->first_bad, sizeof m->first_bad, "%s: %s", key,
				 rc ? strerror(-rc) : "S3 has other bytes");
		pthread_mutex_unlock(&m->lock);
	}
	return NULL;
}

/* Workers cycle files through spares until the directory was removed
 * and made again MEET_REMOVALS times, each removal once spares are
 * listed in it. */
static void test_spares_meet_removals(void)
{
	struct store fk;
	store_init(&fk, 0);
	char dir[480], cache[400];
	struct stage_conf conf;
	char *top = spare_dirs("stage-meet", cache, dir, &conf);
	struct meet m = { .st = stage_open_or_exit(conf, &fk), .fk = &fk, .cache = cache };
	pthread_mutex_init(&m.lock, NULL);
	atomic_init(&m.removed, false);
	atomic_init(&m.hold, false);
	atomic_init(&m.cycles, 0);
	atomic_init(&m.bad, 0);
	pthread_t tid[MEET_THREADS];
	struct meet_worker w[MEET_THREADS];
	for (int i = 0; i < MEET_THREADS; i++) {
		w[i] = (struct meet_worker){ &m, i };
		pthread_create(&tid[i], NULL, meet_work, &w[i]);
	}
	int removals = 0;
	struct stage_counters k;
	while (removals < MEET_REMOVALS) {
		/* Each removal of a directory the stage made again, with
		 * spares listed in it. */
		pthread_mutex_lock(&m.st->renew_lock);
		unsigned renewed = m.st->n_renewed;
		pthread_mutex_unlock(&m.st->renew_lock);
		stage_counters_get(m.st, &k);
		if (renewed != (unsigned)removals || k.spare_files == 0) {
			sched_yield();
			continue;
		}
		/* Moved away first, so that no new name lands in it; then
		 * removed, again until rm wins against the files still
		 * made through the stage's descriptor of it (after 200
		 * tries the workers wait between two files until it has). */
		char gone[420];
		snprintf(gone, sizeof gone, "%s.gone", cache);
		if (rename(cache, gone) != 0)
			break;
		struct stat sb;
		for (int i = 0; stat(gone, &sb) == 0; i++) {
			if (i == 200)
				atomic_store(&m.hold, true);
			unit_rmtree_quiet(gone);
		}
		atomic_store(&m.hold, false);
		if (stat(gone, &sb) == 0 || (mkdir(cache, 0700) != 0 && errno != EEXIST))
			break;
		removals++;
		usleep(2000);
	}
	atomic_store(&m.removed, true);
	for (int i = 0; i < MEET_THREADS; i++)
		pthread_join(tid[i], NULL);
	CHECK(atomic_load(&m.bad) == 0,
	      "spares meet removals: %d files committed through spares on %d threads "
	      "while the directory was removed %d times, each with its own bytes "
	      "(%d failed; first: %s)", atomic_load(&m.cycles), MEET_THREADS, removals,
	      atomic_load(&m.bad), m.first_bad[0] ? m.first_bad : "none");
	/* After: spares made and taken again in the last directory. */
	int rc = 0;
	for (int i = 0; i < 20 && !rc; i++)
		rc = cycle(m.st, "after", "after the removals");
	off_t bytes;
	ino_t inos[64];
	size_t n = spares_in(dir, &bytes, inos);
	stage_counters_get(m.st, &k);
	CHECK(rc == 0 && removals == MEET_REMOVALS && m.st->n_renewed == (unsigned)removals &&
	      n > 0 && bytes == 0 && n <= k.spare_files,
	      "spares meet removals: then 20 more files; the spares on disk are empty and "
	      "listed (%zu on disk, %lld bytes, %llu listed; %d removals, %d renewals; rc %d)",
	      n, (long long)bytes, (unsigned long long)k.spare_files, removals,
	      (int)m.st->n_renewed, rc);
	CHECK(k.used_bytes == 0, "spares meet removals: nothing charged after (%llu)",
	      (unsigned long long)k.used_bytes);
	stage_close(m.st);
	pthread_mutex_destroy(&m.lock);
	store_release(&fk);
	unit_rmtree(top);
	free(top);
}

int main(void)
{
	log_init("test_stage_dir", getenv("STAGE_DEBUG") ? 2 : 0);
	test_dir_removed();
	test_spares();
	test_spares_meet_removals();
	return unit_exit();
}
