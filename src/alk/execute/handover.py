"""How both engines hand finished repeats over to the thread that called `run`, one at a time:
the executor and the journal never see two results at once, and a run that stops (Ctrl-C, a
void worker, a callback's error) still hands over every repeat that finished, then stops.
"""

from __future__ import annotations

import queue
from typing import Any, Callable

FINISHED = object()  # a producer's last message: it sends no more


def hand_over(messages: queue.SimpleQueue, producers: int, handle: Callable[[Any], None],
              stop: Callable[[], None], stopping: BaseException | None = None) -> None:
    """Passes every message to `handle`, in this thread, until each of the `producers` has sent
    FINISHED. When `handle` raises or Ctrl-C comes (or `stopping` is given: it came already),
    `stop()` ends every running repeat; messages are still taken and handed over, a second
    Ctrl-C ignored (the repeats end in bounded time) and what handing over raises swallowed,
    until every producer has finished; then the first error goes on."""
    running, error = producers, stopping
    if error is None:
        try:
            while running:
                message = messages.get()
                if message is FINISHED:
                    running -= 1
                    continue
                handle(message)
        except BaseException as exc:
            error = exc
        if error is None:
            return
    stop()
    while running:
        try:
            message = messages.get()
        except KeyboardInterrupt:
            continue  # a second Ctrl-C: the repeats are ending already, in bounded time
        if message is FINISHED:
            running -= 1
            continue
        try:
            handle(message)
        except BaseException:  # noqa: BLE001 - the first error is the one raised,
            pass  # and every running repeat must still end before this returns
    raise error
