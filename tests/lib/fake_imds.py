#!/usr/bin/env python3
"""fake_imds.py DIR LIFE_S PORT_FILE — an EC2 instance metadata service
(IMDSv2 only) on 127.0.0.1 for the tests: PUT /latest/api/token gives a
session token; with it, GET .../iam/security-credentials/ names the role
"facetfs-test" and GET .../security-credentials/facetfs-test answers the
credentials in DIR/ak, DIR/sk, DIR/tok (read at each request, so a test
rotates them by rewriting the files), expiring LIFE_S seconds from now.
A GET without the token gets 401. Each credentials answer appends a line
to DIR/served. The port it listens on goes into PORT_FILE. Stop it by its
PID (SIGTERM)."""
import datetime
import http.server
import os
import sys

DIR, LIFE, PORT_FILE = sys.argv[1], int(sys.argv[2]), sys.argv[3]
TOKEN = "fake-imds-session-token"
BASE = "/latest/meta-data/iam/security-credentials/"


def read(name):
    with open(os.path.join(DIR, name)) as f:
        return f.read().strip()


class Handler(http.server.BaseHTTPRequestHandler):
    def send(self, code, body, ctype="text/plain"):
        data = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_PUT(self):
        if self.path == "/latest/api/token":
            self.send(200, TOKEN)
        else:
            self.send(404, "")

    def do_GET(self):
        if self.headers.get("X-aws-ec2-metadata-token") != TOKEN:
            self.send(401, "")
        elif self.path == BASE:
            self.send(200, "facetfs-test")
        elif self.path == BASE + "facetfs-test":
            exp = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=LIFE)
            body = ('{"Code":"Success","Type":"AWS-HMAC","AccessKeyId":"%s",'
                    '"SecretAccessKey":"%s","Token":"%s","Expiration":"%s"}'
                    % (read("ak"), read("sk"), read("tok"), exp.strftime("%Y-%m-%dT%H:%M:%SZ")))
            with open(os.path.join(DIR, "served"), "a") as f:
                f.write(read("ak") + "\n")
            self.send(200, body, "application/json")
        else:
            self.send(404, "")

    def log_message(self, *args):
        pass


srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(PORT_FILE + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
os.rename(PORT_FILE + ".tmp", PORT_FILE)
srv.serve_forever()
