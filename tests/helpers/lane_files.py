"""Lane files written for a test: a scenario's and a lane's TOML, the file in a project's
`lanes/`, and the message loading it raises. The `root` fixture (tests/unit/conftest.py) is the
project folder, and the current one, so that messages name `lanes/demo.toml`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from alk.errors import LaneError
from alk.lane.load import load_lane

WHERE = "lanes/demo.toml"
OMIT = object()


def scenario(sid: str | None = "a", task: str = "Do it", expect: str = "", extra: str = "") -> str:
    lines = ["[[scenarios]]"]
    if sid is not None:
        lines.append(f"id = {json.dumps(sid)}")
    lines.append(f"task = {json.dumps(task)}")
    if extra:
        lines.append(extra)
    if expect:
        lines += ["[scenarios.expect]", expect]
    return "\n".join(lines) + "\n"


def lane_toml(scenarios: str = scenario(), raw: str = "", **top: Any) -> str:
    """Top-level fields as keyword arguments (JSON literals are valid TOML for these values),
    `OMIT` to leave one out, `raw` for TOML-only spellings such as `inf`."""
    fields = {"framework": "fw", "version": ">=1.0,<2",
              "command": ["{python}", "workers/w.py"], **top}
    lines = [f"{key} = {json.dumps(value)}" for key, value in fields.items() if value is not OMIT]
    return "\n".join(lines + [raw]) + "\n" + scenarios


def write(root: Path, text: str, name: str = "demo") -> Path:
    path = root / "lanes" / f"{name}.toml"
    path.write_text(text, encoding="utf-8")
    return path


def lane_error(root: Path, text: str) -> str:
    with pytest.raises(LaneError) as caught:
        load_lane(write(root, text))
    return str(caught.value)
