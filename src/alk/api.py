"""alk's Python API: load a lane, run it, read a saved run. The CLI is a thin layer over this.

    from alk import api

    lane = api.load_lane("reference")
    run = api.run_lane(lane, repeats=5)
    assert run.exit_code == 0, run.document.scenarios
"""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import json
import os
import platform
import secrets
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Collection, Mapping, Sequence

from alk import __version__
from alk import rerun as reruns
from alk.errors import (
    LaneError,
    ResumeError,
    RunNotFoundError,
    RunWriteError,
    TranscriptError,
    UsageError,
)
from alk.execute.adaptive import Sampling
from alk.execute.engine import Engine
from alk.execute.executor import execute
from alk.files import write_atomically
from alk.lane.find import lane_paths
from alk.lane.load import load_lane
from alk.layout import (
    GROUP_NAME,
    LANES_DIR,
    REPORTS_DIR,
    RESULT_NAME,
    group_of,
    group_path,
    journal_path,
    new_run_id,
    repeat_transcript,
    result_path,
)
from alk.plan import build_plan
from alk.records import (
    Adaptive,
    Execution,
    ExitCode,
    Lane,
    Plan,
    Preflight,
    RepeatResult,
    RepeatSpec,
)
from alk.redaction import Redactor
from alk.report import outputs
from alk.report.outputs import Written
from alk.result.document import CutShort, RerunOf, Resumption, RunDocument, build_document, to_json
from alk.result.journal import Journal, JournalWriter, plan_settings, read_journal
from alk.result.journal import Settings as JournalSettings
from alk.result.rule import PassRule
from alk.result.store import latest_run_id, read_document, write_document
from alk.result.verdict import exit_code, judge
from alk.runner.isolation import Filesystem, Network, detect
from alk.runner.pids_cgroup import parent as pids_cgroup_parent
from alk.runner.procfs import own_peak_rss_mb
from alk.runner.request import Runner
from alk.runner.sandbox import worker_uid
from alk.runner.seccomp import BLOCKED as seccomp_blocked
from alk.runner.seccomp import program as seccomp_program
from alk.runner.seccomp import unavailable_reason as seccomp_unavailable
from alk.transcript.reader import TranscriptPage, read_page, read_transcript

if TYPE_CHECKING:
    from alk.compare import Comparison

__all__ = ["RunResult", "RunsResult", "load_lane", "load_lanes", "list_lanes", "run_lane",
           "run_lanes", "resume_run", "resume", "rerun", "RerunResult", "read_run", "read_runs",
           "runs_json", "list_runs", "RunEntry", "write_reports", "write_compare_page",
           "repeat_entry", "read_repeat_events", "read_repeat_page", "transcript_intact",
           "doctor"]

# While a run goes on, result.json is rewritten after a repeat ends, at most this often (a
# killed run loses at most the repeats of this long); after every repeat would cost a fast lane
# a few percent.
CHECKPOINT_INTERVAL_S = 1.0
# A checkpoint waits at least this many times as long as the last one took.
CHECKPOINT_SHARE = 20


@dataclass(frozen=True)
class RunResult:
    """A finished (or interrupted) run: its redacted result document, where it was written, and
    the exit code the CLI uses."""

    document: RunDocument
    path: Path
    exit_code: ExitCode
    interrupted: bool


def list_lanes(lanes_dir: Path = Path(LANES_DIR)) -> tuple[list[Lane], list[tuple[str, str]]]:
    """Every lane in `lanes_dir`, and (path, message) for each that does not load."""
    if not lanes_dir.is_dir():
        raise LaneError(f"{lanes_dir}: no such folder; run alk from the folder that holds "
                        "lanes/, or pass --dir")
    lanes, errors = [], []
    for path in lane_paths(lanes_dir):
        try:
            lanes.append(load_lane(path))
        except LaneError as exc:
            errors.append((str(path), str(exc)))
    return lanes, errors


