"""Test worker: runs cleanly and writes the effect correctly, but answers about the wrong order.

Only the lane's output check can fail it.
"""

import json
import os

from alk import worker


def main():
    worker.hello()
    worker.ready("wrong", "1.0")
    worker.start()
    worker.tool_call("write_report", {"order": "742", "tenant": "shopping-a"})
    os.makedirs("lab-output", exist_ok=True)
    with open(os.path.join("lab-output", "effects.json"), "w", encoding="utf-8") as handle:
        json.dump([{"order": "742", "tenant": "shopping-a"}], handle)
    worker.tool_result("write_report", ok=True)
    worker.result(output="Report for order 999", stop_reason="accepted",
                  end_state={"phase": "stopped"})


if __name__ == "__main__":
    main()
