"""The scenario table of the run report, for 80 columns first: each scenario's verdict with its
passed/scored, pass rate and interval, void share, pass^k and p50, what failed under its row,
and the lane's pooled and clustered rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from rich.console import Console, ConsoleOptions, RenderResult
from rich.padding import Padding
from rich.text import Text

from alk.causes import CATALOGUE, Cause
from alk.records import Outcome
from alk.report.format import share
from alk.report.safe_text import DASH, style_of
from alk.report.terminal.cells import THIN_MARK, VOID_STYLE, Parts, is_thin
from alk.result.document import ScenarioResult
from alk.stats.pass_k import pass_hat_k_at
from alk.stats.records import DurationStats, LaneStats, ScenarioStats

# Failure layers in the order a reviewer should read them; a lane_infra repeat is void, not failed.
_LAYERS = ((Outcome.FRAMEWORK_RUNTIME, "framework_runtime"), (Outcome.AGENT, "agent"),
           (Outcome.LANE_INFRA, "void"))
# The widest verdict as the table shows it ("flaky?"): passed/scored starts past it.
VERDICT_CHARS = len("flaky") + len(THIN_MARK)
# The lane's second row: its pass rate with the interval of scenarios taken as a sample of tasks.
CLUSTERED = "  clustered"


def scenario_table(scenarios: Sequence[ScenarioResult], aggregate: LaneStats,
                    k: int, *, clustered: bool = True) -> _ScenarioTable:
    """`clustered`: show the lane's clustered row (where it means something:
    `alk.report.terminal.statistics.clustered_shown`). A lane of one scenario has no lane
    rows: they would repeat its row."""
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
    rate = aggregate.clustered_rate
    if clustered and rate is not None:
        lane.append(_Row(CLUSTERED, (Text(""), _rate(rate.value, (rate.low, rate.high))), None))
    lane[-1] = _Row(lane[-1].id, lane[-1].cells, _row_detail(aggregate, _verdict_tally(aggregate)))
    return _ScenarioTable(rows, lane if len(rows) > 1 else [], k)


@dataclass(frozen=True, slots=True)
class _Row:
    id: str
    cells: tuple[Text, ...]  # verdict, pass rate, void, pass^k, p50 (a row may stop early)
    detail: Parts | None  # what failed, under the row


class _ScenarioTable:
    """One line of numbers per scenario, and under it, indented and wrapped at word boundaries,
    what did not pass. Designed for 80 columns: the numbers never wrap, and the causes, the one
    part of unbounded length, get the whole width instead of a narrow column. An id too long
    for its column takes a line of its own above its numbers rather than being broken (one
    wider than the line is cut with an ellipsis: never split across lines). Under the
    scenarios, the lane's rows: pooled, then clustered."""

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
        if self.lane:
            yield rule
        for row in self.lane:
            yield from self._row(row, id_width, widths)

    def _row(self, row: _Row, id_width: int, widths: Sequence[int]) -> RenderResult:
        name = Text(row.id, style="bold")
        if name.cell_len > id_width:
            yield Text(row.id, style="bold", no_wrap=True, overflow="ellipsis")
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
    if is_thin(stats.counts):
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


def _row_detail(stats: ScenarioStats | LaneStats, first: Sequence[Text] = ()) -> Parts | None:
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
    return Parts(parts) if parts else None


# ---------------------------------------------------------------------------------------------
# Cells


def _rate(rate: float | None, ci: tuple[float, float] | None) -> Text:
    # Right-aligned in the width of 100.0%, so that the rates and their CIs line up.
    text = Text(f"{DASH if rate is None else f'{rate * 100:.1f}%':>6}")
    if rate is not None and ci is not None:
        text.append(f" [{ci[0] * 100:.1f}–{ci[1] * 100:.1f}]")
    return text


def _void_rate(rate: float | None) -> Text:
    """The share of the repeats that ran and were void: dim when none, marked when some."""
    if rate is None:  # nothing ran
        return Text(DASH, style="dim")
    shown = share(rate)
    return Text(shown, style="dim") if rate == 0 else Text(shown, style=VOID_STYLE)


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
