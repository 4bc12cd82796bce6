"""The regression gate's tests over plain counts: one-sided Fisher tests per scenario, an exact
stratified test across scenarios, and Holm–Tarone's step-down procedure over the family. Every
count is (passed_a, n_a, passed_b, n_b), B the run under question; "less" asks whether B passes
less often than A (a regression), "greater" whether more (an improvement).

- **Fisher's exact test, one-sided** (Fisher 1935): with both margins of the 2×2 table fixed,
  B's passed count is hypergeometric when the rates are equal; p is the chance of B passing
  that few or fewer. It holds its level exactly for any rates with B's no lower than A's (B's
  count only grows stochastically with B's rate), and it is the test whose least attainable p
  is a function of the margins alone, which Tarone's procedure needs.
- **The exact stratified test** (the exact conditional test of a common odds ratio of 1; Birch
  1964, Mehta, Patel & Gray 1985): the sum over scenarios of B's passed counts, each
  hypergeometric given its margins, so the sum's law is their convolution; p is its lower (or
  upper) tail. Cochran–Mantel–Haenszel's statistic is this sum, standardised and read off the
  normal curve; the exact tail keeps the level at 20 repeats, where the normal curve does not.
- **Holm–Tarone** (Tarone 1990; Hommel & Krummenauer 1998): Holm's step-down, where each step
  counts only the hypotheses whose least attainable p could reach the step's level: a
  scenario at 20/20 in both runs (margins that admit one table) spends no error.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

Counts = tuple[int, int, int, int]  # passed_a, n_a, passed_b, n_b


def _check(passed_a: int, n_a: int, passed_b: int, n_b: int) -> None:
    if n_a < 1 or n_b < 1 or not (0 <= passed_a <= n_a and 0 <= passed_b <= n_b):
        raise ValueError(f"need 0 <= passed <= n and n >= 1, got {passed_a}/{n_a} and "
                         f"{passed_b}/{n_b}")


def hypergeometric(passed: int, n_a: int, n_b: int) -> tuple[int, list[float]]:
    """B's passed count given the margins (`passed` in both runs together, n_a and n_b
    repeats): its least value and the probabilities from there up. Exact integers, divided
    once; in log space past 20,000 repeats, where the integers grow slow."""
    failed = n_a + n_b - passed
    lo, hi = max(0, passed - n_a), min(passed, n_b)
    if n_a + n_b > 20_000:
        logs = [-(math.lgamma(x + 1) + math.lgamma(passed - x + 1) + math.lgamma(n_b - x + 1)
                  + math.lgamma(failed - n_b + x + 1)) for x in range(lo, hi + 1)]
        top = max(logs)
        terms = [math.exp(v - top) for v in logs]
        total = math.fsum(terms)
        return lo, [t / total for t in terms]
    weights = [math.comb(passed, x) * math.comb(failed, n_b - x) for x in range(lo, hi + 1)]
    total = math.comb(n_a + n_b, n_b)
    return lo, [w / total for w in weights]


def fisher_less(passed_a: int, n_a: int, passed_b: int, n_b: int) -> float:
    """One-sided p that B passes less often than A: P(B's count <= passed_b | margins)."""
    _check(passed_a, n_a, passed_b, n_b)
    lo, pmf = hypergeometric(passed_a + passed_b, n_a, n_b)
    return min(1.0, math.fsum(pmf[:passed_b - lo + 1]))


def fisher_greater(passed_a: int, n_a: int, passed_b: int, n_b: int) -> float:
    """One-sided p that B passes more often than A."""
    return fisher_less(passed_b, n_b, passed_a, n_a)


def least_p_pair(passed_a: int, n_a: int, passed_b: int, n_b: int) -> tuple[float, float]:
    """(least attainable p of "less", of "greater"): the chance of the most extreme table each
    way, given the margins. 1.0 when the margins admit one table (no failure or no pass)."""
    _check(passed_a, n_a, passed_b, n_b)
    _, pmf = hypergeometric(passed_a + passed_b, n_a, n_b)
    return pmf[0], pmf[-1]


@dataclass(frozen=True, slots=True)
class Stratified:
    """The exact stratified test over scenarios' tables: p each way, and the least p each way
    the margins allow; `strata` counts the tables whose margins admit more than one table."""

    p_less: float
    p_greater: float
    least_less: float
    least_greater: float
    strata: int


def stratified(tables: Sequence[Counts]) -> Stratified:
    """The sum of B's passed counts over the tables, against its exact law given every
    table's margins (the convolution of their hypergeometric laws)."""
    law, lo, observed, strata = [1.0], 0, 0, 0
    for passed_a, n_a, passed_b, n_b in tables:
        _check(passed_a, n_a, passed_b, n_b)
        first, pmf = hypergeometric(passed_a + passed_b, n_a, n_b)
        strata += len(pmf) > 1
        law, lo, observed = _convolve(law, pmf), lo + first, observed + passed_b
    at = observed - lo
    return Stratified(min(1.0, math.fsum(law[:at + 1])), min(1.0, math.fsum(law[at:])),
                      law[0], law[-1], strata)


def _convolve(left: list[float], right: list[float]) -> list[float]:
    if len(right) == 1:
        return [v * right[0] for v in left]
    import numpy as np  # here, not at the top: every `alk` command would pay its import

    return [float(v) for v in np.convolve(left, right)]


@dataclass(frozen=True, slots=True)
class Tested:
    """One hypothesis of a Holm–Tarone family: rejected or not, and the level its p was held
    to at the last step that counted it (None: its margins could reach no step's level)."""

    rejected: bool
    level: float | None


def holm_tarone(p: Sequence[float], least: Sequence[float], alpha: float) -> tuple[Tested, ...]:
    """Holm–Tarone's step-down at family-wise level α. At each step, over the hypotheses not
    yet rejected: K is the least k >= 1 with at most k of them able to reach α/k (least
    attainable p <= α/k); only those are tested, at α/K; the smallest p among them is rejected
    when it is <= α/K, and the step repeats; else the procedure stops."""
    if len(p) != len(least):
        raise ValueError(f"{len(p)} p-values but {len(least)} least attainable ones")
    remaining = list(range(len(p)))
    rejected: set[int] = set()
    level: dict[int, float | None] = {}
    while remaining:
        k = tarone_k([least[i] for i in remaining], alpha)
        cut = alpha / k
        testable = [i for i in remaining if least[i] <= cut]
        for i in remaining:
            level[i] = cut if i in testable else None
        if not testable:
            break
        best = min(testable, key=lambda i: (p[i], i))
        if p[best] > cut:
            break
        rejected.add(best)
        remaining.remove(best)
    return tuple(Tested(i in rejected, level.get(i)) for i in range(len(p)))


def tarone_k(least: Sequence[float], alpha: float) -> int:
    """Tarone's K: the least k >= 1 such that at most k of the hypotheses have a least
    attainable p <= α/k (k = their number always qualifies)."""
    for k in range(1, len(least) + 1):
        if sum(1 for value in least if value <= alpha / k) <= k:
            return k
    return 1
