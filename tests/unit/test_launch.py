"""`alk --help` printed by `alk.launch` without importing typer is exactly what typer prints."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from alk import _help

pytestmark = pytest.mark.slow  # each test starts an interpreter

HELP_MODULE = Path(_help.__file__)
TYPER = "from alk.cli import main; main()"
LAUNCH = "from alk.launch import main; main()"


def started(program: str, *args: str, columns: int) -> subprocess.CompletedProcess:
    # Started from a folder of its own, so that nothing but the installed alk is imported.
    return subprocess.run([sys.executable, "-c", program, *args], capture_output=True,
                          text=True, env={**os.environ, "COLUMNS": str(columns)},
                          cwd=HELP_MODULE.parent.parent, timeout=60)


def test_the_copy_is_what_typer_renders():
    rendered = started(TYPER, "--help", columns=80)
    assert rendered.returncode == 0, rendered.stderr
    if os.environ.get("ALK_UPDATE_SNAPSHOTS"):
        head = HELP_MODULE.read_text(encoding="utf-8").split("TOP_LEVEL = ", 1)[0]
        HELP_MODULE.write_text(f"{head}TOP_LEVEL = {rendered.stdout!r}\n", encoding="utf-8")
    assert rendered.stdout == _help.TOP_LEVEL, (
        "src/alk/_help.py is stale: run `ALK_UPDATE_SNAPSHOTS=1 python -m pytest "
        "tests/unit/test_launch.py` and commit it")


@pytest.mark.parametrize("columns", [80, 200, 60])
def test_alk_help_is_the_same_however_it_is_printed(columns):
    launched, rendered = (started(program, "--help", columns=columns) for program in (LAUNCH, TYPER))
    assert (launched.returncode, launched.stdout) == (0, rendered.stdout)
    assert launched.stdout.startswith("Usage: alk [OPTIONS] COMMAND [ARGS]...")


def test_everything_else_goes_through_typer():
    shown = started(LAUNCH, "causes", "--help", columns=100)
    assert shown.returncode == 0 and "Usage: alk causes" in shown.stdout
    wrong = started(LAUNCH, "--hlep", columns=100)
    assert wrong.returncode == 2 and "No such option" in wrong.stderr


def test_alk_version_is_the_package_metadata_however_it_is_asked():
    from importlib.metadata import version

    from alk import __version__
    from alk.runner.doctor import doctor

    # pyproject.toml and alk.__version__ (what result.json records) say the same.
    assert version("alk") == __version__
    for program in (LAUNCH, TYPER):
        shown = started(program, "--version", columns=80)
        assert (shown.returncode, shown.stdout, shown.stderr) == (0, f"alk {version('alk')}\n", "")
    assert doctor()[0][:2] == ("alk", version("alk"))
