"""A number with its interval: what every reliability statistic alk reports is, and the two
interval makers the statistics share: Wilson's score interval for a proportion, and the F
distribution's quantiles (for the ICC's interval).

The F quantile is computed here, from the regularized incomplete beta function (a continued
fraction) and Newton's method with bisection, rather than imported: scipy.stats alone takes
about 0.75 s to import and 140 MB to install, and every `alk` command would pay the first. It
agrees with scipy.stats.f.ppf to 1e-9 (tests/unit/stats/test_stats_intervals.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

Z_95 = 1.959963984540054  # standard normal 0.975 quantile


@dataclass(frozen=True, slots=True)
class Estimate:
    """A point estimate and its 95% interval [low, high]. How the interval was made (Wilson,
    F-based, a seeded bootstrap) is the statistic's, and the README says it for each."""

    value: float
    low: float
    high: float

    def __post_init__(self) -> None:
        if not self.low <= self.value <= self.high:
            raise ValueError(f"an estimate needs low <= value <= high, got {self.low}, "
                             f"{self.value}, {self.high}")

    @classmethod
    def covering(cls, value: float, low: float, high: float) -> Estimate:
        """The estimate with its interval widened, where needed, to hold the point: an unbiased
        point can fall outside an interval made another way (pass^k at k = n after 19 passes
        of 20 is 0, below the Wilson bound's 0.003), and float rounding can push one a hair
        outside its own interval."""
        return cls(value, min(low, value), max(high, value))


def wilson_bounds(rate: float, n: float, z: float = Z_95) -> tuple[float, float]:
    """Wilson score interval of a proportion `rate` observed over `n` trials; `n` may be a
    fraction (an effective number of independent trials)."""
    if not n > 0 or not 0.0 <= rate <= 1.0:
        raise ValueError(f"need 0 <= rate <= 1 and n > 0, got rate {rate} over n {n}")
    z2 = z * z
    denom = 1.0 + z2 / n
    centre = (rate + z2 / (2 * n)) / denom
    half = z * math.sqrt(rate * (1.0 - rate) / n + z2 / (4 * n * n)) / denom
    # At a rate of 0 or 1 the bound is exactly 0 or 1; pin it so float noise never leaves [0, 1].
    low = 0.0 if rate == 0.0 else max(0.0, centre - half)
    high = 1.0 if rate == 1.0 else min(1.0, centre + half)
    return low, high


