#!/usr/bin/env python3
"""visible_probe.py — how long after its PUT returns does an object show in a mount?

    visible_probe.py S3TOOL BUCKET KEY_DIR VIEW_DIR [--name PREFIX] [--count N]
                     [--while-pid PID] [--gap SECONDS] [--timeout SECONDS]

PUTs small objects KEY_DIR + NAME one at a time with S3TOOL (the project's
s3tool), NAME being PREFIX (--name, "probe-") and a number from 000, and,
after each PUT returns, polls every 0.5 ms for VIEW_DIR/NAME (a view that
strips KEY_DIR, or a directory of the view where KEY_DIR's objects show).
Prints one line per probe: the milliseconds from the PUT returning to
stat() seeing the file. Sends --count probes (200);
with --while-pid, stops early once PID has exited (one probe at least).
--gap waits between probes (0); a probe not seen within --timeout seconds
(10) is reported on stderr and the run goes on; exits 1 if any was missed.
Used by tests/integration/t_latency.sh and tests/bench/bench_cache.sh.
"""
import argparse
import os
import subprocess
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("s3tool")
    ap.add_argument("bucket")
    ap.add_argument("key_dir")
    ap.add_argument("view_dir")
    ap.add_argument("--name", default="probe-")
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--while-pid", type=int)
    ap.add_argument("--gap", type=float, default=0.0)
    ap.add_argument("--timeout", type=float, default=10.0)
    a = ap.parse_args()

    missed = 0
    for i in range(a.count):
        if i and a.while_pid and not os.path.exists("/proc/%d" % a.while_pid):
            break
        name = "%s%03d" % (a.name, i)
        subprocess.run([a.s3tool, "put", a.bucket, a.key_dir + name, "/etc/hostname"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        t0 = time.monotonic()
        path = os.path.join(a.view_dir, name)
        while not os.path.exists(path):
            if time.monotonic() - t0 > a.timeout:
                break
            time.sleep(0.0005)
        else:
            print("%.1f" % ((time.monotonic() - t0) * 1000), flush=True)
            if a.gap:
                time.sleep(a.gap)
            continue
        missed += 1
        print("visible_probe: %s not visible %g s after its PUT" % (path, a.timeout),
              file=sys.stderr)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
