"""Text for the terminal: what a worker sent made safe to show, cut to one line, and the
table and cell shapes every view shares.

Every value from a document or a transcript reaches the terminal through `printable`, and as a
`Text`, never as a string that rich would parse as markup: a worker's output may well contain
`[brackets]`, escape sequences or bidi overrides.
"""

from __future__ import annotations

import json
from dataclasses import fields, is_dataclass, replace
from typing import Any, Iterable, Mapping, TypeVar

import msgspec
from rich import box
from rich.table import Table
from rich.text import Text

from alk.records import Outcome, Verdict

# Verdicts and outcomes share one palette: green passes, red crashes, yellow doubts, magenta void.
STYLES = {
    Verdict.PASS: "green", Verdict.FAIL: "red", Verdict.FLAKY: "yellow", Verdict.VOID: "magenta",
    Outcome.FRAMEWORK_RUNTIME: "red", Outcome.AGENT: "yellow", Outcome.LANE_INFRA: "magenta",
}
DASH = "—"
T = TypeVar("T")


# Control characters a worker may send (ESC starts terminal sequences that clear the screen,
# retitle the window, or fake colours): shown as escapes, never sent to the terminal.
_CONTROLS = {code: f"\\x{code:02x}" for code in (*range(0x00, 0x20), *range(0x7f, 0xa0))
             if code not in (0x09, 0x0a)}
# Characters that fool the eye rather than the terminal: bidi embeddings, overrides and isolates
# reorder the text after them (a line can read the opposite of what it holds); zero-width ones
# and tags (U+E0000 block) hide text; U+2028/U+2029 break lines where none is expected. Lone
# surrogates (a worker's JSON may hold "\\ud800") cannot be encoded for the terminal at all.
_INVISIBLE = (0x061c, *range(0x200b, 0x2010), 0x2028, 0x2029, *range(0x202a, 0x202f),
              *range(0x2060, 0x2065), *range(0x2066, 0x2070), 0xfeff, *range(0xfff9, 0xfffc),
              *range(0xd800, 0xe000), *range(0xe0000, 0xe0080))
_ESCAPES = {**_CONTROLS, **{code: f"\\u{code:04x}" if code <= 0xffff else f"\\U{code:08x}"
                            for code in _INVISIBLE}}


def printable(value: T) -> T:
    """The value with every control and invisible character in its strings (keys too) shown
    as an escape such as `\\x1b` or `\\u202e`. Frozen records (a `RunDocument` and what it
    holds) come back as records of the same types, rebuilt only where a string changed: a clean
    run of 100,000 repeats costs a walk, not a copy."""
    if _clean(value):
        return value
    if isinstance(value, str):
        escaped = value.translate(_ESCAPES)
        # The same object when nothing changed: an enum member (alk's own code) stays one.
        return value if escaped == value else escaped
    if isinstance(value, (list, tuple)):
        items = [item if _clean(item) else printable(item) for item in value]
        if all(new is old for new, old in zip(items, value)):
            return value
        return tuple(items) if isinstance(value, tuple) else items
    names = _record_fields(type(value))
    if names is not None:
        if _clean_json(value):
            return value
        changed = {}
        for name in names:
            old = getattr(value, name)
            if not _clean(old):
                new = printable(old)
                if new is not old:
                    changed[name] = new
        return replace(value, **changed) if changed else value
    if isinstance(value, Mapping):
        pairs = [(k, v, printable(k), printable(v)) for k, v in value.items()]
        if all(k is pk and v is pv for k, v, pk, pv in pairs):
            return value
        return {pk: pv for _, _, pk, pv in pairs}
    return value


# Types that hold no text, and each record type's fields, looked up once: printable walks
# every field of every repeat.
_PLAIN = frozenset({int, float, bool, type(None)})
_FIELDS: dict[type, tuple[str, ...] | None] = {}


