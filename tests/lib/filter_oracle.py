#!/usr/bin/env python3
"""filter_oracle.py — generated objects and an independent evaluation of
filter files, for tests/integration/t_filters.sh.

  filter_oracle.py gen SEED COUNT FIRST [N]
      COUNT object specs (keys numbered from FIRST) as JSON lines on stdout:
      {"key", "size", "ctype", "meta": {...}, "tags": {...}}; about one in
      N (default: none) carries tags, which only `aws --tagging` can set.
  filter_oracle.py batch SPEC
      the specs without tags as `s3tool batch` lines.
  filter_oracle.py expect VIEWS_DIR BUCKET=SPEC... -- BUCKET=LISTING.json...
      For every view file in VIEWS_DIR: "VIEW<TAB>PATH" for each object the
      view should show. What an object is comes from the specs (the last
      spec of a key wins; a spec {"key": K, "deleted": true} removes it);
      which objects exist, their size and Last-Modified come from the
      `aws s3api list-objects-v2` output of each bucket. Spec and listing
      must agree on size, or this exits 1.

Matching is written here from the rules in facetfs-views(5), not
from views/: glob is fnmatch with FNM_PATHNAME (`*`, `?` and classes do not
match `/`), regex is an unanchored search, bounds are inclusive,
content_type ignores case and parameters and takes `type/*`.
"""
import json
import os
import random
import re
import sys
from datetime import datetime, timezone

UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
         "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}


def size_of(v):
    if isinstance(v, int):
        return v
    m = re.fullmatch(r"\s*(\d+)\s*([A-Za-z]*)\s*", v)
    return int(m.group(1)) * UNITS[m.group(2).upper()]


def time_of(v):
    return datetime.fromisoformat(v.replace("Z", "+00:00")).timestamp()


def glob_regex(pat):
    """fnmatch(3) with FNM_PATHNAME as a Python regex."""
    out, i = [], 0
    while i < len(pat):
        c = pat[i]
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = pat.find("]", i + 2)
            if j < 0:
                out.append(re.escape(c))
            else:
                body = pat[i + 1:j]
                neg = body[:1] in ("!", "^")
                if neg:
                    body = body[1:]
                out.append("(?!/)[" + ("^" if neg else "") +
                           body.replace("\\", "\\\\") + "]")
                i = j
        elif c == "\\" and i + 1 < len(pat):
            i += 1
            out.append(re.escape(pat[i]))
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out) + r"\Z", re.S)


def one_of(want, have):
    if have is None:
        return False
    if want == "*":
        return True
    return have in (want if isinstance(want, list) else [want])


def ctype_ok(pats, ct):
    if ct is None:
        return False
    base = re.split(r"[; \t]", ct, 1)[0].lower()
    for p in (pats if isinstance(pats, list) else [pats]):
        p = p.lower()
        if p.endswith("*") and len(p) >= 2:
            if base.startswith(p[:-1]) and len(base) > len(p) - 1:
                return True
        elif base == p:
            return True
    return False


def within(bounds, low, high, value, conv):
    """Inclusive bounds, each optional."""
    return ((low not in bounds or value >= conv(bounds[low])) and
            (high not in bounds or value <= conv(bounds[high])))


def matches(m, o):
    key = o["key"]
    if "prefix" in m and not key.startswith(m["prefix"]):
        return False
    if "suffix" in m and not key.endswith(m["suffix"]):
        return False
    if "glob" in m and not glob_regex(m["glob"]).match(key):
        return False
    if "regex" in m and not re.search(m["regex"], key):
        return False
    if not within(m.get("size", {}), "min", "max", o["size"], size_of):
        return False
    if not within(m.get("modified", {}), "after", "before", o["mtime"], time_of):
        return False
    if "content_type" in m and not ctype_ok(m["content_type"], o.get("ctype")):
        return False
    for name, want in m.get("metadata", {}).items():
        if not one_of(want, o.get("meta", {}).get(name)):
            return False
    for name, want in m.get("tags", {}).items():
        if not one_of(want, o.get("tags", {}).get(name)):
            return False
    if "any" in m and not any(matches(sub, o) for sub in m["any"]):
        return False
    if "not" in m and matches(m["not"], o):
        return False
    return True


