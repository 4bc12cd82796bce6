"""Test worker: a chatty framework that prints to stdout after hello, with `print` and straight to
file descriptor 1 (as a C library would). The SDK sends both to stderr, so the run must pass."""

import json
import os

from alk import worker


def main():
    worker.hello()
    print("noisy: loading plugins")
    os.write(1, b"noisy: native extension says hi\n")
    worker.ready("noisy", "1.0")
    worker.start()
    print("noisy: thinking about order 742")
    worker.tool_call("write_report", {"order": "742", "tenant": "shopping-a"})
    os.makedirs("lab-output", exist_ok=True)
    with open(os.path.join("lab-output", "effects.json"), "w", encoding="utf-8") as handle:
        json.dump([{"order": "742", "tenant": "shopping-a"}], handle)
    worker.tool_result("write_report", ok=True)
    print("noisy: done")
    worker.result(output="Report for order 742", stop_reason="accepted",
                  end_state={"phase": "stopped"})


if __name__ == "__main__":
    main()
