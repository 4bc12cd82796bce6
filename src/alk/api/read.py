"""Reading saved runs: a run's result documents (one a lane), the list `alk runs` shows, a
repeat's record and its transcript, a page at a time in bounded memory, and whether the
transcript still hashes to what its record says.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Collection, Sequence

from alk.errors import RunNotFoundError, TranscriptError
from alk.layout import GROUP_NAME, REPORTS_DIR, RESULT_NAME, group_of, group_path
from alk.layout import repeat_transcript, result_path
from alk.records import RepeatResult
from alk.result.document import CutShort, RunDocument, to_json
from alk.result.group import read_group
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
        rerun_of=rerun_of.arguments() if rerun_of is not None else None,
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
