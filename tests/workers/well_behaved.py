"""Test worker: the smallest conformant worker. Also timed by the overhead benchmark, so it
imports nothing but the SDK."""

from alk import worker


def main():
    worker.hello()
    worker.ready("trivial", "1.0")
    start = worker.start()
    worker.tool_call("echo", {"text": start.task})
    worker.tool_result("echo", ok=True, output=start.task)
    worker.result(output=start.task, stop_reason="accepted", end_state={"phase": "stopped"})


if __name__ == "__main__":
    main()
