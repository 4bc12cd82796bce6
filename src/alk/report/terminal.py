"""The run report: a run's typed record (`alk.result.document.RunDocument`) as rich renderables — the
header, the scenario table, the void and ICC notes, how alike the repeats are (consistency) and
what injected faults cost (fault robustness), why each scenario did not pass, and where the files
are.

Nothing here prints or creates a `Console`; the CLI owns the console and prints what these return.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.padding import Padding
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from alk.causes import CATALOGUE, Cause
from alk.estimate import Estimate
from alk.layout import HTML_NAME, JUNIT_NAME, MARKDOWN_NAME, group_of, report_folder
from alk.records import Outcome, RepeatResult, Verdict
from alk.report.format import ADAPTIVE_NOTE, PASS_HAT_K, rerun_command, share
from alk.report.safe_text import DASH, hanging, inline, one_line, plural, printable, style_of
from alk.result.document import CutShort, RunDocument, ScenarioResult
from alk.result.verdict import judge
from alk.stats.pass_k import pass_hat_k_at
from alk.stats.records import (
    Consistency,
    Counts,
    DurationStats,
    FaultRobustness,
    Icc,
    LaneStats,
    ScenarioStats,
)
from alk.stats.summary import repeats_to_see

# Failure layers in the order a reviewer should read them; a lane_infra repeat is void, not failed.
_LAYERS = ((Outcome.FRAMEWORK_RUNTIME, "framework_runtime"), (Outcome.AGENT, "agent"),
           (Outcome.LANE_INFRA, "void"))
WHY_REPEATS = 3
# A verdict that rests on fewer than half of its scenario's repeats carries this mark.
THIN_MARK = "?"
THIN_LISTED = 5
# The widest verdict as the table shows it ("flaky?"): passed/scored starts past it.
VERDICT_CHARS = len("flaky") + len(THIN_MARK)
VOID_STYLE = "bold magenta"
# The lane's second row: its pass rate with the interval of scenarios taken as a sample of tasks.
CLUSTERED = "  clustered"
DETAIL_CHARS = 240
LABEL_CHARS = len("transcripts")  # the widest label of the facts under the table


# ---------------------------------------------------------------------------------------------
# Run report


def run_report(doc: RunDocument, root: Path | None = None, *, k: int = PASS_HAT_K
               ) -> RenderableType:
    """A run's record as header, scenario table, why-sections and paths (under `root`, the
    folder they are relative to, when given). `k`: the pass^k shown (`alk run --k`).

    When the preflight failed nothing was scored, so a panel explaining the failure replaces the
    table: an all-void table would hide the one fact that matters.
    """
    if k < 1:
        raise ValueError(f"pass^k needs k >= 1, got {k}")
    doc = printable(doc)  # worker text, escaped once, before any of it is shown
    parts: list[RenderableType] = [_header(doc)]
    scenarios, aggregate = doc.scenarios, doc.aggregate
    # ok is None when alk was interrupted before the probe answered: not a failed preflight.
    if doc.gate.ok is False:
        parts.append(_preflight_panel(doc))
        ids = ", ".join(s.id for s in scenarios) or DASH
        parts.append(Text(f"not scored: {ids}", style="magenta"))
    else:
        parts.append(_scenario_table(scenarios, aggregate, k))
        parts.append(_legend(scenarios, aggregate, k))
        notes = _void_notes(scenarios, aggregate)
        if notes is not None:
            parts.append(notes)
        parts.append(Text())
        parts.append(_labelled([("ICC", _icc(aggregate.icc)),
                                *_consistency(scenarios, aggregate),
                                # "fault robustness" would widen every label: its value says
                                # "to faults" instead.
                                ("robustness", _fault_robustness(aggregate.fault_robustness)),
                                *_stopped(doc),
                                *_failures(scenarios),
                                ("workers", _resources(scenarios)),
                                ("rule", _rule(doc))]))
        # Under a label each, so that a wrapped line hangs clear of it.
        tool_paths = [_paths_line(s) for s in scenarios if s.stats.trajectories.distinct > 1]
        event_paths = [_event_paths_line(s) for s in scenarios if s.stats.paths.distinct > 1]
        model = [line for line in map(_model_line, scenarios) if line is not None]
        parts.append(_labelled([*((("" if i else "tool paths"), line)
                                  for i, line in enumerate(tool_paths)),
                                *((("" if i else "model"), line)
                                  for i, line in enumerate(model)),
                                *((("" if i else "event paths"), line)
                                  for i, line in enumerate(event_paths))]))
        # A pass with void repeats still needs its why: those repeats were not scored.
        parts.extend(_why(s, doc.run_id) for s in scenarios
                     if s.verdict != Verdict.PASS or s.stats.counts.void)
    parts.append(Text())
    parts.append(_labelled([*_paths(doc, root), ("isolation", _containment(scenarios))]))
    return Group(*parts)


def _rule(doc: RunDocument) -> Text:
    """The rule that set the exit code, and whether the run meets it (`alk.result.rule`)."""
    ruling = judge([doc])
    text = Text(doc.settings.rule.describe())
    if ruling.failing:
        text.append(f"; broken by {', '.join(s for _, s in ruling.failing)}", style="bold")
    elif ruling.unscored:
        text.append(f"; not scored: {', '.join(s for _, s in ruling.unscored)}")
    return text


def _stopped(doc: RunDocument) -> list[tuple[str, Text | None]]:
    """An adaptive run: which rule stopped each scenario, after how many repeats, grouped; and
    that its intervals are approximate."""
    if doc.settings.adaptive is None:
        return []
    groups: dict[tuple[str, int], list[str]] = {}
    for scenario in doc.scenarios:
        reason = scenario.stopped or "still sampling"
        groups.setdefault((reason, scenario.stats.counts.completed), []).append(scenario.id)
    words = {**_STOP_WORDS,
             "ci_width": f"interval under {doc.settings.adaptive.ci_width:g} wide"}
    lines = [Text(f"{words.get(reason, reason)} after {plural(ran, 'repeat')}: "
                  f"{', '.join(ids)}") for (reason, ran), ids in groups.items()]
    lines.append(Text(ADAPTIVE_NOTE, style="dim"))
    return [("" if i else "stopped", line) for i, line in enumerate(lines)]


# Why an adaptive run stopped sampling a scenario, in words (alk.records.StopReason).
_STOP_WORDS = {"flaky": "both outcomes seen", "max_repeats": "at the maximum",
               "interrupted": "interrupted"}


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
        if doc.status in ("running", "interrupted"):
            # A run whose alk was killed still reads "running": say how to finish either.
            # A lane of a run of several is resumed with its run, so the lanes after it run too.
            text.append(f"\n`alk run --resume {group_of(doc.run_id)}` goes on with it"
                        + (" if its alk is gone" if doc.status == "running" else ""),
                        style="yellow")
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


def _scenario_table(scenarios: Sequence[ScenarioResult], aggregate: LaneStats,
                    k: int) -> _ScenarioTable:
    # passed/scored right-aligned, the lane's too: its larger counts reach into the empty
    # verdict instead of widening the column.
    width = max([0, *(len(_passed_of_scored(s.stats)) for s in scenarios)])
    rows = [_Row(s.id, (_verdict(s.stats, width), _rate(s.stats.pass_rate, s.stats.ci),
                        _void_rate(s.stats.void_rate), _pass_hat(s.stats, k),
                        _seconds(s.stats.durations)), _row_detail(s.stats))
            for s in scenarios]
    counts = Text(_passed_of_scored(aggregate).rjust(VERDICT_CHARS + 1 + width))
    lane = [_Row("lane (pooled)", (counts, _rate(aggregate.pass_rate, aggregate.ci),
                                   _void_rate(aggregate.void_rate), _pass_hat(aggregate, k),
                                   Text("")), None)]
    clustered = aggregate.clustered_rate
    if clustered is not None:
        lane.append(_Row(CLUSTERED, (Text(""), _rate(clustered.value,
                                                     (clustered.low, clustered.high))), None))
    lane[-1] = _Row(lane[-1].id, lane[-1].cells, _row_detail(aggregate, _verdict_tally(aggregate)))
    return _ScenarioTable(rows, lane, k)


@dataclass(frozen=True, slots=True)
class _Row:
    id: str
    cells: tuple[Text, ...]  # verdict, pass rate, void, pass^k, p50 (a row may stop early)
    detail: _Parts | None  # what failed, under the row


class _ScenarioTable:
    """One line of numbers per scenario, and under it, indented and wrapped at word boundaries,
    what did not pass. Designed for 80 columns: the numbers never wrap, and the causes, the one
    part of unbounded length, get the whole width instead of a narrow column. An id too long
    for its column takes a line of its own above its numbers rather than being broken. Under
    the scenarios, the lane's rows: pooled, then clustered."""

    RIGHT = (False, False, True, False, True)
    GAP = 2

    def __init__(self, rows: Sequence[_Row], lane: Sequence[_Row], k: int) -> None:
        self.rows, self.lane = rows, lane
        self.headers = ("verdict", "pass rate [95% CI]", "void", f"pass^{k} [CI]", "p50")

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        every = [*self.rows, *self.lane]
        widths = [max([len(header), *(row.cells[i].cell_len for row in every
                                      if i < len(row.cells))])
                  for i, header in enumerate(self.headers)]
        numbers = sum(widths) + self.GAP * len(widths)
        longest = max([len("scenario"), *(len(row.id) for row in every)])
        id_width = max(len("scenario"), min(longest, options.max_width - numbers))
        header = [Text(h, style="bold") for h in self.headers]
        yield self._line(Text("scenario", style="bold"), header, id_width, widths)
        rule = Text("─" * min(options.max_width, id_width + numbers), style="dim")
        yield rule
        for row in self.rows:
            yield from self._row(row, id_width, widths)
        yield rule
        for row in self.lane:
            yield from self._row(row, id_width, widths)

    def _row(self, row: _Row, id_width: int, widths: Sequence[int]) -> RenderResult:
        name = Text(row.id, style="bold")
        if name.cell_len > id_width:
            yield Text(row.id, style="bold", overflow="fold")
            name = Text("")
        yield self._line(name, row.cells, id_width, widths)
        if row.detail:
            yield Padding(row.detail, (0, 0, 0, 2))

    def _line(self, name: Text, cells: Sequence[Text], id_width: int,
              widths: Sequence[int]) -> Text:
        line = name.copy()
        line.align("left", id_width)
        for cell, width, right in zip(cells, widths, self.RIGHT):
            cell = cell.copy()
            cell.align("right" if right else "left", width)
            line.append(" " * self.GAP).append_text(cell)
        line.rstrip()
        line.no_wrap, line.overflow = True, "crop"
        return line


