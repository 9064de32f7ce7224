#!/usr/bin/env bash
# t_reload.sh — view reloads do not wait for requests in flight: while a
# 200 MiB file is uploaded at close(2) through the mount (s3.stream_parts
# false, one part in flight) and a read loop
# runs, a filter file is changed again and again; each reload's time is
# printed (the gateway's own measure, .facetfs/views ".reloads", and from
# the file change to that), and the one assertion on timing is that
# reloads complete while the upload is still running: after a reload is
# seen installed, the gateway's count of finished uploads
# (.facetfs/stats staging.uploads) must not have moved yet. A reload that
# waited for the upload in flight would complete only once it finished.
# The upload and the reads must also come out right.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/gateway.sh"
require_bed

B=$(new_bucket reload)
bed_cmd notify "$B" >/dev/null || { not_ok "make bucket with notification"; exit 1; }
T=$(test_tmp)
"$FACETFS_BUILD/tests/bench/s3fill" "$B" r/f- 20 --size 65536 >/dev/null ||
	{ not_ok "fill the bucket"; exit 1; }
V=$T/views
view_file "$V" up "$B" '{ "prefix": "u/" }' \
	'"layout": { "strip_prefix": "u/" }, "writable": true, "visibility": "session"'
view_file "$V" rd "$B" '{ "prefix": "r/" }' '"layout": { "strip_prefix": "r/" }'
view_file "$V" flip "$B" '{ "prefix": "r/f-000000" }'   # keys r/f-0000000..19
gw_config "$T/gw.json" "$T/state" "$V"
# The whole file goes at close, one part at a time: streamed (the default)
# it would be sent while written, and close would take a fraction of a
# second, shorter than the window this test needs.
jq '.s3.stream_parts = false | .s3.upload_streams = 1' "$T/gw.json" >"$T/gw1.json" &&
	mv "$T/gw1.json" "$T/gw.json"
M=$T/mnt
start_gateway A "$T/gw.json" "$M" || { not_ok "gateway starts"; exit 1; }
wait_for 20 sh -c "[ \$(ls '$M/rd' | wc -l) -eq 20 ]" ||
	{ not_ok "the read view lists its 20 objects"; exit 1; }
reloads() { jq -r '.[".reloads"].count' "$M/.facetfs/views"; }

# Reads: every object of rd, over and over, until told to stop.
(
	n=0 bad=0
	while [[ ! -e $T/stop-reads ]]; do
		for f in "$M"/rd/*; do
			if [[ $(wc -c <"$f") == 65536 ]]; then n=$((n + 1)); else bad=$((bad + 1)); fi
		done
	done
	echo "$n $bad" >"$T/reads"
) &
readers=$!

uploads0=$(stat_field "$M" .staging.uploads)
# The upload: write 200 MiB, then close (which uploads); the close's start
# and end times (epoch s) go to files the reload loop watches.
head -c $((200 * 1024 * 1024)) /dev/urandom >"$T/big"
python3 - "$T/big" "$M/up/big.bin" "$T" <<'PY' &
import os, sys, time
src, dst, t = sys.argv[1], sys.argv[2], sys.argv[3]
fd = os.open(dst, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
with open(src, "rb") as f:
    while True:
        b = f.read(1 << 20)
        if not b:
            break
        os.write(fd, b)
start = time.time()
open(t + "/close-start", "w").write("%.3f\n" % start)
rc = 0
try:
    os.close(fd)
except OSError as e:
    rc = e.errno
end = time.time()
open(t + "/close-end", "w").write("%.3f %d\n" % (end, rc))
PY
writer=$!

# Reloads: from the moment close() starts until the upload is done, change
# the filter file of `flip` and wait for the gateway to install the new set.
wait_for 60 test -e "$T/close-start" || not_ok "the writer reached close()"
count=$(reloads) during=0 after=0 i=0
while [[ $(stat_field "$M" .staging.uploads) == "$uploads0" ]] && ((i < 100)); do
	i=$((i + 1))
	t0=$(date +%s%N)
	view_file "$V" flip "$B" "{ \"prefix\": \"r/f-000000$((i % 2))\" }"   # 10 objects each
	if ! wait_for 10 sh -c "[ \$(jq -r '.[\".reloads\"].count' '$M/.facetfs/views') -gt $count ]"; then
		not_ok "reload $i completes" "no new view set within 10 s"
		break
	fi
	t1=$(date +%s%N)
	running=no        # read after the reload was seen: it finished before
	if [[ $(stat_field "$M" .staging.uploads) == "$uploads0" ]]; then
		running=yes
		during=$((during + 1))
	else
		after=$((after + 1))
	fi
	count=$(reloads)
	ms=$(jq -r '.[".reloads"].last_ms' "$M/.facetfs/views")
	printf '# figure: reload %d: %.1f ms in the gateway, %d ms from the file change (100 ms debounce included); upload running: %s\n' \
		"$i" "$ms" $(((t1 - t0) / 1000000)) "$running"
done
wait_for 120 sh -c "[ \$(jq -r .staging.uploads '$M/.facetfs/stats') != '$uploads0' ]"
uploaded=$(date +%s.%N)
wait "$writer"
read -r start < "$T/close-start"
read -r end rc < "$T/close-end"
printf '# figure: close() took %.2f s, the upload was seen done %.2f s after it began; %d reloads completed during the upload, %d after\n' \
	"$(awk -v s="$start" -v e="$end" 'BEGIN { print e - s }')" \
	"$(awk -v s="$start" -v e="$uploaded" 'BEGIN { print e - s }')" "$during" "$after"
if ((during > 0)); then
	ok "view reloads complete while the upload is still running ($during)"
else
	not_ok "view reloads complete while the upload is still running" \
		"none of $i completed before the upload finished"
fi
check_eq "close after the upload" 0 "$rc"
check "the 200 MiB object in S3 equals the file" \
	sh -c "'$AWS' --endpoint-url '$S3_URL' s3 cp --quiet s3://$B/u/big.bin - | cmp - '$T/big'"
touch "$T/stop-reads"
wait "$readers"
read -r nreads badreads <"$T/reads"
printf '# figure: %d reads of 64 KiB objects during the test\n' "$nreads"
check_eq "every read returned the whole object" 0 "$badreads"
check_eq "the changed view shows its last definition (r/f-000000$((i % 2)))" \
	"$(ls "$M/rd" | grep "^f-000000$((i % 2))" | tr '\n' ' ')" \
	"$(ls "$M/flip/r" 2>&1 | tr '\n' ' ')"
stop_gateway A; check_eq "clean stop" 0 "$?"
