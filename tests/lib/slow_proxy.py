#!/usr/bin/env python3
"""slow_proxy.py — a TCP relay in front of the bed's radosgw that can slow
the requests' bodies down, so that a test can act while an upload is
surely in flight (tests/integration/t_wbtrust.sh).

    slow_proxy.py TARGET_HOST:PORT PORT_FILE CONTROL_FILE

Listens on a free port of 127.0.0.1, writes that port to PORT_FILE once it
accepts, and relays every connection to TARGET byte for byte (HTTP is not
parsed: a signed request stays signed). While CONTROL_FILE exists and holds
a number N > 0, each connection sends at most N bytes a second towards the
target (the replies are never slowed): a 1 KiB request waits under a
millisecond, a 256 MiB upload takes as long as the test wants. Without the
file, the relay adds nothing but a copy. Runs until SIGTERM.
"""
import os
import signal
import socket
import sys
import threading
import time

CHUNK = 65536


def rate(control):
    """The bytes a second allowed now; 0: no limit."""
    try:
        with open(control) as f:
            return max(0, int(f.read().strip() or 0))
    except (OSError, ValueError):
        return 0


def pump(src, dst, control):
    """Copy src to dst until either side closes; paced when control says."""
    try:
        while True:
            data = src.recv(CHUNK if control is None else 16384)
            if not data:
                break
            if control is not None:
                r = rate(control)
                if r:
                    time.sleep(len(data) / r)
            dst.sendall(data)
    except OSError:
        pass
    for s in (src, dst):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def serve(client, target, control):
    try:
        up = socket.create_connection(target)
    except OSError:
        client.close()
        return
    for s in (client, up):
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    t = threading.Thread(target=pump, args=(up, client, None), daemon=True)
    t.start()
    pump(client, up, control)
    t.join()
    client.close()
    up.close()


def main():
    host, port = sys.argv[1].rsplit(":", 1)
    target = (host, int(port))
    port_file, control = sys.argv[2], sys.argv[3]
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(128)
    tmp = port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % ls.getsockname()[1])
    os.rename(tmp, port_file)
    while True:
        c, _ = ls.accept()
        threading.Thread(target=serve, args=(c, target, control), daemon=True).start()


if __name__ == "__main__":
    main()
