"""The facts under the run report's table: void and thin verdicts, the ICC and its design effect,
how alike the repeats are (consistency), fault robustness, the workers' resources, the model
calls, and where the repeats' tool and event paths part.
"""

from __future__ import annotations

from typing import Sequence

from rich.console import Group, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from alk.causes import CATALOGUE, Cause
from alk.estimate import Estimate
from alk.records import Outcome
from alk.report.format import icc_mark, share
from alk.report.safe_text import DASH, hanging, plural
from alk.report.terminal.cells import THIN_MARK, VOID_STYLE, Parts, is_thin
from alk.result.document import ScenarioResult
from alk.stats.records import Consistency, FaultRobustness, Icc, LaneStats

THIN_LISTED = 5


def void_notes(scenarios: Sequence[ScenarioResult], aggregate: LaneStats) -> Table | None:
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
    thin = [s for s in scenarios if is_thin(s.stats.counts)]
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


def icc(icc: Icc) -> RenderableType:
    """How alike a scenario's repeats are (ICC(1), with its F interval), and what that does to
    the pooled rate: the design effect, and how many independent repeats the scored ones are
    worth. When it has no value, why; when its value needs a caveat, the caveat."""
    if icc.value is None:
        point = Text(DASH).append(f" ({icc.reason})" if icc.reason else "", style="dim")
    else:
        point = Text(_signed(icc.value), style="bold")
        if icc.ci is not None:
            point.append(f" {icc_mark(icc)}[{_signed(icc.ci[0])}, {_signed(icc.ci[1])}]")
    sizes = Text(plural(icc.groups, "scenario"), style="dim")
    if icc.cluster_size is not None:
        sizes.append(f", cluster size {icc.cluster_size:.1f}")
        # k0, the ICC's own size for unequal counts: worth a word only when it differs.
        if icc.k0 is not None and round(icc.k0, 1) != round(icc.cluster_size, 1):
            sizes.append(f" (k0 {icc.k0:.1f})")
    lines: list[RenderableType] = [Parts([point, sizes])]
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


def consistency(scenarios: Sequence[ScenarioResult], aggregate: LaneStats,
                fewest: int = 2) -> list[tuple[str, RenderableType]]:
    """How alike the repeats are (`alk.stats.records.Consistency`): the lane's figures, then each
    scenario that stands out (`_stands_out`) and scored at least `fewest` repeats, least
    consistent first, with its figures below 1 only (a scenario whose repeats are all alike
    says nothing new), then what the figures compare. Nothing when the lane has no figure."""
    lane = _figures(aggregate.consistency)
    if not lane:
        return []
    below = [(min(e.value for _, e in figures), s.id, figures,
              {_CONSISTENCY_WORDS[name] for name in s.stats.consistency.approximate})
             for s in scenarios
             if s.stats.counts.scored >= fewest
             and (figures := _figures(s.stats.consistency, below_one=True))
             and _stands_out(s.stats.consistency)]
    # Least consistent first: when the list is cut, what is cut is the closest to 1.
    below.sort(key=lambda item: item[0])
    lines: list[RenderableType] = [Parts([_figure(name, e) for name, e in lane])]
    for _, sid, figures, approximate in below[:CONSISTENCY_LISTED]:
        first, *rest = [_figure(name, e, name in approximate) for name, e in figures]
        lines.append(Padding(Parts([Text.assemble((sid, "bold"), ": ", first), *rest]),
                             (0, 0, 0, 2)))
    if len(below) > CONSISTENCY_LISTED:
        lines.append(Text(f"  +{plural(len(below) - CONSISTENCY_LISTED, 'more scenario')}",
                          style="dim"))
    # Worded to take two lines at 80 columns.
    lines.append(Text("1 = all repeats alike in outcome, tool counts, step sequence, and time, "
                      "CPU, memory, model calls; listed: what varies beyond timing"
                      + ("; approx.: an interval that holds less than 95% at these repeats"
                         if any(words in marked for _, _, shown, marked in
                                below[:CONSISTENCY_LISTED] for words, _ in shown) else ""),
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


def _figure(name: str, estimate: Estimate, approximate: bool = False) -> Text:
    """"outcome 0.81 [0.62–0.95]"; "approx." after an interval that holds less often."""
    return Text.assemble(f"{name} ", (f"{estimate.value:.2f}", "bold"),
                         f" [{estimate.low:.2f}–{estimate.high:.2f}]",
                         (" approx." if approximate else "", "dim"))


def fault_robustness(robustness: FaultRobustness | None) -> Text | None:
    """The pass rate with injected faults ÷ without, when the lane has scenarios of both."""
    if robustness is None:
        return None
    if robustness.value is None:
        return Text("none: no faulted scenario has an unfaulted twin (a scenario's baseline "
                    "names one)", style="dim")
    high = "∞)" if robustness.high is None else f"{robustness.high:.2f}]"
    text = Text.assemble("to faults ", (f"{robustness.value:.2f}", "bold"),
                         f" [{robustness.low:.2f}–{high}: " + (
                             f"faulted ÷ unfaulted twin, {plural(len(robustness.pairs), 'pair')}"
                             if robustness.method == "paired" else
                             "pass rate with injected faults ÷ without"))
    if robustness.high is None:
        text.append("\nno upper bound: too few repeats passed without faults", style="dim")
    return text


def resources(scenarios: Sequence[ScenarioResult]) -> Text | None:
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


def model_line(scenario: ScenarioResult) -> Text | None:
    """A scenario's model calls as alk's gateway saw them (retries on the wire included), a
    repeat's worth on average."""
    model = scenario.model
    if model is None or not model.repeats:
        return None
    return Text.assemble((scenario.id, "bold"),
                         f"  {model.calls / model.repeats:.1f} calls · "
                         f"{model.retries / model.repeats:.1f} retries · "
                         f"{model.tokens / model.repeats:,.0f} tokens a repeat")


def event_paths_line(scenario: ScenarioResult) -> Text:
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


def paths_line(scenario: ScenarioResult) -> Text:
    """Repeats that took different tool paths: a finding even when they all passed."""
    trajectories = scenario.stats.trajectories
    text = Text.assemble((scenario.id, "bold"), f": {trajectories.distinct} distinct")
    if trajectories.first_divergence:
        text.append(f", first diverging at step {trajectories.first_divergence}")
    text.append(f" (entropy {trajectories.entropy_bits:.2f} bits)", style="dim")
    return text
