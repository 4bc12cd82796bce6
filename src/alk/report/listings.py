"""The listings: lanes (`alk lanes`), the cause vocabulary (`alk causes`), a worker's
conformance findings (`alk check-worker`) and what this machine gives (`alk doctor`)."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any, Sequence

from rich.console import Group, RenderableType
from rich.padding import Padding
from rich.text import Text

from alk.causes import CATALOGUE
from alk.causes.advice import FaultSite, by_site
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
        text.append(", scenarios from " + ", ".join(printable(str(p)) for p in shared.paths),
                    style="dim")
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


_AFTER = {FaultSite.WIRE: "fault on the wire", FaultSite.SERVED_TOOL: "fault at a served tool",
          FaultSite.TOOL: "fault at a tool", FaultSite.MODEL: "fault at the model"}


def cause_view(code: str) -> RenderableType | None:
    """One cause: its outcome, what it means, what to do (after each kind of fault, when that
    differs), and whether check-worker counts it against the worker; None for an unknown
    code."""
    cause = next((c for c in CATALOGUE if c.value == code.strip()), None)
    if cause is None:
        return None
    info = CATALOGUE[cause]
    rows = [("meaning", info.meaning), ("what to do", info.action),
            *((_AFTER[site], said) for site, said in by_site(cause))]
    if info.framework_finding:
        rows.append(("check-worker", "a finding about the framework, not the worker's to fix: "
                                     "listed, and the check still passes"))
    grid = hanging(rows, gap=2, label_style="dim")
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


_LEVEL_MARKS = {"ok": ("✓", "green"), "warn": ("!", "yellow"), "finding": ("◆", "magenta"),
                "fail": ("✗", "bold red")}


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
    found = sum(1 for f in findings if str(f.level) == "finding")
    warned = sum(1 for f in findings if str(f.level) == "warn")
    verdict = [Text("the worker speaks protocol v1", style="bold green") if not failed
               else Text(f"{plural(failed, 'problem')} to fix in the worker (✗)",
                         style="bold red")]
    # Whose each is, said once: a finding is the framework's, and fails no check.
    if found:
        verdict.append(Text(f"{plural(found, 'finding')} about the framework (◆), not the "
                            "worker's to fix", style="magenta"))
    if warned:
        verdict.append(Text(f"{plural(warned, 'warning')} (!), worth a look", style="yellow"))
    return Group(*lines, Text(), *verdict)


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


def runs_view(entries: Sequence[Any], out: Path | None = None) -> RenderableType:
    """Past runs (`Sequence[alk.api.RunEntry]`) for 80 columns, newest first: a line with the
    id and status, then for a complete run its verdict by the run's rule and counts, for one
    that has not ended how many of its planned repeats ran; under it the lanes (lanes ×
    scenarios for several), their frameworks, whether it was resumed, what a rerun reran, and
    for a run that stopped before its end, the command that goes on with it (with `--out`
    when the runs are under `out`, not here)."""
    if not entries:
        return Text("no runs saved yet: `alk run --lane NAME` starts one", style="dim")
    blocks: list[RenderableType] = []
    for entry in entries:
        head = Text.assemble((entry.run_id, "bold"), "  ",
                             (f"{entry.status:<12}", _STATUS_STYLES.get(entry.status, "dim")))
        if entry.problem:
            head.append("?")
            blocks += [head, Padding(Text(printable(one_line(entry.problem, 300)), style="dim"),
                                     (0, 0, 0, 2))]
            continue
        if entry.status == "complete":
            verdict = _RUN_VERDICTS.get(entry.exit_code, "?")
            head.append(f"{verdict:<5}", style=style_of(verdict))
            head.append(f" nothing ran: {entry.nothing_ran}" if entry.nothing_ran
                        else f" {entry.passed}/{entry.scored} passed")
        else:
            # Not ended: how many of its planned repeats ran, and no verdict, which the repeats
            # to come may change.
            head.append(f"ran {entry.ran}{_of_planned(entry)} · "
                        f"{entry.passed}/{entry.scored} passed")
        if entry.void:
            head.append(f" · {entry.void} void", style=style_of("void"))
        lanes = ", ".join(f"{lane} ({framework or 'not begun'})"
                          for lane, framework in zip(entry.lanes, entry.frameworks))
        lanes = printable(one_line(lanes, 300))
        if len(entry.lanes) > 1:  # "2 lanes × 14 scenarios" first, where no lane splits it
            under = Text.assemble((f"{_breadth(entry)}: ", "dim"), lanes)
        else:
            under = Text.assemble(lanes, (f" · {_breadth(entry)}", "dim"))
        if entry.adaptive:
            under.append(" · repeats auto", style="dim")
        under.append(f" · started {entry.started_at.replace('T', ' ')[:16]}", style="dim")
        if entry.resumed:
            times = "once" if entry.resumed == 1 else f"{entry.resumed} times"
            under.append(f" · resumed {times}", style="dim")
        if entry.rule:
            under.append(f" · rule: {entry.rule}", style="dim")
        if entry.rerun_of:
            under.append(f"\nrerun of {printable(entry.rerun_of)}", style="dim")
        if entry.resume:
            why = "its alk was killed; " if entry.status == "stopped" else ""
            command = entry.resume
            if out is not None and out != Path(".") and command.startswith(("alk run ",
                                                                             "alk rerun ")):
                command += f" --out {shlex.quote(str(out))}"
            under.append(f"\n{why}", style="yellow")
            under.append("resume: ", style="yellow")
            under.append(printable(command), style="bold")
        blocks += [head, Padding(under, (0, 0, 0, 2))]
    blocks.append(Text("alk report RUN_ID [--open]: its report · alk compare A B: two runs",
                       style="dim"))
    return Group(*blocks)


_STATUS_STYLES = {"running": "cyan", "stopped": "yellow", "interrupted": "yellow",
                  "unreadable": "red"}


def _of_planned(entry: Any) -> str:
    """" of 560": the repeats planned, as far as the lanes begun tell. Adaptive: the maximum
    ("≤", it stops when settled); with lanes not begun, whose scenarios no record counts yet,
    a least ("≥"); both, no bound at all."""
    unbegun = not all(entry.frameworks)
    if entry.adaptive and unbegun:
        return ""
    bound = "≤" if entry.adaptive else "≥" if unbegun else ""
    return f" of {bound}{entry.planned}"


def _breadth(entry: Any) -> str:
    """"3 scenarios"; for several lanes "2 lanes × 14 scenarios", or where its lanes ran
    different scenarios, how many lane × scenario pairs (a lane not begun is marked so)."""
    if len(entry.lanes) < 2:
        return plural(entry.scenarios, "scenario")
    begun = sum(1 for framework in entry.frameworks if framework)
    if entry.cells == begun * entry.scenarios:
        return f"{len(entry.lanes)} lanes × {plural(entry.scenarios, 'scenario')}"
    return f"{len(entry.lanes)} lanes, {plural(entry.cells, 'lane × scenario pair')}"
