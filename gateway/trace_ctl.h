/*
 * trace_ctl.h — the `trace` commands of .facetfs/control, as `facetfs
 * trace` writes them: "trace start [--view V] [--max-bytes N[K|M|G]]",
 * "trace stop", "trace status". Parses and calls the recorder
 * (common/trace.h). Runs on the FUSE worker that serves the control write;
 * no state of its own. The answer is malloc'ed text (the caller frees),
 * starting with "error:" when the command failed.
 *
 * Tests: no unit test; t_trace.sh.
 */
#ifndef FACETFS_TRACE_CTL_H
#define FACETFS_TRACE_CTL_H

struct trace;

/* args: what follows "trace" in the command (may be empty). */
char *trace_control(struct trace *t, const char *args);

#endif
