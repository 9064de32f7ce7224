#!/usr/bin/env bash
# t_docs — the manual pages, the docs and the install (no bed needed): each
# page renders with `man -l` without a warning; every option that a
# command's --help prints appears in its page; the filter examples of
# facetfs-views(5) pass `facetfs check`; README.md and docs/ are checked
# (links, file references, marked examples, filter examples: see below);
# module headers' lock orders agree with docs/design.md "Lock order";
# `meson install --destdir` puts the binaries, the mount helper (/sbin),
# the pages and the examples in place.
. "$(dirname "$0")/../lib/common.sh"

T=$(test_tmp)
SRC=$FACETFS_SRC
FACETFS=$FACETFS_BUILD/gateway/exe/facetfs
BRIDGE=$FACETFS_BUILD/events/facetfs-bridge
HELPER=$FACETFS_BUILD/gateway/exe/mount.facetfs

if ! command -v man >/dev/null 2>&1; then
	skip "manual pages render" "man is not installed (tests/deps.sh installs man-db)"
	exit 0
fi

# render PAGE: its text in plain ASCII, one long line per paragraph.
render() { LC_ALL=C MANWIDTH=250 man -l "$1" 2>/dev/null | col -b; }

for page in gateway/facetfs.1 gateway/mount.facetfs.8 events/facetfs-bridge.1 views/facetfs-views.5; do
	warn=$(LC_ALL=C MANWIDTH=100 man --warnings -l "$SRC/$page" 2>&1 >/dev/null)
	if [[ -z $warn ]] && [[ $(render "$SRC/$page" | wc -l) -gt 20 ]]; then
		ok "man -l $page renders without warnings"
	else
		not_ok "man -l $page renders without warnings" "$(head -n 3 <<<"$warn" | tr '\n' ' ')"
	fi
done

# options_of CMD...: the option names (-x, --long) its --help prints.
options_of() {
	"$@" --help 2>&1 | grep -oE '(^|[[:space:][,(|])--?[a-zA-Z][a-zA-Z-]*' |
		sed -E 's/^[[:space:][,(|]//' | sort -u
}

