#!/usr/bin/env python3
"""The conflict rule of `facetfs advise` against an independent,
brute-force pairwise implementation written here from the rule's text
(gateway/advise.h), on thousands of random trials (one to three traces
each, with different wall-clock anchors, written by this script's own
encoder of the format in common/trace.h; all trials go to one advise run,
each with files of its own). Any disagreement fails with the trial's traces
printed. Usage: test_advise.py FACETFS [TRIALS] [SEED]"""

import json
import os
import random
import struct
import subprocess
import sys
import tempfile

OPEN, CREATE, READ, WRITE, FSYNC, FLUSH, RELEASE = 1, 2, 3, 4, 5, 6, 7
EVENT = 11
OPNAME = {1: "open", 2: "create", 3: "read", 4: "write", 5: "fsync", 6: "close",
          7: "release", 11: "event"}
CLASSES = ["RAW-S", "RAW-D", "WAW-S", "WAW-D"]
POLICIES = ["eventual", "session", "commit"]
INF = float("inf")

HDR = struct.Struct("<8sIIqqq40s")
REC = struct.Struct("<qQQQIIiHH")


def encode(anchor_mono, anchor_wall, recs):
    out = [HDR.pack(b"FFTRACE1", 1, 0x01020304, anchor_mono, anchor_wall, 10,
                    b"testhost:1".ljust(40, b"\0"))]
    for r in recs:
        name = r.get("name", "").encode()
        out.append(REC.pack(r["t"], r.get("fh", 0), r.get("off", 0), r.get("len", 0),
                            r.get("pid", 0), r.get("pid", 0), r.get("result", 0),
                            r["op"], len(name)))
        out.append(name + b"\0" * ((-len(name)) % 8))
    return b"".join(out)


