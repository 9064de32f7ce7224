# tests/bench/bench_lib.sh — helpers for the benchmark scripts (sourced).
#
# Benchmarks print figures; they assert nothing about speed. They need a bed:
# either its env already in the environment (S3_URL, KAFKA_BROKERS, ...), or
# BED_DIR pointing at one (`tests/bed/bed up DIR`), whose DIR/env is sourced.
# Every gateway started here is stopped by its PID (bench_cleanup on EXIT);
# scratch files live in BENCH_TMP (under BED_DIR, removed unless KEEP_TMP=1).
# Figures for run-all.sh's table: bench_figure "what" "value" "target" appends
# a line "what|value|target" to $BENCH_RESULTS when that is set.

FACETFS_SRC=${FACETFS_SRC:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
FACETFS_BUILD=${FACETFS_BUILD:-$FACETFS_SRC/build}
export FACETFS_BUILD
FACETFS=$FACETFS_BUILD/gateway/exe/facetfs
S3TOOL=$FACETFS_BUILD/tests/bed/s3tool
AWS=/usr/bin/aws
BENCH_NAME=$(basename "$0" .sh)
declare -A BG_PID=() BG_MNT=()

bench_say() { printf '%s: %s\n' "$BENCH_NAME" "$*"; }
bench_die() { printf '%s: error: %s\n' "$BENCH_NAME" "$*" >&2; exit 1; }

# bench_own_bed [MEMSTORE_BYTES]: with no bed given (neither its env nor
# BED_DIR), bring one up in a temp dir (OWN_BED, with MEMSTORE_BYTES of RAM
# store unless BED_MEMSTORE_BYTES says otherwise) and point BED_DIR at it;
# bench_cleanup takes it down, and removes it when all went well.
bench_own_bed() {
	[[ -z ${S3_URL:-} && -z ${BED_DIR:-} ]] || return 0
	OWN_BED=$(mktemp -d "/tmp/${BENCH_NAME}_bed.XXXXXX")
	bench_say "no bed given: starting one in $OWN_BED"
	local mem=${BED_MEMSTORE_BYTES:-${1:-}}
	BED_MEMSTORE_BYTES=$mem "$FACETFS_SRC/tests/bed/bed" up "$OWN_BED" >"$OWN_BED.log" 2>&1 ||
		{ bench_say "bed up failed:"; tail -n 20 "$OWN_BED.log" >&2; exit 1; }
	export BED_DIR=$OWN_BED
}

# Source the bed's env unless it is already there.
bench_require_bed() {
	if [[ -z ${S3_URL:-} || -z ${KAFKA_BROKERS:-} ]]; then
		[[ -n ${BED_DIR:-} && -r $BED_DIR/env ]] ||
			bench_die "no bed: set BED_DIR to a running bed (tests/bed/bed up DIR)"
		# shellcheck disable=SC1091
		. "$BED_DIR/env"
	fi
	[[ -x $FACETFS ]] || bench_die "no $FACETFS (ninja -C $FACETFS_BUILD)"
	mkdir -p "${BED_DIR:-${TMPDIR:-/tmp}}/bench"
	BENCH_TMP=$(mktemp -d "${BED_DIR:-${TMPDIR:-/tmp}}/bench/$BENCH_NAME.XXXXXX")
}

now_ns() { date +%s%N; }
# ms between two now_ns values, with one decimal.
ms_between() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", (b - a) / 1e6 }'; }
s_between() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b - a) / 1e9 }'; }
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }
# bench_settle MAX_S: after heavy setup (a bucket's fill), wait until the
# 1-minute load average is below 1.5 or MAX_S seconds have passed, saying
# which; the figures that follow are only as quiet as the machine.
bench_settle() {
	local end=$(($(date +%s) + $1))
	while awk '{ exit !($1 >= 1.5) }' /proc/loadavg && (($(date +%s) < end)); do
		sleep 5
	done
	bench_say "load average $(loadavg) after settling (at most $1 s)"
}

