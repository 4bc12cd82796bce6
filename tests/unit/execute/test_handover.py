"""alk.execute.handover: both engines' hand-over of finished repeats, with plain queues."""

from __future__ import annotations

import queue

import pytest

from alk.execute.handover import FINISHED, hand_over


def messages_of(*items: object) -> queue.SimpleQueue:
    messages: queue.SimpleQueue = queue.SimpleQueue()
    for item in items:
        messages.put(item)
    return messages


def test_every_message_is_handed_over_until_each_producer_has_finished() -> None:
    handled: list[object] = []
    stops: list[bool] = []
    hand_over(messages_of("a", FINISHED, "b", FINISHED, "never read"), 2, handled.append,
              lambda: stops.append(True))
    assert handled == ["a", "b"] and stops == []


def test_a_failed_hand_over_stops_the_run_hands_over_the_rest_and_raises_the_first_error():
    handled: list[object] = []
    stops: list[bool] = []

    def handle(message: object) -> None:
        handled.append(message)
        if message in ("bad", "worse"):
            raise ValueError(message)
        if message == "ctrl-c":  # a callback interrupted while the run stops
            raise KeyboardInterrupt
        if message == "exit":  # a repeat's thread ended by SystemExit, handed over as its error
            raise SystemExit(1)

    with pytest.raises(ValueError, match="^bad$"):
        hand_over(messages_of("a", "bad", "b", "worse", "ctrl-c", "exit", FINISHED, "c",
                              FINISHED), 2, handle, lambda: stops.append(True))
    # Stopped once; what finished meanwhile was still handed over; later errors swallowed.
    assert stops == [True]
    assert handled == ["a", "bad", "b", "worse", "ctrl-c", "exit", "c"]


def test_ctrl_c_while_waiting_stops_and_still_waits_for_every_producer() -> None:
    class Interrupting(queue.SimpleQueue):
        def __init__(self, script: list[object]) -> None:
            super().__init__()
            self.script = script

        def get(self, *args, **kwargs):  # type: ignore[override]
            item = self.script.pop(0)
            if item is KeyboardInterrupt:
                raise KeyboardInterrupt
            return item

    handled: list[object] = []
    stops: list[bool] = []
    messages = Interrupting(["a", KeyboardInterrupt, "b", KeyboardInterrupt, FINISHED])
    with pytest.raises(KeyboardInterrupt):
        hand_over(messages, 1, handled.append, lambda: stops.append(True))
    # The second Ctrl-C is ignored: the producer ends in bounded time and is waited for.
    assert handled == ["a", "b"] and stops == [True] and messages.script == []


def test_a_run_stopping_already_only_drains() -> None:
    handled: list[object] = []
    stops: list[bool] = []
    with pytest.raises(KeyboardInterrupt):
        hand_over(messages_of("a", FINISHED), 1, handled.append, lambda: stops.append(True),
                  stopping=KeyboardInterrupt())
    assert handled == ["a"] and stops == [True]