def _verdict(stats: ScenarioStats, width: int) -> Text:
    """The verdict, marked when it rests on too few repeats, then passed/scored (right-aligned
    in `width`)."""
    text = Text(str(stats.verdict), style=f"bold {style_of(stats.verdict)}")
    if _thin(stats.counts):
        text.append(THIN_MARK, style=VOID_STYLE)
    text.pad_right(VERDICT_CHARS - text.cell_len)
    # Nothing scored has no passed/scored to show: "void", not "void 0/0".
    return (text.append(" " + _passed_of_scored(stats).rjust(width)) if stats.counts.scored
            else text)


def _verdict_tally(aggregate: LaneStats) -> list[Text]:
    """The pooled row's scenarios by verdict: "scenarios: 1 flaky, 1 pass"."""
    verdicts = [(f"{n} {v}", style_of(v)) for v, n in aggregate.verdicts if n]
    if not verdicts:
        return []
    text = Text("scenarios: ")
    for i, (label, style) in enumerate(verdicts):
        text.append(", " if i else "").append(label, style=style)
    return [text]


def _row_detail(stats: ScenarioStats | LaneStats, first: Sequence[Text] = ()) -> _Parts | None:
    """Under a row: repeats that never ran, then each failing layer with its count and its
    commonest causes; None when every repeat ran and passed."""
    counts, layers = stats.counts, dict(stats.layers)
    parts = list(first)
    if counts.completed < counts.requested:
        parts.append(Text(f"{counts.completed} of {counts.requested} repeats ran",
                          style="bold yellow"))
    for outcome, label in _LAYERS:
        count = layers.get(outcome, 0)
        if not count:
            continue
        mine = sorted(((n, c) for c, n in stats.causes
                       if c in CATALOGUE and CATALOGUE[Cause(c)].outcome == outcome and n),
                      key=lambda nc: (-nc[0], nc[1]))
        named = ", ".join(f"{c}×{n}" for n, c in mine[:3])
        if len(mine) > 3:
            named += f", +{len(mine) - 3} more"
        of = f" of {counts.completed}" if outcome == Outcome.LANE_INFRA else ""
        part = Text(f"{label} {count}{of}", style=style_of(outcome))
        parts.append(part.append(f": {named}" if named else ""))
    return _Parts(parts) if parts else None


