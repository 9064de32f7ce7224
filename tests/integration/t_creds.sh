#!/usr/bin/env bash
# t_creds — credentials as AWS users have them, with RGW's STS: a gateway
# mounted on temporary credentials (AssumeRole: key, secret, session token)
# from a shared credentials file and profile keeps working after they are
# replaced in the file: once when S3 refuses the old ones (the request is
# sent again with the renewed ones) and once on SIGHUP. No secret appears
# in the gateway's log, `facetfs status` or .facetfs/. A config holding a
# secret readable by others gets a warning; missing credentials a clear
# error. Then the instance metadata service (a fake IMDSv2 handing out STS
# credentials that expire soon): renewed before they expire.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/gateway.sh"
require_bed

T=$(test_tmp)
B=$(new_bucket creds)
check "aws: create bucket" aws_s3 s3api create-bucket --bucket "$B"
for i in 1 2 3 4; do echo "object $i" >"$T/o$i"; aws_s3 s3api put-object --bucket "$B" --key "o$i" --body "$T/o$i" >/dev/null; done

# Two roles the bed's user may assume, each allowed everything in S3.
radosgw-admin -c "$CEPH_CONF" -n client.admin caps add --uid=tester --caps="roles=*" >/dev/null 2>&1 ||
	not_ok "radosgw-admin: roles capability"
printf '{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":["arn:aws:iam:::user/tester"]},"Action":["sts:AssumeRole"]}]}' >"$T/trust.json"
printf '{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":["s3:*"],"Resource":"arn:aws:s3:::*"}]}' >"$T/policy.json"
R1=creds-r1-$$ R2=creds-r2-$$
for r in "$R1" "$R2"; do
	aws_s3 iam create-role --role-name "$r" --assume-role-policy-document "file://$T/trust.json" >/dev/null 2>"$T/err" ||
		not_ok "iam create-role $r" "$(tail -n 1 "$T/err")"
	aws_s3 iam put-role-policy --role-name "$r" --policy-name all --policy-document "file://$T/policy.json" >/dev/null 2>"$T/err" ||
		not_ok "iam put-role-policy $r" "$(tail -n 1 "$T/err")"
done

# assume ROLE NAME: temporary credentials into $T/NAME.{ak,sk,tok}
assume() {
	local j
	j=$(aws_s3 sts assume-role --role-arn "arn:aws:iam:::role/$1" --role-session-name "session-$2" --duration-seconds 900 2>"$T/err") || {
		not_ok "sts assume-role $1" "$(tail -n 1 "$T/err")"
		return 1
	}
	jq -r .Credentials.AccessKeyId <<<"$j" >"$T/$2.ak"
	jq -r .Credentials.SecretAccessKey <<<"$j" >"$T/$2.sk"
	jq -r .Credentials.SessionToken <<<"$j" >"$T/$2.tok"
}
# credfile NAME: the shared credentials file, profile [temp], from NAME.
credfile() {
	local tmp=$T/credentials.new
	printf '[default]\naws_access_key_id = nobody\naws_secret_access_key = nothing\n\n[temp]\naws_access_key_id = %s\naws_secret_access_key = %s\naws_session_token = %s\n' \
		"$(cat "$T/$1.ak")" "$(cat "$T/$1.sk")" "$(cat "$T/$1.tok")" >"$tmp"
	chmod 600 "$tmp"
	mv "$tmp" "$T/credentials"
}
assume "$R1" a || exit 1
credfile a

view_file "$T/views" all "$B" '{ "prefix": "" }'
gw_config "$T/gw.json" "$T/state" "$T/views"
jq --arg f "$T/credentials" '.s3 |= (del(.access_key, .secret_key) + { "credentials_file": $f, "profile": "temp" })' \
	"$T/gw.json" >"$T/gw.tmp" && mv "$T/gw.tmp" "$T/gw.json"
chmod 600 "$T/gw.json"
M=$T/mnt
if ! start_gateway A "$T/gw.json" "$M"; then
	not_ok "gateway mounts on temporary credentials from a profile"
	exit 1
