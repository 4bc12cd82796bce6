"""Reads a lane file (TOML) and returns a validated `Lane`, or raises `LaneError`: the lane's own
fields, its `[model]` and `[limits]` here, its scenarios in `alk.lane.scenario`; and the lanes
`--lane` names (`load_lanes`), or every lane of a folder (`list_lanes`).

Every message names the file, the field, what was expected and what was found, so that a lane
author can fix it without reading this code.
"""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import os
import re
import shutil
import tomllib
from pathlib import Path
from typing import Any, Sequence

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from alk.errors import LaneError, UsageError
from alk.gateway.wire.formats import FAMILIES
from alk.lane.budget import parse_budget
from alk.lane.find import find_lane, lane_paths, lane_root
from alk.lane.include import (
    INCLUDE_FIELDS,
    Included,
    answer_tool,
    include_scenarios,
    lane_digest,
    refuse_scenario_file,
    with_answer_tool,
)
from alk.lane.scenario import check_baselines, parse_scenario
from alk.lane.table import ENV_NAME, NAME, Table, choice
from alk.lane.tools import parse_tools
from alk.layout import LANES_DIR
from alk.limits import NAMES as LIMIT_NAMES
from alk.limits import with_overrides
from alk.records import PYTHON_PLACEHOLDER, Lane, Limits
from alk.served_model import ModelSetup

DEFAULT_TRANSCRIPT_CAP_MB = 64
NETWORKS = ("none", "host")
FILESYSTEMS = ("sandbox", "workspace")

# Names the harness sets itself or keeps for itself: a lane cannot pass them to a worker.
HARNESS_ENV_NAMES = frozenset({"HOME", "TMPDIR", "PYTHONPATH", "NODE_PATH", "PATH", "LANG",
                               "LC_ALL", "TZ"})
HARNESS_ENV_PREFIX = "ALK_"

_LANE_FIELDS = {
    "name", "description", "framework", "version", "command", "required_env", "timeout_s",
    "repeats", "transcript_cap_mb", "limits", "network", "filesystem", "install", "scenarios",
    "model", "tools", "max_parallel", "warm", *INCLUDE_FIELDS,
}
_MODEL_FIELDS = {"mode", "name", "cassette", "upstream", "key_env", "record", "answer_tool",
                 "max_tokens", "family"}
MODEL_MODES = ("script", "replay", "proxy")
# What each mode needs, and what it may have besides; of the latter, the options that change
# how it serves, not what it needs (the message for a field of no use leaves them out).
_MODE_OPTIONS = {"answer_tool", "max_tokens", "family"}
_MODE_FIELDS = {"script": (set(), {"answer_tool", "family"}),
                "replay": ({"cassette"}, {"max_tokens", "family"}),
                "proxy": ({"upstream", "key_env"}, {"record", "max_tokens", "family"})}


# The most files `worker_digest` reads: a worker's folder of a few modules, not a tree.
WORKER_FILES = 200
# The files of a worker's own code that its digest covers, beside the files its command names.
NODE_SUFFIXES = (".js", ".mjs", ".cjs", ".ts", ".mts", ".cts")
SOURCE_SUFFIXES = (".py", *NODE_SUFFIXES)


