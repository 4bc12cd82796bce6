"""What the tests of framework lanes under alk's model gateway share: run some of a lane's
scenarios through `python -m alk run --json`, read each scenario's verdict and causes, and the
verdict a `sampled` scenario must have for the turn its repeat's seed drew."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from alk.gateway.script import sampled_turn
from alk.lane.include import merged_tables
from alk.runner.isolation import Network, detect

ROOT = Path(__file__).resolve().parents[2]

needs_offline = pytest.mark.skipif(Network.NONE not in detect().networks,
                                   reason="no network namespace on this machine: the lanes "
                                          "say network = \"none\"")


def lane(name: str) -> dict:
    """The lane's TOML, its scenarios those it runs (a shared scenario file's merged in)."""
    return merged_tables(ROOT / "lanes" / f"{name}.toml")


def require_installed(name: str, what: str, program: Path, *, imports: str | None = None,
                      node: bool = False) -> None:
    """Skips the test, naming the lane's install line, unless the lane's own `program` is there:
    an interpreter that imports `imports`, or an npm-installed CLI with `node` on PATH."""
    ready = program.exists() and (not node or shutil.which("node") is not None)
    if ready and imports is not None:
        ready = subprocess.run([str(program), "-c", f"import {imports}"],
                               capture_output=True).returncode == 0
    if not ready:
        pytest.skip(f"{what} is not installed in {program.relative_to(ROOT)}"
                    f"{' (or no node on PATH)' if node else ''}: {lane(name)['install']}")


NODE = ROOT / ".tools" / "node" / "bin" / "node"


def require_node_lane(name: str, what: str, package: str, worker: str | None = None) -> None:
    """Skips the test, naming the lane's install line, unless the TypeScript lane's worker
    folder (workers/node/WORKER, the lane's name by default) has `package` installed (`npm ci`)
    and the Node it runs on is there."""
    folder = ROOT / "workers" / "node" / (worker or name)
    if not (NODE.exists() and (folder / "node_modules" / package / "package.json").exists()):
        pytest.skip(f"{what} is not installed in {folder.relative_to(ROOT)}/node_modules (or "
                    f"no Node in {NODE.relative_to(ROOT)}): {lane(name)['install']}")


def run_lane(tmp_path: Path, name: str, scenarios: list[str], seed: int) -> dict:
    """The result document of one repeat of each of `scenarios` (a failing scenario is a
    finding, so exit 1 is as good as 0; a void one is not)."""
    selected = [arg for sid in scenarios for arg in ("-s", sid)]
    done = subprocess.run([sys.executable, "-m", "alk", "run", "--lane",
                           str(ROOT / "lanes" / f"{name}.toml"), "--repeats", "1", "--json",
                           "-q", "--seed", str(seed), *selected],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "COLUMNS": "120"})
    assert done.returncode in (0, 1), done.stdout[-2000:] + done.stderr[-2000:]
    return json.loads(done.stdout)


def findings(document: dict) -> dict[str, tuple[str, list[str]]]:
    """scenario → (verdict, the causes of its repeats that did not pass)."""
    return {s["id"]: (s["stats"]["verdict"],
                      sorted({r["cause"] for r in s["repeats"]} - {"passed"}))
            for s in document["scenarios"]}


def sampled_finding(document: dict, lane_table: dict, sid: str = "sampled"
                    ) -> tuple[str, list[str]]:
    """What `sid` must come to for the turn with choices its seed drew: the right tool call
    runs the task (pass), the wrong answer ends the run without the report, its tool never
    called (fail)."""
    [scenario] = [s for s in lane_table["scenarios"] if s["id"] == sid]
    [repeat] = [s for s in document["scenarios"] if s["id"] == sid][0]["repeats"]
    script = tuple(scenario["script"])
    [index] = [i for i, turn in enumerate(script) if "choices" in turn]
    drawn = sampled_turn(script, index, repeat["seed"])
    return ("pass", []) if "tool" in drawn else ("fail", ["wrong_tool_calls"])


def pinned_findings(tmp_path: Path, name: str, scenarios: list[str], seed: int = 7
                    ) -> tuple[str, dict[str, tuple[str, list[str]]]]:
    """One repeat of each of `scenarios` and of `sampled`: the framework the gate saw, and each
    scenario's finding, `sampled` checked here against the turn its seed drew."""
    document = run_lane(tmp_path, name, [*scenarios, "sampled"], seed=seed)
    found = findings(document)
    assert found.pop("sampled") == sampled_finding(document, lane(name))
    return document["gate"]["framework"], found
