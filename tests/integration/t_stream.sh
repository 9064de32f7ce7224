#!/usr/bin/env bash
# t_stream.sh — multipart uploads that stream while a file is written
# through the mount (sync/stage/stage.h "Streaming"), with s3.part_size = 64 KiB
# (the bed lowers RGW's minimum part size) and /usr/bin/aws and s3tool as
# independent S3 clients:
# - files of 0 B, 1 B, exactly one part, one part + 1 byte, many parts:
#   byte for byte in S3, "-N" ETags where parts were used, no upload open;
# - parts go up before close (staging.parts_streamed grows while the file
#   is still open);
# - an S3 reader polling the key during a multipart write never sees a
#   partial object;
# - a rewrite of bytes already sent falls back to a whole upload;
# - RGW stopped during the parts: fsync (commit view) and close fail with
#   EIO, the staged data stays; fsync's retry at close succeeds once RGW is
#   back;
# - kill -9 of the gateway mid-stream and with a failed commit pending: after
#   the restart and `facetfs sync` (the drain publishes the failed commit)
#   no upload is open, the committed file is complete in S3 and the
#   never-committed one is in .facetfs/recovered;
# - the crash window between CreateMultipartUpload and the journal naming
#   the upload (the state planted: a journal with the intent only, the
#   upload made with aws): after the restart that upload is aborted, a
#   decoy of a longer key stays, the file is in .facetfs/recovered;
# - s3.stream_parts false (s3.upload_streams 2): nothing streams, the file
#   goes up at close in parallel parts.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/gateway.sh"
require_bed

S3TOOL=$FACETFS_BUILD/tests/bed/s3tool
B=$(new_bucket stream)
bed_cmd notify "$B" >/dev/null || { not_ok "notify"; exit 1; }
T=$(test_tmp)
V=$T/views
view_file "$V" w "$B" '{ "prefix": "w/" }' \
	'"layout": { "strip_prefix": "w/" }, "writable": true, "visibility": "commit"'
gw_config "$T/gw0.json" "$T/state" "$V" "facetfs-stream-$$"
jq '.s3.part_size = "64KiB"' "$T/gw0.json" >"$T/gw.json"
M=$T/mnt
start_gateway A "$T/gw.json" "$M" || { not_ok "gateway starts"; exit 1; }
PART=65536
STAGING=$T/state/cache/staging

open_uploads() {
	local out
	out=$(aws_s3 s3api list-multipart-uploads --bucket "$B" --output json 2>&1) || {
		echo "aws failed: $out"
		return
	}
	[[ -z $out ]] && out='{}'
	jq -r '(.Uploads // []) | length' <<<"$out"
}
streamed() { stat_field "$M" .staging.parts_streamed; }
# s3tool (our client, on its own connection) for most reads; aws as the
# independent client for one object per size and for the upload listings.
etag_of() { "$S3TOOL" head "$B" "$1" 2>/dev/null | sed -n 's/^etag=//p'; }
s3get() { "$S3TOOL" get "$B" "$1" >"$2" 2>/dev/null; }
absent() { ! "$S3TOOL" head "$B" "$1" >/dev/null 2>&1; }
step() { diag <<<"$(date -u +%T) $*"; }

# ---- sizes: bytes and ETag form ----------------------------------------
declare -A sizes=([zero]=0 [one-byte]=1 [one-part]=$PART [part-plus-one]=$((PART + 1))
	[many-parts]=$((PART * 80 + 4321)))