def run_lane(lane: Lane, *, repeats: int | None = None, scenarios: Sequence[str] = (),
             seed: int | None = None, timeout_s: float | None = None,
             limits: Mapping[str, int] | None = None,
             out_dir: Path = Path("."), runner: Runner | None = None,
             environ: Mapping[str, str] | None = None, keep_workspaces: bool = False,
             jobs: int = 1, engine: Engine | None = None, run_id: str | None = None,
             adaptive: Adaptive | None = None, rule: PassRule = PassRule(),
             on_plan: Callable[[Plan, Sequence[RepeatResult]], None] | None = None,
             on_start: Callable[[RepeatSpec], None] | None = None,
             on_repeat: Callable[[RepeatResult], None] | None = None) -> RunResult:
    """Runs a lane: `jobs` repeats at once (each its own worker process), on `engine` when
    given (a Dask cluster, say), else in this process's threads. The run is journaled as it
    goes (`alk.result.journal`): `resume_run` continues it if it is killed. With `adaptive`, each
    scenario runs until its verdict is settled (`alk.execute.adaptive`), at most its `max_repeats`.
    `rule` sets the exit code (`alk.result.rule`), never what is measured."""
    environ = os.environ if environ is None else environ
    plan = build_plan(lane, run_id or new_run_id(), repeats=repeats, scenario_ids=scenarios,
                      seed=seed, timeout_s=timeout_s, limits=limits, adaptive=adaptive)
    started_at = datetime.now(timezone.utc)
    with JournalWriter(journal_path(out_dir, plan.run_id),
                       plan_settings(plan, timeout_s=timeout_s, limits=limits or {},
                                     started_at=started_at, adaptive=adaptive,
                                     rule=rule)) as journal:
        return _run_plan(plan, journal, out_dir=out_dir, runner=runner, environ=environ,
                         keep_workspaces=keep_workspaces, jobs=jobs, engine=engine,
                         adaptive=adaptive, rule=rule, started_at=started_at, on_plan=on_plan,
                         on_start=on_start, on_repeat=on_repeat)


def resume_run(run_id: str, *, out_dir: Path = Path("."), runner: Runner | None = None,
               environ: Mapping[str, str] | None = None, keep_workspaces: bool = False,
               jobs: int = 1, engine: Engine | None = None,
               on_plan: Callable[[Plan, Sequence[RepeatResult]], None] | None = None,
               on_start: Callable[[RepeatSpec], None] | None = None,
               on_repeat: Callable[[RepeatResult], None] | None = None) -> RunResult:
    """Continues a run that was interrupted or killed (`kill -9` of alk included): the
    repeats its journal holds are kept as they are, the others run with the seeds they would
    have had. Raises ResumeError when the run is complete, when its lane file changed, or when
    its worker now reports another framework or version; the run is then left as it was.
    Its exit code's rule is the one it began with."""
    environ = os.environ if environ is None else environ
    path = journal_path(out_dir, run_id)
    with JournalWriter(path) as journal:
        # Read under the lock: no other alk is appending now.
        past = read_journal(path)
        settings = past.settings
        if past.ended == "complete":
            raise _complete(run_id)
        if settings.rerun_of:
            raise ResumeError(f"run {run_id} is a rerun of one repeat: run it again with "
                              f"`alk rerun {settings.rerun_of}`")
        lane = load_lane(settings.lane_path)
        if lane.sha256 != settings.lane_sha256:
            raise ResumeError(f"{lane.path}: the lane file changed since run {run_id} began "
                              "(its sha256 differs); resuming would mix two lanes in one "
                              "result: start a new run, or restore the file")
        if lane.model is not None and lane.model.record is not None:
            raise ResumeError(f"{lane.path}: model.record: run {run_id} was recording a "
                              "cassette, which a resumed run would replace with its own part "
                              "alone; start a new run to record one whole")
        adaptive = _adaptive(settings.adaptive)
        rule = PassRule(**settings.rule) if settings.rule else PassRule()
        plan = build_plan(lane, run_id, repeats=settings.repeats,
                          scenario_ids=settings.scenarios, seed=settings.seed,
                          timeout_s=settings.timeout_s, limits=settings.limits,
                          adaptive=adaptive)
        if past.identity is not None and not _to_run(plan, adaptive, past.repeats):
            # Killed after its last repeat, before it said so: written up, nothing run again.
            return _write_up(plan, journal, past, out_dir=out_dir, environ=environ,
                             engine=engine, jobs=jobs, adaptive=adaptive, rule=rule)
        return _run_plan(plan, journal, out_dir=out_dir, runner=runner, environ=environ,
                         keep_workspaces=keep_workspaces, jobs=jobs, engine=engine,
                         adaptive=adaptive, rule=rule,
                         started_at=datetime.fromisoformat(settings.started_at),
                         done=past.repeats, identity=past.identity, resumed=past.resumed,
                         resumed_at=datetime.now(timezone.utc), on_plan=on_plan,
                         on_start=on_start, on_repeat=on_repeat)


@dataclass(frozen=True)
class RerunResult:
    """`alk rerun`: the new run of one repeat (its record says what it reran, and what changed
    since: `settings.rerun_of`), and the repeat as it first ran."""

    run: RunsResult
    original: RepeatResult | CutShort


