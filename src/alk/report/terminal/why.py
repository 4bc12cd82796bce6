"""Why a scenario did not pass, in the run report: the legend of the table's marks, what the
repeats say of failures seen and unseen, and each scenario's why-section (its failed and void
repeats by cause, with the command that shows or reruns each, and the catalogue's advice).
"""

from __future__ import annotations

from typing import Iterable, Sequence

from rich.console import Group, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from alk.causes import CATALOGUE
from alk.causes.advice import advice
from alk.records import RepeatResult
from alk.report.failures import failure_groups
from alk.report.format import rerun_command
from alk.report.safe_text import DASH, hanging, one_line, plural, style_of
from alk.report.terminal.cells import DETAIL_CHARS, LABEL_CHARS, THIN_MARK, is_thin
from alk.result.document import ScenarioResult
from alk.stats.records import LaneStats
from alk.stats.summary import repeats_to_see

WHY_REPEATS = 3


# Failure rates every reader can weigh a run against: how many repeats it takes to see one.
REFERENCE_FAILURES = (0.05, 0.01)
LISTED = 3  # scenario ids named in one line, before "and N more"
FAILURE_LINES = 4  # lines of each kind (failures seen, none seen), before "and N more"


def failures(scenarios: Sequence[ScenarioResult]) -> list[tuple[str, Text | None]]:
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
            seen.setdefault((needed.failure_rate, needed.repeats_at_low, needed.low_rate,
                             needed.repeats), []).append(scenario.id)
    scored = sum(1 for s in scenarios if s.stats.counts.scored)
    lines = _capped([Text.assemble((_listed(ids, scored), "bold"), f": {rate:.1%} failed; "
                                   f"{at_low} repeats show one 95% of the time, even at "
                                   f"{low:.1%}" if at_low else f": {rate:.1%} failed; if that "
                                   f"is the rate, {repeats} repeats show one 95% of the time")
                     for (rate, at_low, low, repeats), ids in seen.items()], seen.values())
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


def legend(scenarios: Sequence[ScenarioResult], aggregate: LaneStats, k: int,
           clustered: bool = True) -> Table:
    """What the table's columns mean, why a pass^k is missing, and (`clustered`: when the
    table shows it) which of the lane's two intervals to read when."""
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
    if clustered and aggregate.clustered_rate is not None:
        rows.append(("clustered", "the scenarios as a sample of tasks: read it to generalise "
                                  "beyond them; pooled: these scenarios only"))
    return hanging([(label, Text(value)) for label, value in rows], label_style="dim",
                   value_style="dim", label_width=LABEL_CHARS)


def section(scenario: ScenarioResult, run_id: str,
            advised: set[str] | None = None) -> RenderableType:
    """Why a scenario is not `pass`, from the repeats alone, so nobody has to open a file first.

    Repeats that failed the same way are shown once (`alk.report.failures`): twenty void
    repeats with one missing variable are one reason, not twenty. Each reason gives its detail,
    the `alk show` command that opens its first repeat's transcript, and what to do about its
    cause, fitted to its fault (once a report: `advised` holds the advice already given, and
    gains these).
    """
    verdict, repeats = scenario.verdict, scenario.repeats
    advised = set() if advised is None else advised
    groups = failure_groups(scenario)
    blocks: list[RenderableType] = [Text.assemble(
        "\n", (f"why {scenario.id}: ", "bold"),
        (f"{verdict}{THIN_MARK if is_thin(scenario.stats.counts) else ''}", style_of(verdict)),
        (f" · {_not_passed(repeats)}", "dim"))]
    if not repeats:
        blocks.append(Text("  no repeat ran", style="dim"))
    shown = groups[:WHY_REPEATS]
    for group in shown:
        first = group.repeats[0]
        blocks.append(Padding(Text.assemble(f"{group.label}: ", (f"{group.outcome}/{group.cause}",
                                                                 style_of(group.outcome))),
                              (0, 0, 0, 2)))
        # Under its label, indented further: a wrapped detail never reads as the next reason.
        # Cut, when it must be, between words: never inside a value.
        under = Text(one_line(group.detail, DETAIL_CHARS, whole_words=True))
        if first.transcript:
            under.append(("\n" if under else "") + f"alk show {run_id} {scenario.id} "
                         f"{first.repeat}", style="dim")
        # The one command that runs the repeat again as it ran (report.md lists every one).
        under.append(("\n" if under else "") + rerun_command(run_id, scenario.id, first.repeat),
                     style="dim")
        blocks.append(Padding(under, (0, 0, 0, 6)))
    rest = sum(len(g.repeats) for g in groups[WHY_REPEATS:])
    if rest:
        blocks.append(Text(f"  … and {rest} more", style="dim"))
    # The advice fits the fault the detail names (a raising tool is not a 429), so a cause is
    # advised on again where its advice differs.
    fitted = dict.fromkeys((g.cause, advice(g.cause, g.detail)) for g in shown
                           if g.cause in CATALOGUE)
    new = [(cause, said) for cause, said in fitted if f"{cause}: {said}" not in advised]
    advised.update(f"{cause}: {said}" for cause, said in new)
    advice_rows = [("→", Text(f"{cause}: {said}", style="italic dim")) for cause, said in new]
    if advice_rows:
        blocks.append(Padding(hanging(advice_rows), (0, 0, 0, 2)))
    return Group(*blocks)


def _not_passed(repeats: Sequence[RepeatResult]) -> str:
    """"of 20 repeats, 3 failed, 2 void (not scored)": a void repeat did not fail."""
    void = sum(1 for r in repeats if not r.scored)
    failed = sum(1 for r in repeats if r.scored and not r.passed)
    parts = [f"{failed} failed" if failed else "", f"{void} void (not scored)" if void else ""]
    said = ", ".join(part for part in parts if part) or "none failed"
    return f"of {plural(len(repeats), 'repeat')}, {said}"
