#!/usr/bin/env bash
# t_malformed.sh — bad records between good ones: the good ones are applied,
# the bad ones counted as malformed (the AWS test event as ignored), the
# gateway stays up.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/gateway.sh"
require_bed

B=$(new_bucket malformed)
aws_s3 s3 mb "s3://$B" >/dev/null || { not_ok "make bucket"; exit 1; }
T=$(test_tmp)
view_file "$T/views" all "$B" '{ "prefix": "" }'
gw_config "$T/gw.json" "$T/state" "$T/views"
start_gateway A "$T/gw.json" "$T/mnt" || { not_ok "gateway starts"; exit 1; }
M=$T/mnt
# The topic holds every earlier test's events, malformed ones among them
# (RGW 16 notifies a PUT refused by a condition, with eventTime 0.000000):
# count from once the gateway has read them all.
caught_up() {
	jq -e '(.kafka.lag // {}) | [.[]] | all(. == 0)' "$M/.facetfs/stats" >/dev/null &&
	[[ $(stat_field "$M" .events.malformed) == "${1:-x}" ]]
}
last=
for _ in $(seq 1 60); do
	now=$(stat_field "$M" .events.malformed)
	caught_up "$last" && break
	last=$now
	sleep 1
done
mal0=$(stat_field "$M" .events.malformed)
ign0=$(stat_field "$M" .events.ignored)

MK=$FACETFS_SRC/tests/lib/mkevents.py
K="$B/same-key"     # one Kafka key: one partition, so the order is kept
{
	python3 "$MK" "$B" good-a- 1
	printf '%s\t%s\n' "$K" 'this is not JSON {'
	printf '%s\t%s\n' "$K" '{"Records":"not an array"}'
	printf '%s\t%s\n' "$K" '{"Records":[{"eventName":"ObjectCreated:Put","s3":{"bucket":{"name":5},"object":{"key":[]}}}]}'
	printf '%s\t%s\n' "$K" '{"no":"records"}'
	printf '%s\t' "$K"; head -c 1048576 /dev/urandom | base64 -w0; printf '\n'
	printf '%s\t%s\n' "$K" "$(tr -d '\n' <"$FACETFS_SRC/tests/data/events/aws-testevent.json")"
	python3 "$MK" "$B" good-b- 1
} | kcat -P -b "$KAFKA_BROKERS" -t "$KAFKA_TOPIC" -K '\t' -X message.max.bytes=4000000 ||
	not_ok "produce to kafka"

if wait_for 15 test -e "$M/all/good-b-0000000"; then ok "record after the bad ones applied"; else not_ok "record after the bad ones applied"; fi
check "record before the bad ones applied" test -e "$M/all/good-a-0000000"
check_eq "bad records counted as malformed" 5 $(( $(stat_field "$M" .events.malformed) - mal0 ))
check_eq "AWS test event counted as ignored" 1 $(( $(stat_field "$M" .events.ignored) - ign0 ))
check "gateway alive" pid_alive "$(gateway_pid A)"
check_eq "only the good records are listed" "good-a-0000000 good-b-0000000" "$(ls "$M/all" | tr '\n' ' ' | sed 's/ $//')"
grep -c "malformed" "$(gateway_log A)" | grep -qv '^0$' && ok "malformed records logged" || not_ok "malformed records logged"
stop_gateway A
check_eq "clean stop" 0 "$?"
