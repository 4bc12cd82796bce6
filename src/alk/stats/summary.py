"""Reliability statistics over repeat results: per scenario, and over a lane.

Pure functions and frozen records; nothing here reads files or starts processes. Numbers are kept
at full precision: rounding is the renderer's business. The records are stored as they are in
the result record (`alk.result.document`): their fields are what result.json holds.

What each statistic means and how its interval is made:

- pass rate: passed/scored, with Wilson's score interval. The lane's pooled rate has two: Wilson
  over every scored repeat (right for these scenarios only), and Wilson at the effective number
  of independent repeats (right when the scenarios are a sample of the tasks one cares about).
- void rate: void/completed, with Wilson's interval, per scenario and pooled over the lane.
- pass^k (τ-bench): the chance that k repeats in a row all pass, C(c,k)/C(n,k) per scenario and
  the mean of those over the lane's scenarios; `pass_hat_k_at` gives it at any k with an
  interval. pass@k (Chen et al.): the chance that at least one of k passes.
- ICC(1) with its F-based interval, Kish's design effect and the effective n (`Icc`).
- the repeats it takes to see a failure of the observed rate, or of the largest rate the
  repeats leave possible when none failed (`RepeatsNeeded`).
- consistency (outcome, tool use, steps, resources) and fault robustness, as `alk.stats.consistency`
  computes them (`Consistency`, `FaultRobustness`).
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields

from alk.estimate import Z_95, Estimate, f_quantile, wilson_bounds, wilson_estimate
from alk.estimate import wilson_interval as wilson_interval
from alk.records import Outcome, RepeatResult, Verdict
from alk.stats.consistency import (
    lane_mean,
    outcome_consistency,
    pooled_fault_robustness,
    resource_consistencies,
    sequence_consistencies,
    tool_use_consistencies,
)

__all__ = [
    "Z_95", "Consistency", "Counts", "DurationStats", "EventPaths", "FaultRobustness", "Icc",
    "KCurve", "LaneStats", "RepeatsNeeded", "ScenarioStats", "Tally", "TrajectoryStats", "icc1",
    "k_grid", "kept_steps", "pass_at_k", "pass_hat_k", "pass_hat_k_at", "repeats_to_see",
    "summarize_lane", "summarize_scenario", "summarize_scenarios", "wilson_interval",
]

_SIGNATURES_SHOWN = 5
# The curve keeps every k up to K_EVERY, then K_PER_DECADE values of k a decade, then n:
# proportionate for 100,000 repeats (about 70 points), and whole for small runs.
K_EVERY = 32
K_PER_DECADE = 10
# Below this many scenarios the ICC's interval is wide, whatever the repeats.
FEW_SCENARIOS = 5


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


@dataclass(frozen=True, slots=True)
class KCurve:
    """pass^k and pass@k at the k of `k_grid(n)`: every k up to 32, ten a decade beyond, and n
    (for a lane, n is the smallest scored count of its scenarios)."""

    k: tuple[int, ...]
    pass_hat_k: tuple[float, ...]
    pass_at_k: tuple[float, ...]


def _curve(tallies: Sequence[Tally]) -> KCurve:
    """The scenarios' mean pass^k and pass@k, k up to the smallest scored count."""
    if not tallies:
        return KCurve((), (), ())
    ks = k_grid(min(t.scored for t in tallies))
    m = sum(t.scenarios for t in tallies)
    hat = [[t.scenarios * v for v in _hat_series(t.scored, t.passed, ks)] for t in tallies]
    at = [[t.scenarios * v for v in _at_series(t.scored, t.passed, ks)] for t in tallies]
    return KCurve(ks, tuple(math.fsum(col) / m for col in zip(*hat)),
                  tuple(math.fsum(col) / m for col in zip(*at)))


# -- ICC(1), its interval, and the design effect -------------------------------------------------


@dataclass(frozen=True, slots=True)
class Icc:
    """One-way random effects ICC(1) (Shrout & Fleiss) across scenarios, with k0 for unequal
    repeat counts, its 95% interval from the F distribution (McGraw & Wong 1996, with k0 in
    place of k, an approximation when counts differ; for pass/fail outcomes the F interval is
    itself approximate, more so near rates of 0 or 1), and Kish's design effect for the pooled
    rate, 1 + (m̃ − 1)·ICC with m̃ = Σnᵢ²/N (`cluster_size`), floored at 1.

    `reason` says why there is no value; `note` what to bear in mind about the value there is
    (no interval, a wide one, a design effect taken at its worst)."""

    value: float | None
    ci: tuple[float, float] | None
    k0: float | None
    cluster_size: float | None
    groups: int
    observations: int
    msb: float | None
    msw: float | None
    design_effect: float | None
    effective_n: float | None
    reason: str | None
    note: str | None


