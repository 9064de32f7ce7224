#!/usr/bin/env bash
# t_durability.sh — cache.durability "process" (no fsync) through a real
# mount: small files reach S3 with no fsync (staging.syncs stays 0), and a
# kill -9 of the gateway still recovers both ways — data written and never
# closed goes to recovered/, data whose commit had begun (close got EIO
# while RGW was down) is queued by the restart and published by its drain
# (`facetfs sync` waits for it). Then the same staging
# directory under "power": trusted (same boot), 4 fsyncs per small file.
# An fsync in this session view publishes nothing; it syncs the staged
# data and its "dirty" journal under "power" (3 calls: data, journal,
# directory) and nothing under "process". Last, two
# closes that got EIO, then one key written anew and one removed through
# the mount: the restart uploads neither (both go to recovered/).
# (A power loss cannot be made here: the unit test test_stage_journal
# covers the reboot rule with a rewritten boot id.)
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/gateway.sh"
require_bed

B=$(new_bucket durab)
aws_s3 s3 mb "s3://$B" >/dev/null || { not_ok "make bucket"; exit 1; }
T=$(test_tmp)
view_file "$T/views" w "$B" '{ "prefix": "w/" }' \
	'"layout": { "strip_prefix": "w/" }, "writable": true, "visibility": "session"'
gw_config "$T/base.json" "$T/state" "$T/views" "facetfs-durab-$$"
for d in process power; do
	jq --arg d "$d" '.cache.durability = $d' "$T/base.json" >"$T/$d.json"
done
M=$T/mnt
STG=$T/state/cache/staging
in_s3() { "$AWS" --endpoint-url "$S3_URL" s3 cp --quiet "s3://$B/w/$1" -; }
# fsync_syncs NAME [ro]: write NAME, fsync it (ro: through a second,
# read-only descriptor, as `sync FILE` does), close it; prints the
# staging.syncs the fsync alone made (a session view: fsync publishes
# nothing, it only makes the staged bytes durable under "power").
fsync_syncs() {
	python3 - "$M/w/$1" "$M/.facetfs/stats" "${2:-rw}" <<'PY'
import json, os, sys
def syncs():
    with open(sys.argv[2]) as f:
        return json.load(f)["staging"]["syncs"]
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, b"y" * 4096)
rfd = os.open(sys.argv[1], os.O_RDONLY) if sys.argv[3] == "ro" else fd
a = syncs()
os.fsync(rfd)
b = syncs()
if rfd != fd:
    os.close(rfd)
os.close(fd)
print(b - a)
PY
}

start_gateway A "$T/process.json" "$M" || { not_ok "gateway starts (process)"; exit 1; }
check_eq "stats name the setting" process "$(stat_field "$M" .staging.durability)"
check "the staging directory records it" grep -qx "mode process" "$STG/durability"

# ---- small files with no fsync ----
mkdir -p "$T/src"
for i in $(seq -w 1 50); do head -c 65536 /dev/urandom >"$T/src/f$i"; done
s0=$(stat_field "$M" .staging.syncs)
check "cp -r of 50 x 64 KiB" cp -r "$T/src" "$M/w/cp"
check_eq "no fsync or fdatasync while staging them" "$s0" "$(stat_field "$M" .staging.syncs)"
n=$("$AWS" --endpoint-url "$S3_URL" s3 ls "s3://$B/w/cp/" | wc -l)
check_eq "S3 lists the 50 objects when cp returns" 50 "$n"
check "their bytes (f17)" sh -c "'$AWS' --endpoint-url '$S3_URL' s3 cp --quiet 's3://$B/w/cp/f17' - | cmp -s - '$T/src/f17'"
check_eq "fsync of a written file: no sync call under process" 0 "$(fsync_syncs fs-proc)"

