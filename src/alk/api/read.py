"""Reading saved runs: a run's result documents (one a lane), the list `alk runs` shows, a
repeat's record and its transcript, a page at a time in bounded memory, and whether the
transcript still hashes to what its record says.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Collection, Sequence

from alk.errors import ResumeError, RunNotFoundError, TranscriptError
from alk.layout import GROUP_NAME, REPORTS_DIR, RESULT_NAME, group_of, group_path
from alk.layout import journal_path, repeat_transcript, result_path
from alk.records import Outcome, RepeatResult
from alk.result.document import CutShort, RunDocument, to_json
from alk.result.group import read_group
from alk.result.journal import run_state
from alk.result.store import latest_run_id, read_document
from alk.result.verdict import judge
from alk.transcript.reader import TranscriptPage, read_page, read_transcript


def read_runs(run_id: str | None = None, out_dir: Path = Path(".")) -> list[RunDocument]:
    """The result documents of a run: one, or one a lane for a run of several lanes (in the
    order they ran; a lane that never began has none)."""
    if run_id in (None, "latest"):
        run_id = latest_run_id(out_dir)
    group_file = group_path(out_dir, run_id)
    if not group_file.is_file():
        return [read_document(out_dir, run_id)]
    group = read_group(group_file)
    members = [group.member(lane) for lane in group.lanes]
    documents = [read_document(out_dir, member) for member in members
                 if result_path(out_dir, member).is_file()]
    if not documents:
        raise RunNotFoundError(f"run {run_id} has no lane with a result yet")
    return documents


@dataclass(frozen=True)
class RunEntry:
    """A past run as `alk runs` lists it. `status`: `running` (a living alk holds it),
    `stopped` (its alk was killed), `interrupted`, `complete`, or `unreadable` (`problem` says
    why). `lanes`: every lane of the run in the order they run, begun or not; `frameworks`:
    "name version" as each lane's preflight reported it ("" for a lane not begun). The counts
    are sums over the lanes begun: `ran` of `planned` repeats (at most, with `adaptive`),
    `cells` lane × scenario pairs over `scenarios` distinct scenarios. `exit_code` by the
    run's own rule, on what ran so far (None when it could not be read). `resume`: the command
    that goes on with a run stopped or interrupted ("" for one running or complete)."""

    run_id: str
    started_at: str
    status: str
    lanes: tuple[str, ...]
    frameworks: tuple[str, ...]
    scenarios: int
    passed: int
    scored: int
    void: int
    exit_code: int | None
    rerun_of: str | None = None  # "RUN SCENARIO REPEAT" for an `alk rerun`
    rule: str = ""  # its `--fail-under` rule in short ("rate ≥ 95.0%"); "" for the default
    problem: str = ""
    cells: int = 0
    ran: int = 0
    planned: int = 0
    adaptive: bool = False
    resumed: int = 0  # how many times it was resumed, over its lanes
    resume: str = ""
    # Why nothing ran, when no lane passed its preflight (a refused version, a missing
    # variable): the cause, said in place of counts that are all 0.
    nothing_ran: str = ""


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


@dataclass(frozen=True)
class _LaneState:
    """One lane of a listed run, as its evidence says: its state (`run_state`), and what ran,
    from its journal while result.json is only a checkpoint of a run going on or killed."""

    document: RunDocument
    state: str
    ran: int
    passed: int
    scored: int
    void: int
    resumed: int


def _lane_state(document: RunDocument, out_dir: Path) -> _LaneState:
    counts = document.aggregate.counts
    path = journal_path(out_dir, document.run_id)
    if not path.is_file():  # nothing better than what result.json says
        return _LaneState(document, document.status, counts.completed, counts.passed,
                          counts.scored, counts.void, len(document.resumed))
    state, journal = run_state(path)
    if document.status != "running":
        return _LaneState(document, state, counts.completed, counts.passed, counts.scored,
                          counts.void, len(journal.resumed))
    outcomes = [result.outcome for result in journal.repeats]
    void = outcomes.count(Outcome.LANE_INFRA)
    return _LaneState(document, state, len(outcomes), outcomes.count(Outcome.PASS),
                      len(outcomes) - void, void, len(journal.resumed))


def _run_entry(run_id: str, out_dir: Path) -> RunEntry:
    try:
        documents = read_runs(run_id, out_dir)
        group_file = group_path(out_dir, run_id)
        names = (tuple(lane.name for lane in read_group(group_file).lanes)
                 if group_file.is_file() else (documents[0].lane.name,))
        lanes = [_lane_state(document, out_dir) for document in documents]
    except (TranscriptError, RunNotFoundError, ResumeError) as exc:
        return RunEntry(run_id, "", "unreadable", (), (), 0, 0, 0, 0, None, problem=str(exc))
    first = documents[0]
    states = {lane.state for lane in lanes}
    # A run of several lanes is as far as its least finished lane; one whose lanes that began
    # all completed, with lanes still to begin, was killed between two.
    status = next((s for s in ("running", "stopped", "interrupted") if s in states),
                  "complete" if len(lanes) == len(names) else "stopped")
    rerun_of = first.settings.rerun_of
    if status in ("stopped", "interrupted"):
        resume = (f"alk rerun {rerun_of.arguments()}" if rerun_of is not None
                  else f"alk run --resume {run_id}")
    else:
        resume = ""
    frameworks = {d.lane.name: f"{d.gate.framework or d.lane.framework} {d.gate.version or '?'}"
                  for d in documents}
    return RunEntry(
        run_id=run_id, started_at=first.started_at, status=status, lanes=names,
        frameworks=tuple(frameworks.get(name, "") for name in names),
        scenarios=len({s.id for d in documents for s in d.scenarios}),
        passed=sum(lane.passed for lane in lanes), scored=sum(lane.scored for lane in lanes),
        void=sum(lane.void for lane in lanes),
        exit_code=int(judge(documents).code),
        rerun_of=rerun_of.arguments() if rerun_of is not None else None,
        rule=first.settings.rule.tag(),
        cells=sum(len(d.scenarios) for d in documents),
        ran=sum(lane.ran for lane in lanes),
        planned=sum(d.aggregate.counts.requested for d in documents),
        adaptive=any(d.settings.adaptive is not None for d in documents),
        resumed=sum(lane.resumed for lane in lanes), resume=resume,
        nothing_ran=(first.gate.cause or "preflight_failed")
        if all(d.gate.ok is False for d in documents) else "")


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
