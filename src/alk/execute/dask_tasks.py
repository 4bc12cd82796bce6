"""What runs on a Dask worker, and what each task carries (`DaskRun`): the other half of
`alk.execute.dask`, which submits these functions by name.

A run's first task on a worker process opens the run's lane there (`open_lane`: the SDK folder,
the sandbox's paths, the model gateway) and keeps it for the run's other tasks on that process;
each task runs the probe or one repeat with that machine's `LocalRunner` and returns its result
with its transcript's bytes. This is the one place where alk keeps state in module globals:
a Dask worker process is shared by the tasks of every run it serves, and a run's lane must
outlive any one of its tasks. `stop_run` and `close_run` end a run's lane on every worker.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import tempfile
import threading
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from alk import __version__
from alk.attribution.outcome import void
from alk.causes import Cause
from alk.cleanup import remove_tree
from alk.errors import UsageError
from alk.execute.repeat import LaneContext, RunVoid, open_lane
from alk.layout import REPORTS_DIR, TRANSCRIPTS_DIR, probe_transcript, repeat_transcript
from alk.records import Attribution, Plan, Preflight, RepeatSpec
from alk.redaction import Redactor
from alk.runner.stop import Stop

INSTALL_HINT = "pip install 'alk[dask]'"


def import_distributed() -> Any:
    try:
        import distributed
    except ImportError:
        raise UsageError("--executor dask needs Dask distributed, which is not installed: "
                         f"{INSTALL_HINT}") from None
    return distributed


@dataclass(frozen=True)
class DaskRun:
    """What every task of a run carries: the plan without its items, the coordinator's output
    folder (hidden from sandboxed workers where a shared file system shows it), the coordinator's
    alk version, and the token that names the run's cached lane on each worker."""

    token: str
    plan: Plan
    out_dir: str
    keep_workspaces: bool
    version: str


def transcript_of(run: DaskRun, item: RepeatSpec) -> Path:
    return repeat_transcript(run.plan.run_id, item.scenario.id, item.repeat)


def start_topic(token: str) -> str:
    return f"alk-start-{token}"


@dataclass
class _WorkerLane:
    """A run's lane as one Dask worker process holds it, shared by the run's tasks there."""

    context: LaneContext | None = None
    void: Attribution | None = None
    out_dir: Path | None = None  # where its transcripts are written before they are sent
    stop: Stop | None = None
    serial: bool = False
    identified: bool = False
    active: int = 0  # tasks of the run running here
    lock: threading.Condition = field(default_factory=threading.Condition)

    def identify(self, preflight: Preflight | None) -> None:
        with self.lock:
            if preflight is not None and not self.identified and self.context is not None:
                self.context.identify(preflight)
                self.identified = True

    def close(self) -> None:
        """Stops the run's repeats here and, once its tasks have ended (the Stop ends each
        worker within its grace), closes the gateway and removes the folders."""
        if self.stop is not None:
            self.stop.set()
        with self.lock:
            self.lock.wait_for(lambda: self.active == 0, timeout=CLOSE_WAIT_S)
        if self.context is not None:
            self.context.close()
        if self.out_dir is not None:
            remove_tree(self.out_dir)
        if self.stop is not None:
            self.stop.close()


_LANES: dict[str, _WorkerLane] = {}
# Runs stopped or closed here: a task of theirs that still arrives opens nothing. (A token is a
# few dozen bytes; a worker would have to outlive millions of runs for these to matter.)
_ENDED: set[str] = set()
_LANES_LOCK = threading.Lock()
# With max_processes set and no pids cgroup, the limit is RLIMIT_NPROC, which counts every
# process of the user: a worker process runs such a lane's repeats one at a time.
_SERIAL = threading.Lock()
_RUNNER: Any = None
# How long closing a run's lane on a worker waits for its stopped repeats to end.
CLOSE_WAIT_S = 60.0


