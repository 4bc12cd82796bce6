"""The harness's own checks of a finished run: the result event and the workspace files.

The worker's claims (`verification`) are never consulted here: every check reads what the
worker produced (its result, its tool events) or what it left in the workspace.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping

import regex

from alk.errors import CheckError
from alk.records import Check, Expectations, FileExpectation
from alk.runner.protocol import bounded_name

# A workspace file larger than this is not parsed (a worker could leave gigabytes).
MAX_FILE_BYTES = 16 * 1024 * 1024
BRIEF_CHARS = 300
# A lane's regular expression runs on output a worker chose: bound it like any other work.
REGEX_TIMEOUT_S = 1.0


def check(expect: Expectations, result: Mapping[str, Any], tool_calls: Mapping[str, int],
          workspace: Path, uncounted_tool_calls: int = 0) -> tuple[Check, ...]:
    checks: list[Check] = []
    output = result.get("output")
    if expect.stop_reason is not None:
        actual = result.get("stop_reason")
        checks.append(Check("stop_reason", actual == expect.stop_reason, expect.stop_reason,
                            actual))
    if expect.output_equals is not None:
        checks.append(Check("output_equals", output == expect.output_equals,
                            expect.output_equals, _brief(output)))
    if expect.output_contains is not None:
        checks.append(Check("output_contains", expect.output_contains in output,
                            expect.output_contains, _brief(output)))
    if expect.output_matches is not None:
        try:
            found = regex.search(expect.output_matches, output,
                                 timeout=REGEX_TIMEOUT_S) is not None
        except TimeoutError:
            raise CheckError(f"output_matches {expect.output_matches!r} did not finish within "
                             f"{REGEX_TIMEOUT_S:.0f} s on a {len(output)}-character output; "
                             "simplify the lane's regular expression") from None
        checks.append(Check("output_matches", found, expect.output_matches, _brief(output)))
    if expect.end_state is not None:
        actual = result.get("end_state", {})
        checks.append(Check("end_state", is_subset(expect.end_state, actual), expect.end_state,
                            _brief(actual)))
    for name, count in (expect.tool_calls or {}).items():
        name = bounded_name(name)
        if name not in tool_calls and uncounted_tool_calls:
            checks.append(Check(f"tool_calls.{name}", False, count,
                                f"unknown: {uncounted_tool_calls} call(s) to tool names past the "
                                "per-run limit were not counted by name"))
            continue
        actual = tool_calls.get(name, 0)
        checks.append(Check(f"tool_calls.{name}", actual == count, count, actual))
    for file in expect.files:
        checks.extend(_check_file(file, workspace))
    return tuple(checks)


def is_subset(expected: Any, actual: Any) -> bool:
    """JSON subset: objects may carry more keys, everything else must be equal (and of the same
    JSON type: `true` is not `1`)."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(
            key in actual and is_subset(value, actual[key]) for key, value in expected.items())
    if isinstance(expected, list):
        return (isinstance(actual, list) and len(actual) == len(expected)
                and all(is_subset(e, a) for e, a in zip(expected, actual)))
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(expected) is type(actual) and expected == actual
    if isinstance(expected, (int, float)) and isinstance(actual, (int, float)):
        return expected == actual
    return type(expected) is type(actual) and expected == actual


def _check_file(file: FileExpectation, workspace: Path) -> list[Check]:
    label = f"files[{file.path}]"
    # Compare resolved paths: the workspace itself may sit behind a symlink (/tmp on macOS).
    base = os.path.realpath(workspace)
    real = os.path.realpath(workspace / file.path)
    inside = real.startswith(base + os.sep)
    readable = inside and os.path.isfile(real)
    checks = []
    if file.exists is not None:
        # Anything at the path exists: a symlink to elsewhere (even a dangling one), a folder,
        # a FIFO. `exists = false` holds only when there is nothing there at all.
        present = os.path.lexists(workspace / file.path)
        seen = readable if readable or not present else _kind(workspace / file.path, inside)
        ok = present == file.exists if not file.exists else readable
        checks.append(Check(f"{label}.exists", ok, file.exists, seen))
    if file.json_length is None and file.json_subset is None:
        if file.exists is None:
            checks.append(Check(f"{label}.exists", readable, True, readable))
        return checks
    exists = readable
    data, problem = _read_json(real) if exists else (None, "missing" if inside else
                                                      "points outside the workspace")
    if file.json_length is not None:
        length = len(data) if isinstance(data, (list, dict)) else None
        checks.append(Check(f"{label}.json_length", problem is None and length == file.json_length,
                            file.json_length, problem or (length if length is not None
                                                          else f"not a list: {_brief(data)}")))
    if file.json_subset is not None:
        checks.append(Check(f"{label}.json_subset",
                            problem is None and is_subset(file.json_subset, data),
                            file.json_subset, problem or _brief(data)))
    return checks


def _kind(path: Path, inside: bool) -> str:
    """What stands at a path that is not a regular file inside the workspace."""
    if not inside:
        return "a path that leads outside the workspace"
    if path.is_symlink():
        return "a dangling symlink"
    if path.is_dir():
        return "a folder"
    return "not a regular file"


def _read_json(path: str) -> tuple[Any, str | None]:
    try:
        if os.path.getsize(path) > MAX_FILE_BYTES:
            return None, f"larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB, not read"
        with open(path, "rb") as handle:
            return json.loads(handle.read()), None
    except OSError as exc:
        return None, f"unreadable: {exc.strerror}"
    except (ValueError, RecursionError):
        return None, "not valid JSON"


def _brief(value: Any) -> Any:
    """Keeps values in checks small: long text and large JSON become an excerpt."""
    if isinstance(value, str):
        return value if len(value) <= BRIEF_CHARS else value[:BRIEF_CHARS] + "…"
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)[:BRIEF_CHARS]
    return value if len(text) <= BRIEF_CHARS else text[:BRIEF_CHARS] + "…"