def path_of(view, bucket, key):
    lay = view.get("layout", {})
    sp = lay.get("strip_prefix", "")
    if sp and key.startswith(sp):
        key = key[len(sp):]
    if lay.get("flat"):
        key = key.replace("%", "%25").replace("/", "%2F")
    if isinstance(view["bucket"], list):
        key = bucket + "/" + key
    return key


def gen(seed, count, first, tagged):
    rnd = random.Random(seed)
    dirs = ["p/a/", "p/b/", "q/", "r/deep/", "r/deep/er/", "s/ü space/"]
    suffixes = [".csv", ".txt", ".png", ".json", ".dat"]
    ctypes = ["text/plain", "text/csv", "image/png", "application/json",
              "application/octet-stream", "text/plain; charset=utf-8"]
    for n in range(first, first + count):
        o = {"key": "%sx-%05d%s" % (rnd.choice(dirs), n, rnd.choice(suffixes)),
             "size": rnd.choice([0, 1, rnd.randrange(6000), 1000, 4096, 5000]),
             "ctype": rnd.choice(ctypes), "meta": {}, "tags": {}}
        color = rnd.choice(["black", "green", "red", None])
        if color:
            o["meta"]["color"] = color
        if rnd.random() < 0.3:
            o["meta"]["owner"] = rnd.choice(["alice", "bob"])
        if tagged and rnd.randrange(tagged) == 0:
            o["tags"]["stage"] = rnd.choice(["raw", "done"])
        print(json.dumps(o, ensure_ascii=False))


def batch(spec):
    with open(spec, encoding="utf-8") as f:
        for line in f:
            o = json.loads(line)
            if o.get("deleted"):
                print("delete\t%s" % o["key"])
                continue
            if o["tags"]:
                continue
            meta = ";".join("%s=%s" % kv for kv in o["meta"].items()) or "-"
            print("put\t%s\t%d\t%s\t%s" % (o["key"], o["size"], o["ctype"], meta))


def expect(views_dir, specs, listings):
    known = {}
    for spec in specs:
        bucket, path = spec.split("=", 1)
        with open(path, encoding="utf-8") as f:
            for line in f:
                o = json.loads(line)
                known[(bucket, o["key"])] = o
    objects = []
    for arg in listings:
        bucket, path = arg.split("=", 1)
        with open(path, encoding="utf-8") as f:
            text = f.read().strip()
        for c in (json.loads(text).get("Contents") or []) if text else []:
            o = known.get((bucket, c["Key"]))
            if o is None or o.get("deleted") or o["size"] != c["Size"]:
                print("oracle: %s/%s: listing and specs disagree" % (bucket, c["Key"]),
                      file=sys.stderr)
                sys.exit(1)
            objects.append(dict(o, bucket=bucket, mtime=time_of(c["LastModified"])))
    for name in sorted(os.listdir(views_dir)):
        if not name.endswith(".json") or name.startswith("."):
            continue
        with open(os.path.join(views_dir, name), encoding="utf-8") as f:
            view = json.load(f)
        buckets = view["bucket"] if isinstance(view["bucket"], list) else [view["bucket"]]
        for o in objects:
            if o["bucket"] in buckets and matches(view.get("match", {}), o):
                print("%s\t%s" % (view["name"], path_of(view, o["bucket"], o["key"])))


def main(argv):
    if len(argv) in (5, 6) and argv[1] == "gen":
        gen(int(argv[2]), int(argv[3]), int(argv[4]),
            int(argv[5]) if len(argv) == 6 else 0)
    elif len(argv) == 3 and argv[1] == "batch":
        batch(argv[2])
    elif len(argv) >= 4 and argv[1] == "expect" and "--" in argv:
        cut = argv.index("--")
        expect(argv[2], argv[3:cut], argv[cut + 1:])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
