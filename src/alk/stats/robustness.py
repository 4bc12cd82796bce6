"""Fault robustness: R = the pass rate under injected faults / the pass rate without, with a
bootstrap interval, for two pools of repeats or over a lane's scenarios. The HAL harness clamps
R to at most 1; alk does not (see `fault_robustness`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from alk.estimate import Estimate
from alk.stats import bootstrap


def fault_robustness(faulted_passed: int, faulted_scored: int, baseline_passed: int,
                     baseline_scored: int, *, seed: int = 0) -> Estimate | None:
    """R = pass rate under injected faults / pass rate without; None when either pool is empty
    or no baseline repeat passed.

    R is not clamped to 1 (the harness clamps it): above 1, the faulted repeats passed more
    often, which is chance, not a benefit; read it as "no harm measured", and the interval as
    how much harm the data still allow. The interval bootstraps both pools, each a binomial
    draw (every pair of outcomes with its probability when there are at most BOOTSTRAP_DRAWS
    of them); a draw whose baseline never passed has no bounded ratio, so when such draws
    weigh more than 2.5%, the upper bound is math.inf: the baseline is too low to bound R."""
    import numpy as np

    for passed, scored in ((faulted_passed, faulted_scored), (baseline_passed, baseline_scored)):
        if not 0 <= passed <= scored:
            raise ValueError(f"fault_robustness needs 0 <= passed <= scored in each pool, got "
                             f"{passed}/{scored}")
    if faulted_scored == 0 or baseline_scored == 0 or baseline_passed == 0:
        return None
    rate_f, rate_b = faulted_passed / faulted_scored, baseline_passed / baseline_scored
    weights = None
    if (faulted_scored + 1) * (baseline_scored + 1) <= bootstrap.BOOTSTRAP_DRAWS:
        outcomes = [(np.arange(n + 1) / n,
                     np.array([math.comb(n, k) * rate ** k * (1 - rate) ** (n - k)
                               for k in range(n + 1)]))
                    for n, rate in ((faulted_scored, rate_f), (baseline_scored, rate_b))]
        drawn_f, drawn_b = (x.ravel() for x in np.meshgrid(outcomes[0][0], outcomes[1][0],
                                                           indexing="ij"))
        weights = np.outer(outcomes[0][1], outcomes[1][1]).ravel()
    else:
        rng = bootstrap.rng(seed, bootstrap.RESAMPLE)
        drawn_f = rng.binomial(faulted_scored, rate_f, bootstrap.BOOTSTRAP_DRAWS) / faulted_scored
        drawn_b = rng.binomial(baseline_scored, rate_b, bootstrap.BOOTSTRAP_DRAWS) / baseline_scored
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.where(drawn_b > 0, drawn_f / drawn_b, np.inf)
    return bootstrap.intervals(np.array([rate_f / rate_b]), ratios[None, :], weights)[0]


def pooled_fault_robustness(faulted: Sequence[tuple[int, int]],
                            baseline: Sequence[tuple[int, int]], *,
                            seed: int = 0) -> Estimate | None:
    """R over a lane: the pooled pass rate of its scenarios with injected faults ÷ that of its
    scenarios without, each given as (passed, scored) per scenario; None as for
    `fault_robustness`, of the pooled counts.

    Scenarios differ in how often they pass (the ICC), so a binomial draw of the pooled counts
    makes the interval too narrow. This bootstrap draws in two stages: the scenarios of each
    pool (with replacement), then each drawn scenario's repeats (a binomial draw at its own
    rate). With one scenario a pool it is the binomial bootstrap; with identical scenarios,
    about as narrow. The pools' scenarios are different tasks: R says how the faulted ones fare
    against the others, which measures the faults only as far as the tasks are alike."""
    import numpy as np

    pools = [np.array(pool, dtype=np.int64).reshape(-1, 2) for pool in (faulted, baseline)]
    for pool in pools:
        if (pool < 0).any() or (pool[:, 0] > pool[:, 1]).any():
            raise ValueError(f"pooled_fault_robustness needs 0 <= passed <= scored for every "
                             f"scenario, got {pool.tolist()}")
    (passed_f, scored_f), (passed_b, scored_b) = (pool.sum(axis=0).tolist() for pool in pools)
    if scored_f == 0 or scored_b == 0 or passed_b == 0:
        return None
    rng = bootstrap.rng(seed, bootstrap.RESAMPLE)
    rates = []
    for pool in pools:
        pool = pool[pool[:, 1] > 0]
        drawn = pool[rng.integers(0, len(pool), size=(bootstrap.BOOTSTRAP_DRAWS, len(pool)))]
        passes = rng.binomial(drawn[..., 1], drawn[..., 0] / drawn[..., 1])
        rates.append(passes.sum(axis=1) / drawn[..., 1].sum(axis=1))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.where(rates[1] > 0, rates[0] / rates[1], np.inf)
    point = (passed_f / scored_f) / (passed_b / scored_b)
    return bootstrap.intervals(np.array([point]), ratios[None, :])[0]
