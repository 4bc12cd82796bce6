"""The run's result record: what `reports/RUN_ID/result.json` holds (schema `alk.result/3`;
`alk.result/2`, which held `stats.void_rate` as an estimate, is read too).

Frozen types for the run, its gate, each scenario (its statistics and its repeats) and the lane's
aggregate; `build_document`, which makes one from a plan and its execution (pure: alk's own
memory peak is passed in); and one `to_json` / `from_json` pair. Reading and writing the file
is `alk.result.store`'s. Everything that shows a run (the terminal
report, `alk show`, `alk check-worker`, `alk compare`) reads these types, never the raw JSON.

Conversion goes through msgspec, which checks every field's type on the way in and names the
first one that is wrong (`$.scenarios[0].stats.counts.scored`): a hand-edited or truncated file
gets a clear error, not a KeyError in a renderer.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Mapping, Sequence

import msgspec

from alk import __version__
from alk.cost import RunCost, TokenTotals, totals
from alk.errors import AlkError, ResultFormatError
from alk.layout import REPORTS_DIR, RESULT_NAME, run_transcripts
from alk.records import Execution, Plan, Preflight, RepeatResult, Scenario, Verdict
from alk.result.options import Adaptive, StopReason
from alk.result.rule import PassRule
from alk.stats.records import LaneStats, ScenarioStats
from alk.stats.robustness import fault_twins
from alk.stats.stopped_interval import StopRule
from alk.stats.summary import summarize_lane, summarize_scenarios

SCHEMA = "alk.result/3"
# The schemas this alk reads: /2 differs only in how it held `stats.void_rate` (_void_rates_split).
READS = ("alk.result/2", SCHEMA)
# Run statuses: a run is on disk from its start (`running`), and ends `complete` or
# `interrupted` (Ctrl-C, a signal, a full disk; `alk run --resume` goes on with it).
STATUSES = ("running", "complete", "interrupted")


@dataclass(frozen=True, slots=True)
class LaneInfo:
    """The lane as the run loaded it, and the framework its worker reported."""

    name: str
    description: str
    path: str
    framework: str
    requirement: str
    sha256: str = ""
    # Of the worker program's bytes as the run found them: `alk rerun` says when it changed.
    worker_sha256: str = ""


@dataclass(frozen=True, slots=True)
class Settings:
    """What the run was asked for (`repeats` .. `limits`, which decide what it measures) and how
    it ran (`jobs`, `executor`, which never change it)."""

    repeats: int
    timeout_s: float
    seed: int
    scenarios: tuple[str, ...]
    limits: Mapping[str, int]
    jobs: int | None = None
    executor: str = "local"
    adaptive: Adaptive | None = None  # `--repeats auto`: `repeats` is then the maximum
    rule: PassRule = PassRule()  # what sets the exit code (--fail-under); never what is measured
    rerun_of: RerunOf | None = None  # `alk rerun`: the repeat this run reproduces


@dataclass(frozen=True, slots=True)
class RerunOf:
    """The repeat an `alk rerun` reproduces, and what changed since it ran: a rerun of a
    changed worker is a check of a fix, not a reproduction."""

    run_id: str
    scenario: str
    repeat: int
    worker_changed: bool
    lane_changed: bool = False  # run `--anyway`: the lane file too differs from the run's

    def arguments(self) -> str:
        """What `alk rerun` was given: "RUN_ID SCENARIO REPEAT"."""
        return f"{self.run_id} {self.scenario} {self.repeat}"


@dataclass(frozen=True, slots=True)
class Resumption:
    at: str  # ISO 8601, UTC
    done: int  # repeats finished before it


@dataclass(frozen=True, slots=True)
class Gate:
    """The version preflight: `ok` is None when the run was interrupted before the probe
    answered, False when the worker was refused or the run was void before any repeat."""

    ok: bool | None
    cause: str | None
    detail: str
    framework: str | None  # as the worker reported it
    version: str | None


@dataclass(frozen=True, slots=True)
class Identity:
    """A framework and version some worker reported, and in how many repeats."""

    framework: str | None
    version: str | None
    repeats: int


@dataclass(frozen=True, slots=True)
class Paths:
    """Where the run's files are, relative to the folder alk ran in."""

    result: str
    transcripts: str
    workspaces: str | None = None


@dataclass(frozen=True, slots=True)
class ModelTotals:
    """A scenario's model calls as alk's gateway saw them, over the repeats that had one."""

    repeats: int
    calls: int
    retries: int
    tokens: int
    # The provider's own count (proxy, or replayed), None when alk scripts the model.
    cost: TokenTotals | None = None


@dataclass(frozen=True, slots=True)
class ScenarioResult:
    id: str
    # A fully scripted scenario (a fixed model script, no faults) should take one path; turns
    # sampled from weighted choices are meant to vary.
    scripted: bool
    stats: ScenarioStats
    repeats: tuple[RepeatResult, ...]  # in repeat order
    model: ModelTotals | None = None
    # An adaptive run: which rule stopped its sampling (alk.result.options.StopReason), None
    # while it goes on, and in a run of a fixed number of repeats.
    stopped: str | None = None

    @property
    def verdict(self) -> Verdict:
        return self.stats.verdict


