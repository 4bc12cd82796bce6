"""Repeats on a Dask distributed cluster: `alk run --executor dask --scheduler tcp://HOST:PORT`.

Each repeat is one Dask task, run on a Dask worker exactly as a local repeat runs: the task opens
the lane there once per worker process and run (`open_lane`: the SDK folder, the sandbox's
paths, the model gateway), runs the repeat with that machine's `LocalRunner`, and sends back the
`RepeatResult` with its transcript's bytes (at most the lane's `transcript_cap_bytes`). The
coordinator, in the thread that called `run`, writes the transcript where a local run would
have, checks its sha256 and only then hands the result on: the journal, the checkpoints and
`--resume` work as they do locally. The preflight probe runs on the cluster too, so that the
coordinator need not have the framework installed.

Secrets never travel over the Dask wire: a Dask worker reads the lane's `required_env` and
`[model] key_env` from its own environment. A worker that cannot run the lane (a variable
missing, isolation it cannot give, another alk) voids the run, as this machine would.

On Ctrl-C no repeat starts any more, every worker's running repeats are stopped (their `Stop`,
as the local engine's threads are), what had finished is handed over, and the interrupt goes on.
What runs on the Dask workers is in `alk.execute.dask_tasks`. `distributed` is imported only
when a `DaskEngine` is made.
"""

from __future__ import annotations

import dataclasses
import hashlib
import queue
import secrets
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from alk import __version__
from alk.attribution.outcome import void
from alk.causes import Cause
from alk.errors import UsageError
from alk.execute.dask_tasks import (
    DaskRun,
    close_run,
    import_distributed,
    probe_task,
    repeat_task,
    start_topic,
    stop_run,
    transcript_of,
)
from alk.execute.handover import FINISHED, hand_over
from alk.execute.repeat import DETAIL_CHARS, RunVoid
from alk.files import write_atomically
from alk.layout import probe_transcript, repeat_transcript
from alk.records import Observation, Plan, Preflight, RepeatResult, RepeatSpec
from alk.redaction import Redactor

# How long a scheduler may take to answer before `--scheduler` is said to be wrong.
CONNECT_TIMEOUT_S = 5
# Repeats handed to the scheduler at once: this many per thread of the cluster (one running,
# one waiting to start as soon as it ends), at least MIN_WINDOW; a lane's max_parallel caps it.
WINDOW_PER_THREAD = 2
MIN_WINDOW = 4
# How often the cluster's threads are counted again (workers join and leave).
WINDOW_REFRESH_S = 5.0



class DaskEngine:
    """Runs a lane's repeats on the Dask cluster whose scheduler is `scheduler`, or through
    `client`, a connected `distributed.Client` (which the caller keeps and closes)."""

    name = "dask"

    def __init__(self, scheduler: str, *, client: Any = None) -> None:
        distributed = import_distributed()
        self._owned = client is None
        if client is None:
            try:
                client = distributed.Client(scheduler, timeout=CONNECT_TIMEOUT_S,
                                            set_as_default=False)
            except (OSError, TimeoutError, ValueError) as exc:
                raise UsageError(f"--scheduler {scheduler}: no Dask scheduler answered within "
                                 f"{CONNECT_TIMEOUT_S} s ({type(exc).__name__}: {exc}); start one "
                                 "(`dask scheduler`) or check the address") from None
        self.scheduler = scheduler
        self.client = client

    def close(self) -> None:
        """Closes the client this engine connected (not one it was given)."""
        if self._owned:
            self.client.close()

    def __enter__(self) -> DaskEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def open(self, plan: Plan, out_dir: Path, redactor: Redactor, environ: Mapping[str, str],
             keep_workspaces: bool) -> Iterator[DaskLane]:
        model = plan.lane.model
        if model is not None and model.record is not None:
            # Each worker process would record its own part to the same path, the last to
            # close replacing the others.
            raise UsageError(f"{plan.lane.path}: model.record: a cassette is recorded by one "
                             "alk on one machine; record it with --executor local, then "
                             "replay it on Dask")
        # `environ` is the coordinator's: what a Dask worker needs comes from its own.
        run = DaskRun(token=f"{plan.run_id}-{secrets.token_hex(4)}",
                   plan=dataclasses.replace(plan, items=()),  # a task carries only its item
                   out_dir=str(out_dir.resolve()), keep_workspaces=keep_workspaces,
                   version=__version__)
        lane = DaskLane(self.client, run, out_dir)
        try:
            lane.start()
            yield lane
        finally:
            lane.close()


