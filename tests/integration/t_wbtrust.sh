#!/usr/bin/env bash
# t_wbtrust.sh — write-back you can trust (issue 37): the ordinary
# sequences that lost, misplaced or wrongly published data, each a named
# check on a real mount. Two gateways over one bucket:
#   S  "slow": cache.drain_delay 600, so a closed file stays pending until
#      `facetfs sync`; views w (writable, eventual, write_back, prefix w/)
#      and r (read-only, the same prefix) in the one mount.
#   Q  "quick": cache.drain_delay 0, its S3 traffic through
#      tests/lib/slow_proxy.py, which can slow the bodies of requests down
#      so that an upload is surely in flight (never a timed assertion: the
#      relay is slowed while the test acts, then let go); view q
#      (writable, write_back, prefix q/).
# Checked (issue 37's numbering): (1) rename, kernel forget (drop_caches),
# re-create of the old name: both names keep their bytes, in the mount and
# in S3; (2) a pending file reopened with O_TRUNC and half written is
# never published while the writer holds it (S3's event log never shows
# the partial bytes' ETag), under `facetfs sync` and under drain_delay 0;
# (3) rm -rf, rmdir and mv DIR right after cp -r; (4) fsync, the drain,
# truncate and the recovery at start against a newer version written by
# another client: S3 keeps it, ours is in .facetfs/recovered, counted in
# drain.conflicts; a rewrite whose base another client deleted is
# published over the delete, no conflict; (5) the second view reads new
# and rewritten pending files' pending bytes, and descriptors opened on
# them read them whole after their publish; (6) rename while a 64 MiB upload (8 parts) or a
# 4 MiB one runs: only the new name in S3, with a write made after the
# rename; (6c) rm while the upload runs: nothing left of the file;
# (6d) a writer's append and fsync while it runs: S3 has the append at
# the fsync's return; (6e) descriptors reading while the upload runs
# read the file whole before, during and after it; (7) 1,500 pending files under a limit of 512 descriptors;
# (9/10) a file published (fsync, drain) and written again, or a new link
# renamed over a published file, counts no conflict when no other client
# writes. Each section's start is printed with the seconds since the
# gateways started.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/gateway.sh"
require_bed

S3TOOL=$FACETFS_BUILD/tests/bed/s3tool
B=$(new_bucket wbtrust)
aws_s3 s3 mb "s3://$B" >/dev/null || { not_ok "make bucket"; exit 1; }
bed_cmd notify "$B" >/dev/null 2>&1 || { not_ok "bucket notifications"; exit 1; }
T=$(test_tmp)
PROXY_PID=

stop_proxy() {
	[[ -n $PROXY_PID ]] || return 0
	kill -TERM "$PROXY_PID" 2>/dev/null
	wait_for 10 eval '! pid_alive '"$PROXY_PID" || kill -KILL "$PROXY_PID" 2>/dev/null
	wait "$PROXY_PID" 2>/dev/null
	PROXY_PID=
}
# The gateway behind the relay stops first (its stop drains through it).
on_exit() {
	local rc=$?
	[[ -n ${T:-} ]] && touch "$T/t2.go" "$T/t2q.go" "$T/c4a.go" "$T/e6.go" 2>/dev/null   # waiting writers end
	[[ -n ${GW_PID[Q]:-} ]] && stop_gateway Q >/dev/null 2>&1
	stop_proxy
	(exit $rc)
	test_cleanup
}
trap on_exit EXIT

# ---- S3 as another client sees it (s3tool: one quick request each) ----
in_s3() { "$S3TOOL" get "$B" "$1" 2>/dev/null; }
s3_has() { "$S3TOOL" head "$B" "$1" >/dev/null 2>&1; }
s3_lacks() { ! s3_has "$1"; }
s3_same() { in_s3 "$1" | cmp -s - "$2"; }
s3_keys() { "$S3TOOL" list "$B" "$1" 2>/dev/null; }
# another client's PUT: put_other KEY TEXT
put_other() { printf '%s' "$2" >"$T/other" && "$S3TOOL" put "$B" "$1" "$T/other" >/dev/null; }
# Whether the topic holds an event of KEY with ETAG (the bridge keys a
# message "bucket/key", so one object's events keep their order).
event_seen() {
	kcat -C -b "$KAFKA_BROKERS" -t "$KAFKA_TOPIC" -e -q -X fetch.wait.max.ms=10 -f '%k\t%s\n' |
		grep -F "$B/$1	" | grep -qF "$2"
}

