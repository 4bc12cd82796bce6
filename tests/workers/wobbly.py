"""Test worker: follows its scripted model, but calls the tools in an order that changes from
repeat to repeat, as a framework that runs tool calls concurrently might."""

from alk import worker


def main():
    worker.hello()
    worker.ready("wobbly", "1.0")
    start = worker.start()
    tools = [turn["tool"] for turn in start.script if "tool" in turn]
    if start.repeat % 2 == 0:
        tools.reverse()
    for name in tools:
        # The call's id differs by nature: alk leaves top-level ids out of the event path.
        worker.emit("tool", "call", {"name": name, "args": {}, "call_id": f"c-{start.repeat}"})
        worker.tool_result(name, ok=True)
    worker.result(output="done", stop_reason="accepted", end_state={"phase": "stopped"})


if __name__ == "__main__":
    main()
