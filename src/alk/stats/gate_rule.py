"""The regression gate's rule over plain counts, one table per scenario: which scenarios
regressed, improved, stayed unchanged within the margin, or cannot be told, and whether the
lane as a whole regressed. `alk.compare` applies it to two runs; benchmarks/gate.py drives it
with simulated counts. The rule in words is alk.compare's docstring (and docs/compare.md).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from alk.estimate import Estimate
from alk.stats.gate import (
    Counts,
    Tested,
    fisher_greater,
    fisher_less,
    holm_tarone,
    least_p_pair,
    stratified,
    tarone_k,
)
from alk.stats.two_runs import newcombe_interval


class Change(StrEnum):
    REGRESSED = "regressed"
    IMPROVED = "improved"
    UNCHANGED = "unchanged"
    INCONCLUSIVE = "inconclusive"


@dataclass(frozen=True, slots=True)
class Verdict:
    """One scenario: its change, why in words, and the numbers behind it. The p's are
    one-sided Fisher; a level is the share of α that p was held to (None: the margins could
    reach no level, so it spent none)."""

    change: Change
    reason: str
    difference: Estimate | None = None  # B − A, Newcombe's 95% interval
    p_worse: float | None = None
    p_better: float | None = None
    level_worse: float | None = None
    level_better: float | None = None
    # The level a drop in B would have been held to: its level, else what one more member
    # of the family would get (α/(K+1)); what "could detect" is computed at.
    share: float | None = None


@dataclass(frozen=True, slots=True)
class LaneTest:
    """The exact stratified test across the scenarios, one more member of each family."""

    p_worse: float
    p_better: float
    level_worse: float | None
    level_better: float | None
    strata: int  # scenarios whose margins admit more than one table
    regressed: bool
    improved: bool
    share: float  # the level a drop would have been held to, as Verdict.share


@dataclass(frozen=True, slots=True)
class Judgement:
    scenarios: tuple[Verdict, ...]
    lane: LaneTest | None  # None with fewer than two informative scenarios: nothing to add
    change: Change
    reason: str


def judge(tables: Sequence[Counts | None], voids: Sequence[int], *, alpha: float,
          margin: float) -> Judgement:
    """Each scenario's table (None: a run scored none of its repeats) and its void repeats in
    both runs together; α the family-wise level of each family (regressions; improvements)."""
    tested = [i for i, table in enumerate(tables) if table is not None]
    counts: list[Counts] = [table for table in tables if table is not None]
    least = [least_p_pair(*c) for c in counts]
    worse_p = [fisher_less(*c) for c in counts]
    better_p = [fisher_greater(*c) for c in counts]
    lane = stratified(counts) if counts else None
    # With one informative scenario the lane test is that scenario's test again.
    with_lane = lane is not None and lane.strata >= 2
    if lane is not None and with_lane:
        worse_p.append(lane.p_less)
        better_p.append(lane.p_greater)
        least.append((lane.least_less, lane.least_greater))
    worse = holm_tarone(worse_p, [pair[0] for pair in least], alpha)
    better = holm_tarone(better_p, [pair[1] for pair in least], alpha)
    verdicts: list[Verdict] = [Verdict(Change.INCONCLUSIVE, "")] * len(tables)
    for place, i in enumerate(tested):
        verdicts[i] = _verdict(counts[place], voids[i], worse[place], better[place],
                               worse_p[place], better_p[place], margin=margin)
    for i, table in enumerate(tables):
        if table is None:
            verdicts[i] = Verdict(Change.INCONCLUSIVE, "no scored repeat in one run: all void")
    shares = _shares(worse, [pair[0] for pair in least], alpha)
    for place, i in enumerate(tested):
        verdicts[i] = dataclasses.replace(verdicts[i], share=shares[place])
    lane_test = None
    if with_lane and lane is not None:
        lane_test = LaneTest(lane.p_less, lane.p_greater, worse[-1].level, better[-1].level,
                             lane.strata, worse[-1].rejected, better[-1].rejected, shares[-1])
    change, reason = _overall([v.change for v in verdicts], lane_test)
    return Judgement(tuple(verdicts), lane_test, change, reason)


def _shares(worse: Sequence[Tested], least: Sequence[float], alpha: float) -> list[float]:
    open_least = [value for t, value in zip(worse, least) if not t.rejected]
    extra = alpha / (tarone_k(open_least, alpha) + 1) if open_least else alpha
    return [t.level if t.level is not None else extra for t in worse]


def _verdict(table: Counts, void: int, worse: Tested, better: Tested, p_worse: float,
             p_better: float, *, margin: float) -> Verdict:
    difference = newcombe_interval(*table)
    numbers = {"difference": difference, "p_worse": p_worse, "p_better": p_better,
               "level_worse": worse.level, "level_better": better.level}
    if worse.rejected:
        return Verdict(Change.REGRESSED, f"B worse: one-sided p {p(p_worse)} <= "
                       f"{p(worse.level)}, its share of α", **numbers)
    if better.rejected:
        return Verdict(Change.IMPROVED, f"B better: one-sided p {p(p_better)} <= "
                       f"{p(better.level)}, its share of α", **numbers)
    if void:
        return Verdict(Change.INCONCLUSIVE, f"{void} void repeats may hide a change: never "
                       "called unchanged", **numbers)
    if -margin <= difference.low and difference.high <= margin:
        return Verdict(Change.UNCHANGED, f"the interval lies within ±{margin * 100:g} points",
                       **numbers)
    return Verdict(Change.INCONCLUSIVE, "not significant either way, and the interval is "
                   f"wider than ±{margin * 100:g} points", **numbers)


def _overall(changes: Sequence[Change], lane: LaneTest | None) -> tuple[Change, str]:
    regressed = sum(c is Change.REGRESSED for c in changes)
    if regressed:
        return Change.REGRESSED, f"{regressed} of {len(changes)} scenarios regressed"
    if lane is not None and lane.regressed:
        return Change.REGRESSED, (f"the lane test across {lane.strata} scenarios: B worse "
                                  f"(one-sided p {p(lane.p_worse)} <= {p(lane.level_worse)}), "
                                  "though no one scenario is")
    improved = sum(c is Change.IMPROVED for c in changes)
    if improved:
        return Change.IMPROVED, f"{improved} of {len(changes)} scenarios improved"
    if lane is not None and lane.improved:
        return Change.IMPROVED, (f"the lane test across {lane.strata} scenarios: B better "
                                 f"(one-sided p {p(lane.p_better)} <= {p(lane.level_better)})")
    if changes and all(c is Change.UNCHANGED for c in changes):
        return Change.UNCHANGED, "every scenario is unchanged within the margin"
    return Change.INCONCLUSIVE, "no regression seen, but not every scenario is settled"


def p(value: float | None) -> str:
    """A p-value or a level in two significant figures."""
    if value is None:
        return "—"
    return "<0.0001" if value < 1e-4 else f"{value:.2f}" if value >= 0.1 else f"{value:.2g}"
