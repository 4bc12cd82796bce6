"""How alike a lane's scenarios make their repeats: the one-way random effects ICC(1) across
scenarios, its interval from the F distribution, Kish's design effect and the effective number
of independent repeats it leaves.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from alk.estimate import f_quantile
from alk.stats.records import Icc, Tally

# Below this many scenarios the ICC's interval is wide, whatever the repeats.
FEW_SCENARIOS = 5


def icc1(groups: Sequence[Sequence[float]]) -> Icc:
    """ICC(1) over groups of observations (one group per scenario); sizes may differ."""
    rows = []
    for group in groups:
        if not group:
            raise ValueError("every group needs at least one observation")
        mean = math.fsum(group) / len(group)
        rows.append((len(group), mean, math.fsum((x - mean) ** 2 for x in group), 1))
    return _icc(rows)


def icc_of_tallies(tallies: Sequence[Tally]) -> Icc:
    # A 0/1 group of n with c ones: mean c/n, squares about it c(n−c)/n.
    return _icc([(t.scored, t.passed / t.scored, t.passed * (t.scored - t.passed) / t.scored,
                  t.scenarios) for t in tallies])


def _icc(rows: Sequence[tuple[int, float, float, int]]) -> Icc:
    """ICC(1) from (size, mean, sum of squares about the mean, how many such groups)."""
    a = sum(j for *_, j in rows)
    big_n = sum(j * n for n, *_, j in rows)
    # Each mean square is reported whenever its own degrees of freedom allow it.
    k0 = msb = msw = cluster = None
    if a >= 2:
        squares = sum(j * n * n for n, *_, j in rows)
        grand = math.fsum(j * n * mean for n, mean, _, j in rows) / big_n
        k0 = (big_n - squares / big_n) / (a - 1)
        cluster = squares / big_n
        msb = math.fsum(j * n * (mean - grand) ** 2 for n, mean, _, j in rows) / (a - 1)
    if big_n - a >= 1:
        msw = math.fsum(j * ss for *_, ss, j in rows) / (big_n - a)

    def undefined(reason: str, design: float | None = None) -> Icc:
        note = None
        if design is not None and design > 1.0:
            note = "design effect at its worst case, ICC = 1: each scenario counts once"
        effective = None if design is None else big_n / design
        return Icc(None, None, k0, cluster, a, big_n, msb, msw, design, effective, reason, note)

    if a < 2:
        return undefined("needs at least 2 scenarios with scored repeats")
    assert k0 is not None and msb is not None and cluster is not None
    if msw is None:
        # One repeat a scenario: m̃ = 1, so the design effect is 1 whatever the ICC.
        return undefined("needs more than one repeat in some scenario", 1.0)
    denom = msb + (k0 - 1.0) * msw
    if denom == 0.0:
        # Nothing varied: how alike a scenario's repeats are is unknown, so the pooled rate's
        # interval takes the worst case.
        return undefined("no variance: every scored repeat had the same outcome", cluster)
    value = (msb - msw) / denom
    ci, note = None, None
    if msw == 0.0:
        note = ("every scenario passed all or none of its repeats: ICC is 1, and its "
                "F interval needs some variation within a scenario")
    else:
        low, high = _icc_interval(msb / msw, a - 1, big_n - a, k0)
        ci = (min(low, value), max(high, value))
        if a < FEW_SCENARIOS:
            note = f"only {a} scenarios: the interval is wide"
    # Negative ICC (a scenario's repeats less alike than chance) is sampling noise here, and
    # must never make N repeats count as more than N independent ones.
    design = max(1.0, 1.0 + (cluster - 1.0) * value)
    return Icc(value, ci, k0, cluster, a, big_n, msb, msw, design, big_n / design, None, note)


def _icc_interval(f0: float, d1: int, d2: int, k: float) -> tuple[float, float]:
    """McGraw & Wong's 95% interval of ICC(1) from F0 = MSB/MSW."""
    f_low = f0 / f_quantile(0.975, d1, d2)
    f_high = f0 * f_quantile(0.975, d2, d1)
    return (f_low - 1.0) / (f_low + k - 1.0), (f_high - 1.0) / (f_high + k - 1.0)
