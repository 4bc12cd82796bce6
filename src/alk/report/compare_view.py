"""`alk compare RUN_A RUN_B` as rich renderables: which run is which, one row per scenario
(pass rates, the change B − A with its interval, the one-sided p, the verdict), the pooled
row, the lane test, what differs between the runs, and for each scenario that is not
unchanged, why, what its test could not see, and what changed in its failures, void repeats,
tool paths and durations. A scenario id is never split across lines, nor a number.

Verdicts carry a mark as well as a colour (▼ regressed, ▲ improved, = unchanged,
? inconclusive), so that they read the same in a CI log without colour. Nothing here prints:
the CLI owns the console.
"""

from __future__ import annotations

import math

from rich import box
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from alk.causes import CATALOGUE
from alk.compare import Change, Comparison, Looks, RunSide, ScenarioComparison, Side
from alk.estimate import Estimate
from alk.records import Outcome
from alk.stats.sequential import Ledger
from alk.report.safe_text import DASH, STYLES, cell, hanging, plural

MARKS = {Change.REGRESSED: ("▼", "bold red"), Change.IMPROVED: ("▲", "bold green"),
         Change.UNCHANGED: ("=", ""), Change.INCONCLUSIVE: ("?", "yellow")}
# Failure layers as the run report orders them; void repeats get a line of their own.
_FAILED = (Outcome.FRAMEWORK_RUNTIME, Outcome.AGENT)
ARROW = " → "


def compare_view(comparison: Comparison) -> RenderableType:
    """The whole comparison, designed for 80 columns."""
    parts: list[RenderableType] = [_header(comparison), _FittedTable(comparison)]
    if comparison.sequence is not None:
        parts.append(_looks(comparison))
    if comparison.lane is not None:
        parts.append(_lane(comparison))
    parts.append(_legend(comparison))
    if comparison.notes:
        parts.append(hanging([("note" if i == 0 else "", cell(note))
                              for i, note in enumerate(comparison.notes)],
                             label_style="bold yellow", value_style="yellow"))
    for group in _alike([s for s in comparison.scenarios if s.change is not Change.UNCHANGED]):
        looks = comparison.sequence
        parts.extend((Text(), _details(group[0], looks) if len(group) == 1
                      else _alike_details(group, looks)))
    return Group(*parts)


def _quiet_key(scenario: ScenarioComparison) -> tuple | None:
    """What a scenario that did not move shows, when that is all there is to show: the same
    counts in both runs, no void repeat, one tool path, a duration that did not shift. None
    for one with more to say."""
    moved = scenario.duration_change is not None and not (
        scenario.duration_change.low <= 0 <= scenario.duration_change.high)
    if (scenario.difference is None or scenario.a.void or scenario.b.void or moved
            or (scenario.a.passed, scenario.a.scored) != (scenario.b.passed, scenario.b.scored)
            or scenario.trajectory_distance or scenario.a.trajectories > 1):
        return None
    return (scenario.change, scenario.reason, scenario.a.passed, scenario.a.scored,
            scenario.level, scenario.repeats_for_drop, scenario.repeats_to_settle,
            scenario.a.layers, scenario.a.causes)


def _alike(scenarios: list[ScenarioComparison]) -> list[list[ScenarioComparison]]:
    """The scenarios in order, those that did not move and say the same thing as one group
    (ten scenarios at 20/20 in both runs are one paragraph, not ten), at the first's place."""
    groups: list[list[ScenarioComparison]] = []
    where: dict[tuple, list[ScenarioComparison]] = {}
    for scenario in scenarios:
        key = _quiet_key(scenario)
        if key is not None and key in where:
            where[key].append(scenario)
            continue
        groups.append([scenario])
        if key is not None:
            where[key] = groups[-1]
    return groups


def _alike_details(group: list[ScenarioComparison], looks: Looks | None) -> RenderableType:
    first = group[0]
    names = Text(", ").join(cell(s.id, "bold") for s in group)
    title = names.append(f" ({len(group)} scenarios, {first.a.passed}/{first.a.scored} in both "
                         "runs): ").append_text(verdict(first.change))
    title.append(" · ").append_text(cell(first.reason))
    rows = [("test", _test(first, looks)), ("repeats", _repeats(first)),
            ("failures", _failures(first.a, first.b))]
    return Group(title, hanging([(Text(label, style="dim"), value)
                                 for label, value in rows if value is not None],
                                label_width=11))


