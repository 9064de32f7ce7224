#!/usr/bin/env bash
# t_wbstress.sh — a random stress of a write-back view on a real mount, no
# other client at all (issue 37, sequences 9 and 10). tests/lib/wb_stress.py
# runs STRESS_PROCS processes (4) x STRESS_OPS random operations (600; about
# a minute here) from STRESS_SEED (37): create, write, O_TRUNC, append,
# descriptors kept open, truncate, fsync, rename of files and directories,
# unlink, mkdir, rmdir, symlink, setxattr, reads and listings checked
# against a model of each process's own subtree, a kernel forget now and
# then (root only). The gateway drains as files close (drain_delay
# STRESS_DRAIN_DELAY, default 0), so uploads meet namespace operations.
# cache.durability is STRESS_DURABILITY, by default process for an odd
# seed (the staging directory's spare files in use) and power for an even
# one: kill -9 is a crash both promise to survive.
# Checked:
#   - the mount matches the model, operation by operation and at the end;
#   - `facetfs sync` exits 0, then the mount's tree and S3's objects agree
#     file by file and byte by byte (user.* xattrs as x-amz-meta-*, links
#     as objects holding their target with mode S_IFLNK, as s3fs keeps
#     them);
#   - after a clean restart the mount reads exactly as before it, and
#     still agrees with S3;
#   - a second stress killed in the middle by kill -9 of the gateway, a
#     restart and `facetfs sync` (exit 0): the mount and S3 agree;
#   - no conflict counted (drain.conflicts 0) and none logged, ever.
#
# A long run (a few seeds, more operations; each run its own bucket):
#   . BED_DIR/env; export FACETFS_SRC=$PWD BED=$PWD/tests/bed/bed
#   for s in 1 2 3 4 5; do
#     STRESS_SEED=$s STRESS_OPS=5000 timeout 3600 bash tests/integration/t_wbstress.sh
#   done
# (or STRESS_SEED=$s STRESS_OPS=5000 TEST_TIMEOUT=3600 tests/run wbstress).
# A failure prints the seed; the same seed replays the same operations.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/gateway.sh"
require_bed

SEED=${STRESS_SEED:-37}
OPS=${STRESS_OPS:-600}
DUR=${STRESS_DURABILITY:-$( ((SEED % 2)) && echo process || echo power)}
PROCS=${STRESS_PROCS:-4}
STRESS=$FACETFS_SRC/tests/lib/wb_stress.py
B=$(new_bucket wbstress)
aws_s3 s3 mb "s3://$B" >/dev/null || { not_ok "make bucket"; exit 1; }
bed_cmd notify "$B" >/dev/null 2>&1 || { not_ok "bucket notifications"; exit 1; }
T=$(test_tmp)
SPID=
# A stress still running when the script ends is stopped (by its PID).
on_exit() {
	local rc=$?
	[[ -n $SPID ]] && kill -TERM "$SPID" 2>/dev/null && wait "$SPID" 2>/dev/null
	(exit $rc)
	test_cleanup
}
trap on_exit EXIT

view_file "$T/views" w "$B" '{ "prefix": "s/" }' \
	'"layout": { "strip_prefix": "s/" }, "writable": true, "visibility": "eventual", "write_back": true'
gw_config "$T/g.json" "$T/state" "$T/views" "facetfs-wbstress-$$"
jq --argjson d "${STRESS_DRAIN_DELAY:-0}" --arg dur "$DUR" \
	'.cache.drain_delay = $d | .cache.stop_drain = 60 | .cache.durability = $dur' \
	"$T/g.json" >"$T/g.tmp" && mv "$T/g.tmp" "$T/g.json" && chmod 600 "$T/g.json"
M=$T/mnt
W=$M/w
start_gateway G "$T/g.json" "$M" || { not_ok "the gateway starts"; exit 1; }
FORGET=()
[[ $(id -u) == 0 && -w /proc/sys/vm/drop_caches ]] && FORGET=(--forget)
diag <<<"seed $SEED, $PROCS processes x $OPS operations, drain_delay ${STRESS_DRAIN_DELAY:-0}, durability $DUR${FORGET:+, with forgets}"

