"""A worker that attacks alk's own memory: `memory_worker.py ATTACK [SIZE]`, one class each.

Every attack is made by a worker that then answers wrongly: were alk to fall over or void the
repeat, the attack would be a way to hide a failure. Each one first makes one ordinary model
call, and one more after its attack: the gateway must still answer both.

- stalled_heads: many connections, each sending a request head of about 1 MiB (128 header
  fields of 8 KB) that never ends, and as many more that send nothing at all;
- object_body: valid requests of 4 MiB holding 1.39 million empty objects;
- held_bodies: 16 requests at once of 4 MiB each, all sent but their last byte;
- object_lines: 1 MiB protocol lines of 345,000 empty objects;
- tool_names: SIZE tool calls, each of a distinct name with a result (a long run's report).
"""

import json
import os
import socket
import sys
import time
from urllib.parse import urlsplit

from alk import worker

ATTACK = sys.argv[1]
SIZE = int(sys.argv[2]) if len(sys.argv) > 2 else 0
MB = 1024 * 1024
HOLD_S = 3.0  # how long an attack's connections stay open, so that the workers' overlap


def address(start):
    url = urlsplit(start.model["base_url"])
    return url.hostname, url.port


def head(start, length, extra=b""):
    host, port = address(start)
    return (f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}:{port}\r\n"
            f"Authorization: Bearer {start.model['api_key']}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {length}\r\n").encode() \
        + extra + b"\r\n"


def ordinary(start):
    return json.dumps({"model": "m", "messages": [{"role": "user", "content": start.task}]})


def status(sock):
    """The status of the answer on `sock`, or 0 if there was none."""
    try:
        sock.settimeout(20)
        line = sock.makefile("rb").readline()
        return int(line.split()[1]) if line.startswith(b"HTTP/") else 0
    except (OSError, ValueError, IndexError):
        return 0


def call(start, body):
    """One request on its own connection: the answer's status, 0 if it was cut."""
    try:
        with socket.create_connection(address(start), timeout=20) as sock:
            sock.sendall(head(start, len(body)) + body)
            return status(sock)
    except OSError:
        return 0


def stalled_heads(start):
    fields = b"".join(b"X-Pad-%d: %s\r\n" % (i, b"a" * 8000) for i in range(127))
    partial = head(start, 2).rstrip(b"\r\n") + b"\r\n" + fields  # never ends
    opened = []
    for index in range(SIZE or 100):
        try:
            sock = socket.create_connection(address(start), timeout=5)
            opened.append(sock)
            sock.sendall(partial)
        except OSError:
            pass
    for _ in range(SIZE or 100):
        try:  # a connection that sends nothing at all
            opened.append(socket.create_connection(address(start), timeout=5))
        except OSError:
            pass
    time.sleep(HOLD_S)
    return opened


def object_body(start):
    body = ordinary(start)[:-1] + ', "metadata": [' + "{}," * 1_390_000 + "{}]}"
    return [call(start, body.encode()) for _ in range(SIZE or 2)]


def held_bodies(start):
    body = json.dumps({"model": "m", "messages": [
        {"role": "user", "content": "x" * (4 * MB - 100)}]}).encode()
    opened = []
    for _ in range(16):
        try:
            sock = socket.create_connection(address(start), timeout=20)
            sock.sendall(head(start, len(body)) + body[:-1])
            opened.append(sock)
        except OSError:
            pass
    time.sleep(HOLD_S)
    for sock in opened:
        try:
            sock.sendall(body[-1:])
        except OSError:
            pass
    statuses = [status(sock) for sock in opened]
    for sock in opened:
        sock.close()
    return statuses


def object_lines(start):
    line = '{"channel":"agent","type":"noise","payload":{"p":[' + "{}," * 345_000 + "{}]}}\n"
    stream = worker._worker()._writer
    for _ in range(SIZE or 16):
        stream.write(line)
    stream.flush()


def tool_names(start):
    for index in range(SIZE or 1000):
        name = f"{start.repeat:03d}-{index:05d}-" + os.urandom(40).hex()
        worker.tool_call(name, {"index": index})
        worker.tool_result(name, ok=index % 3 != 0, output="r" * 100)


def main():
    worker.hello()
    worker.ready("memory", "1.0")
    start = worker.start()
    before = call(start, ordinary(start).encode()) if start.model else None
    kept = globals()[ATTACK](start) or []
    for sock in kept:
        if isinstance(sock, socket.socket):
            sock.close()
    time.sleep(0.2 if kept else 0)  # the gateway sees them closed before the next call
    after = call(start, ordinary(start).encode()) if start.model else None
    worker.result(output="wrong", stop_reason="accepted",
                  end_state={"before": before, "after": after,
                                                          "attack": len(kept)})


if __name__ == "__main__":
    main()