class _Parts:
    """Parts joined by " · ", wrapped between parts: "framework_runtime 2: timeout×2" reads as
    one fact and never breaks inside, unless it is wider than the line by itself."""

    SEP = " · "

    def __init__(self, parts: Sequence[Text]) -> None:
        self.parts = parts

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        line = Text()
        for part in self.parts:
            if line and line.cell_len + len(self.SEP) + part.cell_len > options.max_width:
                yield line
                # A continued line starts with the separator, so that it reads as one.
                line = Text(self.SEP.lstrip(), style="dim").append_text(part)
                continue
            line.append(self.SEP if line else "", style="dim").append_text(part)
        yield line


def _thin(counts: Counts) -> bool:
    """Does a verdict rest on fewer than half of the repeats asked for (void ones, or ones an
    interrupted run never started)? Nothing scored is a void verdict, which says so itself."""
    return 0 < counts.scored and 2 * counts.scored < counts.requested


def _void_notes(scenarios: Sequence[ScenarioResult], aggregate: LaneStats) -> Table | None:
    """Under the table, whenever a repeat was void: how many were, and which verdicts rest on
    fewer than half of their repeats. A rate over the scored few must not pass for the run's."""
    notes = [*_void_note(aggregate), *_thin_note(scenarios)]
    if not notes:
        return None
    return hanging(notes, label_style=VOID_STYLE, value_style=VOID_STYLE)


