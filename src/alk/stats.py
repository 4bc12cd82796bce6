"""Reliability statistics over repeat results: per scenario, and pooled over a lane.

Pure functions and frozen records; nothing here reads files or starts processes. Numbers are kept
at full precision: rounding is the renderer's business.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

from alk.records import Outcome, RepeatResult, Verdict

Z_95 = 1.959963984540054  # standard normal 0.975 quantile

_SIGNATURES_SHOWN = 5


def _fields_dict(record: Any) -> dict[str, Any]:
    """A flat record's fields in declaration order (which is also its JSON key order)."""
    return {f.name: getattr(record, f.name) for f in fields(record)}


def wilson_interval(successes: int, n: int, z: float = Z_95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion."""
    if n <= 0 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n and n > 0, got {successes}/{n}")
    p = successes / n
    z2 = z * z
    denom = 1.0 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1.0 - p) / n + z2 / (4 * n * n)) / denom
    # At 0/n and n/n the bound is exactly 0 or 1; pin it so float noise never leaves [0, 1].
    lo = 0.0 if successes == 0 else max(0.0, centre - half)
    hi = 1.0 if successes == n else min(1.0, centre + half)
    return lo, hi


def _check_nck(n: int, c: int, k: int) -> None:
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n} c={c} k={k}")


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Unbiased chance that k trials all pass: C(c,k)/C(n,k)."""
    _check_nck(n, c, k)
    # Exact integers: int / int is correctly rounded even when both exceed the float range.
    return math.comb(c, k) / math.comb(n, k)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased chance that at least one of k trials passes: 1 - C(n-c,k)/C(n,k)."""
    _check_nck(n, c, k)
    total = math.comb(n, k)
    # Subtract in integers first so values near 1 lose nothing to cancellation.
    return (total - math.comb(n - c, k)) / total


def _k_series(n: int, c: int) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """pass^k and pass@k for k = 1..n, with the binomials updated incrementally (exact, O(n))."""
    hat: list[float] = []
    at: list[float] = []
    all_, good, bad = 1, 1, 1  # C(n,k), C(c,k), C(n-c,k) at k = 0
    for k in range(1, n + 1):
        all_ = all_ * (n - k + 1) // k
        good = good * (c - k + 1) // k if k <= c else 0
        bad = bad * (n - c - k + 1) // k if k <= n - c else 0
        hat.append(good / all_)
        at.append((all_ - bad) / all_)
    return tuple(hat), tuple(at)


@dataclass(frozen=True, slots=True)
class Icc:
    """One-way random effects ICC(1) (Shrout & Fleiss), with k0 for unequal group sizes."""

    value: float | None
    k0: float | None
    groups: int
    observations: int
    msb: float | None
    msw: float | None
    design_effect: float | None
    effective_n: float | None
    reason: str | None

    def to_dict(self) -> dict[str, Any]:
        return _fields_dict(self)


def icc1(groups: Sequence[Sequence[float]]) -> Icc:
    """ICC(1) over groups of observations (one group per scenario); sizes may differ."""
    import numpy as np  # here, not at the top: every `alk` command would pay its import

    arrays = [np.asarray(g, dtype=float) for g in groups]
    if any(a.size == 0 for a in arrays):
        raise ValueError("every group needs at least one observation")
    a = len(arrays)
    big_n = int(sum(x.size for x in arrays))
    # Each mean square is reported whenever its own degrees of freedom allow it.
    k0 = msb = msw = None
    if a >= 2:
        sizes = np.array([x.size for x in arrays], dtype=float)
        means = np.array([x.mean() for x in arrays])
        grand = float(np.concatenate(arrays).mean())
        k0 = float((big_n - float((sizes**2).sum()) / big_n) / (a - 1))
        msb = float((sizes * (means - grand) ** 2).sum() / (a - 1))
    if big_n - a >= 1:
        msw = float(sum(((x - x.mean()) ** 2).sum() for x in arrays) / (big_n - a))

    def undefined(reason: str) -> Icc:
        return Icc(None, k0, a, big_n, msb, msw, None, None, reason)

    if a < 2:
        return undefined("needs at least 2 scenarios with scored repeats")
    if msw is None:
        return undefined("needs more than one repeat in some scenario")
    assert k0 is not None and msb is not None
    denom = msb + (k0 - 1.0) * msw
    if denom == 0.0:
        return undefined("no variance: every scored repeat had the same outcome")
    value = (msb - msw) / denom
    # Design effect 1 + (k0-1)·ICC, floored at 1: a negative ICC (repeats of a scenario less
    # alike than chance) is sampling noise here, and must never make N repeats count as more
    # than N independent ones.
    design = max(1.0, k0 * msb / denom)
    return Icc(value, k0, a, big_n, msb, msw, design, big_n / design, None)


@dataclass(frozen=True, slots=True)
class Counts:
    requested: int
    completed: int
    void: int
    scored: int
    passed: int

    def to_dict(self) -> dict[str, int]:
        return _fields_dict(self)


@dataclass(frozen=True, slots=True)
class TrajectoryStats:
    distinct: int
    entropy_bits: float
    first_divergence: int | None
    signatures: tuple[tuple[tuple[str, ...], int], ...]  # (steps, count), most common first

    def to_dict(self) -> dict[str, Any]:
        return {
            "distinct": self.distinct,
            "entropy_bits": self.entropy_bits,
            "first_divergence": self.first_divergence,
            "signatures": [{"steps": list(s), "count": n} for s, n in self.signatures],
        }


@dataclass(frozen=True, slots=True)
class EventPaths:
    """How many different normalized event paths the scored repeats took, and where the first
    difference is: with a scripted model, more than one is the framework's nondeterminism."""

    distinct: int
    first_difference: int | None  # 1-based event number
    events_there: tuple[str, ...]  # what the differing repeats did at that event

    def to_dict(self) -> dict[str, Any]:
        difference = None if self.first_difference is None else {
            "event": self.first_difference, "events": list(self.events_there)}
        return {"distinct": self.distinct, "first_difference": difference}


@dataclass(frozen=True, slots=True)
class DurationStats:
    p50: float | None
    p95: float | None
    mean: float | None
    max: float | None

    def to_dict(self) -> dict[str, float | None]:
        return _fields_dict(self)


def _k_map(values: tuple[float, ...]) -> dict[str, float]:
    return {str(k): float(v) for k, v in enumerate(values, start=1)}


def _ci_list(ci: tuple[float, float] | None) -> list[float] | None:
    return None if ci is None else [float(ci[0]), float(ci[1])]


@dataclass(frozen=True, slots=True)
class ScenarioStats:
    id: str
    verdict: Verdict
    counts: Counts
    pass_rate: float | None
    ci: tuple[float, float] | None
    pass_hat_k: tuple[float, ...]  # index k-1
    pass_at_k: tuple[float, ...]
    layers: tuple[tuple[str, int], ...]
    causes: tuple[tuple[str, int], ...]
    trajectories: TrajectoryStats
    durations: DurationStats
    paths: EventPaths = EventPaths(0, None, ())

    @property
    def scores(self) -> tuple[int, ...]:
        """0/1 per scored repeat, for the lane's ICC: its counts say all it needs."""
        return (1,) * self.counts.passed + (0,) * (self.counts.scored - self.counts.passed)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "verdict": self.verdict.value,
            "counts": self.counts.to_dict(),
            "pass_rate": self.pass_rate,
            "ci": _ci_list(self.ci),
            "pass_hat_k": _k_map(self.pass_hat_k),
            "pass_at_k": _k_map(self.pass_at_k),
            "layers": dict(self.layers),
            "causes": dict(self.causes),
            "trajectories": self.trajectories.to_dict(),
            "paths": self.paths.to_dict(),
            "durations": self.durations.to_dict(),
        }


