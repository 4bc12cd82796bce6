"""Test worker: claims success and a verified effect, but never writes the effects file.

Its stop reason, output, tool calls and end state all look right; only the harness's own look at
the workspace can tell, and the worker's `verification` claim must not sway it.
"""

from alk import worker


def main():
    worker.hello()
    worker.ready("claimer", "1.0")
    worker.start()
    worker.tool_call("write_report", {"order": "742", "tenant": "shopping-a"})
    worker.tool_result("write_report", ok=True, output={"written": True})
    worker.result(output="Report for order 742 written to internal://reports",
                  stop_reason="accepted", end_state={"phase": "stopped"},
                  verification={"passed": True, "effects": 1})


if __name__ == "__main__":
    main()
