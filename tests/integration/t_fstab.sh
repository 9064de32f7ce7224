#!/usr/bin/env bash
# t_fstab — mounting from fstab through the mount helper (mount.facetfs):
# mount(8) with a temporary fstab (`mount -T FILE MOUNTPOINT`) and an empty
# environment, as systemd runs mount units; mount(8)/systemd options
# ignored, FUSE options passed on; the gateway runs in the background and
# is found by its pid file; umount stops it. A bad config fails with a
# message and mounts nothing. The helper is made visible to mount(8) as
# /sbin/mount.facetfs (a symbolic link into the build) for the test only,
# unless one is already installed (then that part is skipped).
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/gateway.sh"
require_bed

HELPER=$FACETFS_BUILD/gateway/exe/mount.facetfs
[[ -x $HELPER ]] || { not_ok "mount.facetfs built" "no $HELPER"; exit 1; }
B=$(new_bucket fstab)
bed_cmd notify "$B" >/dev/null || { not_ok "notify"; exit 1; }
T=$(test_tmp)
M=$T/mnt
mkdir -p "$M"
view_file "$T/views" all "$B" '{ "prefix": "" }'
gw_config "$T/gw.json" "$T/state" "$T/views" "facetfs-fstab-$$"
for i in 1 2 3; do
	echo "object $i" | aws_s3 s3 cp - "s3://$B/obj-$i" >/dev/null 2>&1 || not_ok "PUT obj-$i"
done

LINK=/sbin/mount.facetfs LINKED=0
# Stop whatever the helper started: unmount first, then the daemon by the
# pid in its pid file.
daemon_stop() {
	local pid
	pid=$(cat "$T/state/facetfs.pid" 2>/dev/null)
	if is_mounted "$M"; then
		umount "$M" 2>/dev/null || fusermount3 -uz "$M" 2>/dev/null
	fi
	[[ -n $pid ]] || return 0
	wait_for 15 eval '[[ ! -d /proc/'"$pid"' ]] || grep -q "^State:.*Z" /proc/'"$pid"'/status'
	[[ -d /proc/$pid ]] && kill -TERM "$pid" 2>/dev/null
	return 0
}
fstab_cleanup() {
	local rc=$?
	daemon_stop
	((LINKED)) && rm -f "$LINK"
	(exit $rc)
	test_cleanup
}
trap fstab_cleanup EXIT

# --- through mount(8), empty environment -----------------------------------
if [[ -e $LINK || -L $LINK ]]; then
	skip "mount -T FSTAB through mount(8)" "$LINK exists already (not replaced by a test)"
else
	ln -s "$HELPER" "$LINK" && LINKED=1
	printf '%s %s facetfs _netdev,nofail,noauto,x-systemd.automount,allow_other,default_permissions 0 0\n' \
		"$T/gw.json" "$M" >"$T/fstab"
	if env -i /usr/bin/mount -T "$T/fstab" "$M" >"$T/mount.out" 2>&1; then
		ok "mount -T FSTAB MOUNTPOINT with an empty environment"
	else
		not_ok "mount -T FSTAB MOUNTPOINT with an empty environment" "$(tail -n 3 "$T/mount.out")"
	fi
	check "mounted" is_mounted "$M"
	pid=$(cat "$T/state/facetfs.pid" 2>/dev/null)
	check "the gateway runs in the background (pid file)" test -d "/proc/${pid:-none}"
	opts=$(awk -v m="$M" '$2 == m { print $4 }' /proc/mounts)
	case ,$opts, in
	*,allow_other,*) ok "allow_other reached FUSE ($opts)" ;;
	*) not_ok "allow_other reached FUSE" "options: $opts" ;;
	esac
	case ,$opts, in
	*,_netdev,* | *,nofail,* | *,x-systemd*) not_ok "mount(8)/systemd options not passed to FUSE" "$opts" ;;
	*) ok "mount(8)/systemd options not passed to FUSE" ;;
	esac
	wait_for 20 sh -c "[ \$(ls '$M/all' 2>/dev/null | wc -l) -eq 3 ]" &&
		ok "the view lists the 3 objects" || not_ok "the view lists the 3 objects" "$(ls "$M/all" 2>&1 | head -3)"
	check_eq "content through the mount" "object 2" "$(cat "$M/all/obj-2" 2>&1)"
	if env -i /usr/bin/umount "$M" >"$T/umount.out" 2>&1; then ok "umount"; else not_ok "umount" "$(cat "$T/umount.out")"; fi
	if [[ -n $pid ]] && wait_for 15 eval '[[ ! -d /proc/'"$pid"' ]] || grep -q "^State:.*Z" /proc/'"$pid"'/status'; then
		ok "the gateway exits after umount"
	else
		not_ok "the gateway exits after umount" "pid ${pid:-?} still there"
	fi
	check "its pid file is removed" test ! -e "$T/state/facetfs.pid"
	rm -f "$LINK"
	LINKED=0
