"""Test worker: the framework raises inside its own dispatch code after start.

Expected: a traceback on stderr and a nonzero exit, with no result sent.
"""

import os

from alk import worker


def dispatch(tool):
    # Nested on purpose: the traceback should point into "framework" code, not the entry point.
    raise RuntimeError("framework exploded in dispatch")


def run_step(start):
    worker.emit("agent", "step", {"step": 1, "scenario": start.scenario_id})
    worker.tool_call("lookup_order", {"order": "742"})
    dispatch("lookup_order")


def main():
    worker.hello()
    worker.ready("crasher", "1.0", [os.path.dirname(os.path.abspath(__file__))])
    run_step(worker.start())


if __name__ == "__main__":
    main()
