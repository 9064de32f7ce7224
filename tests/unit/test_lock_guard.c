/*
 * test_lock_guard.c — the lock guard of common/lock.h, seen from a
 * function that syncs: stage_sync called with a state lock held aborts
 * in the guard's build (-Dlock_guard=true, as tests/run builds
 * build-asan/) and names itself; with the lock dropped it runs. Without
 * the guard nothing is counted and nothing aborts. Each call runs in a
 * forked child, whose end and standard error are read here.
 */
#include "unit.h"
#include "unit_stage.h"

#include "common/lock.h"
#include "sync/stage/stage_int.h"

#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>

struct child_end {
	int status;                  /* from waitpid */
	char err[512];               /* what it wrote on standard error */
};

/* Run fn(st) in a child; its exit status and stderr into out. */
static void in_child(void (*fn)(struct stage *), struct stage *st,
		     struct child_end *out)
{
	int p[2];
	memset(out, 0, sizeof *out);
	if (pipe(p) != 0) {
		printf("# pipe failed\n");
		exit(2);
	}
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		close(p[0]);
		dup2(p[1], 2);
		fn(st);
		_exit(0);
	}
	close(p[1]);
	size_t n = 0;
	ssize_t r;
	while (n < sizeof out->err - 1 &&
	       (r = read(p[0], out->err + n, sizeof out->err - 1 - n)) > 0)
		n += (size_t)r;
	close(p[0]);
	waitpid(pid, &out->status, 0);
}

static pthread_mutex_t some_state = PTHREAD_MUTEX_INITIALIZER;

#ifdef FACETFS_LOCK_GUARD
#define COUNTED 1u                   /* what lock_held says under the lock */
#else
#define COUNTED 0u
#endif

/* fsync of /tmp (a directory: what the stage syncs most): 0 or -errno. */
static int sync_tmp(struct stage *st)
{
	int dfd = open("/tmp", O_RDONLY | O_DIRECTORY);
	int rc = stage_sync(st, dfd, false);
	close(dfd);
	return rc;
}

/* A sync with a state lock held (the defect the guard is for). */
static void sync_under_lock(struct stage *st)
{
	mod_lock(&some_state);
	int rc = sync_tmp(st);
	mod_unlock(&some_state);
	_exit(rc == 0 ? 0 : 3);
}

/* The lock taken and dropped first: the count is back at zero. */
static void sync_after_lock(struct stage *st)
{
	mod_lock(&some_state);
	unsigned held = lock_held();
	mod_unlock(&some_state);
	int rc = sync_tmp(st);
	_exit(rc == 0 && held == COUNTED && lock_held() == 0 ? 0 : 3);
}

int main(void)
{
	struct store t;
	store_init(&t, 0);
	char *dir = unit_tmpdir("lock-guard");
	struct stage *st = stage_open_or_exit((struct stage_conf){ .dir = dir,
		.max_bytes = 1 << 20 }, &t);
	struct child_end e;

	in_child(sync_after_lock, st, &e);
	CHECK(WIFEXITED(e.status) && WEXITSTATUS(e.status) == 0,
	      "a sync with no state lock held runs (status %d%s%s)", e.status,
	      *e.err ? ": " : "", e.err);

	in_child(sync_under_lock, st, &e);
#ifdef FACETFS_LOCK_GUARD
	CHECK(WIFSIGNALED(e.status) && WTERMSIG(e.status) == SIGABRT &&
	      strstr(e.err, "stage_sync") && strstr(e.err, "1 state lock held"),
	      "guard built in: stage_sync with a state lock held aborts and says "
	      "where (status %d, stderr: %s)", e.status, e.err);
	mod_lock(&some_state);
	unsigned held = lock_held();
	mod_unlock(&some_state);
	CHECK(held == COUNTED && lock_held() == 0, "guard built in: the count follows "
	      "mod_lock and mod_unlock (%u while held, %u after)", held, lock_held());
#else
	CHECK(WIFEXITED(e.status) && WEXITSTATUS(e.status) == 0 && lock_held() == 0,
	      "guard not built in: nothing is counted, stage_sync under a lock "
	      "runs (status %d)", e.status);
#endif
	stage_case_end(st, &t, dir);
	return unit_exit();
}
