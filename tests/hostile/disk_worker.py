"""A hostile worker that goes after the disk: `disk_worker.py ATTACK [MB | FLAG]`.

- `fill MB`: writes MB into its workspace as fast as it can, in files each far under
  `max_file_mb`, or until the disk is full; then talks on stderr and stdout, so that alk has
  to write while the disk is full.
- `grow`: writes a MiB at a time, without end, for `disk_mb` to stop.
- `hold`: while FLAG (a file in the lane's folder) exists, hangs after start: the test kills
  alk with SIGKILL meanwhile, then removes FLAG and resumes the run.
"""

import os
import sys
import time

from alk import worker

ATTACK = sys.argv[1]
MB = 1024 * 1024
CHUNK = b"d" * MB


def fill(size_mb):
    """Up to `size_mb` or the first ENOSPC (the disk is full); then a burst on stderr and a
    line a millisecond on each stream. It waits a moment first, for the repeats started with
    it: together they fill a disk that each alone would not."""
    time.sleep(0.5)
    number = 0
    try:
        while number * 8 < size_mb:
            with open(f"bulk-{number}", "wb") as handle:
                for _ in range(8):
                    handle.write(CHUNK)
            number += 1
    except OSError as exc:
        sys.stderr.write(f"full after {number} files: {exc}\n")
    # At once, more than alk gathers before it writes: its write lands on the full disk.
    for line in range(400):
        sys.stderr.write(f"burst {line} " + "b" * 400 + "\n")
    sys.stderr.flush()
    for line in range(3000):  # about 3 s: long enough for alk to write on the full disk
        sys.stderr.write(f"still here {line} " + "s" * 200 + "\n")
        sys.stderr.flush()
        worker.emit("agent", "note", {"line": line, "text": "n" * 200})
        time.sleep(0.001)


def grow():
    for number in range(1_000_000):
        with open(f"part-{number}", "wb") as handle:
            handle.write(CHUNK)
        time.sleep(0.01)


def main():
    worker.hello()
    worker.ready("hostile", "1.0")
    worker.start()
    if ATTACK == "fill":
        fill(int(sys.argv[2]))
    elif ATTACK == "grow":
        grow()
    elif ATTACK == "hold":
        while os.path.exists(sys.argv[2]):
            time.sleep(0.05)
    worker.result(output="done", stop_reason="accepted", end_state={})


if __name__ == "__main__":
    main()
