"""Test worker: injects the scenario's declared faults, and reports them, only when its input
says so; the other scenario forgets, and must be void (fault_not_fired). It consumes its
scripted turns, all of them unless its input says where to stop."""

from alk import worker


def main():
    worker.hello()
    worker.ready("faulty", "1.0")
    start = worker.start()
    if start.input.get("inject"):
        for fault in start.faults:
            # A scripted model call that raises, as the scenario asks, retried once.
            worker.fault(fault["point"], fault["occurrence"], fault["error"], fault["retryable"])
            worker.emit("model", "error", {"error": fault["error"], "retrying": True})
    turns = start.script[:start.input.get("stop_after", len(start.script))]
    for index, _turn in enumerate(turns):
        worker.emit("model", "turn", {"index": index})  # each scripted turn consumed
    worker.result(output="done", stop_reason="accepted", end_state={"phase": "stopped"})


if __name__ == "__main__":
    main()
