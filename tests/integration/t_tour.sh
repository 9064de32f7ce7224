#!/usr/bin/env bash
# t_tour — the README's five-minute tour, run as a new user would run it,
# against the bed: the blocks are taken from README.md itself (marked
# <!-- run -->, <!-- run: background -->, <!-- run: stop -->,
# <!-- file: PATH -->), with the site's names replaced by the bed's and
# the system paths moved under the test's tmp dir. Then every config
# example of docs/ (<!-- config: merge -->) is merged into the tour's
# config and must start a gateway up to the mount itself.
#
# What the tour must achieve: every command exits 0; the mount is up;
# the bridge it started carried RGW's events of the tour's upload into
# Kafka; every object of the bucket (one put there before the tour, as a
# user's data, and the one the tour uploads) shows in the view with its
# bytes; facetfs status shows the view and Kafka partitions; the stop
# step unmounts and the gateway exits.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/gateway.sh"
require_bed
T=$(test_tmp)
ROOT=$T/root
D=$T/blocks
export PATH=$FACETFS_BUILD/gateway/exe:$FACETFS_BUILD/events:$PATH

(cd "$FACETFS_SRC" && python3 tests/lib/docs_check.py blocks "$D" README.md docs/*.md) ||
	{ not_ok "extract the examples of README.md and docs/"; exit 1; }

B=$(new_bucket tour)
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
BRIDGE_PORT=$(free_port)
METRICS_PORT=$(free_port)

# The site's names in the docs, and what stands for them on the bed
# (longest first where one contains another). The topic and the group
# are this run's own: on the bed's shared topic a new group would first
# read every test's events from the beginning.
SUBST=(
	"https://s3.example.com:7443" "$S3_TLS_URL"
	"/etc/facetfs/store-ca.pem" "$S3_TLS_CA"
	"s3.example.com:7480" "$S3_ENDPOINT"
	"kafka.example.com:9092" "$KAFKA_BROKERS"
	"127.0.0.1:8099" "127.0.0.1:$BRIDGE_PORT"
	"127.0.0.1:9567" "127.0.0.1:$METRICS_PORT"
	"my-bucket" "$B"
	"s3events" "tour-$$-events"
	"facetfs-host1" "facetfs-tour-$$"
	"EXAMPLEKEYID" "$AWS_ACCESS_KEY_ID"
	"EXAMPLESECRET" "$AWS_SECRET_ACCESS_KEY"
	"/etc/facetfs" "$ROOT/etc/facetfs"
	"/var/lib/facetfs" "$ROOT/var/lib/facetfs"
	"/var/cache/facetfs" "$ROOT/var/cache/facetfs"
	"/mnt/s3" "$ROOT/mnt/s3"
)
relocate() {
	local s i
	s=$(cat)
	for ((i = 0; i < ${#SUBST[@]}; i += 2)); do
		s=${s//"${SUBST[i]}"/"${SUBST[i + 1]}"}
	done
	printf '%s\n' "$s"
}
{
	echo "# replaced in the examples:"
	for ((i = 0; i < ${#SUBST[@]}; i += 2)); do echo "#   ${SUBST[i]} -> ${SUBST[i + 1]}"; done
}

# blocks FILE MARKER-REGEX: the numbers of FILE's blocks whose marker matches.
blocks() { awk -F'\t' -v f="$1" -v m="$2" '$2 == f && $5 ~ m { print $1 }' "$D/index"; }
marker() { awk -F'\t' -v n="$1" '$1 == n { print $5 }' "$D/index"; }
where() { awk -F'\t' -v n="$1" '$1 == n { print $2 ":" $3 }' "$D/index"; }

# A user's data, there before the tour.
aws_s3 s3 mb "s3://$B" >/dev/null
printf 'report of the third quarter\n' | aws_s3 s3 cp - "s3://$B/reports/2026/q3.pdf" >/dev/null

# The tour as one script, in the README's order; the stop step apart.
# A background block is one command; the script records its pid and waits
# until it listens on the bridge's port (the user would start it in
# another terminal and see it up).
TOUR=$T/tour.sh STOP=$T/stop.sh
echo 'set -e; trap '\''echo "tour: failed: $BASH_COMMAND" >&2'\'' ERR' >"$TOUR"
echo 'set -e' >"$STOP"
nrun=0
for n in $(blocks README.md '^(run|run: background|run: stop|file: .*)$'); do
	m=$(marker "$n")
	body=$(relocate <"$D/$n")
	case $m in
	"file: "*)
		path=$(relocate <<<"${m#file: }")
		printf 'mkdir -p %q\ncat >%q <<'\''TOUR_EOF'\''\n%s\nTOUR_EOF\n' "${path%/*}" "$path" "$body" >>"$TOUR" ;;
	"run: background")
		if [[ $(grep -c . <<<"$body") -ne 1 ]]; then
			not_ok "$(where "$n"): a background block is one command"
			exit 1
		fi
		printf '%s >>%q 2>&1 &\necho $! >>%q\n' "$body" "$T/background.log" "$T/background.pids" >>"$TOUR"
		printf 'for i in $(seq 200); do (exec 3<>/dev/tcp/127.0.0.1/%s) 2>/dev/null && break; sleep 0.05; done\n' "$BRIDGE_PORT" >>"$TOUR" ;;
	"run: stop") printf '%s\n' "$body" >>"$STOP" ;;
	run) printf '%s\n' "$body" >>"$TOUR"; nrun=$((nrun + 1)) ;;
	esac
done
CONF=$ROOT/etc/facetfs/gateway.json
MNT=$ROOT/mnt/s3

tour_cleanup() {
	local p
	if is_mounted "$MNT"; then fusermount3 -u "$MNT" 2>/dev/null || fusermount3 -uz "$MNT" 2>/dev/null; fi
	for p in ${GWPID:-} $(cat "$T/background.pids" 2>/dev/null); do
		if pid_alive "$p"; then
			kill -TERM "$p" 2>/dev/null
			wait_for 15 eval '! pid_alive '"$p" || kill -KILL "$p" 2>/dev/null
		fi
	done
}
trap 'rc=$?; tour_cleanup; (exit $rc); test_cleanup' EXIT

if ((nrun >= 2)) && [[ -s $STOP ]] && (cd "$T" && bash -x "$TOUR") >"$T/tour.log" 2>&1; then
	ok "the README's tour runs: $nrun shell blocks, a background bridge, the config and the filter file"
else
	not_ok "the README's tour runs" "$nrun run blocks; see below"
	tail -n 25 "$T/tour.log" | diag
fi
# The tour's state_dir, as the config it wrote says: its pid file is there.
STATE=$(jq -r '.state_dir // empty' "$CONF" 2>/dev/null)
GWPID=$(cat "${STATE:-/nonexistent}/facetfs.pid" 2>/dev/null)
check "the tour's mount is up ($MNT)" is_mounted "$MNT"
check "the tour's gateway runs in the background (pid ${GWPID:-none})" pid_alive "${GWPID:-x}"
check "the tour's bridge runs (pid $(cat "$T/background.pids" 2>/dev/null))" pid_alive "$(head -n 1 "$T/background.pids" 2>/dev/null || echo x)"

# The view the tour's filter file defines, and where the keys land in it.
VF=$(ls "$ROOT"/etc/facetfs/views.d/*.json 2>/dev/null | head -n 1)
VIEW=$(jq -r .name "$VF" 2>/dev/null)
STRIP=$(jq -r '.layout.strip_prefix // ""' "$VF" 2>/dev/null)
keys=$(aws_s3 s3api list-objects-v2 --bucket "$B" --query 'Contents[].Key' --output text | tr '\t' '\n' | grep -v '^None$')
check_eq "the bucket holds the user's object and the tour's upload" 2 "$(grep -c . <<<"$keys")"
# in_view KEY: the view shows KEY with the bytes S3 has.
in_view() { cmp -s <(aws_s3 s3 cp "s3://$B/$1" - 2>/dev/null) "$MNT/$VIEW/${1#"$STRIP"}"; }
while read -r k; do
	[[ -n $k ]] || continue
	if wait_for 30 in_view "$k"; then
		ok "view $VIEW shows $k as ${k#"$STRIP"}, same bytes as S3"
	else
		not_ok "view $VIEW shows $k" "$(ls -lR "$MNT/$VIEW" 2>&1 | head -n 5 | tr '\n' ' ')"
	fi
done <<<"$keys"
# The tour's upload came as an event: RGW -> the tour's bridge -> Kafka.
new_key=$(grep -v '^reports/2026/q3.pdf$' <<<"$keys" | head -n 1)
has_event() { kafka_keys "$(jq -r .kafka.topic "$CONF")" | grep -qxF "$B/$new_key"; }
check "RGW's event of $new_key went through the tour's bridge into Kafka" wait_for 30 has_event
status_ok() {
	local s
	s=$(facetfs status "$MNT") || return 1
	grep -qE '^kafka +partitions assigned [1-9]' <<<"$s" && grep -qE "^view $VIEW +ready" <<<"$s"
}
check "facetfs status: partitions assigned and view $VIEW ready" wait_for 30 status_ok

# The stop step.
if (cd "$T" && bash -x "$STOP") >"$T/stop.log" 2>&1; then ok "the tour's stop step runs"; else not_ok "the tour's stop step runs"; diag <"$T/stop.log"; fi
check "after the stop step nothing is mounted" eval '! is_mounted "$MNT"'
check "after the stop step the gateway exits" wait_for 20 eval '! pid_alive '"${GWPID:-x}"

# Config examples of docs/: merged into the tour's config, each starts a
# gateway up to the mount (given a mountpoint that does not exist, so the
# last step fails: exit 1, naming it; a bad config would exit 2 at once).
# The files the docs ask for come first.
for n in $(awk -F'\t' '$2 != "README.md" && $5 ~ /^file: / { print $1 }' "$D/index"); do
	path=$(relocate <<<"$(marker "$n" | sed 's/^file: //')")
	mkdir -p "${path%/*}"
	relocate <"$D/$n" >"$path"
	chmod 600 "$path"
done
NOMNT=$T/no-such-mountpoint
nconf=0
for n in $(awk -F'\t' '$5 == "config: merge" { print $1 }' "$D/index"); do
	nconf=$((nconf + 1))
	c=$T/config-$n.json
	if ! relocate <"$D/$n" | jq -s '.[0] * .[1]' "$CONF" - >"$c" 2>"$T/jq.err"; then
		not_ok "$(where "$n"): config example is JSON" "$(head -n 1 "$T/jq.err")"
		continue
	fi
	chmod 600 "$c"
	rc=0
	timeout 90 facetfs mount -c "$c" -f "$NOMNT" >"$T/config-$n.out" 2>&1 || rc=$?
	if ((rc == 1)) && grep -q "$NOMNT: not a directory" "$T/config-$n.out"; then
		ok "$(where "$n"): config example starts a gateway ($(jq -c 'del(.kafka, .state_dir, .views_dir, .cache)' "$c" | head -c 150))"
	else
		not_ok "$(where "$n"): config example starts a gateway" "exit $rc"
		grep -v ' info: ' "$T/config-$n.out" | tail -n 5 | diag
	fi
done
((nconf >= 3)) && ok "$nconf config examples in docs/" || not_ok "config examples in docs/" "$nconf found"
