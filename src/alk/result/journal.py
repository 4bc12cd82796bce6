"""A run's journal, `reports/RUN_ID/journal.jsonl`: what makes a run survive a kill.

One JSON object a line, appended and fsynced as things happen: the run's start (`run`: the
lane file's path and sha256, and what the run was asked: the seed, the repeats, the chosen
scenarios, the overrides), the preflight's identity (`preflight`), every finished repeat whole
(`repeat`), each resumption (`resumed`), and the end (`end`). A repeat's transcript is fsynced
before its record is written: a repeat is finished exactly when its record is in the journal,
so a run killed at any moment (`kill -9` included) resumes without running a finished repeat
again or losing one.
`result.json` is rebuilt from the journal alone: resuming 1,000 finished repeats reads one file.

While a run goes on, alk holds an exclusive lock on its journal: a second `alk run --resume`
of the same run is refused instead of running its repeats twice.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import tempfile
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, Mapping

import msgspec

from alk import __version__
from alk.errors import ResumeError
from alk.records import Plan, Preflight, RepeatResult
from alk.result.document import Resumption
from alk.result.options import RunOptions

SCHEMA = "alk.journal/1"


@dataclass(frozen=True)
class RunStart:
    """A journal's first record: which run of which lane, what it was asked (`options`, its
    repeats, scenarios and seed as the plan settled them: a resumed run draws nothing again),
    and when it began."""

    run_id: str
    lane_path: str
    lane_sha256: str
    lane_name: str
    options: RunOptions
    started_at: str
    # `alk rerun`: "RUN_ID SCENARIO REPEAT" of the repeat it runs again; None for a run
    rerun_of: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The `run` record's fields, flat, in the order the journal has always held them."""
        options = self.options.to_json()
        return {"run_id": self.run_id, "lane_path": self.lane_path,
                "lane_sha256": self.lane_sha256, "lane_name": self.lane_name,
                **{key: options[key] for key in ("repeats", "scenarios", "seed", "timeout_s",
                                                 "limits")},
                "started_at": self.started_at, "adaptive": options["adaptive"],
                "rule": options["rule"], "rerun_of": self.rerun_of}

    @classmethod
    def from_json(cls, record: Mapping[str, Any]) -> RunStart:
        return cls(run_id=record["run_id"], lane_path=record["lane_path"],
                   lane_sha256=record["lane_sha256"], lane_name=record["lane_name"],
                   options=RunOptions.from_json(record), started_at=record["started_at"],
                   rerun_of=record.get("rerun_of"))


@dataclass(frozen=True)
class Journal:
    """A journal as read back: its start, preflight identity, finished repeats, resumptions."""

    start: RunStart
    identity: tuple[str | None, str | None] | None
    repeats: tuple[RepeatResult, ...]
    resumed: tuple[Resumption, ...]
    # The status of its last `end` record, "complete" or "interrupted"; None when none
    # followed its start or its last resumption (it goes on, or its alk was killed).
    ended: str | None


class JournalWriter:
    """Appends records to a run's journal, each durable when the call returns. A new journal
    (`start` given) comes into being whole, its `run` record in it and locked: a kill at any
    moment leaves either no journal or one that says what the run is."""

    def __init__(self, path: Path, start: RunStart | None = None) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._fd = -1
        if start is not None:
            self._fd = self._begin(path, start)
            return
        try:
            self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
        except FileNotFoundError:
            raise ResumeError(f"{path}: no journal; only a run started by this alk can be "
                              "resumed") from None
        self._lock(self._fd, path)
        _cut_torn_line(self._fd, path)

    @classmethod
    def _begin(cls, path: Path, start: RunStart) -> int:
        fd, temp = tempfile.mkstemp(dir=path.parent, prefix=".journal-", suffix=".tmp")
        try:
            cls._lock(fd, path)
            _write_line(fd, {"type": "run", "schema": SCHEMA, "alk_version": __version__,
                             **start.to_json()})
            os.link(temp, path)  # fails if the run exists: never two runs in one journal
        except FileExistsError:
            os.close(fd)
            raise ResumeError(f"{path}: this run exists already; resume it (alk run --resume) "
                              "or give the new run another id") from None
        except BaseException:
            os.close(fd)
            raise
        finally:
            os.unlink(temp)
        os.set_inheritable(fd, False)
        return fd

    @staticmethod
    def _lock(fd: int, path: Path) -> None:
        if not _take_lock(fd):
            os.close(fd)
            raise ResumeError(f"{path}: another alk is running this run now; wait for it to "
                              "end (or stop it) before resuming") from None

    def preflight(self, preflight: Preflight) -> None:
        self._append({"type": "preflight", "framework": preflight.framework,
                      "version": preflight.version})

    def repeat(self, result: RepeatResult) -> None:
        self._append({"type": "repeat", "result": result_to_json(result)})

    def resumed(self, at: datetime, done: int) -> None:
        self._append({"type": "resumed", "at": at.isoformat(timespec="seconds"), "done": done})

    def end(self, status: str) -> None:
        self._append({"type": "end", "status": status})

    def _append(self, record: dict[str, Any]) -> None:
        _write_line(self._fd, record)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)  # releases the lock
            self._fd = -1

    def __enter__(self) -> JournalWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _take_lock(fd: int) -> bool:
    """The run's lock on `fd`, unless another open journal holds it (a living alk running
    the run): the one check that both a resume and `held` make."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def held(path: Path) -> bool:
    """Is a living alk running the run of the journal at `path` now? The kernel drops a lock
    with its process, so a killed alk's run is free. The lock is taken and given back at
    once: a resume that begins in that instant is refused, and can be asked again."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        return not _take_lock(fd)
    finally:
        os.close(fd)  # releases the lock, when it was taken here


