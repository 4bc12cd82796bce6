"""Processes for the end-to-end tests: alk's real command line run in a folder of the test's
own (`run_alk`, the `alk` fixture of tests/e2e/conftest.py), a process gone (or a zombie), a
lane written into that folder.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def run_alk(*args: object, cwd: Path, env: dict[str, str] | None = None,
            timeout: float = 120) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "COLUMNS": "160", **(env or {})}
    return subprocess.run([sys.executable, "-m", "alk", *map(str, args)], cwd=cwd, env=environ,
                          capture_output=True, text=True, timeout=timeout)


def write_lane(tmp_path, name, body):
    lanes = tmp_path / "lanes"
    lanes.mkdir(exist_ok=True)
    (lanes / f"{name}.toml").write_text(body)
    return lanes / f"{name}.toml"


def gone(pid):
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state == "Z"
