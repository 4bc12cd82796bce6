"""Whether alk ended a worker on time, judged by alk's own clock: the `t` of the events it wrote
to the repeat's transcript (seconds since the transcript opened, from a monotonic clock).

A stopwatch around a whole `alk` process also counts the interpreter's start-up, the probe's
and the reports, which a machine under load stretches by seconds; the transcript holds what
alk promises: the deadline kept, the escalation's steps taken, the worker gone. Where a test
asks only that alk did not wait for something (a grandchild holding a pipe, a worker that never
ends), it compares against how long that something lasts, not against a figure of speed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from alk.runner import driver
from alk.transcript.reader import read_transcript

# What alk may add on its own clock to a deadline's escalation (SIGINT, SIGTERM, SIGKILL) before
# the worker's exit is recorded: reaping it and reading the last of its pipes (0.2 s at most).
RECORDING_SLACK_S = 1.5


def times(events: Iterable[dict[str, Any]], type: str) -> list[float]:
    """When alk recorded each of its own events of this type, in order."""
    return [e["t"] for e in events if e["source"] == "harness" and e["type"] == type]


def worker_lifetime(events: list[dict[str, Any]]) -> float:
    """From the last attempt's spawn to its recorded exit, by alk's clock."""
    return times(events, "exit")[-1] - times(events, "spawn")[-1]


def assert_ended_in_time(events: list[dict[str, Any]], timeout_s: float,
                         int_grace_s: float = driver.INT_GRACE_S,
                         term_grace_s: float = driver.TERM_GRACE_S) -> None:
    """The worker was ended within its timeout and the escalation's graces, by alk's clock; a
    worker that timed out was stopped no earlier than its deadline, each signal after its grace."""
    lifetime = worker_lifetime(events)
    allowed = timeout_s + int_grace_s + term_grace_s + RECORDING_SLACK_S
    assert lifetime <= allowed, f"the worker lived {lifetime:.2f} s by alk's clock ({allowed} s)"
    deadline = times(events, "timeout")
    if not deadline:
        return
    # The deadline counts from just before the spawn, which the transcript's clock precedes
    # (the spawn event itself is written once the process runs, so it cannot be the base).
    assert deadline[-1] >= timeout_s * 0.99, "stopped before its deadline"
    kills = [(e["payload"]["signal"], e["t"]) for e in events
             if e["source"] == "harness" and e["type"] == "kill"]
    graces = {"SIGTERM": int_grace_s, "SIGKILL": term_grace_s}
    for (_, before), (signal, at) in zip(kills, kills[1:]):
        assert at - before >= graces[signal] * 0.99, f"{signal} came before its grace"


def repeat_events(out: Path, scenario: str = "attack", repeat: int = 1) -> list[dict[str, Any]]:
    """The events of one repeat of the one run under `out`."""
    [path] = (out / "transcripts").glob(f"*/{scenario}/repeat-{repeat:02d}.jsonl")
    return read_transcript(path)