class DaskLane:
    """A lane opened on a Dask cluster; `start` runs the probe there."""

    def __init__(self, client: Any, run: DaskRun, out_dir: Path) -> None:
        self.client, self.run_spec, self.out_dir = client, run, out_dir
        self.jobs: int | None = None  # the cluster's workers' threads decide, not this machine
        self._probe: Observation | None = None
        self._probe_error: Exception | None = None
        self._preflight: Preflight | None = None
        self._stopping = threading.Event()
        self._lock = threading.Lock()  # guards _inflight, which the feeder thread changes
        self._inflight: dict[Any, Any] = {}  # (scenario, repeat), or "probe" -> its Future
        self._started: set[tuple[str, int]] = set()  # repeats a worker said it began
        self._topic: str | None = None

    @property
    def workspaces(self) -> Path | None:
        # Kept workspaces stay on each Dask worker, in its temporary folder (docs/dask.md).
        return None

    def start(self) -> None:
        """Runs the preflight probe on the cluster. RunVoid when its worker cannot run the
        lane at all; any other failure is kept for `probe` to raise (a void probe)."""
        future = self.client.submit(probe_task, self.run_spec, pure=False,
                                    key=f"alk-probe-{self.run_spec.token}")
        with self._lock:
            self._inflight["probe"] = future
        try:
            reply = future.result()
        except Exception as exc:  # noqa: BLE001 - the probe is void for it, as locally
            self._probe_error = DaskTaskError(exc)
            return
        finally:
            with self._lock:
                self._inflight.pop("probe", None)
            del future
        if reply[0] == "void":
            raise RunVoid(reply[1])
        if reply[0] == "stopped":
            raise KeyboardInterrupt
        try:
            write_atomically(self.out_dir / probe_transcript(self.run_spec.plan.run_id),
                              reply[2])
        except OSError as exc:  # as a probe whose transcript cannot be written locally
            self._probe_error = exc
            return
        self._probe = reply[1]

    def probe(self) -> Observation:
        if self._probe_error is not None:
            raise self._probe_error
        assert self._probe is not None
        return self._probe

    def identify(self, preflight: Preflight) -> None:
        # Every repeat task carries it; each worker's lane identifies once.
        self._preflight = preflight

    def run(self, items: Sequence[RepeatSpec], *,
            on_start: Callable[[RepeatSpec], None] | None,
            on_result: Callable[[RepeatResult], None]) -> None:
        if not items:
            return
        messages: queue.SimpleQueue = queue.SimpleQueue()
        by_key = {(item.scenario.id, item.repeat): item for item in items}
        started = self._started
        ended: set[tuple[str, int]] = set()
        self._topic = start_topic(self.run_spec.token)
        self.client.subscribe_topic(self._topic,
                                    lambda event: messages.put(("start", tuple(event[1]))))
        feeder = threading.Thread(target=self._feed, args=(items, messages),
                                  name="alk-dask-feeder", daemon=True)
        feeder.start()

        def begin(key: tuple[str, int]) -> None:
            if key not in started and key not in ended:
                started.add(key)
                if on_start:
                    on_start(by_key[key])

        def handle(message: Any) -> None:
            kind, payload = message
            if kind == "error":
                raise payload
            if kind == "start":
                if not self._stopping.is_set():
                    begin(payload)
                return
            item, status, reply = payload
            key = (item.scenario.id, item.repeat)
            if status == "finished" and reply[0] == "void":
                raise RunVoid(reply[1])
            if status == "finished" and reply[0] == "stopped":
                if reply[1]:  # a repeat cut short keeps its transcript, as locally
                    write_atomically(self.out_dir / transcript_of(self.run_spec, item),
                                      reply[1])
                return
            if self._stopping.is_set() and status != "finished":
                return  # cancelled, or failed while stopping: never scored
            if status in ("cancelled", "lost"):
                raise UsageError(
                    f"run {self.run_spec.plan.run_id}: the Dask scheduler dropped the repeats "
                    "still to run (was it stopped?); the finished ones are kept: `alk run "
                    f"--resume {self.run_spec.plan.run_id}` runs the rest")
            if status == "finished":
                result = _delivered(reply[1], reply[2], self.out_dir)
            else:
                result = _void_result(self.run_spec.plan.run_id, item, _task_detail(reply[1]))
            begin(key)
            ended.add(key)
            on_result(result)

        hand_over(messages, 1, handle, self._stop)

    def _feed(self, items: Sequence[RepeatSpec], messages: queue.SimpleQueue) -> None:
        """Hands the scheduler a window of repeats and another as each ends; every task that
        ends goes to the calling thread, with its result already fetched."""
        distributed = import_distributed()
        todo = iter(items)
        spec_of: dict[str, RepeatSpec] = {}
        cap = self.run_spec.plan.lane.max_parallel
        window, counted = MIN_WINDOW, 0.0
        try:
            done = distributed.as_completed(loop=self.client.loop, with_results=True,
                                            raise_errors=False)

            def top_up() -> None:
                nonlocal window, counted
                if time.monotonic() - counted >= WINDOW_REFRESH_S:
                    threads = sum(self.client.nthreads().values())
                    window = max(MIN_WINDOW, WINDOW_PER_THREAD * threads)
                    window = min(window, cap) if cap else window
                    counted = time.monotonic()
                while not self._stopping.is_set() and len(spec_of) < window:
                    item = next(todo, None)
                    if item is None:
                        return
                    future = self.client.submit(
                        repeat_task, self.run_spec, self._preflight, item, pure=False,
                        key=f"alk-repeat-{self.run_spec.token}-{item.scenario.id}-{item.repeat}")
                    with self._lock:
                        self._inflight[(item.scenario.id, item.repeat)] = future
                    spec_of[future.key] = item
                    done.add(future)

            top_up()
            for future, reply in done:
                item = spec_of.pop(future.key)
                with self._lock:
                    self._inflight.pop((item.scenario.id, item.repeat), None)
                messages.put(("done", (item, future.status, reply)))
                del future, reply  # the worker may drop the result now
                top_up()
        except BaseException as exc:  # noqa: BLE001 - handed to the calling thread
            messages.put(("error", exc))
        finally:
            messages.put(FINISHED)

    def _stop(self) -> None:
        """No repeat starts from now on; the running ones end, on every worker."""
        self._stopping.set()
        try:
            self.client.run(stop_run, self.run_spec.token, on_error="ignore")
        except Exception:  # noqa: BLE001 - a lost scheduler: its workers end their repeats
            pass
        with self._lock:
            waiting = [future for key, future in self._inflight.items()
                       if key not in self._started]
        try:
            # Those not yet begun never will; those running end on their own (the Stop), and
            # send back their transcripts cut short.
            self.client.cancel(waiting)
        except Exception:  # noqa: BLE001
            pass

    def close(self) -> None:
        """Stops whatever still runs, and closes the run's lane on every worker (its gateway,
        its workspaces' folder, the transcripts it held)."""
        self._stopping.set()
        with self._lock:
            waiting = list(self._inflight.values())
        if waiting:
            try:
                self.client.cancel(waiting)
            except Exception:  # noqa: BLE001
                pass
        if self._topic is not None:
            try:
                self.client.unsubscribe_topic(self._topic)
            except Exception:  # noqa: BLE001 - a closed client holds no subscription
                pass
        try:
            self.client.run(close_run, self.run_spec.token, on_error="ignore")
        except Exception:  # noqa: BLE001 - the workers are gone, and their folders with them
            pass


