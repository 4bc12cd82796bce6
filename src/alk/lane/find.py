"""Where lane files are: `--lane` takes a lane's name (a `.toml` file in `lanes/`) or the path of
a lane file; a lane's relative paths resolve from the folder that holds its `lanes/`.
"""

from __future__ import annotations

import os
from pathlib import Path

from alk.errors import LaneError
from alk.layout import LANES_DIR


def find_lane(name_or_path: str, lanes_dir: Path = Path(LANES_DIR)) -> Path:
    """`--lane` takes a lane name found in `lanes_dir` or a path to a `.toml` file."""
    if name_or_path.endswith(".toml") or os.sep in name_or_path:
        path = Path(name_or_path)
        if not path.is_file():
            raise LaneError(f"{name_or_path}: no such lane file")
        return path
    path = lanes_dir / f"{name_or_path}.toml"
    if path.is_file():
        return path
    known = sorted(p.stem for p in lanes_dir.glob("*.toml")) if lanes_dir.is_dir() else []
    hint = (f"known lanes: {', '.join(known)}" if known else
            f"there is no {lanes_dir}/ here: run alk from the folder that holds it, or pass "
            "the path of a .toml file")
    raise LaneError(f"lane '{name_or_path}' not found in {lanes_dir}/ ({hint})")


def lane_paths(lanes_dir: Path = Path(LANES_DIR)) -> list[Path]:
    return sorted(lanes_dir.glob("*.toml")) if lanes_dir.is_dir() else []


def lane_root(path: Path) -> Path:
    """Relative paths in `command` resolve from the folder that holds `lanes/`."""
    folder = path.resolve().parent
    return folder.parent if folder.name == LANES_DIR else folder
