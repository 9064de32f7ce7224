/* posix.c — see posix.h. */
#include "common/posix.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const time_names[] = { "mtime", "atime", "ctime" };
static const uint32_t time_bits[] = { POSIX_MTIME, POSIX_ATIME, POSIX_CTIME };

bool posix_meta_reserved(const char *name)
{
	return strcmp(name, "mtime") == 0 || strcmp(name, "atime") == 0 ||
	       strcmp(name, "ctime") == 0 || strcmp(name, "mode") == 0 ||
	       strcmp(name, "uid") == 0 || strcmp(name, "gid") == 0;
}

bool posix_time_parse(const char *s, int64_t *ns)
{
	bool neg = *s == '-';
	if (neg)
		s++;
	if (*s < '0' || *s > '9')
		return false;
	int64_t sec = 0, frac = 0;
	for (; *s >= '0' && *s <= '9'; s++) {
		if (sec > (INT64_MAX / 1000000000 - 9) / 10)
			return false;
		sec = sec * 10 + (*s - '0');
	}
	if (*s == '.') {
		int digits = 0;
		for (s++; *s >= '0' && *s <= '9'; s++)
			if (digits < 9) {
				frac = frac * 10 + (*s - '0');
				digits++;
			}
		for (; digits < 9; digits++)
			frac *= 10;
	}
	if (*s)
		return false;
	int64_t v = sec * 1000000000 + frac;
	*ns = neg ? -v : v;
	return true;
}

void posix_time_format(int64_t ns, char *buf, size_t len)
{
	const char *sign = ns < 0 ? "-" : "";
	uint64_t a = ns < 0 ? (uint64_t)0 - (uint64_t)ns : (uint64_t)ns;
	uint64_t sec = a / 1000000000, nsec = a % 1000000000;
	if (nsec)
		snprintf(buf, len, "%s%" PRIu64 ".%09" PRIu64, sign, sec, nsec);
	else
		snprintf(buf, len, "%s%" PRIu64, sign, sec);
}

/* A non-negative integer in C's notation (0x.., 0.. octal, decimal). */
static bool parse_uint(const char *s, int base, uint32_t *out)
{
	if (*s < '0' || *s > '9')
		return false;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, base);
	if (errno || *end || v > UINT32_MAX)
		return false;
	*out = (uint32_t)v;
	return true;
}

void posix_meta_parse(const struct obj_kv *meta, size_t n, struct obj_posix *px)
{
	memset(px, 0, sizeof *px);
	for (size_t i = 0; i < n; i++) {
		const char *k = meta[i].name, *v = meta[i].value;
		uint32_t u;
		if (strcmp(k, "mode") == 0 && parse_uint(v, 0, &u)) {
			px->mode = u & (0170000 | 07777);
			px->have |= POSIX_MODE;
		} else if (strcmp(k, "uid") == 0 && parse_uint(v, 10, &u)) {
			px->uid = u;
			px->have |= POSIX_UID;
		} else if (strcmp(k, "gid") == 0 && parse_uint(v, 10, &u)) {
			px->gid = u;
			px->have |= POSIX_GID;
		} else if (strcmp(k, "mtime") == 0 && posix_time_parse(v, &px->mtime_ns)) {
			px->have |= POSIX_MTIME;
		} else if (strcmp(k, "atime") == 0 && posix_time_parse(v, &px->atime_ns)) {
			px->have |= POSIX_ATIME;
		} else if (strcmp(k, "ctime") == 0 && posix_time_parse(v, &px->ctime_ns)) {
			px->have |= POSIX_CTIME;
		}
	}
}

/* Replace the value of name in *arr, or add the pair. */
static int kv_set(struct obj_kv **arr, size_t *n, const char *name, const char *value)
{
	for (size_t i = 0; i < *n; i++)
		if (strcmp((*arr)[i].name, name) == 0) {
			char *v = strdup(value);
			if (!v)
				return -ENOMEM;
			free((*arr)[i].value);
			(*arr)[i].value = v;
			return 0;
		}
	return obj_kv_add(arr, n, name, value);
}

void posix_meta_drop_times(struct obj_kv *arr, size_t *n, uint32_t which)
{
	size_t k = 0;
	for (size_t i = 0; i < *n; i++) {
		bool drop = false;
		for (int t = 0; t < 3; t++)
			drop |= (which & time_bits[t]) && strcmp(arr[i].name, time_names[t]) == 0;
		if (drop) {
			free(arr[i].name);
			free(arr[i].value);
		} else {
			arr[k++] = arr[i];
		}
	}
	*n = k;
}

int posix_meta_put(struct obj_kv **arr, size_t *n, const struct obj_posix *px)
{
	char buf[40];
	int rc = 0;
	const int64_t times[] = { px->mtime_ns, px->atime_ns, px->ctime_ns };
	for (int i = 0; rc == 0 && i < 3; i++)
		if (px->have & time_bits[i]) {
			posix_time_format(times[i], buf, sizeof buf);
			rc = kv_set(arr, n, time_names[i], buf);
		}
	if (rc == 0 && (px->have & POSIX_MODE)) {
		/* s3fs writes the whole st_mode: a regular file's type bits
		 * unless px gives another type */
		uint32_t m = px->mode & (0170000 | 07777);
		snprintf(buf, sizeof buf, "%u", (m & 0170000) ? m : 0100000u | m);
		rc = kv_set(arr, n, "mode", buf);
	}
	if (rc == 0 && (px->have & POSIX_UID)) {
		snprintf(buf, sizeof buf, "%u", px->uid);
		rc = kv_set(arr, n, "uid", buf);
	}
	if (rc == 0 && (px->have & POSIX_GID)) {
		snprintf(buf, sizeof buf, "%u", px->gid);
		rc = kv_set(arr, n, "gid", buf);
	}
	return rc;
}
