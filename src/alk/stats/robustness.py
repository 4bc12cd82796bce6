"""Fault robustness: R = the pass rate under injected faults / the pass rate without, with a
bootstrap interval, for two pools of repeats, over a lane's scenarios, or (what a run reports)
over pairs of a faulted scenario and its unfaulted twin (`fault_twins`,
`paired_fault_robustness`). The HAL harness clamps R to at most 1; alk does not (see
`fault_robustness`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from alk.estimate import Estimate, wilson_interval
from alk.records import Scenario
from alk.stats import bootstrap


def _injured(scenario: Scenario) -> bool:
    """alk injures it: worker faults, wire faults or a kill."""
    return bool(scenario.faults or scenario.wire_faults or scenario.kill_at)


def fault_twins(scenarios: Sequence[Scenario]) -> dict[str, str | None]:
    """Each faulted scenario (faults, wire faults or a kill) → its unfaulted twin, or None.

    The twin is the scenario its `baseline` names; else the one scenario with the same task,
    input and script and no fault; else none (no such scenario, or several: the lane must name
    one). A scenario whose model turns are drawn from weighted choices is never a twin, and a
    faulted one has none: its rate moves with the draws, not only with the fault."""
    clean = [s for s in scenarios if not _injured(s) and not s.sampled]
    twins: dict[str, str | None] = {}
    for scenario in scenarios:
        if not _injured(scenario):
            continue
        if scenario.sampled:
            twins[scenario.id] = None
        elif scenario.baseline is not None:
            twins[scenario.id] = scenario.baseline
        else:
            alike = [s.id for s in clean if (s.task, s.input, s.script)
                     == (scenario.task, scenario.input, scenario.script)]
            twins[scenario.id] = alike[0] if len(alike) == 1 else None
    return twins


def paired_fault_robustness(pairs: Sequence[tuple[str, str]],
                            counts: Mapping[str, tuple[int, int]], *,
                            seed: int = 0) -> Estimate | None:
    """R over pairs (faulted scenario, its unfaulted twin), `counts` giving each scenario's
    (passed, scored): the mean of the faulted scenarios' pass rates ÷ the mean of their twins'
    rates, each pair weighing one (a twin shared by k pairs counts k times). None without a
    pair, or when no twin passed.

    The figure is of these scenarios, as the lane fixed them: the interval draws each scenario's
    repeats once a draw (binomial, at its own rate; a shared twin is drawn once for all its
    pairs), and is widened to the ratio of the pairs' mean Wilson bounds, which a scenario
    that never varied leaves open. A draw whose twins never passed has no bounded ratio: when
    such draws weigh more than 2.5%, the upper bound is math.inf."""
    import numpy as np

    if not pairs:
        return None
    ids = sorted({sid for pair in pairs for sid in pair})
    table = np.array([counts[sid] for sid in ids], dtype=np.int64).reshape(-1, 2)
    if (table < 0).any() or (table[:, 0] > table[:, 1]).any() or (table[:, 1] == 0).any():
        raise ValueError(f"paired_fault_robustness needs 0 <= passed <= scored and scored > 0 "
                         f"for every scenario, got {dict(zip(ids, table.tolist()))}")
    place = {sid: i for i, sid in enumerate(ids)}
    faulted = np.array([place[f] for f, _ in pairs])
    twins = np.array([place[b] for _, b in pairs])
    rates = table[:, 0] / table[:, 1]
    if rates[twins].sum() == 0:
        return None
    point = rates[faulted].mean() / rates[twins].mean()
    rng = bootstrap.rng(seed, bootstrap.RESAMPLE)
    drawn = rng.binomial(table[:, 1], rates, size=(bootstrap.BOOTSTRAP_DRAWS, len(ids)))
    drawn = drawn / table[:, 1]
    top, bottom = drawn[:, faulted].mean(axis=1), drawn[:, twins].mean(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.where(bottom > 0, top / bottom, np.inf)
    boot = bootstrap.intervals(np.array([point]), ratios[None, :])[0]
    bounds = np.array([wilson_interval(int(p), int(n)) for p, n in table])
    low_f, high_f = bounds[faulted, 0].mean(), bounds[faulted, 1].mean()
    low_b, high_b = bounds[twins, 0].mean(), bounds[twins, 1].mean()
    low = min(boot.low, low_f / high_b)
    high = max(boot.high, high_f / low_b if low_b > 0 else math.inf)
    return Estimate.covering(float(point), float(low), float(high))


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
