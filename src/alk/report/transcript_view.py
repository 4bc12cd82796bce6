"""`alk show`'s pieces: a page of transcript events as rows of short, escaped cells, and what
frames it (which repeat, how many events, the next page's command, whether the file is intact).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Collection, Mapping, Sequence

from rich.table import Table
from rich.text import Text

from alk.report.safe_text import DASH, json_text, one_line, new_table, printable, style_of
from alk.transcript import TranscriptPage

PAYLOAD_CHARS = 160
FIELD_CHARS = 24


@dataclass(frozen=True, slots=True)
class EventRow:
    """One transcript event as `alk show` prints it: short escaped cells, never the payload."""

    seq: str
    t: str
    source: str
    channel: str
    type: str
    summary: str
    style: str


def event_row(event: Mapping[str, Any]) -> EventRow:
    """An event digested as soon as it is read, so that a page of any transcript holds rows
    of a few hundred characters, whatever the payloads weighed."""
    return EventRow(
        _cell(event.get("seq", ""), FIELD_CHARS), _time(event.get("t")),
        _cell(event.get("source", ""), FIELD_CHARS), _cell(event.get("channel", ""), FIELD_CHARS),
        _cell(event.get("type", ""), FIELD_CHARS), _cell(_summary(event), PAYLOAD_CHARS),
        _event_style(event))


def transcript_table(rows: Sequence[EventRow]) -> Table:
    """A page of transcript events, one row each."""
    table = new_table(("seq", {"justify": "right"}), ("t (s)", {"justify": "right"}), ("source", {}),
                   ("channel", {}), ("type", {}), ("payload", {"overflow": "fold", "ratio": 1}))
    for row in rows:
        table.add_row(Text(row.seq), Text(row.t), Text(row.source), Text(row.channel),
                      Text(row.type), Text(row.summary), style=row.style)
    return table


def page_summary(page: TranscriptPage, channels: Collection[str] | None,
                 command: tuple[str, str] | None) -> Text:
    """Which events the page showed, of how many, and the command for the next (or last) one."""
    where = (printable(f" on {', '.join(sorted(channels))} ({page.total:,} in all)")
             if channels else "")
    if page.rows:
        last = page.first + len(page.rows) - 1
        text = Text(f"events {page.first:,}–{last:,} of {page.matching:,}{where}", style="bold")
    else:
        text = Text(f"no event at {page.first:,}: there are {page.matching:,}{where}",
                    style="bold yellow")
    if command is not None:
        text.append(f"\n{command[0]}: ", style="dim").append(printable(command[1]))
    return text


def repeat_header(run_id: str, scenario: str, repeat: int, entry: Mapping[str, Any]) -> Text:
    """`alk show`'s first line: which repeat, and how it ended."""
    return Text.assemble((printable(str(run_id)), "bold"),
                         printable(f" {scenario} repeat {repeat}: {entry.get('outcome')}/"
                                   f"{entry.get('cause')} {DASH} {entry.get('detail') or ''}"))


def transcript_hash(entry: Mapping[str, Any], intact: bool) -> Text:
    """Whether the transcript still is what alk wrote: the sha256 in the result says."""
    return Text.assemble(
        (printable(f"{entry.get('transcript')}  sha256 {entry.get('sha256')} "), "dim"),
        ("matches the file", "green") if intact else
        ("does NOT match the file: it changed after the run", "bold red"))


def _cell(value: Any, limit: int) -> str:
    # Cut before escaping, which is cheaper on a large value, and again after, since an escape
    # is up to ten characters long: a row stays short whatever the worker wrote.
    return one_line(printable(one_line(value, limit)), limit)


def _time(t: Any) -> str:
    if isinstance(t, bool) or not isinstance(t, int | float):
        return ""
    try:
        return f"{float(t):.3f}"
    except OverflowError:  # an integer too large for a float: not a time alk wrote
        return _cell(t, FIELD_CHARS)


def _event_style(event: Mapping[str, Any]) -> str:
    """Worker rows plain, harness rows cyan, so the harness's own voice stands apart."""
    payload, kind = event.get("payload"), event.get("type")
    payload = payload if isinstance(payload, Mapping) else {}
    if event.get("source") != "harness":
        return ""  # a worker may call its own events "violation": only alk's are red
    if kind == "violation" or (kind == "check" and not payload.get("ok")):
        return "bold red"
    if kind == "attribution":
        return "bold " + (style_of(payload.get("outcome")) or "green")
    return "yellow" if kind in ("abort", "timeout", "truncated") else "cyan"


def _summary(event: Mapping[str, Any]) -> str:
    """A one-line digest of a payload; the kinds a reviewer reads most get a bespoke shape."""
    payload, kind, channel = event.get("payload"), event.get("type"), event.get("channel")
    if not isinstance(payload, Mapping):
        line = payload if payload is not None else ""
    elif channel == "tool" and kind == "call":
        args = payload.get("args")
        inner = (", ".join(f"{k}={json_text(v)}" for k, v in args.items())
                 if isinstance(args, Mapping) else json_text(args or ""))
        line = f"{payload.get('name')}({inner})"
    elif channel == "tool" and kind == "result":
        if payload.get("ok"):
            output = f" → {json_text(payload['output'])}" if "output" in payload else ""
            line = f"{payload.get('name')} ok{output}"
        else:
            line = f"{payload.get('name')} error: {payload.get('error', '')}"
    elif kind == "result" and "stop_reason" in payload:
        line = (f"stop_reason={payload.get('stop_reason')} "
                f"output={one_line(payload.get('output', ''), 100)!r}")
    elif kind == "check":
        # Cut each side alone so that a long expected value cannot hide the actual one.
        line = (f"{'✓' if payload.get('ok') else '✗'} {payload.get('name')} "
                f"expected {one_line(json_text(payload.get('expected')), 70)} "
                f"actual {one_line(json_text(payload.get('actual')), 70)}")
    elif kind == "attribution":
        line = (f"{payload.get('outcome')}/{payload.get('cause')} {DASH} "
                f"{payload.get('detail', '')}")
    elif kind == "violation" and "kind" in payload:
        line = f"{payload['kind']} (line {payload.get('line')}): {payload.get('detail', '')}"
    elif kind == "line" and "text" in payload:
        line = payload["text"]
    else:
        line = payload
    return one_line(line, PAYLOAD_CHARS)


def repeat_facts(entry: Mapping[str, Any]) -> Text:
    """One repeat's process facts, for `alk show`."""
    entry = printable(entry)
    status = (f"signal {entry['signal']}" if entry.get("signal") is not None
              else f"exit {entry.get('exit_code')}")
    facts = [status, f"{entry.get('duration_s') or 0:.2f} s"]
    if entry.get("peak_rss_mb") is not None:
        facts.append(f"peak RSS {entry['peak_rss_mb']:.1f} MB")
    if entry.get("cpu_s") is not None:
        facts.append(f"CPU {entry['cpu_s']:.2f} s")
    levels = [f"{name} {entry[name]}" for name in ("containment", "network", "filesystem")
              if entry.get(name)]
    return Text(" · ".join(facts + levels), style="dim")
