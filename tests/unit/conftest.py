"""Shared fixtures of the unit tests: records built by hand, a project folder to write lanes
into, the system's temp folder kept to the test's own."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, Callable

import pytest

from alk.records import Expectations, Lane, Scenario


def _lane(scenario_ids: tuple[str, ...] = ("a", "b", "c"), **fields: Any) -> Lane:
    values: dict[str, Any] = {
        "name": "demo",
        "description": "",
        "framework": "fw",
        "requirement": ">=1.0,<2",
        "command": ("{python}", "worker.py"),
        "required_env": (),
        "timeout_s": 30.0,
        "repeats": 3,
        "scenarios": tuple(Scenario(sid, f"task {sid}", {}, Expectations())
                           for sid in scenario_ids),
        "path": Path("lanes/demo.toml"),
        "root": Path("."),
        "transcript_cap_bytes": 64 * 1024 * 1024,
    }
    values.update(fields)
    return Lane(**values)


@pytest.fixture
def make_lane() -> Callable[..., Lane]:
    """`make_lane(("a", "b"), repeats=2)`: a validated-looking `Lane` record, no file behind it."""
    return _lane


@pytest.fixture
def private_temp(tmp_path, monkeypatch):
    """Workspaces (kept ones too) go under the test's own folder, not the system's /tmp."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "temp"))
    (tmp_path / "temp").mkdir()


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project folder with `lanes/` and an existing worker file; the current directory."""
    (tmp_path / "lanes").mkdir()
    (tmp_path / "workers").mkdir()
    (tmp_path / "workers" / "w.py").write_text("")
    monkeypatch.chdir(tmp_path)
    return tmp_path