def load_lane(name_or_path: str | Path, lanes_dir: Path = Path(LANES_DIR)) -> Lane:
    path = name_or_path if isinstance(name_or_path, Path) else find_lane(name_or_path, lanes_dir)
    where = display(path)
    try:
        raw = path.read_bytes()
        data = tomllib.loads(raw.decode("utf-8"))
    except OSError as exc:
        raise LaneError(f"{where}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise LaneError(f"{where}: is not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise LaneError(f"{where}: is not valid TOML: {exc}") from None
    refuse_scenario_file(data, where)
    lane, included = _parse_lane(data, path, where)
    # The digest of the bytes parsed (a scenario file's too): a resumed run checks it ran the
    # same lane.
    return dataclasses.replace(lane, sha256=lane_digest(raw, included),
                               worker_sha256=worker_digest(lane.command))


def worker_digest(command: Sequence[str]) -> str:
    """The sha256 of the worker's code as alk can see it: each file its command names (its
    script, say) and the source files beside it (the modules a worker imports from its own
    folder, such as a shared tools module), in order; for a Node worker in a package folder of
    its own (a package.json beside it), the Node sources of the folder above too, which its
    workers share (workers/node/lab_tools.mjs). What `alk rerun` compares to tell a
    reproduction from a check of a changed worker. A program that is a compiled binary (an
    interpreter, Node) and installed packages are not among them: the preflight reports the
    framework's version, which is what a run depends on. At most WORKER_FILES files are read."""
    named = [Path(arg) for arg in command
             if os.path.isabs(arg) and os.path.isfile(arg) and not _compiled(arg)]
    files: dict[Path, None] = dict.fromkeys(named)
    for folder in dict.fromkeys(path.parent for path in named):
        files.update(dict.fromkeys(_sources(folder, SOURCE_SUFFIXES)))
        if (folder / "package.json").is_file():
            files.update(dict.fromkeys(_sources(folder.parent, NODE_SUFFIXES)))
    digest = hashlib.sha256()
    for path in list(files)[:WORKER_FILES]:
        # Its name, not its folder: a checkout moved or cloned elsewhere is the same worker.
        digest.update(path.name.encode() + b"\0")
        try:
            digest.update(hashlib.sha256(path.read_bytes()).digest())
        except OSError:
            digest.update(b"unreadable")
    return digest.hexdigest()


def _sources(folder: Path, suffixes: tuple[str, ...]) -> list[Path]:
    try:
        return sorted(path for path in folder.iterdir()
                      if path.suffix in suffixes and path.is_file())
    except OSError:
        return []


def _compiled(path: str) -> bool:
    """Is the file an ELF binary? Node's is 100 MB: reading it at every load would cost more
    than the rest of the lane, and it is no code of the worker's."""
    try:
        with open(path, "rb") as handle:
            return handle.read(4) == b"\x7fELF"
    except OSError:
        return False


def lane_warnings(lane: Lane) -> list[str]:
    """What a lane file holds that alk accepts but its author likely did not mean."""
    where = display(lane.path)
    warnings = []
    if lane.name != lane.path.stem:
        warnings.append(f"{where}: name '{lane.name}' differs from the file's name "
                        f"'{lane.path.stem}': results say '{lane.name}', `--lane "
                        f"{lane.path.stem}` finds it; rename one so they agree")
    ignored = _ignored_scripts(lane)
    if ignored:
        warnings.append(f"{where}: {ignored}")
    return warnings


# What answers the model calls in each mode that does not serve the scenarios' scripts.
_NOT_SCRIPTED = {"proxy": "the upstream answers every model call",
                 "replay": "the cassette answers every model call"}


def _ignored_scripts(lane: Lane) -> str | None:
    """A script the gateway never serves (modes proxy and replay) is silently dead text: the
    author who switched a scripted lane to a real model likely thinks it still steers it."""
    mode = lane.model.mode if lane.model is not None else None
    if mode not in _NOT_SCRIPTED:
        return None
    scripted = [s.id for s in lane.scenarios if s.script]
    counted = [s.id for s in lane.scenarios if s.expect.script_consumed is not None]
    if not scripted and not counted:
        return None
    parts = []
    if scripted:
        parts.append(f"the `script` of {_ids(scripted)} is ignored")
    if counted:
        parts.append(f"`expect.script_consumed` of {_ids(counted)} counts the answers "
                     "against a script that is not served")
    return (f"model.mode = {mode!r}: {_NOT_SCRIPTED[mode]}, so {' and '.join(parts)}; remove "
            "them from those scenarios, or keep the scripted scenarios in a lane of their own "
            "with mode = \"script\"")


def _ids(ids: list[str]) -> str:
    shown = ", ".join(f"'{one}'" for one in ids[:5])
    more = f" and {len(ids) - 5} more" if len(ids) > 5 else ""
    return f"scenario{'s' if len(ids) > 1 else ''} {shown}{more}"


def reflow(text: str) -> str:
    """A multi-line TOML string as paragraphs: its lines were broken to fit the file, not the
    terminal, so each paragraph (blank-line separated) becomes one line that a view wraps."""
    paragraphs = (" ".join(line.strip() for line in block.splitlines() if line.strip())
                  for block in re.split(r"\n\s*\n", text.strip()))
    return "\n".join(p for p in paragraphs if p)


def _parse_lane(data: dict[str, Any], path: Path, where: str) -> tuple[Lane, Included]:
    top = Table(data, where, "", _LANE_FIELDS)
    name = top.text("name", default=path.stem)
    if not NAME.match(name):
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
        if not isinstance(env_name, str) or not ENV_NAME.match(env_name):
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
    included = include_scenarios(top, path, where)
    answer = answer_tool(Table(data["model"], where, "model", _MODEL_FIELDS)) if model else None
    raws = [with_answer_tool(raw, answer) for raw in included.scenarios]
    tools = parse_tools(top, model, ((t.table, t.where, t.index) for t in included.tools))
    scenarios = tuple(parse_scenario(raw.table, raw.where, raw.index, model, tools)
                      for raw in raws)
    seen: set[str] = set()
    for raw, scenario in zip(raws, scenarios):
        if scenario.id in seen:
            raise LaneError(f"{raw.where}: scenarios[{raw.index}].id '{scenario.id}' is a "
                            "duplicate; scenario ids must be unique")
        seen.add(scenario.id)
    check_baselines(scenarios, where, [f"{raw.where}: scenarios[{raw.index}]" for raw in raws])

    return Lane(
        name=name,
        description=reflow(top.text("description", default="")),
        framework=framework,
        requirement=requirement,
        command=_check_interpreter(
            tuple(_resolve_arg(arg, root, where, i, program=i == _program_index(command),
                               install=top.text("install", default=""))
                  for i, arg in enumerate(command)), where, top.text("install", default="")),
        required_env=tuple(required_env),
        timeout_s=top.positive("timeout_s", default=30),
        repeats=repeats,
        scenarios=scenarios,
        path=path,
        root=root,
        transcript_cap_bytes=int(top.positive("transcript_cap_mb", DEFAULT_TRANSCRIPT_CAP_MB)
                                 * 1024 * 1024),
        limits=with_overrides(Limits(), _parse_limits(top.get("limits", dict, default={}), where)),
        network=choice(top, "network", NETWORKS),
        filesystem=choice(top, "filesystem", FILESYSTEMS),
        install=top.text("install", default=""),
        model=model,
        tools=tools,
        max_parallel=max_parallel,
        warm=top.get("warm", bool, default=False),
        shared=included.shared,
    ), included


def _parse_model(raw: dict[str, Any] | None, where: str, root: Path) -> ModelSetup | None:
    """The lane's `[model]`: the gateway's mode and what that mode needs."""
    if raw is None:
        return None
    table = Table(raw, where, "model", _MODEL_FIELDS)
    mode = choice(table, "mode", MODEL_MODES)
    if mode is None:
        table.fail("mode", f"is required: one of {', '.join(map(repr, MODEL_MODES))}")
    needed, optional = _MODE_FIELDS[mode]
    for key in sorted(needed):
        table.text(key, required=True)
    for key in sorted(set(raw) - needed - optional - {"mode", "name"}):
        takes = ", ".join(sorted(needed | optional - _MODE_OPTIONS))
        table.fail(key, f"has no use in mode {mode!r} (it needs {takes or 'nothing more'})")
    upstream = table.text("upstream")
    if upstream is not None and not re.match(r"^https?://[^/\s]+", upstream):
        table.fail("upstream", f"must be an http(s) URL such as 'https://api.example.com/v1' "
                               "(OpenAI's base URL ends in /v1; Anthropic's and Gemini's do "
                               f"not), got {upstream!r}")
    key_env = table.text("key_env")
    if key_env is not None and not ENV_NAME.match(key_env):
        table.fail("key_env", f"must be an environment variable name, got {key_env!r}")
    cassette = table.text("cassette")
    if cassette is not None and not (root / cassette).is_file():
        table.fail("cassette", f"names {cassette!r}, which is not a file under {root} (record "
                               "one with mode = \"proxy\" and record = ...)")
    record = table.text("record")
    if record is not None and (root / record).is_dir():
        table.fail("record", f"names {record!r}, a folder under {root}: name the cassette file "
                             "to write, such as 'cassettes/NAME.jsonl'")
    if mode == "proxy" and "name" not in raw:
        table.fail("name", "is required in mode 'proxy': the provider's model that workers ask "
                           "for (the default, alk-script, names alk's scripted model)")
    name = table.text("name", default="alk-script")
    if not name.strip() or len(name) > 100:
        table.fail("name", f"must be a model name of 1 to 100 characters, got {name!r}")
    # The family served: one, or all three where the lane names none (a proxy forwards one).
    family = choice(table, "family", tuple(FAMILIES)) or ("openai" if mode == "proxy" else None)
    return ModelSetup(mode=mode, name=name,
                      cassette=root / cassette if cassette else None, upstream=upstream,
                      key_env=key_env, record=root / record if record else None,
                      max_tokens=parse_budget(table), family=family)


def _parse_limits(raw: dict[str, Any], where: str) -> dict[str, int]:
    table = Table(raw, where, "limits", set(LIMIT_NAMES))
    values = {}
    for name in raw:
        value = table.get(name, int)
        if value < 0:
            table.fail(name, f"must be a whole number ≥ 0 (0 lifts the limit), got {value}")
        values[name] = value
    return values


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


def _check_interpreter(command: tuple[str, ...], where: str, install: str) -> tuple[str, ...]:
    """The program that starts the worker (an interpreter, or the worker itself) must exist
    and be executable: caught here, as a missing worker script is, rather than as a failed
    spawn once the run began. `{python}` is alk's own interpreter; a bare name is looked up
    on PATH, which workers inherit."""
    program = command[0]
    if program == PYTHON_PLACEHOLDER:
        return command
    hint = f"; to install it: {install}" if install else ""
    if os.sep in program:  # absolute here: `_resolve_arg` made a relative one so, or refused it
        if not os.path.isfile(program):
            raise LaneError(f"{where}: command[0] {program!r} does not exist (the program that "
                            f"starts the worker; \"{PYTHON_PLACEHOLDER}\" is alk's own "
                            f"Python){hint}")
        if not os.access(program, os.X_OK):
            raise LaneError(f"{where}: command[0] {program!r} is not executable: make it so "
                            "(chmod +x), or name its interpreter first")
    elif shutil.which(program) is None:
        raise LaneError(f"{where}: command[0] {program!r} is not a program on PATH (the program "
                        f"that starts the worker): install it, give its full path, or use "
                        f"\"{PYTHON_PLACEHOLDER}\" for alk's own Python{hint}")
    return command


def _program_index(command: list[str]) -> int:
    return 1 if command[0] == PYTHON_PLACEHOLDER and len(command) > 1 else 0


def display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def list_lanes(lanes_dir: Path = Path(LANES_DIR)) -> tuple[list[Lane], list[tuple[str, str]]]:
    """Every lane in `lanes_dir`, and (path, message) for each that does not load."""
    if not lanes_dir.is_dir():
        raise LaneError(f"{lanes_dir}: no such folder; run alk from the folder that holds "
                        "lanes/, or pass --lanes-dir")
    lanes, errors = [], []
    for path in lane_paths(lanes_dir):
        try:
            lanes.append(load_lane(path))
        except LaneError as exc:
            errors.append((str(path), str(exc)))
    return lanes, errors


def load_lanes(names: Sequence[str], lanes_dir: Path = Path(LANES_DIR)) -> list[Lane]:
    """The lanes `--lane` names, in order: names, paths, and patterns such as 'lanes/*.toml'
    (a shell that did not expand one hands it over quoted). Each lane once."""
    paths: list[str | Path] = []
    for name in names:
        if any(char in name for char in "*?["):
            matched = sorted(glob.glob(name))
            if not matched:
                raise LaneError(f"--lane {name!r} matches no file")
            paths += [Path(match) for match in matched]
        else:
            paths.append(name)
    lanes = [load_lane(path, lanes_dir) for path in paths]
    unique = {lane.path.resolve(): lane for lane in lanes}
    names_seen: dict[str, Path] = {}
    for lane in unique.values():
        if lane.name in names_seen:
            raise UsageError(f"{lane.path} and {names_seen[lane.name]} are both lane "
                             f"'{lane.name}': lanes of one run need names of their own")
        names_seen[lane.name] = lane.path
    return list(unique.values())
