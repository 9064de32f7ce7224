#!/usr/bin/env bash
# tests/posix/pjdfstest.sh — pjdfstest, the public POSIX file-system suite,
# inside a writable `session` view of a facetfs mount over a throw-away bed
# (tests/bed/bed), and the same subsets in an s3fs mount of another bucket
# of that bed, side by side. Not part of tests/run: a subset takes up to
# SUBSET_TIMEOUT seconds per file system.
#
#   tests/posix/pjdfstest.sh [SUBSET...]
#       default subsets: open truncate ftruncate unlink rename mkdir rmdir
#       chmod chown utimensat
# Env: PJDFSTEST_SRC  a pjdfstest checkout (built here with autoreconf,
#                     configure, make when its binary is missing; default:
#                     cloned into /var/cache/facetfs-tests/pjdfstest)
#      SUBSET_TIMEOUT per subset and file system (default 240 s)
#      FS             which file systems (default "facetfs s3fs")
#      FACETFS_BUILD  build dir (default build/)
#      DURABILITY     facetfs's cache.durability (default: the gateway's
#                     default, "power"; "process": no fsync, as s3fs)
# Needs root (pjdfstest changes owners and switches users), autoconf,
# automake, prove (perl), s3fs. Prints one line per subset and file
# system: passed / run (seconds, the S3 requests facetfs made, the load
# average), and keeps the TAP output in the work dir.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BED=$ROOT/tests/bed/bed
export FACETFS_BUILD=${FACETFS_BUILD:-$ROOT/build}
SUBSET_TIMEOUT=${SUBSET_TIMEOUT:-240}
FS=${FS:-facetfs s3fs}
SUBSETS=("$@")
((${#SUBSETS[@]})) || SUBSETS=(open truncate ftruncate unlink rename mkdir rmdir chmod chown utimensat)
((EUID == 0)) || { echo "pjdfstest.sh: run as root"; exit 2; }

SRC=${PJDFSTEST_SRC:-/var/cache/facetfs-tests/pjdfstest}
if [[ ! -x $SRC/pjdfstest ]]; then
	if [[ ! -f $SRC/pjdfstest.c ]]; then
		mkdir -p "$(dirname "$SRC")"
		git clone -q https://github.com/pjd/pjdfstest "$SRC" ||
			{ echo "pjdfstest.sh: cannot clone pjdfstest"; exit 2; }
	fi
	(cd "$SRC" && autoreconf -ifs && ./configure && make pjdfstest) >/dev/null 2>&1 ||
		{ echo "pjdfstest.sh: building pjdfstest failed in $SRC"; exit 2; }
fi
ninja -C "$FACETFS_BUILD" >/dev/null || { echo "pjdfstest.sh: build failed"; exit 2; }

WORK=$(mktemp -d /tmp/facetfs-pjdfstest.XXXXXX)
GW_PID=
cleanup() {
	local m
	for m in "$WORK/mnt-facetfs" "$WORK/mnt-s3fs"; do
		mountpoint -q "$m" && { fusermount3 -u "$m" 2>/dev/null || fusermount3 -uz "$m"; }
	done
	[[ -n $GW_PID ]] && kill "$GW_PID" 2>/dev/null && wait "$GW_PID" 2>/dev/null
	[[ -n $S3FS_PID ]] && kill -9 "$S3FS_PID" 2>/dev/null
	"$BED" down "$WORK/bed" >/dev/null 2>&1
	echo "# TAP output kept in $WORK"
}
trap cleanup EXIT
"$BED" up "$WORK/bed" >"$WORK/bed.log" 2>&1 || { echo "bed up failed: $WORK/bed.log"; exit 1; }
. "$WORK/bed/env"
aws_s3() { /usr/bin/aws --endpoint-url "$S3_URL" "$@"; }

# prove's output flushed line by line, so that a subset cut off by the
# timeout still counts what ran (perl buffers a file otherwise).
printf 'package PjdAutoFlush; $| = 1; 1;\n' >"$WORK/PjdAutoFlush.pm"

# S3 requests the gateway made so far (facetfs: its .facetfs/stats), as
# "HEAD COPY PUT DELETE GET"; empty for a mount without stats.
s3_requests() {
	[[ -r $1/.facetfs/stats ]] || return 0
	jq -r '.s3 | "\(.head) \(.copy) \(.put) \(.delete) \(.get)"' "$1/.facetfs/stats" 2>/dev/null
}

# run_subset NAME DIR SUBSET [MOUNT]: one subset inside DIR, one line (with
# the S3 requests of the subset when MOUNT has .facetfs/stats).
run_subset() {
	local name=$1 dir=$2 s=$3 mnt=${4:-} t0 t1 out pass run r0 r1 req=
	out=$WORK/$name-$s.tap
	mkdir -p "$dir/$s" || { echo "$name: cannot make $dir/$s"; return 1; }
	r0=$(s3_requests "$mnt")
	t0=$(date +%s)
	(cd "$dir/$s" && PERL5LIB=$WORK PERL5OPT=-MPjdAutoFlush \
		timeout -k 5 "$SUBSET_TIMEOUT" prove --timer -v -r "$SRC/tests/$s") >"$out" 2>&1
	t1=$(date +%s)
	r1=$(s3_requests "$mnt")
	if [[ -n $r0 && -n $r1 ]]; then
		read -r -a a <<<"$r0"
		read -r -a b <<<"$r1"
		req=$(printf ', S3: %d HEAD, %d COPY, %d PUT, %d DELETE, %d GET' \
			$((b[0] - a[0])) $((b[1] - a[1])) $((b[2] - a[2])) $((b[3] - a[3])) $((b[4] - a[4])))
	fi
	pass=$(grep -cE '^ok [0-9]+' "$out")
	run=$(grep -cE '^(not )?ok [0-9]+' "$out")
	printf '%-8s %-10s %5d / %-5d (%d s%s%s; load %s)\n' "$name" "$s" "$pass" "$run" $((t1 - t0)) \
		"$( ((t1 - t0 >= SUBSET_TIMEOUT)) && echo ", cut off")" "$req" \
		"$(cut -d' ' -f1-3 /proc/loadavg)"
}

# s3fs, in the foreground of a background job (its own PID), remounted
# for every subset: a subset cut off mid-way can leave s3fs 1.90 hanging.
S3FS_PID=
s3fs_mount() {
	s3fs "$1" "$2" -f -o "url=$S3_URL,use_path_request_style,passwd_file=$WORK/passwd,allow_other" \
		>>"$WORK/s3fs.log" 2>&1 &
	S3FS_PID=$!
	for _ in $(seq 50); do mountpoint -q "$2" && return 0; sleep 0.2; done
	return 1
}
s3fs_umount() {
	fusermount3 -u "$1" 2>/dev/null || fusermount3 -uz "$1"
	[[ -n $S3FS_PID ]] || return 0
	kill "$S3FS_PID" 2>/dev/null
	for _ in $(seq 25); do kill -0 "$S3FS_PID" 2>/dev/null || break; sleep 0.2; done
	kill -9 "$S3FS_PID" 2>/dev/null
	wait "$S3FS_PID" 2>/dev/null
	S3FS_PID=
}

for fs in $FS; do
	B=pjd-$fs-$$
	aws_s3 s3 mb "s3://$B" >/dev/null || { echo "mb $B failed"; continue; }
	M=$WORK/mnt-$fs
	mkdir -p "$M"
	case $fs in
	facetfs)
		"$BED" notify "$WORK/bed" "$B" >/dev/null
		mkdir -p "$WORK/views"
		printf '{ "name": "rw", "bucket": "%s", "match": { "prefix": "" }, "writable": true, "visibility": "session" }\n' \
			"$B" >"$WORK/views/rw.json"
		DUR_JSON=
		[[ -n ${DURABILITY:-} ]] && DUR_JSON=", \"durability\": \"$DURABILITY\""
		cat >"$WORK/gw.json" <<JSON
{ "s3":    { "endpoint": "$S3_ENDPOINT", "region": "default",
             "access_key": "$AWS_ACCESS_KEY_ID", "secret_key": "$AWS_SECRET_ACCESS_KEY" },
  "kafka": { "brokers": "$KAFKA_BROKERS", "topic": "$KAFKA_TOPIC", "group": "pjd-$$",
             "options": { "fetch.wait.max.ms": "5" } },
  "state_dir": "$WORK/state", "views_dir": "$WORK/views",
  "cache": { "dir": "$WORK/state/cache", "max_bytes": "1GiB"$DUR_JSON } }
JSON
		"$FACETFS_BUILD/gateway/exe/facetfs" mount -c "$WORK/gw.json" "$M" -f -o allow_other \
			</dev/null >"$WORK/gw.log" 2>&1 &
		GW_PID=$!
		for _ in $(seq 100); do mountpoint -q "$M" && break; sleep 0.2; done
		for sub in "${SUBSETS[@]}"; do run_subset facetfs "$M/rw" "$sub" "$M"; done
		fusermount3 -u "$M"
		kill "$GW_PID" 2>/dev/null
		wait "$GW_PID" 2>/dev/null
		GW_PID=
		;;
	s3fs)
		printf '%s:%s\n' "$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY" >"$WORK/passwd"
		chmod 600 "$WORK/passwd"
		for sub in "${SUBSETS[@]}"; do
			if s3fs_mount "$B" "$M"; then
				run_subset s3fs "$M" "$sub"
			else
				echo "s3fs: mount failed for $sub"
			fi
			s3fs_umount "$M"
		done
		;;
	esac
done
