#!/usr/bin/env bash
# t_owner — ownership and modes as mount options (-o uid=,gid=,umask=,
# file_mode=,dir_mode=, as s3fs and rclone take them): what stat shows for
# the views, their directories and files, read-only views without write
# bits, and the kernel enforcing them for another user (allow_other; the
# mount always has default_permissions). A bad value fails the mount.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/gateway.sh"
require_bed

B=$(new_bucket owner)
bed_cmd notify "$B" >/dev/null || { not_ok "notify"; exit 1; }
T=$(test_tmp)
view_file "$T/views" rw "$B" '{ "prefix": "" }' '"writable": true'
view_file "$T/views" ro "$B" '{ "prefix": "" }'
gw_config "$T/gw.json" "$T/state" "$T/views"
echo "secret" | aws_s3 s3 cp - "s3://$B/dir/f" >/dev/null 2>&1 || not_ok "PUT dir/f"
M=$T/mnt
shown() { stat -c '%u:%g %a' "$1" 2>&1; }

if start_gateway A "$T/gw.json" "$M" -o uid=1234,gid=2345,umask=027; then
	wait_for 20 test -f "$M/rw/dir/f" || not_ok "dir/f listed"
	check_eq "uid/gid/umask: writable view's root" "1234:2345 750" "$(shown "$M/rw")"
	check_eq "uid/gid/umask: a directory in it" "1234:2345 750" "$(shown "$M/rw/dir")"
	check_eq "uid/gid/umask: a file in it" "1234:2345 640" "$(shown "$M/rw/dir/f")"
	check_eq "read-only view: no write bits" "1234:2345 550" "$(shown "$M/ro")"
	check_eq "read-only view: its file" "1234:2345 440" "$(shown "$M/ro/dir/f")"
	check_eq "root still reads it" "secret" "$(cat "$M/rw/dir/f" 2>&1)"
	stop_gateway A
else
	not_ok "mount with -o uid=1234,gid=2345,umask=027"
fi

if start_gateway B "$T/gw.json" "$M" -o file_mode=0600,dir_mode=0711,allow_other; then
	wait_for 20 test -f "$M/rw/dir/f" || not_ok "dir/f listed"
	me="$(id -u):$(id -g)"
	check_eq "file_mode/dir_mode: a directory" "$me 711" "$(shown "$M/rw/dir")"
	check_eq "file_mode/dir_mode: a file" "$me 600" "$(shown "$M/rw/dir/f")"
	if command -v setpriv >/dev/null 2>&1; then
		out=$(setpriv --reuid=65534 --regid=65534 --clear-groups cat "$M/rw/dir/f" 2>&1)
		case $out in
		*"Permission denied"*) ok "another user cannot read a 0600 file of root (kernel check)" ;;
		*) not_ok "another user cannot read a 0600 file of root" "$out" ;;
		esac
		out=$(setpriv --reuid=65534 --regid=65534 --clear-groups ls "$M/rw/dir" 2>&1)
		case $out in
		*"Permission denied"*) ok "nor list a 0711 directory" ;;
		*) not_ok "nor list a 0711 directory" "$out" ;;
		esac
	else
		skip "another user's access" "no setpriv"
	fi
	stop_gateway B
else
	not_ok "mount with -o file_mode=0600,dir_mode=0711,allow_other"
fi

rc=0
mkdir -p "$T/mnt2"
"$FACETFS" mount -c "$T/gw.json" "$T/mnt2" -o umask=9z >"$T/bad.out" 2>&1 || rc=$?
if ((rc != 0)) && ! is_mounted "$T/mnt2"; then ok "umask=9z: mount fails ($rc), nothing mounted"; else not_ok "umask=9z: mount fails" "exit $rc"; fi
check "… naming the option" grep -q "umask=9z" "$T/bad.out"
