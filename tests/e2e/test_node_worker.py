"""Node workers through alk's real command line: the SDK alk hands them (`alk-worker` on
NODE_PATH, inside the sandbox), the TypeScript worker of the authors' guide
(workers/node/fetch_loop.ts) under alk's default limits, and `alk check-worker` speaking the
Node SDK's calls."""

from __future__ import annotations

import json
import shutil

import pytest

from helpers.gateway_lanes import NODE, ROOT

SYSTEM_NODE = shutil.which("node")
needs_node = pytest.mark.skipif(SYSTEM_NODE is None, reason="no node on PATH")
needs_node24 = pytest.mark.skipif(not NODE.exists(), reason=f"no Node 24 in "
                                  f"{NODE.relative_to(ROOT)}: make .tools/node/.installed")

TINY_LANE = f"""
name = "tiny"
framework = "node-fetch"
version = ">=22"
command = ["{NODE}", "{ROOT / 'workers' / 'node' / 'fetch_loop.ts'}"]
network = "none"
timeout_s = 30
[model]
mode = "script"
[[scenarios]]
id = "lookup"
task = "Look up order 742"
script = [ {{ tool = "lookup_order", args = {{ order = "742" }} }},
           {{ text = "Order 742 is open" }} ]
[scenarios.expect]
output_contains = "742 is open"
tool_calls = {{ lookup_order = 1 }}
model_calls = 2
"""

# Writes to fd 1 itself before hello (what a native module or a careless banner does), and
# sends no package paths: two things check-worker tells a Node author in Node's terms.
CARELESS_WORKER = """
const fs = require("node:fs");
fs.writeSync(1, "starting up\\n");
const alk = require("alk-worker");
alk.hello();
alk.ready("careless", "1.0.0");
const start = alk.start();
alk.result("done: " + start.task, "accepted");
"""


def _lane(tmp_path, text: str) -> str:
    path = tmp_path / "lanes" / "tiny.toml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    return str(path)


@needs_node24
def test_a_typescript_worker_runs_in_the_sandbox_under_the_default_limits(tmp_path, alk):
    done = alk("run", "--lane", _lane(tmp_path, TINY_LANE), "--repeats", "2", "--json", "-q",
               cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    document = json.loads(done.stdout)
    assert document["gate"]["framework"] == "node-fetch"
    assert document["gate"]["version"].startswith("24.")
    [scenario] = document["scenarios"]
    assert [r["cause"] for r in scenario["repeats"]] == ["passed", "passed"]
    # The tool events came through the SDK, the model calls through the gateway alk runs.
    [log] = tmp_path.glob("transcripts/*/lookup/repeat-01.jsonl")
    events = [json.loads(line) for line in log.read_text().splitlines()]
    tool = [(e["type"], e["payload"]["name"]) for e in events if e.get("channel") == "tool"]
    assert tool == [("call", "lookup_order"), ("result", "lookup_order")]


@needs_node24
def test_check_worker_passes_the_typescript_worker(tmp_path, alk):
    done = alk("check-worker", "--lane", _lane(tmp_path, TINY_LANE), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "the worker speaks protocol v1" in done.stdout
    # No package paths: the hint names the Node SDK's call, not the Python one's.
    assert "alk.packagePaths(NAME)" in done.stdout
    assert "worker.package_paths" not in done.stdout


@needs_node
def test_check_worker_tells_a_node_author_what_to_change_in_node_terms(tmp_path, alk):
    (tmp_path / "careless.js").write_text(CARELESS_WORKER)
    lane = _lane(tmp_path, f"""
name = "tiny"
framework = "careless"
version = ">=1"
command = ["{SYSTEM_NODE}", "careless.js"]
[[scenarios]]
id = "s"
task = "anything"
""")
    done = alk("check-worker", "--lane", lane, cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    text = " ".join(done.stdout.split())
    assert "stdout line 1: not_json" in text
    assert "call `alk.hello()` first" in text and "console.log and process.stdout" in text
    assert "worker.hello()" not in text
