/*
 * filter_parse_int.h — the inside of the filter parser, shared by its
 * three files (filter_int.h gives the layers): filter_parse.c (the
 * document and its top-level fields), filter_parse_match.c (`match`
 * objects) and filter_json.c (values read with a diagnostic for each
 * error). Not for other modules, nor for the rest of views/.
 *
 * A struct pctx lives for one view_load_buf() call. Every error is one
 * diagnostic line "FILE: PATH: reason" (fl_perr), counted in n_err; an
 * allocation failure is counted in n_oom (fl_oom, fl_strdup) and makes
 * the load return -ENOMEM. A PATH says where in the document the value is
 * ("match.any[1].size.min"), at most PATH_MAX_LEN bytes, ending in "..."
 * when longer. After an error the parser goes on with the next field.
 *
 * Tests: test_filter.c (through filter.h), tests/fuzz/fuzz_filter.c.
 */
#ifndef FACETFS_FILTER_PARSE_INT_H
#define FACETFS_FILTER_PARSE_INT_H

#include <cjson/cJSON.h>

#include "views/filter_int.h"

#define PATH_MAX_LEN 512

struct pctx {
	const char *file;
	struct diag *d;
	int n_err;
	int n_oom;
};

/* filter_parse_match.c */
/* The `match` object j at path into m (zeroed by the caller; freed with
 * fl_match_release whatever was reported). */
void fl_parse_match(struct pctx *c, const cJSON *j, const char *path, struct fl_match *m);

/* filter_json.c */
/* One diagnostic "FILE: PATH: reason", counted in c->n_err. */
void fl_perr(struct pctx *c, const char *path, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Count an allocation failure in c->n_oom; returns NULL. */
void *fl_oom(struct pctx *c);
/* strdup(s), or NULL counted by fl_oom. */
char *fl_strdup(struct pctx *c, const char *s);
/* The path of member key, or of element i, of parent into out
 * (PATH_MAX_LEN bytes). */
void fl_path_key(char *out, const char *parent, const char *key);
void fl_path_idx(char *out, const char *parent, size_t i);
/* j's JSON type as a word ("string", "object", ...), for diagnostics. */
const char *fl_json_type(const cJSON *j);
/* Does is(j) hold? If not, "expected WHAT, got TYPE" at path; false. */
bool fl_want(struct pctx *c, const cJSON *j, const char *path,
	     cJSON_bool (*is)(const cJSON *const), const char *what);
/* Does member it repeat the name of an earlier member of obj (cJSON keeps
 * both)? Then "duplicate field" at path; true. */
bool fl_dup_field(struct pctx *c, const cJSON *obj, const cJSON *it, const char *path);
/* Sort a list of strings and drop repeats (freeing them). */
void fl_str_list_normalise(char **v, size_t *n);
void fl_str_list_free(char **v, size_t n);
/* A string or a non-empty list of strings, in document order: 0, or -1
 * after a diagnostic (*out and *n hold what was read, the caller frees). */
int  fl_json_str_list(struct pctx *c, const cJSON *j, const char *path,
		      char ***out, size_t *n);
/* An HTTP header token: what can follow "x-amz-meta-". */
bool fl_is_token(const char *s);
/* s in lower case, in place (ASCII). */
void fl_str_lower(char *s);
/* A size: a whole number of bytes, or a string like "10GiB"
 * (filter_value.c). 0, or -1 after a diagnostic. */
int  fl_json_size(struct pctx *c, const cJSON *j, const char *path, uint64_t *out);
/* A UTC ISO-8601 time string (filter_value.c). 0, or -1 after a diagnostic. */
int  fl_json_time(struct pctx *c, const cJSON *j, const char *path, int64_t *out);
/* A string, copied into *out; a boolean into *out. Else a diagnostic, and
 * *out stays as it was. */
void fl_json_string(struct pctx *c, const cJSON *j, const char *path, char **out);
void fl_json_bool(struct pctx *c, const cJSON *j, const char *path, bool *out);

#endif
