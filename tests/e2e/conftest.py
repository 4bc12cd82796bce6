"""What the end-to-end tests share: `alk`, alk's real command line (`python -m alk`) run in a
folder of the test's own."""

from __future__ import annotations

import subprocess
from typing import Callable

import pytest

from helpers.processes import run_alk


@pytest.fixture(scope="session")
def alk() -> Callable[..., subprocess.CompletedProcess[str]]:
    """`alk(*args, cwd=..., env=..., timeout=...)`: `python -m alk ARGS` in `cwd`, its output
    captured as text, 160 columns wide so that no report line wraps."""
    return run_alk
