#!/usr/bin/env python3
"""wb_stress.py — a random stress of a write-back view, with a model, and
the comparison of a mount's tree with S3 (tests/integration/t_wbstress.sh).

    wb_stress.py run ROOT [--procs N] [--ops M] [--seed S] [--forget]
                 [--work DIR] [--crash-ok] [--timeout SECONDS]
        N processes (default 4), each M random operations (default 1000)
        in ROOT/pI/, a subtree of its own, so that each one's model of its
        subtree is exact: create, write (at an offset, appending, with
        O_TRUNC), write through descriptors kept open, close, truncate
        (path and descriptor), fsync, rename of files (to a new name or
        over another file) and of directories (EXDEV: copied and removed
        as mv does), unlink, mkdir, rmdir, symlink, setxattr (user.*),
        reads and listings checked against the model, and with --forget a
        kernel forget now and then (drop_caches; root only). Process I
        draws from Random(S * 1000 + I): a seed replays a run. Every
        result is compared with the model (errno included); at the end
        each process closes its descriptors and compares its whole
        subtree (types, bytes, link targets, user.* xattrs). Prints what
        differs, and exits 0 only if nothing did. --work DIR (outside the
        mount; default a new temporary directory): each process writes its
        count of operations done to DIR/pI every 20, each call it makes
        and its result to DIR/trace-I.log, and its report to
        DIR/report-I.json.
        --crash-ok: the gateway is killed meanwhile: a process stops at
        its first ENOTCONN and the model is not checked (exit 0 unless a
        process failed otherwise). --timeout (600): a process still
        running is killed and reported. SIGTERM kills the processes.
    wb_stress.py compare VIEW_DIR BUCKET PREFIX
        The files and symbolic links under VIEW_DIR against the objects
        under PREFIX in BUCKET (S3_ENDPOINT, AWS_ACCESS_KEY_ID,
        AWS_SECRET_ACCESS_KEY, AWS_DEFAULT_REGION from the environment):
        the same names, a file's bytes byte for byte and its user.* xattrs
        as x-amz-meta-*, a link as an object holding its target with mode
        S_IFLNK in x-amz-meta-mode (as s3fs keeps it). Directories are not
        objects and are not compared. Exit 0 if all match, else 1 with
        what differs.
    wb_stress.py snapshot ROOT OUT
        ROOT's tree (directories, files' SHA-256 and sizes, link targets,
        xattrs) as JSON into OUT.
    wb_stress.py diff A B
        Two snapshots; exit 1 with what differs.
"""
import argparse
import datetime
import errno
import hashlib
import hmac
import http.client
import json
import os
import random
import signal
import stat
import sys
import tempfile
import time
import urllib.parse
import xml.etree.ElementTree as ET

CRASH_ERRNOS = (errno.ENOTCONN, errno.ECONNABORTED)
MAX_FDS = 6
MAX_DEPTH = 3
MAX_REPORTED = 30
WEIGHTS = [
    ("create", 14), ("write", 12), ("fdwrite", 10), ("close", 8),
    ("truncate", 6), ("fsync", 6), ("rename_file", 8), ("rename_dir", 3),
    ("unlink", 6), ("mkdir", 4), ("rmdir", 3), ("symlink", 4),
    ("setxattr", 4), ("readcheck", 8), ("listcheck", 3), ("forget", 0),
]


class Crash(Exception):
    """The mount's daemon is gone (ENOTCONN)."""


class Node:
    """A file or a symbolic link of the model; identity survives renames,
    and a descriptor keeps its node after an unlink."""

    def __init__(self, kind, data=b"", target=""):
        self.kind = kind            # "f" or "l"
        self.data = bytearray(data)
        self.target = target
        self.xattrs = {}


def ename(e):
    return "ok" if e == 0 else errno.errorcode.get(e, str(e))


def parent(p):
    return p.rsplit("/", 1)[0] if "/" in p else ""