def verdict(change: Change) -> Text:
    mark, style = MARKS[change]
    return Text(f"{mark} {change.value}", style=style)


def _header(comparison: Comparison) -> RenderableType:
    counts = ", ".join(f"{n} {change.value}" for change in Change
                       if (n := comparison.count(change)))
    overall = Text("B against A: ").append_text(verdict(comparison.change)).append(
        f" ({counts} of {plural(len(comparison.scenarios), 'scenario')})")
    runs = hanging([(Text(name, style="bold"), _run_line(side))
                    for name, side in (("A", comparison.a), ("B", comparison.b))], gap=2)
    # The reason, when no scenario's verdict gives it already: the lane test decided.
    if comparison.change in (Change.REGRESSED, Change.IMPROVED) \
            and not comparison.count(comparison.change):
        return Group(runs, overall, cell(comparison.reason, "bold"))
    return Group(runs, overall)


def _run_line(side: RunSide) -> Text:
    text = cell(side.run_id, "bold").append("  ").append_text(cell(side.lane))
    text.append(" · ").append_text(cell(f"{side.framework or DASH} "
                                        f"{side.version or '(no version)'}", "bold"))
    text.append(f" · {plural(side.repeats, 'repeat')}", style="dim")
    if side.status != "complete":
        text.append(" · ").append_text(cell(side.status, "bold yellow"))
    return text


class _FittedTable:
    """The table, with each run's rate and counts; where that is wider than the terminal
    (three-digit counts and a long id at 80 columns), the counts alone: rich would otherwise
    crop the last column, the verdict, mid-word."""

    def __init__(self, comparison: Comparison) -> None:
        self.comparison = comparison

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        table = _table(self.comparison)
        # Measured unbounded: a measurement within the options is clamped to their width.
        wanted = Measurement.get(console, options.update_width(10 * options.max_width), table)
        if wanted.maximum > options.max_width:
            table = _table(self.comparison, rates=False)
        yield table


def _table(comparison: Comparison, *, rates: bool = True) -> Table:
    # The pooled row is the footer, under a rule. Its p is Fisher's on the pooled counts, not
    # adjusted (one test), and it carries no verdict: the scenarios' verdicts decide (header).
    pooled = (Text("pooled", style="bold"), _rate(comparison.pooled_a, rates),
              _rate(comparison.pooled_b, rates), _difference(comparison.pooled_difference),
              _p(comparison.pooled_p), Text(""))
    # No padding: the box's column divider is the one space between columns, which 80
    # columns need for an 18-letter id beside the numbers.
    table = Table(box=box.SIMPLE, show_edge=False, pad_edge=False, padding=0,
                  show_footer=True)
    widest = max([len(cell(s.id).plain) for s in comparison.scenarios] + [len("scenario")])
    for header, footer in zip(("scenario", "A", "B", "Δ pts [95% CI]", "p", "verdict"),
                              pooled):
        right = header not in ("scenario", "verdict")
        # Nothing wraps: an id split over two lines reads as two scenarios.
        table.add_column(header, footer=footer, justify="right" if right else "left",
                         no_wrap=True, min_width=widest if header == "scenario" else None)
    for scenario in comparison.scenarios:
        table.add_row(cell(scenario.id, "bold"), _rate(scenario.a, rates),
                      _rate(scenario.b, rates),
                      _difference(scenario.difference), _p(_directed_p(scenario)),
                      verdict(scenario.change))
    return table


def look_line(ledger: Ledger) -> str:
    """One look of `--until-decided`, as it is taken (the CLI prints it on stderr)."""
    design = ledger.design
    points = design.looks()
    j = ledger.looks_taken
    decided = design.scenarios - len(ledger.open())
    return (f"look {j} of {len(points)} at {points[j - 1]} repeats a run: {decided} of "
            f"{plural(design.scenarios, 'scenario')} decided; α spent {ledger.spent:.3g} of "
            f"{design.alpha:g}")


def _looks(comparison: Comparison) -> Text:
    looks = comparison.sequence
    assert looks is not None
    last = looks.first + (looks.taken - 1) * looks.round_size
    last = min(last, looks.max_repeats)
    return cell(f"until decided: {looks.taken} of {looks.planned} looks, {looks.first} to "
                f"{last} repeats a run in rounds of {looks.round_size} (at most "
                f"{looks.max_repeats}); α spent {looks.alpha_spent:.3g} of "
                f"{comparison.alpha:g} by each family (O'Brien–Fleming-type spending, "
                f"Bonferroni over looks and scenarios); repeats run: {looks.added_a} more in A, "
                f"{looks.added_b} more in B", "bold")


