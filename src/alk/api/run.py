"""Running lanes: a new run of one lane or several, a run resumed after a kill, one repeat of a
saved run run again. Each entry point takes what the run is asked (`RunOptions`) and how and
where it runs (`RunSetup`), and hands back the redacted record of what it found.
"""

from __future__ import annotations

import dataclasses
import secrets
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence

from alk import conformance
from alk import rerun as reruns
from alk.api.read import read_runs, repeat_entry
from alk.api.recorder import RunRecorder
from alk.api.setup import RunSetup
from alk.cleanup import remove_left_folders
from alk.errors import LaneError, ResumeError, RunWriteError, UsageError
from alk.execute.adaptive import Sampling
from alk.execute.executor import execute
from alk.lane.load import load_lane
from alk.layout import (
    group_of,
    group_path,
    journal_path,
    new_run_id,
    result_path,
)
from alk.plan import build_plan
from alk.records import Execution, ExitCode, Lane, Plan, Preflight, RepeatResult
from alk.redaction import Redactor
from alk.report import outputs
from alk.report.links import check_link_base
from alk.report.outputs import Written
from alk.result.document import CutShort, RerunOf, Resumption, RunDocument
from alk.result.group import GroupLane, RunGroup, read_group, write_group
from alk.result.journal import JournalWriter, RunStart, read_journal, run_start
from alk.result.options import RunOptions
from alk.result.store import check_is_a_run, read_document
from alk.result.verdict import exit_code

if TYPE_CHECKING:
    from alk.compare import Comparison


@dataclass(frozen=True)
class RunResult:
    """A finished (or interrupted) run of one lane: its redacted result document, where it was
    written, and the exit code the CLI uses."""

    document: RunDocument
    path: Path
    exit_code: ExitCode
    interrupted: bool


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


@dataclass(frozen=True)
class RerunResult:
    """`alk rerun`: the new run of one repeat (its record says what it reran, and what changed
    since: `settings.rerun_of`), and the repeat as it first ran."""

    run: RunsResult
    original: RepeatResult | CutShort


def run_lane(lane: Lane, options: RunOptions = RunOptions(), setup: RunSetup = RunSetup(), *,
             run_id: str | None = None) -> RunResult:
    """Runs a lane: `setup.jobs` repeats at once (each its own worker process), on
    `setup.engine` when given (a Dask cluster, say), else in this process's threads. The run is
    journaled as it goes (`alk.result.journal`): `resume_run` continues it if it is killed.
    With `options.adaptive`, each scenario runs until its verdict is settled
    (`alk.execute.adaptive`), at most its `max_repeats`. `options.rule` sets the exit code
    (`alk.result.rule`), never what is measured. With `setup.reports`, its report.html,
    report.md and junit.xml are written at its end."""
    result = _run_lane(lane, options, setup, run_id or new_run_id())
    _reported(RunsResult(result.document.run_id, (result,)), setup)
    return result


def _run_lane(lane: Lane, options: RunOptions, setup: RunSetup, run_id: str) -> RunResult:
    plan = _plan(lane, run_id, options)
    started_at = datetime.now(timezone.utc)
    with JournalWriter(journal_path(setup.out_dir, plan.run_id),
                       run_start(plan, options, started_at)) as journal:
        return _run_plan(plan, journal, options, setup, started_at=started_at)


def resume_run(run_id: str, setup: RunSetup = RunSetup()) -> RunResult:
    """Continues a run of one lane that was interrupted or killed (`kill -9` of alk included):
    the repeats its journal holds are kept as they are, the others run with the seeds they
    would have had. Raises ResumeError when the run is complete, when its lane file changed, or
    when its worker now reports another framework or version; the run is then left as it was.
    Its exit code's rule is the one it began with."""
    check_is_a_run(run_id, setup.out_dir)
    result = _resume_run(run_id, setup)
    _reported(RunsResult(run_id, (result,)), setup)
    return result


