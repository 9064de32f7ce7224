#!/usr/bin/env bash
# t_tls — S3 over TLS: radosgw serves https with a certificate the bed made
# (S3_TLS_CA). Our client and a mounted gateway work with that CA
# (s3.ca_file), fail with a message naming the certificate problem with
# another CA or the system's store, and skip verification only when told
# so explicitly (s3.insecure, which cannot be combined with ca_file).
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/gateway.sh"
require_bed

[[ -n ${S3_TLS_URL:-} && -r ${S3_TLS_CA:-} ]] || { not_ok "bed serves TLS" "no S3_TLS_URL/S3_TLS_CA in the bed env"; exit 1; }
S3TOOL=$FACETFS_BUILD/tests/bed/s3tool
T=$(test_tmp)
B=$(new_bucket tls)
check "aws: create bucket" aws_s3 s3api create-bucket --bucket "$B"
echo "over tls" >"$T/obj"
check "aws: put obj" aws_s3 s3api put-object --bucket "$B" --key dir/obj --body "$T/obj"

# Another CA, which did not sign radosgw's certificate.
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=other-ca \
	-keyout "$T/other.key" -out "$T/other.crt" >/dev/null 2>&1 || not_ok "openssl: other CA"

tls() { S3_ENDPOINT=$S3_TLS_URL "$S3TOOL" "$@"; }
check_eq "s3tool with the right CA: GET over https" "over tls" "$(S3_CA_FILE=$S3_TLS_CA tls get "$B" dir/obj 2>&1)"
rc=0
S3_CA_FILE=$T/other.crt tls check "$B" >"$T/wrong.out" 2>&1 || rc=$?
if ((rc != 0)) && grep -qiE "certificate|verif" "$T/wrong.out"; then
	ok "s3tool with another CA fails, naming the certificate problem (exit $rc)"
else
	not_ok "s3tool with another CA fails, naming the certificate problem" "exit $rc: $(tail -n 1 "$T/wrong.out")"
fi
rc=0
tls check "$B" >"$T/system.out" 2>&1 || rc=$?
if ((rc != 0)); then ok "s3tool with the system's CA store refuses the self-signed certificate"; else not_ok "s3tool with the system's CA store refuses the self-signed certificate"; fi
check_eq "s3tool with S3_INSECURE: no verification, works" "over tls" "$(S3_INSECURE=1 tls get "$B" dir/obj 2>&1)"

# The gateway: the config's s3.ca_file / s3.insecure.
view_file "$T/views" all "$B" '{ "prefix": "" }'
# tls_config FILE EXTRA_S3_FIELDS: a gateway config over https.
tls_config() {
	gw_config "$1" "$T/state-$(basename "$1" .json)" "$T/views"
	local tmp
	tmp=$(jq --arg ep "$S3_TLS_URL" ".s3.endpoint = \$ep | .s3 += $2" "$1") && printf '%s\n' "$tmp" >"$1"
}
tls_config "$T/good.json" "{\"ca_file\": \"$S3_TLS_CA\"}"
if start_gateway good "$T/good.json" "$T/mnt"; then
	ok "gateway over https with s3.ca_file mounts"
	wait_for 20 test -f "$T/mnt/all/dir/obj"
	check_eq "content read over https" "over tls" "$(cat "$T/mnt/all/dir/obj" 2>&1)"
	stop_gateway good
else
	not_ok "gateway over https with s3.ca_file mounts"
fi

tls_config "$T/wrong.json" "{\"ca_file\": \"$T/other.crt\"}"
mkdir -p "$T/mnt2"
t0=$(date +%s)
rc=0
"$FACETFS" mount -c "$T/wrong.json" "$T/mnt2" >"$T/wrong-gw.out" 2>&1 || rc=$?
dt=$(($(date +%s) - t0))
if ((rc != 0)) && ! is_mounted "$T/mnt2"; then ok "gateway with another CA: exit $rc, nothing mounted"; else not_ok "gateway with another CA: not mounted" "exit $rc"; fi
check "gateway with another CA: the message names the certificate problem" grep -qiE "certificate|verif" "$T/wrong-gw.out"
if ((dt <= 30)); then ok "gateway with another CA fails within 30 s (${dt} s)"; else not_ok "gateway with another CA fails within 30 s" "${dt} s"; fi
is_mounted "$T/mnt2" && fusermount3 -u "$T/mnt2"

tls_config "$T/both.json" "{\"ca_file\": \"$S3_TLS_CA\", \"insecure\": true}"
rc=0
"$FACETFS" mount -c "$T/both.json" "$T/mnt2" >"$T/both.out" 2>&1 || rc=$?
check_eq "insecure with ca_file: config error (2)" 2 "$rc"
check "insecure with ca_file: the message names s3.insecure" grep -q "s3.insecure" "$T/both.out"

tls_config "$T/insecure.json" '{"insecure": true}'
if start_gateway insecure "$T/insecure.json" "$T/mnt3"; then
	ok "gateway with s3.insecure mounts"
	check "gateway with s3.insecure warns in its log" grep -q "not verified" "$(gateway_log insecure)"
	stop_gateway insecure
else
	not_ok "gateway with s3.insecure mounts"
fi