def _void_note(aggregate: LaneStats) -> list[tuple[str, str]]:
    void, ran, scored = aggregate.counts.void, aggregate.counts.completed, aggregate.counts.scored
    if not void:
        return []
    # Worded to fit 80 columns with up to a thousand repeats.
    rest = f"the rates above cover the other {scored}" if scored else "nothing was scored"
    rows = [("void:", f"{void} of {ran} repeats ({_percent(void, ran)}) not scored {DASH} {rest}")]
    cause = _commonest_void_cause(aggregate.causes)
    if cause:
        rows.append(("", f"commonest cause: {cause[0]} ({cause[1]} of {void})"))
    return rows


def _thin_note(scenarios: Sequence[ScenarioResult]) -> list[tuple[str, str]]:
    thin = [s for s in scenarios if _thin(s.stats.counts)]
    if not thin:
        return []
    listed = ", ".join(f"{s.id} ({s.stats.counts.scored} of {s.stats.counts.requested} scored)"
                       for s in thin[:THIN_LISTED])
    more = f", and {len(thin) - THIN_LISTED} more" if len(thin) > THIN_LISTED else ""
    return [(THIN_MARK, f"marks a verdict on fewer than half of its repeats: {listed}{more}")]


def _commonest_void_cause(causes: Sequence[tuple[str, int]]) -> tuple[str, int] | None:
    void = [(n, c) for c, n in causes
            if c in CATALOGUE and CATALOGUE[Cause(c)].outcome == Outcome.LANE_INFRA and n]
    if not void:
        return None
    n, cause = min(void, key=lambda nc: (-nc[0], nc[1]))
    return cause, n


def _percent(part: int, whole: int) -> str:
    return share(part / whole if whole else 0.0)


def _icc(icc: Icc) -> RenderableType:
    """How alike a scenario's repeats are (ICC(1), with its F interval), and what that does to
    the pooled rate: the design effect, and how many independent repeats the scored ones are
    worth. When it has no value, why; when its value needs a caveat, the caveat."""
    if icc.value is None:
        point = Text(DASH).append(f" ({icc.reason})" if icc.reason else "", style="dim")
    else:
        point = Text(_signed(icc.value), style="bold")
        if icc.ci is not None:
            point.append(f" [{_signed(icc.ci[0])}, {_signed(icc.ci[1])}]")
    sizes = Text(plural(icc.groups, "scenario"), style="dim")
    if icc.cluster_size is not None:
        sizes.append(f", cluster size {icc.cluster_size:.1f}")
        # k0, the ICC's own size for unequal counts: worth a word only when it differs.
        if icc.k0 is not None and round(icc.k0, 1) != round(icc.cluster_size, 1):
            sizes.append(f" (k0 {icc.k0:.1f})")
    lines: list[RenderableType] = [_Parts([point, sizes])]
    if icc.design_effect is not None and icc.effective_n is not None:
        lines.append(Text(f"design effect {icc.design_effect:.2f}: effective n "
                          f"{icc.effective_n:.1f} of {plural(icc.observations, 'scored repeat')}",
                          style="dim"))
    if icc.note:
        lines.append(Text(icc.note, style="yellow"))
    return Group(*lines)


