"""What the tests of alk's model gateway through real processes share: a lane of scenarios for
the worker that is nothing but a provider's client (tests/workers/provider_client.py), run with
`python -m alk run`, its result and each repeat's model calls as the harness recorded them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from alk.runner.isolation import Network, detect

ROOT = Path(__file__).resolve().parents[2]
WORKER = ROOT / "tests" / "workers" / "provider_client.py"
SCRIPT = """script = [ { tool = "lookup_order", args = { order = "742" } },
           { tool = "write_report", args = { order = "742" } },
           { text = "Report for order 742 written" } ]"""
EXPECT = """[scenarios.expect]
stop_reason = "accepted"
files = [ { path = "lab-output/effects.json", json_length = 1 } ]"""


# A kill at the effect (write_report's result), and the resume that must not do it again.
CRASH_AFTER_EFFECT = f"""
[[scenarios]]
id = "crash-after-effect"
task = "Prepare the report for order 742"
{SCRIPT}
kill_at = {{ channel = "tool", type = "result", name = "write_report" }}
{EXPECT}
"""
# The lab's two tools as alk serves them over MCP (docs/tools.md).
TOOLS = """
[[tools]]
name = "lookup_order"
description = "Look up an order."
input_schema = { type = "object", properties = { order = { type = "string" } } }
result = { order = "{order}", status = "open" }

[[tools]]
name = "write_report"
description = "Write the order's report (the side effect)."
input_schema = { type = "object", properties = { order = { type = "string" } } }
effect = "lab-output/effects.json"
"""


def lane_file(tmp_path: Path, scenarios: str, network: str = "none",
              filesystem: str = "sandbox", worker: Path = WORKER,
              framework: str = "openai-client") -> Path:
    path = tmp_path / "gateway.toml"
    path.write_text(f"""name = "gateway"
framework = "{framework}"
version = ">=1"
command = ["{{python}}", "{worker}"]
network = "{network}"
filesystem = "{filesystem}"
timeout_s = 20

[model]
mode = "script"
{scenarios}""")
    return path


def run(tmp_path: Path, lane: Path, *args: str) -> dict:
    # A guard against a hang, not a speed check: the 51 repeats of the fault test take about a
    # minute alone and past five on a machine loaded with other work.
    done = subprocess.run([sys.executable, "-m", "alk", "run", "--lane", str(lane), "-q",
                           *args], cwd=tmp_path, capture_output=True, text=True, timeout=1200,
                          env={**os.environ, "COLUMNS": "120"})
    assert done.returncode in (0, 1, 3), done.stderr
    [result] = sorted((tmp_path / "reports").glob("*/result.json"))[-1:]
    return json.loads(result.read_text())


def model_calls(tmp_path: Path, repeat: dict) -> list[dict]:
    lines = (tmp_path / repeat["transcript"]).read_text().splitlines()
    events = [json.loads(line) for line in lines]
    return [e["payload"] for e in events
            if e["source"] == "harness" and e["channel"] == "model" and e["type"] == "call"]


def scenario(document: dict, sid: str) -> dict:
    return next(s for s in document["scenarios"] if s["id"] == sid)


needs_offline = pytest.mark.skipif(Network.NONE not in detect().networks,
                                   reason="no network namespaces on this machine")
