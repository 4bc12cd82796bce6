"""Scenarios a lane shares with others: `scenarios_from` names a scenario file (a TOML file of
`[[scenarios]]`, and the `[[tools]]` alk serves them if they call any, its path relative to the
lane file's folder), or a list of them, whose
scenarios the lane runs, file after file, less the ids `skip_scenarios` lists. An id is in one
of the files only. A `[[scenarios]]` of the lane's own with the id of
a shared one replaces it whole, in its place; one with a new id comes after the shared ones.
One level only: a scenario file names no other. And `[model] answer_tool`, which makes each
text turn of the scripts a call of the framework's final-answer tool, so that a framework that
ends a run only on such a call (smolagents) runs the same scripts as the others.

The raw tables are merged here, before `alk.lane.scenario` parses them, so that a shared
scenario is checked exactly as one written in the lane, with the scenario file named in its
messages.
"""

from __future__ import annotations

import copy
import hashlib
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from alk.errors import LaneError
from alk.lane.table import NAME, Table
from alk.records import SharedScenarios

INCLUDE_FIELDS = ("scenarios_from", "skip_scenarios")
_ANSWER_FIELDS = {"name", "arg"}


@dataclass(frozen=True, slots=True)
class RawTable:
    """One `[[scenarios]]` (or `[[tools]]`) table as written, and where: the file's name for
    messages and its index in that file."""

    table: Any
    where: str
    index: int


@dataclass(frozen=True, slots=True)
class Included:
    """A lane's scenario tables once its scenario file is merged in, in the order they run."""

    scenarios: tuple[RawTable, ...]
    shared: SharedScenarios | None = None
    # Each scenario file's bytes: the lane's sha256 covers them, so that a run resumed or
    # compared after a shared file changed is told the lane changed.
    shared_bytes: tuple[bytes, ...] = ()
    # The scenario files' [[tools]], file after file: served with the lane's own.
    tools: tuple[RawTable, ...] = ()


def refuse_scenario_file(data: Mapping[str, Any], where: str) -> None:
    """A file of `[[scenarios]]` alone, given as a lane (`--lane lanes/scenarios/x.toml`)."""
    if data and set(data) == {"scenarios"}:
        raise LaneError(f"{where}: is a scenario file (only [[scenarios]]), not a lane: a lane "
                        "names it with scenarios_from = \"...\"; run such a lane instead")


def lane_digest(raw: bytes, included: Included) -> str:
    """The lane's sha256: of its file's bytes alone when it names no scenario file (so that
    the digest of such a lane is what it always was), else of every file's bytes in turn."""
    if included.shared is None:
        return hashlib.sha256(raw).hexdigest()
    return hashlib.sha256(b"".join(hashlib.sha256(data).digest()
                                   for data in (raw, *included.shared_bytes))).hexdigest()


