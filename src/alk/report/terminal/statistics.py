"""The statistics block of the run report, shown with `--stats`: each figure only where it
means something (`alk.report.meaning`), and one line naming those withheld, with why and what
the run has. Without `--stats` the report shows none of them and says in one line what
`--stats` adds.
"""

from __future__ import annotations

from rich.console import RenderableType
from rich.text import Text

from alk.report.format import ADAPTIVE_NOTE
from alk.report.meaning import MIN_REPEATS, clustered_shown, consistency_shown, withheld
from alk.report.safe_text import plural
from alk.report.terminal.cells import labelled
from alk.report.terminal.notes import (
    consistency,
    event_paths_line,
    fault_robustness,
    icc,
    model_line,
    paths_line,
    resources,
)
from alk.report.terminal.why import failures, legend
from alk.result.document import RunDocument
from alk.result.verdict import judge

def more_line(command: str) -> RenderableType:
    """Without `--stats`: what the statistics block holds, and the command that shows it."""
    # The command first, so that it stays on one line to copy.
    return labelled([("statistics", Text.assemble(
        (command, "bold"), (" adds the legend, ICC, consistency, fault robustness, repeats "
                            "to see a failure, tool and event paths, the workers' footprint "
                            "and the full rule", "dim")))])


def statistics_block(doc: RunDocument, k: int) -> list[RenderableType]:
    """The legend and every figure that means something here, then one line naming those
    withheld."""
    scenarios, aggregate = doc.scenarios, doc.aggregate
    rows: list[tuple[str, RenderableType | None]] = []
    if clustered_shown(scenarios):
        rows.append(("ICC", icc(aggregate.icc)))
    if consistency_shown(scenarios):
        rows.extend(consistency(scenarios, aggregate, MIN_REPEATS))
    # "fault robustness" would widen every label: its value says "to faults" instead.
    rows.append(("robustness", fault_robustness(aggregate.fault_robustness)))
    rows.extend(failures(scenarios))
    rows.append(("workers", resources(scenarios)))
    rows.append(("rule", _rule(doc)))
    tool_paths = [paths_line(s) for s in scenarios if s.stats.trajectories.distinct > 1]
    event_paths = [event_paths_line(s) for s in scenarios if s.stats.paths.distinct > 1]
    model = [line for line in map(model_line, scenarios) if line is not None]
    rows.extend([*((("" if i else "tool paths"), line) for i, line in enumerate(tool_paths)),
                 *((("" if i else "model"), line) for i, line in enumerate(model)),
                 *((("" if i else "event paths"), line) for i, line in enumerate(event_paths))])
    gone = withheld(doc)
    rows.extend(("" if i else "withheld", Text(reason, style="dim"))
                for i, reason in enumerate(gone))
    return [Text(), legend(scenarios, aggregate, k, clustered_shown(scenarios)),
            labelled(rows)]  # type: ignore[arg-type]  # a Group is a value too


def _rule(doc: RunDocument) -> Text:
    """The rule that set the exit code, in full, and whether the run meets it."""
    ruling = judge([doc])
    text = Text(doc.settings.rule.describe())
    if ruling.failing:
        text.append(f"; broken by {', '.join(s for _, s in ruling.failing)}", style="bold")
    elif ruling.unscored:
        text.append(f"; not scored: {', '.join(s for _, s in ruling.unscored)}")
    return text


def stopped(doc: RunDocument) -> list[tuple[str, Text | None]]:
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


# Why an adaptive run stopped sampling a scenario, in words (alk.result.options.StopReason).
_STOP_WORDS = {"flaky": "both outcomes seen", "max_repeats": "at the maximum",
               "interrupted": "interrupted"}