def icc1(groups: Sequence[Sequence[float]]) -> Icc:
    """ICC(1) over groups of observations (one group per scenario); sizes may differ."""
    rows = []
    for group in groups:
        if not group:
            raise ValueError("every group needs at least one observation")
        mean = math.fsum(group) / len(group)
        rows.append((len(group), mean, math.fsum((x - mean) ** 2 for x in group), 1))
    return _icc(rows)


def _icc_of_tallies(tallies: Sequence[Tally]) -> Icc:
    # A 0/1 group of n with c ones: mean c/n, squares about it c(n−c)/n.
    return _icc([(t.scored, t.passed / t.scored, t.passed * (t.scored - t.passed) / t.scored,
                  t.scenarios) for t in tallies])


def _icc(rows: Sequence[tuple[int, float, float, int]]) -> Icc:
    """ICC(1) from (size, mean, sum of squares about the mean, how many such groups)."""
    a = sum(j for *_, j in rows)
    big_n = sum(j * n for n, *_, j in rows)
    # Each mean square is reported whenever its own degrees of freedom allow it.
    k0 = msb = msw = cluster = None
    if a >= 2:
        squares = sum(j * n * n for n, *_, j in rows)
        grand = math.fsum(j * n * mean for n, mean, _, j in rows) / big_n
        k0 = (big_n - squares / big_n) / (a - 1)
        cluster = squares / big_n
        msb = math.fsum(j * n * (mean - grand) ** 2 for n, mean, _, j in rows) / (a - 1)
    if big_n - a >= 1:
        msw = math.fsum(j * ss for *_, ss, j in rows) / (big_n - a)

    def undefined(reason: str, design: float | None = None) -> Icc:
        note = None
        if design is not None and design > 1.0:
            note = "design effect at its worst case, ICC = 1: each scenario counts once"
        effective = None if design is None else big_n / design
        return Icc(None, None, k0, cluster, a, big_n, msb, msw, design, effective, reason, note)

    if a < 2:
        return undefined("needs at least 2 scenarios with scored repeats")
    assert k0 is not None and msb is not None and cluster is not None
    if msw is None:
        # One repeat a scenario: m̃ = 1, so the design effect is 1 whatever the ICC.
        return undefined("needs more than one repeat in some scenario", 1.0)
    denom = msb + (k0 - 1.0) * msw
    if denom == 0.0:
        # Nothing varied: how alike a scenario's repeats are is unknown, so the pooled rate's
        # interval takes the worst case.
        return undefined("no variance: every scored repeat had the same outcome", cluster)
    value = (msb - msw) / denom
    ci, note = None, None
    if msw == 0.0:
        note = ("every scenario passed all or none of its repeats: ICC is 1, and its "
                "F interval needs some variation within a scenario")
    else:
        low, high = _icc_interval(msb / msw, a - 1, big_n - a, k0)
        ci = (min(low, value), max(high, value))
        if a < FEW_SCENARIOS:
            note = f"only {a} scenarios: the interval is wide"
    # Negative ICC (a scenario's repeats less alike than chance) is sampling noise here, and
    # must never make N repeats count as more than N independent ones.
    design = max(1.0, 1.0 + (cluster - 1.0) * value)
    return Icc(value, ci, k0, cluster, a, big_n, msb, msw, design, big_n / design, None, note)


def _icc_interval(f0: float, d1: int, d2: int, k: float) -> tuple[float, float]:
    """McGraw & Wong's 95% interval of ICC(1) from F0 = MSB/MSW."""
    f_low = f0 / f_quantile(0.975, d1, d2)
    f_high = f0 * f_quantile(0.975, d2, d1)
    return (f_low - 1.0) / (f_low + k - 1.0), (f_high - 1.0) / (f_high + k - 1.0)


# -- per scenario --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Counts:
    requested: int
    completed: int
    void: int
    scored: int
    passed: int


