"""The `alk` program's entry point. `alk --help`, the first thing a newcomer types, is printed
from a copy of the help typer renders (`alk._help`, kept identical by a test), because importing
typer alone costs about three times an interpreter's start; everything else goes through
typer (`alk.cli`). `alk --version` is answered here too, from the package metadata. Nothing
here imports more than `os` and `sys`, and `importlib.metadata` for the version."""

from __future__ import annotations

import os
import sys

# Click wraps its help to the terminal's width, up to 80 columns: from 80 on it is the same.
HELP_COLUMNS = 80


def main() -> None:
    if sys.argv[1:] == ["--version"]:
        # As fast as `--help`: a script checking which alk it has should not wait for typer.
        from alk import installed_version

        sys.stdout.write(f"alk {installed_version()}\n")
        sys.stdout.flush()
        return
    if sys.argv[1:] == ["--help"] and _columns() >= HELP_COLUMNS:
        from alk._help import TOP_LEVEL

        sys.stdout.write(TOP_LEVEL)
        sys.stdout.flush()
        return
    from alk.cli import main as run_command

    run_command()


def _columns() -> int:
    """The terminal's width as click reads it (`shutil.get_terminal_size`, without importing
    shutil): $COLUMNS, else the terminal's, else 80."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns > 0:
        return columns
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns or HELP_COLUMNS
    except (AttributeError, ValueError, OSError):
        return HELP_COLUMNS