# ---- the relay, the two gateways ----
python3 "$FACETFS_SRC/tests/lib/slow_proxy.py" "$S3_ENDPOINT" "$T/proxy.port" "$T/throttle" \
	</dev/null >"$T/proxy.log" 2>&1 &
PROXY_PID=$!
wait_for 20 test -s "$T/proxy.port" || { not_ok "the S3 relay starts"; exit 1; }
PROXY=127.0.0.1:$(cat "$T/proxy.port")

WB='"writable": true, "visibility": "eventual", "write_back": true'
view_file "$T/views-s" w "$B" '{ "prefix": "w/" }' "\"layout\": { \"strip_prefix\": \"w/\" }, $WB"
view_file "$T/views-s" r "$B" '{ "prefix": "w/" }' '"layout": { "strip_prefix": "w/" }'
gw_config "$T/s.json" "$T/state-s" "$T/views-s" "facetfs-wbtrust-s-$$"
jq '.cache.drain_delay = 600 | .cache.stop_drain = 60' "$T/s.json" >"$T/s.tmp" && mv "$T/s.tmp" "$T/s.json" && chmod 600 "$T/s.json"
view_file "$T/views-q" q "$B" '{ "prefix": "q/" }' "\"layout\": { \"strip_prefix\": \"q/\" }, $WB"
gw_config "$T/q.json" "$T/state-q" "$T/views-q" "facetfs-wbtrust-q-$$"
jq --arg ep "$PROXY" '.s3.endpoint = $ep | .cache.drain_delay = 0 | .cache.stop_drain = 60' \
	"$T/q.json" >"$T/q.tmp" && mv "$T/q.tmp" "$T/q.json" && chmod 600 "$T/q.json"
