"""Test worker: writes its effect again on every run, resumed or not (no idempotency key)."""

import json
import os

from alk import worker


def main():
    worker.hello()
    worker.ready("naive", "1.0")
    start = worker.start()
    os.makedirs("lab-output", exist_ok=True)
    path = os.path.join("lab-output", "effects.json")
    effects = json.load(open(path)) if os.path.exists(path) else []
    worker.tool_call("write_report", {"order": "742"})
    effects.append({"order": "742", "attempt": start.attempt})
    with open(path, "w") as handle:
        json.dump(effects, handle)
    worker.tool_result("write_report", ok=True, output={"effects": len(effects)})
    worker.result(output="Report for order 742 written", stop_reason="accepted",
                  end_state={"phase": "stopped", "effects": len(effects)})


if __name__ == "__main__":
    main()
