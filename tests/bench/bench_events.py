#!/usr/bin/env python3
"""bench_events.py — the producer side of bench_events.sh (figures only).

  bench_events.py load BROKERS TOPIC BUCKET MOUNT --count N --prefixes P
                  [--chunk C] [--ahead A] [--start S] [--evgen PATH]
  bench_events.py idle BROKERS TOPIC BUCKET MOUNT --count N [--interval S]
                  [--prefixes P] [--start S]

Records (made by evgen, the C generator next to this file, for load; by
Gen below, one at a time, for idle) are shaped like Ceph RGW's ObjectCreated:Put (shared/events/
ceph-put.json, compact JSON, one record per document), keyed "BUCKET/KEY"
and piped to `kcat -P -K '\\t'`. Key i is "pNN/obj%07d" with NN = i mod P,
so the objects spread evenly over P prefixes (one view each). eventTime and
the sequencer are the moment the record is written to kcat.

load: produces in chunks of C records, never more than A chunks ahead of the
gateway's .events.consumed (the mock keeps only ~5 MB a partition; lz4 keeps
that well above A*C records); samples .events.applied every 0.2 s; waits
until applied reaches the count (or stops moving for 30 s). Prints
"key=value" lines (total and steady-state events/s, the gateway's
visible_latency_ms under load) and exits 1 if applied != produced.

idle: one record every S seconds (default 0.02) through kline (a line-at-a-
time producer, linger.ms=0: kcat -P holds piped lines until its input ends),
after --warmup records that are not measured. Times from writing the line to
kline until stat() of the object's file in MOUNT/vNN/ succeeds (this includes
the produce round trip, printed on its own as idle_produce_ack_*); prints
p50/p99/max in ms. Gives up after 3 records in a row not visible in 5 s.
"""
import argparse, json, os, struct, subprocess, sys, time

TEMPLATE = ('{"Records":[{"eventVersion":"2.2","eventSource":"ceph:s3","awsRegion":"",'
            '"eventTime":"%s","eventName":"ObjectCreated:Put",'
            '"userIdentity":{"principalId":"tester"},'
            '"requestParameters":{"sourceIPAddress":""},'
            '"responseElements":{"x-amz-request-id":"1b1f58ac-0c27-4165-831f-2303c5d2a8c6.4116.%d",'
            '"x-amz-id-2":"1014-default-default"},'
            '"s3":{"s3SchemaVersion":"1.0","configurationId":"bench",'
            '"bucket":{"name":"%s","ownerIdentity":{"principalId":"tester"},'
            '"arn":"arn:aws:s3:::%s","id":"1b1f58ac-0c27-4165-831f-2303c5d2a8c6.4121.2"},'
            '"object":{"key":"%s","size":%d,"eTag":"%032x","versionId":"",'
            '"sequencer":"%s","metadata":[{"key":"x-amz-meta-tag","val":"alpha"}],"tags":[]}},'
            '"eventId":"%d.%06d.%032x","opaqueData":""}]}')


class Gen:
    """Fast record lines: the strftime part is cached per second."""

    def __init__(self, bucket, prefixes):
        self.bucket, self.prefixes = bucket, prefixes
        self.sec, self.sec_text = -1, ""

    def key(self, i):
        return "p%0*d/obj%07d" % (3 if self.prefixes > 100 else 2, i % self.prefixes, i)

    def line(self, i):
        t = time.time_ns()
        sec, ns = divmod(t, 1_000_000_000)
        if sec != self.sec:
            self.sec = sec
            self.sec_text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec))
        us = ns // 1000
        key = self.key(i)
        seq = struct.pack("<II", sec & 0xffffffff, ns).hex().upper()
        doc = TEMPLATE % ("%s.%06dZ" % (self.sec_text, us), i, self.bucket, self.bucket,
                          key, 100 + i % 900, i + 1, seq, sec, us, i + 1)
        return "%s/%s\t%s\n" % (self.bucket, key, doc)


def stats(mnt):
    with open(os.path.join(mnt, ".facetfs", "stats")) as f:
        return json.load(f)


def kcat(brokers, topic, extra):
    cmd = ["kcat", "-P", "-b", brokers, "-t", topic, "-K", "\t", "-z", "lz4"] + extra
    return subprocess.Popen(cmd, stdin=subprocess.PIPE, text=True, bufsize=1 << 20)