@dataclass(frozen=True, slots=True)
class RunDocument:
    """One lane's run. `harness_peak_rss_mb` is alk's own footprint: a worker's output must
    never make it grow (docs/security.md)."""

    schema: str
    run_id: str
    status: str
    alk_version: str
    started_at: str
    finished_at: str | None
    lane: LaneInfo
    settings: Settings
    resumed: tuple[Resumption, ...]
    gate: Gate
    # Every framework and version a worker reported: the probe's and each attempt's.
    identities: tuple[Identity, ...]
    harness_peak_rss_mb: float
    paths: Paths
    scenarios: tuple[ScenarioResult, ...]
    aggregate: LaneStats
    # A proxy or replay run's provider tokens and budget; None for a script (and before alk
    # counted them).
    cost: RunCost | None = None

    def scenario(self, scenario_id: str) -> ScenarioResult | None:
        return next((s for s in self.scenarios if s.id == scenario_id), None)


@dataclass(frozen=True, slots=True)
class CutShort:
    """A repeat an interrupt ended before it finished: never scored, and not in the document;
    its transcript is kept. What `alk show` finds in its place."""

    scenario: str
    repeat: int
    detail: str
    transcript: str


def to_json(document: RunDocument) -> dict[str, Any]:
    """The document as JSON values (dicts, lists, strings, numbers), in field order."""
    return msgspec.to_builtins(document)


def from_json(value: Any, source: str = "result document") -> RunDocument:
    """The typed document from parsed JSON; `source` (a path, say) begins every error."""
    schema = value.get("schema") if isinstance(value, dict) else None
    if schema not in READS:
        readable = " or ".join(map(repr, READS))
        raise ResultFormatError(f"{source}: schema {schema!r} is not {readable}; this alk "
                                "cannot read it (a run written by another alk version: "
                                "read it with that version, or run the lane again)")
    try:
        # An older document is read into today's shape, and says so.
        current = value if schema == SCHEMA else {**_void_rates_split(value), "schema": SCHEMA}
        document = msgspec.convert(current, RunDocument)
    except msgspec.ValidationError as exc:
        raise ResultFormatError(f"{source}: {exc}") from None
    try:
        document.settings.rule.check()
    except AlkError as exc:
        raise ResultFormatError(f"{source}: $.settings.rule: {exc}") from None
    return document


def _void_rates_split(value: dict[str, Any]) -> dict[str, Any]:
    """An alk.result/2 document: before `void_rate` was a float beside `void_ci` (as `pass_rate`
    is beside `ci`) it held it as an estimate, {"value", "low", "high"}: read as the two fields.
    Anything else is left for msgspec to judge."""
    def split(stats: Any) -> Any:
        if not isinstance(stats, dict) or "void_ci" in stats:
            return stats
        old = stats.get("void_rate")
        if isinstance(old, dict) and set(old) == {"value", "low", "high"}:
            return {**stats, "void_rate": old["value"], "void_ci": [old["low"], old["high"]]}
        if old is None and "void_rate" in stats:
            return {**stats, "void_ci": None}
        return stats

    scenarios = value.get("scenarios")
    changed = dict(value)
    if "aggregate" in value:
        changed["aggregate"] = split(value["aggregate"])
    if isinstance(scenarios, list):
        changed["scenarios"] = [dict(s, stats=split(s.get("stats"))) if isinstance(s, dict)
                                and "stats" in s else s for s in scenarios]
    return changed


