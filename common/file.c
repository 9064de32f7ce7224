/* file.c — see file.h. */
#include "common/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

int file_read_all(const char *path, size_t max, char **out, size_t *len)
{
	*out = NULL;
	if (len)
		*len = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int rc;
	char *buf = NULL;
	struct stat st;
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		goto out;
	}
	if (S_ISDIR(st.st_mode)) {
		rc = -EISDIR;
		goto out;
	}
	if (st.st_size > 0 && (size_t)st.st_size > max) {
		rc = -EFBIG;
		goto out;
	}
	/* room for the reported size, one byte to see end of file, the NUL */
	size_t cap = (st.st_size > 0 ? (size_t)st.st_size : 4096) + 2, n = 0;
	buf = malloc(cap);
	if (!buf) {
		rc = -ENOMEM;
		goto out;
	}
	for (;;) {
		if (n + 1 == cap) {
			size_t ncap = cap * 2 < max + 2 ? cap * 2 : max + 2;
			if (ncap <= cap) {   /* already max + 1 bytes: too big */
				rc = -EFBIG;
				goto out;
			}
			char *g = realloc(buf, ncap);
			if (!g) {
				rc = -ENOMEM;
				goto out;
			}
			buf = g;
			cap = ncap;
		}
		ssize_t r = read(fd, buf + n, cap - n - 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = -errno;
			goto out;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	if (n > max) {
		rc = -EFBIG;
		goto out;
	}
	buf[n] = '\0';
	*out = buf;
	if (len)
		*len = n;
	buf = NULL;
	rc = 0;
out:
	free(buf);
	close(fd);
	return rc;
}

int file_mkdir_p(const char *path, mode_t mode)
{
	char p[PATH_MAX];
	size_t n = strlen(path);
	if (n == 0 || n >= sizeof p)
		return -ENAMETOOLONG;
	memcpy(p, path, n + 1);
	for (size_t i = 1; i <= n; i++) {
		if (p[i] != '/' && p[i] != '\0')
			continue;
		char c = p[i];
		p[i] = '\0';
		if (mkdir(p, mode) && errno != EEXIST)
			return -errno;
		p[i] = c;
	}
	struct stat st;
	if (stat(path, &st))
		return -errno;
	return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

/* ---- writing at an offset ---- */

int file_pwrite_all(int fd, const void *buf, size_t len, uint64_t off)
{
	const char *p = buf;
	while (len) {
		ssize_t n = pwrite(fd, p, len, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		p += n;
		off += (uint64_t)n;
		len -= (size_t)n;
	}
	return 0;
}

/* Copies len bytes from the pipe pipe_fd to fd at off through a buffer:
 * for a file system that cannot splice into its files. 0, -EIO if the
 * pipe runs dry first, or the error of read or pwrite. */
static int pipe_copy(int pipe_fd, int fd, size_t len, uint64_t off)
{
	char buf[64 << 10];
	while (len) {
		ssize_t n = read(pipe_fd, buf, len < sizeof buf ? len : sizeof buf);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 && errno != EAGAIN ? -errno : -EIO;
		int err = file_pwrite_all(fd, buf, (size_t)n, off);
		if (err)
			return err;
		off += (uint64_t)n;
		len -= (size_t)n;
	}
	return 0;
}

/* A short splice goes on from where it stopped; EAGAIN (a non-blocking
 * pipe) with the pipe empty means it held fewer than len bytes: -EIO. A
 * file system that cannot splice (EINVAL) gets the rest copied through
 * a buffer (pipe_copy). */
int file_splice_all(int pipe_fd, int fd, size_t len, uint64_t off)
{
	while (len) {
		loff_t at = (loff_t)off;
		ssize_t n = splice(pipe_fd, NULL, fd, &at, len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			int left = 0;
			if (ioctl(pipe_fd, FIONREAD, &left) == 0 && left > 0)
				continue;
			return -EIO;
		}
		if (n < 0 && errno == EINVAL)
			return pipe_copy(pipe_fd, fd, len, off);
		if (n <= 0)
			return n < 0 ? -errno : -EIO;   /* 0: its writer closed */
		off += (uint64_t)n;
		len -= (size_t)n;
	}
	return 0;
}
