"""The bounded view of transcripts a page embeds: for each repeat the page lists, its first
events and its last, within budgets, so that a page stays small whatever a worker wrote.

What is kept: a repeat's first events (up to HEAD_EVENTS, read within HEAD_READ_BYTES) and its
last (up to TAIL_EVENTS, within the last TAIL_READ_BYTES), where the exit, the checks and the
verdict are. The bytes between are never read, so a 64 MiB transcript costs what a small one
does. Each event is a one-line summary; a payload the summary cuts is folded under it, itself
cut at FOLD_CHARS.

The budgets: one repeat's view may add REPEAT_EMBED_CHARS to the page (a quarter of it kept
for its last events, served first), and every view together PAGE_EMBED_CHARS. Failed and void
repeats spend the page's budget first, then the passes of scenarios that did not pass, then
the rest: those are the transcripts a reader opens the page for. An event is counted as its
text and EVENT_MARKUP_CHARS for its markup.

What is left out is said where it was (which events, how many bytes not read, the file's size),
and a view that could not be embedded says why; the page links every repeat's file.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence
from urllib.parse import quote

from alk.report.safe_text import cut, printable
from alk.report.transcript_view import event_row

# A repeat's embedded view: its first events and its last, each part read within a bound.
HEAD_EVENTS = 150
TAIL_EVENTS = 50
HEAD_READ_BYTES = 256 * 1024
TAIL_READ_BYTES = 64 * 1024
# What one repeat's view may add to the page (K), and every view together: failed and void
# repeats are served first, then the passes of scenarios that did not pass, then the rest.
REPEAT_EMBED_CHARS = 48 * 1024
PAGE_EMBED_CHARS = 6 * 1024 * 1024
# A payload its one-line summary cuts is folded under it, itself cut at FOLD_CHARS.
FOLD_CHARS = 4000
FOLD_SLACK_CHARS = 32
# What an event's markup costs beyond its text, counted against the budgets.
EVENT_MARKUP_CHARS = 220
_CHANNELS = frozenset({"agent", "tool", "model", "user", "framework", "stderr", "harness"})


@dataclass(frozen=True, slots=True)
class _Excerpt:
    head: list[tuple[dict[str, Any] | None, int]]  # (event, or None when unreadable; bytes)
    tail: list[tuple[dict[str, Any] | None, int]]
    size: int  # the file's bytes
    gap: int  # bytes between head and tail, not read


def excerpts(wanted: Sequence[tuple[str, int]], out_dir: Path) -> dict[int, dict[str, Any]]:
    """The view a page embeds of each wanted transcript, by its place in `wanted`: each a
    transcript's path (relative to `out_dir`) and its rank (0 a failed or void repeat, 1 a pass
    of a scenario that did not pass, 2 any other). Lower ranks are read first, while the
    page's budget lasts; a path outside `out_dir`'s transcripts folder is not read."""
    budget = PAGE_EMBED_CHARS
    views: dict[int, dict[str, Any]] = {}
    root = (out_dir / "transcripts").resolve()
    for at in sorted(range(len(wanted)), key=lambda i: wanted[i][1]):
        transcript = wanted[at][0]
        if budget <= 0:
            views[at] = _unread(f"not embedded: the page's {_bytes(PAGE_EMBED_CHARS)} for "
                                "transcripts went to failed and void repeats first; open the "
                                "file")
            continue
        views[at] = _view(out_dir / transcript, root, min(REPEAT_EMBED_CHARS, budget))
        budget -= views[at]["chars"]
    return views


def _unread(note: str) -> dict[str, Any]:
    return {"head": [], "tail": [], "gap": None, "note": note, "chars": len(note),
            "events": 0}


def _view(path: Path, root: Path, allowance: int) -> dict[str, Any]:
    """A repeat's transcript as the page embeds it, within `allowance` characters."""
    try:
        resolved = path.resolve()
        if not resolved.is_relative_to(root):
            return _unread("not read: the path is outside the run's transcripts folder")
        excerpt = _excerpt(resolved)
    except OSError as exc:
        return _unread(f"not readable: {exc.strerror or exc}")
    spent = 0
    head: list[dict[str, Any]] = []
    tail: list[dict[str, Any]] = []
    # The tail is served its part first: a failure's verdict is at the end.
    tail_allowance = allowance // 4 if excerpt.tail else 0
    for part, events, limit in ((tail, reversed(excerpt.tail), tail_allowance),
                                (head, iter(excerpt.head), allowance - tail_allowance)):
        used = 0
        for event, size in events:
            shown = _event(event, size)
            if used + shown["chars"] > limit and part:
                break
            part.append(shown)
            used += shown["chars"]
        spent += used
    tail.reverse()
    dropped_head = len(excerpt.head) - len(head)
    dropped_tail = len(excerpt.tail) - len(tail)
    gap = None
    if excerpt.gap or dropped_head or dropped_tail:
        first = _seq(excerpt.head[len(head)][0]) if dropped_head else None
        last = _seq(excerpt.tail[dropped_tail - 1][0]) if dropped_tail else None
        around = (f"events {first}–{last}" if first and last else
                  f"the events after {head[-1]['seq']}" if head and head[-1]["seq"] else
                  "events")
        gap = (f"{around} left out here ({_bytes(excerpt.gap)} not read"
               f"{', more not embedded' if dropped_head or dropped_tail else ''}; "
               f"the file is {_bytes(excerpt.size)}): open the file for every event")
    return {"head": head, "tail": tail, "gap": gap, "note": None,
            "chars": spent + len(gap or ""), "events": len(head) + len(tail)}