RunState = Literal["running", "stopped", "interrupted", "complete"]


def run_state(path: Path) -> tuple[RunState, Journal]:
    """Where the run of the journal at `path` stands, from its evidence: `running` while an
    alk holds its lock; else as its last `end` record says (`complete`, or `interrupted`:
    Ctrl-C, a signal, a full disk); else `stopped`: its alk was killed (`kill -9`, a crash, a
    lost machine) before it could say so. Every state but `complete` can be resumed. Raises
    ResumeError as `read_journal` does."""
    # The lock first: a run that ends between the two reads is then never taken for killed.
    running = held(path)
    journal = read_journal(path)
    if running:
        return "running", journal
    if journal.ended in ("complete", "interrupted"):
        return journal.ended, journal
    return "stopped", journal


def _write_line(fd: int, record: Mapping[str, Any]) -> None:
    """One write of a whole line (at the end: the descriptor appends), then fsync: a kill
    leaves at most a torn last line, which `read_journal` drops."""
    line = json.dumps(record, ensure_ascii=True, allow_nan=False, separators=(",", ":"),
                      default=str).encode() + b"\n"
    view = memoryview(line)
    while view:
        view = view[os.write(fd, view):]
    os.fsync(fd)


def _cut_torn_line(fd: int, path: Path) -> None:
    """A kill in the middle of a write leaves a last line without its newline: cut it off, so
    that the next record starts a line of its own (`read_journal` ignores it anyway)."""
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        os.ftruncate(fd, data.rfind(b"\n") + 1)


def read_journal(path: Path) -> Journal:
    """The journal at `path`; raises ResumeError when it is missing or has no `run` record."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ResumeError(f"{path}: no journal; only a run started by this alk can be "
                          "resumed") from None
    start: RunStart | None = None
    identity = None
    repeats: dict[tuple[str, int], RepeatResult] = {}
    resumed: list[Resumption] = []
    ended = None
    lines = data.split(b"\n")
    # The last piece is empty after a whole line, or a line a kill cut short: never a record.
    for number, raw in enumerate(lines[:-1], 1):
        try:
            record = json.loads(raw)
            kind = record["type"]
            if kind == "run":
                if record.get("schema") != SCHEMA:
                    raise ResumeError(f"{path}: line {number}: journal schema "
                                      f"{record.get('schema')!r} is not {SCHEMA!r}")
                start = RunStart.from_json(record)
            elif kind == "preflight":
                identity = (record["framework"], record["version"])
            elif kind == "repeat":
                result = result_from_json(record["result"])
                repeats.setdefault((result.scenario, result.repeat), result)
            elif kind == "resumed":
                resumed.append(Resumption(record["at"], record["done"]))
                ended = None  # the `end` before it ended only what ran before
            elif kind == "end":
                ended = record["status"]
        except ResumeError:
            raise
        except (ValueError, KeyError, TypeError) as exc:
            raise ResumeError(f"{path}: line {number} is not a journal record ({exc}); the "
                              "journal was changed by hand or by another program") from None
    if start is None:
        raise ResumeError(f"{path}: holds no `run` record; the run cannot be rebuilt")
    return Journal(start, identity, tuple(repeats.values()), tuple(resumed), ended)


def result_to_json(result: RepeatResult) -> dict[str, Any]:
    return msgspec.to_builtins(result)


def result_from_json(record: Any) -> RepeatResult:
    return msgspec.convert(record, RepeatResult)


def run_start(plan: Plan, options: RunOptions, started_at: datetime,
              rerun_of: str | None = None) -> RunStart:
    """The start of a run of `plan`, made from `options`: its repeats, scenarios and seed as
    the plan settled them, its timeout and limit overrides as given."""
    settled = dataclasses.replace(options, repeats=plan.repeats,
                                  scenarios=tuple(s.id for s in plan.scenarios), seed=plan.seed)
    return RunStart(run_id=plan.run_id, lane_path=str(plan.lane.path.resolve()),
                    lane_sha256=plan.lane.sha256, lane_name=plan.lane.name, options=settled,
                    started_at=started_at.isoformat(timespec="seconds"), rerun_of=rerun_of)