@dataclass(frozen=True, slots=True)
class LaneStats:
    counts: Counts
    pass_rate: float | None
    ci: tuple[float, float] | None
    pass_hat_k: tuple[float, ...]
    pass_at_k: tuple[float, ...]
    layers: tuple[tuple[str, int], ...]
    causes: tuple[tuple[str, int], ...]
    verdicts: tuple[tuple[str, int], ...]
    icc: Icc

    def to_dict(self) -> dict[str, Any]:
        return {
            "counts": self.counts.to_dict(),
            "pass_rate": self.pass_rate,
            "ci": _ci_list(self.ci),
            "pass_hat_k": _k_map(self.pass_hat_k),
            "pass_at_k": _k_map(self.pass_at_k),
            "layers": dict(self.layers),
            "causes": dict(self.causes),
            "verdicts": dict(self.verdicts),
            "icc": self.icc.to_dict(),
        }


def _layers(counter: Counter[str]) -> tuple[tuple[str, int], ...]:
    # Fixed outcome order so reports line up across scenarios and runs.
    return tuple((o.value, counter[o.value]) for o in Outcome if counter[o.value] > 0)


def _causes(counter: Counter[str]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted(((c, n) for c, n in counter.items() if n > 0), key=lambda t: (-t[1], t[0])))


def _first_divergence(signatures: Sequence[tuple[str, ...]]) -> int | None:
    if len(signatures) < 2:
        return None
    for i in range(max(len(s) for s in signatures)):
        # None marks a signature that has already ended: it differs from one that goes on.
        if len({s[i] if i < len(s) else None for s in signatures}) > 1:
            return i + 1
    return None