def rerun(run_id: str, scenario: str, repeat: int, *, out_dir: Path = Path("."),
          runner: Runner | None = None, environ: Mapping[str, str] | None = None,
          anyway: bool = False, reports: bool = True) -> RerunResult:
    """Runs one repeat of a saved run again as it ran (`alk.rerun`), as a run of its own.
    Raises RerunError when the lane file changed since (unless `anyway`), RunNotFoundError
    when there is no such run, scenario or repeat."""
    environ = os.environ if environ is None else environ
    documents = read_runs(run_id, out_dir)
    if len(documents) > 1:
        having = [d.run_id for d in documents if d.scenario(scenario) is not None]
        names = ", ".join(having or [d.run_id for d in documents])
        example = (f", e.g. `alk rerun {having[0]} {scenario} {repeat}`" if having else
                   f"; none of them ran a scenario '{scenario}'")
        raise UsageError(f"run {run_id} ran several lanes: name one ({names}){example}")
    document = documents[0]
    original = repeat_entry(document, scenario, repeat, out_dir)
    journal_file = journal_path(out_dir, document.run_id)
    given = read_journal(journal_file).settings if journal_file.is_file() else None
    lane = load_lane(_lane_of(document, given, out_dir))
    prepared = reruns.prepare(
        document, original, lane, new_run_id(), anyway=anyway,
        timeout_s=given.timeout_s if given else document.settings.timeout_s,
        limits=given.limits if given else document.settings.limits)
    plan = prepared.plan
    started_at = datetime.now(timezone.utc)
    of = prepared.of
    settings = plan_settings(plan, timeout_s=plan.timeout_s, limits=plan.limits.applied(),
                             started_at=started_at,
                             rerun_of=f"{of.run_id} {of.scenario} {of.repeat}")
    with JournalWriter(journal_path(out_dir, plan.run_id), settings) as journal:
        result = _run_plan(plan, journal, out_dir=out_dir, runner=runner, environ=environ,
                           keep_workspaces=False, jobs=1, engine=None, rerun_of=of,
                           started_at=started_at)
    run = _reported(RunsResult(plan.run_id, (result,)), out_dir, reports)
    return RerunResult(run, original)


def _lane_of(document: RunDocument, given: JournalSettings | None, out_dir: Path) -> Path:
    """The run's lane file: as its journal has it (absolute), else as its record names it,
    from the folder alk ran in (`out_dir`) or this one."""
    if given is not None and Path(given.lane_path).is_file():
        return Path(given.lane_path)
    named = Path(document.lane.path)
    for path in (named, out_dir / named):
        if path.is_file():
            return path
    raise LaneError(f"{named}: the lane file of run {document.run_id} is not there (looked "
                    f"from this folder and from {out_dir}): run alk from the folder the run "
                    "ran in, or pass it as --out")


def _to_run(plan: Plan, adaptive: Adaptive | None, done: Sequence[RepeatResult]) -> bool:
    """Has the plan repeats still to run, after those done?"""
    if adaptive is not None:
        return bool(Sampling(plan, adaptive, done).next_round())
    finished = {(result.scenario, result.repeat) for result in done}
    return not all((item.scenario.id, item.repeat) in finished for item in plan.items)


def _complete(run_id: str) -> ResumeError:
    return ResumeError(f"run {run_id} is complete: nothing to resume (`alk report {run_id}` "
                       "shows it)")


