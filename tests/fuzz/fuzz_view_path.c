/*
 * fuzz_view_path.c — object key -> path inside a view (views/filter.h,
 * view_key_path) for any key an S3 client may create, in a nested and a
 * flat view, with and without strip_prefix. The first input byte picks
 * the layout, the rest is the key (up to its first NUL, as keys are C
 * strings here). A returned path has no empty, "." or ".." component and
 * none over 255 bytes (a flat view's path is one such name), no leading
 * '/', and view_path_key() maps it back to the very key; a path that maps
 * to a key maps back to itself. A too small buffer is -ENAMETOOLONG.
 */
#include "views/filter.h"
#include "tests/fuzz/fuzz.h"

#include <errno.h>

static const char *const layouts[] = {
	"{\"name\":\"v\",\"bucket\":\"demo\"}",
	"{\"name\":\"v\",\"bucket\":\"demo\",\"layout\":{\"flat\":true}}",
	"{\"name\":\"v\",\"bucket\":\"demo\",\"layout\":{\"strip_prefix\":\"runs/\"}}",
	"{\"name\":\"v\",\"bucket\":\"demo\",\"layout\":{\"flat\":true,\"strip_prefix\":\"p/\"}}",
	"{\"name\":\"v\",\"bucket\":\"demo\",\"layout\":{\"strip_prefix\":\"a\"}}",
	"{\"name\":\"v\",\"bucket\":\"demo\",\"layout\":{\"flat\":true,\"strip_prefix\":\"%\"}}",
};
#define N_LAYOUTS (sizeof layouts / sizeof layouts[0])

static void check_path(const char *key, const char *path, bool flat)
{
	FUZZ_CHECK(path[0] != '/', "key \"%s\": path \"%s\" starts with '/'", key, path);
	FUZZ_CHECK(!flat || !strchr(path, '/'), "flat view: path \"%s\" has a '/'", path);
	const char *p = path;
	for (;;) {
		const char *sl = strchr(p, '/');
		size_t len = sl ? (size_t)(sl - p) : strlen(p);
		FUZZ_CHECK(len > 0 && len <= 255, "key \"%s\": path \"%s\" has a component of %zu bytes",
			   key, path, len);
		FUZZ_CHECK(!(p[0] == '.' && (len == 1 || (len == 2 && p[1] == '.'))),
			   "key \"%s\": path \"%s\" has a \".\" or \"..\" component", key, path);
		if (!sl)
			break;
		p = sl + 1;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	const char *layout = layouts[data[0] % N_LAYOUTS];
	struct view *v = NULL;
	if (view_load_buf("layout.json", layout, strlen(layout), &v, NULL) < 0)
		abort();   /* the layouts above are valid: only ENOMEM gets here */
	char *key = fuzz_cstr(data + 1, size - 1);
	char *path = malloc(size + 4096), *back = malloc(size + 4096);
	size_t cap = size + 4096;
	if (!key || !path || !back)
		goto out;

	int rc = view_key_path(v, key, path, cap);
	FUZZ_CHECK(rc == 0 || rc == -EINVAL || rc == -ENOENT, "key \"%s\": rc %d", key, rc);
	if (rc == 0) {
		check_path(key, path, view_flat(v));
		int rb = view_path_key(v, path, back, cap);
		FUZZ_CHECK(rb == 0 && strcmp(back, key) == 0,
			   "key \"%s\" -> path \"%s\" -> rc %d key \"%s\"", key, path, rb,
			   rb == 0 ? back : "");
		size_t plen = strlen(path);
		if (plen > 0) {
			char small[1];
			FUZZ_CHECK(view_key_path(v, key, small, sizeof small) == -ENAMETOOLONG,
				   "key \"%s\": a 1-byte buffer is not -ENAMETOOLONG", key);
		}
	}
	/* The key read as a path (what a FUSE create or rename gives). */
	rc = view_path_key(v, key, back, cap);
	FUZZ_CHECK(rc == 0 || rc == -EINVAL, "path \"%s\": rc %d", key, rc);
	if (rc == 0) {
		check_path(back, key, view_flat(v));
		int rb = view_key_path(v, back, path, cap);
		FUZZ_CHECK(rb == 0 && strcmp(path, key) == 0,
			   "path \"%s\" -> key \"%s\" -> rc %d path \"%s\"", key, back, rb,
			   rb == 0 ? path : "");
	}
out:
	free(key);
	free(path);
	free(back);
	view_free(v);
	return 0;
}
