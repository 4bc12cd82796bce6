"""alk's command line in this process (typer's runner), for what a command prints and the code
it exits with where no process of its own is at stake: faster than `python -m alk`, which the
tests of signals, exit statuses seen by a shell and isolation keep (tests/e2e/conftest.py)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Ran:
    """What a command did: `returncode`, `stdout` and `stderr`, named as a process's are."""

    returncode: int
    stdout: str
    stderr: str


def alk_here(*args: object, cwd: Path, columns: int = 160) -> Ran:
    """`alk ARGS` run in this process from the folder `cwd`."""
    from typer.testing import CliRunner

    from alk.cli import app

    with contextlib.chdir(cwd):
        done = CliRunner().invoke(app, [str(arg) for arg in args],
                                  env={"COLUMNS": str(columns)}, catch_exceptions=False)
    return Ran(done.exit_code, done.stdout, done.stderr)
