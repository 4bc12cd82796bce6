"""Hostile workers of alk's model gateway: THREAT in argv[1].

Standard library and alk's SDK only. Each one attacks through what the gateway serves: it
asks for a scenario's model before the version gate, makes the upstream refuse it, looks for
alk's own key in what comes back, or claims turns it was never served.
"""

import base64
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
    if THREAT == "skip_turns":
        # Served the first turn, then crashed by the scenario's kill_at; resumed, it claims a
        # second turn it never got, to skip to the script's last one.
        if not start.resume:
            call(ask("go"))
            worker.tool_call("step", {})
            time.sleep(30)  # the kill_at SIGKILL ends it here
        turns = [{"role": "user", "content": "go"}, {"role": "assistant", "content": "t1"},
                 {"role": "assistant", "content": "t2"}]
        call({"model": "alk-script", "messages": turns})
        worker.result(output="done", stop_reason="accepted", end_state={})
        return
    if THREAT == "refused_first":
        # It knows it will fail, so it first sends what the upstream refuses (content it will
        # not serve, a body it cannot take): were that alk's proof of a failing provider, the
        # failure would be void.
        for text in ("forbidden", "poison"):
            status, body = call(ask(text))
            worker.emit("agent", "refused", {"status": status})
        worker.result(output="wrong", stop_reason="accepted", end_state={})
        return
    if THREAT == "harvest_key":
        # An upstream whose errors quote the request's headers: anything like a bearer token
        # in what came back is stored reversed, encoded, in every place the worker can write.
        found = []
        for stream in (False, True):
            status, body = call(ask("echo", stream=stream))
            found += re.findall(r"Bearer ([A-Za-z0-9_\-]{16,})", body)
        for token in found:
            forms = [token[::-1], base64.b64encode(token.encode()).decode(),
                     token.encode().hex()]
            for form in forms:
                print(form, file=sys.stderr, flush=True)
                worker.emit("agent", "harvest", {"form": form})
            os.makedirs("lab-output", exist_ok=True)
            with open("lab-output/harvest.txt", "a") as handle:
                handle.write(" ".join(forms) + "\n")
        worker.result(output=" ".join(t[::-1] for t in found) or "done",
                      stop_reason="accepted", end_state={"found": len(found)})
        return
    worker.result(output=f"unknown threat {THREAT}", stop_reason="accepted", end_state={})


if __name__ == "__main__":
    main()
