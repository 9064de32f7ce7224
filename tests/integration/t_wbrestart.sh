#!/usr/bin/env bash
# t_wbrestart.sh — a restart with a write-back backlog: the start mounts
# first and the drain publishes what the journals hold behind it.
# A write-back view with cache.drain_delay 3600 s: 8 x 128 MiB (1 GiB) and
# a rewrite of an existing key closed, nothing in S3; kill -9; the next
# start's mount answers while the drain has not finished (.facetfs/pending
# lists the files at the first answer: the mount did not wait for 1 GiB
# of uploads) — the time from the start to the mount's first answer is
# printed, not asserted; the mount shows the rewrite's pending bytes;
# `facetfs sync` then returns 0 and S3 holds every file with its bytes,
# the rewrite as the new version, which the mount reads once published;
# nothing is left staged. Then uploads that fail after the start (a
# bucket policy refusing PUTs): the files stay in .facetfs/pending with
# their error and tries, `facetfs sync` exits 1 naming each of them, and
# once PUTs are allowed again the drain's retries (or the next sync)
# publish them. Last, names a crash leaves unsent: files held open (one
# new and empty, one new and written, one rewrite of a key S3 has) are
# listed; after kill -9 and the restart only S3's key is, with S3's bytes,
# the log says the names were mended, and the written bytes are in
# recovered/.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/gateway.sh"
require_bed

FACETFS=$FACETFS_BUILD/gateway/exe/facetfs
B=$(new_bucket wbrs)
aws_s3 s3 mb "s3://$B" >/dev/null || { not_ok "make bucket"; exit 1; }
bed_cmd notify "$B" >/dev/null 2>&1 || { not_ok "bucket notifications"; exit 1; }
T=$(test_tmp)
M=$T/mnt
STG=$T/state/cache/staging

view_file "$T/views" w "$B" '{ "prefix": "w/" }' \
	'"layout": { "strip_prefix": "w/" }, "writable": true, "visibility": "eventual", "write_back": true'
gw_config "$T/gw.json" "$T/state" "$T/views" "facetfs-wbrs-$$" "" 5 3GiB
jq '.cache.drain_delay = 3600 | .cache.stop_drain = 2' "$T/gw.json" >"$T/gw.tmp" &&
	mv "$T/gw.tmp" "$T/gw.json"
in_s3() { aws_s3 s3 cp --quiet "s3://$B/w/$1" -; }
listed() { aws_s3 s3 ls --recursive "s3://$B/w/$1" | wc -l; }
pending() { stat_field "$M" .drain.pending_files; }

start_gateway A "$T/gw.json" "$M" || { not_ok "gateway starts"; exit 1; }

# ---- a backlog: 1 GiB and a rewrite, pending ----
echo "old version" | aws_s3 s3 cp --quiet - "s3://$B/w/old.txt"
check "the mount shows old.txt's first version" wait_for 20 \
	sh -c "grep -qx 'old version' '$M/w/old.txt' 2>/dev/null"
mkdir -p "$T/src" "$M/w/big"
for i in 1 2 3 4 5 6 7 8; do head -c $((128 << 20)) /dev/urandom >"$T/src/b$i"; done
check "8 x 128 MiB closed into the write-back view" cp "$T/src"/b* "$M/w/big/"
echo "new version" >"$M/w/old.txt"
check_eq "9 files pending" 9 "$(pending)"
check_eq "S3 has none of the 8" 0 "$(listed big/)"
check_eq "S3 still has old.txt's first version" "old version" "$(in_s3 old.txt)"

crash_gateway A
fusermount3 -uz "$M" 2>/dev/null
check_eq "after kill -9: 9 \"commit\" journals staged" 9 \
	"$(grep -l '^state commit$' "$STG"/*.jnl 2>/dev/null | wc -l)"

# ---- the restart: the mount's first answer, and what was pending then ----
watch_mount() {
	local end=$((SECONDS + 120))
	while ((SECONDS < end)); do
		if [[ -e $M/.facetfs/pending ]]; then
			date +%s%N >"$T/up"
			cat "$M/.facetfs/pending" >"$T/pending-at-mount"
			return 0
		fi
		sleep 0.005
	done
	return 1
}
watch_mount &
watcher=$!
t0=$(date +%s%N)
start_gateway A "$T/gw.json" "$M" || { not_ok "gateway starts after the crash"; exit 1; }
wait "$watcher"
check "the mount's first answer was seen" test -s "$T/up"
up_ms=$((($(cat "$T/up") - t0) / 1000000))
diag <<<"the mount answered ${up_ms} ms after the start, with 1 GiB (9 files) pending"
at_mount=$(grep -c "^$B/w/" "$T/pending-at-mount")
diag <<<"at that moment .facetfs/pending listed $at_mount file(s)"
check "the mount came up before the drain finished (.facetfs/pending listed files)" \
	test "$at_mount" -ge 1
check "the log says the files were queued for the drain after recovery" \
	grep -q "pending since an earlier run queued for the drain" "$(gateway_log A)"
check_eq "the mount shows old.txt's pending version" "new version" "$(cat "$M/w/old.txt")"
check_eq "and a 128 MiB file's size" $((128 << 20)) "$(stat -c %s "$M/w/big/b5")"

