#!/usr/bin/env python3
"""calls_check.py — inside a module, files call one way.

    calls_check.py [--root DIR] [-v]
        Read the product sources (*.c and *.cc under common/ events/
        views/ sync/ fuse/ gateway/, sub-folders included; never tests/).
        A module is a top-level folder. For each file find the functions
        it defines and, in its function bodies and macro bodies, the calls
        to functions that another file of the same module defines (not
        static there, and not defined in the calling file itself). That
        gives one graph of files per module. Exit 1 when the graph has a
        circle: each pair of files that call each other is printed with
        one example call each way, and each longer circle as its list of
        files (with the call behind each step). Exit 0 prints one summary
        line. -v also prints every edge with its calls.

    calls_check.py --self-test
        Run the check on small made-up modules: two files that call each
        other and a circle of three must fail; a one-way chain and a
        static helper named like another file's function must pass.
        Prints "ok - ..." or "not ok - ..." for each and exits 1 if any
        case did not come out as expected.

The reading is a regular expression over the C text with comments,
strings and character constants blanked out: a definition is a name
followed by a parenthesised list and '{' at brace depth 0 ("static" in
front of it makes it file-local); a call is a name followed by '(' inside
braces or in a #define body, not after '.' or '->'. A name that two files
of the module define (not static), such as main(), is no file's in
particular and makes no edge. Taking a function's address is not a call.

The source tree is the directory two levels above this file.
"""
import os
import re
import sys
import tempfile

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MODULES = ("common", "events", "views", "sync", "fuse", "gateway")
EXTS = (".c", ".cc")

IDENT = re.compile(r"[A-Za-z_]\w*")
CALL = re.compile(r"(?<![\w.>])([A-Za-z_]\w*)\s*\(")
QUALIFIER_TAIL = re.compile(r"\b(const|noexcept|override|final)\s*$")
DEF_TAIL = re.compile(r"([A-Za-z_]\w*)\s*$")
NOT_NAMES = {"if", "for", "while", "switch", "return", "sizeof", "do",
             "else", "case", "defined", "alignof", "_Alignof", "typeof",
             "__typeof__", "_Generic", "_Static_assert", "static_assert"}


def blank(text):
    """Comments, string literals and character constants replaced by
    spaces (newlines kept, so offsets and line numbers stay)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "/" and i + 1 < n and text[i + 1] == "/":
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c == "/" and i + 1 < n and text[i + 1] == "*":
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + re.sub(r"[^\n]", " ", text[i + 1:j - 1]) + c
                       if j - i >= 2 else text[i:j])
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def split_directives(text):
    """(code, macros): code is text with every preprocessor line (and its
    continuations) blanked; macros is a list of (offset, body) of each
    #define's replacement text, where calls may also hide."""
    code = list(text)
    macros = []
    pos = 0
    lines = text.split("\n")
    k = 0
    while k < len(lines):
        start = pos
        logical = lines[k]
        pos += len(lines[k]) + 1
        k += 1
        if not logical.lstrip().startswith("#"):
            continue
        while logical.endswith("\\") and k < len(lines):
            logical = logical[:-1] + " " + lines[k]
            pos += len(lines[k]) + 1
            k += 1
        end = min(pos, len(text))
        m = re.match(r"\s*#\s*define\s+[A-Za-z_]\w*(\([^)]*\))?", logical)
        if m:
            macros.append((start, logical[m.end():]))
        for i in range(start, end):
            if code[i] != "\n":
                code[i] = " "
    return "".join(code), macros


def match_brace(code, i):
    """Offset just past the '}' that closes the '{' at i."""
    depth = 0
    n = len(code)
    while i < n:
        c = code[i]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return n


def open_paren(d):
    """Offset of the '(' matching the ')' that ends d, or None."""
    if not d.endswith(")"):
        return None
    depth = 0
    for i in range(len(d) - 1, -1, -1):
        if d[i] == ")":
            depth += 1
        elif d[i] == "(":
            depth -= 1
            if depth == 0:
                return i
    return None