def _run_plan(plan: Plan, journal: JournalWriter, *, out_dir: Path, runner: Runner | None,
              environ: Mapping[str, str], keep_workspaces: bool, jobs: int,
              engine: Engine | None, started_at: datetime, adaptive: Adaptive | None = None,
              rule: PassRule = PassRule(), rerun_of: RerunOf | None = None,
              done: Sequence[RepeatResult] = (),
              identity: tuple[str | None, str | None] | None = None,
              resumed: Sequence[Resumption] = (),
              resumed_at: datetime | None = None,
              on_plan: Callable[[Plan, Sequence[RepeatResult]], None] | None = None,
              on_start: Callable[[RepeatSpec], None] | None = None,
              on_repeat: Callable[[RepeatResult], None] | None = None) -> RunResult:
    """Runs a plan whose journal is open: a new run, or (`resumed_at` set) a resumed one,
    which changes nothing on disk until its worker has passed the preflight as before."""
    if on_plan:
        on_plan(plan, done)
    path = result_path(out_dir, plan.run_id)
    lane = plan.lane
    redactor = _redactor(lane, environ)
    executor = engine.name if engine is not None else "local"
    resumed = list(resumed)
    going_on = resumed_at is None  # a resumed run goes on once its probe passed as before

    def document(execution: Execution, status: str, finished_at: datetime | None = None
                 ) -> RunDocument:
        # How many ran at once, as the engine decided (max_parallel, RLIMIT_NPROC), not asked.
        return build_document(plan, execution, status=status, started_at=started_at,
                              finished_at=finished_at, resumed=resumed,
                              jobs=execution.jobs or jobs, executor=executor,
                              adaptive=adaptive, rule=rule, rerun_of=rerun_of,
                              harness_peak_rss_mb=own_peak_rss_mb())

    def checkpoint(execution: Execution) -> None:
        write_document(path, document(execution, "running"), redactor)

    def on_preflight(preflight: Preflight) -> None:
        reported = (preflight.framework, preflight.version)
        if identity is None:
            journal.preflight(preflight)
        elif reported != tuple(identity):
            raise ResumeError(
                f"run {plan.run_id} ran {identity[0]} {identity[1]}; its worker now reports "
                f"{reported[0]} {reported[1]}: resuming would mix two versions in one result; "
                "start a new run, or reinstall the version it began with")
        if resumed_at is not None:
            nonlocal going_on
            going_on = True
            journal.resumed(resumed_at, len(done))
            resumed.append(Resumption(resumed_at.isoformat(timespec="seconds"), len(done)))
            checkpoint(Execution(preflight=preflight, repeats=list(done)))

    if resumed_at is None:
        # A run is on disk from its start: `alk report RUN_ID` works while it goes on.
        checkpoint(Execution())
    next_checkpoint = time.monotonic() + CHECKPOINT_INTERVAL_S

    def after_repeat(result: RepeatResult, execution: Execution) -> None:
        nonlocal next_checkpoint
        if on_repeat:
            on_repeat(result)
        began = time.monotonic()
        if began >= next_checkpoint:
            checkpoint(execution)
            # A document grows with the run (about a second to write at 10,000 repeats): the
            # next waits at least 20 times as long as this one took, so that checkpoints never
            # take more than a twentieth of the run.
            finished = time.monotonic()
            next_checkpoint = finished + max(CHECKPOINT_INTERVAL_S,
                                             CHECKPOINT_SHARE * (finished - began))

    try:
        execution = execute(plan, out_dir, redactor, runner=runner, environ=environ,
                            keep_workspaces=keep_workspaces, jobs=jobs, engine=engine, done=done,
                            adaptive=adaptive,
                            on_preflight=on_preflight, on_start=on_start,
                            # From its record on, the repeat is finished, whatever happens.
                            on_record=journal.repeat, on_repeat=after_repeat)
    except OSError as exc:
        # The journal or the result could not be written (a full disk, say): alk stops as if
        # killed, with every finished repeat in the journal.
        raise RunWriteError(f"{exc.filename or journal.path}: cannot be written "
                            f"({exc.strerror or exc}); the repeats finished so far are in "
                            f"{journal.path}: free the space, then `alk run --resume "
                            f"{group_of(plan.run_id)}`") from None
    if not going_on:
        # The resume never began (its probe was refused or void, or it was interrupted
        # first): the run stays as it was, still to be resumed.
        if execution.interrupted:
            document_before = read_document(out_dir, plan.run_id)
            return RunResult(document_before, path, exit_code(document_before), True)
        why = execution.void.detail if execution.void else "its worker never got ready"
        raise ResumeError(f"run {plan.run_id} cannot go on here: {why}; it is left as it was, "
                          "to be resumed where it can run")
    status = "interrupted" if execution.interrupted else "complete"
    final = document(execution, status, datetime.now(timezone.utc))
    # The verdict is taken before redaction: what is masked for people never changes it.
    code = exit_code(final)
    written = write_document(path, final, redactor)
    journal.end(status)
    return RunResult(written, path, code, execution.interrupted)


def _write_up(plan: Plan, journal: JournalWriter, past: Journal, *, out_dir: Path,
              environ: Mapping[str, str], engine: Engine | None, jobs: int,
              adaptive: Adaptive | None, rule: PassRule) -> RunResult:
    """The result of a run whose every repeat is in its journal, written from it alone."""
    lane = plan.lane
    framework, version = past.identity or (None, None)
    stopped = {}
    if adaptive is not None:
        sampling = Sampling(plan, adaptive, past.repeats)
        sampling.next_round()  # settles every scenario: none has a repeat left to run
        stopped = sampling.stopped
    execution = Execution(preflight=Preflight(True, framework, version),
                          repeats=list(past.repeats), stopped=stopped)
    document = build_document(plan, execution, status="complete",
                              started_at=datetime.fromisoformat(past.settings.started_at),
                              finished_at=datetime.now(timezone.utc), resumed=past.resumed,
                              jobs=jobs, executor=engine.name if engine is not None else "local",
                              adaptive=adaptive, rule=rule, harness_peak_rss_mb=own_peak_rss_mb())
    code = exit_code(document)
    path = result_path(out_dir, plan.run_id)
    written = write_document(path, document, _redactor(lane, environ))
    journal.end("complete")
    return RunResult(written, path, code, False)


