/*
 * advise.h — `facetfs advise`: which visibility policy a traced workload
 * needs. Reads traces (common/trace.h), never FUSE or S3.
 *
 * The rule (Wang 2022, 4.3): every successful read or write is an access
 * (t, process, file, [start, end), type) with to = the open of the
 * descriptor it used, tcommit = the first fsync or close of that file by
 * the same process after it, tclose = the first close after it. Two
 * overlapping accesses with t1 < t2, the first a write, are a pair:
 * RAW or WAW by the second's type, S (same process) or D (distinct).
 * A pair conflicts under
 *   commit    if tcommit1 > t2;
 *   session   unless tclose1 < to2 (fsync is no visibility point there);
 *   eventual  unless the event of that close was applied, on the gateway
 *             of the second access, before to2 (its own close counts at
 *             once on the same gateway), i.e. unless te < to2.
 * eventual-safe implies session-safe implies commit-safe, so the policies
 * form a ladder; the verdict is the weakest rung with no D conflict, or
 * "none" when even commit has one. A new policy is one more rung in
 * advise.c's policy table (name, conflict test), ordered weakest first.
 *
 * Files are known by the name ("VIEW/PATH") they were opened under:
 * renames, unlinks and truncates are counted, not followed. Accesses on
 * descriptors opened before the trace began are left out (and counted).
 *
 * Merging: each trace's monotonic times are moved onto wall-clock time by
 * its anchor; times are ns since the earliest anchor. Traces of one host
 * align within their anchors' error; across hosts add the hosts' clock
 * offset (unknown here; --skew-ms says what to assume, and D pairs across
 * traces closer than that are counted as uncertain).
 *
 * Complexity: sorts (n log n) and a sweep over each file's accesses by
 * start offset with the writes and reads still overlapping: n log n plus
 * the number of overlapping pairs. Single-threaded; no state outside a call.
 *
 * Tests: test_advise.py (run on the facetfs executable); t_trace.sh.
 */
#ifndef FACETFS_ADVISE_H
#define FACETFS_ADVISE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

struct advise_opts {
	bool json;
	unsigned examples;     /* pairs shown per class and file (default 3) */
	unsigned max_files;    /* files printed in the text report (0: 20) */
	double skew_ms;        /* assumed clock offset between hosts */
	bool quiet_time;       /* no elapsed time on stderr */
};

/* Analyse the traces at paths (n >= 1) and print the report to out.
 * 0, or -errno after a message on stderr naming the trace. */
int advise_run(const char *const *paths, size_t n, const struct advise_opts *o, FILE *out);

#endif