def _directed_p(scenario: ScenarioComparison) -> float | None:
    """The one-sided p of the direction B moved in: worse unless B's rate is higher."""
    if scenario.difference is not None and scenario.difference.value > 0:
        return scenario.p_better
    return scenario.p


def _lane(comparison: Comparison) -> Text:
    lane = comparison.lane
    assert lane is not None
    worse = comparison.pooled_difference is None or comparison.pooled_difference.value <= 0
    p, level = (lane.p_worse, lane.level_worse) if worse else (lane.p_better, lane.level_better)
    text = Text(f"lane test across {plural(lane.strata, 'scenario')} (exact stratified, "
                f"one-sided, B {'worse' if worse else 'better'}): p {_p(p).plain}, "
                f"needs <= {_level(level)}", style="bold" if lane.regressed else "")
    if lane.regressed:
        text.append(" · ").append_text(verdict(Change.REGRESSED))
    elif comparison.lane_drop is not None:
        text.append(f" · a drop of about {_whole_points(comparison.lane_drop)} points in every "
                    "scenario could go unseen (normal approximation)")
    return text


def _legend(comparison: Comparison) -> Text:
    if comparison.sequence is not None:
        decided = ("regressed, improved: at a look, p within that look's boundary (its "
                   "increment of α, split evenly over the scenarios) · unchanged: at a look, "
                   f"the interval at that look's level within ±{_points(comparison.margin)} "
                   "and no void repeat")
    else:
        decided = ("regressed, improved: p within its share of α = "
                   f"{comparison.alpha:g} by Holm–Tarone, the lane test one more member · "
                   f"unchanged: the interval within ±{_points(comparison.margin)} and no void "
                   "repeat")
    return Text(
        "A, B: pass rate, passed/scored (void repeats are never scored) · Δ: B − A, "
        "Newcombe's interval · p: Fisher's exact, one-sided, the way B moved (pooled: "
        f"two-sided, its repeats taken as independent) · {decided} · could go unseen: what "
        "the test misses more than 20% of the time", style="dim")


def _details(scenario: ScenarioComparison, looks: Looks | None) -> RenderableType:
    """Why a scenario got its verdict, and what changed in it."""
    title = cell(scenario.id, "bold").append(": ").append_text(verdict(scenario.change))
    title.append(" · ").append_text(cell(scenario.reason))
    rows = [("test", _test(scenario, looks)), ("repeats", _repeats(scenario)),
            ("failures", _failures(scenario.a, scenario.b)),
            ("void", _void(scenario.a, scenario.b)),
            ("tool paths", _paths(scenario)),
            ("duration", _duration(scenario))]
    return Group(title, hanging([(Text(label, style="dim"), value)
                                 for label, value in rows if value is not None],
                                label_width=11))


def _test(scenario: ScenarioComparison, looks: Looks | None = None) -> Text | None:
    if scenario.difference is None or scenario.change in (Change.REGRESSED, Change.IMPROVED):
        return None  # the reason has said it
    better = scenario.difference.value > 0
    p, level = ((scenario.p_better, scenario.level_better) if better
                else (scenario.p, scenario.level))
    way = "better" if better else "worse"
    if looks is not None and looks.boundaries:
        # The sequential gate holds every scenario to its share of each look's α: Holm–Tarone's
        # count is not part of it (alk.stats.sequential says why).
        return cell(f"one-sided p {_p(p).plain} (B {way}) at the last look, needs <= "
                    f"{_level(looks.boundaries[-1])} there, its share of that look's α")
    if level is None:
        return cell(f"one-sided p {_p(p).plain} (B {way}); counts like these cannot reach "
                    "significance, so this test spent no α (Holm–Tarone)")
    return cell(f"one-sided p {_p(p).plain} (B {way}), needs <= {_level(level)}, its share of "
                "α by Holm–Tarone")


def _repeats(scenario: ScenarioComparison) -> Text | None:
    parts = []
    if scenario.repeats_for_drop is not None:
        parts.append(f"about {scenario.repeats_for_drop} a run would see a 20-point drop 80% "
                     "of the time")
    if scenario.repeats_to_settle is not None:
        parts.append(f"about {scenario.repeats_to_settle} a run would show it unchanged "
                     f"within the margin at these rates")
    return cell("; ".join(parts)) if parts else None


