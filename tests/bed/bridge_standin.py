#!/usr/bin/env python3
# STAND-IN for facetfs-bridge, used by tests/bed/bed ONLY while the real
# events/facetfs-bridge is not built. Not part of the product, never counted
# as a test of the bridge (the bed exports BRIDGE_KIND=standin).
#
# Usage: bridge_standin.py PORT BROKERS TOPIC
# Accepts RGW notification POSTs on 127.0.0.1:PORT and produces one Kafka
# message per record, keyed "bucket/key", via kcat.
import json
import subprocess
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT, BROKERS, TOPIC = int(sys.argv[1]), sys.argv[2], sys.argv[3]


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        try:
            doc = json.loads(body)
            for rec in doc.get("Records", []):
                key = rec["s3"]["bucket"]["name"] + "/" + rec["s3"]["object"]["key"]
                msg = json.dumps({"Records": [rec]}, separators=(",", ":"))
                subprocess.run(["kcat", "-P", "-b", BROKERS, "-t", TOPIC, "-k", key],
                               input=msg.encode(), check=True)
        except Exception as e:  # noqa: BLE001 — a stand-in: say it and fail the POST
            print("standin: bad post:", e, flush=True)
            self.send_response(400)
            self.end_headers()
            return
        self.send_response(200)
        self.end_headers()


ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