check "facetfs sync returns 0" "$FACETFS" sync "$M"
check_eq "nothing pending after it" 0 "$(pending)"
check_eq ".facetfs/pending is empty" "" "$(cat "$M/.facetfs/pending")"
check_eq "S3 lists the 8" 8 "$(listed big/)"
same_all() {
	local i
	for i in 1 2 3 4 5 6 7 8; do
		in_s3 "big/b$i" | cmp -s - "$T/src/b$i" || { echo "# big/b$i differs"; return 1; }
	done
}
check "each with its bytes" same_all
check_eq "S3 has old.txt's new version" "new version" "$(in_s3 old.txt)"
check_eq "the mount reads it once published" "new version" "$(cat "$M/w/old.txt")"
check_eq "staging.reuploaded_files counts the 9" 9 "$(stat_field "$M" .staging.reuploaded_files)"
check_eq "nothing left staged" 0 "$(find "$STG" -maxdepth 1 -name '*.jnl' | wc -l)"

# ---- uploads that fail after the start: pending with their error, retried ----
mkdir -p "$M/w/fail"
for i in 1 2 3; do echo "fail $i" >"$M/w/fail/p$i"; done
check_eq "3 pending" 3 "$(pending)"
crash_gateway A
fusermount3 -uz "$M" 2>/dev/null
cat >"$T/deny.json" <<JSON
{ "Version": "2012-10-17", "Statement": [ { "Effect": "Deny", "Principal": "*",
  "Action": [ "s3:PutObject" ], "Resource": [ "arn:aws:s3:::$B/*" ] } ] }
JSON
check "a bucket policy refusing PUTs" aws_s3 s3api put-bucket-policy --bucket "$B" \
	--policy "file://$T/deny.json"
start_gateway A "$T/gw.json" "$M" || { not_ok "gateway starts with PUTs refused"; exit 1; }
tried() { grep -q "^$B/w/fail/p2	.*tries [1-9][0-9]*	" "$M/.facetfs/pending"; }
check "p2's failed upload shows in .facetfs/pending with its tries" wait_for 30 tried
grep "^$B/w/fail/" "$M/.facetfs/pending" | diag
out=$(timeout 120 "$FACETFS" sync "$M" 2>/dev/null)
rc=$?
check_eq "facetfs sync exits 1 while they fail" 1 "$rc"
check_eq "… naming each of the three" 3 "$(grep -c "^$B/w/fail/p[1-3]: " <<<"$out")"
check "… and never says synced" eval '! grep -q "^synced" <<<"$out"'
check_eq "the three stay pending" 3 "$(pending)"
check "PUTs allowed again" aws_s3 s3api delete-bucket-policy --bucket "$B"
check "facetfs sync returns 0" "$FACETFS" sync "$M"
check_eq "S3 has p2" "fail 2" "$(in_s3 fail/p2)"
check_eq "nothing pending" 0 "$(pending)"
check_eq "nothing left staged" 0 "$(find "$STG" -maxdepth 1 -name '*.jnl' | wc -l)"

# ---- names a crash leaves unsent: listed while written, gone after it ----
# A create lists its name at once (this mount's version, no ETag yet). A
# crash with the file still open leaves that name in the index with
# nothing behind it: the next start asks S3 and drops it (or, for a key S3
# has, shows S3's version).
mkdir -p "$M/w/un"
echo "in S3" | aws_s3 s3 cp --quiet - "s3://$B/w/un/there"
check "the mount shows un/there" wait_for 20 test -e "$M/w/un/there"
# Each file is held open by a process of its own that never closes a
# copy of its descriptor (a shell's redirection does: a commit point).
HOLD=()
# The holders still running when the script ends are stopped (by PID);
# the script's own exit status is kept for test_cleanup.
on_exit() {
	local rc=$?
	((${#HOLD[@]})) && kill "${HOLD[@]}" 2>/dev/null
	(exit $rc)
	test_cleanup
}
trap on_exit EXIT
hold() {
	python3 -c 'import os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, sys.argv[2].encode())
time.sleep(600)' "$M/w/un/$1" "$2" &
	HOLD+=($!)
}
hold empty ""
hold half $'half written\n'
hold there $'rewritten, never closed\n'
written() {
	[[ -e $M/w/un/empty && $(stat -c %s "$M/w/un/half" 2>/dev/null) == 13 &&
		$(stat -c %s "$M/w/un/there" 2>/dev/null) == 24 ]]
}
check "three processes hold the files open, written" wait_for 20 written
check_eq "the mount lists the three open files" "empty half there" \
	"$(ls "$M/w/un" | tr '\n' ' ' | sed 's/ $//')"
crash_gateway A
kill "${HOLD[@]}" 2>/dev/null
wait "${HOLD[@]}" 2>/dev/null
fusermount3 -uz "$M" 2>/dev/null
start_gateway A "$T/gw.json" "$M" || { not_ok "gateway starts after the crash"; exit 1; }
check_eq "after the restart only S3's un/there is listed" "there" \
	"$(ls "$M/w/un" | tr '\n' ' ' | sed 's/ $//')"
check_eq "… with S3's bytes" "in S3" "$(cat "$M/w/un/there")"
check "un/empty is not found" eval '! test -e "$M/w/un/empty"'
check "the log says the names were mended from S3" \
	grep -q 'left unsent mended from S3' "$(gateway_log A)"
check "un/half's bytes were saved to recovered/" \
	grep -rqx "half written" "$STG/recovered"
check_eq "S3 has un/there only" 1 "$(listed un/)"
stop_gateway A
rm -rf "$T/src"