for name in zero one-byte one-part part-plus-one many-parts; do
	size=${sizes[$name]}
	head -c "$size" /dev/urandom >"$T/$name"
	if cp "$T/$name" "$M/w/$name"; then ok "cp $name ($size B) through the mount"; else not_ok "cp $name"; continue; fi
	if [[ $name == many-parts ]]; then
		aws_s3 s3api get-object --bucket "$B" --key "w/$name" "$T/$name.aws" >/dev/null 2>"$T/err"
	else
		s3get "w/$name" "$T/$name.aws"
	fi
	if cmp -s "$T/$name" "$T/$name.aws"; then
		ok "$name: S3 has the same $size bytes"
	else
		not_ok "$name: S3 has the same bytes" "$(tail -n 1 "$T/err")"
	fi
	etag=$(etag_of "w/$name")
	if ((size >= PART)); then
		want=$(((size + PART - 1) / PART))
		check_eq "$name: ETag $etag has the -N form, N = $want" "$want" "${etag##*-}"
	else
		check_eq "$name: single PUT, ETag is the MD5" "$(md5sum <"$T/$name" | cut -d' ' -f1)" "$etag"
	fi
done
check_eq "no upload left open after the copies" 0 "$(open_uploads)"
check "parts were streamed (staging.parts_streamed $(streamed))" test "$(streamed)" -gt 0

step "sizes done"
# ---- parts go up before close -------------------------------------------
# writer FILE SRC FIFO: write SRC to FILE in 128 KiB writes, print
# "written", wait for a line on FIFO, then (fsync if the line is "fsync")
# close; prints "close ok" / "close errno NAME" / "fsync errno NAME".
cat >"$T/writer.py" <<'PY'
import errno, os, sys
path, src, fifo = sys.argv[1:4]
data = open(src, 'rb').read()
fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
half = len(data) // 2 if len(sys.argv) > 4 else len(data)
for off in range(0, half, 131072):
    os.pwrite(fd, data[off:min(off + 131072, half)], off)
print("written", flush=True)
cmd = open(fifo).readline().strip()
if cmd == "kill":
    os._exit(0)
for off in range(half, len(data), 131072):
    os.pwrite(fd, data[off:min(off + 131072, len(data))], off)
if cmd == "fsync":
    try:
        os.fsync(fd)
        print("fsync ok", flush=True)
    except OSError as e:
        print("fsync errno", errno.errorcode[e.errno], flush=True)
    open(fifo).readline()
try:
    os.close(fd)
    print("close ok", flush=True)
except OSError as e:
    print("close errno", errno.errorcode[e.errno], flush=True)
PY
head -c $((4 << 20)) /dev/urandom >"$T/open.src"
mkfifo "$T/go1"
before=$(streamed)
python3 "$T/writer.py" "$M/w/open.bin" "$T/open.src" "$T/go1" >"$T/open.out" 2>&1 &
wpid=$!
wait_for 30 grep -q written "$T/open.out"
more() { (($(streamed) >= before + 32)); }
if wait_for 30 more; then ok "while the file is open, parts go up ($before -> $(streamed))"; else not_ok "parts go up before close" "$before -> $(streamed)"; fi
check "no object before close" absent w/open.bin
sleep 1.1     # the second half is written a second after the upload began
t_go=$(date +%s)
echo go >"$T/go1"
wait "$wpid"
check_eq "close returns 0" "close ok" "$(tail -n 1 "$T/open.out")"
s3get w/open.bin "$T/open.aws"
if cmp -s "$T/open.src" "$T/open.aws"; then ok "open.bin: S3 has the 4 MiB byte for byte"; else not_ok "open.bin: same bytes"; fi
check_eq "open.bin: 64 parts" 64 "$(etag_of w/open.bin | sed 's/.*-//')"
# A streamed file's mtime is its last write's, not the time its upload
# began: the upload carries no stored time, so S3's Last-Modified (its
# completion) stands, through the mount and for other clients.
head=$(aws_s3 s3api head-object --bucket "$B" --key w/open.bin --output json 2>/dev/null)
diag <<<"open.bin: second half written from $(date -u -d "@$t_go" +%T), head-object: $(jq -c '{LastModified, mtime: .Metadata.mtime}' <<<"$head")"
check_eq "open.bin: no stored mtime of its own (x-amz-meta-mtime)" null "$(jq -r '.Metadata.mtime // "null"' <<<"$head")"
lm=$(date -d "$(jq -r .LastModified <<<"$head")" +%s)
check "open.bin: Last-Modified ($lm) not before its last write ($t_go)" test "$lm" -ge "$t_go"
check "open.bin: mtime through the mount ($(stat -c %Y "$M/w/open.bin")) not before its last write" \
	test "$(stat -c %Y "$M/w/open.bin")" -ge "$t_go"
