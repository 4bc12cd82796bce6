"""`alk show`'s pieces: a page of transcript events as rows of short, escaped cells, and what
frames it (which repeat, how many events, the next page's command, whether the file is intact).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Collection, Mapping, Sequence

from rich.console import Group, RenderableType
from rich.padding import Padding
from rich.text import Text

from alk.cost import of_summary
from alk.records import RepeatResult
from alk.report.cost import repeat_tokens_line
from alk.report.safe_text import DASH, cut, json_text, one_line, printable, style_of
from alk.result.document import CutShort
from alk.transcript.reader import TranscriptPage

PAYLOAD_CHARS = 240
FIELD_CHARS = 24
# Payloads sit under their event's heading, indented by this much.
INDENT = 7


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


def event_row(event: Mapping[str, Any], full: bool = False) -> EventRow:
    """An event digested as soon as it is read, so that a page of any transcript holds rows
    of a few hundred characters, whatever the payloads weighed. `full` (`alk show --full`):
    the payload whole instead, as indented JSON, escaped as every other cell is; a page then
    holds up to its events' size (alk keeps an event of more than 1 MiB as an excerpt)."""
    return EventRow(
        _cell(event.get("seq", ""), FIELD_CHARS), _time(event.get("t")),
        _cell(event.get("source", ""), FIELD_CHARS), _cell(event.get("channel", ""), FIELD_CHARS),
        _cell(event.get("type", ""), FIELD_CHARS),
        _whole_payload(event) if full else _payload(event), _event_style(event))


def transcript_events(rows: Sequence[EventRow]) -> RenderableType:
    """A page of transcript events, stacked for 80 columns: each event's seq, time, source and
    channel/type on a line, its payload under it with the whole width to wrap in. A run of
    stderr lines (a traceback, say) is one block under one heading, indentation kept."""
    blocks: list[RenderableType] = []
    at = 0
    while at < len(rows):
        row = rows[at]
        if row.channel == "stderr" and row.type == "line":
            end = at
            while (end + 1 < len(rows) and rows[end + 1].channel == "stderr"
                   and rows[end + 1].type == "line"):
                end += 1
            run = rows[at:end + 1]
            seq = row.seq if end == at else f"{row.seq}–{run[-1].seq}"
            lines = Text("\n".join(r.summary for r in run), overflow="fold")
            blocks += [_heading(seq, row, f"worker stderr ({len(run)} lines)" if end > at
                                else "worker stderr"), Padding(lines, (0, 0, 0, INDENT))]
            at = end + 1
            continue
        # A harness event's channel is `harness`: the source is not said twice.
        what = (f"{row.channel}/{row.type}" if row.channel == row.source
                else f"{row.source} {row.channel}/{row.type}")
        blocks.append(_heading(row.seq, row, what))
        if row.summary:
            blocks.append(Padding(Text(row.summary, style=row.style, overflow="fold"),
                                  (0, 0, 0, INDENT)))
        at += 1
    return Group(*blocks)


def _heading(seq: str, row: EventRow, what: str) -> Text:
    return Text.assemble((f"{seq:>5}", "bold"), f"  {row.t:>7} s  " if row.t else "  ",
                         (what, row.style or "bold"))


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


def repeat_header(run_id: str, scenario: str, repeat: int,
                  entry: RepeatResult | CutShort) -> Text:
    """`alk show`'s first lines: which repeat, how it ended, and why."""
    if isinstance(entry, CutShort):
        ended, style = "interrupted", "bold yellow"
    else:
        ended = "/".join(part for part in (entry.outcome, entry.cause) if part)
        style = "bold " + (style_of(entry.outcome) or "yellow")
    text = Text.assemble((printable(f"run {run_id} · {scenario} · repeat {repeat}"), "bold"),
                         "\n", (printable(ended), style))
    if entry.detail:
        text.append(printable(f" {DASH} {entry.detail}"))
    cost = of_summary(entry.model) if isinstance(entry, RepeatResult) else None
    if cost is not None:  # a proxy's or a replay's: the provider's own count
        text.append(f"\n{repeat_tokens_line(cost)}", style="dim")
    return text


def transcript_hash(entry: RepeatResult | CutShort, intact: bool) -> Text:
    """Whether the transcript still is what alk wrote: the sha256 in the result says."""
    if isinstance(entry, CutShort) or not entry.sha256:
        return Text.assemble(("transcript  ", "dim"), printable(entry.transcript),
                             ("\nsha256      none: the repeat never finished, so alk never "
                              "hashed its transcript", "yellow"))
    return Text.assemble(
        ("transcript  ", "dim"), printable(entry.transcript),
        ("\nsha256      ", "dim"), printable(entry.sha256), "\n            ",
        ("matches the file", "green") if intact else
        ("does NOT match the file: it changed after the run", "bold red"))


def _cell(value: Any, limit: int) -> str:
    # Cut before escaping, which is cheaper on a large value, and again after, since an escape
    # is up to ten characters long: a row stays short whatever the worker wrote.
    return one_line(printable(one_line(value, limit)), limit)


def _payload(event: Mapping[str, Any]) -> str:
    payload = event.get("payload")
    if (event.get("type") == "line" and isinstance(payload, Mapping)
            and isinstance(payload.get("text"), str)):
        # A stderr line's indentation is a traceback's structure: keep it, cut only the end.
        return cut(printable(cut(payload["text"].expandtabs(4).rstrip(), PAYLOAD_CHARS)),
                   PAYLOAD_CHARS)
    return _cell(_summary(event), PAYLOAD_CHARS)


def _whole_payload(event: Mapping[str, Any]) -> str:
    payload = event.get("payload")
    if (event.get("type") == "line" and isinstance(payload, Mapping)
            and isinstance(payload.get("text"), str)):
        return printable(payload["text"].expandtabs(4).rstrip())
    if payload is None:
        return ""
    try:
        # ensure_ascii=False keeps a worker's non-ASCII text readable; `printable` then escapes
        # what JSON leaves as it is (bidi overrides, zero-width characters).
        text = json.dumps(payload, ensure_ascii=False, indent=2, default=str)
    except (RecursionError, ValueError):  # a value from a file alk did not write as it is
        text = json_text(payload)
    return printable(text)


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
        # Spaced JSON, so that a long payload wraps between its items rather than inside them.
        line = json_text(payload, spaced=True)
    return one_line(line, PAYLOAD_CHARS)


def repeat_facts(entry: RepeatResult | CutShort) -> Text:
    """One repeat's process facts, for `alk show`."""
    if isinstance(entry, CutShort):
        return Text("interrupted: no exit, no verdict", style="dim")
    entry = printable(entry)
    status = (f"signal {entry.signal}" if entry.signal is not None else f"exit {entry.exit_code}")
    facts = [status, f"{entry.duration_s:.2f} s"]
    if entry.peak_rss_mb is not None:
        facts.append(f"peak RSS {entry.peak_rss_mb:.1f} MB")
    if entry.cpu_s is not None:
        facts.append(f"CPU {entry.cpu_s:.2f} s")
    levels = [f"{name} {level}" for name, level in (
        ("containment", entry.containment), ("network", entry.network),
        ("filesystem", entry.filesystem)) if level]
    return Text(" · ".join(facts + levels), style="dim")
