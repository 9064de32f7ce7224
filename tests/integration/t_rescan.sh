#!/usr/bin/env bash
# t_rescan.sh — repair with `facetfs rescan MOUNTPOINT [VIEW]`: objects PUT,
# rewritten, deleted or re-tagged while the bridge is down (RGW's
# synchronous topic drops those events) stay wrong in the mount until a
# rescan, which fixes them, names them in its report and exits 0. A tags
# view sees the tags an object was created with (from its event) and, only
# after a rescan, tags changed later (RGW sends no event for that).
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/gateway.sh"
require_bed

B=$(new_bucket rescan)
bed_cmd notify "$B" >/dev/null || { not_ok "notify $B"; exit 1; }
T=$(test_tmp)
V=$T/views
view_file "$V" all "$B" '{ "prefix": "" }'
view_file "$V" raw "$B" '{ "tags": { "stage": "raw" } }'
gw_config "$T/gw.json" "$T/state" "$V"
M=$T/mnt
start_gateway A "$T/gw.json" "$M" || { not_ok "gateway starts"; exit 1; }
ok "gateway starts"

put() {   # put KEY TEXT [TAGGING]
	printf '%s\n' "$2" >"$T/body"
	"$AWS" --endpoint-url "$S3_URL" s3api put-object --bucket "$B" --key "$1" \
		--body "$T/body" ${3:+--tagging "$3"} >/dev/null
}

# ---- with events: tags at creation reach the tags view ----
put keep/a.txt "a, first" "stage=raw" || not_ok "put keep/a.txt"
put gone/b.txt "b, to be deleted" || not_ok "put gone/b.txt"
put change/c.txt "c, version one" "stage=raw" || not_ok "put change/c.txt"
if wait_for 15 test -e "$M/all/change/c.txt"; then ok "events: PUTs appear"; else not_ok "events: PUTs appear"; fi
if wait_for 10 test -e "$M/raw/keep/a.txt"; then ok "tags from the creation event: a.txt in view raw"; else not_ok "tags from the creation event: a.txt in view raw"; fi
check_eq "view raw holds the tagged objects" "change/c.txt keep/a.txt" "$(list_files "$M/raw" | tr '\n' ' ' | sed 's/ $//')"

# ---- events lost: bridge down ----
bed_cmd bridge-stop >/dev/null || not_ok "bridge-stop"
put lost/new1.txt "new one" "stage=raw" || not_ok "put lost/new1.txt"
put "lost/new 2.txt" "new two" || not_ok "put lost/new 2.txt"
"$AWS" --endpoint-url "$S3_URL" s3 rm --quiet "s3://$B/gone/b.txt" || not_ok "rm gone/b.txt"
put change/c.txt "c, version two, longer" "stage=raw" || not_ok "rewrite change/c.txt"
"$AWS" --endpoint-url "$S3_URL" s3api put-object-tagging --bucket "$B" --key keep/a.txt \
	--tagging 'TagSet=[{Key=stage,Value=cooked}]' || not_ok "re-tag keep/a.txt"
bed_cmd bridge-start >/dev/null || not_ok "bridge-start"
# One event after the bridge is back: the pipeline works again, and what
# was lost stays lost.
put marker.txt "marker" || not_ok "put marker.txt"
if wait_for 15 test -e "$M/all/marker.txt"; then ok "events flow again after bridge-start"; else not_ok "events flow again after bridge-start"; fi
check "lost create: lost/new1.txt missing before the rescan" test ! -e "$M/all/lost/new1.txt"
check "lost delete: gone/b.txt still shown before the rescan" test -e "$M/all/gone/b.txt"
check_eq "lost rewrite: change/c.txt has its old size before the rescan" \
	"$(printf 'c, version one\n' | wc -c)" "$(stat -c %s "$M/all/change/c.txt" 2>&1)"
check "no event for a tag change: keep/a.txt still in raw" test -e "$M/raw/keep/a.txt"
sleep 1.2   # records written by events are "newer than the rescan" for 1 s (clock slack)

# ---- the rescan ----
out=$("$FACETFS" rescan "$M" 2>&1)
rc=$?
printf '%s\n' "$out" | diag
check_eq "facetfs rescan exits 0" 0 "$rc"
line=$(printf '%s\n' "$out" | grep "^bucket $B: ")
if [[ $line =~ ^bucket\ $B:\ listed\ 5,\ added\ 2,\ removed\ 1,\ updated\ 2,\ unchanged\ [0-9]+,\ kept\ \(newer\ events\)\ [0-9]+$ ]]; then
	ok "report: listed 5, added 2, removed 1, updated 2"
else
	not_ok "report: listed 5, added 2, removed 1, updated 2" "got '$line'"
fi
for l in "  added: lost/new1.txt" "  added: lost/new 2.txt" "  removed: gone/b.txt" \
	"  updated: change/c.txt" "  updated: keep/a.txt"; do
	check "report names it: ${l#  }" grep -qxF -- "$l" <<<"$out"
done

# ---- after: the mount shows the bucket as it is ----
check_eq "lost create fixed: content of lost/new1.txt" "new one" "$(cat "$M/all/lost/new1.txt" 2>&1)"
check_eq "lost create fixed: content of 'lost/new 2.txt'" "new two" "$(cat "$M/all/lost/new 2.txt" 2>&1)"
check "lost delete fixed: gone/b.txt gone" test ! -e "$M/all/gone/b.txt"
check_eq "lost rewrite fixed: change/c.txt content" "c, version two, longer" "$(cat "$M/all/change/c.txt" 2>&1)"
check "tags refreshed: keep/a.txt left view raw" test ! -e "$M/raw/keep/a.txt"
check "tags fetched for a lost create: lost/new1.txt in view raw" test -e "$M/raw/lost/new1.txt"
check_eq "view raw after the rescan" "change/c.txt lost/new1.txt" "$(list_files "$M/raw" | tr '\n' ' ' | sed 's/ $//')"
check_eq "view all after the rescan" "change/c.txt keep/a.txt lost/new 2.txt lost/new1.txt marker.txt" \
	"$(list_files "$M/all" | tr '\n' ' ' | sed 's/ $//')"

# ---- nothing left to fix; by view; errors ----
out=$("$FACETFS" rescan "$M" raw 2>&1)
rc=$?
check_eq "rescan of view raw exits 0" 0 "$rc"
if grep -qE "^bucket $B: listed 5, added 0, removed 0, updated 0, unchanged 5, kept \(newer events\) 0$" <<<"$out"; then
	ok "second rescan (by view): nothing to fix"
else
	not_ok "second rescan (by view): nothing to fix" "got '$out'"
fi
out=$("$FACETFS" rescan "$M" no-such-view 2>&1)
rc=$?
check "rescan of an unknown view fails" test "$rc" -ne 0
check "and says so" grep -q 'no view named "no-such-view"' <<<"$out"

stop_gateway A
check_eq "gateway stops cleanly" 0 "$?"