# every_option_in PAGE CMD...: each option of CMD's --help is in PAGE.
every_option_in() {
	local page=$1 text missing=() o n=0
	shift
	text=$(render "$SRC/$page")
	while read -r o; do
		[[ -n $o ]] || continue
		n=$((n + 1))
		grep -qF -- "$o" <<<"$text" || missing+=("$o")
	done < <(options_of "$@")
	if ((n > 0 && ${#missing[@]} == 0)); then
		ok "$page documents the $n options of '${*##*/} --help'"
	else
		not_ok "$page documents every option of '${*##*/} --help'" "missing: ${missing[*]:-(no options found)}"
	fi
}

every_option_in gateway/facetfs.1 "$FACETFS"
for cmd in mount check status rescan; do
	every_option_in gateway/facetfs.1 "$FACETFS" "$cmd"
done
every_option_in events/facetfs-bridge.1 "$BRIDGE"
every_option_in gateway/mount.facetfs.8 "$HELPER"

# --help of every command says that command's usage and exits 0.
for cmd in mount check status rescan; do
	out=$("$FACETFS" "$cmd" --help 2>&1)
	rc=$?
	if ((rc == 0)) && [[ $out == "usage: facetfs $cmd "* ]]; then
		ok "facetfs $cmd --help: its own usage, exit 0"
	else
		not_ok "facetfs $cmd --help: its own usage, exit 0" "exit $rc: $(head -n 1 <<<"$out")"
	fi
done
rc=0
"$FACETFS" status --bogus >/dev/null 2>&1 || rc=$?
check_eq "facetfs status --bogus: usage error 2 (not read as a mountpoint)" 2 "$rc"

# The complete examples of facetfs-views(5) are valid filter files.
render "$SRC/views/facetfs-views.5" | awk -v dir="$T" '
	/^ *\{ "name":/ { on = 1; n++; buf = "" }
	on { buf = buf $0 "\n" }
	on && /\} *$/ && depth(buf) == 0 { if (buf !~ /\.\.\./) print buf > (dir "/ex" n ".json"); on = 0 }
	function depth(s,   i, c, d) { d = 0; for (i = 1; i <= length(s); i++) { c = substr(s, i, 1); if (c == "{") d++; else if (c == "}") d-- } return d }
'
n=$(ls "$T"/ex*.json 2>/dev/null | wc -l)
if ((n >= 2)) && "$FACETFS" check "$T"/ex*.json >"$T/check.out" 2>&1; then
	ok "the $n complete examples of facetfs-views(5) pass facetfs check"
else
	not_ok "the complete examples of facetfs-views(5) pass facetfs check" "$n found; $(head -n 3 "$T/check.out" 2>/dev/null | tr '\n' ' ')"
fi

# The README and docs/: short README; every relative link, #anchor, path
# in inline code and manual page name resolves (tests/lib/docs_check.py);
# every JSON example is marked for a test, and the filter examples pass
# facetfs check (the config examples and the tour run in t_tour).
DOCS=(README.md docs/*.md)
n=$(wc -l <"$SRC/README.md")
if ((n <= 200)); then ok "README.md is short: $n lines"; else not_ok "README.md is short" "$n lines (at most 200)"; fi
if out=$(cd "$SRC" && python3 tests/lib/docs_check.py links --refs "${DOCS[@]}" 2>&1); then
	ok "README.md and docs/: $out"
else
	not_ok "README.md and docs/: links and references resolve" "$(grep -c . <<<"$out") problems"
	diag <<<"$out"
fi
if out=$(cd "$SRC" && python3 tests/lib/docs_check.py links tests/bench/README.md tests/bench/RESULTS.md 2>&1); then
	ok "tests/bench/README.md and RESULTS.md: $out"
else
	not_ok "tests/bench/README.md and RESULTS.md: links resolve"
	diag <<<"$out"
fi
# One lock order: the pairs of every module header's "Lock order" block
# are in docs/design.md's (tests/lib/docs_check.py locks); its self-test
# shows the check fails on a pair reversed.
if out=$(cd "$SRC" && python3 tests/lib/docs_check.py locks --self-test 2>&1); then
	ok "the lock order check fails when it should: ${out#self-test: }"
else
	not_ok "the lock order check fails when it should" "$(grep -c . <<<"$out") problems"
	diag <<<"$out"
fi
if out=$(cd "$SRC" && python3 tests/lib/docs_check.py locks 2>&1); then
	ok "$out"
else
	not_ok "module headers follow docs/design.md \"Lock order\"" "$(grep -c . <<<"$out") problems"
	diag <<<"$out"
fi
# The reference keeps up with the parser: every key gateway/config.c
# accepts has an entry in facetfs(1)'s CONFIGURATION.
if out=$(cd "$SRC" && python3 tests/lib/docs_check.py config 2>&1); then
	ok "$out"
else
	not_ok "every config key has an entry in facetfs(1)" "$(grep -c . <<<"$out") missing"
	diag <<<"$out"
fi
(cd "$SRC" && python3 tests/lib/docs_check.py blocks "$T/blocks" "${DOCS[@]}")
unmarked=$(awk -F'\t' '$4 == "json" && $5 !~ /^(filter|config: merge|file: .*)$/ { print $2 ":" $3 }' "$T/blocks/index")
check_eq "every JSON example in README.md and docs/ is marked for a test" "" "$unmarked"
nf=0 bad=()
while IFS=$'\t' read -r num file line lang marker; do
	[[ $marker == filter || $marker == "file: "*/views.d/*.json ]] || continue
	nf=$((nf + 1))
	cp "$T/blocks/$num" "$T/filter-$num.json"
	"$FACETFS" check "$T/filter-$num.json" >"$T/filter-$num.out" 2>&1 ||
		bad+=("$file:$line: $(head -n 1 "$T/filter-$num.out")")
done <"$T/blocks/index"
if ((nf >= 3 && ${#bad[@]} == 0)); then
	ok "the $nf filter examples of README.md and docs/ pass facetfs check"
else
	not_ok "the filter examples of README.md and docs/ pass facetfs check" "$nf found; ${bad[*]:-}"
fi

# meson install --destdir: everything in its place.
if meson install -C "$FACETFS_BUILD" --destdir "$T/dest" --no-rebuild >"$T/install.out" 2>&1; then
	ok "meson install --destdir"
	prefix=$(meson introspect "$FACETFS_BUILD" --buildoptions | jq -r '.[] | select(.name == "prefix") | .value')
	D=$T/dest$prefix
	for f in "$D/bin/facetfs" "$D/bin/facetfs-bridge" "$T/dest/sbin/mount.facetfs" \
		"$D/share/man/man1/facetfs.1" "$D/share/man/man1/facetfs-bridge.1" \
		"$D/share/man/man5/facetfs-views.5" "$D/share/man/man8/mount.facetfs.8" \
		"$D/share/doc/facetfs/examples/systemd/facetfs@.service" \
		"$D/share/doc/facetfs/examples/views.d"; do
		check "installed: ${f#"$T/dest"}" test -e "$f"
	done
else
	not_ok "meson install --destdir" "$(tail -n 3 "$T/install.out")"
fi
