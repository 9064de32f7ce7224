/*
 * test_common.c — unit tests of common/array.h and common/file.h: growing
 * keeps the contents and doubles, a failed size leaves the array alone;
 * whole-file reads of a regular file, an empty one, one at and past the
 * limit, a file whose reported size is 0 (/proc), a directory, no file;
 * common/posix.h: the time, mode and owner values s3fs and rclone write
 * read back right, and what we write is what both parse.
 */
#include "common/array.h"
#include "common/file.h"
#include "common/posix.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
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

static void test_posix(void)
{
	int64_t ns = 0;
	/* rclone drops trailing zeros: "…​.5" is half a second */
	CHECK(posix_time_parse("1354040105.5", &ns) && ns == 1354040105500000000LL,
	      "rclone's \"1354040105.5\" is .5 s (%lld)", (long long)ns);
	CHECK(posix_time_parse("1354040105.123456789", &ns) && ns == 1354040105123456789LL,
	      "9 digits: nanoseconds (%lld)", (long long)ns);
	CHECK(posix_time_parse("1354040105.1234567891", &ns) && ns == 1354040105123456789LL,
	      "more than 9 digits are cut (%lld)", (long long)ns);
	CHECK(posix_time_parse("1354040105", &ns) && ns == 1354040105000000000LL,
	      "s3fs's whole seconds (%lld)", (long long)ns);
	CHECK(posix_time_parse("-1.5", &ns) && ns == -1500000000LL, "negative (%lld)",
	      (long long)ns);
	CHECK(!posix_time_parse("", &ns) && !posix_time_parse("12a", &ns) &&
	      !posix_time_parse("1e9", &ns) && !posix_time_parse(".5", &ns) &&
	      !posix_time_parse("99999999999999999999", &ns),
	      "not times: empty, letters, exponent, no seconds, overflow");
	char buf[40];
	posix_time_format(1354040105500000000LL, buf, sizeof buf);
	CHECK(strcmp(buf, "1354040105.500000000") == 0,
	      "written with 9 digits, as s3fs reads them (%s)", buf);
	posix_time_format(1354040105000000000LL, buf, sizeof buf);
	CHECK(strcmp(buf, "1354040105") == 0, "whole seconds without a point (%s)", buf);

	struct obj_kv kv[] = {
		{ "mode", "33261" }, { "uid", "1000" }, { "gid", "100" },
		{ "mtime", "1600000000.25" }, { "color", "red" },
	};
	struct obj_posix px;
	posix_meta_parse(kv, 5, &px);
	CHECK(px.have == (POSIX_MODE | POSIX_UID | POSIX_GID | POSIX_MTIME) &&
	      px.mode == 0100755 && px.uid == 1000 && px.gid == 100 &&
	      px.mtime_ns == 1600000000250000000LL,
	      "s3fs's st_mode 33261 is 0100755, owner and time read (%o %u %u %lld)",
	      (unsigned)px.mode, (unsigned)px.uid, (unsigned)px.gid, (long long)px.mtime_ns);
	struct obj_kv bad[] = { { "mode", "0644" }, { "uid", "-1" }, { "mtime", "soon" } };
	posix_meta_parse(bad, 3, &px);
	CHECK(px.have == POSIX_MODE && px.mode == 0644,
	      "\"0644\" is octal (as s3fs's strtol base 0); bad uid and time left out");

	struct obj_kv *arr = NULL;
	size_t n = 0;
	int rc = obj_kv_add(&arr, &n, "mtime", "1") < 0 || obj_kv_add(&arr, &n, "color", "red");
	struct obj_posix set = { .have = POSIX_MTIME | POSIX_MODE | POSIX_UID,
				 .mtime_ns = 1700000000000000001LL, .mode = 04750, .uid = 7 };
	rc = rc ? rc : posix_meta_put(&arr, &n, &set);
	struct obj_meta o = { .meta = arr, .n_meta = n };
	const char *mt = obj_meta_get(&o, "mtime"), *md = obj_meta_get(&o, "mode");
	CHECK(rc == 0 && n == 4 && mt && strcmp(mt, "1700000000.000000001") == 0 &&
	      md && strcmp(md, "35304") == 0 && obj_meta_get(&o, "color"),
	      "put replaces mtime, adds mode (st_mode 0104750 = 35304) and uid, keeps the rest (%s, %s)",
	      mt ? mt : "-", md ? md : "-");
	obj_kv_free(arr, n);
	struct obj_posix fifo = { .have = POSIX_MODE, .mode = 010644 };
	arr = NULL;
	n = 0;
	rc = posix_meta_put(&arr, &n, &fifo);
	CHECK(rc == 0 && n == 1 && strcmp(arr[0].value, "4516") == 0,
	      "a FIFO's st_mode is written with its type (%s)", n ? arr[0].value : "-");
	obj_kv_free(arr, n);
	struct obj_posix all = { .have = POSIX_MTIME | POSIX_ATIME | POSIX_CTIME | POSIX_UID,
				 .mtime_ns = 1, .atime_ns = 2, .ctime_ns = 3, .uid = 7 };
	arr = NULL;
	n = 0;
	rc = obj_kv_add(&arr, &n, "color", "red");
	rc = rc ? rc : posix_meta_put(&arr, &n, &all);
	posix_meta_drop_times(arr, &n, POSIX_WRITE_TIMES);
	struct obj_posix left;
	posix_meta_parse(arr, n, &left);
	CHECK(rc == 0 && n == 3 && left.have == (POSIX_ATIME | POSIX_UID) &&
	      strcmp(arr[0].name, "color") == 0,
	      "dropping a write's times keeps atime, uid and user metadata (%zu left)", n);
	obj_kv_free(arr, n);
	CHECK(posix_meta_reserved("mtime") && posix_meta_reserved("gid") &&
	      !posix_meta_reserved("color") && !posix_meta_reserved("md5chksum"),
	      "reserved names: the attributes only");
}

int main(void)
{
	test_array();
	test_file();
	test_posix();
	return unit_exit();
}
