"""What the regression gate could have seen: the power of its one-sided Fisher test, computed
exactly by enumerating both runs' binomial outcomes (no normal approximation), the smallest
drop it detects with 80% power, and the repeats that would detect a given drop.

The power of the test at level L, with n_a and n_b repeats and true rates r_a and r_b, is
the sum over A's passed count x of Binomial(n_a, r_a)(x) · P(Binomial(n_b, r_b) <= c(x)),
where c(x) is the largest count of B's that the test rejects beside x (B's p grows with B's
count, so the rejected counts are those up to c(x); none: c(x) = −1). The drop is measured
from A's observed rate, taken as A's true one.

The lane's stratified test has no such small enumeration (its law is over every scenario at
once): its drop is the normal approximation of Cochran–Mantel–Haenszel's statistic, and is
labelled approximate wherever it is shown.
"""

from __future__ import annotations

import math
from functools import lru_cache

POWER = 0.8  # the power a "could detect" figure is quoted at
REPEATS_MAX = 2_000  # repeats_for_power looks no further
_STEP = 1e-4  # the drop is found to a hundredth of a point


@lru_cache(maxsize=256)
def cutoffs(n_a: int, n_b: int, level: float) -> tuple[int, ...]:
    """c(x) for x = 0..n_a: the largest passed count of B's that the one-sided Fisher test
    rejects at `level` beside x passes of A's, −1 where none is."""
    import numpy as np

    logf = np.concatenate(([0.0], np.cumsum(np.log(np.arange(1, n_a + n_b + 1)))))
    total = n_a + n_b
    # p[x, y]: P(B's count <= y | x + y passes in all); filled one margin t = x + y at a time.
    p = np.ones((n_a + 1, n_b + 1))
    for t in range(total + 1):
        lo, hi = max(0, t - n_a), min(t, n_b)
        y = np.arange(lo, hi + 1)
        log_pmf = (logf[t] - logf[y] - logf[t - y] + logf[total - t] - logf[n_b - y]
                   - logf[n_a - t + y] - logf[total] + logf[n_a] + logf[n_b])
        cdf = np.cumsum(np.exp(log_pmf))
        p[t - y, y] = np.minimum(cdf, 1.0)
    # A hair of slack: a p equal to the level in exact arithmetic must not miss by rounding.
    rejected = p <= level * (1 + 1e-9)
    # B's p grows with its count, so the rejected counts of a row are a prefix.
    return tuple(int(row.sum()) - 1 for row in rejected)


def _binomial(n: int, rate: float) -> list[float]:
    if rate <= 0.0:
        return [1.0] + [0.0] * n
    if rate >= 1.0:
        return [0.0] * n + [1.0]
    log_p, log_q = math.log(rate), math.log1p(-rate)
    return [math.exp(math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
                     + k * log_p + (n - k) * log_q) for k in range(n + 1)]


def power(rate_a: float, n_a: int, rate_b: float, n_b: int, level: float) -> float:
    """The chance that the one-sided Fisher test at `level` calls B worse, at these true
    rates and repeats."""
    cut = cutoffs(n_a, n_b, level)
    pmf_b = _binomial(n_b, rate_b)
    cdf_b, running = [], 0.0
    for value in pmf_b:
        running += value
        cdf_b.append(running)
    return min(1.0, math.fsum(weight * cdf_b[c] for weight, c in zip(_binomial(n_a, rate_a), cut)
                              if c >= 0))


def detectable_drop(rate_a: float, n_a: int, n_b: int, level: float,
                    target: float = POWER) -> float | None:
    """The smallest drop d (a rate: 0.2 = twenty points) from `rate_a` that the test at
    `level` detects with chance >= `target` at these repeats; None when even a fall to 0
    would not be."""
    if power(rate_a, n_a, 0.0, n_b, level) < target:
        return None
    low, high = 0.0, rate_a  # power(low) < target <= power(high), power rising with the drop
    if power(rate_a, n_a, rate_a, n_b, level) >= target:
        return 0.0
    while high - low > _STEP:
        middle = (low + high) / 2
        low, high = (low, middle) if power(rate_a, n_a, rate_a - middle, n_b,
                                           level) >= target else (middle, high)
    return high


def repeats_for_power(rate_a: float, drop: float, level: float, target: float = POWER,
                      start: int = 2) -> int | None:
    """About how many repeats a run (both runs alike) would detect a drop of `drop` from
    `rate_a` with chance >= `target`; None past REPEATS_MAX or when the drop is more than
    the rate. Power rises with n but not smoothly (the test is discrete): the search doubles,
    then halves the gap, so the count is the first it found, not always the least."""
    if drop <= 0 or drop > rate_a:
        return None

    def enough(n: int) -> bool:
        return power(rate_a, n, rate_a - drop, n, level) >= target

    high = max(2, start)
    while not enough(high):
        if high >= REPEATS_MAX:
            return None
        high = min(REPEATS_MAX, high * 2)
    low = max(1, high // 2)
    if low >= start and enough(low):
        return low
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if enough(middle) else (middle, high)
    return high


def lane_detectable_drop(rates_a: list[float], n_a: list[int], n_b: list[int], level: float,
                         target: float = POWER) -> float | None:
    """The smallest drop, the same in every scenario (capped at each one's rate), that the
    stratified test at `level` detects with chance about `target`: normal approximation of
    the Mantel–Haenszel sum (its mean shift over its null standard deviation)."""
    from statistics import NormalDist

    z_level, z_power = NormalDist().inv_cdf(1 - level), NormalDist().inv_cdf(target)

    def reach(drop: float) -> float:
        shift = variance = 0.0
        for rate, m_a, m_b in zip(rates_a, n_a, n_b):
            d = min(drop, rate)
            pooled = (m_a * rate + m_b * (rate - d)) / (m_a + m_b)
            weight = m_a * m_b / (m_a + m_b)
            shift += weight * d
            variance += weight * pooled * (1 - pooled)
        return shift / math.sqrt(variance) if variance > 0 else 0.0

    if reach(1.0) < z_level + z_power:
        return None
    low, high = 0.0, 1.0
    while high - low > _STEP:
        middle = (low + high) / 2
        low, high = (low, middle) if reach(middle) >= z_level + z_power else (middle, high)
    return high
