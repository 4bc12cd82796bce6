"""Two runs of the same scenarios side by side (`alk compare RUN_A RUN_B`): did B regress?

Pure functions over plain numbers first (Newcombe's interval, Fisher's exact test, Holm's
correction, a bootstrap of the median), then `compare_runs`, which
matches two result records scenario by scenario and returns a frozen `Comparison` (JSON through
`msgspec.to_builtins`). Every difference is B − A: negative is worse in B.

The rule that names each scenario's change, in the words the README uses:

- **regressed**: B's pass rate is lower with Fisher's exact test significant after Holm's
  correction across the compared scenarios (adjusted p < α, 0.05 by default), and the 95%
  Newcombe interval of B − A lies wholly below 0.
- **improved**: the same, with the interval wholly above 0.
- **unchanged**: no significant difference, no void repeat in either run, and the interval lies
  within ± the equivalence margin δ (0.1 by default: ten points of pass rate).
- **inconclusive**: anything else: too few repeats to tell either way, a significant p whose
  interval still reaches 0, or void repeats in either run (a void repeat may hide the very
  change, so it never counts as unchanged) or none scored at all.

With 20 repeats a run, "unchanged" at δ = 0.1 cannot happen: even 20/20 against 20/20 gives
[−0.16, +0.16]. Such a scenario reads inconclusive, and `repeats_to_settle` says how many
repeats a run would make its interval fit ±δ at the rates observed (35 for 100% against 100%).

The overall change: regressed if any scenario regressed, else improved if any improved, else
unchanged if every compared scenario is, else inconclusive. The pooled difference (every scored
repeat of the compared scenarios as one sample) is shown beside it as a summary; it treats
repeats of one scenario as independent, which they are not, so the verdict rests on the
scenarios, never on it.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from alk.errors import UsageError
from alk.estimate import Estimate, wilson_bounds
from alk.records import RepeatResult
from alk.result.document import RunDocument, ScenarioResult
from alk.stats.distances import js_distance

ALPHA = 0.05
MARGIN = 0.1  # the equivalence margin δ, in pass rate (0.1 = ten points)
RESAMPLES = 2000  # bootstrap resamples of the median duration
# Fisher's test in exact integers up to this many scored repeats in both runs together (under
# 0.1 s); beyond, the big integers grow too slow and the terms are summed as floats in log space.
FISHER_EXACT_TOTAL = 20_000
# Two hypergeometric terms this close count as equal in the float path (scipy uses the same).
_TIE = 1 + 1e-7
# repeats_to_settle looks no further than this many repeats a run.
SETTLE_MAX = 1 << 20


class Change(StrEnum):
    REGRESSED = "regressed"
    IMPROVED = "improved"
    UNCHANGED = "unchanged"
    INCONCLUSIVE = "inconclusive"


# ---------------------------------------------------------------------------------------------
# Statistics over plain numbers


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


# ---------------------------------------------------------------------------------------------
# Records


@dataclass(frozen=True, slots=True)
class Side:
    """One run's share of a scenario (or of the pooled compared scenarios)."""

    passed: int
    scored: int
    void: int
    completed: int  # repeats that ran: scored + void
    rate: float | None  # passed / scored
    void_rate: float | None  # void / completed
    layers: tuple[tuple[str, int], ...] = ()  # outcome → repeats, as the run's stats have it
    causes: tuple[tuple[str, int], ...] = ()
    trajectories: int = 0  # distinct tool trajectories of the scored repeats
    median_s: float | None = None  # median duration of the scored repeats


@dataclass(frozen=True, slots=True)
class ScenarioComparison:
    id: str
    a: Side
    b: Side
    difference: Estimate | None  # B − A in pass rate, Newcombe 95% interval
    p: float | None  # Fisher's exact, two-sided
    p_holm: float | None  # Holm-adjusted across the compared scenarios
    change: Change
    reason: str  # why the rule gave this change, in words
    trajectory_distance: float | None  # Jensen–Shannon, base 2, over trajectory signatures
    duration_change: Estimate | None  # median B − A in seconds, bootstrap 95% interval
    repeats_to_settle: int | None  # a run, for an inconclusive scenario to read unchanged


@dataclass(frozen=True, slots=True)
class RunSide:
    """Which run a side is: what a reader needs to know the two apart."""

    run_id: str
    lane: str
    framework: str | None
    version: str | None
    status: str
    seed: int
    repeats: int
    sha256: str


@dataclass(frozen=True, slots=True)
class Comparison:
    a: RunSide
    b: RunSide
    alpha: float
    margin: float
    seed: int
    scenarios: tuple[ScenarioComparison, ...]  # in A's order
    only_a: tuple[str, ...]  # scenarios not compared: in one run only
    only_b: tuple[str, ...]
    pooled_a: Side
    pooled_b: Side
    pooled_difference: Estimate | None
    pooled_p: float | None  # Fisher's exact on the pooled counts, unadjusted
    change: Change
    notes: tuple[str, ...]  # what differs between the runs besides the framework's behaviour

    def count(self, change: Change) -> int:
        return sum(1 for s in self.scenarios if s.change is change)


