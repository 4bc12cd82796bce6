"""alk's Python API: load a lane, run it, read a saved run. The CLI is a thin layer over this.

    from alk import api

    lane = api.load_lane("reference")
    run = api.run_lane(lane, repeats=5)
    assert run.exit_code == 0, run.document["scenarios"]
"""

from __future__ import annotations

import hashlib
import os
import platform
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Collection, Mapping, Sequence

from alk import __version__
from alk.errors import LaneError, RunNotFoundError
from alk.executor import Execution, Runner, execute
from alk.lane import LANES_DIR, lane_paths, load_lane
from alk.plan import build_plan, new_run_id
from alk.records import ExitCode, Lane, Plan, RepeatResult
from alk.redaction import Redactor
from alk.runner.isolation import Filesystem, Network, detect
from alk.runner.sandbox import worker_uid
from alk.runner.seccomp import BLOCKED as seccomp_blocked
from alk.runner.seccomp import program as seccomp_program
from alk.runner.seccomp import unavailable_reason as seccomp_unavailable
from alk.runner.pids_cgroup import parent as pids_cgroup_parent
from alk.report.document import (
    build_document,
    exit_code,
    latest_run_id,
    read_document,
    result_path,
    write_document,
)
from alk.transcript import TranscriptPage, read_page, read_transcript, repeat_transcript

__all__ = ["RunResult", "load_lane", "list_lanes", "run_lane", "read_run", "repeat_entry",
           "read_repeat_events", "read_repeat_page", "transcript_intact", "doctor"]

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

    document: dict[str, Any]
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
             on_plan: Callable[[Plan], None] | None = None,
             on_repeat: Callable[[RepeatResult], None] | None = None) -> RunResult:
    environ = os.environ if environ is None else environ
    plan = build_plan(lane, new_run_id(), repeats=repeats, scenario_ids=scenarios, seed=seed,
                      timeout_s=timeout_s, limits=limits)
    if on_plan:
        on_plan(plan)
    started_at = datetime.now(timezone.utc)
    path = result_path(out_dir, plan.run_id)
    # The proxy's upstream key is alk's own secret: redacted wherever it might surface.
    secret_names = (*lane.required_env, *((lane.model.key_env,) if lane.model and
                                          lane.model.key_env else ()))
    redactor = Redactor(environ[name] for name in secret_names if name in environ)

    def checkpoint(execution: Execution) -> None:
        write_document(path, build_document(plan, execution, status="running",
                                            started_at=started_at, finished_at=None), redactor)

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
            done = time.monotonic()
            next_checkpoint = done + max(CHECKPOINT_INTERVAL_S, CHECKPOINT_SHARE * (done - began))

    execution = execute(plan, out_dir, redactor, runner=runner, environ=environ,
                        keep_workspaces=keep_workspaces, on_repeat=after_repeat)
    status = "interrupted" if execution.interrupted else "complete"
    document = build_document(plan, execution, status=status, started_at=started_at,
                              finished_at=datetime.now(timezone.utc))
    # The verdict is taken before redaction: what is masked for people never changes it.
    code = exit_code(document)
    return RunResult(write_document(path, document, redactor), path, code,
                     execution.interrupted)


def read_run(run_id: str | None = None, out_dir: Path = Path(".")) -> dict[str, Any]:
    """The saved result document of a run (the latest when `run_id` is None or "latest")."""
    if run_id in (None, "latest"):
        run_id = latest_run_id(out_dir)
    return read_document(out_dir, run_id)


def repeat_entry(document: Mapping[str, Any], scenario: str, repeat: int,
                 out_dir: Path = Path(".")) -> dict[str, Any]:
    """One repeat's entry in a result document; for a repeat an interrupt cut short, which has
    none, an entry that says so and points at the transcript it left."""
    for entry in document["scenarios"]:
        if entry["id"] != scenario:
            continue
        for item in entry["repeats"]:
            if item["repeat"] == repeat:
                return item
        cut_short = repeat_transcript(document["run_id"], scenario, repeat)
        if document.get("status") != "complete" and (out_dir / cut_short).is_file():
            return {"repeat": repeat, "outcome": "interrupted", "cause": None,
                    "detail": f"the run was {document.get('status')} before this repeat "
                              "finished: it was never scored", "transcript": str(cut_short),
                    "sha256": None}
        numbers = [item["repeat"] for item in entry["repeats"]]
        held = (f"it has {min(numbers)}..{max(numbers)}" if numbers else
                f"none of its repeats ran: the run is {document.get('status')}, its preflight "
                f"{(document.get('preflight') or {}).get('cause') or 'passed'}")
        raise RunNotFoundError(f"run {document['run_id']}, scenario '{scenario}' has no repeat "
                               f"{repeat} ({held})")
    known = ", ".join(entry["id"] for entry in document["scenarios"])
    raise RunNotFoundError(f"run {document['run_id']} has no scenario '{scenario}' "
                           f"(it has: {known})")


def read_repeat_events(document: Mapping[str, Any], scenario: str, repeat: int,
                       out_dir: Path = Path(".")) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One repeat's entry in a result document and all its transcript events (for a small
    transcript: `read_repeat_page` reads a page of any size in bounded memory)."""
    entry = repeat_entry(document, scenario, repeat, out_dir)
    return entry, read_transcript(out_dir / entry["transcript"])


def read_repeat_page(entry: Mapping[str, Any], out_dir: Path = Path("."), *, start: int = 1,
                     limit: int = 200, channels: Collection[str] | None = None,
                     digest: Callable[[dict[str, Any]], Any] = dict) -> TranscriptPage:
    """A page of a repeat's transcript: `limit` events from the `start`th (1-based, on
    `channels` when given), each made into a row by `digest` as it is read."""
    return read_page(out_dir / entry["transcript"], start, limit, channels, digest)


def transcript_intact(entry: Mapping[str, Any], out_dir: Path = Path(".")) -> bool:
    """Does a repeat's transcript still hash to the sha256 recorded in its result?"""
    if not entry.get("sha256"):
        return False
    try:
        with (out_dir / entry["transcript"]).open("rb") as file:
            digest = hashlib.file_digest(file, "sha256").hexdigest()
    except OSError:
        return False
    return digest == entry["sha256"]


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
