#!/usr/bin/env python3
"""bench_cache.py — the open + read + close pass of bench_cache.sh.

    bench_cache.py pass DIR SIZE [SEED]

Lists DIR first (not timed), then opens, reads whole and closes every
file of DIR once, in an order shuffled by SEED (default 1), one stream.
Every file must be SIZE bytes: a short or long read stops the run with
exit status 1, so a pass that read wrong data prints no figure.
Prints one line: "ops N secs S ops_s X mib_s Y".
"""
import os
import random
import sys
import time


def main():
    if len(sys.argv) < 4 or sys.argv[1] != "pass":
        sys.exit(__doc__)
    d, size = sys.argv[2], int(sys.argv[3])
    rng = random.Random(int(sys.argv[4]) if len(sys.argv) > 4 else 1)
    paths = [os.path.join(d, n) for n in sorted(os.listdir(d))]
    if not paths:
        sys.exit("bench_cache.py: no files in %s" % d)
    rng.shuffle(paths)
    t0 = time.perf_counter()
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            got = os.read(fd, size + 1)
        finally:
            os.close(fd)
        if len(got) != size:
            sys.exit("bench_cache.py: %s: read %d of %d bytes" % (p, len(got), size))
    el = time.perf_counter() - t0
    n = len(paths)
    print("ops %d secs %.3f ops_s %.1f mib_s %.2f"
          % (n, el, n / el, n * size / el / 1048576.0))


if __name__ == "__main__":
    main()
