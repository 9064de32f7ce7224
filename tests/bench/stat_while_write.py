#!/usr/bin/env python3
"""stat_while_write.py MOUNT_VIEW SECONDS ROUNDS

Latency of stat(2) on a file another process is writing, beside stat of a
file nobody writes, in one view of a facetfs mount (visibility `commit`,
so each fsync publishes the file and the next write is the first after a
commit: the one that journals "dirty" with its syncs under
cache.durability `power`).

The writer (a child process) keeps busy.bin open and repeats: pwrite 4 KiB
at 0, fsync. The main process alternates a stat of busy.bin and of idle.bin
(written once, closed) until SECONDS have passed, timing each call. Each
stat is statx(2) with AT_STATX_FORCE_SYNC, which FUSE answers by asking
the gateway (a plain stat would mostly be answered from the kernel's
attribute cache, and measure that). Prints
one line: "busy p50 p99 max idle p50 p99 max writes N" (microseconds),
after the child is joined. ROUNDS: the fsyncs the writer makes at most.
"""
import ctypes
import os
import sys
import time

LIBC = ctypes.CDLL(None, use_errno=True)
AT_FDCWD = -100
AT_STATX_FORCE_SYNC = 0x2000
STATX_BASIC_STATS = 0x7FF


def statx_sync(path, buf):
    """statx(path) forcing the file system to be asked; raises on error."""
    if LIBC.statx(AT_FDCWD, path, AT_STATX_FORCE_SYNC, STATX_BASIC_STATS, buf) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), path)


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))]


def writer(path, rounds, stop_at):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    buf = os.urandom(4096)
    n = 0
    while n < rounds and time.monotonic() < stop_at:
        os.pwrite(fd, buf, 0)
        os.fsync(fd)
        n += 1
    os.close(fd)
    return n


def main():
    view, seconds, rounds = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
    busy = os.path.join(view, "busy.bin")
    idle = os.path.join(view, "idle.bin")
    with open(idle, "wb") as f:
        f.write(os.urandom(4096))
    with open(busy, "wb") as f:
        f.write(os.urandom(4096))
    stop_at = time.monotonic() + seconds
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        n = writer(busy, rounds, stop_at)
        os.write(w, str(n).encode())
        os._exit(0)
    os.close(w)
    lat = {"busy": [], "idle": []}
    buf = ctypes.create_string_buffer(256)
    paths = {"busy": busy.encode(), "idle": idle.encode()}
    while time.monotonic() < stop_at:
        for name in ("busy", "idle"):
            t0 = time.perf_counter_ns()
            statx_sync(paths[name], buf)
            lat[name].append((time.perf_counter_ns() - t0) / 1000)
    writes = int(os.read(r, 64) or b"0")
    os.waitpid(pid, 0)
    out = []
    for name in ("busy", "idle"):
        xs = lat[name]
        out += [name, "%.0f" % pct(xs, 0.5), "%.0f" % pct(xs, 0.99), "%.0f" % max(xs)]
    print(" ".join(out), "writes", writes, "stats", len(lat["busy"]))


if __name__ == "__main__":
    main()