M=$T/mnt-s
MQ=$T/mnt-q
W=$M/w R=$M/r Q=$MQ/q
start_gateway S "$T/s.json" "$M" || { not_ok "gateway S starts"; exit 1; }
start_gateway Q "$T/q.json" "$MQ" || { not_ok "gateway Q starts"; exit 1; }
sync_s() { "$FACETFS" sync "$M"; }
sync_q() { "$FACETFS" sync "$MQ"; }
conflicts() { stat_field "$1" .drain.conflicts; }
# not_pending MOUNT KEY: .facetfs/pending does not list bucket/KEY.
not_pending() { ! grep -q "^$B/$2	" "$1/.facetfs/pending"; }
# in_recovered MOUNT FILE: a file set aside in .facetfs/recovered holds
# exactly FILE's bytes.
in_recovered() {
	local f
	for f in "$1"/.facetfs/recovered/*; do
		[[ -f $f ]] && cmp -s "$f" "$2" && return 0
	done
	return 1
}
recovered_count() { find -L "$1/.facetfs/recovered/" -type f 2>/dev/null | wc -l; }
drop_caches() { sync && echo 2 >/proc/sys/vm/drop_caches; }
T0=$(date +%s)
# section NAME: a comment with the seconds since the gateways started.
section() { diag <<<"[$(($(date +%s) - T0)) s] $1"; }
CAN_FORGET=0
[[ $(id -u) == 0 ]] && [[ -w /proc/sys/vm/drop_caches ]] && CAN_FORGET=1

# ==== (9/10) no other client: publishing and rewriting counts no conflict ====
section "(9/10) no other client: publishing and rewriting counts no conflict"
c0=$(conflicts "$M")
rewrite_fsync() {   # create, fsync, write more, close: one descriptor
	python3 - "$W/c9a" <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, b"first\n"); os.fsync(fd)
os.write(fd, b"second\n"); os.fsync(fd)
os.write(fd, b"third\n"); os.close(fd)
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
os.write(fd, b"fourth\n"); os.fsync(fd); os.close(fd)
PY
}
check "9: create, fsync, write, fsync, close, reopen, append, fsync" rewrite_fsync
echo one >"$W/c9b"
sync_s >/dev/null 2>&1
echo two >"$W/c9b"
echo one >"$W/c9c"
sync_s >/dev/null 2>&1
mv "$W/c9c" "$W/c9d" && echo two >>"$W/c9d"
echo one >"$W/c9e"
sync_s >/dev/null 2>&1
chmod 600 "$W/c9e" && python3 -c 'import os, sys; os.setxattr(sys.argv[1], "user.color", b"blue")' "$W/c9e" &&
	echo two >"$W/c9e"
check "9: facetfs sync after rewrites of published files" sync_s
check_eq "9: S3 has the last bytes of the fsynced file" "$(printf 'first\nsecond\nthird\nfourth')" \
	"$(in_s3 w/c9a)"
check_eq "9: S3 has the drained file's rewrite" two "$(in_s3 w/c9b)"
check_eq "9: S3 has the renamed, appended file" "$(printf 'one\ntwo')" "$(in_s3 w/c9d)"
check_eq "9: S3 has the rewrite after chmod and setxattr" two "$(in_s3 w/c9e)"
check_eq "9: no conflict counted (drain.conflicts) with no other client" "$c0" "$(conflicts "$M")"
q0=$(conflicts "$MQ")
for i in 1 2 3 4 5; do
	echo "round $i" >"$Q/c9q"
	wait_for 20 not_pending "$MQ" q/c9q
done
check "9: drain_delay 0, five rewrites each drained: facetfs sync" sync_q
check_eq "9: S3 has the fifth" "round 5" "$(in_s3 q/c9q)"
check_eq "9: no conflict counted under drain_delay 0" "$q0" "$(conflicts "$MQ")"
# A new symbolic link renamed over a published file (what `ln -sf` does).
echo "a file" >"$Q/s9q"
wait_for 20 not_pending "$MQ" q/s9q
ln -s "the target" "$Q/s9q.tmp" && mv "$Q/s9q.tmp" "$Q/s9q"
check "9: a new link renamed over a published file: facetfs sync" sync_q
check_eq "9: … the mount shows the link" "the target" "$(readlink "$Q/s9q" 2>&1)"
check_eq "9: … S3 holds the link's target" "the target" "$(in_s3 q/s9q)"
check_eq "9: … with mode S_IFLNK|0777" "meta.mode=41471" "$("$S3TOOL" head "$B" q/s9q 2>&1 | grep '^meta.mode=')"
check_eq "9: … no conflict counted" "$q0" "$(conflicts "$MQ")"

# ==== (1) rename, kernel forget, re-create of the old name ====
section "(1) rename, kernel forget, re-create of the old name"
echo moved >"$W/old1"
mv "$W/old1" "$W/new1"
if ((CAN_FORGET)); then
	drop_caches
	check_eq "1: after rename + drop_caches the new name reads its bytes" moved "$(cat "$W/new1" 2>&1)"
	echo second >"$W/old1"
	check_eq "1: the re-created old name reads its own bytes" second "$(cat "$W/old1" 2>&1)"
	check_eq "1: the new name still reads 'moved'" moved "$(cat "$W/new1" 2>&1)"
	drop_caches
	check_eq "1: after a second forget: new" moved "$(cat "$W/new1" 2>&1)"
	check_eq "1: after a second forget: old" second "$(cat "$W/old1" 2>&1)"
	check "1: facetfs sync" sync_s
	check_eq "1: S3: the new name holds 'moved'" moved "$(in_s3 w/new1)"
	check_eq "1: S3: the old name holds 'second'" second "$(in_s3 w/old1)"
else
	skip "1: rename + drop_caches + re-create" "needs root to write /proc/sys/vm/drop_caches"
fi
echo moved >"$W/old1b"
mv "$W/old1b" "$W/new1b"
echo second >"$W/old1b"
check "1: rename + re-create without a forget: facetfs sync" sync_s
check_eq "1: without a forget: S3 new" moved "$(in_s3 w/new1b)"
check_eq "1: without a forget: S3 old" second "$(in_s3 w/old1b)"

# ==== (2) a reopened pending file is not published while it is written ====
section "(2) a reopened pending file is not published while it is written"
# writer FILE HALF_FILE REST_FILE TAG [FIRST]: (writes FIRST into FILE and
# closes it, then) opens FILE with O_TRUNC, writes HALF, touches
# $T/TAG.written, waits for $T/TAG.go, writes REST, closes.
writer() {
	python3 - "$T" "$@" <<'PY' &
import os, sys, time
tmp, path, half, rest, tag = sys.argv[1:6]
if len(sys.argv) > 6:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, sys.argv[6].encode())
    os.close(fd)
fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
os.write(fd, open(half, "rb").read())
open(os.path.join(tmp, tag + ".written"), "w").close()
end = time.monotonic() + 300      # the test died: do not wait forever
while not os.path.exists(os.path.join(tmp, tag + ".go")) and time.monotonic() < end:
    time.sleep(0.05)
os.write(fd, open(rest, "rb").read())
os.close(fd)
PY
	WRITER_PID=$!
}
head -c 32768 /dev/urandom >"$T/half2"
head -c 32768 /dev/urandom >"$T/rest2"
cat "$T/half2" "$T/rest2" >"$T/full2"
half_md5=$(md5sum <"$T/half2" | cut -d' ' -f1)
full_md5=$(md5sum <"$T/full2" | cut -d' ' -f1)
# S3 does not hold KEY's partial bytes / its events never showed them.
not_half() { ! s3_same "$1" "$T/half2"; }
no_half_event() { ! event_seen "$1" "$half_md5"; }
echo "version one" >"$W/t2"
writer "$W/t2" "$T/half2" "$T/rest2" t2
check "2: a writer reopens the pending file with O_TRUNC, writes half" wait_for 20 test -e "$T/t2.written"
"$FACETFS" sync "$M" >"$T/sync2.out" 2>&1 &
spid=$!
wait_for 30 eval '! pid_alive '"$spid"   # let it act; it may also wait for the writer
check "2: while the writer holds it, S3 does not have the partial bytes (facetfs sync ran)" \
	not_half w/t2
touch "$T/t2.go"
wait "$WRITER_PID"
check_eq "2: the writer closes" 0 $?
wait "$spid"
check "2: facetfs sync after the close" sync_s
check "2: S3 has the final bytes" s3_same w/t2 "$T/full2"
check "2: the final version's event arrived" wait_for 20 event_seen w/t2 "$full_md5"
check "2: no event ever showed the partial bytes' ETag" no_half_event w/t2

# drain_delay 0: the drain meets the reopened file on its own (the writer
# closes a first version and reopens it at once, while it is pending).
writer "$Q/t2q" "$T/half2" "$T/rest2" t2q "version one"
check "2q: drain_delay 0: a writer closes, reopens at once, writes half" wait_for 20 test -e "$T/t2q.written"
# the drain had its chance: it found the writer, or had published before
# the reopen
drain_saw_writer() { grep -q "^$B/q/t2q	.*	open for writing$" "$MQ/.facetfs/pending"; }
wait_for 20 eval 'drain_saw_writer || not_pending "$MQ" q/t2q'
diag <<<"2q: .facetfs/pending: $(grep "^$B/q/t2q	" "$MQ/.facetfs/pending" || echo "(not listed)")"
check "2q: while the writer holds it, S3 does not have the partial bytes" \
	not_half q/t2q
touch "$T/t2q.go"
wait "$WRITER_PID"
check_eq "2q: the writer closes" 0 $?
check "2q: facetfs sync" sync_q
check "2q: S3 has the final bytes" s3_same q/t2q "$T/full2"
check "2q: the final version's event arrived" wait_for 20 event_seen q/t2q "$full_md5"
check "2q: no event ever showed the partial bytes' ETag" no_half_event q/t2q

# ==== (3) rm -rf, rmdir, mv DIR right after cp -r ====
section "(3) rm -rf, rmdir, mv DIR right after cp -r"
mkdir -p "$T/src3/sub/deeper"
for i in $(seq -w 1 8); do
	head -c $((1000 + 10#$i * 313)) /dev/urandom >"$T/src3/a$i"
	head -c $((2000 + 10#$i * 71)) /dev/urandom >"$T/src3/sub/b$i"
	head -c $((300 + 10#$i)) /dev/urandom >"$T/src3/sub/deeper/c$i"
done
# same_tree_s3 PREFIX DIR: S3's keys under PREFIX are DIR's files, same bytes.
same_tree_s3() {
	local f
	[[ $(s3_keys "$1" | sed "s|^$1||" | LC_ALL=C sort) == "$(list_files "$2")" ]] || return 1
	while IFS= read -r f; do s3_same "$1$f" "$2/$f" || return 1; done < <(list_files "$2")
}
cp -r "$T/src3" "$W/d3a"
check "3: rm -rf right after cp -r" rm -rf "$W/d3a"
check "3: … the directory is gone" test ! -e "$W/d3a"
cp -r "$T/src3" "$W/d3b"
rm -f "$W/d3b/sub/deeper/"*
check "3: rmdir of a directory whose pending files were just unlinked" rmdir "$W/d3b/sub/deeper"
mkdir "$W/d3c" && echo x >"$W/d3c/f" && rm "$W/d3c/f"
check "3: mkdir, write, unlink, rmdir" rmdir "$W/d3c"
cp -r "$T/src3" "$W/d3d"
check "3: mv DIR right after cp -r" mv "$W/d3d" "$W/d3e"
check "3: … the old directory is gone" test ! -e "$W/d3d"
check "3: … the new one has the tree, same bytes" diff -r "$T/src3" "$W/d3e"
check "3: facetfs sync" sync_s
check_eq "3: S3: nothing under the removed and moved directories" "" \
	"$(s3_keys w/d3a/; s3_keys w/d3b/sub/deeper/; s3_keys w/d3c/; s3_keys w/d3d/)"
check "3: S3: the moved tree under its new name, same bytes" same_tree_s3 w/d3e/ "$T/src3"
cp -r "$T/src3" "$Q/d3f"
check "3q: drain_delay 0: rm -rf right after cp -r" rm -rf "$Q/d3f"
cp -r "$T/src3" "$Q/d3g"
check "3q: drain_delay 0: mv DIR right after cp -r" mv "$Q/d3g" "$Q/d3h"
check "3q: … the new one has the tree" diff -r "$T/src3" "$Q/d3h"
check "3q: facetfs sync" sync_q
check_eq "3q: S3: nothing under the removed and moved directories" "" \
	"$(s3_keys q/d3f/; s3_keys q/d3g/)"
check "3q: S3: the moved tree under its new name, same bytes" same_tree_s3 q/d3h/ "$T/src3"

# ==== (5) a second view of the mount reads pending files ====
section "(5) a second view of the mount reads pending files"
echo "new pending" >"$W/n5"
check_eq "5: a new pending file reads through the second view" "new pending" "$(cat "$R/n5" 2>&1)"
check "5: … and is listed there" sh -c "ls '$R' | grep -qx n5"
put_other w/r5 "old in S3"
check "5: the first version reached the gateway" wait_for 20 \
	sh -c "[ \"\$(cat '$W/r5' 2>/dev/null)\" = 'old in S3' ]"
echo "rewritten, pending" >"$W/r5"
check_eq "5: a rewritten pending file reads its pending bytes through the second view" \
	"rewritten, pending" "$(cat "$R/r5" 2>&1)"
check_eq "5: … with their size" 19 "$(stat -c %s "$R/r5" 2>&1)"
put_other w/r5b "old in S3"
check "5: read through the second view before the rewrite" wait_for 20 \
	sh -c "[ \"\$(cat '$R/r5b' 2>/dev/null)\" = 'old in S3' ]"
echo "rewritten, pending" >"$W/r5b"
check_eq "5: then the second view reads the pending bytes" \
	"rewritten, pending" "$(cat "$R/r5b" 2>&1)"
check "5: facetfs sync" sync_s
# A descriptor opened on a pending file and read after its publish: the
# bytes it was opened on, never S3's older version (whose ETag no longer
# matches: ESTALE) or none at all.
put_other w/r5c "old in S3, old in S3"
check "5: the old version of r5c reached the gateway" wait_for 20 \
	sh -c "[ \"\$(cat '$W/r5c' 2>/dev/null)\" = 'old in S3, old in S3' ]"
head -c 300000 /dev/urandom >"$T/r5c" && cp "$T/r5c" "$W/r5c" && cp "$T/r5c" "$W/n5c"
check "5: descriptors opened on pending files read them whole after the publish" \
	python3 - "$W" "$R" "$T/r5c" "$FACETFS" "$M" <<'PY'
import os, subprocess, sys
w, r, want_path, facetfs, mnt = sys.argv[1:]
want = open(want_path, "rb").read()
fds = {}
for view in (w, r):
    for name in ("r5c", "n5c"):
        a = os.open(os.path.join(view, name), os.O_RDONLY)   # read before and after
        b = os.open(os.path.join(view, name), os.O_RDONLY)   # first read after
        assert os.pread(a, 4096, 0) == want[:4096], (view, name, "before")
        fds[(view, name)] = (a, b)
subprocess.run([facetfs, "sync", mnt], check=True, stdout=subprocess.DEVNULL)
for (view, name), (a, b) in fds.items():
    for fd in (a, b):
        got = b"".join(os.pread(fd, 65536, off) for off in range(0, len(want), 65536))
        assert got == want, (view, name, fd, len(got))
        os.close(fd)
PY
check "5: S3 has r5c" s3_same w/r5c "$T/r5c"
check "5: S3 has n5c" s3_same w/n5c "$T/r5c"

# ==== (4) another client's newer version wins, ours is set aside ====
section "(4) another client's newer version wins, ours is set aside"
c0=$(conflicts "$M")
put_other w/c4a "base"
check "4: the base version reached the gateway" wait_for 20 \
	sh -c "[ \"\$(cat '$W/c4a' 2>/dev/null)\" = base ]"
printf 'ours, fsynced' >"$T/ours4a"
python3 - "$W/c4a" "$T" <<'PY' &
import os, sys, time
path, tmp = sys.argv[1:3]
fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
os.write(fd, b"ours, fsynced")
open(os.path.join(tmp, "c4a.opened"), "w").close()
end = time.monotonic() + 300
while not os.path.exists(os.path.join(tmp, "c4a.go")) and time.monotonic() < end:
    time.sleep(0.05)
try:
    os.fsync(fd)
except OSError:
    pass
os.close(fd)
PY
fpid=$!
wait_for 20 test -e "$T/c4a.opened"
put_other w/c4a "theirs, after our open"
touch "$T/c4a.go"
wait "$fpid"
check_eq "4: fsync against a newer version: S3 keeps the other client's" \
	"theirs, after our open" "$(in_s3 w/c4a)"
check "4: … facetfs sync" sync_s
check_eq "4: … and after facetfs sync" "theirs, after our open" "$(in_s3 w/c4a)"
check "4: … ours is in .facetfs/recovered" in_recovered "$M" "$T/ours4a"
check "4: … the conflict is counted" test "$(conflicts "$M")" -ge $((c0 + 1))

c0=$(conflicts "$M")
printf 'ours, sealed' >"$T/ours4b"
cp "$T/ours4b" "$W/c4b"
put_other w/c4b "theirs, after our close"
check "4: a new pending file written outside before the drain: facetfs sync" sync_s
check_eq "4: … S3 keeps the other client's" "theirs, after our close" "$(in_s3 w/c4b)"
check "4: … ours is in .facetfs/recovered" in_recovered "$M" "$T/ours4b"
check_eq "4: … counted once" $((c0 + 1)) "$(conflicts "$M")"

c0=$(conflicts "$M")
put_other w/c4c "base"
wait_for 20 sh -c "[ \"\$(cat '$W/c4c' 2>/dev/null)\" = base ]"
printf 'ours, sealed on base' >"$T/ours4c"
cp "$T/ours4c" "$W/c4c"
put_other w/c4c "theirs, after our close"
check "4: a rewritten pending file written outside before the drain: facetfs sync" sync_s
check_eq "4: … S3 keeps the other client's" "theirs, after our close" "$(in_s3 w/c4c)"
check "4: … ours is in .facetfs/recovered" in_recovered "$M" "$T/ours4c"
check_eq "4: … counted once" $((c0 + 1)) "$(conflicts "$M")"

# The other side of the rule (docs/semantics.md): another client deleted
# the version a pending rewrite was based on. The delete removed an older
# version; ours is newer than both: published, no conflict.
c0=$(conflicts "$M")
put_other w/c4g "base, to be deleted"
wait_for 20 sh -c "[ \"\$(cat '$W/c4g' 2>/dev/null)\" = 'base, to be deleted' ]"
printf 'ours, over the delete' >"$T/ours4g"
cp "$T/ours4g" "$W/c4g"
check "4: another client deletes the base of a pending rewrite" "$S3TOOL" delete "$B" w/c4g
check "4: … facetfs sync" sync_s
check "4: … S3 has ours" s3_same w/c4g "$T/ours4g"
check_eq "4: … no conflict counted" "$c0" "$(conflicts "$M")"

# truncate(2) of a path whose object moved on without the gateway hearing
# (the bridge is stopped: that event is lost).
c0=$(conflicts "$M")
put_other w/c4d "base, long enough"
wait_for 20 sh -c "[ \"\$(cat '$W/c4d' 2>/dev/null)\" = 'base, long enough' ]"
n0=$(recovered_count "$M")
bed_cmd bridge-stop >/dev/null 2>&1
put_other w/c4d "theirs, unheard of"
# truncate(2) itself (truncate(1) opens the file, which reads the newest
# version first: then there is no conflict to find)
python3 -c 'import os, sys; os.truncate(sys.argv[1], 0)' "$W/c4d"
trc=$?
bed_cmd bridge-start >/dev/null 2>&1
check "4: truncate against an unheard-of newer version: facetfs sync" sync_s
check_eq "4: … S3 keeps the other client's" "theirs, unheard of" "$(in_s3 w/c4d)"
if ((trc == 0)); then
	check "4: … the truncated file is in .facetfs/recovered" test "$(recovered_count "$M")" -gt "$n0"
	check "4: … the conflict is counted" test "$(conflicts "$M")" -ge $((c0 + 1))
else
	ok "4: … the truncate was refused ($trc), nothing to set aside"
fi

# ==== (7) pending files hold no descriptor ====
section "(7) pending files hold no descriptor"
mkdir -p "$T/src7"
for i in $(seq 1 1500); do printf 'file %s\n' "$i" >"$T/src7/f$i"; done
if prlimit --pid "$(gateway_pid S)" --nofile=512:512; then
	check "7: cp -r of 1,500 files under a limit of 512 descriptors" cp -r "$T/src7" "$W/d7"
	check "7: … all 1,500 pending" test "$(stat_field "$M" .drain.pending_files)" -ge 1500
	check "7: … facetfs sync" sync_s
	check_eq "7: … S3 has the 1,500" 1500 "$(s3_keys w/d7/ | wc -l)"
	check_eq "7: … with their bytes (f1499)" "file 1499" "$(in_s3 w/d7/f1499)"
else
	skip "7: 1,500 pending files under 512 descriptors" "prlimit --pid failed"
fi

# ==== (4) the recovery at start against a newer version ====
section "(4) the recovery at start against a newer version"
put_other w/c4e "base"
wait_for 20 sh -c "[ \"\$(cat '$W/c4e' 2>/dev/null)\" = base ]"
printf 'ours, pending at the crash' >"$T/ours4e"
cp "$T/ours4e" "$W/c4e"
echo "only ours" >"$W/c4f"
crash_gateway S
fusermount3 -uz "$M" 2>/dev/null
put_other w/c4e "theirs, during the crash"
start_gateway S "$T/s.json" "$M" || { not_ok "gateway S starts after the crash"; exit 1; }
check "4: after kill -9 and a restart: facetfs sync" sync_s
check_eq "4: … S3 keeps the other client's version" "theirs, during the crash" "$(in_s3 w/c4e)"
check "4: … ours is in .facetfs/recovered" in_recovered "$M" "$T/ours4e"
check "4: … the conflict is counted" test "$(conflicts "$M")" -ge 1
check_eq "4: … a file no one else wrote is published" "only ours" "$(in_s3 w/c4f)"

# ==== (6) rename while the upload runs ====
section "(6) rename while the upload runs"
head -c $((64 << 20)) /dev/urandom >"$T/big6"
sum6=$(sha256sum <"$T/big6" | cut -d' ' -f1)
echo 2097152 >"$T/throttle"   # 2 MiB/s a connection until let go
check "6: cp of 64 MiB (8 parts) into the drain_delay 0 view" cp "$T/big6" "$Q/big6.old"
uploading() { (($(stat_field "$MQ" .drain.uploading) >= 1)); }
check "6: the drain uploads it (drain.uploading >= 1)" wait_for 60 uploading
mv "$Q/big6.old" "$Q/big6.new" 2>"$T/mv6.err" &
mvpid=$!
wait_for 30 eval '! pid_alive '"$mvpid"   # it may also wait for the upload
diag <<<"6: at the rename's return (or 30 s): drain.uploading $(stat_field "$MQ" .drain.uploading)"
rm -f "$T/throttle"
wait "$mvpid"
check_eq "6: mv during the upload" 0 $?
check "6: facetfs sync" sync_q
check_eq "6: S3 has the new name, same SHA-256" "$sum6" "$(in_s3 q/big6.new | sha256sum | cut -d' ' -f1)"
check "6: … and not the old name" s3_lacks q/big6.old
check "6: the mount lists the new name only" sh -c "[ -e '$Q/big6.new' ] && [ ! -e '$Q/big6.old' ]"
rm -f "$T/big6"

section "(6) the same with 4 MiB, then written in place"
# The same with a 4 MiB file (one PUT), then written in place under its
# new name while that upload may still run.
head -c $((4 << 20)) /dev/urandom >"$T/mid6"
python3 -c 'import sys; b = bytearray(open(sys.argv[1], "rb").read()); b[1:4] = b"BBB"; open(sys.argv[2], "wb").write(b)' \
	"$T/mid6" "$T/mid6.want"
echo 524288 >"$T/throttle"   # 512 KiB/s: 8 s for the PUT until let go
q6=$(conflicts "$MQ")
cp "$T/mid6" "$Q/mid6.old"
check "6b: the drain uploads a 4 MiB file" wait_for 60 uploading
(mv "$Q/mid6.old" "$Q/mid6.new" && touch "$T/mv6b.done" &&
	python3 -c 'import os, sys; fd = os.open(sys.argv[1], os.O_WRONLY); os.pwrite(fd, b"BBB", 1); os.close(fd)' \
		"$Q/mid6.new") 2>"$T/mv6b.err" &
mvpid=$!
wait_for 30 test -e "$T/mv6b.done"   # the write may wait for the upload
rm -f "$T/throttle"
wait "$mvpid"
check_eq "6b: mv during the upload, then a write in place under the new name" 0 $?
check "6b: facetfs sync" sync_q
check "6b: the mount reads the renamed file with the write" cmp -s "$Q/mid6.new" "$T/mid6.want"
check "6b: S3 has the new name with the write" s3_same q/mid6.new "$T/mid6.want"
check "6b: … and not the old name" s3_lacks q/mid6.old
check_eq "6b: no conflict counted" "$q6" "$(conflicts "$MQ")"

section "(6) unlink, and a writer's append and fsync, while the upload runs"
# rm of a file whose upload runs: it waits for the upload, then deletes
# the key; nothing of it is left in S3 or in the mount.
head -c $((4 << 20)) /dev/urandom >"$T/u6"
echo 524288 >"$T/throttle"
cp "$T/u6" "$Q/u6"
check "6c: the drain uploads a 4 MiB file" wait_for 60 uploading
rm "$Q/u6" 2>"$T/rm6c.err" &
rmpid=$!
wait_for 5 eval '! pid_alive '"$rmpid"   # it waits for the upload
diag <<<"6c: rm returned before the relay was let go: $(pid_alive "$rmpid" && echo no || echo yes)"
rm -f "$T/throttle"
wait "$rmpid"
check_eq "6c: rm during the upload" 0 $?
check "6c: facetfs sync" sync_q
check "6c: the mount no longer lists it" test ! -e "$Q/u6"
check "6c: S3 does not have it" s3_lacks q/u6
# A writer opening the file while its upload runs waits for it; its
# append and fsync publish the file with the append after it.
head -c $((4 << 20)) /dev/urandom >"$T/f6"
cp "$T/f6" "$T/f6.want" && printf 'appended' >>"$T/f6.want"
echo 524288 >"$T/throttle"
cp "$T/f6" "$Q/f6"
check "6d: the drain uploads a 4 MiB file" wait_for 60 uploading
python3 -c 'import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
os.write(fd, b"appended")
os.fsync(fd)
os.close(fd)' "$Q/f6" 2>"$T/fsync6d.err" &
fpid=$!
wait_for 5 eval '! pid_alive '"$fpid"
rm -f "$T/throttle"
wait "$fpid"
check_eq "6d: append and fsync during the upload" 0 $?
check "6d: S3 has the file with the append at the fsync's return" s3_same q/f6 "$T/f6.want"
check "6d: facetfs sync" sync_q
check "6d: S3 still has it with the append" s3_same q/f6 "$T/f6.want"
check "6d: the mount reads it" cmp -s "$Q/f6" "$T/f6.want"
rm -f "$T/u6" "$T/f6" "$T/f6.want"
# Readers meet the upload: descriptors opened while it runs read the
# file whole, again and again, until the publish is over, and once more
# after: the staged bytes, then the published version's, never ESTALE.
head -c $((4 << 20)) /dev/urandom >"$T/e6"
echo 524288 >"$T/throttle"
cp "$T/e6" "$Q/e6"
check "6e: the drain uploads a 4 MiB file" wait_for 60 uploading
python3 - "$Q/e6" "$T/e6" "$T/e6.go" "$T/e6.reading" >"$T/e6.out" 2>&1 <<'PY' &
import os, sys
path, want_path, go, reading = sys.argv[1:]
want = open(want_path, "rb").read()
def whole(fd):
    return b"".join(os.pread(fd, 131072, off) for off in range(0, len(want), 131072))
fds = [os.open(path, os.O_RDONLY) for _ in range(2)]
rounds = 0
while not os.path.exists(go):
    for fd in fds:
        assert whole(fd) == want, "round %d" % rounds
    rounds += 1
    open(reading, "w").close()
for fd in fds + [os.open(path, os.O_RDONLY)]:
    assert whole(fd) == want, "after the publish"
    os.close(fd)
print("rounds during the upload:", rounds)
PY
rpid=$!
wait_for 30 test -e "$T/e6.reading"
diag <<<"6e: readers started with drain.uploading $(stat_field "$MQ" .drain.uploading)"
rm -f "$T/throttle"
check "6e: facetfs sync" sync_q
touch "$T/e6.go"
wait "$rpid"
check_eq "6e: readers during and after the upload read it whole" 0 $?
diag <"$T/e6.out"
check "6e: S3 has it" s3_same q/e6 "$T/e6"
rm -f "$T/e6"

check_eq "no conflict counted by the quick gateway (no other client wrote q/)" "$q0" "$(conflicts "$MQ")"
check "gateway Q stops" stop_gateway Q
check "gateway S stops" stop_gateway S
section "end"
