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


def main(argv):
    if len(argv) >= 3 and argv[1] == "blocks":
        return cmd_blocks(argv[2], argv[3:])
    if len(argv) >= 2 and argv[1] == "links":
        refs = "--refs" in argv[2:]
        return cmd_links([a for a in argv[2:] if a != "--refs"], refs)
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
