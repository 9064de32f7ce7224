#!/usr/bin/env python3
"""docs_check.py — the examples and the links of the project's Markdown.

    docs_check.py blocks OUTDIR FILE.md...
        Write every fenced code block to OUTDIR/N (N from 1, in file order)
        and list them in OUTDIR/index, one line each, tab-separated:
        N, FILE, LINE (of the opening fence), LANG, MARKER. MARKER is the
        text of an HTML comment <!-- ... --> on the line just before the
        fence ("-" when there is none): "filter", "config: merge",
        "file: PATH", "run", "run: background", "run: stop".

    docs_check.py links [--refs] FILE.md...
        Check every relative link [text](target) outside code: the file or
        directory exists (relative to the Markdown file), and a #anchor
        names a heading of the target (GitHub's rule: lower case, spaces to
        hyphens, punctuation dropped, -1, -2 for repeats). With --refs, also
        the references in inline code: a path whose first component is a
        top-level entry of the source tree (build/... is looked up in
        $FACETFS_BUILD), a test script t_NAME(.sh) in tests/integration, a
        unit test test_NAME in tests/unit; and the project's manual pages
        named as NAME(N) (facetfs*, mount.facetfs). Prints one line per
        problem, FILE:LINE: what; exit 1 if any, else prints how many it
        checked.

    docs_check.py locks [--self-test] [DESIGN.md HEADER...]
        Check each module header's local lock order against the process's
        in DESIGN.md (default docs/design.md; headers: every .h of the
        source tree). The process's order is the first code block after
        the heading "Lock order": lines "A -> B -> C" (a line that begins
        with a blank continues the one before), where "(a note)" is
        dropped and "X, Y" names several locks. A header's order is a
        comment line beginning "Lock order" and ending with ":", then lines
        "A -> B" up to the first line without "->". Each pair A, B a header
        states must be in the process's order: A reaches B through its
        arrows. Prints one line per problem, FILE:LINE: what; exit 1 if
        any (or if the process's order has a cycle), else how many pairs
        it checked. --self-test runs the check on inputs made to fail
        (a pair reversed, a lock unknown, a cycle) and to pass, and on the
        real design.md with each header's first pair reversed; exit 1 when
        any of them is not judged as it should be.

    docs_check.py config [CONFIG.c MAN.1]
        Check that every key the gateway's config parser accepts (the
        "known" lists of CONFIG.c, default gateway/config.c, each named
        by the section its check_known call gives: "s3.region") has an
        entry in the CONFIGURATION section of MAN.1 (default
        gateway/facetfs.1): a .TP tag line naming it. Prints one line per
        key missing; exit 1 if any, else how many it checked.

The source tree is the directory two levels above this file.
"""
import os
import re
import sys
import unicodedata

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("FACETFS_BUILD", os.path.join(SRC, "build"))

FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([^\s`]*)")
COMMENT = re.compile(r"^\s*<!--\s*(.*?)\s*-->\s*$")


def fenced(lines):
    """Yield (start, end, lang, marker) of each fenced block (0-based lines;
    start is the opening fence, end the closing one)."""
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence = m.group(2)
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence[0] * len(fence)):
            j += 1
        prev = lines[i - 1] if i > 0 else ""
        c = COMMENT.match(prev)
        yield i, j, m.group(3) or "-", c.group(1) if c else "-"
        i = j + 1


def cmd_blocks(outdir, files):
    os.makedirs(outdir, exist_ok=True)
    n = 0
    with open(os.path.join(outdir, "index"), "w") as idx:
        for f in files:
            lines = open(f, encoding="utf-8").read().split("\n")
            for start, end, lang, marker in fenced(lines):
                n += 1
                with open(os.path.join(outdir, str(n)), "w") as out:
                    out.write("\n".join(lines[start + 1:end]) + "\n")
                idx.write(f"{n}\t{f}\t{start + 1}\t{lang}\t{marker}\n")
    return 0


def slug(heading):
    """GitHub's anchor for a heading's text."""
    s = heading.strip().lower()
    out = []
    for ch in s:
        if ch in " -":
            out.append("-" if ch == " " else ch)
        elif ch == "_" or ch.isalnum() or unicodedata.category(ch).startswith("L"):
            out.append(ch)
    return "".join(out)


def prose(lines):
    """Yield (line number, text) of the lines outside fenced blocks, with
    inline code spans kept (links never sit inside them)."""
    inside = set()
    for start, end, _, _ in fenced(lines):
        inside.update(range(start, end + 1))
    for i, line in enumerate(lines):
        if i not in inside:
            yield i + 1, line


ANCHORS = {}


def anchors(path):
    if path not in ANCHORS:
        lines = open(path, encoding="utf-8").read().split("\n")
        seen, out = {}, set()
        for _, line in prose(lines):
            m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
            if not m:
                continue
            base = slug(m.group(1))
            k = seen.get(base, 0)
            out.add(base if k == 0 else f"{base}-{k}")
            seen[base] = k + 1
        ANCHORS[path] = out
    return ANCHORS[path]


LINK = re.compile(r"\[([^\]]*)\]\(([^)\s]+)\)")
CODE = re.compile(r"`([^`]+)`")
MANREF = re.compile(r"\b((?:mount\.)?facetfs[a-z.-]*)\(([1-8])\)")


def top_level():
    return {e for e in os.listdir(SRC) if not e.startswith(".")} | {".ci"}


def check_ref(tok, tops):
    """None if tok is no reference or resolves; else what is missing."""
    tok = tok.strip()
    if re.fullmatch(r"t_[a-z0-9_]+(\.sh)?", tok):
        name = tok if tok.endswith(".sh") else tok + ".sh"
        p = os.path.join(SRC, "tests", "integration", name)
        return None if os.path.exists(p) else f"tests/integration/{name}"
    if re.fullmatch(r"test_[a-z0-9_]+", tok):
        for ext in (".c", ".py", ".sh"):
            if os.path.exists(os.path.join(SRC, "tests", "unit", tok + ext)):
                return None
        return f"tests/unit/{tok}.*"
    if not re.fullmatch(r"(\./)?[A-Za-z0-9_.@-]+(/[A-Za-z0-9_.@-]+)*/?", tok) or "/" not in tok:
        return None
    tok = tok[2:] if tok.startswith("./") else tok
    first = tok.split("/")[0]
    if first == "build":
        return None if os.path.exists(os.path.join(BUILD, tok[len("build/"):])) else tok
    if first not in tops:
        return None
    return None if os.path.exists(os.path.join(SRC, tok)) else tok


def man_pages():
    pages = set()
    for root, dirs, files in os.walk(SRC):
        dirs[:] = [d for d in dirs if not d.startswith(".") and not d.startswith("build")]
        for f in files:
            m = re.fullmatch(r"(.+)\.([1-8])", f)
            if m:
                pages.add((m.group(1), m.group(2)))
    return pages


def cmd_links(files, refs):
    problems, checked = [], 0
    tops = top_level()
    pages = man_pages() if refs else set()
    for f in files:
        base = os.path.dirname(os.path.abspath(f))
        lines = open(f, encoding="utf-8").read().split("\n")
        for n, line in prose(lines):
            for _, target in LINK.findall(CODE.sub("", line)):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                    continue
                checked += 1
                path, _, anchor = target.partition("#")
                full = os.path.normpath(os.path.join(base, path)) if path else os.path.abspath(f)
                if not os.path.exists(full):
                    problems.append(f"{f}:{n}: link to {target}: {path} does not exist")
                    continue
                if anchor:
                    if not full.endswith(".md"):
                        problems.append(f"{f}:{n}: link to {target}: an anchor into a file that is not Markdown")
                    elif anchor not in anchors(full):
                        problems.append(f"{f}:{n}: link to {target}: no heading makes #{anchor}")
            if not refs:
                continue
            for tok in CODE.findall(line):
                missing = check_ref(tok, tops)
                if tok.strip() != tok or "/" in tok or tok.startswith(("t_", "test_")):
                    checked += 1
                if missing:
                    problems.append(f"{f}:{n}: `{tok}`: {missing} does not exist")
            for name, sec in MANREF.findall(line):
                checked += 1
                if (name, sec) not in pages:
                    problems.append(f"{f}:{n}: {name}({sec}): no such manual page in the tree")
    for p in problems:
        print(p)
    if not problems:
        print(f"{checked} links and references resolve")
    return 1 if problems else 0


NOTE = re.compile(r"\([^)]*\)")
HEADER_ORDER = re.compile(r"^\s*(?:/?\*+)?\s*Lock order\b.*:\s*$")


def lock_names(segment):
    """The locks one segment of an "A -> B" line names."""
    names = []
    for part in NOTE.sub(" ", segment).split(","):
        name = " ".join(part.split())
        if name:
            names.append(name)
    return names


def order_pairs(text):
    """[(A, B)] of each arrow of one "A -> B -> C" line: every lock of a
    segment before every lock of the next."""
    segs = [lock_names(s) for s in text.split("->")]
    return [(a, b) for left, right in zip(segs, segs[1:]) for a in left for b in right]


def design_order(path):
    """(graph {lock: set of locks after it}, line of the block) of the
    "Lock order" code block of a design page; (None, problem) if none."""
    lines = open(path, encoding="utf-8").read().split("\n")
    heading = None
    for n, line in prose(lines):
        if re.match(r"^#{1,6}\s+Lock order\s*$", line):
            heading = n
            break
    if heading is None:
        return None, f"{path}: no heading \"Lock order\""
    for start, end, _, _ in fenced(lines):
        if start + 1 < heading:
            continue
        joined = []
        for line in lines[start + 1:end]:
            if not line.strip():
                continue
            if line[0] in " \t" and joined:
                joined[-1] += " " + line.strip()
            else:
                joined.append(line.strip())
        graph = {}
        for text in joined:
            for name in (n for s in text.split("->") for n in lock_names(s)):
                graph.setdefault(name, set())
            for a, b in order_pairs(text):
                graph[a].add(b)
        return graph, start + 1
    return None, f"{path}:{heading}: no code block after \"Lock order\""


def reaches(graph, a, b):
    seen, todo = set(), [a]
    while todo:
        x = todo.pop()
        for y in graph.get(x, ()):
            if y == b:
                return True
            if y not in seen:
                seen.add(y)
                todo.append(y)
    return False


def header_orders(path):
    """[(line, A, B)] of the pairs a header's "Lock order" blocks state;
    a block with no pair gives (line, None, None)."""
    lines = open(path, encoding="utf-8", errors="replace").read().split("\n")
    out, i = [], 0
    while i < len(lines):
        if not HEADER_ORDER.match(lines[i]):
            i += 1
            continue
        first, i = i + 1, i + 1
        while i < len(lines) and "->" in lines[i]:
            text = re.sub(r"^\s*\*?", "", lines[i]).replace("*/", "")
            out.extend((i + 1, a, b) for a, b in order_pairs(text))
            i += 1
        if i == first:
            out.append((first, None, None))
    return out


def all_headers():
    found = []
    for root, dirs, files in os.walk(SRC):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "build", "subprojects")))
        found.extend(os.path.join(root, f) for f in sorted(files) if f.endswith(".h"))
    return found


def lock_problems(design, headers):
    """(problems, pairs checked) of headers against design's order."""
    graph, where = design_order(design)
    if graph is None:
        return [where], 0
    problems = [f"{design}:{where}: the lock order has a cycle through {a}"
                for a in sorted(graph) if reaches(graph, a, a)]
    checked = 0
    for h in headers:
        name = os.path.relpath(h, SRC) if h.startswith(SRC + os.sep) else h
        for n, a, b in header_orders(h):
            if a is None:
                problems.append(f"{name}:{n}: a \"Lock order\" block with no \"A -> B\" line")
                continue
            checked += 1
            unknown = [x for x in (a, b) if x not in graph]
            if unknown:
                problems.extend(f"{name}:{n}: lock \"{x}\" is not in {design}'s \"Lock order\""
                                for x in unknown)
            elif reaches(graph, b, a):
                problems.append(f"{name}:{n}: {a} -> {b}: {design}'s \"Lock order\" has it reversed")
            elif not reaches(graph, a, b):
                problems.append(f"{name}:{n}: {a} -> {b}: not in {design}'s \"Lock order\"")
    return problems, checked


def cmd_locks(args):
    design = args[0] if args else os.path.join(SRC, "docs", "design.md")
    headers = args[1:] if len(args) > 1 else all_headers()
    problems, checked = lock_problems(design, headers)
    for p in problems:
        print(p)
    if not problems:
        print(f"{checked} lock pairs of module headers follow docs/design.md \"Lock order\"")
    return 1 if problems else 0


SELF_DESIGN = """# d

## Lock order

```
a -> (a note) b, c -> d
e (sync/e.c) -> f,
                g
```
"""


def self_test():
    import tempfile

    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        def put(name, text):
            path = os.path.join(tmp, name)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            return path

        design = put("design.md", SELF_DESIGN)
        cycle = put("cycle.md", SELF_DESIGN.replace("e (sync/e.c) -> f,", "e -> f -> a -> e,"))
        cases = [
            ("pass", design, " * Lock order (ours):\n *   a -> d\n *   e -> g\n *   c -> d\n"),
            ("pass", design, "/* Lock order:\n *   a -> (cb) b, c\n */\n"),
            ("fail", design, " * Lock order:\n *   d -> a\n"),
            ("fail", design, " * Lock order:\n *   a -> x\n"),
            ("fail", design, " * Lock order:\n *   b -> c\n"),
            ("fail", design, " * Lock order:\n * none here\n"),
            ("fail", cycle, " * Lock order:\n *   a -> b\n"),
        ]
        for i, (want, d, text) in enumerate(cases):
            problems, _ = lock_problems(d, [put(f"case{i}.h", text)])
            if (want == "pass") != (not problems):
                failures.append(f"case {i} ({want}): {problems or 'no problem found'}")
        real = os.path.join(SRC, "docs", "design.md")
        flipped = 0
        for h in all_headers():
            pairs = [(n, a, b) for n, a, b in header_orders(h) if a is not None]
            if not pairs:
                continue
            n, a, b = pairs[0]
            lines = open(h, encoding="utf-8").read().split("\n")
            lines.insert(n - 1, f" *   {b} -> {a}")
            problems, _ = lock_problems(real, [put("flipped.h", "\n".join(lines))])
            flipped += 1
            if not any("reversed" in p for p in problems):
                failures.append(f"{os.path.relpath(h, SRC)}: {b} -> {a} added, not found reversed")
    if flipped == 0:
        failures.append("no header of the tree states a lock order to reverse")
    for f in failures:
        print(f"self-test: {f}")
    if failures:
        return 1
    print(f"self-test: {len(cases)} made-up cases and {flipped} reversed header pairs judged right")
    return 0


KNOWN = re.compile(r"static const char \*const (\w+)\[\] = \{(.*?)\};", re.S)


def config_keys(path):
    """The dotted keys the parser accepts: each known list with the section
    of the check_known call that uses it (objects: their own keys)."""
    text = open(path, encoding="utf-8").read()
    keys = []
    for m in KNOWN.finditer(text):
        name, body = m.group(1), m.group(2)
        call = re.search(r"check_known\([^,]+,\s*[^,]+,\s*\"([^\"]*)\",\s*%s\)" % name,
                         text[m.end():])
        if not call:
            continue
        section = call.group(1)
        for k in re.findall(r"\"([^\"]+)\"", body):
            keys.append(f"{section}.{k}" if section else k)
    objects = {k.split(".")[0] for k in keys if "." in k}
    return [k for k in keys if k not in objects]


def man_entries(path):
    """The words of the .TP tag lines of the CONFIGURATION section."""
    words = set()
    section, tag = None, False
    for line in open(path, encoding="utf-8"):
        line = line.rstrip("\n")
        if line.startswith(".SH "):
            section = line[4:].strip()
            continue
        if section != "CONFIGURATION":
            continue
        if line.startswith(".TP"):
            tag = True
            continue
        if tag:
            words.update(re.findall(r"[A-Za-z_][\w.]*", line.replace("\\-", "-")))
            tag = False
    return words


def cmd_config(args):
    conf = args[0] if args else os.path.join(SRC, "gateway", "config.c")
    man = args[1] if len(args) > 1 else os.path.join(SRC, "gateway", "facetfs.1")
    keys, words = config_keys(conf), man_entries(man)
    missing = [k for k in keys if k not in words]
    for k in missing:
        print(f"{os.path.relpath(man, SRC)}: no entry for the config key {k}")
    if not keys:
        print(f"{conf}: no known keys found")
        return 1
    if not missing:
        print(f"{len(keys)} config keys each have an entry in {os.path.relpath(man, SRC)}")
    return 1 if missing else 0


def main(argv):
    if len(argv) >= 3 and argv[1] == "blocks":
        return cmd_blocks(argv[2], argv[3:])
    if len(argv) >= 2 and argv[1] == "links":
        refs = "--refs" in argv[2:]
        return cmd_links([a for a in argv[2:] if a != "--refs"], refs)
    if len(argv) >= 2 and argv[1] == "config":
        return cmd_config(argv[2:])
    if len(argv) >= 2 and argv[1] == "locks":
        if "--self-test" in argv[2:]:
            return self_test()
        return cmd_locks(argv[2:])
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
