"""Two runs of the same scenarios side by side (`alk compare RUN_A RUN_B`): did B regress?

`compare_runs` matches two result records scenario by scenario, with the tests of
`alk.stats.gate` (one-sided Fisher, the exact stratified test, Holm–Tarone), the rule of
`alk.stats.gate_rule`, what the test could have seen (`alk.stats.gate_power`), Newcombe's
interval and a bootstrap of the median (`alk.stats.two_runs`), and returns a frozen
`Comparison` (JSON through `msgspec.to_builtins`). Every difference is B − A: negative is worse.

The rule that names each scenario's change (docs/compare.md says why):

- **regressed**: Fisher's exact test, one-sided (B passes less often), rejects in the
  regression family by Holm–Tarone's step-down at family-wise level α (0.05 by default). The
  family is every scenario both runs scored, and, when at least two of them have margins that
  admit more than one table, the lane test: the exact stratified test of B's passed counts
  summed over the scenarios. A scenario whose margins cannot reach a step's level (20/20 in
  both runs can reach none) is not counted at that step, and so spends no error.
- **improved**: the same, one-sided the other way (B passes more often), in a family of its
  own at level α: each kind of claim keeps its family-wise error at α.
- **unchanged**: neither, no void repeat in either run, and the 95% Newcombe interval of B − A
  lies within ± the equivalence margin δ (0.1 by default: ten points of pass rate).
- **inconclusive**: anything else. Its reason says what the test could not see: the smallest
  drop from A's observed rate that the scenario's test detects with 80% power at its repeats
  and its share of α (exact binomial enumeration); a smaller drop could go unseen.

The run's change: regressed when a scenario regressed or the lane test says B is worse (with
the reason: a regression spread thin over many scenarios); else improved likewise; else
unchanged if every compared scenario is; else inconclusive. The pooled difference (every
scored repeat as one sample) is a summary beside it, never the verdict.

The gate (`regression_gate`, `alk compare --fail-on-regression`): FAIL (1) when the run
regressed; else VOID (3) when B scored no repeat of a scenario, or has void repeats in a
scenario A scored with none: a void may hide the very regression; else PASS (0).

The verdict is made here alone: `alk.report.compare_view` and `alk.report.html.compare_page`
draw a `Comparison`.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from alk.errors import UsageError
from alk.estimate import Estimate
from alk.records import ExitCode, RepeatResult
from alk.result.document import RunDocument, ScenarioResult
from alk.stats.distances import js_distance
from alk.stats.gate_power import (
    detectable_drop,
    lane_detectable_drop,
    repeats_for_power,
)
from alk.stats.gate_rule import Change, LaneTest, Verdict, judge
from alk.stats.sequential import Ledger
from alk.stats.two_runs import (
    MARGIN,
    fisher_exact,
    median_difference,
    newcombe_interval,
    repeats_to_settle,
)

__all__ = ["Change", "Comparison", "LaneTest", "Looks", "RunSide", "ScenarioComparison",
           "Side", "compare_runs", "regression_gate", "with_sequence"]

ALPHA = 0.05
DROP = 0.2  # the drop "repeats for power" is quoted for: twenty points


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
    p: float | None  # Fisher's exact, one-sided: B passes less often
    p_better: float | None  # one-sided the other way
    level: float | None  # the share of α p was held to (None: its margins reach none)
    level_better: float | None
    change: Change
    reason: str  # why the rule gave this change, in words
    trajectory_distance: float | None  # Jensen–Shannon, base 2, over trajectory signatures
    duration_change: Estimate | None  # median B − A in seconds, bootstrap 95% interval
    repeats_to_settle: int | None  # a run, for an inconclusive scenario to read unchanged
    # The smallest drop from A's rate the test detects with 80% power here (a rate); None:
    # not even a fall to 0, or not computed (a regressed or improved scenario).
    detectable_drop: float | None = None
    repeats_for_drop: int | None = None  # a run, for 80% power on a DROP fall at this share


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
    pooled_p: float | None  # Fisher's exact on the pooled counts, two-sided, unadjusted
    change: Change
    notes: tuple[str, ...]  # what differs between the runs besides the framework's behaviour
    reason: str = ""  # why the run's change, in words
    lane: LaneTest | None = None  # the stratified test, when it joined the families
    lane_drop: float | None = None  # the drop in every scenario it detects, about 80% of the time
    sequence: Looks | None = None  # `--until-decided`: the looks that decided it

    def count(self, change: Change) -> int:
        return sum(1 for s in self.scenarios if s.change is change)


@dataclass(frozen=True, slots=True)
class Looks:
    """The sequential gate's record (`alk compare --until-decided`, alk.stats.sequential)."""

    taken: int
    planned: int
    alpha_spent: float  # by each family, regressions and improvements, so far
    first: int  # repeats a run at the first look
    max_repeats: int
    round_size: int
    boundaries: tuple[float, ...]  # one scenario's share at each look taken
    added_a: int  # repeats the looks ran in A
    added_b: int
    decided_at: tuple[int | None, ...]  # in the scenarios' order: the look (1-based), or None


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
    judged = judge([(x.passed, x.scored, y.passed, y.scored) if x.scored and y.scored else None
                    for x, y in sides], [x.void + y.void for x, y in sides],
                   alpha=alpha, margin=margin)
    scenarios = tuple(
        _scenario(x, y, side_a, side_b, verdict, margin=margin, seed=seed)
        for (x, y), (side_a, side_b), verdict in zip(pairs, sides, judged.scenarios))
    lane_drop = None
    if judged.lane is not None and not judged.lane.regressed:
        scored = [s for s in scenarios if s.a.scored and s.b.scored]
        lane_drop = lane_detectable_drop([s.a.rate or 0.0 for s in scored],
                                         [s.a.scored for s in scored],
                                         [s.b.scored for s in scored], judged.lane.share)
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
        change=judged.change, notes=_notes(a, b), reason=judged.reason, lane=judged.lane,
        lane_drop=lane_drop)