def _signed(value: float) -> str:
    """Two decimals, a minus that reads as one, and never "−0.00"."""
    shown = f"{round(value, 2) + 0.0:.2f}"
    return "−" + shown[1:] if shown.startswith("-") else shown


# The figures of a Consistency record in the report's words, in its order.
_CONSISTENCY_WORDS = {"outcome": "outcome", "tool_use": "tool use", "steps": "steps",
                      "resources": "resources"}
CONSISTENCY_LISTED = 4  # scenarios listed under the lane's consistency, before "+N more"
# Resources below this list a scenario on their own: a mean coefficient of variation of duration,
# CPU, memory and calls above 0.51 (exp(-0.51) = 0.6), more than timing noise gives (the
# reference lane's repeats of a tenth of a second read 0.71–0.91).
RESOURCES_NOTED = 0.6


def _consistency(scenarios: Sequence[ScenarioResult], aggregate: LaneStats
                 ) -> list[tuple[str, RenderableType]]:
    """How alike the repeats are (`alk.stats.records.Consistency`): the lane's figures, then each
    scenario that stands out (`_stands_out`), least consistent first, with its figures below 1
    only (a scenario whose repeats are all alike says nothing new), then what the figures
    compare. Nothing when the lane has no figure."""
    lane = _figures(aggregate.consistency)
    if not lane:
        return []
    below = [(min(e.value for _, e in figures), s.id, figures) for s in scenarios
             if (figures := _figures(s.stats.consistency, below_one=True))
             and _stands_out(s.stats.consistency)]
    # Least consistent first: when the list is cut, what is cut is the closest to 1.
    below.sort(key=lambda item: item[0])
    lines: list[RenderableType] = [_Parts([_figure(name, e) for name, e in lane])]
    for _, sid, figures in below[:CONSISTENCY_LISTED]:
        first, *rest = [_figure(name, e) for name, e in figures]
        lines.append(Padding(_Parts([Text.assemble((sid, "bold"), ": ", first), *rest]),
                             (0, 0, 0, 2)))
    if len(below) > CONSISTENCY_LISTED:
        lines.append(Text(f"  +{plural(len(below) - CONSISTENCY_LISTED, 'more scenario')}",
                          style="dim"))
    # Worded to take two lines at 80 columns.
    lines.append(Text("1 = all repeats alike in outcome, tool counts, step sequence, and time, "
                      "CPU, memory, model calls; listed: what varies beyond timing",
                      style="dim"))
    return [("" if i else "consistency", line) for i, line in enumerate(lines)]


def _stands_out(scenario: Consistency) -> bool:
    """Worth a line: the scenario's outcome, tool use or steps vary, or its resources vary
    beyond timing noise (which alone keeps a scenario's resources below 1, down to 0.7)."""
    varied = any(e is not None and round(e.value, 2) < 1
                 for e in (scenario.outcome, scenario.tool_use, scenario.steps))
    return varied or (scenario.resources is not None
                      and scenario.resources.value < RESOURCES_NOTED)


def _figures(consistency: Consistency, below_one: bool = False) -> list[tuple[str, Estimate]]:
    """The figures a record has, by name; `below_one`: only those shown below 1.00."""
    figures = [(words, estimate) for name, words in _CONSISTENCY_WORDS.items()
               if (estimate := getattr(consistency, name)) is not None]
    return [(words, e) for words, e in figures if not below_one or round(e.value, 2) < 1]


def _figure(name: str, estimate: Estimate) -> Text:
    """"outcome 0.81 [0.62–0.95]"."""
    return Text.assemble(f"{name} ", (f"{estimate.value:.2f}", "bold"),
                         f" [{estimate.low:.2f}–{estimate.high:.2f}]")


def _fault_robustness(robustness: FaultRobustness | None) -> Text | None:
    """The pass rate with injected faults ÷ without, when the lane has scenarios of both."""
    if robustness is None:
        return None
    high = "∞)" if robustness.high is None else f"{robustness.high:.2f}]"
    text = Text.assemble("to faults ", (f"{robustness.value:.2f}", "bold"),
                         f" [{robustness.low:.2f}–{high}: pass rate with injected faults ÷ "
                         "without")
    if robustness.high is None:
        text.append("\nno upper bound: too few repeats passed without faults", style="dim")
    return text


# Failure rates every reader can weigh a run against: how many repeats it takes to see one.
REFERENCE_FAILURES = (0.05, 0.01)
LISTED = 3  # scenario ids named in one line, before "and N more"
FAILURE_LINES = 4  # lines of each kind (failures seen, none seen), before "and N more"