# ---- kill -9: written and never closed; commit begun (EIO, RGW down) ----
mkfifo "$T/go"
python3 - "$M/w/open.txt" "$M/w/eio.txt" "$T/go" >"$T/writer.out" 2>&1 <<'PY' &
import errno, os, sys
p_open, p_eio, go = sys.argv[1:]
fo = os.open(p_open, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
os.write(fo, b"never closed before the crash")
fe = os.open(p_eio, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
os.write(fe, b"close failed, commit had begun")
print("written", flush=True)
open(go).read()                      # RGW is down now
try:
    os.close(fe)
    print("close returned 0", flush=True)
except OSError as e:
    print("close errno", errno.errorcode.get(e.errno, e.errno), flush=True)
open(go).read()                      # the gateway is dead now
try:
    os.close(fo)
except OSError:
    pass
PY
writer=$!
wait_for 10 grep -q written "$T/writer.out"
bed_cmd rgw-stop >/dev/null 2>&1
echo go >"$T/go"
wait_for 120 grep -q "^close" "$T/writer.out"
check_eq "RGW down: close fails with EIO" "close errno EIO" "$(tail -n 1 "$T/writer.out")"
crash_gateway A
echo go >"$T/go"
wait "$writer"
bed_cmd rgw-start >/dev/null 2>&1
fusermount3 -uz "$M" 2>/dev/null
check "after kill -9, both files are still staged (journals: dirty, commit)" \
	sh -c "grep -q 'state dirty' '$STG'/*.jnl && grep -q 'state commit' '$STG'/*.jnl"

start_gateway A "$T/process.json" "$M" || { not_ok "gateway restarts after kill -9"; exit 1; }
check "facetfs sync after the restart" "$FACETFS_BUILD/gateway/exe/facetfs" sync "$M"
check_eq "commit-begun file uploaded after the restart" "close failed, commit had begun" "$(in_s3 eio.txt)"
check "never-closed data is in recovered/" sh -c "grep -rl 'never closed before the crash' '$STG/recovered' | grep -q ."
check "never-closed data not uploaded" sh -c "! '$AWS' --endpoint-url '$S3_URL' s3api head-object --bucket '$B' --key w/open.txt >/dev/null 2>&1"
check_eq "counted: 1 recovered, 1 re-uploaded" "1 1" \
	"$(stat_field "$M" '"\(.staging.recovered_files) \(.staging.reuploaded_files)"')"
stop_gateway A; check_eq "stops cleanly (process)" 0 "$?"

# ---- the same directory under "power" ----
start_gateway A "$T/power.json" "$M" || { not_ok "gateway starts (power)"; exit 1; }
check_eq "stats name the setting" power "$(stat_field "$M" .staging.durability)"
check "the staging directory records it" grep -qx "mode power" "$STG/durability"
check_eq "nothing more recovered (same boot: the process run's files were trusted)" 0 \
	"$(stat_field "$M" .staging.recovered_files)"
s0=$(stat_field "$M" .staging.syncs)
check "cp -r of 50 x 64 KiB" cp -r "$T/src" "$M/w/cp2"
check_eq "4 fsync/fdatasync calls per small file" 200 $(( $(stat_field "$M" .staging.syncs) - s0 ))
check "their bytes (f33)" sh -c "'$AWS' --endpoint-url '$S3_URL' s3 cp --quiet 's3://$B/w/cp2/f33' - | cmp -s - '$T/src/f33'"
check_eq "fsync of a written file: its data and journal synced under power (3 calls)" 3 \
	"$(fsync_syncs fs-power)"
check_eq "fsync through a read-only descriptor of a file written by another: synced too" 3 \
	"$(fsync_syncs fs-power-ro ro)"
head -c 4096 /dev/zero | tr '\0' y >"$T/y4k"
check "after its close S3 has it" sh -c "'$AWS' --endpoint-url '$S3_URL' s3 cp --quiet 's3://$B/w/fs-power' - | cmp -s - '$T/y4k'"
stop_gateway A; check_eq "stops cleanly (power)" 0 "$?"

# ---- a close that got EIO, then its key changed through the mount ----
# The failed closes' data waits for the next start; a version written
# after it, or a delete, must not be undone by that start.
start_gateway A "$T/power.json" "$M" || { not_ok "gateway starts (a later change)"; exit 1; }
printf v0 >"$M/w/again.txt" && printf v0 >"$M/w/gone.txt"
check_eq "two files in S3 first" "v0v0" "$(in_s3 again.txt)$(in_s3 gone.txt)"
mkfifo "$T/go2"
python3 - "$M/w/again.txt" "$M/w/gone.txt" "$T/go2" >"$T/writer2.out" 2>&1 <<'PY' &
import errno, os, sys
paths, go = sys.argv[1:3], sys.argv[3]
fds = []
for p in paths:
    fd = os.open(p, os.O_WRONLY | os.O_TRUNC)
    os.write(fd, b"v1 of " + os.path.basename(p).encode() + b", its close failed")
    fds.append(fd)
print("written", flush=True)
open(go).read()                      # RGW is down now
for fd in fds:
    try:
        os.close(fd)
        print("close returned 0", flush=True)
    except OSError as e:
        print("close errno", errno.errorcode.get(e.errno, e.errno), flush=True)
PY
rgw_down_while_closing "$T/writer2.out" "$T/go2" $!
check_eq "RGW down: both closes fail with EIO" "close errno EIO,close errno EIO" \
	"$(grep '^close' "$T/writer2.out" | paste -sd,)"
wait_for 60 sh -c "printf 'v2, written after the failed close' >'$M/w/again.txt'"
check_eq "RGW back: a new version of again.txt written" "v2, written after the failed close" \
	"$(in_s3 again.txt)"
check "gone.txt removed through the mount" rm "$M/w/gone.txt"
stop_gateway A
start_gateway A "$T/power.json" "$M" || { not_ok "gateway restarts (a later change)"; exit 1; }
check_eq "the restart keeps the version written after the failed close" \
	"v2, written after the failed close" "$(in_s3 again.txt)"
check "the restart does not bring back the file removed after its failed close" \
	sh -c "! '$AWS' --endpoint-url '$S3_URL' s3api head-object --bucket '$B' --key w/gone.txt >/dev/null 2>&1"
check "both failed closes' data is in recovered/" sh -c \
	"grep -rlq 'v1 of again.txt' '$STG/recovered' && grep -rlq 'v1 of gone.txt' '$STG/recovered'"
stop_gateway A