def definition(decl):
    """(name, static) when decl (the text before a top-level '{') is a
    function's head, else None."""
    d = decl.strip()
    while True:
        m = QUALIFIER_TAIL.search(d)
        if m:
            d = d[:m.start()].rstrip()
            continue
        i = open_paren(d)
        if i is None:
            return None
        head = d[:i].rstrip()
        if head.endswith("(") and head[:-1].rstrip().endswith("__attribute__"):
            d = head[:-1].rstrip()[:-len("__attribute__")].rstrip()
            continue
        break
    m = DEF_TAIL.search(head)
    if not m or m.group(1) in NOT_NAMES:
        return None
    words = IDENT.findall(head[:m.start()])
    if "=" in head or not words:
        return None
    return m.group(1), "static" in words


class Source:
    """One file: the functions it defines and the calls it makes."""

    def __init__(self, rel, text):
        self.rel = rel
        self.defs = {}       # name -> static?
        self.calls = []      # (callee, caller or None, line)
        code, macros = split_directives(blank(text))
        self.lines = [0]
        for i, c in enumerate(text):
            if c == "\n":
                self.lines.append(i + 1)
        self._walk(code)
        for off, body in macros:
            for m in CALL.finditer(body):
                self.calls.append((m.group(1), "#define", self.line(off)))

    def line(self, off):
        lo, hi = 0, len(self.lines)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self.lines[mid] <= off:
                lo = mid
            else:
                hi = mid
        return lo + 1

    def _walk(self, code):
        i, n, last = 0, len(code), 0
        while i < n:
            c = code[i]
            if c in ";}":
                last = i + 1
            elif c == "{":
                decl = code[last:i]
                words = IDENT.findall(decl)
                if words[:1] == ["extern"] and len(words) == 1 or \
                        words[:1] == ["namespace"]:
                    last = i + 1
                    i += 1
                    continue
                end = match_brace(code, i)
                d = definition(decl)
                if d:
                    self.defs.setdefault(d[0], d[1])
                for m in CALL.finditer(code, i, end):
                    self.calls.append((m.group(1), d[0] if d else None,
                                       self.line(m.start())))
                last = i = end
                continue
            i += 1


def read_module(root, mod):
    files = []
    base = os.path.join(root, mod)
    for dirpath, dirnames, names in os.walk(base):
        dirnames.sort()
        for name in sorted(names):
            if name.endswith(EXTS):
                path = os.path.join(dirpath, name)
                with open(path, encoding="utf-8", errors="replace") as f:
                    files.append(Source(os.path.relpath(path, root), f.read()))
    return files


def module_graph(files):
    """{(a, b): [(caller, callee, line), ...]}: the calls of file a to
    functions of file b, and the names defined outside static by more
    than one file."""
    owner, shared = {}, set()
    for s in files:
        for name, static in s.defs.items():
            if static:
                continue
            if name in owner and owner[name] is not s:
                shared.add(name)
            owner[name] = s
    edges = {}
    for s in files:
        for callee, caller, line in s.calls:
            t = owner.get(callee)
            if t is None or t is s or callee in shared or callee in s.defs:
                continue
            edges.setdefault((s.rel, t.rel), []).append((caller, callee, line))
    return edges, shared


