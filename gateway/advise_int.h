/*
 * advise_int.h — internals of the advisor shared by advise.c (loading,
 * the rule, the sweep) and advise_report.c (text and JSON). Not for other
 * modules. Everything lives in one struct advise_state owned by
 * advise_run(). Calls go one way: advise.c -> advise_report.c (the
 * report, with the policy ladder that names its verdicts).
 *
 * Tests: test_advise.py (through `facetfs advise`); t_trace.sh.
 */
#ifndef FACETFS_ADVISE_INT_H
#define FACETFS_ADVISE_INT_H

#include "gateway/advise.h"

#include <stdint.h>

#define T_NONE INT64_MAX

enum { CLS_RAW_S, CLS_RAW_D, CLS_WAW_S, CLS_WAW_D, CLS_N };
enum { POL_EVENTUAL, POL_SESSION, POL_COMMIT, POL_N };   /* weakest first */
#define POL_NONE POL_N   /* verdict: no policy suffices */
#define EXAMPLES_MAX 10

struct acc {
	int64_t t, to, tcommit, tclose;
	uint64_t start, end;
	uint32_t file, proc;
	uint32_t seq;              /* input order: breaks ties of t */
	uint16_t trace;
	uint8_t write;
};

struct example {
	struct acc a, b;           /* the write and the later access */
	int64_t te;                /* apply time seen by b's gateway (T_NONE) */
	unsigned rank;             /* 3 commit, 2 session, 1 eventual conflict */
};

struct pattern {
	uint64_t reads, writes, rbytes, wbytes, seq_reads, seq_writes;
	uint64_t min_size, max_size, max_end;
};

struct counts {
	uint64_t pairs[CLS_N];
	uint64_t conflicts[CLS_N][POL_N];
	uint64_t uncertain;        /* D pairs across traces within the skew */
	/* Write-back: pairs whose write and later access were on different
	 * gateways (traces) and that `eventual` allows; wb_gap, valid when
	 * wb_pairs > 0, is the least time from such a write's close to the
	 * other's open: a drain (and its event) slower than that breaks it. */
	uint64_t wb_pairs;
	int64_t wb_gap;
};

struct afile {
	char *name;                /* "VIEW/PATH" */
	uint32_t view;
	struct pattern pat;
	struct counts c;
	struct example ex[CLS_N][EXAMPLES_MAX];
	unsigned nex[CLS_N];
};

struct aview {
	char *name;
	struct counts c;
	struct pattern pat;
	uint64_t files;
};

struct atrace {
	const char *path;
	char source[40];
	int64_t offset_ns;         /* add to a monotonic time: ns since base */
	int64_t anchor_ns;         /* its wall-clock anchor, ns since base */
	int64_t anchor_err_ns;
	uint64_t records, skipped; /* skipped: accesses on unknown handles */
};

struct aproc {
	uint32_t pid;
	uint16_t trace;
};

struct advise_state {
	const struct advise_opts *o;
	struct atrace *traces;
	size_t ntraces;
	int64_t base_wall_ns;      /* the earliest anchor: time 0 */
	struct afile *files;
	size_t nfiles, capfiles;
	struct aview *views;
	size_t nviews, capviews;
	struct aproc *procs;
	size_t nprocs, capprocs;
	uint64_t records, renames, unlinks, truncates, events;
	struct counts total;
	size_t naccs;
	double elapsed_s;
};

/* advise_report.c */
void advise_report_text(const struct advise_state *s, FILE *out);
int  advise_report_json(const struct advise_state *s, FILE *out);

#endif