def _redactor(lane: Lane, environ: Mapping[str, str]) -> Redactor:
    """The values of the lane's secrets, and of the proxy's upstream key (alk's own secret)."""
    return Redactor(environ[name] for name in lane.secret_names if name in environ)


@dataclass(frozen=True)
class RunsResult:
    """A run of one lane or several (`run_lanes`, `resume`): each lane's result, in order.
    `exit_code` is the worst of theirs: a failure, else a void, else a pass."""

    run_id: str
    runs: tuple[RunResult, ...]
    # report.html, report.md, junit.xml (alk.report.outputs), when they were written
    reports: Written | None = None

    @property
    def interrupted(self) -> bool:
        return any(run.interrupted for run in self.runs)

    @property
    def exit_code(self) -> ExitCode:
        codes = {run.exit_code for run in self.runs}
        for code in (ExitCode.FAIL, ExitCode.VOID):
            if code in codes:
                return code
        return ExitCode.PASS


GROUP_SCHEMA = "alk.group/1"


def load_lanes(names: Sequence[str], lanes_dir: Path = Path(LANES_DIR)) -> list[Lane]:
    """The lanes `--lane` names, in order: names, paths, and patterns such as 'lanes/*.toml'
    (a shell that did not expand one hands it over quoted). Each lane once."""
    paths: list[str | Path] = []
    for name in names:
        if any(char in name for char in "*?["):
            matched = sorted(glob.glob(name))
            if not matched:
                raise LaneError(f"--lane {name!r} matches no file")
            paths += [Path(match) for match in matched]
        else:
            paths.append(name)
    lanes = [load_lane(path, lanes_dir) for path in paths]
    unique = {lane.path.resolve(): lane for lane in lanes}
    names_seen: dict[str, Path] = {}
    for lane in unique.values():
        if lane.name in names_seen:
            raise UsageError(f"{lane.path} and {names_seen[lane.name]} are both lane "
                             f"'{lane.name}': lanes of one run need names of their own")
        names_seen[lane.name] = lane.path
    return list(unique.values())


def run_lanes(lanes: Sequence[Lane], *, repeats: int | None = None,
              scenarios: Sequence[str] = (), seed: int | None = None,
              timeout_s: float | None = None, limits: Mapping[str, int] | None = None,
              out_dir: Path = Path("."), runner: Runner | None = None,
              environ: Mapping[str, str] | None = None, keep_workspaces: bool = False,
              jobs: int = 1, engine: Engine | None = None, adaptive: Adaptive | None = None,
              rule: PassRule = PassRule(), reports: bool = True,
              on_plan: Callable[[Plan, Sequence[RepeatResult]], None] | None = None,
              on_start: Callable[[RepeatSpec], None] | None = None,
              on_repeat: Callable[[RepeatResult], None] | None = None) -> RunsResult:
    """One lane as `run_lane` runs it; several in one run folder, one after another, each with
    its own preflight, the same seed and the same scenarios: lane L of run R is run `R/L`.
    With `reports`, the run's report.html, report.md and junit.xml are written at its end."""
    if len(lanes) == 1:
        result = run_lane(lanes[0], repeats=repeats, scenarios=scenarios, seed=seed,
                          timeout_s=timeout_s, limits=limits, out_dir=out_dir, runner=runner,
                          environ=environ, keep_workspaces=keep_workspaces, jobs=jobs,
                          engine=engine, adaptive=adaptive, rule=rule, on_plan=on_plan,
                          on_start=on_start, on_repeat=on_repeat)
        return _reported(RunsResult(result.document.run_id, (result,)), out_dir, reports)
    run_id = new_run_id()
    seed = secrets.randbelow(2**31) if seed is None else seed
    for lane in lanes:  # a scenario or option no lane can run stops the run before it starts
        build_plan(lane, run_id, repeats=repeats, scenario_ids=scenarios, seed=seed,
                   timeout_s=timeout_s, limits=limits, adaptive=adaptive)
    group = {"schema": GROUP_SCHEMA, "run_id": run_id,
             "lanes": [{"name": lane.name, "path": str(lane.path.resolve())} for lane in lanes],
             "repeats": repeats, "scenarios": list(scenarios), "seed": seed,
             "timeout_s": timeout_s, "limits": dict(limits or {}),
             "adaptive": dataclasses.asdict(adaptive) if adaptive is not None else None,
             "rule": dataclasses.asdict(rule)}
    write_atomically(group_path(out_dir, run_id),
                     (json.dumps(group, indent=1) + "\n").encode())
    return _reported(_run_group(group, out_dir=out_dir, runner=runner, environ=environ,
                                keep_workspaces=keep_workspaces, jobs=jobs, engine=engine,
                                on_plan=on_plan, on_start=on_start, on_repeat=on_repeat),
                     out_dir, reports)


