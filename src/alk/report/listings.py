"""The listings: lanes (`alk lanes`), the cause vocabulary (`alk causes`), a worker's
conformance findings (`alk check-worker`) and what this machine gives (`alk doctor`)."""

from __future__ import annotations

from typing import Any, Sequence

from rich.console import Group, RenderableType
from rich.padding import Padding
from rich.text import Text

from alk.causes import CATALOGUE
from alk.records import Lane, Outcome
from alk.report.safe_text import cell, hanging, new_table, one_line, plural, printable, style_of


def lanes_view(lanes: Sequence[Lane], errors: Sequence[tuple[str, str]] = ()) -> RenderableType:
    """Each lane stacked for 80 columns: name, framework and settings on a line, then its file,
    its scenarios and description wrapped under it; then each file that failed to load, with
    the message that says what to fix."""
    blocks: list[RenderableType] = []
    for lane in lanes:
        head = Text.assemble((printable(lane.name), "bold"), "  ",
                             printable(f"{lane.framework} {lane.requirement or 'any'}"),
                             (f" · timeout {lane.timeout_s:g} s · "
                              f"{plural(lane.repeats, 'repeat')}", "dim"))
        body = _lane_scenarios(lane)
        if lane.description:
            body.append("\n" + printable(one_line(lane.description, 600)), style="italic dim")
        blocks += [head, Padding(body, (0, 0, 0, 2))]
    for path, message in errors:
        blocks += [Text.assemble(("✗ ", "bold red"), (printable(path), "bold red"),
                                 (" not loaded", "red")),
                   Padding(Text(printable(one_line(message, 400))), (0, 0, 0, 2))]
    if not blocks:
        blocks.append(Text("no lanes found", style="dim"))
    return Group(*blocks)


def _lane_scenarios(lane: Lane) -> Text:
    """The lane's file and scenarios; for a lane that names a scenario file, that file too, and
    a mark on each scenario the lane gives itself (`*` in place of the shared one, `+` added),
    with what it skips."""
    shared = lane.shared
    text = Text(printable(str(lane.path)), style="dim")
    if shared is not None:
        text.append(f", scenarios from {printable(str(shared.path))}", style="dim")
    text.append(f"\n{plural(len(lane.scenarios), 'scenario')}: ", style="dim")
    for index, scenario in enumerate(lane.scenarios):
        text.append((", " if index else "") + printable(scenario.id))
        if shared is not None and shared.own(scenario.id):
            text.append("*" if scenario.id in shared.replaced else "+", style="bold")
    if shared is not None:
        legend = [("* its own, in place of the shared", shared.replaced),
                  ("+ its own only", shared.added),
                  (f"skipped: {printable(', '.join(shared.skipped))}", shared.skipped)]
        said = "; ".join(words for words, ids in legend if ids)
        if said:
            text.append(f"\n{said}", style="dim")
    return text


def causes_view() -> RenderableType:
    """The cause vocabulary, grouped by outcome as `docs/causes.md` lists it: each code with
    the first sentence of its meaning; `alk causes CODE` says the rest and what to do."""
    blocks: list[RenderableType] = []
    for outcome, label in _SECTIONS:
        # One width for the codes of every section, so that the meanings line up.
        grid = hanging(((cell(cause.value), cell(_first_sentence(info.meaning)))
                        for cause, info in CATALOGUE.items() if info.outcome == outcome),
                       gap=2, label_style="bold",
                       label_width=max(len(c.value) for c in CATALOGUE))
        blocks += [Text(label, style=f"bold {style_of(outcome)}"), Padding(grid, (0, 0, 1, 2))]
    blocks.append(Text("alk causes CODE: what one cause means and what to do about it",
                       style="dim"))
    return Group(*blocks)


def cause_view(code: str) -> RenderableType | None:
    """One cause: its outcome, what it means, what to do; None for an unknown code."""
    cause = next((c for c in CATALOGUE if c.value == code.strip()), None)
    if cause is None:
        return None
    info = CATALOGUE[cause]
    grid = hanging([("meaning", info.meaning), ("what to do", info.action)], gap=2,
                   label_style="dim")
    return Group(Text.assemble((cause.value, "bold"), "  ", (dict(_SECTIONS)[info.outcome],
                                                            style_of(info.outcome))),
                 Padding(grid, (0, 0, 0, 2)))