def build_document(plan: Plan, execution: Execution, *, status: str, started_at: datetime,
                   finished_at: datetime | None, harness_peak_rss_mb: float,
                   resumed: Sequence[Resumption] = (), jobs: int | None = None,
                   executor: str = "local", adaptive: Adaptive | None = None,
                   rule: PassRule = PassRule(), rerun_of: RerunOf | None = None) -> RunDocument:
    """The record of a plan's execution so far. `resumed`: when and after how many finished
    repeats the run was resumed; `jobs` and `executor`: how it ran, and `rule`: what sets its
    exit code, which never change what it measured."""
    if status not in STATUSES:
        raise ValueError(f"status {status!r} is not one of {STATUSES}")
    lane = plan.lane
    by_scenario: dict[str, list[RepeatResult]] = {s.id: [] for s in plan.scenarios}
    # In repeat order, however the repeats finished (at once, or some before a resume).
    place = {scenario.id: index for index, scenario in enumerate(plan.scenarios)}
    ordered = sorted(execution.repeats, key=lambda r: (r.repeat, place.get(r.scenario, 0)))
    for result in ordered:
        by_scenario[result.scenario].append(result)
    stopped = execution.stopped
    # A scenario an adaptive run settled asked for the repeats it ran, not the maximum.
    requested = {sid: plan.repeats if stopped.get(sid) in (None, StopReason.INTERRUPTED)
                 else len(repeats) for sid, repeats in by_scenario.items()}
    # The scenarios the lane injures, each with its unfaulted twin: fault robustness pairs them.
    faulted = fault_twins(plan.scenarios)
    # An adaptive run's stop rule leaves Wilson's interval short of 95%: Clopper–Pearson's.
    # A sampled one's (stopped by the width rule or the maximum): exact over its stopping points.
    exact = set(by_scenario) if adaptive is not None else ()
    stopped_rule = {} if adaptive is None else {
        scenario.id: StopRule(adaptive.round_size, adaptive.ci_width, adaptive.max_repeats)
        for scenario in plan.scenarios if scenario.sampled}
    stats = summarize_scenarios(by_scenario, requested, faulted=faulted, exact=exact,
                                stopped=stopped_rule, seed=plan.seed)
    scenarios = tuple(_scenario(scenario, by_scenario[scenario.id], one, stopped.get(scenario.id))
                      for scenario, one in zip(plan.scenarios, stats))
    return RunDocument(
        schema=SCHEMA, run_id=plan.run_id, status=status, alk_version=__version__,
        started_at=started_at.isoformat(timespec="seconds"),
        finished_at=finished_at.isoformat(timespec="seconds") if finished_at else None,
        lane=LaneInfo(name=lane.name, description=lane.description, path=str(lane.path),
                      framework=lane.framework, requirement=lane.requirement,
                      sha256=lane.sha256, worker_sha256=lane.worker_sha256),
        settings=Settings(repeats=plan.repeats, timeout_s=plan.timeout_s, seed=plan.seed,
                          scenarios=tuple(s.id for s in plan.scenarios),
                          limits=plan.limits.applied(), jobs=jobs, executor=executor,
                          adaptive=adaptive, rule=rule, rerun_of=rerun_of),
        resumed=tuple(resumed),
        gate=_gate(execution),
        identities=_identities(execution.preflight, ordered),
        harness_peak_rss_mb=round(harness_peak_rss_mb, 1),
        paths=Paths(result=str(Path(REPORTS_DIR) / plan.run_id / RESULT_NAME),
                    transcripts=str(run_transcripts(plan.run_id)),
                    workspaces=str(execution.workspaces) if execution.workspaces else None),
        scenarios=scenarios,
        aggregate=summarize_lane([s.stats for s in scenarios], seed=plan.seed),
        cost=_run_cost(plan, execution),
    )


def _scenario(scenario: Scenario, repeats: list[RepeatResult], stats: ScenarioStats,
              stopped: str | None) -> ScenarioResult:
    # A fully scripted scenario (a fixed model script, no faults) should take one path; turns
    # sampled from weighted choices are meant to vary.
    scripted = (bool(scenario.script) and not scenario.faults and not scenario.wire_faults
                and scenario.kill_at is None
                and not scenario.sampled)
    return ScenarioResult(
        id=scenario.id, scripted=scripted,
        stats=stats,
        # A repeat's event path (up to 8 KiB of steps) is in its journal and its statistics,
        # not in the document: 100,000 repeats would make it gigabytes.
        repeats=tuple(replace(r, path=()) for r in repeats),
        model=_model_totals(repeats), stopped=stopped)


def _gate(execution: Execution) -> Gate:
    preflight = execution.preflight
    framework = preflight.framework if preflight else None
    version = preflight.version if preflight else None
    if execution.void is not None:
        return Gate(False, execution.void.cause, execution.void.detail, framework, version)
    if preflight is None:
        return Gate(None, None, "", None, None)
    return Gate(preflight.ok, preflight.cause, preflight.detail, framework, version)


def _identities(probe: Preflight | None, repeats: list[RepeatResult]) -> tuple[Identity, ...]:
    counts: dict[tuple[str | None, str | None], int] = {}
    if probe is not None and (probe.framework or probe.version):
        counts[(probe.framework, probe.version)] = 0
    for result in repeats:
        for identity in dict.fromkeys(result.identities):
            counts[identity] = counts.get(identity, 0) + 1
    return tuple(Identity(f, v, n) for (f, v), n in counts.items())


def _model_totals(results: list[RepeatResult]) -> ModelTotals | None:
    """A scenario's model calls as alk's gateway saw them, over its repeats (None without
    one): what the report shows beside the verdict."""
    seen = [r.model for r in results if r.model is not None]
    if not seen:
        return None
    return ModelTotals(repeats=len(seen), calls=sum(m["calls"] for m in seen),
                       retries=sum(m["retries"] for m in seen),
                       tokens=sum(m["prompt_tokens"] + m["completion_tokens"] for m in seen),
                       cost=totals(seen))


def _run_cost(plan: Plan, execution: Execution) -> RunCost | None:
    """The run's provider tokens over every repeat, and its budget (None for a script)."""
    model = plan.lane.model
    if model is None or model.mode not in ("proxy", "replay"):
        return None
    budget = model.max_tokens
    return RunCost(totals=totals(r.model for r in execution.repeats),
                   max_tokens_run=budget.run if budget else None,
                   max_tokens_repeat=budget.repeat if budget else None,
                   stopped=execution.budget_spent)