def sched(pid):
    """{tid: (comm, run_ns, runqueue_wait_ns)} of a process's threads."""
    out = {}
    if not pid:
        return out
    base = "/proc/%d/task" % pid
    try:
        tids = os.listdir(base)
    except OSError:
        return out
    for tid in tids:
        try:
            with open("%s/%s/comm" % (base, tid)) as f:
                comm = f.read().strip()
            with open("%s/%s/schedstat" % (base, tid)) as f:
                run, wait, _ = (int(x) for x in f.read().split())
        except (OSError, ValueError):
            continue
        out[tid] = (comm, run, wait)
    return out


def sched_diff(a, b):
    """Per thread (comm, run_s, wait_s) between two sched() snapshots, busiest first."""
    rows = []
    for tid, (comm, run, wait) in b.items():
        r0, w0 = a.get(tid, (comm, 0, 0))[1:]
        rows.append((comm, (run - r0) / 1e9, (wait - w0) / 1e9))
    return sorted(rows, key=lambda r: -r[1])


def pct(sorted_vals, p):
    if not sorted_vals:
        return float("nan")
    return sorted_vals[min(len(sorted_vals) - 1, int(len(sorted_vals) * p / 100.0))]


def run_load(a):
    s0 = stats(a.mnt)
    sch0 = sched(a.pid)
    c0, a0 = s0["events"]["consumed"], s0["events"]["applied"]
    p = kcat(a.brokers, a.topic, ["-X", "linger.ms=5"])
    samples = []          # (t, applied - a0)
    produced, t_start = 0, time.monotonic()
    last_sample = 0.0
    gen_time = 0.0

    def sample():
        nonlocal last_sample
        st = stats(a.mnt)
        now = time.monotonic()
        samples.append((now - t_start, st["events"]["applied"] - a0))
        last_sample = now
        return st

    while produced < a.count:
        while True:
            st = sample()
            consumed = st["events"]["consumed"] - c0
            if produced - consumed <= (a.ahead - 1) * a.chunk:
                break
            time.sleep(0.05)
        n = min(a.chunk, a.count - produced)
        t0 = time.monotonic()
        # evgen writes straight into kcat's stdin.
        subprocess.run([a.evgen, a.bucket, str(a.prefixes), str(a.start + produced), str(n)],
                       stdout=p.stdin.fileno(), check=True)
        gen_time += time.monotonic() - t0
        produced += n
    p.stdin.close()
    krc = p.wait()
    t_produced = time.monotonic() - t_start

    # Wait for the gateway to apply everything (or to stop moving).
    last_val, last_move = -1, time.monotonic()
    while True:
        st = sample()
        applied = st["events"]["applied"] - a0
        if applied >= produced:
            break
        if applied != last_val:
            last_val, last_move = applied, time.monotonic()
        elif time.monotonic() - last_move > 30:
            break
        time.sleep(0.1)
    # The exact moment applied reached the total: first sample at >= total.
    t_done = next((t for t, v in samples if v >= produced), samples[-1][0])
    st = stats(a.mnt)
    threads = sched_diff(sch0, sched(a.pid))
    applied = st["events"]["applied"] - a0
    consumed = st["events"]["consumed"] - c0
    # Steady state: from 10 % to 90 % of the total, from the samples.
    def when(frac):
        goal = produced * frac
        return next(((t, v) for t, v in samples if v >= goal), None)
    lo, hi = when(0.10), when(0.90)
    steady = (hi[1] - lo[1]) / (hi[0] - lo[0]) if lo and hi and hi[0] > lo[0] else float("nan")
    lat = st["visible_latency_ms"]
    print("produced=%d" % produced)
    print("consumed=%d" % consumed)
    print("applied=%d" % applied)
    print("malformed=%d" % (st["events"]["malformed"] - s0["events"]["malformed"]))
    print("kcat_rc=%d" % krc)
    print("produce_s=%.2f" % t_produced)
    print("gen_wall_s=%.2f" % gen_time)
    print("total_s=%.2f" % t_done)
    print("rate_total=%.0f" % (applied / t_done if t_done > 0 else float("nan")))
    print("rate_steady=%.0f" % steady)
    if threads:
        busy = threads[0]
        print("gw_cpu_s=%.2f" % sum(r[1] for r in threads))
        print("gw_busiest_thread=%s" % busy[0])
        print("gw_busiest_cpu_s=%.2f" % busy[1])
        print("gw_busiest_runqueue_wait_s=%.2f" % busy[2])
        print("rate_per_busiest_cpu_s=%.0f" % (applied / busy[1] if busy[1] > 0 else float("nan")))
        print("gw_threads=%s" % " ".join("%s:%.2fs/%.2fs" % r for r in threads[:6]))
    print("lat_count=%d" % lat["count"])
    print("lat_p50_ms=%s" % lat["p50"])
    print("lat_p99_ms=%s" % lat["p99"])
    print("lat_max_ms=%s" % lat["max"])
    return 0 if applied == produced and krc == 0 else 1


