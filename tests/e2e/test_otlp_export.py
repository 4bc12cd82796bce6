"""`alk export` of a real run, read back from a real OTLP receiver: Arize Phoenix (from PyPI,
`make .venvs/phoenix/.installed`), which takes OTLP/HTTP protobuf and gives the spans back
through its REST API. The run is the openai package's client against the gateway: a pass, a
429 it recovers from, and a kill at the effect with a resume that writes it again."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from datetime import datetime
from pathlib import Path

import pytest

from tests.helpers.gateway_runs import (
    CRASH_AFTER_EFFECT,
    EXPECT,
    SCRIPT,
    lane_file,
    needs_offline,
    run,
)

ROOT = Path(__file__).resolve().parents[2]
PHOENIX = ROOT / ".venvs" / "phoenix" / "bin" / "python"
# How often, and at most how many times, the test looks at the receiver.
POLL_S, POLLS = 0.5, 1200
SCENARIOS = f"""
[[scenarios]]
id = "chat"
task = "Prepare the report for order 742"
{SCRIPT}
{EXPECT}

[[scenarios]]
id = "wire-429"
task = "Prepare the report for order 742"
{SCRIPT}
wire_faults = [ {{ call = 1, kind = "http_429", retry_after_s = 0.2 }} ]
{EXPECT}

{CRASH_AFTER_EFFECT}"""

pytestmark = [needs_offline, pytest.mark.skipif(
    not PHOENIX.exists(), reason="no Phoenix here: `make .venvs/phoenix/.installed`")]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory):
    """A Phoenix server of the test's own, on free ports, storing in a fresh folder."""
    home = tmp_path_factory.mktemp("phoenix")
    port = _free_port()
    env = {**os.environ, "PHOENIX_WORKING_DIR": str(home), "PHOENIX_PORT": str(port),
           "PHOENIX_GRPC_PORT": str(_free_port()), "PHOENIX_HOST": "127.0.0.1",
           "PHOENIX_TELEMETRY_ENABLED": "false"}
    log = (home / "server.log").open("wb")
    server = subprocess.Popen([str(PHOENIX), "-m", "phoenix.server.main", "serve"], env=env,
                              stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        # Up when it answers its health check; a server that died says why. The polls are
        # counted, so that one that never comes up ends the test rather than hangs it.
        for _ in range(POLLS):
            assert server.poll() is None, (home / "server.log").read_text()[-2000:]
            if _healthy(base):
                break
            time.sleep(POLL_S)
        else:
            pytest.fail(f"Phoenix never answered /healthz in {POLLS} polls: "
                        + (home / "server.log").read_text()[-2000:])
        yield base
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


def _healthy(base: str) -> bool:
    try:
        with urllib.request.urlopen(base + "/healthz", timeout=5) as answer:
            return answer.status == 200
    except OSError:
        return False


def _spans(base: str, expected: int) -> list[dict]:
    """Every span of the default project, once the receiver has stored `expected` of them (it
    takes spans in and stores them from a queue), or what it holds after POLLS looks."""
    for _ in range(POLLS):
        spans: list[dict] = []
        cursor = None
        while True:
            url = f"{base}/v1/projects/default/spans?limit=1000" + (
                f"&cursor={cursor}" if cursor else "")
            with urllib.request.urlopen(url, timeout=30) as answer:
                page = json.load(answer)
            spans += page["data"]
            cursor = page.get("next_cursor")
            if not cursor:
                break
        if len(spans) >= expected:
            break
        time.sleep(POLL_S)
    return spans


def _epoch(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def test_an_export_of_a_real_run_is_read_back_from_a_real_receiver(tmp_path, phoenix):
    document = run(tmp_path, lane_file(tmp_path, SCENARIOS), "--repeats", "2")
    out = tmp_path / "traces.jsonl"
    done = subprocess.run([sys.executable, "-m", "alk", "export", document["run_id"],
                           "--otlp", str(out), "--otlp-endpoint", phoenix],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    in_file = [span for line in lines for resource in line["resourceSpans"]
               for scope in resource["scopeSpans"] for span in scope["spans"]]
    spans = _spans(phoenix, len(in_file))
    assert len(spans) == len(in_file)
    # The file and the receiver hold the same spans, by the ids OTLP/JSON writes as hex.
    assert {s["context"]["span_id"] for s in spans} == {s["spanId"] for s in in_file}
    assert all(len(s["traceId"]) == 32 and len(s["spanId"]) == 16 for s in in_file)

    repeats = {(s["id"], r["repeat"]): r for s in document["scenarios"] for r in s["repeats"]}
    traces: dict[str, list[dict]] = {}
    for span in spans:
        traces.setdefault(span["context"]["trace_id"], []).append(span)
    assert len(traces) == len(repeats) == 6  # one trace a repeat
    for members in traces.values():
        [root] = [s for s in members if s["parent_id"] is None]
        attrs = root["attributes"]
        entry = repeats[(attrs["alk.scenario"], attrs["alk.repeat"])]
        assert root["name"] == "invoke_agent gateway"
        assert attrs["gen_ai.operation.name"] == "invoke_agent"
        assert (attrs["alk.outcome"], attrs["alk.cause"]) == (entry["outcome"], entry["cause"])
        assert root["status_code"] == ("OK" if entry["outcome"] == "pass" else "ERROR")
        assert attrs["alk.time_anchor"] == "spawn"
        started, finished = _epoch(document["started_at"]), _epoch(document["finished_at"])
        assert started - 1 <= _epoch(root["start_time"]) <= finished + 1
        ids = {s["context"]["span_id"]: s for s in members}
        attempts = [s for s in members if s["name"] == "alk.attempt"]
        assert len(attempts) == entry["attempts"]
        assert all(s["parent_id"] == root["context"]["span_id"] for s in attempts)
        chats = [s for s in members if s["attributes"].get("gen_ai.operation.name") == "chat"]
        tools = [s for s in members
                 if s["attributes"].get("gen_ai.operation.name") == "execute_tool"]
        assert len(chats) == entry["model"]["calls"]
        assert sum(s["attributes"].get("gen_ai.usage.input_tokens", 0) for s in chats) == \
            entry["model"]["prompt_tokens"]
        for span in chats + tools:  # each under an attempt, within the repeat's time
            assert ids[span["parent_id"]]["name"] == "alk.attempt"
            assert _epoch(root["start_time"]) <= _epoch(span["start_time"])
            assert _epoch(span["end_time"]) <= _epoch(root["end_time"])
        assert all(s["attributes"]["gen_ai.provider.name"] == "openai" for s in chats)
        assert [s["attributes"]["gen_ai.tool.name"] for s in
                sorted(tools, key=lambda s: s["start_time"])][:2] == ["lookup_order",
                                                                    "write_report"]
        if attrs["alk.scenario"] == "wire-429":
            [refused] = [s for s in chats if s["attributes"].get("alk.fault")]
            assert refused["attributes"]["http.response.status_code"] == 429
            assert refused["attributes"]["error.type"] == "http_429"
            assert refused["status_code"] == "ERROR"
        if attrs["alk.scenario"] == "crash-after-effect":
            assert (entry["outcome"], entry["cause"]) == ("framework_runtime",
                                                          "effect_repeated")
            first = min(attempts, key=lambda s: s["start_time"])
            assert {"alk.kill_at", "alk.kill"} <= {e["name"] for e in first["events"]}
            assert [s["attributes"]["gen_ai.tool.name"] for s in tools].count(
                "write_report") == 2  # the effect, and again after the resume
