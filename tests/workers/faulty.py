"""Test worker: injects the scenario's declared faults, and reports them, only when its input
says so; the other scenario forgets, and must be void (fault_not_fired)."""

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
    worker.emit("model", "turn", {"turns_scripted": len(start.script)})
    worker.result(output="done", stop_reason="accepted", end_state={"phase": "stopped"})


if __name__ == "__main__":
    main()
