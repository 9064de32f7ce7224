#!/usr/bin/env bash
# t_posix — times, modes and owners kept in S3 (issue 12) through a real
# mount over the bed: touch -d, cp -p, chmod, chown and mkdir -m show in
# the mount, as s3fs's user metadata in `aws s3api head-object`, on a
# second gateway (through the events of the copies) and after a restart of
# the first; the names stay out of user.* xattrs; symlinks and FIFOs are
# objects as s3fs makes them, link answers EPERM; `rsync -a` twice over 500 small files transfers nothing the
# second time (its --stats), and the same over 50 of them that s3fs
# wrote, when s3fs is installed.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/gateway.sh"
require_bed

B=$(new_bucket posix)
bed_cmd notify "$B" >/dev/null || { not_ok "notify"; exit 1; }
T=$(test_tmp)
view_file "$T/views" rw "$B" '{ "prefix": "" }' '"writable": true'
gw_config "$T/a.json" "$T/state-a" "$T/views" "facetfs-pxa-$$"
gw_config "$T/b.json" "$T/state-b" "$T/views" "facetfs-pxb-$$"
A=$T/mnt-a
MB=$T/mnt-b
start_gateway A "$T/a.json" "$A" || { not_ok "gateway A starts"; exit 1; }
start_gateway B "$T/b.json" "$MB" || { not_ok "gateway B starts"; exit 1; }

# meta KEY NAME: the user metadata NAME that S3 holds for KEY.
meta() {
	"$AWS" --endpoint-url "$S3_URL" s3api head-object --bucket "$B" --key "$1" 2>/dev/null |
		jq -r --arg n "$2" '.Metadata[$n] // "-"'
}
shown() { stat -c '%a %u:%g %y' "$1" 2>&1; }

# ---- touch -d on a new file, cp -p, chmod, chown, mkdir -m ----
touch -d '2001-02-03 04:05:06.123456789 UTC' "$A/rw/touched" || not_ok "touch -d"
check_eq "touch -d: the mount shows the time" \
	"2001-02-03 04:05:06.123456789" "$(TZ=UTC stat -c '%y' "$A/rw/touched" | cut -c1-29)"
check_eq "touch -d: S3 holds mtime as s3fs writes it" "981173106.123456789" \
	"$(meta touched mtime)"
printf 'copied with -p\n' >"$T/src"
chmod 0751 "$T/src"
touch -d '2010-05-06 07:08:09 UTC' "$T/src"
cp -p "$T/src" "$A/rw/copied" || not_ok "cp -p"
check_eq "cp -p: mode and time shown" "751 2010-05-06 07:08:09.000000000" \
	"$(TZ=UTC stat -c '%a %y' "$A/rw/copied" | cut -c1-33)"
check_eq "cp -p: S3 holds mode (s3fs's st_mode) and mtime" "33257 1273129689" \
	"$(meta copied mode) $(meta copied mtime)"
chmod 0600 "$A/rw/touched" || not_ok "chmod"
chown 1234:2345 "$A/rw/touched" || not_ok "chown"
check_eq "chmod, chown: shown" "600 1234:2345" "$(stat -c '%a %u:%g' "$A/rw/touched")"
check_eq "chmod, chown: in S3" "33152 1234 2345" \
	"$(meta touched mode) $(meta touched uid) $(meta touched gid)"
check_eq "chmod, chown: the time stays" "981173106.123456789" "$(meta touched mtime)"
mkdir -m 0700 "$A/rw/dir" && chmod 0750 "$A/rw/dir" || not_ok "mkdir -m, chmod"
check_eq "mkdir -m 0700 then chmod 0750" "750" "$(stat -c '%a' "$A/rw/dir")"
check_eq "user.* xattrs leave the attributes out" "[]" \
	"$(python3 -c 'import os, sys; print(os.listxattr(sys.argv[1]))' "$A/rw/touched" 2>&1)"