def _level(level: float | None) -> str:
    return DASH if level is None else _p(level).plain


def _whole_points(rate: float) -> str:
    return f"{math.ceil(rate * 100 - 1e-9):.0f}"


def _failures(a: Side, b: Side) -> Text | None:
    """Each failure layer A → B, with its causes A → B."""
    layers_a, layers_b = dict(a.layers), dict(b.layers)
    parts = []
    for layer in _FAILED:
        before, after = layers_a.get(layer.value, 0), layers_b.get(layer.value, 0)
        if before or after:
            part = cell(f"{layer.value} {before}{ARROW}{after}", STYLES[layer])
            causes = _causes(a, b, layer)
            parts.append(part.append_text(cell(f": {causes}")) if causes else part)
    return Text(" · ").join(parts) if parts else None


def _void(a: Side, b: Side) -> Text | None:
    if not a.void and not b.void:
        return None
    text = cell(f"{_percent(a.void_rate)}{ARROW}{_percent(b.void_rate)} "
                f"({a.void} of {a.completed}{ARROW}{b.void} of {b.completed})",
                STYLES[Outcome.LANE_INFRA])
    causes = _causes(a, b, Outcome.LANE_INFRA)
    return text.append_text(cell(f": {causes}")) if causes else text


def _causes(a: Side, b: Side, layer: Outcome) -> str:
    causes_a, causes_b = dict(a.causes), dict(b.causes)
    # Most repeats first, in B (the run under question), then in A.
    mine = sorted((cause for cause in causes_a.keys() | causes_b.keys()
                   if (info := CATALOGUE.get(cause)) is not None  # type: ignore[call-overload]
                   and info.outcome is layer),
                  key=lambda c: (-causes_b.get(c, 0), -causes_a.get(c, 0), c))
    return ", ".join(f"{c} {causes_a.get(c, 0)}{ARROW}{causes_b.get(c, 0)}" for c in mine)


def _paths(scenario: ScenarioComparison) -> Text | None:
    distance = scenario.trajectory_distance
    if distance is None or (not distance and scenario.a.trajectories <= 1):
        return None
    return cell(f"{scenario.a.trajectories}{ARROW}{scenario.b.trajectories} distinct · "
                f"Jensen–Shannon distance {distance:.2f} (0 same, 1 disjoint)")


def _duration(scenario: ScenarioComparison) -> Text | None:
    change, a, b = scenario.duration_change, scenario.a.median_s, scenario.b.median_s
    if change is None or a is None or b is None:
        return None
    low, high = _signed(change.low, 2), _signed(change.high, 2)
    return cell(f"median {a:.2f} s{ARROW}{b:.2f} s · Δ {_signed(change.value, 2)} s "
                f"[{low}, {high}] (bootstrap)")


def _rate(side: Side, rate: bool = True) -> Text:
    if not side.scored:
        return Text("void", style=STYLES[Outcome.LANE_INFRA])
    text = Text(f"{_percent(side.rate) + ' ' if rate else ''}{side.passed}/{side.scored}")
    if side.void:
        text.append(f"\nvoid {_percent(side.void_rate)}", style=STYLES[Outcome.LANE_INFRA])
    return text


def _difference(estimate: Estimate | None) -> Text:
    if estimate is None:
        return Text(DASH, style="dim")
    # Whole points, unless the interval is narrower than ten: then a tenth of a point matters.
    places = 1 if estimate.high - estimate.low < 0.1 else 0
    values = [_signed(v * 100, places) for v in (estimate.value, estimate.low, estimate.high)]
    return Text(values[0]).append(f" [{values[1]}, {values[2]}]", style="dim")


def _signed(value: float, places: int) -> str:
    shown = f"{value:.{places}f}"
    if float(shown) == 0:
        return f"{0:.{places}f}"  # no "−0"
    return shown.replace("-", "−") if value < 0 else "+" + shown


def _p(p: float | None) -> Text:
    if p is None:
        return Text(DASH, style="dim")
    # Two significant figures: 0.69, 0.013, 0.0033; below 0.001 the digits mean little.
    return Text("<0.001" if p < 0.001 else f"{p:.2f}" if p >= 0.1 else f"{p:.2g}")


def _percent(rate: float | None) -> str:
    return DASH if rate is None else f"{rate * 100:.0f}%"


def _points(margin: float) -> str:
    return f"{margin * 100:g}"

