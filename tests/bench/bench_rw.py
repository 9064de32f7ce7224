#!/usr/bin/env python3
"""bench_rw.py — the small-random-read workload of bench_rw.sh.

    bench_rw.py warm DIR                 read every file of DIR whole, once
    bench_rw.py orc DIR SECONDS [SEED]   random files: open, read whole, close
    bench_rw.py pread DIR SECONDS [SEED] all files open first, then random
                                         4 KiB preads on random descriptors
    bench_rw.py copy SRC DST             copy one file with 1 MiB writes; prints
                                         "bytes N write_s W close_s C" (close is
                                         the commit point: the upload)
    bench_rw.py randread FILE REF N SEED RANGES
                                         N 64 KiB preads at random offsets of
                                         FILE on one descriptor, each compared
                                         with REF; the offsets to RANGES (one a
                                         line); prints "reads N p50_s A p99_s B"

One stream, for SECONDS (or until 1,000,000 operations). Prints one line:
"ops N secs S ops_s X mib_s Y" (MiB/s counts the bytes read). A short read
or an error stops the run with exit status 1: the figures of a run that
read wrong data are not printed.
"""
import os
import random
import sys
import time

PREAD = 4096
RAND_READ = 65536
MAX_OPS = 1_000_000


def files_of(d):
    names = sorted(os.listdir(d))
    paths = [os.path.join(d, n) for n in names]
    sizes = [os.stat(p).st_size for p in paths]
    if not paths:
        sys.exit("bench_rw.py: no files in %s" % d)
    return paths, sizes


def warm(d):
    paths, sizes = files_of(d)
    for p, s in zip(paths, sizes):
        with open(p, "rb", buffering=0) as f:
            got = f.read(s + 1)
        if len(got) != s:
            sys.exit("bench_rw.py: %s: read %d of %d bytes" % (p, len(got), s))
    print("warmed %d files" % len(paths))


def run_orc(d, secs, rng):
    paths, sizes = files_of(d)
    n = len(paths)
    ops = nbytes = 0
    t0 = time.perf_counter()
    end = t0 + secs
    now = t0
    while now < end and ops < MAX_OPS:
        i = rng.randrange(n)
        fd = os.open(paths[i], os.O_RDONLY)
        got = os.read(fd, sizes[i] + 1)
        os.close(fd)
        if len(got) != sizes[i]:
            sys.exit("bench_rw.py: %s: read %d of %d bytes" % (paths[i], len(got), sizes[i]))
        ops += 1
        nbytes += len(got)
        now = time.perf_counter()
    return ops, nbytes, now - t0


def run_pread(d, secs, rng):
    paths, sizes = files_of(d)
    fds = [os.open(p, os.O_RDONLY) for p in paths]
    n = len(fds)
    ops = nbytes = 0
    t0 = time.perf_counter()
    end = t0 + secs
    now = t0
    try:
        while now < end and ops < MAX_OPS:
            # 64 operations between clock reads: a page-cache pread costs
            # about as much as perf_counter() itself.
            for _ in range(64):
                i = rng.randrange(n)
                off = rng.randrange(max(1, sizes[i] - PREAD + 1)) & ~4095
                want = min(PREAD, sizes[i] - off)
                got = os.pread(fds[i], PREAD, off)
                if len(got) != want:
                    sys.exit("bench_rw.py: %s: pread %d at %d gave %d bytes"
                             % (paths[i], PREAD, off, len(got)))
                nbytes += want
            ops += 64
            now = time.perf_counter()
    finally:
        for fd in fds:
            os.close(fd)
    return ops, nbytes, now - t0


def copy(src, dst):
    s = os.open(src, os.O_RDONLY)
    d = os.open(dst, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    n = 0
    t0 = time.perf_counter()
    while True:
        b = os.read(s, 1 << 20)
        if not b:
            break
        if os.write(d, b) != len(b):
            sys.exit("bench_rw.py: short write to %s" % dst)
        n += len(b)
    t1 = time.perf_counter()
    os.close(d)          # an upload error surfaces here as an exception
    t2 = time.perf_counter()
    os.close(s)
    print("bytes %d write_s %.3f close_s %.3f" % (n, t1 - t0, t2 - t1))


def randread(path, ref, n, seed, ranges):
    size = os.stat(ref).st_size
    if os.stat(path).st_size != size or size < RAND_READ:
        sys.exit("bench_rw.py: %s and %s differ in size" % (path, ref))
    rng = random.Random(seed)
    offs = [rng.randrange(size - RAND_READ + 1) & ~4095 for _ in range(n)]
    with open(ranges, "w") as f:
        f.writelines("%d\n" % o for o in offs)
    r = os.open(ref, os.O_RDONLY)
    fd = os.open(path, os.O_RDONLY)
    lat = []
    try:
        for off in offs:
            t0 = time.perf_counter()
            got = os.pread(fd, RAND_READ, off)
            lat.append(time.perf_counter() - t0)
            if got != os.pread(r, RAND_READ, off):
                sys.exit("bench_rw.py: %s: pread at %d: wrong bytes" % (path, off))
    finally:
        os.close(fd)
        os.close(r)
    lat.sort()
    p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99 + 0.999) - 1)]
    print("reads %d p50_s %.6f p99_s %.6f" % (n, lat[(len(lat) - 1) // 2], p99))


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    mode, d = sys.argv[1], sys.argv[2]
    if mode == "warm":
        warm(d)
        return
    if mode == "randread":
        randread(d, sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6])
        return
    if mode == "copy":
        copy(d, sys.argv[3])
        return
    secs = float(sys.argv[3])
    rng = random.Random(int(sys.argv[4]) if len(sys.argv) > 4 else 1)
    if mode == "orc":
        ops, nbytes, el = run_orc(d, secs, rng)
    elif mode == "pread":
        ops, nbytes, el = run_pread(d, secs, rng)
    else:
        sys.exit(__doc__)
    print("ops %d secs %.3f ops_s %.1f mib_s %.2f"
          % (ops, el, ops / el, nbytes / el / 1048576.0))


if __name__ == "__main__":
    main()
