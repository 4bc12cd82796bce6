"""Test worker for the gateway benchmark: `calls` chat completions (the scenario's input) over
one keep-alive connection with the standard library's http.client, each timed; the result's
output is the list of times in microseconds. Imports nothing but the SDK and the stdlib."""

import http.client
import json
import os
import time
from urllib.parse import urlsplit

from alk import worker

worker.hello()
worker.ready("model-calls", "1.0")
start = worker.start()
url = urlsplit(os.environ["OPENAI_BASE_URL"])
connection = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
body = json.dumps({"model": "alk-script", "messages": [{"role": "user", "content": start.task}]})
headers = {"Authorization": f"Bearer {os.environ['OPENAI_API_KEY']}",
           "Content-Type": "application/json"}
times = []
for _ in range(start.input.get("calls", 100)):
    began = time.perf_counter()
    connection.request("POST", f"{url.path}/chat/completions", body, headers)
    answer = connection.getresponse()
    answer.read()
    times.append(round((time.perf_counter() - began) * 1e6))
worker.result(output=json.dumps(times), stop_reason="accepted", end_state={"phase": "stopped"})