def join(d, n):
    return n if d == "" else d + "/" + n


def under(p, d):
    """p is d or inside d."""
    return p == d or p.startswith(d + "/")


class Proc:
    """One stressing process and its model of ROOT/pI."""

    def __init__(self, root, idx, seed, ops, forget, progress):
        self.idx = idx
        self.base = os.path.join(root, "p%d" % idx)
        self.rng = random.Random(seed * 1000 + idx)
        self.ops = ops
        self.progress = progress and os.path.join(progress, "p%d" % idx)
        self.trace = open(os.path.join(progress, "trace-%d.log" % idx), "w", buffering=1) if progress else None
        self.files = {}          # path -> Node (files and links)
        self.dirs = {""}
        self.fds = []            # [fd, node, append]
        self.errors = []
        self.nerrors = 0
        self.counter = 0
        self.step = 0
        self.counts = {}
        weights = dict(WEIGHTS)
        weights["forget"] = 0.3 if forget else 0
        self.names = [n for n, _ in WEIGHTS]
        self.weights = [weights[n] for n in self.names]

    # ---- results ----
    def fail(self, msg):
        self.nerrors += 1
        if len(self.errors) < MAX_REPORTED:
            self.errors.append("p%d op %d: %s" % (self.idx, self.step, msg))

    def call(self, what, fn, expect=0, allowed=(), resync=True):
        """Run fn; compare its errno with expect (or one of allowed).
        Returns (errno, result); a mismatch is a failure and (unless
        resync is False) the model is taken from the mount again."""
        try:
            r, e = fn(), 0
        except OSError as x:
            r, e = None, x.errno
        if self.trace:
            self.trace.write("%d %s: %s\n" % (self.step, what, ename(e)))
        if e in CRASH_ERRNOS:
            raise Crash()
        if e != expect and e not in allowed:
            self.fail("%s: expected %s, got %s" % (what, ename(expect), ename(e)))
            if resync:
                self.resync()
        return e, r

    def p(self, rel):
        return os.path.join(self.base, rel) if rel else self.base

    def fresh(self, prefix):
        self.counter += 1
        return "%s%d" % (prefix, self.counter)

    # ---- choices ----
    def pick(self, seq):
        seq = sorted(seq)
        return self.rng.choice(seq) if seq else None

    def regular(self):
        return [p for p, n in self.files.items() if n.kind == "f"]

    def depth(self, d):
        return 0 if d == "" else d.count("/") + 1

    def data(self):
        r = self.rng.random()
        if r < 0.05:
            n = 0
        elif r < 0.60:
            n = self.rng.randint(1, 4096)
        elif r < 0.95:
            n = self.rng.randint(4097, 65536)
        else:
            n = self.rng.randint(65537, 1 << 20)
        return self.rng.randbytes(n)

    def children(self, d):
        return [p for p in list(self.files) + list(self.dirs) if p != "" and parent(p) == d]

    @staticmethod
    def write_at(node, off, data):
        if not data:                 # a write of nothing extends nothing
            return
        if off > len(node.data):
            node.data.extend(b"\0" * (off - len(node.data)))
        node.data[off:off + len(data)] = data

    # ---- operations ----
    def op_create(self):
        d = self.pick(self.dirs)
        path = join(d, self.fresh("f"))
        body = self.data()

        def go():
            fd = os.open(self.p(path), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                os.write(fd, body)
            except OSError:
                os.close(fd)
                raise
            return fd
        e, fd = self.call("create %s" % path, go)
        if e:
            return
        node = Node("f", body)
        self.files[path] = node
        self.keep_or_close(fd, node, False)

    def keep_or_close(self, fd, node, append):
        if len(self.fds) < MAX_FDS and self.rng.random() < 0.4:
            self.fds.append([fd, node, append])
            if self.trace:
                self.trace.write("%d kept open as fd %d\n" % (self.step, fd))
        else:
            self.call("close fd %d" % fd, lambda: os.close(fd))

    def op_write(self):
        path = self.pick(self.regular())
        if path is None:
            return self.op_create()
        node = self.files[path]
        r = self.rng.random()
        body = self.data()
        flags = os.O_WRONLY
        if r < 0.3:
            flags |= os.O_TRUNC
            off = 0
        elif r < 0.5:
            flags |= os.O_APPEND
            off = None
        else:
            off = self.rng.randint(0, len(node.data))

        def go():
            fd = os.open(self.p(path), flags)
            try:
                if off is None:
                    os.write(fd, body)
                else:
                    os.pwrite(fd, body, off)
            except OSError:
                os.close(fd)
                raise
            return fd
        e, fd = self.call("write %s (%d bytes at %s%s)" % (
            path, len(body), "end" if off is None else off,
            ", O_TRUNC" if flags & os.O_TRUNC else ""), go)
        if e:
            return
        if flags & os.O_TRUNC:
            del node.data[:]
        self.write_at(node, len(node.data) if off is None else off, body)
        self.keep_or_close(fd, node, off is None)

    def op_fdwrite(self):
        if not self.fds:
            return self.op_write()
        ent = self.rng.choice(self.fds)
        fd, node, append = ent
        body = self.data()
        off = None if append else self.rng.randint(0, len(node.data) + 100)
        if off is None:
            e, _ = self.call("write %d bytes on fd %d (append)" % (len(body), fd),
                             lambda: os.write(fd, body))
        else:
            e, _ = self.call("pwrite %d bytes on fd %d at %d" % (len(body), fd, off),
                             lambda: os.pwrite(fd, body, off))
        if e == 0:
            self.write_at(node, len(node.data) if off is None else off, body)

    def op_close(self):
        if not self.fds:
            return self.op_readcheck()
        ent = self.fds.pop(self.rng.randrange(len(self.fds)))
        self.call("close fd %d" % ent[0], lambda: os.close(ent[0]))

    def op_truncate(self):
        if self.fds and self.rng.random() < 0.5:
            fd, node, _ = self.rng.choice(self.fds)
            size = self.rng.randint(0, len(node.data) + 8192)
            e, _ = self.call("ftruncate fd %d to %d" % (fd, size), lambda: os.ftruncate(fd, size))
        else:
            path = self.pick(self.regular())
            if path is None:
                return
            node = self.files[path]
            size = self.rng.randint(0, len(node.data) + 8192)
            e, _ = self.call("truncate %s to %d" % (path, size),
                             lambda: os.truncate(self.p(path), size))
        if e == 0:
            if size <= len(node.data):
                del node.data[size:]
            else:
                node.data.extend(b"\0" * (size - len(node.data)))

    def op_fsync(self):
        if self.fds:
            fd = self.rng.choice(self.fds)[0]
            self.call("fsync fd %d" % fd, lambda: os.fsync(fd))
            return
        path = self.pick(self.regular())
        if path is None:
            return

        def go():
            fd = os.open(self.p(path), os.O_WRONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        self.call("open, fsync, close %s" % path, go)

    def op_rename_file(self):
        src = self.pick(self.files)
        if src is None:
            return
        others = [p for p in self.files if p != src]
        if others and self.rng.random() < 0.3:
            dst = self.pick(others)
        else:
            dst = join(self.pick(self.dirs), self.fresh("r"))
        e, _ = self.call("rename %s -> %s" % (src, dst),
                         lambda: os.rename(self.p(src), self.p(dst)))
        if e == 0:
            self.files[dst] = self.files.pop(src)

    def op_rename_dir(self):
        src = self.pick(self.dirs - {""})
        if src is None:
            return self.op_mkdir()
        sub = max(self.depth(d) for d in self.dirs if under(d, src)) - self.depth(src)
        dests = [d for d in self.dirs if not under(d, src) and self.depth(d) + 1 + sub <= MAX_DEPTH]
        if not dests:
            return
        dst = join(self.pick(dests), self.fresh("m"))
        e, _ = self.call("rename dir %s -> %s" % (src, dst),
                         lambda: os.rename(self.p(src), self.p(dst)),
                         allowed=(errno.EXDEV,))
        if e == errno.EXDEV:
            self.counts["rename_dir EXDEV"] = self.counts.get("rename_dir EXDEV", 0) + 1
            return self.move_by_copy(src, dst)
        if e:
            return

        def moved(p):
            return dst + p[len(src):] if under(p, src) else p
        self.files = {moved(p): n for p, n in self.files.items()}
        self.dirs = {moved(d) for d in self.dirs}

    def move_by_copy(self, src, dst):
        """What mv does when rename says EXDEV: copy, then remove."""
        for d in sorted(d for d in self.dirs if under(d, src)):
            nd = dst + d[len(src):]
            e, _ = self.call("mv: mkdir %s" % nd, lambda: os.mkdir(self.p(nd)))
            if e:
                return
            self.dirs.add(nd)
        for f in sorted(p for p in self.files if under(p, src)):
            nf, node = dst + f[len(src):], self.files[f]
            if node.kind == "l":
                e, _ = self.call("mv: symlink %s" % nf, lambda: os.symlink(node.target, self.p(nf)))
                if e:
                    return
                self.files[nf] = Node("l", target=node.target)
                continue

            def copy():
                with open(self.p(f), "rb") as i:
                    body = i.read()
                with open(self.p(nf), "xb") as o:
                    o.write(body)
                for k in os.listxattr(self.p(f)):
                    if k.startswith("user."):
                        os.setxattr(self.p(nf), k, os.getxattr(self.p(f), k))
            e, _ = self.call("mv: copy %s -> %s" % (f, nf), copy)
            if e:
                return
            copy_node = Node("f", node.data)
            copy_node.xattrs = dict(node.xattrs)
            self.files[nf] = copy_node
        for f in sorted(p for p in self.files if under(p, src)):
            e, _ = self.call("mv: unlink %s" % f, lambda: os.unlink(self.p(f)))
            if e:
                return
            del self.files[f]
        for d in sorted((d for d in self.dirs if under(d, src)), reverse=True):
            e, _ = self.call("mv: rmdir %s" % d, lambda: os.rmdir(self.p(d)))
            if e:
                return
            self.dirs.discard(d)

    def op_unlink(self):
        path = self.pick(self.files)
        if path is None:
            return
        e, _ = self.call("unlink %s" % path, lambda: os.unlink(self.p(path)))
        if e == 0:
            del self.files[path]

    def op_mkdir(self):
        d = self.pick(d for d in self.dirs if self.depth(d) < MAX_DEPTH)
        path = join(d, self.fresh("d"))
        e, _ = self.call("mkdir %s" % path, lambda: os.mkdir(self.p(path)))
        if e == 0:
            self.dirs.add(path)

    def op_rmdir(self):
        path = self.pick(self.dirs - {""})
        if path is None:
            return
        expect = errno.ENOTEMPTY if self.children(path) else 0
        e, _ = self.call("rmdir %s (%d entries)" % (path, len(self.children(path))),
                         lambda: os.rmdir(self.p(path)), expect)
        if e == 0:
            self.dirs.discard(path)

    def op_symlink(self):
        path = join(self.pick(self.dirs), self.fresh("l"))
        r = self.rng.random()
        if r < 0.5 and self.files:
            target = os.path.relpath(self.pick(self.files), parent(path) or ".")
        elif r < 0.8:
            target = "missing/%d" % self.rng.randint(0, 999)
        else:
            target = "/tmp/wb-stress-%d" % self.rng.randint(0, 999)
        e, _ = self.call("symlink %s -> %s" % (path, target),
                         lambda: os.symlink(target, self.p(path)))
        if e == 0:
            self.files[path] = Node("l", target=target)

    def op_setxattr(self):
        path = self.pick(self.regular())
        if path is None:
            return
        name = "user.k%d" % self.rng.randint(0, 3)
        value = "".join(self.rng.choice("abcdefghij0123456789") for _ in range(self.rng.randint(1, 40)))
        e, _ = self.call("setxattr %s %s" % (path, name),
                         lambda: os.setxattr(self.p(path), name, value.encode()))
        if e == 0:
            self.files[path].xattrs[name] = value.encode()

    def op_readcheck(self):
        path = self.pick(self.regular())
        if path is None:
            return

        def go():
            with open(self.p(path), "rb") as f:
                return f.read()
        e, got = self.call("read %s" % path, go)
        if e == 0 and got != bytes(self.files[path].data):
            self.fail("read %s: %d bytes, the model has %d%s" % (
                path, len(got), len(self.files[path].data),
                "" if len(got) != len(self.files[path].data) else " (other bytes)"))
            self.resync()

    def op_listcheck(self):
        d = self.pick(self.dirs)
        e, got = self.call("listdir %s" % (d or "."), lambda: os.listdir(self.p(d)))
        if e:
            return
        want = sorted(p.rsplit("/", 1)[-1] for p in self.children(d))
        if sorted(got) != want:
            self.fail("listdir %s: %s, the model has %s" % (
                d or ".", sorted(set(got) - set(want)) and "extra %s" % sorted(set(got) - set(want))
                or "", sorted(set(want) - set(got)) and "missing %s" % sorted(set(want) - set(got))
                or ""))
            self.resync()

    def op_forget(self):
        try:
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("2\n")
        except OSError:
            self.weights[self.names.index("forget")] = 0

    # ---- the model against the mount ----
    def close_all(self):
        while self.fds:
            fd = self.fds.pop()[0]
            self.call("close fd %d" % fd, lambda: os.close(fd), resync=False)

    def resync(self):
        """After a difference: take the mount as it is, so that one bug is
        reported once and not as every later operation."""
        self.close_all()
        self.dirs, self.files = {""}, {}
        for rel, kind, val, xattrs in walk(self.base):
            if kind == "d":
                self.dirs.add(rel)
            elif kind == "e":
                continue
            elif kind == "l":
                self.files[rel] = Node("l", target=val)
            else:
                n = Node("f", val)
                n.xattrs = xattrs
                self.files[rel] = n

    def verify(self):
        self.close_all()
        seen = set()
        for rel, kind, val, xattrs in walk(self.base):
            seen.add(rel)
            if kind == "e":
                self.fail("final: %s is listed, reading it gives %s" % (rel, ename(val)))
                continue
            if kind == "d":
                if rel not in self.dirs:
                    self.fail("final: directory %s is not in the model" % rel)
                continue
            n = self.files.get(rel)
            if n is None:
                self.fail("final: %s %s is not in the model" % ("link" if kind == "l" else "file", rel))
            elif n.kind != kind:
                self.fail("final: %s is a %s, the model has a %s" % (rel, kind, n.kind))
            elif kind == "l" and val != n.target:
                self.fail("final: link %s -> %r, the model has %r" % (rel, val[:80], n.target))
            elif kind == "f" and val != bytes(n.data):
                self.fail("final: file %s has %d bytes, the model %d%s" % (
                    rel, len(val), len(n.data), "" if len(val) != len(n.data) else " (other bytes)"))
            elif kind == "f" and xattrs != n.xattrs:
                self.fail("final: file %s xattrs %s, the model %s" % (rel, sorted(xattrs), sorted(n.xattrs)))
        for rel in sorted((set(self.files) | self.dirs) - seen - {""}):
            self.fail("final: %s is missing from the mount" % rel)

    def run(self):
        os.mkdir(self.base)
        for self.step in range(1, self.ops + 1):
            name = self.rng.choices(self.names, self.weights)[0]
            self.counts[name] = self.counts.get(name, 0) + 1
            getattr(self, "op_" + name)()
            if self.progress and self.step % 20 == 0:
                with open(self.progress, "w") as f:
                    f.write("%d\n" % self.step)
        self.step = self.ops + 1
        self.verify()


def walk(base, rel=""):
    """(rel, kind, bytes-or-target, user xattrs) of everything under base,
    a directory before what it holds; kind d, f or l, or e (the value an
    errno) for an entry listed that cannot be read. ENOTCONN raises."""
    out = []
    for e in sorted(os.scandir(os.path.join(base, rel) if rel else base), key=lambda e: e.name):
        r = join(rel, e.name)
        try:
            if e.is_symlink():
                out.append((r, "l", os.readlink(e.path), {}))
            elif e.is_dir(follow_symlinks=False):
                out.append((r, "d", None, {}))
                out.extend(walk(base, r))
            else:
                with open(e.path, "rb") as f:
                    body = f.read()
                xattrs = {k: os.getxattr(e.path, k) for k in os.listxattr(e.path)
                          if k.startswith("user.")}
                out.append((r, "f", body, xattrs))
        except OSError as x:
            if x.errno in CRASH_ERRNOS:
                raise
            out.append((r, "e", x.errno, {}))
    return out


def child(proc, out):
    """Run one process; its report as JSON into out."""
    rep = {"ops": 0, "crashed": False}
    try:
        proc.run()
    except Crash:
        rep["crashed"] = True
    except OSError as x:       # outside an operation (a walk): the same rule
        if x.errno in CRASH_ERRNOS:
            rep["crashed"] = True
        else:
            proc.fail("stress aborted: %r" % x)
    except Exception as x:     # a bug of this script: say it, fail the run
        proc.fail("stress aborted: %r" % x)
    rep.update(ops=min(proc.step, proc.ops), counts=proc.counts,
               errors=proc.errors, nerrors=proc.nerrors)
    if proc.trace:
        proc.trace.close()
    with open(out, "w") as f:
        json.dump(rep, f)


def cmd_run(a):
    os.makedirs(a.root, exist_ok=True)
    reports = a.work or tempfile.mkdtemp(prefix="wb-stress.")
    os.makedirs(reports, exist_ok=True)
    pids = {}
    t0 = time.monotonic()
    for i in range(a.procs):
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            code = 0
            try:
                child(Proc(a.root, i, a.seed, a.ops, a.forget, a.work),
                      os.path.join(reports, "report-%d.json" % i))
            except BaseException:
                code = 2
            os._exit(code)
        pids[pid] = i

    def stop(*_):
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        os._exit(143)
    signal.signal(signal.SIGTERM, stop)
    hung = []
    while pids:
        pid, _ = os.waitpid(-1, os.WNOHANG)
        if pid:
            pids.pop(pid, None)
            continue
        if time.monotonic() - t0 > a.timeout:
            for pid, i in pids.items():
                hung.append(i)
                os.kill(pid, signal.SIGKILL)
            for pid in list(pids):
                os.waitpid(pid, 0)
            break
        time.sleep(0.05)
    bad = len(hung)
    total = {}
    for i in range(a.procs):
        if i in hung:
            print("p%d: still running after %d s, killed" % (i, a.timeout))
            continue
        try:
            with open(os.path.join(reports, "report-%d.json" % i)) as f:
                rep = json.load(f)
        except (OSError, ValueError):
            print("p%d: no report" % i)
            bad += 1
            continue
        for k, v in rep["counts"].items():
            total[k] = total.get(k, 0) + v
        state = "stopped by the crash" if rep["crashed"] else "done"
        print("p%d: %d operations, %s, %d differences" % (i, rep["ops"], state, rep["nerrors"]))
        for line in rep["errors"]:
            print("  " + line)
        if rep["crashed"] and not a.crash_ok:
            bad += 1
        if rep["nerrors"] and not (a.crash_ok and rep["crashed"]):
            bad += 1
    print("operations: " + ", ".join("%s %d" % kv for kv in sorted(total.items())))
    print("seed %d, %d processes x %d operations, %.1f s" % (
        a.seed, a.procs, a.ops, time.monotonic() - t0))
    return 1 if bad else 0


# ---- S3: a small signed (SigV4) client over one connection ----
class S3:
    def __init__(self):
        self.host = os.environ["S3_ENDPOINT"]
        self.ak = os.environ["AWS_ACCESS_KEY_ID"]
        self.sk = os.environ["AWS_SECRET_ACCESS_KEY"]
        self.region = os.environ.get("AWS_DEFAULT_REGION", "default")
        self.conn = None

    def request(self, method, path, query=()):
        now = datetime.datetime.now(datetime.timezone.utc)
        amz, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
        q = "&".join("%s=%s" % (urllib.parse.quote(k, safe="-_.~"), urllib.parse.quote(v, safe="-_.~"))
                     for k, v in sorted(query))
        uri = urllib.parse.quote(path, safe="/-_.~")
        hdrs = {"host": self.host, "x-amz-content-sha256": "UNSIGNED-PAYLOAD", "x-amz-date": amz}
        names = ";".join(sorted(hdrs))
        canon = "\n".join([method, uri, q, "".join("%s:%s\n" % (k, hdrs[k]) for k in sorted(hdrs)),
                           names, "UNSIGNED-PAYLOAD"])
        scope = "%s/%s/s3/aws4_request" % (day, self.region)
        sts = "\n".join(["AWS4-HMAC-SHA256", amz, scope, hashlib.sha256(canon.encode()).hexdigest()])
        key = ("AWS4" + self.sk).encode()
        for part in (day, self.region, "s3", "aws4_request"):
            key = hmac.new(key, part.encode(), hashlib.sha256).digest()
        sig = hmac.new(key, sts.encode(), hashlib.sha256).hexdigest()
        hdrs["Authorization"] = "AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s" % (
            self.ak, scope, names, sig)
        for attempt in (1, 2):
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPConnection(self.host, timeout=60)
                self.conn.request(method, uri + ("?" + q if q else ""), headers=hdrs)
                r = self.conn.getresponse()
                return r.status, dict((k.lower(), v) for k, v in r.getheaders()), r.read()
            except (http.client.HTTPException, OSError):
                self.conn = None
                if attempt == 2:
                    raise

    def keys(self, bucket, prefix):
        out, token = [], None
        while True:
            q = [("list-type", "2"), ("prefix", prefix)]
            if token:
                q.append(("continuation-token", token))
            st, _, body = self.request("GET", "/" + bucket, q)
            if st != 200:
                raise RuntimeError("LIST %s: HTTP %d" % (bucket, st))
            root = ET.fromstring(body)
            ns = root.tag[:root.tag.index("}") + 1] if root.tag.startswith("{") else ""
            out += [c.find(ns + "Key").text for c in root.findall(ns + "Contents")]
            if root.findtext(ns + "IsTruncated") != "true":
                return out
            token = root.findtext(ns + "NextContinuationToken")


def cmd_compare(a):
    s3 = S3()
    mount = {rel: (kind, val, xattrs) for rel, kind, val, xattrs in walk(a.view) if kind != "d"}
    diffs = ["%s: listed in the mount, reading it gives %s" % (rel, ename(v[1]))
             for rel, v in sorted(mount.items()) if v[0] == "e"]
    keys = {k[len(a.prefix):]: k for k in s3.keys(a.bucket, a.prefix)}
    for rel in sorted(set(keys) - set(mount)):
        diffs.append("%s: in S3, not in the mount" % rel)
    for rel in sorted(set(mount) - set(keys)):
        kind = {"l": "link", "f": "file"}.get(mount[rel][0], "unreadable")
        diffs.append("%s: in the mount (%s), not in S3" % (rel, kind))
    for rel in sorted(set(mount) & set(keys)):
        kind, val, xattrs = mount[rel]
        if kind == "e":
            continue
        st, hdrs, body = s3.request("GET", "/%s/%s" % (a.bucket, keys[rel]))
        if st != 200:
            diffs.append("%s: GET answers HTTP %d" % (rel, st))
            continue
        meta = {k[len("x-amz-meta-"):]: v for k, v in hdrs.items() if k.startswith("x-amz-meta-")}
        mode = int(meta.get("mode", "0"), 8 if meta.get("mode", "").startswith("0") else 10)
        if kind == "l":
            if not stat.S_ISLNK(mode):
                diffs.append("%s: a link in the mount, mode %o in S3" % (rel, mode))
            elif body != val.encode():
                diffs.append("%s: link -> %r, S3 holds %r" % (rel, val[:80], body[:80]))
            continue
        if stat.S_ISLNK(mode):
            diffs.append("%s: a file in the mount, a link in S3" % rel)
        elif body != val:
            diffs.append("%s: %d bytes in the mount, %d in S3%s" % (
                rel, len(val), len(body), "" if len(val) != len(body) else " (other bytes)"))
        want = {"user." + k: v.encode() for k, v in meta.items()
                if k not in ("mtime", "atime", "ctime", "mode", "uid", "gid")}
        if xattrs != want:
            diffs.append("%s: xattrs %s in the mount, %s in S3" % (rel, sorted(xattrs), sorted(want)))
    for d in diffs[:50]:
        print(d)
    print("%d files and links in the mount, %d objects, %d differences" % (len(mount), len(keys), len(diffs)))
    return 1 if diffs else 0


def cmd_snapshot(a):
    snap = {}
    for rel, kind, val, xattrs in walk(a.root):
        if kind == "d":
            snap[rel] = ["d"]
        elif kind == "e":
            snap[rel] = ["unreadable", ename(val)]
        elif kind == "l":
            snap[rel] = ["l", val]
        else:
            snap[rel] = ["f", len(val), hashlib.sha256(val).hexdigest(),
                         {k: v.decode("latin-1") for k, v in sorted(xattrs.items())}]
    with open(a.out, "w") as f:
        json.dump(snap, f, indent=0, sort_keys=True)
    print("%d entries" % len(snap))
    return 0


def cmd_diff(a):
    with open(a.a) as f:
        x = json.load(f)
    with open(a.b) as f:
        y = json.load(f)
    diffs = ["%s: only in the first" % k for k in sorted(set(x) - set(y))]
    diffs += ["%s: only in the second" % k for k in sorted(set(y) - set(x))]
    diffs += ["%s: %s, then %s" % (k, x[k], y[k]) for k in sorted(set(x) & set(y)) if x[k] != y[k]]
    for d in diffs[:50]:
        print(d)
    print("%d entries, %d differences" % (len(x), len(diffs)))
    return 1 if diffs else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("root")
    r.add_argument("--procs", type=int, default=4)
    r.add_argument("--ops", type=int, default=1000)
    r.add_argument("--seed", type=int, default=37)
    r.add_argument("--forget", action="store_true")
    r.add_argument("--work")
    r.add_argument("--crash-ok", action="store_true")
    r.add_argument("--timeout", type=float, default=600)
    c = sub.add_parser("compare")
    c.add_argument("view")
    c.add_argument("bucket")
    c.add_argument("prefix")
    s = sub.add_parser("snapshot")
    s.add_argument("root")
    s.add_argument("out")
    d = sub.add_parser("diff")
    d.add_argument("a")
    d.add_argument("b")
    a = ap.parse_args()
    return {"run": cmd_run, "compare": cmd_compare, "snapshot": cmd_snapshot, "diff": cmd_diff}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
