"""What the smolagents and LlamaIndex lane tests share on top of gateway_lanes: why a lane's
framework cannot run here (in alk's interpreter, or in the lane's own .venvs/NAME), and the
findings of one repeat of some scenarios plus `sampled`, whose second turn is the one drawn."""

from __future__ import annotations

import subprocess
from importlib import metadata
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

from alk.gateway.script import sampled_turn

from helpers.gateway_lanes import ROOT, findings, lane, run_lane


def dist_problem(name: str, dist: str) -> str | None:
    """Why lane `name` cannot run with this interpreter's `dist`, or None."""
    wanted = SpecifierSet(lane(name)["version"])
    try:
        found = metadata.version(dist)
    except metadata.PackageNotFoundError:
        return f"{dist} is not installed"
    if found not in wanted:
        return f"{dist} {found} is installed, the lane needs {wanted}"
    return None


def venv_problem(name: str, module: str) -> str | None:
    """Why lane `name`'s own environment (.venvs/NAME) cannot import `module`, or None."""
    python = ROOT / ".venvs" / name / "bin" / "python"
    if not python.exists():
        return f"{python.relative_to(ROOT)} does not exist"
    if subprocess.run([str(python), "-c", f"import {module}"], capture_output=True).returncode:
        return f"{python.relative_to(ROOT)} cannot import {module}"
    return None


def second_turn_finding(document: dict, lane_table: dict, sid: str = "sampled"
                        ) -> tuple[str, list[str]]:
    """What `sid` must come to for the second turn its seed drew (the lookup is the first): the
    report runs the task (pass), an answer instead leaves it undone, which the scenario's
    `tool_calls` check names (fail). gateway_lanes.sampled_finding is for a drawn first turn."""
    [scenario] = [s for s in lane_table["scenarios"] if s["id"] == sid]
    [repeat] = [s for s in document["scenarios"] if s["id"] == sid][0]["repeats"]
    drawn = sampled_turn(tuple(scenario["script"]), 1, repeat["seed"])
    return ("pass", []) if drawn.get("tool") == "write_report" else ("fail", ["wrong_tool_calls"])


def measured(tmp_path: Path, name: str, framework: str, scenarios: list[str],
             problem: str | None) -> dict[str, tuple[str, list[str]]]:
    """The findings of one repeat of each of `scenarios` (seed 7), once `sampled` is checked
    against its draw; skipped with the lane's install line when `problem` says why it cannot
    run."""
    if problem:
        pytest.skip(f"{problem}: {lane(name)['install']}")
    document = run_lane(tmp_path, name, [*scenarios, "sampled"], seed=7)
    assert document["gate"]["framework"] == framework
    found = findings(document)
    assert found.pop("sampled") == second_turn_finding(document, lane(name))
    return found