def _resume_run(run_id: str, setup: RunSetup) -> RunResult:
    path = journal_path(setup.out_dir, run_id)
    if not path.is_file():
        read_journal(path)  # refuses it (no journal) before the writer makes the run's folder
    with JournalWriter(path) as journal:
        remove_left_folders(run_id)  # what an alk killed running it left in the temporary folder
        # Read under the lock: no other alk is appending now.
        past = read_journal(path)
        start = past.start
        if past.ended == "complete":
            raise _complete(run_id)
        if start.rerun_of:
            raise ResumeError(f"run {run_id} is a rerun of one repeat: run it again with "
                              f"`alk rerun {start.rerun_of}`")
        lane = recorded_lane(run_id, start, "resuming it")
        options = start.options
        plan = _plan(lane, run_id, options)
        started_at = datetime.fromisoformat(start.started_at)
        if past.identity is not None and not _to_run(plan, options, past.repeats):
            # Killed after its last repeat, before it said so: written up, nothing run again.
            return _write_up(plan, journal, past.repeats, options, setup, started_at=started_at,
                             identity=past.identity, resumed=past.resumed)
        return _run_plan(plan, journal, options, setup, started_at=started_at,
                         done=past.repeats, identity=past.identity, resumed=past.resumed,
                         resumed_at=datetime.now(timezone.utc))


def recorded_lane(run_id: str, start: RunStart, doing: str) -> Lane:
    """The lane file a run recorded, loaded again for `doing` ("resuming it", "more repeats"):
    it must be byte for byte the file the run ran (sha256), else its new repeats would be of
    another lane, and not one recording a cassette, which they would replace with their part."""
    try:
        lane = load_lane(Path(start.lane_path))
    except LaneError as exc:
        raise ResumeError(f"run {run_id}: its lane file, as the run recorded it "
                          f"({start.lane_path}), cannot be loaded: {exc}; restore it there"
                          ) from None
    if lane.sha256 != start.lane_sha256:
        # Its sha256 covers the scenario file it names, which may be what changed.
        which = ("the lane file" if lane.shared is None else
                 "the lane file or its scenario file "
                 f"({', '.join(str(p) for p in lane.shared.paths)})")
        raise ResumeError(f"{lane.path}: {which} changed since run {run_id} began (its "
                          f"sha256 differs); {doing} would mix two lanes in one result: "
                          "restore the file, or start a new run")
    if lane.model is not None and lane.model.record is not None:
        raise ResumeError(f"{lane.path}: model.record: run {run_id} recorded a cassette, which "
                          f"{doing} would replace with its own part alone; start a new run to "
                          "record one whole")
    return lane


def rerun(run_id: str, scenario: str, repeat: int, setup: RunSetup = RunSetup(), *,
          anyway: bool = False) -> RerunResult:
    """Runs one repeat of a saved run again as it ran (`alk.rerun`), as a run of its own, one
    worker at a time in this process (`setup.jobs` and `setup.engine` do not apply; the rest of
    `setup` does, its callbacks and `keep_workspaces` too). Raises
    RerunError when the lane file changed since (unless `anyway`), RunNotFoundError when there
    is no such run, scenario or repeat."""
    out_dir = setup.out_dir
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
    given = read_journal(journal_file).start if journal_file.is_file() else None
    lane = load_lane(_lane_of(document, given, out_dir))
    prepared = reruns.prepare(
        document, original, lane, new_run_id(), anyway=anyway,
        timeout_s=given.options.timeout_s if given else document.settings.timeout_s,
        limits=given.options.limits if given else document.settings.limits)
    plan = prepared.plan
    started_at = datetime.now(timezone.utc)
    of = prepared.of
    options = RunOptions(timeout_s=plan.timeout_s, limits=plan.limits.applied())
    one_at_a_time = dataclasses.replace(setup, jobs=1, engine=None)
    with JournalWriter(journal_path(out_dir, plan.run_id),
                       run_start(plan, options, started_at, rerun_of=of.arguments())) as journal:
        result = _run_plan(plan, journal, options, one_at_a_time, started_at=started_at,
                           rerun_of=of)
    return RerunResult(_reported(RunsResult(plan.run_id, (result,)), setup), original)


def run_lanes(lanes: Sequence[Lane], options: RunOptions = RunOptions(),
              setup: RunSetup = RunSetup()) -> RunsResult:
    """One lane as `run_lane` runs it; several in one run folder, one after another, each with
    its own preflight, the same seed and the same scenarios: lane L of run R is run `R/L`.
    With `setup.reports`, the run's report.html, report.md and junit.xml are written at its
    end, covering all its lanes."""
    if len(lanes) == 1:
        result = _run_lane(lanes[0], options, setup, new_run_id())
        return _reported(RunsResult(result.document.run_id, (result,)), setup)
    run_id = new_run_id()
    seed = secrets.randbelow(2**31) if options.seed is None else options.seed
    options = dataclasses.replace(options, seed=seed)
    for lane in lanes:  # a scenario or option no lane can run stops the run before it starts
        _plan(lane, run_id, options)
    group = RunGroup(run_id, tuple(GroupLane(lane.name, str(lane.path.resolve()))
                                   for lane in lanes), options)
    write_group(setup.out_dir, group)
    return _reported(_run_group(group, setup), setup)


