#!/usr/bin/env bash
# t_trace.sh — `facetfs trace`, `advise` and `replay` with real processes on
# real mounts (tests/integration/trace_work.py runs each workload, forked
# processes in a fixed order). The verdicts the advisor must give, per file:
# writer closes before the reader opens -> `session` suffices (no session
# conflict); writer fsyncs but keeps the file open while a reader that
# opened later reads -> `commit`; a read of data another process wrote and
# never committed -> no policy; a process reading its own writes -> no
# distinct-process conflict; no overlap -> the weakest policy. Two gateways:
# the traces merge by their anchors and the cross-gateway pair is found.
# Also: status, the bound, and replay's HEAD counts on a session and a
# commit view (one per open vs one per read).
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/gateway.sh"
require_bed

WORK="python3 $(dirname "$0")/trace_work.py"
B=$(new_bucket trace)
bed_cmd notify "$B" >/dev/null || { not_ok "notify $B"; exit 1; }
T=$(test_tmp)
V=$T/views
view_file "$V" sess "$B" '{ "prefix": "s/" }' \
	'"layout": { "strip_prefix": "s/" }, "writable": true, "visibility": "session"'
view_file "$V" comm "$B" '{ "prefix": "c/" }' \
	'"layout": { "strip_prefix": "c/" }, "writable": true, "visibility": "commit"'
gw_config "$T/a.json" "$T/state-a" "$V"
gw_config "$T/b.json" "$T/state-b" "$V"
A=$T/mnt-a
BM=$T/mnt-b
start_gateway A "$T/a.json" "$A" || { not_ok "gateway A starts"; exit 1; }
start_gateway B "$T/b.json" "$BM" || { not_ok "gateway B starts"; exit 1; }
ok "two gateways start"
head -c 16384 /dev/urandom >"$A/comm/reads.dat" || not_ok "write reads.dat"

out=$("$FACETFS" trace "$A" status 2>&1)
check "status before: off" grep -q '^off' <<<"$out"
out=$("$FACETFS" trace "$A" stop 2>&1)
check "stop without a trace fails" test $? -ne 0

# ---- one gateway: the five workloads, one trace ----
out=$("$FACETFS" trace "$A" start --view comm 2>&1)
rc=$?
printf '%s\n' "$out" | diag
check_eq "trace start exits 0" 0 "$rc"
TRACE_A=$(sed -n 's/^tracing view comm into \(.*\) (at most.*/\1/p' <<<"$out")
check "the answer names the file under state_dir/traces" test -n "$TRACE_A" -a -f "$TRACE_A"
out=$("$FACETFS" trace "$A" start 2>&1)
check "a second start is refused" grep -q "already on" <<<"$out"
for w in closed fsync dirty own apart; do
	check "workload $w runs" $WORK "$w" "$A/comm"
done
check "and a file of another view is not traced" $WORK own "$A/sess"
out=$("$FACETFS" trace "$A" status 2>&1)
check "status while on names the file" grep -qF "on $TRACE_A view comm" <<<"$out"
out=$("$FACETFS" trace "$A" stop 2>&1)
check_eq "trace stop exits 0" 0 "$?"
printf '%s\n' "$out" | diag

"$FACETFS" advise --json "$TRACE_A" >"$T/advise.json" 2>"$T/advise.err"
check_eq "advise --json exits 0" 0 "$?"
diag <"$T/advise.err"
"$FACETFS" advise "$TRACE_A" >"$T/advise.txt" 2>&1
diag <"$T/advise.txt"
j() { jq -r "$1" "$T/advise.json"; }
f='.files["comm/closed.dat"]'
check "closed: a distinct-process read after the write" test "$(j "$f.classes[\"RAW-D\"].pairs")" -ge 1
check_eq "closed: no conflict under session" 0 "$(j "$f.classes[\"RAW-D\"].conflicts.session")"
check "closed: session suffices (verdict eventual or session)" \
	grep -qxE 'eventual|session' <<<"$(j "$f.verdict")"
f='.files["comm/fsync.dat"]'
check_eq "fsync, still open: commit needed" commit "$(j "$f.verdict")"
check "fsync: the pair conflicts under session" test "$(j "$f.classes[\"RAW-D\"].conflicts.session")" -ge 1
f='.files["comm/dirty.dat"]'
check_eq "never committed: no policy suffices" none "$(j "$f.verdict")"
check "dirty: the example says what resolves it" grep -q "an fsync by process .* after the write makes \`commit\` sufficient" "$T/advise.txt"
f='.files["comm/own.dat"]'
check "own writes: a same-process pair" test "$(j "$f.classes[\"RAW-S\"].pairs")" -ge 1
check_eq "own writes: no distinct-process pair" 0 "$(j "$f.classes[\"RAW-D\"].pairs + $f.classes[\"WAW-D\"].pairs")"
for x in apart-a apart-b; do
	f=".files[\"comm/$x.dat\"]"
	check_eq "no overlap ($x): no distinct-process pair" 0 "$(j "$f.classes[\"RAW-D\"].pairs + $f.classes[\"WAW-D\"].pairs")"
	check_eq "no overlap ($x): the weakest policy" "$(j '.policies[0]')" "$(j "$f.verdict")"