# ---- links and special files: as s3fs stores them; no hard links ----
errno_of() { python3 -c 'import errno, os, sys
try:
    getattr(os, sys.argv[1])(*sys.argv[2:]); print("0")
except OSError as e:
    print(errno.errorcode[e.errno])' "$@"; }
check_eq "link(2): EPERM" "EPERM" "$(errno_of link "$A/rw/copied" "$A/rw/hard")"
consumed() { jq '.events.consumed' "$A/.facetfs/stats"; }
c0=$(consumed)
ln -s copied "$A/rw/sym" || not_ok "ln -s"
heads() { jq '.s3.head + .s3.get' "$1/.facetfs/stats"; }
more_consumed() { (($(consumed) > c0)); }
wait_for 10 more_consumed     # the link's own event
# ... and no other event still being applied: gateway A reads the shared
# topic's backlog of other tests' events first, and a request made while
# applying one (an enrichment HEAD, say) would count in heads(). ("copied
# 2", seen in CI on 2026-11-25, had another cause, found later: when the
# link's event came before the reply to symlink(), the kernel dropped the
# fresh entry and forgot the inode that kept the target; the targets are
# now kept by ETag, fuse/links.h.)
wait_for 60 events_settled "$A" "$(topic_size)" || not_ok "gateway A caught up with the topic"
h0=$(heads "$A")
t=$(readlink "$A/rw/sym")
check_eq "symlink made here: readlink gives its target with no HEAD or GET" "copied $h0" "$t $(heads "$A")"
check_eq "symlink: readlink, and read through it" "copied copied with -p" \
	"$(readlink "$A/rw/sym") $(cat "$A/rw/sym" 2>&1)"
check_eq "symlink: the object holds the target, mode S_IFLNK|0777" "copied 41471" \
	"$("$AWS" --endpoint-url "$S3_URL" s3 cp --quiet "s3://$B/sym" -) $(meta sym mode)"
mkfifo -m 0640 "$A/rw/fifo" || not_ok "mkfifo"
check_eq "mkfifo: a FIFO, an empty object with mode S_IFIFO|0640" "fifo 640 4512" \
	"$(stat -c '%F %a' "$A/rw/fifo") $(meta fifo mode)"

# A directory made here exists whatever is added or removed below it: the
# kernel keeps its entry and what it cached below it (10 files created and
# unlinked: one LOOKUP each, the create's own negative one).
mkdir "$A/rw/mdir" && ls "$A/rw/mdir" >/dev/null || not_ok "mkdir mdir"
lookups() { jq '.fuse.lookup' "$A/.facetfs/stats"; }
l0=$(lookups)
python3 -c 'import os, sys
for i in range(10):
    p = os.path.join(sys.argv[1], "f%d" % i)
    os.close(os.open(p, os.O_CREAT | os.O_WRONLY, 0o644))
    os.stat(p)
    os.unlink(p)' "$A/rw/mdir" || not_ok "create, stat, unlink in mdir"
# (10: the creates' own negative LOOKUPs; one more for a stat when the
# event of its create beat the gateway's record of the upload and so
# dropped the new entry; 40 when every change dropped the directory's
# entry and the kernel forgot the new file.)
n=$(($(lookups) - l0))
check "made directory: 10 x create, stat, unlink make 10-20 LOOKUPs ($n)" test "$n" -ge 10 -a "$n" -le 20
rmdir "$A/rw/mdir" || not_ok "rmdir mdir"

# ---- a second gateway (events of the copies), a restart ----
shows() { [[ $(stat -c '%a %u' "$1" 2>/dev/null) == "$2" ]]; }
wait_for 10 shows "$MB/rw/touched" "600 1234"
check_eq "gateway B shows chmod and chown" "600 1234:2345" "$(stat -c '%a %u:%g' "$MB/rw/touched" 2>&1)"
check_eq "gateway B shows cp -p's mode and time" "751 2010-05-06 07:08:09.000000000" \
	"$(TZ=UTC stat -c '%a %y' "$MB/rw/copied" 2>&1 | cut -c1-33)"
stop_gateway A || not_ok "gateway A stops"
start_gateway A "$T/a.json" "$A" || { not_ok "gateway A starts again"; exit 1; }
check_eq "after a restart: touch -d, chmod, chown" "600 1234:2345 2001-02-03 04:05:06.123456789" \
	"$(TZ=UTC stat -c '%a %u:%g %y' "$A/rw/touched" | cut -c1-43)"
check_eq "after a restart: the made directory's mode" "750" "$(stat -c '%a' "$A/rw/dir")"
check_eq "after a restart: the symlink and the FIFO" "copied fifo" \
	"$(readlink "$A/rw/sym") $(stat -c '%F' "$A/rw/fifo")"

# The kernel keeps a link's target (FUSE_CAP_CACHE_SYMLINKS): an outside
# rewrite of the object reaches readlink through its event.
check_eq "gateway B: readlink (now cached by B's kernel)" "copied" "$(readlink "$MB/rw/sym" 2>&1)"
h0=$(heads "$MB")
for _ in 1 2 3 4 5; do readlink "$MB/rw/sym" >/dev/null; done
check_eq "gateway B: five more readlinks make no HEAD or GET (the kernel keeps the target)" \
	"$h0" "$(heads "$MB")"
links_to() { [[ $(readlink "$1" 2>/dev/null) == "$2" ]]; }
printf 'touched' >"$T/target"
"$AWS" --endpoint-url "$S3_URL" s3api put-object --bucket "$B" --key sym --body "$T/target" \
	--metadata mode=41471 >/dev/null || not_ok "aws: rewrite the symlink object"
wait_for 10 links_to "$MB/rw/sym" touched
check_eq "gateway B: readlink after an outside rewrite's event" "touched" "$(readlink "$MB/rw/sym" 2>&1)"
check_eq "gateway A: readlink after the event" "touched" "$(readlink "$A/rw/sym" 2>&1)"

# A directory keeps its ctime: chown changes it (pjdfstest chown/00).
c0=$(stat -c '%Z' "$A/rw/dir")
sleep 1.1
chown 4321 "$A/rw/dir" || not_ok "chown of a directory"
c1=$(stat -c '%Z' "$A/rw/dir")
check_eq "chown of a made directory moves its ctime forward" "yes" \
	"$( ((c1 > c0)) && echo yes || echo "no: $c0 -> $c1")"

# ---- rsync -a twice ----
mkdir -p "$T/tree"
python3 - "$T/tree" <<'PY'
import os, sys
root = sys.argv[1]
for d in range(10):
    os.makedirs("%s/d%d" % (root, d), exist_ok=True)
    for f in range(50):
        p = "%s/d%d/f%02d" % (root, d, f)
        with open(p, "w") as fh:
            fh.write("file %d/%d\n" % (d, f) * (1 + f))
        os.chmod(p, 0o640 if f % 2 else 0o644)
        os.utime(p, ns=(1600000000123456789 + f, 1600000000123456789 + 1000 * f))
PY
transferred() { sed -n 's/^Number of regular files transferred: //p' "$1" | tr -d ','; }
t0=$(date +%s.%N)
rsync -a --stats "$T/tree/" "$A/rw/tree/" >"$T/rsync1" 2>&1 || not_ok "rsync -a (first)" "$(tail -3 "$T/rsync1")"
t1=$(date +%s.%N)
check_eq "rsync -a, first run: 500 files transferred" "500" "$(transferred "$T/rsync1")"
# What a second run would send, found by a dry run right after the first,
# with its mtimes in the mount, the source and S3 (nothing, when all is well).
rsync -a -n -i "$T/tree/" "$A/rw/tree/" 2>/dev/null | grep '^[<>]f' | head -n 5 | while read -r item name; do
	diag <<<"differs right after the first run: $name ($item): mount $(stat -c '%.9Y %a' "$A/rw/tree/$name"), source $(stat -c '%.9Y %a' "$T/tree/$name"), S3 $(aws_s3 s3api head-object --bucket "$B" --key "tree/$name" --output json 2>/dev/null | jq -c '{LastModified, m: .Metadata.mtime}')"
done
rsync -a -i --stats "$T/tree/" "$A/rw/tree/" >"$T/rsync2" 2>&1 || not_ok "rsync -a (second)" "$(tail -3 "$T/rsync2")"
t2=$(date +%s.%N)
check_eq "rsync -a, second run: 0 files transferred" "0" "$(transferred "$T/rsync2")"
# what the second run found different (rsync's itemized changes), if anything
grep '^[<>]f' "$T/rsync2" | head -n 5 | while read -r item name; do
	diag <<<"second run sent $name ($item): mount $(stat -c '%Y %a' "$A/rw/tree/$name"), source $(stat -c '%Y %a' "$T/tree/$name")"
done
# Gateway A's index kept its own records over the late events of its own
# writes (views/index_own.h): per file the temporary's PUT, its utimensat
# and chmod COPYs and DELETE, and the final name's COPY, about 2,500 (2,150
# counted in a quiet run; an event that comes before its request returned
# is applied, not counted). Deletes alone would make 500: at least 1,000
# shows the creates' ETags and metadata matched too.
own_now() { stat_field "$A" .events.own; }
own_at_least() { (($(own_now) >= $1)); }
wait_for 30 own_at_least 1000
own=$(own_now)
if ((own >= 1000)); then
	ok "gateway A knew the events of its own writes ($own, applied $(stat_field "$A" .events.applied))"
else
	not_ok "gateway A knew the events of its own writes" "events.own $own, expected 1000 or more of about 2500"
fi
echo "# rsync -a of 500 files: first run $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s, second $(awk -v a="$t1" -v b="$t2" 'BEGIN { printf "%.1f", b - a }') s"
# files_at_least DIR N: DIR holds N files or more (a function: wait_for
# calls it again each time; a $(...) in its arguments would run once).
files_at_least() { (($(find "$1" -type f 2>/dev/null | wc -l) >= $2)); }
wait_for 20 files_at_least "$MB/rw/tree" 500
rsync -a --stats "$T/tree/" "$MB/rw/tree/" >"$T/rsync3" 2>&1 || not_ok "rsync -a into B" "$(tail -3 "$T/rsync3")"
check_eq "rsync -a into gateway B (events): 0 files transferred" "0" "$(transferred "$T/rsync3")"

# ---- objects s3fs wrote ----
if command -v s3fs >/dev/null 2>&1; then
	S3FS_MNT=$T/s3fs
	mkdir -p "$S3FS_MNT"
	printf '%s:%s\n' "$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY" >"$T/passwd"
	chmod 600 "$T/passwd"
	if s3fs "$B" "$S3FS_MNT" -o "url=$S3_URL,use_path_request_style,passwd_file=$T/passwd" &&
		wait_for 10 is_mounted "$S3FS_MNT"; then
		# one directory of the tree (50 files, both modes): s3fs writes
		# slowly, and the format is what is checked
		rsync -a "$T/tree/d3/" "$S3FS_MNT/s3fs-tree/" >"$T/rsync4" 2>&1 || not_ok "rsync -a into s3fs"
		fusermount3 -u "$S3FS_MNT" 2>/dev/null || fusermount3 -uz "$S3FS_MNT"
		wait_for 20 files_at_least "$A/rw/s3fs-tree" 50
		rsync -a --stats "$T/tree/d3/" "$A/rw/s3fs-tree/" >"$T/rsync5" 2>&1 ||
			not_ok "rsync -a over s3fs's objects" "$(tail -3 "$T/rsync5")"
		check_eq "rsync -a over the objects s3fs wrote: 0 files transferred" "0" \
			"$(transferred "$T/rsync5")"
	else
		not_ok "s3fs mounts the bucket"
	fi
else
	skip "rsync -a over objects s3fs wrote" "s3fs is not installed"
fi
