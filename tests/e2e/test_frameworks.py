"""Real frameworks through their lanes (offline, scripted models): the findings the README
reports, pinned so that a framework upgrade that changes them is noticed."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# scenario: (verdict, cause of its failures) as measured with the lane's pinned versions
PYDANTIC_AI = {
    "nominal": ("pass", None),
    "tool-raises": ("fail", "wrong_stop_reason"),       # the tool's exception ends the run
    "rate-limit": ("fail", "wrong_stop_reason"),        # a 429 is not retried
    "malformed-output": ("pass", None),                 # bad tool arguments are retried
    "crash-after-effect": ("fail", "wrong_files"),      # no durable state: the effect repeats
    "denied-tool": ("pass", None),                      # the policy's denial reaches the model
}


LANGGRAPH = {
    "nominal": ("pass", None),
    "tool-raises": ("fail", "wrong_stop_reason"),       # ToolNode re-raises by default
    "rate-limit": ("fail", "wrong_stop_reason"),        # no retry policy by default
    "malformed-output": ("fail", "wrong_files"),        # an invalid tool call ends the graph
    "crash-after-effect": ("fail", "wrong_files"),      # the interrupted step runs again
    "denied-tool": ("pass", None),
}


OPENAI_AGENTS = {
    "nominal": ("pass", None),
    "tool-raises": ("pass", None),                      # the tool's error goes to the model
    "rate-limit": ("fail", "wrong_stop_reason"),        # the model's error ends the run
    "malformed-output": ("pass", None),                 # bad arguments go back to the model
    "crash-after-effect": ("fail", "wrong_files"),      # no durable state: the effect repeats
    "denied-tool": ("pass", None),
}


@pytest.mark.parametrize("lane, module, findings", [
    ("pydantic-ai", "pydantic_ai", PYDANTIC_AI),
    ("langgraph", "langgraph", LANGGRAPH),
    ("openai-agents", "agents", OPENAI_AGENTS),
])
def test_framework_lane_findings(tmp_path, lane, module, findings):
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{lane} is not installed: pip install -e '.[{lane}]'")
    done = subprocess.run([sys.executable, "-m", "alk", "run", "--lane",
                           str(ROOT / "lanes" / f"{lane}.toml"), "-n", "2"], cwd=tmp_path,
                          env={**os.environ, "COLUMNS": "160"}, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 1, done.stderr
    [result] = (tmp_path / "reports").glob("*/result.json")
    document = json.loads(result.read_text())
    assert document["lane"]["reported_framework"] == lane
    found = {s["id"]: (s["verdict"], sorted({r["cause"] for r in s["repeats"]} - {"passed"}))
             for s in document["scenarios"]}
    expected = {sid: (verdict, [cause] if cause else []) for sid, (verdict, cause)
                in findings.items()}
    assert found == expected
