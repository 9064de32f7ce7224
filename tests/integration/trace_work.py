#!/usr/bin/env python3
"""Workloads for t_trace.sh: real processes (fork) doing I/O on a mount in
a fixed order, coordinated by pipes, so `facetfs advise` has a known
verdict for each file. Usage: trace_work.py SCENARIO DIR [DIR2]

  closed     A writes f and closes; then B opens and reads it   (session suffices)
  fsync      A writes, fsyncs, keeps f open; B opens later and reads it,
             then A closes                                       (commit needed)
  dirty      f exists; A opens, writes, keeps it open; B opens and reads
             it, then A closes                                   (no policy suffices)
  own        A writes f and reads it back (O_DIRECT)             (no D conflict)
  apart      A and B each write and read their own file         (no overlap)
  reads      A opens f and reads 4 KiB 40 times, closes          (for replay)
  cross      A writes f on DIR (gateway A) and closes; B opens it on DIR2
             (gateway B, once its size shows) and reads          (two gateways)
"""

import os
import sys
import time

BLOCK = 4096


def child(fn):
    """Run fn in a new process; return (pid, read end of 'done' pipe,
    write end of 'go' pipe)."""
    go_r, go_w = os.pipe()
    done_r, done_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(go_w)
        os.close(done_r)

        def wait_go():
            os.read(go_r, 1)

        def done():
            os.write(done_w, b"x")
        code = 0
        try:
            fn(wait_go, done)
        except Exception as e:  # reported and made the exit status
            print(f"trace_work: process {os.getpid()}: {e}", file=sys.stderr)
            code = 1
        os._exit(code)
    os.close(go_r)
    os.close(done_w)
    return pid, done_r, go_w


def step(proc):      # let the process do its next step
    os.write(proc[2], b"g")


def wait(proc):      # wait until it finished a step
    if os.read(proc[1], 1) != b"x":
        raise RuntimeError(f"process {proc[0]} died")


def join(*procs):
    bad = 0
    for p in procs:
        _, st = os.waitpid(p[0], 0)
        bad |= st != 0
    return bad


def write_close(path, data):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.pwrite(fd, data, 0)
    os.close(fd)


def read_all(path, n):
    fd = os.open(path, os.O_RDONLY)
    got = os.pread(fd, n, 0)
    os.close(fd)
    return got


def main():
    what, d = sys.argv[1], sys.argv[2]
    f = os.path.join(d, f"{what}.dat")
    data = bytes(range(256)) * (BLOCK // 256)
    if what == "closed":
        def a(go, done):
            go(); write_close(f, data); done()

        def b(go, done):
            go(); read_all(f, BLOCK); done()
        pa, pb = child(a), child(b)
        step(pa); wait(pa)
        step(pb); wait(pb)
        return join(pa, pb)
    if what in ("fsync", "dirty"):
        if what == "dirty":
            write_close(f, b"\0" * BLOCK)   # the file exists, committed, before

        def a(go, done):
            go()
            fd = os.open(f, os.O_WRONLY | os.O_CREAT, 0o644)
            os.pwrite(fd, data, 0)
            if what == "fsync":
                os.fsync(fd)
            done()
            go(); os.close(fd); done()

        def b(go, done):
            go()
            time.sleep(0.05)
            fd = os.open(f, os.O_RDONLY)
            os.pread(fd, BLOCK, 0)
            os.close(fd)
            done()
        pa, pb = child(a), child(b)
        step(pa); wait(pa)
        step(pb); wait(pb)
        step(pa); wait(pa)
        return join(pa, pb)
    if what == "own":
        def a(go, done):
            go()
            fd = os.open(f, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
            os.pwrite(fd, data, 0)
            # O_DIRECT: the kernel would answer from the page cache the
            # write filled, and the gateway (and its trace) never see it
            rd = os.open(f, os.O_RDONLY | os.O_DIRECT)
            got = os.pread(rd, BLOCK, 0)
            os.close(rd)
            os.close(fd)
            if got != data:
                raise RuntimeError("own writes not read back")
            done()
        pa = child(a)
        step(pa); wait(pa)
        return join(pa)
    if what == "apart":
        def mk(name):
            def run(go, done):
                go()
                p = os.path.join(d, name)
                write_close(p, data)
                read_all(p, BLOCK)
                done()
            return run
        pa, pb = child(mk("apart-a.dat")), child(mk("apart-b.dat"))
        step(pa); step(pb); wait(pa); wait(pb)
        return join(pa, pb)
    if what == "reads":
        def a(go, done):
            go()
            fd = os.open(f, os.O_RDONLY)
            for i in range(40):
                os.pread(fd, BLOCK, (i % 4) * BLOCK)
            os.close(fd)
            done()
        pa = child(a)
        step(pa); wait(pa)
        return join(pa)
    if what == "cross":
        f2 = os.path.join(sys.argv[3], f"{what}.dat")

        def a(go, done):
            go(); write_close(f, data); done()

        def b(go, done):
            go()
            deadline = time.time() + 15
            while time.time() < deadline:
                try:
                    if os.stat(f2).st_size == BLOCK:
                        break
                except FileNotFoundError:
                    pass
                time.sleep(0.05)
            read_all(f2, BLOCK)
            done()
        pa, pb = child(a), child(b)
        step(pa); wait(pa)
        step(pb); wait(pb)
        return join(pa, pb)
    print(f"trace_work: unknown scenario {what}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
