"""An exact 95% interval for the pass rate of a scenario an adaptive run sampled until its stop
rule held (`alk run --repeats auto`, alk.execute.adaptive), for a scenario with sampled turns.

Such a scenario stops at the end of the first round (of `round_size` repeats) where the 95%
Wilson interval of its pass rate is narrower than `ci_width`, or once `max_repeats` have run.
Clopper–Pearson's interval treats the number of repeats as fixed; here it is not, and it
covers as little as 93.6% at the defaults (benchmarks/coverage.py). This interval is exact over
the rule's stopping points instead:

- For a true rate p, the chance of stopping at (n repeats, x passes) is c(n, x)·pˣ(1 − p)ⁿ⁻ˣ,
  where c(n, x) counts the sequences of outcomes that reach (n, x) without stopping before: it
  does not depend on p, so one dynamic programme over rounds (`stopping_points`) gives the
  stopping distribution at every p.
- The stopping points are ordered by their maximum-likelihood estimate x/n (the "MLE ordering"
  of group-sequential designs: Jennison & Turnbull, *Group Sequential Methods with Applications
  to Clinical Trials*, 2000, ch. 8.4; Emerson & Fleming 1990). Points with the same estimate
  are tied, and a tie counts in both tails, which only makes the interval wider.
- The interval inverts the two one-sided tests at 2.5% each: its lower end is the p where
  P_p(x'/n' ≥ x/n) = 0.025, its upper end the p where P_p(x'/n' ≤ x/n) = 0.025, each found by
  bisection. That assumes the tail chances are monotone in p, which holds for a fixed n (the
  binomial family's likelihood ratio is monotone) and, for the MLE ordering, for these rules in
  practice (checked on a grid by the tests); at a fixed n the interval is Clopper–Pearson's.

Void repeats are not in the model: the rule only sees scored repeats, and the maximum counts
void ones too. A scenario with v void repeats is treated as if they had come last, that is as a
run of the same rule with a maximum of `max_repeats − v` (its rounds otherwise unchanged): a
simplification, exact when there are none.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

from alk.estimate import wilson_interval

__all__ = ["StopRule", "stopped_interval", "stopping_points", "tail_chances"]

ALPHA = 0.05
_TOLERANCE = 1e-12  # the bisection's, on p


class StopRule(NamedTuple):
    """An adaptive run's rule for a sampled scenario (alk.result.options.Adaptive's fields)."""

    round_size: int
    ci_width: float
    max_repeats: int


def _stops(passed: int, n: int, rule: StopRule) -> bool:
    """alk.execute.adaptive.stop_reason for a sampled scenario with no void repeats."""
    if n >= rule.max_repeats:
        return True
    low, high = wilson_interval(passed, n)
    return high - low < rule.ci_width


@functools.lru_cache(maxsize=64)
def stopping_points(rule: StopRule) -> tuple[tuple[int, int, int], ...]:
    """Every (n, x, c(n, x)) the rule can stop at: n scored repeats, x passes, and the number of
    pass/fail sequences that stop there (exact integers). The chance of stopping at (n, x) when
    the true rate is p is c·pˣ(1 − p)ⁿ⁻ˣ. By rounds: only a round's count of passes matters to
    the rule, so a round of s repeats with k passes stands for comb(s, k) sequences."""
    if rule.round_size < 1 or rule.max_repeats < 1:
        raise ValueError(f"need a round size and a maximum of at least 1, got {rule}")
    open_paths = {0: 1}  # passes so far -> sequences that reach them with the scenario open
    n = 0
    stopped: list[tuple[int, int, int]] = []
    while open_paths:
        size = min(rule.round_size, rule.max_repeats - n)
        n += size
        ways = [math.comb(size, k) for k in range(size + 1)]
        after: dict[int, int] = {}
        for passed, count in open_paths.items():
            for k, way in enumerate(ways):
                after[passed + k] = after.get(passed + k, 0) + count * way
        open_paths = {}
        for passed, count in sorted(after.items()):
            if _stops(passed, n, rule):
                stopped.append((n, passed, count))
            else:
                open_paths[passed] = count
    return tuple(stopped)


@functools.lru_cache(maxsize=64)
def _log_points(rule: StopRule) -> tuple[tuple[int, int, float], ...]:
    return tuple((n, x, math.log(c)) for n, x, c in stopping_points(rule))


def _chance(points: tuple[tuple[int, int, float], ...], p: float) -> float:
    """The chance at rate p (0 < p < 1) of stopping at one of `points` ((n, x, log c))."""
    lp, lq = math.log(p), math.log1p(-p)
    return math.fsum(math.exp(lc + x * lp + (n - x) * lq) for n, x, lc in points)


def _tails(passed: int, scored: int, rule: StopRule
           ) -> tuple[tuple[tuple[int, int, float], ...], tuple[tuple[int, int, float], ...]]:
    """The stopping points at least as high as passed/scored in the MLE ordering, and those at
    most as high (ties in both); compared by cross-multiplying, so exactly."""
    points = _log_points(rule)
    upper = tuple(pt for pt in points if pt[1] * scored >= passed * pt[0])
    lower = tuple(pt for pt in points if pt[1] * scored <= passed * pt[0])
    return upper, lower


def tail_chances(passed: int, scored: int, rule: StopRule, p: float) -> tuple[float, float]:
    """At true rate p: the chance of an outcome at least as high as passed/scored in the MLE
    ordering, and of one at most as high (the two one-sided tests' p-values)."""
    if p <= 0.0 or p >= 1.0:
        at = 1 if p >= 1.0 else 0  # every outcome is all passes (p = 1) or all failures
        high = 1.0 if at * scored >= passed else 0.0
        low = 1.0 if at * scored <= passed else 0.0
        return high, low
    upper, lower = _tails(passed, scored, rule)
    return _chance(upper, p), _chance(lower, p)


def _bisect(points: tuple[tuple[int, int, float], ...], rising: bool) -> float:
    """The p in (0, 1) where the chance of `points` is ALPHA / 2: it rises with p (`rising`,
    an upper tail) or falls."""
    low, high = 0.0, 1.0
    while high - low > _TOLERANCE:
        middle = (low + high) / 2
        chance = _chance(points, middle)
        if (chance < ALPHA / 2) if rising else (chance > ALPHA / 2):
            low = middle
        else:
            high = middle
    return (low + high) / 2


@functools.lru_cache(maxsize=4096)
def stopped_interval(passed: int, scored: int, rule: StopRule, void: int = 0
                     ) -> tuple[float, float]:
    """The exact 95% interval of the pass rate of a sampled scenario that `rule` stopped at
    `passed` passes of `scored` scored repeats, with `void` void repeats besides (taken as
    lowering the maximum, the module's docstring says why). The outcome need not be one of the
    rule's stopping points (a run cut short): the tails are still defined by the ordering."""
    if scored <= 0 or not 0 <= passed <= scored:
        raise ValueError(f"need 0 <= passed <= scored and scored > 0, got {passed}/{scored}")
    if void:
        rule = rule._replace(max_repeats=max(scored, rule.max_repeats - void))
    upper, lower = _tails(passed, scored, rule)
    low = 0.0 if passed == 0 else _bisect(upper, rising=True)
    high = 1.0 if passed == scored else _bisect(lower, rising=False)
    return low, high