# ---------------------------------------------------------------------------------------------
# Two runs


def compare_runs(a: RunDocument, b: RunDocument, *, alpha: float = ALPHA,
                 margin: float = MARGIN, seed: int = 0) -> Comparison:
    """Scenario by scenario (matched by id) and pooled, B against A. Raises UsageError when the
    runs share no scenario (there is nothing to compare), or for an α or δ outside (0, 1)."""
    for name, value in (("alpha", alpha), ("margin", margin)):
        if not 0 < value < 1:
            raise UsageError(f"--{name} must be between 0 and 1 (a rate), got {value:g}")
    ids_a, ids_b = {s.id for s in a.scenarios}, {s.id for s in b.scenarios}
    shared = [s.id for s in a.scenarios if s.id in ids_b]
    if not shared:
        raise UsageError(
            f"runs {a.run_id} and {b.run_id} share no scenario ({a.run_id}: "
            f"{_names(s.id for s in a.scenarios)}; {b.run_id}: "
            f"{_names(s.id for s in b.scenarios)}): compare two runs of the same lane, or of "
            "lanes with the same scenario ids")
    pairs = [(a.scenario(sid), b.scenario(sid)) for sid in shared]
    sides = [(_side(x), _side(y)) for x, y in pairs]  # type: ignore[arg-type]
    tested = [i for i, (x, y) in enumerate(sides) if x.scored and y.scored]
    p_values = {i: fisher_exact(sides[i][0].passed, sides[i][0].scored, sides[i][1].passed,
                                sides[i][1].scored) for i in tested}
    adjusted = dict(zip(tested, holm([p_values[i] for i in tested])))
    scenarios = tuple(
        _scenario(x, y, side_a, side_b, p_values.get(i), adjusted.get(i), alpha=alpha,
                  margin=margin, seed=seed)
        for i, ((x, y), (side_a, side_b)) in enumerate(zip(pairs, sides)))
    pooled_a, pooled_b = _pooled([s.a for s in scenarios]), _pooled([s.b for s in scenarios])
    both = pooled_a.scored > 0 and pooled_b.scored > 0
    return Comparison(
        a=_run_side(a), b=_run_side(b), alpha=alpha, margin=margin, seed=seed,
        scenarios=scenarios,
        only_a=tuple(s.id for s in a.scenarios if s.id not in ids_b),
        only_b=tuple(s.id for s in b.scenarios if s.id not in ids_a),
        pooled_a=pooled_a, pooled_b=pooled_b,
        pooled_difference=newcombe_interval(pooled_a.passed, pooled_a.scored, pooled_b.passed,
                                            pooled_b.scored) if both else None,
        pooled_p=fisher_exact(pooled_a.passed, pooled_a.scored, pooled_b.passed,
                              pooled_b.scored) if both else None,
        change=_overall([s.change for s in scenarios]),
        notes=_notes(a, b))


def _side(scenario: ScenarioResult) -> Side:
    counts = scenario.stats.counts
    scored = [r for r in scenario.repeats if r.scored]
    return Side(
        passed=counts.passed, scored=counts.scored, void=counts.void,
        completed=counts.completed,
        rate=counts.passed / counts.scored if counts.scored else None,
        void_rate=counts.void / counts.completed if counts.completed else None,
        layers=scenario.stats.layers, causes=scenario.stats.causes,
        trajectories=len(_signatures(scored)),
        median_s=_median([r.duration_s for r in scored]))


def _pooled(sides: Sequence[Side]) -> Side:
    passed, scored = sum(s.passed for s in sides), sum(s.scored for s in sides)
    void, completed = sum(s.void for s in sides), sum(s.completed for s in sides)
    layers: Counter[str] = Counter()
    causes: Counter[str] = Counter()
    for s in sides:
        layers.update(dict(s.layers))
        causes.update(dict(s.causes))
    return Side(passed, scored, void, completed, passed / scored if scored else None,
                void / completed if completed else None, tuple(layers.items()),
                tuple(sorted(causes.items(), key=lambda t: (-t[1], t[0]))))


def _scenario(a: ScenarioResult, b: ScenarioResult, side_a: Side, side_b: Side,
              p: float | None, p_holm: float | None, *, alpha: float, margin: float,
              seed: int) -> ScenarioComparison:
    scored_a = [r for r in a.repeats if r.scored]
    scored_b = [r for r in b.repeats if r.scored]
    difference = settle = None
    if p_holm is None:
        missing = " and ".join(name for name, side in (("A", side_a), ("B", side_b))
                               if not side.scored)
        change, reason = Change.INCONCLUSIVE, f"no scored repeat in {missing}: all void"
    else:
        difference = newcombe_interval(side_a.passed, side_a.scored, side_b.passed,
                                       side_b.scored)
        change, reason = _rule(difference, p_holm, side_a.void + side_b.void, alpha=alpha,
                               margin=margin)
        if change is Change.INCONCLUSIVE and p_holm >= alpha and not side_a.void + side_b.void:
            settle = repeats_to_settle(side_a.rate or 0.0, side_b.rate or 0.0, margin)
    signatures_a, signatures_b = _signatures(scored_a), _signatures(scored_b)
    distance = None
    if signatures_a and signatures_b:
        keys = sorted(signatures_a.keys() | signatures_b.keys())
        distance = js_distance([signatures_a[k] for k in keys], [signatures_b[k] for k in keys])
    durations = None
    if len(scored_a) >= 2 and len(scored_b) >= 2:
        durations = median_difference([r.duration_s for r in scored_a],
                                      [r.duration_s for r in scored_b], seed=seed)
    return ScenarioComparison(a.id, side_a, side_b, difference, p, p_holm, change, reason,
                              distance, durations, settle)


