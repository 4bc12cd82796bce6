"""Test worker: tests/workers/tinyagents driven by a scripted model, for the explanations alk
gives of a crash, a hang and a script that ran out.

The scenario's `script` holds the model's turns: `{tool, args}` (a tool call), `{final}` (the
answer) or `{error}` (the model raises it). Asked past the script, the model reports it
(`script_exhausted`), then raises, or with `input.past = "answer"` answers "(script
exhausted)". `input.retry_s` makes the framework retry a failing model after that long a sleep;
`input.tool_hangs` makes the worker's own tool never return.
"""

import os
import time

import tinyagents
from alk import worker


def scripted_model(script, past):
    asked = 0

    def model(messages):
        nonlocal asked
        asked += 1
        if asked > len(script):
            worker.script_exhausted(asked, len(script))
            if past == "answer":
                return {"final": "(script exhausted)"}
            raise RuntimeError(f"scripted model exhausted after {len(script)} turns")
        worker.emit("model", "turn", {"index": asked - 1})
        turn = script[asked - 1]
        if "error" in turn:
            raise RuntimeError(turn["error"])
        return turn

    return model


def tools(hangs):
    def lookup_order(order):
        worker.tool_call("lookup_order", {"order": order})
        while hangs:
            time.sleep(600)  # the worker's own code hangs here
        worker.tool_result("lookup_order", ok=True, output={"status": "open"})
        return f"order {order} is open"

    return {"lookup_order": lookup_order}


def main():
    worker.hello()
    worker.ready("tinyagents", "1.0", [os.path.dirname(tinyagents.__file__)])
    start = worker.start()
    agent = tinyagents.Agent(scripted_model(start.script, start.input.get("past", "raise")),
                             tools(start.input.get("tool_hangs", False)),
                             retry_s=start.input.get("retry_s"))
    worker.result(output=agent.run(start.task), stop_reason="accepted",
                  end_state={"phase": "stopped"})


if __name__ == "__main__":
    main()
