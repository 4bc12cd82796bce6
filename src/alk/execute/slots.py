"""How many workers start at once: `StartSlots`, sized by the cores alk may use (`cores`).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from typing import Any, Callable, Iterator, Mapping

from alk.records import Preflight
from alk.runner.request import ReadyCheck
from alk.runner.stop import Stop

# How long a repeat waits for a start slot before it starts anyway: a worker that never gets
# ready holds its slot until it ends, and must not hold the others back longer than this.
START_WAIT_S = 2.0


class StartSlots:
    """At most `slots` workers between their spawn and their `framework_ready` at once.

    Repeats of the same length started together stay in step: with -j 8 on two cores, eight
    interpreters would import their framework at the same moment every round, each slowed by
    the others. Letting as many start as there are cores spreads the rounds apart (the
    benchmark's -j 8 went from 6.3-6.6 to 6.8-7.0 times -j 1 on a worker that waits 0.5 s).
    The wait comes before the spawn, so it counts in no repeat's duration or timeout."""

    def __init__(self, slots: int) -> None:
        self._slots = threading.BoundedSemaphore(max(1, slots))

    @contextlib.contextmanager
    def slot(self, stop: Stop | None = None) -> Iterator[Callable[[ReadyCheck], ReadyCheck]]:
        """Waits for a slot (at most START_WAIT_S, less if the run stops); yields a function
        that makes a gate give the slot back when the worker reports ready. Given back at the
        end in any case."""
        deadline = time.monotonic() + START_WAIT_S
        held = False
        while not held and time.monotonic() < deadline and not (stop and stop.is_set()):
            held = self._slots.acquire(timeout=min(0.1, max(0.0, deadline - time.monotonic())))
        lock = threading.Lock()

        def give_back() -> None:
            nonlocal held
            with lock:
                if held:
                    held = False
                    self._slots.release()

        def ready(gate: ReadyCheck) -> ReadyCheck:
            def on_ready(payload: Mapping[str, Any]) -> Preflight:
                give_back()
                return gate(payload)
            return on_ready

        try:
            yield ready
        finally:
            give_back()


def cores() -> int:
    """The number of cores alk may use (its CPU affinity, where the OS says)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)