fi
ok "gateway mounts on temporary credentials from a profile"
LOG=$(gateway_log A)
check "log names the source and that they are temporary" grep -q "credentials from $T/credentials \[profile temp\] (temporary" "$LOG"
wait_for 20 test -f "$M/all/o4"
check_eq "read with the first credentials" "object 1" "$(cat "$M/all/o1" 2>&1)"

# Replace them in the file, then make the first ones useless: the next
# S3 request is refused, renews, and is sent again.
assume "$R2" b && credfile b
aws_s3 iam delete-role-policy --role-name "$R1" --policy-name all >/dev/null 2>&1
rc=0
AWS_ACCESS_KEY_ID=$(cat "$T/a.ak") AWS_SECRET_ACCESS_KEY=$(cat "$T/a.sk") AWS_SESSION_TOKEN=$(cat "$T/a.tok") \
	"$FACETFS_BUILD/tests/bed/s3tool" get "$B" o2 >/dev/null 2>&1 || rc=$?
check_eq "the first credentials are now refused (EACCES 13)" 13 "$rc"
check_eq "read after the replacement (refused, renewed, sent again)" "object 2" "$(cat "$M/all/o2" 2>&1)"
check "log: renewed from the credentials file" grep -q "credentials: renewed from" "$LOG"

# SIGHUP: re-read at once.
assume "$R2" c && credfile c
n_before=$(grep -c "credentials: renewed from" "$LOG")
kill -HUP "$(gateway_pid A)"
wait_for 10 eval '[[ $(grep -c "credentials: renewed from" "$LOG") -gt $n_before ]]' &&
	ok "SIGHUP renews the credentials" || not_ok "SIGHUP renews the credentials"
check "the gateway still runs after SIGHUP" pid_alive "$(gateway_pid A)"
check_eq "read after SIGHUP" "object 3" "$(cat "$M/all/o3" 2>&1)"

# No secret anywhere the gateway shows or logs.
"$FACETFS" status "$M" >"$T/status.txt" 2>&1
"$FACETFS" status "$M" --json >"$T/status.json" 2>&1
cat "$M/.facetfs/stats" "$M/.facetfs/views" >"$T/facetfs.txt" 2>&1
leaks=0
for secret in "$(cat "$T/a.sk")" "$(cat "$T/b.sk")" "$(cat "$T/c.sk")" "$(cat "$T/a.tok")" "$(cat "$T/c.tok")" "$AWS_SECRET_ACCESS_KEY"; do
	for f in "$LOG" "$T/status.txt" "$T/status.json" "$T/facetfs.txt"; do
		grep -qF -- "$secret" "$f" && { leaks=$((leaks + 1)); echo "# secret found in $f"; }
	done
done
check_eq "no secret or token in the log, status or .facetfs/" 0 "$leaks"
stop_gateway A

# A secret in a config others may read: a warning.
gw_config "$T/open.json" "$T/state2" "$T/views"
chmod 644 "$T/open.json"
if start_gateway B "$T/open.json" "$T/mnt2"; then
	check "a world-readable config with a secret is warned about" grep -q "readable by group or others" "$(gateway_log B)"
	stop_gateway B
else
	not_ok "gateway with keys in its config mounts"
fi

# No credentials anywhere: a clear error, nothing mounted.
jq '.s3 |= del(.access_key, .secret_key, .credentials_file, .profile)' "$T/gw.json" >"$T/none.json"
rc=0
env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY -u AWS_SHARED_CREDENTIALS_FILE HOME="$T/nohome" \
	"$FACETFS" mount -c "$T/none.json" "$T/mnt2" >"$T/none.out" 2>&1 || rc=$?
if ((rc != 0)) && grep -q "no credentials" "$T/none.out"; then
	ok "no credentials: exit $rc, the message says so"
else
	not_ok "no credentials: a clear error" "exit $rc: $(tail -n 1 "$T/none.out")"