diag <<<"staging: $(jq -c '.staging | {parts_streamed, parts_tail, streams, stream_bytes, stream_fallbacks, stream_aborts}' "$M/.facetfs/stats")"

step "open done"
# ---- an S3 reader polling during a multipart write ----------------------
head -c $((6 << 20)) /dev/urandom >"$T/poll.src"
md5=$(md5sum <"$T/poll.src" | cut -d' ' -f1)
python3 - "$M/w/poll.bin" "$T/poll.src" <<'PY' &
import os, sys, time
data = open(sys.argv[2], 'rb').read()
with open(sys.argv[1], 'wb') as f:
    for off in range(0, len(data), 131072):
        f.write(data[off:off + 131072])
        time.sleep(0.03)
PY
wpid=$!
polls=0 absent=0 whole=0 partial=0
while pid_alive "$wpid" || ((polls < 3)); do
	polls=$((polls + 1))
	if "$S3TOOL" get "$B" w/poll.bin >"$T/poll.got" 2>/dev/null; then
		if [[ $(md5sum <"$T/poll.got" | cut -d' ' -f1) == "$md5" ]]; then
			whole=$((whole + 1))
		else
			partial=$((partial + 1))
		fi
	else
		absent=$((absent + 1))
	fi
	pid_alive "$wpid" || break
done
wait "$wpid"
diag <<<"reader: $polls GETs during the write: $absent absent, $whole whole, $partial partial"
check_eq "an S3 reader never sees a partial object ($polls GETs)" 0 "$partial"
check "the reader polled while the file was being written" test "$absent" -gt 0
"$S3TOOL" get "$B" w/poll.bin >"$T/poll.got" 2>/dev/null
check_eq "after close the object is whole" "$md5" "$(md5sum <"$T/poll.got" | cut -d' ' -f1)"