# Figures over passes, in $T/figs (T: the script's scratch dir): rec KEY
# VALUE records one; summary KEY prints "median (min-max)" of its values
# (one value: itself; none: n/a); fig WHAT KEY TARGET prints that line.
rec() { printf '%s %s\n' "$1" "$2" >>"$T/figs"; }
summary() {
	awk -v k="$1" '$1 == k { v[n++] = $2 } END {
		if (!n) { print "n/a"; exit }
		for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
		m = n % 2 ? v[int(n / 2)] : (v[n / 2 - 1] + v[n / 2]) / 2
		f = m >= 100 ? "%.0f" : (m >= 10 ? "%.1f" : "%.2f")
		if (n == 1) printf f "\n", m
		else printf f " (" f "-" f ")\n", m, v[0], v[n - 1] }' "$T/figs"
}
fig() { bench_figure "$1" "$(summary "$2")" "$3"; }

# Free what deleted objects held in the bed's RAM store now (RGW collects
# deleted data lazily; a big benchmark writing GiBs would fill memstore).
rgw_gc() { timeout 120 radosgw-admin -c "$CEPH_CONF" gc process --include-all >/dev/null 2>&1; }

bench_figure() {
	printf '  %-58s %14s   target %s\n' "$1" "$2" "$3"
	[[ -z ${BENCH_RESULTS:-} ]] || printf '%s|%s|%s\n' "$1" "$2" "$3" >>"$BENCH_RESULTS"
}

# True while PID exists and is not a zombie.
pid_alive() {
	local st
	[[ -r /proc/${1:-x}/status ]] || return 1
	st=$(awk '/^State:/ {print $2}' "/proc/$1/status" 2>/dev/null)
	[[ -n $st && $st != Z && $st != X ]]
}

# wait_until SECONDS cmd...: every 10 ms until cmd succeeds (0) or time is up (1).
wait_until() {
	local end=$(($(now_ns) + $1 * 1000000000))
	shift
	until "$@" >/dev/null 2>&1; do
		(($(now_ns) < end)) || return 1
		sleep 0.01
	done
}

# bench_config FILE STATE VIEWS TOPIC FETCH_WAIT_MS: a gateway config
# (tests/lib/gateway.sh's gw_config, with a group of its own).
# shellcheck source=tests/lib/gateway.sh
. "$FACETFS_SRC/tests/lib/gateway.sh"
bench_config() { gw_config "$1" "$2" "$3" "bench-$$-$RANDOM$RANDOM" "$4" "$5"; }

# A Kafka topic made now (the mock creates unknown topics on a metadata
# request, with 4 partitions): a fresh topic per run, so that no leftover
# of an earlier run is consumed.
bench_topic() { kcat -L -b "$KAFKA_BROKERS" -t "$1" >/dev/null 2>&1; }

# gw_start NAME CONFIG MOUNT: facetfs mount ... -f in the background; returns
# when mounted (0) or 1 with the log's tail. GW_T0/GW_T1: start / mounted (ns).
gw_start() {
	local name=$1 conf=$2 mnt=$3 log=$BENCH_TMP/gw-$1.log pid
	mkdir -p "$mnt"
	GW_T0=$(now_ns)
	"$FACETFS" mount -c "$conf" "$mnt" -f </dev/null >>"$log" 2>&1 &
	pid=$!
	BG_PID[$name]=$pid BG_MNT[$name]=$mnt
	gw_up() { pid_alive "$pid" && mountpoint -q "$mnt"; }
	if ! wait_until 60 gw_up; then
		echo "$BENCH_NAME: gateway $name did not mount; last lines of $log:" >&2
		tail -n 20 "$log" >&2
		gw_stop "$name"
		return 1
	fi
	GW_T1=$(now_ns)
}

gw_pid() { printf '%s\n' "${BG_PID[$1]:-}"; }

# gw_stop NAME: SIGTERM by PID, 20 s, then SIGKILL; unmount if still mounted.
gw_stop() {
	local pid=${BG_PID[$1]:-} mnt=${BG_MNT[$1]:-}
	[[ -n $pid ]] || return 0
	kill -TERM "$pid" 2>/dev/null
	if ! wait_until 20 eval "! pid_alive $pid"; then
		echo "$BENCH_NAME: gateway $1 (pid $pid) ignored SIGTERM: SIGKILL" >&2
		kill -KILL "$pid" 2>/dev/null
	fi
	wait "$pid" 2>/dev/null
	if [[ -n $mnt ]] && mountpoint -q "$mnt"; then
		fusermount3 -u "$mnt" 2>/dev/null || fusermount3 -uz "$mnt" 2>/dev/null
	fi
	unset "BG_PID[$1]"
}