def _reported(result: RunsResult, out_dir: Path, reports: bool) -> RunsResult:
    """The run with its report files written (alk.report.outputs)."""
    if not reports or not result.runs:
        return result
    written = write_reports([run.document for run in result.runs], out_dir)
    return dataclasses.replace(result, reports=written)


def write_reports(documents: Sequence[RunDocument], out_dir: Path = Path(".")) -> Written:
    """A run's report.html, report.md and junit.xml, written (again) from its documents
    (`read_runs`); a file that cannot be made is named in `Written.problems`, never raised."""
    return outputs.write_reports(documents, out_dir)


def write_compare_page(comparison: Comparison, out_dir: Path = Path(".")) -> Written:
    """The `alk compare A B` page, in B's report folder (`compare-A.html`)."""
    return outputs.write_compare_page(comparison, out_dir)


def resume(run_id: str, *, out_dir: Path = Path("."), runner: Runner | None = None,
           environ: Mapping[str, str] | None = None, keep_workspaces: bool = False,
           jobs: int = 1, engine: Engine | None = None, reports: bool = True,
           on_plan: Callable[[Plan, Sequence[RepeatResult]], None] | None = None,
           on_start: Callable[[RepeatSpec], None] | None = None,
           on_repeat: Callable[[RepeatResult], None] | None = None) -> RunsResult:
    """Continues a run of one lane (`resume_run`) or of several: their lanes that finished
    are kept, the one cut short resumes, and those that never began begin, all by the rule
    the run began with."""
    group_file = group_path(out_dir, run_id)
    hooks = dict(runner=runner, environ=environ, keep_workspaces=keep_workspaces, jobs=jobs,
                 engine=engine, on_plan=on_plan, on_start=on_start, on_repeat=on_repeat)
    if not group_file.is_file():
        result = resume_run(run_id, out_dir=out_dir, **hooks)
        return _reported(RunsResult(run_id, (result,)), out_dir, reports)
    return _reported(_run_group(_read_group(group_file), out_dir=out_dir, resuming=True,
                                **hooks), out_dir, reports)


def _run_group(group: Mapping[str, Any], *, out_dir: Path, resuming: bool = False,
               **options: Any) -> RunsResult:
    members = [(entry, f"{group['run_id']}/{entry['name']}") for entry in group["lanes"]]
    ended: dict[str, str | None] = {}  # each lane's journal read once; None: not ended
    for _, member in members:
        path = journal_path(out_dir, member)
        ended[member] = read_journal(path).ended if path.is_file() else None
    if resuming and all(state == "complete" for state in ended.values()):
        raise _complete(group["run_id"])
    results: list[RunResult] = []
    for entry, member in members:
        if ended[member] == "complete":
            document = read_document(out_dir, member)
            results.append(RunResult(document, result_path(out_dir, member),
                                     exit_code(document), False))
            continue
        if journal_path(out_dir, member).is_file():
            result = resume_run(member, out_dir=out_dir, **options)
        else:
            result = run_lane(load_lane(Path(entry["path"])), repeats=group["repeats"],
                              scenarios=group["scenarios"], seed=group["seed"],
                              timeout_s=group["timeout_s"], limits=group["limits"],
                              adaptive=_adaptive(group.get("adaptive")), out_dir=out_dir,
                              run_id=member, rule=PassRule(**(group.get("rule") or {})),
                              **options)
        results.append(result)
        if result.interrupted:
            break  # the lanes after it begin when the run is resumed
    return RunsResult(group["run_id"], tuple(results))


def _adaptive(options: Mapping[str, Any] | None) -> Adaptive | None:
    return Adaptive(**options) if options is not None else None


def _read_group(path: Path) -> dict[str, Any]:
    try:
        group = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise TranscriptError(f"{path}: not a readable run of several lanes: {exc}") from None
    if not isinstance(group, dict) or group.get("schema") != GROUP_SCHEMA:
        raise TranscriptError(f"{path}: schema is not {GROUP_SCHEMA!r}; this alk cannot read it")
    return group


def read_runs(run_id: str | None = None, out_dir: Path = Path(".")) -> list[RunDocument]:
    """The result documents of a run: one, or one a lane for a run of several lanes (in the
    order they ran; a lane that never began has none)."""
    if run_id in (None, "latest"):
        run_id = latest_run_id(out_dir)
    group_file = group_path(out_dir, run_id)
    if not group_file.is_file():
        return [read_document(out_dir, run_id)]
    group = _read_group(group_file)
    documents = [read_document(out_dir, f"{run_id}/{lane['name']}") for lane in group["lanes"]
                 if result_path(out_dir, f"{run_id}/{lane['name']}").is_file()]
    if not documents:
        raise RunNotFoundError(f"run {run_id} has no lane with a result yet")
    return documents


