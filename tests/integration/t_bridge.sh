#!/usr/bin/env bash
# t_bridge — facetfs-bridge locked down: with --token-file it produces only
# what carries the token (in the path, as RGW push endpoints can, or as a
# Bearer header) and answers 403 otherwise, producing nothing and never
# logging the token; --max-rate answers 429 past its rate; --max-pending
# answers 503 at once instead of queueing when Kafka is slow; without
# --listen it binds 127.0.0.1 only; bad options are refused.
. "$(dirname "$0")/../lib/common.sh"
require_bed

BRIDGE=$FACETFS_BUILD/events/facetfs-bridge
T=$(test_tmp)
TOPIC=bridge-lock-$$
DOC=$FACETFS_SRC/tests/data/events/ceph-put.json
TOKEN=tok$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
printf '%s\n' "$TOKEN" >"$T/token"
declare -a PIDS=()

# start_bridge NAME ARGS...: runs it on a free port; sets PORT_NAME.
start_bridge() {
	local name=$1 out=$T/$1.out port
	shift
	"$BRIDGE" --brokers "$KAFKA_BROKERS" --topic "$TOPIC" "$@" >"$out" 2>"$T/$name.log" &
	PIDS+=($!)
	wait_for 10 grep -q "listening on" "$out" || { echo "# bridge $name did not start"; tail -n 3 "$T/$name.log" | diag; return 1; }
	port=$(sed -n 's/.*listening on [^ ]*:\([0-9]*\),.*/\1/p' "$out")
	printf -v "PORT_$name" '%s' "$port"
}
stop_bridges() {
	local p
	for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
	PIDS=()
}
bridge_cleanup() { local rc=$?; stop_bridges; (exit $rc); test_cleanup; }
trap bridge_cleanup EXIT

# post PORT PATH [curl args]: the HTTP status of a POST of the sample.
post() {
	local port=$1 path=$2
	shift 2
	curl -s -o /dev/null -w '%{http_code}' -X POST --data-binary "@$DOC" "$@" "http://127.0.0.1:$port$path"
}
produced() {
	kcat -C -b "$KAFKA_BROKERS" -t "$TOPIC" -e -q -X fetch.wait.max.ms=10 2>/dev/null | grep -c .
}

if start_bridge tok --listen 127.0.0.1:0 --token-file "$T/token"; then
	check_eq "no token: 403" 403 "$(post "$PORT_tok" /s3events)"
	check_eq "wrong token in the path: 403" 403 "$(post "$PORT_tok" "/x$TOKEN/s3events")"
	check_eq "wrong Bearer token: 403" 403 "$(post "$PORT_tok" /s3events -H "Authorization: Bearer nope$TOKEN")"
	check_eq "nothing produced for refused requests" 0 "$(produced)"
	check_eq "token in the path: 200" 200 "$(post "$PORT_tok" "/$TOKEN/s3events")"
	check_eq "Bearer token: 200" 200 "$(post "$PORT_tok" /s3events -H "Authorization: Bearer $TOKEN")"
	check_eq "the two accepted records reached Kafka" 2 "$(produced)"
	check "the token never appears in the log" eval '! grep -qF "$TOKEN" "$T/tok.log" "$T/tok.out"'
	check "refusals are logged" grep -q "403, no valid token" "$T/tok.log"
fi

if start_bridge rate --listen 127.0.0.1:0 --max-rate 5; then
	codes=$(for i in $(seq 1 30); do post "$PORT_rate" /s3events; echo; done | sort | uniq -c | tr -s ' ' | tr '\n' ' ')
	case $codes in
	*" 429"*) ok "--max-rate 5: a burst of 30 gets 429s ($codes)" ;;
	*) not_ok "--max-rate 5: a burst of 30 gets 429s" "$codes" ;;
	esac
	case $codes in
	*" 200"*) ok "--max-rate 5: and some are accepted" ;;
	*) not_ok "--max-rate 5: and some are accepted" "$codes" ;;
	esac
fi

# Kafka unreachable: the first request waits (--timeout-ms) and fails with
# 500; while it waits, the next one is refused at once with 503.
if start_bridge slow --listen 127.0.0.1:0 --max-pending 1 --timeout-ms 4000 --brokers 127.0.0.1:9; then
	post "$PORT_slow" /s3events >"$T/first.code" &
	first=$!
	sleep 1
	t0=$(date +%s%N)
	code=$(post "$PORT_slow" /s3events)
	dt=$((($(date +%s%N) - t0) / 1000000))
	check_eq "Kafka slow, --max-pending reached: 503" 503 "$code"
	if ((dt < 2000)); then ok "503 answered at once (${dt} ms), not queued"; else not_ok "503 answered at once" "${dt} ms"; fi
	wait "$first"
	check_eq "the waiting request: 500 after --timeout-ms" 500 "$(cat "$T/first.code")"
fi
stop_bridges

# Default address: loopback only.
"$BRIDGE" --brokers "$KAFKA_BROKERS" --topic "$TOPIC" >"$T/default.out" 2>"$T/default.log" &
PIDS+=($!)
if wait_for 10 grep -q "listening on" "$T/default.out"; then
	check "without --listen: 127.0.0.1:8099" grep -q "listening on 127.0.0.1:8099" "$T/default.out"
elif grep -q "cannot listen" "$T/default.log"; then
	skip "without --listen: 127.0.0.1:8099" "port 8099 is taken on this machine"
else
	not_ok "without --listen: the bridge starts" "$(tail -n 2 "$T/default.log")"
fi
stop_bridges

printf 'short\n' >"$T/short"
rc=0
"$BRIDGE" --brokers "$KAFKA_BROKERS" --topic "$TOPIC" --token-file "$T/short" >/dev/null 2>"$T/short.err" || rc=$?
check_eq "a token under 16 characters is refused (2)" 2 "$rc"
check "… with a message saying why" grep -q "16 to" "$T/short.err"
rc=0
"$BRIDGE" --brokers "$KAFKA_BROKERS" --topic "$TOPIC" --max-pending 0 >/dev/null 2>&1 || rc=$?
check_eq "--max-pending 0 is refused (2)" 2 "$rc"