def cause_suggestion(code: str) -> str:
    """", did you mean timeout?" for a code close to a known one, else ""."""
    import difflib

    close = difflib.get_close_matches(code.strip(), [c.value for c in CATALOGUE], n=3)
    return f" (did you mean {' or '.join(close)}?)" if close else ""


def _first_sentence(text: str) -> str:
    end = text.find(". ")
    return text if end < 0 else text[: end + 1]


# The outcomes in the order `docs/causes.md` lists them, as a reader should weigh them.
_SECTIONS = ((Outcome.PASS, "pass"), (Outcome.LANE_INFRA, "lane_infra: the repeat is void, "
                                                          "never scored"),
             (Outcome.FRAMEWORK_RUNTIME, "framework_runtime: the framework failed"),
             (Outcome.AGENT, "agent: a check failed on the model's or agent code's choice"))


_LEVEL_MARKS = {"ok": ("✓", "green"), "warn": ("!", "yellow"), "fail": ("✗", "bold red")}


def findings_view(findings: Sequence[Any]) -> RenderableType:
    """`alk check-worker`'s findings: a mark, what was seen, and what to change."""
    lines: list[RenderableType] = []
    for finding in findings:
        mark, style = _LEVEL_MARKS[str(finding.level)]
        lines.append(Text.assemble((f"{mark} ", style), (printable(str(finding.title)), style)))
        # Indented as a block, so that a wrapped detail or hint stays under its finding.
        body = Text()
        if finding.detail:
            body.append(printable(one_line(finding.detail, 300)))
        if finding.hint:
            body.append(("\n" if body else "") + f"→ {printable(str(finding.hint))}", style="dim")
        if body:
            lines.append(Padding(body, (0, 0, 0, 4)))
    failed = sum(1 for f in findings if not f.ok)
    warned = sum(1 for f in findings if str(f.level) == "warn")
    verdict = (Text("the worker speaks protocol v1", style="bold green") if not failed
               else Text(f"{plural(failed, 'problem')} to fix", style="bold red"))
    if warned:
        verdict.append(f" ({plural(warned, 'warning')}, marked !, worth a look)",
                       style="yellow")
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


# What a run's exit code says, as `alk runs` words it.
_RUN_VERDICTS = {0: "pass", 1: "fail", 3: "void"}


def runs_view(entries: Sequence[Any]) -> RenderableType:  # Sequence[alk.api.RunEntry]
    """Past runs for 80 columns, newest first: a line with the id, status, verdict by the
    run's rule and counts; under it the lanes, their frameworks, and what a rerun reran."""
    if not entries:
        return Text("no runs saved yet: `alk run --lane NAME` starts one", style="dim")
    blocks: list[RenderableType] = []
    for entry in entries:
        verdict = _RUN_VERDICTS.get(entry.exit_code, "?") if entry.exit_code is not None else "?"
        head = Text.assemble((entry.run_id, "bold"), "  ", (f"{entry.status:<12}", "dim"),
                             (f"{verdict:<5}", style_of(verdict)))
        if entry.problem:
            blocks += [head, Padding(Text(printable(one_line(entry.problem, 300)), style="dim"),
                                     (0, 0, 0, 2))]
            continue
        head.append(f" {entry.passed}/{entry.scored} passed")
        if entry.void:
            head.append(f" · {entry.void} void", style=style_of("void"))
        lanes = ", ".join(f"{lane} ({framework})"
                          for lane, framework in zip(entry.lanes, entry.frameworks))
        under = Text(printable(one_line(lanes, 300)))
        under.append(f" · {plural(entry.scenarios, 'scenario')} · started "
                     f"{entry.started_at.replace('T', ' ')[:16]}", style="dim")
        if entry.rule:
            under.append(f" · rule: {entry.rule}", style="dim")
        if entry.rerun_of:
            under.append(f"\nrerun of {printable(entry.rerun_of)}", style="dim")
        blocks += [head, Padding(under, (0, 0, 0, 2))]
    blocks.append(Text("alk report RUN_ID [--open]: its report · alk compare A B: two runs",
                       style="dim"))
    return Group(*blocks)
