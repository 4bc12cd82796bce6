"""Test worker for tests/e2e/test_scale.py: it leaves, outside alk, a line for every start.

Its folder is `$SCALE_DIR` (a lane with `filesystem = "workspace"` lets it write there):
- `starts.log` gets one JSON line a start, once the start message came (the probe gets
  none): run id, scenario, repeat, seed, the pid it sees (its PID namespace's) and its
  workspace, so that a test can find its host processes (their cwd) and tell a repeat run
  twice, and the time;
- `version`, when present, holds the framework version it reports (else 1.0);
- `hold`: a scenario whose input has `hold = true` waits while this file exists.

It sleeps its scenario's `sleep_s`, then answers "wrong" when its seed is a multiple of the
scenario's `fail_mod`, else "done".
"""

import json
import os
import time
from pathlib import Path

from alk import worker

HOLD_LIMIT_S = 60  # a held worker that nobody releases still ends


def main():
    folder = Path(os.environ["SCALE_DIR"])
    worker.hello()
    version = folder / "version"
    worker.ready("scale", version.read_text().strip() if version.exists() else "1.0")
    start = worker.start()
    line = json.dumps({"run_id": start.run_id, "scenario": start.scenario_id,
                       "repeat": start.repeat, "seed": start.seed, "pid": os.getpid(),
                       "cwd": os.getcwd(), "at": time.time()})
    # One write of a whole line with O_APPEND: lines of workers at once never interleave.
    with open(folder / "starts.log", "a") as log:
        log.write(line + "\n")
    if start.input.get("hold"):
        until = time.monotonic() + HOLD_LIMIT_S
        while (folder / "hold").exists() and time.monotonic() < until:
            time.sleep(0.02)
    time.sleep(float(start.input.get("sleep_s", 0)))
    fail_mod = int(start.input.get("fail_mod", 0))
    answer = "wrong" if fail_mod and start.seed % fail_mod == 0 else "done"
    worker.tool_call("answer", {})
    worker.tool_result("answer", ok=True, output=answer)
    worker.result(output=answer, stop_reason="accepted", end_state={"phase": "stopped"})


if __name__ == "__main__":
    main()
