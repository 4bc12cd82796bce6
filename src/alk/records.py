"""The records that flow through alk: lane → plan → observation → attribution → repeat result.

Every record is a small frozen dataclass. Mappings inside them come from parsed JSON or TOML and
are never mutated after construction."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum, StrEnum
from pathlib import Path
from typing import Any, Mapping

from alk.served_model import ModelSeen, ModelSetup, WireFault
from alk.served_tools import ServedTool, ToolFault


class Outcome(StrEnum):
    """Exactly one per repeat. `lane_infra` voids the repeat; the other three are scored."""

    PASS = "pass"
    LANE_INFRA = "lane_infra"
    FRAMEWORK_RUNTIME = "framework_runtime"
    AGENT = "agent"


class Verdict(StrEnum):
    """Per scenario: what its scored repeats add up to."""

    PASS = "pass"
    FAIL = "fail"
    FLAKY = "flaky"
    VOID = "void"


class ExitCode(IntEnum):
    """What `alk` exits with; also `RunResult.exit_code` in the Python API."""

    PASS = 0  # every repeat of every scenario passed
    FAIL = 1  # a scenario failed or was flaky
    USAGE = 2  # a usage or lane error: nothing ran
    VOID = 3  # nothing failed, but something could not be scored
    INTERRUPTED = 130


# ---------------------------------------------------------------------------------------------
# Lane


@dataclass(frozen=True, slots=True)
class Limits:
    """Resource limits in force for a repeat (see `alk.limits`); None means not limited."""

    memory_mb: int | None = 8192
    cpu_s: int | None = None
    max_processes: int | None = None
    max_open_files: int | None = 1024
    max_file_mb: int | None = 1024
    disk_mb: int | None = 4096

    def applied(self) -> dict[str, int]:
        return {n: v for n in self.__dataclass_fields__ if (v := getattr(self, n)) is not None}


@dataclass(frozen=True, slots=True)
class FileExpectation:
    """A workspace file the harness reads after the run (path relative to the workspace)."""

    path: str
    exists: bool | None = None
    json_length: int | None = None
    json_subset: Any = None


@dataclass(frozen=True, slots=True)
class Expectations:
    """What the harness checks itself after a clean exit; every field is optional, all must hold."""

    stop_reason: str | None = None
    output_contains: str | None = None
    output_equals: str | None = None
    output_matches: str | None = None
    end_state: Mapping[str, Any] | None = None
    tool_calls: Mapping[str, int] | None = None
    files: tuple[FileExpectation, ...] = ()
    script_consumed: bool | None = None  # every scripted turn was used (model/turn events)
    model_calls: tuple[int, int] | None = None  # (min, max) calls the gateway served


@dataclass(frozen=True, slots=True)
class Fault:
    """A fault the worker must inject (and report) at `point`, on its `occurrence`-th pass."""

    point: str
    occurrence: int = 1
    error: str = ""
    retryable: bool = False


@dataclass(frozen=True, slots=True)
class KillAt:
    """When the harness sees this worker event for the `occurrence`-th time, it SIGKILLs the
    worker and starts it again in the same workspace with `"resume": true`."""

    channel: str
    type: str
    name: str | None = None
    occurrence: int = 1


@dataclass(frozen=True, slots=True)
class Scenario:
    id: str
    task: str
    input: Mapping[str, Any] = field(default_factory=dict)
    expect: Expectations = field(default_factory=Expectations)
    script: tuple[Mapping[str, Any], ...] = ()  # the scripted model's turns
    faults: tuple[Fault, ...] = ()
    wire_faults: tuple[WireFault, ...] = ()  # injected by the gateway
    tool_faults: tuple[ToolFault, ...] = ()  # injected by alk's tools (`[[tools]]`)
    kill_at: KillAt | None = None
    max_attempts: int = 1
    baseline: str | None = None  # the unfaulted twin fault robustness pairs it with

    @property
    def sampled(self) -> bool:
        """Its scripted model draws turns from weighted choices: its repeats are meant to vary."""
        return any("choices" in turn for turn in self.script)


# The interpreter alk runs under, where a lane's command names it (`command = ["{python}", ...]`).
PYTHON_PLACEHOLDER = "{python}"


@dataclass(frozen=True, slots=True)
class SharedScenarios:
    """Where a lane that names a scenario file (`scenarios_from`) took its scenarios: every one
    from that file (or those files) but those the lane gives itself or leaves out
    (alk.lane.include)."""

    path: Path  # the scenario file (the first, when the lane names a list)
    replaced: tuple[str, ...] = ()  # the file's ids the lane gives in its own [[scenarios]]
    added: tuple[str, ...] = ()  # ids only the lane has
    skipped: tuple[str, ...] = ()  # the file's ids the lane leaves out (skip_scenarios)
    more: tuple[Path, ...] = ()  # the list's other scenario files, in its order

    @property
    def paths(self) -> tuple[Path, ...]:
        """Every scenario file the lane names, in order."""
        return (self.path, *self.more)

    def own(self, scenario_id: str) -> bool:
        """The scenario is written in the lane file, not taken from the shared one."""
        return scenario_id in self.replaced or scenario_id in self.added


@dataclass(frozen=True, slots=True)
class Lane:
    """A validated lane file. `root` is the folder relative command paths are resolved from."""

    name: str
    description: str
    framework: str
    requirement: str
    command: tuple[str, ...]
    required_env: tuple[str, ...]
    timeout_s: float
    repeats: int
    scenarios: tuple[Scenario, ...]
    path: Path
    root: Path
    transcript_cap_bytes: int
    limits: Limits = field(default_factory=Limits)
    network: str | None = None  # "none" or "host"; None: the strongest the machine offers
    filesystem: str | None = None  # "sandbox" or "workspace"; None: likewise
    install: str = ""  # the command that installs the framework, quoted when it is missing
    model: ModelSetup | None = None  # alk serves the model (None: the worker brings its own)
    tools: tuple[ServedTool, ...] = ()  # alk serves these over MCP (`alk.gateway.tools`)
    # At most this many repeats at once, whatever --jobs says (a framework sharing a port, a cache).
    max_parallel: int | None = None
    # Fork every repeat from one prepared process (alk.runner.warm; docs/security.md).
    warm: bool = False
    # Of the lane file's bytes as loaded, and its scenario file's ("" for a lane built in code).
    sha256: str = ""
    worker_sha256: str = ""  # of the files its command names (alk.lane.load.worker_digest)
    shared: SharedScenarios | None = None  # its scenario file, if it names one

    @property
    def secret_names(self) -> tuple[str, ...]:
        """The variables whose values are redacted everywhere: those that cross to the
        worker, and the proxy's upstream key, alk's own secret."""
        key = (self.model.key_env,) if self.model is not None and self.model.key_env else ()
        return (*self.required_env, *key)


# ---------------------------------------------------------------------------------------------
# Plan


@dataclass(frozen=True, slots=True)
class RepeatSpec:
    """One repeat to run: a scenario, its 1-based repeat number and the seed handed to the worker."""

    scenario: Scenario
    repeat: int
    seed: int


@dataclass(frozen=True, slots=True)
class Plan:
    run_id: str
    lane: Lane
    scenarios: tuple[Scenario, ...]
    repeats: int
    seed: int
    timeout_s: float
    items: tuple[RepeatSpec, ...]
    limits: Limits = field(default_factory=Limits)
    # `alk rerun`: the run whose repeat this plan runs again (its start message names that run).
    reproduces: str | None = None


# ---------------------------------------------------------------------------------------------
# What the runner observed


@dataclass(frozen=True, slots=True)
class Preflight:
    """The harness's verdict on a worker's `framework_ready`."""

    ok: bool
    framework: str | None
    version: str | None
    cause: str | None = None
    detail: str = ""


@dataclass(frozen=True, slots=True)
class Violation:
    """A line of the worker's stdout that broke protocol v1; recorded and counted, never obeyed."""

    kind: str
    line: int
    detail: str


