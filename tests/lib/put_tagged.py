#!/usr/bin/python3
"""put_tagged.py BUCKET LIST — put each object of LIST with its tags at
creation, in one process: the aws command's own client library (Debian's
awscli), one request per object, instead of one `aws s3api put-object`
(about a second to start) per object.

LIST: one object a line, tab-separated: key, size (zero bytes of it),
content type, user metadata as k=v,k=v ("-" for none), tags as k=v&k=v.
Endpoint and credentials from the bed's environment (S3_URL, AWS_*).
Exits 1 at the first failure, naming the key.
Run it with /usr/bin/python3 (the interpreter awscli is installed for)."""
import os
import sys

from awscli.botocore.session import Session


def main():
    bucket, listing = sys.argv[1:3]
    client = Session().create_client("s3", endpoint_url=os.environ["S3_URL"])
    with open(listing, encoding="utf-8") as f:
        for line in f:
            key, size, ctype, meta, tags = line.rstrip("\n").split("\t")
            args = {"Bucket": bucket, "Key": key, "Body": bytes(int(size)),
                    "ContentType": ctype, "Tagging": tags}
            if meta != "-":
                args["Metadata"] = dict(kv.split("=", 1) for kv in meta.split(","))
            try:
                client.put_object(**args)
            except Exception as e:  # the key and the store's answer
                sys.exit("put_tagged: %s: %s" % (key, e))


if __name__ == "__main__":
    main()