fi

# --- the helper called directly, as systemd's mount units do ----------------
if env -i "$HELPER" "$T/gw.json" "$M" -o rw,nofail,verbose,x-systemd.requires=network-online.target >"$T/direct.out" 2>&1; then
	ok "mount.facetfs CONFIG MOUNTPOINT -o ... with an empty environment"
else
	not_ok "mount.facetfs CONFIG MOUNTPOINT -o ... with an empty environment" "$(tail -n 3 "$T/direct.out")"
fi
check "mounted by the helper" is_mounted "$M"
daemon_stop
check "unmounted" eval '! is_mounted "$M"'

# --- failures: a message, a non-zero status, nothing mounted ---------------
rc=0
env -i "$HELPER" "$T/missing.json" "$M" >"$T/bad1.out" 2>&1 || rc=$?
check_eq "missing config: mount(8)'s failure status 32" 32 "$rc"
check "missing config: the message names it" grep -q "missing.json" "$T/bad1.out"
printf '{ "name": "broken", "bucket": "%s", "match": { "size": { "max": "10XB" } } }\n' "$B" >"$T/views/broken.json"
rc=0
env -i "$HELPER" "$T/gw.json" "$M" >"$T/bad2.out" 2>&1 || rc=$?
if ((rc != 0)); then ok "bad filter file: non-zero ($rc)"; else not_ok "bad filter file: non-zero"; fi
check "bad filter file: the message names the field" grep -q "match.size.max" "$T/bad2.out"
check "bad filter file: nothing mounted" eval '! is_mounted "$M"'
rm -f "$T/views/broken.json"
rc=0
"$HELPER" >/dev/null 2>&1 || rc=$?
check_eq "no arguments: usage, status 1" 1 "$rc"
check "--help names the options" sh -c "'$HELPER' --help | grep -q x-systemd"

# --- the example systemd units (examples/systemd/) --------------------------
if command -v systemd-analyze >/dev/null 2>&1; then
	mkdir -p "$T/units"
	sed "s|^ExecStart=facetfs |ExecStart=$FACETFS_BUILD/gateway/exe/facetfs |" \
		"$FACETFS_SRC/examples/systemd/facetfs@.service" >"$T/units/facetfs@views.service"
	sed "s|^ExecStart=facetfs-bridge |ExecStart=$FACETFS_BUILD/events/facetfs-bridge |" \
		"$FACETFS_SRC/examples/systemd/facetfs-bridge.service" >"$T/units/facetfs-bridge.service"
	for u in facetfs@views.service facetfs-bridge.service; do
		if systemd-analyze verify --man=no "$T/units/$u" >"$T/verify.out" 2>&1 &&
			! grep -q "$u" "$T/verify.out"; then
			ok "systemd-analyze verify $u"
		else
			not_ok "systemd-analyze verify $u" "$(grep -m 3 . "$T/verify.out" | tr '\n' ' ')"
		fi
	done
else
	skip "systemd-analyze verify of the example units" "systemd-analyze is not installed"
fi
