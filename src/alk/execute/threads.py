"""Repeats at once in threads of alk's own process: `alk run -j N`.

A repeat is mostly waiting (on its worker's pipes, on a model), so threads are enough: each
drives its own worker process through the runner's selector loop, and what alk holds per repeat
is bounded, so alk's memory grows by little more than a thread's stack with N. Results come back
through a queue to the calling thread, which alone calls the callbacks.

Ctrl-C reaches only the main thread: it sets the run's `Stop`, which every repeat's loop watches,
so that each running worker's whole group ends at once, as it did with one repeat at a time.
"""

from __future__ import annotations

import queue
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from alk.execute.handover import FINISHED, hand_over
from alk.execute.repeat import LaneContext, open_lane
from alk.records import Observation, Plan, Preflight, RepeatResult, RepeatSpec
from alk.redaction import Redactor
from alk.runner.cgroup import counts_the_user
from alk.runner.request import Runner
from alk.runner.stop import Stop

# How often a repeat's thread, waiting for its result to be counted, looks for the run's stop.
COUNTED_POLL_S = 0.2


def parallelism(jobs: int, plan: Plan) -> int:
    """How many repeats run at once: --jobs, capped by the lane's `max_parallel`, by the
    number of repeats, and to one when `max_processes` can only be set as RLIMIT_NPROC (no
    writable pids cgroup): that limit counts every process of the user the workers run as, so
    repeats at once would use up each other's share and fail for it.

    A repeat's thread must outlive its worker: `setpriv --pdeathsig` and bwrap's
    `--die-with-parent` fire when the *thread* that spawned it ends, and each thread here runs
    its repeats to their end before it takes another or returns."""
    cap = min(jobs, plan.lane.max_parallel or jobs, max(1, len(plan.items)))
    if counts_the_user(plan.limits):
        return 1
    return max(1, cap)


class ThreadEngine:
    name = "local"

    def __init__(self, runner: Runner | None = None, jobs: int = 1) -> None:
        if jobs < 1:
            raise ValueError(f"jobs must be at least 1, got {jobs}")
        self.runner = runner
        self.jobs = jobs

    @contextmanager
    def open(self, plan: Plan, out_dir: Path, redactor: Redactor, environ: Mapping[str, str],
             keep_workspaces: bool) -> Iterator[ThreadLane]:
        if self.runner is None:
            from alk.runner.process import LocalRunner

            self.runner = LocalRunner()
        stop = Stop()
        try:
            context = open_lane(plan, out_dir, redactor, runner=self.runner, environ=environ,
                                keep_workspaces=keep_workspaces, stop=stop)
            try:
                yield ThreadLane(context, parallelism(self.jobs, plan), stop)
            finally:
                context.close()
        finally:
            stop.close()


class ThreadLane:
    """`jobs`: how many repeats run at once here (see `parallelism`)."""

    def __init__(self, context: LaneContext, jobs: int, stop: Stop) -> None:
        self.context, self.jobs, self.stop = context, jobs, stop

    @property
    def workspaces(self) -> Path | None:
        return self.context.workspaces

    def probe(self) -> Observation:
        return self.context.probe()

    def identify(self, preflight: Preflight) -> None:
        self.context.identify(preflight)

    def run(self, items: Sequence[RepeatSpec], *,
            on_start: Callable[[RepeatSpec], None] | None,
            on_result: Callable[[RepeatResult], None]) -> None:
        todo = iter(items)
        counting = getattr(items, "counted_first", False)
        take = threading.Lock()
        messages: queue.SimpleQueue = queue.SimpleQueue()

        def work() -> None:
            try:
                while not self.stop.is_set():
                    with take:
                        item = next(todo, None)
                    if item is None:
                        return
                    messages.put(("start", item))
                    counted = threading.Event()
                    try:
                        messages.put(("result", (self.context.repeat(item), counted)))
                    except KeyboardInterrupt:
                        if self.stop.is_set():
                            # the run stopped: this repeat is discarded (its transcript says)
                            return
                        raise
                    # Under a token budget the next repeat is taken once this one is counted:
                    # whether there is one depends on it (alk.execute.budget).
                    while counting and not counted.wait(COUNTED_POLL_S):
                        if self.stop.is_set():
                            return
            except BaseException as exc:  # noqa: BLE001 - handed to the calling thread
                messages.put(("error", exc))
            finally:
                messages.put(FINISHED)

        def handle(message: Any) -> None:
            kind, value = message
            if kind == "error":
                raise value
            if kind == "start":
                if on_start and not self.stop.is_set():
                    on_start(value)
            elif kind == "result":
                result, counted = value
                try:
                    on_result(result)
                finally:
                    counted.set()

        running = 0
        try:
            # A Ctrl-C while they start must stop those already going.
            for number in range(min(self.jobs, len(items))):
                thread = threading.Thread(target=work, name=f"alk-repeat-{number + 1}",
                                          daemon=True)
                running += 1
                try:
                    thread.start()
                except BaseException:
                    running -= 1
                    raise
            hand_over(messages, running, handle, self.stop.set)
        except BaseException as exc:
            if self.stop.is_set():
                raise  # hand_over stopped the run, and every thread has finished
            # Ctrl-C while the threads started, or before hand_over took over
            hand_over(messages, running, handle, self.stop.set, stopping=exc)
