"""Two samples of pass/fail outcomes (or durations), A and B, compared over plain numbers:
Newcombe's interval of the difference in pass rate, Fisher's exact test, Holm's correction for
many scenarios, a bootstrap of the difference in median duration, and the repeats it would
take an interval to fit within an equivalence margin. Every difference is B − A.

`alk.compare` applies them to two runs' scenarios.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from alk.estimate import Estimate, wilson_bounds

MARGIN = 0.1  # the equivalence margin δ, in pass rate (0.1 = ten points)
RESAMPLES = 2000  # bootstrap resamples of the median duration
# Fisher's test in exact integers up to this many scored repeats in both runs together (under
# 0.1 s); beyond, the big integers grow too slow and the terms are summed as floats in log space.
FISHER_EXACT_TOTAL = 20_000
# Two hypergeometric terms this close count as equal in the float path (scipy uses the same).
_TIE = 1 + 1e-7
# repeats_to_settle looks no further than this many repeats a run.
SETTLE_MAX = 1 << 20


def newcombe_interval(passed_a: int, n_a: int, passed_b: int, n_b: int) -> Estimate:
    """B − A in pass rate with Newcombe's hybrid score interval (Newcombe 1998, method 10):
    each rate's Wilson interval, combined."""
    if not (0 <= passed_a <= n_a and 0 <= passed_b <= n_b and n_a and n_b):
        raise ValueError(f"need 0 <= passed <= n and n >= 1, got {passed_a}/{n_a} and "
                         f"{passed_b}/{n_b}")
    return _newcombe(passed_a / n_a, n_a, passed_b / n_b, n_b)


def _newcombe(rate_a: float, n_a: float, rate_b: float, n_b: float) -> Estimate:
    low_a, high_a = wilson_bounds(rate_a, n_a)
    low_b, high_b = wilson_bounds(rate_b, n_b)
    difference = rate_b - rate_a
    low = difference - math.hypot(rate_b - low_b, high_a - rate_a)
    high = difference + math.hypot(high_b - rate_b, rate_a - low_a)
    return Estimate(difference, max(-1.0, low), min(1.0, high))


def fisher_exact(passed_a: int, n_a: int, passed_b: int, n_b: int) -> float:
    """Two-sided p of Fisher's exact test on the 2×2 table (passed, failed) × (A, B): the
    chance, with both margins fixed, of a table no likelier than the one observed."""
    if n_a < 1 or n_b < 1 or not (0 <= passed_a <= n_a and 0 <= passed_b <= n_b):
        raise ValueError(f"need 0 <= passed <= n and n >= 1, got {passed_a}/{n_a} and "
                         f"{passed_b}/{n_b}")
    total, passed = n_a + n_b, passed_a + passed_b
    failed = total - passed
    # x, A's passed count, is hypergeometric over [lo, hi]; its terms' ratio decides the walk.
    lo, hi = max(0, passed - n_b), min(passed, n_a)
    if total > FISHER_EXACT_TOTAL:
        return _fisher_log(passed_a, n_a, passed, failed, lo, hi)
    weight = math.comb(passed, lo) * math.comb(failed, n_a - lo)
    observed = math.comb(passed, passed_a) * math.comb(failed, n_a - passed_a)
    hits = 0
    for x in range(lo, hi + 1):
        if weight <= observed:
            hits += weight
        # Exact: the next term is an integer, so the division leaves nothing behind.
        weight = weight * (passed - x) * (n_a - x) // ((x + 1) * (failed - n_a + x + 1))
    return min(1.0, hits / math.comb(total, n_a))


def _fisher_log(passed_a: int, n_a: int, passed: int, failed: int, lo: int, hi: int) -> float:
    def log_weight(x: int) -> float:
        return -(math.lgamma(x + 1) + math.lgamma(passed - x + 1) + math.lgamma(n_a - x + 1)
                 + math.lgamma(failed - n_a + x + 1))

    logs = [log_weight(x) for x in range(lo, hi + 1)]
    top, bar = max(logs), log_weight(passed_a) + math.log(_TIE)
    terms = [math.exp(v - top) for v in logs]
    return min(1.0, math.fsum(t for t, v in zip(terms, logs) if v <= bar) / math.fsum(terms))


def holm(p_values: Sequence[float]) -> tuple[float, ...]:
    """Holm's step-down adjustment: the i-th smallest of m p-values times (m − i + 1), never
    below the one before it, at most 1. Reject where the adjusted p < α."""
    m = len(p_values)
    adjusted = [0.0] * m
    running = 0.0
    for rank, index in enumerate(sorted(range(m), key=lambda i: p_values[i])):
        running = max(running, min(1.0, (m - rank) * p_values[index]))
        adjusted[index] = running
    return tuple(adjusted)


def median_difference(a: Sequence[float], b: Sequence[float], *, seed: int,
                      resamples: int = RESAMPLES) -> Estimate:
    """median(B) − median(A) with a percentile bootstrap 95% interval: each run's values
    resampled on their own, `resamples` times, from a generator seeded with `seed`."""
    import numpy as np  # here, not at the top: every `alk` command would pay its import

    if len(a) < 2 or len(b) < 2:
        raise ValueError("a bootstrap of the median needs at least 2 values a side")
    rng = np.random.default_rng(seed)
    values_a, values_b = np.sort(np.asarray(a, dtype=float)), np.sort(np.asarray(b, dtype=float))
    point = float(np.median(values_b) - np.median(values_a))
    differences = _resampled_medians(values_b, rng, resamples) - _resampled_medians(
        values_a, rng, resamples)
    low, high = np.percentile(differences, [2.5, 97.5])
    # A median's percentile interval may, rarely, miss the point itself.
    return Estimate.covering(point, float(low), float(high))


def _resampled_medians(ordered: Any, rng: Any, resamples: int) -> Any:
    """The medians of `resamples` bootstrap resamples of the sorted values, drawn without
    building the resamples: 100,000 values a side cost what 20 do.

    A resample draws n indices uniformly, floor(n·V) for uniform V, so its k-th smallest index
    is floor(n·V₍ₖ₎), and V₍ₖ₎ ~ Beta(k, n − k + 1); the next one up is the least of the n − k
    uniforms above V₍ₖ₎, V₍ₖ₎ + (1 − V₍ₖ₎)·Beta(1, n − k)."""
    import numpy as np

    n = len(ordered)
    k = (n + 1) // 2
    lower = rng.beta(k, n - k + 1, size=resamples)
    pick = ordered[np.minimum((n * lower).astype(np.int64), n - 1)]
    if n % 2:
        return pick
    upper = lower + (1.0 - lower) * rng.beta(1, n - k, size=resamples)
    return (pick + ordered[np.minimum((n * upper).astype(np.int64), n - 1)]) / 2


def repeats_to_settle(rate_a: float, rate_b: float, margin: float = MARGIN) -> int | None:
    """The fewest repeats a run that would fit the Newcombe interval within ±margin at these
    rates; None when the rates differ by the margin or more (no count would)."""
    if abs(rate_b - rate_a) >= margin:
        return None

    def fits(n: int) -> bool:
        interval = _newcombe(rate_a, n, rate_b, n)
        return -margin <= interval.low and interval.high <= margin

    # The interval narrows as n grows at fixed rates: double, then halve the gap.
    high = 2
    while not fits(high):
        if high >= SETTLE_MAX:
            return None
        high *= 2
    low = high // 2
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if fits(middle) else (middle, high)
    return high