# All views of the mount "ready" (every bucket scanned).
# (keys starting with '.' are not views: .errors, .reloads)
views_ready() {
	jq -e 'to_entries | map(select(.key | startswith(".") | not)) |
		length > 0 and all(.value.state == "ready")' "$1/.facetfs/views" >/dev/null 2>&1
}

# A field of the mount's stats.

# Make a bucket (idempotent on RGW).
bench_bucket() { "$AWS" --endpoint-url "$S3_URL" s3api create-bucket --bucket "$1" >/dev/null 2>&1 || true; }

# ---- peers (s3fs, rclone) mounted beside the gateway ----
# bench_peer_creds: $BENCH_TMP/s3fs.passwd (mode 0600) and
# $BENCH_TMP/rclone.conf (a remote "bed") for the bed's S3.
# bench_peer_start NAME MOUNT command...: runs command (a FUSE daemon in
# the foreground, output in $BENCH_TMP/NAME.log) and waits up to 60 s for
# MOUNT to be mounted and, when BENCH_PEER_READY names a function, for
# that function to return true (called with MOUNT); else prints the log's
# last lines, stops it and returns 1. bench_peer_stop NAME unmounts
# (lazily if that hangs), then stops the daemon by its PID; bench_cleanup
# stops every peer still up.
declare -A BENCH_PEER_PID=() BENCH_PEER_MNT=()

bench_peer_creds() {
	printf '%s:%s\n' "$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY" >"$BENCH_TMP/s3fs.passwd"
	chmod 600 "$BENCH_TMP/s3fs.passwd"
	printf '[bed]\ntype = s3\nprovider = Ceph\naccess_key_id = %s\nsecret_access_key = %s\nendpoint = %s\nforce_path_style = true\n' \
		"$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY" "$S3_URL" >"$BENCH_TMP/rclone.conf"
}

bench_peer_stop() {
	local pid=${BENCH_PEER_PID[$1]:-} mnt=${BENCH_PEER_MNT[$1]:-}
	[[ -n $pid ]] || return 0
	if mountpoint -q "$mnt"; then
		fusermount3 -u "$mnt" 2>/dev/null || fusermount3 -uz "$mnt" 2>/dev/null
	fi
	wait_until 10 eval "! pid_alive $pid" || kill -TERM "$pid" 2>/dev/null
	wait_until 10 eval "! pid_alive $pid" || kill -KILL "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	unset "BENCH_PEER_PID[$1]"
}

bench_peer_start() {
	local name=$1 mnt=$2 pid
	shift 2
	mkdir -p "$mnt"
	"$@" </dev/null >"$BENCH_TMP/$name.log" 2>&1 &
	pid=$!
	BENCH_PEER_PID[$name]=$pid BENCH_PEER_MNT[$name]=$mnt
	bench_peer_up() {
		pid_alive "$pid" && mountpoint -q "$mnt" &&
			{ [[ -z ${BENCH_PEER_READY:-} ]] || "$BENCH_PEER_READY" "$mnt"; }
	}
	wait_until 60 bench_peer_up && return 0
	bench_say "$name did not mount; last lines of its log:"
	tail -n 5 "$BENCH_TMP/$name.log"
	bench_peer_stop "$name"
	return 1
}

# On exit: the script's own bench_before_exit (if it defines one), every
# peer and every gateway, the scratch dir (kept on failure or KEEP_TMP=1) and
# a bed the script started itself (OWN_BED: removed when all went well).
BENCH_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

bench_cleanup() {
	local rc=$? name
	if declare -F bench_before_exit >/dev/null; then
		bench_before_exit
	fi
	for name in "${!BENCH_PEER_PID[@]}"; do
		bench_peer_stop "$name"
	done
	for name in "${!BG_PID[@]}"; do
		gw_stop "$name"
	done
	if [[ -n ${BENCH_TMP:-} && -d $BENCH_TMP ]]; then
		if [[ ${KEEP_TMP:-0} == 1 || $rc != 0 ]]; then
			echo "$BENCH_NAME: kept $BENCH_TMP"
		else
			rm -rf "$BENCH_TMP"
		fi
	fi
	if [[ -n ${OWN_BED:-} ]]; then
		"$BENCH_LIB_DIR/../bed/bed" down "$OWN_BED" >>"$OWN_BED.log" 2>&1
		[[ $rc != 0 ]] || rm -rf "$OWN_BED" "$OWN_BED.log"
	fi
	exit $rc
}
trap bench_cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