@dataclass(frozen=True, slots=True)
class Tally:
    """How many scenarios scored `scored` repeats and passed `passed` of them: the lane keeps
    its scenarios' counts this way, all its pass^k and ICC need, at any k."""

    scored: int
    passed: int
    scenarios: int


@dataclass(frozen=True, slots=True)
class RepeatsNeeded:
    """How many repeats show at least one failure of rate `failure_rate` with 95% confidence:
    ⌈ln 0.05 / ln(1 − rate)⌉. The rate is the observed failure rate when some scored repeat
    failed (`observed`), else the Wilson 95% upper bound of the failure rate after none did: the
    largest rate the repeats leave possible."""

    failure_rate: float
    observed: bool
    repeats: int


def repeats_to_see(failure_rate: float, confidence: float = 0.95) -> int:
    """Repeats needed to see at least one failure of this rate with this confidence:
    the least n with 1 − (1 − p)ⁿ ≥ confidence, n = ⌈ln(1 − confidence)/ln(1 − p)⌉."""
    if not 0.0 < failure_rate <= 1.0 or not 0.0 < confidence < 1.0:
        raise ValueError(f"need 0 < failure rate <= 1 and 0 < confidence < 1, got "
                         f"{failure_rate} and {confidence}")
    if failure_rate == 1.0:
        return 1
    return max(1, math.ceil(math.log1p(-confidence) / math.log1p(-failure_rate)))


def _repeats_needed(scored: int, passed: int) -> RepeatsNeeded | None:
    if scored == 0:
        return None
    failed = scored - passed
    if failed:
        rate = failed / scored
    else:
        rate = 1.0 - wilson_interval(passed, scored)[0]
    return RepeatsNeeded(rate, failed > 0, repeats_to_see(rate))


@dataclass(frozen=True, slots=True)
class TrajectoryStats:
    distinct: int
    entropy_bits: float
    first_divergence: int | None
    signatures: tuple[tuple[tuple[str, ...], int], ...]  # (steps, count), most common first


@dataclass(frozen=True, slots=True)
class EventPaths:
    """How many different normalized event paths the scored repeats took, and where the first
    difference is: with a scripted model, more than one is the framework's nondeterminism."""

    distinct: int
    first_difference: int | None  # 1-based event number
    events_there: tuple[str, ...]  # what the differing repeats did at that event


@dataclass(frozen=True, slots=True)
class DurationStats:
    p50: float | None
    p95: float | None
    mean: float | None
    max: float | None


@dataclass(frozen=True, slots=True)
class Consistency:
    """How much the repeats agree, as Rabanser, Kapoor et al. define it ("Towards a Science of
    AI Agent Reliability", 2026), each with its interval (`alk.stats.consistency` says how): outcome,
    1 − 4p(1 − p); tool use, 1 − the mean Jensen–Shannon distance of two repeats' tool
    frequencies; steps, the mean normalized Levenshtein similarity of two repeats' steps;
    resources, exp(−mean coefficient of variation) of duration, CPU, peak memory and model
    calls. Over scored repeats; None where too few had what a metric needs. A lane's are the
    means over its scenarios, their intervals resampling scenarios."""

    outcome: Estimate | None
    tool_use: Estimate | None
    steps: Estimate | None
    resources: Estimate | None


@dataclass(frozen=True, slots=True)
class FaultRobustness:
    """The pooled pass rate of a lane's scenarios with injected faults ÷ that of its others,
    with a seeded bootstrap interval (`alk.stats.consistency.fault_robustness`). Not clamped to 1:
    above 1 is chance, "no harm measured". `high` is None when the repeats without faults
    passed too rarely to bound the ratio."""

    value: float
    low: float
    high: float | None


@dataclass(frozen=True, slots=True)
class ScenarioStats:
    id: str
    verdict: Verdict
    counts: Counts
    pass_rate: float | None
    ci: tuple[float, float] | None  # Wilson
    void_rate: Estimate | None  # void/completed, Wilson
    curve: KCurve
    repeats_needed: RepeatsNeeded | None
    faulted: bool  # the lane injects faults into it: it counts on fault robustness's faulted side
    consistency: Consistency
    layers: tuple[tuple[str, int], ...]
    causes: tuple[tuple[str, int], ...]
    trajectories: TrajectoryStats
    durations: DurationStats
    paths: EventPaths

    @property
    def scores(self) -> tuple[int, ...]:
        """0/1 per scored repeat: its counts say all it needs."""
        return (1,) * self.counts.passed + (0,) * (self.counts.scored - self.counts.passed)