def components(nodes, edges):
    """Strongly connected components of more than one node (Tarjan)."""
    succ = {v: [] for v in nodes}
    for a, b in edges:
        succ[a].append(b)
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(succ[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out, succ


def long_circle(comp, succ):
    """A simple circle of three files or more inside comp, or None."""
    inside = set(comp)
    best = None

    def walk(path, seen):
        nonlocal best
        for w in sorted(succ[path[-1]]):
            if w not in inside:
                continue
            if w == path[0] and len(path) >= 3:
                if best is None or len(path) < len(best):
                    best = list(path)
            elif w not in seen and w > path[0] and \
                    (best is None or len(path) + 1 < len(best)):
                seen.add(w)
                path.append(w)
                walk(path, seen)
                path.pop()
                seen.discard(w)

    for start in comp:
        walk([start], {start})
    return best


def example(calls):
    caller, callee, line = calls[0]
    where = "%s()" % caller if caller and caller != "#define" else \
        (caller or "file scope")
    return "%s calls %s() (line %d)" % (where, callee, line)


def check(root, verbose=False, out=sys.stdout):
    """Print the circles of every module; 1 if any, else 0."""
    nfiles = nedges = ncircles = 0
    for mod in MODULES:
        if not os.path.isdir(os.path.join(root, mod)):
            continue
        files = read_module(root, mod)
        nfiles += len(files)
        edges, _ = module_graph(files)
        nedges += len(edges)
        if verbose:
            for (a, b), calls in sorted(edges.items()):
                names = sorted({c[1] for c in calls})
                print("%s -> %s: %s" % (a, b, ", ".join(names)), file=out)
        comps, succ = components([s.rel for s in files], edges)
        for comp in comps:
            for i, a in enumerate(comp):
                for b in comp[i + 1:]:
                    if (a, b) in edges and (b, a) in edges:
                        ncircles += 1
                        print("circle: %s <-> %s" % (a, b), file=out)
                        print("  %s -> %s: %s" % (a, b, example(edges[a, b])), file=out)
                        print("  %s -> %s: %s" % (b, a, example(edges[b, a])), file=out)
            path = long_circle(comp, succ)
            if path:
                ncircles += 1
                print("circle: %s" % " -> ".join(path + path[:1]), file=out)
                for a, b in zip(path, path[1:] + path[:1]):
                    print("  %s -> %s: %s" % (a, b, example(edges[a, b])), file=out)
    if ncircles:
        print("calls_check: %d circle%s between files of one module "
              "(docs/design.md, \"Who calls whom\")"
              % (ncircles, "" if ncircles == 1 else "s"), file=out)
        return 1
    print("calls_check: %d files, %d file-to-file call edges inside modules, no circle"
          % (nfiles, nedges), file=out)
    return 0


SELF_TESTS = [
    # (name, expected exit status, {path: text}, text the report must hold)
    ("two files that call each other fail", 1, {
        "views/a.c": "int a_one(void) { return b_two() + 1; }\n",
        "views/b.c": "/* a_one() */\nint b_two(void)\n{\n\treturn a_one == 0 ? 0 : a_one();\n}\n",
    }, "circle: views/a.c <-> views/b.c"),
    ("a circle of three files fails (a static x_f elsewhere)", 1, {
        "sync/x.c": "void x_f(void) { y_f(); }\n",
        "sync/y.c": "void y_f(void) { z_f(); }\n",
        "sync/z.c": "#define CALL_X() x_f()\nvoid z_f(void) { CALL_X(); }\n",
        "sync/w.c": "static void x_f(void) { }\nvoid w_f(void) { x_f(); }\n",
    }, "circle: sync/x.c -> sync/y.c -> sync/z.c -> sync/x.c"),
    ("a one-way chain passes", 0, {
        "fuse/top.c": "static int helper(int v)\n{\n\treturn mid_f(v);\n}\n"
                      "int top_f(void) { return helper(1); }\n",
        "fuse/mid.c": "int mid_f(int v) { const char *s = \"top_f(\"; return low_f(v) + !s; }\n",
        "fuse/low.c": "int low_f(int v) { return v; }\n",
    }, "no circle"),
    ("a static helper named like another file's function passes", 0, {
        "events/p.c": "int p_f(void) { return q_f(); }\n",
        "events/q.c": "static __attribute__((unused)) int p_f(int (*g)(int))\n{\n\treturn g(2);\n}\n"
                      "int q_f(void) { struct s *o = 0; return p_f(0) + o->p_f(); }\n",
    }, "no circle"),
    ("calls between modules make no edge", 0, {
        "common/c.c": "int c_f(void) { return g_f(); }\n",
        "gateway/g.c": "int g_f(void) { return c_f(); }\n",
    }, "no circle"),
]


def self_test():
    import io
    bad = 0
    for name, want, files, text in SELF_TESTS:
        with tempfile.TemporaryDirectory() as root:
            for rel, body in files.items():
                os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
                with open(os.path.join(root, rel), "w") as f:
                    f.write(body)
            out = io.StringIO()
            got = check(root, out=out)
        if got == want and text in out.getvalue():
            print("ok - calls_check: %s" % name)
        else:
            bad += 1
            print("not ok - calls_check: %s (exit %d, wanted %d)" % (name, got, want))
            sys.stdout.write("".join("#   %s\n" % l for l in out.getvalue().splitlines()))
    return 1 if bad else 0


def main(argv):
    root, verbose = SRC, False
    args = list(argv)
    while args:
        a = args.pop(0)
        if a == "--self-test":
            return self_test()
        if a == "--root" and args:
            root = args.pop(0)
        elif a == "-v":
            verbose = True
        else:
            sys.stderr.write(__doc__)
            return 2
    return check(root, verbose)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
