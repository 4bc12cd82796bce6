"""How alike a lane's scenarios make their repeats: the one-way random effects ICC(1) across
scenarios, its interval from the F distribution, Kish's design effect and the effective number
of independent repeats it leaves, and the clustered interval of the lane's pass rate
(`clustered_interval`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from alk.estimate import Estimate, f_quantile, wilson_bounds
from alk.stats.records import Icc, Tally

# Below this many scenarios the ICC's interval is wide, whatever the repeats.
FEW_SCENARIOS = 5
# Where the ICC's F interval, made for normal outcomes, holds for pass/fail ones: a pooled pass
# rate inside ICC_INTERVAL_HOLDS and an ICC below ICC_HIGH. Outside, `benchmarks/coverage.py`
# measures 58–96% at rates 0.85–0.95 and ICC 0.3–0.5 (58–76% with 5 to 20 scenarios), and
# 78–84% at an ICC of 0.8.
ICC_INTERVAL_HOLDS = (0.2, 0.8)
ICC_HIGH = 0.5


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
    """ICC(1) of pass/fail repeats, a scenario's passes given by its tally. Its F interval is
    marked approximate (`Icc.approximate`, and a note) where it does not hold for 0/1 outcomes:
    a pooled pass rate outside ICC_INTERVAL_HOLDS, or an ICC of ICC_HIGH or more."""
    # A 0/1 group of n with c ones: mean c/n, squares about it c(n−c)/n.
    icc = _icc([(t.scored, t.passed / t.scored, t.passed * (t.scored - t.passed) / t.scored,
                 t.scenarios) for t in tallies])
    if icc.ci is None or icc.value is None:
        return icc
    rate = sum(t.passed * t.scenarios for t in tallies) / icc.observations
    low, high = ICC_INTERVAL_HOLDS
    if low <= rate <= high and icc.value < ICC_HIGH:
        return icc
    why = (f"a pooled pass rate of {rate:.2f}" if not low <= rate <= high
           else f"an ICC of {icc.value:.2f}")
    note = (f"approximate: the F interval, for pass/fail repeats at {why}"
            + (f"; {icc.note}" if icc.note else ""))
    return dataclasses.replace(icc, approximate=True, note=note)


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


def clustered_interval(passed: int, scored: int, icc: Icc) -> Estimate | None:
    """The lane's pooled rate passed/scored as an estimate of the rate of tasks like its
    scenarios: Wilson's interval at N / D with D the design effect at the ICC's upper 95%
    bound, 1 + (m̃ − 1)·ICC_high (m̃, the worst case, when the ICC has no interval), and a t
    quantile on (scenarios − 1) degrees of freedom in place of z. None with fewer than 2
    scored scenarios.

    The plug-in ICC underestimates the design effect with few scenarios (median 0.64–0.95 of
    the true one with 3–5), which left the plain Kish interval covering 83–95%; the upper
    bound and t together give 94.7–100% in the same designs (`benchmarks/coverage.py`)."""
    if scored == 0 or icc.effective_n is None or icc.groups < 2:
        return None
    t = math.sqrt(f_quantile(0.95, 1.0, icc.groups - 1.0))  # t² on ν df is F(1, ν)
    rate = passed / scored
    return Estimate.covering(rate, *wilson_bounds(rate, scored / icc_design_high(icc), t))


def icc_design_high(icc: Icc) -> float:
    """Kish's design effect at the ICC's upper bound; m̃ when there is no interval; 1 with one
    repeat a scenario (m̃ = 1)."""
    assert icc.cluster_size is not None
    if icc.ci is None:
        return max(1.0, icc.cluster_size)
    return max(1.0, 1.0 + (icc.cluster_size - 1.0) * icc.ci[1])


def _icc_interval(f0: float, d1: int, d2: int, k: float) -> tuple[float, float]:
    """McGraw & Wong's 95% interval of ICC(1) from F0 = MSB/MSW."""
    f_low = f0 / f_quantile(0.975, d1, d2)
    f_high = f0 * f_quantile(0.975, d2, d1)
    return (f_low - 1.0) / (f_low + k - 1.0), (f_high - 1.0) / (f_high + k - 1.0)
