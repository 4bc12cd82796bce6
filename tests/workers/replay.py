"""Test worker: replays given bytes on its protocol stream and stderr (tests/runner/test_fuzz.py).

    replay.py SCRIPT

SCRIPT is a JSON file; every chunk in it is base64, written exactly as given (newlines
included, or not):

- `pre`: stdout chunks written right after hello, before the SDK's framework_ready;
- `ready`: whether to send the SDK's framework_ready (with `package_paths`) and wait for start
  (an abort does not stop it: it writes the rest anyway, as a worker that ignores abort would);
- `body`: ["out" or "err", chunk] pairs, written in order;
- `file`: the bytes of `out.json` in the workspace, or null;
- `exit`: the exit code.
"""

import base64
import json
import os
import sys

from alk import worker


def write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def main():
    with open(sys.argv[1], encoding="ascii") as handle:
        script = json.load(handle)
    worker.hello()
    # The protocol stream itself, past the SDK's line discipline: raw bytes go to its fd.
    protocol = worker._worker()._writer
    protocol.flush()
    out = protocol.fileno()
    for chunk in script["pre"]:
        write_all(out, base64.b64decode(chunk))
    if script["ready"]:
        worker.ready("fuzz", "1.0", script["package_paths"])
        try:
            worker.start()
        except SystemExit:
            pass
    if script["file"] is not None:
        with open("out.json", "wb") as handle:
            handle.write(base64.b64decode(script["file"]))
    for stream, chunk in script["body"]:
        write_all(out if stream == "out" else 2, base64.b64decode(chunk))
    sys.stderr.flush()
    os._exit(script["exit"])


if __name__ == "__main__":
    main()
