"""What alk's model gateway costs: per repeat, and per model call, side by side in one run.

Per repeat. The trivial worker (tests/workers/well_behaved.py, which never calls the model) in
alk's strongest isolation with no network, `alk run` of REPEATS repeats with and without the
lane's `[model]`, alternated over the rounds. The difference is the gateway's own cost a repeat:
its session, the listener alk's init makes inside the worker's network namespace and hands over,
serving it, and closing it.

Per call. A worker that makes CALLS chat completions over one keep-alive connection with the
standard library's http.client, timing each (tests/workers/model_calls.py), three ways:
- bare: the same worker as a plain subprocess with no isolation, against a plain aiohttp server
  answering the same bodies on loopback: what a user without alk would run (a fake OpenAI
  server of their own);
- host: through `alk run` with network = "host", the gateway on alk's own loopback;
- none: through `alk run` with network = "none", the listener inside the worker's namespace.
Medians of every call but each connection's first.

    python benchmarks/gateway.py [--rounds 3] [--repeats 40] [--calls 200]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from aiohttp import web

from alk import api
from alk.gateway.wire.bodies import response_body
from alk.gateway.wire.reply import Reply, estimate_usage
from alk.gateway.wire.formats import read_request
from alk.lane.load import load_lane
from alk.result.document import RunDocument
from alk.runner.isolation import Network, detect

ROOT = Path(__file__).resolve().parents[1]
TRIVIAL = ROOT / "tests" / "workers" / "well_behaved.py"
CALLER = ROOT / "tests" / "workers" / "model_calls.py"


def lane(folder: Path, name: str, worker: Path, network: str, model: bool,
         extra: str = "") -> Path:
    path = folder / f"{name}.toml"
    path.write_text(f"""name = "{name}"
framework = "{'model-calls' if worker == CALLER else 'trivial'}"
version = ">=1"
command = ["{{python}}", "{worker}"]
network = "{network}"
timeout_s = 60
{'[model]' if model else ''}
{'mode = "script"' if model else ''}

[[scenarios]]
id = "s"
task = "Prepare the report for order 742"
{extra}
""")
    return path


def timed_run(path: Path, repeats: int, out: Path) -> tuple[float, RunDocument]:
    began = time.perf_counter()
    result = api.run_lane(load_lane(path), api.RunOptions(repeats=repeats),
                          api.RunSetup(out_dir=out))
    return time.perf_counter() - began, result.document


def call_times(document: RunDocument, out: Path) -> list[int]:
    """The worker's own call times: its output, as the transcript's result event holds it."""
    times: list[int] = []
    for repeat in document.scenarios[0].repeats:
        assert repeat.outcome == "pass", repeat.detail
        for line in (out / repeat.transcript).read_text().splitlines():
            event = json.loads(line)
            if event["channel"] == "agent" and event["type"] == "result":
                times += json.loads(event["payload"]["output"])[1:]
    return times


class PlainServer:
    """A fake OpenAI server of the kind a user would write: aiohttp, one canned answer."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        self.port = sock.getsockname()[1]
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        asyncio.run_coroutine_threadsafe(self._start(sock), self.loop).result(5)

    async def _start(self, sock: socket.socket) -> None:
        await self.loop.create_server(web.Server(self._answer), sock=sock)

    async def _answer(self, request: web.BaseRequest) -> web.Response:
        body = await request.read()
        asked = read_request("chat", body)
        reply = Reply(text="done")
        return web.Response(body=response_body(
            "chat", reply, model="alk-script", call=1, usage=estimate_usage(asked, reply),
            created=1), content_type="application/json")


def bare_calls(server: PlainServer, calls: int, sdk: Path) -> list[int]:
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(sdk),
           "OPENAI_BASE_URL": f"http://127.0.0.1:{server.port}/v1", "OPENAI_API_KEY": "k"}
    start = {"type": "start", "run_id": "bare", "scenario": {"id": "s", "task": "t",
                                                             "input": {"calls": calls}},
             "repeat": 1, "seed": 1}
    lines = json.dumps({"type": "hello", "protocol": 1, "lane": "bare"}) + "\n" + \
        json.dumps(start) + "\n"
    done = subprocess.run([sys.executable, str(CALLER)], input=lines, capture_output=True,
                          text=True, env=env, timeout=120)
    for line in done.stdout.splitlines():
        event = json.loads(line)
        if event.get("channel") == "agent" and event.get("type") == "result":
            return json.loads(event["payload"]["output"])[1:]
    raise RuntimeError(f"the bare worker sent no result: {done.stderr[-500:]}")


def sdk_folder(root: Path) -> Path:
    package = root / "sdk" / "alk"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "worker.py").write_text((ROOT / "src" / "alk" / "worker.py").read_text())
    return package.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=40)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    if Network.NONE not in detect().networks:
        print("no network namespaces here: nothing to measure")
        return 0
    with tempfile.TemporaryDirectory(prefix="alk-bench-") as scratch:
        folder = Path(scratch)
        os.chdir(folder)
        plain = lane(folder, "plain", TRIVIAL, "none", model=False)
        served = lane(folder, "served", TRIVIAL, "none", model=True)
        per_repeat: dict[str, list[float]] = {"without [model]": [], "with [model]": []}
        calls = f"input = {{ calls = {args.calls} }}"
        host = lane(folder, "host", CALLER, "host", model=True, extra=calls)
        none = lane(folder, "none", CALLER, "none", model=True, extra=calls)
        per_call: dict[str, list[int]] = {"bare (plain server, no isolation)": [],
                                          "alk, network host": [], "alk, network none": []}
        server = PlainServer()
        sdk = sdk_folder(folder)
        for _ in range(args.rounds):
            for key, path in (("without [model]", plain), ("with [model]", served)):
                seconds, _ = timed_run(path, args.repeats, folder)
                per_repeat[key].append(seconds / args.repeats)
            per_call["bare (plain server, no isolation)"] += bare_calls(server, args.calls, sdk)
            per_call["alk, network host"] += call_times(timed_run(host, 1, folder)[1], folder)
            per_call["alk, network none"] += call_times(timed_run(none, 1, folder)[1], folder)
    print(f"per repeat, trivial worker, network none, {args.rounds} rounds × "
          f"{args.repeats} repeats (median of rounds)")
    base = statistics.median(per_repeat["without [model]"])
    for key, values in per_repeat.items():
        median = statistics.median(values)
        print(f"  {key:<18} {median * 1000:7.1f} ms   {median / base:5.2f}×")
    print(f"  the gateway's cost a repeat: {(statistics.median(per_repeat['with [model]']) - base) * 1000:+.1f} ms")
    print(f"per model call, {args.calls} calls a connection (median µs, first call left out)")
    bare = statistics.median(per_call["bare (plain server, no isolation)"])
    for key, values in per_call.items():
        median = statistics.median(values)
        print(f"  {key:<36} {median:7.0f} µs   {median / bare:5.2f}×")
    return 0


if __name__ == "__main__":
    sys.exit(main())