def resume(run_id: str, setup: RunSetup = RunSetup()) -> RunsResult:
    """Continues a run of one lane (`resume_run`) or of several: their lanes that finished
    are kept, the one cut short resumes, and those that never began begin, all by the rule
    the run began with."""
    check_is_a_run(run_id, setup.out_dir)
    group_file = group_path(setup.out_dir, run_id)
    if not group_file.is_file():
        result = _resume_run(run_id, setup)
        return _reported(RunsResult(run_id, (result,)), setup)
    return _reported(_run_group(read_group(group_file), setup, resuming=True), setup)


def _run_group(group: RunGroup, setup: RunSetup, *, resuming: bool = False) -> RunsResult:
    out_dir = setup.out_dir
    members = [(lane, group.member(lane)) for lane in group.lanes]
    ended: dict[str, str | None] = {}  # each lane's journal read once; None: not ended
    for _, member in members:
        path = journal_path(out_dir, member)
        ended[member] = read_journal(path).ended if path.is_file() else None
    if resuming and all(state == "complete" for state in ended.values()):
        raise _complete(group.run_id)
    results: list[RunResult] = []
    for lane, member in members:
        if ended[member] == "complete":
            document = read_document(out_dir, member)
            results.append(RunResult(document, result_path(out_dir, member),
                                     exit_code(document), False))
            continue
        if journal_path(out_dir, member).is_file():
            result = _resume_run(member, setup)
        else:
            result = _run_lane(load_lane(Path(lane.path)), group.options, setup, member)
        results.append(result)
        if result.interrupted:
            break  # the lanes after it begin when the run is resumed
    return RunsResult(group.run_id, tuple(results))


def check_worker(lane: Lane, options: RunOptions = RunOptions(repeats=1),
                 setup: RunSetup = RunSetup()) -> tuple[RunResult, list[conformance.Finding]]:
    """`alk check-worker`: the lane's worker against protocol v1, the handshake first, then a
    run (one repeat of each scenario by default), each problem a finding that says whose it is
    and what to do."""
    result = run_lane(lane, options, setup)
    return result, conformance.review(result.document, setup.out_dir,
                                      conformance.sdk_for(lane.command))


def write_reports(documents: Sequence[RunDocument], out_dir: Path = Path("."),
                  link_base: str | None = None) -> Written:
    """A run's report.html, report.md and junit.xml, written (again) from its documents
    (`read_runs`); a file that cannot be made is named in `Written.problems`, never raised.
    `link_base`: the URL at which `out_dir` is served, which makes report.md's links absolute
    (UsageError when it is not an http(s) URL, before anything is written)."""
    return outputs.write_reports(documents, out_dir,
                                 None if link_base is None else check_link_base(link_base))


def write_compare_page(comparison: Comparison, out_dir: Path = Path(".")) -> Written:
    """The `alk compare A B` page, in B's report folder (`compare-A.html`)."""
    return outputs.write_compare_page(comparison, out_dir)


def _reported(result: RunsResult, setup: RunSetup) -> RunsResult:
    """The run with its report files written (alk.report.outputs), when it asked for them."""
    if not setup.reports or not result.runs:
        return result
    written = write_reports([run.document for run in result.runs], setup.out_dir,
                            setup.link_base)
    return dataclasses.replace(result, reports=written)


def _plan(lane: Lane, run_id: str, options: RunOptions) -> Plan:
    return build_plan(lane, run_id, repeats=options.repeats, scenario_ids=options.scenarios,
                      seed=options.seed, timeout_s=options.timeout_s, limits=options.limits,
                      adaptive=options.adaptive)