def gen_trace(rng, ti, files, clock):
    """Records of one gateway: a few processes opening, reading, writing,
    committing; some events. Times come from the shared clock (global,
    distinct), so traces interleave."""
    nproc = rng.randint(1, 3)
    pids = rng.sample(range(100, 110), nproc)
    open_fhs = {p: [] for p in pids}
    recs = []
    nfh = [1]
    for _ in range(rng.randint(5, 40)):
        p = rng.choice(pids)
        t = clock()
        k = rng.random()
        if k < 0.2 or not open_fhs[p]:
            f = rng.choice(files)
            fh = 1000 * (ti + 1) + nfh[0]
            nfh[0] += 1
            fail = rng.random() < 0.05
            recs.append({"t": t, "op": rng.choice([OPEN, CREATE]), "pid": p, "fh": fh,
                         "name": f, "off": 2, "result": -2 if fail else 0})
            if not fail:
                open_fhs[p].append((fh, f))
        elif k < 0.75:
            fh, _ = rng.choice(open_fhs[p])
            off = rng.randrange(0, 48)
            ln = rng.randint(1, 16)
            res = ln if rng.random() < 0.9 else rng.choice([0, -5, ln // 2])
            recs.append({"t": t, "op": rng.choice([READ, WRITE]), "pid": p, "fh": fh,
                         "off": off, "len": ln, "result": res})
        elif k < 0.85:
            fh, _ = rng.choice(open_fhs[p])
            recs.append({"t": t, "op": FSYNC, "pid": p, "fh": fh})
        elif k < 0.95:
            fh, f = rng.choice(open_fhs[p])
            recs.append({"t": t, "op": FLUSH, "pid": p, "fh": fh})
            if rng.random() < 0.7:
                recs.append({"t": clock(), "op": RELEASE, "pid": p, "fh": fh})
                open_fhs[p].remove((fh, f))
        else:
            recs.append({"t": t, "op": EVENT, "name": rng.choice(files)})
    # an access on a handle the trace never saw opened: must be left out
    if rng.random() < 0.2:
        recs.append({"t": clock(), "op": WRITE, "pid": pids[0], "fh": 999999, "off": 0,
                     "len": 8, "result": 8})
    return recs


def brute(traces):
    """traces: list of (offset so that aligned = t + offset, records)."""
    accs, commits, events = [], [], []
    for ti, (offset, recs) in enumerate(traces):
        fhs = {}
        for r in recs:
            t = r["t"] + offset
            op = r["op"]
            if op in (OPEN, CREATE) and r.get("result", 0) >= 0:
                fhs[r["fh"]] = (r["name"], t)
            elif op in (READ, WRITE) and r.get("result", 0) > 0 and r["fh"] in fhs:
                f, to = fhs[r["fh"]]
                accs.append({"t": t, "proc": (ti, r["pid"]), "file": f, "trace": ti,
                             "start": r["off"], "end": r["off"] + r["result"],
                             "write": op == WRITE, "to": to})
            elif op in (FSYNC, FLUSH) and r["fh"] in fhs:
                commits.append((t, (ti, r["pid"]), fhs[r["fh"]][0], op == FLUSH))
            elif op == EVENT:
                events.append((t, ti, r["name"]))
    for a in accs:
        later = [c for c in commits if c[1] == a["proc"] and c[2] == a["file"] and c[0] > a["t"]]
        a["tcommit"] = min((c[0] for c in later), default=INF)
        a["tclose"] = min((c[0] for c in later if c[3]), default=INF)
    res = {}
    for i in range(len(accs)):
        for j in range(len(accs)):
            a, b = accs[i], accs[j]
            if i == j or a["file"] != b["file"] or not a["t"] < b["t"] or not a["write"]:
                continue
            if not (a["start"] < b["end"] and b["start"] < a["end"]):
                continue
            d = a["proc"] != b["proc"]
            cls = ("WAW-" if b["write"] else "RAW-") + ("D" if d else "S")
            fc = res.setdefault(a["file"], {c: [0, [0, 0, 0]] for c in CLASSES})
            fc[cls][0] += 1
            commit = a["tcommit"] > b["t"]
            session = not (a["t"] < a["tclose"] < b["to"] < b["t"])
            if a["trace"] == b["trace"]:
                te = a["tclose"]
            else:
                te = min((e[0] for e in events
                          if e[1] == b["trace"] and e[2] == a["file"] and e[0] > a["tclose"]),
                         default=INF)
            eventual = session or not (te < b["to"])
            for k, bad in enumerate([eventual, session, commit]):
                fc[cls][1][k] += bad
            if a["trace"] != b["trace"] and not eventual:
                # write-back: the other gateway opened this long after the close
                wb = fc.setdefault("write_back", [0, None])
                gap = b["to"] - a["tclose"]
                wb[0] += 1
                wb[1] = gap if wb[1] is None else min(wb[1], gap)
    return res


def verdict(fc):
    for k, pol in enumerate(POLICIES):
        if fc["RAW-D"][1][k] + fc["WAW-D"][1][k] == 0:
            return pol
    return "none"


def dump(traces):
    lines = []
    for ti, (offset, recs) in enumerate(traces):
        lines.append(f"trace {ti} (aligned = t + {offset}):")
        for r in recs:
            lines.append("  t=%d %s pid=%d fh=%d off=%d len=%d result=%d name=%s" % (
                r["t"], OPNAME[r["op"]], r.get("pid", 0), r.get("fh", 0), r.get("off", 0),
                r.get("len", 0), r.get("result", 0), r.get("name", "")))
    return "\n".join(lines)


def main():
    exe = sys.argv[1]
    trials = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 20261123
    rng = random.Random(seed)
    tmp = tempfile.mkdtemp(prefix="test_advise.")
    # Every trial has files of its own (views tN, uN), and processes are
    # told apart by trace, so one advise run over all the trials' traces
    # must give each file exactly what that trial alone gives.
    want, dumps, paths = {}, {}, []
    for trial in range(trials):
        files = [f"t{trial}/a", f"t{trial}/b", f"u{trial}/c"][:rng.randint(1, 3)]
        now = [rng.randint(0, 1000)]

        def clock():
            now[0] += rng.randint(1, 1000)
            return now[0]

        ntr = rng.choice([1, 1, 2, 3])
        traces = []
        raw = [gen_trace(rng, ti, files, clock) for ti in range(ntr)]
        for ti in range(ntr):
            # each trace: its own monotonic origin and wall anchor; the
            # shared clock T is T - wall0 + mono0 on its monotonic clock
            mono0 = rng.randint(10**9, 10**12)
            wall0 = 1_700_000_000 * 10**9 + rng.randint(0, 10**6)
            recs = [dict(r, t=r["t"] - wall0 + mono0) for r in raw[ti]]
            path = os.path.join(tmp, f"t{trial}-{ti}.fft")
            with open(path, "wb") as fp:
                fp.write(encode(mono0, wall0, recs))
            traces.append((wall0 - mono0, recs))
            paths.append(path)
        for name, fc in brute(traces).items():
            want[name] = fc
        for name in files:
            dumps[name] = dump(traces)
    out = subprocess.run([exe, "advise", "--json", "--examples", "0"] + paths,
                         capture_output=True, text=True)
    for p in paths:
        os.unlink(p)
    os.rmdir(tmp)
    if out.returncode != 0:
        print(f"advise failed: {out.stderr}")
        return 1
    got = json.loads(out.stdout)["files"]
    pairs_seen = {c: 0 for c in CLASSES}
    wb_files = 0
    verdicts = {}
    empty = {c: [0, [0, 0, 0]] for c in CLASSES}
    names = set(want) | {n for n, f in got.items()
                         if any(f["classes"][c]["pairs"] for c in CLASSES)}
    for name in sorted(names):
        w = want.get(name, empty)
        g = got.get(name)
        for c in CLASSES:
            gc = [g["classes"][c]["pairs"], [g["classes"][c]["conflicts"][p]
                                             for p in POLICIES]] if g else [0, [0, 0, 0]]
            if gc != w[c]:
                print(f"file {name} class {c}: advise says pairs {gc[0]}, conflicts "
                      f"{dict(zip(POLICIES, gc[1]))}; brute force {w[c][0]}, "
                      f"{dict(zip(POLICIES, w[c][1]))}\n{dumps.get(name, '')}")
                return 1
            pairs_seen[c] += w[c][0]
        gw = [g["write_back"]["cross_gateway_pairs"], g["write_back"]["min_gap_ns"]] if g \
            else [0, None]
        ww = w.get("write_back", [0, None])
        if gw != ww:
            print(f"file {name}: write_back pairs and least gap {gw}; brute force {ww}\n"
                  f"{dumps.get(name, '')}")
            return 1
        if g and g["verdict"] != verdict(w):
            print(f"file {name}: verdict {g['verdict']} != {verdict(w)}\n{dumps.get(name, '')}")
            return 1
        verdicts[verdict(w)] = verdicts.get(verdict(w), 0) + 1
        wb_files += ww[0] > 0
    print(f"{trials} random trials ({len(paths)} traces, {len(names)} files with pairs) agree "
          f"with the brute force; pairs per class {pairs_seen}; file verdicts {verdicts}; "
          f"files with write-back pairs across gateways {wb_files}")
    # the random traces must exercise every class, every verdict, write-back
    if not all(pairs_seen.values()) or len(verdicts) < 4 or not wb_files:
        print("the generator did not reach every class and verdict")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