@dataclass(frozen=True)
class RunEntry:
    """A past run as `alk runs` lists it: `lanes` in the order they ran; the counts are the
    sums over its lanes; `exit_code` by the run's own rule (None when it could not be read:
    `problem` says why)."""

    run_id: str
    started_at: str
    status: str
    lanes: tuple[str, ...]
    frameworks: tuple[str, ...]  # "name version" as each lane's preflight reported it
    scenarios: int
    passed: int
    scored: int
    void: int
    exit_code: int | None
    rerun_of: str | None = None  # "RUN SCENARIO REPEAT" for an `alk rerun`
    rule: str = ""  # its `--fail-under` rule in short ("rate ≥ 95.0%"); "" for the default
    problem: str = ""


def list_runs(out_dir: Path = Path("."), *, limit: int = 20) -> list[RunEntry]:
    """The newest `limit` runs under `out_dir`/reports, newest first (run ids sort by time)."""
    folder = out_dir / REPORTS_DIR
    if not folder.is_dir():
        raise RunNotFoundError(f"{folder}: no such folder: no run was saved here yet (run alk "
                               "from the folder that holds reports/, or pass --out)")
    found = sorted((path.name for path in folder.iterdir()
                    if (path / RESULT_NAME).is_file() or (path / GROUP_NAME).is_file()),
                   reverse=True)
    return [_run_entry(run_id, out_dir) for run_id in found[:limit]]


def _run_entry(run_id: str, out_dir: Path) -> RunEntry:
    try:
        documents = read_runs(run_id, out_dir)
    except (TranscriptError, RunNotFoundError) as exc:
        return RunEntry(run_id, "", "unreadable", (), (), 0, 0, 0, 0, None, problem=str(exc))
    first = documents[0]
    statuses = {d.status for d in documents}
    status = next((s for s in ("running", "interrupted") if s in statuses), "complete")
    rerun_of = first.settings.rerun_of
    return RunEntry(
        run_id=run_id, started_at=first.started_at, status=status,
        lanes=tuple(d.lane.name for d in documents),
        frameworks=tuple(f"{d.gate.framework or d.lane.framework} {d.gate.version or '?'}"
                         for d in documents),
        scenarios=sum(len(d.scenarios) for d in documents),
        passed=sum(d.aggregate.counts.passed for d in documents),
        scored=sum(d.aggregate.counts.scored for d in documents),
        void=sum(d.aggregate.counts.void for d in documents),
        exit_code=int(judge(documents).code),
        rerun_of=(f"{rerun_of.run_id} {rerun_of.scenario} {rerun_of.repeat}"
                  if rerun_of is not None else None),
        rule=first.settings.rule.tag())


def runs_json(documents: Sequence[RunDocument]) -> dict[str, Any]:
    """What `--json` prints: a lane's document, or for a run of several lanes its id and each
    lane's document."""
    if len(documents) == 1:
        return to_json(documents[0])
    return {"run_id": group_of(documents[0].run_id),
            "runs": [to_json(document) for document in documents]}


def read_run(run_id: str | None = None, out_dir: Path = Path(".")) -> RunDocument:
    """The saved result document of a run (the latest when `run_id` is None or "latest")."""
    if run_id in (None, "latest"):
        run_id = latest_run_id(out_dir)
    return read_document(out_dir, run_id)


def repeat_entry(document: RunDocument, scenario: str, repeat: int,
                 out_dir: Path = Path(".")) -> RepeatResult | CutShort:
    """One repeat's record in a result document; for a repeat an interrupt cut short, which has
    none, what it left (`CutShort`, pointing at its transcript)."""
    entry = document.scenario(scenario)
    if entry is None:
        known = ", ".join(s.id for s in document.scenarios)
        raise RunNotFoundError(f"run {document.run_id} has no scenario '{scenario}' "
                               f"(it has: {known})")
    for item in entry.repeats:
        if item.repeat == repeat:
            return item
    cut_short = repeat_transcript(document.run_id, scenario, repeat)
    if document.status != "complete" and (out_dir / cut_short).is_file():
        return CutShort(scenario, repeat, f"the run was {document.status} before this repeat "
                        "finished: it was never scored", str(cut_short))
    numbers = [item.repeat for item in entry.repeats]
    held = (f"it has {min(numbers)}..{max(numbers)}" if numbers else
            f"none of its repeats ran: the run is {document.status}, its preflight "
            f"{document.gate.cause or 'passed'}")
    raise RunNotFoundError(f"run {document.run_id}, scenario '{scenario}' has no repeat "
                           f"{repeat} ({held})")


