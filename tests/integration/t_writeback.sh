#!/usr/bin/env bash
# t_writeback.sh — write-back views ("write_back": true, "eventual"): a
# close returns before S3 has the file, the gateway itself lists and reads
# it at once, a drain publishes it behind, `facetfs sync` waits for that.
# The gateway runs with cache.drain_delay 30 s, so nothing drains by itself
# during the test: what S3 has is what `facetfs sync` or a stop published.
# Checked: the config rules; cp -r of 500 files returns with all pending
# (0 PUTs) and readable through the mount, S3 and a second gateway not
# seeing them; `facetfs sync` publishes them with the right bytes; ten
# rewrites of a file make one PUT; an unlinked pending file makes no PUT
# and no object; a renamed one is published under its new name only;
# another client's write of a pending key wins (the local bytes go to
# recovered/, drain.conflicts 1); closes succeed while RGW is down and
# `facetfs sync` names what failed, then publishes once RGW is back; a
# stop drains what is pending; kill -9 with files pending, and the next
# start queues them for its drain (the mount reads them at once) and
# publishes them; a 300 MiB file reads back and is published byte
# for byte; a 9 KiB command reaches .facetfs/control whole; a file
# written after an ENOSPC reads back whole.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/gateway.sh"
require_bed

FACETFS=$FACETFS_BUILD/gateway/exe/facetfs
B=$(new_bucket wback)
aws_s3 s3 mb "s3://$B" >/dev/null || { not_ok "make bucket"; exit 1; }
bed_cmd notify "$B" >/dev/null 2>&1 || { not_ok "bucket notifications"; exit 1; }
T=$(test_tmp)

# ---- the config rules ----
mkdir -p "$T/bad"
printf '{ "name": "s", "bucket": "%s", "writable": true, "visibility": "session", "write_back": true }\n' \
	"$B" >"$T/bad/s.json"
out=$("$FACETFS" check "$T/bad/s.json" 2>&1)
check "write_back with session: refused, naming the rule" \
	grep -q 'write_back: needs "visibility": "eventual"' <<<"$out"
printf '{ "name": "r", "bucket": "%s", "visibility": "eventual", "write_back": true }\n' \
	"$B" >"$T/bad/r.json"
out=$("$FACETFS" check "$T/bad/r.json" 2>&1)
check "write_back without writable: refused" grep -q 'write_back: needs "writable": true' <<<"$out"

view_file "$T/views" w "$B" '{ "prefix": "w/" }' \
	'"layout": { "strip_prefix": "w/" }, "writable": true, "visibility": "eventual", "write_back": true'
check "a write-back eventual view passes facetfs check" "$FACETFS" check "$T/views/w.json"
gw_config "$T/a.json" "$T/state-a" "$T/views" "facetfs-wback-a-$$"
jq '.cache.drain_delay = 30 | .cache.stop_drain = 60' "$T/a.json" >"$T/a.tmp" && mv "$T/a.tmp" "$T/a.json"
view_file "$T/views-b" w "$B" '{ "prefix": "w/" }' '"layout": { "strip_prefix": "w/" }'
gw_config "$T/b.json" "$T/state-b" "$T/views-b" "facetfs-wback-b-$$"
M=$T/mnt
MB=$T/mnt-b
start_gateway A "$T/a.json" "$M" || { not_ok "gateway A starts"; exit 1; }
start_gateway Bg "$T/b.json" "$MB" || { not_ok "gateway B starts"; exit 1; }

puts() { stat_field "$M" .s3.put; }
in_s3() { aws_s3 s3 cp --quiet "s3://$B/w/$1" -; }
s3_has() { aws_s3 s3api head-object --bucket "$B" --key "w/$1" >/dev/null 2>&1; }
s3_lacks() { ! s3_has "$1"; }
# s3_same KEY FILE: S3's bytes of w/KEY are FILE's.
s3_same() { in_s3 "$1" | cmp -s - "$2"; }
listed() { aws_s3 s3 ls --recursive "s3://$B/w/$1" | wc -l; }

