#!/usr/bin/env bash
# t_cache — the burst buffer (sync/cache/bcache.h) on the real bed: blocks kept
# across a restart and a kill -9 (no GET), a session descriptor reading
# its version from the buffer after the object was replaced, the byte
# budget shared with staging never exceeded, a corrupted block refetched,
# `eventual` views making no S3 request for a cached object and never
# mixing versions, warm-on-arrival, a full cache file system, and one
# gateway per cache dir.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/gateway.sh"
require_bed

B=$(new_bucket cache)
bed_cmd notify "$B" >/dev/null || { not_ok "notify"; exit 1; }
T=$(test_tmp)
view() { view_file "$T/views" "$1" "$B" "{ \"prefix\": \"$2/\" }" "\"layout\": { \"strip_prefix\": \"$2/\" }${3:+, $3}"; }
view sess s
view ev e '"visibility": "eventual"'
view warm w '"visibility": "eventual", "warm": true'
view rw b '"writable": true'
# 8 MiB in all, blocks of 256 KiB.
gw_config "$T/gw.json" "$T/state" "$T/views" "" "" "" 8MiB "" 256KiB
M=$T/mnt
st() { stat_field "$M" "$1"; }
s3_requests() { jq '[.s3.list, .s3.head, .s3.get, .s3.put, .s3.copy, .s3.delete, .s3.get_tagging] | add' "$M/.facetfs/stats"; }
drop_caches() { sync; echo 1 >/proc/sys/vm/drop_caches; }
SRC_LIB=$(dirname "$0")/../lib

head -c $((3 << 20)) /dev/urandom >"$T/one"
head -c $((3 << 20)) /dev/urandom >"$T/one-v2"
head -c $((1 << 20)) /dev/urandom >"$T/ev"
aws_s3 s3 cp "$T/one" "s3://$B/s/one" >/dev/null 2>&1 || not_ok "PUT s/one"
aws_s3 s3 cp "$T/ev" "s3://$B/e/obj" >/dev/null 2>&1 || not_ok "PUT e/obj"
for i in 1 2 3 4 5 6; do
	head -c $((4 << 20)) /dev/urandom >"$T/big$i"
	aws_s3 s3 cp "$T/big$i" "s3://$B/s/big$i" >/dev/null 2>&1 || not_ok "PUT s/big$i"
done

start_gateway A "$T/gw.json" "$M" || { not_ok "gateway starts"; exit 1; }
wait_for 20 test -f "$M/sess/big6" || not_ok "the first scan lists the objects"

# ---- 1. kept across a restart and a kill -9 ----
check "first read of s/one" cmp -s "$M/sess/one" "$T/one"
check "it needed GETs" test "$(st .s3.get)" -ge 1
check "blocks are cached" test "$(st .cache.blocks)" -ge 12
stop_gateway A
start_gateway A "$T/gw.json" "$M" || { not_ok "gateway restarts"; exit 1; }
check "after a restart: the same bytes" cmp -s "$M/sess/one" "$T/one"
check_eq "… and no GET" 0 "$(st .s3.get)"
crash_gateway A
fusermount3 -uz "$M" 2>/dev/null
start_gateway A "$T/gw.json" "$M" || { not_ok "gateway starts after kill -9"; exit 1; }
check "after kill -9: the same bytes" cmp -s "$M/sess/one" "$T/one"
check_eq "… and no GET" 0 "$(st .s3.get)"

# ---- 2. a session descriptor keeps its version ----
out=$(python3 "$SRC_LIB/replaced_reader.py" "$M/sess/one" "$T/one" "$T/one-v2" "$B" s/one 2>&1)
check_eq "a new open reads v2; the descriptor opened on v1 reads v1 from the buffer" \
	"first=old name=3145728 descriptor=3145728/old same-inode=False" "$out"
check "the replaced version's blocks are released" test "$(st .cache.dropped)" -ge 1

# ---- 2b. one size per kernel inode: a longer old version ----
# The descriptor's inode keeps v1's size; the name's next lookup gets a new
# inode for v2 (fuse/inode.h inode_retire).
head -c $((600 << 10)) /dev/urandom >"$T/long"
head -c $((200 << 10)) /dev/urandom >"$T/long-v2"
aws_s3 s3 cp "$T/long" "s3://$B/s/long" >/dev/null 2>&1 || not_ok "PUT s/long"
wait_for 10 test -f "$M/sess/long" || not_ok "s/long listed"
out=$(python3 "$SRC_LIB/replaced_reader.py" "$M/sess/long" "$T/long" "$T/long-v2" "$B" s/long 2>&1)
check_eq "v1 600 KiB -> v2 200 KiB: the name shows v2; the old descriptor keeps v1's size and reads all of it" \
	"first=old name=204800 descriptor=614400/old same-inode=False" "$out"