def run_idle(a):
    g = Gen(a.bucket, a.prefixes)
    p = subprocess.Popen([a.kline, a.brokers, a.topic], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True, bufsize=1)
    lat, ack, seq, missing, in_a_row = [], [], [], 0, 0
    sch0 = sched(a.pid)
    next_t = time.monotonic()
    for j in range(a.warmup + a.count):
        i = a.start + j
        key = g.key(i)
        path = os.path.join(a.mnt, "v%0*d" % (3 if a.prefixes > 100 else 2, i % a.prefixes), key.split("/", 1)[1])
        now = time.monotonic()
        if next_t > now:
            time.sleep(next_t - now)
        next_t = time.monotonic() + a.interval
        line = g.line(i)
        t0 = time.monotonic()
        p.stdin.write(line)
        p.stdin.flush()
        answer = p.stdout.readline().strip()
        t_ack = time.monotonic()
        if answer != "ok":
            print("kline: %s" % (answer or "exited"), file=sys.stderr)
            missing += 1
            break
        seen = False
        while True:
            try:
                os.stat(path)
                seen = True
                break
            except FileNotFoundError:
                if time.monotonic() - t0 > 5:
                    break
                time.sleep(0.0002)   # ~0.3 ms resolution, without hogging a core
        t1 = time.monotonic()
        if not seen:
            missing += 1
            in_a_row += 1
            if in_a_row >= 3:
                print("idle: 3 records in a row never became visible: giving up", file=sys.stderr)
                break
            continue
        in_a_row = 0
        if j >= a.warmup:   # the first few pay for the producer's connection set-up
            lat.append((t1 - t0) * 1000.0)
            seq.append((lat[-1], j - a.warmup))
            ack.append((t_ack - t0) * 1000.0)
    p.stdin.close()
    krc = p.wait()
    if not lat:
        lat = [float("nan")]
    ack.sort()
    lat.sort()
    print("idle_n=%d" % len(lat))
    print("idle_missing=%d" % missing)
    print("idle_p50_ms=%.2f" % pct(lat, 50))
    print("idle_p99_ms=%.2f" % pct(lat, 99))
    print("idle_max_ms=%.2f" % lat[-1])
    print("idle_produce_ack_p50_ms=%.2f" % pct(ack, 50))
    print("idle_produce_ack_p99_ms=%.2f" % pct(ack, 99))
    print("idle_worst=%s" % " ".join("#%d:%.1fms" % (n, v) for v, n in sorted(seq)[-6:][::-1]))
    threads = sched_diff(sch0, sched(a.pid))
    if threads:
        print("idle_gw_threads=%s" % " ".join("%s:%.2fs/%.2fs" % r for r in threads[:4]))
    return 0 if missing == 0 and krc == 0 else 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["load", "idle"])
    ap.add_argument("brokers"); ap.add_argument("topic")
    ap.add_argument("bucket"); ap.add_argument("mnt")
    ap.add_argument("--count", type=int, required=True)
    ap.add_argument("--prefixes", type=int, default=100)
    ap.add_argument("--chunk", type=int, default=25000)
    ap.add_argument("--ahead", type=int, default=2)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--pid", type=int, default=0, help="the gateway's pid (thread CPU figures)")
    ap.add_argument("--interval", type=float, default=0.02)
    ap.add_argument("--warmup", type=int, default=5, help="idle: records sent first, not measured")
    ap.add_argument("--kline", default=os.path.join(os.environ.get("FACETFS_BUILD", "build"),
                                                    "tests", "bench", "kline"))
    ap.add_argument("--evgen", default=os.path.join(os.environ.get("FACETFS_BUILD", "build"),
                                                    "tests", "bench", "evgen"))
    a = ap.parse_args()
    sys.exit(run_load(a) if a.mode == "load" else run_idle(a))


main()
