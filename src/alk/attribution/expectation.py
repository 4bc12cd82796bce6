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

from alk import untrusted_json
from alk.records import Check, Expectations, FileExpectation
from alk.redaction import Redactor
from alk.runner.protocol import MAX_NAME_CHARS

# A workspace file larger than this is not read, nor one with more JSON values: a worker could
# leave gigabytes, or millions of tiny objects that take far more memory parsed than on disk.
MAX_FILE_BYTES = 8 * 1024 * 1024
MAX_JSON_VALUES = 100_000
BRIEF_CHARS = 300
# A lane's regular expression runs on output a worker chose: bound it like any other work.
REGEX_TIMEOUT_S = 1.0


def check(expect: Expectations, result: Mapping[str, Any], tool_calls: Mapping[str, int],
          workspace: Path, uncounted_tool_calls: int = 0,
          redactor: Redactor = Redactor()) -> tuple[Check, ...]:
    """alk's checks of a finished run. The values they keep are redacted and cut (`redactor`);
    what they compare is what the worker sent."""

    def _brief(value: Any) -> Any:
        return brief(value, redactor)

    checks: list[Check] = []
    output = result.get("output")
    if expect.stop_reason is not None:
        actual = result.get("stop_reason")
        checks.append(Check("stop_reason", actual == expect.stop_reason, expect.stop_reason,
                            _brief(actual)))
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
            checks.append(Check("output_matches", found, expect.output_matches, _brief(output)))
        except TimeoutError:
            # The lane's expression backtracks, but the output it could not confirm is the
            # worker's choice: were this void, a worker could pick it to hide a failure.
            checks.append(Check("output_matches", False, expect.output_matches,
                                f"not confirmed: the expression did not finish within "
                                f"{REGEX_TIMEOUT_S:.0f} s on this {len(output):,}-character "
                                "output (simplify the lane's regular expression)"))
    if expect.end_state is not None:
        actual = result.get("end_state", {})
        checks.append(Check("end_state", is_subset(expect.end_state, actual), expect.end_state,
                            _brief(actual)))
    for name, count in (expect.tool_calls or {}).items():
        name = redactor.bounded(name, MAX_NAME_CHARS)  # as the protocol keeps names
        if name not in tool_calls and uncounted_tool_calls:
            checks.append(Check(f"tool_calls.{name}", False, count,
                                f"unknown: {uncounted_tool_calls} call(s) to tool names past the "
                                "per-run limit were not counted by name"))
            continue
        actual = tool_calls.get(name, 0)
        checks.append(Check(f"tool_calls.{name}", actual == count, count, actual))
    for file in expect.files:
        checks.extend(_check_file(file, workspace, redactor))
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


def _check_file(file: FileExpectation, workspace: Path, redactor: Redactor) -> list[Check]:
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
                            file.json_length, problem or (
                                length if length is not None
                                else f"not a list: {brief(data, redactor)}")))
    if file.json_subset is not None:
        checks.append(Check(f"{label}.json_subset",
                            problem is None and is_subset(file.json_subset, data),
                            file.json_subset, problem or brief(data, redactor)))
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
            data = handle.read(MAX_FILE_BYTES + 1)  # it may have grown since
        if len(data) > MAX_FILE_BYTES:
            return None, f"larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB, not read"
        return untrusted_json.parse(data, max_values=MAX_JSON_VALUES), None
    except OSError as exc:
        return None, f"unreadable: {exc.strerror}"
    except untrusted_json.Rejected as exc:
        return None, f"not read: {exc}"


def brief(value: Any, redactor: Redactor) -> Any:
    """Keeps values in checks small and secret-free: a value whose JSON is short stays a value
    (redacted in its strings and keys), longer text and JSON become a redacted excerpt."""
    if isinstance(value, str):
        return redactor.cut(value, BRIEF_CHARS)
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return redactor.cut(repr(value), BRIEF_CHARS)
    return redactor.redact_value(value) if len(text) <= BRIEF_CHARS else \
        redactor.cut(text, BRIEF_CHARS)