# ---- 3. the budget: 3x max_bytes read while 2 MiB are staged ----
exec 7>"$M/rw/staged"
head -c $((2 << 20)) /dev/urandom >"$T/staged"
cat "$T/staged" >&7
(while :; do jq -r '.cache.used_bytes' "$M/.facetfs/stats" 2>/dev/null; sleep 0.05; done) >"$T/used" &
sampler=$!
for i in 1 2 3 4 5 6; do
	cmp -s "$M/sess/big$i" "$T/big$i" || not_ok "read s/big$i"
done
kill "$sampler"; wait "$sampler" 2>/dev/null
max=$(sort -n "$T/used" | tail -1)
check "used_bytes sampled $(wc -l <"$T/used") times, at most $max <= 8388608" test "${max:-0}" -le 8388608
check_eq "staged bytes are counted in it" 2097152 "$(st .cache.staged_bytes)"
check "blocks were evicted ($(st .cache.evictions))" test "$(st .cache.evictions)" -ge 1
exec 7>&-
aws_s3 s3 cp "s3://$B/b/staged" "$T/staged.back" >/dev/null 2>&1
check "the staged file was never evicted: S3 has all of it" cmp -s "$T/staged" "$T/staged.back"

# ---- 4. a corrupted block ----
cmp -s "$M/sess/big6" "$T/big6" || not_ok "read s/big6"
blk=$(grep -rl --binary-files=text "s/big6" "$T/state/cache/blocks" | head -1)
if [[ -n $blk ]]; then
	python3 - "$blk" <<'PY'
import sys
p = sys.argv[1]
with open(p, 'r+b') as f:
    f.seek(-100, 2)
    b = f.read(1)
    f.seek(-100, 2)
    f.write(bytes([b[0] ^ 0xff]))
PY
	before=$(st .cache.corrupt)
	drop_caches
	check "a flipped byte in a block: the read is still right" cmp -s "$M/sess/big6" "$T/big6"
	check "… and counted corrupt" test "$(st .cache.corrupt)" -gt "$before"
else
	not_ok "a block file of s/big6 in the cache"
fi

# ---- 5. eventual ----
check "eventual: first read" cmp -s "$M/ev/obj" "$T/ev"
drop_caches
r0=$(s3_requests)
check "eventual: a cached object again" cmp -s "$M/ev/obj" "$T/ev"
check_eq "… with no S3 request of any kind" "$r0" "$(s3_requests)"
head -c $((1 << 20)) /dev/urandom >"$T/ev2"
aws_s3 s3 cp "$T/ev2" "s3://$B/e/obj" >/dev/null 2>&1
if wait_for 20 cmp -s "$M/ev/obj" "$T/ev2"; then ok "eventual: the next open after the event reads the new bytes"; else not_ok "eventual: the new bytes"; fi
# Opens racing outside changes: every read sees one version whole.
out=$(python3 - "$M/ev/obj" "$B" "$T/ev2" "$FACETFS_BUILD/tests/bed/s3tool" "$T/evc" <<'PY' 2>&1
import os, subprocess, sys, threading
path, bucket, before, s3tool, tmp = sys.argv[1:6]
before = open(before, 'rb').read()    # the version before the race
size = 1 << 20
stop = False
bad = []
reads = [0]
def reader():
    while not stop:
        try:
            with open(path, 'rb') as f:
                d = f.read()
        except OSError as e:
            continue          # ESTALE after a byte was served: allowed
        if d != before and len(d) == size and d.count(d[:1]) != size:
            i = 0
            while d[i] == d[0]:
                i += 1
            bad.append(i)         # where the version changes
        reads[0] += 1
ts = [threading.Thread(target=reader) for _ in range(3)]
for t in ts: t.start()
for i in range(40):
    c = b'ab'[i % 2:i % 2 + 1] * size
    with open(tmp, 'wb') as f:
        f.write(c)
    subprocess.run([s3tool, 'put', bucket, 'e/obj', tmp], check=True, stdout=subprocess.DEVNULL)
stop = True
for t in ts: t.join()
print('mixed=%d reads=%d (changes at %s)' % (len(bad), reads[0], sorted(set(bad))[:8]))
PY
)
case $out in
"mixed=0 reads="*) ok "eventual: opens racing 40 outside changes never mix versions ($out)" ;;
*) not_ok "eventual: opens racing outside changes never mix versions" "$out" ;;
esac

