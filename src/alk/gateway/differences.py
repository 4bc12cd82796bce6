"""Comparing JSON values as a replay compares a request (or a tool call's arguments) with its
recording: keys sorted, the run's secrets redacted from every string (keys too), and the first
path where two values differ, quoted redacted and cut. Walked with stacks, not recursion: the
parser allows 100 levels."""

from __future__ import annotations

import json
from typing import Any, Callable

from alk.redaction import ELLIPSIS, Redactor

# How much of a difference is quoted: the whole message, each value in it, the path, and how
# much of a long text is kept before the first character that differs.
DIFFERENCE_CHARS = 200
VALUE_CHARS = 60
PATH_CHARS = 80
CONTEXT_CHARS = 20
_NO_SECRETS = Redactor()


def sorted_json(value: Any, text: Callable[[str], str] | None = None) -> Any:
    """`value` with every object's keys in sorted order and, with `text`, every string (a key
    too) as `text` makes it. Walked with a stack, not recursion: parse allows 100 levels."""
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(value, root, 0)]
    while stack:
        source, target, slot = stack.pop()
        if isinstance(source, dict):
            # Two keys that redact to one are one key: the first in order, popped last.
            keys = sorted((text(key), key) for key in source) if text else \
                [(key, key) for key in sorted(source)]
            copy: Any = dict.fromkeys(new for new, _ in keys)
            stack.extend((source[old], copy, new) for new, old in keys)
        elif isinstance(source, list):
            copy = [None] * len(source)
            stack.extend((child, copy, index) for index, child in enumerate(source))
        else:
            copy = text(source) if text and isinstance(source, str) else source
        target[slot] = copy
    return root[0]


def redacted(request: dict, redactor: Redactor) -> dict:
    """A request with the run's secrets redacted from every string in it, its keys too."""
    return sorted_json(request, redactor.redact) if redactor else request



def _same_kind(expected: Any, actual: Any) -> bool:
    # JSON's true is not 1, though Python's True == 1; 1 and 1.0 are one number.
    number = (int, float)
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(expected) is type(actual)
    if isinstance(expected, number) and isinstance(actual, number):
        return True
    return type(expected) is type(actual)


def show(value: Any, redactor: Redactor, start: int = 0) -> str:
    """A value as the message quotes it: redacted, then cut; a long text from a little before
    `start`, where it first differs."""
    if value is _MISSING:
        return "nothing"
    if isinstance(value, str):
        text = redactor.redact(value)
        skip = max(0, min(start, len(text)) - CONTEXT_CHARS)
        quoted = redactor.cut(text[skip:], VALUE_CHARS)
        return ("'" + ELLIPSIS if skip else "'") + quoted + "'"
    return redactor.cut(json.dumps(value, ensure_ascii=False, sort_keys=True), VALUE_CHARS)


_MISSING = object()


def _first_char_differing(expected: str, actual: str) -> int:
    for index, (one, other) in enumerate(zip(expected, actual)):
        if one != other:
            return index
    return min(len(expected), len(actual))


def first_difference(expected: Any, actual: Any, path: str = "", *,
                     redactor: Redactor = _NO_SECRETS) -> str | None:
    """Where two JSON values first differ, as "messages[2].content: expected 'a…', got 'b…'"
    (at most DIFFERENCE_CHARS characters, values redacted), or None when they are equal."""
    stack = [(expected, actual, path)]
    while stack:
        one, other, where = stack.pop()
        if not _same_kind(one, other):
            return _difference(where, one, other, redactor)
        if isinstance(one, dict):
            keys = sorted(set(one) | set(other), reverse=True)
            stack.extend((one.get(key, _MISSING), other.get(key, _MISSING),
                          f"{where}.{key}" if where else str(key)) for key in keys)
        elif isinstance(one, list):
            size = max(len(one), len(other))
            stack.extend((one[index] if index < len(one) else _MISSING,
                          other[index] if index < len(other) else _MISSING,
                          f"{where}[{index}]") for index in reversed(range(size)))
        elif one != other:
            return _difference(where, one, other, redactor)
    return None


def _difference(where: str, expected: Any, actual: Any, redactor: Redactor) -> str:
    start = (_first_char_differing(redactor.redact(expected), redactor.redact(actual))
             if isinstance(expected, str) and isinstance(actual, str) else 0)
    where = redactor.redact(where or "request")
    if len(where) > PATH_CHARS:
        where = ELLIPSIS + where[-(PATH_CHARS - 1):]
    return redactor.cut(f"{where}: expected {show(expected, redactor, start)}, "
                        f"got {show(actual, redactor, start)}", DIFFERENCE_CHARS)