done
check_eq "view filter: nothing of view sess" null "$(j '.files["sess/own.dat"]')"
check_eq "the view's verdict is its worst file's" none "$(j '.views.comm.verdict')"
check "the process ids are the workers', not the gateway's" \
	test "$(j '[.files[].classes[].examples[].first.pid] | map(select(. == '"$(gateway_pid A)"')) | length')" = 0

# ---- two gateways: traces merged by anchors ----
"$FACETFS" trace "$A" start >/dev/null 2>&1 || not_ok "trace start on A"
"$FACETFS" trace "$BM" start >/dev/null 2>&1 || not_ok "trace start on B"
check "cross-gateway workload runs" $WORK cross "$A/comm" "$BM/comm"
sleep 0.5
TA=$("$FACETFS" trace "$A" stop 2>&1 | sed -n 's/^trace stopped: \([^:]*\): .*/\1/p')
TB=$("$FACETFS" trace "$BM" stop 2>&1 | sed -n 's/^trace stopped: \([^:]*\): .*/\1/p')
check "both traces written" test -f "$TA" -a -f "$TB"
"$FACETFS" advise --json "$TA" "$TB" >"$T/cross.json" 2>/dev/null
check_eq "merged: advise exits 0" 0 "$?"
"$FACETFS" advise "$TA" "$TB" 2>&1 | diag
f='.files["comm/cross.dat"]'
check "merged: the read on B pairs with the write on A" \
	test "$(jq -r "$f.classes[\"RAW-D\"].pairs" "$T/cross.json")" -ge 1
check_eq "merged: closed before the open on B -> no session conflict" 0 \
	"$(jq -r "$f.classes[\"RAW-D\"].conflicts.session" "$T/cross.json")"
check "merged: B's trace holds the apply of the event" \
	grep -qE 'eventual|session' <<<"$(jq -r "$f.verdict" "$T/cross.json")"
check_eq "merged: two traces" 2 "$(jq -r '.traces | length' "$T/cross.json")"

# ---- the bound ----
out=$("$FACETFS" trace "$A" start --max-bytes 8K 2>&1)
check "small bound accepted" grep -q "at most 8192 bytes" <<<"$out"
for i in 1 2 3; do $WORK reads "$A/comm" >/dev/null 2>&1 || $WORK own "$A/comm" >/dev/null; done
$WORK own "$A/comm"; $WORK reads "$A/comm" 2>/dev/null
out=$("$FACETFS" trace "$A" status 2>&1)
printf '%s\n' "$out" | diag
check "status says full at the bound" grep -q '^full' <<<"$out"
check "the log says so once" test "$(grep -c 'reached its bound' "$(gateway_log A)")" = 1
out=$("$FACETFS" trace "$A" stop 2>&1)
TBOUND=$(sed -n 's/^trace stopped: \([^:]*\): .*/\1/p' <<<"$out")
check "the bounded file stays under its bound" test "$(stat -c %s "$TBOUND")" -le 8192

# ---- replay: session vs commit ----
"$FACETFS" trace "$A" start --view comm >/dev/null 2>&1 || not_ok "trace start for replay"
$WORK reads "$A/comm" || not_ok "reads workload"
TR=$("$FACETFS" trace "$A" stop 2>&1 | sed -n 's/^trace stopped: \([^:]*\): .*/\1/p')
cp "$A/comm/reads.dat" "$A/sess/reads.dat" 2>/dev/null || not_ok "copy reads.dat to the session view"
wait_for 10 test -s "$A/sess/reads.dat"
head_of() { sed -n 's/^s3 requests: head \([0-9]*\) .*/\1/p' <<<"$1"; }
rs=$("$FACETFS" replay "$TR" --view "$A/sess" 2>&1)
check_eq "replay on the session view exits 0" 0 "$?"
printf '%s\n' "$rs" | diag
rc_=$("$FACETFS" replay "$TR" --view "$A/comm" 2>&1)
check_eq "replay on the commit view exits 0" 0 "$?"
printf '%s\n' "$rc_" | diag
hs=$(head_of "$rs") hc=$(head_of "$rc_")
check "replay counts HEADs" test -n "$hs" -a -n "$hc"
check "session: about one HEAD per open (1 open; got $hs)" test "${hs:-99}" -le 2
check "commit: about one HEAD per read (40 reads; got $hc)" test "${hc:-0}" -ge 40

# the first trace (creates, writes, fsync, closes of 10 processes) onto
# the session view: every operation succeeds, the files are there
out=$("$FACETFS" replay "$TRACE_A" --view "$A/sess" 2>&1)
check_eq "replay of the five workloads on view sess exits 0" 0 "$?"
printf '%s\n' "$out" | diag
check "and made their files" test -s "$A/sess/fsync.dat" -a -s "$A/sess/apart-b.dat"
check "with S3 PUTs counted" grep -qE 'put [1-9]' <<<"$out"

stop_gateway B
check_eq "gateway B stops cleanly" 0 "$?"
stop_gateway A
check_eq "gateway A stops cleanly" 0 "$?"
