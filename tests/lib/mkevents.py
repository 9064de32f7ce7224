#!/usr/bin/env python3
"""mkevents.py — synthetic S3 event records shaped like Ceph RGW's (see
shared/events/ceph-put.json), one per line as "KEY<TAB>JSON" for
`kcat -P -K '\\t'`.

  mkevents.py BUCKET PREFIX COUNT [--delete] [--start N] [--meta NAME=V1,V2]
              [--size N]

Keys are PREFIX + zero-padded number. eventTime is now; the sequencer
encodes now (seconds, nanoseconds) the way RGW does, increasing per record.
"""
import argparse, json, sys, time, struct

def seq_of(t_ns):
    sec, ns = divmod(t_ns, 1_000_000_000)
    return struct.pack("<II", sec & 0xffffffff, ns).hex().upper()

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bucket"); ap.add_argument("prefix"); ap.add_argument("count", type=int)
    ap.add_argument("--delete", action="store_true")
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--meta", default="")
    ap.add_argument("--size", type=int, default=100)
    a = ap.parse_args()
    name, vals = (a.meta.split("=", 1) + [""])[:2] if a.meta else ("", "")
    vals = vals.split(",") if vals else []
    t0 = time.time_ns()
    out = sys.stdout
    for i in range(a.count):
        n = a.start + i
        key = "%s%07d" % (a.prefix, n)
        t = t0 + i * 1000
        when = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t // 10**9)) + ".%06dZ" % ((t // 1000) % 10**6)
        meta = [{"key": "x-amz-meta-" + name, "val": vals[n % len(vals)]}] if vals else []
        rec = {"eventVersion": "2.2", "eventSource": "ceph:s3", "awsRegion": "",
               "eventTime": when,
               "eventName": "ObjectRemoved:Delete" if a.delete else "ObjectCreated:Put",
               "userIdentity": {"principalId": "tester"},
               "s3": {"s3SchemaVersion": "1.0", "configurationId": "bench",
                      "bucket": {"name": a.bucket, "arn": "arn:aws:s3:::" + a.bucket},
                      "object": {"key": key, "size": a.size,
                                 "eTag": "%032x" % (n + 1), "versionId": "",
                                 "sequencer": seq_of(t), "metadata": meta, "tags": []}},
               "eventId": "%d.%06d.x" % (t // 10**9, (t // 1000) % 10**6), "opaqueData": ""}
        out.write("%s/%s\t%s\n" % (a.bucket, key, json.dumps({"Records": [rec]}, separators=(",", ":"))))

main()