@dataclass(frozen=True, slots=True)
class Observation:
    """Everything the runner saw of one worker process, in bounded size."""

    spawned: bool
    spawn_error: str | None = None
    containment: str | None = None  # how the worker was contained (runner.isolation)
    network: str | None = None  # what it could reach: "none" or "host"
    filesystem: str | None = None  # what it could write: "sandbox" or "workspace"
    ready: Mapping[str, Any] | None = None
    preflight: Preflight | None = None
    started: bool = False
    exit_code: int | None = None
    signal: int | None = None
    timed_out: bool = False
    duration_s: float = 0.0
    cpu_s: float | None = None
    peak_rss_mb: float | None = None
    peak_tmpfs_mb: float | None = None  # held in the sandbox's private /tmp and /dev/shm
    result: Mapping[str, Any] | None = None
    bad_result: str | None = None
    tool_calls: Mapping[str, int] = field(default_factory=dict)
    uncounted_tool_calls: int = 0
    trajectory: tuple[str, ...] = ()
    violations: tuple[Violation, ...] = ()
    violation_count: int = 0
    stderr_tail: str = ""
    harness_error: str | None = None
    limits: Mapping[str, int] = field(default_factory=dict)  # resource limits in force
    limits_hit: tuple[str, ...] = ()  # limits the kernel reports as reached (pids.max)
    faults_fired: frozenset[tuple[str, int]] = frozenset()  # (point, occurrence) reported
    kill_fired: bool = False  # the scenario's kill_at event came and alk killed the worker
    path_hash: str = ""  # sha256 of the normalized event path (runner.protocol)
    model_turns: int = 0  # scripted model turns the worker reported consuming
    script_exhausted: tuple[int, int] | None = None  # the worker's first (turn asked, script turns)
    path: tuple[str, ...] = ()  # its first steps, "channel/type name@digest"
    trajectory_hash: str = ""  # sha256 of every tool result step, kept or not
    attempts: int = 1
    identities: tuple[tuple[str | None, str | None], ...] = ()  # each attempt's (fw, version)
    faults_missing: tuple[str, ...] = ()  # declared faults never reported (set by the executor)
    kill_missing: bool = False  # a declared kill_at that never came (set by the executor)
    model: ModelSeen | None = None  # what the gateway saw, when alk served the model