def _excerpt(path: Path) -> _Excerpt:
    """The first events (up to HEAD_EVENTS, within HEAD_READ_BYTES) and the last (up to
    TAIL_EVENTS, within TAIL_READ_BYTES), and the bytes between them, never read."""
    with path.open("rb") as file:
        size = os.fstat(file.fileno()).st_size
        head: list[tuple[dict[str, Any] | None, int]] = []
        used = 0
        while len(head) < HEAD_EVENTS and used < HEAD_READ_BYTES:
            raw = file.readline(HEAD_READ_BYTES - used)
            if not raw:
                break
            if not raw.endswith(b"\n") and file.tell() < size:  # longer than what is left
                file.seek(-len(raw), os.SEEK_CUR)
                break
            used += len(raw)
            head.append((_parse(raw), len(raw)))
        head_end = file.tell()
        if head_end >= size:
            return _Excerpt(head, [], size, 0)
        start = max(head_end, size - TAIL_READ_BYTES)
        at_line = start == head_end
        if not at_line:
            file.seek(start - 1)
            at_line = file.read(1) == b"\n"
        file.seek(start)
        block = file.read(size - start)
    lines = block.split(b"\n")
    if not at_line:
        lines = lines[1:]  # the end of a line begun before the block
    if lines and not lines[-1]:
        lines.pop()
    kept = lines[-TAIL_EVENTS:]
    gap = size - head_end - sum(len(line) + 1 for line in kept)
    return _Excerpt(head, [(_parse(line), len(line) + 1) for line in kept], size, max(0, gap))


def _parse(raw: bytes) -> dict[str, Any] | None:
    try:
        event = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    return event if isinstance(event, dict) else None


def _event(event: dict[str, Any] | None, size: int) -> dict[str, Any]:
    """One event as the page shows it: a line of short escaped cells, and the payload folded
    under it when it is long."""
    if event is None:
        summary = f"not a transcript event ({_bytes(size)}: a line cut or changed after the run)"
        return {"seq": "", "t": "", "source": "", "channel": "other", "name": "?",
                "type": "unreadable", "summary": summary, "harness": False, "tone": "warn",
                "payload": None, "chars": len(summary) + EVENT_MARKUP_CHARS}
    row = event_row(event)
    harness = event.get("source") == "harness"
    channel = row.channel if row.channel in _CHANNELS else "other"
    payload = None
    if _folds(event.get("payload"), row.summary):
        text = as_json(event.get("payload"), indent=1)
        payload = {"text": printable(cut(text, FOLD_CHARS)), "chars": len(text),
                   "cut": len(text) > FOLD_CHARS}
    chars = len(row.summary) + EVENT_MARKUP_CHARS + (len(payload["text"]) if payload else 0)
    # alk's own channel is named once: "alk"; another channel alk observed, "alk · model".
    name = "alk" if harness and row.channel == "harness" else (
        f"alk · {row.channel}" if harness else row.channel)
    return {"seq": row.seq, "t": row.t, "source": row.source, "channel": channel,
            "name": name, "type": row.type, "summary": row.summary, "harness": harness,
            "tone": _tone(row.style) if harness else "", "payload": payload, "chars": chars}


def _folds(payload: Any, summary: str) -> bool:
    """Whether the one-line summary leaves some of the payload out: then it is folded under
    it. A summary reshapes some payloads (`name(args)`), a few characters shorter than their
    JSON: those are not folded."""
    if summary.endswith("…"):
        return True
    return len(as_json(payload)) > len(summary) + FOLD_SLACK_CHARS


def _tone(style: str) -> str:
    for colour, tone in (("red", "alert"), ("yellow", "warn"), ("magenta", "void"),
                         ("green", "good")):
        if colour in style:
            return tone
    return ""


def _seq(event: dict[str, Any] | None) -> str:
    value = event.get("seq") if event else None
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else ""


def as_json(value: Any, indent: int | None = None) -> str:
    """A worker's value as JSON text for a page; one nested too deeply to encode is said so."""
    try:
        return json.dumps(value, ensure_ascii=False, default=str, indent=indent)
    except (RecursionError, ValueError):
        return "(not shown: nested too deeply)"


def _bytes(count: int) -> str:
    for unit, size in (("MiB", 2**20), ("KiB", 2**10)):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return f"{count} bytes"


def transcript_link(transcript: str, folder: Path, out_dir: Path) -> str | None:
    """The transcript's address relative to the report folder, as a URL path."""
    if not transcript:
        return None
    relative = os.path.relpath(os.path.abspath(out_dir / transcript), os.path.abspath(folder))
    return quote(Path(relative).as_posix())
