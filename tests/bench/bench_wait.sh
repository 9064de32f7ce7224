#!/usr/bin/env bash
# tests/bench/bench_wait.sh — `facetfs wait` right after a PUT through RGW,
# beside the bound: the same PUT followed by polling stat() every 0.2 ms
# until the mount shows the object (what a barrier that knew the moment
# could at best return at), and the same barrier through the control
# file, which a program can use without starting the command. ROUNDS
# (default 300) rounds take the three in turn;
# each round's PUT is one s3tool request (RGW -> bridge -> Kafka). Prints
# p50 and p99 of each from the PUT's return, the rounds `wait` returned
# before the object was in the mount (must be 0), and the load average.
# No peer has a barrier: s3fs, rclone and mountpoint-s3 offer only TTLs to
# sleep through. Run on a quiet machine.
#
#   BED_DIR=DIR tests/bench/bench_wait.sh   (or no bed: one is started)
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/bench_lib.sh"
ROUNDS=${ROUNDS:-300}
bench_own_bed
bench_require_bed
T=$BENCH_TMP
B=bench-wait-$$
bench_bucket "$B"
"$HERE/../bed/bed" notify "$BED_DIR" "$B" >"$T/notify.log" 2>&1 ||
	bench_die "bed notify: $(tail -n 3 "$T/notify.log")"
mkdir -p "$T/views"
printf '{ "name": "w", "bucket": "%s", "match": { "prefix": "" } }\n' "$B" >"$T/views/w.json"
bench_config "$T/gw.json" "$T/state" "$T/views" "$KAFKA_TOPIC" 1
M=$T/mnt
gw_start A "$T/gw.json" "$M" || bench_die "the gateway did not start"
"$FACETFS" wait "$M" --timeout 60 >/dev/null || bench_die "the first wait failed"
bench_say "load average $(loadavg) before the rounds"
python3 - "$M/w" "$S3TOOL" "$B" "$FACETFS" "$M" "$ROUNDS" "$T/body" <<'PY'
import os, subprocess, sys, time
view, s3tool, bucket, facetfs, mnt, rounds, body = sys.argv[1:]
open(body, "w").write("x")
poll, wait, ctl, early = [], [], [], 0
control = os.path.join(mnt, ".facetfs", "control")
for i in range(int(rounds)):
    name = "k%05d" % i
    path = os.path.join(view, name)
    subprocess.run([s3tool, "put", bucket, name, body], check=True, stdout=subprocess.DEVNULL)
    t = time.monotonic()
    if i % 3 == 1:
        subprocess.run([facetfs, "wait", mnt, "--timeout", "10"], check=True,
                       stdout=subprocess.DEVNULL)
        wait.append(time.monotonic() - t)
        early += not os.path.exists(path)
    elif i % 3 == 2:
        fd = os.open(control, os.O_RDWR)
        os.write(fd, b"wait 10000\n")
        answer = os.pread(fd, 4096, 0)
        os.close(fd)
        ctl.append(time.monotonic() - t)
        assert answer.startswith(b"ok"), answer
        early += not os.path.exists(path)
    else:
        while not os.path.exists(path):
            time.sleep(0.0002)
        poll.append(time.monotonic() - t)
def pct(v, q):
    v = sorted(v)
    return 1000 * v[min(len(v) - 1, int(len(v) * q))]
load = open("/proc/loadavg").read().split()[:3]
print("PUT returned -> visible, stat polled (the bound): p50 %.1f ms, p99 %.1f ms (%d rounds)"
      % (pct(poll, 0.5), pct(poll, 0.99), len(poll)))
print("PUT returned -> facetfs wait returned:            p50 %.1f ms, p99 %.1f ms (%d rounds)"
      % (pct(wait, 0.5), pct(wait, 0.99), len(wait)))
print("PUT returned -> 'wait' answered by .facetfs/control: p50 %.1f ms, p99 %.1f ms (%d rounds)"
      % (pct(ctl, 0.5), pct(ctl, 0.99), len(ctl)))
print("facetfs wait returned before the object was in the mount: %d" % early)
print("load average %s" % " ".join(load))
PY
rc=$?
gw_stop A
exit $rc
