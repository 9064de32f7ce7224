#!/usr/bin/env bash
# t_coldread — the burst buffer's admission rule and the cold read path
# (docs/burst-buffer.md "Admission", "Copies per byte") on the real bed,
# with cache.cold_min lowered to 8 MiB: the bytes of every read path match
# the object (a cold stream with direct I/O, its second open that stores
# it, the page cache, the buffer after a restart, random 64 KiB reads,
# four cold readers at once and their second opens, an eventual view, a
# cold stream without direct I/O); an object read once as a cold stream
# is not cached (the stats show it: cold_opens, not_admitted, no block);
# an object read twice is served from the burst buffer after a restart
# with no GET; a stored block corrupted on disk is fetched again.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/gateway.sh"
require_bed

B=$(new_bucket cold)
aws_s3 s3 mb "s3://$B" >/dev/null || { not_ok "make bucket"; exit 1; }
T=$(test_tmp)
S3TOOL=$FACETFS_BUILD/tests/bed/s3tool
view_file "$T/views" sess "$B" '{ "prefix": "s/" }' '"layout": { "strip_prefix": "s/" }'
view_file "$T/views" ev "$B" '{ "prefix": "e/" }' \
	'"layout": { "strip_prefix": "e/" }, "visibility": "eventual"'
gw_config "$T/gw.json" "$T/state" "$T/views" "" "" "" 512MiB
jq '.cache += { "cold_min": "8MiB" }' "$T/gw.json" >"$T/gw2.json" && mv "$T/gw2.json" "$T/gw.json"
jq '.cache.cold_direct_io = false' "$T/gw.json" >"$T/gw-nodirect.json"
M=$T/mnt
st() { stat_field "$M" "$1"; }
drop_caches() { sync; echo 1 >/proc/sys/vm/drop_caches; }
MIB=$((1 << 20))

# name size: a local file of random bytes, PUT as s/NAME (e/NAME for ev*).
obj() {
	local key=s/$1
	[[ $1 == ev* ]] && key=e/$1
	head -c "$2" /dev/urandom >"$T/$1"
	"$S3TOOL" put "$B" "$key" "$T/$1" >/dev/null || not_ok "PUT $key"
}
obj big $((40 * MIB + 12345))
obj once $((24 * MIB))
obj rnd $((48 * MIB))
obj small $((2 * MIB + 7))
obj nodirect $((20 * MIB))
obj ev1 $((24 * MIB + 1))
for i in 1 2 3 4; do obj "four$i" $((16 * MIB + i)); done

start_gateway A "$T/gw.json" "$M" || { not_ok "gateway starts"; exit 1; }
wait_for 30 test -f "$M/sess/four4" -a -f "$M/ev/ev1" || not_ok "the first scan lists the objects"

# counters NAMES...: their values now, one line.
counters() {
	local q=
	for n in "$@"; do q+="${q:+, }.$n"; done
	jq -r "[$q] | map(tostring) | join(\" \")" "$M/.facetfs/stats"
}
C="s3.get s3.bytes_read cache.blocks cache.admitted cache.not_admitted cache.cold_opens fuse.open_direct_cold cache.corrupt"
# delta BEFORE AFTER: the differences of two counters lines, one line.
delta() { paste -d' ' <(tr ' ' '\n' <<<"$1") <(tr ' ' '\n' <<<"$2") | awk '{ printf "%s%.0f", (NR > 1 ? " " : ""), $2 - $1 }'; }
# field N LINE: the Nth value (1 = s3.get ... 8 = cache.corrupt).
field() { cut -d' ' -f"$1" <<<"$2"; }

# ---- 1. a cold stream: right bytes, direct I/O, nothing stored ----
a=$(counters $C)
check "cold stream (first open of 40 MiB, dd bs=1M): the bytes" \
	sh -c "dd if='$M/sess/big' bs=1M 2>/dev/null | cmp - '$T/big'"
d=$(delta "$a" "$(counters $C)")
echo "# first open: delta get bytes blocks admitted not_admitted cold_opens direct corrupt = $d"
check_eq "… one cold open, given direct I/O" "1 1" "$(field 6 "$d") $(field 7 "$d")"
check_eq "… nothing stored: no block, none admitted" "0 0" "$(field 3 "$d") $(field 4 "$d")"
check "… its 41 blocks counted as not admitted ($(field 5 "$d"))" test "$(field 5 "$d")" -ge 41
check_eq "… each byte fetched from S3 once" $((40 * MIB + 12345)) "$(field 2 "$d")"

# ---- 2. the second open stores it; the third reads the page cache ----
a=$(counters $C)
check "second open: the bytes" cmp "$M/sess/big" "$T/big"
d=$(delta "$a" "$(counters $C)")
echo "# second open: $d"
check_eq "… not cold, not direct" "0 0" "$(field 6 "$d") $(field 7 "$d")"
check_eq "… all 41 blocks stored (blocks, admitted)" "41 41" "$(field 3 "$d") $(field 4 "$d")"
a=$(counters $C)
check "third open: the bytes" cmp "$M/sess/big" "$T/big"
check_eq "… with no GET (page cache)" 0 "$(field 1 "$(delta "$a" "$(counters $C)")")"

# ---- 3. read twice, then a restart: the buffer serves it, no GET ----
stop_gateway A
drop_caches
start_gateway A "$T/gw.json" "$M" || { not_ok "gateway restarts"; exit 1; }
wait_for 20 sh -c "[ \"\$(jq .cache.loading '$M/.facetfs/stats')\" = 0 ]" ||
	not_ok "the start-up listing ends"
