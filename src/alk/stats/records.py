"""The statistics records of a run, as result.json holds them: each scenario's (`ScenarioStats`)
and the lane's (`LaneStats`), and their parts. Frozen and plain: `alk.stats.summary` makes them,
the result record (`alk.result.document`) stores them, and every report reads them.
"""

from __future__ import annotations

from dataclasses import dataclass

from alk.estimate import Estimate
from alk.records import Verdict


@dataclass(frozen=True, slots=True)
class KCurve:
    """pass^k and pass@k at the k of `k_grid(n)`: every k up to 32, ten a decade beyond, and n
    (for a lane, n is the smallest scored count of its scenarios)."""

    k: tuple[int, ...]
    pass_hat_k: tuple[float, ...]
    pass_at_k: tuple[float, ...]


# -- ICC(1), its interval, and the design effect -------------------------------------------------


@dataclass(frozen=True, slots=True)
class Icc:
    """One-way random effects ICC(1) (Shrout & Fleiss) across scenarios, with k0 for unequal
    repeat counts, its 95% interval from the F distribution (McGraw & Wong 1996, with k0 in
    place of k, an approximation when counts differ; for pass/fail outcomes the F interval is
    itself approximate, and `approximate` where it is measured not to hold), and Kish's design
    effect for the pooled rate, 1 + (m̃ − 1)·ICC with m̃ = Σnᵢ²/N (`cluster_size`), floored at 1.

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
    # The F interval does not hold here (`alk.stats.icc.icc_of_tallies`); False in result.json
    # files written before the mark.
    approximate: bool = False


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
    """What the repeats say about failures. When some scored repeat failed (`observed`):
    `failure_rate` is the rate seen, `repeats` how many repeats show at least one failure with
    95% confidence *if that is the true rate*, ⌈ln 0.05 / ln(1 − rate)⌉, and `repeats_at_low`
    how many do so even at the rate's Wilson 95% lower bound `low_rate`: the count to plan a
    reproduction with. When none failed: `failure_rate` is the Wilson 95% upper bound of the
    failure rate, the largest the repeats leave possible, and `repeats` is None (result.json
    files written before held the repeats to see a failure of that rate there)."""

    failure_rate: float
    observed: bool
    repeats: int | None
    low_rate: float | None = None
    repeats_at_low: int | None = None


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
    AI Agent Reliability", 2026), each with its interval (`alk.stats.consistency` says how):
    outcome, 1 − 4p(1 − p); tool use, 1 − the mean Jensen–Shannon distance of two repeats' tool
    frequencies; steps, the mean normalized Levenshtein similarity of two repeats' steps;
    resources, exp(−mean coefficient of variation) of duration, CPU, peak memory and model
    calls. Over scored repeats; None where too few had what a metric needs. A lane's are the
    means over its scenarios, their intervals resampling scenarios."""

    outcome: Estimate | None
    tool_use: Estimate | None
    steps: Estimate | None
    resources: Estimate | None
    # The figures whose interval is approximate at this scenario's scored repeats (below
    # `alk.stats.consistency.HOLDS_FROM`, where benchmarks/coverage.py measures it under 95%);
    # empty for a lane's (its means cover conservatively) and in older result.json files.
    approximate: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class FaultRobustness:
    """How a lane's faulted scenarios fare against their unfaulted twins
    (`alk.stats.robustness.paired_fault_robustness`): the mean pass rate of the faulted
    scenarios of `pairs` ÷ the mean of their twins', with a seeded bootstrap interval. Not
    clamped to 1 (HAL's R_fault is): above 1 is chance, "no harm measured". `high` is None when
    the twins passed too rarely to bound the ratio.

    `method` "paired" (this alk); "pooled" in result.json files written before it: every
    faulted scenario's pooled rate ÷ every other scenario's, a different figure. `value`, `low`
    and `high` are None when the lane has faulted scenarios but none with a twin: `unpaired`
    names the faulted scenarios left out (no twin, or weighted choices)."""

    value: float | None
    low: float | None
    high: float | None
    method: str = "pooled"
    pairs: tuple[tuple[str, str], ...] = ()  # (faulted scenario, its twin)
    unpaired: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ScenarioStats:
    id: str
    verdict: Verdict
    counts: Counts
    pass_rate: float | None
    ci: tuple[float, float] | None  # as ci_method says
    void_rate: float | None  # void/completed, a float as pass_rate is
    void_ci: tuple[float, float] | None  # its Wilson interval, as `ci` is pass_rate's
    curve: KCurve
    repeats_needed: RepeatsNeeded | None
    faulted: bool  # the lane injects faults into it: it counts on fault robustness's faulted side
    consistency: Consistency
    layers: tuple[tuple[str, int], ...]
    causes: tuple[tuple[str, int], ...]
    trajectories: TrajectoryStats
    durations: DurationStats
    paths: EventPaths
    # A faulted scenario's unfaulted twin (`alk.stats.robustness.fault_twins`); None for the
    # others, and in result.json files written before pairing.
    baseline: str | None = None
    # How `ci` was made: "wilson", or for an adaptive run's scenarios "clopper-pearson" (scripted)
    # or "exact-stopped" (sampled: alk.stats.stopped_interval).
    ci_method: str = "wilson"

    @property
    def scores(self) -> tuple[int, ...]:
        """0/1 per scored repeat: its counts say all it needs."""
        return (1,) * self.counts.passed + (0,) * (self.counts.scored - self.counts.passed)


# -- over a lane ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LaneStats:
    """The lane's pooled counts and rates, its mean pass^k curve and its ICC.

    Two intervals around the pooled pass rate: `ci`, Wilson over every scored repeat, says how
    well these scenarios' own rate is known; `clustered_rate`
    (`alk.stats.icc.clustered_interval`; None with fewer than 2 scored scenarios) says how well
    the rate of tasks like them is known, the scenarios being a sample of those. The second is
    the one to read when the scenarios stand for a wider set of tasks."""

    counts: Counts
    pass_rate: float | None
    ci: tuple[float, float] | None
    clustered_rate: Estimate | None
    void_rate: float | None  # void/completed, a float as pass_rate is
    void_ci: tuple[float, float] | None  # its Wilson interval
    curve: KCurve
    tallies: tuple[Tally, ...]  # the scenarios with scored repeats, by (scored, passed)
    consistency: Consistency
    fault_robustness: FaultRobustness | None  # None without a faulted scenario
    layers: tuple[tuple[str, int], ...]
    causes: tuple[tuple[str, int], ...]
    verdicts: tuple[tuple[str, int], ...]
    icc: Icc
    # How `clustered_rate` was made: "kish-upper-t" (`alk.stats.icc.clustered_interval`), or
    # "kish" in result.json files written before it (Wilson at icc.effective_n, z: narrower).
    clustered_method: str = "kish"
