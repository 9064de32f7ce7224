/*
 * filter_int.h — the inside of a struct view, shared by filter_parse.c
 * (builds it, with filter_parse_match.c and filter_json.c), filter_match.c
 * (reads it), filter_path.c (key <-> path) and filter_explain.c (prints
 * it). Not for other modules: use filter.h.
 * Layers, each calling only those below it:
 *   filter_load.c         the files of a directory
 *   filter_parse.c        JSON text -> struct view, with every error: the
 *                         document and its top-level fields
 *   filter_parse_match.c  a `match` object
 *   filter_json.c         the parser's values, each with its diagnostic
 *                         (filter_parse_int.h: the parser's inside)
 *   filter_explain.c      struct view -> its normal form (view_explain,
 *                         the input of view_hash)
 *   filter_match.c        accessors, matching, diagnostics
 *   filter_value.c        size and time values, read and written
 * filter_path.c (key <-> path) calls none of them.
 *
 * A match node holds the conditions of one `match` object (or one element
 * of `any`, or the object of `not`). Absent conditions are NULL / have
 * their has_* flag false. All strings are malloc'ed and owned by the node.
 *
 * Tests: test_filter.c (through filter.h), tests/fuzz/fuzz_filter.c.
 */
#ifndef FACETFS_FILTER_INT_H
#define FACETFS_FILTER_INT_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "views/filter.h"

/* metadata / tags condition on one name */
struct fl_kv_cond {
	char *name;      /* lower case for metadata, as written for tags */
	char **values;   /* one-of list; empty when `any_value` */
	size_t n_values;
	bool any_value;  /* "*" given: the name is present */
};

struct fl_match {
	char *prefix, *suffix, *glob;
	size_t prefix_len, suffix_len;
	char *regex_src;
	pcre2_code *regex;
	bool has_size_min, has_size_max;
	uint64_t size_min, size_max;
	bool has_after, has_before;
	int64_t after_ns, before_ns;
	char **ctypes;   /* lower case; "type/" + "*" for a wildcard */
	size_t n_ctypes;
	struct fl_kv_cond *meta;
	size_t n_meta;
	struct fl_kv_cond *tags;
	size_t n_tags;
	struct fl_match *any;  /* array of sub-matches */
	size_t n_any;
	bool has_any;
	struct fl_match *not_; /* one sub-match or NULL */
};

enum { FL_SESSION, FL_COMMIT, FL_EVENTUAL };
#define FL_WARM_MAX_DEFAULT (64ull << 20)

struct view {
	char *name;
	char *source;
	char **buckets;
	size_t n_buckets;
	struct fl_match match;
	char *strip_prefix; /* "" if none */
	size_t strip_len;
	bool flat;
	unsigned char policy; /* FL_SESSION, FL_COMMIT, FL_EVENTUAL */
	bool warm;          /* "warm": fetch arriving objects ahead */
	bool warm_on_scan;  /* ... also those a first scan lists */
	uint64_t warm_max;  /* ... up to this size */
	bool writable;
	bool write_back;              /* closes return before S3 has the file */
	struct obj_kv *on_create;
	size_t n_on_create;
	unsigned needs;
	uint64_t hash;
};

void fl_match_release(struct fl_match *m);
unsigned fl_match_needs(const struct fl_match *m);
/* Normalised definition as compact or pretty JSON text (malloc'ed). */
char *fl_explain(const struct view *v, bool pretty);

/* filter_value.c */
/* Size text -> bytes; 0, or -1 with the reason for a diagnostic in why. */
int fl_size_parse(const char *s, uint64_t *out, char *why, size_t whylen);
/* UTC ISO-8601 text -> ns since the epoch; 0 or -1. */
int fl_time_parse(const char *s, int64_t *out);
/* ns since the epoch -> ISO-8601 UTC text, into buf (>= 40 bytes). */
void fl_time_format(int64_t ns, char *buf, size_t len);

#endif
