#!/usr/bin/env bash
# t_wait.sh — `facetfs wait`, the barrier between S3 clients and the
# mount: WAIT_ROUNDS rounds (default 200; WAIT_ROUNDS=1000 for the
# issue's figure, about 60 s) of a stat of a new name (the
# kernel caches the miss), a PUT through RGW by another client, `facetfs
# wait`, and the stat again, with no miss; the views named must exist and
# have scanned; a bad timeout is a usage error; the control interface
# answers the same command. How fresh the view is (fresh as of a time
# after a PUT that wait covered): the xattr user.facetfs.fresh_as_of,
# facetfs status, .facetfs/views. --probe: its object's event comes through
# RGW, the bridge and Kafka, the object is gone after; with the bridge
# stopped, wait --probe fails naming the bucket, plain wait cannot know.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/gateway.sh"
require_bed

S3TOOL=$FACETFS_BUILD/tests/bed/s3tool
ROUNDS=${WAIT_ROUNDS:-200}
B=$(new_bucket wait)
aws_s3 s3 mb "s3://$B" >/dev/null || { not_ok "make bucket"; exit 1; }
bed_cmd notify "$B" >/dev/null 2>&1 || { not_ok "bucket notifications"; exit 1; }
T=$(test_tmp)
view_file "$T/views" w "$B" '{ "prefix": "" }'
gw_config "$T/a.json" "$T/state-a" "$T/views" "facetfs-wait-$$"
M=$T/mnt
BRIDGE_DOWN=0
on_exit() {
	local rc=$?
	((BRIDGE_DOWN)) && bed_cmd bridge-start >/dev/null 2>&1
	(exit $rc)
	test_cleanup
}
trap on_exit EXIT
start_gateway A "$T/a.json" "$M" || { not_ok "gateway starts"; exit 1; }

out=$("$FACETFS" wait "$M" 2>&1); rc=$?
diag <<<"$out"
check_eq "facetfs wait on a quiet mount: exit 0" 0 "$rc"
check "… and says what it waited for" grep -q '^ok: applied every event of [0-9]* partition' <<<"$out"
out=$("$FACETFS" wait "$M" w --timeout 10 2>&1)
check_eq "a view named: exit 0" 0 $?
out=$("$FACETFS" wait "$M" nosuch --timeout 5 2>&1); rc=$?
check_eq "a view that does not exist: exit 1" 1 "$rc"
check "… naming it" grep -q 'no view named "nosuch"' <<<"$out"
"$FACETFS" wait "$M" --timeout -1 >/dev/null 2>&1
check_eq "a negative timeout is a usage error (exit 2)" 2 $?
"$FACETFS" wait "$M" --bogus >/dev/null 2>&1
check_eq "an unknown option is a usage error (exit 2)" 2 $?
check "the control interface answers wait" python3 -c '
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
os.write(fd, b"wait 5000\n")
answer = os.pread(fd, 4096, 0).decode()
os.close(fd)
assert answer.startswith("ok: "), answer' "$M/.facetfs/control"

# Read-after-write across clients: each name is looked up (and missed)
# before its PUT, so the kernel holds a negative entry that only the
# gateway's invalidation removes.
check "$ROUNDS rounds of stat, PUT, facetfs wait, stat: no miss" \
	python3 - "$M/w" "$S3TOOL" "$B" "$FACETFS" "$M" "$ROUNDS" "$T/body" "$T/rounds.out" <<'PY'
import os, subprocess, sys, time
view, s3tool, bucket, facetfs, mnt, rounds, body, report = sys.argv[1:]
open(body, "w").write("x")
misses, waits = [], []
for i in range(int(rounds)):
    name = "r%05d" % i
    path = os.path.join(view, name)
    assert not os.path.exists(path), "exists before its PUT: " + name
    subprocess.run([s3tool, "put", bucket, name, body], check=True,
                   stdout=subprocess.DEVNULL)
    t = time.monotonic()
    subprocess.run([facetfs, "wait", mnt, "--timeout", "10"], check=True,
                   stdout=subprocess.DEVNULL)
    waits.append(time.monotonic() - t)
    if not os.path.exists(path):
        misses.append(name)
