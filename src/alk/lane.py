"""Reads a lane file (TOML) and returns a validated `Lane`, or raises `LaneError`.

Every message names the file, the field, what was expected and what was found, so that a lane
author can fix it without reading this code.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import math
import os
import re
import tomllib
from pathlib import Path
from typing import Any, Sequence

import regex
from packaging.specifiers import InvalidSpecifier, SpecifierSet

from alk.errors import LaneError
from alk.gateway.script import FAULT_KINDS, turn_problem
from alk.layout import LANES_DIR
from alk.limits import NAMES as LIMIT_NAMES
from alk.limits import with_overrides
from alk.records import (
    Expectations,
    Fault,
    FileExpectation,
    KillAt,
    Lane,
    Limits,
    ModelSetup,
    Scenario,
    WireFault,
)

DEFAULT_TRANSCRIPT_CAP_MB = 64
PYTHON_PLACEHOLDER = "{python}"
NETWORKS = ("none", "host")
WORKER_CHANNELS = ("agent", "tool", "model", "user", "framework")
FILESYSTEMS = ("sandbox", "workspace")

# Names the harness sets itself or keeps for itself: a lane cannot pass them to a worker.
HARNESS_ENV_NAMES = frozenset({"HOME", "TMPDIR", "PYTHONPATH", "PATH", "LANG", "LC_ALL", "TZ"})
HARNESS_ENV_PREFIX = "ALK_"

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

_LANE_FIELDS = {
    "name", "description", "framework", "version", "command", "required_env", "timeout_s",
    "repeats", "transcript_cap_mb", "limits", "network", "filesystem", "install", "scenarios",
    "model", "max_parallel",
}
_SCENARIO_FIELDS = {"id", "task", "input", "expect", "script", "faults", "kill_at",
                    "max_attempts", "wire_faults"}
_MODEL_FIELDS = {"mode", "name", "cassette", "upstream", "key_env", "record"}
MODEL_MODES = ("script", "replay", "proxy")
# What each mode needs, and what it may have besides.
_MODE_FIELDS = {"script": (set(), set()), "replay": ({"cassette"}, set()),
                "proxy": ({"upstream", "key_env"}, {"record"})}
_WIRE_FAULT_FIELDS = {"call", "kind", "retry_after_s", "seconds"}
_FAULT_FIELDS = {"point", "occurrence", "error", "retryable"}
_KILL_FIELDS = {"channel", "type", "name", "occurrence"}
_EXPECT_FIELDS = {
    "stop_reason", "output_contains", "output_equals", "output_matches", "end_state",
    "tool_calls", "files", "script_consumed", "model_calls",
}
_FILE_FIELDS = {"path", "exists", "json_length", "json_subset"}


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


# The most files `worker_digest` reads: a worker's folder of a few modules, not a tree.
WORKER_FILES = 200


def load_lane(name_or_path: str | Path, lanes_dir: Path = Path(LANES_DIR)) -> Lane:
    path = name_or_path if isinstance(name_or_path, Path) else find_lane(name_or_path, lanes_dir)
    where = _display(path)
    try:
        raw = path.read_bytes()
        data = tomllib.loads(raw.decode("utf-8"))
    except OSError as exc:
        raise LaneError(f"{where}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise LaneError(f"{where}: is not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise LaneError(f"{where}: is not valid TOML: {exc}") from None
    # The digest of the bytes parsed: a resumed run checks it ran the same lane.
    lane = _parse_lane(data, path, where)
    return dataclasses.replace(lane, sha256=hashlib.sha256(raw).hexdigest(),
                               worker_sha256=worker_digest(lane.command))


def worker_digest(command: Sequence[str]) -> str:
    """The sha256 of the worker's code as alk can see it: each file its command names (its
    script, say) and the Python files beside it (the modules a worker imports from its own
    folder, such as a shared tools module), in order. What `alk rerun` compares to tell a
    reproduction from a check of a changed worker. An interpreter found on PATH and installed
    packages are not among them: the preflight reports the framework's version, which is
    what a run depends on. At most WORKER_FILES files are read."""
    named = [Path(arg) for arg in command if os.path.isabs(arg) and os.path.isfile(arg)]
    files: dict[Path, None] = dict.fromkeys(named)
    for folder in dict.fromkeys(path.parent for path in named):
        try:
            files.update(dict.fromkeys(sorted(folder.glob("*.py"))))
        except OSError:
            continue
    digest = hashlib.sha256()
    for path in list(files)[:WORKER_FILES]:
        # Its name, not its folder: a checkout moved or cloned elsewhere is the same worker.
        digest.update(path.name.encode() + b"\0")
        try:
            digest.update(hashlib.sha256(path.read_bytes()).digest())
        except OSError:
            digest.update(b"unreadable")
    return digest.hexdigest()


def lane_warnings(lane: Lane) -> list[str]:
    """What a lane file holds that alk accepts but its author likely did not mean."""
    where = _display(lane.path)
    warnings = []
    if lane.name != lane.path.stem:
        warnings.append(f"{where}: name '{lane.name}' differs from the file's name "
                        f"'{lane.path.stem}': results say '{lane.name}', `--lane "
                        f"{lane.path.stem}` finds it; rename one so they agree")
    return warnings


def reflow(text: str) -> str:
    """A multi-line TOML string as paragraphs: its lines were broken to fit the file, not the
    terminal, so each paragraph (blank-line separated) becomes one line that a view wraps."""
    paragraphs = (" ".join(line.strip() for line in block.splitlines() if line.strip())
                  for block in re.split(r"\n\s*\n", text.strip()))
    return "\n".join(p for p in paragraphs if p)


def lane_root(path: Path) -> Path:
    """Relative paths in `command` resolve from the folder that holds `lanes/`."""
    folder = path.resolve().parent
    return folder.parent if folder.name == LANES_DIR else folder


# ---------------------------------------------------------------------------------------------


class _Table:
    """One TOML table being validated; knows its place in the file for messages."""

    def __init__(self, data: Any, where: str, field: str, allowed: set[str]) -> None:
        self.where, self.field = where, field
        if not isinstance(data, dict):
            self.fail("", f"must be a table, got {_kind(data)}")
        self.data: dict[str, Any] = data
        for key in data:
            if key not in allowed:
                close = _closest(key, allowed)
                hint = f" (did you mean '{close}'?)" if close else ""
                self.fail("", f"unknown field '{key}'{hint}; allowed: {', '.join(sorted(allowed))}")

    def name(self, key: str) -> str:
        return f"{self.field}.{key}" if self.field else key

    def fail(self, key: str, message: str) -> None:
        label = self.name(key) if key else self.field
        raise LaneError(f"{self.where}: {label} {message}" if label else
                        f"{self.where}: {message}")

    def get(self, key: str, kind: type | tuple[type, ...], required: bool = False,
            default: Any = None) -> Any:
        if key not in self.data:
            if required:
                self.fail(key, "is required")
            return default
        value = self.data[key]
        if isinstance(value, bool) and kind is not bool and bool not in _tuple(kind):
            self.fail(key, f"must be {_kind_name(kind)}, got a boolean")
        if not isinstance(value, kind):
            self.fail(key, f"must be {_kind_name(kind)}, got {_kind(value)}")
        return value

    def text(self, key: str, required: bool = False, default: str | None = None) -> str | None:
        value = self.get(key, str, required, default)
        if required and not value.strip():
            self.fail(key, "must not be empty")
        return value

    def positive(self, key: str, default: float) -> float:
        value = self.get(key, (int, float), default=default)
        # TOML allows inf and nan; neither is a usable timeout or size.
        if not (value > 0 and math.isfinite(value)):
            self.fail(key, f"must be a positive number, got {value}")
        return float(value)


def _parse_lane(data: dict[str, Any], path: Path, where: str) -> Lane:
    top = _Table(data, where, "", _LANE_FIELDS)
    name = top.text("name", default=path.stem)
    if not _NAME.match(name):
        top.fail("name", f"must be letters, digits, '.', '_' or '-', got {name!r}")
    framework = top.text("framework", required=True)
    requirement = top.text("version", required=True)
    try:
        SpecifierSet(requirement)
    except InvalidSpecifier:
        top.fail("version", f"must be a PEP 440 specifier such as '>=1.0,<2', got {requirement!r}")

    root = lane_root(path)
    command = top.get("command", list, required=True)
    if not command or not all(isinstance(arg, str) and arg for arg in command):
        top.fail("command", "must be a non-empty list of non-empty strings (argv, no shell)")

    required_env = top.get("required_env", list, default=[])
    for index, env_name in enumerate(required_env):
        label = f"required_env[{index}]"
        if not isinstance(env_name, str) or not _ENV_NAME.match(env_name):
            top.fail(label, f"must be an environment variable name, got {env_name!r}")
        if env_name in HARNESS_ENV_NAMES or env_name.startswith(HARNESS_ENV_PREFIX):
            top.fail(label, f"'{env_name}' belongs to the harness and never crosses to a worker;"
                            " remove it")
    repeats = top.get("repeats", int, default=20)
    if repeats < 1:
        top.fail("repeats", f"must be at least 1, got {repeats}")

    max_parallel = top.get("max_parallel", int)
    if max_parallel is not None and max_parallel < 1:
        top.fail("max_parallel", f"must be at least 1 (repeats at once), got {max_parallel}; "
                                 "leave it out to let --jobs decide")

    model = _parse_model(top.get("model", dict), where, root)
    raw_scenarios = top.get("scenarios", list, required=True)
    if not raw_scenarios:
        top.fail("scenarios", "must hold at least one [[scenarios]] table")
    scenarios = tuple(_parse_scenario(raw, where, i, model) for i, raw in enumerate(raw_scenarios))
    seen: set[str] = set()
    for index, scenario in enumerate(scenarios):
        if scenario.id in seen:
            raise LaneError(f"{where}: scenarios[{index}].id '{scenario.id}' is a duplicate;"
                            " scenario ids must be unique")
        seen.add(scenario.id)

    return Lane(
        name=name,
        description=reflow(top.text("description", default="")),
        framework=framework,
        requirement=requirement,
        command=tuple(_resolve_arg(arg, root, where, i, program=i == _program_index(command),
                                   install=top.text("install", default=""))
                      for i, arg in enumerate(command)),
        required_env=tuple(required_env),
        timeout_s=top.positive("timeout_s", default=30),
        repeats=repeats,
        scenarios=scenarios,
        path=path,
        root=root,
        transcript_cap_bytes=int(top.positive("transcript_cap_mb", DEFAULT_TRANSCRIPT_CAP_MB)
                                 * 1024 * 1024),
        limits=with_overrides(Limits(), _parse_limits(top.get("limits", dict, default={}), where)),
        network=_choice(top, "network", NETWORKS),
        filesystem=_choice(top, "filesystem", FILESYSTEMS),
        install=top.text("install", default=""),
        model=model,
        max_parallel=max_parallel,
    )


def _parse_model(raw: dict[str, Any] | None, where: str, root: Path) -> ModelSetup | None:
    """The lane's `[model]`: the gateway's mode and what that mode needs."""
    if raw is None:
        return None
    table = _Table(raw, where, "model", _MODEL_FIELDS)
    mode = _choice(table, "mode", MODEL_MODES)
    if mode is None:
        table.fail("mode", f"is required: one of {', '.join(map(repr, MODEL_MODES))}")
    needed, optional = _MODE_FIELDS[mode]
    for key in sorted(needed):
        table.text(key, required=True)
    for key in sorted(set(raw) - needed - optional - {"mode", "name"}):
        table.fail(key, f"has no use in mode {mode!r} (it needs "
                        f"{', '.join(sorted(needed | optional)) or 'nothing more'})")
    upstream = table.text("upstream")
    if upstream is not None and not re.match(r"^https?://[^/\s]+", upstream):
        table.fail("upstream", f"must be an http(s) URL such as 'https://api.example.com/v1', "
                               f"got {upstream!r}")
    key_env = table.text("key_env")
    if key_env is not None and not _ENV_NAME.match(key_env):
        table.fail("key_env", f"must be an environment variable name, got {key_env!r}")
    cassette = table.text("cassette")
    if cassette is not None and not (root / cassette).is_file():
        table.fail("cassette", f"names {cassette!r}, which is not a file under {root} (record "
                               "one with mode = \"proxy\" and record = ...)")
    record = table.text("record")
    name = table.text("name", default="alk-script")
    if not name.strip() or len(name) > 100:
        table.fail("name", f"must be a model name of 1 to 100 characters, got {name!r}")
    return ModelSetup(mode=mode, name=name,
                      cassette=root / cassette if cassette else None, upstream=upstream,
                      key_env=key_env, record=root / record if record else None)


def _choice(table: _Table, key: str, choices: tuple[str, ...]) -> str | None:
    value = table.text(key)
    if value is not None and value not in choices:
        table.fail(key, f"must be one of {', '.join(map(repr, choices))}, got {value!r}")
    return value


def _parse_limits(raw: dict[str, Any], where: str) -> dict[str, int]:
    table = _Table(raw, where, "limits", set(LIMIT_NAMES))
    values = {}
    for name in raw:
        value = table.get(name, int)
        if value < 0:
            table.fail(name, f"must be a whole number ≥ 0 (0 lifts the limit), got {value}")
        values[name] = value
    return values


def _parse_scenario(raw: Any, where: str, index: int, model: ModelSetup | None) -> Scenario:
    table = _Table(raw, where, f"scenarios[{index}]", _SCENARIO_FIELDS)
    scenario_id = table.text("id", required=True)
    if not _NAME.match(scenario_id):
        table.fail("id", f"must be letters, digits, '.', '_' or '-' (it names a folder), "
                         f"got {scenario_id!r}")
    expect = _parse_expect(table.get("expect", dict, default={}), where, f"{table.field}.expect")
    scenario_input = table.get("input", dict, default={})
    _require_json(scenario_input, where, f"{table.field}.input")
    script = table.get("script", list, default=[])
    for turn_index, turn in enumerate(script):
        if not isinstance(turn, dict):
            table.fail(f"script[{turn_index}]", "must be a table (one model turn)")
    _require_json(script, where, f"{table.field}.script")
    if model is not None:
        # The gateway serves the script itself: a turn it cannot serve is the lane's error.
        for turn_index, turn in enumerate(script):
            problem = turn_problem(turn)
            if problem:
                table.fail(f"script[{turn_index}]", problem)
    wire_faults = tuple(_parse_wire_fault(raw_fault, where, f"{table.field}.wire_faults[{i}]")
                        for i, raw_fault in enumerate(table.get("wire_faults", list, default=[])))
    if wire_faults and model is None:
        table.fail("wire_faults", "needs the lane's [model] table: only alk's gateway injects "
                                  "faults on the wire (add [model] with mode = \"script\")")
    if expect.model_calls is not None and model is None:
        table.fail("expect.model_calls", "needs the lane's [model] table: only calls the "
                                         "gateway served are counted")
    faults = tuple(_parse_fault(raw_fault, where, f"{table.field}.faults[{i}]")
                   for i, raw_fault in enumerate(table.get("faults", list, default=[])))
    kill_at = None
    if "kill_at" in table.data:
        kill = _Table(table.get("kill_at", dict), where, f"{table.field}.kill_at", _KILL_FIELDS)
        kill_at = KillAt(_choice(kill, "channel", WORKER_CHANNELS) or "",
                         kill.text("type", required=True), kill.text("name"),
                         _count(kill, "occurrence"))
        if not kill_at.channel:
            kill.fail("channel", "is required")
        if kill_at.type == "framework_ready":
            kill.fail("type", "cannot be framework_ready: alk kills only after the start message")
    # One crash is injected, so there are at most two attempts: the killed one and its resume.
    max_attempts = table.get("max_attempts", int, default=2 if kill_at else 1)
    if kill_at is None and "max_attempts" in table.data:
        table.fail("max_attempts", "needs a kill_at: only a harness-injected crash is resumed")
    if kill_at is not None and max_attempts != 2:
        table.fail("max_attempts", f"must be 2 with a kill_at (the killed attempt and its "
                                   f"resume), got {max_attempts}")
    return Scenario(
        id=scenario_id,
        task=table.text("task", required=True),
        input=scenario_input,
        expect=expect,
        script=tuple(script),
        faults=faults,
        kill_at=kill_at,
        max_attempts=max_attempts,
        wire_faults=wire_faults,
    )


def _parse_wire_fault(raw: Any, where: str, field: str) -> WireFault:
    table = _Table(raw, where, field, _WIRE_FAULT_FIELDS)
    kind = _choice(table, "kind", FAULT_KINDS)
    if kind is None:
        table.fail("kind", f"is required: one of {', '.join(FAULT_KINDS)}")
    if "retry_after_s" in raw and kind != "http_429":
        table.fail("retry_after_s", f"belongs to http_429 only, not {kind}")
    if "seconds" in raw and kind != "stall":
        table.fail("seconds", f"belongs to stall only, not {kind}")
    retry_after = table.positive("retry_after_s", 1.0) if "retry_after_s" in raw else None
    seconds = table.positive("seconds", 1.0) if "seconds" in raw else None
    return WireFault(call=_count(table, "call"), kind=kind, retry_after_s=retry_after,
                     seconds=seconds)


def _parse_fault(raw: Any, where: str, field: str) -> Fault:
    table = _Table(raw, where, field, _FAULT_FIELDS)
    return Fault(table.text("point", required=True), _count(table, "occurrence"),
                 table.text("error", default=""), table.get("retryable", bool, default=False))


def _count(table: _Table, key: str) -> int:
    value = table.get(key, int, default=1)
    if value < 1:
        table.fail(key, f"must be a whole number ≥ 1, got {value}")
    return value


def _require_json(value: Any, where: str, field: str) -> None:
    """TOML has dates and times; JSON, which the worker and the checks speak, does not."""
    if isinstance(value, dict):
        for key, item in value.items():
            _require_json(item, where, f"{field}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _require_json(item, where, f"{field}[{index}]")
    elif not isinstance(value, (str, int, float, bool)):
        raise LaneError(f"{where}: {field} must hold only JSON values (text, numbers, booleans, "
                        f"lists, tables), got a {type(value).__name__} ({value}); quote it")
    elif isinstance(value, float) and not math.isfinite(value):
        raise LaneError(f"{where}: {field} must be a finite number, got {value}")


def _parse_expect(raw: dict[str, Any], where: str, field: str) -> Expectations:
    table = _Table(raw, where, field, _EXPECT_FIELDS)
    pattern = table.text("output_matches")
    if pattern is not None:
        try:
            regex.compile(pattern)
        except regex.error as exc:
            table.fail("output_matches", f"is not a valid regular expression: {exc}")
    end_state = table.get("end_state", dict)
    if end_state is not None:
        _require_json(end_state, where, f"{field}.end_state")
    tool_calls = table.get("tool_calls", dict)
    for tool, count in (tool_calls or {}).items():
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            table.fail(f"tool_calls.{tool}", f"must be a whole number ≥ 0, got {count!r}")
    files = []
    for i, item in enumerate(table.get("files", list, default=[])):
        entry = _Table(item, where, f"{field}.files[{i}]", _FILE_FIELDS)
        rel = entry.text("path", required=True)
        if Path(rel).is_absolute() or ".." in Path(rel).parts:
            entry.fail("path", f"must be relative to the workspace and stay inside it, got {rel!r}")
        length = entry.get("json_length", int)
        if length is not None and length < 0:
            entry.fail("json_length", f"must be ≥ 0, got {length}")
        subset = entry.data.get("json_subset")
        if subset is not None:
            _require_json(subset, where, f"{entry.field}.json_subset")
        files.append(FileExpectation(rel, entry.get("exists", bool), length, subset))
    return Expectations(
        model_calls=_calls_range(table),
        stop_reason=table.text("stop_reason"),
        output_contains=table.text("output_contains"),
        output_equals=table.text("output_equals"),
        output_matches=pattern,
        end_state=end_state,
        tool_calls=tool_calls,
        files=tuple(files),
        script_consumed=table.get("script_consumed", bool),
    )


def _calls_range(table: _Table) -> tuple[int, int] | None:
    """`model_calls = N`, or `{ min, max }` (either may be left out)."""
    if "model_calls" not in table.data:
        return None
    value = table.data["model_calls"]
    if type(value) is int and value >= 0:
        return value, value
    if isinstance(value, dict) and value and set(value) <= {"min", "max"} and all(
            type(v) is int and v >= 0 for v in value.values()):
        low, high = value.get("min", 0), value.get("max", 2**31 - 1)
        if low <= high:
            return low, high
    table.fail("model_calls", f"must be a whole number ≥ 0 or {{ min = N, max = M }} with "
                              f"min ≤ max, got {value!r}")
    raise AssertionError  # fail raised


def _resolve_arg(arg: str, root: Path, where: str, index: int, program: bool,
                 install: str = "") -> str:
    """An argument naming an existing file under the lane root becomes absolute: the worker's
    cwd is its own fresh workspace, where a relative path would find nothing. The program (the
    script after `{python}`, or the command itself) must exist when it is a relative path: a
    typo is better caught here than as 20 void repeats. Other arguments may be anything
    (`openai/gpt-4o`, a URL)."""
    if arg == PYTHON_PLACEHOLDER or arg.startswith("-") or os.path.isabs(arg):
        return arg
    candidate = root / arg
    if candidate.exists():
        return str(candidate) if ("/" in arg or "." in arg) else arg
    if program and ("/" in arg or arg.endswith(".py")):
        # A lane whose framework has an interpreter of its own names it here: not made yet.
        hint = f"; to install it: {install}" if install else ""
        raise LaneError(f"{where}: command[{index}] {arg!r} does not exist under {root} "
                        "(relative paths resolve from the folder that holds the lane's lanes/ "
                        f"folder, or from the lane file's own folder){hint}")
    return arg


def _program_index(command: list[str]) -> int:
    return 1 if command[0] == PYTHON_PLACEHOLDER and len(command) > 1 else 0


def _display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _closest(key: str, allowed: set[str]) -> str | None:
    matches = difflib.get_close_matches(key, sorted(allowed), n=1, cutoff=0.75)
    return matches[0] if matches else None


def _tuple(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


_KIND_NAMES = {str: "a string", int: "a whole number", float: "a number", bool: "true or false",
               list: "a list", dict: "a table"}


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = _tuple(kind)
    if set(kinds) == {int, float}:
        return "a number"
    return " or ".join(_KIND_NAMES.get(k, k.__name__) for k in kinds)


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    return f"{_KIND_NAMES.get(type(value), type(value).__name__)} ({value!r:.40})"
