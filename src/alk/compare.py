"""Two runs of the same scenarios side by side (`alk compare RUN_A RUN_B`): did B regress?

`compare_runs` matches two result records scenario by scenario, with the statistics of
`alk.stats.two_runs` (Newcombe's interval, Fisher's exact test, Holm's correction, a bootstrap of
the median), and returns a frozen `Comparison` (JSON through `msgspec.to_builtins`). Every
difference is B − A: negative is worse in B.

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

The verdict is made here alone: `alk.report.compare_view` and `alk.report.html.compare_page`
draw a `Comparison`; `alk compare --fail-on-regression` exits on `regression_gate`.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from alk.errors import UsageError
from alk.estimate import Estimate
from alk.records import ExitCode, RepeatResult
from alk.result.document import RunDocument, ScenarioResult
from alk.stats.distances import js_distance
from alk.stats.two_runs import (
    MARGIN,
    fisher_exact,
    holm,
    median_difference,
    newcombe_interval,
    repeats_to_settle,
)

ALPHA = 0.05


class Change(StrEnum):
    REGRESSED = "regressed"
    IMPROVED = "improved"
    UNCHANGED = "unchanged"
    INCONCLUSIVE = "inconclusive"


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
    """`alk compare --fail-on-regression`, the gate a CI job reads: FAIL when a scenario
    regressed; else VOID when B scored no repeat of some scenario, with why (a gate must never
    be passed by voiding: a scenario B could not score is no pass); else PASS."""
    if comparison.change is Change.REGRESSED:
        return ExitCode.FAIL, ""
    unscored = [s.id for s in comparison.scenarios if s.b.scored == 0]
    if unscored:
        run_b = comparison.b.run_id
        return ExitCode.VOID, (f"run {run_b} scored no repeat of {', '.join(unscored)}: "
                               "nothing to compare there, so no gate passes; see "
                               f"`alk report {run_b}`")
    return ExitCode.PASS, ""