# ---- cp -r returns before S3 has anything ----
mkdir -p "$T/src"
for i in $(seq -w 1 500); do head -c $((4096 + 10#$i * 97)) /dev/urandom >"$T/src/f$i"; done
p0=$(puts)
check "cp -r of 500 files into the write-back view" cp -r "$T/src" "$M/w/cp"
check_eq "when cp returns: 500 files pending" 500 "$(stat_field "$M" .drain.pending_files)"
check_eq "when cp returns: no PUT made" "$p0" "$(puts)"
check_eq "S3 lists none of them yet" 0 "$(listed cp/)"
check "this mount lists and reads them at once (f042)" cmp -s "$M/w/cp/f042" "$T/src/f042"
check_eq "this mount lists all 500" 500 "$(find "$M/w/cp" -type f | wc -l)"
check "a second gateway does not see them" test ! -e "$MB/w/cp/f042"
status_drain() { "$FACETFS" status "$M" | grep -q "^drain .*pending $1 files"; }
check "facetfs status shows the drain line" status_drain 500
check_eq ".facetfs/pending lists the 500, with sizes, ages, tries, state" 500 \
	"$(grep -c "^$B/w/cp/f[0-9]*	[0-9]* bytes	age [0-9.]* s	tries 0	waiting$" "$M/.facetfs/pending")"

# ---- facetfs sync ----
check "facetfs sync returns 0" "$FACETFS" sync "$M"
# The rate is over the last 10 s: read it as soon as the drain is done.
check "the drain's rate is shown (drain.bytes_per_second)" test "$(stat_field "$M" .drain.bytes_per_second)" -gt 0
check_eq "then S3 lists the 500" 500 "$(listed cp/)"
same_two() { s3_same cp/f077 "$T/src/f077" && s3_same cp/f500 "$T/src/f500"; }
check "with the right bytes (f077, f500)" same_two
check_eq "nothing pending after it" 0 "$(stat_field "$M" .drain.pending_files)"
check_eq "500 PUTs, one a file" $((p0 + 500)) "$(puts)"
check "the second gateway sees them once published" wait_for 20 test -e "$MB/w/cp/f500"

# ---- a 300 MiB file (its WRITEs spliced into the staged file where the
# gateway may make a 1 MiB pipe, else read into memory): the same
# bytes through the mount, and in S3 once synced ----
head -c $((300 << 20)) /dev/urandom >"$T/big"
sum=$(sha256sum <"$T/big" | cut -d' ' -f1)
check "cp of a 300 MiB file into the write-back view" cp "$T/big" "$M/w/big.bin"
check_eq "the mount reads back its 300 MiB, same SHA-256" "$sum" \
	"$(sha256sum <"$M/w/big.bin" | cut -d' ' -f1)"
check "facetfs sync of it" "$FACETFS" sync "$M" "$M/w/big.bin"
check_eq "S3 holds the same 300 MiB" "$sum" "$(in_s3 big.bin | sha256sum | cut -d' ' -f1)"
rm -f "$T/big"

# A WRITE over a page comes in a pipe; .facetfs/control needs it in
# memory: the whole command reaches it (its answer quotes it).
control_long() {
	python3 - "$M/.facetfs/control" <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
cmd = b"long-" + b"x" * 9000 + b"-end\n"
assert os.write(fd, cmd) == len(cmd)
answer = os.pread(fd, 65536, 0)
sys.exit(0 if b'unknown command "long-' + b"x" * 9000 + b'-end"' in answer else 1)
PY
}
check "a 9 KiB command written to .facetfs/control arrives whole" control_long

# ---- newest wins: ten rewrites before the upload, one PUT ----
p0=$(puts)
for n in 1 2 3 4 5 6 7 8 9 10; do printf 'version %s\n' "$n" >"$M/w/re.txt"; done
check "facetfs sync of one path" "$FACETFS" sync "$M" "$M/w/re.txt"
check_eq "ten rewrites of a pending file: one PUT" $((p0 + 1)) "$(puts)"
check_eq "S3 has the last bytes" "version 10" "$(in_s3 re.txt)"

# ---- unlink of a pending file: no PUT, no object ----
p0=$(puts)
echo gone >"$M/w/unl.txt"
check "unlink of a pending file" rm "$M/w/unl.txt"
check "sync" "$FACETFS" sync "$M"
check_eq "no PUT for it" "$p0" "$(puts)"
check "no object" s3_lacks unl.txt

# ---- rename of a pending file: published under its new name only ----
p0=$(puts)
echo moved >"$M/w/old.txt"
check "rename of a pending file" mv "$M/w/old.txt" "$M/w/new.txt"
check "sync" "$FACETFS" sync "$M"
check_eq "S3 has it under the new name" moved "$(in_s3 new.txt)"
check "and nothing under the old one" s3_lacks old.txt
check_eq "one PUT" $((p0 + 1)) "$(puts)"

# ---- a conflict: another client writes the key before the drain ----
echo "theirs v1" | aws_s3 s3 cp --quiet - "s3://$B/w/conf.txt"
check "the second version's event reached this gateway" wait_for 20 \
	sh -c "cat '$M/w/conf.txt' 2>/dev/null | grep -q 'theirs v1'"
echo "ours" >"$M/w/conf.txt"
echo "theirs v2" | aws_s3 s3 cp --quiet - "s3://$B/w/conf.txt"
check "sync with a conflict left returns 0 (nothing pending)" "$FACETFS" sync "$M"
check_eq "S3 keeps the other client's bytes" "theirs v2" "$(in_s3 conf.txt)"
check_eq "drain.conflicts is 1" 1 "$(stat_field "$M" .drain.conflicts)"
rec=$(grep -l '^key w/conf.txt$' "$T"/state-a/cache/staging/recovered/*.journal 2>/dev/null | head -1)
check "recovered/ has the local bytes, its journal names both versions" \
	sh -c "[ -n '$rec' ] && grep -q '^store ' '$rec' && grep -q '^based_on ' '$rec' && grep -qx ours '${rec%.journal}'"

# ---- RGW down: closes succeed, sync names what failed, then publishes ----
bed_cmd rgw-stop >/dev/null 2>&1
ok_closes=0
for i in 1 2 3 4 5; do echo "down $i" >"$M/w/down$i.txt" && ok_closes=$((ok_closes + 1)); done
check_eq "five closes succeed with RGW down" 5 "$ok_closes"
out=$(timeout 120 "$FACETFS" sync "$M" 2>/dev/null)
rc=$?
check "facetfs sync exits 1 and names each key" sh -c "[ $rc = 1 ] && [ \$(grep -c '^$B/w/down[1-5].txt: ' <<'EOF'
$out
EOF
) = 5 ]"
check_eq "status: 5 pending" 5 "$(stat_field "$M" .drain.pending_files)"
check ".facetfs/pending shows their tries and last error" \
	grep -q "^$B/w/down2.txt	.*tries [1-9][0-9]*	" "$M/.facetfs/pending"
bed_cmd rgw-start >/dev/null 2>&1
check "RGW back: facetfs sync publishes them, no remount" "$FACETFS" sync "$M"
check_eq "S3 has down3.txt" "down 3" "$(in_s3 down3.txt)"

# ---- a stop drains what is pending ----
for i in 1 2 3; do echo "stop $i" >"$M/w/stop$i.txt"; done
check_eq "3 pending before the stop" 3 "$(stat_field "$M" .drain.pending_files)"
check "the gateway stops (SIGTERM)" stop_gateway A
check_eq "the stop published them" "stop 2" "$(in_s3 stop2.txt)"

# ---- a stop whose drain cannot progress ends after cache.stop_drain ----
gw_config "$T/e.json" "$T/state-e" "$T/views" "facetfs-wback-e-$$"
jq '.cache.drain_delay = 30 | .cache.stop_drain = 3' "$T/e.json" >"$T/e.tmp" && mv "$T/e.tmp" "$T/e.json"
ME=$T/mnt-e
start_gateway E "$T/e.json" "$ME" || { not_ok "gateway E starts"; exit 1; }
for i in 1 2 3; do echo "held $i" >"$ME/w/held$i.txt"; done
bed_cmd rgw-stop >/dev/null 2>&1
t0=$(date +%s)
check "the gateway stops with S3 down (stop_drain 3 s)" stop_gateway E
check "… and says what stays pending" grep -q 'write-back: 3 file(s), .* stay pending' "$(gateway_log E)"
bed_cmd rgw-start >/dev/null 2>&1
check "none of them in S3" s3_lacks held2.txt
start_gateway E "$T/e.json" "$ME" || { not_ok "gateway E starts again"; exit 1; }
check "facetfs sync after the restart" "$FACETFS" sync "$ME"
check_eq "the next start published them" "held 2" "$(in_s3 held2.txt)"
check_eq "… through its drain (staging.reuploaded_files)" 3 \
	"$(stat_field "$ME" .staging.reuploaded_files)"
stop_gateway E
diag <<<"the stop with S3 down took $(($(date +%s) - t0)) s (with the restart)"

# ---- kill -9 with files pending: the next start publishes them ----
start_gateway A "$T/a.json" "$M" || { not_ok "gateway A starts again"; exit 1; }
for i in $(seq -w 1 20); do head -c 5000 /dev/urandom >"$T/src/k$i"; cp "$T/src/k$i" "$M/w/k$i"; done
check_eq "20 pending" 20 "$(stat_field "$M" .drain.pending_files)"
check "touch -d and chmod of pending files (after their close)" \
	sh -c "touch -d '2001-02-03 04:05:06 UTC' '$M/w/k05' && chmod 600 '$M/w/k06'"
crash_gateway A
fusermount3 -uz "$M" 2>/dev/null
check_eq "none in S3 after the crash" 0 "$(listed k)"
start_gateway A "$T/a.json" "$M" || { not_ok "gateway A starts after the crash"; exit 1; }
check "the mount reads a pending file at once (k13)" cmp -s "$M/w/k13" "$T/src/k13"
check "facetfs sync after the restart" "$FACETFS" sync "$M"
check_eq "the restart published the 20" 20 "$(listed k)"
check "with their bytes (k13)" s3_same k13 "$T/src/k13"
meta() { aws_s3 s3api head-object --bucket "$B" --key "w/$1" --query "Metadata.$2" --output text; }
check_eq "k05 kept the time set after its close" 981173106 "$(meta k05 mtime | cut -d. -f1)"
check_eq "k06 kept the mode set after its close (0600 file)" 33152 "$(meta k06 mode)"
check "and their bytes" s3_same k05 "$T/src/k05"
check_eq "nothing left staged" 0 "$(find "$T/state-a/cache/staging" -maxdepth 1 -name '*.jnl' | wc -l)"

stop_gateway A

# ---- a budget of 64 MiB, 256 MiB written while the drain runs (each
# file waits 2 s after its close: the writer must wait for room) ----
gw_config "$T/c.json" "$T/state-c" "$T/views" "facetfs-wback-c-$$" "" 5 64MiB
jq '.cache.drain_delay = 2 | .cache.full_timeout = 5' "$T/c.json" >"$T/c.tmp" && mv "$T/c.tmp" "$T/c.json"
MC=$T/mnt-c
start_gateway C "$T/c.json" "$MC" || { not_ok "gateway C starts"; exit 1; }
head -c $((8 << 20)) /dev/urandom >"$T/8m"
peak() {   # the highest staging.used_bytes seen while $1 (a pid) runs
	local p=0 u
	while kill -0 "$1" 2>/dev/null; do
		u=$(stat_field "$MC" .staging.used_bytes 2>/dev/null)
		[[ $u =~ ^[0-9]+$ ]] && ((u > p)) && p=$u
		sleep 0.1
	done
	echo "$p"
}
mkdir -p "$MC/w/big" "$MC/w/full"
(for i in $(seq -w 1 32); do cp "$T/8m" "$MC/w/big/b$i" || exit 1; done) 2>"$T/big.err" &
wpid=$!
top=$(peak $wpid)
wait $wpid
check_eq "32 x 8 MiB written into a 64 MiB budget: no error" "" "$(cat "$T/big.err")"
check "staged bytes never above the budget (peak $top)" test "$top" -le $((64 << 20))
check "writes waited for room (drain.blocked_ms)" test "$(stat_field "$MC" .drain.blocked_ms)" -gt 0
check "facetfs sync" "$FACETFS" sync "$MC"
check_eq "all 32 in S3" 32 "$(listed big/)"
check "with their bytes (b17)" s3_same big/b17 "$T/8m"

# ---- the same with S3 unreachable: ENOSPC after full_timeout ----
bed_cmd rgw-stop >/dev/null 2>&1
n=0
for i in $(seq -w 1 12); do
	cp "$T/8m" "$MC/w/full/f$i" 2>"$T/full.err" || break
	n=$((n + 1))
done
check "S3 down: a write gets ENOSPC once the budget is full" grep -q 'No space left' "$T/full.err"
check "… after the files that fitted ($n) were closed" test "$n" -ge 1 -a "$n" -le 8
# (the file cut short by ENOSPC was closed too: pending as well)
pend=$(stat_field "$MC" .drain.pending_files)
check "the closed files stay pending ($pend)" test "$pend" -ge "$n"
bed_cmd rgw-start >/dev/null 2>&1
check "RGW back: facetfs sync publishes them" "$FACETFS" sync "$MC"
check_eq "S3 has all $pend" "$pend" "$(listed full/)"
check "with their bytes (f01)" s3_same full/f01 "$T/8m"
# The WRITE refused with ENOSPC left nothing in the pipe it came in.
check "after the refused write, a new 8 MiB file reads back whole" \
	sh -c "cp '$T/8m' '$MC/w/full/after' && cmp -s '$MC/w/full/after' '$T/8m'"
stop_gateway C

# ---- kill -9 in the middle of draining 500 files ----
gw_config "$T/d.json" "$T/state-d" "$T/views" "facetfs-wback-d-$$"
jq '.cache.drain_streams = 1' "$T/d.json" >"$T/d.tmp" && mv "$T/d.tmp" "$T/d.json"
MD=$T/mnt-d
mkdir -p "$T/src500"
for i in $(seq -w 1 500); do head -c 65536 /dev/urandom >"$T/src500/m$i"; done
start_gateway D "$T/d.json" "$MD" || { not_ok "gateway D starts"; exit 1; }
check "cp -r of 500 x 64 KiB" cp -r "$T/src500" "$MD/w/mid"
drained() { (($(stat_field "$MD" .drain.done) >= 50)); }
check "the drain has published 50" wait_for 60 drained
left=$(stat_field "$MD" .drain.pending_files)
crash_gateway D
fusermount3 -uz "$MD" 2>/dev/null
check "killed in the middle of the drain ($left of 500 pending)" test "$left" -gt 0
start_gateway D "$T/d.json" "$MD" || { not_ok "gateway D starts after the crash"; exit 1; }
check "facetfs sync after the restart" "$FACETFS" sync "$MD"
check_eq "the restart published every one of the 500" 500 "$(listed mid/)"
same_all() {
	local i
	for i in 001 123 250 377 500; do s3_same "mid/m$i" "$T/src500/m$i" || return 1; done
}
check "with their bytes (five of them, first to last)" same_all
check_eq "nothing left journaled" 0 "$(find "$T/state-d/cache/staging" -maxdepth 1 -name '*.jnl' | wc -l)"
check_eq "nothing pending" 0 "$(stat_field "$MD" .drain.pending_files)"
stop_gateway D
stop_gateway Bg
