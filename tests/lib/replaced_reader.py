#!/usr/bin/env python3
"""replaced_reader.py PATH OLD NEW BUCKET KEY — a descriptor opened on the
object's current version (the bytes of file OLD) while another client
(/usr/bin/aws, $S3_URL) replaces it with the bytes of file NEW.

It reads the whole object through the descriptor, replaces the object,
waits (20 s at most) until a new open of PATH reads NEW and PATH is
another inode than the descriptor's (the change's event was applied),
drops the kernel's page cache (root), and reads through the old
descriptor again. Prints one
line:
  first=old name=SIZE descriptor=SIZE/WHAT same-inode=BOOL
first: what the first read returned (old, or other(N bytes)); name: the
size stat(PATH) shows after the change; descriptor: what fstat of the old
descriptor shows, and what its second read returned (old, new, short(N)
or mixed(N)); same-inode: whether PATH and the old descriptor are one
inode. Exits non-zero, with a reason, if a step fails."""
import os
import subprocess
import sys
import time


def what(got, old, new):
    if got == old:
        return "old"
    if got == new:
        return "new"
    if old.startswith(got):
        return "short(%d)" % len(got)
    return "mixed(%d)" % len(got)


def main():
    path, oldf, newf, bucket, key = sys.argv[1:6]
    old = open(oldf, "rb").read()
    new = open(newf, "rb").read()
    fd = os.open(path, os.O_RDONLY)
    first = os.pread(fd, len(old) + 1, 0)
    subprocess.run(["/usr/bin/aws", "--endpoint-url", os.environ["S3_URL"], "s3", "cp",
                    newf, "s3://%s/%s" % (bucket, key)], check=True,
                   stdout=subprocess.DEVNULL)
    # A session open may see the new version (its HEAD) before the event
    # reached the gateway: wait for both, the new bytes and the event (after
    # which the name no longer leads to the old descriptor's inode).
    end = time.time() + 20
    read_new = False
    while time.time() < end:
        with open(path, "rb") as f:
            read_new = f.read() == new
        if read_new and os.stat(path).st_ino != os.fstat(fd).st_ino:
            break
        time.sleep(0.1)
    if not read_new:
        sys.exit("a new open never read the new bytes")
    named = os.stat(path)
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("1")
    try:
        again = os.pread(fd, len(old) + 1, 0)
        held = os.fstat(fd)
    except OSError as e:
        sys.exit("the old descriptor: %s" % e)
    print("first=%s name=%d descriptor=%d/%s same-inode=%s" % (
        "old" if first == old else "other(%d bytes)" % len(first), named.st_size,
        held.st_size, what(again, old, new), named.st_ino == held.st_ino))


if __name__ == "__main__":
    main()