@contextmanager
def _worker_lane(run: DaskRun) -> Iterator[_WorkerLane | None]:
    """The run's lane on this worker, opened by its first task, in use while the task runs
    (its closing waits for that); None once the run has ended here."""
    with _LANES_LOCK:
        if run.token in _ENDED:
            lane = None
        else:
            lane = _LANES.get(run.token)
            if lane is None:
                lane = _LANES[run.token] = _open_worker_lane(run)
            with lane.lock:
                lane.active += 1
    try:
        yield lane
    finally:
        if lane is not None:
            with lane.lock:
                lane.active -= 1
                lane.lock.notify_all()


def _open_worker_lane(run: DaskRun) -> _WorkerLane:
    global _RUNNER
    from alk.runner.cgroup import counts_the_user
    from alk.runner.process import LocalRunner

    where = f"on Dask worker {import_distributed().get_worker().address}"
    if run.version != __version__:
        return _WorkerLane(void=void(Cause.HARNESS_ERROR, (
            f"{where}: alk {__version__} runs there, alk {run.version} on the coordinator: "
            "install the same alk on both; nothing was started")))
    lane = run.plan.lane
    redactor = Redactor(os.environ[name] for name in lane.secret_names if name in os.environ)
    _RUNNER = _RUNNER or LocalRunner()
    out_dir = Path(tempfile.mkdtemp(prefix="alk-dask-"))
    stop = Stop()
    try:
        context = open_lane(run.plan, out_dir, redactor, runner=_RUNNER, environ=os.environ,
                            keep_workspaces=run.keep_workspaces, stop=stop)
    except RunVoid as exc:
        remove_tree(out_dir)
        stop.close()
        verdict = exc.attribution
        return _WorkerLane(void=dataclasses.replace(verdict, detail=f"{where}: {verdict.detail}"))
    except BaseException:
        remove_tree(out_dir)
        stop.close()
        raise
    # The coordinator's transcripts and reports, where a shared file system shows them here.
    coordinator = Path(run.out_dir)
    context.hidden = (*context.hidden, *(os.path.realpath(coordinator / name)
                                         for name in (TRANSCRIPTS_DIR, REPORTS_DIR)))
    serial = counts_the_user(run.plan.limits)
    return _WorkerLane(context=context, out_dir=out_dir, stop=stop, serial=serial)


def _take(path: Path) -> bytes:
    """A transcript's bytes, removed from the worker once read."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return b""
    path.unlink(missing_ok=True)
    return data


def probe_task(run: DaskRun) -> tuple:
    with _worker_lane(run) as lane:
        if lane is None:
            return ("stopped", b"")
        if lane.void is not None:
            return ("void", lane.void)
        assert lane.context is not None and lane.out_dir is not None
        try:
            observation = lane.context.probe()
        except KeyboardInterrupt:  # the run's Stop
            return ("stopped", b"")
        return ("probe", observation, _take(lane.out_dir / probe_transcript(run.plan.run_id)))


def repeat_task(run: DaskRun, preflight: Preflight | None, item: RepeatSpec) -> tuple:
    with _worker_lane(run) as lane:
        if lane is None:
            return ("stopped", b"")
        if lane.void is not None:
            return ("void", lane.void)
        assert lane.context is not None and lane.out_dir is not None and lane.stop is not None
        lane.identify(preflight)
        with _SERIAL if lane.serial else nullcontext():
            if lane.stop.is_set():
                return ("stopped", b"")
            import_distributed().get_worker().log_event(start_topic(run.token),
                                                  [item.scenario.id, item.repeat])
            try:
                result = lane.context.repeat(item)
            except KeyboardInterrupt:  # the run's Stop: its transcript says "interrupted"
                return ("stopped", _take(lane.out_dir / transcript_of(run, item)))
        return ("result", result, _take(lane.out_dir / result.transcript))


def stop_run(token: str) -> None:
    """Runs on every worker (`Client.run`): the run's repeats there end now, none starts."""
    with _LANES_LOCK:
        _ENDED.add(token)
        lane = _LANES.get(token)
    if lane is not None and lane.stop is not None:
        lane.stop.set()


async def close_run(token: str) -> None:
    """Runs on every worker (`Client.run`): closes the run's lane there, off the event loop."""
    with _LANES_LOCK:
        _ENDED.add(token)
        lane = _LANES.pop(token, None)
    if lane is not None:
        await asyncio.get_running_loop().run_in_executor(None, lane.close)
