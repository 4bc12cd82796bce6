"""The layer that failed, through real runs (docs/causes.md, "Whose failure it is"): alk's kill
and resume that makes a worker write its effect twice is the framework's (`effect_repeated`),
with alk's gateway serving the model or not; under the gateway, a turn the lane marks as the
model's mistake is the agent's, and the same turn unmarked (meant to be right) the framework's.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from alk.runner.isolation import Network, detect

ROOT = Path(__file__).resolve().parents[2]
OPENAI_CLIENT = ROOT / "tests" / "workers" / "provider_client.py"

needs_offline = pytest.mark.skipif(Network.NONE not in detect().networks,
                                   reason="the gateway lane runs with network = \"none\"")


def run(tmp_path: Path, lane: Path, *args: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "alk", "run", "--lane", str(lane), "-q", "-j",
                           "1", *args], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode in (0, 1), done.stderr
    [result] = sorted((tmp_path / "reports").glob("*/result.json"))
    return {s["id"]: s["repeats"] for s in json.loads(result.read_text())["scenarios"]}


def blamed(repeats: list[dict]) -> set[tuple[str, str]]:
    return {(r["outcome"], r["cause"]) for r in repeats}


def test_a_worker_that_repeats_its_effect_after_alks_kill_is_the_frameworks(tmp_path):
    """tests/lanes/no_idempotency.toml: alk kills the worker after write_report and resumes it;
    it writes the report again. No model is served: the kill alone makes it the framework's."""
    lane = tmp_path / "no_idempotency.toml"
    text = (ROOT / "tests" / "lanes" / "no_idempotency.toml").read_text()
    lane.write_text(text.replace('"workers/no_idempotency.py"',
                                 json.dumps(str(ROOT / "tests" / "workers" /
                                                "no_idempotency.py"))))
    repeats = run(tmp_path, lane)["crash-after-effect"]
    assert blamed(repeats) == {("framework_runtime", "effect_repeated")}
    assert all(r["attempts"] == 2 for r in repeats)
    assert "json_length counted 2, 1 expected" in repeats[0]["detail"]


@needs_offline
def test_under_alks_scripted_model_the_marked_mistake_is_the_agents_and_the_rest_not(tmp_path):
    """The openai package's client against alk's gateway. `mistake`: its one choice answers
    without writing the report and is marked the model's mistake; `unmarked`: the same turn,
    meant to be right; `resumed`: killed after the report and started over, it writes twice."""
    script = """[ {{ tool = "lookup_order", args = {{ order = "742" }} }},
           {{ choices = [ {{ weight = 1, {mark}text = "No report needed" }} ] }},
           {{ text = "Report for order 742 written" }} ]"""
    expect = """[scenarios.expect]
stop_reason = "accepted"
files = [ { path = "lab-output/effects.json", json_length = 1 } ]"""
    lane = tmp_path / "layers.toml"
    lane.write_text(f"""name = "layers"
framework = "openai-client"
version = ">=1"
command = ["{{python}}", {json.dumps(str(OPENAI_CLIENT))}]
network = "none"
timeout_s = 20
repeats = 1

[model]
mode = "script"

[[scenarios]]
id = "mistake"
task = "Prepare the report for order 742"
script = {script.format(mark="mistake = true, ")}
{expect}

[[scenarios]]
id = "unmarked"
task = "Prepare the report for order 742"
script = {script.format(mark="")}
{expect}

[[scenarios]]
id = "resumed"
task = "Prepare the report for order 742"
script = [ {{ tool = "lookup_order", args = {{ order = "742" }} }},
           {{ tool = "write_report", args = {{ order = "742" }} }},
           {{ text = "Report for order 742 written" }} ]
kill_at = {{ channel = "tool", type = "result", name = "write_report" }}
{expect}
""")
    found = run(tmp_path, lane)
    assert blamed(found["mistake"]) == {("agent", "wrong_files")}
    assert "alk served turn 2 as the choice the lane marks mistake = true" in \
        found["mistake"][0]["detail"]
    assert blamed(found["unmarked"]) == {("framework_runtime", "script_not_followed")}
    assert blamed(found["resumed"]) == {("framework_runtime", "effect_repeated")}
    # The gateway's own record of the mistake, in the transcript.
    events = [json.loads(line) for line in
              (tmp_path / found["mistake"][0]["transcript"]).read_text().splitlines()]
    marked = [e["payload"]["turn"] for e in events if e["source"] == "harness"
              and e["channel"] == "model" and e["type"] == "call" and e["payload"].get("mistake")]
    assert marked == [1]