def _failures(scenarios: Sequence[ScenarioResult]) -> list[tuple[str, Text | None]]:
    """What the repeats say about failures: for a flaky scenario, how many repeats show a
    failure at the rate seen (to reproduce it); for one that never failed, the failure rates
    its repeats leave possible, and what it takes to see a failure of a reference rate.
    Scenarios that share the numbers share a line."""
    seen: dict[tuple[float, int], list[str]] = {}
    unseen: dict[tuple[int, float], list[str]] = {}
    for scenario in scenarios:
        needed, counts = scenario.stats.repeats_needed, scenario.stats.counts
        if needed is None:
            continue
        if not needed.observed:
            unseen.setdefault((counts.scored, needed.failure_rate), []).append(scenario.id)
        elif needed.failure_rate < 1.0:  # a failure every time needs no reproducing
            seen.setdefault((needed.failure_rate, needed.repeats), []).append(scenario.id)
    scored = sum(1 for s in scenarios if s.stats.counts.scored)
    lines = _capped([Text.assemble((_listed(ids, scored), "bold"), f": {rate:.1%} failed; "
                                   f"{repeats} repeats show one 95% of the time")
                     for (rate, repeats), ids in seen.items()], seen.values())
    lines += _capped([Text.assemble((_listed(ids, scored), "bold"), f": no failure in {n} "
                                    f"scored; up to {rate:.1%} not ruled out")
                      for (n, rate), ids in unseen.items()], unseen.values())
    if unseen:
        first, *rest = REFERENCE_FAILURES
        lines.append(Text(f"to see a {first:.0%} failure 95% of the time takes "
                          f"{repeats_to_see(first)} repeats"
                          + "".join(f", a {p:.0%} one {repeats_to_see(p)}" for p in rest),
                          style="dim"))
    return [("" if i else "failures", line) for i, line in enumerate(lines)]


def _capped(lines: list[Text], groups: Iterable[list[str]]) -> list[Text]:
    """At most FAILURE_LINES lines, the rest counted."""
    if len(lines) <= FAILURE_LINES:
        return lines
    rest = sum(len(ids) for ids in list(groups)[FAILURE_LINES - 1:])
    return [*lines[:FAILURE_LINES - 1], Text(f"and {rest} more scenarios", style="dim")]


def _listed(ids: Sequence[str], every: int = 0) -> str:
    """Ids by name, the first few; "every scenario" when they are all `every` there are."""
    if len(ids) > 1 and len(ids) == every:
        return "every scenario"
    more = len(ids) - LISTED
    return ", ".join(ids[:LISTED]) + (f" and {more} more" if more > 0 else "")


def _legend(scenarios: Sequence[ScenarioResult], aggregate: LaneStats, k: int) -> Table:
    """What the table's columns mean, why a pass^k is missing, and which of the lane's two
    intervals to read when."""
    if k == 1:
        hat = "the pass rate; the lane's: its scenarios' mean ± 1.96 SE"
    else:
        hat = (f"chance that {k} repeats in a row all pass; interval: the Wilson bounds to "
               f"the power {k}; the lane's: its scenarios' mean ± 1.96 SE")
    rows = [("n/m", "passed/scored · void: share of the repeats run that were not scored"),
            (f"pass^{k}", hat)]
    short = [s.id for s in scenarios if 0 < s.stats.counts.scored < k]
    if short:
        rows.append((DASH, f"fewer than {k} scored repeats: {_listed(short)}; the lane's "
                           f"pass^{k} needs {k} in every scenario"))
    if aggregate.clustered_rate is not None:
        rows.append(("clustered", "the scenarios as a sample of tasks: read it to generalise "
                                  "beyond them; pooled: these scenarios only"))
    return hanging([(label, Text(value)) for label, value in rows], label_style="dim",
                   value_style="dim", label_width=LABEL_CHARS)


def _labelled(rows: Sequence[tuple[str, Text | None]]) -> Table:
    """Facts under a label each, the labels as wide as the widest ("transcripts")."""
    return hanging(rows, label_style="dim", label_width=LABEL_CHARS)