def _layers(counter: Mapping[Outcome, int]) -> tuple[tuple[str, int], ...]:
    # Fixed outcome order so reports line up across scenarios and runs.
    return tuple((code, counter[o]) for o, code in _OUTCOMES if counter.get(o, 0) > 0)


def _causes(counter: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
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
    counter = Counter(keys)
    total = len(keys)
    if len(counter) == 1:  # the common case, and the quickest
        return TrajectoryStats(1, 0.0, None, ((tuple(repeats[-1].trajectory), total),))
    steps = {key: tuple(r.trajectory) for key, r in zip(keys, repeats)}
    entropy = -math.fsum((n / total) * math.log2(n / total) for n in counter.values())
    # Ties broken by the steps themselves so the order does not depend on repeat order.
    ranked = sorted(((steps[key], n) for key, n in counter.items()), key=lambda t: (-t[1], t[0]))
    return TrajectoryStats(len(counter), entropy, _first_divergence(list(steps.values())),
                           tuple(ranked[:_SIGNATURES_SHOWN]))


def _percentile(ordered: Sequence[float], q: float) -> float:
    """numpy's default ("linear") percentile of sorted values, without numpy's per-call cost,
    which 10,000 scenarios of 10 repeats would pay 10,000 times."""
    h = (len(ordered) - 1) * q / 100.0
    i = math.floor(h)
    if i + 1 >= len(ordered):
        return float(ordered[-1])
    return ordered[i] + (h - i) * (ordered[i + 1] - ordered[i])


def _durations(values: Sequence[float]) -> DurationStats:
    if not values:
        return DurationStats(None, None, None, None)
    ordered = sorted(values)
    return DurationStats(_percentile(ordered, 50.0), _percentile(ordered, 95.0),
                         math.fsum(ordered) / len(ordered), float(ordered[-1]))


def _verdict(scored: int, passed: int) -> Verdict:
    if scored == 0:
        return Verdict.VOID
    if passed == scored:
        return Verdict.PASS
    if passed == 0:
        return Verdict.FAIL
    return Verdict.FLAKY


def summarize_scenario(scenario_id: str, repeats: Sequence[RepeatResult], requested: int, *,
                       faulted: bool = False, seed: int = 0) -> ScenarioStats:
    """Statistics for one scenario from the repeats that actually ran. `faulted`: the lane
    injects faults into it (worker faults, wire faults, a kill); `seed`: the consistency
    metrics' bootstraps."""
    return summarize_scenarios({scenario_id: repeats}, requested,
                               faulted=(scenario_id,) if faulted else (), seed=seed)[0]


def summarize_scenarios(repeats: Mapping[str, Sequence[RepeatResult]],
                        requested: int | Mapping[str, int], *, faulted: Collection[str] = (),
                        seed: int = 0) -> tuple[ScenarioStats, ...]:
    """`summarize_scenario` of every scenario of a lane (scenario id → its repeats), in the
    mapping's order, at once: the consistency metrics then compare what scenarios share once,
    which for thousands of scenarios is most of their cost. `requested`: the repeats asked of
    every scenario, or of each (scenario id → repeats: an adaptive run's differ)."""
    tallied = [_tallied(sid, rs) for sid, rs in repeats.items()]
    agreement = _consistencies(tallied, seed)
    asked = (lambda sid: requested) if isinstance(requested, int) else requested.__getitem__
    return tuple(_scenario(sid, rs, asked(sid), sid in faulted, tally, consistency)
                 for (sid, rs), tally, consistency in zip(repeats.items(), tallied, agreement))


def _tallied(scenario_id: str, repeats: Sequence[RepeatResult]
             ) -> tuple[dict[Outcome, int], dict[str, int], list[RepeatResult]]:
    """A scenario's repeats by outcome and by cause, and its scored repeats."""
    # One loop with plain dicts: a Counter costs more than it saves on 10 repeats.
    outcomes: dict[Outcome, int] = {}
    causes: dict[str, int] = {}
    scored = []
    for r in repeats:
        if r.scenario != scenario_id:
            stray = sorted({r.scenario for r in repeats} - {scenario_id})
            raise ValueError(f"repeats of other scenarios passed for {scenario_id!r}: {stray}")
        outcome = r.outcome
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        causes[r.cause] = causes.get(r.cause, 0) + 1
        if outcome is not _VOID:
            scored.append(r)
    return outcomes, causes, scored


def _scenario(scenario_id: str, repeats: Sequence[RepeatResult], requested: int, faulted: bool,
              tally: tuple[dict[Outcome, int], dict[str, int], list[RepeatResult]],
              consistency: Consistency) -> ScenarioStats:
    outcomes, causes, scored = tally
    n = len(scored)
    c = outcomes.get(_PASS, 0)
    counts = Counts(requested, len(repeats), len(repeats) - n, n, c)
    rate, curve, needed = _of_counts(n, c)
    return ScenarioStats(
        id=scenario_id,
        verdict=_verdict(n, c),
        counts=counts,
        pass_rate=None if rate is None else rate.value,
        ci=None if rate is None else (rate.low, rate.high),
        void_rate=_wilson(counts.void, counts.completed),
        curve=curve,
        repeats_needed=needed,
        faulted=faulted,
        consistency=consistency,
        layers=_layers(outcomes),
        causes=_causes(causes),
        trajectories=_trajectories(scored),
        durations=_durations([r.duration_s for r in scored]),
        paths=_event_paths(scored),
    )


# Looked up once: summarize_scenario runs once a scenario, 10,000 times for 10,000 scenarios.
_VOID, _PASS = Outcome.LANE_INFRA, Outcome.PASS
_OUTCOMES = tuple((outcome, outcome.value) for outcome in Outcome)
_wilson = functools.lru_cache(maxsize=4096)(wilson_estimate)


@functools.lru_cache(maxsize=4096)
def _of_counts(n: int, c: int) -> tuple[Estimate | None, KCurve, RepeatsNeeded | None]:
    """What a scenario's scored and passed counts alone decide; 10,000 scenarios of 10 repeats
    have at most 66 different pairs of them, so each is worked out once."""
    return _wilson(c, n), _curve([Tally(n, c, 1)] if n else []), _repeats_needed(n, c)


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


# -- over a lane ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LaneStats:
    """The lane's pooled counts and rates, its mean pass^k curve and its ICC.

    Two intervals around the pooled pass rate: `ci`, Wilson over every scored repeat, says how
    well these scenarios' own rate is known; `clustered_rate`, Wilson at the ICC's effective n
    (None with fewer than 2 scored scenarios), says how well the rate of tasks like them is
    known, the scenarios being a sample of those. The second is the one to read when the
    scenarios stand for a wider set of tasks."""

    counts: Counts
    pass_rate: float | None
    ci: tuple[float, float] | None
    clustered_rate: Estimate | None
    void_rate: Estimate | None
    curve: KCurve
    tallies: tuple[Tally, ...]  # the scenarios with scored repeats, by (scored, passed)
    consistency: Consistency
    fault_robustness: FaultRobustness | None  # None without scenarios both with and without
    layers: tuple[tuple[str, int], ...]
    causes: tuple[tuple[str, int], ...]
    verdicts: tuple[tuple[str, int], ...]
    icc: Icc


def summarize_lane(scenarios: Sequence[ScenarioStats], *, seed: int = 0) -> LaneStats:
    """Pooled counts and rates, the mean of the scenarios' pass^k / pass@k (τ-bench) and of
    their consistency, fault robustness, and the ICC across scenarios. `seed`: the bootstraps'
    (consistency and fault robustness)."""
    counts = Counts(*(sum(getattr(s.counts, f.name) for s in scenarios) for f in fields(Counts)))
    by_count = Counter((s.counts.scored, s.counts.passed) for s in scenarios if s.counts.scored)
    tallies = tuple(Tally(n, c, j) for (n, c), j in sorted(by_count.items()))
    layers: Counter[Outcome] = Counter()
    causes: Counter[str] = Counter()
    for s in scenarios:
        for outcome, count in s.layers:
            layers[Outcome(outcome)] += count
        for cause, count in s.causes:
            causes[cause] += count
    verdicts = Counter(s.verdict.value for s in scenarios)
    rate = wilson_estimate(counts.passed, counts.scored)
    icc = _icc_of_tallies(tallies)
    clustered = None
    if rate is not None and icc.effective_n is not None:
        clustered = Estimate.covering(rate.value, *wilson_bounds(rate.value, icc.effective_n))
    return LaneStats(
        counts=counts,
        pass_rate=None if rate is None else rate.value,
        ci=None if rate is None else (rate.low, rate.high),
        clustered_rate=clustered,
        void_rate=wilson_estimate(counts.void, counts.completed),
        curve=_curve(tallies),
        tallies=tallies,
        consistency=Consistency(*(lane_mean([getattr(s.consistency, f.name) for s in scenarios],
                                            seed=seed) for f in fields(Consistency))),
        fault_robustness=_fault_robustness(scenarios, seed),
        layers=_layers(layers),
        causes=_causes(causes),
        verdicts=tuple((v.value, verdicts[v.value]) for v in Verdict),
        icc=icc,
    )


def _fault_robustness(scenarios: Sequence[ScenarioStats], seed: int) -> FaultRobustness | None:
    # Scenarios differ: the interval draws scenarios, then their repeats (two stages), so that
    # it does not treat the repeats of a few tasks as many independent ones.
    pools = {side: [(s.counts.passed, s.counts.scored) for s in scenarios
                    if s.faulted is side and s.counts.scored] for side in (True, False)}
    ratio = pooled_fault_robustness(pools[True], pools[False], seed=seed)
    if ratio is None:
        return None
    # Pools that never vary (every repeat passed, say) give every draw the same ratio: the
    # interval is widened to the ratio of the pooled rates' Wilson bounds, which the repeats
    # do leave open.
    faulted_low, faulted_high = wilson_interval(*_pooled(pools[True]))
    base_low, base_high = wilson_interval(*_pooled(pools[False]))
    low = min(ratio.low, faulted_low / base_high)
    high = max(ratio.high, faulted_high / base_low if base_low > 0 else math.inf)
    # JSON has no infinity: an unbounded ratio has no upper bound.
    return FaultRobustness(ratio.value, low, None if math.isinf(high) else high)


def _pooled(pool: Sequence[tuple[int, int]]) -> tuple[int, int]:
    """(passed, scored) over a pool of scenarios."""
    return sum(p for p, _ in pool), sum(n for _, n in pool)


# -- consistency ---------------------------------------------------------------------------------

_NO_STEPS = hashlib.sha256().hexdigest()  # the digest of a trajectory of no step


def kept_steps(r: RepeatResult) -> tuple[str, ...] | None:
    """A repeat's trajectory for the consistency metrics; None when it was not kept (the run's
    budget for kept steps ran out before it, and its digest is not that of no step): a
    trajectory that was not recorded must not count as one without tool calls."""
    if r.trajectory or not r.trajectory_hash:
        return r.trajectory
    # The digest of several attempts is that of their digests joined (alk.execute.repeat).
    nothing = _NO_STEPS if r.attempts <= 1 else hashlib.sha256(
        (_NO_STEPS * r.attempts).encode()).hexdigest()
    return r.trajectory if r.trajectory_hash == nothing else None


def _consistencies(tallied: Sequence[tuple[dict[Outcome, int], dict[str, int],
                                            list[RepeatResult]]], seed: int) -> list[Consistency]:
    """Each scenario's consistency from its scored repeats, every scenario's at once."""
    trajectories, resources, gateway, outcome = [], [], [], []
    for outcomes, _, scored in tallied:
        trajectories.append([kept_steps(r) for r in scored])
        models = [r.model for r in scored]
        # With alk's model gateway, the trajectory is the gateway's, spelt its own way.
        gateway.append(models.count(None) < len(models))
        used = {"duration_s": [r.duration_s for r in scored], "cpu_s": [r.cpu_s for r in scored],
                "peak_rss_mb": [r.peak_rss_mb for r in scored]}
        if gateway[-1]:
            used["model_calls"] = [None if m is None else m.get("calls") for m in models]
        resources.append(used)
        outcome.append(outcome_consistency(outcomes.get(_PASS, 0), len(scored)))
    tool_use: list[Estimate | None] = [None] * len(tallied)
    for flag in (False, True):
        chosen = [i for i, g in enumerate(gateway) if g is flag]
        if chosen:
            found = tool_use_consistencies([trajectories[i] for i in chosen], gateway=flag,
                                           seed=seed)
            for i, estimate in zip(chosen, found):
                tool_use[i] = estimate
    steps = sequence_consistencies(trajectories, seed=seed)
    return [Consistency(*values) for values in zip(
        outcome, tool_use, steps, resource_consistencies(resources, seed=seed))]


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
