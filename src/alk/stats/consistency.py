"""Consistency: how much a scenario's repeats agree with one another, each figure with its 95%
interval.

The metrics are those of Rabanser, Kapoor et al., "Towards a Science of AI Agent Reliability"
(arXiv 2602.16666, 2026), as the HAL harness computes them (princeton-pli/hal-harness,
`reliability_eval/metrics/consistency.py` and `robustness.py`). The harness gives points only;
alk adds an interval to each:

- outcome consistency C_out = 1 - 4·p(1-p) = (2p - 1)^2 (the harness's current formula): 1 when
  every repeat agrees, 0 at a pass rate of 50%. Interval: the Wilson interval of p mapped
  through the formula, not a bootstrap (see `outcome_consistency`).
- tool-use and step consistency: `alk.stats.trajectories`.
- resource consistency exp(-mean coefficient of variation) over the resources given (duration,
  CPU seconds, peak memory, model calls); the CV uses the sample standard deviation, as the
  harness does.
- fault robustness: `alk.stats.robustness`.
- a lane's figure for each: the mean of its scenarios' (`lane_mean`).

The other intervals are percentile bootstraps (`alk.stats.bootstrap`). Pure functions: nothing
here reads files or starts processes; numpy is imported inside the functions, as in
`alk.stats.summary`, so that `import alk` stays fast.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from alk.estimate import Estimate, wilson_interval
from alk.stats import bootstrap

if TYPE_CHECKING:
    import numpy as np


# ---------------------------------------------------------------------------------------------
# Outcome consistency


# A Consistency record's figures, in its order.
FIGURES = ("outcome", "tool_use", "steps", "resources")
# The repeats from which a scenario's bootstrap interval holds within a few points of 95%, as
# benchmarks/coverage.py measures it (the mixes and spreads of docs/statistics.md): tool use
# 80–92% at 5–20 repeats and 92–96% at 50; steps 84–98% below 20 and 93–95% from 20; resources
# 56–90% up to 50 and 86–94% at 200. Below these, the interval is marked approximate (and
# optimistic: its misses are mostly above the truth). Outcome's (Wilson, mapped) holds at any n.
HOLDS_FROM = {"tool_use": 50, "steps": 20, "resources": 200}


def approximate_figures(scored: int, values: Sequence[Estimate | None]) -> tuple[str, ...]:
    """The figures of a scenario's consistency, given in FIGURES order, whose interval is
    approximate at `scored` repeats."""
    return tuple(name for name, value in zip(FIGURES, values)
                 if value is not None and scored < HOLDS_FROM.get(name, 0))


def outcome_consistency(passed: int, scored: int) -> Estimate | None:
    """C_out = 1 - 4·p(1-p) for `passed` of `scored` repeats; None with fewer than 2 scored
    repeats (one repeat cannot disagree with itself).

    The interval is the Wilson interval [lo, hi] of p mapped through the formula: from the
    smaller of (2·lo - 1)^2 and (2·hi - 1)^2 (0 when 50% lies within [lo, hi]) to the larger.
    C_out is a function of p alone, so this holds C_out at least as often as Wilson's holds p.
    A bootstrap would not: at 20/20 every draw passes 20 times, and its interval [1, 1] would
    claim a certainty 20 repeats cannot give (Wilson: p >= 0.839, so C_out >= 0.46)."""
    if not 0 <= passed <= scored:
        raise ValueError(f"outcome_consistency needs 0 <= passed <= scored, got {passed}/{scored}")
    if scored < 2:
        return None
    lo, hi = wilson_interval(passed, scored)
    ends = ((2 * lo - 1) ** 2, (2 * hi - 1) ** 2)
    low = 0.0 if lo <= 0.5 <= hi else min(ends)
    return Estimate((2 * passed / scored - 1) ** 2, low, max(ends))


# ---------------------------------------------------------------------------------------------
# Resource consistency


def _stacked(scenarios: list[Mapping[str, Sequence[float | None]]]) -> np.ndarray:
    """Scenarios' resources (the same names, the same number of repeats) as one scenarios x
    resources x repeats table, None as nan; a resource no coefficient of variation exists for
    (fewer than 2 values, or a mean of 0) is all nan. Raises ValueError on a negative or
    infinite value."""
    import numpy as np

    stack = np.array([list(resources.values()) for resources in scenarios], dtype=float)
    present = ~np.isnan(stack)
    wrong = present & ~(np.isfinite(stack) & (stack >= 0))
    if wrong.any():
        s, r, i = (int(x[0]) for x in np.nonzero(wrong))
        raise ValueError(f"resource {list(scenarios[s])[r]!r}: values must be finite and >= 0, "
                         f"got {stack[s, r, i]} (repeat {i + 1} of {stack.shape[2]})")
    unusable = (present.sum(axis=2) < 2) | (np.where(present, stack, 0.0).sum(axis=2) <= 0)
    stack[unusable] = np.nan
    return stack


def _lengths_checked(resources: Mapping[str, Sequence[float | None]]) -> int:
    lengths = {name: len(values) for name, values in resources.items()}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"resource consistency needs one value (or None) per repeat for every "
                         f"resource, in the same order; got lengths {lengths}")
    return next(iter(lengths.values()), 0)


def usable_resources(resources: Mapping[str, Sequence[float | None]]) -> tuple[str, ...]:
    """The resources that resource consistency uses: those with at least 2 values (None or nan:
    not measured in that repeat) and a mean above 0, so that a coefficient of variation exists.
    Raises ValueError when the sequences differ in length or hold a negative or infinite
    value."""
    import numpy as np

    if not _lengths_checked(resources):
        return ()
    usable = ~np.isnan(_stacked([resources])[0]).all(axis=1)
    return tuple(name for name, use in zip(resources, usable.tolist()) if use)


def resource_consistency(resources: Mapping[str, Sequence[float | None]], *,
                         seed: int = 0) -> Estimate | None:
    """exp(-mean coefficient of variation) over the usable resources (see `usable_resources`),
    each given as one value per repeat (e.g. duration_s, cpu_s, peak_rss_mb, model_calls);
    None when no resource is usable. 1 means every repeat used the same; 0.37, a CV of 1.

    The bootstrap resamples repeats, the same draw for every resource; a resource whose draw
    has fewer than 2 values or a zero mean is left out of that draw's mean. Past MAX_RESAMPLE
    repeats, a draw takes MAX_RESAMPLE of them (m-out-of-n), and the interval's spread around
    the point is scaled by sqrt(m/n). Read it for a scenario whose cost or time must be
    predictable; it says nothing of whether the repeats passed.

    With few repeats the interval is approximate, and optimistic: a sample's CV runs low, and
    its bootstrap lower still. Drawing 10 lognormal durations (CV 0.42) again and again, the
    interval held the truth 71% of the time, above it the rest; 86% at 50 repeats, 90% at
    200 (a bias-corrected interval, BCa, would narrow the gap, not close it)."""
    return resource_consistencies([resources], seed=seed)[0]


def resource_consistencies(scenarios: Sequence[Mapping[str, Sequence[float | None]]], *,
                           seed: int = 0) -> list[Estimate | None]:
    """`resource_consistency` of each scenario's resources, scenarios with the same resources
    and number of repeats bootstrapped together (numpy imported only then: a run that never
    started is reported without it)."""
    results: list[Estimate | None] = [None] * len(scenarios)
    groups: dict[tuple[int, tuple[str, ...]], list[int]] = {}
    for index, resources in enumerate(scenarios):
        n = _lengths_checked(resources)
        if n:
            groups.setdefault((n, tuple(resources)), []).append(index)
    if not groups:
        return results
    import numpy as np

    for (n, names), indices in groups.items():
        step = max(1, bootstrap.BATCH_CELLS // (2 * len(names) * bootstrap.BOOTSTRAP_DRAWS))
        for at in range(0, len(indices), step):
            part = indices[at:at + step]
            stack = _stacked([scenarios[i] for i in part])
            usable = ~np.isnan(stack).all(axis=2).all(axis=1)
            if usable.any():
                estimates = iter(_resource_estimates(stack[usable], seed))
                for index in np.array(part)[usable].tolist():
                    results[index] = next(estimates)
    return results


def _resource_estimates(stack: np.ndarray, seed: int) -> list[Estimate]:
    """Resource consistency of scenarios x resources x repeats (nan: not measured; a resource
    all nan is left out)."""
    import numpy as np

    scenarios, rows, n = stack.shape
    present = ~np.isnan(stack)
    with np.errstate(divide="ignore", invalid="ignore"):
        counts = present.sum(axis=2)
        means = np.where(present, stack, 0.0).sum(axis=2) / counts
        # Centred first: variances from sums of squares stay exact however small the CV.
        centred = np.where(present, stack - means[..., None], 0.0)
        cv = np.sqrt((centred * centred).sum(axis=2) / (counts - 1)) / means
        points = np.exp(-_mean_of_numbers(cv, axis=1))
        complete = bool(present.all())
        table = centred if complete else np.concatenate([centred, present], axis=1)
        sums, squares, drawn, weights, scale = bootstrap.resampled_sums(table.reshape(-1, n), seed)
        sums = sums.reshape(scenarios, 2 * rows if not complete else rows, -1)
        squares = squares.reshape(scenarios, sums.shape[1], -1)[:, :rows]
        if complete:  # in place, the tables being the bulk of a lane's work
            variance, spread = squares, np.multiply(sums, sums)
            spread /= drawn
            variance -= spread
            np.maximum(variance, 0.0, out=variance)
            variance /= drawn - 1
            mean = sums
            mean /= drawn  # the draw's mean, less the data's
            mean += means[..., None]
            cv = np.sqrt(variance, out=variance)
            cv /= mean
            draws = np.exp(-cv.mean(axis=1))
        else:
            sizes, sums = sums[:, rows:], sums[:, :rows]
            mean = means[..., None] + sums / sizes
            variance = np.maximum(squares - sums * sums / sizes, 0.0) / (sizes - 1)
            cv = np.sqrt(variance) / mean
            cv[(sizes < 2) | ~(mean > 0)] = np.nan
            draws = np.exp(-_mean_of_numbers(cv, axis=1))
    return bootstrap.intervals(points, draws, weights, scale)


def _mean_of_numbers(values: np.ndarray, axis: int) -> np.ndarray:
    """The mean of the values that are not nan along an axis (nan where there are none)."""
    import numpy as np

    number = ~np.isnan(values)
    return np.where(number, values, 0.0).sum(axis=axis) / number.sum(axis=axis)


# ---------------------------------------------------------------------------------------------
# A lane


def lane_mean(estimates: Sequence[Estimate | None], *, seed: int = 0) -> Estimate | None:
    """A lane's figure for one metric: the mean of its scenarios' points (None ones left out),
    each scenario weighing the same, as the literature averages per-task metrics; None when no
    scenario has one.

    The interval resamples scenarios: it says how the mean would vary over other scenarios like
    these, so it holds when the scenarios are a sample of the tasks that matter. It is widened,
    where needed, to the mean of the scenarios' own bounds: scenarios that all read 1 would
    otherwise give [1, 1], though each one's repeats leave it uncertain. With one scenario, the
    lane's figure is that scenario's estimate. Past MAX_RESAMPLE scenarios, m-out-of-n."""
    given = [e for e in estimates if e is not None]
    if len(given) <= 1:
        return given[0] if given else None
    import numpy as np

    points = np.array([[e.value for e in given]])
    sums, _, drawn, weights, scale = bootstrap.resampled_sums(points, seed)
    spread = bootstrap.intervals(points.mean(axis=1), sums / drawn, weights, scale)[0]
    own_low = math.fsum(e.low for e in given) / len(given)
    own_high = math.fsum(e.high for e in given) / len(given)
    return Estimate.covering(spread.value, min(spread.low, own_low), max(spread.high, own_high))
