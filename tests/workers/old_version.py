"""Test worker: reports a framework version the lane does not support.

alk should abort it after `framework_ready`. It touches the workspace only after a start, so any
file found there proves the harness ran a scenario it should have refused.
"""

import json
import os

from alk import worker


def main():
    worker.hello()
    worker.ready("oldie", "0.9.1")
    start = worker.start()  # exits 0 when alk aborts, which is what a correct harness does
    os.makedirs("lab-output", exist_ok=True)
    with open(os.path.join("lab-output", "effects.json"), "w", encoding="utf-8") as handle:
        json.dump([{"order": "742", "tenant": "shopping-a"}], handle)
    worker.tool_call("write_report", {"order": "742"})
    worker.tool_result("write_report", ok=True)
    worker.result(output=f"Report for order 742 ({start.scenario_id})", stop_reason="accepted",
                  end_state={"phase": "stopped"})


if __name__ == "__main__":
    main()