def _resources(scenarios: Sequence[ScenarioResult]) -> Text | None:
    """The workers' footprint: the largest peak RSS and CPU time of any repeat, and where."""
    repeats = [(s.id, r) for s in scenarios for r in s.repeats]
    rss = [(r.peak_rss_mb, sid) for sid, r in repeats if r.peak_rss_mb is not None]
    # A private /tmp and /dev/shm are memory too: what the worker held there counts.
    tmpfs = [(r.peak_tmpfs_mb, sid) for sid, r in repeats
             if r.peak_tmpfs_mb is not None and r.peak_tmpfs_mb >= 0.1]
    cpu = [(r.cpu_s, sid) for sid, r in repeats if r.cpu_s is not None]
    if not rss and not cpu:
        return None
    text = Text()
    if rss:
        top = max(rss)
        text.append(f"peak RSS up to {top[0]:.1f} MB ({top[1]})")
    if tmpfs:
        top = max(tmpfs)
        text.append(f" · /tmp and /dev/shm up to {top[0]:.1f} MB ({top[1]})")
    if cpu:
        top = max(cpu)
        text.append(f"{' · ' if rss else ''}CPU up to {top[0]:.2f} s per repeat ({top[1]})")
    return text


def _model_line(scenario: ScenarioResult) -> Text | None:
    """A scenario's model calls as alk's gateway saw them (retries on the wire included), a
    repeat's worth on average."""
    model = scenario.model
    if model is None or not model.repeats:
        return None
    return Text.assemble((scenario.id, "bold"),
                         f"  {model.calls / model.repeats:.1f} calls · "
                         f"{model.retries / model.repeats:.1f} retries · "
                         f"{model.tokens / model.repeats:,.0f} tokens a repeat")


def _event_paths_line(scenario: ScenarioResult) -> Text:
    """Repeats whose normalized event paths differ; with a scripted model, that is the
    framework's own nondeterminism."""
    paths = scenario.stats.paths
    text = Text.assemble((scenario.id, "bold"), f": {paths.distinct} distinct")
    if paths.first_difference:
        text.append(f", first differing at event {paths.first_difference} "
                    f"({' vs '.join(paths.events_there)})")
    if scenario.scripted:
        text.append(" — the model is scripted: this nondeterminism is the framework's",
                    style="bold yellow")
    return text


def _paths_line(scenario: ScenarioResult) -> Text:
    """Repeats that took different tool paths: a finding even when they all passed."""
    trajectories = scenario.stats.trajectories
    text = Text.assemble((scenario.id, "bold"), f": {trajectories.distinct} distinct")
    if trajectories.first_divergence:
        text.append(f", first diverging at step {trajectories.first_divergence}")
    text.append(f" (entropy {trajectories.entropy_bits:.2f} bits)", style="dim")
    return text


def _why(scenario: ScenarioResult, run_id: str) -> RenderableType:
    """Why a scenario is not `pass`, from the repeats alone, so nobody has to open a file first.

    Repeats that failed the same way are shown once: twenty void repeats with one missing
    variable are one reason, not twenty. Each reason gives the `alk show` command that opens
    its first repeat's transcript, and what to do about its cause.
    """
    verdict, repeats = scenario.verdict, scenario.repeats
    bad = [r for r in repeats if r.outcome != Outcome.PASS]
    groups: dict[tuple[Outcome, str, str], list[RepeatResult]] = {}
    for r in sorted(bad, key=lambda r: r.repeat):
        groups.setdefault((r.outcome, r.cause, _SECONDS.sub("# s", r.detail)), []).append(r)
    blocks: list[RenderableType] = [Text.assemble(
        "\n", (f"why {scenario.id}: ", "bold"),
        (f"{verdict}{THIN_MARK if _thin(scenario.stats.counts) else ''}", style_of(verdict)),
        (f" · {_not_passed(repeats)}", "dim"))]
    if not repeats:
        blocks.append(Text("  no repeat ran", style="dim"))
    # Scored failures explain a verdict better than void repeats; then the commonest mode first.
    shown = sorted(groups.items(), key=lambda g: (g[0][0] == Outcome.LANE_INFRA, -len(g[1]),
                                                  g[1][0].repeat))[:WHY_REPEATS]
    for (outcome, cause, _), members in shown:
        numbers = [str(r.repeat) for r in members]
        label = f"repeat {numbers[0]}" if len(numbers) == 1 else (
            f"repeats {', '.join(numbers[:5])}" + (f" … ({len(numbers)} in all)"
                                                   if len(numbers) > 5 else ""))
        blocks.append(Padding(Text.assemble(f"{label}: ", (f"{outcome}/{cause}",
                                                           style_of(outcome))), (0, 0, 0, 2)))
        # Under its label, indented further: a wrapped detail never reads as the next reason.
        under = Text(one_line(_with_ranges([r.detail for r in members]), DETAIL_CHARS))
        if members[0].transcript:
            under.append(("\n" if under else "") + f"alk show {run_id} {scenario.id} "
                         f"{members[0].repeat}", style="dim")
        # The one command that runs the repeat again as it ran (report.md lists every one).
        under.append(("\n" if under else "") + rerun_command(run_id, scenario.id,
                                                            members[0].repeat), style="dim")
        if under:
            blocks.append(Padding(under, (0, 0, 0, 6)))
    rest = len(bad) - sum(len(members) for _, members in shown)
    if rest:
        blocks.append(Text(f"  … and {rest} more", style="dim"))
    advice = [("→", Text(f"{cause}: {CATALOGUE[cause].action}", style="italic dim"))
              for cause in dict.fromkeys(cause for (_, cause, _), _ in shown)
              if cause in CATALOGUE]
    if advice:
        blocks.append(Padding(hanging(advice), (0, 0, 0, 2)))
    return Group(*blocks)


