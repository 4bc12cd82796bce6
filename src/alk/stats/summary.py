"""Reliability statistics over repeat results: each scenario's, and the lane's, as the result
record keeps them (`alk.stats.records`).

Pure functions and frozen records; nothing here reads files or starts processes. Numbers are kept
at full precision: rounding is the renderer's business.

What each statistic means and how its interval is made:

- pass rate: passed/scored, with Wilson's score interval (Clopper–Pearson's for an adaptive
  run's scenarios). The lane's pooled rate has two: Wilson over every scored repeat (right for
  these scenarios only), and the clustered interval of `alk.stats.icc.clustered_interval`
  (right when the scenarios are a sample of the tasks one cares about).
- void rate: void/completed, with Wilson's interval, per scenario and pooled over the lane.
- pass^k (τ-bench) and pass@k (Chen et al.), as `alk.stats.pass_k` computes them.
- ICC(1) with its F-based interval (marked approximate where it does not hold for pass/fail
  repeats), Kish's design effect and the effective n (`alk.stats.icc`).
- the repeats it takes to see a failure, at the observed failure rate and at its Wilson lower
  bound, or the largest rate the repeats leave possible when none failed (`RepeatsNeeded`).
- consistency (outcome, tool use, steps, resources) and fault robustness, as
  `alk.stats.consistency` computes them (`Consistency`, `FaultRobustness`).
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from typing import Any
from dataclasses import fields

from alk.estimate import (
    Estimate,
    clopper_pearson_interval,
    wilson_estimate,
    wilson_interval,
)
from alk.records import Outcome, RepeatResult, Verdict
from alk.stats.consistency import (
    FIGURES,
    approximate_figures,
    lane_mean,
    outcome_consistency,
    resource_consistencies,
)
from alk.stats.icc import clustered_interval, icc_of_tallies
from alk.stats.pass_k import k_curve
from alk.stats.records import (
    Consistency,
    Counts,
    DurationStats,
    EventPaths,
    FaultRobustness,
    KCurve,
    LaneStats,
    RepeatsNeeded,
    ScenarioStats,
    Tally,
    TrajectoryStats,
)
from alk.stats.robustness import paired_fault_robustness
from alk.stats.stopped_interval import StopRule, stopped_interval
from alk.stats.trajectories import sequence_consistencies, tool_use_consistencies

_SIGNATURES_SHOWN = 5


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
    if not failed:
        # What a clean run leaves possible; a count of repeats would read as one to reproduce.
        return RepeatsNeeded(1.0 - wilson_interval(passed, scored)[0], False, None)
    # The observed rate is not known to be the true one: the count that holds even at the
    # failure rate's Wilson lower bound is the one to plan with (336 after 1 failure in 20,
    # where the observed 5% would say 59).
    low = wilson_interval(failed, scored)[0]
    rate = failed / scored
    return RepeatsNeeded(rate, True, repeats_to_see(rate), low, repeats_to_see(low))


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


def _twin(faulted: Collection[str] | Mapping[str, str | None], scenario_id: str) -> str | None:
    return faulted.get(scenario_id) if isinstance(faulted, Mapping) else None


def summarize_scenarios(repeats: Mapping[str, Sequence[RepeatResult]],
                        requested: int | Mapping[str, int], *,
                        faulted: Collection[str] | Mapping[str, str | None] = (),
                        exact: Collection[str] = (),
                        stopped: Mapping[str, StopRule] | None = None,
                        seed: int = 0) -> tuple[ScenarioStats, ...]:
    """`summarize_scenario` of every scenario of a lane (scenario id → its repeats), in the
    mapping's order, at once: the consistency metrics then compare what scenarios share once,
    which for thousands of scenarios is most of their cost. `requested`: the repeats asked of
    every scenario, or of each (scenario id → repeats: an adaptive run's differ). `faulted`:
    the scenarios the lane injures, or each of them → its unfaulted twin or None
    (`alk.stats.robustness.fault_twins`), which fault robustness pairs it with. `exact`: the
    scenarios whose pass rate gets Clopper–Pearson's interval, not Wilson's: an adaptive run's,
    whose stop rule makes Wilson's cover as little as 81% (docs/statistics.md). `stopped`: the
    sampled scenarios of an adaptive run, each → its stop rule: their interval is exact over
    the rule's stopping points (`alk.stats.stopped_interval`), which Clopper–Pearson's is not
    (93.6% at worst); it takes precedence over `exact`."""
    rules = stopped or {}
    tallied = [_tallied(sid, rs) for sid, rs in repeats.items()]
    agreement = _consistencies(tallied, seed)
    asked = (lambda sid: requested) if isinstance(requested, int) else requested.__getitem__
    return tuple(_scenario(sid, rs, asked(sid), sid in faulted, tally, consistency,
                           _twin(faulted, sid), sid in exact, rules.get(sid))
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
              consistency: Consistency, baseline: str | None = None,
              exact: bool = False, rule: StopRule | None = None) -> ScenarioStats:
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
        ci=None if rate is None else _interval(rate, c, n, counts.void, exact, rule),
        ci_method=("exact-stopped" if rule is not None
                   else "clopper-pearson" if exact else "wilson"),
        **_void(_wilson(counts.void, counts.completed)),
        curve=curve,
        repeats_needed=needed,
        faulted=faulted,
        consistency=consistency,
        layers=_layers(outcomes),
        causes=_causes(causes),
        trajectories=_trajectories(scored),
        durations=_durations([r.duration_s for r in scored]),
        paths=_event_paths(scored),
        baseline=baseline,
    )


def _interval(rate: Estimate, passed: int, scored: int, void: int, exact: bool,
              rule: StopRule | None) -> tuple[float, float]:
    if rule is not None:
        return stopped_interval(passed, scored, rule, void)
    return clopper_pearson_interval(passed, scored) if exact else (rate.low, rate.high)


# Looked up once: summarize_scenario runs once a scenario, 10,000 times for 10,000 scenarios.
_VOID, _PASS = Outcome.LANE_INFRA, Outcome.PASS
_OUTCOMES = tuple((outcome, outcome.value) for outcome in Outcome)
_wilson = functools.lru_cache(maxsize=4096)(wilson_estimate)


def _void(rate: Estimate | None) -> dict[str, Any]:
    """`void_rate` and `void_ci`, shaped as `pass_rate` and `ci` are."""
    return {"void_rate": None if rate is None else rate.value,
            "void_ci": None if rate is None else (rate.low, rate.high)}


@functools.lru_cache(maxsize=4096)
def _of_counts(n: int, c: int) -> tuple[Estimate | None, KCurve, RepeatsNeeded | None]:
    """What a scenario's scored and passed counts alone decide; 10,000 scenarios of 10 repeats
    have at most 66 different pairs of them, so each is worked out once."""
    return _wilson(c, n), k_curve([Tally(n, c, 1)] if n else []), _repeats_needed(n, c)


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
    icc = icc_of_tallies(tallies)
    clustered = clustered_interval(counts.passed, counts.scored, icc)
    return LaneStats(
        counts=counts,
        pass_rate=None if rate is None else rate.value,
        ci=None if rate is None else (rate.low, rate.high),
        clustered_rate=clustered,
        clustered_method="kish-upper-t",
        **_void(wilson_estimate(counts.void, counts.completed)),
        curve=k_curve(tallies),
        tallies=tallies,
        consistency=Consistency(*(lane_mean([getattr(s.consistency, name) for s in scenarios],
                                            seed=seed) for name in FIGURES)),
        fault_robustness=_fault_robustness(scenarios, seed),
        layers=_layers(layers),
        causes=_causes(causes),
        verdicts=tuple((v.value, verdicts[v.value]) for v in Verdict),
        icc=icc,
    )


def _fault_robustness(scenarios: Sequence[ScenarioStats], seed: int) -> FaultRobustness | None:
    """Each faulted scenario against its twin; None without a faulted scenario. One without a
    twin, or whose pair scored nothing on a side, is left out and named."""
    faulted = [s for s in scenarios if s.faulted]
    if not faulted:
        return None
    by_id = {s.id: s for s in scenarios}
    pairs = tuple((s.id, s.baseline) for s in faulted
                  if s.baseline in by_id and s.counts.scored and by_id[s.baseline].counts.scored)
    unpaired = tuple(s.id for s in faulted if (s.id, s.baseline) not in pairs)
    counts = {sid: (by_id[sid].counts.passed, by_id[sid].counts.scored)
              for pair in pairs for sid in pair}
    ratio = paired_fault_robustness(pairs, counts, seed=seed)
    if ratio is None:
        return FaultRobustness(None, None, None, "paired", pairs, unpaired)
    # JSON has no infinity: an unbounded ratio has no upper bound.
    return FaultRobustness(ratio.value, ratio.low, None if math.isinf(ratio.high) else ratio.high,
                           "paired", pairs, unpaired)


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
    return [Consistency(*values, approximate=approximate_figures(len(scored), values))
            for values, (_, _, scored) in zip(zip(
                outcome, tool_use, steps, resource_consistencies(resources, seed=seed)), tallied)]
