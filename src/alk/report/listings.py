"""The listings: lanes (`alk lanes`), the cause vocabulary (`alk causes`), a worker's
conformance findings (`alk check-worker`) and what this machine gives (`alk doctor`)."""

from __future__ import annotations

from typing import Any, Sequence

from rich.console import Group, RenderableType
from rich.text import Text

from alk.causes import CATALOGUE
from alk.records import Lane
from alk.report.safe_text import cell, new_table, one_line, printable, style_of


def lanes_table(lanes: Sequence[Lane], errors: Sequence[tuple[str, str]] = ()) -> RenderableType:
    """The lanes found, then one red row per lane file that failed to load, with its message."""
    table = new_table(("Lane", {"style": "bold", "no_wrap": True}), ("Framework", {}),
                   ("Requirement", {}),
                   ("Scenarios", {"ratio": 1}), ("Timeout", {"justify": "right"}),
                   ("Repeats", {"justify": "right"}), ("Path", {"overflow": "fold"}))
    for lane in lanes:
        table.add_row(
            cell(lane.name), cell(lane.framework), cell(lane.requirement or "any"),
            cell(", ".join(s.id for s in lane.scenarios)), cell(f"{lane.timeout_s:g} s"),
            cell(lane.repeats), cell(lane.path),
        )
    if lanes and errors:
        table.add_section()
    for path, message in errors:
        # The message goes in the widest column; the path column says which file to fix.
        table.add_row(Text("✗ not loaded"), Text(""), Text(""), cell(one_line(message, 400)),
                      Text(""), Text(""), cell(path), style="red")
    if not lanes and not errors:
        table.add_row(Text("no lanes found", style="dim"))
    return table


def causes_table() -> RenderableType:
    """The cause vocabulary, grouped by outcome as `docs/causes.md` lists it."""
    table = new_table(("Cause", {"style": "bold", "no_wrap": True}), ("Outcome", {"no_wrap": True}),
                   ("Meaning", {"ratio": 3}), ("What to do", {"ratio": 2}))
    previous = None
    for cause, info in CATALOGUE.items():
        if previous is not None and info.outcome != previous:
            table.add_section()
        previous = info.outcome
        table.add_row(cell(cause.value), cell(info.outcome.value, style_of(info.outcome)),
                      cell(info.meaning), cell(info.action))
    return table


_LEVEL_MARKS = {"ok": ("✓", "green"), "warn": ("!", "yellow"), "fail": ("✗", "bold red")}


def findings_view(findings: Sequence[Any]) -> RenderableType:
    """`alk check-worker`'s findings: a mark, what was seen, and what to change."""
    lines = []
    for finding in findings:
        mark, style = _LEVEL_MARKS[str(finding.level)]
        line = Text.assemble((f"{mark} ", style), (printable(str(finding.title)), style))
        if finding.detail:
            line.append(f"\n    {printable(one_line(finding.detail, 300))}")
        if finding.hint:
            line.append(f"\n    → {printable(str(finding.hint))}", style="dim")
        lines.append(line)
    failed = sum(1 for f in findings if not f.ok)
    verdict = (Text("the worker speaks protocol v1", style="bold green") if not failed
               else Text(f"{failed} problem(s) to fix", style="bold red"))
    return Group(*lines, Text(), verdict)


def doctor_view(facts: Sequence[tuple[str, str, str]]) -> RenderableType:
    """`alk doctor`: what this machine gives a worker, and why."""
    # A path in the reason is one long word: fold it rather than lose its end.
    table = new_table(("", {"style": "bold", "no_wrap": True}), ("", {"no_wrap": True}),
                   ("", {"style": "dim", "overflow": "fold"}))
    table.show_header = False
    for name, value, why in facts:
        table.add_row(cell(name), cell(value), cell(why))
    return table
