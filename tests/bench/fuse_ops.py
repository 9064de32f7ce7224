#!/usr/bin/env python3
"""fuse_ops.py — count the FUSE requests a gateway read from /dev/fuse, by
opcode, in an `strace -f -s 16 -o FILE -p PID` log (the reads of 1052672
bytes are libfuse's reads of /dev/fuse; the opcode is bytes 4..7 of what
each returned). Usage: fuse_ops.py STRACE_LOG [FILES] — with FILES, also
per file."""
import collections
import re
import sys

NAMES = {1: "LOOKUP", 2: "FORGET", 3: "GETATTR", 4: "SETATTR", 9: "MKDIR", 14: "OPEN",
         15: "READ", 16: "WRITE", 18: "RELEASE", 20: "FSYNC", 22: "GETXATTR",
         25: "FLUSH", 27: "OPENDIR", 28: "READDIR", 29: "RELEASEDIR",
         35: "CREATE", 42: "BATCH_FORGET", 44: "READDIRPLUS"}
READ = re.compile(r'(?:read\(\d+, |read resumed>)"((?:[^"\\]|\\.)*)"(?:\.\.\.)?, 1052672\)')
SIMPLE = {"n": 10, "t": 9, "r": 13, "v": 11, "f": 12, "\\": 92, '"': 34}


def unescape(s, want=8):
    """The first `want` bytes of a C-escaped strace string."""
    out, i = bytearray(), 0
    while i < len(s) and len(out) < want:
        if s[i] != "\\":
            out.append(ord(s[i]))
            i += 1
            continue
        j = i + 1
        digits = ""
        while j < len(s) and s[j] in "01234567" and len(digits) < 3:
            digits += s[j]
            j += 1
        if digits:
            out.append(int(digits, 8))
            i = j
        else:
            out.append(SIMPLE.get(s[i + 1], ord(s[i + 1])))
            i += 2
    return bytes(out)


def main():
    counts = collections.Counter()
    with open(sys.argv[1], errors="replace") as f:
        for line in f:
            m = READ.search(line)
            if not m:
                continue
            head = unescape(m.group(1))
            if len(head) == 8:
                op = int.from_bytes(head[4:8], "little")
                counts[NAMES.get(op, str(op))] += 1
    files = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    for name, n in counts.most_common():
        print(f"{name:13} {n:7}" + (f"  {n / files:.2f} per file" if files else ""))


if __name__ == "__main__":
    main()
