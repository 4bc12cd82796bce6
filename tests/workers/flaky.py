"""Test worker: right on even seeds, wrong on odd ones, so a scenario's repeats disagree.

Deterministic given the seed, so a rerun with the same seeds reproduces each repeat exactly.
"""

import json
import os

from alk import worker


def main():
    worker.hello()
    worker.ready("flaky", "1.0")
    start = worker.start()
    order = "742" if start.seed % 2 == 0 else "999"
    worker.tool_call("write_report", {"order": order, "tenant": "shopping-a"})
    os.makedirs("lab-output", exist_ok=True)
    with open(os.path.join("lab-output", "effects.json"), "w", encoding="utf-8") as handle:
        json.dump([{"order": order, "tenant": "shopping-a"}], handle)
    worker.tool_result("write_report", ok=True)
    worker.result(output=f"Report for order {order}", stop_reason="accepted",
                  end_state={"phase": "stopped", "seed": start.seed})


if __name__ == "__main__":
    main()
