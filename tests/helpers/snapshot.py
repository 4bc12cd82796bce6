"""A view as a person read it: the text under tests/unit/snapshots/, checked byte for byte.

`ALK_UPDATE_SNAPSHOTS=1 python -m pytest tests/unit/...` writes the files again; read the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

SNAPSHOTS = Path(__file__).resolve().parents[1] / "unit" / "snapshots"


def check_snapshot(name: str, text: str, width: int) -> None:
    """`text`, rendered `width` columns wide, is `snapshots/NAME-WIDTH.txt`."""
    assert max(map(len, text.splitlines())) <= width, "a line is wider than the terminal"
    path = SNAPSHOTS / f"{name}-{width}.txt"
    if os.environ.get("ALK_UPDATE_SNAPSHOTS"):
        path.write_text(text, encoding="utf-8")
    assert path.is_file(), f"{path.name}: no snapshot; run with ALK_UPDATE_SNAPSHOTS=1, read it"
    assert text == path.read_text(encoding="utf-8"), (
        f"{path.name} changed; if on purpose, run with ALK_UPDATE_SNAPSHOTS=1 and read the diff")
