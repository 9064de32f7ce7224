/*
 * replay.h — `facetfs replay TRACE --view DIR [--processes N]` (MPIOR's
 * idea): replays a trace's I/O pattern against a view directory of a
 * mount, with synthetic data, and prints how long it took and which S3
 * requests the gateway made meanwhile (from MOUNT/.facetfs/stats).
 *
 * What is replayed: each traced process's opens, creates, reads, writes,
 * fsyncs, closes, truncates, renames and unlinks of the files of the
 * trace's first view seen, in its own order and at the same times after
 * the start as traced (so gaps and the interleaving of processes are
 * kept), one thread per traced process. Paths are the traced ones with the
 * view name replaced by DIR. Accesses on descriptors opened before the
 * trace began are left out. Writes carry a fixed byte pattern.
 * --processes N replays the N busiest processes only.
 * Threads: the replay's own; nothing is shared but the start time and the
 * per-thread result counters, read after the threads are joined.
 *
 * Tests: no unit test; t_trace.sh.
 */
#ifndef FACETFS_REPLAY_H
#define FACETFS_REPLAY_H

/* The command: argv[0] is "replay". Returns the process exit code. */
int replay_main(int argc, char **argv);

#endif