def with_sequence(comparison: Comparison, ledger: Ledger, shared: Sequence[str],
                  added: tuple[int, int]) -> Comparison:
    """The comparison of two runs the sequential gate looked at: each scenario's change is
    the looks' decision (the fixed rule's lane test is no member there: alk.stats.sequential
    says why), with the looks' record."""
    design = ledger.design
    by_id = dict(zip(shared, ledger.decisions))
    scenarios = []
    for scenario in comparison.scenarios:
        decision = by_id[scenario.id]
        if decision.change is Change.INCONCLUSIVE:
            reason = (f"undecided after {ledger.looks_taken} looks; " + scenario.reason
                      if scenario.difference is not None else scenario.reason)
        else:
            reason = decision.reason
        scenarios.append(dataclasses.replace(scenario, change=decision.change, reason=reason))
    changes = [s.change for s in scenarios]
    change = next((c for c in (Change.REGRESSED, Change.IMPROVED) if c in changes),
                  Change.UNCHANGED if all(c is Change.UNCHANGED for c in changes)
                  else Change.INCONCLUSIVE)
    counts = {c: changes.count(c) for c in Change if changes.count(c)}
    reason = (f"after {ledger.looks_taken} of {len(design.looks())} looks: "
              + ", ".join(f"{n} {c.value}" for c, n in counts.items()))
    looks = Looks(ledger.looks_taken, len(design.looks()), ledger.spent, design.first,
                  design.max_repeats, design.round_size,
                  tuple(design.boundary(j) for j in range(ledger.looks_taken)), *added,
                  tuple(None if d.look is None else d.look + 1 for d in ledger.decisions))
    return dataclasses.replace(comparison, scenarios=tuple(scenarios), change=change,
                               reason=reason, lane=None, lane_drop=None, sequence=looks)


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
              verdict: Verdict, *, margin: float, seed: int) -> ScenarioComparison:
    scored_a = [r for r in a.repeats if r.scored]
    scored_b = [r for r in b.repeats if r.scored]
    change, reason = verdict.change, verdict.reason
    settle = drop = for_drop = None
    if verdict.difference is None:
        missing = " and ".join(name for name, side in (("A", side_a), ("B", side_b))
                               if not side.scored)
        reason = f"no scored repeat in {missing}: all void"
    elif change is Change.INCONCLUSIVE and verdict.share is not None:
        rate_a = side_a.rate or 0.0
        drop = detectable_drop(rate_a, side_a.scored, side_b.scored, verdict.share)
        reason = f"{_unseen(drop, rate_a, side_b.scored)}; {reason}"
        if rate_a >= DROP and (drop is None or drop > DROP):
            for_drop = repeats_for_power(rate_a, DROP, verdict.share, start=side_b.scored)
        if not side_a.void + side_b.void:
            settle = repeats_to_settle(rate_a, side_b.rate or 0.0, margin)
    signatures_a, signatures_b = _signatures(scored_a), _signatures(scored_b)
    distance = None
    if signatures_a and signatures_b:
        keys = sorted(signatures_a.keys() | signatures_b.keys())
        distance = js_distance([signatures_a[k] for k in keys], [signatures_b[k] for k in keys])
    durations = None
    if len(scored_a) >= 2 and len(scored_b) >= 2:
        durations = median_difference([r.duration_s for r in scored_a],
                                      [r.duration_s for r in scored_b], seed=seed)
    return ScenarioComparison(a.id, side_a, side_b, verdict.difference, verdict.p_worse,
                              verdict.p_better, verdict.level_worse, verdict.level_better,
                              change, reason, distance, durations, settle, drop, for_drop)