class DaskTaskError(Exception):
    """A Dask task failed for a reason of the cluster's (alk missing on a worker, a worker
    that died running it)."""

    def __init__(self, exc: BaseException) -> None:
        super().__init__(_task_detail(exc))


def _task_detail(exc: BaseException) -> str:
    return (f"the Dask task failed: {type(exc).__name__}: {exc} (every Dask worker needs alk "
            f"{__version__} and the lane's files at the same paths: docs/dask.md)")


def _delivered(result: RepeatResult, data: bytes, out_dir: Path) -> RepeatResult:
    """The result, once its transcript is written where a local run writes it and hashes to
    what the worker recorded; else the repeat is void (alk's own failure, never the worker's)."""
    try:
        write_atomically(out_dir / result.transcript, data)
    except OSError as exc:
        return _voided(result, f"its transcript could not be written: {exc}")
    if result.sha256 and hashlib.sha256(data).hexdigest() != result.sha256:
        return _voided(result, "its transcript arrived from the Dask worker with another "
                               f"sha256 than the {result.sha256} it recorded")
    return result


def _voided(result: RepeatResult, detail: str) -> RepeatResult:
    verdict = void(Cause.HARNESS_ERROR, detail[:DETAIL_CHARS])
    return dataclasses.replace(result, outcome=verdict.outcome, cause=verdict.cause,
                               detail=verdict.detail, sha256="")


def _void_result(run_id: str, item: RepeatSpec, detail: str) -> RepeatResult:
    """A repeat whose task failed on the cluster: void, with no transcript."""
    return RepeatResult.void(item, void(Cause.HARNESS_ERROR, detail[:DETAIL_CHARS]),
                             str(repeat_transcript(run_id, item.scenario.id, item.repeat)))