def _not_passed(repeats: Sequence[RepeatResult]) -> str:
    """"of 20 repeats, 3 failed, 2 void (not scored)": a void repeat did not fail."""
    void = sum(1 for r in repeats if not r.scored)
    failed = sum(1 for r in repeats if r.scored and not r.passed)
    parts = [f"{failed} failed" if failed else "", f"{void} void (not scored)" if void else ""]
    said = ", ".join(part for part in parts if part) or "none failed"
    return f"of {plural(len(repeats), 'repeat')}, {said}"


# A duration in a detail ("10.2 s run"): repeats that differ only in it failed the same way.
_SECONDS = re.compile(r"\d+(?:\.\d+)? s\b")


def _with_ranges(details: Sequence[str]) -> str:
    """One detail for repeats whose details differ only in their durations: each duration
    shown as the range it spans ("10.1–10.4 s")."""
    spans = [[(float(m.group()[:-2]), m.group()[:-2]) for m in _SECONDS.finditer(d)]
             for d in details]
    shown = iter(f"{min(values)[1]} s" if min(values)[0] == max(values)[0] else
                 f"{min(values)[1]}–{max(values)[1]} s" for values in zip(*spans))
    return _SECONDS.sub(lambda m: next(shown, m.group()), details[0])


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


# ---------------------------------------------------------------------------------------------
# Cells


def _rate(rate: float | None, ci: tuple[float, float] | None) -> Text:
    # Right-aligned in the width of 100.0%, so that the rates and their CIs line up.
    text = Text(f"{DASH if rate is None else f'{rate * 100:.1f}%':>6}")
    if rate is not None and ci is not None:
        text.append(f" [{ci[0] * 100:.1f}–{ci[1] * 100:.1f}]")
    return text


def _void_rate(rate: Estimate | None) -> Text:
    """The share of the repeats that ran and were void: dim when none, marked when some."""
    if rate is None:  # nothing ran
        return Text(DASH, style="dim")
    shown = share(rate.value)
    return Text(shown, style="dim") if rate.value == 0 else Text(shown, style=VOID_STYLE)


def _passed_of_scored(stats: ScenarioStats | LaneStats) -> str:
    """A rate means little without its n."""
    return f"{stats.counts.passed}/{stats.counts.scored}"


def _pass_hat(stats: ScenarioStats | LaneStats, k: int) -> Text:
    """pass^k with its 95% interval, in whole percents: the chance that k repeats in a row all
    pass. A dash when k exceeds the scored repeats (the legend says so)."""
    estimate = pass_hat_k_at(stats, k)
    if estimate is None:
        return Text(f"{DASH:>4}", style="dim")
    # Right-aligned in the width of 100%, so that the intervals line up.
    return Text(f"{share(estimate.value):>4}").append(
        f" [{estimate.low * 100:.0f}–{estimate.high * 100:.0f}]", style="dim")


def _seconds(durations: DurationStats) -> Text:
    return Text(DASH, style="dim") if durations.p50 is None else Text(f"{durations.p50:.2f} s")


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
    return _labelled(rows)


def _repeat_line(repeat: RepeatResult | CutShort) -> Text:
    if isinstance(repeat, CutShort):
        return Text(f"cut short: {repeat.detail}", style="dim")
    repeat = printable(repeat)
    return Text.assemble((f"{repeat.outcome}/{repeat.cause}", style_of(repeat.outcome)),
                         f"  {one_line(repeat.detail, DETAIL_CHARS)}")
