"""The run report: a run's typed record (`alk.result.document.RunDocument`) as rich renderables,
the answer first — the verdict line, the header, the scenario table and its void notes, why each
scenario did not pass, the statistics block (`--stats`, `alk.report.terminal.statistics`), and
where the files are. A run of several lanes opens with its verdict and its lane x scenario
matrix.

Nothing here prints or creates a `Console`; the CLI owns the console and prints what these return.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.text import Text

from alk.causes import CATALOGUE
from alk.layout import HTML_NAME, JUNIT_NAME, MARKDOWN_NAME, group_of, report_folder
from alk.records import RepeatResult, Verdict
from alk.report.cost import cost_lines, stopped_line
from alk.report.format import PASS_HAT_K
from alk.report.matrix import lane_matrix
from alk.report.safe_text import DASH, inline, one_line, plural, printable, style_of
from alk.report.terminal.cells import DETAIL_CHARS, labelled
from alk.report.terminal.notes import void_notes
from alk.report.meaning import clustered_shown
from alk.report.terminal.statistics import more_line, statistics_block, stopped
from alk.report.terminal.table import scenario_table
from alk.report.terminal.verdict import verdict_line
from alk.report.terminal.why import section
from alk.result.document import CutShort, RunDocument, ScenarioResult


def run_report(doc: RunDocument, root: Path | None = None, *, k: int = PASS_HAT_K,
               stats: bool = False, command: str | None = None) -> RenderableType:
    """A run's record, answer first: the verdict line, the header, the scenario table, why each
    scenario did not pass, the statistics block (with `stats`; else one line naming `command`,
    which shows it), and where the files are (under `root`, the folder they are relative to,
    when given). `k`: the pass^k shown (`alk run --k`).

    When the preflight failed nothing was scored, so a panel explaining the failure replaces the
    table: an all-void table would hide the one fact that matters.
    """
    if k < 1:
        raise ValueError(f"pass^k needs k >= 1, got {k}")
    doc = printable(doc)  # worker text, escaped once, before any of it is shown
    parts: list[RenderableType] = [verdict_line([doc]), _header(doc)]
    scenarios, aggregate = doc.scenarios, doc.aggregate
    # ok is None when alk was interrupted before the probe answered: not a failed preflight.
    if doc.gate.ok is False:
        parts.append(_preflight_panel(doc))
        ids = ", ".join(s.id for s in scenarios) or DASH
        parts.append(Text(f"not scored: {ids}", style="magenta"))
    else:
        parts.append(scenario_table(scenarios, aggregate, k,
                                    clustered=clustered_shown(scenarios)))
        notes = void_notes(scenarios, aggregate)
        if notes is not None:
            parts.append(notes)
        # An adaptive run's intervals are approximate: said under the table, not only in --stats.
        if doc.settings.adaptive is not None:
            parts.append(labelled(stopped(doc)))
        # A pass with void repeats still needs its why: those repeats were not scored. What to
        # do about a cause is said once, under its first scenario.
        advised: set[str] = set()
        parts.extend(section(s, doc.run_id, advised) for s in scenarios
                     if s.verdict != Verdict.PASS or s.stats.counts.void)
        if stats:
            parts.extend(statistics_block(doc, k))
        elif command != "":
            parts.extend([Text(), more_line(
                command or f"alk report {group_of(doc.run_id)} --stats")])
    parts.append(Text())
    parts.append(labelled([*_paths(doc, root), ("isolation", _containment(scenarios))]))
    return Group(*parts)


def runs_report(documents: Sequence[RunDocument], root: Path | None = None, *,
                k: int = PASS_HAT_K, stats: bool = False,
                command: str | None = None) -> RenderableType:
    """The report of a run of one lane or several. With several, the run's verdict over every
    lane first, then the lane x scenario matrix an evaluator came for, then each lane's own
    report (its verdict, table and why)."""
    if len(documents) == 1:
        return run_report(documents[0], root, k=k, stats=stats, command=command)
    shown = [printable(doc) for doc in documents]
    parts: list[RenderableType] = [verdict_line(shown), Text(), lane_matrix(shown)]
    for doc in shown:
        parts.extend([Text(), Text("─" * 3 + f" lane {doc.lane.name}", style="bold"),
                      run_report(doc, root, k=k, stats=stats, command="")])
    if not stats:  # once for every lane, at the end
        parts.extend([Text(), more_line(
            command or f"alk report {group_of(shown[0].run_id)} --stats")])
    return Group(*parts)


def _header(doc: RunDocument) -> Text:
    lane, gate, settings = doc.lane, doc.gate, doc.settings
    framework = lane.framework or DASH
    # The worker's words, on one line each: a line break in them must not forge a line.
    reported = inline(gate.framework) if gate.framework is not None else None
    version = inline(gate.version) if gate.version is not None else None
    text = Text.assemble(
        ("lane ", "dim"), (lane.name or DASH, "bold"), "  ", (framework, "bold"),
        " ", (version or "(no version reported)", "green" if version and gate.ok else "red"),
        (f" (requires {lane.requirement or 'any'})", "dim"))
    if reported and reported != framework:
        text.append(f" reported as {reported}", style="red")
    # The run on a line of its own: beside the lane it would not fit 80 columns.
    repeats, jobs = settings.repeats, settings.jobs
    # On a cluster, its workers' threads say how many ran at once, not --jobs.
    where = (" · on a Dask cluster" if settings.executor == "dask" else
             f" · {jobs} at once" if jobs is not None and jobs > 1 else "")
    if settings.adaptive is not None:
        asked = f"adaptive: up to {repeats} repeats a scenario"
    else:
        asked = f"{plural(repeats, 'repeat') if repeats else '? repeats'} per scenario"
    text.append(f"\nrun {doc.run_id or DASH} · {asked}{where}", style="dim")
    for resumed in doc.resumed[:3]:
        # When, and on what: a reviewer weighs a run that stopped and went on again.
        text.append(f"\nresumed {resumed.at[:19].replace('T', ' ')} UTC after "
                    f"{plural(resumed.done, 'finished repeat')}", style="yellow")
    if doc.status != "complete":
        text.append(f"\n{doc.status.upper()}", style="bold yellow")
        counts = doc.aggregate.counts
        if counts.requested:
            # How far it got, at once: the rates below rest on these repeats only.
            text.append(f" after {counts.completed} of {plural(counts.requested, 'repeat')}",
                        style="bold yellow")
        stop = stopped_line(doc.cost)
        if stop:
            text.append(f"\n{stop}", style="bold yellow")
        if doc.status in ("running", "interrupted"):
            # A run whose alk was killed still reads "running": say how to finish either.
            # A lane of a run of several is resumed with its run, so the lanes after it run too.
            text.append(f"\n`alk run --resume {group_of(doc.run_id)}` goes on with it"
                        + (" if its alk is gone" if doc.status == "running" else ""),
                        style="yellow")
    # What a proxy run cost, as the provider counted it: the tokens, then the budget.
    for number, line in enumerate(cost_lines(doc.cost)):
        text.append("\n" + line, style="dim" if number else "")
    others = _other_identities(doc, gate.framework, gate.version)
    if others:
        text.append(f"\nalso reported: {others}", style="bold red")
    if lane.description:
        text.append("\n" + lane.description, style="dim italic")
    return text


def _other_identities(doc: RunDocument, framework: str | None, version: str | None) -> str:
    """Frameworks and versions a worker reported besides the probe's (a resumed attempt may
    report another): the header must never show only the first."""
    others = [i for i in doc.identities if (i.framework, i.version) != (framework, version)]
    return " · ".join(f"{inline(i.framework)} {inline(i.version)} ({i.repeats} repeats)"
                      for i in others[:3]) + (f" · +{len(others) - 3} more"
                                              if len(others) > 3 else "")


def _preflight_panel(doc: RunDocument) -> Panel:
    lane, gate = doc.lane, doc.gate
    cause = gate.cause or "preflight_failed"
    reported = (f"{gate.framework} {gate.version or '(no version)'}" if gate.framework
                else "nothing (no framework_ready)")
    body = Text.assemble(
        ("worker reported  ", "dim"), (reported, "bold red"),
        ("\nlane requires    ", "dim"),
        (f"{lane.framework or '?'} {lane.requirement or 'any'}", "bold"))
    if gate.detail:
        body.append("\n" + one_line(gate.detail, DETAIL_CHARS))
    info = CATALOGUE.get(cause)
    if info is not None:
        body.append(f"\nwhat to do: {info.action}", style="italic")
    # The same panel explains every run that was void before its repeats: a failed version
    # check, a missing variable, an isolation level the machine cannot give.
    title = Text(f"Nothing ran: {cause} (the run is void)", style="bold red")
    return Panel(body, title=title, title_align="left", border_style="red", expand=False)


def _containment(scenarios: Sequence[ScenarioResult]) -> Text | None:
    """How the repeats' workers were contained: a reviewer weighs a verdict by it."""
    used: dict[str, int] = {}
    for scenario in scenarios:
        for repeat in scenario.repeats:
            if repeat.containment:
                level = (f"{repeat.containment}, network {repeat.network or '?'}, "
                         f"filesystem {repeat.filesystem or '?'}")
                used[level] = used.get(level, 0) + 1
    if not used:
        return None
    return Text("; ".join(f"{name} ({plural(count, 'repeat')})" for name, count in used.items()))


