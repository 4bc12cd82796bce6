"""Parsing JSON that a worker wrote (its protocol lines, the files it leaves), within bounds.

`json.loads` accepts what alk's later stages cannot take: NaN and Infinity (and numbers too large
for a float, which become infinity) that strict readers reject once alk writes them back, nesting
deep enough that any recursive walk hits Python's recursion limit, and millions of values in a
few megabytes. `parse` refuses all three with a reason, so that nothing past it has to.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

MAX_DEPTH = 100
# A JSON string, escapes and all: its commas and brackets are text, not values.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)


class Rejected(ValueError):
    """JSON alk will not take; `kind` names why: not_json, not_finite, too_deep, too_many."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind


class _NotFinite(ValueError):
    pass


def _constant(name: str) -> float:
    raise _NotFinite(name)


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NotFinite(text)
    return value


def parse(text: str | bytes, *, max_depth: int = MAX_DEPTH, max_values: int | None = None
          ) -> Any:
    """The JSON value in `text`, or `Rejected`. `max_values` bounds the number of values,
    checked before parsing: from the brackets and commas, which can only overcount, and when
    those are too many, from those outside strings (`values_outside_strings`)."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    brackets = data.count(b"[") + data.count(b"{")
    if max_values is not None:
        values = brackets + data.count(b",") + 1
        if values > max_values:
            values = values_outside_strings(data)
        if values > max_values:
            raise Rejected("too_many", f"about {values:,} JSON values, more than the "
                                       f"{max_values:,} alk reads")
    try:
        value = json.loads(text, parse_constant=_constant, parse_float=_finite)
    except _NotFinite:
        raise Rejected("not_finite", "a number is not finite (JSON has no NaN or Infinity, and "
                                     "this one is too large for a float)") from None
    except (ValueError, RecursionError):
        raise Rejected("not_json", "not valid JSON") from None
    # A nesting deeper than the limit needs more brackets than that: count before walking.
    if brackets > max_depth and depth_exceeds(value, max_depth):
        raise Rejected("too_deep", f"JSON nested deeper than {max_depth} levels")
    return value


def values_outside_strings(data: bytes) -> int:
    """At least as many as the values `json.loads(data)` makes, counted without parsing:
    brackets and commas outside strings, and one (a conversation's text has many commas).
    Up to where json.loads stops, it reads strings as this does, so invalid bytes are bounded
    too. UTF-16 and UTF-32, which json.loads also reads, hold NUL bytes, which JSON in UTF-8
    never does: their strings are not looked into (the count then includes their commas)."""
    bare = data if b"\0" in data else _STRING.sub(b"", data)
    return bare.count(b"[") + bare.count(b"{") + bare.count(b",") + 1


def depth_exceeds(value: Any, limit: int) -> bool:
    """Is `value` nested deeper than `limit` levels? Walked with a stack, not recursion."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children
                     if isinstance(child, (dict, list)))
    return False