def _clean_json(record: Any) -> bool:
    """True when a record surely holds nothing to escape, from a few passes in C over its JSON:
    msgspec writes the C0 controls as escapes after a backslash (`\\u001b`, `\\r`, `\\b`, `\\f`;
    `\\n` and `\\t` are kept anyway) and every other character as it is, where `isprintable`
    finds it. A backslash a worker wrote may read as an escape: then the walk decides, as it
    does for anything msgspec cannot encode (a lone surrogate)."""
    try:
        data = msgspec.json.encode(record)
    except Exception:  # noqa: BLE001 - not encodable: the walk looks at each value instead
        return False
    # ASCII, the common case, is scanned as bytes: there only DEL is unprintable unescaped.
    shown = b"\x7f" not in data if data.isascii() else data.decode().isprintable()
    return shown and (b"\\" not in data or not any(e in data for e in _C0_ESCAPES))


_C0_ESCAPES = (b"\\u00", b"\\r", b"\\b", b"\\f")


def _clean(value: Any) -> bool:
    """Nothing to escape, known at once: a number, None, or a string of printable characters
    (every character escaped is one Python finds unprintable)."""
    return type(value) in _PLAIN or (isinstance(value, str) and value.isprintable())


def _record_fields(kind: type) -> tuple[str, ...] | None:
    """The field names of a dataclass type, None for any other type."""
    if kind not in _FIELDS:
        _FIELDS[kind] = (tuple(f.name for f in fields(kind)) if is_dataclass(kind) else None)
    return _FIELDS[kind]


def new_table(*columns: tuple[str, Mapping[str, Any]], leading: int = 0) -> Table:
    table = Table(box=box.SIMPLE, show_edge=False, pad_edge=False, collapse_padding=True,
                  leading=leading)
    for header, options in columns:
        table.add_column(header, **options)
    return table


def cell(value: Any, style: str = "") -> Text:
    """A cell from any value, escaped: lanes and this machine's facts are trusted, but cheap to
    make safe, and a lane file may still hold what nobody meant."""
    return Text(inline(value), style=style)


def inline(value: Any) -> str:
    """The value escaped as `printable` does, and on one line: a line break or a tab in a name
    a worker gave (its framework, its version) would let it write a line of its own into the
    report, one that reads as alk's."""
    return printable(str(value)).replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")


def style_of(value: Any) -> str:
    return STYLES.get(str(value), "")


def plural(count: Any, noun: str) -> str:
    """"1 repeat", "20 repeats"."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def hanging(rows: Iterable[tuple[str | Text, str | Text | None]], *, gap: int = 1,
            label_style: str = "", value_style: str = "", label_width: int = 0) -> Table:
    """Two columns, a label and its value, for the views' stacked facts: a value that wraps
    hangs under itself, clear of its label. A row whose value is None is left out."""
    grid = Table.grid(padding=(0, gap))
    grid.add_column(no_wrap=True, style=label_style, min_width=label_width)
    grid.add_column(style=value_style, overflow="fold")
    for label, value in rows:
        if value is not None:
            grid.add_row(label, value)
    return grid


def cut(text: str, limit: int) -> str:
    """At most `limit` characters, an ellipsis marking a cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def clip(text: str, limit: int) -> str:
    """At most `limit` characters, cut at a boundary with an ellipsis, never inside a value:
    after a whole clause ("; ") where one ends in the second half, else after a "," or at a
    space. "got \"Order 7…" misreads, and so does "got …": a check is kept whole or left out.
    A text with no boundary in its second half is cut where it must be."""
    if len(text) <= limit:
        return text
    head = text[: limit - 2]
    for boundary in ("; ", ", ", " "):
        at = head.rfind(boundary)
        if at >= limit // 2:
            return head[:at].rstrip(" ,;") + " …"
    return text[: limit - 1] + "…"


def one_line(value: Any, limit: int, *, whole_words: bool = False) -> str:
    """The value on one line (its line breaks shown as ⏎), at most `limit` characters; with
    `whole_words`, cut at a word or value boundary (`clip`)."""
    text = value if isinstance(value, str) else json_text(value)
    joined = " ⏎ ".join(part.strip() for part in text.strip().splitlines() if part.strip())
    return clip(joined, limit) if whole_words else cut(joined, limit)


def json_text(value: Any, spaced: bool = False) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, default=str,
                          separators=(", ", ": ") if spaced else (",", ":"))
    except RecursionError:  # a value from a file that alk did not write as it is
        return "(nested too deeply to show)"