# ---- 6. warm on arrival ----
head -c $((600 << 10)) /dev/urandom >"$T/w"
f0=$(st .cache.warm.fetched)
aws_s3 s3 cp "$T/w" "s3://$B/w/new" >/dev/null 2>&1
if wait_for 20 sh -c "[ \$(jq .cache.warm.fetched '$M/.facetfs/stats') -gt $f0 ]"; then
	ok "warm: the new object was fetched ahead"
	g0=$(st .s3.get)
	check "warm: the first open reads it" cmp -s "$M/warm/new" "$T/w"
	check_eq "… with no GET" "$g0" "$(st .s3.get)"
	check "… and counts as used" test "$(st .cache.warm.used)" -ge 1
else
	not_ok "warm: the new object was fetched ahead" "$(jq -c .cache "$M/.facetfs/stats")"
fi

# ---- 7. one gateway per cache dir ----
mkdir -p "$T/mnt2"
gw_config "$T/gw2.json" "$T/state2" "$T/views" "" "" "" 8MiB "$T/state/cache" 256KiB
# second_refused OUT: a second gateway on the same cache dir exits with an
# error (its output in OUT) and mounts nothing; one that mounts after all
# is unmounted and stopped by its PID here.
second_done() { ! pid_alive "$1" || is_mounted "$T/mnt2"; }
second_refused() {
	local pid rc
	"$FACETFS" mount -c "$T/gw2.json" "$T/mnt2" -f </dev/null >"$1" 2>&1 &
	pid=$!
	wait_for 20 second_done "$pid"
	if pid_alive "$pid"; then
		is_mounted "$T/mnt2" && { fusermount3 -u "$T/mnt2" 2>/dev/null || umount -l "$T/mnt2"; }
		kill -TERM "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
		return 1
	fi
	wait "$pid"
	rc=$?
	((rc != 0)) && ! is_mounted "$T/mnt2"
}
check "a second gateway on the same cache dir is refused" second_refused "$T/second.out"
check "… saying why" grep -q "another gateway" "$T/second.out"

# ---- 8. the blocks directory removed while mounted (after 7: its own lock goes too,
# cache.dir's stays) ----
rm -rf "$T/state/cache/blocks"
drop_caches
check "blocks/ removed while mounted: a read is still right" cmp -s "$M/sess/big2" "$T/big2"
check "… and blocks are stored again" test -n "$(find "$T/state/cache/blocks" -type f -name '*-*' 2>/dev/null | head -1)"
check "blocks/ (and its lock) removed: a second gateway on the cache dir is still refused" \
	second_refused "$T/second2.out"
check "… saying why" grep -q "another gateway" "$T/second2.out"

# ---- 8b. the whole cache.dir removed while mounted: staging, blocks and lock ----
rm -rf "$T/state/cache"
drop_caches
check "cache.dir removed while mounted: a read is still right" cmp -s "$M/sess/big2" "$T/big2"
head -c 300000 /dev/urandom >"$T/after-rm"
check "… a file written through the mount closes without error" cp "$T/after-rm" "$M/rw/after-rm"
aws_s3 s3 cp "s3://$B/b/after-rm" "$T/after-rm.back" >/dev/null 2>&1
check "… and S3 has it" cmp -s "$T/after-rm.back" "$T/after-rm"
check "… the staging directory is made again" test -d "$T/state/cache/staging/recovered"
check "cache.dir removed: a second gateway on it is still refused" second_refused "$T/second3.out"
check "… saying why" grep -q "another gateway" "$T/second3.out"
stop_gateway A

# ---- 9. the cache on a small full file system ----
mkdir -p "$T/tiny"
if mount -t tmpfs -o size=4m tmpfs "$T/tiny" 2>/dev/null; then
	gw_config "$T/gw-tiny.json" "$T/state-tiny" "$T/views" "" "" "" 4MiB "$T/tiny/cache" 256KiB
	if start_gateway C "$T/gw-tiny.json" "$M"; then
		dd if=/dev/zero of="$T/tiny/filler" bs=64k >/dev/null 2>&1   # until ENOSPC
		drop_caches
		check "a full cache file system: reads stay right" cmp -s "$M/sess/big1" "$T/big1"
		check "… and again" cmp -s "$M/sess/big1" "$T/big1"
		check "… the failed block writes are counted" test "$(st .cache.write_errors)" -ge 1
		stop_gateway C
	else
		not_ok "a gateway with its cache on a 4 MiB tmpfs starts"
	fi
	umount "$T/tiny" || umount -l "$T/tiny"
else
	skip "the cache on a full file system" "cannot mount a tmpfs here"
fi
