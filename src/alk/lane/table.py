"""Typed access to one table of a lane file while it is validated: every value is checked for its
kind, every unknown key is refused with the closest known one, and every message names the
file, the field, what was expected and what was found, so that a lane author can fix it
without reading alk's code.
"""

from __future__ import annotations

import difflib
import math
import re
from typing import Any

from alk.errors import LaneError

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


# ---------------------------------------------------------------------------------------------


class Table:
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


def choice(table: Table, key: str, choices: tuple[str, ...]) -> str | None:
    value = table.text(key)
    if value is not None and value not in choices:
        table.fail(key, f"must be one of {', '.join(map(repr, choices))}, got {value!r}")
    return value


def ordinal(table: Table, key: str) -> int:
    value = table.get(key, int, default=1)
    if value < 1:
        table.fail(key, f"must be a whole number ≥ 1, got {value}")
    return value


def require_json(value: Any, where: str, field: str) -> None:
    """TOML has dates and times; JSON, which the worker and the checks speak, does not."""
    if isinstance(value, dict):
        for key, item in value.items():
            require_json(item, where, f"{field}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            require_json(item, where, f"{field}[{index}]")
    elif not isinstance(value, (str, int, float, bool)):
        raise LaneError(f"{where}: {field} must hold only JSON values (text, numbers, booleans, "
                        f"lists, tables), got a {type(value).__name__} ({value}); quote it")
    elif isinstance(value, float) and not math.isfinite(value):
        raise LaneError(f"{where}: {field} must be a finite number, got {value}")


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
