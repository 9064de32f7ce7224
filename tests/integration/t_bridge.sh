#!/usr/bin/env bash
# t_bridge — facetfs-bridge locked down: with --token-file it produces only
# what carries the token (in the path, as RGW push endpoints can, or as a
# Bearer header) and answers 403 otherwise, producing nothing and never
# logging the token; --max-rate answers 429 past its rate; --max-pending
# answers 503 at once instead of queueing when Kafka is slow; without
# --listen it binds 127.0.0.1 only; with --tls-cert and --tls-key it
# serves HTTPS (a client trusting the certificate gets its 200 and the
# record reaches Kafka; plain HTTP gets nothing); with --sns-topic it
# confirms an SNS subscription to that topic by GETting its SubscribeURL
# (a loopback server stands for SNS, allowed by --sns-url-prefix), refuses
# one to another topic or URL (403, no GET), answers 500 when the GET
# fails, and without the prefix refuses any URL but SNS's; bad options
# are refused.
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

# HTTPS: a self-signed certificate for 127.0.0.1.
if openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 \
	-addext subjectAltName=IP:127.0.0.1 -keyout "$T/tls.key" -out "$T/tls.crt" \
	>/dev/null 2>&1 && start_bridge tls --listen 127.0.0.1:0 --tls-cert "$T/tls.crt" --tls-key "$T/tls.key"; then
	check "it says it serves https" grep -q "listening on https://127.0.0.1:" "$T/tls.out"
	before=$(produced)
	code=$(curl -s -o /dev/null -w '%{http_code}' -X POST --data-binary "@$DOC" \
		--cacert "$T/tls.crt" "https://127.0.0.1:$PORT_tls/s3events")
	check_eq "--tls-cert/--tls-key: a POST over HTTPS: 200" 200 "$code"
	check_eq "… its record reached Kafka" $((before + 1)) "$(produced)"
	check_eq "plain HTTP to the HTTPS port gets no answer" 000 "$(post "$PORT_tls" /s3events -m 5)"
	check "the key never appears in the log" eval '! grep -q "PRIVATE KEY" "$T/tls.log" "$T/tls.out"'
else
	not_ok "a bridge with --tls-cert and --tls-key starts" "$(tail -n 2 "$T/tls.log" 2>/dev/null)"
fi
stop_bridges
rc=0
"$BRIDGE" --brokers "$KAFKA_BROKERS" --topic "$TOPIC" --tls-cert "$T/tls.crt" >/dev/null 2>"$T/half.err" || rc=$?
check_eq "--tls-cert without --tls-key is refused (2)" 2 "$rc"
check "… saying they go together" grep -q "go together" "$T/half.err"
rc=0
"$BRIDGE" --brokers "$KAFKA_BROKERS" --topic "$TOPIC" --tls-cert "$T/token" --tls-key "$T/tls.key" \
	>/dev/null 2>"$T/notpem.err" || rc=$?
check_eq "a certificate file that is not PEM is refused (2)" 2 "$rc"
check "… naming it" grep -q "tls-cert .*not a PEM file" "$T/notpem.err"

# SNS subscription confirmations: a loopback server stands for SNS.
ARN=arn:aws:sns:eu-west-1:123456789012:s3events
mkdir -p "$T/sns" && echo '<ConfirmSubscriptionResponse/>' >"$T/sns/confirm"
python3 -u -m http.server 0 --bind 127.0.0.1 --directory "$T/sns" >"$T/snsd.out" 2>"$T/snsd.log" &
SNS_PID=$!
PIDS+=($SNS_PID)
wait_for 10 grep -q "port" "$T/snsd.out" || not_ok "the stand-in for SNS starts"
SP=$(sed -n 's/.* port \([0-9]*\) .*/\1/p' "$T/snsd.out")
# confirm TOPIC URL: the status of a POSTed SubscriptionConfirmation.
confirm() {
	printf '{"Type":"SubscriptionConfirmation","TopicArn":"%s","SubscribeURL":"%s","Token":"t"}' "$2" "$3" |
		curl -s -o /dev/null -w '%{http_code}' -X POST --data-binary @- "http://127.0.0.1:$1/"
}
gets() { grep -c '"GET /confirm' "$T/snsd.log"; }
if start_bridge sns --listen 127.0.0.1:0 --sns-topic "$ARN" --sns-url-prefix "http://127.0.0.1:$SP/"; then
	check_eq "--sns-topic: a subscription to it is confirmed (200)" 200 \
		"$(confirm "$PORT_sns" "$ARN" "http://127.0.0.1:$SP/confirm?Action=ConfirmSubscription&Token=t1")"
	check "… by a GET of its SubscribeURL" grep -q '"GET /confirm?Action=ConfirmSubscription&Token=t1 HTTP' "$T/snsd.log"
	check "… and logged" grep -q "SNS subscription to $ARN confirmed" "$T/sns.log"
	n=$(gets)
	check_eq "a subscription to another topic: 403" 403 \
		"$(confirm "$PORT_sns" "${ARN}-other" "http://127.0.0.1:$SP/confirm?Token=t2")"
	check_eq "a SubscribeURL outside --sns-url-prefix: 403" 403 \
		"$(confirm "$PORT_sns" "$ARN" "http://127.0.0.2:$SP/confirm?Token=t3")"
	check_eq "… neither was fetched" "$n" "$(gets)"
	check "… both are logged with their URL, to confirm by hand" \
		sh -c "grep -q 'refused (not a topic of --sns-topic); to confirm it by hand, GET http://127.0.0.1:$SP/confirm?Token=t2' '$T/sns.log' &&
		       grep -q \"refused (its SubscribeURL is not one of SNS's)\" '$T/sns.log'"
	kill -TERM "$SNS_PID"; wait "$SNS_PID" 2>/dev/null
	check_eq "SNS's URL unreachable: 500, so that SNS sends it again" 500 \
		"$(confirm "$PORT_sns" "$ARN" "http://127.0.0.1:$SP/confirm?Token=t4")"
fi
stop_bridges
if start_bridge snsaws --listen 127.0.0.1:0 --sns-topic "$ARN"; then
	check_eq "without --sns-url-prefix only SNS's hosts: a loopback URL is refused (403)" 403 \
		"$(confirm "$PORT_snsaws" "$ARN" "http://127.0.0.1:9/confirm")"
fi
stop_bridges
rc=0
"$BRIDGE" --brokers "$KAFKA_BROKERS" --topic "$TOPIC" --sns-topic s3events >/dev/null 2>&1 || rc=$?
check_eq "--sns-topic that is not an ARN is refused (2)" 2 "$rc"

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
