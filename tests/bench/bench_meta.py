#!/usr/bin/env python3
"""bench_meta.py — the latency of each metadata operation of a POSIX tool
(the calls pjdfstest's chmod, chown, utimensat, rename and unlink subsets
make) in one directory of a mount.

Usage: bench_meta.py DIR N LABEL
Does N rounds of: create an empty file (open O_CREAT + close), chmod,
chown, utime, stat, rename, unlink; mkdir, chmod of the directory, rmdir;
mkfifo, unlink; symlink, readlink, unlink. Prints one line per operation:
"LABEL OP median_ms p90_ms total_s", and a line "LABEL all - - total_s".
Exits 1 when an operation fails (the figure would not mean anything)."""
import os
import statistics
import sys
import time


def main():
    d, n, label = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    os.makedirs(d, exist_ok=True)
    times = {}

    def timed(op, fn, *args):
        t0 = time.perf_counter()
        r = fn(*args)
        times.setdefault(op, []).append(time.perf_counter() - t0)
        return r

    def create(path):
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o644))

    for i in range(n):
        f, g = os.path.join(d, f"f{i}"), os.path.join(d, f"g{i}")
        timed("create", create, f)
        timed("chmod", os.chmod, f, 0o600)
        timed("chown", os.chown, f, 65534, 65533)
        timed("utime", os.utime, f, (1000000000, 1000000000))
        st = timed("stat", os.stat, f)
        if st.st_mode & 0o7777 != 0o600 or st.st_uid != 65534 or int(st.st_mtime) != 1000000000:
            sys.exit(f"{label}: {f}: mode {oct(st.st_mode)} uid {st.st_uid} "
                     f"mtime {st.st_mtime} after chmod, chown, utime")
        timed("rename", os.rename, f, g)
        timed("unlink", os.unlink, g)
        sd = os.path.join(d, f"d{i}")
        timed("mkdir", os.mkdir, sd, 0o755)
        timed("chmod dir", os.chmod, sd, 0o700)
        timed("rmdir", os.rmdir, sd)
        p = os.path.join(d, f"p{i}")
        timed("mkfifo", os.mkfifo, p, 0o644)
        timed("unlink fifo", os.unlink, p)
        s = os.path.join(d, f"s{i}")
        timed("symlink", os.symlink, "target", s)
        if timed("readlink", os.readlink, s) != "target":
            sys.exit(f"{label}: {s}: readlink differs")
        timed("unlink link", os.unlink, s)
    total = 0.0
    for op, ts in times.items():
        ts.sort()
        total += sum(ts)
        print(f"{label} {op.replace(' ', '_')} {statistics.median(ts) * 1e3:.2f} "
              f"{ts[int(len(ts) * 0.9) - 1 if len(ts) >= 10 else -1] * 1e3:.2f} {sum(ts):.2f}")
    print(f"{label} all - - {total:.2f}")


if __name__ == "__main__":
    main()
