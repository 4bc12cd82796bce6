"""pass^k (τ-bench: the chance that k repeats in a row all pass, C(c,k)/C(n,k)) and pass@k (Chen
et al.: the chance that at least one of k passes), over a grid of k or at one k with its
interval.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from alk.estimate import Z_95, Estimate, wilson_interval
from alk.stats.records import KCurve, LaneStats, ScenarioStats, Tally

# The curve keeps every k up to K_EVERY, then K_PER_DECADE values of k a decade, then n:
# proportionate for 100,000 repeats (about 70 points), and whole for small runs.
K_EVERY = 32
K_PER_DECADE = 10


# -- pass^k and pass@k ---------------------------------------------------------------------------


def _check_nck(n: int, c: int, k: int) -> None:
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n} c={c} k={k}")


def k_grid(n: int) -> tuple[int, ...]:
    """The k at which a curve is kept: 1..32, then round(10^(j/10)) (ten a decade: 40, 50,
    63, 79, 100, 126, ...), then n itself."""
    ks = list(range(1, min(n, K_EVERY) + 1))
    j = math.ceil(K_PER_DECADE * math.log10(K_EVERY + 1))
    while (k := round(10 ** (j / K_PER_DECADE))) < n:
        if k > ks[-1]:
            ks.append(k)
        j += 1
    if n > K_EVERY:
        ks.append(n)
    return tuple(ks)


def _hat_series(n: int, c: int, ks: Iterable[int]) -> list[float]:
    """C(c,k)/C(n,k) at each k of `ks` (ascending), as the running product of (c−i)/(n−i):
    O(max k) floats, relative error under k·2⁻⁵³ (1e-11 at k = 100,000)."""
    if c == n:  # every subset passes: 100,000 multiplications by 1 say nothing new
        return [1.0 for _ in ks]
    out = []
    value, k = 1.0, 0
    for target in ks:
        while k < target and value > 0.0:  # past k = c (or an underflow) it stays 0
            value *= (c - k) / (n - k)
            k += 1
        out.append(value)
    return out


def _at_series(n: int, c: int, ks: Iterable[int]) -> list[float]:
    """1 − C(n−c,k)/C(n,k) at each k of `ks` (ascending): 1 − exp(Σ ln(1 − c/(n−i))), summed
    with log1p and taken with expm1, so that a small pass@k keeps its digits."""
    out = []
    total, k = 0.0, 0
    for target in ks:
        if target > n - c:  # every k-subset holds a pass
            out.append(1.0)
            continue
        while k < target and total > -50.0:  # below −50, 1 − e^total is 1.0 in floats
            total += math.log1p(-c / (n - k))
            k += 1
        out.append(0.0 - math.expm1(total))  # 0.0 − …: never −0.0, which JSON shows as "-0.0"
    return out


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Unbiased chance that k trials all pass: C(c,k)/C(n,k)."""
    _check_nck(n, c, k)
    return _hat_series(n, c, (k,))[0]


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased chance that at least one of k trials passes: 1 - C(n-c,k)/C(n,k)."""
    _check_nck(n, c, k)
    return _at_series(n, c, (k,))[0]


def k_curve(tallies: Sequence[Tally]) -> KCurve:
    """The scenarios' mean pass^k and pass@k, k up to the smallest scored count."""
    if not tallies:
        return KCurve((), (), ())
    ks = k_grid(min(t.scored for t in tallies))
    m = sum(t.scenarios for t in tallies)
    hat = [[t.scenarios * v for v in _hat_series(t.scored, t.passed, ks)] for t in tallies]
    at = [[t.scenarios * v for v in _at_series(t.scored, t.passed, ks)] for t in tallies]
    return KCurve(ks, tuple(math.fsum(col) / m for col in zip(*hat)),
                  tuple(math.fsum(col) / m for col in zip(*at)))


# -- pass^k at a chosen k ------------------------------------------------------------------------


def pass_hat_k_at(stats: ScenarioStats | LaneStats, k: int) -> Estimate | None:
    """pass^k at any k, with a 95% interval; None when k exceeds the scored repeats (of any of
    the lane's scenarios: the lane's is the mean over all of them, as τ-bench's).

    A scenario's point is the unbiased C(c,k)/C(n,k) and its interval the rate's Wilson
    interval raised to the k: p^k rises with p, so it holds p^k as often as Wilson holds p.
    The lane's point is the mean of its scenarios' points, and its interval that mean ± 1.96
    standard errors, each scenario's variance (exact, `_variance`) taken at the largest it has
    over the rates in the scenario's Wilson interval: conservative, never zero at 20/20, and
    valid for the mean over these scenarios. A lane of one scenario gets that scenario's
    interval. An interval is widened, where needed, to hold its point."""
    if k < 1:
        raise ValueError(f"pass^k needs k >= 1, got {k}")
    if isinstance(stats, ScenarioStats):
        tallies = (Tally(stats.counts.scored, stats.counts.passed, 1),)
        tallies = tallies if stats.counts.scored else ()
    else:
        tallies = stats.tallies
    if not tallies or k > min(t.scored for t in tallies):
        return None
    m = sum(t.scenarios for t in tallies)
    value = math.fsum(t.scenarios * pass_hat_k(t.scored, t.passed, k) for t in tallies) / m
    if m == 1:
        low, high = wilson_interval(tallies[0].passed, tallies[0].scored)
        return Estimate.covering(value, low**k, high**k)
    variance = math.fsum(t.scenarios * _largest_variance(t, k) for t in tallies) / (m * m)
    half = Z_95 * math.sqrt(variance)
    return Estimate.covering(value, max(0.0, value - half), min(1.0, value + half))


_VARIANCE_GRID = 16  # intervals the Wilson interval is cut into to look for the largest variance


def _largest_variance(tally: Tally, k: int) -> float:
    low, high = wilson_interval(tally.passed, tally.scored)
    return max(_variance(tally.scored, k, low + (high - low) * i / _VARIANCE_GRID)
               for i in range(_VARIANCE_GRID + 1))


def _log_comb(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def _variance(n: int, k: int, p: float) -> float:
    """Variance of C(c,k)/C(n,k) over c ~ Binomial(n, p). That estimate is the chance that a
    random k-subset of the repeats all passed, so its square is the chance that two independent
    ones did: two k-subsets share j repeats with hypergeometric chance h(j), and then 2k − j
    repeats must pass, so E[U²] = Σ h(j)·p^(2k−j), and the variance is that less p^(2k)."""
    total = _log_comb(n, k)
    second = math.fsum(math.exp(_log_comb(k, j) + _log_comb(n - k, k - j) - total)
                       * p ** (2 * k - j) for j in range(max(0, 2 * k - n), k + 1))
    return max(0.0, second - p ** (2 * k))
