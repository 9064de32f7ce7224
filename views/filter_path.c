/*
 * filter_path.c — object key <-> path inside a view (filter.h has the
 * rules). The two functions are exact inverses on what they accept, so a
 * key is never shown under a path that maps back to another key, and no
 * key can reach outside its view (no "", ".", ".." components).
 */
#include "views/filter_int.h"

#include <errno.h>
#include <string.h>

#define NAME_MAX_LEN 255

/* 0 if s[0..len) is a usable directory-entry name. */
static int name_check(const char *s, size_t len)
{
	if (len == 0 || len > NAME_MAX_LEN)
		return -EINVAL;
	if (s[0] == '.' && (len == 1 || (len == 2 && s[1] == '.')))
		return -EINVAL;
	return 0;
}

/* Every '/'-separated component of s must be a usable name. */
static int components_check(const char *s)
{
	const char *p = s;
	for (;;) {
		const char *sl = strchr(p, '/');
		size_t len = sl ? (size_t)(sl - p) : strlen(p);
		int rc = name_check(p, len);
		if (rc < 0)
			return rc;
		if (!sl)
			return 0;
		p = sl + 1;
	}
}

static int copy_out(char *out, size_t outlen, const char *a, size_t alen, const char *b)
{
	size_t blen = strlen(b);
	if (alen + blen + 1 > outlen)
		return -ENAMETOOLONG;
	memcpy(out, a, alen);
	memcpy(out + alen, b, blen + 1);
	return 0;
}

int view_key_path(const struct view *v, const char *key, char *out, size_t outlen)
{
	if (strncmp(key, v->strip_prefix, v->strip_len))
		return -ENOENT;
	const char *rest = key + v->strip_len;
	if (!v->flat) {
		int rc = components_check(rest);
		return rc < 0 ? rc : copy_out(out, outlen, "", 0, rest);
	}
	char name[NAME_MAX_LEN + 1];
	size_t n = 0;
	for (const char *p = rest; *p; p++) {
		const char *esc = *p == '%' ? "%25" : *p == '/' ? "%2F" : NULL;
		size_t add = esc ? 3 : 1;
		if (n + add > NAME_MAX_LEN)
			return -EINVAL;
		if (esc)
			memcpy(name + n, esc, 3);
		else
			name[n] = *p;
		n += add;
	}
	name[n] = '\0';
	int rc = name_check(name, n);
	return rc < 0 ? rc : copy_out(out, outlen, "", 0, name);
}

int view_path_key(const struct view *v, const char *path, char *out, size_t outlen)
{
	if (!v->flat) {
		int rc = components_check(path);
		return rc < 0 ? rc : copy_out(out, outlen, v->strip_prefix, v->strip_len, path);
	}
	size_t plen = strlen(path);
	int rc = name_check(path, plen);
	if (rc < 0 || strchr(path, '/'))
		return -EINVAL;
	char key[NAME_MAX_LEN + 1];
	size_t n = 0;
	for (const char *p = path; *p; p++) {
		if (*p != '%') {
			key[n++] = *p;
			continue;
		}
		if (p[1] == '2' && p[2] == '5')
			key[n++] = '%';
		else if (p[1] == '2' && p[2] == 'F')
			key[n++] = '/';
		else
			return -EINVAL;
		p += 2;
	}
	key[n] = '\0';
	return copy_out(out, outlen, v->strip_prefix, v->strip_len, key);
}
