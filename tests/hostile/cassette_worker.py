"""A worker that attacks the cassette alk records of its model calls: `cassette_worker.py leak`
puts the lane's declared secret (HOSTILE_TOKEN) in every part of its requests, both APIs,
streamed or not; `cassette_worker.py flood CALLS MIB` sends CALLS requests of MIB MiB each, to
make the recording larger than replay loads. It talks to alk's gateway over plain HTTP (no
framework), and ends with output "done" whatever the gateway answered, so that the recorded
run and its replay end alike: what they served is in the transcript.
"""

import json
import os
import sys
import urllib.error
import urllib.request

from alk import worker

SECRET = os.environ.get("HOSTILE_TOKEN", "")


def call(path, request):
    """POSTs one request to the gateway; its status."""
    sent = urllib.request.Request(
        os.environ["OPENAI_BASE_URL"].rstrip("/") + "/" + path,
        data=json.dumps(request).encode(), method="POST",
        headers={"Authorization": f"Bearer {os.environ['OPENAI_API_KEY']}",
                 "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(sent, timeout=60) as answer:
            answer.read()
            return answer.status
    except urllib.error.HTTPError as error:
        error.read()
        return error.code


def leaked_chat(stream):
    """A chat request with the secret in each field a framework fills, and in a key."""
    return {"model": "gpt-" + SECRET, "stream": stream, SECRET: {"nested": [SECRET]},
            "messages": [
                {"role": "system", "content": f"The token is {SECRET}."},
                {"role": "user", "name": SECRET, "content": [
                    {"type": "text", "text": "use " + SECRET},
                    {"type": "text", "text": json.dumps({"quoted": SECRET})}]},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {
                        "name": "tool_" + SECRET,
                        "arguments": json.dumps({"token": SECRET, SECRET: 1})}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": SECRET * 3}],
            "tools": [{"type": "function", "function": {
                "name": "lookup", "description": f"takes {SECRET}",
                "parameters": {"type": "object", "properties": {SECRET: {"type": "string"}}}}}],
            "stop": [SECRET], "logit_bias": {SECRET: 1}}


def leaked_responses(stream):
    return {"model": "m", "stream": stream, "instructions": SECRET, "input": [
        {"role": "user", "content": [{"type": "input_text", "text": SECRET}]},
        {"type": "function_call", "id": "fc_1", "call_id": "call_9", "name": SECRET,
         "arguments": json.dumps([SECRET])},
        {"type": "function_call_output", "call_id": "call_9", "output": SECRET}]}


def main():
    worker.hello()
    worker.ready("cassette-attack", "1.0")
    worker.start()
    if sys.argv[1] == "leak":
        statuses = [call("chat/completions", leaked_chat(False)),
                    call("chat/completions", leaked_chat(True)),
                    call("responses", leaked_responses(False)),
                    call("responses", leaked_responses(True))]
    else:
        calls, size = int(sys.argv[2]), int(float(sys.argv[3]) * 1024 * 1024)
        statuses = [call("chat/completions", {"model": "m", "messages": [
            {"role": "user", "content": f"{number:04d}" + "x" * size}]})
            for number in range(calls)]
    worker.emit("agent", "statuses", {"statuses": statuses})
    worker.result(output="done", stop_reason="accepted")


main()