waits.sort()
open(report, "w").write("rounds %s, misses %d%s; facetfs wait p50 %.1f ms, p99 %.1f ms\n" % (
    rounds, len(misses), " (first: %s)" % misses[0] if misses else "",
    1000 * waits[len(waits) // 2], 1000 * waits[int(len(waits) * 0.99)]))
sys.exit(1 if misses else 0)
PY
diag <"$T/rounds.out"

# How fresh a view is: after a PUT and facetfs wait, at least as of the
# moment before the PUT; in facetfs status, the xattr and .facetfs/views.
check "fresh_as_of: after a PUT and wait, the view is fresh as of a time after the PUT began" \
	python3 - "$M" "$S3TOOL" "$B" "$FACETFS" "$T/body" <<'PY'
import datetime, os, re, subprocess, sys, time
mnt, s3tool, bucket, facetfs, body = sys.argv[1:]
before = time.time()
subprocess.run([s3tool, "put", bucket, "fresh1", body], check=True, stdout=subprocess.DEVNULL)
subprocess.run([facetfs, "wait", mnt], check=True, stdout=subprocess.DEVNULL)
text = os.getxattr(os.path.join(mnt, "w"), "user.facetfs.fresh_as_of").decode()
assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", text), text
at = datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
    tzinfo=datetime.timezone.utc).timestamp()
assert at >= before - 0.001, (text, before)
assert "user.facetfs.fresh_as_of" in os.listxattr(os.path.join(mnt, "w"))
PY
check "facetfs status: the view's line says how fresh it is" \
	sh -c "'$FACETFS' status '$M' | grep -qE '^ +fresh as of [0-9:.]+ \(UTC\), [0-9]+ ms behind'"
check "… and .facetfs/views has it" \
	sh -c "jq -e '.w.fresh_as_of | test(\"Z\$\")' '$M/.facetfs/views' >/dev/null"

# --probe: an event of the gateway's own through the whole path.
out=$("$FACETFS" wait "$M" --probe --timeout 20 2>&1); rc=$?
diag <<<"$out"
check_eq "wait --probe: exit 0" 0 "$rc"
check "… its probe's event came too" grep -q "the probes' too" <<<"$out"
probes() { "$S3TOOL" list "$B" .facetfs-probe/ 2>/dev/null | grep -c .; }
check_eq "… and its object is gone from the bucket" 0 "$(probes)"
check "… and no view shows it" test -z "$(ls -A "$M/w" | grep -v '^r[0-9]*$\|^fresh1$')"
bed_cmd bridge-stop >/dev/null && BRIDGE_DOWN=1 || not_ok "bridge-stop"
"$S3TOOL" put "$B" lost "$T/body" >/dev/null
out=$("$FACETFS" wait "$M" w --probe --timeout 5 2>&1); rc=$?
diag <<<"$out"
check_eq "bridge down: wait --probe fails (exit 1)" 1 "$rc"
check "… saying the probe's event did not come, naming the bucket" \
	grep -q "no event of the probe $B/.facetfs-probe/.* came" <<<"$out"
"$FACETFS" wait "$M" --timeout 5 >/dev/null 2>&1
check_eq "bridge down: plain wait cannot know, and returns 0" 0 $?
check "… and the PUT made then is not in the mount" test ! -e "$M/w/lost"
bed_cmd bridge-start >/dev/null && BRIDGE_DOWN=0 || not_ok "bridge-start"
check_eq "the probe's object is gone with the bridge down too" 0 "$(probes)"
"$FACETFS" wait "$M" --probe --timeout 20 >/dev/null 2>&1
check_eq "bridge back: wait --probe passes again" 0 $?

stop_gateway A; check_eq "gateway stops cleanly" 0 "$?"