def _unseen(drop: float | None, rate_a: float, repeats: int) -> str:
    """What an inconclusive scenario could not see, in points from A's rate."""
    if rate_a == 0:
        return "A never passed here: there is no drop to see"
    if drop is None:
        return (f"even a fall from {rate_a * 100:.0f}% to 0 could go unseen here at "
                f"{repeats} repeats")
    return (f"a drop of up to {math.ceil(drop * 100 - 1e-9):.0f} points could go unseen here "
            f"at {repeats} repeats")


def _signatures(repeats: Sequence[RepeatResult]) -> Counter[str]:
    """Repeats by tool trajectory, keyed as alk.stats.summary keys them (each step's digest)."""
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


def regression_gate(comparison: Comparison) -> tuple[ExitCode, str]:
    """`alk compare --fail-on-regression`, the gate a CI job reads: FAIL when the run
    regressed; else VOID, with why, when B scored no repeat of some scenario or has void
    repeats in a scenario A ran with none (a gate must never be passed by voiding: a version
    that hangs at import 30% of the time voids the very repeats that would fail); else PASS."""
    if comparison.change is Change.REGRESSED:
        return ExitCode.FAIL, ""
    run_b = comparison.b.run_id
    unscored = [s.id for s in comparison.scenarios if s.b.scored == 0]
    if unscored:
        return ExitCode.VOID, (f"run {run_b} scored no repeat of {', '.join(unscored)}: "
                               "nothing to compare there, so no gate passes; see "
                               f"`alk report {run_b}`")
    voided = [s for s in comparison.scenarios if s.b.void and not s.a.void and s.a.scored]
    if voided:
        named = ", ".join(f"{s.id} ({s.b.void} of {s.b.completed} void)" for s in voided)
        return ExitCode.VOID, (
            f"run {run_b} has void repeats where run {comparison.a.run_id} had none: {named}; "
            "a void repeat may hide a regression, so no gate passes. See why with "
            f"`alk report {run_b}` (a worker that crashes or hangs before it is ready voids a "
            "repeat), fix it or the lane's infrastructure, and run B again")
    return ExitCode.PASS, ""