def _rule(difference: Estimate, p_holm: float, void: int, *, alpha: float,
          margin: float) -> tuple[Change, str]:
    """The module docstring's rule, for one scenario with scored repeats in both runs; the
    reason in words (the numbers are the record's other fields)."""
    significant = f"p Holm < {alpha:g}"
    if p_holm < alpha and difference.high < 0:
        return Change.REGRESSED, f"{significant} and the interval lies below 0"
    if p_holm < alpha and difference.low > 0:
        return Change.IMPROVED, f"{significant} and the interval lies above 0"
    if p_holm < alpha:
        return Change.INCONCLUSIVE, f"{significant}, but the interval reaches 0"
    if void:
        return Change.INCONCLUSIVE, (f"{void} void repeats may hide a change: never called "
                                     "unchanged")
    within = f"±{margin * 100:g} points"
    if -margin <= difference.low and difference.high <= margin:
        return Change.UNCHANGED, f"not significant and the interval lies within {within}"
    return Change.INCONCLUSIVE, f"not significant, but the interval is wider than {within}"


def _overall(changes: Sequence[Change]) -> Change:
    if Change.REGRESSED in changes:
        return Change.REGRESSED
    if Change.IMPROVED in changes:
        return Change.IMPROVED
    if changes and all(c is Change.UNCHANGED for c in changes):
        return Change.UNCHANGED
    return Change.INCONCLUSIVE


def _signatures(repeats: Sequence[RepeatResult]) -> Counter[str]:
    """Repeats by tool trajectory, keyed as alk.stats.summary keys them (the digest of every step)."""
    return Counter(r.trajectory_hash or "\n".join(r.trajectory) for r in repeats)


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def _run_side(document: RunDocument) -> RunSide:
    # The framework as the worker reported it (the gate's probe), else as the lane names it.
    identity = document.identities[0] if document.identities else None
    framework = document.gate.framework or (identity and identity.framework) \
        or document.lane.framework
    version = document.gate.version or (identity and identity.version)
    return RunSide(document.run_id, document.lane.name, framework, version, document.status,
                   document.settings.seed, document.settings.repeats, document.lane.sha256)


def _notes(a: RunDocument, b: RunDocument) -> tuple[str, ...]:
    """What differs between the runs besides the framework's behaviour: the reader weighs
    each before believing a change."""
    side_a, side_b = _run_side(a), _run_side(b)
    notes = [] if a.run_id != b.run_id else [f"A and B are the same run, {a.run_id}"]
    if (side_a.framework, side_a.version) != (side_b.framework, side_b.version):
        notes.append(f"framework: {side_a.framework} {side_a.version or '(no version)'} in A, "
                     f"{side_b.framework} {side_b.version or '(no version)'} in B")
    if a.lane.name != b.lane.name:
        notes.append(f"lanes differ: {a.lane.name} in A, {b.lane.name} in B")
    if a.lane.sha256 and b.lane.sha256 and a.lane.sha256 != b.lane.sha256:
        notes.append(f"the lane file changed: sha256 {a.lane.sha256[:12]} in A, "
                     f"{b.lane.sha256[:12]} in B; its checks may differ")
    if a.settings.seed != b.settings.seed:
        notes.append(f"seeds differ: {a.settings.seed} in A, {b.settings.seed} in B; the "
                     "repeats were handed other seeds")
    if a.settings.timeout_s != b.settings.timeout_s:
        notes.append(f"timeouts differ: {a.settings.timeout_s:g} s in A, "
                     f"{b.settings.timeout_s:g} s in B")
    if dict(a.settings.limits) != dict(b.settings.limits):
        notes.append("resource limits differ: " + _limits(a.settings.limits) + " in A, "
                     + _limits(b.settings.limits) + " in B")
    ids_a, ids_b = [s.id for s in a.scenarios], [s.id for s in b.scenarios]
    only_a = [sid for sid in ids_a if sid not in ids_b]
    only_b = [sid for sid in ids_b if sid not in ids_a]
    if only_a:
        notes.append(f"only in A, not compared: {_names(only_a)}")
    if only_b:
        notes.append(f"only in B, not compared: {_names(only_b)}")
    for name, document in (("A", a), ("B", b)):
        if document.status != "complete":
            notes.append(f"run {name} is {document.status}: its rates rest on the "
                         f"{document.aggregate.counts.completed} repeats that finished")
    return tuple(notes)


def _limits(limits: Mapping[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(limits.items())) or "none"


def _names(ids: Iterable[str]) -> str:
    names = list(ids)
    if not names:
        return "none"
    return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