fi
# The instance metadata service (a fake IMDSv2 on the loopback handing out
# RGW STS credentials that it says live 20 s): the mount takes them when
# nothing else has any, and renews them before they expire; the renewed
# ones are used; status names the source and the expiry, no secret.
mkdir -p "$T/imds"
assume "$R2" d && for k in ak sk tok; do cp "$T/d.$k" "$T/imds/$k"; done
python3 "$FACETFS_SRC/tests/lib/fake_imds.py" "$T/imds" 20 "$T/imds.port" >"$T/imds.log" 2>&1 &
IMDS_PID=$!
wait_for 10 test -s "$T/imds.port" || not_ok "the fake IMDS starts" "$(tail -n 2 "$T/imds.log")"
saved_env=$(export -p | grep -E ' (AWS_ACCESS_KEY_ID|AWS_SECRET_ACCESS_KEY|AWS_SESSION_TOKEN|AWS_SHARED_CREDENTIALS_FILE|AWS_CONFIG_FILE|AWS_EC2_METADATA_DISABLED|HOME)=' || true)
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN AWS_SHARED_CREDENTIALS_FILE AWS_CONFIG_FILE AWS_EC2_METADATA_DISABLED
export HOME=$T/nohome AWS_EC2_METADATA_SERVICE_ENDPOINT=http://127.0.0.1:$(cat "$T/imds.port")
started=0
start_gateway C "$T/none.json" "$T/mnt3" && started=1
eval "$saved_env"
unset AWS_EC2_METADATA_SERVICE_ENDPOINT
if ((started)); then
	ok "gateway mounts on the instance metadata service's credentials"
	LOGC=$(gateway_log C)
	check "log: credentials from instance metadata (role facetfs-test), temporary" \
		grep -q "credentials from instance metadata .*(role facetfs-test) (temporary" "$LOGC"
	"$FACETFS" status "$T/mnt3" >"$T/status3.txt" 2>&1
	check "status names the source and the expiry" grep -q "^creds .*instance metadata.*expire 20" "$T/status3.txt"
	# Rotate what the IMDS hands out; the renewer takes it before the 20 s run out.
	assume "$R2" e && for k in ak sk tok; do cp "$T/e.$k" "$T/imds/$k.new"; mv "$T/imds/$k.new" "$T/imds/$k"; done
	if wait_for 30 grep -q "credentials: renewed from instance metadata" "$LOGC"; then
		ok "renewed from the instance metadata service before they expired"
	else
		not_ok "renewed from the instance metadata service before they expired" "$(grep credentials "$LOGC" | tail -n 3)"
	fi
	check "the IMDS served the rotated credentials" grep -qxF "$(cat "$T/e.ak")" "$T/imds/served"
	check_eq "read after the renewal" "object 4" "$(cat "$T/mnt3/all/o4" 2>&1)"
	"$FACETFS" status "$T/mnt3" --json >"$T/status3.json" 2>&1
	leaks=0
	for secret in "$(cat "$T/d.sk")" "$(cat "$T/d.tok")" "$(cat "$T/e.sk")" "$(cat "$T/e.tok")"; do
		for f in "$LOGC" "$T/status3.txt" "$T/status3.json"; do
			grep -qF -- "$secret" "$f" && { leaks=$((leaks + 1)); echo "# secret found in $f"; }
		done
	done
	check_eq "no IMDS secret or token in the log or status" 0 "$leaks"
	stop_gateway C
else
	not_ok "gateway mounts on the instance metadata service's credentials" "$(tail -n 3 "$(gateway_log C)")"
fi
kill "$IMDS_PID" 2>/dev/null
wait "$IMDS_PID" 2>/dev/null
for r in "$R1" "$R2"; do
	aws_s3 iam delete-role-policy --role-name "$r" --policy-name all >/dev/null 2>&1
	aws_s3 iam delete-role --role-name "$r" >/dev/null 2>&1
done