# ---- a rewrite of sent bytes falls back to a whole upload ---------------
fb0=$(stat_field "$M" .staging.stream_fallbacks)
python3 - "$M/w/rewrite.bin" "$T/rewrite.src" <<'PY'
import os, sys
data = bytearray(os.urandom(2 << 20))
fd = os.open(sys.argv[1], os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
for off in range(0, len(data), 131072):
    os.pwrite(fd, data[off:off + 131072], off)
data[10:20] = b"0123456789"
os.pwrite(fd, b"0123456789", 10)
os.close(fd)
open(sys.argv[2], 'wb').write(data)
PY
s3get w/rewrite.bin "$T/rewrite.aws"
if cmp -s "$T/rewrite.src" "$T/rewrite.aws"; then ok "rewrite mid-stream: S3 has the rewritten bytes"; else not_ok "rewrite mid-stream: same bytes"; fi
check_eq "rewrite mid-stream: one more fallback" $((fb0 + 1)) "$(stat_field "$M" .staging.stream_fallbacks)"
check_eq "no upload left open after the fallback" 0 "$("$S3TOOL" mlist "$B" | wc -l)"

step "poll, rewrite done"
# ---- RGW stopped during the parts ---------------------------------------
# Two files half written, parts streamed; RGW stopped; the rest written.
# down1: fsync fails with EIO; RGW back; close (the next commit) succeeds.
# down2: close fails with EIO; the data stays staged for the restart below.
head -c $((3 << 20)) /dev/urandom >"$T/down1.src"
head -c $((3 << 20)) /dev/urandom >"$T/down2.src"
mkfifo "$T/go2" "$T/go3"
s0=$(streamed)
python3 "$T/writer.py" "$M/w/down1.bin" "$T/down1.src" "$T/go2" half >"$T/down1.out" 2>&1 &
w1=$!
python3 "$T/writer.py" "$M/w/down2.bin" "$T/down2.src" "$T/go3" half >"$T/down2.out" 2>&1 &
w2=$!
wait_for 30 grep -q written "$T/down1.out"
wait_for 30 grep -q written "$T/down2.out"
wait_for 30 eval '(($(streamed) > s0 + 8))'
check "parts of both streamed before RGW stops ($s0 -> $(streamed))" test "$(streamed)" -gt $((s0 + 8))
bed_cmd rgw-stop >/dev/null 2>&1
echo fsync >"$T/go2"
echo close >"$T/go3"
wait_for 120 grep -q "fsync" "$T/down1.out"
wait "$w2"
check_eq "RGW down during the parts: fsync fails with EIO" "fsync errno EIO" "$(grep fsync "$T/down1.out")"
check_eq "RGW down during the parts: close fails with EIO" "close errno EIO" "$(tail -n 1 "$T/down2.out")"
check_eq "staged data of both kept" 2 "$(find "$STAGING" -maxdepth 1 -name '*.data' -size $((3 << 20))c | wc -l)"
bed_cmd rgw-start >/dev/null 2>&1
echo close >"$T/go2"
wait "$w1"
check_eq "RGW back: close of down1 (the next commit) succeeds" "close ok" "$(tail -n 1 "$T/down1.out")"
s3get w/down1.bin "$T/down1.aws"
if cmp -s "$T/down1.src" "$T/down1.aws"; then ok "down1: S3 has the file byte for byte"; else not_ok "down1: same bytes"; fi
open_by_us=$("$S3TOOL" mlist "$B")
check_eq "RGW back: no upload of down1 left open" "" "$(grep w/down1.bin <<<"$open_by_us")"
diag <<<"uploads open with down2 pending (its abort failed while RGW was down): $(grep -c . <<<"$open_by_us")"
step "rgw down done"
# ---- kill -9 mid-stream; restart ----------------------------------------
head -c $((4 << 20)) /dev/urandom >"$T/crash.src"
mkfifo "$T/go4"
s0=$(streamed)   # before the writer: its parts may all be up by "written"
python3 "$T/writer.py" "$M/w/crash.bin" "$T/crash.src" "$T/go4" half >"$T/crash.out" 2>&1 &
wpid=$!
wait_for 30 grep -q written "$T/crash.out"
wait_for 30 eval '(($(streamed) > s0 + 3))'
check "an upload of crash.bin is open mid-stream" sh -c "'$S3TOOL' mlist '$B' | grep -q w/crash.bin"
step "kill -9"
crash_gateway A
ok "gateway killed with -9 mid-stream"
echo kill >"$T/go4" &
wait "$wpid" 2>/dev/null
step "writer gone"
fusermount3 -u "$M" 2>/dev/null || fusermount3 -uz "$M"
step "unmounted"
# ---- the crash window: RGW made the upload, the journal has only the intent
# The state a kill -9 leaves between CreateMultipartUpload's answer and the
# journal write naming the upload: ID.data + ID.jnl with the intent (key,
# time) and no upload id, and that upload open in RGW (made here with
# aws); a decoy upload of a longer key under the same prefix must stay.
ORPH=w/orphan.bin
OID=00000000ffff0001
intent_ns=$(($(date +%s%N) - 2000000000))
head -c 100000 /dev/urandom >"$T/orphan.src"
cp "$T/orphan.src" "$STAGING/$OID.data"
printf 'facetfs-stage 1\nstate dirty\nsize 100000\nbucket :%s\nkey :%s\nintent %s :%s :%s\n' \
	"$B" "$ORPH" "$intent_ns" "$B" "$ORPH" >"$STAGING/$OID.jnl"
orphan_id=$(aws_s3 s3api create-multipart-upload --bucket "$B" --key "$ORPH" \
	--query UploadId --output text 2>"$T/err")
decoy_id=$(aws_s3 s3api create-multipart-upload --bucket "$B" --key "$ORPH.other" \
	--query UploadId --output text 2>>"$T/err")
uploads_of() {
	aws_s3 s3api list-multipart-uploads --bucket "$B" --prefix "$1" --output json 2>/dev/null |
		jq -r --arg k "$1" '(.Uploads // [])[] | select(.Key == $k) | .UploadId'
}
check_eq "crash window: the upload aws made is open before the restart" "$orphan_id" "$(uploads_of "$ORPH")"
# What RGW lists back for an upload (no metadata of the creator's).
aws_s3 s3api list-multipart-uploads --bucket "$B" --prefix "$ORPH" --output json 2>/dev/null |
	jq -c '(.Uploads // [])[0]' | diag
start_gateway A "$T/gw.json" "$M" || { not_ok "gateway restarts"; exit 1; }
check_eq "after restart: the crash window's upload of $ORPH is aborted" "" "$(uploads_of "$ORPH")"
check_eq "after restart: the decoy upload of $ORPH.other is still open" "$decoy_id" "$(uploads_of "$ORPH.other")"
check "the abort of $orphan_id is logged" grep -q "upload $orphan_id of $B/$ORPH .*aborted" "$(gateway_log A)"
aws_s3 s3api abort-multipart-upload --bucket "$B" --key "$ORPH.other" --upload-id "$decoy_id" 2>>"$T/err"
orec=$(ls "$M/.facetfs/recovered/" | grep -v journal | grep orphan.bin | head -n 1)
if [[ -n $orec ]] && cmp -s "$M/.facetfs/recovered/$orec" "$T/orphan.src"; then
	ok "crash window: the never-committed file is in .facetfs/recovered/$orec"
else
	not_ok "crash window: orphan.bin in .facetfs/recovered" "$(ls "$M/.facetfs/recovered/")"
fi
check "crash window: orphan.bin is not in S3" absent "$ORPH"
check "facetfs sync: the drain publishes down2 (its commit had begun)" \
	"$FACETFS_BUILD/gateway/exe/facetfs" sync "$M"
check_eq "after restart: no upload left open" 0 "$(open_uploads)"
s3get w/down2.bin "$T/down2.aws"
if cmp -s "$T/down2.src" "$T/down2.aws"; then ok "after restart: down2 (commit had begun) is complete in S3"; else not_ok "down2 complete in S3"; fi
check "crash.bin (never committed) is not in S3" absent w/crash.bin
rec=$(ls "$M/.facetfs/recovered/" | grep -v journal | grep crash.bin | head -n 1)
if [[ -n $rec ]] && cmp -s "$M/.facetfs/recovered/$rec" <(head -c $((2 << 20)) "$T/crash.src"); then
	ok "crash.bin's written bytes are in .facetfs/recovered/$rec"
else
	not_ok "crash.bin in .facetfs/recovered" "$(ls "$M/.facetfs/recovered/")"
fi
grep -E "stage: (recovery of|interrupted upload)" "$(gateway_log A)" | tail -n 4 | diag
stop_gateway A

# ---- s3.stream_parts false, s3.upload_streams 2 --------------------------
# Nothing streams: the file is staged whole and goes up at close in
# parallel parts (still the -N ETag).
jq '.s3.stream_parts = false | .s3.upload_streams = 2' "$T/gw.json" >"$T/gw-nostream.json"
start_gateway A "$T/gw-nostream.json" "$M" || { not_ok "gateway starts with stream_parts false"; exit 1; }
head -c $((1 << 20)) /dev/urandom >"$T/nostream.src"
p0=$(streamed)
cp "$T/nostream.src" "$M/w/nostream.bin"
s3get w/nostream.bin "$T/nostream.aws"
if cmp -s "$T/nostream.src" "$T/nostream.aws"; then ok "stream_parts false: S3 has the 1 MiB byte for byte"; else not_ok "stream_parts false: same bytes"; fi
check_eq "stream_parts false: no part streamed" "$p0" "$(streamed)"
check_eq "stream_parts false: uploaded at close in 16 parts" 16 "$(etag_of w/nostream.bin | sed 's/.*-//')"
check_eq "stream_parts false: no upload left open" 0 "$(open_uploads)"
stop_gateway A