def _trajectories(repeats: Sequence[RepeatResult]) -> TrajectoryStats:
    """Distinct tool trajectories by their digest (every step counted, kept or not); the steps
    shown and the first divergence come from the steps the repeats kept."""
    if not repeats:
        return TrajectoryStats(0, 0.0, None, ())
    keys = [r.trajectory_hash or "\n".join(r.trajectory) for r in repeats]
    steps = {key: tuple(r.trajectory) for key, r in zip(keys, repeats)}
    counter = Counter(keys)
    total = len(keys)
    entropy = 0.0
    if len(counter) > 1:
        entropy = -math.fsum((n / total) * math.log2(n / total) for n in counter.values())
    # Ties broken by the steps themselves so the order does not depend on repeat order.
    ranked = sorted(((steps[key], n) for key, n in counter.items()), key=lambda t: (-t[1], t[0]))
    return TrajectoryStats(len(counter), entropy, _first_divergence(list(steps.values())),
                           tuple(ranked[:_SIGNATURES_SHOWN]))


def _durations(values: Sequence[float]) -> DurationStats:
    if not values:
        return DurationStats(None, None, None, None)
    import numpy as np

    arr = np.asarray(values, dtype=float)
    p50, p95 = np.percentile(arr, [50.0, 95.0], method="linear")
    return DurationStats(float(p50), float(p95), float(arr.mean()), float(arr.max()))


def _verdict(scored: int, passed: int) -> Verdict:
    if scored == 0:
        return Verdict.VOID
    if passed == scored:
        return Verdict.PASS
    if passed == 0:
        return Verdict.FAIL
    return Verdict.FLAKY


def summarize_scenario(
    scenario_id: str, repeats: Sequence[RepeatResult], requested: int
) -> ScenarioStats:
    """Statistics for one scenario from the repeats that actually ran."""
    stray = {r.scenario for r in repeats} - {scenario_id}
    if stray:
        raise ValueError(f"repeats of other scenarios passed for {scenario_id!r}: {sorted(stray)}")
    scored = [r for r in repeats if r.scored]
    n = len(scored)
    c = sum(1 for r in scored if r.passed)
    hat, at = _k_series(n, c)
    counts = Counts(requested, len(repeats), len(repeats) - n, n, c)
    return ScenarioStats(
        id=scenario_id,
        verdict=_verdict(n, c),
        counts=counts,
        pass_rate=c / n if n else None,
        ci=wilson_interval(c, n) if n else None,
        pass_hat_k=hat,
        pass_at_k=at,
        layers=_layers(Counter(r.outcome.value for r in repeats)),
        causes=_causes(Counter(r.cause for r in repeats)),
        trajectories=_trajectories(scored),
        durations=_durations([r.duration_s for r in scored]),
        paths=_event_paths(scored),
    )


def _event_paths(repeats: Sequence[RepeatResult]) -> EventPaths:
    hashed = [r for r in repeats if r.path_hash]
    distinct = len({r.path_hash for r in hashed})
    if distinct < 2:
        return EventPaths(distinct, None, ())
    paths = [r.path for r in hashed]
    for index in range(max(len(p) for p in paths)):
        steps = {p[index] if index < len(p) else "(end)" for p in paths}
        if len(steps) > 1:
            labels = sorted({step.rsplit("@", 1)[0] for step in steps})
            # Same kind of event, different content: show the digests that tell them apart.
            return EventPaths(distinct, index + 1,
                              tuple(labels) if len(labels) > 1 else tuple(sorted(steps)))
    return EventPaths(distinct, None, ())  # they differ past the steps kept


def _mean_series(rows: Sequence[tuple[float, ...]], k_max: int) -> tuple[float, ...]:
    return tuple(math.fsum(row[k] for row in rows) / len(rows) for k in range(k_max))


def summarize_lane(scenarios: Sequence[ScenarioStats]) -> LaneStats:
    """Pooled counts and rate, per-task averaged pass^k / pass@k, and the ICC across scenarios."""
    counts = Counts(*(sum(getattr(s.counts, f.name) for s in scenarios) for f in fields(Counts)))
    live = [s for s in scenarios if s.counts.scored > 0]
    # tau-bench averages per-task estimates, so k only goes as far as every task has trials.
    k_max = min((s.counts.scored for s in live), default=0)
    layers: Counter[str] = Counter()
    causes: Counter[str] = Counter()
    for s in scenarios:
        layers.update(dict(s.layers))
        causes.update(dict(s.causes))
    verdicts = Counter(s.verdict.value for s in scenarios)
    n, c = counts.scored, counts.passed
    return LaneStats(
        counts=counts,
        pass_rate=c / n if n else None,
        ci=wilson_interval(c, n) if n else None,
        pass_hat_k=_mean_series([s.pass_hat_k for s in live], k_max),
        pass_at_k=_mean_series([s.pass_at_k for s in live], k_max),
        layers=_layers(layers),
        causes=_causes(causes),
        verdicts=tuple((v.value, verdicts[v.value]) for v in Verdict),
        icc=icc1([s.scores for s in live]),
    )