def include_scenarios(top: Table, path: Path, where: str) -> Included:
    """The lane's `[[scenarios]]` tables with those of the scenario file it names, if any."""
    own = top.get("scenarios", list, required="scenarios_from" not in top.data, default=[])
    if "scenarios_from" not in top.data:
        if "skip_scenarios" in top.data:
            top.fail("skip_scenarios", "needs scenarios_from: it names scenarios of the "
                                       "scenario file the lane takes its scenarios from")
        if not own:
            top.fail("scenarios", "must hold at least one [[scenarios]] table")
        return Included(tuple(RawTable(t, where, i) for i, t in enumerate(own)))

    names = _scenario_files(top)
    paths = [path.parent / name for name in names]
    files = [_read_scenario_file(top, name, shared_path, path,
                                 f"{_display(shared_path)} (scenarios_from of {where})")
             for name, shared_path in zip(names, paths)]
    shared = [scenario for _, tables, _ in files for scenario in tables]
    _unique_across(shared)
    shared_ids = [sid for s in shared if (sid := _id_of(s)) is not None]
    shown = ", ".join(_display(p) for p in paths)
    skipped = top.get("skip_scenarios", list, default=[])
    for index, sid in enumerate(skipped):
        label = f"skip_scenarios[{index}]"
        if not isinstance(sid, str) or sid not in shared_ids:
            top.fail(label, f"must name a scenario of {shown}, got {sid!r}; "
                            f"its scenarios: {', '.join(map(str, shared_ids))}")
        if skipped.index(sid) != index:
            top.fail(label, f"names '{sid}' twice")

    own_raw = [RawTable(t, where, i) for i, t in enumerate(own)]
    _unique_ids(own_raw, where)
    for scenario in own_raw:
        if _id_of(scenario) in skipped:
            top.fail("skip_scenarios", f"names '{_id_of(scenario)}', which the lane's own "
                                       "[[scenarios]] also gives: skip it or give it, not both")
    replacing = {_id_of(s): s for s in own_raw if _id_of(s) in shared_ids}
    added = [s for s in own_raw if _id_of(s) not in shared_ids]
    merged = [replacing.get(_id_of(s), s) for s in shared if _id_of(s) not in skipped]
    if not merged and not added:
        top.fail("skip_scenarios", f"leaves no scenario: {shown} "
                                   f"{'has' if len(paths) == 1 else 'have'} only "
                                   f"{', '.join(map(str, shared_ids))}")
    return Included(
        scenarios=tuple(merged + added),
        shared=SharedScenarios(
            path=paths[0], more=tuple(paths[1:]),
            replaced=tuple(sid for sid in replacing if sid is not None),
            added=tuple(sid for s in added if (sid := _id_of(s)) is not None),
            skipped=tuple(skipped)),
        shared_bytes=tuple(data for data, _, _ in files),
        tools=tuple(tool for _, _, tools in files for tool in tools))


def _scenario_files(top: Table) -> list[str]:
    """The names `scenarios_from` gives: one text, or a list of them, none twice."""
    value = top.get("scenarios_from", (str, list), required=True)
    names = [value] if isinstance(value, str) else value
    if not names:
        top.fail("scenarios_from", "must name at least one scenario file")
    for index, name in enumerate(names):
        label = "scenarios_from" if isinstance(value, str) else f"scenarios_from[{index}]"
        if not isinstance(name, str) or not name.strip():
            top.fail(label, f"must be a scenario file's path, got {name!r}")
        if names.index(name) != index:
            top.fail(label, f"names {name!r} twice")
    return names


