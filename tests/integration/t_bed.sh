#!/usr/bin/env bash
# t_bed — the test bed itself works: S3 (aws, s3cmd), Kafka round trip, and
# RGW notifications through facetfs-bridge into Kafka, keyed bucket/key.
. "$(dirname "$0")/../lib/common.sh"
require_bed

tmp=$(test_tmp)
b=$(new_bucket bed)

# --- S3 with /usr/bin/aws: metadata and a key with a space -----------------
check "aws: create bucket" aws_s3 s3api create-bucket --bucket "$b"
printf 'hello bed\n' >"$tmp/in.txt"
check "aws: put object with --metadata and a space in the key" \
	aws_s3 s3api put-object --bucket "$b" --key "dir one/hello world.txt" \
	--body "$tmp/in.txt" --metadata tag=alpha,owner=bed
if aws_s3 s3api get-object --bucket "$b" --key "dir one/hello world.txt" \
	"$tmp/out.txt" >"$tmp/get.json" 2>"$tmp/get.err"; then
	check "aws: get returns the bytes put" cmp "$tmp/in.txt" "$tmp/out.txt"
	check_eq "aws: get returns the metadata" "alpha bed" \
		"$(jq -r '.Metadata.tag + " " + .Metadata.owner' "$tmp/get.json")"
else
	not_ok "aws: get object" "$(tail -n 1 "$tmp/get.err")"
fi

# --- s3cmd (signature v2) sees the same object ---------------------------
if s3cmd_bed ls --recursive "s3://$b" >"$tmp/s3cmd.out" 2>&1; then
	if grep -q "s3://$b/dir one/hello world.txt\$" "$tmp/s3cmd.out"; then
		ok "s3cmd: ls lists the object"
	else
		not_ok "s3cmd: ls lists the object" "not in: $(tr '\n' ' ' <"$tmp/s3cmd.out")"
	fi
else
	not_ok "s3cmd: ls" "$(tail -n 1 "$tmp/s3cmd.out")"
fi

# --- Kafka: produce and consume through the mock -------------------------
# (bedcheck is the bed's scratch topic; nothing but events goes to $KAFKA_TOPIC)
printf 'k1-%s\tv1\nk2-%s\tv2\n' $$ $$ | kcat -P -b "$KAFKA_BROKERS" -t bedcheck -K '\t' 2>"$tmp/kcat.err"
got=$(kcat -C -b "$KAFKA_BROKERS" -t bedcheck -e -q -X fetch.wait.max.ms=10 -f '%k=%s\n' \
	2>>"$tmp/kcat.err" | grep -- "-$$=" | sort | tr '\n' ' ')
check_eq "kafka: kcat produce/consume round trip" "k1-$$=v1 k2-$$=v2 " "$got"

# --- notifications: PUT on a notified bucket -> Kafka message bucket/key ---
nb=$(new_bucket notify)
key="events/a key ü.txt"
if ! bed_cmd notify "$nb" >"$tmp/notify.out" 2>&1; then
	not_ok "bed notify" "$(tail -n 1 "$tmp/notify.out")"
else
	ok "bed notify"
	aws_s3 s3api put-object --bucket "$nb" --key "$key" --body "$tmp/in.txt" >/dev/null
	has_key() { kafka_keys | grep -qxF "$nb/$key"; }
	if wait_for 10 has_key; then
		ok "notification reaches Kafka keyed bucket/key"
	else
		not_ok "notification reaches Kafka keyed bucket/key" \
			"no message keyed '$nb/$key' within 10 s"
		tail -n 5 "$BED_DIR/log/bridge.log" | diag
	fi
	aws_s3 s3api delete-object --bucket "$nb" --key "$key" >/dev/null
	n_del() { [[ $(kafka_keys | grep -cxF "$nb/$key") -ge 2 ]]; }
	if wait_for 10 n_del; then
		ok "delete notification reaches Kafka"
	else
		not_ok "delete notification reaches Kafka" "only one message keyed '$nb/$key'"
	fi
fi
