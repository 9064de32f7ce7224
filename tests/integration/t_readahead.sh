#!/usr/bin/env bash
# t_readahead — parallel ranged read-ahead (sync/cache/reader.h) on the real bed:
# a large cold object read through the mount byte for byte, each byte
# fetched once by GETs that .facetfs/stats counts (several ranges ahead);
# a descriptor closed while ranges are in flight (they are counted as
# wasted, the gateway goes on serving); and an object replaced in S3 while
# a descriptor streams it: only the old bytes, then ESTALE, never a mix.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/gateway.sh"
require_bed

B=$(new_bucket ra)
aws_s3 s3 mb "s3://$B" >/dev/null || { not_ok "make bucket"; exit 1; }
T=$(test_tmp)
view_file "$T/views" sess "$B" '{ "prefix": "s/" }' '"layout": { "strip_prefix": "s/" }'
gw_config "$T/gw.json" "$T/state" "$T/views" "" "" "" 1GiB
# The bounds this test expects (the defaults, written out).
jq '.cache += { "readahead_streams": 4, "readahead_bytes": "64MiB",
                "readahead_total_streams": 16, "readahead_total_bytes": "256MiB" }' \
	"$T/gw.json" >"$T/gw2.json" && mv "$T/gw2.json" "$T/gw.json"
M=$T/mnt
st() { stat_field "$M" "$1"; }
MIB=$((1 << 20))
SIZE=$((96 * MIB))

for o in big1 big2 big3; do
	head -c "$SIZE" /dev/urandom >"$T/$o"
	aws_s3 s3 cp "$T/$o" "s3://$B/s/$o" >/dev/null 2>&1 || not_ok "PUT s/$o"
done
head -c "$SIZE" /dev/urandom >"$T/big3-v2"

start_gateway A "$T/gw.json" "$M" || { not_ok "gateway starts"; exit 1; }
wait_for 20 test -f "$M/sess/big3" || not_ok "the first scan lists the objects"

# ---- 1. a cold sequential read: byte for byte, each byte fetched once ----
g0=$(st .s3.get) b0=$(st .s3.bytes_read) r0=$(st .readahead.ranges)
check "a cold 96 MiB object reads back byte for byte" cmp "$M/sess/big1" "$T/big1"
g=$(( $(st .s3.get) - g0 )) bytes=$(( $(st .s3.bytes_read) - b0 ))
ranges=$(( $(st .readahead.ranges) - r0 ))
echo "# cold read: $g GETs, $ranges ranges fetched ahead ($(st .readahead.bytes) bytes), $bytes bytes from S3"
check_eq "each byte fetched from S3 once" "$SIZE" "$bytes"
check "most of it by ranges fetched ahead ($ranges of $g GETs)" test "$ranges" -ge 8 -a "$ranges" -lt "$g"
check_eq "nothing fetched ahead was wasted" 0 "$(st .readahead.wasted_bytes)"
check_eq "one reader alone never meets the bound across readers (throttled)" 0 "$(st .readahead.throttled)"

# ---- 2. close while ranges are in flight ----
out=$(python3 - "$M/sess/big2" "$T/big2" <<'PY' 2>&1
import sys
path, ref = sys.argv[1:3]
with open(path, 'rb') as f, open(ref, 'rb') as r:
    a = f.read(6 << 20)
    b = r.read(6 << 20)
print('same' if a == b else 'differ')
PY
)
check_eq "6 MiB read, then close with ranges ahead" same "$out"
w=0
for _ in $(seq 1 50); do
	w=$(st .readahead.wasted_bytes)
	[[ $w -gt 0 ]] && break
	sleep 0.1
done
check "the ranges ahead never read are counted as wasted ($w bytes)" test "$w" -gt 0
g1=$(st .s3.get)
sleep 1
check_eq "no GET starts after the close" "$g1" "$(st .s3.get)"
check "the gateway goes on: big2 reads back whole" cmp "$M/sess/big2" "$T/big2"

# ---- 3. the object replaced while a descriptor streams it ----
out=$(python3 - "$M/sess/big3" "$T/big3" "$T/big3-v2" "$B" <<'PY' 2>&1
import errno, os, subprocess, sys
path, oldf, newf, bucket = sys.argv[1:5]
old = open(oldf, 'rb').read()
new = open(newf, 'rb').read()
fd = os.open(path, os.O_RDONLY)
pos, step = 0, 1 << 20
while pos < 8 << 20:
    b = os.pread(fd, step, pos)
    if b != old[pos:pos + len(b)]:
        sys.exit('wrong bytes before the change at %d' % pos)
    pos += len(b)
subprocess.run(['/usr/bin/aws', '--endpoint-url', os.environ['S3_URL'], 's3', 'cp',
                newf, 's3://%s/s/big3' % bucket], check=True, stdout=subprocess.DEVNULL)
err = None
while pos < len(old):
    try:
        b = os.pread(fd, step, pos)
    except OSError as e:
        err = e.errno
        break
    if not b:
        break
    if b != old[pos:pos + len(b)]:
        what = 'new' if b == new[pos:pos + len(b)] else 'mixed'
        sys.exit('%s bytes at %d' % (what, pos))
    pos += len(b)
os.close(fd)
if err is None and pos == len(old):
    print('old to the end')
elif err == errno.ESTALE:
    print('old, then ESTALE')
else:
    print('stopped at %d: %s' % (pos, errno.errorcode.get(err, err)))
PY
)
case $out in
"old to the end" | "old, then ESTALE") ok "replaced while streaming: $out (never the new bytes)" ;;
*) not_ok "replaced while streaming: only the old bytes, then ESTALE" "$out" ;;
esac

stop_gateway A || not_ok "the gateway stops cleanly"