def _paths(doc: RunDocument, root: Path | None) -> list[tuple[str, Text | None]]:
    # Where the files went, said outright: alk writes under the folder it runs in (or --out),
    # which is not always the folder that holds the lanes.
    paths = doc.paths
    folder = report_folder(Path(), doc.run_id)
    return [("files in", Text(str(root)) if root else None),
            ("report", Text(f"{folder / HTML_NAME} · {MARKDOWN_NAME} · {JUNIT_NAME}")),
            ("result", Text(paths.result or DASH)),
            ("transcripts", Text(paths.transcripts or DASH)),
            ("workspaces", Text(paths.workspaces) if paths.workspaces else None)]


def rerun_summary(doc: RunDocument, original: RepeatResult | CutShort) -> RenderableType:
    """`alk rerun`: the repeat as it ran then and as it ran now, and what changed between."""
    doc = printable(doc)
    of = doc.settings.rerun_of
    rows: list[tuple[str, Text | None]] = []
    if of is not None:
        seed = f" · seed {original.seed}" if isinstance(original, RepeatResult) else ""
        rows.append(("rerun of", Text(f"{of.run_id} {of.scenario} repeat {of.repeat}{seed}")))
    rows.append(("then", _repeat_line(original)))
    now = next((r for s in doc.scenarios for r in s.repeats), None)
    rows.append(("now", _repeat_line(now) if now is not None else Text("did not finish")))
    if of is not None:
        rows.append(("worker", Text("changed since: this checks the worker as it is now, not a "
                                    "reproduction", style="bold") if of.worker_changed
                     else Text("unchanged since (its program and the Python files beside "
                               "it, by sha256)")))
        rows.append(("lane", Text("changed since (--anyway): not the same repeat", style="bold")
                     if of.lane_changed else Text("unchanged since (its sha256)")))
    return labelled(rows)


def _repeat_line(repeat: RepeatResult | CutShort) -> Text:
    if isinstance(repeat, CutShort):
        return Text(f"cut short: {repeat.detail}", style="dim")
    repeat = printable(repeat)
    return Text.assemble((f"{repeat.outcome}/{repeat.cause}", style_of(repeat.outcome)),
                         f"  {one_line(repeat.detail, DETAIL_CHARS)}")
