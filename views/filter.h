/*
 * filter.h — filter-definition files: one JSON file per view (docs/design.md
 * "Filter-definition files"). Parses and validates them with precise
 * diagnostics, matches objects against them, and maps object keys to paths
 * inside the view and back.
 *
 * Invariants: a struct view is immutable once loaded; every function taking
 * a const struct view * may be called from any thread at the same time
 * (regexes are compiled once; match data is allocated per call).
 * Ownership: view_load_*() give you a view you free with view_free();
 * strings returned by accessors live as long as the view. view_explain()
 * returns malloc'ed text the caller frees. A struct diag is an embedded
 * struct (zero-initialise it, diag_release() it); each line is one
 * "FILE: JSON.PATH: reason" (JSON.PATH is "$" for the whole document,
 * otherwise like `match.any[1].size.max`).
 * Errors: 0 or a negative errno; validation errors are -EINVAL with every
 * problem of the file added to the diag (never only the first).
 *
 * Tests: test_filter.c, test_route.c, tests/fuzz/fuzz_filter.c,
 * fuzz_view_path.c; t_filters.sh.
 */
#ifndef FACETFS_FILTER_H
#define FACETFS_FILTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/object.h"

struct view; /* opaque: one parsed, validated filter file */

struct diag {
	char **lines; /* "FILE: JSON.PATH: reason", malloc'ed */
	size_t n;
};

/* printf-style; a NULL d is allowed (the line is dropped). A failed
 * allocation drops the line too (diagnostics never fail the caller). */
void diag_add(struct diag *d, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void diag_release(struct diag *d);

/* Load one file. 0; -EINVAL with diagnostics when the file is not a valid
 * filter; -errno when it cannot be read (also one diagnostic line);
 * -ENOMEM. On error *out is NULL. FILE in the diagnostics is `path` as given. */
int view_load_file(const char *path, struct view **out, struct diag *d);

/* Same from a buffer; `file` is the name used in diagnostics. */
int view_load_buf(const char *file, const char *buf, size_t len,
		  struct view **out, struct diag *d);

/* Load every "*.json" file of `dir` whose name does not start with '.',
 * in strcmp order of file names. FILE in diagnostics is "DIR/NAME".
 * Two files defining the same view name: the later file is rejected with
 * `LATER: name: duplicate view name "X" (also defined in EARLIER)`.
 * Returns 0 when every file loaded; -EINVAL when some did not — then *out
 * still holds the views that loaded cleanly (free with view_free_all());
 * other errors (-ENOENT, -ENOTDIR, -ENOMEM, ...) leave *out NULL, *n 0. */
int view_load_dir(const char *dir, struct view ***out, size_t *n, struct diag *d);
void view_free_all(struct view **views, size_t n);
void view_free(struct view *v);

const char *view_name(const struct view *v);
const char *view_source(const struct view *v);     /* file it came from */
size_t view_n_buckets(const struct view *v);
const char *view_bucket(const struct view *v, size_t i);
bool view_uses_bucket(const struct view *v, const char *bucket);
/* "session", "commit" or "eventual" (sync/cache/visibility.h says what each is). */
const char *view_visibility(const struct view *v);
/* "warm": the largest object the view fetches ahead into the burst buffer
 * when an event brings it in (0: the view does not warm); *on_scan (may be
 * NULL): also objects its buckets' first scans list. */
uint64_t view_warm(const struct view *v, bool *on_scan);
bool view_writable(const struct view *v);
/* "write_back" (only with "eventual" and "writable"): a close returns once
 * the file is durable in the burst buffer; a drain publishes it behind. */
bool view_write_back(const struct view *v);
const char *view_strip_prefix(const struct view *v); /* "" if none */
bool view_flat(const struct view *v);
/* on_create.metadata (names lower case); NULL with *n = 0 if none. */
const struct obj_kv *view_on_create(const struct view *v, size_t *n);

/* Does the object belong to the view? Its bucket must be one of the view's
 * (a NULL bucket never matches), its key must start with strip_prefix, and
 * every condition of `match` must hold (`any`: one sub-match holds; `not`:
 * the sub-match does not hold). A condition on metadata, tags or
 * content_type does not hold when o->flags says that field is unknown (so
 * `not` of it does hold): fetch the fields view_needs() names first.
 * `regex` searches the key (unanchored, UTF-8); `glob` is fnmatch() on the
 * whole key with FNM_PATHNAME (`*` does not cross '/'). o is never a
 * tombstone here. A key that matches but cannot be a path still matches:
 * view_key_path() tells the caller to leave it out and count it. */
bool view_match(const struct view *v, const struct obj_meta *o);

/* OBJ_HAS_META | OBJ_HAS_TAGS | OBJ_HAS_CTYPE: the fields the filter reads. */
unsigned view_needs(const struct view *v);

/* Could an object with this key belong to the view, judging only the key
 * conditions (strip_prefix, prefix, suffix, glob, regex)? Conditions on other
 * fields count as "maybe". For create/rename in a writable view: false
 * means EINVAL. */
bool view_key_can_match(const struct view *v, const char *key);

/* The literal head every key of the view starts with: view_match(v, o)
 * implies that o->key begins with the first *len bytes of the returned
 * string (which lives as long as the view; it is not NUL-terminated at
 * *len). Taken from strip_prefix, match.prefix, the literal head of a glob
 * (up to its first '*', '?', '[' or '\') and, for `any`, the common prefix
 * of its branches, at every level the longest of these; `regex` and `not`
 * add nothing. *len == 0: every key may match (for view routers). */
const char *view_key_prefix(const struct view *v, size_t *len);

/* Key -> path inside the view, relative to the view root ("a/b/c", no
 * leading '/'), after strip_prefix.
 *   Not flat: '/' separates directories. The key is refused (-EINVAL) when
 *     the rest is empty or has an empty component ("a//b", a leading or
 *     trailing '/'), a "." or ".." component, or a component > 255 bytes.
 *   Flat: the whole rest is one file name, with '%' written as "%25" and
 *     '/' as "%2F" (upper case, exactly these two escapes); -EINVAL when
 *     that name is empty, ".", ".." or longer than 255 bytes.
 * -ENOENT: the key does not start with strip_prefix (outside the view).
 * -ENAMETOOLONG: the path does not fit in outlen bytes (with the NUL). */
int view_key_path(const struct view *v, const char *key, char *out, size_t outlen);

/* Path -> key, the exact inverse: view_key_path(view_path_key(p)) == p for
 * every path it accepts. -EINVAL for a path no key maps to (empty, empty or
 * "."/".." components, components > 255 bytes; in a flat view a '/' or a
 * '%' not starting "%25"/"%2F"); -ENAMETOOLONG if the key does not fit. */
int view_path_key(const struct view *v, const char *path, char *out, size_t outlen);

/* The normalised definition as pretty-printed JSON (all defaults filled in,
 * bucket/content_type/value lists always lists, sizes in bytes, times as
 * UTC ISO-8601 with nanoseconds when non-zero). malloc'ed; NULL on ENOMEM. */
char *view_explain(const struct view *v);

/* FNV-1a 64 of the compact normalised definition: equal definitions (in any
 * spelling) hash equal; any change of meaning changes it. */
uint64_t view_hash(const struct view *v);

/* A size as filter files write it (1234, "10GiB", "5 MB"): 0, or -EINVAL
 * with the reason in why (may be NULL). Also used for the gateway config. */
int view_size_parse(const char *text, uint64_t *out, char *why, size_t whylen);

#endif
