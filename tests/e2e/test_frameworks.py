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


@pytest.mark.skipif(importlib.util.find_spec("pydantic_ai") is None,
                    reason="pydantic-ai is not installed: pip install -e '.[pydantic-ai]'")
def test_pydantic_ai_lane_findings(tmp_path):
    done = subprocess.run([sys.executable, "-m", "alk", "run", "--lane",
                           str(ROOT / "lanes" / "pydantic-ai.toml"), "-n", "2"], cwd=tmp_path,
                          env={**os.environ, "COLUMNS": "160"}, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 1, done.stderr
    [result] = (tmp_path / "reports").glob("*/result.json")
    document = json.loads(result.read_text())
    assert document["lane"]["reported_framework"] == "pydantic-ai"
    found = {s["id"]: (s["verdict"], sorted({r["cause"] for r in s["repeats"]} - {"passed"}))
             for s in document["scenarios"]}
    expected = {sid: (verdict, [cause] if cause else []) for sid, (verdict, cause)
                in PYDANTIC_AI.items()}
    assert found == expected