now() { date +%s; }
# show FILE: a command's output as comments.
show() { diag <"$1"; }
# sync_ok: facetfs sync of the mount, its output kept (a hang is a failure,
# not the end of the script).
sync_ok() { timeout 120 "$FACETFS" sync "$M" >"$T/sync.out" 2>&1; }
agree() { python3 "$STRESS" compare "$W" "$B" s/ >"$T/compare.out" 2>&1; }
conflicts() { stat_field "$M" .drain.conflicts; }
logged_conflicts() { grep -c 'written by another client' "$(gateway_log G)"; }

# ---- a stress, then sync: the model, then S3 ----
t0=$(now)
python3 "$STRESS" run "$W/run1" --procs "$PROCS" --ops "$OPS" --seed "$SEED" "${FORGET[@]}" \
	--work "$T/work1" --timeout 150 >"$T/run1.out" 2>&1
rc=$?
check "stress (seed $SEED): the mount matches the model" test "$rc" = 0
show "$T/run1.out"
t1=$(now)
check "facetfs sync after it exits 0" sync_ok || show "$T/sync.out"
check "the mount and S3 agree, file by file, byte by byte" agree
show "$T/compare.out"
check_eq "no conflict counted (drain.conflicts)" 0 "$(conflicts)"
spares=$(stat_field "$M" .staging.spare_files)
if [[ $DUR == process ]]; then
	check "under process, the staging directory keeps spare files (staging.spare_files $spares)" \
		test "${spares:-0}" -gt 0
else
	check_eq "under power, no spare file is kept" 0 "$spares"
fi
diag <<<"stress $((t1 - t0)) s, sync and compare $(($(now) - t1)) s"

# ---- a clean restart: the same tree, still S3's ----
python3 "$STRESS" snapshot "$W" "$T/before.json" >/dev/null 2>&1
check "the gateway stops (SIGTERM)" stop_gateway G
start_gateway G "$T/g.json" "$M" || { not_ok "the gateway starts again"; exit 1; }
python3 "$STRESS" snapshot "$W" "$T/after.json" >/dev/null 2>&1
check "after a clean restart the mount reads as before it" \
	python3 "$STRESS" diff "$T/before.json" "$T/after.json"
check "after the restart the mount and S3 agree" agree
show "$T/compare.out"

# ---- kill -9 in the middle of a second stress, restart, sync ----
python3 "$STRESS" run "$W/run2" --procs "$PROCS" --ops "$OPS" --seed $((SEED + 1)) "${FORGET[@]}" \
	--work "$T/work2" --crash-ok --timeout 150 >"$T/run2.out" 2>&1 &
SPID=$!
# done_ops: operations the second stress has done, over its processes.
done_ops() { cat "$T"/work2/p[0-9]* 2>/dev/null | awk '{ n += $1 } END { print n + 0 }'; }
midway() { (($(done_ops) >= PROCS * OPS / 3)) || ! pid_alive "$SPID"; }
wait_for 600 midway
if pid_alive "$SPID"; then
	diag <<<"kill -9 of the gateway after $(done_ops) of $((PROCS * OPS)) operations"
	crash_gateway G
	fusermount3 -uz "$M" 2>/dev/null
	wait "$SPID"
	check "the second stress stops at the crash, no other failure" test $? = 0
	SPID=
	show "$T/run2.out"
	start_gateway G "$T/g.json" "$M" || { not_ok "the gateway starts after the crash"; exit 1; }
	check "facetfs sync after kill -9 and the restart exits 0" sync_ok || show "$T/sync.out"
	check "after the crash, restart and sync the mount and S3 agree" agree
	show "$T/compare.out"
	check_eq "no conflict counted after the restart" 0 "$(conflicts)"
else
	wait "$SPID"
	SPID=
	skip "kill -9 in the middle of the second stress" "it ended before a third of it was seen"
	show "$T/run2.out"
fi
check_eq "no conflict logged, over the three runs of the gateway" 0 "$(logged_conflicts)"
check "the gateway stops" stop_gateway G
