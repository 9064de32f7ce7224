/*
 * test_common.c — unit tests of common/array.h and common/file.h: growing
 * keeps the contents and doubles, a failed size leaves the array alone;
 * whole-file reads of a regular file, an empty one, one at and past the
 * limit, a file whose reported size is 0 (/proc), a directory, no file.
 */
#include "common/array.h"
#include "common/file.h"

#include <errno.h>
#include <stdint.h>
#include <unistd.h>

#include "tests/unit/unit.h"

static void test_array(void)
{
	int *a = NULL;
	size_t cap = 0, n = 0;
	int bad = 0;
	for (int i = 0; i < 1000; i++) {
		if (ARRAY_GROW(&a, &cap, n + 1) < 0) {
			bad++;
			break;
		}
		a[n++] = i;
	}
	for (size_t i = 0; i < n; i++)
		bad += a[i] != (int)i;
	CHECK(bad == 0 && n == 1000 && cap >= 1000 && cap < 2048,
	      "array: 1000 appends kept in order, capacity %zu (doubling)", cap);
	size_t before = cap;
	CHECK(ARRAY_GROW(&a, &cap, 10) == 0 && cap == before, "array: no change when it fits");
	int *keep = a;
	CHECK(ARRAY_GROW(&a, &cap, SIZE_MAX / 2) == -ENOMEM && a == keep && cap == before,
	      "array: an impossible size is -ENOMEM, array and capacity unchanged");
	free(a);
}

static void write_file(const char *path, size_t n)
{
	FILE *f = fopen(path, "w");
	if (!f) {
		perror(path);
		exit(2);
	}
	for (size_t i = 0; i < n; i++)
		fputc('a' + (int)(i % 26), f);
	fclose(f);
}

static void test_file(void)
{
	char *dir = unit_tmpdir("common");
	char path[512];
	char *t;
	size_t len;
	snprintf(path, sizeof path, "%s/f", dir);

	write_file(path, 100000);
	int rc = file_read_all(path, 100000, &t, &len);
	CHECK(rc == 0 && len == 100000 && t[len] == '\0' && t[99999] == 'a' + 99999 % 26,
	      "file: 100,000 bytes read whole at the limit, NUL-terminated");
	free(t);
	rc = file_read_all(path, 99999, &t, &len);
	CHECK(rc == -EFBIG && t == NULL, "file: one byte over the limit is -EFBIG");

	write_file(path, 0);
	rc = file_read_all(path, 10, &t, &len);
	CHECK(rc == 0 && len == 0 && t && t[0] == '\0', "file: an empty file is \"\"");
	free(t);

	/* /proc files report size 0 yet hold text, as .facetfs/ files may */
	rc = file_read_all("/proc/self/status", 1 << 20, &t, &len);
	CHECK(rc == 0 && len > 100 && strstr(t, "Name:") != NULL,
	      "file: a file reporting size 0 is read to its end (%zu bytes)", len);
	free(t);
	rc = file_read_all("/proc/self/status", 50, &t, &len);
	CHECK(rc == -EFBIG && t == NULL, "file: and over the limit it is -EFBIG");

	CHECK(file_read_all(dir, 10, &t, NULL) == -EISDIR && t == NULL, "file: a directory is -EISDIR");
	snprintf(path, sizeof path, "%s/none", dir);
	CHECK(file_read_all(path, 10, &t, NULL) == -ENOENT && t == NULL, "file: no file is -ENOENT");
	unit_rmtree(dir);
	free(dir);
}

int main(void)
{
	test_array();
	test_file();
	return unit_exit();
}
