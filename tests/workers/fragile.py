"""Test worker: speaks the protocol by hand, and plays a fragile framework or a careless adapter
as its scenario's input says. The SDK would not let it write the line that breaks the protocol.

- `nominal`: a valid result;
- `raise`: injects the scenario's tool fault, reports it, and stops with the error, as a
  framework that lets a tool's exception end the run does (fault_unrecovered);
- `careless`: writes a line that is not JSON, then exits cleanly without a result: two
  problems of the worker's at once.
"""

import json
import sys


def send(channel, type, payload):
    sys.stdout.write(json.dumps({"channel": channel, "type": type, "payload": payload}) + "\n")
    sys.stdout.flush()


def main():
    hello = json.loads(sys.stdin.readline() or "{}")
    if hello.get("type") != "hello":
        sys.exit(2)
    send("framework", "framework_ready", {"framework": "fragile", "framework_version": "1.0",
                                          "package_paths": ["/opt/fragile"]})
    start = json.loads(sys.stdin.readline() or "{}")
    if start.get("type") != "start":
        return  # abort: the preflight probe
    play = start["scenario"]["input"].get("play", "nominal")
    if play == "careless":
        sys.stdout.write("fragile 1.0 ready\n")
        return
    send("tool", "call", {"name": "write_report", "args": {"order": 742}})
    if play == "raise":
        fault = start["scenario"]["faults"][0]
        send("framework", "fault", {"point": fault["point"], "occurrence": 1,
                                    "error": fault["error"], "retryable": False})
        send("tool", "result", {"name": "write_report", "ok": False, "error": fault["error"]})
        stop = "error:RuntimeError"
    else:
        send("tool", "result", {"name": "write_report", "ok": True})
        stop = "accepted"
    send("agent", "result", {"output": "Report for order 742", "stop_reason": stop,
                             "end_state": {}})


if __name__ == "__main__":
    main()
