"""Hostile workers of the model gateway, through the real CLI: what a worker can make of what
alk serves it (`gateway_worker.py`). docs/security.md names each threat and its defence."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from alk.transcript.reader import read_transcript

WORKER = Path(__file__).resolve().with_name("gateway_worker.py")


def lane(threat: str, *scenarios: str, model: str = 'mode = "script"', extra: str = "") -> str:
    return (f'framework = "hostile"\nversion = ">=1,<2"\n'
            f'command = ["{{python}}", "{WORKER}", "{threat}"]\ntimeout_s = 20\n{extra}\n'
            f"[model]\n{model}\n\n" + "".join(scenarios))


def scenario(id: str, script: str = '[ { text = "a turn" } ]', extra: str = "") -> str:
    return (f'[[scenarios]]\nid = "{id}"\ntask = "t"\nscript = {script}\n{extra}\n'
            '[scenarios.expect]\nstop_reason = "accepted"\noutput_equals = "done"\n')


def run(tmp_path: Path, text: str, *args: str, env: dict | None = None):
    """`alk run` on a lane text in tmp_path: (process, result document)."""
    (tmp_path / "tmp").mkdir(exist_ok=True)
    path = tmp_path / "lanes" / "attack.toml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    done = subprocess.run([sys.executable, "-m", "alk", "run", "--lane", str(path), *args],
                          cwd=tmp_path, capture_output=True, timeout=180,
                          env={**os.environ, "TMPDIR": str(tmp_path / "tmp"), "COLUMNS": "100",
                               **(env or {})})
    [result] = list((tmp_path / "reports").glob("*/result.json"))
    return done, json.loads(result.read_bytes())


def causes(document: dict) -> dict[str, list[str]]:
    return {entry["id"]: [r["cause"] for r in entry["repeats"]]
            for entry in document["scenarios"]}


# --- nothing a worker sees before its gate depends on the scenario ---------------------------

def test_a_worker_cannot_ask_the_gateway_for_its_scenario_before_the_gate(tmp_path):
    # Had the gateway served the hard scenario's first turn before start, the worker would
    # exit before the gate there, and its failures would be void (exited_before_ready).
    text = lane("peek_model", scenario("easy"), scenario("hard", '[ { text = "hard" } ]'))
    done, document = run(tmp_path, text, "-n", "3")
    assert causes(document) == {"easy": ["passed"] * 3, "hard": ["wrong_output"] * 3}
    assert done.returncode == 1


def test_a_worker_cannot_time_the_gateway_for_its_scenario_before_the_gate(tmp_path):
    # The hard scenario stalls its first model call: a call before start that stalled would
    # tell the worker where it is. Before start no fault fires and every answer is at once.
    stall = 'wire_faults = [ { call = 1, kind = "stall" } ]'
    text = lane("peek_model_timing", scenario("easy"), scenario("hard", extra=stall))
    done, document = run(tmp_path, text, "-n", "3")
    assert causes(document) == {"easy": ["passed"] * 3, "hard": ["wrong_output"] * 3}


def test_the_probe_and_every_repeat_look_alike_until_start(tmp_path):
    """Variables (names and kinds of value), files and the gateway's answer, as the worker saw
    them before the gate, in the probe and in two repeats each of two scenarios."""
    text = lane("fingerprint", scenario("easy"), scenario("hard", '[ { text = "hard" } ]'))
    done, document = run(tmp_path, text, "-n", "2")
    [run_folder] = (tmp_path / "transcripts").iterdir()
    seen = {}
    for path in sorted(run_folder.rglob("*.jsonl")):
        [line] = [e["payload"]["text"] for e in read_transcript(path)
                  if e["channel"] == "stderr" and "FINGERPRINT" in e["payload"]["text"]]
        seen[str(path.relative_to(run_folder))] = line.split("FINGERPRINT ", 1)[1]
    assert len(seen) == 5 and "preflight.jsonl" in seen
    first = json.loads(seen["preflight.jsonl"])
    assert {"OPENAI_API_KEY", "OPENAI_BASE_URL"} <= set(first["env"]), first["env"]
    assert first["gateway"][0] == 503
    different = {name: text for name, text in seen.items() if json.loads(text) != first}
    assert not different, f"the probe saw {first}, these saw otherwise: {different}"
