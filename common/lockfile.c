/* lockfile.c — see lockfile.h. */
#include "common/lockfile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

int lockfile_take(const char *dir, const char *what, int *fd_out, char *err,
		  size_t errlen)
{
	char path[PATH_MAX];
	if (snprintf(path, sizeof path, "%s/lock", dir) >= (int)sizeof path) {
		snprintf(err, errlen, "%s %s: path too long", what, dir);
		return -ENAMETOOLONG;
	}
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0) {
		int rc = -errno;
		snprintf(err, errlen, "cannot open %s: %s", path, strerror(-rc));
		return rc;
	}
	if (flock(fd, LOCK_EX | LOCK_NB)) {
		int rc = errno == EWOULDBLOCK ? -EBUSY : -errno;
		char pid[32] = "";
		ssize_t r = pread(fd, pid, sizeof pid - 1, 0);
		pid[r > 0 ? r : 0] = '\0';
		pid[strcspn(pid, "\n")] = '\0';
		if (rc == -EBUSY)
			snprintf(err, errlen, "%s %s is used by another gateway (pid %s)",
				 what, dir, pid[0] ? pid : "unknown");
		else
			snprintf(err, errlen, "cannot lock %s: %s", path, strerror(-rc));
		close(fd);
		return rc;
	}
	char pid[32];
	int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
	if (ftruncate(fd, 0) || pwrite(fd, pid, (size_t)n, 0) != n) {
		int rc = -errno;
		snprintf(err, errlen, "cannot write %s: %s", path, strerror(-rc));
		close(fd);
		return rc;
	}
	*fd_out = fd;
	return 0;
}
