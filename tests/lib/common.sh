# tests/lib/common.sh — helpers for integration tests written in bash.
#
# Source it first thing in tests/integration/t_*.sh:
#     . "$(dirname "$0")/../lib/common.sh"
# tests/run starts each script with the bed's env sourced (S3_URL, KAFKA_*,
# BRIDGE_URL, BED_DIR, ...) plus FACETFS_SRC, FACETFS_BUILD and BED.
#
# Results: one line each, read by tests/run —
#     ok - NAME | not ok - NAME # reason | skip - NAME # reason
# Do not `set -e`: check/wait_for return non-zero by design. Failures do
# not stop the script; it exits 1 at the end if any check failed
# (the EXIT trap also stops every gateway the script started and, unless
# KEEP_TMP=1 or something failed, removes its tmp dir). A script that dies
# early still exits non-zero, which tests/run counts as a failure.
# Shared bed: every script uses its own buckets (new_bucket).

FACETFS_SRC=${FACETFS_SRC:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
FACETFS_BUILD=${FACETFS_BUILD:-$FACETFS_SRC/build}
BED=${BED:-$FACETFS_SRC/tests/bed/bed}
AWS=/usr/bin/aws
TEST_NAME=$(basename "$0" .sh)
T_PASS=0 T_FAIL=0 T_SKIP=0
declare -A GW_PID=() GW_MNT=() GW_LOG=() GW_STARTS=()

ok() { T_PASS=$((T_PASS + 1)); printf 'ok - %s\n' "$1"; }

not_ok() {
	T_FAIL=$((T_FAIL + 1))
	if [[ -n ${2:-} ]]; then
		printf 'not ok - %s # %s\n' "$1" "$2"
	else
		printf 'not ok - %s\n' "$1"
	fi
}

skip() { T_SKIP=$((T_SKIP + 1)); printf 'skip - %s # %s\n' "$1" "${2:-no reason given}"; }

# Print lines as TAP comments.
diag() { sed 's/^/# /'; }

# check NAME cmd...: ok if cmd succeeds; else not ok, with the tail of its
# output as comments.
check() {
	local name=$1 out rc
	shift
	out=$TEST_TMP/check.out
	if "$@" >"$out" 2>&1; then
		ok "$name"
		return 0
	else
		rc=$?
		not_ok "$name" "exit $rc: $*"
		tail -n 10 "$out" | diag
		return $rc
	fi
}

# check_eq NAME EXPECTED ACTUAL
check_eq() {
	if [[ $2 == "$3" ]]; then
		ok "$1"
	else
		not_ok "$1" "expected '$2', got '$3'"
		return 1
	fi
}

# wait_for TIMEOUT_S cmd...: run cmd every 50 ms until it succeeds (0) or
# TIMEOUT_S seconds (may be fractional) pass (1).
wait_for() {
	local end now
	end=$(($(date +%s%N) + $(awk -v t="$1" 'BEGIN { printf "%.0f", t * 1000000000 }')))
	shift
	while true; do
		"$@" >/dev/null 2>&1 && return 0
		now=$(date +%s%N)
		((now < end)) || return 1
		sleep 0.05
	done
}

# /usr/bin/aws against the bed's radosgw.
aws_s3() { "$AWS" --endpoint-url "$S3_URL" "$@"; }

# s3cmd against the bed's radosgw.
s3cmd_bed() { s3cmd -c "$S3CMD_CFG" "$@"; }

# The bed's own commands on this bed: bed_cmd notify BUCKET, bed_cmd rgw-stop...
bed_cmd() { local c=$1; shift; "$BED" "$c" "$BED_DIR" "$@"; }

# rgw_down_while_closing OUT FIFO PID: a writer (PID) printed "written" into
# OUT and waits for a line on FIFO before it closes: stop RGW, let it go on,
# wait for it to end, start RGW again (its closes met RGW down).
rgw_down_while_closing() {
	wait_for 10 grep -q written "$1"
	bed_cmd rgw-stop >/dev/null 2>&1
	echo go >"$2"
	wait "$3"
	bed_cmd rgw-start >/dev/null 2>&1
}

# Keys of every message now in the topic (default $KAFKA_TOPIC); kcat -e
# stops at the end; a short fetch wait because the mock holds every fetch
# for all of it.
kafka_keys() {
	kcat -C -b "$KAFKA_BROKERS" -t "${1:-$KAFKA_TOPIC}" -e -q \
		-X fetch.wait.max.ms=10 -f '%k\n'
}

# A bucket name no other script uses: new_bucket PREFIX.
new_bucket() {
	local p=${1:-t}
	printf '%s-%s-%s\n' "${p,,}" "$$" "$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')"
}

# The script's tmp dir, made when this file is sourced, under the bed's dir
# so that `bed down` also unmounts whatever a crashed test left mounted there.
mkdir -p "${BED_DIR:-${TMPDIR:-/tmp}}/tests"
TEST_TMP=$(mktemp -d "${BED_DIR:-${TMPDIR:-/tmp}}/tests/$TEST_NAME.XXXXXX")
test_tmp() { printf '%s\n' "$TEST_TMP"; }

# True while PID exists and is not a zombie.
pid_alive() {
	local st
	[[ -r /proc/${1:-x}/status ]] || return 1
	st=$(awk '/^State:/ {print $2}' "/proc/$1/status" 2>/dev/null)
	[[ -n $st && $st != Z && $st != X ]]
}

is_mounted() { mountpoint -q "$1"; }

# start_gateway NAME CONFIG MOUNTPOINT [extra args]: runs
# facetfs mount -c CONFIG MOUNTPOINT -f in the background, log in the tmp
# dir; returns once mounted (0), or 1 with the log's tail if it exits or is
# not mounted within GW_START_TIMEOUT (default 20) seconds.
# A config started again gets a new kafka.group (GROUP-rN, written into
# the file) unless GW_SAME_GROUP=1: the mock broker holds a group's old
# member until its session times out (about 5 s after a stop, 11 s after
# kill -9) before it assigns partitions to a new one, while a new group is
# assigned in about 3 s. The gateway resumes from the offsets its index
# stored, not from the group's, so the group's name changes nothing else
# (t_restart keeps the same group, the production path).
start_gateway() {
	local name=$1 conf=$2 mnt=$3 log pid
	shift 3
	if [[ -n ${GW_PID[$name]:-} ]] && pid_alive "${GW_PID[$name]}"; then
		echo "# gateway $name already started (pid ${GW_PID[$name]})" >&2
		return 1
	fi
	local starts=${GW_STARTS[$conf]:-0}
	GW_STARTS[$conf]=$((starts + 1))
	if ((starts > 0)) && [[ ${GW_SAME_GROUP:-0} != 1 ]]; then
		jq --arg n "-r$starts" '.kafka.group |= (sub("-r[0-9]+$"; "") + $n)' "$conf" >"$conf.group" &&
			cat "$conf.group" >"$conf"
		rm -f "$conf.group"
	fi
	log=$(test_tmp)/gw-$name.log
	mkdir -p "$mnt"
	"$FACETFS_BUILD/gateway/exe/facetfs" mount -c "$conf" "$mnt" -f "$@" </dev/null >>"$log" 2>&1 &
	pid=$!
	GW_PID[$name]=$pid GW_MNT[$name]=$mnt GW_LOG[$name]=$log
	gw_up() { pid_alive "$pid" && is_mounted "$mnt"; }
	if ! wait_for "${GW_START_TIMEOUT:-20}" gw_up; then
		echo "# gateway $name (pid $pid) did not mount $mnt; last lines of $log:"
		tail -n 20 "$log" | diag
		stop_gateway "$name" >/dev/null 2>&1
		return 1
	fi
	# The mount comes before the consumer group's join; the tests expect
	# events flowing once the gateway is up.
	gw_joined() { [[ $(jq -r .kafka.partitions_assigned "$mnt/.facetfs/stats") -gt 0 ]]; }
	if ! wait_for "${GW_START_TIMEOUT:-20}" gw_joined; then
		echo "# gateway $name (pid $pid): no Kafka partitions assigned; last lines of $log:"
		tail -n 20 "$log" | diag
		stop_gateway "$name" >/dev/null 2>&1
		return 1
	fi
}

gateway_log() { printf '%s\n' "${GW_LOG[$1]:-}"; }
gateway_pid() { printf '%s\n' "${GW_PID[$1]:-}"; }

# stop_gateway NAME: SIGTERM, wait (GW_STOP_TIMEOUT, default 15 s, then
# SIGKILL), fusermount3 -u if still mounted. Returns the gateway's exit
# status (so a sanitizer report or a crash on shutdown is seen).
stop_gateway() {
	local name=$1 pid mnt rc=0
	pid=${GW_PID[$name]:-}
	mnt=${GW_MNT[$name]:-}
	[[ -n $pid ]] || { echo "# no gateway $name" >&2; return 1; }
	kill -TERM "$pid" 2>/dev/null
	if ! wait_for "${GW_STOP_TIMEOUT:-15}" eval '! pid_alive '"$pid"; then
		echo "# gateway $name (pid $pid) ignored SIGTERM: SIGKILL"
		kill -KILL "$pid" 2>/dev/null
		rc=137
	fi
	wait "$pid" 2>/dev/null
	local wrc=$?
	((rc == 0)) && rc=$wrc
	if is_mounted "$mnt"; then
		fusermount3 -u "$mnt" 2>/dev/null || fusermount3 -uz "$mnt" 2>/dev/null
	fi
	unset "GW_PID[$name]"
	return $rc
}

# fuse_conn MOUNTPOINT: the number of its FUSE connection (the minor of its
# device, read from mountinfo: a stat could wait on a dead daemon).
fuse_conn() {
	awk -v m="$1" '$5 == m { split($3, d, ":"); c = d[2] } END { if (c != "") print c }' \
		/proc/self/mountinfo
}

# fuse_abort CONN: abort that FUSE connection through fusectl (mounted at
# /sys/fs/fuse/connections if it is not yet; root only). 1 if it cannot.
fuse_abort() {
	local dir=/sys/fs/fuse/connections
	[[ -n $1 ]] || return 1
	[[ -e $dir/$1/abort ]] || mount -t fusectl fusectl "$dir" 2>/dev/null
	[[ -e $dir/$1/abort ]] && echo 1 >"$dir/$1/abort" 2>/dev/null
}

# True once PID is gone or a zombie with no thread left in the kernel.
pid_reapable() {
	local tasks=("/proc/$1/task/"*)
	[[ -d /proc/$1 ]] || return 0
	! pid_alive "$1" && ((${#tasks[@]} <= 1))
}

# kill -9 a gateway (crash tests); the mount is left as it is. A thread of
# the killed daemon can stay in the kernel, in a reverse invalidation
# (notify_inval_entry) waiting for a directory lock that a client holds
# while it waits for an answer only the dead daemon could give: the
# connection is then never aborted and all of them wait forever. A kill
# -9 means the connection's end: abort it as the last close would.
crash_gateway() {
	local name=$1 pid=${GW_PID[$1]:-} conn
	[[ -n $pid ]] || return 1
	conn=$(fuse_conn "${GW_MNT[$name]:-}")
	kill -KILL "$pid" 2>/dev/null
	if ! wait_for 5 pid_reapable "$pid"; then
		echo "# gateway $name (pid $pid): a thread stays in the kernel; aborting FUSE connection ${conn:-?}"
		fuse_abort "$conn" || echo "# cannot abort it (no fusectl)"
	fi
	wait_for 10 pid_reapable "$pid" && wait "$pid" 2>/dev/null
	unset "GW_PID[$name]"
	return 0
}

test_cleanup() {
	local rc=$? name
	for name in "${!GW_PID[@]}"; do
		stop_gateway "$name" >/dev/null 2>&1
	done
	for name in "${!GW_MNT[@]}"; do
		is_mounted "${GW_MNT[$name]}" && fusermount3 -uz "${GW_MNT[$name]}" 2>/dev/null
	done
	if ((T_FAIL == 0 && rc == 0)) && [[ -n $TEST_TMP && ${KEEP_TMP:-0} != 1 ]]; then
		rm -rf "$TEST_TMP"
	elif [[ -n $TEST_TMP ]]; then
		echo "# kept $TEST_TMP"
	fi
	((rc == 0 && T_FAIL > 0)) && rc=1
	echo "# $TEST_NAME: $T_PASS passed, $T_FAIL failed, $T_SKIP skipped"
	exit $rc
}
trap test_cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

# Fail at once unless the bed's env is there.
require_bed() {
	local v
	for v in S3_URL AWS_ACCESS_KEY_ID KAFKA_BROKERS BRIDGE_URL BED_DIR; do
		if [[ -z ${!v:-} ]]; then
			not_ok "$TEST_NAME: bed env" "$v not set (run through tests/run)"
			exit 1
		fi
	done
}