def wilson_interval(successes: int, n: int, z: float = Z_95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion."""
    if n <= 0 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n and n > 0, got {successes}/{n}")
    return wilson_bounds(successes / n, n, z)


def wilson_estimate(successes: int, n: int) -> Estimate | None:
    """successes/n with its Wilson interval; None when there were no trials."""
    if n == 0:
        return None
    return Estimate.covering(successes / n, *wilson_interval(successes, n))


def clopper_pearson_interval(successes: int, n: int) -> tuple[float, float]:
    """Clopper & Pearson's (1934) exact 95% interval for a binomial proportion, from the beta
    quantiles written through the F distribution's: a Beta(a, b) variable is aF/(aF + b) with
    F ~ F(2a, 2b). Never narrower than Wilson's; it holds at least 95% at every rate."""
    if n <= 0 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n and n > 0, got {successes}/{n}")
    x = successes
    low = 0.0
    if x > 0:
        f = f_quantile(0.025, 2 * x, 2 * (n - x + 1))
        low = x * f / (x * f + n - x + 1)
    high = 1.0
    if x < n:
        f = f_quantile(0.975, 2 * (x + 1), 2 * (n - x))
        high = (x + 1) * f / ((x + 1) * f + n - x)
    return low, high


# -- the F distribution --------------------------------------------------------------------------

_TINY = 1e-300  # keeps the continued fraction's denominators away from zero (Lentz)
_CF_EPS = 3e-16  # a few ulps of 1: |d·c − 1| can never get below one ulp
_CF_MAX_TERMS = 100_000  # it needs O(sqrt(max(a, b))) terms: a few thousand at a million dof


_STIRLING_FROM = 50.0  # where the series below is exact to double precision


def _stirling_tail(z: float) -> float:
    """ln Γ(z) − [(z − ½)·ln z − z + ½·ln 2π] for z ≥ _STIRLING_FROM."""
    w = 1.0 / (z * z)
    return (1.0 / 12.0 - w * (1.0 / 360.0 - w * (1.0 / 1260.0 - w / 1680.0))) / z


def _log_beta(a: float, b: float) -> float:
    """ln B(a, b). With one argument large, ln Γ(b) − ln Γ(a + b) is taken from Stirling's
    series as a difference: subtracting two ln Γ of millions would keep only 9 digits."""
    a, b = min(a, b), max(a, b)
    if b < _STIRLING_FROM:
        return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)
    return (math.lgamma(a) - (b - 0.5) * math.log1p(a / b) - a * math.log(a + b) + a
            + _stirling_tail(b) - _stirling_tail(a + b))


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of I_x(a, b) (modified Lentz), which converges fast for
    x < (a + 1)/(a + b + 2)."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c = 1.0
    d = 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, _CF_MAX_TERMS):
        m2 = 2 * m
        for numerator in (m * (b - m) * x / ((qam + m2) * (a + m2)),
                          -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + numerator / c
            c = c if abs(c) > _TINY else _TINY
            h *= d * c
        if abs(d * c - 1.0) < _CF_EPS:
            return h
    raise ArithmeticError(f"the incomplete beta fraction did not converge at a={a}, b={b}, "
                          f"x={x}")


def _f_cdf(f: float, d1: float, d2: float) -> tuple[float, float]:
    """P(F <= f) for F(d1, d2), and its derivative with respect to ln f."""
    a, b = d1 / 2.0, d2 / 2.0
    # x and y = 1 - x, and their logarithms, each computed directly: neither loses digits
    # when the other is near 1.
    r = d1 * f / d2
    x, y = r / (1.0 + r), 1.0 / (1.0 + r)
    if r <= 1.0:
        log_y = -math.log1p(r)
        log_x = math.log(r) + log_y
    else:
        log_x = -math.log1p(1.0 / r)
        log_y = log_x - math.log(r)
    front = math.exp(a * log_x + b * log_y - _log_beta(a, b))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_fraction(a, b, x) / a, front
    return 1.0 - front * _beta_fraction(b, a, y) / b, front


def f_quantile(q: float, d1: float, d2: float) -> float:
    """The q quantile of the F distribution with (d1, d2) degrees of freedom (any positive
    reals): Newton's method on ln f, kept inside a bracket that bisection shrinks."""
    if not 0.0 < q < 1.0 or not d1 > 0 or not d2 > 0:
        raise ValueError(f"need 0 < q < 1 and positive degrees of freedom, got q={q}, "
                         f"d1={d1}, d2={d2}")
    low, high = -math.inf, math.inf  # a bracket on t = ln f
    t = 0.0
    for _ in range(400):
        cdf, slope = _f_cdf(math.exp(t), d1, d2)
        if cdf < q:
            low = t
        else:
            high = t
        step = (cdf - q) / slope if slope > 0.0 else math.inf
        nxt = t - step
        if not low < nxt < high:
            if math.isinf(low) or math.isinf(high):
                nxt = t + (4.0 if math.isinf(high) else -4.0)  # widen the bracket
            else:
                nxt = (low + high) / 2.0
        # The CDF is good to about 1e-13; ln f to 1e-13 is f to 1e-13 relative.
        if abs(nxt - t) <= 1e-13 * max(1.0, abs(t)) or high - low <= 1e-14 * max(1.0, abs(t)):
            return math.exp(nxt)
        t = nxt
    raise ArithmeticError(f"the F quantile did not converge at q={q}, d1={d1}, d2={d2}")