def read_repeat_events(document: RunDocument, scenario: str, repeat: int,
                       out_dir: Path = Path(".")
                       ) -> tuple[RepeatResult | CutShort, list[dict[str, Any]]]:
    """One repeat's record in a result document and all its transcript events (for a small
    transcript: `read_repeat_page` reads a page of any size in bounded memory)."""
    entry = repeat_entry(document, scenario, repeat, out_dir)
    return entry, read_transcript(out_dir / entry.transcript)


def read_repeat_page(entry: RepeatResult | CutShort, out_dir: Path = Path("."), *, start: int = 1,
                     limit: int = 200, channels: Collection[str] | None = None,
                     digest: Callable[[dict[str, Any]], Any] = dict) -> TranscriptPage:
    """A page of a repeat's transcript: `limit` events from the `start`th (1-based, on
    `channels` when given), each made into a row by `digest` as it is read."""
    return read_page(out_dir / entry.transcript, start, limit, channels, digest)


def transcript_intact(entry: RepeatResult | CutShort, out_dir: Path = Path(".")) -> bool:
    """Does a repeat's transcript still hash to the sha256 recorded in its result?"""
    if isinstance(entry, CutShort) or not entry.sha256:
        return False
    try:
        with (out_dir / entry.transcript).open("rb") as file:
            digest = hashlib.file_digest(file, "sha256").hexdigest()
    except OSError:
        return False
    return digest == entry.sha256


def doctor() -> list[tuple[str, str, str]]:
    """What this machine gives a worker: (name, value, why) rows for `alk doctor`."""
    isolation = detect()
    sandbox = Filesystem.SANDBOX in isolation.filesystems
    uid = os.getuid() if hasattr(os, "getuid") else None
    nobody = worker_uid()
    filters = seccomp_program() is not None
    return [
        ("alk", __version__,
         f"Python {platform.python_version()} on {platform.system()} {platform.release()}"),
        ("containment", isolation.containment.value, isolation.reason),
        ("kill on exit", "every process of the namespace" if isolation.unshare
         else "the worker's process group", "what ends when a worker exits or times out"),
        ("PID 1", "alk's init" if isolation.unshare else "none",
         "the worker is its child: signals act as anywhere, its real exit status is reported"
         if isolation.unshare else "no PID namespace: the worker is alk's child"),
        ("network", " or ".join(n.value for n in isolation.networks),
         f"{isolation.network_reason}; the first is the default of a lane that does not say"),
        ("filesystem", " or ".join(f.value for f in isolation.filesystems),
         f"{isolation.filesystem_reason}; the first is the default of a lane that does not say"),
        ("it can read", "what it needs" if sandbox else "all alk's user can",
         "in the sandbox: /usr, a few /etc files, /sys, its interpreter and packages, the "
         "lane's folder and program, the SDK; not /root, /home, /var, /srv, /run, alk's "
         "transcripts and reports" if sandbox else "no sandbox here"),
        ("worker user", "nobody (uid 65534)" if sandbox and nobody is not None
         else ("root" if uid == 0 else f"uid {uid}"),
         "in the sandbox, so that root-only files stay unreadable even where bound"
         if sandbox and nobody is not None else "workers run as alk's own user"),
        ("syscall filter", "seccomp" if sandbox and filters else "none",
         "keyrings, namespaces, mounts, io_uring and the rest of Docker's list fail with "
         f"EPERM ({len(seccomp_blocked)} calls): no key outlives a repeat"
         if sandbox and filters else (seccomp_unavailable() or "no sandbox here")
         + "; a key a worker adds to a kernel keyring outlives its repeat"),
        ("/tmp, /dev/shm", "private, sized" if sandbox else "the host's",
         "each half of memory_mb: their memory counts in the worker's" if sandbox
         else "no sandbox here"),
        ("max_processes", "pids cgroup" if pids_cgroup_parent() else "RLIMIT_NPROC only",
         "bounds the worker's whole tree" if pids_cgroup_parent() else
         "no writable pids cgroup: the limit counts the user's processes, and not root's"),
        ("environment", "scrubbed", "PATH, LANG, LC_ALL, TZ and the lane's required_env only"),
        ("model gateway", "reachable offline" if Network.NONE in isolation.networks and
         isolation.unshare else "host network only",
         "a lane's [model] is served by alk; with network none, alk's init makes its "
         "listener inside the worker's namespace: the worker reaches it and nothing else"
         if Network.NONE in isolation.networks and isolation.unshare else
         "no network namespace here: the gateway listens on alk's own loopback"),
    ]
