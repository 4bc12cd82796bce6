"""The run's result record: what `reports/RUN_ID/result.json` holds (schema `alk.result/2`).

Frozen types for the run, its gate, each scenario (its statistics and its repeats) and the lane's
aggregate, with one `to_json` / `from_json` pair. Everything that shows a run (the terminal
report, `alk show`, `alk check-worker`, `alk compare`) reads these types, never the raw JSON.

Conversion goes through msgspec, which checks every field's type on the way in and names the
first one that is wrong (`$.scenarios[0].stats.counts.scored`): a hand-edited or truncated file
gets a clear error, not a KeyError in a renderer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import msgspec

from alk.records import RepeatResult, Verdict
from alk.stats import LaneStats, ScenarioStats

SCHEMA = "alk.result/2"
# Run statuses: a run is on disk from its start (`running`), and ends `complete` or
# `interrupted` (Ctrl-C, a signal, a full disk; `alk run --resume` goes on with it).
STATUSES = ("running", "complete", "interrupted")


class ResultFormatError(ValueError):
    """A result document that is not one this alk can read: another schema, or a field of the
    wrong type. The message names the field."""


@dataclass(frozen=True, slots=True)
class LaneInfo:
    """The lane as the run loaded it, and the framework its worker reported."""

    name: str
    description: str
    path: str
    framework: str
    requirement: str
    sha256: str = ""


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


@dataclass(frozen=True, slots=True)
class ScenarioResult:
    id: str
    # A fully scripted scenario (a fixed model script, no faults) should take one path; turns
    # sampled from weighted choices are meant to vary.
    scripted: bool
    stats: ScenarioStats
    repeats: tuple[RepeatResult, ...]  # in repeat order
    model: ModelTotals | None = None

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

    def scenario(self, scenario_id: str) -> ScenarioResult | None:
        return next((s for s in self.scenarios if s.id == scenario_id), None)


def to_json(document: RunDocument) -> dict[str, Any]:
    """The document as JSON values (dicts, lists, strings, numbers), in field order."""
    return msgspec.to_builtins(document)


def from_json(value: Any, source: str = "result document") -> RunDocument:
    """The typed document from parsed JSON; `source` (a path, say) begins every error."""
    schema = value.get("schema") if isinstance(value, dict) else None
    if schema != SCHEMA:
        raise ResultFormatError(f"{source}: schema {schema!r} is not {SCHEMA!r}; this alk "
                                "cannot read it (a run written by another alk version: "
                                "read it with that version, or run the lane again)")
    try:
        return msgspec.convert(value, RunDocument)
    except msgspec.ValidationError as exc:
        raise ResultFormatError(f"{source}: {exc}") from None