@dataclass(frozen=True, slots=True)
class Check:
    """One expectation the harness checked: its name, whether it held, and both values."""

    name: str
    ok: bool
    expected: Any
    actual: Any


@dataclass(frozen=True, slots=True)
class Attribution:
    outcome: Outcome
    cause: str
    detail: str


@dataclass(frozen=True, slots=True)
class RepeatResult:
    """One repeat as stored in the result document."""

    scenario: str
    repeat: int
    seed: int
    outcome: Outcome
    cause: str
    detail: str
    duration_s: float
    exit_code: int | None
    signal: int | None
    timed_out: bool
    peak_rss_mb: float | None
    cpu_s: float | None
    containment: str | None
    network: str | None
    filesystem: str | None
    attempts: int
    path_hash: str
    violations: int
    trajectory: tuple[str, ...]  # empty when the run's budget for steps was spent
    claimed: Any
    transcript: str
    sha256: str
    path: tuple[str, ...] = ()  # the normalized event path's steps; empty in result.json
    trajectory_hash: str = ""
    peak_tmpfs_mb: float | None = None
    identities: tuple[tuple[str | None, str | None], ...] = ()  # each attempt's (fw, version)
    model: Mapping[str, Any] | None = None  # ModelSeen.summary(); None without a [model]

    @classmethod
    def from_observation(cls, item: RepeatSpec, obs: Observation, verdict: Attribution, *,
                         detail: str, claimed: Any, trajectory: tuple[str, ...],
                         path: tuple[str, ...], transcript: str, sha256: str) -> RepeatResult:
        """A repeat's record from what alk observed of it and the verdict on it: `detail` is
        the verdict's, cut to size; `trajectory` and `path` are the steps the run's budget
        kept (their digests stand for them past it)."""
        return cls(
            scenario=item.scenario.id, repeat=item.repeat, seed=item.seed,
            outcome=verdict.outcome, cause=verdict.cause, detail=detail,
            duration_s=obs.duration_s, exit_code=obs.exit_code, signal=obs.signal,
            timed_out=obs.timed_out, peak_rss_mb=obs.peak_rss_mb, cpu_s=obs.cpu_s,
            peak_tmpfs_mb=obs.peak_tmpfs_mb, containment=obs.containment, network=obs.network,
            filesystem=obs.filesystem, attempts=obs.attempts, identities=obs.identities,
            path_hash=obs.path_hash, path=path, violations=obs.violation_count,
            trajectory=trajectory, trajectory_hash=obs.trajectory_hash, claimed=claimed,
            transcript=transcript, sha256=sha256,
            model=obs.model.summary() if obs.model is not None else None)

    @classmethod
    def void(cls, item: RepeatSpec, verdict: Attribution, transcript: str) -> RepeatResult:
        """The record of a repeat alk observed nothing of (its task failed on a cluster)."""
        return cls(
            scenario=item.scenario.id, repeat=item.repeat, seed=item.seed,
            outcome=verdict.outcome, cause=verdict.cause, detail=verdict.detail, duration_s=0.0,
            exit_code=None, signal=None, timed_out=False, peak_rss_mb=None, cpu_s=None,
            containment=None, network=None, filesystem=None, attempts=1, path_hash="",
            violations=0, trajectory=(), claimed=None, transcript=transcript, sha256="")

    @property
    def scored(self) -> bool:
        """Void (`lane_infra`) repeats never enter a rate; framework crashes count as failures."""
        return self.outcome is not Outcome.LANE_INFRA

    @property
    def passed(self) -> bool:
        return self.outcome is Outcome.PASS


@dataclass
class Execution:
    """What a plan's execution produced; filled in as it runs (the one record that is not
    frozen). `void` is set when the whole run could not run."""

    preflight: Preflight | None = None
    void: Attribution | None = None
    repeats: list[RepeatResult] = field(default_factory=list)
    interrupted: bool = False
    budget_spent: str | None = None  # why alk started no more repeats: the run's token budget
    workspaces: Path | None = None  # kept workspaces (--keep-workspaces), else None
    jobs: int | None = None  # repeats run at once on this machine (None: elsewhere, or unknown)
    # Adaptive runs: scenario -> why its sampling stopped (alk.result.options.StopReason).
    stopped: dict[str, str] = field(default_factory=dict)