a=$(counters $C)
check "after a restart and drop_caches: the bytes" cmp "$M/sess/big" "$T/big"
d=$(delta "$a" "$(counters $C)")
check_eq "… with no GET, not cold" "0 0" "$(field 1 "$d") $(field 6 "$d")"

# ---- 4. a stored block corrupted on disk is fetched again ----
blk=$(grep -rl --binary-files=text "s/big" "$T/state/cache/blocks" | head -1)
if [[ -n $blk ]]; then
	python3 - "$blk" <<'PY'
import sys
with open(sys.argv[1], 'r+b') as f:
    f.seek(-1000, 2)
    b = f.read(1)
    f.seek(-1000, 2)
    f.write(bytes([b[0] ^ 0x5a]))
PY
	drop_caches
	a=$(counters $C)
	check "a stored block flipped on disk: the bytes are still right" cmp "$M/sess/big" "$T/big"
	d=$(delta "$a" "$(counters $C)")
	check_eq "… counted corrupt once, fetched again (one GET)" "1 1" "$(field 8 "$d") $(field 1 "$d")"
else
	not_ok "a block file of s/big in the cache"
fi

# ---- 5. read once as a cold stream: not cached, also after a restart ----
a=$(counters $C)
check "a 24 MiB object read once: the bytes" cmp "$M/sess/once" "$T/once"
d=$(delta "$a" "$(counters $C)")
check_eq "… cold, nothing stored" "1 0" "$(field 6 "$d") $(field 3 "$d")"
stop_gateway A
start_gateway A "$T/gw.json" "$M" || { not_ok "gateway restarts"; exit 1; }
a=$(counters $C)
check "after a restart it reads right" cmp "$M/sess/once" "$T/once"
d=$(delta "$a" "$(counters $C)")
check "… from S3 again, as a cold stream: the opens before the restart are forgotten ($d)" \
	test "$(field 1 "$d")" -ge 1 -a "$(field 6 "$d")" = 1 -a "$(field 3 "$d")" = 0

# ---- 6. random 64 KiB reads of a cold object ----
a=$(counters $C)
r0=$(st .readahead.wasted_bytes)
out=$(python3 - "$M/sess/rnd" "$T/rnd" <<'PY' 2>&1
import os, random, sys
path, ref = sys.argv[1:3]
want = open(ref, 'rb').read()
rng = random.Random(28)
fd = os.open(path, os.O_RDONLY)
bad = 0
for _ in range(40):
    off = rng.randrange(0, len(want) - 65536) // 4096 * 4096
    if os.pread(fd, 65536, off) != want[off:off + 65536]:
        bad += 1
os.close(fd)
print('bad=%d' % bad)
PY
)
d=$(delta "$a" "$(counters $C)")
wasted=$(( $(st .readahead.wasted_bytes) - r0 ))
echo "# 40 random 64 KiB reads: $d, read-ahead wasted $wasted bytes"
check_eq "40 random 64 KiB reads of a cold 48 MiB object: the bytes" "bad=0" "$out"
check "… at most 2 GETs a read ($(field 1 "$d") GETs)" test "$(field 1 "$d")" -le 80
check "… at most twice the bytes read fetched ($(field 2 "$d") for $((40 * 65536)))" \
	test "$(field 2 "$d")" -le $((2 * 40 * 65536))
check "… read-ahead wasted at most twice the bytes read ($wasted)" test "$wasted" -le $((2 * 40 * 65536))
check "… nothing stored" test "$(field 3 "$d")" = 0

# ---- 7. four cold readers at once, then their second opens at once ----
four() {
	local pids=() i rc=0
	for i in 1 2 3 4; do
		cmp "$M/sess/four$i" "$T/four$i" >"$T/four$i.out" 2>&1 &
		pids+=($!)
	done
	for i in 0 1 2 3; do
		wait "${pids[$i]}" || rc=1
	done
	return $rc
}
a=$(counters $C)
check "four cold readers of four 16 MiB objects at once: the bytes" four
d=$(delta "$a" "$(counters $C)")
check_eq "… four cold opens, four direct, nothing stored" "4 4 0" \
	"$(field 6 "$d") $(field 7 "$d") $(field 3 "$d")"
a=$(counters $C)
check "their second opens, four at once: the bytes" four
d=$(delta "$a" "$(counters $C)")
check_eq "… stored: 4 x 17 blocks" 68 "$(field 3 "$d")"

# ---- 8. eventual: a cold stream opened from the index ----
a=$(counters $C)
check "eventual view, a cold 24 MiB object: the bytes" cmp "$M/ev/ev1" "$T/ev1"
d=$(delta "$a" "$(counters $C)")
check_eq "… cold and direct" "1 1" "$(field 6 "$d") $(field 7 "$d")"

# ---- 9. a small object is stored at its first read ----
a=$(counters $C)
check "a 2 MiB object: the bytes" cmp "$M/sess/small" "$T/small"
d=$(delta "$a" "$(counters $C)")
check_eq "… stored at its first read (3 blocks), not cold" "3 0" "$(field 3 "$d") $(field 6 "$d")"

# ---- 10. cache.cold_direct_io false: cold, stored nowhere, page cache ----
stop_gateway A
start_gateway A "$T/gw-nodirect.json" "$M" || { not_ok "gateway starts without cold direct I/O"; exit 1; }
a=$(counters $C)
check "cold_direct_io false: a cold 20 MiB object: the bytes" cmp "$M/sess/nodirect" "$T/nodirect"
d=$(delta "$a" "$(counters $C)")
check_eq "… cold, not direct, nothing stored" "1 0 0" \
	"$(field 6 "$d") $(field 7 "$d") $(field 3 "$d")"
stop_gateway A