def _run_plan(plan: Plan, journal: JournalWriter, options: RunOptions, setup: RunSetup, *,
              started_at: datetime, rerun_of: RerunOf | None = None,
              done: Sequence[RepeatResult] = (),
              identity: tuple[str | None, str | None] | None = None,
              resumed: Sequence[Resumption] = (),
              resumed_at: datetime | None = None,
              asked: Mapping[str, str] | None = None) -> RunResult:
    """Runs a plan whose journal is open: a new run, or (`resumed_at` set) a resumed one,
    which changes nothing on disk until its worker has passed the preflight as before.
    `asked`: scenarios that ran fewer repeats than the plan's on purpose (an extended run's,
    alk.api.until_decided), each with the reason its record gives."""
    if setup.on_plan:
        setup.on_plan(plan, done)
    redactor = _redactor(plan.lane, setup.env)
    recorder = RunRecorder(plan, journal, options, out_dir=setup.out_dir, redactor=redactor,
                           started_at=started_at, jobs=setup.jobs, executor=_executor(setup),
                           rerun_of=rerun_of, resumed=resumed, identity=identity,
                           resumed_at=resumed_at)
    recorder.begin()

    def after_repeat(result: RepeatResult, execution: Execution) -> None:
        if setup.on_repeat:
            setup.on_repeat(result)
        recorder.repeat(execution)

    try:
        execution = execute(plan, setup.out_dir, redactor, runner=setup.runner,
                            environ=setup.env, keep_workspaces=setup.keep_workspaces,
                            jobs=setup.jobs, engine=setup.engine, done=done,
                            adaptive=options.adaptive,
                            on_preflight=lambda preflight: recorder.preflight(preflight, done),
                            on_batch=setup.on_batch, on_start=setup.on_start,
                            # From its record on, the repeat is finished, whatever happens.
                            on_record=journal.repeat, on_repeat=after_repeat)
    except OSError as exc:
        # The journal or the result could not be written (a full disk, say): alk stops as if
        # killed, with every finished repeat in the journal.
        raise RunWriteError(f"{exc.filename or journal.path}: cannot be written "
                            f"({exc.strerror or exc}); the repeats finished so far are in "
                            f"{journal.path}: free the space, then `alk run --resume "
                            f"{group_of(plan.run_id)}`") from None
    if asked and not execution.interrupted:
        execution.stopped = {**asked, **execution.stopped}
    document, code = recorder.finish(execution)
    return RunResult(document, recorder.path, code, execution.interrupted)


def _write_up(plan: Plan, journal: JournalWriter, done: Sequence[RepeatResult],
              options: RunOptions, setup: RunSetup, *, started_at: datetime,
              identity: tuple[str | None, str | None], resumed: Sequence[Resumption]
              ) -> RunResult:
    """The result of a run whose every repeat is in its journal, written from it alone."""
    framework, version = identity
    stopped = {}
    if options.adaptive is not None:
        sampling = Sampling(plan, options.adaptive, done)
        sampling.next_round()  # settles every scenario: none has a repeat left to run
        stopped = sampling.stopped
    execution = Execution(preflight=Preflight(True, framework, version), repeats=list(done),
                          stopped=stopped)
    recorder = RunRecorder(plan, journal, options, out_dir=setup.out_dir,
                           redactor=_redactor(plan.lane, setup.env), started_at=started_at,
                           jobs=setup.jobs, executor=_executor(setup), resumed=resumed)
    document, code = recorder.finish(execution)
    return RunResult(document, recorder.path, code, False)


def _executor(setup: RunSetup) -> str:
    return setup.engine.name if setup.engine is not None else "local"


def _to_run(plan: Plan, options: RunOptions, done: Sequence[RepeatResult]) -> bool:
    """Has the plan repeats still to run, after those done?"""
    if options.adaptive is not None:
        return bool(Sampling(plan, options.adaptive, done).next_round())
    finished = {(result.scenario, result.repeat) for result in done}
    return not all((item.scenario.id, item.repeat) in finished for item in plan.items)


def _lane_of(document: RunDocument, given: RunStart | None, out_dir: Path) -> Path:
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


def _complete(run_id: str) -> ResumeError:
    return ResumeError(f"run {run_id} is complete: nothing to resume (`alk report {run_id}` "
                       "shows it)")


def _redactor(lane: Lane, environ: Mapping[str, str]) -> Redactor:
    """The values of the lane's secrets, and of the proxy's upstream key (alk's own secret)."""
    return Redactor(environ[name] for name in lane.secret_names if name in environ)
