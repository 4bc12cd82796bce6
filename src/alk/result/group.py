"""A run of several lanes (`alk run --lane A --lane B`): `reports/RUN/group.json` says which
lanes it holds, in the order they run, and what the run was asked (`RunOptions`, its seed drawn
once for them all), so that `alk run --resume RUN` begins the lanes that never began, and
`alk report RUN` finds every lane's `RUN/LANE/result.json`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from alk.errors import TranscriptError
from alk.files import write_atomically
from alk.layout import group_path
from alk.result.options import RunOptions

GROUP_SCHEMA = "alk.group/1"


@dataclass(frozen=True, slots=True)
class GroupLane:
    name: str
    path: str  # the lane file, absolute


@dataclass(frozen=True, slots=True)
class RunGroup:
    run_id: str
    lanes: tuple[GroupLane, ...]
    options: RunOptions

    def member(self, lane: GroupLane) -> str:
        """The run id of one of its lanes: `RUN/LANE`."""
        return f"{self.run_id}/{lane.name}"


def write_group(out_dir: Path, group: RunGroup) -> None:
    record = {"schema": GROUP_SCHEMA, "run_id": group.run_id,
              "lanes": [{"name": lane.name, "path": lane.path} for lane in group.lanes],
              **group.options.to_json()}
    write_atomically(group_path(out_dir, group.run_id),
                     (json.dumps(record, indent=1) + "\n").encode())


def read_group(path: Path) -> RunGroup:
    """The group.json at `path`; raises TranscriptError when it cannot be read as one."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise TranscriptError(f"{path}: not a readable run of several lanes: {exc}") from None
    if not isinstance(record, dict) or record.get("schema") != GROUP_SCHEMA:
        raise TranscriptError(f"{path}: schema is not {GROUP_SCHEMA!r}; this alk cannot read it")
    try:
        return RunGroup(run_id=record["run_id"],
                        lanes=tuple(GroupLane(lane["name"], lane["path"])
                                    for lane in record["lanes"]),
                        options=RunOptions.from_json(record))
    except (KeyError, TypeError, ValueError) as exc:
        raise TranscriptError(f"{path}: not a run of several lanes ({type(exc).__name__}: "
                              f"{exc}); it was changed by hand or by another program") from None