def _read_scenario_file(top: Table, name: str, shared_path: Path, lane_path: Path, where: str
                        ) -> tuple[bytes, list[RawTable], list[RawTable]]:
    if shared_path.resolve() == lane_path.resolve():
        top.fail("scenarios_from", "names the lane file itself; name a file of [[scenarios]] "
                                   "only (lanes/scenarios/NAME.toml, say)")
    if shared_path.exists() and not shared_path.is_file():
        # A folder, a FIFO or a device (which could block alk or never end) is no scenario file.
        top.fail("scenarios_from", f"names {_display(shared_path)}, which is not a file; name a "
                                   "file of [[scenarios]] (lanes/scenarios/NAME.toml, say)")
    try:
        raw = shared_path.read_bytes()
        data = tomllib.loads(raw.decode("utf-8"))
    except OSError as exc:
        raise LaneError(f"{top.where}: scenarios_from names {name!r}, "
                        f"which cannot be read at {_display(shared_path)} ({exc.strerror}); the "
                        "path is relative to the lane file's folder") from None
    except UnicodeDecodeError:
        raise LaneError(f"{where}: is not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise LaneError(f"{where}: is not valid TOML: {exc}") from None
    extra = sorted(set(data) - {"scenarios", "tools"})
    if "scenarios_from" in extra:
        raise LaneError(f"{where}: scenarios_from: a scenario file names no other (one level "
                        "only); move those scenarios into this file, or have the lane name "
                        "that file instead")
    if extra:
        raise LaneError(f"{where}: {', '.join(extra)}: a scenario file holds only "
                        "[[scenarios]] and the [[tools]] they call; lane fields belong in each "
                        "lane that names it")
    tables = data.get("scenarios")
    if not isinstance(tables, list) or not tables:
        raise LaneError(f"{where}: scenarios must hold at least one [[scenarios]] table")
    tools = data.get("tools", [])
    if not isinstance(tools, list):
        raise LaneError(f"{where}: tools must be [[tools]] tables, got {type(tools).__name__}")
    return (raw, [RawTable(t, where, i) for i, t in enumerate(tables)],
            [RawTable(t, where, i) for i, t in enumerate(tools)])


def _id_of(scenario: RawTable) -> str | None:
    """Its id as written, for merging only (None if it is no text): `alk.lane.scenario`
    checks it."""
    sid = scenario.table.get("id") if isinstance(scenario.table, dict) else None
    return sid if isinstance(sid, str) else None


def _unique_across(scenarios: list[RawTable]) -> None:
    """Each file's duplicates, then an id that two files give: which of the two would run?"""
    first: dict[str, RawTable] = {}
    for scenario in scenarios:
        sid = _id_of(scenario)
        if sid is None:
            continue
        if sid in first and first[sid].where != scenario.where:
            raise LaneError(f"{scenario.where}: scenarios[{scenario.index}].id '{sid}' is also "
                            f"scenarios[{first[sid].index}] of {first[sid].where.split(' (')[0]};"
                            " a scenario id is in one scenario file only")
        first.setdefault(sid, scenario)
    for where in dict.fromkeys(s.where for s in scenarios):
        _unique_ids([s for s in scenarios if s.where == where], where)


def _unique_ids(scenarios: list[RawTable], where: str) -> None:
    """Duplicates are refused file by file, before the merge takes the lane's for the file's."""
    seen: set[str | None] = set()
    for scenario in scenarios:
        sid = _id_of(scenario)
        if sid is not None and sid in seen:
            raise LaneError(f"{where}: scenarios[{scenario.index}].id '{sid}' is a duplicate;"
                            " scenario ids must be unique")
        seen.add(sid)


def answer_tool(model: Table) -> tuple[str, str] | None:
    """`[model] answer_tool = { name = "final_answer", arg = "answer" }`: the tool and argument
    each text turn becomes."""
    raw = model.get("answer_tool", dict)
    if raw is None:
        return None
    table = Table(raw, model.where, model.name("answer_tool"), _ANSWER_FIELDS)
    tool, arg = table.text("name", required=True), table.text("arg", required=True)
    for key, value in (("name", tool), ("arg", arg)):
        if not NAME.match(value):
            table.fail(key, f"must be a tool's {'name' if key == 'name' else 'argument'} "
                            f"(letters, digits, '.', '_' or '-'), got {value!r}")
    return tool, arg


def with_answer_tool(raw: RawTable, tool: tuple[str, str] | None) -> RawTable:
    """The scenario with each `{ text }` turn of its script, a choice's too, as the call
    `{ tool, args = { arg = text } }`; anything else as it is (a malformed turn is left for
    the scenario's checks to name)."""
    if tool is None or not isinstance(raw.table, dict) or not isinstance(
            raw.table.get("script"), list):
        return raw
    table = copy.deepcopy(raw.table)
    table["script"] = [_as_call(turn, tool) for turn in table["script"]]
    return RawTable(table, raw.where, raw.index)


def _as_call(turn: Any, tool: tuple[str, str]) -> Any:
    if not isinstance(turn, dict):
        return turn
    if isinstance(turn.get("choices"), list):
        return {**turn, "choices": [_as_call(choice, tool) for choice in turn["choices"]]}
    if "text" in turn and "tool" not in turn:
        rest = {key: value for key, value in turn.items() if key != "text"}
        return {**rest, "tool": tool[0], "args": {tool[1]: turn["text"]}}
    return turn


def _display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def merged_tables(path: Path) -> dict[str, Any]:
    """The lane file's TOML, its `scenarios` the tables it runs (its scenario file's merged in,
    answer_tool applied): for a reader of lane files as TOML, such as scripts/frameworks_table.py.
    Raises LaneError (or OSError, TOMLDecodeError) as loading would."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    where = _display(path)
    top = Table(data, where, "", set(data))
    model = data.get("model")
    tool = answer_tool(Table(model, where, "model", set(model))) if isinstance(model, dict) \
        else None
    included = include_scenarios(top, path, where)
    return {**data, "scenarios": [with_answer_tool(raw, tool).table
                                  for raw in included.scenarios]}
