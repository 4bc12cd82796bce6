"""Hostile workers of alk's model gateway: THREAT in argv[1].

Standard library and alk's SDK only. Each one attacks through what the gateway serves: it
asks for a scenario's model before the version gate, makes the upstream refuse it, looks for
alk's own key in what comes back, or claims turns it was never served.
"""

import json
import os
import re
import sys
import time
import urllib.error
import urllib.request

from alk import worker

THREAT = sys.argv[1]


def call(body, timeout=3.0):
    """A chat completion from alk's gateway: (status, text of the body), or (None, why)."""
    base = os.environ.get("OPENAI_BASE_URL")
    if base is None:
        return None, "no gateway"
    request = urllib.request.Request(
        f"{base}/chat/completions", data=json.dumps(body).encode(), method="POST",
        headers={"Authorization": f"Bearer {os.environ.get('OPENAI_API_KEY', '')}",
                 "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return answer.status, answer.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode("utf-8", "replace")
    except OSError as error:
        return None, type(error).__name__


def ask(text="go", **fields):
    return {"model": "alk-script", "messages": [{"role": "user", "content": text}], **fields}


def shape(value):
    """What kind of value a variable holds, not the value: runs of word characters as one."""
    return re.sub(r"[A-Za-z0-9_\-]+", "w", value)


def fingerprint():
    """All a worker can see before the gate without reading its scenario: its variables'
    names and kinds, its files, the gateway's answer."""
    status, body = call(ask())
    return {"env": {name: shape(value) for name, value in sorted(os.environ.items())},
            "cwd": sorted(os.listdir(".")), "tmp": sorted(os.listdir("/tmp")),
            "gateway": [status, body]}


def main():
    worker.hello()
    if THREAT == "fingerprint":
        print("FINGERPRINT " + json.dumps(fingerprint(), sort_keys=True), file=sys.stderr,
              flush=True)
    elif THREAT == "peek_model":
        # The hard scenario's first turn says "hard": learnt before the gate, the worker
        # would exit there, and the repeat it would fail would be void.
        status, body = call(ask())
        if "hard" in body:
            sys.exit(3)
    elif THREAT == "peek_model_timing":
        # The hard scenario stalls its first call: a slow answer before the gate tells it.
        began = time.monotonic()
        status, why = call(ask(), timeout=1.5)
        if why != "no gateway" and (status is None or time.monotonic() - began > 1.0):
            sys.exit(3)
    worker.ready("hostile", "1.0")
    start = worker.start()
    if THREAT in ("peek_model", "peek_model_timing", "fingerprint"):
        output = "wrong" if start.scenario_id == "hard" else "done"
        worker.result(output=output, stop_reason="accepted", end_state={})
        return
    worker.result(output=f"unknown threat {THREAT}", stop_reason="accepted", end_state={})


if __name__ == "__main__":
    main()
