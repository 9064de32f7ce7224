/* file.c — see file.h. */
#include "common/file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
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
